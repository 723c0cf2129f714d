"""The all-reduce model: NCCL's all-reduce of concurrent groups, routed, rated and timed.

The lossless congestion model of ``docs/model.md``: connections (:mod:`topo.analysis.collective`)
-> sub-flows (queue pairs) -> paths (ECMP hash, adaptive spraying or D-mod-K,
:mod:`topo.analysis.routing`) -> rates (max-min fair under ECN, or PFC pause spreading,
:mod:`topo.analysis.congestion`) -> the collective's time for each message size (NCCL's tuner,
:mod:`topo.analysis.tuner`), over hash samples. With a part lost, the same draws as the intact
fabric's and never above it (:func:`cap_at_baseline`).

Callers price collectives through :func:`topo.analysis.pricing.price`; this module is its model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import AnalysisError
from ..fabric import Fabric, rank_within
from ..hardware.servers import NodeModel
from .choices import DEFAULT_HASH_SAMPLES, HASH_BUDGET, MIN_AUTO_SAMPLES
from .collective import (ALGO_INDEX, Connections, channel_layout, connections, graphs, job_nodes, node_model_of,
                         ring_stages, tree_stages, usable_pcie_gbps)
from .congestion import Rates, solve_rates
from .faults import Faults
from .options import AnalysisOptions
from .routing import PortTables, Routes, _dst_ranks, flow_entropy, port_tables, route
from .tuner import (COLLNET_CHAIN, COLLNET_DIRECT, DEFAULT_CONSTANTS, NCCL_VERSION, NVLS, NVLS_TREE, PROTOCOLS, RING,
                    SIMPLE, TREE, Comm, bus_bandwidth, load_constants, tune)
from .updown import updown

UTILISATION_BINS = 10


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


@dataclass(eq=False)
class _Job:
    """One all-reduce being priced: the job's nodes and NICs, its NCCL communicator, its network
    patterns (routed once, then sampled) and what the tuner's graphs take from them."""

    fabric: Fabric
    options: AnalysisOptions
    node: NodeModel
    tables: PortTables
    order: np.ndarray  #: the job's nodes (or a group's positions) in rank order
    stopped: dict[str, Any] | None  #: the NICs without a link, when the job stops (see :func:`_stopped`)
    routing: str
    pcie_gbps: float
    nic_usable: float
    layout: Any  #: :class:`topo.analysis.collective.ChannelLayout`
    allowed: list[int]  #: the algorithms NCCL may choose
    comm: Comm
    constants: Any
    collnet: float | None
    bases: dict[str, "_Base"]  #: "ring", "tree": each pattern routed once
    hops: int  #: most switch hops of a connection
    patterns: dict[str, _Pattern] = field(default_factory=dict)  #: the bases, sampled

    @property
    def n(self) -> int:
        return int(self.order.size)

    @property
    def ranks(self) -> int:
        return self.n * self.node.gpus

    def busiest(self, name: str) -> int:
        return self.bases[name].busiest if name in self.bases else 0

    def stages_at(self, ring_gbps: float | None, tree_gbps: float | None):
        ring = ring_stages(self.layout, self.node, ring_gbps / 8, self.busiest("ring")) if ring_gbps is not None else None
        tree = tree_stages(self.layout, self.node, tree_gbps / 8, self.busiest("tree")) if tree_gbps is not None else None
        return ring, tree

    def graphs_at(self, ring_gbps: float | None, tree_gbps: float | None) -> dict:
        ring, tree = self.stages_at(ring_gbps, tree_gbps)
        latency_inter = max(0, self.hops - 1) * self.options.switch_latency_ns * 1e-3
        return graphs(self.layout, self.node, ring, tree, self.collnet, latency_inter)

    def at(self, pattern: str, which: Any) -> float | None:
        """The slowest connection (Gb/s) of ``pattern`` at the ideal rate (``"ideal"``) or in hash sample ``which``."""
        if self.n == 1:
            return math.inf
        if pattern not in self.bases:
            return None
        if which == "ideal":
            return self.bases[pattern].ideal_gbps
        slow = self.patterns[pattern].slowest_gbps
        return float(slow[min(which, slow.size - 1)])


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
    options = options.for_fabric(fabric)
    node = node or node_model_of(fabric)
    tables = tables or port_tables(fabric)
    job = _job(fabric, options, faults, ud, node, tables, nic_map)
    sizes = np.asarray(options.sizes, dtype=np.float64)
    algo, proto, tuner_us = _tuner_choice(job, sizes)
    _sample_patterns(job, algo, baseline)
    times, limits, models = _sample_times(job, sizes, algo, proto)
    ranks = job.ranks
    with np.errstate(divide="ignore"):
        algbw = np.where(np.isfinite(times), sizes[None, :] / (times * 1e-6) / 1e9, 0.0)
    busbw = bus_bandwidth(algbw, ranks)
    if baseline is not None:
        busbw, times = cap_at_baseline(busbw, times, sizes, ranks, baseline)
    rows = _rows(options, times, busbw, models[_median_index(limits)], algo, proto, tuner_us, ranks)
    if baseline is not None:  # the median of fewer or more draws than the baseline's: bounded all the same
        _cap_rows(rows, baseline, ranks)
    draws = {name: int(p.slowest_gbps.size) for name, p in job.patterns.items()}
    if rows_only:  # the rows, and which nodes the restarted job leaves out
        return AllReduce(options, ranks, job.n, None, None, None, np.zeros(0), tuple(rows),  # type: ignore[arg-type]
                         {"stopped": job.stopped, "nodes": job.n}, busbw, draws)
    return replace(_result(job, faults, rows, limits, algo), sample_busbw=busbw, draws=draws)


def _job_nodes(fabric: Fabric, options: AnalysisOptions, faults: Faults, tables: PortTables,
               nic_map: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, dict[str, Any] | None]:
    """The job's nodes in rank order (those with a live NIC), their live NICs, and what stopped.

    With ``nic_map``, the positions of a group, every NIC of which must have a live link."""
    nic_link = tables.nic_link.reshape(-1, fabric.plan.homes)  # a dual-ToR NIC: its bond's two links
    if nic_map is None:
        order = job_nodes(fabric, options.job_gpus, options.order, options.seed)
        k = fabric.spec.nic_ports
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
    if order.size == 0:
        raise AnalysisError(["the job has no node with a live NIC link left: nothing to analyse"])
    return order, live_nics, stopped


def _job(fabric: Fabric, options: AnalysisOptions, faults: Faults, ud, node: NodeModel, tables: PortTables,
         nic_map: np.ndarray | None) -> _Job:
    """The job's communicator: its nodes, channels, the algorithms it may take, and its network
    patterns each routed once with the first hash seed."""
    order, live_nics, stopped = _job_nodes(fabric, options, faults, tables, nic_map)
    n = int(order.size)
    routing = options.routing
    if routing == "auto":
        routing = "ecmp" if fabric.ethernet else "dmodk"
    pcie_gbps = usable_pcie_gbps(node)
    nic_usable = min(fabric.spec.nic_port_gbps * options.link_efficiency, pcie_gbps)
    layout = channel_layout(node, n, nic_usable, live_nics, options.channels, fabric.plan.planes)
    sharp = options.sharp
    if sharp and fabric.ethernet:
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
    constants = load_constants(options.nccl_constants) if options.nccl_constants else DEFAULT_CONSTANTS
    comm = Comm(nodes=n, ranks=n * node.gpus, sm=node.sm, cpu_vendor=node.cpu_vendor,
                channels=layout.channels, net_overhead_us=options.step_latency_us)
    collnet = nic_usable / 8 if sharp else None
    return _Job(fabric, options, node, tables, order, stopped, routing, pcie_gbps, nic_usable, layout, allowed,
                comm, constants, collnet, bases, hops)


def _tuner_choice(job: _Job, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NCCL's tuner's algorithm and protocol per size, from the ideal graphs, and its time (us)."""
    options = job.options
    protocols = None if options.proto == "auto" else (PROTOCOLS.index(options.proto),)
    ideal = tune(job.comm, job.graphs_at(job.at("ring", "ideal"), job.at("tree", "ideal")), job.constants)
    algo, proto, tuner_us = ideal.choose(sizes, tuple(job.allowed), protocols)
    if not np.isfinite(tuner_us).all():
        raise AnalysisError([f"--algo {options.algo} --proto {options.proto}: NCCL has no such algorithm and "
                             f"protocol pair for this job (LL and LL128 are for ring and tree only)"])
    return algo, proto, tuner_us


def _sample_patterns(job: _Job, algo: np.ndarray, baseline: AllReduce | None) -> None:
    """Sample the hashing of the patterns that the chosen algorithms use; one draw of the others
    (with a baseline, as many draws as it took)."""
    chosen = set(algo.tolist())
    uses = {"ring": RING in chosen, "tree": bool({TREE, NVLS_TREE} & chosen)}
    if job.bases and not any(uses[name] for name in job.bases):
        uses["ring" if "ring" in job.bases else "tree"] = True  # CollNet or NVLS: the details show one
    for name, base in job.bases.items():
        draws = baseline.draws.get(name) if baseline is not None else None
        job.patterns[name] = sample_pattern(base, job.options, job.routing, uses[name], draws)


def _sample_times(job: _Job, sizes: np.ndarray, algo: np.ndarray, proto: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """Per hash sample: the chosen algorithm's time (us) at every size, the bandwidth limit of the
    largest size's algorithm, and the tuner's model of the sample's rates."""
    samples = max((p.slowest_gbps.size for p in job.patterns.values()), default=1)
    times = np.empty((samples, sizes.size))
    limits = np.empty(samples)
    achieved_models = []
    for s in range(samples):
        model = tune(job.comm, job.graphs_at(job.at("ring", s), job.at("tree", s)), job.constants, tree_cap=False)
        achieved_models.append(model)
        t = model.times_us(sizes)
        times[s] = t[algo, proto, np.arange(sizes.size)]
        limits[s] = model.bandwidth[algo[-1], SIMPLE] if model.bandwidth[algo[-1], SIMPLE] > 0 else \
            model.bandwidth[algo[-1], proto[-1]]
    return times, limits, achieved_models


def _rows(options: AnalysisOptions, times: np.ndarray, busbw: np.ndarray, median_model: Any, algo: np.ndarray,
          proto: np.ndarray, tuner_us: np.ndarray, ranks: int) -> list[dict[str, Any]]:
    """One row per message size: the median sample's time and bandwidths, the 5th percentile's busbw."""
    samples = times.shape[0]
    mid_time = np.median(times, axis=0) if samples > 1 else times[0]
    rows = []
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
    return rows


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


def _result(job: _Job, faults: Faults, rows: list[dict[str, Any]], limits: np.ndarray, algo: np.ndarray
            ) -> "AllReduce":
    """The AllReduce: rows, and the details of the median sample of the pattern of the largest size."""
    fabric, options, node, layout, routing, patterns = (job.fabric, job.options, job.node, job.layout, job.routing,
                                                        job.patterns)
    n, ranks, stopped, nic_usable, hops, tables = job.n, job.ranks, job.stopped, job.nic_usable, job.hops, job.tables
    stages_at, at = job.stages_at, job.at
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


def connection_samples(fabric: Fabric, options: AnalysisOptions, faults: Faults, ud, tables: PortTables,
                       routing: str, src: np.ndarray, dst: np.ndarray, pcie_gbps: float,
                       draws: int | None = None) -> np.ndarray:
    """Per hash sample, the slowest of these connections' rates (Gb/s), all routed and rated at once
    (``options.qps`` queue pairs each); ``draws`` sets the number of samples (a baseline's)."""
    conns = Connections(src.astype(np.int64), dst.astype(np.int64), np.zeros(src.size, dtype=np.int64),
                        "ring", 0, 0, 1)
    base = base_of(fabric, options, faults, ud, tables, routing, conns, pcie_gbps)
    return sample_pattern(base, options, routing, True, draws).slowest_gbps
