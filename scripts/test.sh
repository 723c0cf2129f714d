#!/usr/bin/env bash
# Install everything the test suite needs, then run it. This is the README's test command and
# what CI runs on a fresh clone. Any arguments go to pytest (e.g. -k cli, -x).
#
# Python side: scripts/setup.sh test (the virtual environment .venv, or the active one).
# System side: real validators from the system's package manager. FRR checks every frr.conf with
# its own parser, a throw-away slurmctld reads topology.conf, Open MPI maps the hostfile, Graphviz
# renders the DOT files, shellcheck reads the host script, yanglint (libyang2-tools, or libyang3-tools) checks every
# config_db.json against SONiC's YANG models, librsvg draws the fabric diagram, headless Chromium
# renders the design review (report.html). They are installed with apt-get as root,
# or with sudo when it needs no password; never with a prompt. Tests whose validator is missing are
# skipped, saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

# One line per validator: its packages, with "|" between alternatives (the first name this system's
# archive has a candidate for is taken). Debian 12 and Ubuntu 24.04 have libyang2-tools, Debian 13
# libyang3-tools; Debian has chromium, Ubuntu chromium-browser (which installs the snap).
VALIDATORS=(
  "frr"
  "slurmctld slurm-client"
  "openmpi-bin"
  "graphviz"
  "shellcheck"
  "libyang2-tools|libyang3-tools"
  "librsvg2-bin"
  "chromium|chromium-browser"
)

installed() {  # is one of the alternatives $1 ("a|b") installed?
  local alt
  for alt in ${1//|/ }; do
    [ "$(dpkg-query -W -f '${db:Status-Status}' "$alt" 2>/dev/null)" = installed ] && return 0
  done
  return 1
}

candidate() {  # the first of the alternatives $1 that the archive can install, or nothing
  local alt policy
  for alt in ${1//|/ }; do
    # apt-cache show succeeds for a name that is only known; a candidate is what apt-get installs
    # (read whole: grep -q on a pipe would stop apt-cache early, failing the pipeline)
    policy=$(LC_ALL=C apt-cache policy "$alt" 2>/dev/null || true)
    if grep -q '^  Candidate: [^(]' <<< "$policy"; then echo "$alt"; return; fi
  done
}

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for validator in "${VALIDATORS[@]}"; do
    for pkg in $validator; do
      installed "$pkg" || { missing+=("$validator"); break; }
    done
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
    # each validator's packages, as this system's archive names them
    groups=()
    for validator in "${missing[@]}"; do
      group=()
      for pkg in $validator; do
        found=$(candidate "$pkg")
        if [ -z "$found" ]; then
          echo "test: this system's package archive has no ${pkg//|/ or }; its tests will be skipped" >&2
          group=(); break
        fi
        group+=("$found")
      done
      if [ ${#group[@]} -gt 0 ]; then groups+=("${group[*]}"); fi
    done
    apt_install() {
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    }
    if [ ${#groups[@]} -gt 0 ]; then
      # all at once, and when that fails each validator on its own: one that cannot be installed
      # never keeps the others out
      read -r -a all <<< "${groups[*]}"
      echo "test: installing validators: ${all[*]}" >&2
      if ! apt_install "${all[@]}"; then
        for group in "${groups[@]}"; do
          read -r -a some <<< "$group"
          apt_install "${some[@]}" || echo "test: apt-get could not install ${some[*]}; their tests will be skipped" >&2
        done
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
