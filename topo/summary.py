"""The build summary: counts per tier that a network architect checks first.

Computed from the fabric's arrays (bincount over link ends); the cable counts are the cabling
plan's (:func:`topo.cabling.plan_cabling`), so the tier table, the cabling line,
``bom.csv`` and ``summary.json`` print the same numbers (docs/cabling.md, "Counting"). The lines
that print a summary are the outputs' (:mod:`topo.outputs.summary`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from .fabric import LINK_KINDS, PEER_LINK, ROLES, Fabric, end_lanes
from .sizing import growth
from .spec import format_ratio

if TYPE_CHECKING:  # pragma: no cover
    from .cabling import Cabling
    from .hardware.servers import ServerProfile

SWITCH_TIERS = ROLES[1:]


@dataclass(frozen=True)
class TierSummary:
    """One switch tier: leaf, spine or core."""

    role: str
    model: str | None  #: the tier's switch model (None for a generic switch)
    radix: int  #: ports of one switch of the tier
    port_gbps: int  #: speed of its ports
    switches: int
    ports_used: int
    ports_free: int
    max_ports_used: int  #: most ports used on one switch of the tier (never above the radix)
    links_below: int  #: links from the tier below into this tier
    cables_below: int  #: cables for those links: the cabling plan's (a splitter serves several NIC links)
    pieces_below: int  #: cable pieces to order for them (a two-fibre run of 2 x SR4 optics is 2)
    oversubscription: str | None  #: downlink:uplink bandwidth, None for the top tier

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Summary:
    """What ``topo build`` reports: sizes, per-tier counts and the design's shape."""

    name: str
    gpus: int
    nodes: int
    gpus_per_node: int
    nics_per_node: int
    nic_gbps: int
    placement: str
    tiers: int
    planes: int
    switch_model: str | None
    radix: int
    port_gbps: int
    scalable_units: int
    su_nodes: int
    pods: int  #: pods of one plane (1 in two tiers)
    leaf_spine_parallel: int
    spine_core_parallel: int
    tier_rows: tuple[TierSummary, ...] = field(repr=False)
    growth: dict[str, Any] | None = None  #: :func:`topo.sizing.growth`, with ``grow_to``
    dual_tor: dict[str, Any] | None = None  #: :func:`dual_tor_facts`, with ``dual_tor``
    breakouts: tuple[dict[str, Any], ...] = ()  #: :func:`switch_breakouts`: where tiers' port speeds differ
    #: the racks of a server whose NVLink domain spans trays (:meth:`topo.hardware.racks.RackPlan.to_dict`)
    rack: dict[str, Any] | None = None
    #: the whole cluster's power, for a server profile with a power figure (:func:`cluster_power`)
    power: dict[str, Any] | None = None

    @property
    def switches(self) -> dict[str, int]:
        counts = {row.role: row.switches for row in self.tier_rows}
        return {role: counts.get(role, 0) for role in SWITCH_TIERS}

    @property
    def links(self) -> dict[str, int]:
        counts = [row.links_below for row in self.tier_rows]
        out = {kind: (counts[i] if i < len(counts) else 0) for i, kind in enumerate(LINK_KINDS)}
        if self.dual_tor:  # the pairs' peer links, leaf to leaf
            out[PEER_LINK] = self.dual_tor["peer_links"]
        return out

    @property
    def cables(self) -> int:
        return sum(row.cables_below for row in self.tier_rows) + (self.dual_tor["peer_link_cables"] if self.dual_tor else 0)

    @property
    def pieces(self) -> int:
        return sum(row.pieces_below for row in self.tier_rows) + (self.dual_tor["peer_link_pieces"] if self.dual_tor else 0)

    def to_dict(self) -> dict[str, Any]:
        """Machine-readable summary; the keys are a stable interface for scripts."""
        return {
            "name": self.name,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "nics_per_node": self.nics_per_node,
            "nic_gbps": self.nic_gbps,
            "placement": self.placement,
            "tiers": self.tiers,
            "planes": self.planes,
            "switch": {"model": self.switch_model, "radix": self.radix, "port_gbps": self.port_gbps},
            "scalable_units": self.scalable_units,
            "su_nodes": self.su_nodes,
            "pods": self.pods,
            "switches": {**self.switches, "total": sum(self.switches.values())},
            "links": {**self.links, "total": sum(self.links.values())},
            "cables": self.cables,
            "cable_pieces": self.pieces,
            "parallel_links": {"leaf-spine": self.leaf_spine_parallel, "spine-core": self.spine_core_parallel},
            "oversubscription": {row.role: row.oversubscription for row in self.tier_rows},
            "per_tier": {row.role: row.to_dict() for row in self.tier_rows},
            "growth": self.growth,
            "dual_tor": self.dual_tor,
            "breakouts": list(self.breakouts),
            **({"racks": self.rack["racks"], "nvlink_domains": self.rack["nvlink_domains"], "rack": self.rack}
               if self.rack else {}),  # only for racks of trays: every other summary is as it was
            **({"power": self.power} if self.power else {}),  # only for a profile with a power figure
        }


def ports_used(fabric: Fabric) -> np.ndarray:
    """Physical switch ports used per vertex (servers: NICs cabled).

    A broken-out port counts once, however many of its lanes are used.
    """
    links = fabric.links
    n = len(fabric.names)
    lo_lane, hi_lane = end_lanes(fabric.plan, links)
    lo = np.bincount(links.lo[lo_lane == 1], minlength=n)
    hi = np.bincount(links.hi[hi_lane == 1], minlength=n)
    if fabric.peer_links is not None:  # a dual-ToR peer link takes a port of both leaves
        hi += np.bincount(fabric.peer_links.lo, minlength=n) + np.bincount(fabric.peer_links.hi, minlength=n)
    return lo + hi


def dual_tor_facts(fabric: Fabric, cabling: "Cabling | None" = None) -> dict[str, Any] | None:
    """A dual-ToR fabric's pairs: how many, the links of a NIC's bond, the peer links (None
    without dual-ToR).

    >>> from topo import build_fabric, load_spec
    >>> dual_tor_facts(build_fabric(load_spec({"gpus": 1024, "dual_tor": True})))["pairs"]
    16
    """
    plan, spec = fabric.plan, fabric.spec
    if plan.homes != 2:
        return None
    peer = next((t for t in cabling.tiers if t.tier == PEER_LINK), None) if cabling is not None else None
    return {"pairs": plan.pairs, "link_gbps": spec.link_gbps, "links_per_nic": 2,
            "peer_link_ports": plan.peer_ports, "peer_links": len(fabric.peer_links),
            "peer_link_gbps": plan.peer_ports * spec.port_gbps,
            "leaf_uplinks": plan.leaf_up_ports,
            "peer_link_cables": peer.cables if peer else 0, "peer_link_pieces": peer.pieces if peer else 0}


def summarize(fabric: Fabric, cabling: "Cabling | None" = None, server: "ServerProfile | None" = None) -> Summary:
    """Summarise a fabric per tier; ``cabling`` is its plan (made here when not given); ``server``
    the spec's profile (when not given, a shipped profile the spec names), whose racks it counts
    when its NVLink domain spans trays.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> s = summarize(build_fabric(load_spec({"gpus": 1024})))
    >>> s.switches, s.links["leaf-spine"]
    ({'leaf': 32, 'spine': 16, 'core': 0}, 1024)
    """
    spec, plan = fabric.spec, fabric.plan
    used = ports_used(fabric)
    kinds = np.bincount(fabric.links.kind, minlength=3)
    if cabling is None:
        from .cabling import plan_cabling
        cabling = plan_cabling(fabric)
    per_tier = {t.tier: t for t in cabling.tiers}
    # a tier's downlink:uplink; the top tier has no uplinks (in one tier, the leaves are the top)
    ratios = [spec.oversubscription, spec.spine_oversubscription, None][:plan.tiers - 1] + [None] * 3
    rows = []
    for tier in range(1, plan.tiers + 1):
        mask = fabric.tier == tier
        count = int(mask.sum())
        tier_used = used[mask]
        ratio = ratios[tier - 1]
        if tier == 1 and plan.homes == 2:  # the peer link takes uplink ports: the ratio that is built
            ratio = Fraction(plan.leaf_down_ports, plan.leaf_up_ports)
        model = fabric.tier_switch(tier)
        rows.append(
            TierSummary(
                role=ROLES[tier],
                model=model.model,
                radix=model.radix,
                port_gbps=model.port_gbps,
                switches=count,
                ports_used=int(tier_used.sum()),
                ports_free=count * model.radix - int(tier_used.sum()),
                max_ports_used=int(tier_used.max()),
                links_below=int(kinds[tier - 1]),
                cables_below=per_tier[LINK_KINDS[tier - 1]].cables if LINK_KINDS[tier - 1] in per_tier else 0,
                pieces_below=per_tier[LINK_KINDS[tier - 1]].pieces if LINK_KINDS[tier - 1] in per_tier else 0,
                oversubscription=None if ratio is None else _ratio_text(ratio),
            )
        )
    return Summary(
        name=spec.name, gpus=spec.gpus, nodes=plan.nodes, gpus_per_node=spec.gpus_per_node,
        nics_per_node=spec.nics_per_node, nic_gbps=spec.nic_gbps, placement=plan.placement,
        tiers=plan.tiers, planes=plan.planes, switch_model=fabric.tier_switch(1).model, radix=spec.radix, port_gbps=spec.port_gbps,
        scalable_units=plan.sus, su_nodes=plan.su_nodes, pods=plan.plane_pods,
        leaf_spine_parallel=plan.leaf_spine_links, spine_core_parallel=plan.spine_core_links,
        tier_rows=tuple(rows), growth=growth(spec), dual_tor=dual_tor_facts(fabric, cabling),
        breakouts=tuple(switch_breakouts(fabric)), rack=racks_of(fabric, server),
        power=cluster_power(fabric, cabling, server),
    )


def _profile(fabric: Fabric, server: "ServerProfile | None") -> "ServerProfile | None":
    """``server``, else the shipped profile the spec names (None for a file or no name)."""
    from .hardware.shipped import server_profiles

    return server if server is not None else server_profiles().get(fabric.spec.server or "")


def cluster_power(fabric: Fabric, cabling: "Cabling", server: "ServerProfile | None" = None) -> dict[str, Any] | None:
    """The whole cluster's power: ``compute_w`` (a rack's ``power_w`` for each rack of trays, spares
    and all, else a server's for each server), ``network_w`` (the cabling plan's: switches and
    optics; None when a switch's power is unknown) and ``total_w``; None when the server profile
    has no power figure (the HGX H100 profiles, a generic or a user's profile without ``power_w``).

    >>> from topo import build_fabric, load_spec
    >>> from topo.cabling import plan_cabling
    >>> f = build_fabric(load_spec({"gpus": 1024, "server": "dgx-b200", "switch": "eth-25t-64x400"}))
    >>> cluster_power(f, plan_cabling(f))["compute_w"]
    1830400
    """
    profile = _profile(fabric, server)
    if profile is None or profile.power_w is None:
        return None
    rack = racks_of(fabric, profile)
    units, unit = (rack["racks"], "rack") if rack else (fabric.plan.nodes, "server")
    compute = units * profile.power_w
    network = cabling.power_w["total"]
    return {"compute_w": compute, "network_w": network,
            "total_w": None if network is None else round(compute + network, 3),
            "compute_of": {"profile": profile.name, "unit": unit, "units": units, "unit_w": profile.power_w}}


def racks_of(fabric: Fabric, server: "ServerProfile | None" = None) -> dict[str, Any] | None:
    """The racks of the fabric's servers (:func:`topo.hardware.racks.rack_plan`), None when their
    NVLink domain is one server's.

    >>> from topo import build_fabric, load_spec
    >>> racks_of(build_fabric(load_spec({"gpus": 576, "server": "gb200-nvl72"})))["racks"]
    8
    """
    from .hardware.racks import rack_plan

    spec = fabric.spec
    server = _profile(fabric, server)
    plan = rack_plan(server, spec.gpus, spec.spare_trays) if server is not None else None
    return plan.to_dict() if plan is not None else None


def switch_breakouts(fabric: Fabric) -> list[dict[str, Any]]:
    """Where two tiers of different port speeds meet: the links (kind), their speed, the tier whose
    faster ports are broken out, those ports' speed and the links each carries. Empty when every
    tier's ports are of one speed.

    >>> from topo import build_fabric, load_spec
    >>> switch_breakouts(build_fabric(load_spec({"gpus": 1024, "leaf_switch": "eth-25t-64x400",
    ...                                          "spine_switch": "eth-51t-64x800"})))
    [{'links': 'leaf-spine', 'link_gbps': 400, 'tier': 'spine', 'port_gbps': 800, 'lanes': 2}]
    """
    plan = fabric.plan
    out = []
    for kind in range(1, plan.tiers):
        for end, lanes in enumerate(plan.lanes(kind)):
            if lanes > 1:
                tier = kind + end
                sw = fabric.tier_switch(tier)
                out.append({"links": LINK_KINDS[kind], "link_gbps": sw.port_gbps // lanes, "tier": ROLES[tier],
                            "port_gbps": sw.port_gbps, "lanes": lanes})
    return out


def _ratio_text(ratio) -> str:
    value = format_ratio(ratio)
    return value if isinstance(value, str) else f"{value}:1"
