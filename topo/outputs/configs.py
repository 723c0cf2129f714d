"""Switch and host configs: the facts every config template prints, and the rendering of them.

For every switch, :meth:`ConfigFacts.switch` gives a plain dict (hostname, ASN, loopback, every
port with its SONiC name, lanes, speed, peer, /31 and buffer profile, every BGP neighbor with the
peer's address and ASN); the templates under ``templates/sonic``, ``templates/frr`` and
``templates/host`` only lay those facts out. The facts are derived from the fabric's arrays in
bulk; each switch's dict is made when its files are rendered, so memory stays flat at any size.
:func:`config_files` renders them, one switch at a time, in one or several processes.
"""

from __future__ import annotations


import csv
import ctypes
import ipaddress
import io
import itertools
import json
import math
import multiprocessing
import multiprocessing.connection
import signal
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from queue import SimpleQueue
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from .. import __version__
from ..addressing import (bond_name, ip_text, member_port, pair_gateway, rdma_device, server_block_size,
                          sonic_port_name, sonic_port_names)
from ..catalog import Platform, platform_catalog, switch_catalog
from ..errors import TopoError
from ..fabric import (KIND_NAMES, LINK_KINDS, PEER_KIND, PEER_LINK, PEER_LINK_M, ROLES, Fabric, cabled_links, end_lanes,
                      is_ethernet)
from ..spec import tier_switch
from ..buffers import BufferLayout, PortLoad, switch_layout
from ..qos import BROADCOM_ASICS, QOS_PROFILES, QosProfile, pfc_headroom, table_headroom, vendor_headroom
from .manifest import Written, digest
from .templating import TemplateError, render_template, template_environment
from .writer import write_file

#: Every templated output of the configs: (output path, template, rendered for).
CONFIG_OUTPUTS = (
    ("switches/<switch>/config_db.json", "sonic/config_db.json.j2", "each Ethernet switch"),
    ("switches/<switch>/frr.conf", "frr/frr.conf.j2", "each Ethernet switch"),
    ("hosts/roce-qos.sh", "host/roce-qos.sh.j2", "the node type"),
)

#: Dual-ToR: the VLAN of a pair's servers (one subnet per pair; VLANs are local to a pair), the
#: PortChannel of its peer link, and the first of its servers' PortChannels (one per NIC slot).
PAIR_VLAN = 1000
PEER_PORTCHANNEL = "PortChannel9999"

#: SONiC's device types for the tiers of a Clos: T0 (top of rack), T1, T2.
SONIC_TYPES = {"leaf": "ToRRouter", "spine": "LeafRouter", "core": "SpineRouter"}
#: Switch buffer assumed when the switch model does not give one (MB).
DEFAULT_BUFFER_MB = 64
#: SONiC PFC watchdog settings (ms).
#: PFC watchdog as SONiC's ``pfcwd start_default`` sets it: 200 ms detection and restoration, times
#: one more for every 32 entries of the PORT table past the first 32; polling as often, at most 1 s.
PFC_WD_BASE_MS = 200
PFC_WD_PORTS_PER_STEP = 32
PFC_WD_MAX_POLL_MS = 1000


def pfc_watchdog(port_entries: int) -> dict[str, str]:
    """PFC watchdog timers of a switch with ``port_entries`` PORT rows, scaled as SONiC scales them.

    >>> pfc_watchdog(32)["detection_time"], pfc_watchdog(64)["detection_time"], pfc_watchdog(128)["poll_interval"]
    ('200', '400', '800')
    """
    multiply = max(1, (port_entries - 1) // PFC_WD_PORTS_PER_STEP + 1)
    time = str(PFC_WD_BASE_MS * multiply)
    return {"action": "drop", "detection_time": time, "restoration_time": time,
            "poll_interval": str(min(PFC_WD_BASE_MS * multiply, PFC_WD_MAX_POLL_MS))}


def buffer_mb(fabric: Fabric, tier: int = 1) -> int:
    """Packet buffer (MB) of a tier's switches: its model's, else DEFAULT_BUFFER_MB."""
    model = tier_switch(fabric.spec, tier).model
    return switch_catalog()[model].buffer_mb if model else DEFAULT_BUFFER_MB


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


class ConfigFacts:
    """Facts for the config templates of one fabric (shared tables plus one dict per switch)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        spec = fabric.spec
        self.qos: QosProfile = QOS_PROFILES[spec.qos]
        tiers = range(1, fabric.plan.tiers + 1)
        # each tier's switch model: its SONiC SKU, its SerDes lanes a port and its ports
        self.platforms: dict[int, Platform | None] = {}
        for t in tiers:
            sku = tier_switch(spec, t).platform
            self.platforms[t] = platform_catalog()[sku] if sku else None
        self.platform = self.platforms[1]  # the leaves' (templates' fabric.platform)
        self.lanes = {t: fabric.addressing.tier_lanes(t) for t in tiers}
        self.radix = {t: tier_switch(spec, t).radix for t in tiers}
        self.chassis = {t: tier_switch(spec, t).chassis for t in tiers}
        self.ends = _ends(fabric)
        self.loopbacks = [""] * fabric.plan.nodes + ip_text(fabric.addressing.loopback[fabric.plan.nodes:])
        plan = fabric.plan
        # each kind's link speed: where tiers of different port speeds meet, the slower port's
        self.speeds = speeds = dict(zip(KIND_NAMES, (spec.link_gbps, plan.spine_link_gbps, plan.core_link_gbps,
                                                     spec.port_gbps)))
        self.port_gbps = {t: tier_switch(spec, t).port_gbps for t in tiers}
        cable_m = dict(spec.cable_m, **({PEER_LINK: PEER_LINK_M} if fabric.plan.homes == 2 else {}))
        # SONiC's CABLE_LENGTH takes whole metres ("[0-9]+m"), and with a platform a length its
        # headroom table lists: round up, which keeps the headroom safe (docs/configs.md)
        self.cable_m: dict[int, dict[str, float]] = {}
        # a lossless profile per tier and link kind of its ports: tier t's ports face kinds t-1 and t
        self.buffer_profiles: dict[tuple[int, str], dict[str, Any]] = {}
        for t in tiers:
            p = self.platforms[t]
            self.cable_m[t] = {kind: float(p.table_cable_m(m) if p else math.ceil(m))
                               for kind, m in cable_m.items()}
            shared = p.shared_headroom if p else False
            kinds = LINK_KINDS[t - 1:min(t + 1, fabric.plan.tiers)]
            if t == 1 and fabric.plan.homes == 2:
                kinds += (PEER_LINK,)
            for kind in kinds:
                speed, cable = speeds[kind], self.cable_m[t][kind]
                # SerDes lanes of one link's port (a broken-out port's share)
                lanes = (p.lanes_per_port if p else self.lanes[t]) // self.end_breakout(t, kind)
                h = pfc_headroom(speed, cable, spec.mtu)  # the physical terms, for the docs' breakdown
                xon, xoff, size = vendor_headroom(p.vendor if p else None, p.asic if p else None, speed, cable,
                                                  spec.mtu, lanes=lanes, shared=shared)
                vendor = table_headroom(list(p.headroom_table), speed, cable) if p and p.headroom_table else None
                if vendor is not None and vendor[1] > xoff:  # never less than the SKU's own table
                    if not shared:  # a reserved PG holds its xoff; a shared one draws it from the pool
                        size += vendor[1] - xoff
                    xoff = vendor[1]
                name = f"pg_lossless_{speed * 1000}_{_metres(cable)}_profile"
                broadcom = BROADCOM_ASICS.get(p.asic) if p and p.vendor == "broadcom" else None
                self.buffer_profiles[t, kind] = {
                    "name": name, "speed_gbps": speed, "cable_m": cable, "lanes": lanes,
                    "xoff": xoff, "xon": xon, "size": size, "cable_bytes": h.cable_bytes,
                    "xon_offset": broadcom.xon_offset if broadcom else None,
                    "dynamic_th": broadcom.dynamic_th if broadcom else 0,
                    "shared_headroom": shared,
                    "response_bytes": h.response_bytes, "phy_bytes": h.phy_bytes,
                    "vendor_table_xoff": vendor[1] if vendor else None,
                }
        self._layouts: dict[tuple, dict[str, Any]] = {}
        self._ports: dict[tuple[int, int, int, int], tuple[str, str, str, int]] = {}
        self._port_bases: dict[tuple[int, ...], dict[str, Any]] = {}  # see switch()
        self._peer_ports: dict[tuple[int, int, int, int], str] = {}  # see peer_port_name()
        self._kind_facts: dict[tuple[int, bytes], dict[str, Any]] = {}  # see _buffer_facts_of()
        self._host_pool: int | None = None
        self._tier_profiles: dict[int, list[dict[str, Any]]] = {}

    def end_breakout(self, tier: int, kind: str) -> int:
        """Links per port of a tier's ports that face links of ``kind`` (1 unless broken out)."""
        k = KIND_NAMES.index(kind)
        if k == PEER_KIND:
            return 1
        return self.fabric.plan.lanes(k)[0 if tier == k else 1]

    def buffer_layout(self, active_kinds: Counter, tier: int = 1) -> BufferLayout:
        """The buffer layout of a switch of ``tier`` with ``active_kinds`` (link kind -> active ports)."""
        loads: Counter = Counter()
        for kind, n in active_kinds.items():
            b = self.buffer_profiles[tier, kind]
            loads[PortLoad(b["xon"], b["xoff"], b["size"], b["lanes"])] += n
        return switch_layout(self.platforms[tier], loads, len(self.qos.lossless_tc),
                             buffer_mb(self.fabric, tier) * 1_000_000)

    def buffer_facts(self, active_kinds: Counter, tier: int = 1) -> dict[str, Any]:
        """The template facts of :meth:`buffer_layout`, made once per tier and distinct mix of ports, with
        the ``BUFFER_QUEUE`` and lossy ``BUFFER_PG`` values ready to print (the same on every port)."""
        key = (tier, *sorted(active_kinds.items()))
        if key not in self._layouts:
            facts = self.buffer_layout(active_kinds, tier).to_dict()
            facts["queues"] = [
                {"queues": r["queues"], "lossless": r["lossless"],
                 "entry": json.dumps({"profile": facts["lossless_queue_profile" if r["lossless"] else "lossy_queue_profile"]})}
                for r in _buffer_queue_ranges(self.qos)]
            facts["lossy_pg_entry"] = json.dumps({"profile": facts["lossy_pg_profile"]})
            self._layouts[key] = facts
        return self._layouts[key]

    def shared(self) -> dict[str, Any]:
        """Facts common to every switch: the QoS profile and its tables."""
        q = self.qos
        return {
            "qos": {
                "name": q.name,
                "roce_dscp": list(q.roce_dscp),
                "lossless_tc": list(q.lossless_tc),
                "pfc_priorities": q.pfc_priorities,
                "lossless_pg_key": _range_key(q.lossless_tc),
                "cnp_dscp": q.cnp_dscp,
                "cnp_tc": q.cnp_tc,
                "ecn_min_bytes": q.ecn_min_bytes,
                "ecn_max_bytes": q.ecn_max_bytes,
                "ecn_probability_pct": q.ecn_probability_pct,
                "dscp_to_tc": q.dscp_to_tc(),
                "tc_to_pg": q.tc_to_pg(),
                "tc_to_queue": {tc: tc for tc in range(8)},
                "pfc_to_queue": {p: p for p in range(8)},
                # priority groups of the PFC priorities: SONiC sets the map on Spectrum, never on
                # Broadcom; without a platform, with the nvidia profile
                "pfc_to_pg": ({p: q.tc_to_pg()[p] for p in q.lossless_tc} if self.pfc_to_pg_map() else {}),
                "queues": [_queue_role(q, queue) for queue in range(8)],
                "buffer_queues": _buffer_queue_ranges(q),
                "roce_tos": q.roce_tos,
                "pfc_vector": q.pfc_vector(),
            },
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
        cable_m, speeds, bases, peer_ports = self.cable_m[tier], self.speeds, self._port_bases, self._peer_ports
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
            if base is None:  # what every switch of the tier has on this port for this kind of link
                kind = KIND_NAMES[k]
                name, alias, lane_list, index = self.port_facts(tier, port, lane, breakout)
                base = bases[base_key] = {
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

    def peer_port_name(self, peer_tier: int, peer_port: int, peer_lane: int, peer_breakout: int) -> str:
        """The far end's port as a description names it: a server's RDMA device (with dual-ToR,
        its bond's member port), or a switch's SONiC port."""
        if peer_tier == 0:
            if self.fabric.plan.homes == 2:
                return member_port(*divmod(peer_port, 2))
            return rdma_device(peer_port)
        return sonic_port_name(peer_port, peer_lane, self.lanes[peer_tier], peer_breakout)

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

    def _buffer_facts_of(self, tier: int, kinds: np.ndarray) -> dict[str, Any]:
        """:meth:`buffer_facts` of a switch of ``tier`` whose active ports' link kinds are ``kinds``
        (in port order), looked up by those kinds without counting them again."""
        key = (tier, kinds.tobytes())
        facts = self._kind_facts.get(key)
        if facts is None:
            facts = self._kind_facts[key] = self.buffer_facts(Counter(KIND_NAMES[k] for k in kinds.tolist()), tier)
        return facts

    def port_facts(self, tier: int, port: int, lane: int, breakout: int) -> tuple[str, str, str, int]:
        """A port's SONiC name, alias, SerDes lanes (as the PORT table writes them) and index: the
        same on every switch of a tier, so made once."""
        key = (tier, port, lane, breakout)
        facts = self._ports.get(key)
        if facts is None:
            lanes = self.lanes[tier]
            facts = self._ports[key] = (
                sonic_port_name(port, lane, lanes, breakout), self.port_alias(port, lane, breakout, tier),
                ",".join(str(x) for x in self.port_lanes(port, lane, lanes, breakout, tier)),
                self.port_index(port, tier))
        return facts

    def tier_buffer_profiles(self, tier: int) -> list[dict[str, Any]]:
        """The lossless buffer profiles a tier's switches list, one per name, by link kind: every
        kind of the fabric (as each switch has always listed them), with the tier's own values where
        it has ports of that kind, else those of the lowest tier that has. Made once per tier."""
        if tier not in self._tier_profiles:
            self._tier_profiles[tier] = self._profiles_of(tier)
        return self._tier_profiles[tier]

    def _profiles_of(self, tier: int) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        kinds = LINK_KINDS[: self.fabric.plan.tiers] + ((PEER_LINK,) if self.fabric.plan.homes == 2 else ())
        for kind in kinds:
            own = self.buffer_profiles.get((tier, kind))
            b = own or next(v for (t, k), v in sorted(self.buffer_profiles.items()) if k == kind)
            if b["name"] not in out or own is not None:
                out[b["name"]] = b
        return list(out.values())

    def pfc_to_pg_map(self, tier: int = 1) -> bool:
        """Whether ports get ``pfc_to_pg_map``: SONiC's QoS template sets it on NVIDIA Spectrum only."""
        platform = self.platforms[tier]
        if platform is not None:
            return platform.vendor == "nvidia"
        return self.qos.name == "nvidia"

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


def _queue_role(q: QosProfile, queue: int) -> dict[str, Any]:
    """Scheduler, ECN profile and egress buffer profile of one egress queue."""
    if queue in q.lossless_tc:
        role = {"queue": queue, "scheduler": "scheduler.lossless", "wred_profile": "ROCE_LOSSLESS",
                "buffer_profile": "egress_lossless_profile"}
    else:
        scheduler = "scheduler.cnp" if queue == q.cnp_tc else "scheduler.lossy"
        role = {"queue": queue, "scheduler": scheduler, "wred_profile": None,
                "buffer_profile": "egress_lossy_profile"}
    # the QUEUE table value, ready to print (the same for every port)
    entry = {"scheduler": role["scheduler"]}
    if role["wred_profile"]:
        entry["wred_profile"] = role["wred_profile"]
    role["entry"] = json.dumps(entry)
    return role


def _range_key(values: tuple[int, ...]) -> str:
    """``3`` or ``3-4``: a run of consecutive priority groups as SONiC keys it."""
    first, last = min(values), max(values)
    assert list(values) == list(range(first, last + 1)), values
    return str(first) if first == last else f"{first}-{last}"


def _buffer_queue_ranges(q: QosProfile) -> list[dict[str, str]]:
    """Egress buffer profiles over runs of queues, as SONiC keys them: ``0-2``, ``3``, ``4-7``."""
    runs: list[dict[str, Any]] = []
    for queue in range(8):
        profile = _queue_role(q, queue)["buffer_profile"]
        if runs and runs[-1]["profile"] == profile:
            runs[-1]["last"] = queue
        else:
            runs.append({"first": queue, "last": queue, "profile": profile})
    return [{"queues": f"{r['first']}" if r["first"] == r["last"] else f"{r['first']}-{r['last']}",
             "profile": r["profile"], "lossless": r["profile"] == "egress_lossless_profile"} for r in runs]


def _lane_numbers(port: int, lane: int, lanes: int, breakout: int) -> range:
    width = lanes // breakout
    first = (port - 1) * lanes + (lane - 1) * width
    return range(first, first + width)


def _metres(value: float) -> str:
    return f"{value:g}m"


def host_addresses_csv(fabric: Fabric) -> str:
    """One row per server NIC: node, NIC, RDMA device, address/31, gateway, leaf and its port.

    With dual-ToR, one row per NIC too, in another layout (:data:`DUAL_TOR_ADDRESS_COLUMNS`): its
    bond, the bond's address in the pair subnet and the pair's gateway, and both member ports with
    their leaf and leaf port (:func:`dual_tor_addresses_csv`).
    """
    if fabric.plan.homes == 2:
        return dual_tor_addresses_csv(fabric)
    links = fabric.links
    rows = np.flatnonzero(links.kind == 0)
    base = fabric.addressing.link_ip[rows]
    nic_ip = ip_text(base + 1)
    gateway = ip_text(base)
    lanes = fabric.addressing.tier_lanes(1)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["node", "nic", "rdma_device", "address", "gateway", "leaf", "leaf_port"])
    names = fabric.names
    nic = links.lo_port[rows].tolist()
    device = [rdma_device(r) for r in range(max(nic, default=-1) + 1)]  # each NIC port's, made once
    writer.writerows(zip(
        [names[v] for v in links.lo[rows].tolist()], nic, [device[r] for r in nic], [ip + "/31" for ip in nic_ip],
        gateway, [names[v] for v in links.hi[rows].tolist()],
        sonic_port_names(links.hi_port[rows], links.lane[rows], lanes, fabric.plan.breakout)))
    return out.getvalue()


#: Columns of a dual-ToR ``hosts/addresses.csv``: member ``a`` (port 1) goes to the pair's a leaf,
#: member ``b`` (port 2) to its b leaf.
DUAL_TOR_ADDRESS_COLUMNS = ("node", "nic", "rdma_device", "bond", "address", "gateway",
                            "member_a", "leaf_a", "leaf_a_port", "member_b", "leaf_b", "leaf_b_port")


def dual_tor_addresses_csv(fabric: Fabric) -> str:
    """One row per NIC of a dual-ToR fabric, by node then NIC: its RoCE LAG device (``mlx5_bond_r``),
    bond (``bond<r>``), the bond's address with the pair subnet's prefix, the pair's gateway (the
    subnet's first address), and each member port (``mlx5_bond_r/p1``, ``/p2``) with its leaf and
    SONiC port name (the same on both leaves).

    >>> from topo import build_fabric, load_spec
    >>> print(dual_tor_addresses_csv(build_fabric(load_spec({"gpus": 256, "dual_tor": True}))).splitlines()[1])
    cluster-node0000,0,mlx5_bond_0,bond0,10.128.0.2/25,10.128.0.1,mlx5_bond_0/p1,cluster-leaf-su00-r0a,Ethernet0,mlx5_bond_0/p2,cluster-leaf-su00-r0b,Ethernet0
    """
    links = fabric.links
    rows = np.flatnonzero(links.kind == 0)
    nic_of = links.lo.astype(np.int64)[rows] * fabric.plan.nic_rails + links.lo_port[rows] // 2
    order = np.lexsort((links.lo_port[rows] % 2, nic_of))  # by node, NIC, then member
    a, b = rows[order[0::2]], rows[order[1::2]]
    assert (links.lo_port[a] % 2 == 0).all() and (links.lo_port[b] == links.lo_port[a] + 1).all()
    address = fabric.addressing.link_ip[a]
    size = server_block_size(fabric.plan)
    host_pool = int(ipaddress.IPv4Network(fabric.spec.host_pool).network_address)
    block = host_pool + (address - host_pool) // size * size
    lanes = fabric.addressing.tier_lanes(1)

    def ports(r: np.ndarray) -> list[str]:
        return sonic_port_names(links.hi_port[r], links.lane[r], lanes, fabric.plan.breakout)

    nic = (links.lo_port[a] // 2).tolist()
    names = fabric.names
    prefix = f"/{33 - size.bit_length()}"
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(DUAL_TOR_ADDRESS_COLUMNS)
    rails = range(fabric.plan.nic_rails)  # the names of each NIC index, made once
    device, bond = [rdma_device(r, bonded=True) for r in rails], [bond_name(r) for r in rails]
    port_a, port_b = [member_port(r, 0) for r in rails], [member_port(r, 1) for r in rails]
    writer.writerows(zip(
        [names[v] for v in links.lo[a].tolist()], nic, [device[r] for r in nic], [bond[r] for r in nic],
        [ip + prefix for ip in ip_text(address)], ip_text(pair_gateway(block)),
        [port_a[r] for r in nic], [names[v] for v in links.hi[a].tolist()], ports(a),
        [port_b[r] for r in nic], [names[v] for v in links.hi[b].tolist()], ports(b)))
    return out.getvalue()


def host_node_facts(fabric: Fabric) -> dict[str, Any]:
    """The ``node`` facts of ``host/roce-qos.sh.j2``: counts and RDMA devices; with dual-ToR the
    devices are the bonds' RoCE LAG devices, and ``bonds`` names the bonds (NIC order)."""
    spec = fabric.spec
    dual = fabric.plan.homes == 2
    return {"gpus": spec.gpus_per_node, "nics": spec.nic_ports,
            "rdma_devices": [rdma_device(i, bonded=dual) for i in range(spec.nic_ports)],
            "dual_tor": dual, "bonds": [bond_name(i) for i in range(spec.nic_ports)] if dual else []}


# --- rendering ------------------------------------------------------------------------------------


def config_files(fabric: Fabric, user_dirs: Iterable[str | Path] = (), workers: int = 1,
                 progress: Callable[[int], None] | None = None,
                 sink: str | Path | None = None) -> Iterator[tuple[str, "str | Written"]]:
    """SONiC config_db.json and FRR frr.conf of every switch, then the servers' QoS script and
    address table, as ``(path, text)`` pairs made one switch at a time (memory stays flat).

    Nothing for an InfiniBand switch model. With ``workers`` > 1 the switches are rendered by that
    many processes (where the platform can fork them; else in this one), in the
    same order and with the same bytes.
    ``progress(switches_done)`` is called as switches are finished.

    With ``sink`` (an :class:`~topo.outputs.writer.OutputFolder`'s temporary folder) each switch's
    files are written there by the process that renders them, and come as
    :class:`~topo.outputs.manifest.Written` (their digest and size) instead of their text: no
    rendered text crosses between processes. The packaged templates make valid JSON (the tests
    check it); with ``user_dirs`` every ``config_db.json`` is parsed to check its template.
    :class:`ConfigJob` starts the same work at once, to be collected later.
    """
    with ConfigJob(fabric, user_dirs, workers, sink) as job:
        yield from job.files(progress)


class ConfigJob:
    """The switch configs of a fabric (:func:`config_files`), rendered from the moment the job is
    made: with ``workers`` > 1, the worker processes render (and with a ``sink`` write) every
    switch while this process goes on with other work (``topo build`` analyses the fabric and
    writes the other files meanwhile), and :meth:`files` collects them, in order. With one worker
    (or where no process can be forked), :meth:`files` renders as it goes. Use it as a context
    manager: leaving it stops the workers, whatever they were doing. Its files are collected once.
    Jobs that render in this process share its module state: collect one before making the next.

    Each worker has two pipes of its own, nothing else shared: down one it is told which chunk of
    switches to render next (two ahead, so it never waits), up the other it sends each chunk's
    files, which a thread of this process receives as they come and hands out the next chunk. So
    the chunks go to whichever worker is free; a worker that dies (killed, or out of memory) closes
    its pipes, and collecting the configs stops with one error instead of waiting for its
    switches; stopping the workers is killing them. Without a sink, the rendered texts wait in
    this process until collected: collect them soon.

    The thread hands the chunks to :meth:`files` through a ``queue.SimpleQueue``, whose ``put``
    takes no lock a caller could hold: Ctrl-C or SIGTERM raise in the main thread wherever it is
    (inside a ``with lock:`` too, which then stays locked), and the thread, which :meth:`close`
    waits for, must still be able to end."""

    def __init__(self, fabric: Fabric, user_dirs: Iterable[str | Path] = (), workers: int = 1,
                 sink: str | Path | None = None, shown: str = "the output folder") -> None:
        self.fabric, self.user_dirs, self.sink = fabric, tuple(user_dirs), sink
        self.shown = shown  # the folder as write errors name it (the -o the user gave)
        switches = list(range(fabric.first(1), len(fabric.names))) if is_ethernet(fabric) else []
        self.chunks = [switches[i:i + CONFIG_CHUNK] for i in range(0, len(switches), CONFIG_CHUNK)]
        self.workers: list[_Worker] = []
        self.results: dict[int, list[tuple[str, Any]]] = {}  # chunks files() has received, not yet taken
        self.failure: BaseException | None = None  # what stopped the collector, once files() has received it
        self.arrivals: SimpleQueue[tuple[int, Any]] = SimpleQueue()  # (chunk, files) or (-1, error)
        self.collector: threading.Thread | None = None
        self.collected = False
        self.closed = False
        workers = min(workers, len(self.chunks))  # no process without a chunk to render
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            self._start(multiprocessing.get_context("fork"), workers, sink)

    def _start(self, context: Any, workers: int, sink: str | Path | None) -> None:
        try:
            for w in range(workers):
                tasks_in, tasks_out = context.Pipe(duplex=False)
                files_in, files_out = context.Pipe(duplex=False)
                process = context.Process(target=_work, daemon=True, name=f"topo-configs-{w}",
                                          args=(self.fabric, self.user_dirs, sink, self.shown, self.chunks, tasks_in,
                                                files_out))
                process.start()  # the worker starts now
                tasks_in.close()  # the worker holds the only other ends: its end closes them
                files_out.close()
                self.workers.append(_Worker(process, tasks_out, files_in))
        except OSError:  # no more processes or pipes: render here
            self.close()
            return
        # the thread starts after the last fork: no worker inherits it, or a lock it holds
        self.collector = threading.Thread(target=self._collect, name="topo-configs", daemon=True)
        self.collector.start()

    def _collect(self) -> None:
        """The collector thread: files in, the next chunk out, until every chunk is in, a worker
        fails or dies, or the job is closed."""
        todo = iter(range(len(self.chunks)))
        sent = 0
        try:
            for worker in self.workers:  # two chunks each to start with
                for k in itertools.islice(todo, 2):
                    worker.give(k)
            busy = {w.files: w for w in self.workers}
            while busy:
                for conn in multiprocessing.connection.wait(list(busy)):
                    worker = busy[conn]
                    try:
                        kind, k, value = conn.recv()
                    except (EOFError, OSError):  # the worker is gone: it ends only when told, or stopped
                        del busy[conn]
                        if worker.given and not self.closed:
                            raise TopoError(f"a process rendering the switch configs died ({worker.end()}: "
                                            "killed, or out of memory); the build stopped, nothing was "
                                            "written; -j 1 renders them in this process") from None
                        continue
                    if kind == "error":
                        raise value
                    worker.given.discard(k)
                    self.arrivals.put((k, value))
                    sent += 1
                    k = next(todo, None)
                    if k is None:
                        worker.done()
                    else:
                        worker.give(k)
        except BaseException as exc:  # for files() to raise
            self.arrivals.put((-1, exc))
        else:
            if sent < len(self.chunks):
                self.arrivals.put((-1, RuntimeError("this ConfigJob was closed before its files were collected")))

    def __enter__(self) -> "ConfigJob":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (at once, if they are still rendering)."""
        self.closed = True
        workers, self.workers = self.workers, []
        for worker in workers:
            if worker.process.exitcode is None:
                worker.process.kill()
        for worker in workers:
            worker.process.join()
        if self.collector is not None:
            self.collector.join()  # it sees every worker's pipe close
        for worker in workers:
            worker.tasks.close()
            worker.files.close()

    def _chunk(self, k: int) -> list[tuple[str, Any]]:
        """Chunk ``k``'s files once a worker has sent them; the error that stopped the workers."""
        while k not in self.results and self.failure is None:
            got, value = self.arrivals.get()
            if got < 0:
                self.failure = value
            else:
                self.results[got] = value
        if k not in self.results:
            raise self.failure  # type: ignore[misc]
        return self.results.pop(k)

    def files(self, progress: Callable[[int], None] | None = None) -> Iterator[tuple[str, "str | Written"]]:
        """Every switch's files, in fabric order, then the host files; ``progress(switches_done)``
        as they come."""
        if not self.chunks:
            return
        if self.collected:
            raise RuntimeError("a ConfigJob's files are collected once")
        self.collected = True
        done = 0
        # this process's module state is this job's from here on (another job's may be there)
        _init_worker(self.fabric, self.user_dirs, self.sink, self.shown)
        if self.collector is not None and self.closed:
            raise RuntimeError("this ConfigJob was closed before its files were collected")
        # the host files first, though they come last: while the workers render (made after them,
        # they would be the only work left, on one core)
        hosts = self._host_files()
        if self.collector is not None:
            for k, chunk in enumerate(self.chunks):
                yield from self._chunk(k)
                done += len(chunk)
                if progress:
                    progress(done)
            self.close()
        else:
            for chunk in self.chunks:
                yield from _render_chunk(chunk)
                done += len(chunk)
                if progress:
                    progress(done)
        yield from hosts

    def _host_files(self) -> list[tuple[str, str]]:
        """The servers' QoS script and address table (made first, handed out after the switches' files)."""
        env, shared = _WORKER["env"], _WORKER["shared"]
        node = host_node_facts(self.fabric)
        return [("hosts/roce-qos.sh", render_template(env, "host/roce-qos.sh.j2",
                                                      {"fabric": shared, "node": node, "version": __version__})),
                ("hosts/addresses.csv", host_addresses_csv(self.fabric))]


class _Worker:
    """A config process, the pipe that tells it which chunk to render and the pipe its files come
    up, and the chunks it was given and has not sent back."""

    def __init__(self, process: Any, tasks: Any, files: Any) -> None:
        self.process, self.tasks, self.files = process, tasks, files
        self.given: set[int] = set()

    def give(self, k: int) -> None:
        self.given.add(k)
        self._send(k)

    def done(self) -> None:
        """Nothing more to render: it ends after the chunks it has."""
        self._send(None)

    def _send(self, message: int | None) -> None:
        try:
            self.tasks.send(message)
        except OSError:  # it has stopped: its files pipe says why (its error, or its end)
            pass

    def end(self) -> str:
        """How the process ended."""
        self.process.join()
        code = self.process.exitcode
        return f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"


#: Switches rendered per task (one worker task, one progress step).
CONFIG_CHUNK = 32
_WORKER: dict[str, Any] = {"env": None, "facts": None, "shared": None, "sink": None, "made": None, "check": True,
                           "shown": "the output folder"}


def _work(fabric: Fabric, user_dirs: tuple, sink: str | Path | None, shown: str, chunks: list[list[int]],
          tasks: Any, out: Any) -> None:
    """A worker process: renders the chunks it is told to (by index, until told None) and sends
    each one's files up ``out``, or the first error, and stops. Ctrl-C is the parent's to handle
    (it stops the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _end_with_parent()
    try:
        _init_worker(fabric, user_dirs, sink, shown)
        while (k := tasks.recv()) is not None:
            out.send(("files", k, _render_chunk(chunks[k])))
    except EOFError:  # the parent is gone
        pass
    except Exception as exc:
        try:
            out.send(("error", -1, exc))
        except Exception:  # an error that does not pickle: its text
            out.send(("error", -1, TopoError(f"rendering the switch configs failed: {type(exc).__name__}: {exc}")))
    finally:
        out.close()


def _end_with_parent() -> None:
    """Linux: a SIGTERM to this worker when the process that forked it dies (even by SIGKILL), so that
    no worker is left waiting for work that will never come."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _init_worker(fabric: Fabric, user_dirs: tuple, sink: str | Path | None = None,
                 shown: str = "the output folder") -> None:
    facts = ConfigFacts(fabric)
    shared = facts.shared()
    shared["name"] = fabric.spec.name
    env = template_environment(user_dirs)
    env.memo_includes = True  # each switch's facts are made for it and never changed
    _WORKER.update(env=env, facts=facts, shared=shared,
                   sink=Path(sink) if sink is not None else None, made=set(), check=bool(user_dirs), shown=shown)


def _render_chunk(switches: list[int]) -> list[tuple[str, "str | Written"]]:
    env, facts, shared = _WORKER["env"], _WORKER["facts"], _WORKER["shared"]
    out: list[tuple[str, Any]] = []
    for v in switches:
        sw = facts.switch(v)
        context = {"sw": sw, "fabric": shared, "version": __version__}
        if sw["chassis"]:  # SONiC runs one instance per line card of a chassis: its routing only
            out.append((f"switches/{sw['name']}/frr.conf", render_template(env, "frr/frr.conf.j2", context)))
            continue
        text = render_template(env, "sonic/config_db.json.j2", context)
        if _WORKER["check"]:
            try:
                json.loads(text)
            except json.JSONDecodeError as exc:
                raise TemplateError(
                    f"template sonic/config_db.json.j2 made invalid JSON for {sw['name']}: {exc.msg} at "
                    f"line {exc.lineno}, column {exc.colno}") from None
        out.append((f"switches/{sw['name']}/config_db.json", text))
        out.append((f"switches/{sw['name']}/frr.conf", render_template(env, "frr/frr.conf.j2", context)))
    sink = _WORKER["sink"]
    if sink is None:
        return out
    written = []
    for rel, text in out:  # write them here: only their digests go back to the parent
        data = text.encode("utf-8")
        write_file(sink, rel, data, _WORKER["made"], _WORKER["shown"])
        written.append((rel, Written(digest(data), len(data))))
    return written
