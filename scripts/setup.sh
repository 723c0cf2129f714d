#!/usr/bin/env bash
# Install topo into a virtual environment, .venv/ beside this repository's README:
#
#   bash scripts/setup.sh          topo and what it needs
#   bash scripts/setup.sh test     topo as an editable install (the tests read the source tree), plus
#                                  the test dependencies
#
# Inside an active virtual environment ($VIRTUAL_ENV), that environment is used instead. Works where
# the system Python refuses `pip install` (PEP 668) and where the venv module cannot install pip
# (Debian's and Ubuntu's python3 without the python3-venv package): pip is then fetched from the
# package index by scripts/bootstrap_pip.py and checked against the digest the index publishes.
# Needs no root and never prompts. Prints the environment's python on the last line of stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

target=(.)
case "${1:-}" in
  "") ;;
  test) target=(-e ".[test]") ;;
  *) echo "usage: bash scripts/setup.sh [test]" >&2; exit 2 ;;
esac

if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
  python="$VIRTUAL_ENV/bin/python"
else
  base="${PYTHON:-python3}"
  if ! command -v "$base" >/dev/null 2>&1; then
    echo "setup: $base not found; install Python 3.10 or newer (Debian/Ubuntu: apt-get install python3)" >&2
    exit 1
  fi
  if ! "$base" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "setup: topo needs Python 3.10 or newer; $base is $("$base" -V 2>&1)" >&2
    exit 1
  fi
  python=.venv/bin/python
  if [ ! -x "$python" ]; then
    echo "setup: making the virtual environment .venv" >&2
    if ! "$base" -m venv .venv >/dev/null 2>&1; then
      rm -rf .venv
      "$base" -m venv --without-pip .venv
    fi
  fi
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "setup: this Python's venv cannot install pip (no ensurepip); fetching pip from the package index" >&2
    "$python" scripts/bootstrap_pip.py
  fi
fi

echo "setup: installing ${target[*]} with $python" >&2
"$python" -m pip install -q --disable-pip-version-check "${target[@]}"
echo "setup: ready: $python" >&2
