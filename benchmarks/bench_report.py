"""Benchmark of the design review: the what-ifs, the busbw curve and the report's files, per size.

Every run is a fresh Python process. It builds one fabric (default spec except ``gpus`` and
``radix``), plans its cabling and analyses it as ``topo build`` does (none of that is timed here:
``bench_build.py`` and ``bench_analyze.py`` time it), then times:

* what-ifs: ``what_if(fabric, analysis.options, intact=analysis)``, the parts of each kind failed
  one at a time (``what_if_samples`` per kind);
* curve: ``busbw_curve(fabric, analysis.options)``, the all-reduce at the 18 sizes of the plot;
* report: ``report_files([review])`` with that review: the diagram, the two plots (matplotlib is
  imported in this step, as in a build) and both templates;

and reports the peak resident set size of the process. The results are printed on stdout as a
Markdown table (medians over ``--repeat`` runs); progress goes to stderr. With ``--write-docs``
the section between ``<!-- report-bench:start -->`` and ``<!-- report-bench:end -->`` of
``docs/report.md`` is replaced by the table and a description of the machine.

Usage::

    python benchmarks/bench_report.py [--sizes GPUS[:RADIX] ...] [--repeat N] [--write-docs]

This is a benchmark, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_build import _maxrss_kib, machine, mib, parse_size, replace_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "report.md"
START = "<!-- report-bench:start -->"
END = "<!-- report-bench:end -->"
DEFAULT_SIZES = ("1024", "16384", "131072:128")


def child(gpus: int, radix: int) -> None:
    """Measure one review in this (fresh) process and print the results as one JSON line."""
    sys.path.insert(0, str(ROOT))  # measure this source tree
    import time

    from topo.analysis.analyze import analyze, busbw_curve, what_if
    from topo.fabric import build_fabric
    from topo.cabling import plan_cabling
    from topo.outputs.caveats import caveats
    from topo.outputs.report import Review, report_files
    from topo.summary import summarize
    from topo.hardware.catalog import resolve_server
    from topo.spec import load_spec

    fabric = build_fabric(load_spec({"gpus": gpus, "radix": radix}))
    cabling = plan_cabling(fabric)
    server = resolve_server(fabric.spec)
    analysis = analyze(fabric, node=server.node_model())
    start = time.perf_counter()
    table = what_if(fabric, analysis.options, server.node_model(), intact=analysis)
    whatifs = time.perf_counter()
    curve = busbw_curve(fabric, analysis.options, server.node_model())
    curved = time.perf_counter()
    review = Review(fabric.spec.name, fabric, summarize(fabric, cabling), cabling, analysis,
                    tuple(caveats(fabric, analysis, cabling, server)), server, tuple(curve), table)
    files = report_files([review])
    done = time.perf_counter()
    print(json.dumps({
        "gpus": gpus, "radix": radix, "tiers": fabric.plan.tiers,
        "parts": sum(len(row["parts"]) for row in table.rows), "samples": table.samples,
        "hash_samples": table.hash_samples,
        "what_if_s": whatifs - start, "curve_s": curved - whatifs, "report_s": done - curved,
        "html_bytes": len(files["report.html"].encode()), "peak_kib": _maxrss_kib(),
    }))


def _matplotlib_version() -> str:
    import matplotlib

    return matplotlib.__version__


def run_once(gpus: int, radix: int) -> dict:
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(gpus), str(radix)],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"bench_report: {gpus:,} GPUs at radix {radix} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(results: list[list[dict]]) -> str:
    lines = ["| GPUs | radix | tiers | parts failed (per kind) | hash samples | what-ifs (s) | busbw curve (s) "
             "| report files (s) | report.html (KB) | peak (MiB) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for runs in results:
        first = runs[0]

        def med(key: str) -> str:
            return f"{statistics.median(r[key] for r in runs):.2f}"

        lines.append(f"| {first['gpus']:,} | {first['radix']} | {first['tiers']} | {first['parts']} "
                     f"({first['samples']}) | {first['hash_samples']} | {med('what_if_s')} | {med('curve_s')} "
                     f"| {med('report_s')} | {first['html_bytes'] / 1000:,.0f} | "
                     f"{mib(max(r['peak_kib'] for r in runs))} |")
    return "\n".join(lines)


def command(args: argparse.Namespace) -> str:
    parts = ["python benchmarks/bench_report.py"]
    if [f"{g}:{r}" if r != 64 else f"{g}" for g, r in args.sizes] != list(DEFAULT_SIZES):
        parts.append("--sizes " + " ".join(f"{g}:{r}" for g, r in args.sizes))
    if args.repeat != 3:
        parts.append(f"--repeat {args.repeat}")
    return " ".join(parts + ["--write-docs"])


def write_docs(section: str) -> None:
    replace_section(DOC, START, END, section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the design review (what-ifs, busbw curve, report files).")
    parser.add_argument("--sizes", nargs="+", type=parse_size, metavar="GPUS[:RADIX]",
                        default=[parse_size(s) for s in DEFAULT_SIZES],
                        help=f"fabric sizes, radix 64 unless given [{' '.join(DEFAULT_SIZES)}]")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size [3]")
    parser.add_argument("--write-docs", action="store_true", help="replace the measured section of docs/report.md")
    parser.add_argument("--child", nargs=2, type=int, metavar=("GPUS", "RADIX"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    results = []
    for gpus, radix in args.sizes:
        runs = []
        for i in range(args.repeat):
            print(f"bench: {gpus:,} GPUs, radix {radix}, run {i + 1}/{args.repeat} ...", end="", file=sys.stderr,
                  flush=True)
            run = run_once(gpus, radix)
            print(f" what-ifs {run['what_if_s']:.2f} s, report {run['report_s']:.2f} s", file=sys.stderr, flush=True)
            runs.append(run)
        results.append(runs)
    body = table(results)
    print(body)
    if args.write_docs:
        section = "\n".join([
            f"Measured on {datetime.date.today().isoformat()} with `{command(args)}` ({args.repeat} runs per "
            "size, each in a fresh process; medians of wall-clock seconds; peak is the process's peak resident "
            "set size, the fabric, its analysis and the report together).", "", body, "", "Machine:", "",
            *machine(), f"- matplotlib {_matplotlib_version()}"])
        write_docs(section)
        print("bench: updated docs/report.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
