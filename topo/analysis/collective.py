"""Same-rank (rail) all-reduce: the job's rank order, its rings or trees, and their time.

A job of ``n`` nodes all-reduces ``S`` bytes over its ``n * gpus_per_node`` GPUs. Inside a node
the data is split over channels (NCCL's channels): one per local rank, so GPU ``r`` of every node
joins one collective over the ``n`` nodes with ``S / gpus_per_node`` bytes on its NIC's rail; when
a node has more NICs than GPUs, one channel per NIC, so every NIC carries its share. All channels
run at once. NVLink inside a node is taken not to be the bottleneck. Below, ``C`` is the number of
channels (``max(gpus_per_node, nics_per_node)``).

``ring``
    the nodes in rank order form a ring; each ring edge is a connection from a NIC to the same-rank
    NIC of the next node. All-reduce takes ``2(n-1)`` steps of ``S / (C * n)`` bytes;
    a step moves at the slowest connection and costs a latency ``alpha``.
``tree``
    NCCL's double binary tree over the nodes in rank order: two trees (the second mirrored, or
    shifted by one for odd ``n``), each carrying half of the data up (reduce) and down (broadcast)
    at once, pipelined; every tree edge is a connection in each direction with
    ``S / (2 * C)`` bytes. Time: those bytes at the slowest connection, plus
    ``2 * depth`` latencies.

``alpha = step_latency + switch_latency * (switch hops of the longest connection)``. Bandwidths
follow nccl-tests: ``algbw = S / time``, ``busbw = algbw * 2(N-1)/N`` with ``N`` the job's GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import AnalysisError
from ..fabric import Fabric

ORDERS = ("topology", "random")
ALGORITHMS = ("ring", "tree")


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
class Connections:
    """The job's connections (one per ring edge, or per tree edge and direction), per local rank."""

    src_nic: np.ndarray  #: global NIC id (node * nics_per_node + nic)
    dst_nic: np.ndarray
    local_rank: np.ndarray  #: channel of each connection (a local rank, or a NIC when NICs outnumber GPUs)
    algorithm: str
    nodes: int  #: nodes of the job
    depth: int  #: tree depth (0 for a ring)
    channels: int  #: collectives that run at once per node, each with 1/channels of the data


def connections(fabric: Fabric, order: np.ndarray, algorithm: str) -> Connections:
    """Every connection of the all-reduce, for all local ranks at once."""
    if algorithm not in ALGORITHMS:
        raise AnalysisError([f"--algo {algorithm}: expected one of {', '.join(ALGORITHMS)}"])
    spec = fabric.spec
    gpn, nics = spec.gpus_per_node, spec.nics_per_node
    n = order.size
    if algorithm == "ring":
        src_pos, dst_pos = np.arange(n), (np.arange(n) + 1) % n
        depth = 0
    else:
        pairs = [(child, parent) for tree in double_binary_tree(n) for child, parent in enumerate(tree)
                 if parent >= 0]
        child, parent = (np.array(side, dtype=np.int64) for side in zip(*pairs))
        src_pos, dst_pos = np.concatenate([child, parent]), np.concatenate([parent, child])
        depth = max(1, math.ceil(math.log2(n)))
    channels = max(gpn, nics)  # one per GPU; one per NIC when a GPU has several
    channel = np.arange(channels)
    nic = channel * nics // channels
    src = (order[src_pos][:, None] * nics + nic[None, :]).ravel()
    dst = (order[dst_pos][:, None] * nics + nic[None, :]).ravel()
    local_rank = np.broadcast_to(channel, (src_pos.size, channels)).ravel()
    return Connections(src, dst, local_rank.copy(), algorithm, n, depth, channels)


def collective_time(
    conns: Connections, size_bytes: float, slowest_gbps: float, max_switch_hops: int,
    step_latency_s: float, switch_latency_s: float,
) -> float:
    """Seconds to all-reduce ``size_bytes`` with the slowest connection at ``slowest_gbps``."""
    if slowest_gbps <= 0:
        return math.inf
    rate = slowest_gbps * 1e9 / 8  # bytes per second
    alpha = step_latency_s + switch_latency_s * max_switch_hops
    n = conns.nodes
    if conns.algorithm == "ring":
        chunk = size_bytes / (conns.channels * n)
        return 2 * (n - 1) * (chunk / rate + alpha)
    return size_bytes / (2 * conns.channels) / rate + 2 * conns.depth * alpha


def bus_bandwidth(algbw: float, ranks: int) -> float:
    """nccl-tests all-reduce bus bandwidth: ``algbw * 2(n-1)/n``."""
    return algbw * 2 * (ranks - 1) / ranks
