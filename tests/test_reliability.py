"""What docs/reliability.md guarantees: a first run that works, no data loss, bounded input, one
error line and the documented exit status for every mistake, interrupts that clean up, and no
silently wrong answer. Each case of the hardening issue is one test here (or an error golden in
test_cli.py)."""

from __future__ import annotations

import errno
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import topo.outputs.writer as writer
from topo import SpecError, build_fabric, load_spec, plan_fabric
from topo.cli import main
from topo.fabric import check_memory
from topo.outputs.manifest import MANIFEST, read_manifest

from .conftest import ROOT


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="topo", catch_exceptions=False)


def one_error(result, *fragments: str) -> None:
    """Exit status 1, no traceback, and every fragment in the stderr's Error lines."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert errors, result.stderr
    for fragment in fragments:
        assert any(fragment in line for line in errors), (fragment, result.stderr)


def leftovers(folder: Path) -> list[str]:
    """Hidden temporary folders of builds beside ``folder``'s build folders."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and ".tmp-" in p.name)


# --- first run ------------------------------------------------------------------------------------


def test_a_one_node_build_works_and_says_nvlink_only(tmp_path):
    result = run("build", "--gpus", 8, "-o", tmp_path / "one", "--format", "json", "-q")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    analysis = json.loads((tmp_path / "one" / "analysis.json").read_text())
    assert analysis["allreduce_detail"]["nvlink_only"] is True
    assert any("NVLink only" in note for note in analysis["notes"])
    # the node's own all-reduce: NVLS on an NVSwitch-3 H100 board, within what NVLink carries
    assert data["nodes"] == 1 and 400 < data["analysis"]["allreduce_busbw_GBps"] < 2 * 450
    assert analysis["allreduce"][-1]["algorithm"] == "nvls"
    assert analysis["allreduce_detail"]["connections"] == 0
    table = run("analyze", "--gpus", 64, "--job-gpus", 8, "-q").stdout
    assert "8 GPUs on 1 node" in table and "NVLink only, no traffic on the fabric" in table


def test_the_pip_bootstrap_picks_the_newest_stable_wheel_with_a_digest():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from bootstrap_pip import newest_wheel
    finally:
        sys.path.pop(0)
    page = """<html><body>
      <a href="../../packages/pip-23.3.2-py3-none-any.whl#sha256=aaa">pip-23.3.2-py3-none-any.whl</a>
      <a href="../../packages/pip-24.3.1-py3-none-any.whl#sha256=bbb">pip-24.3.1-py3-none-any.whl</a>
      <a href="../../packages/pip-25.0-py3-none-any.whl#sha256=ccc" data-yanked="">pip-25.0</a>
      <a href="../../packages/pip-24.3.1.tar.gz#sha256=ddd">pip-24.3.1.tar.gz</a>
      <a href="../../packages/pip-99.0-py3-none-any.whl">no digest</a>
    </body></html>"""
    version, url, digest = newest_wheel(page, "https://pypi.org/simple/pip/")
    assert (version, digest) == ("24.3.1", "bbb")
    assert url == "https://pypi.org/packages/pip-24.3.1-py3-none-any.whl"


def test_the_set_up_scripts_never_prompt_and_use_a_virtual_environment():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    test = (ROOT / "scripts" / "test.sh").read_text()
    assert "-m venv --without-pip .venv" in setup and "bootstrap_pip.py" in setup and "VIRTUAL_ENV" in setup
    validators = (ROOT / "scripts" / "install_validators.sh").read_text()
    assert "bash scripts/install_validators.sh" in test and "bash scripts/setup.sh test" in test
    assert "sudo -n" in validators and "DEBIAN_FRONTEND=noninteractive" in validators
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/setup.sh && .venv/bin/topo build --gpus 1024" in readme


# --- output safety --------------------------------------------------------------------------------


def test_force_replaces_only_a_folder_topo_built(tmp_path):
    out = tmp_path / "myproj"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    (out / ".git").mkdir()
    one_error(run("build", "--gpus", 16, "-o", out, "--force", "-q"), "--force replaces only a build folder",
              "no topo-build.json")
    assert (out / "thesis.tex").read_text() == "years of work" and (out / ".git").is_dir()
    built = tmp_path / "built"
    assert run("build", "--gpus", 16, "-o", built, "-q").exit_code == 0
    (built / "notes.txt").write_text("mine")
    one_error(run("build", "--gpus", 16, "-o", built, "--force", "-q"), "also holds 'notes.txt'")
    assert (built / "notes.txt").read_text() == "mine"
    (built / "notes.txt").unlink()
    assert run("build", "--gpus", 32, "-o", built, "--force", "-q").exit_code == 0
    assert "gpus: 32" in (built / "spec.yaml").read_text()
    assert leftovers(tmp_path) == []


def test_force_never_replaces_the_spec_folder_the_working_folder_or_home(tmp_path, monkeypatch):
    design = tmp_path / "design"
    assert run("build", "--gpus", 16, "-o", design, "-q").exit_code == 0
    one_error(run("build", "-f", design / "spec.yaml", "-o", design, "--force", "-q"),
              f"holds {design / 'spec.yaml'}, an input of this build")
    assert (design / "spec.yaml").is_file()
    monkeypatch.chdir(design)
    one_error(run("build", "--gpus", 16, "-o", ".", "--force", "-q"), "is the working folder or holds it")
    one_error(run("build", "--gpus", 16, "-o", tmp_path, "--force", "-q"), "is the working folder or holds it")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(design))
    one_error(run("build", "--gpus", 16, "-o", design, "--force", "-q"), "is the home folder")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(os.path, "ismount", lambda path: str(path) == str(design))
    one_error(run("build", "--gpus", 16, "-o", design, "--force", "-q"), "is a mount point")
    assert read_manifest(design)  # untouched through all of it
    assert leftovers(tmp_path) == []


def test_templates_and_tables_inside_the_output_are_refused(tmp_path):
    design = tmp_path / "design"
    assert run("build", "--gpus", 16, "-o", design, "-q").exit_code == 0
    one_error(run("build", "--gpus", 16, "--templates", design, "-o", design, "--force", "-q"),
              "an input of this build")
    one_error(run("build", "--gpus", 16, "--hostnames", design / "hostnames.csv", "-o", design, "--force", "-q"))


def test_bad_output_paths_are_one_error_line(tmp_path):
    (tmp_path / "file").write_text("x")
    one_error(run("build", "--gpus", 16, "-o", tmp_path / "file", "-q"), "exists and is not a folder")
    one_error(run("build", "--gpus", 16, "-o", tmp_path / "file" / "sub", "-q"), "is a file, not a folder")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    one_error(run("build", "--gpus", 16, "-o", tmp_path / "dangling", "-q"), "symbolic link", "does not exist")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert run("build", "--gpus", 16, "-o", tmp_path / "link", "-q").exit_code == 0  # written where it points
    assert (tmp_path / "real" / MANIFEST).is_file() and (tmp_path / "link").is_symlink()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_failing_file_system_is_one_error_line_and_leaves_nothing(tmp_path, monkeypatch, code):
    real_open = open
    calls = {"n": 0}

    def failing_open(path, mode="r", *args, **kwargs):
        if "x" in mode:
            calls["n"] += 1
            if calls["n"] == 5:
                raise OSError(code, os.strerror(code), str(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(writer, "open", failing_open, raising=False)
    result = run("build", "--gpus", 16, "-o", tmp_path / "out", "-q")
    one_error(result, f"cannot write {tmp_path / 'out'}/", os.strerror(code))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_write_that_fails_in_a_config_process_names_the_folder(tmp_path, monkeypatch):
    """The config processes write the switch configs themselves: a full disk there is the same one
    line, naming the folder as given with -o, and leaves nothing."""
    real_open = open

    def failing_open(path, mode="r", *args, **kwargs):
        if "x" in mode and str(path).endswith("/cluster-leaf-su05-r2/frr.conf"):  # the second chunk
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(writer, "open", failing_open, raising=False)  # the forked workers inherit it
    result = run("build", "--gpus", 4096, "--no-analysis", "-j", 2, "-o", tmp_path / "out", "-q")
    one_error(result, f"cannot write {tmp_path / 'out'}/switches/", os.strerror(errno.ENOSPC))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_unwritable_parent_is_one_error_line(tmp_path, monkeypatch):
    def refuse(path, mode=0o777):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(writer.os, "mkdir", refuse)
    one_error(run("build", "--gpus", 16, "-o", tmp_path / "out", "-q"), "cannot make a folder", "Permission denied")


def test_a_folder_that_appears_meanwhile_is_never_replaced(tmp_path, monkeypatch):
    out = tmp_path / "out"
    import topo.pipeline.build as cli

    real = cli.build_files

    def build_files_and_meanwhile(*args, **kwargs):
        out.mkdir()
        (out / "theirs.txt").write_text("theirs")
        yield from real(*args, **kwargs)

    monkeypatch.setattr(cli, "build_files", build_files_and_meanwhile)
    one_error(run("build", "--gpus", 16, "-o", out, "-q"), "was written by someone else while topo was building")
    assert sorted(p.name for p in out.iterdir()) == ["theirs.txt"]
    assert leftovers(tmp_path) == []


@pytest.fixture
def held_folder(tmp_path):
    """Make the temporary folder of a running build: another process holds its lock until the end."""
    holders = []

    def make(name: str, ns: int, pid: int) -> Path:
        folder = tmp_path / f".{name}.tmp-{ns:020d}-{pid}"
        folder.mkdir()
        code = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR); "
                "fcntl.lockf(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)")
        holder = subprocess.Popen([sys.executable, "-c", code, str(folder / writer.LOCK)], stdout=subprocess.PIPE,
                                  text=True)
        assert holder.stdout.readline().strip() == "held"
        holders.append(holder)
        return folder

    yield make
    for holder in holders:
        holder.kill()
        holder.wait()


def test_a_second_build_to_one_folder_stops_while_the_first_runs(tmp_path, held_folder):
    folder = held_folder("out", 1, 4242)  # started long ago, still running
    one_error(run("build", "--gpus", 16, "-o", tmp_path / "out", "-q"), "another topo build (process 4242) is writing")
    assert folder.is_dir() and not (tmp_path / "out").exists()


def test_a_dead_builds_folder_is_removed_and_a_later_build_does_not_stop_an_earlier_one(tmp_path, held_folder):
    dead = tmp_path / f".out.tmp-{1:020d}-4242"
    dead.mkdir()
    (dead / writer.LOCK).write_text("")
    (dead / "design.json").write_text("half")
    later = held_folder("out", time.time_ns() * 2, 4343)
    assert run("build", "--gpus", 16, "-o", tmp_path / "out", "-q").exit_code == 0
    assert not dead.exists() and later.is_dir()  # the dead one removed, the later one left running


def _default_sigint() -> None:
    # a test run in the background inherits SIGINT ignored, and Python then keeps ignoring it: give
    # the command under test the SIGINT a user's terminal would give it
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def topo_process(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "topo.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=_default_sigint)


def _wait_for_configs(proc: subprocess.Popen, timeout: float = 60) -> list[str]:
    """stderr lines until the switch configs are being rendered."""
    lines = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if "configs of" in line:
            return lines
    raise AssertionError("the build never reached its configs: " + "".join(lines))


@pytest.mark.slow
def test_a_killed_build_leaves_a_folder_the_next_build_removes(tmp_path):
    # the analysis comes before the configs and is not what is interrupted here: left out, to be
    # quick; 65,536 GPUs so that the configs are still being collected when it is killed, on a fast
    # machine too
    proc = topo_process("build", "--gpus", "65536", "--no-analysis", "-o", "out", "-j", "2", cwd=tmp_path)
    _wait_for_configs(proc)
    proc.kill()
    proc.wait(10)
    assert leftovers(tmp_path) and not (tmp_path / "out").exists()
    assert run_in(tmp_path, "build", "--gpus", 16, "-o", tmp_path / "out", "-q").exit_code == 0
    assert leftovers(tmp_path) == []


def test_an_error_while_the_config_workers_run_stops_them_and_writes_nothing(tmp_path, monkeypatch):
    """topo build starts the config processes right after the fabric; an error in this process
    meanwhile (here in the design review) stops them before the folder is tidied away."""
    import multiprocessing

    import topo.pipeline.build as build  # the review as the build calls it
    from topo.errors import TopoError

    def fails(*args, **kwargs):
        assert len(multiprocessing.active_children()) == 2  # the workers are rendering by now
        raise TopoError("the review failed")

    monkeypatch.setattr(build, "review", fails)
    result = run_in(tmp_path, "build", "--gpus", 4096, "--no-analysis", "-o", "out", "-j", 2, "-q")
    one_error(result, "the review failed")
    assert multiprocessing.active_children() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder, no temporary folder


_RENDER_CHUNK = None


def _render_chunk_or_die(switches):
    """The workers' chunk renderer, except that the worker given the second chunk is killed with
    it (as the kernel's out-of-memory killer would)."""
    if switches[0] == _DIE_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    return _RENDER_CHUNK(switches)


_DIE_AT = -1


def test_a_config_worker_that_dies_stops_the_build_instead_of_hanging(tmp_path, monkeypatch):
    """A killed worker's chunks are lost: collecting the configs notices at once (the worker's pipe
    closes) and says so in one error, instead of waiting for them."""
    from topo.errors import TopoError
    from topo.outputs.configs import job as configs

    fabric = build_fabric(load_spec({"gpus": 4096}))
    switches = range(fabric.first(1), len(fabric.names))
    assert len(switches) > 2 * configs.CONFIG_CHUNK
    monkeypatch.setattr(sys.modules[__name__], "_RENDER_CHUNK", configs._render_chunk)
    monkeypatch.setattr(sys.modules[__name__], "_DIE_AT", switches[configs.CONFIG_CHUNK])
    monkeypatch.setattr(configs, "_render_chunk", _render_chunk_or_die)  # the forked workers see it
    with configs.ConfigJob(fabric, (), 2, tmp_path) as job:
        start = time.perf_counter()
        with pytest.raises(TopoError, match="a process rendering the switch configs died"):
            list(job.files())
        assert time.perf_counter() - start < 30


def test_a_config_job_closed_before_its_files_were_collected_says_so():
    from topo.outputs.configs import ConfigJob

    fabric = build_fabric(load_spec({"gpus": 4096}))
    job = ConfigJob(fabric, (), 2)
    job.close()
    with pytest.raises(RuntimeError, match="closed before its files were collected"):
        list(job.files())


def test_a_config_worker_that_cannot_start_reports_why(monkeypatch):
    """A worker whose set-up fails (no memory for the switch facts, say) reports that error with
    the first chunk instead of being replaced, and failing again, for ever."""
    from topo.outputs.configs import job as configs

    fabric = build_fabric(load_spec({"gpus": 4096}))

    def no_memory(*args, **kwargs):
        raise MemoryError("no memory for the facts")

    monkeypatch.setattr(configs, "ConfigFacts", no_memory)  # the workers, forked now, inherit it
    with configs.ConfigJob(fabric, (), 2) as job:
        with pytest.raises(MemoryError, match="no memory for the facts"):
            list(job.files())


def test_a_config_job_closes_wherever_an_interrupt_strikes_the_collecting_thread():
    """Ctrl-C and SIGTERM raise in the main thread between any two calls: inside the hand-off
    between the collector thread and files() too (at the call of a lock's ``__exit__``, which
    leaves the lock held). Wherever it strikes, closing the job must end: it waits for the
    collector thread, which must not need anything the interrupted thread held."""
    from topo.outputs.configs import job as configs

    fabric = build_fabric(load_spec({"gpus": 4096}))
    handoff = configs.ConfigJob._chunk.__code__
    watched = (threading.__file__, queue.__file__)

    def strike_at(n: int) -> bool:
        """Interrupt files() at the n-th call into the hand-off code; whether there was one."""
        calls = 0

        def trace(frame, event, arg):
            nonlocal calls
            if event == "call" and (frame.f_code is handoff or frame.f_code.co_filename in watched):
                calls += 1
                if calls == n:
                    raise KeyboardInterrupt
            return None

        job = configs.ConfigJob(fabric, (), 2)
        struck = False
        sys.settrace(trace)
        try:
            for _ in job.files():
                pass
        except KeyboardInterrupt:
            struck = True
        finally:
            sys.settrace(None)
        closing = threading.Thread(target=job.close, daemon=True)
        closing.start()
        closing.join(30)
        assert not closing.is_alive(), f"closing the job hung after an interrupt at call {n} of the hand-off"
        return struck

    n = 1
    while strike_at(n):
        n += 1
    assert n > 3  # struck at every call of the hand-off of a fabric of several chunks, up to its end


def run_in(folder: Path, *args):
    here = Path.cwd()
    os.chdir(folder)
    try:
        return run(*args)
    finally:
        os.chdir(here)


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(2))
@pytest.mark.parametrize("sig, status, message", [(signal.SIGINT, 130, "Error: interrupted"),
                                                  (signal.SIGTERM, 143, "Error: terminated")])
def test_an_interrupted_build_ends_cleanly(tmp_path, attempt, sig, status, message):
    # the analysis comes before the configs and is not what is interrupted here: left out, to be
    # quick; 65,536 GPUs so that the configs are still being collected 0.2 s after they start, on
    # a fast machine too
    proc = topo_process("build", "--gpus", "65536", "--no-analysis", "-o", "out", "-j", "2", cwd=tmp_path)
    _wait_for_configs(proc)
    time.sleep(0.2 * attempt)
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the interrupted build did not end within 20 s")
    assert proc.returncode == status, err
    assert "Traceback" not in err
    assert err.rstrip().splitlines()[-1] == message
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder, no temporary folder


#: ``python -c`` that runs topo with every what-if part's max-flow first spending SECONDS inside one
#: call into compiled code (a SHA-256 key derivation), as a large fabric's max-flow does: Python
#: runs no signal handler until such a call returns.
_SLOW_PARTS = """
import hashlib, sys, time
import topo.analysis.analyze as analyze
start = time.perf_counter(); hashlib.pbkdf2_hmac("sha256", b"topo", b"salt", 20000)
rounds = int(20000 * float(sys.argv.pop(1)) / max(time.perf_counter() - start, 1e-6))
real = analyze.bisection
def bisection(*args, **kwargs):
    hashlib.pbkdf2_hmac("sha256", b"topo", b"salt", rounds)
    return real(*args, **kwargs)
analyze.bisection = bisection
from topo.cli import entry
entry()
"""


def _children(pid: int) -> set[int]:
    """The processes ``pid`` has started that are still its children."""
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            pass
    return out


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("sig, status, message, stage", [(signal.SIGINT, 130, "Error: interrupted", "interrupted"),
                                                         (signal.SIGTERM, 143, "Error: terminated", "terminated")])
def test_the_design_review_what_ifs_stop_at_once(tmp_path, sig, status, message, stage):
    """Ctrl-C or SIGTERM while the what-ifs run, each part inside a 3-second call into compiled
    code: the build ends in well under a second, says it was interrupted, leaves no folder and no
    process (the what-ifs run in a child that is killed at once)."""
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_PARTS, "3", "build", "--gpus", "1024", "--no-configs",
                             "-o", "out"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=_default_sigint)
    lines = []
    while not any("parts failed one at a time" in line for line in lines):  # the first part is done
        line = proc.stderr.readline()
        if not line:
            proc.kill()
            raise AssertionError("the build never reached its what-ifs: " + "".join(lines))
        lines.append(line)
    time.sleep(0.5)  # well inside the next part's 3-second call
    children = _children(proc.pid)
    start = time.perf_counter()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the interrupted build did not end within 30 s")
    took = time.perf_counter() - start
    err = "".join(lines) + err
    assert proc.returncode == status, err
    assert took < 1.0, f"the build took {took:.2f} s to stop"
    assert "Traceback" not in err
    assert f"topo: what-ifs for the design review {stage}\n" in err, err
    assert "review failed" not in err, err
    assert err.rstrip().splitlines()[-1] == message
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder, no temporary folder
    deadline = time.time() + 5
    while not all(_gone(c) for c in children) and time.time() < deadline:
        time.sleep(0.05)
    assert all(_gone(c) for c in children), "a process of the build outlived it"


def test_work_apart_returns_its_result_raises_its_error_and_reports_its_death():
    """The what-ifs' child process (topo.pipeline.apart): progress and the result come back, an
    error of the work is raised here as itself, and a child that dies is one TopoError."""
    from topo.errors import AnalysisError, TopoError
    from topo.pipeline.apart import run_apart

    seen = []

    def work(report):
        report(1)
        report(2)
        return {"pid": os.getpid()}

    result = run_apart(work, seen.append, "the test's work")
    assert seen == [1, 2] and result["pid"] != os.getpid()

    def fails(report):
        raise AnalysisError(["--fail x: no switch or server named 'x'"])

    with pytest.raises(AnalysisError) as exc:
        run_apart(fails, None, "the test's work")
    assert exc.value.lines == ["--fail x: no switch or server named 'x'"]

    def dies(report):
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(TopoError, match=r"the process computing the what-ifs ended without its result "
                                        r"\(signal 9: killed, or out of memory\); nothing was written"):
        run_apart(dies, None, "the what-ifs")


# --- bounded input --------------------------------------------------------------------------------


def test_huge_numbers_are_refused_at_once(tmp_path):
    start = time.perf_counter()
    one_error(run("build", "--gpus", 1024, "--oversubscription", "1e99999999", "-o", tmp_path / "o", "-q"),
              "oversubscription: expected a ratio")
    one_error(run("build", "--gpus", 1024, "--oversubscription", "1e5000:1", "-o", tmp_path / "o", "-q"))
    one_error(run("build", "--gpus", 10**30, "-o", tmp_path / "o", "-q"), "gpus=")
    one_error(run("build", "--gpus", 64, "--nics-per-node", 10**9, "-o", tmp_path / "o", "-q"),
              "nics_per_node: must be at most 64")
    one_error(run("build", "--gpus", 64, "--hostnames", "gpu{number:0999999999d}", "-o", tmp_path / "o", "-q"),
              "field width 999,999,999")
    assert time.perf_counter() - start < 10


def test_a_yaml_alias_bomb_is_a_short_error(tmp_path):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        bomb += f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]\n"
    spec = tmp_path / "bomb.yaml"
    spec.write_text(bomb.replace("a:", "gpus: 64\nname:", 1) if False else f"gpus: 64\n{bomb}name: *i\n")
    start = time.perf_counter()
    result = run("build", "-f", spec, "-o", tmp_path / "o", "-q")
    assert time.perf_counter() - start < 10
    one_error(result, "name: expected a host-name-safe prefix")
    assert max(len(line) for line in result.stderr.splitlines()) < 400


def test_input_files_must_be_regular_small_utf8(tmp_path):
    one_error(run("build", "-f", "/dev/zero", "-o", tmp_path / "o", "-q"), "is not a regular file")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    one_error(run("build", "-f", fifo, "-o", tmp_path / "o", "-q"), "is not a regular file (a FIFO)")
    big = tmp_path / "big.yaml"
    big.write_text("gpus: 64\n" + "#" * (2 << 20) + "\n")
    one_error(run("build", "-f", big, "-o", tmp_path / "o", "-q"), "topo reads at most 1,048,576")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("gpus: 64\nname: caf\xe9\n".encode("latin-1"))
    one_error(run("build", "-f", latin, "-o", tmp_path / "o", "-q"), "is not UTF-8 text (byte 0xe9")
    deep = tmp_path / "deep.yaml"
    deep.write_text("gpus: 64\nx: " + "[" * 20000 + "]" * 20000 + "\n")
    one_error(run("build", "-f", deep, "-o", tmp_path / "o", "-q"), "nested too deeply")
    assert not (tmp_path / "o").exists()


def test_results_read_back_and_constants_hashed_are_bounded_too(tmp_path):
    """report --train/--sweep and sweep --nccl-constants read their files as a spec is read: a FIFO
    never blocks (it did, for good), /dev/zero never fills memory."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    spec = ROOT / "examples" / "h100-1024.yaml"
    for path, kind in [(fifo, "a FIFO"), ("/dev/zero", "a character device")]:
        for option in ("--train", "--sweep"):
            one_error(run("report", spec, option, path, "-o", tmp_path / "r", "-q"),
                      f"{option} {path} is not a regular file ({kind})")
        one_error(run("sweep", "--gpus", 16, "--nccl-constants", path, "-j", 1, "--no-cache", "-q"),
                  f"--nccl-constants {path} is not a regular file ({kind})")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.json"]


def test_a_malformed_nccl_constants_file_is_one_error_line(tmp_path):
    bad = tmp_path / "constants.yaml"
    bad.write_text("ll_max_bw: [1, 2\n")  # YAML that does not parse
    one_error(run("analyze", "--gpus", 64, "--nccl-constants", bad, "-q"),
              f"--nccl-constants {bad}: malformed YAML")
    bad.write_text("k" * 5000 + ": 1\n")  # a key too long for YAML's simple keys
    one_error(run("analyze", "--gpus", 64, "--nccl-constants", bad, "-q"), "malformed YAML")


def test_the_memory_estimate_refuses_what_does_not_fit():
    spec = load_spec({"gpus": 65536})
    check_memory(spec, plan_fabric(spec), available=8 << 30)
    with pytest.raises(SpecError, match=r"196,608 links, which needs about 0\.5 GiB .* has 0\.2 GiB available"):
        check_memory(spec, plan_fabric(spec), available=200 << 20)


def test_the_memory_check_runs_before_the_build(tmp_path, monkeypatch):
    import topo.fabric

    monkeypatch.setattr(topo.fabric, "available_memory", lambda: 64 << 20)
    one_error(run("build", "--gpus", 1024, "-o", tmp_path / "o", "-q"), "of memory to build and analyse")
    assert not (tmp_path / "o").exists()


# --- silent wrong answers -------------------------------------------------------------------------


def test_analyze_refuses_a_folder_that_does_not_match_its_spec(tmp_path):
    design = tmp_path / "d"
    assert run("build", "--gpus", 64, "-o", design, "-q").exit_code == 0
    assert run("analyze", design, "-q").exit_code == 0
    text = (design / "design.json").read_text()
    (design / "design.json").write_text(text.replace('"gbps": 400', '"gbps": 100', 1))
    one_error(run("analyze", design, "-q"), "design.json was changed after topo wrote it")
    (design / "design.json").unlink()
    one_error(run("analyze", design, "-q"), "design.json is missing")
    other = tmp_path / "e"
    assert run("build", "--gpus", 64, "-o", other, "-q").exit_code == 0
    (other / "spec.yaml").write_text((other / "spec.yaml").read_text().replace("gpus: 64", "gpus: 128"))
    one_error(run("analyze", other, "-q"), "spec.yaml was changed after topo wrote it")
    assert run("analyze", other, "--gpus", 256, "-q").exit_code == 0  # flags override: a fabric of its own


def test_check_finds_what_changed_and_passes_a_whole_folder(tmp_path):
    design = tmp_path / "d"
    assert run("build", "--gpus", 256, "--unnumbered", "-o", design, "-q").exit_code == 0
    result = run("check", design, "-q")
    assert result.exit_code == 0 and "BGP session ends consistent" in result.stdout, result.output
    frr = design / "switches" / "cluster-leaf-su00-r0" / "frr.conf"
    frr.write_text(frr.read_text().replace("remote-as 64512", "remote-as 64999"))
    (design / "extra.txt").write_text("x")
    result = run("check", design, "-q", "--format", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert not report["ok"]
    assert any("changed since topo wrote them (1): switches/cluster-leaf-su00-r0/frr.conf" in p
               for p in report["problems"])
    assert any("extra.txt" in p for p in report["problems"])
    assert any("remote-as 64999, but cluster-spine-00 is AS 64512" in p for p in report["problems"])


def test_json_output_is_never_nan(tmp_path):
    result = run("analyze", "--gpus", 64, "--switch-latency-ns", "nan", "-q", "--format", "json")
    one_error(result, "--switch-latency-ns nan")
    result = run("analyze", "--gpus", 64, "--step-latency-us", "inf", "-q")
    one_error(result, "--step-latency-us inf")


def test_yaml_is_read_as_meant(tmp_path):
    for text, fragment in (("gpus: 64\ngpus: 128\n", "key 'gpus' is given twice (first on line 1)"),
                           ("gpus: 0200\n", "0200 has a leading zero"),
                           ("gpus: 0x40\n", "gpus: expected a whole number")):
        spec = tmp_path / "s.yaml"
        spec.write_text(text)
        one_error(run("build", "-f", spec, "-o", tmp_path / "o", "-q"), fragment)


def test_host_names_are_unique_without_regard_to_case(tmp_path):
    table = tmp_path / "hosts.csv"
    table.write_text("node,hostname\n0,GPU1\n1,gpu1\n")
    one_error(run("build", "--gpus", 16, "--hostnames", table, "-o", tmp_path / "o", "-q"),
              "host names that differ only in case")
    with pytest.raises(SpecError, match="also the name of a switch"):
        build_fabric(load_spec({"gpus": 16, "hostnames": "CLUSTER-SPINE-{node:02d}"}))


# --- units where people write them ------------------------------------------------------------------


def test_units_where_people_write_them(tmp_path):
    result = run("build", "--gpus", "1k", "--nic-gbps", "400G", "--port-gbps", "0.4T", "-o", tmp_path / "o",
                 "--no-configs", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["gpus"] == 1024
    assert "gpus: 1k read as 1,024 GPUs" in result.stderr
    result = run("analyze", "--gpus", 64, "--sizes", "8GB,1G", "--format", "json")
    assert [row["size_bytes"] for row in json.loads(result.stdout)["allreduce"]] == [8 * 10**9, 1 << 30]
    assert "--sizes 8GB: 8,000,000,000 bytes (GB is decimal; 8G or 8GiB is 8,589,934,592)" in result.stderr
    one_error(run("build", "--gpus", 1024, "--oversubscription", "1:3", "-o", tmp_path / "p", "-q"),
              "did you mean 3:1?")


def test_analyze_help_lists_only_what_the_analysis_uses():
    text = run("analyze", "--help").stdout
    for flag in ("--gpus", "--radix", "--oversubscription", "--qps", "--order"):
        assert flag in text
    for flag in ("--loopback-pool", "--qos", "--mtu", "--bfd", "--hostnames", "--cable-leaf-spine-m"):
        assert flag not in text
    assert run("analyze", "--gpus", 64, "--mtu", 9000, "--qos", "sonic", "-q").exit_code == 0  # still taken


@pytest.mark.parametrize("started", [0, 1])
def test_configs_render_in_one_process_where_no_worker_can_be_started(monkeypatch, started):
    """Where no more processes can be forked (a process limit), the configs are rendered in this
    process, with the same bytes; a worker that did start is stopped first."""
    import multiprocessing

    from topo.outputs.configs import config_files

    fabric = build_fabric(load_spec({"gpus": 1024}))
    expected = list(config_files(fabric, workers=1))
    real = multiprocessing.get_context
    made = []

    class NoFork:
        def __init__(self, method):
            self.context = real(method)
            self.Pipe = self.context.Pipe  # noqa: N815 (multiprocessing's name)

        def Process(self, *args, **kwargs):  # noqa: N802 (multiprocessing's name)
            if len(made) == started:
                raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
            made.append(self.context.Process(*args, **kwargs))
            return made[-1]

    monkeypatch.setattr(multiprocessing, "get_context", NoFork)
    assert list(config_files(fabric, workers=3)) == expected
    assert all(p.exitcode is not None for p in made)  # stopped and reaped


@pytest.mark.parametrize("rel", ["/etc/topo-test", "../outside", "a/../../outside", writer.LOCK])
def test_a_file_outside_the_folder_is_refused_and_nothing_is_written(tmp_path: Path, rel: str) -> None:
    root = tmp_path / "folder"
    root.mkdir()
    with pytest.raises(writer.OutputError, match="would be written outside the folder"):
        writer.write_file(root, rel, b"x", set(), "the folder")
    assert list(root.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["folder"]
    assert not os.path.exists("/etc/topo-test")
