#!/usr/bin/env bash
# Install everything the test suite needs, then run it. This is the README's test command and
# what CI runs on a fresh clone. Any arguments go to pytest (e.g. -k cli, -x).
#
# Python side: scripts/setup.sh test (the virtual environment .venv, or the active one).
# System side: real validators from the system's package manager, installed by
# scripts/install_validators.sh. FRR checks every frr.conf with its own parser, a throw-away
# slurmctld reads topology.conf, Open MPI maps the hostfile and the rankfile, Graphviz renders the
# DOT files, shellcheck reads the host script, yanglint (libyang2-tools or libyang3-tools) checks
# every config_db.json against SONiC's YANG models, librsvg draws the fabric diagram, headless
# Chromium renders the design review (report.html). They are installed with apt-get as root, or
# with sudo when it needs no password; never with a prompt. Tests whose validator is missing are
# skipped, saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_validators.sh

bash scripts/setup.sh test
if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
  python="$VIRTUAL_ENV/bin/python"
else
  python=.venv/bin/python
fi
exec "$python" -m pytest "$@"
