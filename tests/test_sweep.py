"""``topo sweep``: a grid of designs on local processes and on a Dask cluster the test starts on
127.0.0.1 (a scheduler and two workers) with equal results, the cache and a resumed sweep, the
failure Monte Carlo, the Pareto front, and bad input."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from topo.cli import main
from topo.outputs.sweep_table import pareto

#: 12 small designs: 3 GPU counts x 2 oversubscriptions x 2 placements.
GRID = ["--gpus", "64", "--gpus", "128", "--gpus", "256", "--oversubscription", "1", "--oversubscription", "3",
        "--placement", "rail", "--placement", "rack"]


def sweep(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["sweep", *args], prog_name="topo")
    return result.exit_code, result.stdout, result.stderr


def rows_of(folder: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((folder / "sweep.csv").read_text())))


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "topo-build.json"}


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "sweep"
    code, _, err = sweep(*GRID, "-o", str(out), "-j", "2")
    assert code == 0, err
    assert "12 designs: 0 from the cache, 12 computed on 2 local processes" in err
    return out


def test_a_grid_is_every_combination_with_its_figures(local):
    rows = rows_of(local)
    assert [(r["gpus"], r["oversubscription"], r["placement"]) for r in rows[:4]] == [
        ("64", "1", "rail"), ("64", "1", "rack"), ("64", "3", "rail"), ("64", "3", "rack")]
    assert len(rows) == 12 and [r["design"] for r in rows] == [str(i) for i in range(1, 13)]
    one = rows[8]  # 256 GPUs, 1:1, rail: the default design of 256 GPUs
    assert (one["gpus"], one["oversubscription"], one["placement"]) == ("256", "1", "rail")
    assert (one["leaves"], one["spines"], one["switches"], one["links"], one["bisection_gbps"]) == (
        "8", "4", "12", "512", "51200")
    assert float(one["busbw_GBps@8G"]) > 300 and one["error"] == ""
    # 3:1 leaves are 48 down, 16 up: 256 GPUs (one unit of 32 of its 48 nodes) keep 16 uplinks for
    # 32 NICs a leaf, half the bisection
    assert (rows[10]["oversubscription"], int(rows[10]["bisection_gbps"]) * 2) == ("3", int(one["bisection_gbps"]))
    data = json.loads((local / "sweep.json").read_text())
    assert data["rows"][8]["spec"]["gpus"] == 256 and data["columns"][:2] == ["design", "key"]
    assert {"pareto-busbw.svg", "pareto-bisection.svg", "README.md"} <= {p.name for p in local.iterdir()}


def test_the_same_sweep_on_a_dask_cluster_gives_the_same_files(local, tmp_path):
    distributed = pytest.importorskip("distributed", reason="Dask's distributed package (pip install 'topo[cluster]')")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None)
    try:
        out = tmp_path / "dask"
        code, _, err = sweep(*GRID, "-o", str(out), "--scheduler", cluster.scheduler_address)
        assert code == 0, err
        assert f"12 computed on Dask cluster at {cluster.scheduler_address}" in err
    finally:
        cluster.close()
    assert files_of(out) == files_of(local)


def test_a_resumed_sweep_recomputes_only_what_is_missing(local, tmp_path):
    cache = Path(str(local) + ".cache")
    assert len(list(cache.glob("*.json"))) == 12
    out = tmp_path / "again"
    code, _, err = sweep(*GRID, "-o", str(out), "--cache", str(cache))
    assert code == 0 and "12 designs: 12 from the cache, 0 computed" in err
    assert files_of(out) == files_of(local)
    # as if interrupted: two designs never finished, one was cut short mid-write
    files = sorted(cache.glob("*.json"))
    files[0].unlink()
    files[1].unlink()
    files[2].write_text('{"format": 2, "key": ')
    code, _, err = sweep(*GRID, "-o", str(out), "--force", "--cache", str(cache))
    assert code == 0 and "12 designs: 9 from the cache, 3 computed" in err
    assert files_of(out) == files_of(local)


def test_the_monte_carlo_is_seeded_by_the_design_and_orders_its_figures(tmp_path):
    args = ["--gpus", "256", "--gpus", "512", "--fail-random", "0.05", "--trials", "4", "--no-cache", "-j", "1",
            "--format", "json"]
    code, out, err = sweep(*args)
    assert code == 0, err
    again = sweep(*args)[1]
    assert out == again
    rows = json.loads(out)["rows"]
    for r in rows:
        assert r["trials"] == 4
        assert r["busbw_worst_GBps"] <= r["busbw_p5_GBps"] <= r["busbw_median_GBps"] <= r["busbw_GBps@8G"]
        assert r["bisection_worst_gbps"] <= r["bisection_p5_gbps"] <= r["bisection_median_gbps"] <= r["bisection_gbps"]
    # 5% of 512 and of 1,024 switch links down: the bisection drops in every draw
    assert all(r["bisection_median_gbps"] < r["bisection_gbps"] for r in rows)


def test_a_sweep_file_with_a_grid_cases_and_prices(tmp_path):
    spec = tmp_path / "sweep.yaml"
    spec.write_text("base: {gpus_per_node: 8}\n"
                    "grid:\n  gpus: [128, 256]\n  qps: [1, 2]\n"
                    "cases:\n  - {gpus: 512, switch: eth-51t-128x400}\n"
                    "sizes: [1M, 8G]\n")
    prices = Path(__file__).resolve().parent.parent / "examples" / "prices"
    price_file = sorted(prices.glob("*.yaml"))[0]
    code, out, err = sweep("--sweep", str(spec), "--prices", str(price_file), "--no-cache", "-j", "1",
                           "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    rows = data["rows"]
    assert [(r["gpus"], r["qps"]) for r in rows] == [(128, 1), (128, 2), (256, 1), (256, 2), (512, None)]
    assert rows[4]["leaf_model"] == "eth-51t-128x400"
    assert all(r["cost"] > 0 and r["cost_per_gpu"] > 0 and r["busbw_GBps@1M"] < r["busbw_GBps@8G"] for r in rows)
    assert data["pareto"]["x"] == "cost_per_gpu"


def test_a_range_in_a_sweep_file(tmp_path):
    spec = tmp_path / "sweep.yaml"
    spec.write_text("grid:\n  gpus: {from: 64, to: 512, times: 2}\n")
    code, out, err = sweep("--sweep", str(spec), "--no-cache", "-j", "1", "--format", "json")
    assert code == 0, err
    assert [r["gpus"] for r in json.loads(out)["rows"]] == [64, 128, 256, 512]
    spec.write_text("grid:\n  gpus: {from: 64, to: 512}\n")
    code, _, err = sweep("--sweep", str(spec), "--no-cache")
    assert code == 1 and "a range is {from: A, to: B, step: S}" in err


def test_a_design_that_cannot_be_built_is_a_row_with_its_error(tmp_path):
    code, out, err = sweep("--gpus", "256", "--gpus", "65536", "--tiers", "2", "--no-cache", "-j", "1",
                           "--format", "json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert rows[0]["error"] is None and "two tiers" in rows[1]["error"]
    assert "1 could not be built" in err
    code, _, err = sweep("--gpus", "65536", "--tiers", "2", "--no-cache")
    assert code == 1 and err.strip().splitlines()[-1].startswith("Error: no design of the sweep could be built")


@pytest.mark.parametrize("args, message", [
    (["--gpus", "256", "--trials", "4"], "--trials 4 draws failures: give --fail-random FRACTION as well"),
    (["--gpus", "256", "--qps", "999"], "--qps 999: must be from 1 to 256"),
    (["--sweep", "{file}"], "unknown key 'grids'"),
])
def test_bad_input_is_one_line_and_no_folder(args, message, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("grids: {gpus: [1]}\n")
    out = tmp_path / "out"
    code, _, err = sweep(*[a.replace("{file}", str(bad)) for a in args], "-o", str(out))
    assert code == 1 and message in err and "Traceback" not in err
    assert not out.exists()


def test_pareto_keeps_the_designs_nothing_beats():
    rows = [{"design": 1, "x": 10.0, "y": 100.0}, {"design": 2, "x": 12.0, "y": 90.0},
            {"design": 3, "x": 15.0, "y": 300.0}, {"design": 4, "x": 20.0, "y": 300.0},
            {"design": 5, "x": 5.0, "y": 50.0, "error": None}, {"design": 6, "x": 1.0, "y": 1.0, "error": "refused"}]
    assert pareto(rows, "x", "y") == [4, 0, 2]


def test_the_design_review_shows_the_sweep_with_the_design_ringed(local, tmp_path):
    spec = tmp_path / "design.yaml"
    spec.write_text("gpus: 256\noversubscription: 3\nplacement: rail\n")
    out = tmp_path / "review"
    result = CliRunner().invoke(main, ["report", str(spec), "--sweep", str(local), "-o", str(out), "-q"],
                                prog_name="topo")
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    section = md[md.index("## Sweep"):]
    assert "12 designs of `topo sweep` (swept: gpus, oversubscription, placement)" in section
    assert "the design reviewed here is design 11, ringed" in section
    assert (out / "report" / "pareto-busbw.svg").read_text().count("this design") == 1
    bad = CliRunner().invoke(main, ["report", str(spec), "--sweep", str(spec), "-o", str(tmp_path / "x")],
                             prog_name="topo")
    assert bad.exit_code == 1 and "not a sweep written by topo sweep" in bad.output and not (tmp_path / "x").exists()


def test_asked_and_built_fields_are_two_columns():
    code, out, err = sweep("--gpus", "1024", "--tiers", "auto", "--tiers", "3", "--no-cache", "-j", "1",
                           "--format", "json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["asked_tiers"], r["tiers"]) for r in rows] == [("auto", 2), (3, 3)]
    assert rows[0]["core_model"] is None and rows[1]["core_model"] == "64x400G"


def test_a_cached_row_takes_this_sweeps_fields(tmp_path):
    cache = tmp_path / "cache"
    assert sweep("--gpus", "64", "--order", "topology", "--cache", str(cache), "-j", "1", "-q")[0] == 0
    spec = tmp_path / "sweep.yaml"
    spec.write_text("grid:\n  gpus: [64]\ncases:\n  - {gpus: 128, order: random}\n")
    cold = json.loads(sweep("--sweep", str(spec), "--no-cache", "-j", "1", "--format", "json")[1])["rows"]
    warm = json.loads(sweep("--sweep", str(spec), "--cache", str(cache), "-j", "1", "--format", "json")[1])["rows"]
    assert cold == warm and cold[0]["order"] is None and cold[1]["order"] == "random"


def test_an_analysis_a_design_refuses_is_its_row_and_the_draws_ignore_its_name():
    rows = json.loads(sweep("--gpus", "64", "--gpus", "128", "--job-gpus", "128", "--no-cache", "-j", "1",
                            "--format", "json")[1])["rows"]
    assert "128" in rows[0]["error"] and rows[1]["error"] is None
    mc = ["--gpus", "256", "--fail-random", "0.05", "--trials", "3", "--no-cache", "-j", "1", "--format", "json"]
    a = json.loads(sweep(*mc)[1])["rows"][0]
    b = json.loads(sweep(*mc, "--name", "other", "--sizes", "1M,8G")[1])["rows"][0]
    assert a["key"] != b["key"]
    assert {k: a[k] for k in a if k.startswith(("busbw_median", "busbw_p5", "busbw_worst", "bisection_"))} == \
        {k: b[k] for k in a if k.startswith(("busbw_median", "busbw_p5", "busbw_worst", "bisection_"))}


@pytest.mark.parametrize("text, message", [
    ("grid:\n  qps: [abc]\n", "sweep: qps='abc'"),
    ("grid:\n  gpus: []\n", "grid gpus: no values"),
    ("base: [1, 2]\n", "base must map spec fields to values"),
    ("grid: {gpus: [64]}\nfail_random: 2\n", "sweep: fail_random='2'"),
])
def test_a_bad_sweep_file_is_one_line(text, message, tmp_path):
    spec = tmp_path / "sweep.yaml"
    spec.write_text(text)
    code, _, err = sweep("--sweep", str(spec), "--no-cache")
    assert code == 1 and message in err and "Traceback" not in err


def test_scheduler_mistakes_and_a_sweep_of_refusals_leave_no_folder(tmp_path):
    code, _, err = sweep("--gpus", "64", "--no-cache", "--scheduler", "foo://nowhere")
    assert code == 1 and err.strip().splitlines()[-1].startswith("Error: --scheduler foo://nowhere:")
    code, _, err = sweep("--gpus", "64", "-j", "2", "--scheduler", "tcp://127.0.0.1:1")
    assert code == 1 and "give one or the other" in err
    out = tmp_path / "none"
    code, _, err = sweep("--gpus", "65536", "--tiers", "2", "--no-cache", "-o", str(out))
    assert code == 1 and not out.exists()


def test_a_rows_spec_rebuilds_its_design(tmp_path):
    prices = sorted((Path(__file__).resolve().parent.parent / "examples" / "prices").glob("*.yaml"))[0]
    out = tmp_path / "s"
    assert sweep("--gpus", "256", "--prices", str(prices), "-o", str(out), "--no-cache", "-j", "1", "-q")[0] == 0
    import yaml

    row = json.loads((out / "sweep.json").read_text())["rows"][0]
    spec = tmp_path / "elsewhere" / "spec.yaml"
    spec.parent.mkdir()
    spec.write_text(yaml.safe_dump(row["spec"]))
    result = CliRunner().invoke(main, ["build", "-f", str(spec), "-o", str(tmp_path / "b"), "-q", "--no-configs"],
                                prog_name="topo")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["switches"]["total"] == row["switches"] and summary["cabling"]["cost"]["total"] == row["cost"]


def test_failure_trials_never_beat_the_intact_design(monkeypatch):
    """Each trial of the Monte Carlo is analysed on the intact analysis' hash draws and bounded by
    it: no trial's busbw (median, 5th percentile) or bisection is above the design's."""
    import topo.analysis.analyze as analyze_module
    from topo import load_spec
    from topo.analysis.analyze import AnalysisOptions
    from topo.pipeline.sweep_run import Task, busbw_column, evaluate

    seen = []
    real = analyze_module.analyze_faulted

    def recording(*args, **kwargs):
        result = real(*args, **kwargs)
        seen.append((kwargs.get("intact"), result))
        return result

    monkeypatch.setattr(analyze_module, "analyze_faulted", recording)
    spec = load_spec({"gpus": 256, "placement": "rack", "oversubscription": 3})
    big = 8 << 30
    task = Task(1, (), spec, AnalysisOptions(order="random", qps=2), (1 << 20, big), fail_random=0.1, trials=5,
                key="k", fault_key="k")
    row = evaluate(task)
    assert len(seen) == 5 and all(intact is not None for intact, _ in seen)
    intact = seen[0][0]
    top = next(r for r in intact.allreduce.rows if r["size_bytes"] == big)
    for _, trial in seen:
        (one,) = trial.allreduce.rows
        assert one["busbw_GBps"] <= top["busbw_GBps"] and one["busbw_p5_GBps"] <= top["busbw_p5_GBps"]
        assert trial.bisection.maxflow_gbps <= intact.bisection.maxflow_gbps
    assert row["busbw_worst_GBps"] <= row["busbw_median_GBps"] <= row[busbw_column(big)]
