"""Up-down (valley-free) reachability of a Clos fabric, with some links down.

In an RFC 7938 underlay a packet goes up until it reaches a switch that can reach its destination
going down, then goes down: every spine of a tier shares one ASN, so BGP refuses a path that
comes back up through the same tier (a "valley"). Between two leaves the routed distance is

- 0 links when they are the same leaf,
- 2 links (leaf-spine-leaf) when both have a live link to a common spine,
- 4 links (leaf-spine-core-spine-leaf) when, for some spine position ``j``, both leaves reach
  their pod's spine ``j`` and one core of group ``j`` has live links to both those spines,
- unreachable otherwise, even if the graph is still connected through a valley.

:class:`UpDown` holds the per-leaf and per-pod facts these rules need as small arrays (one bit
per spine position), so the distance of millions of leaf pairs costs a few vectorised operations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fabric import Fabric
from .faults import Faults, no_faults

UNREACHABLE = -1


def _pack_bits(flags: np.ndarray) -> np.ndarray:
    """(rows, positions) bool -> (rows, words) uint64, bit j%64 of word j//64 set for position j."""
    rows, positions = flags.shape
    words = max(1, -(-positions // 64))
    out = np.zeros((rows, words), dtype=np.uint64)
    for w in range(words):
        chunk = flags[:, w * 64:(w + 1) * 64]
        weights = np.left_shift(np.uint64(1), np.arange(chunk.shape[1], dtype=np.uint64))
        out[:, w] = (chunk.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    return out


@dataclass(frozen=True, eq=False)
class UpDown:
    """Live up-down connectivity of a fabric.

    Attributes
    ----------
    leaf_spine : ndarray of int32, shape (leaves, spines_per_pod)
        Live parallel links from each leaf to spine position ``j`` of its pod.
    spine_core : ndarray of int32, shape (spines, cores_per_group)
        Live parallel links from each spine to each core of its group (three tiers; else empty).
    leaf_bits : ndarray of uint64, shape (leaves, words)
        Bit ``j`` set when the leaf has a live link to spine position ``j``.
    pod_pair_bits : ndarray of uint64, shape (pods, pods, words)
        Bit ``j`` set when some core of group ``j`` has live links to spine ``j`` of both pods
        (and both spines have live links up); all zero for two tiers.
    leaf_pod : ndarray of int64
        Pod of each leaf (numbered across the planes of a multi-plane fabric).
    leaf_local : ndarray of int64
        Position of each leaf in its pod (its spines' down port block).
    pod_local : ndarray of int64
        Position of each pod in its plane (its cores' down port block); the pod itself in one plane.
    """

    leaf_spine: np.ndarray
    spine_core: np.ndarray
    leaf_bits: np.ndarray
    pod_pair_bits: np.ndarray
    leaf_pod: np.ndarray
    leaf_local: np.ndarray
    pod_local: np.ndarray

    def leaf_distance(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Routed links between leaves ``a`` and ``b`` (leaf numbers from 0; arrays broadcast).

        Returns 0, 2, 4 or ``UNREACHABLE`` (-1) as int8.
        """
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        common = self.leaf_bits[a] & self.leaf_bits[b]
        pa, pb = self.leaf_pod[a], self.leaf_pod[b]
        via_spine = (common != 0).any(axis=-1) & (pa == pb)
        via_core = ((common & self.pod_pair_bits[pa, pb]) != 0).any(axis=-1)
        out = np.full(a.shape, UNREACHABLE, dtype=np.int8)
        out[via_core] = 4
        out[via_spine] = 2
        out[a == b] = 0
        return out


def updown(fabric: Fabric, faults: Faults | None = None) -> UpDown:
    """The live up-down connectivity of ``fabric`` under ``faults`` (none: intact).

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 4096}))
    >>> ud = updown(fabric)
    >>> ud.leaf_distance([0, 0, 0], [0, 5, 100]).tolist()
    [0, 2, 4]
    """
    faults = faults or no_faults(fabric)
    plan, links = fabric.plan, fabric.links
    live = faults.live
    leaf0, spine0, core0 = fabric.first(1), fabric.first(2), fabric.first(3)
    sp = plan.spines_per_pod

    ls = (links.kind == 1) & live
    leaf = links.lo[ls] - leaf0
    spine = links.hi[ls] - spine0
    leaf_spine = np.zeros((plan.leaves, sp), dtype=np.int32)
    np.add.at(leaf_spine, (leaf, spine % sp), 1)
    leaf_pod = fabric.pod[leaf0:leaf0 + plan.leaves].astype(np.int64)
    first_of_pod = np.full(plan.pods, plan.leaves, dtype=np.int64)
    np.minimum.at(first_of_pod, leaf_pod, np.arange(plan.leaves))
    leaf_local = np.arange(plan.leaves) - first_of_pod[leaf_pod]
    pod_plane = np.arange(plan.pods) // plan.plane_pods
    pod_local = np.arange(plan.pods) % plan.plane_pods

    words = max(1, -(-sp // 64))
    pod_pair_bits = np.zeros((plan.pods, plan.pods, words), dtype=np.uint64)
    spine_core = np.zeros((plan.spines, max(plan.cores_per_group, 0)), dtype=np.int32)
    if plan.tiers == 3:
        sc = (links.kind == 2) & live
        s = links.lo[sc] - spine0
        c = links.hi[sc] - core0
        np.add.at(spine_core, (s, c % plan.cores_per_group), 1)
        # up[j][pod, core] : spine j of pod has a live link to core c of group j
        up = (spine_core > 0).reshape(plan.pods, sp, plan.cores_per_group)
        for j in range(sp):
            m = up[:, j, :].astype(np.int32)
            joined = (m @ m.T) > 0  # pods sharing a live core of group j (of their plane)
            joined &= pod_plane[:, None] == pod_plane[None, :]
            pod_pair_bits[:, :, j // 64] |= joined.astype(np.uint64) << np.uint64(j % 64)
    return UpDown(
        leaf_spine=leaf_spine,
        spine_core=spine_core,
        leaf_bits=_pack_bits(leaf_spine > 0),
        pod_pair_bits=pod_pair_bits,
        leaf_pod=leaf_pod,
        leaf_local=leaf_local,
        pod_local=pod_local,
    )
