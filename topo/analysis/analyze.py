"""The analysis of a fabric: hops, bisection, ECMP width and the same-rank all-reduce.

:func:`analyze` runs every analysis on the fabric (with the faults asked for, if any) and, when
there are faults, on the intact fabric too, so the change can be reported. The all-reduce part
follows the lossless congestion model of ``docs/model.md``: connections -> sub-flows (queue pairs)
-> paths (ECMP hash or adaptive spraying) -> rates (max-min fair under ECN, or PFC pause spreading)
-> the collective's time for each message size.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import AnalysisError
from ..fabric import Fabric, rank_within
from .bisection import Bisection, bisection
from ..fabric import is_ethernet
from ..hardware.catalog import resolve_server
from ..hardware.servers import NodeModel
from ..spec import DUAL_TOR_QPS
from .collective import (ALGO_INDEX, ALGORITHMS, MAX_CHANNELS, ORDERS, PCIE_EFFICIENCY, PROTOCOL_CHOICES,
                         Connections, channel_layout, connections, graphs, job_nodes, ring_stages, tree_stages)
from .tuner import (COLLNET_CHAIN, COLLNET_DIRECT, DEFAULT_CONSTANTS, NCCL_VERSION, NVLS, NVLS_TREE, PROTOCOLS, RING, SIMPLE, TREE,
                    Comm, bus_bandwidth, load_constants, tune)
from .congestion import CC_MODES, Rates, solve_rates
from .ecmp import EcmpWidth, ecmp_width
from .faults import Faults, apply_faults, no_faults, plane_names
from .hops import HopCounts, hop_counts
from .routing import HASH_FIELDS, PortTables, Routes, _dst_ranks, flow_entropy, port_tables, route
from .updown import updown

if TYPE_CHECKING:  # pragma: no cover
    from ..caveats import Caveat

from .choices import (DEFAULT_HASH_SAMPLES, DEFAULT_LINK_EFFICIENCY, DEFAULT_SIZES, GIB, HASH_BUDGET,  # noqa: F401
                      MAX_HASH_SAMPLES, MIB, MIN_AUTO_SAMPLES, ROUTING_CHOICES)
#: Largest message size an analysis takes.
MAX_SIZE_BYTES = 1 << 40
UTILISATION_BINS = 10


@dataclass(frozen=True)
class AnalysisOptions:
    """What to analyse and how (defaults as documented in docs/model.md)."""

    job_gpus: int | None = None
    order: str = "topology"
    seed: int = 0
    algo: str = "auto"
    proto: str = "auto"
    routing: str = "auto"
    qps: int | None = None  #: None: 1, or DUAL_TOR_QPS on a dual-ToR fabric (see :meth:`for_fabric`)
    hash_seed: int = 0
    hash_samples: int | None = None
    hash_field: str = "sport"
    hash_polarized: bool = False
    sharp: bool = False
    channels: int | None = None
    cc: str = "ecn"
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY
    switch_latency_ns: float = 300.0
    step_latency_us: float | None = None
    nccl_constants: str | None = None
    sizes: tuple[int, ...] = DEFAULT_SIZES
    fail: tuple[str, ...] = ()
    fail_random: float = 0.0
    random_splits: int = 4

    def for_fabric(self, fabric: Fabric) -> "AnalysisOptions":
        """These options with ``qps`` chosen when not given: NCCL's 1, or DUAL_TOR_QPS with dual-ToR."""
        if self.qps is not None:
            return self
        return replace(self, qps=DUAL_TOR_QPS if fabric.spec.dual_tor else 1)

    def check(self) -> None:
        """Raise AnalysisError naming every option that is out of range."""
        problems = []
        for name, value, allowed in (("order", self.order, ORDERS), ("algo", self.algo, ALGORITHMS),
                                     ("proto", self.proto, PROTOCOL_CHOICES),
                                     ("routing", self.routing, ROUTING_CHOICES), ("cc", self.cc, CC_MODES),
                                     ("hash-field", self.hash_field, HASH_FIELDS)):
            if value not in allowed:
                problems.append(f"--{name} {value}: expected one of {', '.join(allowed)}")
        if self.qps is not None and not 1 <= self.qps <= 256:
            problems.append(f"--qps {self.qps}: must be from 1 to 256 queue pairs per connection")
        if self.hash_samples is not None and not 1 <= self.hash_samples <= MAX_HASH_SAMPLES:
            problems.append(f"--hash-samples {self.hash_samples}: must be from 1 to {MAX_HASH_SAMPLES}")
        if self.channels is not None and not 1 <= self.channels <= MAX_CHANNELS:
            problems.append(f"--channels {self.channels}: must be from 1 to {MAX_CHANNELS} (NCCL's MAXCHANNELS)")
        if not 0 < self.link_efficiency <= 1:  # also refuses NaN
            problems.append(f"--link-efficiency {self.link_efficiency}: must be in (0, 1]")
        for flag, value, high in (("--switch-latency-ns", self.switch_latency_ns, 1e6),
                                  ("--step-latency-us", self.step_latency_us, 1e6)):
            if value is not None and not 0 <= value <= high:  # also refuses NaN and infinity
                problems.append(f"{flag} {value}: must be from 0 to {high:,.0f}")
        if not self.sizes or min(self.sizes) <= 0 or max(self.sizes) > MAX_SIZE_BYTES or len(self.sizes) > 64:
            problems.append("--sizes: at most 64 message sizes, each from 1 byte to 1 TiB")
        if not 0 <= self.random_splits <= 64:
            problems.append(f"--random-splits {self.random_splits}: must be from 0 to 64")
        for flag, value in (("--seed", self.seed), ("--hash-seed", self.hash_seed)):
            if not 0 <= value < 2**32:
                problems.append(f"{flag} {value}: must be from 0 to {2**32 - 1:,}")
        if problems:
            raise AnalysisError(problems)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["sizes"] = list(self.sizes)
        out["fail"] = list(self.fail)
        return out


@dataclass(frozen=True, eq=False)
class AllReduce:
    """The same-rank all-reduce of a job under the congestion model."""

    options: AnalysisOptions
    job_gpus: int
    nodes: int
    conns: Connections = field(repr=False)
    routes: Routes = field(repr=False)
    rates: Rates = field(repr=False)
    connection_gbps: np.ndarray = field(repr=False)
    rows: tuple[dict[str, Any], ...]
    details: dict[str, Any]
    #: busbw (GB/s) of every hash sample (rows) at every size of ``options.sizes`` (columns)
    sample_busbw: np.ndarray | None = field(default=None, repr=False)
    #: hash samples taken of each pattern ("ring", "tree"), for another fabric to take the same draws
    draws: dict[str, int] = field(default_factory=dict, repr=False)

    def to_rows(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self.rows]


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


def _distribution(values: np.ndarray) -> dict[str, Any]:
    """Percentiles and a 10-bin histogram (0-10%, ..., 90-100%+) of utilisations."""
    if values.size == 0:
        return {"resources": 0}
    q = np.percentile(values, [50, 90, 99])
    bins = np.minimum((values * UTILISATION_BINS).astype(np.int64), UTILISATION_BINS - 1)
    return {
        "resources": int(values.size),
        "mean": round(float(values.mean()), 4),
        "p50": round(float(q[0]), 4),
        "p90": round(float(q[1]), 4),
        "p99": round(float(q[2]), 4),
        "max": round(float(values.max()), 4),
        "histogram": np.bincount(bins, minlength=UTILISATION_BINS).tolist(),
    }


def node_model_of(fabric: Fabric) -> NodeModel:
    """The node model of the fabric's server profile (its ``server``, or the one the shape picks)."""
    return resolve_server(fabric.spec).node_model()


@dataclass(frozen=True, eq=False)
class _Pattern:
    """One network pattern (ring or tree) of the job, routed and rated for every hash sample."""

    conns: Connections
    slowest_gbps: np.ndarray  #: per sample, the slowest connection (qps x slowest queue pair)
    ideal_gbps: float  #: the slowest connection with every NIC's connections sharing it evenly
    routes: Routes  #: of the median sample
    sample: int  #: index of the median sample
    max_switch_hops: int
    busiest: int  #: connections of the busiest NIC (in or out)


def allreduce(fabric: Fabric, options: AnalysisOptions, faults: Faults, ud=None,
              node: NodeModel | None = None, rows_only: bool = False,
              nic_map: np.ndarray | None = None, tables: "PortTables | None" = None,
              baseline: AllReduce | None = None) -> AllReduce:
    """Route, rate and time the job's all-reduce for every message size, as NCCL would run it.

    NCCL's tuner picks the algorithm and protocol per size from the ideal graphs (it knows the
    topology, not the congestion); the time of that choice is then taken with the network rates
    of every hash sample, and the rows give the median and the 5th percentile. ``rows_only``
    leaves out the details (bottlenecks, link utilisation) and the median sample's routes and
    rates, for callers that read the rows only.

    ``nic_map`` (groups, nodes, nics) times several same-shaped communicators that run at once
    instead of the job of ``options``: NIC ``j`` of the ``i``-th node of group ``G`` is the global
    NIC ``nic_map[G, i, j]``, and ``node`` describes one node's share of a group (its GPUs and
    NICs). All groups are routed and rated together; the rows are those of one group. Every NIC
    of the groups must have a live link (a job whose NIC has none stops).

    ``baseline`` is the same job's all-reduce on the intact fabric (``faults`` being a part or
    more lost): this one then takes the same hash draws (as many samples of each pattern, the
    same seeds, each flow its own header entropy) and no sample's busbw at a size exceeds the
    baseline's on the same draw (:func:`cap_at_baseline`), so that a loss never shows as a gain.
    """
    spec = fabric.spec
    options = options.for_fabric(fabric)
    node = node or node_model_of(fabric)
    tables = tables or port_tables(fabric)
    nic_link = tables.nic_link.reshape(-1, fabric.plan.homes)  # a dual-ToR NIC: its bond's two links
    if nic_map is None:
        order = job_nodes(fabric, options.job_gpus, options.order, options.seed)
        k = spec.nic_ports
        live_nics = faults.live[nic_link[(order[:, None] * k + np.arange(k)[None, :])]].any(axis=-1)
        dead_nodes = ~live_nics.any(axis=1)
        stopped = _stopped(fabric, order, live_nics)
        if dead_nodes.any():
            order, live_nics = order[~dead_nodes], live_nics[~dead_nodes]
    else:
        if not faults.live[nic_link[nic_map]].any(axis=-1).all():
            raise AnalysisError(["a NIC of the job has no live link, and a job whose NIC has none stops: "
                                 "fail switches or switch-to-switch links, not servers or leaves"])
        order = np.arange(nic_map.shape[1])
        live_nics, stopped = np.ones((order.size, nic_map.shape[2]), dtype=bool), None
    n = int(order.size)
    if n == 0:
        raise AnalysisError(["the job has no node with a live NIC link left: nothing to analyse"])
    routing = options.routing
    if routing == "auto":
        routing = "ecmp" if is_ethernet(fabric) else "dmodk"
    efficiency = options.link_efficiency
    pcie_gbps = usable_pcie_gbps(node)
    nic_usable = min(spec.nic_port_gbps * efficiency, pcie_gbps)
    layout = channel_layout(node, n, nic_usable, live_nics, options.channels, fabric.plan.planes)
    sharp = options.sharp
    if sharp and is_ethernet(fabric):
        raise AnalysisError(["--sharp: in-network reduction (SHARP, NCCL's CollNet) needs an InfiniBand "
                             "switch model (switch: ndr-64x400 or xdr-144x800)"])
    allowed = _allowed_algorithms(options, node, n, sharp)

    needs_ring = n > 1 and bool({RING, NVLS} & set(allowed)) or (n > 1 and not allowed)
    needs_tree = n > 1 and bool({TREE, NVLS_TREE} & set(allowed))
    ud = ud or updown(fabric, faults)
    bases: dict[str, _Base] = {}
    if n > 1:
        for name, needed in (("ring", needs_ring or not needs_tree), ("tree", needs_tree)):
            if needed:
                bases[name] = _base_pattern(fabric, options, faults, ud, tables, routing, order, layout,
                                            pcie_gbps, name, nic_map)
    hops = max((b.max_switch_hops for b in bases.values()), default=0)
    latency_inter = max(0, hops - 1) * options.switch_latency_ns * 1e-3
    constants = load_constants(options.nccl_constants) if options.nccl_constants else DEFAULT_CONSTANTS
    comm = Comm(nodes=n, ranks=n * node.gpus, sm=node.sm, cpu_vendor=node.cpu_vendor,
                channels=layout.channels, net_overhead_us=options.step_latency_us)
    collnet = nic_usable / 8 if sharp else None

    patterns: dict[str, _Pattern] = {}

    def busiest(name: str) -> int:
        return bases[name].busiest if name in bases else 0

    def stages_at(ring_gbps: float | None, tree_gbps: float | None):
        ring = ring_stages(layout, node, ring_gbps / 8, busiest("ring")) if ring_gbps is not None else None
        tree = tree_stages(layout, node, tree_gbps / 8, busiest("tree")) if tree_gbps is not None else None
        return ring, tree

    def graphs_at(ring_gbps: float | None, tree_gbps: float | None) -> dict:
        ring, tree = stages_at(ring_gbps, tree_gbps)
        return graphs(layout, node, ring, tree, collnet, latency_inter)

    def at(pattern: str, which: Any) -> float | None:
        if n == 1:
            return math.inf
        if pattern not in bases:
            return None
        if which == "ideal":
            return bases[pattern].ideal_gbps
        slow = patterns[pattern].slowest_gbps
        return float(slow[min(which, slow.size - 1)])

    sizes = np.asarray(options.sizes, dtype=np.float64)
    protocols = None if options.proto == "auto" else (PROTOCOLS.index(options.proto),)
    ideal = tune(comm, graphs_at(at("ring", "ideal"), at("tree", "ideal")), constants)
    algo, proto, tuner_us = ideal.choose(sizes, tuple(allowed), protocols)
    if not np.isfinite(tuner_us).all():
        raise AnalysisError([f"--algo {options.algo} --proto {options.proto}: NCCL has no such algorithm and "
                             f"protocol pair for this job (LL and LL128 are for ring and tree only)"])
    # sample the hashing of the patterns that the chosen algorithms use; one draw of the others
    chosen = set(algo.tolist())
    uses = {"ring": RING in chosen, "tree": bool({TREE, NVLS_TREE} & chosen)}
    if bases and not any(uses[name] for name in bases):
        uses["ring" if "ring" in bases else "tree"] = True  # CollNet or NVLS: the details show one
    for name, base in bases.items():
        draws = baseline.draws.get(name) if baseline is not None else None
        patterns[name] = sample_pattern(base, options, routing, uses[name], draws)
    samples = max((p.slowest_gbps.size for p in patterns.values()), default=1)
    times = np.empty((samples, sizes.size))
    limits = np.empty(samples)
    achieved_models = []
    for s in range(samples):
        model = tune(comm, graphs_at(at("ring", s), at("tree", s)), constants, tree_cap=False)
        achieved_models.append(model)
        t = model.times_us(sizes)
        times[s] = t[algo, proto, np.arange(sizes.size)]
        limits[s] = model.bandwidth[algo[-1], SIMPLE] if model.bandwidth[algo[-1], SIMPLE] > 0 else \
            model.bandwidth[algo[-1], proto[-1]]
    ranks = n * node.gpus
    with np.errstate(divide="ignore"):
        algbw = np.where(np.isfinite(times), sizes[None, :] / (times * 1e-6) / 1e9, 0.0)
    busbw = bus_bandwidth(algbw, ranks)
    if baseline is not None:
        busbw, times = cap_at_baseline(busbw, times, sizes, ranks, baseline)
    mid_time = np.median(times, axis=0) if samples > 1 else times[0]
    rows = []
    median_model = achieved_models[_median_index(limits)]
    for i, size in enumerate(options.sizes):
        t = float(mid_time[i])
        finite = math.isfinite(t)
        a_bw = size / (t * 1e-6) / 1e9 if finite and t > 0 else 0.0
        rows.append({
            "size_bytes": int(size),
            "algorithm": TUNER_ALGORITHMS[algo[i]],
            "protocol": PROTOCOLS[proto[i]],
            "time_s": float(f"{t * 1e-6:.6g}") if finite else None,
            "algbw_GBps": _sig(a_bw),
            "busbw_GBps": _sig(float(bus_bandwidth(a_bw, ranks))),
            "busbw_p5_GBps": _sig(float(np.percentile(busbw[:, i], 5))),
            "latency_us": round(float(median_model.latency[algo[i], proto[i]]), 3),
            "tuner_time_s": float(f"{float(tuner_us[i]) * 1e-6:.6g}"),
        })
    if baseline is not None:  # the median of fewer or more draws than the baseline's: bounded all the same
        _cap_rows(rows, baseline, ranks)
    draws = {name: int(p.slowest_gbps.size) for name, p in patterns.items()}
    if rows_only:  # the rows, and which nodes the restarted job leaves out
        return AllReduce(options, ranks, n, None, None, None, np.zeros(0), tuple(rows),  # type: ignore[arg-type]
                         {"stopped": stopped, "nodes": n}, busbw, draws)
    return replace(_result(fabric, options, faults, order, node, layout, routing, patterns, rows,
                           limits, ranks, algo, stopped, nic_usable, hops, stages_at, at, tables),
                   sample_busbw=busbw, draws=draws)


def cap_at_baseline(busbw: np.ndarray, times: np.ndarray, sizes: np.ndarray, ranks: int,
                    baseline: AllReduce) -> tuple[np.ndarray, np.ndarray]:
    """Per hash sample and size, the busbw with a part lost capped at the intact fabric's on the
    same draw, and the times that go with it.

    Both fabrics are routed with the same draws, so a flow whose path survives keeps it and the
    loss only adds load elsewhere; what could still come out higher is not the loss's doing: a
    rehash that happens to move flows off an unlucky collision of the intact draw, or a restarted
    job that is smaller (nodes left out). The intact fabric could carry every flow as the failed
    one does, so the figure of a loss is the failed fabric's or the intact one's, whichever is
    lower. Sizes the baseline did not time, and samples beyond its draws, are left as they are
    (:func:`_cap_rows` bounds their medians)."""
    if baseline.sample_busbw is None or ranks < 2:
        return busbw, times
    column = {int(size): j for j, size in enumerate(baseline.options.sizes)}
    base = baseline.sample_busbw
    common = min(busbw.shape[0], base.shape[0])
    busbw = busbw.copy()
    for i, size in enumerate(sizes.tolist()):
        j = column.get(int(size))
        if j is not None:
            busbw[:common, i] = np.minimum(busbw[:common, i], base[:common, j])
    with np.errstate(divide="ignore"):
        algbw = busbw * ranks / (2 * (ranks - 1))
        times = np.where(algbw > 0, sizes[None, :] / (algbw * 1e9) * 1e6, np.inf)
    return busbw, times


def _cap_rows(rows: list[dict[str, Any]], baseline: AllReduce, ranks: int) -> None:
    """Each row's busbw (median and 5th percentile) at most the baseline's at that size; the time
    and algbw follow. Equal draws make this hold already (the per-sample cap); this holds it for
    a job whose patterns drew a different number of samples."""
    base = {row["size_bytes"]: row for row in baseline.rows}
    for row in rows:
        b = base.get(row["size_bytes"])
        if b is None or ranks < 2:
            continue
        row["busbw_p5_GBps"] = min(row["busbw_p5_GBps"], b["busbw_p5_GBps"])
        if row["busbw_GBps"] > b["busbw_GBps"]:
            row["busbw_GBps"] = b["busbw_GBps"]
            algbw = b["busbw_GBps"] * ranks / (2 * (ranks - 1))
            row["algbw_GBps"] = _sig(algbw)
            row["time_s"] = float(f"{row['size_bytes'] / (algbw * 1e9):.6g}") if algbw > 0 else None


def _sig(value: float) -> float:
    """Six significant digits: a 4-byte all-reduce's bandwidth is not rounded to 0."""
    return float(f"{value:.6g}") + 0.0


TUNER_ALGORITHMS = ("tree", "ring", "collnetdirect", "collnetchain", "nvls", "nvlstree")


def _median_index(values: np.ndarray) -> int:
    """Index of the sample at the median rank (the lower middle for an even count)."""
    return int(np.argsort(values, kind="stable")[(values.size - 1) // 2])


def usable_pcie_gbps(node: NodeModel) -> float:
    """Gb/s a NIC's traffic can take over its GPU-NIC PCIe path, each way."""
    return min(node.gpu_pcie_GBps, node.nic_pcie_GBps) * PCIE_EFFICIENCY * 8


def _allowed_algorithms(options: AnalysisOptions, node: NodeModel, nodes: int, sharp: bool) -> list[int]:
    """The algorithms NCCL would consider (``auto``), or the one asked for, checked for this job."""
    available = {RING: "", TREE: ""}
    if not node.nvls:
        why = (f"needs NVSwitch-3 or later on Hopper or later (the server has "
               f"{'no NVSwitch' if node.nvswitch == 0 else f'NVSwitch generation {node.nvswitch}'}, sm {node.sm})")
        available[NVLS] = available[NVLS_TREE] = why
    else:
        available[NVLS] = "" if nodes == 1 or sharp else \
            "across nodes needs in-network reduction (--sharp, on an InfiniBand switch model)"
        available[NVLS_TREE] = "" if nodes > 1 else "needs more than one node"
    for a in (COLLNET_DIRECT, COLLNET_CHAIN):
        available[a] = "" if sharp and nodes > 1 else (
            "needs --sharp (SHARP in-network reduction on an InfiniBand switch model)" if not sharp
            else "needs more than one node")
    if not available.get(COLLNET_DIRECT) and node.nvswitch == 0:
        available[COLLNET_DIRECT] = "needs an NVSwitch node"
    if options.algo == "auto":
        return [a for a, why in sorted(available.items()) if not why]
    a = ALGO_INDEX[options.algo]
    if available[a]:
        raise AnalysisError([f"--algo {options.algo}: {available[a]}"])
    return [a]


def _stopped(fabric: Fabric, order: np.ndarray, live_nics: np.ndarray) -> dict[str, Any] | None:
    """What NCCL does when a job's NIC has no link: the job stops; it restarts without that NIC."""
    if live_nics.all():
        return None
    down = []
    for i, kk in zip(*np.nonzero(~live_nics), strict=True):
        down.append({"node": fabric.names[int(order[i])], "nic": int(kk)})
    no_nic = [fabric.names[int(order[i])] for i in np.flatnonzero(~live_nics.any(axis=1))]
    return {"nic_links_down": down[:64], "nic_links_down_count": len(down), "nodes_without_nic": no_nic}


@dataclass(frozen=True, eq=False)
class _Base:
    """One pattern's connections and their first routing (the fixed paths, and the hashed ones)."""

    conns: Connections
    route_some: Any  #: (connection mask or slice, seed) -> Routes
    routes: Routes
    capacity: np.ndarray
    max_switch_hops: int
    busiest: int
    ideal_gbps: float
    qps: int


def _base_pattern(fabric, options, faults, ud, tables, routing, order, layout, pcie_gbps, pattern,
                  nic_map=None) -> _Base:
    """Connections of one pattern, routed once with the first hash seed."""
    return base_of(fabric, options, faults, ud, tables, routing, connections(order, layout, pattern, nic_map),
                   pcie_gbps)


def base_of(fabric, options, faults, ud, tables, routing, conns: Connections, pcie_gbps: float) -> _Base:
    """Any connections (one flow of ``options.qps`` queue pairs each), routed once with the first hash seed."""
    q = options.qps
    # every flow's draws come from its place among all the pattern's connections, whichever of
    # them are routed at once: a fabric with a part lost routes the same flows with the same draws
    turns = rank_within(np.repeat(conns.src_nic, q)) % 2 if fabric.plan.homes == 2 else None
    ranks = _dst_ranks(conns.dst_nic) if options.hash_field == "qpn" else None

    def route_some(keep: np.ndarray | slice, seed: int) -> Routes:
        rows = keep if isinstance(keep, slice) else np.repeat(np.asarray(keep, dtype=bool), q)
        flows = None if isinstance(keep, slice) else np.flatnonzero(keep)
        entropy = flow_entropy(conns.dst_nic, q, options.hash_field, seed, flows, ranks)
        return route(fabric, conns.src_nic[keep], conns.dst_nic[keep], qps=q, mode=routing, hash_seed=seed,
                     faults=faults, ud=ud, hash_field=options.hash_field, polarized=options.hash_polarized,
                     tables=tables, entropy=entropy, bond_turn=None if turns is None else turns[rows])

    base = route_some(slice(None), options.hash_seed % 2**32)
    capacity = _capacity(base, fabric, pcie_gbps, options.link_efficiency)
    max_hops = int(base.links.max()) - 1 if base.links.size and base.links.max() > 0 else 0
    nic_cap = min(fabric.spec.nic_port_gbps * options.link_efficiency, pcie_gbps)
    per_src = np.bincount(conns.src_nic)
    per_dst = np.bincount(conns.dst_nic)
    busiest = max(int(per_src.max()) if per_src.size else 1, int(per_dst.max()) if per_dst.size else 1)
    return _Base(conns, route_some, base, capacity, max_hops, busiest, nic_cap / busiest, q)


#: Most bytes of hash draws that :func:`sample_pattern` keeps to take the median's routes from
#: (the median's draw is routed again when it was not kept): 64 draws of every queue pair kept
#: made memory grow with --hash-samples x --qps (65,536 GPUs at 256 x 256: 18 GB).
KEPT_DRAWS_BYTES = 256 << 20


def sample_pattern(b: _Base, options: AnalysisOptions, routing: str, sample: bool,
                   draws: int | None = None) -> _Pattern:
    """Rate a pattern over the hash samples (or over its first routing only, when not sampled).

    The connections that stay inside a leaf (or have no route) take the same path in every
    sample, so each sample re-routes only the hashed connections, with seed ``hash_seed + i``,
    and adds their load to the fixed load of the others. ``draws`` (the intact fabric's count,
    when this is a fabric with a part lost) sets the number of samples instead of the budget.
    """
    q = b.qps
    base, capacity = b.routes, b.capacity
    hashed_conn = (base.links.reshape(-1, q) >= 4).any(axis=1)  # through a spine: hashed
    hashed_sub = np.repeat(hashed_conn, q)
    samples = 1
    if routing == "ecmp" and sample and hashed_conn.any():
        samples = draws or options.hash_samples or min(DEFAULT_HASH_SAMPLES,
                                                       max(MIN_AUTO_SAMPLES, HASH_BUDGET // int(hashed_sub.sum())))
    if samples == 1:
        slowest = np.array([q * _slowest_subflow(base, capacity, options.cc)])
        return _Pattern(b.conns, slowest, b.ideal_gbps, base, 0, b.max_switch_hops, b.busiest)
    fixed = base.resources[~hashed_sub]
    fixed_counts = np.bincount(fixed[fixed >= 0], minlength=capacity.size)
    reachable = bool(base.reachable.all())
    slowest = np.empty(samples)
    drawn: list[Routes] = []
    kept = 0  # bytes of the draws kept, to take the median's without routing it again
    for i in range(samples):
        part = b.route_some(hashed_conn, (options.hash_seed + i) % 2**32)
        size = part.resources.nbytes + part.links.nbytes
        if len(drawn) == i and len(drawn) < 64 and kept + size <= KEPT_DRAWS_BYTES:
            drawn.append(part)
            kept += size
        if not reachable or not part.reachable.all():
            slowest[i] = 0.0
        elif options.cc == "ecn":
            res = part.resources[part.resources >= 0]
            counts = fixed_counts + np.bincount(res, minlength=capacity.size)
            used = counts > 0
            slowest[i] = q * float((capacity[used] / counts[used]).min())
        else:
            slowest[i] = q * _slowest_subflow(_merge(base, hashed_sub, part), capacity, options.cc)
    median = _median_index(slowest)
    part = drawn[median] if median < len(drawn) else b.route_some(hashed_conn, (options.hash_seed + median) % 2**32)
    return _Pattern(b.conns, slowest, b.ideal_gbps, _merge(base, hashed_sub, part), median, b.max_switch_hops,
                    b.busiest)


def _merge(base: Routes, rows: np.ndarray, part: Routes) -> Routes:
    """``base`` with the sub-flows ``rows`` (a mask) routed as in ``part``."""
    resources, links = base.resources.copy(), base.links.copy()
    resources[rows], links[rows] = part.resources, part.links
    return replace(base, resources=resources, links=links)


def _capacity(routes: Routes, fabric: Fabric, pcie_gbps: float, efficiency: float) -> np.ndarray:
    """Usable capacity of every resource: link rate x efficiency; NIC links no more than PCIe takes."""
    capacity = routes.capacity_gbps * efficiency
    nic = np.flatnonzero(fabric.links.kind == 0)
    for d in (0, 1):
        capacity[2 * nic + d] = np.minimum(capacity[2 * nic + d], pcie_gbps)
    return capacity


def _slowest_subflow(routes: Routes, capacity: np.ndarray, cc: str) -> float:
    """Rate of the slowest queue pair (Gb/s). Under max-min fairness (ECN) it is the first water
    level, the least capacity per queue pair over the resources; under PFC, the pause model's."""
    reach = routes.reachable
    if not reach.all():
        return 0.0
    if cc == "ecn":
        res = routes.resources[routes.resources >= 0]
        counts = np.bincount(res, minlength=capacity.size)
        used = counts > 0
        return float((capacity[used] / counts[used]).min())
    rates = solve_rates(routes.resources, capacity, reach, cc, 1.0)
    return float(rates.rate_gbps.min())


def _result(fabric, options, faults, order, node, layout, routing, patterns, rows, limits,
            ranks, algo, stopped, nic_usable, hops, stages_at, at, tables) -> "AllReduce":
    """The AllReduce: rows, and the details of the median sample of the pattern of the largest size."""
    n = int(order.size)
    last = TUNER_ALGORITHMS[algo[-1]]
    primary = patterns.get("tree" if last in ("tree", "nvlstree") and "tree" in patterns else "ring") \
        or next(iter(patterns.values()), None)
    q = options.qps
    if primary is None:  # one node: NVLink only
        none = np.zeros(0, dtype=np.int64)
        conns = Connections(none, none, none, "ring", n, 0, layout.channels)
        routes = route(fabric, none, none, qps=q, mode=routing if routing != "dmodk" else "ecmp",
                       hash_seed=options.hash_seed, faults=faults, tables=tables)
        rates = solve_rates(routes.resources, routes.capacity_gbps, routes.reachable, options.cc,
                            options.link_efficiency)
        connection_gbps = np.zeros(0)
    else:
        conns, routes = primary.conns, primary.routes
        capacity = _capacity(routes, fabric, usable_pcie_gbps(node), options.link_efficiency)
        rates = solve_rates(routes.resources, capacity, routes.reachable, options.cc, 1.0)
        sub_rate = np.where(routes.reachable, rates.rate_gbps, 0.0).reshape(-1, q)
        connection_gbps = q * sub_rate.min(axis=1)
    ring_g = at("ring", patterns["ring"].sample) if "ring" in patterns else (math.inf if n == 1 else None)
    tree_g = at("tree", patterns["tree"].sample) if "tree" in patterns else (math.inf if n == 1 else None)
    stage_ring, stage_tree = stages_at(ring_g, tree_g)
    details: dict[str, Any] = {
        "job_gpus": ranks,
        "nodes": n,
        "nvlink_only": n == 1,
        "algorithm": options.algo,
        "algorithm_at_largest_size": last,
        "protocol_at_largest_size": rows[-1]["protocol"],
        "routing": routing if n > 1 else None,
        "hash_field": options.hash_field if routing == "ecmp" and n > 1 else None,
        "hash_polarized": options.hash_polarized if routing == "ecmp" and n > 1 else None,
        "hash_samples": int(primary.slowest_gbps.size) if primary is not None else 0,
        "channels": layout.channels,
        "graph_channels": layout.graph_channels,
        "flows_per_nic": round(layout.flows_per_nic * q, 3),
        "node": node.to_dict(),
        "nccl_version": NCCL_VERSION,
        "connections": int(conns.src_nic.size),
        "subflows": int(routes.resources.shape[0]),
    }
    if primary is not None:
        first_link = tables.nic_link.reshape(-1, fabric.plan.homes)[:, 0]  # dual-ToR: the pair's a leaf
        src_leaf = fabric.links.hi[first_link[conns.src_nic]]
        dst_leaf = fabric.links.hi[first_link[conns.dst_nic]]
        leaving_leaf = int((src_leaf != dst_leaf).sum())
        leaving_pod = int((fabric.pod[src_leaf] != fabric.pod[dst_leaf]).sum())
        slow = primary.slowest_gbps
        details.update({
            "pattern": conns.algorithm,
            "connections_leaving_leaf": leaving_leaf,
            "connections_leaving_pod": leaving_pod,
            "nic_rate_gbps": round(nic_usable, 3),
            "ideal_connection_gbps": round(primary.ideal_gbps, 3),
            "slowest_connection_gbps": round(float(np.median(slow)), 3),
            "slowest_connection_gbps_p5": round(float(np.percentile(slow, 5)), 3),
            "mean_connection_gbps": round(float(connection_gbps.mean()), 3),
            "connections_below_nic_rate": int((connection_gbps < primary.ideal_gbps * (1 - 1e-9)).sum()),
        })
    else:
        details.update({"pattern": None, "connections_leaving_leaf": 0, "connections_leaving_pod": 0,
                        "nic_rate_gbps": round(nic_usable, 3), "ideal_connection_gbps": None,
                        "slowest_connection_gbps": None, "slowest_connection_gbps_p5": None,
                        "mean_connection_gbps": None, "connections_below_nic_rate": None})
    details.update({
        "busbw_limit_GBps": round(float(bus_bandwidth(float(np.median(limits)), ranks)), 3),
        "stages_busbw_GBps": {name: st.to_dict(ranks) for name, st in (("ring", stage_ring), ("tree", stage_tree))
                              if st is not None},
        "max_switch_hops": hops,
        "stopped": stopped,
        "bottlenecks": (_bottlenecks(fabric, routes, rates, connection_gbps, q) if connection_gbps.size
                        else {"slowest_connections": 0, "saturated_by_kind": {}, "top": []}),
        "link_utilisation": (_distribution(_fabric_utilisation(routes, rates, fabric)) if connection_gbps.size
                             else {"resources": 0}),
    })
    return AllReduce(options, ranks, n, conns, routes, rates, connection_gbps, tuple(rows), details)


def _fabric_utilisation(routes: Routes, rates: Rates, fabric: Fabric) -> np.ndarray:
    """Utilisation of the switch-to-switch resources that carry traffic (both directions)."""
    util = rates.utilisation
    carried = rates.subflows > 0
    resource = np.arange(util.size)
    is_link = resource < 2 * routes.link_count
    kind = np.where(is_link, fabric.links.kind[np.minimum(resource // 2, routes.link_count - 1)], 1)
    return util[carried & (kind >= 1)]


RESOURCE_KINDS = ("nic-up", "nic-down", "leaf-up", "spine-down", "spine-up", "core-down", "pool")


def _resource_kinds(routes: Routes, fabric: Fabric) -> np.ndarray:
    """Index into RESOURCE_KINDS of every resource."""
    total = routes.capacity_gbps.size
    resource = np.arange(total)
    is_link = resource < 2 * routes.link_count
    link = np.minimum(resource // 2, routes.link_count - 1)
    down = resource % 2
    kind = 2 * fabric.links.kind[link].astype(np.int64) + down
    return np.where(is_link, kind, len(RESOURCE_KINDS) - 1)


def _bottlenecks(fabric: Fabric, routes: Routes, rates: Rates, connection_gbps: np.ndarray, q: int,
                 limit: int = 8) -> dict[str, Any]:
    """Saturated resources on the paths of the slowest connections: counts by kind, and the
    busiest ones, fabric links before NIC links."""
    slowest = connection_gbps.min()
    slow_conns = np.flatnonzero(connection_gbps <= slowest * (1 + 1e-9))
    sub = (slow_conns[:, None] * q + np.arange(q)[None, :]).ravel()
    on_path = routes.resources[sub]
    seen = np.zeros(routes.capacity_gbps.size, dtype=bool)  # distinct resources by marking: O(n), no sort
    seen[on_path[on_path >= 0]] = True
    on_path = np.flatnonzero(seen)
    utilisation = rates.utilisation
    all_kinds = _resource_kinds(routes, fabric)
    saturated = on_path[utilisation[on_path] >= 0.999]
    kinds = all_kinds[saturated]
    by_kind = {RESOURCE_KINDS[k]: int(c) for k, c in enumerate(np.bincount(kinds, minlength=len(RESOURCE_KINDS))) if c}
    is_nic = kinds < 2
    order = np.lexsort((saturated, -rates.subflows[saturated], is_nic))
    top = []
    for r in saturated[order][:limit]:
        entry = routes.describe(fabric, int(r))
        entry.update(kind=RESOURCE_KINDS[all_kinds[r]],
                     subflows=int(rates.subflows[r]), utilisation=round(float(utilisation[r]), 4))
        top.append(entry)
    return {"slowest_connections": int(slow_conns.size), "saturated_by_kind": by_kind, "top": top}


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
    ud = updown(fabric, faults)
    base = None if intact is None else intact.allreduce
    return Analysis(
        fabric=fabric,
        options=options,
        faults=faults,
        hops=hop_counts(fabric, faults),
        bisection=bisection(fabric, faults, random_splits=options.random_splits, seed=options.seed),
        ecmp=ecmp_width(fabric, faults, seed=options.seed),
        allreduce=allreduce(fabric, options, faults, ud, node, baseline=base),
    )


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
        whole = allreduce(fabric, quick, base, updown(fabric, base), node)
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
    same = allreduce(fabric, quick, base, updown(fabric, base), node, rows_only=True)
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
            ud = updown(fabric, faults)
            try:
                result = allreduce(fabric, quick, faults, ud, node, rows_only=True, baseline=same)
            except AnalysisError:
                try:  # the intact algorithm is not available with the part lost: let the tuner pick
                    result = allreduce(fabric, replace(quick, algo="auto"), faults, ud, node, rows_only=True,
                                       baseline=same)
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
    return list(allreduce(fabric, options, base, updown(fabric, base), node, rows_only=True).rows)
