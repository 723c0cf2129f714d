"""Per-switch facts: everything a switch's config templates print, as one plain dict per switch.

For every switch, :meth:`ConfigFacts.switch` gives its hostname, ASN, loopback, every port with
its name, lanes, speed, peer, /31 and buffer profile, every BGP neighbor with the peer's address
and ASN, and with dual-ToR its MCLAG; the QoS and buffer facts of its tier come from
:class:`~topo.outputs.configs.qos_facts.QosFacts`, which :class:`ConfigFacts` extends. The facts
are derived from the fabric's arrays in bulk (both ends of every link, sorted by switch and port);
each switch's dict is made when its files are rendered, so memory stays flat at any size. The
facts do not depend on the switch OS: each OS's templates lay them out (:mod:`.systems`).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ...addressing import ip_text, member_port, pair_gateway, rdma_device, server_block_size
from ...fabric import KIND_NAMES, PEER_KIND, PEER_LINK, ROLES, Fabric, cabled_links, end_lanes
from .qos_facts import QosFacts, pfc_watchdog

#: Dual-ToR: the VLAN of a pair's servers (one subnet per pair; VLANs are local to a pair), the
#: PortChannel of its peer link, and the first of its servers' PortChannels (one per NIC slot).
PAIR_VLAN = 1000
PEER_PORTCHANNEL = "PortChannel9999"

#: SONiC's device types for the tiers of a Clos: T0 (top of rack), T1, T2.
SONIC_TYPES = {"leaf": "ToRRouter", "spine": "LeafRouter", "core": "SpineRouter"}


@dataclass(frozen=True, eq=False)
class _Ends:
    """Both ends of every link as rows sorted by (switch, port, lane): one row per switch port."""

    vertex: np.ndarray
    port: np.ndarray
    lane: np.ndarray
    peer: np.ndarray
    peer_port: np.ndarray
    peer_lane: np.ndarray
    breakout: np.ndarray  # links this end's port carries (its lanes; 1 when not broken out)
    peer_breakout: np.ndarray
    kind: np.ndarray
    upward: np.ndarray  # True when the peer is in the tier above
    ip: np.ndarray  # this end's address (uint32), 0 when unnumbered
    peer_ip: np.ndarray
    starts: np.ndarray  # first row of each vertex (index by vertex), len = vertices + 1


def _ends(fabric: Fabric) -> _Ends:
    links = fabric.links
    ip = fabric.addressing.link_ip
    numbered = ip > 0
    lo_ip = np.where(numbered, ip + 1, 0).astype(np.uint32)
    hi_ip = ip
    if fabric.plan.homes == 2:
        # a bonded server link is a PortChannel member (layer 2): no address on either end; the
        # peer links join in, unnumbered
        host = links.kind == 0
        lo_ip, hi_ip = np.where(host, 0, lo_ip).astype(np.uint32), np.where(host, 0, hi_ip).astype(np.uint32)
        peer = fabric.peer_links
        links = cabled_links(fabric)
        zero = np.zeros(len(peer), dtype=np.uint32)
        lo_ip, hi_ip = np.concatenate([lo_ip, zero]), np.concatenate([hi_ip, zero])
    plan = fabric.plan
    vertex = np.concatenate([links.lo, links.hi]).astype(np.int64)
    port = np.concatenate([links.lo_port, links.hi_port]).astype(np.int64)
    lo_lane, hi_lane = end_lanes(plan, links)
    lane = np.concatenate([lo_lane, hi_lane])
    peer = np.concatenate([links.hi, links.lo]).astype(np.int64)
    peer_port = np.concatenate([links.hi_port, links.lo_port]).astype(np.int64)
    peer_lane = np.concatenate([hi_lane, lo_lane])
    lanes = np.array([plan.lanes(k) for k in range(3)] + [(1, 1)], dtype=np.int64)[links.kind]
    breakout = np.concatenate([lanes[:, 0], lanes[:, 1]])
    peer_breakout = np.concatenate([lanes[:, 1], lanes[:, 0]])
    kind = np.concatenate([links.kind, links.kind])
    upward = np.concatenate([np.ones(len(links), bool), np.zeros(len(links), bool)])
    my_ip = np.concatenate([lo_ip, hi_ip])
    their_ip = np.concatenate([hi_ip, lo_ip])
    order = np.lexsort((lane, port, vertex))
    cols = [a[order] for a in (vertex, port, lane, peer, peer_port, peer_lane, breakout, peer_breakout, kind, upward,
                               my_ip, their_ip)]
    starts = np.searchsorted(cols[0], np.arange(len(fabric.names) + 1))
    return _Ends(*cols, starts=starts)


class ConfigFacts(QosFacts):
    """Facts for the config templates of one fabric (shared tables plus one dict per switch)."""

    def __init__(self, fabric: Fabric) -> None:
        super().__init__(fabric)
        tiers = range(1, fabric.plan.tiers + 1)
        # each tier's switch model: its ports, their speed, and whether it is a modular chassis
        self.radix = {t: fabric.tier_switch(t).radix for t in tiers}
        self.chassis = {t: fabric.tier_switch(t).chassis for t in tiers}
        self.port_gbps = {t: fabric.tier_switch(t).port_gbps for t in tiers}
        self.ends = _ends(fabric)
        self.loopbacks = [""] * fabric.plan.nodes + ip_text(fabric.addressing.loopback[fabric.plan.nodes:])
        self._ports: dict[tuple[int, int, int, int], tuple[str, str, str, int]] = {}
        self._port_bases: dict[tuple[int, ...], dict[str, Any]] = {}  # see _port_entries()
        self._peer_ports: dict[tuple[int, int, int, int], str] = {}  # see peer_port_name()
        self._host_pool: int | None = None

    def shared(self) -> dict[str, Any]:
        """Facts common to every switch: the QoS profile and its tables."""
        return {
            "qos": self.qos_tables(),
            "frr_version": self.fabric.spec.frr_version,
            "routing_mode": self.fabric.spec.routing_mode,
            "platform": self.platform.to_dict() if self.platform is not None else None,
            "buffer_profiles": self.tier_buffer_profiles(1),
            "mtu": self.fabric.spec.mtu,
            "unnumbered": self.fabric.spec.unnumbered,
            "bfd": self.fabric.spec.bfd,
            "loopback_pool": self.fabric.spec.loopback_pool,
            "host_pool": self.fabric.spec.host_pool,
        }

    def switches(self) -> Iterator[dict[str, Any]]:
        """One facts dict per switch, in fabric order."""
        for v in range(self.fabric.first(1), len(self.fabric.names)):
            yield self.switch(v)

    def switch(self, v: int) -> dict[str, Any]:
        """Facts of switch ``v`` (vertex index)."""
        f, e = self.fabric, self.ends
        plan = f.plan
        names = f.names
        tier = int(f.tier[v])
        role = ROLES[tier]
        platform = self.platforms[tier]
        chassis = self.chassis[tier]
        lo, hi = int(e.starts[v]), int(e.starts[v + 1])
        entries, neighbors = self._port_entries(tier, lo, hi)
        radix = self.radix[tier]
        if hi - lo == radix and not (e.breakout[lo:hi] != 1).any():
            # as many rows as ports, none broken out: every port used once, in order (the rows are
            # sorted by port and lane), so the rows are the PORT table
            ports = entries
        else:
            ports = self._all_ports(tier, entries)
        return {
            "name": names[v],
            "role": role,
            "sonic_type": SONIC_TYPES[role],
            "asn": int(f.addressing.asn[v]),
            "router_id": self.loopbacks[v],
            "loopback": self.loopbacks[v],
            "ports": ports,
            "active_ports": [p for p in ports if p["kind"] is not None],
            "server_ports": [p for p in ports if p["kind"] == "node-leaf"],
            "neighbors": neighbors,
            # ECMP paths: every port's worth, and more where broken-out ports carry more links than
            # the switch has ports (its BGP neighbours bound the equal-cost paths of any route)
            "maximum_paths": min(256, max(self.radix[tier], len(neighbors))),
            "platform": platform.to_dict() if platform is not None else None,
            "buffer_profiles": self.tier_buffer_profiles(tier),
            "pfc_to_pg": ({p: self.qos.tc_to_pg()[p] for p in self.qos.lossless_tc} if self.pfc_to_pg_map(tier)
                          else {}),
            "pod": int(f.pod[v]),
            "server_block": self.server_block(v) if role == "leaf" else None,
            "mclag": self.mclag(v, ports) if role == "leaf" and plan.homes == 2 else None,
            # SONiC scales the watchdog by the switch's whole PORT table: these ports, and once the
            # file is merged, the SKU's extra (SFP) ports too
            "pfc_wd": pfc_watchdog(len(ports) + (platform.extra_ports if platform else 0)),
            "buffer": None if chassis else self._buffer_facts_of(tier, e.kind[lo:hi]),
            "chassis": chassis,
        }

    def _port_entries(self, tier: int, lo: int, hi: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The used ports of a switch (its rows ``lo:hi`` of the link ends, in port and lane order)
        and its BGP neighbors."""
        f, e = self.fabric, self.ends
        names = f.names
        peers = e.peer[lo:hi]
        # both ends' addresses as dotted quads in one vectorised pass ("" where unnumbered: 0)
        both = np.concatenate((e.ip[lo:hi], e.peer_ip[lo:hi]))
        dotted = ip_text(both)
        ips, peer_ips = dotted[:hi - lo], dotted[hi - lo:]
        rows = zip(e.port[lo:hi].tolist(), e.lane[lo:hi].tolist(), peers.tolist(), e.kind[lo:hi].tolist(),
                   f.tier[peers].tolist(), e.breakout[lo:hi].tolist(), e.peer_port[lo:hi].tolist(),
                   e.peer_lane[lo:hi].tolist(), e.peer_breakout[lo:hi].tolist(), e.upward[lo:hi].tolist(),
                   (both[:hi - lo] > 0).tolist(), (both[hi - lo:] > 0).tolist(), ips, peer_ips,
                   f.addressing.asn[peers].tolist())
        entries: list[dict[str, Any]] = []
        neighbors = []
        bases, peer_ports = self._port_bases, self._peer_ports
        for (port, lane, peer, k, peer_tier, breakout, peer_port, peer_lane, peer_breakout, upward, numbered,
             peer_numbered, ip, peer_ip, peer_asn) in rows:
            peer_key = (peer_tier, peer_port, peer_lane, peer_breakout)
            peer_port_name = peer_ports.get(peer_key)
            if peer_port_name is None:  # the same on every peer of the tier: made once
                peer_port_name = peer_ports[peer_key] = self.peer_port_name(peer_tier, peer_port, peer_lane,
                                                                            peer_breakout)
            peer_node = names[peer]
            base_key = (tier, port, lane, breakout, k, upward)
            base = bases.get(base_key)
            if base is None:
                base = bases[base_key] = self._port_base(tier, port, lane, breakout, k, upward)
            entry = base.copy()  # the same keys in the same order, the switch's own values set
            entry["peer"] = peer_node
            entry["peer_port"] = peer_port_name
            entry["description"] = f"to {peer_node}:{peer_port_name}"
            entry["ip"] = f"{ip}/31" if numbered else None  # 0: unnumbered
            entry["peer_ip"] = peer_ip if peer_numbered else None
            entries.append(entry)
            if peer_tier != 0 and k != PEER_KIND:
                neighbors.append({
                    "address": peer_ip if peer_numbered else None,
                    "local_address": ip if numbered else None,
                    "interface": base["name"],
                    "asn": peer_asn,
                    "peer": peer_node,
                    "peer_port": peer_port_name,
                })
        return entries, neighbors

    def _port_base(self, tier: int, port: int, lane: int, breakout: int, k: int, upward: bool) -> dict[str, Any]:
        """What every switch of ``tier`` has on this port for this kind of link (its own values unset)."""
        cable_m, speeds = self.cable_m[tier], self.speeds
        kind = KIND_NAMES[k]
        name, alias, lane_list, index = self.port_facts(tier, port, lane, breakout)
        return {
            "name": name,
            "port": port,
            "lane": lane,
            "breakout": breakout,
            "alias": alias,
            "lanes": lane_list,
            "index": index,
            "speed_mbps": speeds[kind] * 1000,
            "kind": kind,
            "direction": "up" if upward else "down",
            "peer": None,
            "peer_port": None,
            "description": None,
            "ip": None,
            "peer_ip": None,
            "cable_m": cable_m[kind],
            "buffer_profile": self.buffer_profiles[tier, kind]["name"],
            "admin_status": "up",
        }

    def peer_port_name(self, peer_tier: int, peer_port: int, peer_lane: int, peer_breakout: int) -> str:
        """The far end's port as a description names it: a server's RDMA device (with dual-ToR,
        its bond's member port), or a switch's SONiC port."""
        if peer_tier == 0:
            if self.fabric.plan.homes == 2:
                return member_port(*divmod(peer_port, 2))
            return rdma_device(peer_port)
        return self.fabric.port_names.name(peer_tier, peer_port, peer_lane, peer_breakout)

    def _all_ports(self, tier: int, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every port of a switch of ``tier`` in order, its used ``entries`` (in port and lane
        order) among them: an unused port whole; a broken-out port, every lane (an unused lane
        admin down, so that the port's breakout stays whole)."""
        used: dict[int, list[dict[str, Any]]] = {}
        for entry in entries:
            used.setdefault(entry["port"], []).append(entry)
        ports = []
        for port in range(1, self.radix[tier] + 1):
            of_port = used.get(port, [])
            if len(of_port) == 1 and of_port[0]["breakout"] == 1:
                ports.extend(of_port)
                continue
            breakout = of_port[0]["breakout"] if of_port else 1
            speed = of_port[0]["speed_mbps"] if of_port else self.port_gbps[tier] * 1000
            by_lane = {p["lane"]: p for p in of_port}
            for lane in range(1, breakout + 1):
                if lane in by_lane:
                    ports.append(by_lane[lane])
                    continue
                name, alias, lane_list, index = self.port_facts(tier, port, lane, breakout)
                ports.append({
                    "name": name, "port": port, "lane": lane,
                    "breakout": breakout, "alias": alias, "lanes": lane_list, "index": index,
                    "speed_mbps": speed, "kind": None, "direction": None, "peer": None,
                    "peer_port": None, "description": "unused", "ip": None, "peer_ip": None,
                    "cable_m": None, "buffer_profile": None, "admin_status": "down",
                })
        return ports

    def port_facts(self, tier: int, port: int, lane: int, breakout: int) -> tuple[str, str, str, int]:
        """A port's SONiC name, alias, SerDes lanes (as the PORT table writes them) and index: the
        same on every switch of a tier, so made once."""
        key = (tier, port, lane, breakout)
        facts = self._ports.get(key)
        if facts is None:
            lanes = self.lanes[tier]
            facts = self._ports[key] = (
                self.fabric.port_names.name(tier, port, lane, breakout), self.port_alias(port, lane, breakout, tier),
                ",".join(str(x) for x in self.port_lanes(port, lane, lanes, breakout, tier)),
                self.port_index(port, tier))
        return facts

    def port_lanes(self, port: int, lane: int, lanes: int, breakout: int, tier: int = 1) -> tuple[int, ...] | range:
        """SerDes lane numbers of a port: the SONiC platform's lane map, else lanes counted from 0."""
        platform = self.platforms[tier]
        if platform is not None:
            return platform.port_lanes(port, lane, breakout)
        return _lane_numbers(port, lane, lanes, breakout)

    def port_alias(self, port: int, lane: int, breakout: int, tier: int = 1) -> str:
        """The port's alias: the SONiC platform's, else ``etp<port>`` (``a``, ``b``, ... per breakout lane)."""
        platform = self.platforms[tier]
        if platform is not None:
            return platform.port_alias(port, lane, breakout)
        return f"etp{port}" + (chr(ord("a") + lane - 1) if breakout > 1 else "")

    def port_index(self, port: int, tier: int = 1) -> int:
        """The port's front-panel index: the platform's cage, else the port number."""
        platform = self.platforms[tier]
        return platform.port_index(port) if platform is not None else port

    def server_block(self, v: int) -> str:
        """The leaf's block of server /31s (docs/configs.md), which it advertises as one route; with
        dual-ToR, its pair's server subnet (both leaves advertise it)."""
        f = self.fabric
        if self._host_pool is None:
            self._host_pool = int(ipaddress.IPv4Network(f.spec.host_pool).network_address)
        size = server_block_size(f.plan)
        block = (v - f.first(1)) // f.plan.homes
        return f"{_dotted(self._host_pool + block * size)}/{33 - size.bit_length()}"

    def mclag(self, v: int, ports: list[dict[str, Any]]) -> dict[str, Any]:
        """A dual-ToR leaf's MCLAG facts: the domain with its peer (the pair's other leaf), the
        peer link's PortChannel, one PortChannel per NIC it serves (the same name, port and lane
        on both leaves of the pair: the bond's member link), and the pair's VLAN and gateway."""
        f = self.fabric
        local = v - f.first(1)
        pair, side = divmod(local, 2)
        other = v + 1 - 2 * side
        block = ipaddress.IPv4Network(self.server_block(v))
        servers, peer_ports = [], []
        for p in ports:
            if p["kind"] == "node-leaf":
                slot = (p["port"] - 1) * p["breakout"] + p["lane"] - 1
                servers.append({"name": f"PortChannel{slot + 1:04d}", "member": p["name"],
                                "description": p["description"]})
            elif p["kind"] == PEER_LINK:
                peer_ports.append(p["name"])
        # one LACP system ID for the pair (a locally administered MAC from the pair's number): the
        # host's bond sees both leaves as one partner
        mac = "02:00:{:02x}:{:02x}:{:02x}:{:02x}".format(*((pair + 1).to_bytes(4, "big")))
        return {
            "domain_id": pair % 4095 + 1,
            "source_ip": self.loopbacks[v],
            "peer_ip": self.loopbacks[other],
            "peer": f.names[other],
            "peer_link": PEER_PORTCHANNEL,
            "peer_link_members": peer_ports,
            "portchannels": servers,
            "system_mac": mac,
            "vlan": PAIR_VLAN,
            "gateway": f"{ip_text(np.array([pair_gateway(int(block.network_address))]))[0]}/{block.prefixlen}",
        }


def _dotted(address: int) -> str:
    """An IPv4 address (an int) as a dotted quad (:func:`topo.addressing.ip_text` for one)."""
    return f"{address >> 24}.{(address >> 16) & 255}.{(address >> 8) & 255}.{address & 255}"


def _lane_numbers(port: int, lane: int, lanes: int, breakout: int) -> range:
    width = lanes // breakout
    first = (port - 1) * lanes + (lane - 1) * width
    return range(first, first + width)
