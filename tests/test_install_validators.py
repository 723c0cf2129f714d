"""scripts/install_validators.sh (the system half of the README's test command) on the package
archives of Debian 12, Debian 13 and Ubuntu 24.04, played by fake apt-get, apt-cache and
dpkg-query scripts that answer as those archives do and record every call: each validator is
installed under the name the archive has, and one that cannot be installed never keeps the others
out."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT

SCRIPT = ROOT / "scripts" / "install_validators.sh"
BASH = shutil.which("bash")

#: the names each archive has a candidate for (Debian 13 dropped libyang2-tools for libyang3-tools;
#: Ubuntu 24.04 has chromium-browser, the deb that installs the snap, and no chromium)
COMMON = ["frr", "slurmctld", "slurm-client", "openmpi-bin", "graphviz", "shellcheck", "librsvg2-bin"]
ARCHIVES = {
    "debian-12": COMMON + ["libyang2-tools", "chromium"],
    "debian-13": COMMON + ["libyang3-tools", "chromium"],
    "ubuntu-24.04": COMMON + ["libyang2-tools", "chromium-browser"],
}
#: names the archive knows without a candidate: `apt-cache show` succeeds for them, as on Debian 13
KNOWN_ONLY = {"debian-13": ["libyang2-tools"], "ubuntu-24.04": ["chromium"]}

FAKES = {
    "dpkg-query": r'''#!/bin/sh
# dpkg-query -W -f '${db:Status-Status}' NAME
for last; do :; done
grep -qx "$last" "$FAKE_APT/installed" 2>/dev/null && { printf installed; exit 0; }
exit 1
''',
    "apt-cache": r'''#!/bin/sh
echo "apt-cache $*" >> "$FAKE_APT/calls"
name=$2
if grep -qx "$name" "$FAKE_APT/candidates"; then
  printf '%s:\n  Installed: (none)\n  Candidate: 1.0-1\n  Version table:\n     1.0-1 500\n' "$name"
elif grep -qx "$name" "$FAKE_APT/known"; then
  [ "$1" = show ] && { echo "Package: $name"; exit 0; }
  printf '%s:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n' "$name"
fi
exit 0
''',
    "apt-get": r'''#!/bin/sh
echo "apt-get $*" >> "$FAKE_APT/calls"
[ "$1" = update ] && exit 0
shift
names=""
for arg; do case $arg in -*) ;; *) names="$names $arg" ;; esac; done
for name in $names; do
  grep -qx "$name" "$FAKE_APT/candidates" || { echo "E: Package '$name' has no installation candidate" >&2; exit 100; }
  grep -qx "$name" "$FAKE_APT/broken" 2>/dev/null && { echo "E: $name: post-installation script failed" >&2; exit 100; }
done
for name in $names; do echo "$name" >> "$FAKE_APT/installed"; done
''',
    "id": '#!/bin/sh\n[ "$1" = -u ] && { echo "${FAKE_UID:-0}"; exit 0; }\nexec /usr/bin/id "$@"\n',
}


def run_install(tmp_path: Path, archive: str, installed=(), broken=(), uid: int = 0) -> tuple[subprocess.CompletedProcess,
                                                                                              list[str]]:
    fake = tmp_path / "apt"
    bin_ = tmp_path / "bin"
    for folder in (fake, bin_):
        folder.mkdir(exist_ok=True)
    (fake / "candidates").write_text("".join(f"{n}\n" for n in ARCHIVES[archive]))
    (fake / "known").write_text("".join(f"{n}\n" for n in KNOWN_ONLY.get(archive, [])))
    (fake / "installed").write_text("".join(f"{n}\n" for n in installed))
    (fake / "broken").write_text("".join(f"{n}\n" for n in broken))
    (fake / "calls").unlink(missing_ok=True)
    for name, text in FAKES.items():
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    # sudo is not there: as a user without it, nothing may be installed
    path = f"{bin_}:{os.path.dirname(shutil.which('grep'))}"
    env = {"PATH": path, "FAKE_APT": str(fake), "FAKE_UID": str(uid), "HOME": str(tmp_path)}
    run = subprocess.run([BASH, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    calls = (fake / "calls").read_text().splitlines() if (fake / "calls").exists() else []
    return run, calls


def installs(calls: list[str]) -> list[list[str]]:
    """The package names of each ``apt-get install`` call."""
    return [[a for a in c.split()[2:] if not a.startswith("-")] for c in calls if c.startswith("apt-get install")]


def groups(archive: str) -> list[list[str]]:
    """Each validator's packages under this archive's names, in the script's order."""
    yang, browser = {"debian-12": ("libyang2-tools", "chromium"), "debian-13": ("libyang3-tools", "chromium"),
                     "ubuntu-24.04": ("libyang2-tools", "chromium-browser")}[archive]
    return [["frr"], ["slurmctld", "slurm-client"], ["openmpi-bin"], ["graphviz"], ["shellcheck"], [yang],
            ["librsvg2-bin"], [browser]]


@pytest.mark.parametrize("archive", sorted(ARCHIVES))
def test_every_validator_is_installed_under_the_name_of_this_archive(archive, tmp_path):
    run, calls = run_install(tmp_path, archive)
    assert run.returncode == 0, run.stderr
    assert calls[0] == "apt-get update -qq"
    everything = [name for group in groups(archive) for name in group]
    assert installs(calls) == [everything]  # one apt-get for them all
    assert sorted((tmp_path / "apt" / "installed").read_text().split()) == sorted(ARCHIVES[archive])
    assert run.stderr == f"test: installing validators: {' '.join(everything)}\n"
    # a second run finds them all and does nothing
    again, calls = run_install(tmp_path, archive, installed=ARCHIVES[archive])
    assert (again.returncode, again.stderr, calls) == (0, "", [])


def test_a_validator_that_fails_to_install_never_keeps_the_others_out(tmp_path):
    run, calls = run_install(tmp_path, "ubuntu-24.04", broken=["chromium-browser"])  # the snap cannot install, say
    assert run.returncode == 0, run.stderr
    everything = [name for group in groups("ubuntu-24.04") for name in group]
    assert installs(calls) == [everything] + groups("ubuntu-24.04")  # all at once, then each on its own
    assert sorted((tmp_path / "apt" / "installed").read_text().split()) == sorted(
        set(ARCHIVES["ubuntu-24.04"]) - {"chromium-browser"})
    # apt-get's own error lines, then one line of the script's
    assert run.stderr.splitlines()[-1] == "test: apt-get could not install chromium-browser; their tests will be skipped"
    assert sum(line.startswith("test: apt-get could not") for line in run.stderr.splitlines()) == 1


def test_a_validator_the_archive_lacks_is_said_and_the_others_installed(tmp_path):
    # an archive without chromium, with frr and graphviz installed already
    run, calls = run_install(tmp_path, "debian-13", installed=["frr", "graphviz"])
    assert installs(calls) == [["slurmctld", "slurm-client", "openmpi-bin", "shellcheck", "libyang3-tools",
                                "librsvg2-bin", "chromium"]]
    (tmp_path / "apt" / "installed").write_text("")
    ARCHIVES["debian-13-no-chromium"] = [n for n in ARCHIVES["debian-13"] if n != "chromium"]
    try:
        run, calls = run_install(tmp_path, "debian-13-no-chromium", installed=["frr", "graphviz"])
    finally:
        del ARCHIVES["debian-13-no-chromium"]
    assert run.returncode == 0, run.stderr
    assert installs(calls) == [["slurmctld", "slurm-client", "openmpi-bin", "shellcheck", "libyang3-tools",
                                "librsvg2-bin"]]
    assert run.stderr.splitlines() == [
        "test: this system's package archive has no chromium or chromium-browser; its tests will be skipped",
        "test: installing validators: slurmctld slurm-client openmpi-bin shellcheck libyang3-tools librsvg2-bin"]


def test_without_root_or_passwordless_sudo_nothing_is_installed_and_one_line_says_so(tmp_path):
    run, calls = run_install(tmp_path, "debian-13", uid=1000)
    assert run.returncode == 0
    assert calls == []
    assert run.stderr == ("test: not installing frr slurmctld slurm-client openmpi-bin graphviz shellcheck "
                          "libyang2-tools|libyang3-tools librsvg2-bin chromium|chromium-browser (needs apt-get as root "
                          "or passwordless sudo); their tests will be skipped\n")
