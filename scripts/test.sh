#!/usr/bin/env bash
# Install everything the test suite needs, then run it. This is the README's test command and
# what CI runs on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."

# Real validators from the system's package manager: FRR checks every frr.conf with its own
# parser, a throw-away slurmctld reads topology.conf, Open MPI maps the hostfile, Graphviz renders
# the DOT files, shellcheck reads the host script. Tests whose validator is missing are skipped,
# saying why.
APT_PACKAGES=(frr slurmctld slurm-client openmpi-bin graphviz shellcheck)
missing=()
if command -v dpkg >/dev/null 2>&1; then
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  if command -v apt-get >/dev/null 2>&1 && { [ -z "$SUDO" ] || command -v sudo >/dev/null 2>&1; }; then
    echo "installing validators: ${missing[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "warning: cannot install ${missing[*]} (no apt-get or sudo); their tests will be skipped" >&2
  fi
fi

python3 -m pip install -q --disable-pip-version-check -e ".[test]"
python3 -m pytest "$@"
