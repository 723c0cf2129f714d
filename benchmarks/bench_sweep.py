"""Benchmark of ``topo sweep``: designs per minute on local processes and on a local Dask cluster.

The sweep is the grid of ``examples/sweeps/sweep-12.yaml`` widened to 24 designs (1,024, 4,096, 16,384 GPUs x
1:1 and 3:1 x rail and rack x 1 and 4 queue pairs), with busbw at 1 MiB and 8 GiB and no cache, so
every design is computed. It runs, each in a fresh ``topo sweep`` process:

* locally with ``-j 1`` and ``-j 2`` (processes);
* on a Dask cluster of one scheduler and two single-threaded worker processes on 127.0.0.1, which
  the benchmark starts once (its start-up is not timed) and stops at the end;

and checks that the three give the same ``sweep.csv``. It reports the wall time and designs per
minute of each (median of ``--repeat`` runs). With ``--write-docs`` the section between
``<!-- sweep-bench:start -->`` and ``<!-- sweep-bench:end -->`` of ``docs/performance.md`` is
replaced by the table and a description of the machine.

Usage::

    python benchmarks/bench_sweep.py [--repeat N] [--write-docs]

This is a benchmark, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_build import machine, replace_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
START = "<!-- sweep-bench:start -->"
END = "<!-- sweep-bench:end -->"
GRID = ["--gpus", "1024", "--gpus", "4096", "--gpus", "16384", "--oversubscription", "1", "--oversubscription", "3",
        "--placement", "rail", "--placement", "rack", "--qps", "1", "--qps", "4", "--sizes", "1M,8G"]
DESIGNS = 24


def sweep(out: Path, extra: list[str]) -> float:
    """Wall seconds of one ``topo sweep`` process writing ``out``."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "topo.cli", "sweep", *GRID, "--no-cache", "-q", "-o", str(out), "--force",
                    *extra], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark topo sweep: designs per minute, local and on Dask.")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each way [3]")
    parser.add_argument("--write-docs", action="store_true", help="replace the measured section of docs/performance.md")
    args = parser.parse_args(argv)
    from distributed import LocalCluster

    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None)
        try:
            ways = [("local, 1 process (`-j 1`)", ["-j", "1"], "j1"), ("local, 2 processes (`-j 2`)", ["-j", "2"], "j2"),
                    ("Dask, 2 worker processes on 127.0.0.1", ["--scheduler", cluster.scheduler_address], "dask")]
            for label, extra, name in ways:
                for i in range(args.repeat):
                    print(f"bench: {label}, run {i + 1}/{args.repeat} ...", end="", file=sys.stderr, flush=True)
                    seconds = sweep(work / name, extra)
                    print(f" {seconds:.1f} s", file=sys.stderr, flush=True)
                    results.setdefault(label, []).append(seconds)
            csvs = {name: (work / name / "sweep.csv").read_bytes() for _, _, name in ways}
        finally:
            cluster.close()
    if len(set(csvs.values())) != 1:
        raise SystemExit("bench_sweep: the ways disagree on sweep.csv")
    lines = ["| how | designs | wall best (s) | wall median (s) | designs per minute (median) |",
             "|---|---:|---:|---:|---:|"]
    for label, runs in results.items():
        med = statistics.median(runs)
        lines.append(f"| {label} | {DESIGNS} | {min(runs):.1f} | {med:.1f} | {DESIGNS * 60 / med:.0f} |")
    body = "\n".join(lines)
    print(body)
    if args.write_docs:
        import distributed

        section = "\n".join([
            f"Measured on {datetime.date.today().isoformat()} with `python benchmarks/bench_sweep.py --write-docs` "
            f"({args.repeat} runs of each way, each a fresh `topo sweep` process with `--no-cache`; wall-clock "
            f"seconds, start-up and writing the folder included; the three give the same sweep.csv).", "", body, "",
            "Machine:", "", *machine(), f"- Dask distributed {distributed.__version__}"])
        replace_section(DOC, START, END, section)
        print("bench: updated docs/performance.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
