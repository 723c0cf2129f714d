"""ECMP width: how many equal-cost shortest up-down paths join two leaves.

Between two leaves of one pod the shortest up-down paths are leaf-spine-leaf, one per spine both
leaves have a live link to; between leaves of different pods they are leaf-spine-core-spine-leaf,
through spine position ``j`` of both pods and a core of group ``j`` with live links to both spines
(valley-free, as :mod:`topo.updown` routes). Paths are counted two ways:

- switch paths: distinct sequences of switches (what a routing table's next hops multiply to);
- link paths: distinct sequences of links, so parallel links count separately (what ECMP hashes
  over when every parallel link is a separate next hop).

Intact, with ``S`` spines per pod, ``G`` cores per group, ``p`` parallel leaf-spine links and
``q`` parallel spine-core links: same pod ``S`` switch paths and ``S p^2`` link paths; different
pods ``S G`` and ``S p^2 G q^2``. A k-ary fat tree gives ``k/2`` and ``(k/2)^2``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import AnalysisError
from ..fabric import Fabric, plane_view
from .faults import Faults, no_faults, plane_faults
from .updown import updown

#: Upper bound on the elements of one block of sampled pairs x spines x cores held at once.
BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class PathStats:
    """Least, mean and most paths over the evaluated leaf pairs (unreachable pairs count as 0)."""

    min: int
    mean: float
    max: int

    def to_dict(self) -> dict[str, Any]:
        return {"min": self.min, "mean": self.mean, "max": self.max}


@dataclass(frozen=True)
class PairGroup:
    """ECMP width over one group of leaf pairs (same pod, or different pods).

    Attributes
    ----------
    pairs : int
        Leaf pairs evaluated.
    exact : bool
        True when every leaf pair of the group was evaluated, False when they were sampled.
    unreachable : int
        Evaluated pairs with no up-down path.
    switch_paths, link_paths : PathStats
    intact_switch_paths, intact_link_paths : int
        The closed forms for the intact fabric.
    """

    pairs: int
    exact: bool
    unreachable: int
    switch_paths: PathStats
    link_paths: PathStats
    intact_switch_paths: int
    intact_link_paths: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "exact": self.exact,
            "unreachable": self.unreachable,
            "switch_paths": self.switch_paths.to_dict(),
            "link_paths": self.link_paths.to_dict(),
            "intact_switch_paths": self.intact_switch_paths,
            "intact_link_paths": self.intact_link_paths,
        }


@dataclass(frozen=True)
class EcmpWidth:
    """Equal-cost shortest paths between leaves.

    Attributes
    ----------
    same_pod : PairGroup or None
        Over every pair of distinct leaves of one pod (None when no pod has two leaves).
    cross_pod : PairGroup or None
        Over leaf pairs in different pods, all of them or ``samples`` seeded random ones
        (None in two tiers, or with one pod).
    samples, seed : int
        The sampling of cross-pod pairs.
    links_down : int
    plane, plane_links_down : int or None, tuple of int
        With planes, leaves pair only within a plane: the figures are of plane ``plane``, the one
        with the most links down (the first such), and ``plane_links_down`` gives each plane's
        links down; None and empty with one plane.
    """

    same_pod: PairGroup | None
    cross_pod: PairGroup | None
    samples: int
    seed: int
    links_down: int
    plane: int | None = None
    plane_links_down: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the keys are a stable interface)."""
        out = {
            "same_pod": self.same_pod.to_dict() if self.same_pod else None,
            "cross_pod": self.cross_pod.to_dict() if self.cross_pod else None,
            "samples": self.samples,
            "seed": self.seed,
            "links_down": self.links_down,
        }
        if self.plane is not None:
            out.update(plane=self.plane, plane_links_down=list(self.plane_links_down))
        return out


def _stats(values: np.ndarray) -> PathStats:
    return PathStats(min=int(values.min()), mean=float(values.mean()), max=int(values.max()))


def _group(switch: np.ndarray, link: np.ndarray, exact: bool, intact: tuple[int, int]) -> PairGroup:
    return PairGroup(
        pairs=int(switch.size), exact=exact, unreachable=int((switch == 0).sum()),
        switch_paths=_stats(switch), link_paths=_stats(link),
        intact_switch_paths=intact[0], intact_link_paths=intact[1],
    )


def same_pod_paths(leaf_spine: np.ndarray, pods: int, per_pod: int) -> tuple[np.ndarray, np.ndarray]:
    """Switch and link paths of every pair of distinct leaves of one pod, pod by pod.

    ``leaf_spine[l, j]`` is the live links from leaf ``l`` to spine position ``j`` of its pod.
    Pairs come pod by pod, then in ``numpy.triu_indices`` order of the leaves' positions.
    """
    switch, link = [], []
    for pod in range(pods):
        m = leaf_spine[pod * per_pod:(pod + 1) * per_pod].astype(np.int64)
        i, j = np.triu_indices(m.shape[0], k=1)
        switch.append(((m > 0).astype(np.int64) @ (m > 0).T.astype(np.int64))[i, j])
        link.append((m @ m.T)[i, j])
    return np.concatenate(switch), np.concatenate(link)


def cross_pod_paths(
    leaf_spine: np.ndarray, spine_core: np.ndarray, a: np.ndarray, b: np.ndarray,
    per_pod: int, spines_per_pod: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Switch and link paths between leaves ``a`` and ``b`` (arrays; in different pods).

    ``spine_core[s, c]`` is the live links from spine ``s`` to core ``c`` of its group.
    """
    pa, pb = a // per_pod, b // per_pod
    cores = spine_core.shape[1]
    sc = spine_core.reshape(-1, spines_per_pod, cores).astype(np.int64)
    switch = np.zeros(a.size, dtype=np.int64)
    link = np.zeros(a.size, dtype=np.int64)
    step = max(1, BLOCK_ELEMENTS // max(spines_per_pod * cores, 1))
    for start in range(0, a.size, step):
        s = slice(start, start + step)
        up_a, up_b = leaf_spine[a[s]].astype(np.int64), leaf_spine[b[s]].astype(np.int64)
        core_a, core_b = sc[pa[s]], sc[pb[s]]  # (pairs, spine position, core)
        via_switch = ((core_a > 0) & (core_b > 0)).sum(axis=2)
        via_link = (core_a * core_b).sum(axis=2)
        switch[s] = (((up_a > 0) & (up_b > 0)) * via_switch).sum(axis=1)
        link[s] = (up_a * up_b * via_link).sum(axis=1)
    return switch, link


def _cross_pod_pairs(plan, samples: int, seed: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """All leaf pairs in different pods when there are at most ``samples``, else a seeded sample."""
    leaves, per_pod = plan.leaves, plan.leaves_per_pod
    pod_sizes = np.bincount(np.arange(leaves) // per_pod)
    total = (leaves * leaves - int((pod_sizes**2).sum())) // 2
    if total <= samples:
        i, j = np.triu_indices(leaves, k=1)
        keep = i // per_pod != j // per_pod
        return i[keep], j[keep], True
    rng = np.random.default_rng(seed)
    a = rng.integers(0, leaves, size=samples)
    # a uniform leaf outside a's pod: draw among the others, skip over a's pod
    b = rng.integers(0, leaves - pod_sizes[a // per_pod])
    first = a // per_pod * per_pod
    b = np.where(b >= first, b + pod_sizes[a // per_pod], b)
    return a, b, False


def ecmp_width(fabric: Fabric, faults: Faults | None = None, samples: int = 256, seed: int = 0) -> EcmpWidth:
    """Count the equal-cost shortest up-down paths between leaves.

    Parameters
    ----------
    fabric : Fabric
    faults : Faults, optional
        Links that are down (default: none).
    samples : int
        Cross-pod leaf pairs to sample when there are more than this many (three tiers).
    seed : int
        Seed of the sample (``numpy.random.default_rng``).

    Returns
    -------
    EcmpWidth

    Raises
    ------
    AnalysisError
        If ``samples`` is less than 1.

    Notes
    -----
    Same pod, exact: per pod, ``M = A A^T`` with ``A[l, j]`` the live links from leaf ``l`` to
    spine ``j`` (link paths) or their indicator (switch paths); O(pods x leaves_per_pod^2 x
    spines_per_pod). Cross pod, per pair ``(a, b)``: ``sum_j A[a, j] A[b, j] sum_c
    C[sa_j, c] C[sb_j, c]`` with ``C`` the live spine-core links (indicators for switch paths);
    O(pairs x spines_per_pod x cores_per_group).

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> width = ecmp_width(build_fabric(load_spec({"gpus": 4096})))
    >>> width.same_pod.switch_paths.min, width.same_pod.link_paths.max
    (32, 32)
    >>> width.cross_pod.intact_switch_paths, width.cross_pod.intact_link_paths
    (64, 16384)
    """
    faults = faults or no_faults(fabric)
    if samples < 1:
        raise AnalysisError([f"samples={samples}: must be at least 1"])
    plan = fabric.plan
    if plan.planes > 1:
        per = [plane_faults(fabric, faults, p) for p in range(plan.planes)]
        down = tuple(f.links_down for f in per)
        worst = int(np.argmax(down))
        one = ecmp_width(plane_view(fabric, worst), per[worst], samples, seed)
        return replace(one, links_down=faults.links_down, plane=worst, plane_links_down=down)
    ud = updown(fabric, faults)
    s, p = plan.spines_per_pod, plan.leaf_spine_links

    same = None
    if plan.leaves_per_pod >= 2:
        switch, link = same_pod_paths(ud.leaf_spine, plan.pods, plan.leaves_per_pod)
        same = _group(switch, link, True, (s, s * p * p))

    cross = None
    if plan.tiers == 3 and plan.pods >= 2:
        a, b, exact = _cross_pod_pairs(plan, samples, seed)
        switch, link = cross_pod_paths(ud.leaf_spine, ud.spine_core, a, b, plan.leaves_per_pod, s)
        g, q = plan.cores_per_group, plan.spine_core_links
        cross = _group(switch, link, exact, (s * g, s * p * p * g * q * q))
    return EcmpWidth(same_pod=same, cross_pod=cross, samples=samples, seed=seed,
                     links_down=faults.links_down)
