"""Benchmark of ``topo train``: one configuration per catalogue model at 16,384 GPUs, and a 10-point
scaling curve, in time and peak memory.

Each measurement runs in a fresh Python process (so its peak resident set size is its own):

* config: ``load_spec`` + ``build_fabric`` + ``train_step`` of one catalogue model's recipe on
  16,384 GPUs (8 x 400G per server, two tiers of radix 64 or three, as sized), median of
  ``--repeat`` runs;
* curve: ``topo.pipeline.train.curve`` of GPT-3 175B (tp 8, pp 8, global batch 15,360) at 512 to
  16,384 GPUs, 10 points, each point a fabric built and a step priced;
* the CLI: the wall time of ``topo train`` for the curve, start-up and printing included.

Targets (the issue's): a single configuration in under 2 s at 16,384 GPUs on 2 cores, a 10-point
curve in under 20 s. With ``--write-docs`` the section between ``<!-- train-bench:start -->`` and
``<!-- train-bench:end -->`` of ``docs/train.md`` is replaced by the table, the targets and the
machine.

Usage::

    python benchmarks/bench_train.py [--repeat N] [--write-docs]

This is a benchmark, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_build import _maxrss_kib, machine, mib, replace_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "train.md"
START, END = "<!-- train-bench:start -->", "<!-- train-bench:end -->"
GPUS = 16384
#: Each catalogue model's recipe at 16,384 GPUs, with a global batch that the data parallelism divides.
CONFIGS = {
    "gpt3-175b": {"global_batch": 16384},
    "llama3-8b": {"global_batch": 16384},
    "llama3-70b": {"global_batch": 8192},
    "llama3-405b": {"global_batch": 4096},
    "gpt-1t": {"global_batch": 12288},
    "deepseek-v3": {"global_batch": 61440},
}
CURVE = [512, 1024, 2048, 3072, 4096, 6144, 8192, 10240, 12288, 16384]
CURVE_WORKLOAD = {"model": "gpt3-175b", "tp": 8, "pp": 8, "vpp": 1, "global_batch": 15360}
TARGET_CONFIG_S, TARGET_CURVE_S = 2.0, 20.0


def child(kind: str, name: str) -> None:
    """One measurement, printed as JSON on stdout."""
    sys.path.insert(0, str(ROOT))
    from topo import build_fabric, load_spec
    from topo.analysis.analyze import AnalysisOptions
    from topo.analysis.training import train_step
    from topo.pipeline.train import curve
    from topo.workload import workload_from

    start = time.perf_counter()
    if kind == "config":
        spec = load_spec({"gpus": GPUS})
        fabric = build_fabric(spec)
        built = time.perf_counter()
        step = train_step(fabric, workload_from({"model": name, **CONFIGS[name]}))
        out = {"build_s": built - start, "price_s": time.perf_counter() - built, "step_s": step.step_time_s,
               "mfu": step.mfu}
    else:
        points = curve(load_spec({"gpus": CURVE[0]}), workload_from(CURVE_WORKLOAD), AnalysisOptions(), CURVE)
        out = {"points": len([p for p in points if "error" not in p]), "efficiency": points[-1]["scaling_efficiency"]}
    out["seconds"] = time.perf_counter() - start
    out["peak_kib"] = _maxrss_kib()
    print(json.dumps(out))


def run_child(kind: str, name: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", kind, name], cwd=ROOT, check=True,
                          capture_output=True, text=True)
    return json.loads(proc.stdout)


def cli_curve() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "topo.cli", "train", "--gpus", str(CURVE[0]), "--model", "gpt3-175b",
                    "--tp", "8", "--pp", "8", "--vpp", "1", "--global-batch", "15360",
                    "--scale", ",".join(map(str, CURVE)), "-q"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark topo train: one configuration and a scaling curve.")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement [3]")
    parser.add_argument("--write-docs", action="store_true", help="replace the measured section of docs/train.md")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    lines = ["| what | GPUs | build (s) | price (s) | total, median (s) | peak memory (MiB) | step | MFU |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    worst = 0.0
    for name in CONFIGS:
        runs = []
        for i in range(args.repeat):
            print(f"bench: {name} at {GPUS:,} GPUs, run {i + 1}/{args.repeat} ...", end="", file=sys.stderr,
                  flush=True)
            runs.append(run_child("config", name))
            print(f" {runs[-1]['seconds']:.2f} s", file=sys.stderr, flush=True)
        med = statistics.median(r["seconds"] for r in runs)
        worst = max(worst, med)
        r = runs[0]
        lines.append(f"| {name} ({', '.join(f'{k} {v:,}' for k, v in CONFIGS[name].items())}) | {GPUS:,} | "
                     f"{statistics.median(x['build_s'] for x in runs):.2f} | "
                     f"{statistics.median(x['price_s'] for x in runs):.2f} | {med:.2f} | {mib(max(x['peak_kib'] for x in runs))} | "
                     f"{r['step_s']:.3g} s | {100 * r['mfu']:.1f}% |")
    curves = []
    for i in range(args.repeat):
        print(f"bench: curve of {len(CURVE)} points, run {i + 1}/{args.repeat} ...", end="", file=sys.stderr, flush=True)
        curves.append(run_child("curve", "gpt3-175b"))
        print(f" {curves[-1]['seconds']:.2f} s", file=sys.stderr, flush=True)
    curve_s = statistics.median(c["seconds"] for c in curves)
    lines.append(f"| scaling curve, GPT-3 175B tp 8 pp 8, {len(CURVE)} points | {CURVE[0]:,} to {CURVE[-1]:,} | | | "
                 f"{curve_s:.2f} | {mib(max(c['peak_kib'] for c in curves))} | | |")
    cli = statistics.median(cli_curve() for _ in range(args.repeat))
    lines.append(f"| the same curve with `topo train --scale` (start-up included) | | | | {cli:.2f} | | | |")
    body = "\n".join(lines)
    checks = [f"- one configuration at {GPUS:,} GPUs: slowest median {worst:.2f} s (target under "
              f"{TARGET_CONFIG_S:g} s): {'PASS' if worst < TARGET_CONFIG_S else 'MISS'}",
              f"- a {len(CURVE)}-point curve: {curve_s:.2f} s (target under {TARGET_CURVE_S:g} s): "
              f"{'PASS' if curve_s < TARGET_CURVE_S else 'MISS'}"]
    print(body)
    print("\n".join(checks))
    if args.write_docs:
        section = "\n".join([
            f"Measured on {datetime.date.today().isoformat()} with `python benchmarks/bench_train.py --write-docs` "
            f"({args.repeat} runs of each, each in a fresh Python process; wall-clock seconds; peak memory is the "
            f"process's peak resident set size):", "", body, "", "Targets:", "", *checks, "", "Machine:", "",
            *machine()])
        replace_section(DOC, START, END, section)
        print("bench: updated docs/train.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
