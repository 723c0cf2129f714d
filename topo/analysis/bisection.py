"""Bisection bandwidth: the analytic value per tier, confirmed by max-flow on chosen splits.

Definition: over all splits of the GPUs into two equal halves, the least total link capacity (one
direction, Gb/s) between the halves. For an intact, regular fabric this is the least over its
tiers of half the tier's upward capacity: the NIC links, the leaf uplinks, and in three tiers the
spine uplinks. :func:`bisection` reports that value and measures max-flow (scipy, Dinic) between
the two halves of several splits: the tier-aligned ones, each loading one tier, and seeded random
balanced splits.

The flow network has the switches only, plus a source and a sink: each leaf gets an arc from the
source with the capacity of its live side-A NIC links and an arc to the sink with that of its live
side-B NIC links, so servers never carry transit traffic; the parallel links of a switch pair are
merged into one arc of their summed live capacity, in both directions. Capacities are int32 Gb/s.

A split assigns sides to endpoints: NICs when ``nics_per_node <= gpus_per_node`` (each NIC with its
GPUs), otherwise GPUs (a GPU's ``nics_per_node / gpus_per_node`` NICs move together). Both halves
have the same number of endpoints (one more on side A when the count is odd).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from ..errors import AnalysisError
from ..fabric import LINK_KINDS, Fabric
from .faults import Faults, no_faults

#: Names of the tier-aligned splits, in the order they are evaluated (the last only in three tiers).
TIER_SPLITS = ("half-of-each-leaf", "half-of-each-pod", "half-of-the-pods")


@dataclass(frozen=True, eq=False)
class Split:
    """Two halves of the endpoints, as the side of every NIC.

    Attributes
    ----------
    name : str
        ``half-of-each-leaf``, ``half-of-each-pod``, ``half-of-the-pods`` or ``random-N``.
    kind : str
        ``tier`` (tier-aligned) or ``random`` for the splits topo makes; any label for one made by
        hand.
    side_a : ndarray of bool
        One entry per node-leaf link, in link row order (node, then NIC index): True on side A.
    """

    name: str
    kind: str
    side_a: np.ndarray


@dataclass(frozen=True)
class TierCapacity:
    """Upward capacity of one tier of links, intact."""

    links: str  #: link kind: node-leaf, leaf-spine or spine-core
    capacity_gbps: int  #: all links of the kind, one direction
    half_gbps: int | float  #: half of it: the bisection this tier allows

    def to_dict(self) -> dict[str, Any]:
        return {"links": self.links, "capacity_gbps": self.capacity_gbps, "half_gbps": self.half_gbps}


@dataclass(frozen=True)
class SplitFlow:
    """Max-flow between the two halves of one split."""

    name: str
    kind: str
    gbps: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "gbps": self.gbps}


@dataclass(frozen=True)
class Bisection:
    """Bisection bandwidth of a fabric, analytic and measured.

    Attributes
    ----------
    gbps : int or float
        Analytic value for the intact fabric: the least ``half_gbps`` over ``tiers``.
    maxflow_gbps : int
        The least max-flow over the evaluated splits (with the faults applied).
    agrees : bool
        True when the worst tier-aligned split's max-flow equals ``gbps``. Only meaningful
        without faults.
    note : str
        Says whether the two agree, or why the analytic value does not apply.
    tiers : tuple of TierCapacity
    splits : tuple of SplitFlow
        Tier-aligned splits first, then the random ones.
    endpoint : str
        ``nic`` or ``gpu``: what a split assigns to a side.
    endpoints : int
    links_down : int
    random_splits, seed : int
    """

    gbps: int | float
    maxflow_gbps: int
    agrees: bool
    note: str
    tiers: tuple[TierCapacity, ...]
    splits: tuple[SplitFlow, ...]
    endpoint: str
    endpoints: int
    links_down: int
    random_splits: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the keys are a stable interface)."""
        return {
            "gbps": self.gbps,
            "maxflow_gbps": self.maxflow_gbps,
            "agrees": self.agrees,
            "note": self.note,
            "endpoint": self.endpoint,
            "endpoints": self.endpoints,
            "links_down": self.links_down,
            "random_splits": self.random_splits,
            "seed": self.seed,
            "tiers": [tier.to_dict() for tier in self.tiers],
            "splits": [split.to_dict() for split in self.splits],
        }


# --- endpoints and splits ----------------------------------------------------------------------


def _nic_rows(fabric: Fabric) -> np.ndarray:
    """Rows of the node-leaf links (link row order is node, then NIC index)."""
    return np.flatnonzero(fabric.links.kind == 0)


def endpoints(fabric: Fabric) -> tuple[str, np.ndarray]:
    """What a split moves, and the endpoint number of every NIC (node-leaf link row order).

    Returns ``("nic", ...)`` with one endpoint per NIC when ``nics_per_node <= gpus_per_node``,
    else ``("gpu", ...)`` where the NICs of one GPU (NIC ``i`` belongs to GPU
    ``i * gpus_per_node // nics_per_node``) share an endpoint.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> endpoints(build_fabric(load_spec({"gpus": 8, "gpus_per_node": 2, "nics_per_node": 4})))
    ('gpu', array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]))
    """
    links, spec = fabric.links, fabric.spec
    rows = _nic_rows(fabric)
    node, nic = links.lo[rows].astype(np.int64), links.lo_port[rows].astype(np.int64)
    gpus, nics = spec.gpus_per_node, spec.nics_per_node
    if nics <= gpus:
        return "nic", node * nics + nic
    return "gpu", node * gpus + nic * gpus // nics


def _first_leaf(fabric: Fabric, endpoint: np.ndarray) -> np.ndarray:
    """Leaf (from 0) of the lowest NIC of each endpoint."""
    leaf = fabric.links.hi[_nic_rows(fabric)] - fabric.first(1)
    count = int(endpoint.max()) + 1 if endpoint.size else 0
    first = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, endpoint, np.arange(endpoint.size))
    return leaf[first].astype(np.int64)


def _halve_groups(group: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Side A of each endpoint: the first half of every group, in ``order``.

    The middle endpoint of a group of odd size goes to side A in the 1st, 3rd, ... such group and
    to side B in the others, so the halves differ by at most one endpoint.
    """
    g = group[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, g.size])
    rank = np.arange(g.size) - np.repeat(starts, sizes)
    odd = sizes % 2 == 1
    extra = odd & (np.cumsum(odd) % 2 == 1)  # odd groups number 1, 3, 5, ... give A the middle
    take = np.repeat(sizes // 2 + extra, sizes)
    side = np.zeros(g.size, dtype=bool)
    side[order] = rank < take
    return side


def tier_aligned_splits(fabric: Fabric) -> tuple[Split, ...]:
    """The splits that load one tier each, deterministic.

    Endpoints are ordered by their group, then by the leaf of their lowest NIC, then by endpoint
    number (node, then NIC or GPU); the first half of every group goes to side A:

    - ``half-of-each-leaf``: group = leaf; the halves can talk inside every leaf (NIC links);
    - ``half-of-each-pod``: group = pod (in two tiers, the whole fabric): half of the leaves of
      every pod against the other half (leaf uplinks);
    - ``half-of-the-pods`` (three tiers): group = the whole fabric, ordered by pod: half of the
      pods against the other half (spine uplinks).

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> splits = tier_aligned_splits(build_fabric(load_spec({"gpus": 1024})))
    >>> [(s.name, int(s.side_a.sum())) for s in splits]
    [('half-of-each-leaf', 512), ('half-of-each-pod', 512)]
    """
    _, endpoint = endpoints(fabric)
    leaf = _first_leaf(fabric, endpoint)
    pod = leaf // fabric.plan.leaves_per_pod
    order = np.lexsort((np.arange(leaf.size), leaf))  # leaves are numbered pod by pod
    groups = {
        "half-of-each-leaf": leaf,
        "half-of-each-pod": pod,
        "half-of-the-pods": np.zeros_like(pod),
    }
    names = TIER_SPLITS if fabric.plan.tiers == 3 else TIER_SPLITS[:2]
    out = []
    for name in names:
        side = _halve_groups(groups[name], order)
        out.append(Split(name=name, kind="tier", side_a=side[endpoint]))
    return tuple(out)


def random_balanced_splits(fabric: Fabric, count: int, seed: int = 0) -> tuple[Split, ...]:
    """``count`` random splits into equal halves of endpoints, from ``numpy.random.default_rng(seed)``.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> splits = random_balanced_splits(build_fabric(load_spec({"gpus": 64})), 2, seed=7)
    >>> [(s.name, int(s.side_a.sum())) for s in splits]
    [('random-0', 32), ('random-1', 32)]
    """
    _, endpoint = endpoints(fabric)
    total = int(endpoint.max()) + 1 if endpoint.size else 0
    rng = np.random.default_rng(seed)
    out = []
    for n in range(count):
        side = np.zeros(total, dtype=bool)
        side[rng.permutation(total)[: (total + 1) // 2]] = True
        out.append(Split(name=f"random-{n}", kind="random", side_a=side[endpoint]))
    return tuple(out)


# --- the flow network ----------------------------------------------------------------------------


class FlowNetwork:
    """The switch-level flow network of a fabric under faults, built once for many splits.

    Vertices: the switches (vertex index minus ``fabric.first(1)``), then the source and the sink.
    Arcs: every switch pair with live links, both directions, capacity the sum of the live links'
    Gb/s; source to every leaf and every leaf to sink, with capacities set per split.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 1024}))
    >>> network = FlowNetwork(fabric)
    >>> [network.value(split.side_a) for split in tier_aligned_splits(fabric)]
    [204800, 204800]
    """

    def __init__(self, fabric: Fabric, faults: Faults | None = None) -> None:
        faults = faults or no_faults(fabric)
        links = fabric.links
        leaf0 = fabric.first(1)
        self.leaves = fabric.plan.leaves
        switches = len(fabric.names) - leaf0
        self.source, self.sink = switches, switches + 1
        self.vertices = switches + 2

        up = (links.kind >= 1) & faults.live
        key = (links.lo[up].astype(np.int64) - leaf0) * switches + (links.hi[up] - leaf0)
        pair, inverse = np.unique(key, return_inverse=True)
        cap = np.bincount(inverse.reshape(-1), weights=links.gbps[up], minlength=pair.size)
        lo, hi = pair // switches, pair % switches
        self.pair_lo, self.pair_hi = lo, hi
        self.pair_gbps = cap.astype(np.int64)

        leaves = np.arange(self.leaves, dtype=np.int64)
        rows = np.concatenate([lo, hi, np.full(self.leaves, self.source), leaves])
        cols = np.concatenate([hi, lo, leaves, np.full(self.leaves, self.sink)])
        self._order = np.lexsort((cols, rows))
        self._indices = cols[self._order].astype(np.int32)
        self._indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=self.vertices))].astype(np.int32)
        self._fixed = np.concatenate([self.pair_gbps, self.pair_gbps])

        nic = _nic_rows(fabric)
        self._nic_leaf = (links.hi[nic] - leaf0).astype(np.int64)
        self._nic_gbps = np.where(faults.live[nic], links.gbps[nic], 0).astype(np.int64)

    def terminals(self, side_a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Capacities of the arcs source -> leaf and leaf -> sink for a split (Gb/s per leaf)."""
        side_a = np.asarray(side_a, dtype=bool)
        a = np.bincount(self._nic_leaf, weights=self._nic_gbps * side_a, minlength=self.leaves)
        b = np.bincount(self._nic_leaf, weights=self._nic_gbps * ~side_a, minlength=self.leaves)
        return a.astype(np.int64), b.astype(np.int64)

    def csr(self, side_a: np.ndarray) -> csr_matrix:
        """The network with the split's source and sink arcs, as an int32 CSR matrix."""
        a, b = self.terminals(side_a)
        data = np.concatenate([self._fixed, a, b])
        if data.size and data.max() > np.iinfo(np.int32).max:
            raise OverflowError("a capacity does not fit in int32 Gb/s")
        data = data[self._order].astype(np.int32)
        return csr_matrix((data, self._indices, self._indptr), shape=(self.vertices, self.vertices))

    def value(self, side_a: np.ndarray) -> int:
        """Max-flow (Gb/s) from side A to side B, with scipy's Dinic."""
        return int(maximum_flow(self.csr(side_a), self.source, self.sink).flow_value)

    def digraph(self, side_a: np.ndarray) -> nx.DiGraph:
        """The same network as a networkx DiGraph with ``capacity`` on every positive arc."""
        a, b = self.terminals(side_a)
        g = nx.DiGraph()
        g.add_nodes_from(range(self.vertices))
        lo, hi, cap = self.pair_lo.tolist(), self.pair_hi.tolist(), self.pair_gbps.tolist()
        g.add_edges_from((u, v, {"capacity": c}) for u, v, c in zip(lo, hi, cap) if c > 0)
        g.add_edges_from((v, u, {"capacity": c}) for u, v, c in zip(lo, hi, cap) if c > 0)
        g.add_edges_from((self.source, leaf, {"capacity": c}) for leaf, c in enumerate(a.tolist()) if c)
        g.add_edges_from((leaf, self.sink, {"capacity": c}) for leaf, c in enumerate(b.tolist()) if c)
        return g


def split_maxflow(fabric: Fabric, split: Split, faults: Faults | None = None) -> int:
    """Max-flow (Gb/s) between the halves of ``split`` with scipy (Dinic).

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 768, "oversubscription": 3}))
    >>> split_maxflow(fabric, tier_aligned_splits(fabric)[1])
    51200
    """
    return FlowNetwork(fabric, faults).value(split.side_a)


def maxflow_networkx(fabric: Fabric, split: Split, faults: Faults | None = None) -> int:
    """The same max-flow as :func:`split_maxflow`, with networkx's generic ``maximum_flow_value``.

    For comparison and tests: it builds the same network as a ``networkx.DiGraph`` (a Python loop
    over arcs), so it is much slower on large fabrics.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 768, "oversubscription": 3}))
    >>> maxflow_networkx(fabric, tier_aligned_splits(fabric)[1])
    51200
    """
    network = FlowNetwork(fabric, faults)
    graph = network.digraph(split.side_a)
    return int(nx.maximum_flow_value(graph, network.source, network.sink))


# --- the analysis ---------------------------------------------------------------------------------


def tier_capacities(fabric: Fabric) -> tuple[TierCapacity, ...]:
    """Upward capacity of every tier of links of the intact fabric, and half of it.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> [t.half_gbps for t in tier_capacities(build_fabric(load_spec({"gpus": 768, "oversubscription": 3})))]
    [153600, 51200]
    """
    links = fabric.links
    out = []
    for kind in range(fabric.plan.tiers):
        total = int(links.gbps[links.kind == kind].sum(dtype=np.int64))
        half = total // 2 if total % 2 == 0 else total / 2
        out.append(TierCapacity(links=LINK_KINDS[kind], capacity_gbps=total, half_gbps=half))
    return tuple(out)


def _uneven(fabric: Fabric) -> str:
    """What makes a fabric irregular for the analytic value ("" when nothing does)."""
    nic = _nic_rows(fabric)
    per_leaf = np.bincount(fabric.links.hi[nic] - fabric.first(1), minlength=fabric.plan.leaves)
    per_pod = np.bincount(np.arange(fabric.plan.leaves) // fabric.plan.leaves_per_pod)
    reasons = []
    if per_leaf.min() != per_leaf.max():
        reasons.append(f"leaves with {per_leaf.min()} to {per_leaf.max()} NIC links")
    if per_pod.min() != per_pod.max():
        reasons.append(f"pods of {per_pod.min()} to {per_pod.max()} leaves")
    return " and ".join(reasons)


def bisection(
    fabric: Fabric, faults: Faults | None = None, random_splits: int = 4, seed: int = 0
) -> Bisection:
    """Bisection bandwidth: the analytic value and max-flow on tier-aligned and random splits.

    Parameters
    ----------
    fabric : Fabric
    faults : Faults, optional
        Links that are down (default: none); they count in the max-flow only.
    random_splits : int
        Seeded random balanced splits evaluated after the tier-aligned ones.
    seed : int
        Seed of the random splits.

    Returns
    -------
    Bisection

    Raises
    ------
    AnalysisError
        If ``random_splits`` is negative.

    Notes
    -----
    Building the network is a few numpy passes over the links; each split then costs one Dinic
    max-flow, O(V^2 E) in the worst case but near-linear on these layered networks.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> result = bisection(build_fabric(load_spec({"gpus": 1024})))
    >>> result.gbps, result.maxflow_gbps, result.agrees
    (204800, 204800, True)
    >>> [(s.name, s.gbps) for s in result.splits][:2]
    [('half-of-each-leaf', 204800), ('half-of-each-pod', 204800)]
    """
    faults = faults or no_faults(fabric)
    if random_splits < 0:
        raise AnalysisError([f"random_splits={random_splits}: must be 0 or more"])
    tiers = tier_capacities(fabric)
    analytic = min(t.half_gbps for t in tiers)
    network = FlowNetwork(fabric, faults)
    splits = tier_aligned_splits(fabric) + random_balanced_splits(fabric, random_splits, seed)
    flows = tuple(SplitFlow(s.name, s.kind, network.value(s.side_a)) for s in splits)
    worst_tier = min((f for f in flows if f.kind == "tier"), key=lambda f: f.gbps)
    least = min(f.gbps for f in flows)
    agrees = worst_tier.gbps == analytic
    if faults.any:
        note = (
            f"{faults.links_down} links are down: gbps is the analytic value of the intact fabric "
            f"and does not apply; maxflow_gbps is measured with the faults"
        )
    elif agrees:
        tied = ", ".join(f.name for f in flows if f.kind == "tier" and f.gbps == worst_tier.gbps)
        note = f"max-flow on the worst tier-aligned split ({tied}) equals the analytic value"
    else:
        note = (
            f"max-flow on the worst tier-aligned split ({worst_tier.name}: {worst_tier.gbps} Gb/s) "
            f"differs from the analytic value ({analytic} Gb/s)"
        )
        uneven = _uneven(fabric)
        if uneven:
            note += (
                f": the analytic value assumes halves of whole leaves or pods with equal uplinks, "
                f"and this fabric has {uneven}"
            )
    if not faults.any and least < analytic:
        worst = min(flows, key=lambda f: f.gbps)
        note += f"; split {worst.name} has less ({worst.gbps} Gb/s) than the analytic value"
    kind, endpoint = endpoints(fabric)
    return Bisection(
        gbps=analytic, maxflow_gbps=least, agrees=agrees, note=note, tiers=tiers, splits=flows,
        endpoint=kind, endpoints=int(endpoint.max()) + 1 if endpoint.size else 0,
        links_down=faults.links_down, random_splits=random_splits, seed=seed,
    )
