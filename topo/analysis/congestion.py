"""The lossless congestion model: from routed sub-flows to steady-state rates.

Nothing is dropped in a lossless fabric; congestion throttles senders instead. Two ways are
modelled (``docs/model.md`` states the assumptions):

``ecn``
    ECN-based congestion control (DCQCN) converges to max-min fair sharing of every resource:
    :func:`max_min_rates` computes it by progressive filling (water-filling).
``pfc``
    PFC alone, no end-to-end control: every sub-flow offers its share of its NIC's line rate; a
    resource whose offered load exceeds its capacity (load factor rho > 1) pauses the resources
    feeding it for a fraction 1 - 1/rho of the time, and a paused link stops every flow on it
    (head-of-line blocking), so the pause spreads upstream along the paths (a congestion tree).
    :func:`pfc_rates` computes each sub-flow's rate as its offered rate divided by the worst
    load factor on or downstream of any resource on its path.

Both are vectorised over an incidence of sub-flows and resources (paths padded with -1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .choices import CC_MODES  # noqa: F401  (its home is choices)


def _incidence(paths: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sub-flow, resource) pairs of the active sub-flows' paths."""
    rows = np.flatnonzero(active)
    sub = paths[rows]
    valid = sub >= 0
    flow_of = np.repeat(rows, valid.sum(axis=1))
    return flow_of, sub[valid]


def max_min_rates(paths: np.ndarray, capacity: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates of sub-flows over shared resources (exact, in parallel rounds).

    Progressive filling raises all rates together and freezes the flows of a resource when it
    saturates. Its levels are found here many at a time: a resource's fair share is its remaining
    capacity over its unfrozen flows, and shares never fall while filling, so a resource whose share
    is no larger than that of any resource its flows also cross is a bottleneck at exactly that
    share. Each round freezes the flows of all such resources; the number of rounds is the length
    of the longest chain of bottlenecks, not the number of distinct rates.

    Parameters
    ----------
    paths : ndarray of int, shape (subflows, hops)
        Resources of each sub-flow, padded with -1.
    capacity : ndarray of float
        Capacity of each resource (same unit as the result).
    active : ndarray of bool, optional
        Sub-flows to rate; the others get 0 (e.g. unreachable ones).

    Examples
    --------
    Two sub-flows hashed onto one link each get half of it; a third alone gets all of its link:

    >>> max_min_rates(np.array([[0, 2], [1, 2], [3, -1]]), np.array([1.0, 1.0, 1.0, 1.0])).tolist()
    [0.5, 0.5, 1.0]
    """
    n = paths.shape[0]
    active = np.ones(n, dtype=bool) if active is None else active.copy()
    rate = np.zeros(n, dtype=np.float64)
    remaining = capacity.astype(np.float64).copy()
    flow_of, res = _incidence(paths, active)  # grouped by sub-flow, ascending
    while flow_of.size:
        counts = np.bincount(res, minlength=remaining.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(counts > 0, np.maximum(remaining, 0.0) / counts, np.inf)
        starts = np.flatnonzero(np.r_[True, flow_of[1:] != flow_of[:-1]])
        flows = flow_of[starts]
        flow_min = np.minimum.reduceat(share[res], starts)  # tightest share on each flow's path
        neighbour_min = np.full(remaining.size, np.inf)
        np.minimum.at(neighbour_min, res, np.repeat(flow_min, np.diff(np.r_[starts, res.size])))
        bottleneck = share <= neighbour_min * (1 + 1e-12)
        frozen_inc = bottleneck[res]
        frozen_flow = np.logical_or.reduceat(frozen_inc, starts)
        new = flows[frozen_flow]
        rate[new] = flow_min[frozen_flow]
        leaving = np.repeat(frozen_flow, np.diff(np.r_[starts, res.size]))
        remaining -= np.bincount(res[leaving], weights=rate[flow_of[leaving]], minlength=remaining.size)
        active[new] = False
        flow_of, res = flow_of[~leaving], res[~leaving]
    return rate


def pfc_rates(paths: np.ndarray, capacity: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
    """Rates under PFC alone: offered load slowed by the worst pause on or downstream of its path.

    Each sub-flow offers an equal share of its first resource (its NIC's link). A resource with
    offered load ``D`` and capacity ``C`` has load factor ``rho = max(1, D / C)``; a resource that
    feeds another (consecutive on some sub-flow's path) inherits its downstream load factor, because
    the downstream switch pauses it. A sub-flow moves at ``offered / max(rho*)`` over its path.

    Examples
    --------
    A flow (index 1) that only shares a wide ingress link (resource 0, capacity 2) with a flow
    headed for a congested egress (resource 1, also used by flow 2) is slowed too:

    >>> paths = np.array([[3, 0, 1], [4, 0, 2], [5, 1, -1]])
    >>> pfc_rates(paths, np.array([2.0, 1.0, 1.0, 1.0, 1.0, 1.0])).tolist()
    [0.5, 0.5, 0.5]
    >>> max_min_rates(paths, np.array([2.0, 1.0, 1.0, 1.0, 1.0, 1.0])).tolist()
    [0.5, 1.0, 0.5]
    """
    n = paths.shape[0]
    active = np.ones(n, dtype=bool) if active is None else active
    flow_of, res = _incidence(paths, active)
    first = paths[:, 0]
    senders = np.bincount(first[active], minlength=capacity.size)
    offered = np.zeros(n, dtype=np.float64)
    offered[active] = capacity[first[active]] / senders[first[active]]
    load = np.bincount(res, weights=offered[flow_of], minlength=capacity.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(capacity > 0, np.maximum(load / np.where(capacity > 0, capacity, 1), 1.0), np.inf)
    rho[load == 0] = 1.0
    rows = paths[active]
    # pairs (upstream resource, downstream resource) of consecutive hops
    up = rows[:, :-1].ravel()
    down = rows[:, 1:].ravel()
    pair = (up >= 0) & (down >= 0)
    up, down = up[pair], down[pair]
    if up.size:
        edges = np.unique(up.astype(np.int64) * capacity.size + down)
        up, down = edges // capacity.size, edges % capacity.size
    for _ in range(rows.shape[1] + 1):  # up-down paths: the pause tree settles in path length
        before = rho.copy()
        np.maximum.at(rho, up, rho[down])
        if np.array_equal(before, rho):
            break
    worst = np.where(rows >= 0, rho[np.maximum(rows, 0)], 1.0).max(axis=1)
    rate = np.zeros(n, dtype=np.float64)
    rate[active] = offered[active] / worst
    return rate


@dataclass(frozen=True, eq=False)
class Rates:
    """Steady-state rates of sub-flows and the load they put on each resource (Gb/s)."""

    rate_gbps: np.ndarray
    load_gbps: np.ndarray
    capacity_gbps: np.ndarray
    subflows: np.ndarray  #: sub-flows crossing each resource

    @property
    def utilisation(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.capacity_gbps > 0, self.load_gbps / self.capacity_gbps, 0.0)


def solve_rates(paths: np.ndarray, capacity_gbps: np.ndarray, reachable: np.ndarray, cc: str,
                efficiency: float) -> Rates:
    """Rates of all sub-flows under congestion control ``cc`` on capacities scaled by efficiency."""
    if cc not in CC_MODES:
        raise ValueError(f"congestion control {cc!r} is not one of {CC_MODES}")
    capacity = capacity_gbps * efficiency
    solver = max_min_rates if cc == "ecn" else pfc_rates
    rate = solver(paths, capacity, reachable)
    flow_of, res = _incidence(paths, reachable)
    load = np.bincount(res, weights=rate[flow_of], minlength=capacity.size)
    count = np.bincount(res, minlength=capacity.size)
    return Rates(rate_gbps=rate, load_gbps=load, capacity_gbps=capacity, subflows=count)
