"""Bisection bandwidth: the analytic least cut, confirmed by max-flow on chosen splits.

Definition: over all splits of the GPUs into two equal halves, the least total link capacity (one
direction, Gb/s) between the halves. :func:`least_cut` works it out from the fabric's classes of
leaves and pods: a cut puts every switch on one side, so the least over balanced splits is the least
over how many pods of each class put their spines on side A, how many units (a leaf, or the rail
leaves of one GPU's NICs) of each size go to the other side from their pod, and how many endpoints
go to the other side from their unit (see :class:`LeastCut`). When the halves can be whole pods or
whole leaves of a regular fabric, that is the least half of a tier's upward capacity; with uneven
leaves or pods, or an odd count of them, it is not. :func:`bisection`
reports it and measures max-flow (scipy, Dinic) between the two halves of several splits: the
tier-aligned ones, each loading one tier, the split that realises the analytic value
(``least-cut``, on an irregular fabric), and seeded random balanced splits.

The flow network has the switches only, plus a source and a sink: each leaf gets an arc from the
source with the capacity of its live side-A NIC links and an arc to the sink with that of its live
side-B NIC links, so servers never carry transit traffic; the parallel links of a switch pair are
merged into one arc of their summed live capacity, in both directions. Capacities are int32 Gb/s.

A split assigns sides to endpoints: NICs when ``nics_per_node <= gpus_per_node`` (each NIC with its
GPUs), otherwise GPUs (a GPU's ``nics_per_node / gpus_per_node`` NICs move together). Both halves
have the same number of endpoints (one more on side A when the count is odd).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from ..errors import AnalysisError
from ..fabric import LINK_KINDS, Fabric, plane_view
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
    half_gbps: int | float  #: half of it: the bisection of a regular fabric whose narrowest tier it is

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
    gbps : int
        The bisection: the analytic value (``least_cut.gbps``) of the intact fabric, or the least
        max-flow over the evaluated splits if one is lower (``source`` says which); with faults,
        the analytic value of the intact fabric.
    source : str
        ``analytic`` or ``max-flow``: where ``gbps`` comes from.
    maxflow_gbps : int
        The least max-flow over the evaluated splits (with the faults applied).
    agrees : bool
        True when the worst tier-aligned split's max-flow equals the analytic value. Only
        meaningful without faults.
    note : str
        Says whether the two agree, or why the analytic value does not apply.
    tiers : tuple of TierCapacity
    splits : tuple of SplitFlow
        Tier-aligned splits first (``least-cut`` last of them on an irregular fabric), then the
        random ones.
    endpoint : str
        ``nic`` or ``gpu``: what a split assigns to a side.
    endpoints : int
    links_down : int
    random_splits, seed : int
    least_cut : LeastCut
        The analytic value, its terms and the split that realises it.
    """

    gbps: int
    source: str
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
    least_cut: LeastCut

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the keys are a stable interface)."""
        return {
            "gbps": self.gbps,
            "source": self.source,
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
            "least_cut": self.least_cut.to_dict(),
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
    node = links.lo[rows].astype(np.int64)
    nic = links.lo_port[rows].astype(np.int64) // fabric.plan.homes  # a dual-ToR bond's two links: one NIC
    gpus, nics = spec.gpus_per_node, spec.nic_ports
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


# --- the analytic least cut ---------------------------------------------------------------------

#: Most choices (pods of each class on side A, times moves of the less numerous unit sizes) that
#: :func:`least_cut` weighs at once. Pods of one class are interchangeable and a fabric has a few
#: classes and at most two unit sizes, so even 2,048 pods with 64 partial units make 1,049,088.
MAX_CHOICES = 1 << 22


@dataclass(frozen=True, eq=False)
class LeastCut:
    """The balanced split of least capacity of the intact fabric, worked out from its classes.

    The capacity of a balanced split is its min cut, and a cut is a choice of side for every
    switch. With *units* (a leaf, or in rail placement the ``nics_per_node / gpus_per_node`` rail
    leaves that one GPU's NICs use in its scalable unit) of ``E_u`` endpoints each, ``h`` the
    endpoints of side A, ``U`` one unit's uplinks, ``W`` one pod's spine uplinks (0 in two tiers)
    and ``e`` one endpoint's NIC links, a cut costs::

        W min(s, m - s)  +  U (units on the other side from their pod's spines)
                         +  e |h - (endpoints of the units on side A)|

    for ``s`` of the ``m`` pods with their spines on side A. :func:`least_cut` minimises it over
    how many pods of each class (pods with the same units) go to side A and how many units of each
    size move to the other side from their pod.

    Attributes
    ----------
    gbps : int
        The least capacity: the analytic bisection.
    exact : bool
        True when ``gbps`` is the least over every balanced split: always with ``method``
        ``classes`` or ``units``, and with ``bounds`` when the two bounds meet.
    lower_gbps : int
        A lower bound on the least (``gbps`` when ``exact``).
    method : str
        ``classes`` when every unit lies in one pod: the minimum above. When some GPU's NICs
        reach leaves of several pods (rail placement, pods of fewer leaves than a GPU has NICs),
        the least has at most one unit split between the sides, and ``units`` tries every such
        split (up to ``MAX_UNITS_TRIED`` units), each with its best pods. Beyond that, ``bounds``:
        ``gbps`` is the least cut of a split of whole units and part of one found from a few
        choices of pods, improving the units and the pods in turn (an upper bound), and
        ``lower_gbps`` is the minimum above with every NIC free to take a side (a lower bound).
    split : Split
        ``least-cut`` (kind ``tier``): side A is the endpoints of the units on side A, topped up or
        cut down to ``h`` in endpoint order. Its max-flow is ``gbps`` when ``exact``.
    pods, pods_a : int
        Pods (1 in two tiers), and pods whose spines are on side A (the smaller side counts).
    unit_leaves, units_moved : int
        Leaves per unit, and units on the other side from their pod's spines.
    endpoints_across : int
        Endpoints on the other side from their unit: ``|h - endpoints of the units on side A|``.
    pod_uplink_gbps, unit_uplink_gbps, endpoint_gbps : int
        ``W``, ``U`` and ``e``.
    planes : int
        Planes of the fabric. With more than one, every term above but ``gbps`` and ``lower_gbps``
        is one plane's, and those two are one plane's times ``planes``: the planes are the same
        fabric and a split moves a GPU's NIC ports in every plane together.
    """

    gbps: int
    exact: bool
    lower_gbps: int
    method: str
    split: Split
    pods: int
    pods_a: int
    unit_leaves: int
    units_moved: int
    endpoints_across: int
    pod_uplink_gbps: int
    unit_uplink_gbps: int
    endpoint_gbps: int
    planes: int = 1

    def to_dict(self) -> dict[str, Any]:
        out = {
            "gbps": self.gbps, "exact": self.exact, "lower_gbps": self.lower_gbps,
            "method": self.method, "pods": self.pods, "pods_a": self.pods_a, "unit_leaves": self.unit_leaves,
            "units_moved": self.units_moved, "endpoints_across": self.endpoints_across,
            "pod_uplink_gbps": self.pod_uplink_gbps, "unit_uplink_gbps": self.unit_uplink_gbps,
            "endpoint_gbps": self.endpoint_gbps,
        }
        if self.planes > 1:
            out["planes"] = self.planes
        return out


@dataclass(frozen=True, eq=False)
class _Cut:
    """The optimum of :func:`_least_cut_of_units`."""

    gbps: int
    pod_a: np.ndarray  #: bool per pod: its spines on side A
    unit_a: np.ndarray  #: bool per unit: on side A
    units_moved: int
    endpoints_across: int


def _least_cut_of_units(sizes: np.ndarray, pod: np.ndarray, pods: int, unit_gbps: int, pod_gbps: int,
                        endpoint_gbps: int, half: int) -> _Cut | None:
    """Least ``W min(s, m - s) + U moved + e |half - endpoints on A|`` over pods and unit moves.

    ``sizes`` are the endpoints of every unit and ``pod`` its pod. Pods with the same count of
    units of every size form a class; a choice takes ``s_q`` pods of class ``q`` to side A (any
    ``s_q`` of them: they are interchangeable) and moves ``d_c`` units of size ``c`` to the other
    side (onto side A from pods on side B when ``d_c > 0``, off it when ``d_c < 0``; moving both
    ways within one size only costs more). The cost is convex in the ``d`` of one size, so the
    most numerous size takes the best of ``0``, ``floor``, ``ceil`` of its real optimum and its
    limits, while the other sizes (a partial scalable unit: at most ``nics_per_node`` units) are
    enumerated. Returns None when that makes more than ``MAX_CHOICES`` choices.
    """
    size_values, size_class = np.unique(sizes, return_inverse=True)
    size_class = size_class.reshape(-1)
    per_pod = np.zeros((pods, size_values.size), dtype=np.int64)
    np.add.at(per_pod, (pod, size_class), 1)
    profiles, pod_class, counts = np.unique(per_pod, axis=0, return_inverse=True, return_counts=True)
    pod_class = pod_class.reshape(-1)
    total_units = counts @ profiles
    big = int(np.argmax(total_units))
    others = [c for c in range(size_values.size) if c != big]
    choices = np.prod(counts + 1, dtype=np.float64) * np.prod(2.0 * total_units[others] + 1)
    if choices > MAX_CHOICES:
        return None
    grid = np.meshgrid(*(np.arange(c + 1, dtype=np.int64) for c in counts), indexing="ij")
    chosen = np.stack([g.ravel() for g in grid], axis=1)  # (K, classes): pods of each class on A
    s = chosen.sum(axis=1)
    pod_cost = pod_gbps * np.minimum(s, pods - s)
    on_a = chosen @ profiles  # (K, sizes): units of each size in pods on side A
    on_b = (counts - chosen) @ profiles
    deficit = half - on_a @ size_values  # endpoints side A still needs

    if others:
        ranges = [np.arange(-total_units[c], total_units[c] + 1, dtype=np.int64) for c in others]
        moves = np.stack([g.ravel() for g in np.meshgrid(*ranges, indexing="ij")], axis=1)
    else:
        moves = np.zeros((1, 0), dtype=np.int64)  # (G, sizes - 1)
    ok = np.ones((chosen.shape[0], moves.shape[0]), dtype=bool)
    for j, c in enumerate(others):
        ok &= (moves[None, :, j] >= -on_a[:, c, None]) & (moves[None, :, j] <= on_b[:, c, None])
    rest = deficit[:, None] - (moves @ size_values[others])[None, :]  # (K, G)
    fixed = pod_cost[:, None] + unit_gbps * np.abs(moves).sum(axis=1)[None, :]

    size = int(size_values[big])
    lo, hi = -on_a[:, big, None], on_b[:, big, None]
    floor = rest // size
    best = np.full(rest.shape, np.iinfo(np.int64).max, dtype=np.int64)
    best_d = np.zeros(rest.shape, dtype=np.int64)
    for d in (np.zeros_like(rest), floor, floor + 1, np.broadcast_to(lo, rest.shape),
              np.broadcast_to(hi, rest.shape)):
        d = np.clip(d, lo, hi)
        cost = unit_gbps * np.abs(d) + endpoint_gbps * np.abs(rest - d * size)
        better = cost < best
        best = np.where(better, cost, best)
        best_d = np.where(better, d, best_d)
    total = np.where(ok, fixed + best, np.iinfo(np.int64).max)
    k, g = np.unravel_index(int(np.argmin(total)), total.shape)

    pod_a = np.zeros(pods, dtype=bool)
    for q, take in enumerate(chosen[k].tolist()):
        pod_a[np.flatnonzero(pod_class == q)[:take]] = True
    unit_a = pod_a[pod].copy()
    delta = np.zeros(size_values.size, dtype=np.int64)
    delta[others] = moves[g]
    delta[big] = best_d[k, g]
    for c, d in enumerate(delta.tolist()):
        if d > 0:
            unit_a[np.flatnonzero((size_class == c) & ~unit_a)[:d]] = True
        elif d < 0:
            unit_a[np.flatnonzero((size_class == c) & unit_a)[d:]] = False
    moved = int(np.abs(delta).sum())
    across = abs(half - int(sizes[unit_a].sum()))
    gbps = int(pod_cost[k]) + unit_gbps * moved + endpoint_gbps * across
    assert gbps == int(total[k, g])
    return _Cut(gbps=gbps, pod_a=pod_a, unit_a=unit_a, units_moved=moved, endpoints_across=across)


def _units_for_pods(pod_a: np.ndarray, leaf_pod: np.ndarray, leaf_unit: np.ndarray, sizes: np.ndarray,
                    leaf_gbps: int, nic_gbps: int, pod_gbps: int, half: int
                    ) -> tuple[int, _Cut, int | None, int]:
    """The best split of whole units (and part of one) for the pods' sides ``pod_a``, and a cut of it.

    For units that reach leaves of several pods. A leaf of a unit on side A in a pod on side B
    costs ``min(U, B E_u)`` (its uplinks or its NIC links cross), and likewise the other way; the
    units of each size go to side A cheapest first, and the endpoints ``h`` still needs come from
    part of one more unit. Returns (capacity of that cut, the units on side A as a :class:`_Cut`,
    the part unit or None, its endpoints on side A).
    """
    units, pods = sizes.size, pod_a.size
    leaves = np.bincount(leaf_unit, minlength=units)
    in_a = np.bincount(leaf_unit, weights=pod_a[leaf_pod], minlength=units).astype(np.int64)
    in_b = leaves - in_a
    per_leaf = np.minimum(leaf_gbps, nic_gbps * sizes)
    gain = (in_b - in_a) * per_leaf  # cost of the unit on side A minus on side B
    s = int(pod_a.sum())
    base = pod_gbps * min(s, pods - s) + int((in_a * per_leaf).sum())

    def part_costs(u: np.ndarray, r: int) -> np.ndarray:
        """What making unit ``u`` the part unit, ``r`` of its endpoints on side A, adds."""
        e = sizes[u]
        on_a = np.minimum(nic_gbps * (e - r), leaf_gbps + nic_gbps * r)
        on_b = np.minimum(leaf_gbps + nic_gbps * (e - r), nic_gbps * r)
        return in_a[u] * on_a + in_b[u] * on_b - in_a[u] * per_leaf[u]

    values = np.unique(sizes)
    ranked = [np.flatnonzero(sizes == v)[np.argsort(gain[sizes == v], kind="stable")] for v in values]
    prefix = [np.r_[0, np.cumsum(gain[r])] for r in ranked]
    big = int(np.argmax([r.size for r in ranked]))
    others = [c for c in range(values.size) if c != big]
    combos = np.stack([g.ravel() for g in np.meshgrid(*(np.arange(ranked[c].size + 1) for c in others),
                                                      indexing="ij")], axis=1) if others else [()]
    size_big, largest = int(values[big]), int(values[-1])
    best: tuple[int, tuple[int, ...], int | None, int] | None = None
    for combo in combos:
        take = [0] * values.size
        for c, n in zip(others, combo):
            take[c] = int(n)
        need = half - sum(take[c] * int(values[c]) for c in others)
        if need < 0:
            continue
        most = min(need // size_big, ranked[big].size)
        # fewer whole units of the most numerous size leave more for the part unit (< largest)
        for n in range(most, max(-1, most - largest // size_big - 2), -1):
            take[big] = n
            r = need - n * size_big
            if r >= largest and r > 0:
                break
            cost = base + sum(int(prefix[c][take[c]]) for c in range(values.size))
            if r == 0:
                if best is None or cost < best[0]:
                    best = (cost, tuple(take), None, 0)
                continue
            for c in range(values.size):
                free = ranked[c][take[c]:]
                if values[c] <= r or not free.size:
                    continue
                extra = part_costs(free, r)
                i = int(np.argmin(extra))
                if best is None or cost + int(extra[i]) < best[0]:
                    best = (cost + int(extra[i]), tuple(take), int(free[i]), r)
    assert best is not None
    total, take, part, r = best
    unit_a = np.zeros(units, dtype=bool)
    for c, n in enumerate(take):
        unit_a[ranked[c][:n]] = True
    moved = int(((unit_a & (in_b > 0)) | (~unit_a & (in_a > 0))).sum())
    across = 0 if part is None else min(r, int(sizes[part]) - r)
    cut = _Cut(gbps=total, pod_a=pod_a, unit_a=unit_a, units_moved=moved, endpoints_across=across)
    return total, cut, part, r


def _pods_for_units(unit_a: np.ndarray, part: int | None, taken: int, leaf_pod: np.ndarray,
                    leaf_unit: np.ndarray, sizes: np.ndarray, leaf_gbps: int, nic_gbps: int,
                    pod_gbps: int, pods: int) -> tuple[int, np.ndarray]:
    """The least cut of a split of whole units (and ``taken`` endpoints of unit ``part``): the
    best side for every pod's spines. Returns (its capacity, bool per pod: spines on side A)."""
    e = sizes[leaf_unit]
    cross = np.minimum(leaf_gbps, nic_gbps * e)
    a = unit_a[leaf_unit]
    cost_a = np.where(a, 0, cross)  # the leaf's cost when its pod's spines are on side A
    cost_b = np.where(a, cross, 0)
    if part is not None:
        mine = leaf_unit == part
        r, n = taken, sizes[part]
        cost_a[mine] = min(nic_gbps * (n - r), leaf_gbps + nic_gbps * r)
        cost_b[mine] = min(leaf_gbps + nic_gbps * (n - r), nic_gbps * r)
    pod_a_cost = np.bincount(leaf_pod, weights=cost_a, minlength=pods).astype(np.int64)
    pod_b_cost = np.bincount(leaf_pod, weights=cost_b, minlength=pods).astype(np.int64)
    order = np.argsort(pod_a_cost - pod_b_cost, kind="stable")
    s = np.arange(pods + 1)
    total = (int(pod_b_cost.sum()) + np.r_[0, np.cumsum((pod_a_cost - pod_b_cost)[order])]
             + pod_gbps * np.minimum(s, pods - s))
    best = int(np.argmin(total))
    pod_a = np.zeros(pods, dtype=bool)
    pod_a[order[:best]] = True
    return int(total[best]), pod_a


def _descend(pod_a: np.ndarray, leaf_pod: np.ndarray, leaf_unit: np.ndarray, sizes: np.ndarray,
             costs: tuple[int, int, int], half: int) -> tuple[int, _Cut, int | None, int]:
    """From the pods' sides ``pod_a``, alternately the best units for the pods and the best pods
    for the units while the cut shrinks: a split of (nearly) whole units and its exact least cut."""
    leaf_gbps, nic_gbps, pod_gbps = costs
    best = None
    for _ in range(16):
        gbps, cut, part, taken = _units_for_pods(pod_a, leaf_pod, leaf_unit, sizes, leaf_gbps,
                                                 nic_gbps, pod_gbps, half)
        gbps, pod_a = _pods_for_units(cut.unit_a, part, taken, leaf_pod, leaf_unit, sizes, leaf_gbps,
                                      nic_gbps, pod_gbps, pod_a.size)
        if best is not None and gbps >= best[0]:
            break
        best = (gbps, _Cut(gbps, pod_a, cut.unit_a, cut.units_moved, cut.endpoints_across), part, taken)
    assert best is not None
    return best


#: Units up to which :func:`least_cut` tries every split of whole units (and part of one) when a
#: GPU's NICs reach leaves of several pods: 2^14 + 14 x 2^13 splits, in numpy.
MAX_UNITS_TRIED = 14


def _every_unit_split(leaf_pod: np.ndarray, leaf_unit: np.ndarray, sizes: np.ndarray, leaf_gbps: int,
                      nic_gbps: int, pod_gbps: int, pods: int, half: int
                      ) -> tuple[int, np.ndarray, int | None, int]:
    """The least cut over every split of whole units, and of whole units and part of one.

    For units that reach leaves of several pods, when there are few of them. For a fixed side of
    every pod's spines the cost of a split is a separable concave function of the endpoints each
    unit puts on side A, so its least over splits with ``half`` endpoints on side A has at most one
    unit split (a vertex); for every such split the best pods are exact (as
    :func:`_pods_for_units`). Returns (capacity, units on side A, the part unit or None, its
    endpoints on side A).
    """
    units = sizes.size
    per_pod = np.zeros((units, pods), dtype=np.int64)  # leaves of every unit in every pod
    np.add.at(per_pod, (leaf_unit, leaf_pod), 1)
    cross = np.minimum(leaf_gbps, nic_gbps * sizes)  # a leaf on the other side from its pod
    bits = (np.arange(1 << units)[:, None] >> np.arange(units)) & 1  # every choice of units on A
    rows, parts, takes = [], [], []
    # whole units only: the A side holds exactly ``half`` endpoints
    whole = bits[bits @ sizes == half].astype(bool)
    rows.append(whole)
    parts.append(np.full(len(whole), -1))
    takes.append(np.zeros(len(whole), dtype=np.int64))
    for u in range(units):  # unit u split: r of its endpoints on side A
        others = bits[bits[:, u] == 0]
        r = half - others @ sizes
        keep = (r > 0) & (r < sizes[u])
        rows.append(others[keep].astype(bool))
        parts.append(np.full(int(keep.sum()), u))
        takes.append(r[keep])
    a = np.concatenate(rows)  # (R, units)
    part = np.concatenate(parts)
    take = np.concatenate(takes)
    weight = per_pod * cross[:, None]  # (units, pods)
    cost_a = (~a).astype(np.int64) @ weight  # a pod's cost with its spines on side A
    cost_b = a.astype(np.int64) @ weight
    split = part >= 0
    if split.any():
        u, r = part[split], take[split]
        e = sizes[u]
        on_a = np.minimum(nic_gbps * (e - r), leaf_gbps + nic_gbps * r)
        on_b = np.minimum(leaf_gbps + nic_gbps * (e - r), nic_gbps * r)
        cost_a[split] += (on_a - cross[u])[:, None] * per_pod[u]  # the part unit was counted as B
        cost_b[split] += on_b[:, None] * per_pod[u]
    gain = np.sort(cost_a - cost_b, axis=1)
    s = np.arange(pods + 1)
    total = (cost_b.sum(axis=1)[:, None] + np.c_[np.zeros(len(a), dtype=np.int64), np.cumsum(gain, axis=1)]
             + pod_gbps * np.minimum(s, pods - s)[None, :])
    i = int(np.argmin(total.min(axis=1)))
    return int(total[i].min()), a[i], (int(part[i]) if part[i] >= 0 else None), int(take[i])


def _bounded_cut(relaxed: _Cut | None, leaf_pod: np.ndarray, leaf_unit: np.ndarray, sizes: np.ndarray,
                 costs: tuple[int, int, int], pods: int, units: int, half: int) -> tuple[int, _Cut, int | None, int]:
    """The least of the splits :func:`_descend` reaches from a few choices of pods (the relaxed
    cut's, halves, none, all, and the pods that suit the first or the last half of the endpoints
    in unit order): an upper bound of the bisection, with its cut, part unit and endpoints taken."""
    first = np.arange(pods)
    tries = [first < pods // 2, first < (pods + 1) // 2,
             first >= pods // 2, first >= (pods + 1) // 2,
             np.zeros(pods, dtype=bool), np.ones(pods, dtype=bool)]
    if relaxed is not None:
        tries.insert(0, relaxed.pod_a)
    # and the pods that suit the first, or the last, half of the endpoints in unit order
    for order in (np.arange(units), np.arange(units)[::-1]):
        before = np.cumsum(np.r_[0, sizes[order]])[:-1]
        whole = np.zeros(units, dtype=bool)
        whole[order[before + sizes[order] <= half]] = True
        rest = np.flatnonzero(~whole[order])
        part = int(order[rest[0]]) if rest.size else None
        tries.append(_pods_for_units(whole, part, half - int(sizes[whole].sum()), leaf_pod,
                                     leaf_unit, sizes, *costs, pods)[1])
    return min((_descend(pod_a, leaf_pod, leaf_unit, sizes, costs, half) for pod_a in tries), key=lambda c: c[0])


def _uplink_gbps(fabric: Fabric) -> tuple[int, int]:
    """The uplink capacity of a leaf, and of a pod (0 below three tiers): the most of any."""
    plan, links = fabric.plan, fabric.links
    up = links.kind == 1
    leaf_up = np.bincount(links.lo[up] - fabric.first(1), weights=links.gbps[up], minlength=plan.leaves)
    leaf_gbps = int(leaf_up.max()) if leaf_up.size else 0
    pod_gbps = 0
    if plan.tiers == 3:
        sc = links.kind == 2
        pod_up = np.bincount(fabric.pod[links.lo[sc]], weights=links.gbps[sc], minlength=plan.pods)
        pod_gbps = int(pod_up.max())
    return leaf_gbps, pod_gbps


def least_cut(fabric: Fabric) -> LeastCut:
    """The analytic bisection of the intact fabric and a split that realises it.

    Every leaf has the same uplinks and every pod the same spine uplinks (the builder makes them
    so); leaves differ only in their NIC links (a partial last scalable unit) and pods in their
    leaves (a smaller last pod). See :class:`LeastCut` for the cost minimised.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> cut = least_cut(build_fabric(load_spec({"gpus": 256, "gpus_per_node": 1, "nics_per_node": 8,
    ...     "nic_gbps": 100, "port_gbps": 200, "radix": 40, "spine_oversubscription": 3})))
    >>> cut.gbps, cut.exact, cut.pods_a, cut.pods, cut.units_moved, cut.endpoints_across
    (46400, True, 1, 3, 0, 8)
    """
    if fabric.plan.planes > 1:
        # the planes are the same fabric and a GPU's NIC ports move together, so a split costs the
        # same in every plane: the least is one plane's, times the planes (its terms are per plane)
        planes = fabric.plan.planes
        one = least_cut(plane_view(fabric, 0))
        split = Split(name=one.split.name, kind=one.split.kind, side_a=np.repeat(one.split.side_a, planes))
        return replace(one, gbps=one.gbps * planes, lower_gbps=one.lower_gbps * planes, split=split,
                       planes=planes)
    spec, plan, links = fabric.spec, fabric.plan, fabric.links
    kind, endpoint = endpoints(fabric)
    count = int(endpoint.max()) + 1 if endpoint.size else 0
    half = (count + 1) // 2
    per_endpoint = spec.nic_ports // spec.gpus_per_node if kind == "gpu" else 1
    # a unit: the leaves an endpoint's links reach (both leaves of a dual-ToR pair)
    ell = (per_endpoint if plan.placement == "rail" else 1) * plan.homes
    leaf0, lpp = fabric.first(1), plan.leaves_per_pod

    leaf_gbps, pod_gbps = _uplink_gbps(fabric)
    endpoint_gbps = per_endpoint * spec.nic_port_gbps

    units = plan.leaves // ell
    start = np.arange(units, dtype=np.int64) * ell
    unit_pod = start // lpp
    unit = _first_leaf(fabric, endpoint) // ell
    sizes = np.bincount(unit, minlength=units).astype(np.int64)
    in_pods = bool(np.all((start + ell - 1) // lpp == unit_pod))  # every unit in one pod

    cut = None
    if in_pods:
        cut = _least_cut_of_units(sizes, unit_pod, plan.pods, ell * leaf_gbps, pod_gbps, endpoint_gbps,
                                  half)
    method = "classes"
    if cut is not None:
        side = cut.unit_a[unit]
        order = np.lexsort((np.arange(count), ~side))  # side-A units first, then endpoint number
        side_a = np.zeros(count, dtype=bool)
        side_a[order[:half]] = True
        gbps = lower = cut.gbps
        moved, across = cut.units_moved, cut.endpoints_across
    else:
        # a GPU's NICs reach leaves of several pods (or, never seen, too many choices): every NIC
        # free to take a side gives a lower bound
        nic = _nic_rows(fabric)
        nic_leaf = (links.hi[nic] - leaf0).astype(np.int64)
        nics = np.bincount(nic_leaf, minlength=plan.leaves).astype(np.int64)
        leaf_pod = np.arange(plan.leaves, dtype=np.int64) // lpp
        leaf_unit = np.arange(plan.leaves, dtype=np.int64) // ell
        costs = (leaf_gbps, spec.link_gbps, pod_gbps)
        if units <= MAX_UNITS_TRIED:  # few units: every split of whole units and part of one
            method = "units"
            gbps, unit_a, part, taken = _every_unit_split(leaf_pod, leaf_unit, sizes, *costs,
                                                          plan.pods, half)
            pod_a = _pods_for_units(unit_a, part, taken, leaf_pod, leaf_unit, sizes, *costs,
                                    plan.pods)[1]
            cut, lower = _Cut(gbps, pod_a, unit_a, 0, 0), gbps
        else:  # the best whole units for a few choices of pods, improved in turn: an upper bound
            method = "bounds"
            relaxed = _least_cut_of_units(nics, leaf_pod, plan.pods, leaf_gbps, pod_gbps,
                                          spec.link_gbps, half * per_endpoint * plan.homes)
            lower = relaxed.gbps if relaxed is not None else 0
            gbps, cut, part, taken = _bounded_cut(relaxed, leaf_pod, leaf_unit, sizes, costs, plan.pods, units, half)
        side_a = np.zeros(count, dtype=bool)
        side_a[cut.unit_a[unit]] = True
        if part is not None:
            side_a[np.flatnonzero(unit == part)[:taken]] = True
        wrong = cut.unit_a[leaf_unit] != cut.pod_a[leaf_pod]
        moved = int(np.bincount(leaf_unit, weights=wrong, minlength=units).astype(bool).sum())
        across = 0 if part is None else min(taken, int(sizes[part]) - taken)
    s = int(cut.pod_a.sum())
    return LeastCut(
        gbps=gbps, exact=method != "bounds" or lower == gbps, lower_gbps=lower, method=method,
        split=Split(name="least-cut", kind="tier", side_a=side_a[endpoint]),
        pods=plan.pods, pods_a=min(s, plan.pods - s), unit_leaves=ell, units_moved=moved,
        endpoints_across=across, pod_uplink_gbps=pod_gbps, unit_uplink_gbps=ell * leaf_gbps,
        endpoint_gbps=endpoint_gbps,
    )


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
    per_pod = np.bincount(fabric.pod[fabric.tier == 1])
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
    if fabric.plan.tiers == 1 and fabric.plan.placement == "rail" and fabric.spec.nic_ports > 1:
        return _rail_only(fabric, faults, random_splits, seed)
    tiers = tier_capacities(fabric)
    cut = least_cut(fabric)
    analytic = cut.gbps
    uneven = _uneven(fabric)
    network = FlowNetwork(fabric, faults)
    splits = tier_aligned_splits(fabric)
    if uneven or cut.method != "classes":
        splits += (cut.split,)
    splits += random_balanced_splits(fabric, random_splits, seed)
    flows = tuple(SplitFlow(s.name, s.kind, network.value(s.side_a)) for s in splits)
    worst_tier = min((f for f in flows if f.kind == "tier"), key=lambda f: f.gbps)
    worst = min(flows, key=lambda f: f.gbps)
    agrees = worst_tier.gbps == analytic
    gbps, source = analytic, "analytic"
    if faults.any:
        note = (
            f"{faults.links_down} links are down: gbps is the analytic value of the intact fabric "
            f"and does not apply; maxflow_gbps is measured with the faults"
        )
    else:
        if agrees:
            tied = ", ".join(f.name for f in flows if f.kind == "tier" and f.gbps == worst_tier.gbps)
            note = f"max-flow on the worst tier-aligned split ({tied}) equals the analytic value"
        else:
            note = (
                f"max-flow on the worst tier-aligned split ({worst_tier.name}: {worst_tier.gbps} Gb/s) "
                f"differs from the analytic value ({analytic} Gb/s)"
            )
        if uneven:
            note += f"; this fabric has {uneven}"
        if cut.method != "classes":
            note += "; a GPU's NICs reach leaves of more than one pod"
        if not cut.exact:
            note += (
                f", so the analytic value is the least cut of split least-cut, an upper bound, and "
                f"the bisection is at least {cut.lower_gbps} Gb/s"
            )
        if worst.gbps < analytic:
            gbps, source = worst.gbps, "max-flow"
            note += f"; split {worst.name} has less ({worst.gbps} Gb/s), so gbps is its max-flow"
    kind, endpoint = endpoints(fabric)
    return Bisection(
        gbps=gbps, source=source, maxflow_gbps=worst.gbps, agrees=agrees, note=note, tiers=tiers,
        splits=flows, endpoint=kind, endpoints=int(endpoint.max()) + 1 if endpoint.size else 0,
        links_down=faults.links_down, random_splits=random_splits, seed=seed, least_cut=cut,
    )


def _rail_only(fabric: Fabric, faults: Faults, random_splits: int, seed: int) -> Bisection:
    """Bisection of a rail-only fabric (one switch per rail, no spines), whose rails meet only inside
    the nodes: traffic between two GPUs crosses NVLink first (NCCL's PXN) to the GPU on the rail it
    leaves by. Splits are therefore of whole nodes (a node split between the halves talks to itself
    over NVLink); the flow network has the nodes too, each joined to its rails' switches by its live
    NIC links and to the source (side A) or sink (side B) without limit, NVLink being far wider than
    its NICs. The least balanced split puts half the nodes on each side: every rail then carries
    ``floor(nodes / 2)`` NICs' worth across, half the NIC bandwidth.
    """
    plan, spec, links = fabric.plan, fabric.spec, fabric.links
    host = np.flatnonzero(links.kind == 0)
    node = links.lo[host].astype(np.int64)
    leaf = links.hi[host].astype(np.int64) - fabric.first(1)
    cap = np.where(faults.live[host], links.gbps[host], 0).astype(np.int64)
    n, rails = plan.nodes, plan.leaves
    total = int(links.gbps[host].sum(dtype=np.int64))
    analytic = (n // 2) * rails * spec.nic_port_gbps
    order = np.arange(n)
    halves = [("half-of-the-nodes", "tier", order < (n + 1) // 2)]
    rng = np.random.default_rng(seed)
    for i in range(random_splits):
        side = np.zeros(n, dtype=bool)
        side[rng.permutation(n)[:(n + 1) // 2]] = True
        halves.append((f"random-{i}", "random", side))
    source, sink = n + rails, n + rails + 1
    big = max(total, 1)

    def value(side_a: np.ndarray) -> int:
        a = side_a[node]
        tails = np.concatenate([np.full(n, source)[side_a], node[a], leaf[~a] + n, order[~side_a]])
        heads = np.concatenate([order[side_a], leaf[a] + n, node[~a], np.full(n, sink)[~side_a]])
        caps = np.concatenate([np.full(int(side_a.sum()), big), cap[a], cap[~a], np.full(int((~side_a).sum()), big)])
        graph = csr_matrix((caps.astype(np.int32), (tails, heads)), shape=(n + rails + 2,) * 2)
        return int(maximum_flow(graph, source, sink, method="dinic").flow_value)

    flows = tuple(SplitFlow(name, kind, value(side)) for name, kind, side in halves)
    worst = min(flows, key=lambda f: f.gbps)
    first = flows[0]
    agrees = first.gbps == analytic
    if faults.any:
        note = (f"{faults.links_down} links are down: gbps is the analytic value of the intact fabric and does "
                f"not apply; maxflow_gbps is measured with the faults")
    else:
        note = ("rail-only: the rails meet only inside the nodes (NVLink, NCCL's PXN), so the halves are of whole "
                "nodes; " + ("max-flow on half-of-the-nodes equals the analytic value" if agrees else
                             f"max-flow on half-of-the-nodes ({first.gbps} Gb/s) differs from the analytic value"))
    side_links = halves[0][2][node]
    split = Split("least-cut", "tier", side_links)
    cut = LeastCut(gbps=analytic, exact=True, lower_gbps=analytic, method="rail-only", split=split, pods=1,
                   pods_a=0, unit_leaves=rails, units_moved=0, endpoints_across=0, pod_uplink_gbps=0,
                   unit_uplink_gbps=0, endpoint_gbps=rails * spec.nic_port_gbps)
    gbps, source_name = analytic, "analytic"
    if not faults.any and worst.gbps < analytic:
        gbps, source_name = worst.gbps, "max-flow"
    return Bisection(
        gbps=gbps, source=source_name, maxflow_gbps=worst.gbps, agrees=agrees, note=note,
        tiers=tier_capacities(fabric), splits=flows, endpoint="node", endpoints=n,
        links_down=faults.links_down, random_splits=random_splits, seed=seed, least_cut=cut,
    )
