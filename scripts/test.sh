#!/usr/bin/env bash
# Install everything the test suite needs, then run it. This is the README's test command and
# what CI runs on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."

# Real validators from the system's package manager (none needed yet; see docs/testing.md).
APT_PACKAGES=()
if [ ${#APT_PACKAGES[@]} -gt 0 ]; then
  missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

python3 -m pip install -q --disable-pip-version-check -e ".[test]"
python3 -m pytest "$@"
