"""The analysis of a fabric: hops, bisection, ECMP width and the same-rank all-reduce.

:func:`analyze` runs every analysis on the fabric (with the faults asked for, if any) and, when
there are faults, on the intact fabric too, so the change can be reported. The all-reduce is
priced through the one door for collectives, :func:`topo.analysis.pricing.price` (the lossless
congestion model of ``docs/model.md``, in :mod:`topo.analysis.allreduce`). The what-ifs (one part
lost at a time), the busbw-against-size curve of a report and the work estimate of an analysis
are here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import AnalysisError
from ..fabric import Fabric
from ..hardware.servers import NodeModel
from ..spec import DUAL_TOR_QPS
from .allreduce import KEPT_DRAWS_BYTES, AllReduce
from .bisection import Bisection, bisection
from .choices import DEFAULT_HASH_SAMPLES, HASH_BUDGET, MIN_AUTO_SAMPLES
from .collective import MAX_CHANNELS, node_model_of, usable_pcie_gbps
from .ecmp import EcmpWidth, ecmp_width
from .faults import Faults, apply_faults, no_faults, plane_names
from .hops import HopCounts, hop_counts
from .options import AnalysisOptions
from .pricing import Network, price

if TYPE_CHECKING:  # pragma: no cover
    from ..caveats import Caveat


@dataclass(frozen=True, eq=False)
class Analysis:
    """Every analysis of one fabric (and of the intact fabric when faults were asked for)."""

    fabric: Fabric = field(repr=False)
    options: AnalysisOptions
    faults: Faults
    hops: HopCounts
    bisection: Bisection
    ecmp: EcmpWidth
    allreduce: AllReduce
    baseline: "Analysis | None" = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data; ``hops``, ``bisection``, ``allreduce`` keys are a stable interface."""
        plan = self.fabric.plan
        out: dict[str, Any] = {
            "fabric": {"name": self.fabric.spec.name, "gpus": self.fabric.spec.gpus,
                       "tiers": plan.tiers, "placement": plan.placement},
            "options": self.options.to_dict(),
            "hops": self.hops.to_dict(),
            "bisection": self.bisection.to_dict(),
            "ecmp": self.ecmp.to_dict(),
            "allreduce": self.allreduce.to_rows(),
            "allreduce_detail": self.allreduce.details,
            "faults": self.faults.to_dict() if self.faults.any or self.options.fail else None,
            "notes": self.notes(),
            "warnings": [c.to_dict() for c in self.caveats()],
        }
        if self.baseline is not None:
            out["change"] = self.change()
        return out

    def notes(self) -> list[str]:
        """Plain statements a reviewer must not miss (a cut fabric, a bisection disagreement)."""
        return [c.message for c in self.caveats()]

    def caveats(self) -> list["Caveat"]:
        """:meth:`notes` with their warning codes (:mod:`topo.caveats`)."""
        from ..caveats import Caveat
        notes = []
        if self.hops.unreachable_pairs:
            notes.append(Caveat("fabric-cut",
                f"the fabric is cut: {self.hops.unreachable_pairs:,} of {self.hops.pairs:,} GPU pairs "
                f"on different nodes have no route"
            ))
        unreachable = int((~self.allreduce.routes.reachable).sum())
        if unreachable:
            notes.append(Caveat("allreduce-unroutable",
                f"the all-reduce cannot complete: {unreachable:,} of its connections' queue pairs "
                f"have no route"
            ))
        if self.allreduce.details["nvlink_only"]:
            notes.append(Caveat("nvlink-only",
                f"the job fits in one node ({self.allreduce.job_gpus} GPUs): its all-reduce runs over NVLink "
                f"only and puts no traffic on the fabric; its figures are the node's"
            ))
        stopped = self.allreduce.details.get("stopped")
        if stopped:
            first = stopped["nic_links_down"][0]
            more = stopped["nic_links_down_count"] - 1
            others = f" and {more:,} more" if more else ""
            gone = stopped["nodes_without_nic"]
            without = (f"; {len(gone):,} node(s) have no NIC left and are left out ({', '.join(gone[:3])}"
                       f"{', ...' if len(gone) > 3 else ''})") if gone else ""
            notes.append(Caveat("job-stops",
                f"the job stops: NIC {first['nic']} of {first['node']}{others} lost its link, and NCCL does not "
                f"move a running connection to another NIC; the figures are for the job restarted on the "
                f"remaining NICs (their channels move to the next live NIC of the node){without}"
            ))
        if self.bisection.note and (not self.bisection.agrees or self.faults.any):
            notes.append(Caveat("bisection-differs", f"bisection: {self.bisection.note}"))
        return notes

    def change(self) -> dict[str, Any]:
        """Faulted against intact: bisection, hops and busbw at the largest message size."""
        base = self.baseline
        assert base is not None

        def pair(before: Any, after: Any) -> dict[str, Any]:
            entry = {"intact": before, "with_faults": after}
            if isinstance(before, (int, float)) and isinstance(after, (int, float)) and before:
                entry["change_pct"] = round(100.0 * (after - before) / before, 2) + 0.0  # no -0.0
            return entry

        big = self.allreduce.rows[-1]
        big0 = base.allreduce.rows[-1]
        return {
            "bisection_maxflow_gbps": pair(base.bisection.maxflow_gbps, self.bisection.maxflow_gbps),
            "diameter_links": pair(base.hops.diameter_links, self.hops.diameter_links),
            "mean_links": pair(base.hops.mean_links, self.hops.mean_links),
            "unreachable_pairs": pair(base.hops.unreachable_pairs, self.hops.unreachable_pairs),
            "busbw_GBps": {"size_bytes": big["size_bytes"], **pair(big0["busbw_GBps"], big["busbw_GBps"])},
        }


# --- the work of an analysis, estimated before it starts --------------------------------------------

#: Peak bytes of the all-reduce model per queue pair it routes (a connection's sub-flow), above the
#: fabric's own (fabric.memory_estimate) and the kept hash draws (KEPT_DRAWS_BYTES). Measured (peak
#: RSS, docs/performance.md): 650 B at 4,096 GPUs in topology order, 1.2 KiB in random order (every
#: queue pair hashed); 1 KiB with the kept draws' 256 MiB holds every measured run with a margin.
BYTES_PER_QUEUE_PAIR = 1 << 10
#: Queue-pair draws (queue pairs x hash samples) above which an analysis is refused as taking hours:
#: 1.4 us a draw was measured in random order (4,096 GPUs, --qps 64, --hash-samples 256: 190 s), so
#: this is two hours at 1 us a draw.
MAX_DRAWS = 7_200_000_000


@dataclass(frozen=True)
class WorkEstimate:
    """What one analysis routes and holds at its peak (see :func:`analysis_work`)."""

    nodes: int  #: nodes of the job
    channels: int  #: NCCL channels of its communicator
    qps: int  #: queue pairs per connection
    samples: int  #: hash samples (at most; fewer when the model takes fewer)
    queue_pairs: int  #: nodes x channels x qps: the sub-flows of one pattern
    draws: int  #: queue pairs x samples
    bytes: int  #: peak memory, the fabric's included

    @property
    def gib(self) -> float:
        return self.bytes / (1 << 30)


def analysis_work(spec: Any, plan: Any, options: AnalysisOptions, node: NodeModel) -> WorkEstimate:
    """The queue pairs the all-reduce model routes for ``options`` on the fabric of ``spec`` and
    ``plan``, the hash draws it makes, and its peak memory, from the sizes alone (nothing built)."""
    from ..fabric import memory_estimate
    from .collective import _pcie_per_nic
    from .tuner import comm_channels, duplicate_channels

    gpus = options.job_gpus if options.job_gpus and 0 < options.job_gpus <= spec.gpus else spec.gpus
    nodes = max(1, -(-gpus // spec.gpus_per_node))
    qps = options.qps or (DUAL_TOR_QPS if spec.dual_tor else 1)
    if options.channels is not None:
        channels = options.channels
    else:
        nic = min(spec.nic_port_gbps * options.link_efficiency, usable_pcie_gbps(node))
        graph, bw = duplicate_channels(node.nics, min(nic / 8, _pcie_per_nic(node)), node.sm, MAX_CHANNELS)
        channels = comm_channels(graph, bw, node.sm, nodes, MAX_CHANNELS)
    pairs = nodes * channels * qps if nodes > 1 else 0
    samples = options.hash_samples or DEFAULT_HASH_SAMPLES
    need = memory_estimate(plan) + (KEPT_DRAWS_BYTES + BYTES_PER_QUEUE_PAIR * pairs if pairs else 0)
    return WorkEstimate(nodes, channels, qps, samples, pairs, pairs * samples, need)


def check_analysis_work(spec: Any, plan: Any, options: AnalysisOptions, node: NodeModel,
                        available: int | None = None, what: str = "the analysis", job_flag: bool = True
                        ) -> WorkEstimate:
    """AnalysisError, before anything is built, when the analysis of ``options`` would need more
    memory than this machine has available or would plainly take hours; one line with the figures
    and the flags to lower. Returns the estimate."""
    from ..fabric import available_memory

    work = analysis_work(spec, plan, options, node)
    have = available_memory() if available is None else available
    lower = "lower --qps, --channels" + (", --job-gpus" if job_flag and not options.job_gpus else "") + " or --gpus"
    shape = (f"{work.nodes:,} nodes x {work.channels} channels x {work.qps} queue pairs = "
             f"{work.queue_pairs:,} queue pairs")
    if have is not None and work.bytes > have:
        raise AnalysisError([f"{what} routes {shape}, which needs about {work.gib:.1f} GiB of memory; this "
                             f"machine has {have / (1 << 30):.1f} GiB available: {lower}"])
    if work.draws > MAX_DRAWS:
        raise AnalysisError([f"{what} routes {shape} {work.samples} times (--hash-samples), "
                             f"{work.draws:,} queue-pair draws, which would take hours (more than "
                             f"{MAX_DRAWS:,}): lower --hash-samples, --qps or --channels"])
    return work



def analyze(fabric: Fabric, options: AnalysisOptions | None = None, node: NodeModel | None = None) -> Analysis:
    """Run every analysis of ``fabric`` with ``options`` (faults included), and the intact baseline.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> result = analyze(build_fabric(load_spec({"gpus": 1024})))
    >>> result.to_dict()["bisection"]["gbps"], result.hops.diameter_links
    (204800, 4)
    """
    options = (options or AnalysisOptions()).for_fabric(fabric)
    options.check()
    node = node or node_model_of(fabric)
    faults = apply_faults(fabric, options.fail, options.fail_random, options.seed)
    if not faults.any:
        return _analyze(fabric, options, faults, node)
    # the intact fabric first: the faulted one takes its hash draws and is bounded by it
    intact = _analyze(fabric, options, no_faults(fabric), node)
    result = _analyze(fabric, options, faults, node, intact)
    return Analysis(fabric, options, faults, result.hops, result.bisection, result.ecmp,
                    result.allreduce, baseline=intact)


def analyze_faulted(fabric: Fabric, options: AnalysisOptions, faults: Faults, node: NodeModel | None = None,
                    intact: Analysis | None = None) -> Analysis:
    """Every analysis of ``fabric`` with ``faults`` applied, without the intact baseline that
    :func:`analyze` adds (a Monte Carlo of many failure draws analyses the intact fabric once and
    passes it as ``intact``: each draw then takes its hash draws and is bounded by it)."""
    options = options.for_fabric(fabric)
    options.check()
    return _analyze(fabric, options, faults, node or node_model_of(fabric), intact)


def _analyze(fabric: Fabric, options: AnalysisOptions, faults: Faults, node: NodeModel,
             intact: Analysis | None = None) -> Analysis:
    base = None if intact is None else intact.allreduce
    return Analysis(
        fabric=fabric,
        options=options,
        faults=faults,
        hops=hop_counts(fabric, faults),
        bisection=bisection(fabric, faults, random_splits=options.random_splits, seed=options.seed),
        ecmp=ecmp_width(fabric, faults, seed=options.seed),
        allreduce=job_allreduce(Network(fabric, options, node, faults), baseline=base, detail=True),
    )


def job_allreduce(net: Network, baseline: AllReduce | None = None, detail: bool = False) -> AllReduce:
    """The same-rank all-reduce of the job of ``net.options`` at its sizes, through the door."""
    priced = price(net, "all-reduce", net.options.sizes, baseline=baseline, detail=detail)
    assert priced.allreduce is not None
    return priced.allreduce


# --- what-ifs: one part lost at a time ---------------------------------------------------------------

#: Parts of each kind a what-if fails, one at a time (spread evenly over the kind's parts): at
#: most WHAT_IF_SAMPLES, fewer on a large fabric so that parts x NICs stays near WHAT_IF_WORK, and
#: never fewer than WHAT_IF_MIN_SAMPLES (a spread needs two).
WHAT_IF_SAMPLES = 6
WHAT_IF_MIN_SAMPLES = 2
WHAT_IF_WORK = 6 * 8192
#: The what-ifs of a design review: (key, what is lost, tier of a switch or kind of a link).
WHAT_IF_SCENARIOS = (
    ("spine", "one spine", ("switch", 2)),
    ("leaf", "one leaf", ("switch", 1)),
    ("core", "one core switch", ("switch", 3)),
    ("leaf-spine-link", "one leaf-spine link", ("link", 1)),
    ("nic-link", "one NIC link", ("link", 0)),
    ("plane", "one whole plane", ("plane", 0)),
)
#: Message sizes of the busbw-against-size curve of a report: 64 KiB to 8 GiB in steps of 2x.
CURVE_SIZES = tuple(1 << p for p in range(16, 34))


@dataclass(frozen=True)
class WhatIf:
    """Bisection and busbw with one part lost, for a few parts of each kind.

    ``rows`` holds one entry per scenario of :data:`WHAT_IF_SCENARIOS` the fabric has: the parts
    failed (their ``--fail`` names, so any one can be analysed again), and for the bisection
    (max-flow) and the busbw at the largest message size the intact value and the least, median and
    greatest value over the parts, with their change in per cent (never above the intact value:
    see :func:`what_if`); ``nodes_left_out``, the most nodes one part's loss leaves without a live
    NIC (the restarted job runs without them); ``stops_job``, whether losing some part of the kind cuts a NIC of
    the job off (NCCL stops the job; its busbw is then the restarted job's), which a dual-ToR NIC,
    bonded over two leaves, never is by one lost link or leaf. The busbw rests on ECMP hashing,
    so which part is lost matters; the spread is what a review reads.
    """

    size_bytes: int
    samples: int
    hash_samples: int
    algorithm: str
    intact: dict[str, float]
    rows: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"size_bytes": self.size_bytes, "samples": self.samples, "hash_samples": self.hash_samples,
                "algorithm": self.algorithm, "intact": self.intact, "rows": list(self.rows)}


def _parts(fabric: Fabric, what: tuple[str, int], samples: int) -> list[str]:
    """``samples`` parts of one kind, spread evenly over them, by their ``--fail`` names."""
    kind, value = what
    if kind == "plane":
        names = plane_names(fabric)
        return [names[i] for i in np.unique(np.linspace(0, len(names) - 1, min(samples, len(names))).round()
                                            .astype(np.int64))] if names else []
    if kind == "switch":
        candidates = np.flatnonzero(fabric.tier == value)
    else:
        candidates = np.flatnonzero(fabric.links.kind == value)
        # one entry per port of the lower end: the lanes of a broken-out port fail together; where
        # the lower end is a switch port broken out to a slower tier, the upper end's port (one link)
        links = fabric.links
        upper = value > 0 and fabric.plan.lanes(value)[0] > 1
        end, port = (links.hi, links.hi_port) if upper else (links.lo, links.lo_port)
        port_key = end[candidates].astype(np.int64) * (1 << 20) + port[candidates]
        candidates = candidates[np.sort(np.unique(port_key, return_index=True)[1])]
    if candidates.size == 0:
        return []
    picks = np.unique(np.linspace(0, candidates.size - 1, min(samples, candidates.size)).round().astype(np.int64))
    names = []
    for i in candidates[picks]:
        if kind == "switch":
            names.append(fabric.names[int(i)])
        else:
            names.append(f"{fabric.names[int(end[i])]}:{int(port[i])}")
    return names


def _spread(values: list[float], intact: float) -> dict[str, Any]:
    """Least, median and greatest of the parts' figures, each at most the intact one (rounding
    never takes one above it)."""
    arr = np.asarray(values, dtype=float)
    out: dict[str, Any] = {"intact": intact}
    for key, v in (("min", arr.min()), ("median", float(np.median(arr))), ("max", arr.max())):
        v = min(float(v), intact)  # the figure and its change from one capped value
        out[key] = min(round(v, 3), intact) + 0.0
        out[f"{key}_change_pct"] = round(100.0 * (v - intact) / intact, 2) + 0.0 if intact else None
    return out


def what_if_samples(fabric: Fabric) -> int:
    """Parts of each kind :func:`what_if` fails by default: 6 up to 8,192 NICs, then fewer, 2 at least.

    >>> from topo import build_fabric, load_spec
    >>> what_if_samples(build_fabric(load_spec({"gpus": 1024})))
    6
    """
    nics = fabric.plan.nodes * fabric.spec.nic_ports
    return max(WHAT_IF_MIN_SAMPLES, min(WHAT_IF_SAMPLES, WHAT_IF_WORK // max(nics, 1)))


def what_if(fabric: Fabric, options: AnalysisOptions | None = None, node: NodeModel | None = None,
            samples: int | None = None, intact: Analysis | None = None,
            progress: Any = None) -> WhatIf:
    """Lose one spine, one leaf, one core switch, one leaf-spine link, one NIC link: for
    ``samples`` parts of each (spread over the fabric; :func:`what_if_samples` by default), the
    bisection (max-flow) and the all-reduce busbw at the largest message size, against the intact
    fabric's.

    Each part's all-reduce runs the algorithm the intact fabric's runs at that size (NCCL's tuner
    picks from the topology, which one lost part hardly changes), with as many hash samples as the
    analysis takes within an eighth of its budget (16 on small fabrics, 4 at 131,072 GPUs).
    ``intact`` is the intact fabric's analysis when the caller has it (it is not run again);
    ``progress(done)`` is called after each part.

    No figure of a part is above the intact one. The intact fabric is timed once more on the
    what-ifs' draws (their hash samples, seeds and per-flow header entropy), and every part on the
    same draws, capped draw by draw at the intact one (:func:`cap_at_baseline`); a part's busbw is
    the intact busbw times the ratio of the two medians on those draws, so that it is measured
    against the figure the analysis shows even where that took more samples. A bisection
    (max-flow) of a fabric with a part lost is never above the intact one's either.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> w = what_if(build_fabric(load_spec({"gpus": 256})), samples=2)
    >>> [(r["scenario"], r["parts"]) for r in w.rows][:2]
    [('spine', ['cluster-spine-00', 'cluster-spine-03']), ('leaf', ['cluster-leaf-su00-r0', 'cluster-leaf-su00-r7'])]
    >>> [(r["scenario"], r["busbw_GBps"]["median_change_pct"]) for r in w.rows]
    [('spine', 0.0), ('leaf', -48.43), ('leaf-spine-link', 0.0), ('nic-link', -0.03)]
    """
    options = (options or AnalysisOptions()).for_fabric(fabric)
    node = node or node_model_of(fabric)
    samples = what_if_samples(fabric) if samples is None else samples
    big = (max(options.sizes),)
    quick = replace(options, sizes=big, fail=(), fail_random=0.0)
    if intact is None:
        base = no_faults(fabric)
        intact_bis = bisection(fabric, base, random_splits=options.random_splits, seed=options.seed).maxflow_gbps
        whole = job_allreduce(Network(fabric, quick, node, base), detail=True)
    else:
        intact_bis = intact.bisection.maxflow_gbps
        whole = intact.allreduce
    row = next(r for r in whole.rows if r["size_bytes"] == big[0])
    intact_bus = row["busbw_GBps"]
    subflows = max(int(whole.details["subflows"]), 1)
    hash_samples = options.hash_samples or min(DEFAULT_HASH_SAMPLES, max(MIN_AUTO_SAMPLES, (HASH_BUDGET >> 3) // subflows))
    quick = replace(quick, algo=row["algorithm"] if options.algo == "auto" else options.algo,
                    hash_samples=hash_samples)
    # the intact fabric on the draws every part takes (as many samples, the same seeds and flows),
    # by which each part is capped and measured: its change is the ratio of the two on those draws
    base = no_faults(fabric)
    same = job_allreduce(Network(fabric, quick, node, base))
    same_bus = same.rows[-1]["busbw_GBps"]
    rows = []
    done = 0
    for key, label, what in WHAT_IF_SCENARIOS:
        parts = _parts(fabric, what, samples)
        if not parts:
            continue
        bis, bus, lost, stops = [], [], [], []
        for name in parts:
            faults = apply_faults(fabric, [name])
            bis.append(bisection(fabric, faults, random_splits=options.random_splits, seed=options.seed).maxflow_gbps)
            net = Network(fabric, quick, node, faults)
            try:
                result = job_allreduce(net, baseline=same)
            except AnalysisError:
                try:  # the intact algorithm is not available with the part lost: let the tuner pick
                    auto = replace(quick, algo="auto")
                    result = job_allreduce(Network(fabric, auto, node, faults, ud=net.ud), baseline=same)
                except AnalysisError:  # no node left with a live NIC
                    result = None
            ratio = 0.0 if result is None or same_bus <= 0 else min(result.rows[-1]["busbw_GBps"] / same_bus, 1.0)
            bus.append(float(intact_bus) * ratio)
            stopped = result.details.get("stopped") if result is not None else None
            lost.append(whole.nodes if result is None else len(stopped["nodes_without_nic"]) if stopped else 0)
            stops.append(result is None or stopped is not None)
            done += 1
            if progress is not None:
                progress(done)
        rows.append({"scenario": key, "lost": label, "parts": parts,
                     "bisection_gbps": _spread(bis, float(intact_bis)),
                     "busbw_GBps": _spread(bus, float(intact_bus)),
                     "worst_part": parts[int(np.argmin(bus))],
                     "nodes_left_out": max(lost), "stops_job": any(stops)})
    return WhatIf(size_bytes=big[0], samples=samples, hash_samples=hash_samples, algorithm=quick.algo,
                  intact={"bisection_gbps": float(intact_bis), "busbw_GBps": float(intact_bus)},
                  rows=tuple(rows))


def what_if_parts(fabric: Fabric, samples: int | None = None) -> int:
    """How many parts :func:`what_if` fails (for a progress counter)."""
    samples = what_if_samples(fabric) if samples is None else samples
    return sum(len(_parts(fabric, what, samples)) for _, _, what in WHAT_IF_SCENARIOS)


def busbw_curve(fabric: Fabric, options: AnalysisOptions | None = None, node: NodeModel | None = None,
                sizes: tuple[int, ...] = CURVE_SIZES) -> list[dict[str, Any]]:
    """The intact fabric's all-reduce rows (busbw, algorithm, protocol) at every size of ``sizes``:
    the curve a report plots."""
    options = replace((options or AnalysisOptions()).for_fabric(fabric), sizes=sizes, fail=(), fail_random=0.0)
    node = node or node_model_of(fabric)
    base = no_faults(fabric)
    return list(job_allreduce(Network(fabric, options, node, base)).rows)
