#!/usr/bin/env bash
# Install the system validators the tests run (scripts/test.sh runs this first): FRR, Slurm, Open
# MPI, Graphviz, shellcheck, yanglint, librsvg, headless Chromium, with apt-get as root, or with sudo
# when it needs no password; never with a prompt. Each validator is installed on its own terms: the
# first of its package names that this system's archive has a candidate for, and when installing
# them all at once fails, each on its own, so one that cannot be installed never keeps the others
# out. What is not installed is said in one line each; its tests are skipped, saying why.
# Needs dpkg and apt (Debian, Ubuntu); elsewhere it does nothing.
set -euo pipefail

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
