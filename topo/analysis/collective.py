"""The job's all-reduce as NCCL runs it: channels, rings and trees over all GPUs, and their stages.

A job of ``n`` nodes of ``g`` GPUs all-reduces ``S`` bytes over its ``N = n * g`` GPUs. NCCL splits
the data over ``C`` channels (its communicator's channels, :func:`channel_layout`); every channel is
a ring (or a tree) through all ``N`` GPUs: NVLink hops inside a node, and between nodes a connection
from the channel's NIC to the same-rank NIC of the next node (ring) or of its tree parent and
children (NCCL's double binary tree over nodes; half the channels on each tree). NVLS and NVLSTree
reduce inside a node through NVSwitch (NVLink SHARP); CollNet reduces in the InfiniBand switches.

This module builds the connections that go on the network (:func:`connections`), and from the
network rate of the slowest connection (the congestion model) and the node's NVLink and PCIe
bandwidth, the graphs NCCL's tuner takes (:func:`graphs`): per algorithm, its channels and the
bandwidth of one channel. :mod:`topo.analysis.tuner` turns those into times. ``docs/model.md``
derives every formula below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import AnalysisError
from ..fabric import Fabric
from ..hardware.catalog import resolve_server
from ..hardware.servers import NodeModel
from .tuner import (COLLNET_CHAIN, COLLNET_DIRECT, NVLS, NVLS_TREE, RING, TREE, Graph, compcap_index,
                    comm_channels, duplicate_channels, search_speed, SPEEDS_INTRA)

from .choices import ALGORITHMS, ORDERS, PROTOCOL_CHOICES  # noqa: F401  (their home is choices)
ALGO_INDEX = {"ring": RING, "tree": TREE, "nvls": NVLS, "nvlstree": NVLS_TREE,
              "collnetdirect": COLLNET_DIRECT, "collnetchain": COLLNET_CHAIN}
#: Usable fraction of NVLink's per-link rate, as NCCL models it (topo.h SM*_NVLINK_BW over the
#: published 25 or 50 GB/s per link and direction): Volta/Ampere 20, Hopper 20.6, Blackwell 40.1.
NVLINK_EFFICIENCY = (20.0 / 25.0, 20.0 / 25.0, 20.6 / 25.0, 40.1 / 50.0)
#: Usable fraction of a PCIe link's data rate after TLP and DLLP overhead (256-byte payloads).
PCIE_EFFICIENCY = 0.9
#: NCCL_MAX_NCHANNELS default (MAXCHANNELS in src/include/device.h).
MAX_CHANNELS = 64
#: NVLS heads at most (NCCL_MAX_NVLS_ARITY).
MAX_NVLS_HEADS = 32


def job_nodes(fabric: Fabric, job_gpus: int | None, order: str, seed: int) -> np.ndarray:
    """The job's nodes in rank order.

    ``topology`` takes the first nodes in fabric order, which keeps each scalable unit and leaf
    together; ``random`` takes a seeded random set of nodes in a random order, as a careless
    scheduler would.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 256}))
    >>> job_nodes(fabric, 64, "topology", 0).tolist()
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    spec, nodes = fabric.spec, fabric.plan.nodes
    gpn = spec.gpus_per_node
    job_gpus = spec.gpus if job_gpus is None else job_gpus
    problems = []
    if job_gpus % gpn:
        problems.append(f"--job-gpus {job_gpus} is not a multiple of gpus_per_node={gpn}")
    elif job_gpus > spec.gpus:
        problems.append(f"--job-gpus {job_gpus} is more than the fabric's {spec.gpus} GPUs")
    elif job_gpus < gpn:
        problems.append(f"--job-gpus {job_gpus}: a job takes at least one node ({gpn} GPUs)")
    if order not in ORDERS:
        problems.append(f"--order {order}: expected one of {', '.join(ORDERS)}")
    if problems:
        raise AnalysisError(problems)
    count = job_gpus // gpn
    if order == "topology":
        return np.arange(count, dtype=np.int64)
    rng = np.random.default_rng(seed)
    return rng.permutation(nodes)[:count].astype(np.int64)


def double_binary_tree(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parent of each position in NCCL's two binary trees over ``n`` ranks (-1 for a root).

    Tree 1 is the in-order binary tree on ranks (a rank's lowest set bit gives its level); tree 2
    mirrors it for even ``n`` and shifts it by one for odd ``n``, so that a rank that is interior in
    one tree is a leaf in the other.

    Examples
    --------
    >>> t1, t2 = double_binary_tree(8)
    >>> t1.tolist()
    [-1, 2, 4, 2, 0, 6, 4, 6]
    """
    ranks = np.arange(n)
    parent = np.full(n, -1, dtype=np.int64)
    for r in range(1, n):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        if up >= n:
            up = r ^ bit
        parent[r] = up
    if n % 2 == 0:
        mirror = n - 1 - ranks  # rank of each position in the mirrored tree
        second = np.full(n, -1, dtype=np.int64)
        p = parent[mirror]
        second[ranks] = np.where(p >= 0, n - 1 - p, -1)
    else:
        shift = (ranks - 1) % n
        p = parent[shift]
        second = np.where(p >= 0, (p + 1) % n, -1)
    return parent, second




@dataclass(frozen=True, eq=False)
class ChannelLayout:
    """How NCCL spreads a job over channels and NICs.

    Attributes
    ----------
    nodes : int
        Nodes of the job.
    gpus, nics : int
        GPUs and NICs of a node.
    graph_channels : int
        Channels of NCCL's ring and tree graphs (one per NIC, doubled by ``ncclTopoDupChannels``
        when a channel is fast).
    channels : int
        The communicator's channels (``ncclTopoPostset``): each is one ring and one tree edge set.
    nic_of : ndarray of int, shape (nodes, channels)
        NIC (0 to nics - 1) each channel uses on each node of the job, in rank order; a channel
        whose NIC's link is down moves to the node's next live NIC, as NCCL does after a restart.
    """

    nodes: int
    gpus: int
    nics: int
    graph_channels: int
    channels: int
    nic_of: np.ndarray = field(repr=False)

    @property
    def flows_per_nic(self) -> float:
        return self.channels / self.nics


def channel_layout(node: NodeModel, nodes: int, nic_gbps: float, live_nics: np.ndarray | None = None,
                   channels: int | None = None, planes: int = 1) -> ChannelLayout:
    """The job's channels: NCCL's ring graph has one channel per NIC at the NIC's usable rate
    ``nic_gbps`` (Gb/s), duplicated when fast, and the communicator twice that (or ``channels``).

    ``live_nics[i, k]`` says NIC ``k`` of the ``i``-th node of the job has a live link. A dead
    NIC's channels go to the node's next live NIC; with ``planes`` (NIC ``k`` is a port in plane
    ``k % planes``), to the next live one in the same plane, as the peer's NIC for the channel is
    in that plane and no link joins two planes, and only when the node has none left in that plane
    to the next live one of any plane.

    Examples
    --------
    >>> from topo.hardware.catalog import server_profiles
    >>> h100 = server_profiles()["hgx-h100-8nic"].node_model()
    >>> lay = channel_layout(h100, 4, 376.0)
    >>> lay.graph_channels, lay.channels, lay.nic_of[0].tolist()
    (8, 16, [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7])
    """
    k = node.nics
    per_channel = min(nic_gbps / 8, _pcie_per_nic(node))
    graph, bw = duplicate_channels(k, per_channel, node.sm, MAX_CHANNELS)
    comm = comm_channels(graph, bw, node.sm, nodes, MAX_CHANNELS) if channels is None else channels
    base = np.arange(comm) % graph % k
    nic_of = np.broadcast_to(base, (nodes, comm)).copy()
    if live_nics is not None and not live_nics.all():
        for i in np.flatnonzero(~live_nics.all(axis=1)):
            alive = np.flatnonzero(live_nics[i])
            if alive.size == 0:
                continue  # no NIC: the node cannot take part (the caller reports it)
            # each dead NIC's channels go to the next live NIC of the node (of its plane if it has one)
            nxt = np.searchsorted(alive, np.arange(k)) % alive.size
            target = np.where(live_nics[i], np.arange(k), alive[nxt])
            if planes > 1:
                for p in range(planes):
                    same = alive[alive % planes == p]
                    if same.size:
                        mine = np.arange(p, k, planes)
                        target[mine] = np.where(live_nics[i, mine], mine,
                                                same[np.searchsorted(same, mine) % same.size])
            nic_of[i] = target[base]
    return ChannelLayout(nodes, node.gpus, k, graph, comm, nic_of)


@dataclass(frozen=True, eq=False)
class Connections:
    """The job's network connections: one per channel and ring edge, or per tree edge and direction."""

    src_nic: np.ndarray  #: global NIC id (node * nics_per_node + nic)
    dst_nic: np.ndarray
    local_rank: np.ndarray  #: channel of each connection
    algorithm: str  #: "ring" or "tree" (the pattern on the network)
    nodes: int  #: nodes of the job
    depth: int  #: tree depth over nodes (0 for a ring)
    channels: int  #: channels, each with 1/channels of the data


def connections(order: np.ndarray, layout: ChannelLayout, pattern: str,
                nic_map: np.ndarray | None = None) -> Connections:
    """Every network connection of the all-reduce, for all channels at once.

    ``ring``: channel ``c`` goes from position ``i`` to ``i + 1`` (mod ``n``) in rank order, NIC
    ``nic_of[i, c]`` to NIC ``nic_of[i + 1, c]``. ``tree``: the first half of the channels run on
    tree 1 of :func:`double_binary_tree`, the second half on tree 2 (NCCL's ``connectTrees``);
    every tree edge is a connection in each direction (reduce up, broadcast down).

    ``nic_map`` (groups, n, nics), when given, is several communicators of the same shape at once
    (say the data-parallel groups of a training job): NIC ``j`` of position ``i`` of group ``G``
    is the global NIC ``nic_map[G, i, j]``, and ``order`` is not used. The connections are those
    of every group, group after group.
    """
    if pattern not in ("ring", "tree"):
        raise AnalysisError([f"connection pattern {pattern}: expected ring or tree"])
    n, C, k = order.size, layout.channels, layout.nics
    channel = np.arange(C)
    if pattern == "ring":
        src_pos = np.broadcast_to(np.arange(n)[:, None], (n, C))
        dst_pos = (src_pos + 1) % n
        chan = np.broadcast_to(channel, (n, C))
        depth = 0
    else:
        trees = double_binary_tree(n)
        half = max(1, C // 2)
        which = (channel // half) % 2  # tree of each channel
        src_parts, dst_parts, chan_parts = [], [], []
        for t, parent in enumerate(trees):
            child = np.flatnonzero(parent >= 0)
            chans = channel[which == t]
            if chans.size == 0 or child.size == 0:
                continue
            up_src = np.concatenate([child, parent[child]])
            up_dst = np.concatenate([parent[child], child])
            src_parts.append(np.repeat(up_src, chans.size))
            dst_parts.append(np.repeat(up_dst, chans.size))
            chan_parts.append(np.tile(chans, up_src.size))
        src_pos = np.concatenate(src_parts) if src_parts else np.zeros(0, dtype=np.int64)
        dst_pos = np.concatenate(dst_parts) if dst_parts else np.zeros(0, dtype=np.int64)
        chan = np.concatenate(chan_parts) if chan_parts else np.zeros(0, dtype=np.int64)
        depth = max(1, math.ceil(math.log2(n))) if n > 1 else 0
    src_pos, dst_pos, chan = (np.asarray(a).ravel() for a in (src_pos, dst_pos, chan))
    if nic_map is not None:
        src = nic_map[:, src_pos, layout.nic_of[src_pos, chan]].ravel()
        dst = nic_map[:, dst_pos, layout.nic_of[dst_pos, chan]].ravel()
        chan = np.tile(chan, nic_map.shape[0])
    else:
        src = order[src_pos] * k + layout.nic_of[src_pos, chan]
        dst = order[dst_pos] * k + layout.nic_of[dst_pos, chan]
    return Connections(src.astype(np.int64), dst.astype(np.int64), chan.astype(np.int64), pattern, n,
                       depth, C)


def node_model_of(fabric: Fabric) -> NodeModel:
    """The node model of the fabric's server profile (its ``server``, or the one the shape picks)."""
    return resolve_server(fabric.spec).node_model()


def usable_pcie_gbps(node: NodeModel) -> float:
    """Gb/s a NIC's traffic can take over its GPU-NIC PCIe path, each way."""
    return min(node.gpu_pcie_GBps, node.nic_pcie_GBps) * PCIE_EFFICIENCY * 8


def _pcie_per_nic(node: NodeModel) -> float:
    """GB/s a NIC's traffic can take over PCIe each way (GPUDirect RDMA: GPU and NIC links)."""
    return min(node.gpu_pcie_GBps, node.nic_pcie_GBps) * PCIE_EFFICIENCY


def nvlink_usable(node: NodeModel) -> float:
    """GB/s of NVLink a GPU sends (and receives) as NCCL counts it."""
    return node.nvlink_bw * NVLINK_EFFICIENCY[compcap_index(node.sm)]


@dataclass(frozen=True)
class Stages:
    """Algorithm bandwidth limits (GB/s, bytes of the buffer per second) of one algorithm's stages.

    ``network`` comes from the slowest connection; ``nvlink`` and ``pcie`` from the node.
    """

    network: float
    nvlink: float
    pcie: float

    @property
    def limit(self) -> float:
        return min(self.network, self.nvlink, self.pcie)

    def to_dict(self, ranks: int) -> dict[str, Any]:
        """As bus bandwidths (nccl-tests' busbw) in GB/s."""
        f = 2 * (ranks - 1) / ranks if ranks > 1 else 1.0
        out = {name: (round(value * f, 3) if math.isfinite(value) else None)
               for name, value in (("network", self.network), ("nvlink", self.nvlink), ("pcie", self.pcie))}
        out["bottleneck"] = min(("network", "nvlink", "pcie"), key=lambda s: getattr(self, s))
        return out


def ring_stages(layout: ChannelLayout, node: NodeModel, slowest_GBps: float, busiest: int = 0) -> Stages:
    """A ring over all ``N`` GPUs moves ``2(N-1)/N`` of the data over every edge of every channel.

    Network: ``C`` channels, each edge at the slowest connection's rate ``R``: algbw
    ``C R N / (2(N-1))``. NVLink: every GPU but a channel's exit GPU sends each channel's data on:
    algbw ``B_nvl g / (g-1) * N / (2(N-1))`` across nodes, ``B_nvl N / (2(N-1))`` on one node.
    PCIe: a NIC's traffic also crosses its GPU-NIC PCIe path (GPUDirect RDMA), so the network
    formula with the NIC's ``busiest`` connections sharing PCIe's ``P``: ``C P / busiest N / (2(N-1))``
    (``k P N / (2(N-1))`` with the even ``C / k`` connections per NIC).
    """
    n, g = layout.nodes, layout.gpus
    N = n * g
    f = N / (2 * (N - 1))
    nvl = nvlink_usable(node)
    if n == 1:
        return Stages(math.inf, nvl * f if g > 1 else math.inf, math.inf)
    nvl_limit = (nvl * g / (g - 1) * f) if g > 1 else math.inf
    busiest = busiest or math.ceil(layout.flows_per_nic)
    return Stages(layout.channels * slowest_GBps * f, nvl_limit,
                  layout.channels * _pcie_per_nic(node) / busiest * f)


def tree_stages(layout: ChannelLayout, node: NodeModel, slowest_GBps: float, busiest: int = 0) -> Stages:
    """NCCL's tree: a chain through the node's GPUs, a double binary tree across nodes.

    Every network connection carries its channel's whole share ``S / C`` (up for the reduce, down
    for the broadcast), so the network algbw is ``C R`` with ``R`` the slowest connection's rate
    (a NIC carrying several connections shares its rate among them). Inside a node every GPU sends
    each channel's data up and down the chain: NVLink algbw ``B_nvl / 2``. PCIe: the network
    formula with the NIC's ``busiest`` connections sharing PCIe's ``P``: ``C P / busiest``.
    """
    if layout.nodes == 1:
        nvl = nvlink_usable(node)
        return Stages(math.inf, nvl / 2 if layout.gpus > 1 else math.inf, math.inf)
    nvl = nvlink_usable(node) / 2 if layout.gpus > 1 else math.inf
    busiest = busiest or 4 * math.ceil(layout.flows_per_nic)
    return Stages(layout.channels * slowest_GBps, nvl, layout.channels * _pcie_per_nic(node) / busiest)


def graphs(layout: ChannelLayout, node: NodeModel, ring: Stages | None, tree: Stages | None,
           collnet_GBps: float | None, latency_inter_us: float) -> dict[int, Graph]:
    """The graphs NCCL's tuner takes, with bandwidths set so that its formulas, before their
    protocol factors and caps, give the stage limits above (see docs/model.md).

    ``ring`` and ``tree`` are the stage limits of the two patterns (None: not computed, e.g. no
    network); ``collnet_GBps`` the per-NIC rate to the switches for CollNet (None: no SHARP).
    """
    n, g = layout.nodes, layout.gpus
    N = n * g
    G = layout.graph_channels
    out: dict[int, Graph] = {}
    if ring is not None:
        bw = ring.limit * 2 * (N - 1) / N / G
        out[RING] = Graph(G, bw, bw, node.nvlink_bw > 0, latency_inter_us)
    if tree is not None:
        bw = 2 * tree.limit / G
        out[TREE] = Graph(G, bw, bw, node.nvlink_bw > 0, latency_inter_us)
    if node.nvls and g > 1:
        heads = min(g, MAX_NVLS_HEADS) if n == 1 else min(g, layout.nics, MAX_NVLS_HEADS)
        intra = search_speed(nvlink_usable(node) / heads, node.sm)
        if n == 1:  # NCCL's search raises an NVLS graph's inter bandwidth up to twice the intra one
            out[NVLS] = Graph(heads, intra, min(2 * intra, SPEEDS_INTRA[compcap_index(node.sm)][0]), True, 0.0)
        else:
            if collnet_GBps is not None:  # NVLS across nodes reduces in the switches (SHARP)
                out[NVLS] = Graph(heads, intra, layout.nics * collnet_GBps / heads, True, latency_inter_us)
            if tree is not None:
                net = tree.network * 2 * (N - 1) / N / heads / (2 if n <= 2 else 1)
                out[NVLS_TREE] = Graph(heads, intra, net, True, latency_inter_us)
    if collnet_GBps is not None and n > 1:
        heads = layout.nics
        intra = nvlink_usable(node) / heads if node.nvlink_bw > 0 else _pcie_per_nic(node)
        bw = min(intra, collnet_GBps, _pcie_per_nic(node))
        out[COLLNET_CHAIN] = Graph(heads, bw, bw, node.nvlink_bw > 0, latency_inter_us)
        if node.nvswitch > 0:
            out[COLLNET_DIRECT] = Graph(heads, bw, bw, True, latency_inter_us)
    return out
