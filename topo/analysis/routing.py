"""Paths of flows through the fabric: ECMP hashing or adaptive spraying over up-down routes.

A flow goes from one NIC to another; it is split into ``qps`` sub-flows (queue pairs, as
``NCCL_IB_QPS_PER_CONNECTION``). Each sub-flow follows the up-down route of
:mod:`topo.updown`; where a switch has several equal-cost next hops (ports), the choice depends on
the routing mode:

``ecmp``
    a deterministic hash of the sub-flow's RoCEv2 5-tuple (source and destination NIC address,
    UDP source port drawn per queue pair, UDP destination port 4791, protocol 17) salted per
    switch and by ``hash_seed`` picks one live next hop, as a switch's ECMP hash does. Each
    directed link is a resource.
``adaptive``
    the sub-flow is spread evenly over all live equal-cost ports at every stage (adaptive routing or
    packet spraying), modelled as ideal balancing: each stage's set of ports is one pooled resource
    whose capacity is the sum of its live links (a leaf's uplinks, the uplinks of a pod's spines, the
    core links down into a pod, the spine links down to a leaf).

Resources are numbered: directed link ``2 * link + direction`` (direction 0 is up, from the lower
tier, 1 is down), then the pools. All work is vectorised over sub-flows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..fabric import Fabric
from .faults import Faults, no_faults
from .updown import UNREACHABLE, UpDown, updown

ROUTING_MODES = ("ecmp", "adaptive")
ROCE_UDP_PORT = 4791
MAX_LINKS = 6  # NIC-leaf-spine-core-spine-leaf-NIC

_U64 = np.uint64


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fast, well-mixed 64-bit hash of each element (wraps mod 2^64)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def udp_source_ports(connection: np.ndarray, qps: int) -> np.ndarray:
    """UDP source port of every queue pair of every connection (49152..65535), connection-major."""
    qp = np.arange(qps, dtype=np.uint64)
    ids = np.asarray(connection, dtype=np.uint64)[:, None] * _U64(1024) + qp[None, :]
    return (_U64(49152) + mix64(ids ^ _U64(0x5EED)) % _U64(16384)).ravel()


@dataclass(frozen=True, eq=False)
class PortTables:
    """Link ids by switch and port position, derived once from the fabric's port layout."""

    nic_link: np.ndarray  # (nodes * nics,) link of NIC (node, nic)
    leaf_up: np.ndarray  # (leaves, u) uplinks of each leaf, by port
    spine_down: np.ndarray  # (spines, leaves_per_pod, p) links from a spine to each leaf of its pod
    spine_up: np.ndarray  # (spines, us) uplinks of each spine, by port
    core_down: np.ndarray  # (cores, pods, q) links from a core to the spine of its group in a pod


def port_tables(fabric: Fabric) -> PortTables:
    """Index the links by switch and port (the layout of :func:`topo.fabric.build_fabric`)."""
    plan, links = fabric.plan, fabric.links
    ids = np.arange(len(links))
    leaf0, spine0, core0 = fabric.first(1), fabric.first(2), fabric.first(3)
    nl = links.kind == 0
    nic_link = np.full(plan.nodes * plan.rails, -1, dtype=np.int64)
    nic_link[links.lo[nl].astype(np.int64) * plan.rails + links.lo_port[nl]] = ids[nl]
    ls = links.kind == 1
    p = plan.leaf_spine_links
    leaf_up = np.full((plan.leaves, plan.leaf_up_ports), -1, dtype=np.int64)
    leaf_up[links.lo[ls] - leaf0, links.lo_port[ls] - plan.leaf_down_ports - 1] = ids[ls]
    spine_down = np.full((plan.spines, plan.leaves_per_pod, p), -1, dtype=np.int64)
    sp_port = links.hi_port[ls].astype(np.int64) - 1
    spine_down[links.hi[ls] - spine0, sp_port // p, sp_port % p] = ids[ls]
    sc = links.kind == 2
    spine_up = np.full((plan.spines, plan.spine_up_ports), -1, dtype=np.int64)
    core_down = np.full((plan.cores, plan.pods, max(plan.spine_core_links, 1)), -1, dtype=np.int64)
    if sc.any():
        q = plan.spine_core_links
        spine_up[links.lo[sc] - spine0, links.lo_port[sc] - plan.spine_down_ports - 1] = ids[sc]
        core_port = links.hi_port[sc].astype(np.int64) - 1
        core_down[links.hi[sc] - core0, core_port // q, core_port % q] = ids[sc]
    return PortTables(nic_link, leaf_up, spine_down, spine_up, core_down)


@dataclass(frozen=True, eq=False)
class Routes:
    """Where every sub-flow goes.

    Attributes
    ----------
    resources : ndarray of int64, shape (subflows, 6)
        Resources crossed, in path order, padded with -1.
    links : ndarray of int8
        Links crossed NIC to NIC (2, 4 or 6); 0 for an unreachable sub-flow.
    capacity_gbps : ndarray of float64
        Capacity of each resource (live links only; 0 for a dead one).
    mode : str
        ``ecmp`` or ``adaptive``.
    qps : int
        Sub-flows per flow (sub-flow ``f * qps + q`` belongs to flow ``f``).
    """

    resources: np.ndarray
    links: np.ndarray
    capacity_gbps: np.ndarray
    mode: str
    qps: int
    pool_names: tuple[str, ...]
    link_count: int

    @property
    def reachable(self) -> np.ndarray:
        return self.links > 0

    def describe(self, fabric: Fabric, resource: int) -> dict[str, Any]:
        """A resource for people: both ends and ports of a directed link, or a named pool."""
        if resource >= 2 * self.link_count:
            name = self.pool_names[resource - 2 * self.link_count]
            return {"resource": name, "kind": "pool", "capacity_gbps": float(self.capacity_gbps[resource])}
        link, direction = divmod(int(resource), 2)
        lk = fabric.links
        ends = [(fabric.names[lk.lo[link]], int(lk.lo_port[link])), (fabric.names[lk.hi[link]], int(lk.hi_port[link]))]
        (src, sport), (dst, dport) = ends if direction == 0 else ends[::-1]
        return {
            "resource": f"{src}:{sport} -> {dst}:{dport}",
            "kind": "up" if direction == 0 else "down",
            "capacity_gbps": float(self.capacity_gbps[resource]),
        }


def _choose(group_key: np.ndarray, candidates, hashes: np.ndarray) -> np.ndarray:
    """ECMP choice: per sub-flow, the (hash mod n)-th of the n valid candidates of its group.

    Sub-flows with the same ``group_key`` (switch and destination) share one candidate list, so the
    candidate matrix is built once per group, not once per sub-flow. ``candidates(keys)`` returns
    ``(link ids, valid)`` arrays of shape (groups, ports). Returns -1 where nothing is valid.
    """
    keys, inverse = np.unique(group_key, return_inverse=True)
    cands, valid = candidates(keys)
    count = valid.sum(axis=1)
    valid_first = np.argsort(~valid, axis=1, kind="stable")
    n = count[inverse]
    k = (hashes % np.maximum(n, 1).astype(np.uint64)).astype(np.int64)
    column = valid_first[inverse, k]
    return np.where(n > 0, cands[inverse, column], -1)


def _route_ecmp(fabric, tables, ud, live, src, dst, a, b, dist, qps, hash_seed, out):
    """Fill ``out`` columns 1..4 with the hashed up-down path of every sub-flow."""
    plan, links = fabric.plan, fabric.links
    spine0, core0 = fabric.first(2), fabric.first(3)
    sp, lp, p = plan.spines_per_pod, plan.leaves_per_pod, plan.leaf_spine_links
    n = src.size
    sport = udp_source_ports(np.arange(n // max(qps, 1)), qps)
    with np.errstate(over="ignore"):  # the 5-tuple, folded into 64 bits
        key = mix64(
            mix64(src.astype(np.uint64)) ^ (dst.astype(np.uint64) * _U64(0xC2B2AE3D27D4EB4F))
            ^ (sport * _U64(0x165667B19E3779F9)) ^ _U64(ROCE_UDP_PORT << 8 | 17)
        )
    salt = mix64(np.uint64(hash_seed) ^ _U64(0x9E3779B97F4A7C15))

    def hashes(rows: np.ndarray, switch: np.ndarray) -> np.ndarray:
        return mix64(key[rows] ^ mix64(switch.astype(np.uint64) + salt))

    def alive(cands: np.ndarray) -> np.ndarray:
        return (cands >= 0) & live[np.maximum(cands, 0)]

    # 1. leaf up, to a spine position that reaches leaf b down (2) or joins the two pods (4)
    rows = np.flatnonzero(dist >= 2)
    col_pos = np.arange(plan.leaf_up_ports) // p  # spine position of each uplink column
    col_word, col_bit = col_pos // 64, (col_pos % 64).astype(np.uint64)
    L = np.int64(plan.leaves)

    def leaf_candidates(keys):
        ga, gb = keys // L, keys % L
        mask = ud.leaf_bits[ga] & ud.leaf_bits[gb]
        pa, pb = ud.leaf_pod[ga], ud.leaf_pod[gb]
        mask = np.where((pa != pb)[:, None], mask & ud.pod_pair_bits[pa, pb], mask)
        cands = tables.leaf_up[ga]
        return cands, alive(cands) & (((mask[:, col_word] >> col_bit) & _U64(1)) == 1)

    up1 = _choose(a[rows] * L + b[rows], leaf_candidates, hashes(rows, a[rows] + fabric.first(1)))
    out[rows, 1] = 2 * up1
    spine = links.hi[up1].astype(np.int64) - spine0

    # 2. within a pod: the spine goes down to leaf b
    turn = dist[rows] == 2
    _spine_down(out, rows[turn], 2, spine[turn], b[rows[turn]], tables, alive, hashes, lp, spine0)

    # 3. across pods: spine up to a core of its group that reaches spine (pod b, j), core down to it
    far = rows[~turn]
    if far.size:
        s = spine[~turn]
        target = ud.leaf_pod[b[far]] * sp + s % sp  # spine (pod b, same position)
        S = np.int64(plan.spines)

        def spine_candidates(keys):
            gs, gt = keys // S, keys % S
            cands = tables.spine_up[gs]
            c_local = (links.hi[np.maximum(cands, 0)].astype(np.int64) - core0) % plan.cores_per_group
            return cands, alive(cands) & (ud.spine_core[gt[:, None], c_local] > 0)

        up2 = _choose(s * S + target, spine_candidates, hashes(far, s + spine0))
        out[far, 2] = 2 * up2
        core = links.hi[up2].astype(np.int64) - core0
        P = np.int64(plan.pods)

        def core_candidates(keys):
            cands = tables.core_down[keys // P, keys % P]
            return cands, alive(cands)

        down1 = _choose(core * P + ud.leaf_pod[b[far]], core_candidates, hashes(far, core + core0))
        out[far, 3] = 2 * down1 + 1
        _spine_down(out, far, 4, target, b[far], tables, alive, hashes, lp, spine0)


def _spine_down(out, rows, column, spine, leaf, tables, alive, hashes, lp, spine0):
    """ECMP over the live parallel links from each sub-flow's spine down to its leaf."""
    if rows.size == 0:
        return
    LP = np.int64(lp)

    def candidates(keys):
        cands = tables.spine_down[keys // LP, keys % LP]
        return cands, alive(cands)

    chosen = _choose(spine * LP + leaf % lp, candidates, hashes(rows, spine + spine0))
    out[rows, column] = 2 * chosen + 1


def route(
    fabric: Fabric,
    src_nic: np.ndarray,
    dst_nic: np.ndarray,
    qps: int = 1,
    mode: str = "ecmp",
    hash_seed: int = 0,
    faults: Faults | None = None,
    ud: UpDown | None = None,
) -> Routes:
    """Route flows between NICs (global NIC id = node * nics_per_node + nic), ``qps`` sub-flows each.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 1024}))
    >>> r = route(fabric, np.array([0, 0, 0]), np.array([8, 1, 8 * 40]))
    >>> r.links.tolist()  # same rail in one SU; cross rail; same rail in another SU
    [2, 4, 4]
    """
    if mode not in ROUTING_MODES:
        raise ValueError(f"routing mode {mode!r} is not one of {ROUTING_MODES}")
    faults = faults or no_faults(fabric)
    ud = ud or updown(fabric, faults)
    links = fabric.links
    live = faults.live
    tables = port_tables(fabric)
    leaf0 = fabric.first(1)

    src = np.repeat(np.asarray(src_nic, dtype=np.int64), qps)
    dst = np.repeat(np.asarray(dst_nic, dtype=np.int64), qps)
    n = src.size
    l_src, l_dst = tables.nic_link[src], tables.nic_link[dst]
    a = links.hi[l_src].astype(np.int64) - leaf0
    b = links.hi[l_dst].astype(np.int64) - leaf0
    dist = ud.leaf_distance(a, b)
    dist[~(live[l_src] & live[l_dst])] = UNREACHABLE

    out = np.full((n, MAX_LINKS), -1, dtype=np.int64)
    out[:, 0] = 2 * l_src
    hops = np.where(dist >= 0, dist.astype(np.int8) + 2, 0).astype(np.int8)

    pools: list[str] = []
    capacity = np.zeros(2 * len(links), dtype=np.float64)
    capacity[0::2] = capacity[1::2] = np.where(live, links.gbps, 0)

    if mode == "ecmp":
        _route_ecmp(fabric, tables, ud, live, src, dst, a, b, dist, qps, hash_seed, out)
    else:
        capacity, pools = _adaptive(fabric, out, dist, a, b, tables, live, capacity, ud)

    last = np.where(dist >= 0, (dist.astype(np.int64) + 1), 0)
    out[np.arange(n), last] = np.where(dist >= 0, 2 * l_dst + 1, out[np.arange(n), last])
    out[dist < 0] = -1
    out[dist < 0, 0] = 2 * l_src[dist < 0]
    return Routes(resources=out, links=hops, capacity_gbps=capacity, mode=mode, qps=qps,
                  pool_names=tuple(pools), link_count=len(links))


def _adaptive(fabric, out, dist, a, b, tables, live, capacity, ud):
    """Pooled resources for ideal spraying; fills ``out`` columns 1.. and returns capacities."""
    plan, links = fabric.plan, fabric.links
    base = capacity.size
    gbps = np.where(live, links.gbps, 0).astype(np.float64)
    lp, sp = plan.leaves_per_pod, plan.spines_per_pod
    names = fabric.names
    leaf0 = fabric.first(1)
    # pools: leaf uplinks (L), spine links down to a leaf (L), pod spine uplinks (pods), core->pod (pods)
    up_cap = np.where(tables.leaf_up >= 0, gbps[np.maximum(tables.leaf_up, 0)], 0).sum(axis=1)
    sd = tables.spine_down  # (S, lp, p)
    down_cap_by = np.where(sd >= 0, gbps[np.maximum(sd, 0)], 0).sum(axis=2)  # (S, lp)
    pod_of_spine = np.arange(plan.spines) // sp
    down_cap = np.zeros(plan.leaves)
    np.add.at(down_cap, pod_of_spine[:, None] * lp + np.arange(lp)[None, :],
              down_cap_by)
    su = tables.spine_up
    spine_up_cap = np.where(su >= 0, gbps[np.maximum(su, 0)], 0).sum(axis=1) if su.size else np.zeros(plan.spines)
    pod_up = np.bincount(pod_of_spine, weights=spine_up_cap, minlength=plan.pods)
    cd = tables.core_down
    pod_down = (np.where(cd >= 0, gbps[np.maximum(cd, 0)], 0).sum(axis=(0, 2)) if plan.tiers == 3
                else np.zeros(plan.pods))
    L, P = plan.leaves, plan.pods
    off_up, off_down, off_pup, off_pdown = base, base + L, base + 2 * L, base + 2 * L + P
    capacity = np.concatenate([capacity, up_cap, down_cap, pod_up, pod_down])
    leaf_names = [names[leaf0 + i] for i in range(L)]
    pools = ([f"uplinks of {n}" for n in leaf_names] + [f"spine links down to {n}" for n in leaf_names]
             + [f"spine uplinks of pod {p}" for p in range(P)] + [f"core links down to pod {p}" for p in range(P)])
    two = dist == 2
    four = dist == 4
    out[two, 1] = off_up + a[two]
    out[two, 2] = off_down + b[two]
    out[four, 1] = off_up + a[four]
    out[four, 2] = off_pup + ud.leaf_pod[a[four]]
    out[four, 3] = off_pdown + ud.leaf_pod[b[four]]
    out[four, 4] = off_down + b[four]
    return capacity, pools
