"""Hop counts between GPUs: the distribution of links and switch hops, NIC to NIC.

Two GPUs on different nodes talk through their NICs: GPU ``r`` of a node (its local rank) uses NIC
``r * nics_per_node // gpus_per_node``. A message leaves the NIC, crosses one leaf (2 links), or a
leaf, a spine and a leaf (4 links), or climbs to a core and back down (6 links); routing is
up-down as in :mod:`topo.updown`, so the NIC-to-NIC links are the routed leaf-to-leaf distance
plus 2 and a GPU whose NIC link is down reaches nobody. Switch hops are links minus 1. GPUs of one
node use NVLink and are not counted.

The counts are exact and never enumerate GPU pairs. Leaves with the same pod and the same live
spines route alike, so they form one class; GPUs are counted per leaf and NIC index (``w``), pairs
are counted per class pair with the class distance, pairs inside one leaf and inside one class are
added in closed form, and pairs of GPUs of one node are subtracted per node. The work is
O(classes^2 x nics_per_node + nodes x nics_per_node^2), in blocks of bounded memory; the intact
fabric has one class per pod.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..fabric import Fabric, plane_view
from .faults import Faults, no_faults, plane_faults
from .updown import UNREACHABLE, UpDown, updown

#: Upper bound on the elements of one block of class pairs (or node NIC pairs) held at once.
BLOCK_ELEMENTS = 1 << 21


@dataclass(frozen=True)
class HopRow:
    """GPU pairs at one distance.

    Attributes
    ----------
    links : int
        Links traversed NIC to NIC: 2, 4 or 6.
    switch_hops : int
        Switches crossed: ``links - 1``.
    pairs : int
        Unordered GPU pairs (on different nodes) at this distance.
    same_rail_pairs, cross_rail_pairs : int
        Of those, pairs whose GPUs use the same NIC index, and pairs that do not.
    """

    links: int
    switch_hops: int
    pairs: int
    same_rail_pairs: int
    cross_rail_pairs: int

    def to_dict(self) -> dict[str, int]:
        return {
            "links": self.links,
            "switch_hops": self.switch_hops,
            "pairs": self.pairs,
            "same_rail_pairs": self.same_rail_pairs,
            "cross_rail_pairs": self.cross_rail_pairs,
        }


@dataclass(frozen=True)
class HopCounts:
    """Distribution of network distances over GPU pairs on different nodes.

    Attributes
    ----------
    gpus : int
        GPUs of the fabric.
    pairs : int
        Unordered GPU pairs on different nodes: reachable ones plus ``unreachable_pairs``.
    distribution : tuple of HopRow
        One row per distance the fabric's tiers allow (2 and 4 links; also 6 in three tiers),
        in increasing order, rows with zero pairs included.
    unreachable_pairs : int
        Pairs with no up-down route (always 0 in an intact fabric).
    unreachable_same_rail_pairs, unreachable_cross_rail_pairs : int
        The unreachable pairs split like the rows.
    diameter_links, diameter_switch_hops : int or None
        Largest distance over reachable pairs; None when no pair is reachable.
    mean_links, mean_switch_hops : float or None
        Mean distance over reachable pairs; None when no pair is reachable.
    plane, plane_unreachable_pairs : int or None, tuple of int
        With planes: every figure above is of the plane ``plane``, the one that reaches the most
        pairs (the first such), and ``plane_unreachable_pairs`` gives each plane's unreachable
        pairs. A pair that some plane reaches is reachable (its GPUs' NICs have a port in every
        plane), so ``unreachable_pairs`` is an upper bound when faults fall in several planes.
        None and empty with one plane.
    """

    gpus: int
    pairs: int
    distribution: tuple[HopRow, ...]
    unreachable_pairs: int
    unreachable_same_rail_pairs: int
    unreachable_cross_rail_pairs: int
    diameter_links: int | None
    diameter_switch_hops: int | None
    mean_links: float | None
    mean_switch_hops: float | None
    plane: int | None = None
    plane_unreachable_pairs: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the keys are a stable interface)."""
        extra = {} if self.plane is None else {
            "plane": self.plane, "plane_unreachable_pairs": list(self.plane_unreachable_pairs)}
        return {**extra, 
            "gpus": self.gpus,
            "pairs": self.pairs,
            "diameter_links": self.diameter_links,
            "diameter_switch_hops": self.diameter_switch_hops,
            "mean_links": self.mean_links,
            "mean_switch_hops": self.mean_switch_hops,
            "unreachable_pairs": self.unreachable_pairs,
            "unreachable_same_rail_pairs": self.unreachable_same_rail_pairs,
            "unreachable_cross_rail_pairs": self.unreachable_cross_rail_pairs,
            "distribution": [row.to_dict() for row in self.distribution],
        }


def gpus_per_nic(fabric: Fabric) -> np.ndarray:
    """GPUs that use each NIC index of a node: GPU ``r`` uses NIC ``r * nics // gpus``.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> gpus_per_nic(build_fabric(load_spec({"gpus": 64, "nics_per_node": 4}))).tolist()
    [2, 2, 2, 2]
    >>> gpus_per_nic(build_fabric(load_spec({"gpus": 64, "gpus_per_node": 4, "nics_per_node": 8}))).tolist()
    [1, 0, 1, 0, 1, 0, 1, 0]
    """
    gpus, nics = fabric.spec.gpus_per_node, fabric.spec.nic_ports
    return np.bincount(np.arange(gpus) * nics // gpus, minlength=nics).astype(np.int64)


def nic_table(fabric: Fabric, faults: Faults) -> tuple[np.ndarray, np.ndarray]:
    """Leaf number (from 0) and live flag of every NIC, as two (nodes, nics_per_node) arrays.

    A dual-ToR NIC is live while one of its two links is, and counts from the first leaf of its
    pair that it has a live link to (the pair's a leaf when both are live: the two leaves of a
    pair route alike).
    """
    links = fabric.links
    rows = np.flatnonzero(links.kind == 0)
    homes = fabric.plan.homes
    shape = (fabric.plan.nodes, fabric.spec.nic_ports, homes)
    leaf = np.zeros(shape, dtype=np.int64)
    live = np.zeros(shape, dtype=bool)
    node, port = links.lo[rows].astype(np.int64), links.lo_port[rows].astype(np.int64)
    leaf[node, port // homes, port % homes] = links.hi[rows] - fabric.first(1)
    live[node, port // homes, port % homes] = faults.live[rows]
    if homes == 1:
        return leaf[..., 0], live[..., 0]
    first = np.where(live[..., 0], 0, 1)
    return np.take_along_axis(leaf, first[..., None], axis=2)[..., 0], live.any(axis=2)


def _pairs(n: np.ndarray | int) -> np.ndarray | int:
    """Unordered pairs among ``n`` items."""
    return n * (n - 1) // 2


def _leaf_classes(ud: UpDown) -> tuple[np.ndarray, np.ndarray]:
    """(class of each leaf, a representative leaf of each class): same pod and same live spines."""
    key = np.concatenate([ud.leaf_pod[:, None].astype(np.uint64), ud.leaf_bits], axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return inverse.reshape(-1), first


def hop_counts(fabric: Fabric, faults: Faults | None = None) -> HopCounts:
    """Count GPU pairs on different nodes by links and switch hops, NIC to NIC.

    Parameters
    ----------
    fabric : Fabric
    faults : Faults, optional
        Links that are down (default: none). Routing is up-down (:mod:`topo.updown`).

    Returns
    -------
    HopCounts

    Notes
    -----
    Exact. With ``w[l, i]`` the GPUs on live NICs of index ``i`` on leaf ``l`` and ``W[l]`` their
    sum, leaves grouped in classes ``c`` (same pod, same live spines) with sums ``w[c, i]``,
    ``W[c]``, the pairs between classes ``c < c'`` at class distance ``D(c, c')`` are
    ``W[c] W[c']``, of which ``sum_i w[c, i] w[c', i]`` are same-rail; pairs of two different
    leaves of one class are ``(W[c]^2 - sum_l W[l]^2) / 2`` at distance 2 (or unreachable when the
    class has no live spine); pairs inside one leaf are ``(W[l]^2 - W[l]) / 2`` at distance 0. The
    pairs of GPUs of one node, counted in those sums, are then subtracted per node and NIC pair.
    Cost O(classes^2 x nics_per_node + nodes x nics_per_node^2).

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> hops = hop_counts(build_fabric(load_spec({"gpus": 1024})))
    >>> [(row.links, row.same_rail_pairs, row.cross_rail_pairs) for row in hops.distribution]
    [(2, 15872, 0), (4, 49152, 455168)]
    >>> hops.pairs, hops.diameter_links, hops.diameter_switch_hops, round(hops.mean_links, 4)
    (520192, 4, 3, 3.939)
    """
    faults = faults or no_faults(fabric)
    plan, spec = fabric.plan, fabric.spec
    if plan.planes > 1:
        per = [hop_counts(plane_view(fabric, p), plane_faults(fabric, faults, p)) for p in range(plan.planes)]
        unreachable = tuple(h.unreachable_pairs for h in per)
        best = int(np.argmin(unreachable))
        return replace(per[best], plane=best, plane_unreachable_pairs=unreachable)
    if plan.tiers == 1 and plan.placement == "rail" and spec.nic_ports > 1:
        return _rail_only(fabric, faults)
    ud = updown(fabric, faults)
    per_nic = gpus_per_nic(fabric)
    nic_leaf, nic_live = nic_table(fabric, faults)
    w = _gpus_per_leaf_nic(fabric, per_nic, nic_leaf, nic_live)
    leaf_class, reps = _leaf_classes(ud)
    wc = np.zeros((reps.size, spec.nic_ports), dtype=np.int64)
    np.add.at(wc, leaf_class, w)
    # [total, same-rail] pairs per leaf distance 0, 2, 4 and UNREACHABLE (index 3)
    counts = np.zeros((4, 2), dtype=np.int64)
    counts[0] += [int(_pairs(w.sum(axis=1)).sum()), int(_pairs(w).sum())]  # inside one leaf
    counts += _pairs_within_classes(ud, w, wc, leaf_class, reps)
    counts += _pairs_between_classes(ud, wc, reps)
    counts -= _pairs_inside_nodes(ud, per_nic, nic_leaf, nic_live)
    gpus = spec.gpus_per_node

    # all pairs on different nodes, and the same-rail ones, whatever the faults
    gpus_total = plan.nodes * gpus
    pairs = _pairs(gpus_total) - plan.nodes * _pairs(gpus)
    same_all = int((_pairs(plan.nodes * per_nic) - plan.nodes * _pairs(per_nic)).sum())

    rows = []
    for links in range(2, 2 * plan.tiers + 1, 2):
        total, same = (int(x) for x in counts[_SLOT[links - 2]])
        rows.append(HopRow(links, links - 1, total, same, total - same))
    reachable = sum(row.pairs for row in rows)
    reachable_same = sum(row.same_rail_pairs for row in rows)
    unreachable = pairs - reachable
    unreachable_same = same_all - reachable_same
    # consistency of the two ways of counting (pairs on dead NICs are in neither leaf count)
    assert unreachable >= int(counts[3, 0]) and unreachable_same >= int(counts[3, 1])
    assert all(row.pairs >= row.same_rail_pairs >= 0 for row in rows)

    present = [row for row in rows if row.pairs]
    if present:
        diameter = present[-1].links
        mean = sum(row.links * row.pairs for row in rows) / reachable
        diameter_hops, mean_hops = diameter - 1, mean - 1
    else:
        diameter = diameter_hops = mean = mean_hops = None
    return HopCounts(
        gpus=gpus_total, pairs=pairs, distribution=tuple(rows), unreachable_pairs=unreachable,
        unreachable_same_rail_pairs=unreachable_same,
        unreachable_cross_rail_pairs=unreachable - unreachable_same,
        diameter_links=diameter, diameter_switch_hops=diameter_hops, mean_links=mean,
        mean_switch_hops=mean_hops,
    )


def _rail_only(fabric: Fabric, faults: Faults) -> HopCounts:
    """One switch per rail and no spines: GPUs on different rails reach each other through NVLink
    first (NCCL's PXN: the message moves inside the sending node to the GPU on the destination's
    rail), then 2 links through that rail's switch. A pair of nodes is reachable while some rail
    has live NIC links on both; its GPU pairs are all 2 links apart.
    """
    plan, spec = fabric.plan, fabric.spec
    per_nic = gpus_per_nic(fabric)
    _, nic_live = nic_table(fabric, faults)
    gpus = spec.gpus_per_node
    patterns, count = np.unique(nic_live, axis=0, return_counts=True)
    shared = (patterns.astype(np.int64) @ patterns.T.astype(np.int64)) > 0  # a common live rail
    count = count.astype(np.int64)
    node_pairs = int((np.outer(count, count) * shared).sum() - (count * shared.diagonal()).sum()) // 2
    same_per_pair = int((per_nic * per_nic).sum())
    gpus_total = plan.nodes * gpus
    pairs = _pairs(gpus_total) - plan.nodes * _pairs(gpus)
    same_all = int((_pairs(plan.nodes * per_nic) - plan.nodes * _pairs(per_nic)).sum())
    total, same = node_pairs * gpus * gpus, node_pairs * same_per_pair
    row = HopRow(2, 1, total, same, total - same)
    return HopCounts(
        gpus=gpus_total, pairs=pairs, distribution=(row,), unreachable_pairs=pairs - total,
        unreachable_same_rail_pairs=same_all - same, unreachable_cross_rail_pairs=(pairs - total) - (same_all - same),
        diameter_links=2 if total else None, diameter_switch_hops=1 if total else None,
        mean_links=2.0 if total else None, mean_switch_hops=1.0 if total else None,
    )


#: Row of the [total, same-rail] pair counts by leaf distance.
_SLOT = {0: 0, 2: 1, 4: 2, UNREACHABLE: 3}


def _gpus_per_leaf_nic(fabric: Fabric, per_nic: np.ndarray, nic_leaf: np.ndarray,
                       nic_live: np.ndarray) -> np.ndarray:
    """``w[l, i]``: GPUs on live NICs of index ``i`` on leaf ``l``."""
    nics = fabric.spec.nic_ports
    w = np.zeros((fabric.plan.leaves, nics), dtype=np.int64)
    np.add.at(w, (nic_leaf, np.broadcast_to(np.arange(nics), nic_leaf.shape)), per_nic * nic_live)
    return w


def _pairs_within_classes(ud: UpDown, w: np.ndarray, wc: np.ndarray, leaf_class: np.ndarray,
                          reps: np.ndarray) -> np.ndarray:
    """Pairs on two different leaves of one class: 2 links when the class has a live spine,
    unreachable when it has none."""
    counts = np.zeros((4, 2), dtype=np.int64)
    big_w, big_wc = w.sum(axis=1), wc.sum(axis=1)
    class_has_spine = (ud.leaf_bits[reps] != 0).any(axis=1)
    leaf_sq = np.zeros((reps.size, 2), dtype=np.int64)
    np.add.at(leaf_sq, leaf_class, np.stack([big_w**2, (w**2).sum(axis=1)], axis=1))
    within_total = (big_wc**2 - leaf_sq[:, 0]) // 2
    within_same = ((wc**2).sum(axis=1) - leaf_sq[:, 1]) // 2
    for has, where in ((True, _SLOT[2]), (False, _SLOT[UNREACHABLE])):
        pick = class_has_spine == has
        counts[where] += [int(within_total[pick].sum()), int(within_same[pick].sum())]
    return counts


def _pairs_between_classes(ud: UpDown, wc: np.ndarray, reps: np.ndarray) -> np.ndarray:
    """Pairs on two leaves of different classes by the classes' distance, in blocks of class rows
    (each unordered pair of classes once: c < c')."""
    counts = np.zeros((4, 2), dtype=np.int64)
    classes = reps.size
    big_wc = wc.sum(axis=1)
    rows_per_block = max(1, BLOCK_ELEMENTS // max(classes, 1))
    for start in range(0, classes, rows_per_block):
        stop = min(classes, start + rows_per_block)
        a = np.arange(start, stop)
        dist = ud.leaf_distance(reps[a][:, None], reps[None, :])
        upper = a[:, None] < np.arange(classes)[None, :]
        total = big_wc[a][:, None] * big_wc[None, :]
        same = wc[a] @ wc.T
        for value in (2, 4, UNREACHABLE):
            mask = upper & (dist == value)
            counts[_SLOT[value]] += [int(total[mask].sum()), int(same[mask].sum())]
    return counts


def _pairs_inside_nodes(ud: UpDown, per_nic: np.ndarray, nic_leaf: np.ndarray, nic_live: np.ndarray) -> np.ndarray:
    """The pairs of GPUs of one node that the leaf counts include (they use NVLink, not the
    fabric), by the distance between their NICs' leaves: per node and pair of NIC indices."""
    counts = np.zeros((4, 2), dtype=np.int64)
    i, j = np.triu_indices(per_nic.size)
    weight = np.where(i == j, _pairs(per_nic[i]), per_nic[i] * per_nic[j])
    keep = weight > 0
    i, j, weight = i[keep], j[keep], weight[keep]
    nodes = nic_leaf.shape[0]
    nodes_per_block = max(1, BLOCK_ELEMENTS // max(i.size, 1))
    for start in range(0, nodes, nodes_per_block):
        leaf, live = nic_leaf[start:start + nodes_per_block], nic_live[start:start + nodes_per_block]
        dist = ud.leaf_distance(leaf[:, i], leaf[:, j])
        both = live[:, i] & live[:, j]
        for value, where in _SLOT.items():
            mask = both & (dist == value)
            total = int((mask * weight).sum())
            same = int((mask * np.where(i == j, weight, 0)).sum())
            counts[where] += [total, same]
    return counts
