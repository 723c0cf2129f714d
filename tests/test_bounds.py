"""Work estimated and bounded before it starts (docs/reliability.md, "Work: estimated before it
starts"): costs that grow no faster than their input, requests refused up front when they would not
fit the machine, sweep inputs read with the same safeguards as a spec, cached rows checked before
they are trusted, and a Dask sweep that ends when its cluster cannot run it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from topo import build_fabric, load_spec
from topo.cli import main
from topo.pipeline.check import check_folder
from topo.outputs.manifest import MANIFEST


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="topo", catch_exceptions=False)


def one_error(result, *fragments: str) -> list[str]:
    """Exit status 1, no traceback, and every fragment in the stderr's Error lines."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert errors, result.stderr
    for fragment in fragments:
        assert any(fragment in line for line in errors), (fragment, result.stderr)
    return errors


def best_of(times: int, work) -> float:
    """The shortest of ``times`` runs of ``work()`` in seconds (the least disturbed by other load)."""
    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


# --- topo check: linear in the stamp's entries -----------------------------------------------------


def test_check_is_linear_in_the_stamps_entries(tmp_path):
    fabric = build_fabric(load_spec({"gpus": 64}))

    def folder(entries: int) -> Path:
        path = tmp_path / f"f{entries}"
        path.mkdir()
        files = {f"gone/deep/file{i:06d}.txt": "0" * 64 for i in range(entries)}
        (path / MANIFEST).write_text(json.dumps({"topo_build": 1, "topo_version": "0", "files": files}))
        return path

    small, large = folder(3_000), folder(30_000)
    reports = []
    t_small = best_of(3, lambda: reports.append(check_folder(small, fabric, lambda: [])))
    t_large = best_of(2, lambda: reports.append(check_folder(large, fabric, lambda: [])))
    assert "missing: files the stamp lists that are not there (30,000)" in reports[-1].problems[0]
    # ten times the entries: ten times the work (a list where a set belongs made it a hundred)
    assert t_large < 30 * t_small + 0.5, (t_small, t_large)


# --- --fail: a near-constant cost an entry --------------------------------------------------------


@pytest.fixture(scope="module")
def fabric_8k():
    return build_fabric(load_spec({"gpus": 8192}))


def _entries(fabric, count: int) -> list[str]:
    """``count`` --fail entries: a NIC link of a server, a leaf's uplink port, a whole spine in turn."""
    nodes, leaves = fabric.plan.nodes, [n for n in fabric.names if "-leaf-" in n]
    spines = [n for n in fabric.names if "-spine-" in n]
    out = []
    for i in range(count):
        kind = i % 3
        out.append(f"{fabric.names[i % nodes]}:{i // nodes % 8}" if kind == 0 else
                   f"{leaves[i % len(leaves)]}:{33 + i // len(leaves) % 32}" if kind == 1 else spines[i % len(spines)])
    return out


def test_many_fail_entries_cost_little_more_than_a_few(fabric_8k):
    from topo.analysis.faults import apply_faults

    few, many = _entries(fabric_8k, 30), _entries(fabric_8k, 3_000)
    t_few = best_of(3, lambda: apply_faults(fabric_8k, few))
    t_many = best_of(2, lambda: apply_faults(fabric_8k, many))
    # a hundred times the entries: the links are masked once for all of them (a mask over every
    # link per entry made it about a hundred times the cost)
    assert t_many < 10 * t_few + 0.05, (t_few, t_many)
    # the same links down as failing the entries one at a time
    one_by_one = np.ones(len(fabric_8k.links), dtype=bool)
    for entry in many[:300]:
        one_by_one &= apply_faults(fabric_8k, [entry]).live
    assert (apply_faults(fabric_8k, many[:300]).live == one_by_one).all()


def test_many_unknown_fail_names_are_quick_and_listed_in_order(fabric_8k):
    from topo.analysis.faults import apply_faults
    from topo.errors import AnalysisError

    def refuse(entries):
        with pytest.raises(AnalysisError) as exc:
            apply_faults(fabric_8k, entries)
        return exc.value.problems

    few = [f"cluster-lief-su{i:02d}-r0" for i in range(10)]
    many = few + [f"cluster-lief-su{i:04d}-r0" for i in range(2_000)] + ["cluster-leaf-su00-r0:99"]
    t_few = best_of(3, lambda: refuse(few))
    start = time.perf_counter()
    problems = refuse(many)
    t_many = time.perf_counter() - start
    # close matches for the first few names only (faults.UNKNOWN_HINTS): each compares the name with every name
    assert t_many < 5 * t_few + 0.2, (t_few, t_many)
    assert len(problems) == len(many)
    assert "close matches: cluster-leaf-su00-r0" in problems[0] and "close matches" not in problems[-2]
    assert problems[-1] == "--fail cluster-leaf-su00-r0:99: cluster-leaf-su00-r0 has no link on port 99 " \
                           "(ports in use: 1..64)"
    assert max(len(p) for p in refuse(["x" * 10_000, "cluster-leaf-su00-r0:" + "9" * 10_000])) < 400


# --- sweep files: read with a spec's safeguards, aliases bounded --------------------------------------


def _bomb(levels: int, indent: str = "") -> str:
    """YAML anchors ``a`` to ``chr(97 + levels - 1)``: ten aliases of the one before each, so the last
    stands for 10**levels values."""
    text = f"{indent}a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, levels):
        text += f"{indent}{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]\n"
    return text


@pytest.mark.parametrize("where", ["-f", "--sweep base", "--sweep grid", "--sweep cases"])
def test_a_yaml_alias_bomb_in_a_sweep_is_one_quick_error(tmp_path, where):
    last = chr(97 + 6)  # 10**7 values
    if where == "-f":
        path = tmp_path / "spec.yaml"
        path.write_text(f"gpus: 64\nlaughs:\n{_bomb(7, '  ')}name: *{last}\n")
        args = ["-f", path]
    else:
        path = tmp_path / "sweep.yaml"
        tail = {"--sweep base": f"  name: *{last}\n",
                "--sweep grid": f"grid:\n  name: [*{last}, *{last}]\n",
                "--sweep cases": f"cases:\n  - name: *{last}\n  - name: *{last}\n"}[where]
        path.write_text(f"base:\n  gpus: 64\n  laughs:\n{_bomb(7, '    ')}" + tail)
        args = ["--sweep", path]
    start = time.perf_counter()
    result = run("sweep", *args, "-o", tmp_path / "out", "-q")
    assert time.perf_counter() - start < 20
    errors = one_error(result, f"spec file {path}: more than 1,048,576 values with each alias")
    assert len(errors) == 1 and not (tmp_path / "out").exists()


def test_a_grid_too_large_is_refused_before_it_is_expanded(tmp_path):
    path = tmp_path / "sweep.yaml"
    axes = ["link_efficiency", "switch_latency_ns", "step_latency_us", "hash_seed", "seed"]
    path.write_text("grid:\n" + "".join(f"  {a}: {{from: 1, to: 1000, step: 1}}\n" for a in axes))
    start = time.perf_counter()
    one_error(run("sweep", "--sweep", path, "-q"), "sweep: 1,000,000,000,000,000 designs; at most 100,000")
    assert time.perf_counter() - start < 10


# --- the sweep cache: rows checked before they are trusted -------------------------------------------


def _sweep_rows(*args):
    result = run("sweep", *args, "-j", "1", "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def _corrupt(path: Path, how: str) -> None:
    from topo.pipeline.sweep_run import row_digest

    data = json.loads(path.read_text())
    if how == "truncated":
        path.write_text(path.read_text()[:200])
    elif how == "hand-edited":
        data["row"]["busbw_GBps@8G"] = 999.0  # a plausible figure: only the digest tells
        path.write_text(json.dumps(data))
    elif how == "wrong-shaped":
        data["row"]["tiers"] = "two"
        data["row"]["gpus"] = 4096
        data["digest"] = row_digest(data["row"])  # shaped wrong, digest right
        path.write_text(json.dumps(data))
    elif how == "not-a-mapping":
        path.write_text("[1, 2, 3]\n")
    elif how == "nan":
        path.write_text(path.read_text().replace('"bisection_gbps": ', '"bisection_gbps": NaN, "x": ', 1))
    elif how == "a-folder":
        path.unlink()
        path.mkdir()


@pytest.mark.parametrize("how", ["truncated", "hand-edited", "wrong-shaped", "not-a-mapping", "nan", "a-folder"])
def test_a_bad_cache_entry_is_computed_again_and_said(tmp_path, how):
    cache = tmp_path / "cache"
    args = ("--gpus", "64", "--gpus", "128", "--fail-random", "0.05", "--trials", "2")
    cold, _ = _sweep_rows(*args, "--no-cache")
    first, _ = _sweep_rows(*args, "--cache", cache)
    assert first["rows"] == cold["rows"] and first["computed"] == 2
    entry = cache / f"{next(r['key'] for r in first['rows'] if r['gpus'] == 64)}"
    entry = next(p for p in cache.iterdir() if p.name.startswith(entry.name))
    _corrupt(entry, how)
    warm, err = _sweep_rows(*args, "--cache", cache, "-q")
    assert warm["rows"] == cold["rows"] and (warm["cached"], warm["computed"]) == (1, 1)
    said = [line for line in err.splitlines() if "cached row not trusted, computed again" in line]
    assert len(said) == 1 and entry.name in said[0] and "Traceback" not in err, err
    if how != "a-folder":  # recomputed and kept again: the next run takes both from the cache
        again, err = _sweep_rows(*args, "--cache", cache)
        assert (again["cached"], again["computed"]) == (2, 0) and "not trusted" not in err


# --- a Dask sweep whose workers are gone ends, with one line ---------------------------------------


def test_a_dask_sweep_whose_workers_stop_ends_with_one_error(tmp_path):
    import subprocess
    import sys
    import threading

    distributed = pytest.importorskip("distributed", reason="Dask's distributed package (pip install 'topo[cluster]')")
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None)
    cache = tmp_path / "cache"
    stopped = threading.Event()

    def stop_workers_after_the_first_row():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(cache.glob("*.json")):
            time.sleep(0.1)
        cluster.scale(0)  # the sweep's workers go away with designs still to run
        stopped.set()

    topo = str(Path(sys.executable).parent / "topo")
    grid = [a for g in (256, 512, 768, 1024, 1280, 1536, 1792, 2048) for a in ("--gpus", str(g))]
    stopper = threading.Thread(target=stop_workers_after_the_first_row, daemon=True)
    try:
        stopper.start()
        start = time.monotonic()
        result = subprocess.run([topo, "sweep", *grid, "--cache", str(cache), "--scheduler",
                                 cluster.scheduler_address, "--scheduler-timeout", "3", "-q"],
                                capture_output=True, text=True, timeout=180)
        took = time.monotonic() - start
    finally:
        cluster.close()
    assert stopped.is_set()
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "the cluster has had no workers for 3 s (--scheduler-timeout)" in errors[0], errors
    assert "designs not run, the finished ones are cached" in errors[0]
    assert 1 <= len(list(cache.glob("*.json"))) < 8 and took < 150


def test_a_dask_cluster_without_workers_is_refused_at_once(tmp_path):
    distributed = pytest.importorskip("distributed", reason="Dask's distributed package (pip install 'topo[cluster]')")
    cluster = distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=None)
    try:
        start = time.monotonic()
        result = run("sweep", "--gpus", "64", "--no-cache", "--scheduler", cluster.scheduler_address)
        assert time.monotonic() - start < 30
    finally:
        cluster.close()
    one_error(result, f"--scheduler {cluster.scheduler_address}: the cluster has no workers")


# --- an analysis's work, estimated before it starts ---------------------------------------------------


def test_an_analysis_that_would_not_fit_is_refused_at_once_with_its_figures():
    start = time.perf_counter()
    result = run("analyze", "--gpus", 65536, "--hash-samples", 256, "--qps", 256, "-q")
    assert time.perf_counter() - start < 30  # it reached 5.8 GB and a traceback
    errors = one_error(result, "8,192 nodes x 16 channels x 256 queue pairs = 33,554,432 queue pairs")
    assert len(errors) == 1 and ("GiB available: lower --qps" in errors[0] or "would take hours" in errors[0])


def test_the_refusal_names_the_estimate_the_memory_available_and_the_flags():
    from topo.analysis.analyze import AnalysisOptions, check_analysis_work
    from topo.errors import AnalysisError
    from topo.fabric import memory_estimate
    from topo.hardware.catalog import resolve_server
    from topo.sizing import plan_fabric

    spec = load_spec({"gpus": 65536})
    plan, node = plan_fabric(spec), resolve_server(spec, None).node_model()
    options = AnalysisOptions(qps=64, hash_samples=16)
    work = check_analysis_work(spec, plan, options, node, available=64 << 30)
    assert (work.nodes, work.channels, work.queue_pairs) == (8192, 16, 8192 * 16 * 64)
    assert work.bytes == memory_estimate(plan) + (256 << 20) + 1024 * work.queue_pairs
    with pytest.raises(AnalysisError) as exc:
        check_analysis_work(spec, plan, options, node, available=4 << 30)
    assert exc.value.problems == [
        f"the analysis routes 8,192 nodes x 16 channels x 64 queue pairs = 8,388,608 queue pairs, which needs "
        f"about {work.gib:.1f} GiB of memory; this machine has 4.0 GiB available: lower --qps, --channels, "
        f"--job-gpus or --gpus"]
    with pytest.raises(AnalysisError, match=r"8,388,608 queue pairs 1024 times .* would take hours"):
        check_analysis_work(spec, plan, AnalysisOptions(qps=64, hash_samples=1024), node, available=1 << 50)


def test_the_estimate_holds_a_real_run():
    """Peak RSS of a run in which every queue pair is hashed (random order), against its estimate."""
    import subprocess
    import sys

    from topo.analysis.analyze import AnalysisOptions, analysis_work
    from topo.hardware.catalog import resolve_server
    from topo.sizing import plan_fabric

    args = {"gpus": 1024}
    options = AnalysisOptions(qps=64, hash_samples=64, order="random")
    spec = load_spec(args)
    work = analysis_work(spec, plan_fabric(spec), options, resolve_server(spec, None).node_model())
    code = ("import resource; from topo import analyze, build_fabric, load_spec; "
            "from topo.analysis.analyze import AnalysisOptions; "
            f"analyze(build_fabric(load_spec({args!r})), AnalysisOptions(qps=64, hash_samples=64, order='random')); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)")
    peak = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert peak < work.bytes < 4 * peak, (peak, work.bytes)


# --- a sweep's work: its designs side by side, and its trials -----------------------------------------


def test_a_sweep_that_would_not_fit_or_take_hours_is_refused_before_any_design_runs(tmp_path):
    start = time.perf_counter()
    errors = one_error(run("sweep", "--gpus", 65536, "--gpus", 32768, "--qps", 128, "--qps", 256, "-j", 4,
                           "-o", tmp_path / "out", "-q"), "sweep: design ")
    assert len(errors) == 1 and "4 designs at once (-j) about" in errors[0] and "lower -j" in errors[0]
    assert "GiB of memory" in errors[0] and not (tmp_path / "out").exists()
    errors = one_error(run("sweep", "--gpus", 16384, "--gpus", 8192, "--qps", 16, "--hash-samples", 256,
                           "--fail-random", 0.01, "--trials", 1000, "--no-cache", "-j", 2, "-q"),
                       "sweep: 2 designs to compute make ", "(each design's times 1 + 1000 trials)",
                       "which would take hours", "lower --trials")
    assert len(errors) == 1 and time.perf_counter() - start < 30


def test_the_sweep_estimate_counts_the_designs_at_once_and_skips_cached_ones(tmp_path):
    from topo.pipeline.sweep_run import Cache, SweepError, check_sweep_work

    cache = tmp_path / "cache"
    rows = json.loads(run("sweep", "--gpus", 64, "--gpus", 128, "--cache", cache, "-j", 1, "--format", "json").stdout)
    assert rows["computed"] == 2
    import topo.pipeline.sweep_run as sweep_module

    # the sweep as the command makes it, caught on its way to the estimate

    seen = {}
    real = sweep_module.check_sweep_work

    def spy(sweep, cache_, workers, available=None):
        seen["sweep"], seen["cache"] = sweep, cache_
        return real(sweep, cache_, workers, available)

    sweep_module.check_sweep_work = spy
    try:
        assert run("sweep", "--gpus", 64, "--gpus", 128, "--cache", cache, "-j", 2, "-q").exit_code == 0
    finally:
        sweep_module.check_sweep_work = real
    check_sweep_work(seen["sweep"], seen["cache"], 2, available=1)  # both cached: nothing to estimate
    with pytest.raises(SweepError, match=r"2 designs at once \(-j\) about .* this machine has 0.0 GiB"):
        check_sweep_work(seen["sweep"], Cache(None), 2, available=1)


def test_a_training_request_that_would_not_fit_or_take_hours_is_refused_at_once():
    start = time.perf_counter()
    errors = one_error(run("train", "--gpus", 65536, "--model", "llama3-70b", "--qps", 256, "--hash-samples", 256,
                           "-q"), "pricing a step routes 8,192 nodes x 16 channels x 256 queue pairs")
    assert len(errors) == 1 and "--job-gpus" not in errors[0]
    errors = one_error(run("train", "--gpus", 16384, "--model", "llama3-70b", "--qps", 32, "--hash-samples", 256,
                           "--channels", 64, "--scale", "1024,2048,4096,8192,16384", "--what-if", "-q"),
                       "pricing 10 steps (--scale, --what-if) routes up to 4,194,304 queue pairs 256 times each")
    assert len(errors) == 1 and "would take hours" in errors[0] and time.perf_counter() - start < 30


def test_report_reads_its_sweep_file_bounded(tmp_path):
    import os
    import subprocess
    import sys

    fifo = tmp_path / "sweep.json"
    os.mkfifo(fifo)
    topo = str(Path(sys.executable).parent / "topo")
    spec = Path(__file__).resolve().parent.parent / "examples" / "h100-1024.yaml"
    result = subprocess.run([topo, "report", str(spec), "--sweep", str(fifo), "-o", str(tmp_path / "r"), "-q"],
                            capture_output=True, text=True, timeout=60)  # a FIFO blocked the read for good
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert result.returncode == 1 and errors == [f"Error: --sweep {fifo} is not a regular file (a FIFO)"], result.stderr
    assert not (tmp_path / "r").exists()


def test_draws_not_kept_are_routed_again_to_the_same_result(monkeypatch):
    import topo.analysis.allreduce as analyze_module
    from topo import analyze
    from topo.analysis.analyze import AnalysisOptions

    fabric = build_fabric(load_spec({"gpus": 512}))
    options = AnalysisOptions(qps=4, hash_samples=9, order="random")
    kept = json.dumps(analyze(fabric, options).to_dict(), sort_keys=True)
    monkeypatch.setattr(analyze_module, "KEPT_DRAWS_BYTES", 0)  # no draw kept: the median's routed again
    assert json.dumps(analyze(fabric, options).to_dict(), sort_keys=True) == kept
