"""Benchmark of the metrics: hop counts, bisection and ECMP width at several fabric sizes.

For each size (default spec except ``gpus`` and ``radix``) the fabric is built once, untimed; then
each analysis runs ``--repeat`` times and the best and median wall times are printed, for the
intact fabric and with 1% of the switch-to-switch links failed at random (seed 0). ``bisection``
runs with its defaults (the tier-aligned splits and 4 random splits). The last table compares one
max-flow (the ``half-of-the-pods`` split, or ``half-of-each-pod`` in two tiers) computed with
scipy (``split_maxflow``, network construction included) and with networkx
(``maxflow_networkx``), at the sizes given by ``--networkx-sizes``.

Usage::

    python benchmarks/bench_metrics.py [--sizes GPUS[:RADIX] ...] [--repeat N]

This is a benchmark, not a test: it is not collected by pytest. Tables go to stdout, progress to
stderr.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # measure this source tree

from topo import build_fabric, load_spec  # noqa: E402
from topo.bisection import bisection, maxflow_networkx, split_maxflow, tier_aligned_splits  # noqa: E402
from topo.ecmp import ecmp_width  # noqa: E402
from topo.faults import apply_faults  # noqa: E402
from topo.hops import hop_counts  # noqa: E402

DEFAULT_SIZES = ("1024", "16384", "65536", "131072:128")
NETWORKX_SIZES = ("1024", "16384", "65536")
ANALYSES = {"hop_counts": hop_counts, "bisection": bisection, "ecmp_width": ecmp_width}


def parse_size(text: str) -> tuple[int, int]:
    gpus, _, radix = text.partition(":")
    try:
        return int(gpus.replace(",", "").replace("_", "")), int(radix) if radix else 64
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPUS or GPUS:RADIX, got {text!r}") from None


def timed(call, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=parse_size, default=[parse_size(s) for s in DEFAULT_SIZES])
    parser.add_argument("--networkx-sizes", nargs="*", type=parse_size,
                        default=[parse_size(s) for s in NETWORKX_SIZES])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    rows = []
    for gpus, radix in args.sizes:
        print(f"{gpus:,} GPUs, radix {radix}", file=sys.stderr)
        fabric = build_fabric(load_spec({"gpus": gpus, "radix": radix}))
        faults = apply_faults(fabric, fraction=0.01, seed=0)
        for name, analysis in ANALYSES.items():
            intact = timed(lambda: analysis(fabric), args.repeat)
            faulted = timed(lambda: analysis(fabric, faults), args.repeat)
            rows.append((gpus, radix, name, intact, faulted))
    print("| GPUs | radix | analysis | intact best (s) | intact median (s) | 1% links down best (s) "
          "| 1% links down median (s) |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for gpus, radix, name, intact, faulted in rows:
        print(f"| {gpus:,} | {radix} | `{name}` | {min(intact):.3f} | {statistics.median(intact):.3f} "
              f"| {min(faulted):.3f} | {statistics.median(faulted):.3f} |")

    if args.networkx_sizes:
        print()
        print("| GPUs | radix | split | Gb/s | scipy (s) | networkx (s) |")
        print("|---:|---:|---|---:|---:|---:|")
    for gpus, radix in args.networkx_sizes:
        print(f"networkx comparison: {gpus:,} GPUs, radix {radix}", file=sys.stderr)
        fabric = build_fabric(load_spec({"gpus": gpus, "radix": radix}))
        split = tier_aligned_splits(fabric)[-1]
        fast = timed(lambda: split_maxflow(fabric, split), args.repeat)
        slow = timed(lambda: maxflow_networkx(fabric, split), 1)
        value, check = split_maxflow(fabric, split), maxflow_networkx(fabric, split)
        if value != check:
            raise SystemExit(f"bench_metrics: scipy {value} != networkx {check} at {gpus} GPUs")
        print(f"| {gpus:,} | {radix} | `{split.name}` | {value:,} | {min(fast):.4f} | {min(slow):.2f} |")


if __name__ == "__main__":
    main()
