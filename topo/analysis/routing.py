"""Paths of flows through the fabric: ECMP hashing, adaptive spraying or InfiniBand D-mod-K routing
over up-down routes.

A flow goes from one NIC to another; it is split into ``qps`` sub-flows (queue pairs, as
``NCCL_IB_QPS_PER_CONNECTION``). Each sub-flow follows the up-down route of
:mod:`topo.analysis.updown`; where a switch has several equal-cost next hops (ports), the choice
depends on the routing mode:

``ecmp``
    a deterministic hash of the sub-flow's header fields picks one live next hop, as a switch's ECMP
    hash does. ``hash_field="sport"`` hashes the RoCEv2 5-tuple (source and destination NIC
    address, UDP source port drawn per queue pair, UDP destination port 4791, protocol 17);
    ``hash_field="qpn"`` hashes the source and destination address and the destination queue pair
    number of the InfiniBand BTH (enhanced ECMP). The hash is salted per switch, or per tier with
    ``polarized=True`` (hash polarisation). ``hash_seed`` is a sample seed: it redraws both the
    per-QP entropy (ports or QP numbers) and the switch salts. Each directed link is a resource.
``adaptive``
    the sub-flow is spread evenly over all live equal-cost ports at every stage (adaptive routing or
    packet spraying), modelled as ideal balancing: each stage's set of ports is one pooled resource
    whose capacity is the sum of its live links (a leaf's uplinks, the uplinks of a pod's spines, the
    core links down into a pod, the spine links down to a leaf).
``dmodk``
    destination-based routing of an InfiniBand subnet manager on a fat tree (D-mod-K): no hashing,
    every switch forwards by the destination alone, so all queue pairs of a connection share one
    path and ``qps`` and ``hash_seed`` change nothing. Destinations are counted in topology order
    (leaf, then position on the leaf) and each stage takes one digit of that index, so the
    destinations of a leaf spread evenly over the uplinks and parallel down links.

Resources are numbered: directed link ``2 * link + direction`` (direction 0 is up, from the lower
tier, 1 is down), then the pools. All work is vectorised over sub-flows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..fabric import Fabric, end_slots, rank_within
from .choices import HASH_FIELDS, ROUTING_MODES  # noqa: F401  (their home is choices)
from .faults import Faults, no_faults
from .updown import UNREACHABLE, UpDown, updown

ROCE_UDP_PORT = 4791
QPN_BITS = 24  # InfiniBand queue pair numbers (BTH destination QP field)
MAX_LINKS = 6  # NIC-leaf-spine-core-spine-leaf-NIC

_U64 = np.uint64


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fast, well-mixed 64-bit hash of each element (wraps mod 2^64)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def _seed_word(seed: int, stream: int) -> np.uint64:
    """A 64-bit word drawn from ``seed`` for one use (``stream``); seed 0 gives 0 (today's draws)."""
    seed = int(seed) % (1 << 64)
    if seed == 0:
        return _U64(0)
    with np.errstate(over="ignore"):
        return _U64(mix64(mix64(_U64(seed) * _U64(0xD6E8FEB86659FD93)) ^ _U64(stream)))


def udp_source_ports(connection: np.ndarray, qps: int, seed: int = 0) -> np.ndarray:
    """UDP source port of every queue pair of every connection (49152..65535), connection-major.

    The NIC draws a port per connection and queue pair when the job starts; ``seed`` (the sample
    seed, ``hash_seed`` of :func:`route`) redraws them all. Seed 0 gives the historical ports.
    """
    qp = np.arange(qps, dtype=np.uint64)
    ids = np.asarray(connection, dtype=np.uint64)[:, None] * _U64(1024) + qp[None, :]
    return (_U64(49152) + mix64(ids ^ _U64(0x5EED) ^ _seed_word(seed, 1)) % _U64(16384)).ravel()


def _stable_order(x: np.ndarray) -> np.ndarray:
    """``np.argsort(x, kind="stable")`` of non-negative ids, as a radix sort of 16-bit digits."""
    if x.size == 0 or x.min() < 0 or x.max() >= 1 << 32:
        return np.argsort(x, kind="stable")
    order = np.argsort((x & 0xFFFF).astype(np.uint16), kind="stable")
    if x.max() >= 1 << 16:
        order = order[np.argsort((x[order] >> 16).astype(np.uint16), kind="stable")]
    return order


def queue_pair_numbers(dst_nic: np.ndarray, qps: int, seed: int = 0) -> np.ndarray:
    """Destination QP number (24 bits) of every queue pair of every connection, connection-major.

    Each receiving NIC allocates its QP numbers consecutively from a random base (drawn per NIC
    from ``seed``): its first incoming queue pair, in connection order, gets the base, the next
    one base + 1, and so on, modulo 2^24. ``dst_nic`` has one entry per connection.

    >>> q = queue_pair_numbers(np.array([5, 7, 5]), qps=2, seed=3)
    >>> (q[[1, 4, 5]] - q[0]).tolist()  # NIC 5's later queue pairs follow on from its first
    [1, 2, 3]
    """
    dst = np.asarray(dst_nic, dtype=np.int64).ravel()
    return _qpns(dst, _dst_ranks(dst), qps, seed)


def _dst_ranks(dst: np.ndarray) -> np.ndarray:
    """For each connection, the earlier connections to the same NIC (uint64)."""
    order = _stable_order(dst)
    ranked = dst[order]
    starts = np.ones(dst.size, dtype=bool)
    starts[1:] = ranked[1:] != ranked[:-1]
    first = np.maximum.accumulate(np.where(starts, np.arange(dst.size), 0))
    rank = np.empty(dst.size, dtype=np.uint64)
    rank[order] = (np.arange(dst.size) - first).astype(np.uint64)  # earlier connections to that NIC
    return rank


def _qpns(dst: np.ndarray, rank: np.ndarray, qps: int, seed: int) -> np.ndarray:
    """QP numbers of connections to ``dst`` with ``rank`` earlier ones to the same NIC."""
    base = mix64(dst.astype(np.uint64) ^ _U64(0x51F15EED) ^ _seed_word(seed, 2))
    with np.errstate(over="ignore"):
        qpn = base[:, None] + rank[:, None] * _U64(qps) + np.arange(qps, dtype=np.uint64)[None, :]
    return (qpn & _U64((1 << QPN_BITS) - 1)).ravel()


@dataclass(frozen=True, eq=False)
class PortTables:
    """Link ids by switch and port position, derived once from the fabric's port layout."""

    nic_link: np.ndarray  # (nodes * nics,) link of NIC (node, nic)
    leaf_up: np.ndarray  # (leaves, u) uplinks of each leaf, by slot (port, then lane)
    spine_down: np.ndarray  # (spines, leaves_per_pod, p) links from a spine to each leaf of its pod
    spine_up: np.ndarray  # (spines, us) uplinks of each spine, by slot (port, then lane)
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
    lo_slot, hi_slot = end_slots(plan, links)  # a link's place among its ends' uplinks and downlinks
    leaf_up = np.full((plan.leaves, plan.leaf_uplinks), -1, dtype=np.int64)
    leaf_up[links.lo[ls] - leaf0, lo_slot[ls]] = ids[ls]
    spine_down = np.full((plan.spines, plan.leaves_per_pod, p), -1, dtype=np.int64)
    sp_slot = hi_slot[ls]
    spine_down[links.hi[ls] - spine0, sp_slot // p, sp_slot % p] = ids[ls]
    sc = links.kind == 2
    spine_up = np.full((plan.spines, plan.spine_uplinks), -1, dtype=np.int64)
    core_down = np.full((plan.cores, plan.pods, max(plan.spine_core_links, 1)), -1, dtype=np.int64)
    if sc.any():
        q = plan.spine_core_links
        spine_up[links.lo[sc] - spine0, lo_slot[sc]] = ids[sc]
        core_slot = hi_slot[sc]
        core_down[links.hi[sc] - core0, core_slot // q, core_slot % q] = ids[sc]
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
        ``ecmp``, ``adaptive`` or ``dmodk``.
    qps : int
        Sub-flows per flow (sub-flow ``f * qps + q`` belongs to flow ``f``).
    hash_field : str
        ``ecmp``: the per-QP header field hashed with the addresses, ``sport`` or ``qpn``
        (``sport``, the default, for the other modes).
    polarized : bool
        ``ecmp``: True when the hash was salted per tier instead of per switch (False otherwise).
    """

    resources: np.ndarray
    links: np.ndarray
    capacity_gbps: np.ndarray
    mode: str
    qps: int
    pool_names: tuple[str, ...]
    link_count: int
    hash_field: str = "sport"
    polarized: bool = False

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
        kind, lane = int(lk.kind[link]), int(lk.lane[link])
        lanes = fabric.plan.lanes(kind)

        def port(p: int, broken: bool) -> str:  # a broken-out port's lane after a slash
            return f"{p}/{lane}" if broken else str(p)

        ends = [(fabric.names[lk.lo[link]], port(int(lk.lo_port[link]), lanes[0] > 1)),
                (fabric.names[lk.hi[link]], port(int(lk.hi_port[link]), lanes[1] > 1))]
        (src, sport), (dst, dport) = ends if direction == 0 else ends[::-1]
        return {
            "resource": f"{src}:{sport} -> {dst}:{dport}",
            "kind": "up" if direction == 0 else "down",
            "capacity_gbps": float(self.capacity_gbps[resource]),
        }


def _unique_inverse(key: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` for keys in ``[0, span)``; by counting, not sorting,
    when the span is small next to the number of keys."""
    if span > 8 * key.size + (1 << 20):
        return np.unique(key, return_inverse=True)
    present = np.zeros(span, dtype=bool)
    present[key] = True
    keys = np.flatnonzero(present)
    index = np.empty(span, dtype=np.int32)
    index[keys] = np.arange(keys.size, dtype=np.int32)
    return keys, index[key]


def _choose(group_key: np.ndarray, span: int, candidates, hashes: np.ndarray) -> np.ndarray:
    """Resilient ECMP choice: per sub-flow, the column ``hash mod ports`` of its switch's port list
    when that port is valid, else the (hash' mod n)-th of the n valid ports; -1 where none is.

    This is how switches' resilient hashing behaves: a port that goes away moves only the flows
    that were on it; every other flow keeps its port. On a healthy fabric every port is valid and
    the choice is ``hash mod ports``.

    Sub-flows with the same ``group_key`` (in ``[0, span)``) share one candidate list, so validity
    is worked out once per group, not once per sub-flow: ``candidates(keys)`` returns the
    (groups, ports) bool array of which port columns may be taken. The caller maps a column to the
    link of the sub-flow's switch.
    """
    keys, inverse = _unique_inverse(group_key, span)
    valid = candidates(keys)
    ports = valid.shape[1]
    count = valid.sum(axis=1)
    n = count[inverse]
    column = (hashes % _U64(max(ports, 1))).astype(np.int64)
    partial = (count > 0) & (count < ports)
    if partial.any():  # the primary port may be gone: move those sub-flows to a valid one
        moved = np.flatnonzero(partial[inverse])
        moved = moved[~valid[inverse[moved], column[moved]]]
        if moved.size:
            slot = np.cumsum(partial) - 1
            valid_first = np.argsort(~valid[partial], axis=1, kind="stable")
            second = mix64(hashes[moved] ^ _U64(0xA0761D6478BD642F))
            k = (second % n[moved].astype(np.uint64)).astype(np.int64)
            column = column.copy()
            column[moved] = valid_first[slot[inverse[moved]], k]
    return np.where(n > 0, column, -1)


def _take(table: np.ndarray, row: np.ndarray, column: np.ndarray) -> np.ndarray:
    """Link ``table[row, column]`` of each sub-flow, -1 where the column is -1."""
    return np.where(column >= 0, table[row, np.maximum(column, 0)], -1)


def _classes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a small (items, ports) bool table, and the class of each item."""
    items = rows.shape[0]
    packed = np.packbits(rows, axis=1)
    pad = -packed.shape[1] % 8 if packed.shape[1] else 8  # whole 64-bit words, at least one
    packed = np.pad(packed, ((0, 0), (0, pad)))
    words = np.ascontiguousarray(packed).view(np.uint64)  # (items, words): a row as integers
    order = np.lexsort(words.T[::-1])
    ranked = words[order]
    first = np.ones(items, dtype=bool)
    first[1:] = (ranked[1:] != ranked[:-1]).any(axis=1)
    cls = np.empty(items, dtype=np.int64)
    cls[order] = np.cumsum(first) - 1
    return rows[order[first]], cls


# Stages at which a switch picks one of several equal-cost ports, and the tier of that switch.
LEAF_UP, SPINE_UP, CORE_DOWN, SPINE_DOWN = range(4)
_STAGE_TIER = np.array([1, 2, 3, 2])


def flow_entropy(dst_nic: np.ndarray, qps: int, hash_field: str = "sport", seed: int = 0,
                 flows: np.ndarray | None = None, ranks: np.ndarray | None = None) -> np.ndarray:
    """The per-queue-pair header field the ECMP hash takes besides the addresses, for every queue
    pair of the flows ``flows`` (positions in ``dst_nic``; all by default), flow-major: the UDP
    source port (``sport``, drawn per flow position and queue pair) or the destination QP number
    (``qpn``, which follows the earlier flows to the same NIC in the whole list: ``ranks``, its
    :func:`_dst_ranks`, when the caller keeps them). ``dst_nic`` has one entry per flow.

    A flow's draw depends on its position in ``dst_nic`` and on ``seed``, not on which other flows
    are routed with it: route a subset with its own draws (``entropy`` of :func:`route`), and a
    flow keeps its draw whatever else changes.

    >>> dst = np.array([5, 7, 5, 9])
    >>> whole = flow_entropy(dst, 2, "qpn", seed=3)
    >>> (flow_entropy(dst, 2, "qpn", seed=3, flows=np.array([2, 3])) == whole[4:]).all()
    np.True_
    """
    dst_nic = np.asarray(dst_nic, dtype=np.int64).ravel()
    flows = np.arange(dst_nic.size) if flows is None else np.asarray(flows, dtype=np.int64)
    if hash_field == "sport":
        return udp_source_ports(flows, qps, seed)
    ranks = _dst_ranks(dst_nic) if ranks is None else ranks
    return _qpns(dst_nic[flows], ranks[flows], qps, seed)


def _ecmp_hasher(src, dst, dst_flow, qps, hash_field, hash_seed, polarized, entropy=None):
    """``hashes(rows, switch, stage)`` of ECMP: the header key of each sub-flow, salted per switch
    (or per tier when ``polarized``). ``entropy``: the sub-flows' draws of :func:`flow_entropy`
    (drawn here from the flows' positions when not given)."""
    if entropy is None:
        entropy = flow_entropy(dst_flow, qps, hash_field, hash_seed)
    entropy = np.asarray(entropy, dtype=np.uint64)
    if hash_field == "sport":  # RoCEv2 5-tuple: addresses, UDP source port, port 4791, protocol 17
        constant = _U64(ROCE_UDP_PORT << 8 | 17)
    else:  # enhanced ECMP: addresses and the BTH destination QP number, no UDP source port
        constant = _U64(0x51F15EED_B7400000)
    with np.errstate(over="ignore"):  # the header fields, folded into 64 bits
        key = mix64(
            mix64(src.astype(np.uint64)) ^ (dst.astype(np.uint64) * _U64(0xC2B2AE3D27D4EB4F))
            ^ (entropy * _U64(0x165667B19E3779F9)) ^ constant
        )
    salt = mix64(np.uint64(int(hash_seed) % (1 << 64)) ^ _U64(0x9E3779B97F4A7C15))
    if polarized:
        # One hash of the same key at every hop; a tier's seed only offsets the result, as a seed
        # does to a linear (CRC-like) hash: 56-bit values, so the sum never wraps and
        # (h + s) mod n = (h mod n + s mod n) mod n.
        h = mix64(key ^ salt) >> _U64(8)
        tier_salt = mix64(salt + np.arange(4, dtype=np.uint64)) >> _U64(8)
        return lambda rows, switch, stage: h[rows] + tier_salt[_STAGE_TIER[stage]]
    return lambda rows, switch, stage: mix64(key[rows] ^ mix64(switch.astype(np.uint64) + salt))


def dmodk_index(fabric: Fabric, nic: np.ndarray, tables: PortTables | None = None) -> np.ndarray:
    """Topology-order index of each NIC, as D-mod-K routing counts destinations.

    ``leaf * nics_per_leaf + slot``, the slot being the NIC's position on its leaf (down port, then
    breakout lane). The NICs of one leaf have consecutive indices, which LIDs (global NIC id + 1) do
    not have on rail-optimised leaves.

    >>> from topo import build_fabric, load_spec
    >>> dmodk_index(build_fabric(load_spec({"gpus": 1024})), np.array([0, 8, 1])).tolist()
    [0, 1, 32]
    """
    plan, links = fabric.plan, fabric.links
    tables = tables if tables is not None else port_tables(fabric)
    # a NIC's first link (with dual-ToR, the one to its pair's a leaf: both are on the same slot)
    link = tables.nic_link.reshape(-1, plan.homes)[np.asarray(nic, dtype=np.int64), 0]
    leaf = links.hi[link].astype(np.int64) - fabric.first(1)
    slot = (links.hi_port[link].astype(np.int64) - 1) * plan.breakout + links.lane[link] - 1
    return leaf * plan.nics_per_leaf + slot


def _dmodk_hasher(fabric, tables, dst):
    """``hashes(rows, switch, stage)`` of D-mod-K: a digit of the destination's topology index.

    The leaf going up and the spine going down to a leaf use the index ``t``; the spine going up and
    the core going down use ``t // leaf_uplinks``. The down choice of a stage thus repeats the
    parallel-link digit of the up choice of the same stage, so a down link carries as few
    destinations as the up links do.
    """
    t = dmodk_index(fabric, dst, tables).astype(np.uint64)
    t2 = t // _U64(max(fabric.plan.leaf_uplinks, 1))
    keys = (t, t2, t2, t)
    return lambda rows, switch, stage: keys[stage][rows]


def _bit_columns(bits: np.ndarray, position: np.ndarray) -> np.ndarray:
    """(..., words) uint64 masks -> (..., columns) bool: is the bit of each column's position set."""
    word, bit = position // 64, (position % 64).astype(np.uint64)
    return ((bits[..., word] >> bit) & _U64(1)) == 1


def _route_ports(fabric, tables, ud, live, a, b, dist, hashes, out):
    """Fill ``out`` columns 1..4 with the up-down path of every sub-flow, one port per stage."""
    plan, links = fabric.plan, fabric.links
    if plan.tiers == 1:  # no spines: a sub-flow between two leaves has no path (its dist says so)
        return
    leaf0, spine0, core0 = fabric.first(1), fabric.first(2), fabric.first(3)
    lp, sp, p = plan.leaves_per_pod, plan.spines_per_pod, plan.leaf_spine_links

    def alive(cands: np.ndarray) -> np.ndarray:
        return (cands >= 0) & live[np.maximum(cands, 0)]

    # Validity by switch and port, worked out once per call (small tables, not per sub-flow).
    col_pos = np.arange(plan.leaf_uplinks) // p  # spine position of each uplink column
    leaf_reach = _bit_columns(ud.leaf_bits, col_pos)  # leaf has a live link to that position
    pod_join = _bit_columns(ud.pod_pair_bits, col_pos)  # a core of that group joins the two pods
    pod_join[np.arange(plan.pods), np.arange(plan.pods)] = True  # same pod: no core needed
    # A leaf's valid uplinks towards leaf b depend on b only through the class of leaf_reach[b] and of
    # the pod pair, so sub-flows are grouped by (class of a, class of b, class of pod pair): few
    # groups on a healthy fabric, never more than distinct (a, b) pairs.
    up_rows, up_class = _classes(alive(tables.leaf_up) & leaf_reach)
    reach_rows, reach_class = _classes(leaf_reach)
    pair_rows, pair_class = _classes(pod_join.reshape(plan.pods * plan.pods, -1))
    nb, npair = np.int64(reach_rows.shape[0]), np.int64(pair_rows.shape[0])
    spine_down = tables.spine_down.reshape(plan.spines * lp, -1)
    spine_down_alive = alive(spine_down)

    # 1. leaf up, to a spine position that reaches leaf b down (2) or joins the two pods (4)
    rows = np.flatnonzero(dist >= 2)
    ar, br = a[rows], b[rows]
    pair = ud.leaf_pod[ar] * plan.pods + ud.leaf_pod[br]
    key = (up_class[ar] * nb + reach_class[br]) * npair + pair_class[pair]

    def leaf_candidates(keys):
        rest, gp = np.divmod(keys, npair)
        ga, gb = np.divmod(rest, nb)
        return up_rows[ga] & reach_rows[gb] & pair_rows[gp]

    span = int(up_rows.shape[0] * nb * npair)
    up1 = _take(tables.leaf_up, ar, _choose(key, span, leaf_candidates, hashes(rows, ar + leaf0, LEAF_UP)))
    out[rows, 1] = 2 * up1
    spine = links.hi[up1].astype(np.int64) - spine0

    def spine_down_candidates(keys):
        return spine_down_alive[keys]

    def down_to_leaf(rows, column, spine, leaf):  # a spine's live parallel links down to the leaf
        if rows.size:
            key = spine * lp + ud.leaf_local[leaf]
            chosen = _choose(key, spine_down.shape[0], spine_down_candidates,
                             hashes(rows, spine + spine0, SPINE_DOWN))
            out[rows, column] = 2 * _take(spine_down, key, chosen) + 1

    # 2. within a pod: the spine goes down to leaf b
    turn = dist[rows] == 2
    down_to_leaf(rows[turn], 2, spine[turn], br[turn])

    # 3. across pods: spine up to a core of its group that reaches spine (pod b, j), core down to it
    far = rows[~turn]
    if far.size:
        s = spine[~turn]
        bf = br[~turn]
        target = ud.leaf_pod[bf] * sp + s % sp  # spine (pod b, same position)
        S = np.int64(plan.spines)
        spine_alive = alive(tables.spine_up)
        core_local = (links.hi[np.maximum(tables.spine_up, 0)].astype(np.int64) - core0) % plan.cores_per_group
        core_down = tables.core_down.reshape(plan.cores * plan.pods, -1)
        core_down_alive = alive(core_down)

        P = np.int64(plan.pods)

        def spine_candidates(keys):  # key: spine and destination pod (which fix the target spine)
            gs, gp = np.divmod(keys, P)
            gt = gp * sp + gs % sp
            return spine_alive[gs] & (ud.spine_core[gt[:, None], core_local[gs]] > 0)

        key = s * P + ud.leaf_pod[bf]
        chosen = _choose(key, int(S * P), spine_candidates, hashes(far, s + spine0, SPINE_UP))
        up2 = _take(tables.spine_up, s, chosen)
        out[far, 2] = 2 * up2
        core = links.hi[up2].astype(np.int64) - core0

        def core_candidates(keys):
            return core_down_alive[keys]

        key = core * plan.pods + ud.pod_local[ud.leaf_pod[bf]]  # a core's down ports are by pod of its plane
        chosen = _choose(key, core_down.shape[0], core_candidates, hashes(far, core + core0, CORE_DOWN))
        out[far, 3] = 2 * _take(core_down, key, chosen) + 1
        down_to_leaf(far, 4, target, bf)


def _dual_homed_ends(fabric, tables, ud, live, src, dst, hashes, turn=None):
    """The first and last link of every sub-flow between dual-ToR NICs, and its two leaves.

    The source NIC's bond (RoCE LAG) gives its queue pairs to its live links in turn. The
    destination's two leaves both advertise its subnet: a sub-flow whose source leaf is one of
    them goes straight down (when the destination's link on that leaf is live); any other reaches
    one of the two by the ECMP hash of the spine that turns down, over a live link only (a lost
    link's share that would reach its leaf crosses the pair's peer link to the other in the real
    fabric; the model sends it to the other leaf, whose link bounds it either way).
    """
    links = fabric.links
    leaf0 = fabric.first(1)
    members = tables.nic_link.reshape(-1, 2)
    s_links, d_links = members[src], members[dst]
    s_live, d_live = live[s_links], live[d_links]
    if turn is None:  # the bond's queue pairs alternate between its links
        turn = rank_within(src) % 2
    s_m = np.where(s_live.all(axis=1), turn, np.where(s_live[:, 1], 1, 0))
    rows = np.arange(src.size)
    l_src = s_links[rows, s_m]
    a = links.hi[l_src].astype(np.int64) - leaf0
    # which of the pair's leaves: a spine's one choice among its links down to both leaves, so the leaf
    # and the parallel link are drawn jointly uniform; the hash is mixed once more so that it does not
    # repeat the parallel-link choice (which the same key, polarized, would)
    h = mix64(hashes(rows, np.full(src.size, -1, dtype=np.int64), SPINE_DOWN) ^ _U64(0xD0A1_70B5_2EED_0001))
    d_m = np.where(d_live.all(axis=1), (h % _U64(2)).astype(np.int64), np.where(d_live[:, 1], 1, 0))
    d_leaf = links.hi[d_links].astype(np.int64) - leaf0  # (n, 2): the destination's pair
    local = (d_leaf[:, 0] // 2 == a // 2) & d_live[rows, a % 2]
    d_m = np.where(local, a % 2, d_m)
    dist = ud.leaf_distance(a, d_leaf[rows, d_m])
    other = 1 - d_m  # a chosen leaf the source cannot reach: the other one, if live and reachable
    swap = (dist < 0) & d_live[rows, other]
    if swap.any():
        alt = ud.leaf_distance(a[swap], d_leaf[swap, other[swap]])
        ok = alt >= 0
        d_m[np.flatnonzero(swap)[ok]] = other[swap][ok]
        dist[np.flatnonzero(swap)[ok]] = alt[ok]
    l_dst = d_links[rows, d_m]
    return l_src, l_dst, a, d_leaf[rows, d_m], dist


def _ends(fabric, tables, ud, live, src, dst, dst_flow, qps, hash_field, hash_seed, polarized, entropy, bond_turn):
    """Every sub-flow's NIC links at both ends, their leaves (from the first leaf) and the up-down
    distance between them (UNREACHABLE when either NIC link is down). With dual-ToR, the bond
    picks one link of each NIC by the sub-flow's hash (or ``bond_turn``)."""
    if fabric.plan.homes == 2:
        member_hash = _ecmp_hasher(src, dst, dst_flow, qps, hash_field, hash_seed, polarized, entropy)
        l_src, l_dst, a, b, dist = _dual_homed_ends(fabric, tables, ud, live, src, dst, member_hash, bond_turn)
    else:
        leaf0 = fabric.first(1)
        l_src, l_dst = tables.nic_link[src], tables.nic_link[dst]
        a = fabric.links.hi[l_src].astype(np.int64) - leaf0
        b = fabric.links.hi[l_dst].astype(np.int64) - leaf0
        dist = ud.leaf_distance(a, b)
    dist[~(live[l_src] & live[l_dst])] = UNREACHABLE
    return l_src, l_dst, a, b, dist


def _close_paths(out: np.ndarray, dist: np.ndarray, l_src: np.ndarray, l_dst: np.ndarray) -> None:
    """Each reachable sub-flow's path ends on its destination NIC link (down); an unreachable one
    keeps only its source NIC link (up)."""
    n = out.shape[0]
    last = np.where(dist >= 0, (dist.astype(np.int64) + 1), 0)
    out[np.arange(n), last] = np.where(dist >= 0, 2 * l_dst + 1, out[np.arange(n), last])
    out[dist < 0] = -1
    out[dist < 0, 0] = 2 * l_src[dist < 0]


def route(
    fabric: Fabric,
    src_nic: np.ndarray,
    dst_nic: np.ndarray,
    qps: int = 1,
    mode: str = "ecmp",
    hash_seed: int = 0,
    faults: Faults | None = None,
    ud: UpDown | None = None,
    hash_field: str = "sport",
    polarized: bool = False,
    tables: PortTables | None = None,
    entropy: np.ndarray | None = None,
    bond_turn: np.ndarray | None = None,
) -> Routes:
    """Route flows between NICs (global NIC id = node * nics_per_node + nic), ``qps`` sub-flows each.

    A NIC is one device: with dual-ToR, the bond of two links, one to each leaf of its pair.

    Parameters
    ----------
    qps : int
        Sub-flows (queue pairs) per flow; sub-flow ``f * qps + q`` is queue pair ``q`` of flow ``f``.
    mode : str
        One of :data:`ROUTING_MODES`: ``ecmp`` (hashing), ``adaptive`` (ideal pooled spraying) or
        ``dmodk`` (InfiniBand destination-based routing; ignores ``qps`` entropy and ``hash_seed``).
    hash_seed : int
        Sample seed of ``ecmp``: redraws the UDP source ports or QP numbers (the per-job entropy)
        and the switch salts. The same seed gives the same routes.
    faults, ud : optional
        Links down, and the up-down connectivity under them (computed when not given).
    hash_field : str
        One of :data:`HASH_FIELDS`, for ``ecmp``: ``sport`` hashes the RoCEv2 5-tuple with a UDP
        source port per queue pair; ``qpn`` hashes the addresses and the destination QP number.
    polarized : bool
        ``ecmp`` only: all switches of a tier share one hash function and seed, applied to the same
        key at every hop, so consecutive tiers choose in a correlated way (hash polarisation).
        False: an independent salt per switch.
    tables : PortTables, optional
        ``port_tables(fabric)``, to reuse across many calls.
    entropy, bond_turn : ndarray, optional
        Per sub-flow: its hash field (:func:`flow_entropy` of ``hash_seed``) and, with dual-ToR,
        which of its NIC's two links its bond gives it (0 or 1). By default both are drawn from the
        sub-flows' positions in this call; routing a subset of a larger set of flows with the rows
        of the whole set's draws keeps every flow's draws whichever subset is routed, so that two
        fabrics (intact and with a part lost) are compared on the same draws.

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
    if hash_field not in HASH_FIELDS:
        raise ValueError(f"hash field {hash_field!r} is not one of {HASH_FIELDS}")
    faults = faults or no_faults(fabric)
    ud = ud or updown(fabric, faults)
    links = fabric.links
    live = faults.live
    tables = tables if tables is not None else port_tables(fabric)

    dst_flow = np.asarray(dst_nic, dtype=np.int64).ravel()
    src = np.repeat(np.asarray(src_nic, dtype=np.int64).ravel(), qps)
    dst = np.repeat(dst_flow, qps)
    n = src.size
    l_src, l_dst, a, b, dist = _ends(fabric, tables, ud, live, src, dst, dst_flow, qps, hash_field, hash_seed,
                                     polarized, entropy, bond_turn)

    out = np.full((n, MAX_LINKS), -1, dtype=np.int64)
    out[:, 0] = 2 * l_src
    hops = np.where(dist >= 0, dist.astype(np.int8) + 2, 0).astype(np.int8)

    pools: list[str] = []
    capacity = np.zeros(2 * len(links), dtype=np.float64)
    capacity[0::2] = capacity[1::2] = np.where(live, links.gbps, 0)

    if mode == "ecmp":
        hashes = _ecmp_hasher(src, dst, dst_flow, qps, hash_field, hash_seed, polarized, entropy)
        _route_ports(fabric, tables, ud, live, a, b, dist, hashes, out)
    elif mode == "dmodk":
        _route_ports(fabric, tables, ud, live, a, b, dist, _dmodk_hasher(fabric, tables, dst), out)
    else:
        capacity, pools = _adaptive(fabric, out, dist, a, b, tables, live, capacity, ud)

    _close_paths(out, dist, l_src, l_dst)
    ecmp = mode == "ecmp"
    return Routes(resources=out, links=hops, capacity_gbps=capacity, mode=mode, qps=qps,
                  pool_names=tuple(pools), link_count=len(links),
                  hash_field=hash_field if ecmp else "sport", polarized=bool(polarized) and ecmp)


def _adaptive(fabric, out, dist, a, b, tables, live, capacity, ud):
    """Pooled resources for ideal spraying; fills ``out`` columns 1.. and returns capacities."""
    plan, links = fabric.plan, fabric.links
    base = capacity.size
    gbps = np.where(live, links.gbps, 0).astype(np.float64)
    sp = plan.spines_per_pod
    names = fabric.names
    leaf0 = fabric.first(1)
    # pools: leaf uplinks (L), spine links down to a leaf (L), pod spine uplinks (pods), core->pod (pods)
    up_cap = np.where(tables.leaf_up >= 0, gbps[np.maximum(tables.leaf_up, 0)], 0).sum(axis=1)
    ls = links.kind == 1  # a link carries the same both ways: a spine's link down is the leaf's up
    down_cap = np.bincount(links.lo[ls] - leaf0, weights=gbps[ls], minlength=plan.leaves)
    pod_of_spine = np.arange(plan.spines) // sp
    su = tables.spine_up
    spine_up_cap = np.where(su >= 0, gbps[np.maximum(su, 0)], 0).sum(axis=1) if su.size else np.zeros(plan.spines)
    pod_up = np.bincount(pod_of_spine, weights=spine_up_cap, minlength=plan.pods)
    pod_down = pod_up.copy() if plan.tiers == 3 else np.zeros(plan.pods)  # the cores' links down to a pod
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
