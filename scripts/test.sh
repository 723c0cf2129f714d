#!/usr/bin/env bash
# Install everything the test suite needs, then run it. This is the README's test command and
# what CI runs on a fresh clone. Any arguments go to pytest (e.g. -k cli, -x).
#
# Python side: scripts/setup.sh test (the virtual environment .venv, or the active one).
# System side: real validators from the system's package manager. FRR checks every frr.conf with
# its own parser, a throw-away slurmctld reads topology.conf, Open MPI maps the hostfile, Graphviz
# renders the DOT files, shellcheck reads the host script, yanglint (libyang2-tools) checks every
# config_db.json against SONiC's YANG models, librsvg draws the fabric diagram, headless Chromium
# renders the design review (report.html). They are installed with apt-get as root,
# or with sudo when it needs no password; never with a prompt. Tests whose validator is missing are
# skipped, saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(frr slurmctld slurm-client openmpi-bin graphviz shellcheck libyang2-tools librsvg2-bin chromium)
missing=()
if command -v dpkg >/dev/null 2>&1; then
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n); else sudo=(none); fi
  fi
  if [ "${sudo[*]}" = "none" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "test: not installing ${missing[*]} (needs apt-get as root or passwordless sudo); their tests will be skipped" >&2
  else
    "${sudo[@]}" apt-get update -qq || true
    # only what this system's archive has (Ubuntu has no chromium package outside snap): one
    # package it lacks must not stop the others
    available=()
    for pkg in "${missing[@]}"; do
      if apt-cache show "$pkg" >/dev/null 2>&1; then available+=("$pkg"); else
        echo "test: this system's package archive has no $pkg; its tests will be skipped" >&2; fi
    done
    if [ ${#available[@]} -gt 0 ]; then
      echo "test: installing validators: ${available[*]}" >&2
      if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${available[@]}" >/dev/null; then
        echo "test: apt-get could not install ${available[*]}; their tests will be skipped" >&2
      fi
    fi
  fi
fi

bash scripts/setup.sh test
if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
  python="$VIRTUAL_ENV/bin/python"
else
  python=.venv/bin/python
fi
exec "$python" -m pytest "$@"
