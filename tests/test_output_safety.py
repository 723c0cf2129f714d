"""Nothing of the user's is lost: planted links and files, hand edits, folders of another kind,
a command's own inputs, and folders that only look like topo's temporary ones (docs/reliability.md,
"Output folders: nothing of the user's is lost" and "The build stamp")."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import topo.outputs.writer as writer
from topo.cli import main
from topo.outputs.manifest import MANIFEST, Stamp, changed_files, read_stamp
from topo.pipeline.sweep_run import CACHE_FORMAT, Cache

TRAIN = ("train", "--gpus", 64, "--model", "llama3-8b", "-q")
FRR = "switches/cluster-leaf-su00-r0/frr.conf"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="topo", catch_exceptions=False)


def one_error(result, *fragments: str, status: int = 1) -> None:
    """The exit status, no traceback, and every fragment in one of the stderr's Error lines."""
    assert result.exit_code == status, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert errors, result.stderr
    for fragment in fragments:
        assert any(fragment in line for line in errors), (fragment, result.stderr)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A design folder of ``topo build --gpus 16``, copied by each test that changes one."""
    folder = tmp_path_factory.mktemp("built") / "design"
    assert run("build", "--gpus", 16, "-o", folder, "-q").exit_code == 0
    return folder


def design(built: Path, where: Path) -> Path:
    copy = where / "design"
    shutil.copytree(built, copy, symlinks=True)
    return copy


# --- train -o: links and files planted at its names ----------------------------------------------


def test_train_output_never_writes_through_a_link_at_a_temporary_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / ".train.json.tmp").symlink_to(victim)  # the fixed temporary name topo once used
    assert run(*TRAIN, "-o", "train.json").exit_code == 0
    assert victim.read_text() == "precious"
    assert json.loads((tmp_path / "train.json").read_text())["step_time_s"]
    assert not (tmp_path / "train.json").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".train.json.tmp", "train.json", "victim.txt"]


def test_train_output_replaces_a_link_at_its_name_only_with_force_and_never_its_target(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "train.json"
    out.symlink_to(tmp_path / "nowhere")  # dangling: it exists all the same
    one_error(run(*TRAIN, "-o", out), f"--output {out}: exists; give --force")
    assert out.is_symlink() and not (tmp_path / "nowhere").exists()
    out.unlink()
    out.symlink_to(victim)
    one_error(run(*TRAIN, "-o", out), "exists; give --force")
    assert run(*TRAIN, "-o", out, "--force").exit_code == 0
    assert victim.read_text() == "precious"  # the link was replaced, not what it points to
    assert not out.is_symlink() and json.loads(out.read_text())["step_time_s"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.json", "victim.txt"]


def test_train_output_never_replaces_a_device_or_a_fifo_even_with_force(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for force in ((), ("--force",)):
        one_error(run(*TRAIN, "-o", fifo, *force), f"--output {fifo}: is not a regular file")
        assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_train_output_that_appears_meanwhile_is_not_replaced_without_force(tmp_path, monkeypatch):
    import topo.pipeline.train as train

    out = tmp_path / "train.json"
    real = train.result

    def result_and_meanwhile(*args, **kwargs):
        out.write_text("theirs")
        return real(*args, **kwargs)

    monkeypatch.setattr(train, "result", result_and_meanwhile)
    one_error(run(*TRAIN, "-o", out), f"--output {out}: exists; give --force")
    assert out.read_text() == "theirs"
    out.unlink()
    monkeypatch.setattr(train, "result", real)
    mkstemp = writer.tempfile.mkstemp

    def mkstemp_and_meanwhile(*args, **kwargs):  # after the last check, before the rename
        out.write_text("theirs")
        return mkstemp(*args, **kwargs)

    monkeypatch.setattr(writer.tempfile, "mkstemp", mkstemp_and_meanwhile)
    one_error(run(*TRAIN, "-o", out), "was written by someone else meanwhile; nothing was replaced")
    assert out.read_text() == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.json"]


# --- every command: never its own inputs ---------------------------------------------------------


def test_train_output_is_never_one_of_its_inputs_even_with_force(tmp_path, built):
    folder = design(built, tmp_path)
    spec = folder / "spec.yaml"
    before = spec.read_text()
    one_error(run("train", folder, "--model", "llama3-8b", "-q", "-o", spec, "--force"),
              f"--output {spec}: is {spec}, an input of this command")
    one_error(run("train", folder, "--model", "llama3-8b", "-q", "-o", folder / "design.json", "--force"),
              f"is inside {folder}, an input")
    own = tmp_path / "spec.yaml"
    own.write_text(before)
    one_error(run("train", "-f", own, "--model", "llama3-8b", "-q", "-o", own, "--force"), "an input of this command")
    workload = tmp_path / "workload.yaml"
    workload.write_text("model: llama3-8b\n")
    one_error(run("train", "--gpus", 64, "--workload", workload, "-q", "-o", workload, "--force"),
              f"is {workload}, an input")
    link = tmp_path / "link.json"
    link.symlink_to(own)
    one_error(run("train", "-f", own, "--model", "llama3-8b", "-q", "-o", link, "--force"), "an input")
    assert spec.read_text() == before and own.read_text() == before
    assert workload.read_text() == "model: llama3-8b\n"
    assert run("check", folder).exit_code == 0


def test_build_never_replaces_a_folder_that_holds_its_price_list(tmp_path, built):
    folder = design(built, tmp_path)
    prices = folder / "prices.yaml"
    shutil.copy(Path(__file__).parents[1] / "examples" / "prices" / "illustrative.yaml", tmp_path / "p.yaml")
    assert run("build", "--gpus", 16, "--prices", tmp_path / "p.yaml", "-o", folder, "--force", "-q").exit_code == 0
    assert prices.is_file()
    one_error(run("build", "--gpus", 16, "--prices", prices, "-o", folder, "--force", "-q"),
              f"holds {prices}, an input of this build")


def test_sweep_names_a_price_list_inside_the_folder_it_replaces_as_its_input(tmp_path):
    """The files the designs name (price list, host names, server profile) are inputs of the sweep
    as they are of a build: said so, not only as a file topo did not write."""
    out = tmp_path / "sweep"
    assert run("sweep", "--gpus", 16, "-o", out, "-q", "-j", 1, "--no-cache").exit_code == 0
    prices = out / "prices.yaml"
    shutil.copy(Path(__file__).parents[1] / "examples" / "prices" / "illustrative.yaml", prices)
    one_error(run("sweep", "--gpus", 16, "--prices", prices, "-o", out, "--force", "-q", "-j", 1, "--no-cache"),
              f"holds {prices}, an input of this sweep")
    assert prices.is_file() and read_stamp(out).command == "sweep"


def test_sweep_never_writes_its_cache_into_the_folder_it_replaces(tmp_path):
    out = tmp_path / "sweep"
    assert run("sweep", "--gpus", 16, "-o", out, "-q", "-j", 1, "--no-cache").exit_code == 0
    one_error(run("sweep", "--gpus", 16, "-o", out, "--force", "-q", "-j", 1, "--cache", out / "cache"),
              f"holds {out / 'cache'}, an input of this sweep")
    assert not (out / "cache").exists() and read_stamp(out).command == "sweep"


@pytest.mark.parametrize("output", [".", "", "/", "sub/.."])
def test_sweep_to_a_folder_without_a_name_of_its_own_is_one_error_line(tmp_path, monkeypatch, output):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    one_error(run("sweep", "--gpus", 16, "-o", output, "-q", "-j", 1), "is the working folder or holds it")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]
    assert not (tmp_path.parent / f"{tmp_path.name}.cache").exists()


def test_a_link_planted_at_the_sweeps_own_cache_name_is_never_followed(tmp_path):
    """OUTPUT.cache is a name topo chose: a link there is not followed (its entries would be
    written into, and trusted from, wherever it points); a --cache the user names may be one."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "sweep.cache").symlink_to(elsewhere)
    one_error(run("sweep", "--gpus", 16, "-o", tmp_path / "sweep", "-q", "-j", 1),
              f"the sweep's cache {tmp_path / 'sweep.cache'} is a symbolic link", "--cache")
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "sweep").exists()
    assert run("sweep", "--gpus", 16, "-o", tmp_path / "sweep", "-q", "-j", 1,
               "--cache", tmp_path / "sweep.cache").exit_code == 0
    assert len(list(elsewhere.iterdir())) == 1


@pytest.mark.parametrize("length", [250, 300], ids=["its-temporary-name-too-long", "too-long"])
@pytest.mark.parametrize("command", ["build", "report", "sweep"])
def test_an_output_name_too_long_is_one_error_line(tmp_path, built, monkeypatch, command, length):
    monkeypatch.chdir(tmp_path)
    args = {"build": ("build", "--gpus", 16), "report": ("report", built / "spec.yaml"),
            "sweep": ("sweep", "--gpus", 16, "-j", 1)}[command]
    one_error(run(*args, "-o", "a" * length, "-q"), "File name too long")
    assert list(tmp_path.iterdir()) == []


# --- --force and hand edits ----------------------------------------------------------------------


def test_force_refuses_a_folder_with_hand_edits_and_discard_edits_replaces_it(tmp_path, built):
    folder = design(built, tmp_path)
    frr = folder / FRR
    text = frr.read_text()
    frr.write_text(text.replace("router bgp", "router bgx", 1))  # the same size: found by its digest
    one_error(run("build", "--gpus", 16, "-o", folder, "--force", "-q"),
              f"in {folder}, '{FRR}' changed since topo wrote it", "--discard-edits")
    assert "router bgx" in frr.read_text()
    (folder / "README.md").write_text("my notes")  # another size: found without reading it
    (folder / "bom.csv").write_text("mine")
    (folder / "spec.yaml").write_text((built / "spec.yaml").read_text() + "# mine\n")
    one_error(run("build", "--gpus", 16, "-o", folder, "--force", "-q"),
              "'README.md', 'bom.csv', 'spec.yaml' and 1 more changed since topo wrote them")
    one_error(run("build", "--gpus", 16, "-o", folder, "--discard-edits", "-q"), "--discard-edits goes with --force",
              status=2)
    assert (folder / "README.md").read_text() == "my notes"
    assert run("build", "--gpus", 16, "-o", folder, "--force", "--discard-edits", "-q").exit_code == 0
    assert frr.read_text() == text and run("check", folder).exit_code == 0


def test_a_link_in_place_of_a_listed_file_is_a_change_and_never_read(tmp_path, built):
    folder = design(built, tmp_path)
    (folder / "bom.csv").unlink()
    (folder / "bom.csv").symlink_to("/dev/zero")  # reading it would never end
    one_error(run("build", "--gpus", 16, "-o", folder, "--force", "-q"), "'bom.csv' changed")
    stamp = read_stamp(folder)
    changed, unchanged = changed_files(folder, stamp)
    assert changed == ["bom.csv"] and len(unchanged) == len(stamp.files) - 1


def test_changed_files_checks_sizes_first_and_rereads_only_what_moved(tmp_path, built, monkeypatch):
    import topo.outputs.manifest as manifest

    folder = design(built, tmp_path)
    stamp = read_stamp(folder)
    assert stamp.sizes == {rel: (folder / rel).stat().st_size for rel in stamp.files}
    read = []
    real = manifest._sha256_of
    monkeypatch.setattr(manifest, "_sha256_of", lambda path, key: read.append(path) or real(path, key))
    (folder / "README.md").write_text("shorter")
    changed, unchanged = changed_files(folder, stamp)
    assert changed == ["README.md"] and str(folder / "README.md") not in read  # its size told
    assert len(read) == len(stamp.files) - 1
    read.clear()
    (folder / "bom.csv").write_text((folder / "bom.csv").read_text().upper())
    assert changed_files(folder, stamp, unchanged)[0] == ["README.md", "bom.csv"]
    assert read == [str(folder / "bom.csv")]  # the rest as seen before: not read again
    old = Stamp(stamp.files, {}, stamp.command)  # a stamp of an earlier topo: no sizes, every file read
    assert changed_files(folder, old)[0] == ["README.md", "bom.csv"]


def test_an_edit_made_while_topo_builds_is_found_after_the_swap(tmp_path, built, monkeypatch):
    import topo.pipeline.build as build

    folder = design(built, tmp_path)
    frr = folder / FRR
    real = build.build_files

    def build_files_and_meanwhile(*args, **kwargs):
        frr.write_text(frr.read_text().replace("router bgp", "router bgx", 1))
        yield from real(*args, **kwargs)

    monkeypatch.setattr(build, "build_files", build_files_and_meanwhile)
    one_error(run("build", "--gpus", 16, "-o", folder, "--force", "-q"),
              "changed while topo was building, so nothing was replaced", f"'{FRR}' changed")
    assert "router bgx" in frr.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["design"]


def test_without_renameat2_force_checks_the_old_folder_once_it_is_set_aside(tmp_path, built, monkeypatch):
    """Where the file system cannot exchange two folders, a file that lands in the old folder just
    before it is renamed aside (after any check made at its own name) is found, and nothing is lost."""
    folder = design(built, tmp_path)
    monkeypatch.setattr(writer, "_renameat2", lambda: None)
    real = os.rename
    late = [folder / "late.txt"]

    def rename_and_meanwhile(src, dst, *args, **kwargs):
        if Path(src) == folder and late:  # the old folder, about to go aside
            late.pop().write_text("written just now")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(writer.os, "rename", rename_and_meanwhile)
    one_error(run("build", "--gpus", 16, "-o", folder, "--force", "-q"),
              "changed while topo was building, so nothing was replaced", "'late.txt'")
    assert (folder / "late.txt").read_text() == "written just now"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["design"]
    (folder / "late.txt").unlink()
    assert run("build", "--gpus", 16, "-o", folder, "--force", "-q").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["design"]
    assert run("check", folder).exit_code == 0


def test_without_renameat2_a_folder_that_takes_the_name_meanwhile_is_kept_and_the_old_one_named(
        tmp_path, built, monkeypatch):
    folder = design(built, tmp_path)
    monkeypatch.setattr(writer, "_renameat2", lambda: None)
    real = os.rename

    def rename_and_meanwhile(src, dst, *args, **kwargs):
        if Path(dst) == folder and ".tmp-" in Path(src).name:  # the new folder, about to go in
            folder.mkdir()
            (folder / "theirs.txt").write_text("theirs")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(writer.os, "rename", rename_and_meanwhile)
    result = run("build", "--gpus", 16, "-o", folder, "--force", "-q")
    one_error(result, "was made by someone else while topo replaced it", "the folder that was there is now")
    aside = [p for p in tmp_path.iterdir() if p.name.startswith(".design.old-")]
    assert len(aside) == 1 and str(aside[0]) in result.stderr and (aside[0] / MANIFEST).is_file()
    assert (folder / "theirs.txt").read_text() == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == [aside[0].name, "design"]


@pytest.mark.parametrize("planted", ["dangling link", "file"])
def test_without_renameat2_something_planted_at_a_new_output_meanwhile_is_kept(tmp_path, monkeypatch, planted):
    import topo.pipeline.build as build

    out = tmp_path / "out"
    monkeypatch.setattr(writer, "_renameat2", lambda: None)
    real = build.build_files

    def build_files_and_meanwhile(*args, **kwargs):
        if planted == "file":
            out.write_text("theirs")
        else:
            out.symlink_to(tmp_path / "nowhere")
        yield from real(*args, **kwargs)

    monkeypatch.setattr(build, "build_files", build_files_and_meanwhile)
    one_error(run("build", "--gpus", 16, "-o", out, "-q"), "was written by someone else while topo was building")
    assert out.is_symlink() if planted != "file" else out.read_text() == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "without-renameat2"])
def test_an_interrupt_while_the_old_folder_is_checked_leaves_it_in_place(tmp_path, built, monkeypatch, exchange):
    """Ctrl-C (or SIGTERM) during the check of the old folder after it left its name: it is put
    back as it was, never removed unchecked with the temporary folder."""
    folder = design(built, tmp_path)
    frr = folder / FRR
    frr.write_text(frr.read_text().replace("router bgp", "router bgx", 1))  # an edit: --discard-edits
    if not exchange:
        monkeypatch.setattr(writer, "_renameat2", lambda: None)
    checks = []
    real = writer.OutputFolder._check_replaceable

    def check_then_interrupt(self, *args, **kwargs):
        checks.append(args[0])
        if len(checks) == 2:  # the check of the old folder, once it has left its name
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(writer.OutputFolder, "_check_replaceable", check_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        with writer.OutputFolder(folder, force=True, discard_edits=True) as out:
            out.write({"new.txt": "new", MANIFEST: "{}"})
    assert len(checks) == 2 and checks[1] != folder
    assert "router bgx" in frr.read_text() and not (folder / "new.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["design"]


# --- --force and folders of another kind ---------------------------------------------------------


def test_force_replaces_only_a_folder_of_its_own_command(tmp_path, built):
    folder = design(built, tmp_path)
    spec = tmp_path / "spec.yaml"
    shutil.copy(folder / "spec.yaml", spec)
    one_error(run("report", spec, "-o", folder, "--force", "-q"),
              f"output {folder} is a design folder (topo build), and topo report --force replaces only a "
              f"report folder (topo report)")
    one_error(run("sweep", "--gpus", 16, "-o", folder, "--force", "-q", "-j", 1, "--no-cache"),
              "is a design folder (topo build), and topo sweep --force replaces only a sweep folder")
    assert run("check", folder).exit_code == 0
    report = tmp_path / "review"
    assert run("report", spec, "-o", report, "-q").exit_code == 0
    assert read_stamp(report).command == "report"
    one_error(run("build", "--gpus", 16, "-o", report, "--force", "-q"),
              "is a report folder (topo report), and topo build --force replaces only a design folder")
    assert run("report", spec, "-o", report, "--force", "-q").exit_code == 0
    assert run("build", "--gpus", 16, "-o", folder, "--force", "-q").exit_code == 0


def test_a_stamp_of_an_earlier_topo_counts_as_the_kind_its_files_show(tmp_path, built):
    folder = design(built, tmp_path)
    path = folder / MANIFEST
    stamp = json.loads(path.read_text())
    del stamp["command"], stamp["sizes"]  # as topo wrote it before stamps named their command
    path.write_text(json.dumps(stamp, indent=2) + "\n")
    assert read_stamp(folder).command == "build"
    spec = tmp_path / "spec.yaml"
    shutil.copy(folder / "spec.yaml", spec)
    one_error(run("report", spec, "-o", folder, "--force", "-q"), "is a design folder (topo build)")
    assert run("build", "--gpus", 16, "-o", folder, "--force", "-q").exit_code == 0
    stamp["files"] = {"notes.txt": stamp["files"]["README.md"]}  # no file of any command: no kind
    (folder / "notes.txt").write_text("")
    shutil.rmtree(folder)
    folder.mkdir()
    (folder / "notes.txt").write_text((built / "README.md").read_text())
    (folder / MANIFEST).write_text(json.dumps(stamp, indent=2) + "\n")
    one_error(run("build", "--gpus", 16, "-o", folder, "--force", "-q"), "is a folder of no known kind")
    assert (folder / "notes.txt").is_file()


# --- tidying up: only what topo can prove it made ------------------------------------------------


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_tidying_up_removes_only_folders_topo_can_prove_it_made(tmp_path, built):
    legacy = tmp_path / ".out.tmp-abcd1234"  # named as an earlier topo named its temporary folders
    legacy.mkdir()
    (legacy / "thesis.tex").write_text("years of work")
    _age(legacy, 7200)
    no_lock = tmp_path / f".out.tmp-{1:020d}-4242"  # the name of a build's, but no lock in it
    no_lock.mkdir()
    (no_lock / "notes.txt").write_text("mine")
    linked = tmp_path / f".out.tmp-{2:020d}-4343"  # its "lock" a link to a file nobody holds
    linked.mkdir()
    (tmp_path / "lockish").write_text("")
    (linked / writer.LOCK).symlink_to(tmp_path / "lockish")
    (linked / "notes.txt").write_text("mine")
    aside = tmp_path / f".out.old-{4:020d}-4545-89abcdef"  # a whole old build folder set aside, an hour old: topo's
    shutil.copytree(built, aside)
    _age(aside, 7200)
    edited = tmp_path / f".out.old-{5:020d}-4646-89abcdef"  # the same, edited: the user's now
    shutil.copytree(built, edited)
    (edited / "README.md").write_text("mine")
    _age(edited, 7200)
    # a dated copy of a whole build (cp -a out .out.old-20261205): named as an earlier topo named the
    # folders it set aside, but those held the old folder one level down, never a stamp of their own
    backups = [tmp_path / ".out.old-20261205", tmp_path / ".out.tmp-backup01"]
    for backup in backups:
        shutil.copytree(built, backup)
        _age(backup, 7200)
    dead = tmp_path / f".out.tmp-{3:020d}-4444-0123abcd"  # a dead build's: its lock, free
    dead.mkdir()
    (dead / writer.LOCK).write_text("")
    assert run("build", "--gpus", 16, "-o", tmp_path / "out", "-q").exit_code == 0
    assert (legacy / "thesis.tex").read_text() == "years of work"
    assert (no_lock / "notes.txt").is_file() and (linked / "notes.txt").is_file()
    assert (edited / "README.md").read_text() == "mine"
    assert all((backup / MANIFEST).is_file() for backup in backups)
    assert not aside.exists() and not dead.exists()


def test_a_planted_entry_at_the_temporary_name_is_never_used(tmp_path, monkeypatch):
    monkeypatch.setattr(writer.time, "time_ns", lambda: 1)
    monkeypatch.setattr(writer.os, "getpid", lambda: 4242)
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / f".out.tmp-{1:020d}-4242").symlink_to(victim)  # what a predictable name would be
    assert run("build", "--gpus", 16, "-o", tmp_path / "out", "-q").exit_code == 0
    assert list(victim.iterdir()) == [] and (tmp_path / "out" / MANIFEST).is_file()


# --- the sweep cache -----------------------------------------------------------------------------


def test_the_sweep_cache_never_trusts_or_writes_through_a_planted_link(tmp_path):
    cache = Cache(tmp_path / "cache")
    cache.check()
    key = "0" * 64
    forged = tmp_path / "forged.json"
    text = json.dumps({"format": CACHE_FORMAT, "key": key, "row": {"busbw": 1e9}})
    forged.write_text(text)
    cache.path(key).symlink_to(forged)
    assert cache.get(key) is None  # computed again, not taken from where the link points
    cache.put(key, {"busbw": 1.0})
    assert forged.read_text() == text and not cache.path(key).is_symlink()
    assert cache.get(key) == {"busbw": 1.0}
    other = "1" * 64
    cache.path(other).mkdir()
    cache.put(other, {"busbw": 1.0})  # a folder in the way: the row is not kept, and that is said
    assert [path for path, _ in cache.unwritten] == [cache.path(other)]
    assert sorted(p.name for p in cache.folder.iterdir()) == [f"{key}.json", f"{other}.json"]


def test_train_output_without_renameat2_or_hard_links_still_replaces_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "_rename", lambda src, dst, flags: False)

    def no_hard_links(src, dst, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(writer.os, "link", no_hard_links)
    out = tmp_path / "train.json"
    assert run(*TRAIN, "-o", out).exit_code == 0
    assert json.loads(out.read_text())["step_time_s"]
    out.unlink()
    mkstemp = writer.tempfile.mkstemp

    def mkstemp_and_meanwhile(*args, **kwargs):  # after the last check, before the rename
        out.write_text("theirs")
        return mkstemp(*args, **kwargs)

    monkeypatch.setattr(writer.tempfile, "mkstemp", mkstemp_and_meanwhile)
    one_error(run(*TRAIN, "-o", out), "was written by someone else meanwhile; nothing was replaced")
    assert out.read_text() == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.json"]
