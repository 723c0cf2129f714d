"""The one door for collectives: :func:`price` prices a collective of concurrent groups on a fabric.

A collective is an all-reduce, all-gather, reduce-scatter, all-to-all or send/receive of some
message sizes, run at the same time by a set of groups of GPUs (rows of global GPU ranks,
:mod:`topo.analysis.groups`), or by the job of the analysis options. It is priced on a
:class:`Network`: a fabric under the analysis options (routing, congestion control, hash samples,
NCCL's constants) and failures. Every collective of ``topo analyze`` (:mod:`topo.analysis.analyze`)
and of the training step (:mod:`topo.analysis.training`) goes through :func:`price`:

``all-reduce``
    the all-reduce model (:mod:`topo.analysis.allreduce`): every group's rings or trees routed
    together, rated under the congestion model over the hash samples, timed by NCCL's tuner.
``all-gather``, ``reduce-scatter``
    half of the all-reduce of the same buffer (a ring all-reduce is a reduce-scatter followed by an
    all-gather); their bus bandwidth is the all-reduce's. One call prices a mix of the three (one
    routing, one set of hash draws).
``all-to-all``
    every rank of a group sends ``size`` bytes in all, ``size / n`` to each of the ``n`` ranks of
    its group: NVLink inside a domain, across domains NCCL's PXN (over NVLink to the GPU on the
    destination's rail, then out on that GPU's NIC); the slowest connection of all groups, routed
    together, sets the network's rate.
``send-receive``
    the first GPU of every pair (a group of two) sends ``size`` bytes to the second, all pairs at
    once: over NVLink inside a domain, else on the destination GPU's rail (PXN) on two
    connections per peer (NCCL_NCHANNELS_PER_NET_PEER).

With failures, a collective is priced on the hash draws of the network with fewer failures
(``Network.baseline``, or the ``baseline`` result given) and is never quicker than there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple, Sequence

import numpy as np

from ..fabric import Fabric
from ..hardware.servers import NodeModel
from .allreduce import AllReduce, allreduce, connection_samples
from .collective import node_model_of, nvlink_usable, usable_pcie_gbps
from .faults import Faults, apply_faults
from .groups import gpu_nics, group_shape
from .options import AnalysisOptions
from .routing import port_tables
from .tuner import DEFAULT_CONSTANTS, RING, SIMPLE, TunerConstants, load_constants
from .updown import updown

#: The collectives :func:`price` prices.
OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-receive")
#: The collectives priced from the all-reduce model (one call may mix them).
REDUCTIONS = ("all-reduce", "all-gather", "reduce-scatter")
#: NCCL's connections per peer for point-to-point sends (NCCL_NCHANNELS_PER_NET_PEER).
P2P_CHANNELS = 2
#: Latency (s) of a message that stays on NVLink.
NVLINK_LATENCY_S = 2e-6


class Network:
    """A fabric under analysis options and failures, ready to price collectives on.

    ``node`` is one server as the all-reduce model sees it (by default the fabric's profile),
    ``domain`` the GPUs of one NVLink domain (by default a server), ``faults`` the parts lost (by
    default those of ``options``). :attr:`baseline` is the same fabric with fewer failures (or
    None): every collective priced here is first priced there, then on its hash draws and never
    quicker."""

    def __init__(self, fabric: Fabric, options: AnalysisOptions | None = None, node: NodeModel | None = None,
                 faults: Faults | None = None, domain: int | None = None, ud=None,
                 baseline: "Network | None" = None) -> None:
        self.fabric = fabric
        self.options = o = (options or AnalysisOptions()).for_fabric(fabric)
        self.node = node or node_model_of(fabric)
        self.per_node, self.nics = fabric.spec.gpus_per_node, fabric.spec.nic_ports
        self.domain = domain or self.per_node
        self.faults = faults if faults is not None else apply_faults(fabric, o.fail, o.fail_random, o.seed)
        self.ud = ud or updown(fabric, self.faults)
        self.tables = port_tables(fabric)
        self.routing = o.routing if o.routing != "auto" else ("ecmp" if fabric.ethernet else "dmodk")
        self.baseline = baseline
        self._constants: TunerConstants | None = None

    @property
    def constants(self) -> TunerConstants:
        """NCCL's tuner tables (``options.nccl_constants``, else NCCL's own)."""
        if self._constants is None:
            path = self.options.nccl_constants
            self._constants = load_constants(path) if path else DEFAULT_CONSTANTS
        return self._constants

    def net_latency_s(self) -> float:
        """One network message's latency: NCCL's Simple-protocol network latency and the switch hops."""
        hops = 2 * (self.fabric.plan.tiers - 1)  # leaf to the top tier and down
        return (float(self.constants.table("hw_latency_net")[RING, SIMPLE])
                + hops * self.options.switch_latency_ns * 1e-3) * 1e-6


class Timing(NamedTuple):
    """One message size of a priced collective."""

    time_s: float | None  #: of one call by every group at once; None: no route under the failures
    algorithm: str  #: NCCL's ("ring", "tree", ...), "alltoall", "p2p", or "none" (one GPU)
    bandwidth_GBps: float | None  #: the bus bandwidth, or for all-to-all and send-receive a connection's rate


@dataclass(frozen=True, eq=False)
class Priced:
    """A collective priced: a :class:`Timing` per message size, and what a baseline takes from it."""

    ops: tuple[str, ...]
    sizes: tuple[float, ...]
    rows: tuple[Timing, ...]
    #: the all-reduce the reductions rest on (its rows; its details when asked for; its hash draws)
    allreduce: AllReduce | None = None
    #: per hash sample, the slowest connection (Gb/s) of an all-to-all or a send-receive
    slowest_gbps: np.ndarray | None = None


def price(net: Network, op: str | Sequence[str], sizes: Sequence[float], groups: np.ndarray | None = None, *,
          name: str = "the", baseline: Priced | AllReduce | None = None, detail: bool = False) -> Priced:
    """Price one collective at each of ``sizes`` (bytes) on ``net``: ``op`` is one of :data:`OPS`
    (for a mix of the reductions, one per size).

    ``groups`` (groups, ranks) are global GPU ranks in rank order, every group running the
    collective at once (for ``send-receive``, pairs: the first sends to the second); None is the
    job of ``net.options`` (its nodes, ``job_gpus`` and ``order``), for the reductions. ``name``
    names the groups in errors. ``baseline`` is the same collective priced with fewer failures
    (by default priced here on ``net.baseline``, if any). ``detail`` keeps the all-reduce's details
    (bottlenecks, link utilisation, the median sample's routes and rates).
    """
    ops = (op,) * len(sizes) if isinstance(op, str) else tuple(op)
    if len(ops) != len(sizes) or not set(ops) <= set(OPS) or (len(set(ops)) > 1 and not set(ops) <= set(REDUCTIONS)):
        raise ValueError(f"collective {op!r} for {len(sizes)} sizes: expected one of {OPS}, or a mix of {REDUCTIONS}")
    if ops[0] in REDUCTIONS:
        return _reduction(net, ops, tuple(sizes), groups, name, baseline, detail)
    if groups is None:
        raise ValueError(f"{ops[0]}: give the groups")
    if isinstance(baseline, AllReduce):
        raise ValueError(f"{ops[0]}: the baseline is a priced {ops[0]}")
    if baseline is None and net.baseline is not None:
        baseline = price(net.baseline, ops, sizes, groups, name=name)
    intact = None if baseline is None else baseline.slowest_gbps
    if ops[0] == "all-to-all":
        return _all_to_all(net, ops, tuple(sizes), groups, name, intact)
    return _send_receive(net, ops, tuple(sizes), groups, intact)


def _reduction(net: Network, ops: tuple[str, ...], sizes: tuple[float, ...], groups: np.ndarray | None,
               name: str, baseline: Priced | AllReduce | None, detail: bool) -> Priced:
    """All-reduces (and the all-gathers and reduce-scatters that are half of one) by the model."""
    node, nic_map = net.node, None
    if groups is not None:
        shape = group_shape(groups, net.per_node, net.nics, net.domain, name)
        if shape.members * shape.domains == 1:
            return Priced(ops, sizes, tuple(Timing(0.0, "none", None) for _ in sizes))
        node, nic_map = replace(net.node, gpus=shape.members, nics=shape.nic_map.shape[2]), shape.nic_map
    if baseline is None and net.baseline is not None:
        baseline = price(net.baseline, ops, sizes, groups, name=name)
    base = baseline.allreduce if isinstance(baseline, Priced) else baseline
    options = replace(net.options, sizes=tuple(max(1, int(x)) for x in sizes))
    if groups is not None:  # the groups' faults are the network's: the options name none
        options = replace(options, fail=(), fail_random=0.0)
    result = allreduce(net.fabric, options, net.faults, net.ud, node, rows_only=not detail, nic_map=nic_map,
                       tables=net.tables, baseline=base)
    rows = []
    for op, row in zip(ops, result.rows, strict=True):
        t = row["time_s"]
        if t is not None and op != "all-reduce":
            t = float(t) / 2  # a reduce-scatter or an all-gather: half of the all-reduce's ring
        rows.append(Timing(None if t is None else float(t), row["algorithm"], row["busbw_GBps"]))
    return Priced(ops, sizes, tuple(rows), allreduce=result)


def _slowest(net: Network, src: np.ndarray, dst: np.ndarray, intact: np.ndarray | None) -> np.ndarray:
    """Per hash sample, the slowest of these connections' rates (Gb/s); with a baseline on its
    draws and never above its rate on the same draw."""
    slowest = connection_samples(net.fabric, net.options, net.faults, net.ud, net.tables, net.routing, src, dst,
                                 usable_pcie_gbps(net.node), None if intact is None else int(intact.size))
    if intact is not None:
        common = min(slowest.size, intact.size)
        slowest = np.minimum(slowest[:common], intact[:common])
    return slowest


def _median_gbps(slowest: np.ndarray | None) -> float:
    """The median over hash samples of the slowest connection (Gb/s); inf without connections."""
    return math.inf if slowest is None or slowest.size == 0 else float(np.median(slowest))


def _all_to_all(net: Network, ops: tuple[str, ...], sizes: tuple[float, ...], groups: np.ndarray, name: str,
                intact: np.ndarray | None) -> Priced:
    """Every rank sends ``size / n`` bytes to each rank of its group; NCCL posts every peer's send
    at once (one network latency)."""
    s = group_shape(groups, net.per_node, net.nics, net.domain, name)
    n, p, m = groups.shape[1], s.members, s.domains
    nvl = nvlink_usable(net.node)
    if m == 1:
        return Priced(ops, sizes, tuple(Timing(NVLINK_LATENCY_S + size * (p - 1) / n / (nvl * 1e9), "alltoall", None)
                                        for size in sizes))
    nm = s.nic_map  # (G, m, q)
    q = nm.shape[2]
    i, j = np.nonzero(~np.eye(m, dtype=bool))
    src = nm[:, i, :].reshape(-1)
    dst = nm[:, j, :].reshape(-1)
    slowest = _slowest(net, src, dst, intact)
    gbps = _median_gbps(slowest)
    rows = []
    for size in sizes:
        if gbps <= 0:
            rows.append(Timing(None, "alltoall", None))
            continue
        rate = gbps / 8  # GB/s of one connection
        # NVLink carries the peers in the domain, and the remote data bound for another rail
        nvlink = size * ((p - 1) + (n - p) * (1 - 1 / q)) / n / (nvl * 1e9)
        per_connection = p * p * size / n / q  # a domain's data for one remote domain, on one of q rails
        network = per_connection / (rate * 1e9)
        rows.append(Timing(net.net_latency_s() + max(nvlink, network), "alltoall", rate))
    return Priced(ops, sizes, tuple(rows), slowest_gbps=slowest)


def _send_receive(net: Network, ops: tuple[str, ...], sizes: tuple[float, ...], pairs: np.ndarray,
                  intact: np.ndarray | None) -> Priced:
    """Every pair's first GPU sends to its second, all at once. Pairs in one domain go over NVLink
    (and when every pair does, so does the figure); between domains the send leaves on the
    destination GPU's rail (NCCL's PXN: over NVLink to the sender's GPU of that rank first)."""
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise ValueError("send-receive: the groups are pairs, (sender, receiver)")
    a, b = pairs[:, 0], pairs[:, 1]
    on_net = (a // net.domain) != (b // net.domain)
    if not on_net.any():
        nvl = nvlink_usable(net.node)
        return Priced(ops, sizes, tuple(Timing(NVLINK_LATENCY_S + size / (nvl * 1e9), "p2p", nvl) for size in sizes))
    a, b = a[on_net], b[on_net]
    per_node, nics = net.per_node, net.nics
    rail = b % per_node  # the destination's local rank: its rail on both servers
    src = gpu_nics((a // per_node) * per_node + rail, per_node, nics)
    dst = gpu_nics(b, per_node, nics)
    channel = np.arange(P2P_CHANNELS) % src.shape[-1]
    src, dst = src[:, channel].ravel(), dst[:, channel].ravel()
    slowest = _slowest(net, src, dst, intact)
    gbps = _median_gbps(slowest)
    if gbps <= 0:
        return Priced(ops, sizes, tuple(Timing(None, "p2p", None) for _ in sizes), slowest_gbps=slowest)
    rate = P2P_CHANNELS * gbps / 8
    return Priced(ops, sizes, tuple(Timing(net.net_latency_s() + size / (rate * 1e9), "p2p", rate) for size in sizes),
                  slowest_gbps=slowest)
