"""Benchmark of ``topo analyze``: analysis time, its parts and peak memory at several fabric sizes,
with networkx's generic max-flow on the whole GPU-level graph alongside.

Every run is a fresh Python process, so its peak resident set size (``ru_maxrss``) belongs to that
one case and run alone. A run builds one fabric (default spec except ``gpus`` and ``radix``; the
build is timed on its own) and then times one call of::

    analyze(fabric, AnalysisOptions(sizes=(1 << 30,), **extra))

that is hop counts, bisection (max-flow on the tier-aligned splits and 4 random splits), ECMP width
and the all-reduce at one message size of 1 GiB: NCCL's channels and connections, their ECMP
routes over the default 16 hash samples (fewer past the sub-flow budget, docs/model.md), the
slowest connection of each sample, NCCL's tuner, and the max-min rates of the median sample. ``extra`` is empty for the main rows; two more cases run by default at 65,536 GPUs:
``--order random --qps 4`` (a shuffled job with 4 queue pairs per connection: 4x the sub-flows,
most of them crossing pods) and ``--fail-random 0.01`` (1% of the switch-to-switch links down: the
analysis runs twice, with the faults and intact, for the comparison); and one at 131,072 GPUs on
radix 128 with ``--planes 2 --nic-gbps 800`` (two planes of 400G NIC ports: twice the server links,
and hops, ECMP width and the least cut worked out plane by plane), and one there with
``--dual-tor True`` (every NIC bonded over two 200G links to a leaf pair: twice the server links,
and the bonds' queue pairs, 2 a connection by default, routed over both); and one at 131,072 GPUs
of 800G leaves under 400G spines and cores (``--leaf-switch eth-51t-64x800 --spine-switch
eth-51t-128x400``, radix 64: every leaf uplink port broken out into two 400G links).

The parts of the analysis are timed inside that same call by wrapping the functions
``topo.analyze`` calls: ``hop_counts``, ``bisection``, ``ecmp_width`` and ``allreduce``, and inside
the all-reduce ``route`` and ``solve_rates``. Memory, per run:

* imports: peak RSS after the imports, before any work;
* after build: peak RSS after the build;
* analysis adds: the peak RSS during the analysis minus the RSS when it started (the peak is reset
  after the build through ``/proc/self/clear_refs`` where Linux allows it; elsewhere the column is
  empty);
* peak: peak RSS of the whole process (absolute, nothing subtracted).

The networkx comparison, for each size of ``--networkx-sizes`` (default 65,536 GPUs), runs in its
own fresh processes: it takes the worst tier-aligned split (least max-flow in topo's bisection,
ties to the higher tier: ``half-of-the-pods`` in three tiers) and builds a ``networkx.DiGraph`` of
the whole fabric at GPU level: one vertex per NIC, one per switch, every link as two arcs with its
capacity in Gb/s (parallel links summed), a super source with an arc to every side-A NIC and an arc
from every side-B NIC to a super sink (each with the capacity of the NIC's link). It times the construction, then
``networkx.maximum_flow_value`` alone (networkx's default, preflow-push), checks the value against
topo's max-flow of that split, and times ``topo.analysis.bisection.maxflow_networkx`` (the same flow on the
reduced switch-level network that topo uses, built as a networkx graph) for reference.

The results are printed on stdout as Markdown tables, followed by PASS/MISS for each target;
progress goes to stderr. With ``--write-docs`` the section between the markers
``<!-- analyze-bench:start -->`` and ``<!-- analyze-bench:end -->`` of ``docs/performance.md`` is
replaced by the tables, the target results and a description of the machine.

Usage::

    python benchmarks/bench_analyze.py [--sizes GPUS[:RADIX] ...] [--heavy-sizes ...]
        [--faults-sizes ...] [--planes-sizes ...] [--dual-tor-sizes ...] [--speeds-sizes ...]
        [--networkx-sizes ...] [--repeat N] [--write-docs]

This is a benchmark, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_build import _maxrss_kib, machine, mib, parse_size, replace_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
START = "<!-- analyze-bench:start -->"
END = "<!-- analyze-bench:end -->"

GIB = 1 << 30
DEFAULT_SIZES = ("1024", "16384", "65536")
#: Extra cases (AnalysisOptions fields besides sizes) and the sizes they run at by default.
HEAVY = {"order": "random", "qps": 4}
FAULTS = {"fail_random": 0.01}
DEFAULT_EXTRA_SIZES = ("65536",)
#: A multi-plane case (spec fields besides gpus and radix): 800G NICs as two 400G ports in two planes.
PLANES = {"planes": 2, "nic_gbps": 800}
DEFAULT_PLANES_SIZES = ("131072:128",)
#: A dual-ToR case: every NIC bonded over two 200G links to a leaf pair (twice the server links).
DUAL_TOR = {"dual_tor": True}
DEFAULT_DUAL_TOR_SIZES = ("131072:128",)
#: Tiers of different port speeds: 64 x 800G leaves (400G NICs) under 128 x 400G spines and cores.
SPEEDS = {"leaf_switch": "eth-51t-64x800", "spine_switch": "eth-51t-128x400"}
DEFAULT_SPEEDS_SIZES = ("131072:64",)

#: Targets: on a 2-core machine, this many GPUs (radix 64) analysed in at most this many seconds
#: (median of the runs, build excluded) with at most this peak memory (whole process), and the
#: analysis this many times faster than networkx's max-flow alone on the GPU-level graph.
TARGET_GPUS = 65536
TARGET_RADIX = 64
TARGET_SECONDS = 6.0
TARGET_BYTES = 2e9  # 2 GB
TARGET_SPEEDUP = 4.0
TARGET_CORES = 2

#: Parts of the analysis, timed by wrapping these names in the module that calls them: the analyses
#: in topo.analysis.analyze, the all-reduce model in the door (topo.analysis.pricing), routing and
#: rating in the model (topo.analysis.allreduce).
PARTS = ("hop_counts", "bisection", "ecmp_width", "allreduce", "route", "solve_rates")
PART_MODULES = {"hop_counts": "analyze", "bisection": "analyze", "ecmp_width": "analyze",
                "allreduce": "pricing", "route": "allreduce", "solve_rates": "allreduce"}


# --- the children: one case, one run ----------------------------------------------------------


def _rss_kib() -> int | None:
    """Current resident set size (Linux), or None."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _reset_peak() -> bool:
    """Reset the process's peak RSS to its current RSS (Linux 4.0+); True when it worked."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    now = _rss_kib()
    return now is not None and _maxrss_kib() <= now + 4096


def _instrument() -> dict[str, float]:
    """Wrap the functions named in PARTS, where PART_MODULES calls them, with timers; returns the
    seconds per name."""
    import functools
    import importlib
    import time

    spent: dict[str, float] = {}
    for name in PARTS:
        module = importlib.import_module(f"topo.analysis.{PART_MODULES[name]}")
        func = getattr(module, name, None)
        if func is None:
            print(f"bench: {module.__name__} has no {name}; that part is not timed", file=sys.stderr)
            continue
        spent[name] = 0.0

        def timed(*args, _func=func, _name=name, **kwargs):
            start = time.perf_counter()
            try:
                return _func(*args, **kwargs)
            finally:
                spent[_name] += time.perf_counter() - start

        setattr(module, name, functools.wraps(func)(timed))
    return spent


def child_analyze(gpus: int, radix: int, extra: dict) -> None:
    """Build, then analyse once, in this (fresh) process; print the results as one JSON line."""
    sys.path.insert(0, str(ROOT))  # measure this source tree
    import time

    from topo.analysis.analyze import AnalysisOptions, analyze
    from topo.fabric import build_fabric
    from topo.spec import load_spec

    from topo.spec import FIELDS

    spec_extra = {k: v for k, v in extra.items() if k in FIELDS}
    extra = {k: v for k, v in extra.items() if k not in FIELDS}
    baseline = _maxrss_kib()
    build_start = time.perf_counter()
    fabric = build_fabric(load_spec({"gpus": gpus, "radix": radix, **spec_extra}))
    built = time.perf_counter()
    build_peak = _maxrss_kib()
    rss_before = _rss_kib()
    reset = rss_before is not None and _reset_peak()
    spent = _instrument()
    options = AnalysisOptions(sizes=(GIB,), **extra)
    analysis_start = time.perf_counter()
    result = analyze(fabric, options)
    analysed = time.perf_counter()
    end_peak = _maxrss_kib()
    print(json.dumps({
        "gpus": gpus,
        "radix": radix,
        "extra": {**spec_extra, **extra},
        "tiers": fabric.plan.tiers,
        "links": len(fabric.links),
        "splits": len(result.bisection.splits),
        "subflows": result.allreduce.details["subflows"],
        "links_down": result.faults.links_down,
        "maxflow_gbps": result.bisection.maxflow_gbps,
        "busbw_GBps": result.allreduce.rows[-1]["busbw_GBps"],
        "build_s": built - build_start,
        "analyze_s": analysed - analysis_start,
        "parts_s": spent,
        "baseline_kib": baseline,
        "build_peak_kib": build_peak,
        "analysis_adds_kib": end_peak - rss_before if reset else None,
        "peak_kib": max(build_peak, end_peak),
    }))


def gpu_level_digraph(fabric, side_a):
    """The whole fabric as a networkx DiGraph at GPU level, with a super source and sink.

    Vertices: one per NIC (node-leaf link, in link row order, as ``Split.side_a``), then the
    switches, then the source and the sink. Every link is two arcs with its capacity in Gb/s,
    parallel links summed; the source has an arc to every side-A NIC and every side-B NIC an arc
    to the sink, each with the capacity of the NIC's link. A NIC joins only its own leaf, so no
    flow passes through a server, as in topo's network. Returns (graph, source, sink).
    """
    import networkx as nx
    import numpy as np

    links = fabric.links
    nic = np.flatnonzero(links.kind == 0)
    count = nic.size
    leaf0 = fabric.first(1)
    vertices = count + len(fabric.names) - leaf0
    source, sink = vertices, vertices + 1
    lo = links.lo.astype(np.int64) - leaf0 + count
    lo[nic] = np.arange(count)
    hi = links.hi.astype(np.int64) - leaf0 + count
    pair, inverse = np.unique(lo * vertices + hi, return_inverse=True)
    gbps = np.bincount(inverse.reshape(-1), weights=links.gbps, minlength=pair.size).astype(np.int64)
    u, v, cap = (pair // vertices).tolist(), (pair % vertices).tolist(), gbps.tolist()
    side = np.asarray(side_a, dtype=bool)
    nic_gbps = links.gbps[nic].astype(np.int64)

    graph = nx.DiGraph()
    graph.add_nodes_from(range(vertices + 2))
    graph.add_edges_from((a, b, {"capacity": c}) for a, b, c in zip(u, v, cap))
    graph.add_edges_from((b, a, {"capacity": c}) for a, b, c in zip(u, v, cap))
    graph.add_edges_from((source, e, {"capacity": c})
                         for e, c in zip(np.flatnonzero(side).tolist(), nic_gbps[side].tolist()))
    graph.add_edges_from((e, sink, {"capacity": c})
                         for e, c in zip(np.flatnonzero(~side).tolist(), nic_gbps[~side].tolist()))
    return graph, source, sink


def child_networkx(gpus: int, radix: int) -> None:
    """Max-flow of the worst tier-aligned split: topo, and networkx on the GPU-level graph."""
    sys.path.insert(0, str(ROOT))  # measure this source tree
    import time

    import networkx as nx

    from topo.analysis.bisection import bisection, maxflow_networkx, tier_aligned_splits
    from topo.fabric import build_fabric
    from topo.spec import load_spec

    baseline = _maxrss_kib()
    fabric = build_fabric(load_spec({"gpus": gpus, "radix": radix}))
    build_peak = _maxrss_kib()
    start = time.perf_counter()
    result = bisection(fabric)
    bisection_s = time.perf_counter() - start
    tier = [flow for flow in result.splits if flow.kind == "tier"]
    worst = min(reversed(tier), key=lambda flow: flow.gbps)  # ties: the higher tier
    split = next(s for s in tier_aligned_splits(fabric) if s.name == worst.name)

    start = time.perf_counter()
    reduced = maxflow_networkx(fabric, split)
    reduced_s = time.perf_counter() - start

    start = time.perf_counter()
    graph, source, sink = gpu_level_digraph(fabric, split.side_a)
    construct_s = time.perf_counter() - start
    start = time.perf_counter()
    value = nx.maximum_flow_value(graph, source, sink)
    flow_s = time.perf_counter() - start
    if not value == reduced == worst.gbps:
        raise SystemExit(f"bench_analyze: max-flow of {split.name} at {gpus:,} GPUs: networkx GPU-level "
                         f"{value}, networkx reduced {reduced}, topo {worst.gbps}")
    print(json.dumps({
        "gpus": gpus,
        "radix": radix,
        "split": split.name,
        "gbps": int(value),
        "vertices": graph.number_of_nodes(),
        "arcs": graph.number_of_edges(),
        "bisection_s": bisection_s,
        "reduced_s": reduced_s,
        "construct_s": construct_s,
        "flow_s": flow_s,
        "baseline_kib": baseline,
        "build_peak_kib": build_peak,
        "peak_kib": _maxrss_kib(),
    }))


# --- the parent: runs, tables, targets, docs --------------------------------------------------


def flags(extra: dict) -> str:
    """The topo analyze flags of an options dict (besides --sizes), or 'defaults'."""
    if not extra:
        return "defaults"
    return " ".join(f"--{key.replace('_', '-')} {value}" for key, value in extra.items())


@dataclass
class Case:
    gpus: int
    radix: int
    extra: dict
    runs: list[dict]

    def times(self, key: str) -> list[float]:
        return [run[key] for run in self.runs]

    def median(self, key: str) -> float:
        return statistics.median(self.times(key))

    @property
    def first(self) -> dict:
        return self.runs[0]

    @property
    def median_run(self) -> dict:
        """The run with the median analysis time (the lower middle one for an even count)."""
        ordered = sorted(self.runs, key=lambda run: run["analyze_s"])
        return ordered[(len(ordered) - 1) // 2]

    def most(self, key: str) -> int | None:
        values = [run[key] for run in self.runs if run.get(key) is not None]
        return max(values) if values else None


def run_child(args: list[str], what: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args], capture_output=True, text=True, cwd=ROOT,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"bench_analyze: {what} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def mib_or_dash(kib: int | None) -> str:
    return "–" if kib is None else mib(kib)


def sec(seconds: float) -> str:
    return f"{seconds:.2f}" if seconds >= 1 else f"{seconds:.3f}"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}" if seconds >= 0.1 else f"{seconds * 1e3:,.1f}"


def analysis_table(cases: list[Case]) -> str:
    headers = [
        "GPUs", "radix", "options", "sub-flows", "build median (s)", "analysis best (s)",
        "analysis median (s)", "RSS after imports (MiB)", "peak after build (MiB)",
        "analysis adds (MiB)", "peak RSS (MiB)",
    ]
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if h == "options" else "---:" for h in headers) + "|"]
    for c in cases:
        analysis = c.times("analyze_s")
        row = [
            f"{c.gpus:,}", str(c.radix), f"`{flags(c.extra)}`", f"{c.first['subflows']:,}",
            f"{c.median('build_s'):.2f}", f"{min(analysis):.2f}", f"{statistics.median(analysis):.2f}",
            mib(c.most("baseline_kib")), mib(c.most("build_peak_kib")),
            mib_or_dash(c.most("analysis_adds_kib")), mib(c.most("peak_kib")),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def parts_table(cases: list[Case]) -> str:
    headers = [
        "GPUs", "options", "hops (ms)", "bisection (ms)", "ECMP width (ms)", "all-reduce: route (ms)",
        "all-reduce: rates (ms)", "all-reduce: rest (ms)", "other (ms)", "total (ms)",
    ]
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if h == "options" else "---:" for h in headers) + "|"]
    for c in cases:
        run = c.median_run
        p = run["parts_s"]
        allreduce = p.get("allreduce")
        named = [p.get(k) for k in ("hop_counts", "bisection", "ecmp_width", "route", "solve_rates")]
        rest = None if allreduce is None else allreduce - (p.get("route") or 0) - (p.get("solve_rates") or 0)
        top = [p.get(k) for k in ("hop_counts", "bisection", "ecmp_width", "allreduce")]
        other = run["analyze_s"] - sum(t for t in top if t is not None)
        cells = [ms(t) if t is not None else "–" for t in named + [rest]]
        row = [f"{c.gpus:,}", f"`{flags(c.extra)}`", *cells, ms(other), ms(run["analyze_s"])]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def networkx_table(comparisons: list[Case]) -> str:
    headers = [
        "GPUs", "split", "max-flow (Gb/s)", "vertices", "arcs", "construction median (s)",
        "`maximum_flow_value` best (s)", "`maximum_flow_value` median (s)",
        "`maxflow_networkx` median (s)", "topo `bisection` median (s)", "peak RSS (MiB)",
    ]
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if h == "split" else "---:" for h in headers) + "|"]
    for c in comparisons:
        f = c.first
        row = [
            f"{c.gpus:,}", f"`{f['split']}`", f"{f['gbps']:,}", f"{f['vertices']:,}", f"{f['arcs']:,}",
            sec(c.median("construct_s")), sec(min(c.times("flow_s"))), sec(c.median("flow_s")),
            sec(c.median("reduced_s")), sec(c.median("bisection_s")), mib(c.most("peak_kib")),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def targets(cases: list[Case], comparisons: list[Case]) -> list[str]:
    """PASS/MISS lines for the targets (SKIP when the target size was not measured)."""
    limit_mib = TARGET_BYTES / 1024**2
    size = f"{TARGET_GPUS:,} GPUs (radix {TARGET_RADIX})"
    what_time = f"{size} analysed in <= {TARGET_SECONDS:g} s"
    what_mem = f"{size} analysis run peak RSS <= 2 GB ({limit_mib:,.0f} MiB)"
    what_speed = (f"{size} whole analysis >= {TARGET_SPEEDUP:g}x faster than networkx's "
                  f"`maximum_flow_value` alone on the GPU-level graph")
    match = [c for c in cases if c.gpus == TARGET_GPUS and c.radix == TARGET_RADIX and not c.extra]
    nx_match = [c for c in comparisons if c.gpus == TARGET_GPUS and c.radix == TARGET_RADIX]
    lines = []
    if match:
        c = match[0]
        analysis = statistics.median(c.times("analyze_s"))
        peak = c.most("peak_kib")
        lines += [
            f"- {'PASS' if analysis <= TARGET_SECONDS else 'MISS'}: {what_time}: median {analysis:.2f} s "
            f"(best {min(c.times('analyze_s')):.2f} s; the build, {c.median('build_s'):.2f} s, not included)",
            f"- {'PASS' if peak * 1024 <= TARGET_BYTES else 'MISS'}: {what_mem}: highest peak of "
            f"{len(c.runs)} runs {mib(peak)} MiB (imports, build and analysis)",
        ]
    else:
        lines += [f"- SKIP: {what_time} (size not measured)", f"- SKIP: {what_mem} (size not measured)"]
    if match and nx_match:
        analysis = statistics.median(match[0].times("analyze_s"))
        flow = min(nx_match[0].times("flow_s"))
        ratio = flow / analysis
        lines.append(
            f"- {'PASS' if ratio >= TARGET_SPEEDUP else 'MISS'}: {what_speed}: networkx best {flow:.2f} s "
            f"/ analysis median {analysis:.2f} s = {ratio:.1f}x"
        )
    else:
        lines.append(f"- SKIP: {what_speed} (size not measured)")
    cores = os.cpu_count()
    if cores != TARGET_CORES:
        lines.append(
            f"- note: the targets are set for a {TARGET_CORES}-core machine; this one has {cores} cores"
        )
    return lines


def command(args: argparse.Namespace) -> str:
    parts = ["python benchmarks/bench_analyze.py"]
    for name in ("sizes", "heavy_sizes", "faults_sizes", "networkx_sizes"):
        given = [f"{g}:{r}" if r != 64 else str(g) for g, r in getattr(args, name)]
        default = list(DEFAULT_SIZES if name == "sizes" else DEFAULT_EXTRA_SIZES)
        if given != default:
            parts.append(" ".join([f"--{name.replace('_', '-')}", *given]))
    if args.repeat != 3:
        parts.append(f"--repeat {args.repeat}")
    return " ".join(parts + ["--write-docs"])


def docs_section(args: argparse.Namespace, tables: list[tuple[str, str]], checks: list[str]) -> str:
    today = datetime.date.today().isoformat()
    lines = [
        f"Measured on {today} with `{command(args)}` ({args.repeat} runs per case, each in a fresh "
        "process; times are wall-clock seconds, memory is the process's peak resident set size).",
        "",
    ]
    for caption, table in tables:
        lines += [caption, "", table, ""]
    return "\n".join(lines + ["Targets:", "", *checks, "", "Machine:", "", *machine()])


def write_docs(section: str) -> None:
    replace_section(DOC, START, END, section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark topo analyze (analysis time, its parts, peak memory) per fabric size, "
                    "with networkx's max-flow on the GPU-level graph for comparison.",
    )
    sizes = {"type": parse_size, "nargs": "*", "metavar": "GPUS[:RADIX]"}
    parser.add_argument("--sizes", **sizes, default=[parse_size(s) for s in DEFAULT_SIZES],
                        help=f"sizes analysed with the default options [{' '.join(DEFAULT_SIZES)}]")
    parser.add_argument("--heavy-sizes", **sizes, default=[parse_size(s) for s in DEFAULT_EXTRA_SIZES],
                        help=f"sizes also analysed with `{flags(HEAVY)}` (none: skip) [65536]")
    parser.add_argument("--faults-sizes", **sizes, default=[parse_size(s) for s in DEFAULT_EXTRA_SIZES],
                        help=f"sizes also analysed with `{flags(FAULTS)}` (none: skip) [65536]")
    parser.add_argument("--planes-sizes", **sizes, default=[parse_size(s) for s in DEFAULT_PLANES_SIZES],
                        help=f"sizes also built and analysed with `{flags(PLANES)}` (none: skip) [131072:128]")
    parser.add_argument("--dual-tor-sizes", **sizes, default=[parse_size(s) for s in DEFAULT_DUAL_TOR_SIZES],
                        help=f"sizes also built and analysed with `{flags(DUAL_TOR)}` (none: skip) [131072:128]")
    parser.add_argument("--speeds-sizes", **sizes, default=[parse_size(s) for s in DEFAULT_SPEEDS_SIZES],
                        help=f"sizes also built and analysed with `{flags(SPEEDS)}` (none: skip) [131072:64]")
    parser.add_argument("--networkx-sizes", **sizes, default=[parse_size(s) for s in DEFAULT_EXTRA_SIZES],
                        help="sizes of the networkx max-flow comparison (none: skip) [65536]")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case [3]")
    parser.add_argument("--write-docs", action="store_true",
                        help="replace the measured section of docs/performance.md")
    parser.add_argument("--child", nargs=3, metavar=("GPUS", "RADIX", "OPTIONS"), help=argparse.SUPPRESS)
    parser.add_argument("--child-networkx", nargs=2, type=int, metavar=("GPUS", "RADIX"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_analyze(int(args.child[0]), int(args.child[1]), json.loads(args.child[2]))
        return 0
    if args.child_networkx:
        child_networkx(*args.child_networkx)
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    plan = ([(g, r, {}) for g, r in args.sizes] + [(g, r, HEAVY) for g, r in args.heavy_sizes]
            + [(g, r, FAULTS) for g, r in args.faults_sizes] + [(g, r, PLANES) for g, r in args.planes_sizes]
            + [(g, r, DUAL_TOR) for g, r in args.dual_tor_sizes] + [(g, r, SPEEDS) for g, r in args.speeds_sizes])
    cases = []
    for gpus, radix, extra in plan:
        runs = []
        for i in range(args.repeat):
            print(f"bench: {gpus:,} GPUs, radix {radix}, {flags(extra)}, run {i + 1}/{args.repeat} ...",
                  end="", file=sys.stderr, flush=True)
            run = run_child(["--child", str(gpus), str(radix), json.dumps(extra)],
                            f"{gpus:,} GPUs at radix {radix} ({flags(extra)})")
            print(f" build {run['build_s']:.2f} s, analysis {run['analyze_s']:.2f} s, "
                  f"peak {mib(run['peak_kib'])} MiB", file=sys.stderr, flush=True)
            runs.append(run)
        for run in runs[1:]:  # the analysis is deterministic: every run must agree
            for key in ("subflows", "maxflow_gbps", "busbw_GBps", "links_down"):
                if run[key] != runs[0][key]:
                    raise SystemExit(f"bench_analyze: runs disagree on {key} at {gpus:,} GPUs "
                                     f"({flags(extra)})")
        cases.append(Case(gpus, radix, extra, runs))

    comparisons = []
    for gpus, radix in args.networkx_sizes:
        runs = []
        for i in range(args.repeat):
            print(f"bench: networkx max-flow, {gpus:,} GPUs, radix {radix}, "
                  f"run {i + 1}/{args.repeat} ...", end="", file=sys.stderr, flush=True)
            run = run_child(["--child-networkx", str(gpus), str(radix)],
                            f"networkx comparison at {gpus:,} GPUs, radix {radix}")
            print(f" construction {run['construct_s']:.2f} s, maximum_flow_value {run['flow_s']:.2f} s, "
                  f"peak {mib(run['peak_kib'])} MiB", file=sys.stderr, flush=True)
            runs.append(run)
        comparisons.append(Case(gpus, radix, {}, runs))

    tables = [("Analysis time and memory:", analysis_table(cases)),
              ("Parts of the analysis, from the run with the median analysis time:", parts_table(cases))]
    if comparisons:
        tables.append(("Max-flow of the worst tier-aligned split with networkx, in separate processes "
                       "(construction of the GPU-level graph and `maximum_flow_value` on it timed apart):",
                       networkx_table(comparisons)))
    checks = targets(cases, comparisons)
    print("\n\n".join(f"{caption}\n\n{table}" for caption, table in tables))
    print()
    print("\n".join(checks))
    if args.write_docs:
        write_docs(docs_section(args, tables, checks))
        print("bench: updated docs/performance.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
