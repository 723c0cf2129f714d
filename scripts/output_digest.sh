#!/usr/bin/env bash
# Digest of everything topo writes for a fixed set of commands: every file of every folder, every
# command's stdout and stderr and its exit status, one "sha256  name" line each, sorted.
#
# For a change that must not change any output (a refactor): run it before and after, and diff.
#
#   bash scripts/output_digest.sh > before.txt     # on the old code
#   bash scripts/output_digest.sh > after.txt      # on the new code
#   diff before.txt after.txt                      # nothing: same bytes
#
# TOPO selects the command (default: .venv/bin/topo). --quick runs a smaller set (about a third).
set -uo pipefail
cd "$(dirname "$0")/.."
topo="${TOPO:-$PWD/.venv/bin/topo}"
quick=0
[ "${1:-}" = "--quick" ] && quick=1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
repo="$PWD"
cd "$work"

n=0
run() {  # run NAME ARGS...: topo ARGS, its stdout, stderr and exit status kept under NAME
  local name="$1"; shift
  n=$((n + 1))
  (cd "$work" && "$topo" "$@" >"$work/out.$name.stdout" 2>"$work/out.$name.stderr"; echo $? >"$work/out.$name.rc")
}

for ex in "$repo"/examples/*.yaml; do
  b="$(basename "$ex" .yaml)"
  if [ $quick = 1 ] && [ "$b" != fat-tree-k8 ] && [ "$b" != h100-1024 ]; then continue; fi
  run "ex-$b" build -f "$ex" -o "ex-$b" -q
done
run default build --gpus 1024 -o default -q --format json
run ib build --gpus 512 --switch ndr-64x400 -o ib -q
run planes build --gpus 4096 --switch eth-51t-128x400 --nic-gbps 800 --planes 2 -o planes -q --no-configs
run dualtor build --gpus 256 --dual-tor -o dualtor -q
run analyze-default analyze default --format json -q
run analyze-text analyze --gpus 2048 --oversubscription 3 -q
run train train default --model llama3-70b --format json -q
run train-text train --gpus 512 --model llama3-8b --scale 128,256,512 --what-if -q
run check check default --format json -q
run report report default -o report -q
run servers servers --format json
run switches switches
run templates templates --format json
run bad-gpus build --gpus 0 -o bad -q
run bad-switch build --gpus 64 --switch nope -o bad2 -q
if [ $quick = 0 ]; then
  run three build --gpus 32768 --tiers 3 -o three -q --no-configs
  run rack build --gpus 768 --placement rack --oversubscription 3 -o rack -q
  run compare report ex-fat-tree-k8 ex-h100-1024 -o compare -q
  run sweep sweep --sweep "$repo/examples/sweeps/sweep-12.yaml" -o sweep -q --no-cache
  run report-sweep report default --sweep sweep -o report-sweep -q
  run train-faults train --gpus 1024 --model gpt3-175b --fail-random 0.01 --format json -q
fi

# the folders' files and the commands' streams, by name; a folder's name stands for its path
find . -type f ! -name '*.lock' | LC_ALL=C sort | while read -r f; do
  printf '%s  %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "${f#./}"
done
echo "commands: $n" >&2
