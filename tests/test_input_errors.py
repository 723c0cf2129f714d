"""Bad input of every kind is one ``Error:`` line that names the file or flag and never repeats the
file's text: parser errors, files that block or never end, deep nesting, names the system refuses,
output that cannot be written, absurd sizes and numbers in other scripts' digits
(docs/reliability.md, "Input: bounded before use" and "Errors and exit statuses")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from topo.cli import main, parse_size

from .conftest import GOLDEN, REGEN

#: Text in every bad file below: no error line may show it.
SECRET = "Sekr3tContent"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="topo", catch_exceptions=False)


def topo(*args: str, cwd: Path, stdout=subprocess.PIPE, timeout: float = 120) -> subprocess.CompletedProcess:
    """topo in a process of its own (for what CliRunner cannot give it: a FIFO, a full stdout)."""
    return subprocess.run([sys.executable, "-m", "topo.cli", *args], cwd=cwd, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error: ")]


def one_error(result, *fragments: str, code: int = 1) -> str:
    """The run ended with status ``code``, no traceback, and exactly one Error line holding every
    fragment and nothing of SECRET; that line."""
    stderr = result.stderr
    assert status(result) == code, stderr
    assert "Traceback" not in stderr and "Traceback" not in (result.stdout or "")
    errors = error_lines(stderr)
    assert len(errors) == 1, stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    assert SECRET not in stderr, stderr
    return errors[0]


def status(result) -> int:
    return result.returncode if hasattr(result, "returncode") else result.exit_code


# --- parser errors name the file, the line and column, and the kind of problem ------------------

#: YAML whose parser error would quote the file: an alias, a tag, an anchor, an escape, a
#: syntax error after a line of text.
BAD_YAML = {
    "undefined-alias": (f"gpus: 64\nname: *{SECRET}\n", "line 2, column 7: found undefined alias"),
    "unknown-tag": (f"gpus: 64\nname: !{SECRET} x\n", "line 2, column 7: could not determine a constructor for the tag"),
    "duplicate-anchor": (f"a: &{SECRET} 1\nb: &{SECRET} 2\n", "found duplicate anchor (first on line 1)"),
    "unknown-escape": (f'name: "{SECRET}\\q"\n', "found unknown escape character"),
    "unclosed-list": (f"{SECRET}: [1, 2\n", "line 2, column 1: expected ',' or ']', but got '<stream end>'"),
}


def _flag_for(kind: str, path: Path) -> list[str]:
    return {"spec": ["build", "-f", path, "-o", path.parent / "out"],
            "server": ["build", "--gpus", 64, "--server", path, "-o", path.parent / "out"],
            "prices": ["build", "--gpus", 64, "--prices", path, "-o", path.parent / "out"],
            "nccl-constants": ["analyze", "--gpus", 64, "--nccl-constants", path],
            "workload": ["train", "--gpus", 64, "--model", "llama3-8b", "--workload", path]}[kind]


@pytest.mark.parametrize("kind", ["spec", "server", "prices", "nccl-constants", "workload"])
@pytest.mark.parametrize("case", sorted(BAD_YAML))
def test_a_yaml_error_names_the_file_line_and_problem_never_the_text(tmp_path, kind, case):
    text, fragment = BAD_YAML[case]
    path = tmp_path / "input.yaml"
    path.write_text(text)
    result = run(*_flag_for(kind, path), "-q")
    line = one_error(result, str(path), "malformed YAML", fragment)
    assert "^" not in line and "\n" not in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", sorted(BAD_YAML))
def test_check_of_an_edited_spec_never_prints_it(built, tmp_path, case):
    folder = tmp_path / "design"
    subprocess.run(["cp", "-r", str(built), str(folder)], check=True)
    text, fragment = BAD_YAML[case]
    (folder / "spec.yaml").write_text(text)
    one_error(run("check", folder, "-q"), f"spec file {folder / 'spec.yaml'}: malformed YAML", fragment)


@pytest.mark.parametrize("kind", ["--train", "--sweep"])
def test_a_json_error_names_the_file_line_and_problem(tmp_path, kind):
    path = tmp_path / "result.json"
    path.write_text('{"rows": [1,\n  "' + SECRET + '" ' + SECRET + "\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text("gpus: 64\n")
    result = run("report", "-q", kind, path, "-o", tmp_path / "r", spec)
    one_error(result, f"{kind} {path}: malformed JSON at line 2, column", "Expecting")


@pytest.mark.parametrize("kind, first", [("spec", "gpus: 64\n"), ("prices", ""), ("workload", "model: llama3-8b\n")])
def test_a_line_of_text_read_as_a_key_is_never_shown(tmp_path, kind, first):
    path = tmp_path / "input.yaml"
    path.write_text(f"{first}The first line of my notes, {SECRET}: yes\n")
    one_error(run(*_flag_for(kind, path), "-q"), "a key that is no field name")


@pytest.mark.parametrize("text, fragment", [
    (f"The first line of a README, {SECRET} and more of it: 1\nsecond: 2\n", "holds 2 profiles; a profile file"),
    (f"The first line of a README, {SECRET}: and more\n", "not a server profile (no cpus: at the top level"),
])
def test_a_wrong_server_profile_file_never_shows_its_first_line(tmp_path, text, fragment):
    path = tmp_path / "notes.yaml"
    path.write_text(text)
    one_error(run("build", "--gpus", 64, "--server", path, "-o", tmp_path / "out", "-q"), fragment)


@pytest.mark.parametrize("command", ["build", "templates"])
def test_a_template_error_names_the_line_never_a_long_token(tmp_path, command):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "summary.md.j2").write_text("ok\n{% " + "x" * 60 + SECRET + " %}\n")
    args = ["build", "--gpus", 64, "-o", tmp_path / "out", "-q"] if command == "build" else ["templates"]
    one_error(run(*args, "--templates", folder), "template summary.md.j2 (in", "line 2: Encountered unknown tag")
    (folder / "summary.md.j2").write_text("{{ owner.rack }}\n")
    if command == "build":  # a short name a template uses is named, as a field is
        one_error(run(*args, "--templates", folder), "line 1: 'owner' is undefined")


# --- files that block, never end, or nest too deep ----------------------------------------------

def test_a_fifo_as_workload_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = topo("train", "--gpus", "64", "--model", "llama3-8b", "--workload", str(fifo), "-q",
                  cwd=tmp_path, timeout=60)
    one_error(result, f"--workload {fifo} is not a regular file (a FIFO)")


def test_a_fifo_as_nccl_constants_of_a_sweep_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = topo("sweep", "--gpus", "64", "--nccl-constants", str(fifo), "-q", cwd=tmp_path, timeout=60)
    one_error(result, f"--nccl-constants {fifo} is not a regular file (a FIFO)")


def test_dev_zero_as_workload_is_refused_at_once():
    one_error(run("train", "--gpus", 64, "--model", "llama3-8b", "--workload", "/dev/zero", "-q"),
              "--workload /dev/zero is not a regular file (a character device)")


def test_a_yaml_error_in_nccl_constants_is_one_line(tmp_path):
    path = tmp_path / "constants.yaml"
    path.write_text("base_latency: [[1, 2\n")
    one_error(run("analyze", "--gpus", 64, "--nccl-constants", path, "-q"),
              f"--nccl-constants {path}: malformed YAML at line 2, column 1")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("built") / "design"
    assert run("build", "--gpus", 64, "-o", folder, "-q", "--no-configs").exit_code == 0
    return folder


def test_a_stamp_nested_100k_deep_is_one_line(built, tmp_path):
    folder = tmp_path / "design"
    subprocess.run(["cp", "-r", str(built), str(folder)], check=True)
    (folder / "topo-build.json").write_text('{"files": ' + "[" * 100_000)
    for args in (["check", folder], ["build", "--gpus", 64, "-o", folder, "--force"]):
        one_error(run(*args, "-q"), "topo-build.json: malformed JSON: nested too deeply",
                  "cannot be read as topo's build stamp")


def test_check_of_a_config_db_nested_100k_deep_reports_it_changed(tmp_path):
    folder = tmp_path / "design"
    assert run("build", "--gpus", 64, "-o", folder, "-q", "--no-analysis").exit_code == 0
    db = next((folder / "switches").glob("*/config_db.json"))
    db.write_text("[" * 100_000)
    result = run("check", folder, "-q")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert any(str(db.relative_to(folder)) in line for line in error_lines(result.stderr)), result.stderr


def test_a_train_result_nested_100k_deep_is_one_line(tmp_path):
    path = tmp_path / "train.json"
    path.write_text("[" * 100_000)
    spec = tmp_path / "spec.yaml"
    spec.write_text("gpus: 64\n")
    one_error(run("report", spec, "--train", path, "-o", tmp_path / "r", "-q"),
              f"--train {path}: malformed JSON: nested too deeply")


# --- host-name tables ---------------------------------------------------------------------------

def test_a_host_table_with_lone_carriage_returns_is_read(tmp_path):
    table = tmp_path / "hosts.csv"
    table.write_bytes(b"node,hostname\r" + b"".join(b"%d,gpu-%d\r" % (i, i) for i in range(8)))
    result = run("build", "--gpus", 64, "--hostnames", table, "-o", tmp_path / "out", "-q", "--no-configs",
                 "--no-analysis", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert "gpu-7" in (tmp_path / "out" / "cabling.csv").read_text()


def test_a_host_table_with_a_huge_field_is_one_line(tmp_path):
    table = tmp_path / "hosts.csv"
    table.write_text("node,hostname\n0,gpu-0\n1," + SECRET * 20_000 + "\n")
    one_error(run("build", "--gpus", 64, "--hostnames", table, "-o", tmp_path / "out", "-q"),
              f"hostnames: {table}, line 3: not a CSV row (a field longer than csv's limit of 131,072 characters)")
    assert not (tmp_path / "out").exists()


def test_a_host_table_row_is_never_echoed(tmp_path):
    table = tmp_path / "hosts.csv"
    table.write_text(f"node,hostname\n0,gpu-0,{SECRET}\nx{SECRET},gpu-1\n")
    one_error(run("build", "--gpus", 64, "--hostnames", table, "-o", tmp_path / "out", "-q"),
              f"{table}, line 2: expected the two fields node,hostname, got 3")
    table.write_text(f"node,hostname\n0,gpu-0\n{SECRET},gpu-1\n")
    one_error(run("build", "--gpus", 64, "--hostnames", table, "-o", tmp_path / "out", "-q"),
              f"{table}, line 3: expected a node index (digits 0-9) in the first field")


# --- names the system refuses, a removed working folder, a full standard output -----------------

LONG = "n" * 5000


@pytest.mark.parametrize("args", [
    ["build", "--gpus", "64", "-o", LONG],
    ["train", "--gpus", "64", "--model", "llama3-8b", "-o", LONG],
    ["sweep", "--gpus", "64", "--oversubscription", "1", "-o", LONG],
    ["build", "--gpus", "64", "-f", LONG + ".yaml"],
    ["build", "--gpus", "64", "--hostnames", LONG + ".csv", "-o", "out"],
    ["build", "--gpus", "64", "--prices", LONG + ".yaml", "-o", "out"],
    ["analyze", "--gpus", "64", "--nccl-constants", LONG + ".yaml"],
    ["train", "--gpus", "64", "--model", "llama3-8b", "--workload", LONG + ".yaml"],
], ids=["build-o", "train-o", "sweep-o", "spec", "hostnames", "prices", "nccl-constants", "workload"])
def test_a_5000_character_name_is_one_short_line(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    result = run(*args, "-q")
    line = one_error(result)
    assert len(line) < 400, line
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize("args", [["report", "spec.yaml", "--train", LONG], ["build", "--gpus", "64", "--radix", LONG],
                                  ["build", "--gpus", "64", "--templates", LONG]], ids=["train", "radix", "templates"])
def test_a_5000_character_value_click_refuses_is_cut(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    Path("spec.yaml").write_text("gpus: 64\n")
    result = run(*args)
    line = one_error(result, "...'", code=2)
    assert len(line) < 200, line


def test_a_removed_working_folder_is_one_line(tmp_path):
    result = subprocess.run(["sh", "-c", f'mkdir gone && cd gone && rmdir ../gone && exec "{sys.executable}" '
                                         f'-m topo.cli build --gpus 64 -o {tmp_path}/out -q'],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    one_error(result, "the working folder cannot be found")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [["switches"], ["switches", "--format", "json"], ["servers", "--format", "yaml"],
                                  ["--version"], ["analyze", "--gpus", "64", "-q"]])
def test_a_full_standard_output_is_one_line(tmp_path, args):
    with open("/dev/full", "w") as full:
        result = topo(*args, cwd=tmp_path, stdout=full)
    one_error(result, "cannot write the output to standard output (No space left on device)")


# --- tables that failed where the JSON worked ---------------------------------------------------

def test_analyze_table_of_one_gpu_a_node():
    result = run("analyze", "--gpus", 1024, "--gpus-per-node", 1, "-q")
    assert result.exit_code == 0, result.output
    assert "ring network 47.0, NVLink -, PCIe" in result.stdout


# --- absurd or ambiguous numbers are refused, not computed --------------------------------------

TRAIN_BOUNDS = {"--layers": 4096, "--hidden": 1 << 20, "--heads": 1 << 16, "--kv-heads": 1 << 16,
                "--head-dim": 1 << 16, "--ffn": 1 << 22, "--seq-len": 1 << 24, "--vocab": 1 << 24,
                "--experts": 1 << 16, "--top-k": 1 << 16, "--expert-ffn": 1 << 22,
                "--global-batch": 1 << 24, "--micro-batch": 1 << 16, "--tp": 1 << 22, "--pp": 1 << 22,
                "--cp": 1 << 22, "--ep": 1 << 22, "--vpp": 1024}


@pytest.mark.parametrize("flag", sorted(TRAIN_BOUNDS))
def test_train_sizes_are_bounded(flag):
    most = TRAIN_BOUNDS[flag]
    one_error(run("train", "--gpus", 64, "--model", "llama3-8b", flag, most + 1, "-q"),
              f"{flag} {most + 1}: must be at most {most:,}")


def test_train_layers_ten_to_the_24_is_refused(tmp_path):
    one_error(run("train", "--gpus", 64, "--model", "llama3-8b", "--layers", 10**24, "-q"),
              f"--layers {10**24}: must be at most 4,096")
    workload = tmp_path / "w.yaml"
    workload.write_text(f"model: llama3-8b\nlayers: {10**24}\n")
    one_error(run("train", "--gpus", 64, "--workload", workload, "-q"),
              f"--workload {workload}: layers {10**24}: must be at most 4,096")


@pytest.mark.parametrize("text, size", [("8G", 8 << 30), ("8GiB", 8 << 30), ("8GB", 8 * 10**9), ("8Gb", 10**9),
                                        ("8gb", 10**9), ("8Gib", 1 << 30), ("12Kb", 1500), ("1M", 1 << 20),
                                        ("4096", 4096), ("1.5K", 1536)])
def test_sizes_read_a_lower_case_b_as_bits(text, size):
    assert parse_size(text) == size


def test_sizes_say_how_bits_were_read():
    result = run("analyze", "--gpus", 64, "--sizes", "8Gb,8Gib", "--format", "json")
    assert result.exit_code == 0, result.output
    assert [r["size_bytes"] for r in json.loads(result.stdout)["allreduce"]] == [10**9, 1 << 30]
    assert "--sizes 8Gb: 1,000,000,000 bytes (b is bits: 8 gigabits; 8GB is 8,000,000,000 bytes)" in result.stderr
    assert "--sizes 8Gib: 1,073,741,824 bytes (b is bits: 8 gibibits; 8GiB is 8,589,934,592 bytes)" in result.stderr


@pytest.mark.parametrize("text", ["1b", "1.5", "8GBB", "１G", "1e3"])
def test_sizes_that_are_not_whole_bytes_or_not_ascii_are_refused(text):
    result = run("analyze", "--gpus", 64, "--sizes", text, "-q")
    assert result.exit_code == 2 and "is not a size from 1 byte to 1 TiB" in result.stderr


@pytest.mark.parametrize("args, code", [
    (["build", "--gpus", "１０２４"], 1),
    (["build", "--gpus", "64", "--radix", "６４"], 2),
    (["build", "--gpus", "64", "--oversubscription", "３"], 1),
    (["build", "--gpus", "64", "--nic-gbps", "４００"], 1),
    (["analyze", "--gpus", "64", "--seed", "٣"], 2),
    (["analyze", "--gpus", "64", "--link-efficiency", "０.５"], 2),
    (["train", "--gpus", "64", "--model", "llama3-8b", "--layers", "３２"], 2),
    (["train", "--gpus", "64", "--model", "llama3-8b", "--scale", "６４"], 1),
])
def test_numbers_in_other_digits_are_refused(tmp_path, monkeypatch, args, code):
    monkeypatch.chdir(tmp_path)
    result = run(*args, "-q")
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and not list(tmp_path.iterdir())


def test_numbers_in_other_digits_are_refused_in_files(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text('gpus: "１０２４"\n')
    one_error(run("build", "-f", spec, "-o", tmp_path / "out", "-q"), "gpus: expected a whole number")
    table = tmp_path / "hosts.csv"
    table.write_text("node,hostname\n" + "".join(f"{i},gpu-{i}\n" for i in range(7)) + "７,gpu-7\n")
    one_error(run("build", "--gpus", 64, "--hostnames", table, "-o", tmp_path / "out", "-q"),
              "line 9: expected a node index (digits 0-9)")


# --- golden error lines -------------------------------------------------------------------------

GOLDEN_CASES = {
    "spec-undefined-alias": (["build", "-f", "input.yaml", "-o", "out"], BAD_YAML["undefined-alias"][0]),
    "prices-unknown-tag": (["build", "--gpus", "64", "--prices", "input.yaml", "-o", "out"], BAD_YAML["unknown-tag"][0]),
    "nccl-constants-syntax": (["analyze", "--gpus", "64", "--nccl-constants", "input.yaml"], "base_latency: [[1, 2\n"),
    "workload-fifo": (["train", "--gpus", "64", "--model", "llama3-8b", "--workload", "fifo"], None),
    "train-layers-huge": (["train", "--gpus", "64", "--model", "llama3-8b", "--layers", str(10**24)], None),
    "gpus-full-width": (["build", "--gpus", "１０２４", "-o", "out"], None),
    "radix-full-width": (["build", "--gpus", "64", "--radix", "６４", "-o", "out"], None),
}


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_input_error_golden(case, tmp_path, monkeypatch):
    args, text = GOLDEN_CASES[case]
    monkeypatch.chdir(tmp_path)
    if text is not None:
        Path("input.yaml").write_text(text)
    if "fifo" in args:
        os.mkfifo("fifo")
    result = run(*args, "-q")
    record = f"$ topo {' '.join(args)} -q\nexit {result.exit_code}\n{result.stderr}"
    golden = GOLDEN / "errors" / f"input-{case}.txt"
    if REGEN:
        golden.write_text(record)
    assert record == golden.read_text(), f"regenerate with TOPO_REGEN_GOLDEN=1 if intended:\n{record}"
    assert result.exit_code in (1, 2) and result.stdout == "" and "Traceback" not in result.output
    assert not Path("out").exists()
