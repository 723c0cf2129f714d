"""The analysis of a fabric: hops, bisection, ECMP width and the same-rank all-reduce.

:func:`analyze` runs every analysis on the fabric (with the faults asked for, if any) and, when
there are faults, on the intact fabric too, so the change can be reported. The all-reduce part
follows the lossless congestion model of ``docs/model.md``: connections -> sub-flows (queue pairs)
-> paths (ECMP hash or adaptive spraying) -> rates (max-min fair under ECN, or PFC pause spreading)
-> the collective's time for each message size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import AnalysisError
from ..fabric import Fabric
from .bisection import Bisection, bisection
from .collective import (ALGORITHMS, ORDERS, Connections, bus_bandwidth, collective_time, connections,
                         job_nodes)
from .congestion import CC_MODES, Rates, solve_rates
from .ecmp import EcmpWidth, ecmp_width
from .faults import Faults, apply_faults, no_faults
from .hops import HopCounts, hop_counts
from .routing import ROUTING_MODES, Routes, port_tables, route
from .updown import updown

MIB = 1 << 20
GIB = 1 << 30
#: 1 MiB to 8 GiB in steps of 4x, and 8 GiB itself.
#: Largest message size an analysis takes.
MAX_SIZE_BYTES = 1 << 40
DEFAULT_SIZES = (MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, GIB, 4 * GIB, 8 * GIB)
#: Measured NDR 400G all-reduce busbw per NIC is 46-48 GB/s of a 50 GB/s line rate: 47/50.
DEFAULT_LINK_EFFICIENCY = 0.94
UTILISATION_BINS = 10


@dataclass(frozen=True)
class AnalysisOptions:
    """What to analyse and how (defaults as documented in docs/model.md)."""

    job_gpus: int | None = None
    order: str = "topology"
    seed: int = 0
    algo: str = "ring"
    routing: str = "ecmp"
    qps: int = 1
    hash_seed: int = 0
    cc: str = "ecn"
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY
    switch_latency_ns: float = 300.0
    step_latency_us: float = 2.0
    sizes: tuple[int, ...] = DEFAULT_SIZES
    fail: tuple[str, ...] = ()
    fail_random: float = 0.0
    random_splits: int = 4

    def check(self) -> None:
        """Raise AnalysisError naming every option that is out of range."""
        problems = []
        for name, value, allowed in (("order", self.order, ORDERS), ("algo", self.algo, ALGORITHMS),
                                     ("routing", self.routing, ROUTING_MODES), ("cc", self.cc, CC_MODES)):
            if value not in allowed:
                problems.append(f"--{name} {value}: expected one of {', '.join(allowed)}")
        if not 1 <= self.qps <= 256:
            problems.append(f"--qps {self.qps}: must be from 1 to 256 queue pairs per connection")
        if not 0 < self.link_efficiency <= 1:  # also refuses NaN
            problems.append(f"--link-efficiency {self.link_efficiency}: must be in (0, 1]")
        for flag, value, high in (("--switch-latency-ns", self.switch_latency_ns, 1e6),
                                  ("--step-latency-us", self.step_latency_us, 1e6)):
            if not 0 <= value <= high:  # also refuses NaN and infinity
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
        }
        if self.baseline is not None:
            out["change"] = self.change()
        return out

    def notes(self) -> list[str]:
        """Plain statements a reviewer must not miss (a cut fabric, a bisection disagreement)."""
        notes = []
        if self.hops.unreachable_pairs:
            notes.append(
                f"the fabric is cut: {self.hops.unreachable_pairs:,} of {self.hops.pairs:,} GPU pairs "
                f"on different nodes have no route"
            )
        unreachable = int((~self.allreduce.routes.reachable).sum())
        if unreachable:
            notes.append(
                f"the all-reduce cannot complete: {unreachable:,} of its connections' queue pairs "
                f"have no route"
            )
        if self.allreduce.details["nvlink_only"]:
            notes.append(
                f"the job fits in one node ({self.allreduce.job_gpus} GPUs): its all-reduce runs over NVLink "
                f"only and puts no traffic on the fabric, so there are no network all-reduce figures"
            )
        if self.bisection.note and (not self.bisection.agrees or self.faults.any):
            notes.append(f"bisection: {self.bisection.note}")
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


def allreduce(fabric: Fabric, options: AnalysisOptions, faults: Faults, ud=None) -> AllReduce:
    """Route, rate and time the job's same-rank all-reduce for every message size.

    A job on one node all-reduces over NVLink only: no connection touches the fabric, and the
    result says so (``details["nvlink_only"]``) with no network figures.
    """
    spec = fabric.spec
    order = job_nodes(fabric, options.job_gpus, options.order, options.seed)
    if order.size == 1:
        return _nvlink_only(fabric, options, order, faults, ud)
    conns = connections(fabric, order, options.algo)
    routes = route(fabric, conns.src_nic, conns.dst_nic, qps=options.qps, mode=options.routing,
                   hash_seed=options.hash_seed, faults=faults, ud=ud)
    rates = solve_rates(routes.resources, routes.capacity_gbps, routes.reachable, options.cc,
                        options.link_efficiency)
    q = options.qps
    sub_rate = np.where(routes.reachable, rates.rate_gbps, 0.0).reshape(-1, q)
    connection_gbps = q * sub_rate.min(axis=1)
    slowest = float(connection_gbps.min())
    job_gpus = order.size * spec.gpus_per_node
    hops = routes.links.reshape(-1, q).max(axis=1)
    max_switch_hops = int(hops.max()) - 1 if hops.max() > 0 else 0
    rows = []
    for size in options.sizes:
        t = collective_time(conns, size, slowest, max_switch_hops,
                            options.step_latency_us * 1e-6, options.switch_latency_ns * 1e-9)
        algbw = size / t / 1e9 if np.isfinite(t) else 0.0
        rows.append({
            "size_bytes": int(size),
            "time_s": float(f"{t:.6g}") if np.isfinite(t) else None,
            "algbw_GBps": round(algbw, 3),
            "busbw_GBps": round(bus_bandwidth(algbw, job_gpus), 3),
        })

    nic_link = port_tables(fabric).nic_link
    src_leaf = fabric.links.hi[nic_link[conns.src_nic]]
    dst_leaf = fabric.links.hi[nic_link[conns.dst_nic]]
    leaving_leaf = int((src_leaf != dst_leaf).sum())
    leaving_pod = int((fabric.pod[src_leaf] != fabric.pod[dst_leaf]).sum())
    nic_line = spec.nic_gbps * options.link_efficiency
    details = {
        "job_gpus": job_gpus,
        "nodes": int(order.size),
        "nvlink_only": False,
        "algorithm": options.algo,
        "connections": int(conns.src_nic.size),
        "subflows": int(routes.resources.shape[0]),
        "connections_leaving_leaf": leaving_leaf,
        "connections_leaving_pod": leaving_pod,
        "nic_rate_gbps": round(nic_line, 3),
        "slowest_connection_gbps": round(slowest, 3),
        "mean_connection_gbps": round(float(connection_gbps.mean()), 3),
        "connections_below_nic_rate": (int((connection_gbps < nic_line * (1 - 1e-9)).sum())
                                       if options.algo == "ring" else None),
        "busbw_limit_GBps": round(bus_bandwidth(_algbw_limit(conns, slowest), job_gpus), 3),
        "max_switch_hops": max_switch_hops,
        "bottlenecks": _bottlenecks(fabric, routes, rates, connection_gbps, q),
        "link_utilisation": _distribution(_fabric_utilisation(routes, rates, fabric)),
    }
    return AllReduce(options, job_gpus, int(order.size), conns, routes, rates, connection_gbps,
                     tuple(rows), details)


def _nvlink_only(fabric: Fabric, options: AnalysisOptions, order: np.ndarray, faults: Faults,
                 ud=None) -> AllReduce:
    """The all-reduce of a one-node job: NVLink only, so nothing to route, rate or time here."""
    none = np.zeros(0, dtype=np.int64)
    gpn, nics = fabric.spec.gpus_per_node, fabric.spec.nics_per_node
    conns = Connections(none, none, none, options.algo, 1, 0, max(gpn, nics))
    routes = route(fabric, none, none, qps=options.qps, mode=options.routing, hash_seed=options.hash_seed,
                   faults=faults, ud=ud)
    rates = solve_rates(routes.resources, routes.capacity_gbps, routes.reachable, options.cc,
                        options.link_efficiency)
    rows = tuple({"size_bytes": int(size), "time_s": None, "algbw_GBps": None, "busbw_GBps": None}
                 for size in options.sizes)
    details = {
        "job_gpus": gpn, "nodes": 1, "nvlink_only": True, "algorithm": options.algo, "connections": 0,
        "subflows": 0, "connections_leaving_leaf": 0, "connections_leaving_pod": 0,
        "nic_rate_gbps": round(fabric.spec.nic_gbps * options.link_efficiency, 3),
        "slowest_connection_gbps": None, "mean_connection_gbps": None, "connections_below_nic_rate": None,
        "busbw_limit_GBps": None, "max_switch_hops": 0,
        "bottlenecks": {"slowest_connections": 0, "saturated_by_kind": {}, "top": []},
        "link_utilisation": {"resources": 0},
    }
    return AllReduce(options, gpn, 1, conns, routes, rates, np.zeros(0), rows, details)


def _algbw_limit(conns: Connections, slowest_gbps: float) -> float:
    """algbw in GB/s as the message grows without bound (no latency term)."""
    if slowest_gbps <= 0:
        return 0.0
    rate = slowest_gbps / 8  # GB/s
    n = conns.nodes
    if conns.algorithm == "ring":
        return rate * conns.channels * n / (2 * (n - 1))
    return rate * 2 * conns.channels


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
    on_path = np.unique(on_path[on_path >= 0])
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


def analyze(fabric: Fabric, options: AnalysisOptions | None = None) -> Analysis:
    """Run every analysis of ``fabric`` with ``options`` (faults included), and the intact baseline.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> result = analyze(build_fabric(load_spec({"gpus": 1024})))
    >>> result.to_dict()["bisection"]["gbps"], result.hops.diameter_links
    (204800, 4)
    """
    options = options or AnalysisOptions()
    options.check()
    faults = apply_faults(fabric, options.fail, options.fail_random, options.seed)
    result = _analyze(fabric, options, faults)
    if faults.any:
        intact = _analyze(fabric, options, no_faults(fabric))
        result = Analysis(fabric, options, faults, result.hops, result.bisection, result.ecmp,
                          result.allreduce, baseline=intact)
    return result


def _analyze(fabric: Fabric, options: AnalysisOptions, faults: Faults) -> Analysis:
    ud = updown(fabric, faults)
    return Analysis(
        fabric=fabric,
        options=options,
        faults=faults,
        hops=hop_counts(fabric, faults),
        bisection=bisection(fabric, faults, random_splits=options.random_splits, seed=options.seed),
        ecmp=ecmp_width(fabric, faults, seed=options.seed),
        allreduce=allreduce(fabric, options, faults, ud),
    )
