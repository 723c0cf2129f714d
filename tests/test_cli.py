"""The command line: outputs, exit codes, atomic writes, and error goldens."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from topo import __version__
from topo.cli import main

from .conftest import EXAMPLES, GOLDEN, REGEN


def run(*args, cwd=None):
    runner = CliRunner()
    return runner.invoke(main, [str(a) for a in args], prog_name="topo", catch_exceptions=False)


def test_version():
    result = run("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"topo {__version__}"


@pytest.mark.parametrize("command", [[], ["build"], ["analyze"], ["switches"]])
def test_every_command_help_shows_an_example(command):
    result = run(*command, "--help")
    assert result.exit_code == 0
    assert re.search(r"Examples?:\n\s+(topo )", result.stdout), result.stdout


def test_build_defaults_writes_the_design_folder(tmp_path):
    out = tmp_path / "d"
    result = run("build", "--gpus", 1024, "-o", out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md", "analysis.json", "bom.csv", "cabling.csv", "containerlab", "design.json", "graph",
        "hosts", "nccl", "placement", "report", "report.html", "report.md", "spec.yaml", "summary.json",
        "switches", "topo-build.json"]
    assert len(list((out / "switches").iterdir())) == 48
    assert "leaf" in result.stdout and "1,024" in result.stdout
    assert "topo: building 1,024 GPUs" in result.stderr
    design = json.loads((out / "design.json").read_text())
    assert len(design["links"]) == 2048
    assert len(design["devices"]) == 128 + 32 + 16


def test_default_output_folder_is_named_after_the_fabric(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run("build", "--gpus", 256, "-q").exit_code == 0
    assert (tmp_path / "cluster-256gpus" / "design.json").is_file()


def test_json_summary_is_a_stable_interface(tmp_path):
    result = run("build", "--gpus", 1024, "-o", tmp_path / "d", "--format", "json", "-q")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["gpus"] == 1024 and data["nodes"] == 128 and data["tiers"] == 2
    assert data["switches"] == {"leaf": 32, "spine": 16, "core": 0, "total": 48}
    assert data["links"] == {"node-leaf": 1024, "leaf-spine": 1024, "spine-core": 0, "total": 2048}
    assert data["per_tier"]["leaf"]["max_ports_used"] == 64
    # -q leaves only the warnings on stderr, and they are in the JSON too
    assert result.stderr.splitlines() == [f"warning[{w['code']}]: {w['message']}" for w in data["warnings"]]
    assert [w["code"] for w in data["warnings"]] == ["no-switch-model", "no-sonic-platform"]


def test_yaml_summary(tmp_path):
    import yaml

    result = run("build", "--gpus", 128, "--gpus-per-node", 1, "--radix", 8, "--tiers", 3,
                 "-o", tmp_path / "d", "--format", "yaml", "-q")
    data = yaml.safe_load(result.stdout)
    assert data["switches"] == {"leaf": 32, "spine": 32, "core": 16, "total": 80}


def test_flags_override_the_spec_file(tmp_path):
    result = run("build", "-f", EXAMPLES / "h100-1024.yaml", "--gpus", 256, "-o", tmp_path / "d",
                 "--format", "json", "-q")
    data = json.loads(result.stdout)
    assert data["gpus"] == 256 and data["name"] == "h100" and data["switch"]["model"] == "ndr-64x400"


def test_spec_yaml_rebuilds_the_same_design(tmp_path):
    run("build", "--gpus", 768, "--oversubscription", "3:1", "-o", tmp_path / "a", "-q")
    run("build", "-f", tmp_path / "a" / "spec.yaml", "-o", tmp_path / "b", "-q")
    first = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    second = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert first == second and len(first) > 40
    for rel in first:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_existing_folder_is_not_overwritten_without_force(tmp_path):
    out = tmp_path / "d"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    result = run("build", "--gpus", 256, "-o", out)
    assert result.exit_code == 1
    assert "exists and is not empty; use --force" in result.stderr
    assert (out / "mine.txt").read_text() == "keep me"
    result = run("build", "--gpus", 256, "-o", out, "--force", "-q")  # not a build folder of topo's
    assert result.exit_code == 1 and "--force replaces only" in result.stderr
    assert (out / "mine.txt").read_text() == "keep me"
    (out / "mine.txt").unlink()
    assert run("build", "--gpus", 256, "-o", out, "-q").exit_code == 0  # an empty folder is used
    result = run("build", "--gpus", 512, "-o", out, "--force", "-q")  # topo's own folder is replaced
    assert result.exit_code == 0
    assert "gpus: 512" in (out / "spec.yaml").read_text()


def test_empty_existing_folder_is_used(tmp_path):
    out = tmp_path / "d"
    out.mkdir()
    assert run("build", "--gpus", 256, "-o", out, "-q").exit_code == 0


def test_a_failure_while_writing_leaves_no_folder(tmp_path, monkeypatch):
    import topo.pipeline.build

    def broken(*args, **kwargs):
        yield "ok.txt", "fine"
        yield "bad.txt", object()  # not text: writing it fails

    monkeypatch.setattr(topo.pipeline.build, "build_files", broken)
    out = tmp_path / "d"
    with pytest.raises(TypeError):
        run("build", "--gpus", 256, "-o", out, "-q")
    assert list(tmp_path.iterdir()) == []


def test_a_failure_with_force_keeps_the_old_folder(tmp_path, monkeypatch):
    import topo.pipeline.build

    out = tmp_path / "d"
    run("build", "--gpus", 256, "-o", out, "-q")
    before = (out / "design.json").read_bytes()
    monkeypatch.setattr(topo.pipeline.build, "build_files", lambda *a, **k: iter([("bad.txt", object())]))
    with pytest.raises(TypeError):
        run("build", "--gpus", 1024, "-o", out, "--force", "-q")
    assert (out / "design.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_switches_lists_the_catalogue():
    result = run("switches", "--format", "json")
    data = json.loads(result.stdout)
    assert data["eth-51t-128x400"]["radix"] == 128
    assert all(model["power_w"] > 0 for model in data.values())


# --- error goldens: one clear message, the right exit status, no traceback, nothing written -----

ERROR_CASES = {
    "gpus-not-multiple-of-node": (["--gpus", "1020"], None),
    "gpus-zero": (["--gpus", "0"], None),
    "gpus-missing": ([], None),
    "odd-radix": (["--gpus", "1024", "--radix", "63"], None),
    "too-many-gpus-for-three-tiers": (["--gpus", "65544"], None),
    "two-tiers-too-small": (["--gpus", "4096", "--tiers", "2"], None),
    "oversubscription-not-whole-ports": (["--gpus", "1024", "--oversubscription", "2"], None),
    "undersubscription-not-whole-ports": (["--gpus", "1024", "--oversubscription", "1:2"], None),
    "switch-conflicts-with-radix": (["--gpus", "1024", "--switch", "ndr-64x400", "--radix", "32"], None),
    "several-problems-at-once": (["--gpus", "1001", "--radix", "7", "--nic-gbps", "0"], None),
    "uneven-spines": (["--gpus", "768", "--spines", "12"], None),
    "malformed-yaml": ([], "gpus: [1024\nradix: 64\n"),
    "unknown-key": ([], "gpu: 1024\nradix: 64\n"),
    "wrong-type": ([], "gpus: lots\nplacement: rails\n"),
    "not-a-mapping": ([], "- gpus\n- 1024\n"),
    "bad-flag-value": (["--gpus", "abc"], None),
    "bad-flag-choice": (["--gpus", "1024", "--tiers", "4"], None),
    "unknown-switch-model": ([], "gpus: 1024\nswitch: ndr-64x40\n"),
    "loopback-pool-too-small": (["--gpus", "1024", "--loopback-pool", "10.0.0.0/28"], None),
    "address-pools-overlap": (["--gpus", "1024", "--p2p-pool", "10.0.0.0/8"], None),
    "server-profile-does-not-match": (["--gpus", "1024", "--server", "hgx-h100-4nic", "--nics-per-node", "8"], None),
    "unknown-server-profile": (["--gpus", "1024", "--server", "hgx-h100-8nc"], None),
    "duplicate-host-names": ([], "gpus: 16\nhostnames: gpu\n"),
    "host-name-pattern-invalid": (["--gpus", "16", "--hostnames", "gpu_{node}"], None),
    "host-name-pattern-too-wide": (["--gpus", "16", "--hostnames", "gpu{number:0999999999d}"], None),
    "host-names-differ-only-in-case": ([], "gpus: 16\nhostnames: hosts.csv\n"),
    "yaml-duplicate-key": ([], "gpus: 1024\nradix: 64\ngpus: 2048\n"),
    "yaml-leading-zero": ([], "gpus: 0200\n"),
    "yaml-hex-integer": ([], "gpus: 0x400\n"),
    "ratio-huge-exponent": (["--gpus", "1024", "--oversubscription", "1e99999999"], None),
    "undersubscription-suggests-the-flip": (["--gpus", "1024", "--oversubscription", "16:48"], None),
    "gpus-with-unit": (["--gpus", "1.1k"], None),
    "nic-speed-with-unit": (["--gpus", "1024", "--nic-gbps", "300G"], None),
    "too-many-nics-per-node": (["--gpus", "1024", "--nics-per-node", "1000"], None),
    "spec-file-is-a-device": (["-f", "/dev/null"], None),
}


#: Files a case needs beside its spec.
ERROR_CASE_FILES = {
    "host-names-differ-only-in-case": {"hosts.csv": "node,hostname\n0,gpu-a\n1,GPU-A\n"},
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_error_golden(case, tmp_path, monkeypatch):
    args, spec_text = ERROR_CASES[case]
    monkeypatch.chdir(tmp_path)
    extra = ERROR_CASE_FILES.get(case, {})
    for name, text in extra.items():
        Path(name).write_text(text)
    if spec_text is not None:
        Path("spec.yaml").write_text(spec_text)
        args = ["-f", "spec.yaml", *args]
    result = run("build", *args, "-o", "out")
    record = f"$ topo build {' '.join(args)} -o out\nexit {result.exit_code}\n{result.stderr}"
    golden = GOLDEN / "errors" / f"{case}.txt"
    if REGEN:
        golden.write_text(record)
    assert record == golden.read_text(), f"regenerate with TOPO_REGEN_GOLDEN=1 if intended:\n{record}"
    assert result.exit_code in (1, 2)
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted((["spec.yaml"] if spec_text else []) + list(extra))
    assert result.stdout == ""


# --- topo analyze ---------------------------------------------------------------------------------


def test_analyze_json_has_the_documented_keys():
    result = run("analyze", "--gpus", 1024, "--format", "json", "-q")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["hops"]["diameter_links"] == 4
    assert data["bisection"]["gbps"] == 204800 and data["bisection"]["maxflow_gbps"] == 204800
    sizes = [row["size_bytes"] for row in data["allreduce"]]
    assert sizes[0] == 1 << 20 and sizes[-1] == 8 << 30
    assert all(sizes[i + 1] == 4 * sizes[i] for i in range(len(sizes) - 2))
    assert set(data["allreduce"][0]) == {"size_bytes", "time_s", "algbw_GBps", "busbw_GBps", "busbw_p5_GBps",
                                         "algorithm", "protocol", "latency_us", "tuner_time_s"}
    detail = data["allreduce_detail"]
    assert {"bottlenecks", "link_utilisation", "connections_leaving_leaf"} <= set(detail)


def test_analyze_a_design_folder_equals_analyzing_its_spec(tmp_path):
    run("build", "--gpus", 768, "--oversubscription", 3, "-o", tmp_path / "d", "-q", "--no-analysis")
    assert not (tmp_path / "d" / "analysis.json").exists()
    a = run("analyze", tmp_path / "d", "--order", "random", "--format", "json", "-q")
    b = run("analyze", "--gpus", 768, "--oversubscription", 3, "--order", "random", "--format", "json", "-q")
    assert a.exit_code == 0 and a.stdout == b.stdout
    assert json.loads(a.stdout)["bisection"]["gbps"] == 51200


def test_build_writes_the_same_analysis_as_analyze(tmp_path):
    run("build", "--gpus", 256, "-o", tmp_path / "d", "-q")
    written = json.loads((tmp_path / "d" / "analysis.json").read_text())
    printed = json.loads(run("analyze", "--gpus", 256, "--format", "json", "-q").stdout)
    assert written == printed


def test_analyze_table_and_faults_report_the_change():
    result = run("analyze", "--gpus", 4096, "--fail", "cluster-spine-p00-03", "--sizes", "1G", "-q")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "faults: 64 links down (cluster-spine-p00-03)" in out
    assert "change from the intact fabric:" in out and "bisection_maxflow_gbps" in out
    assert "1 GiB" in out


def test_a_cut_fabric_is_said_plainly():
    spines = [f"cluster-spine-{j:02d}" for j in range(8)]
    args = [x for s in spines for x in ("--fail", s)]
    result = run("analyze", "--gpus", 512, *args, "--format", "json", "-q")
    data = json.loads(result.stdout)
    assert any(note.startswith("the fabric is cut") for note in data["notes"])
    assert any(note.startswith("the all-reduce cannot complete") for note in data["notes"])
    assert data["bisection"]["maxflow_gbps"] == 0
    assert data["allreduce"][-1]["time_s"] is None and data["allreduce"][-1]["busbw_GBps"] == 0


ANALYZE_ERRORS = {
    "unknown-fail-name": ["--gpus", "1024", "--fail", "cluster-spine-3"],
    "fail-port-not-used": ["--gpus", "1024", "--fail", "cluster-leaf-su00-r0:65"],
    "job-not-whole-nodes": ["--gpus", "1024", "--job-gpus", "12"],
    "bad-size": ["--gpus", "1024", "--sizes", "1M,lots"],
    "qps-zero": ["--gpus", "1024", "--qps", "0"],
    "fail-random-out-of-range": ["--gpus", "1024", "--fail-random", "1.5"],
    "not-a-design-folder": ["nowhere"],
    "negative-seed": ["--gpus", "1024", "--seed", "-1"],
    "negative-hash-seed": ["--gpus", "1024", "--hash-seed", "-1"],
    "infinite-size": ["--gpus", "1024", "--sizes", "inf"],
    "nan-latency": ["--gpus", "1024", "--switch-latency-ns", "nan", "--link-efficiency", "inf"],
    "one-node-job-is-not-an-error-but-zero-is": ["--gpus", "1024", "--job-gpus", "0"],
}


@pytest.mark.parametrize("case", sorted(ANALYZE_ERRORS))
def test_analyze_error_golden(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nowhere").mkdir()
    args = [*ANALYZE_ERRORS[case], "-q"]
    result = run("analyze", *args)
    record = f"$ topo analyze {' '.join(args)}\nexit {result.exit_code}\n{result.stderr}"
    golden = GOLDEN / "errors" / f"analyze-{case}.txt"
    if REGEN:
        golden.write_text(record)
    assert record == golden.read_text(), f"regenerate with TOPO_REGEN_GOLDEN=1 if intended:\n{record}"
    assert result.exit_code in (1, 2) and result.stdout == "" and "Traceback" not in result.output


def test_hostname_table_travels_with_the_build_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("hosts.csv").write_text("node,hostname\n" + "".join(f"{i},rack{i // 4}-gpu{i % 4}\n" for i in range(32)))
    assert run("build", "--gpus", 256, "--hostnames", "hosts.csv", "-o", "a", "-q").exit_code == 0
    assert (tmp_path / "a" / "hostnames.csv").read_text() == Path("hosts.csv").read_text()
    assert "hostnames: hostnames.csv" in (tmp_path / "a" / "spec.yaml").read_text()
    assert run("build", "-f", "a/spec.yaml", "-o", "b", "-q").exit_code == 0
    assert (tmp_path / "a" / "design.json").read_bytes() == (tmp_path / "b" / "design.json").read_bytes()
    assert '"rack7-gpu3"' in (tmp_path / "b" / "design.json").read_text()


def test_a_server_profile_file_travels_with_the_build_folder(tmp_path, monkeypatch):
    from importlib import resources

    from topo.spec import parse_yaml

    monkeypatch.chdir(tmp_path)
    shipped = resources.files("topo.data").joinpath("hardware/servers.yaml").read_text()
    data = parse_yaml(shipped, "shipped profiles")["hgx-h100-8nic"]
    data["name"] = "my-h100"
    Path("my-server.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    result = run("build", "--gpus", 64, "--server", "my-server.yaml", "-o", "a", "-q")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a" / "inputs" / "my-server.yaml").read_text() == Path("my-server.yaml").read_text()
    assert "server: inputs/my-server.yaml" in (tmp_path / "a" / "spec.yaml").read_text()
    assert "`inputs/my-server.yaml`" in (tmp_path / "a" / "README.md").read_text()
    assert (tmp_path / "a" / "nccl" / "my-h100-topo.xml").is_file()
    assert run("build", "-f", "a/spec.yaml", "-o", "b", "-q").exit_code == 0
    for rel in ("nccl/my-h100-topo.xml", "design.json", "spec.yaml", "README.md"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    # a profile path given as a flag is relative to the working folder, even with -f
    Path("sub").mkdir()
    Path("sub/spec.yaml").write_text("gpus: 64\n")
    assert run("build", "-f", "sub/spec.yaml", "--server", "my-server.yaml", "-o", "c", "-q").exit_code == 0


def test_host_names_must_differ_from_switch_names(tmp_path):
    result = run("build", "--gpus", 256, "--hostnames", "cluster-spine-{node:02d}", "-o", tmp_path / "d", "-q")
    assert result.exit_code == 1
    assert "host name 'cluster-spine-00' is also the name of a switch" in result.stderr
