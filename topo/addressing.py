"""Addresses, ASNs and interface names: pure functions of indices, computed once at build time.

- Loopbacks: switch ``i`` (counting leaves, spines, cores from 0) gets ``loopback_pool + 1 + i``/32,
  also its BGP router ID.
- Switch-to-switch links: link ``j`` (counting those links from 0 in fabric order) gets the /31
  at ``p2p_pool + 2j``; the upper-tier end takes the even address, the lower end the odd one.
  With ``unnumbered`` these links carry no IPv4 address: BGP runs on the interfaces over IPv6
  link-local addresses (RFC 5549 next hops).
- Server links, one block per leaf: leaf ``l`` (from 0) owns the aligned block
  ``host_pool + l × B`` with ``B = 2^ceil(log2(2 × nics_per_leaf))`` addresses, and the server link on
  its down port ``p`` (from 1), breakout lane ``b`` (from 1 of ``breakout``), gets the /31 at
  ``block + 2((p - 1) × breakout + b - 1)``. The leaf takes the even address (the server's
  gateway), the NIC the odd one. A leaf advertises its block as one aggregate, so a spine carries
  one server route per leaf.
- Dual-ToR: one block per leaf pair, ``host_pool + pair × B`` with ``B = 2^ceil(log2(nics_per_leaf
  + 3))``: one subnet on a VLAN that both leaves of the pair serve. Its first address is the
  gateway (the VLAN interface of both leaves, one address), and the NIC on down port ``p``, lane
  ``b`` (the same on both leaves) gets ``block + 2 + (p - 1) × breakout + b - 1``: the address of
  its bond, which both of its links carry.
- ASNs (RFC 7938, private ranges): the core tier shares one ASN, the spines of each pod share one,
  and every leaf has its own: ``base`` for the cores (three tiers), then one per pod, then one per
  leaf. ``base`` is 64512 for 2-byte ASNs (up to 65534) and 4200000000 for 4-byte ones (up to
  4294967294); ``asn_size: auto`` takes 2-byte ASNs when they suffice.
- SONiC port names: front-panel port ``p`` (from 1) with ``L`` SerDes lanes is ``Ethernet{(p-1)L}``;
  breakout lane ``b`` (from 1) of ``B`` is ``Ethernet{(p-1)L + (b-1)L/B}``. FRR on SONiC uses the
  same names. A built fabric carries them as a fact, ``fabric.port_names`` (:class:`PortNames`),
  which every output reads.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import numpy as np

from .errors import SpecError
from .sizing import Plan
from .spec import FabricSpec

ASN_RANGES = {2: (64512, 65534), 4: (4200000000, 4294967294)}
#: SerDes lanes per port when the switch model does not say: 100G lanes.
DEFAULT_LANE_GBPS = 100


@dataclass(frozen=True, eq=False)
class Addressing:
    """Per-vertex and per-link addressing facts (IPv4 addresses as unsigned 32-bit integers).

    Attributes
    ----------
    asn : ndarray of int64
        BGP ASN of every vertex (0 for servers).
    loopback : ndarray of uint32
        Loopback (and router ID) of every switch (0 for servers).
    link_ip : ndarray of uint32
        Lower (even) address of each link's /31; 0 for unnumbered switch links.
    asn_size : int
        2 or 4 (bytes).
    lanes_per_port : int
        SerDes lanes of one leaf port (for SONiC port names).
    spine_core_lanes : tuple of int
        SerDes lanes of one spine port and one core port (each tier's model may differ); empty
        when they are the leaf's.
    """

    asn: np.ndarray
    loopback: np.ndarray
    link_ip: np.ndarray
    asn_size: int
    lanes_per_port: int
    spine_core_lanes: tuple[int, ...] = ()

    def tier_lanes(self, tier: int) -> int:
        """SerDes lanes of one port of a switch of ``tier`` (1 leaf, 2 spine, 3 core)."""
        if tier <= 1 or not self.spine_core_lanes:
            return self.lanes_per_port
        return self.spine_core_lanes[tier - 2]


#: The decimal text of every octet.
_OCTETS = tuple(str(i) for i in range(256))


def ip_text(values: np.ndarray) -> list[str]:
    """Dotted quads of uint32 addresses.

    Each /24 prefix (``"10.64.3."``) is formatted once per run of addresses that share it, or
    once per distinct prefix when the runs are short, and the last octet added to it: addresses
    come from a few pools in order, so most share their prefix with their neighbours.

    >>> ip_text(np.array([0x0A400300, 0x0A4003FF, 0xC0A80001]))
    ['10.64.3.0', '10.64.3.255', '192.168.0.1']
    """
    v = np.asarray(values, dtype=np.uint64).ravel()
    if not len(v):
        return []
    prefix, octets = v >> np.uint64(8), _OCTETS
    last = (v & np.uint64(255)).tolist()
    starts = np.flatnonzero(prefix[1:] != prefix[:-1]) + 1
    if len(starts) * 8 <= len(v):  # long runs: one prefix text a run
        bounds = [0] + starts.tolist() + [len(v)]
        out: list[str] = []
        for p, a, b in zip(prefix[bounds[:-1]].tolist(), bounds, bounds[1:]):
            text = f"{p >> 16}.{(p >> 8) & 255}.{p & 255}."
            out += [text + octets[o] for o in last[a:b]]
        return out
    distinct, which = np.unique(prefix, return_inverse=True)
    texts = [f"{p >> 16}.{(p >> 8) & 255}.{p & 255}." for p in distinct.tolist()]
    return [texts[i] + octets[o] for i, o in zip(which.ravel().tolist(), last)]


def lanes_per_port(spec: FabricSpec, tier: int = 1) -> int:
    """SerDes lanes of one port of a tier's switch: its SONiC platform's, else its model's figure,
    else port speed / 100G (at least 1)."""
    from .catalog import platform_catalog, switch_catalog
    from .spec import tier_switch

    t = tier_switch(spec, tier)
    if t.platform is not None:
        return platform_catalog()[t.platform].lanes_per_port
    if t.model is not None:
        return switch_catalog()[t.model].lanes
    return max(1, t.port_gbps // DEFAULT_LANE_GBPS)


def sonic_port_name(port: int, lane: int, lanes: int, breakout: int) -> str:
    """SONiC interface name of front-panel ``port`` (from 1), breakout ``lane`` (from 1).

    >>> sonic_port_name(1, 1, 8, 1), sonic_port_name(33, 1, 8, 1), sonic_port_name(2, 2, 8, 2)
    ('Ethernet0', 'Ethernet256', 'Ethernet12')
    """
    return f"Ethernet{(port - 1) * lanes + (lane - 1) * (lanes // breakout)}"


def sonic_port_names(port: np.ndarray, lane: np.ndarray, lanes: int, breakout: int) -> list[str]:
    """:func:`sonic_port_name` of many ports at once (arrays of ports and lanes, from 1).

    >>> sonic_port_names(np.array([1, 2]), np.array([1, 2]), 8, 2)
    ['Ethernet0', 'Ethernet12']
    """
    first = (np.asarray(port, dtype=np.int64) - 1) * lanes + (np.asarray(lane, dtype=np.int64) - 1) * (lanes // breakout)
    return _ethernet_names(first)


def _ethernet_names(first: np.ndarray) -> list[str]:
    """``Ethernet<n>`` of every first SerDes lane ``n``: each distinct name made once (a switch has
    a few hundred), then picked for every port."""
    distinct, which = np.unique(first.ravel(), return_inverse=True)
    names = np.empty(len(distinct), dtype=object)
    names[:] = [f"Ethernet{n}" for n in distinct.tolist()]
    return names[which.ravel()].tolist()


@dataclass(frozen=True, eq=False)
class PortNames:
    """The names of a fabric's switch ports, a fact of its :class:`~topo.fabric.Fabric`
    (``fabric.port_names``): SONiC's ``Ethernet<first SerDes lane>``, which FRR on SONiC uses too.

    It holds each tier's SerDes lanes a port and each link kind's breakout at both ends; the names
    are made from one table of ``Ethernet<n>`` texts, built when first asked for and shared by every
    tier (a few hundred to a few thousand texts, never one per link), and left out of a pickle.

    >>> names = PortNames(lanes=(0, 8, 8, 8), breakouts=((1, 2), (1, 1), (1, 1), (1, 1)))
    >>> names.name(1, 33), names.name(1, 2, 2, 2), names.names(1, np.array([1, 2]), np.array([1, 2]), 2)
    ('Ethernet256', 'Ethernet12', ['Ethernet0', 'Ethernet12'])
    """

    lanes: tuple[int, ...]  #: SerDes lanes of one port, by tier (index 0, the servers: 0)
    breakouts: tuple[tuple[int, int], ...]  #: links per port at each end, by link kind (then a peer link)
    _table: list = field(default_factory=list, repr=False, compare=False)  # [the Ethernet<n> texts]

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_table"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _table=[])

    def name(self, tier: int, port: int, lane: int = 1, breakout: int = 1) -> str:
        """:func:`sonic_port_name` of a port (from 1) and breakout lane (from 1) of a switch of ``tier``."""
        return sonic_port_name(port, lane, self.lanes[tier], breakout)

    def names(self, tier: int, port: np.ndarray, lane: np.ndarray, breakout: int) -> list[str]:
        """:func:`sonic_port_names`: the names of many ports (arrays, from 1) of switches of ``tier``."""
        lanes = self.lanes[tier]
        first = (np.asarray(port, dtype=np.int64) - 1) * lanes + (np.asarray(lane, dtype=np.int64) - 1) * (lanes // breakout)
        return self._texts(first)

    def ends(self, kind: np.ndarray, lo_port: np.ndarray, hi_port: np.ndarray, lo_lane: np.ndarray,
             hi_lane: np.ndarray) -> tuple[list[str], list[str]]:
        """The names of the ports at the (lower, upper) end of links of ``kind`` (each end's port and
        breakout lane, from 1): a server link's lower end (a NIC) is ``""``."""
        kind = np.asarray(kind, dtype=np.int64)
        tiers = np.array([(0, 1), (1, 2), (2, 3), (1, 1)], dtype=np.int64)[kind]  # a peer link: leaf to leaf
        breakout = np.array(self.breakouts, dtype=np.int64)[kind]
        serdes = np.array(self.lanes, dtype=np.int64)
        out = []
        for end, (port, lane) in enumerate(((lo_port, lo_lane), (hi_port, hi_lane))):
            lanes = serdes[tiers[:, end]]
            first = ((np.asarray(port, dtype=np.int64) - 1) * lanes
                     + (np.asarray(lane, dtype=np.int64) - 1) * (lanes // breakout[:, end]))
            out.append(self._texts(first))
        return [("" if k == 0 else n) for k, n in zip(kind.tolist(), out[0])], out[1]

    def _texts(self, first: np.ndarray) -> list[str]:
        """``Ethernet<n>`` of every first SerDes lane ``n`` (the servers' ends, lanes 0, are ``Ethernet0``)."""
        first = first.ravel()
        if not len(first):
            return []
        size = int(first.max()) + 1
        if not self._table or len(self._table[0]) < size:
            table = np.empty(size, dtype=object)
            table[:] = [f"Ethernet{n}" for n in range(size)]
            self._table[:] = [table]
        return self._table[0][first].tolist()


def rdma_device(nic: int, bonded: bool = False) -> str:
    """Name of a server's RDMA device by NIC index (``mlx5_0`` ...); with dual-ToR, of the NIC's
    bond (RoCE LAG over its two links: ``mlx5_bond_0`` ...)."""
    return f"mlx5_bond_{nic}" if bonded else f"mlx5_{nic}"


def bond_name(nic: int) -> str:
    """Linux bond of a dual-ToR NIC's two ports (``bond0`` ...)."""
    return f"bond{nic}"


def member_port(nic: int, member: int) -> str:
    """A dual-ToR NIC's physical port by member (0: to the pair's a leaf, 1: to its b leaf), as the
    cabling plan names it: ``mlx5_bond_3/p1``, ``mlx5_bond_3/p2``."""
    return f"{rdma_device(nic, True)}/p{member + 1}"


def pair_gateway(block: int) -> int:
    """Gateway of a dual-ToR pair's server subnet starting at ``block`` (uint32): its first address,
    on the VLAN interface of both leaves."""
    return block + 1


def _pool_size_error(field: str, pool: ipaddress.IPv4Network, need: int, what: str) -> str:
    prefix = 32 - max(0, (need - 1).bit_length())
    held = f"{pool.num_addresses:,} address" + ("" if pool.num_addresses == 1 else "es")
    return (f"{field}={pool} holds {held} but {what} need {need:,}; "
            f"use a /{prefix} or larger")


def link_counts(plan: Plan) -> tuple[int, int]:
    """(server links, switch-to-switch links) of a plan."""
    fabric_links = plan.leaves * plan.leaf_uplinks
    if plan.tiers == 3:
        fabric_links += plan.spines * plan.spine_uplinks
    return plan.nodes * plan.rails, fabric_links


def server_block_size(plan: Plan) -> int:
    """Addresses of one leaf's server block: the power of two that holds a /31 per leaf downlink;
    with dual-ToR, of one pair's subnet: its network, gateway and broadcast addresses and one
    address per NIC.

    >>> from topo import load_spec, plan_fabric
    >>> server_block_size(plan_fabric(load_spec({"gpus": 1024})))  # 32 NICs a leaf: a /26
    64
    >>> server_block_size(plan_fabric(load_spec({"gpus": 1024, "dual_tor": True})))  # 64 NICs a pair: a /25
    128
    """
    if plan.homes == 2:
        return 1 << (plan.nics_per_leaf + 2).bit_length()
    return 1 << max(1, (2 * plan.nics_per_leaf - 1).bit_length())


def server_blocks(plan: Plan) -> int:
    """Server blocks of a plan: one per leaf, or one per dual-ToR pair."""
    return plan.leaves // plan.homes


def _switch_breakout_problems(spec: FabricSpec, plan: Plan) -> list[str]:
    """Where tiers of different port speeds meet, the faster tier's ports must break out: into no
    more links than their SerDes lanes, on a SKU that offers breakout."""
    from .catalog import platform_catalog
    from .spec import TIER_SWITCH_FIELDS, tier_switch

    problems = []
    for kind, (lower, upper) in ((1, (1, 2)), (2, (2, 3))):
        if kind >= plan.tiers:
            continue
        for tier, lanes, other in zip((lower, upper), plan.lanes(kind), (upper, lower)):
            if lanes == 1:
                continue
            sw, slow = tier_switch(spec, tier), tier_switch(spec, other)
            what = (f"{TIER_SWITCH_FIELDS[tier]}={sw.model or 'generic'}'s {sw.port_gbps}G ports meet "
                    f"{TIER_SWITCH_FIELDS[other]}={slow.model or 'generic'}'s {slow.port_gbps}G ports, a breakout "
                    f"into {lanes} links")
            serdes = lanes_per_port(spec, tier)
            if lanes > serdes:
                problems.append(f"{what}, but a port has {serdes} SerDes lanes")
            if sw.platform is not None and platform_catalog()[sw.platform].alias_style == "none":
                problems.append(f"{what}, but platform {sw.platform} offers no breakout; pick another SKU of "
                                f"{sw.model}")
    return problems


def check_addressing(spec: FabricSpec, plan: Plan) -> int:
    """Raise SpecError when a pool or the private ASN range is too small; return the ASN size."""
    problems = []
    switches = plan.leaves + plan.spines + plan.cores
    loop_pool = ipaddress.IPv4Network(spec.loopback_pool)
    p2p_pool = ipaddress.IPv4Network(spec.p2p_pool)
    host_pool = ipaddress.IPv4Network(spec.host_pool)
    host_links, fabric_links = link_counts(plan)
    if switches + 2 > loop_pool.num_addresses:
        problems.append(_pool_size_error("loopback_pool", loop_pool, switches + 2,
                                         f"{switches:,} switch loopbacks"))
    if not spec.unnumbered and 2 * fabric_links > p2p_pool.num_addresses:
        problems.append(_pool_size_error("p2p_pool", p2p_pool, 2 * fabric_links,
                                         f"{fabric_links:,} switch-to-switch /31s"))
    block = server_block_size(plan)
    blocks = server_blocks(plan)
    if blocks * block > host_pool.num_addresses:
        what = (f"{blocks:,} leaf pairs' server subnets of {block:,} addresses (/{32 - block.bit_length() + 1}, "
                f"an address for each of a pair's {plan.nics_per_leaf:,} NICs and its gateway)"
                if plan.homes == 2 else
                f"{plan.leaves:,} leaves' server blocks of {block:,} addresses "
                f"(/{32 - block.bit_length() + 1}, a /31 for each of a leaf's "
                f"{plan.nics_per_leaf:,} downlinks)")
        problems.append(_pool_size_error("host_pool", host_pool, blocks * block, what))
    lanes = lanes_per_port(spec)
    if plan.breakout > lanes:
        what = f"nic_gbps={spec.nic_gbps}" + (f" with dual_tor ({spec.link_gbps}G links)" if plan.homes == 2 else "")
        problems.append(
            f"{what} on port_gbps={spec.port_gbps} is a breakout into {plan.breakout} "
            f"links, but a port has {lanes} SerDes lanes; at most {lanes} links per port "
            f"(links of {spec.port_gbps // lanes}G or more)")
    problems += _switch_breakout_problems(spec, plan)
    groups = (1 if plan.tiers == 3 else 0) + plan.pods + plan.leaves
    size = spec.asn_size
    if size == "auto":
        size = 2 if groups <= ASN_RANGES[2][1] - ASN_RANGES[2][0] + 1 else 4
    low, high = ASN_RANGES[size]
    if groups > high - low + 1:
        problems.append(
            f"asn_size={size}: the fabric needs {groups:,} private ASNs (one per leaf, one per pod's "
            f"spines{', one for the cores' if plan.tiers == 3 else ''}) but {size}-byte private ASNs "
            f"are {high - low + 1:,} ({low}-{high}); use asn_size=4 or auto"
        )
    if problems:
        raise SpecError(problems)
    return size


def plan_addressing(spec: FabricSpec, plan: Plan, kind: np.ndarray, leaf: np.ndarray | None = None,
                    slot: np.ndarray | None = None) -> Addressing:
    """Addresses and ASNs for a fabric of ``plan`` whose links have kinds ``kind``.

    ``leaf`` (from 0) and ``slot`` (``(down port - 1) × breakout + lane - 1``) place each server
    link in its leaf's block; without them the server links are taken in leaf order, each leaf's
    ``nics_per_leaf`` links in slot order (as :func:`topo.fabric.build_fabric` lays them out).

    Raises
    ------
    SpecError
        When a pool or the ASN range is too small, with the numbers.

    Examples
    --------
    >>> from topo import load_spec, plan_fabric
    >>> spec = load_spec({"gpus": 1024})
    >>> plan = plan_fabric(spec)
    >>> kind = np.repeat(np.array([0, 1], dtype=np.int8), [1024, 1024])
    >>> a = plan_addressing(spec, plan, kind)  # server links in leaf order
    >>> a.asn_size, int(a.asn[plan.nodes]), int(a.asn[plan.nodes + plan.leaves])  # first leaf, spine
    (2, 64513, 64512)
    >>> ip_text(a.loopback[plan.nodes:plan.nodes + 2]), ip_text(a.link_ip[[0, 1024]])
    (['10.255.0.1', '10.255.0.2'], ['10.128.0.0', '10.64.0.0'])
    """
    size = check_addressing(spec, plan)
    low, _ = ASN_RANGES[size]
    switches = plan.leaves + plan.spines + plan.cores
    loop_pool = ipaddress.IPv4Network(spec.loopback_pool)
    p2p_pool = ipaddress.IPv4Network(spec.p2p_pool)
    host_pool = ipaddress.IPv4Network(spec.host_pool)
    host_links, fabric_links = int((kind == 0).sum()), int((kind >= 1).sum())
    assert (host_links, fabric_links) == link_counts(plan)

    n = plan.nodes
    total = n + switches
    asn = np.zeros(total, dtype=np.int64)
    core_asn = low
    pod_asn0 = low + (1 if plan.tiers == 3 else 0)
    leaf_asn0 = pod_asn0 + plan.pods
    leaves = np.arange(plan.leaves)
    asn[n:n + plan.leaves] = leaf_asn0 + leaves
    asn[n + plan.leaves:n + plan.leaves + plan.spines] = pod_asn0 + np.arange(plan.spines) // plan.spines_per_pod
    asn[n + plan.leaves + plan.spines:] = core_asn

    loopback = np.zeros(total, dtype=np.uint32)
    loopback[n:] = int(loop_pool.network_address) + 1 + np.arange(switches, dtype=np.uint32)

    link_ip = np.zeros(kind.size, dtype=np.uint32)
    host = kind == 0
    if leaf is None or slot is None:
        order = np.arange(host_links, dtype=np.int64)
        leaf_of, slot_of = order // plan.nics_per_leaf, order % plan.nics_per_leaf
        assert plan.homes == 1  # a pair's links are not in leaf order
    else:
        leaf_of, slot_of = np.asarray(leaf)[host].astype(np.int64), np.asarray(slot)[host].astype(np.int64)
    block = server_block_size(plan)
    if plan.homes == 2:  # the pair's subnet; both links of a NIC carry its bond's address
        link_ip[host] = (int(host_pool.network_address) + leaf_of // 2 * block + 2 + slot_of).astype(np.uint32)
    else:
        link_ip[host] = (int(host_pool.network_address) + leaf_of * block + 2 * slot_of).astype(np.uint32)
    if not spec.unnumbered:
        link_ip[~host] = int(p2p_pool.network_address) + 2 * np.arange(fabric_links, dtype=np.uint32)
    return Addressing(asn=asn, loopback=loopback, link_ip=link_ip, asn_size=size,
                      lanes_per_port=lanes_per_port(spec),
                      spine_core_lanes=tuple(lanes_per_port(spec, t) for t in (2, 3)))
