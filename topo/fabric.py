"""The builder: from a validated spec to a :class:`Fabric` (graph plus arrays).

Every vertex (server or switch) has an integer index and a readable name; every link is one row of
the :class:`Links` arrays and one edge of the networkx MultiGraph, bound to numbered ports at both
ends. The arrays are built with numpy in bulk (no per-link Python loop decides anything), then the
graph is filled from them in one pass. Node and edge attributes are documented in
``docs/fabric.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from .addressing import Addressing, PortNames, ip_text, link_counts, plan_addressing
from .catalog import switch_catalog
from .errors import SpecError, quote
from .sizing import Plan, final_spec, plan_fabric, plane_spec
from .spec import FabricSpec, TierSwitch, node_names, tier_switch

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

#: Vertex roles by tier number (tier 0 is a server).
ROLES = ("node", "leaf", "spine", "core")
#: Link kinds by number; a link of kind t joins tier t (its lower end) to tier t + 1.
LINK_KINDS = ("node-leaf", "leaf-spine", "spine-core")
#: Edge attribute names of the lower and upper port of each link kind.
PORT_ATTRS = (("nic", "leaf_port"), ("leaf_port", "spine_port"), ("spine_port", "core_port"))
#: Kind of a dual-ToR peer link (leaf to leaf of one pair). Peer links are not routed (they carry
#: the traffic of a pair's lost server link in layer 2), so they are kept in ``Fabric.peer_links``,
#: apart from ``Fabric.links``, which the analyses route over; the graph has them as ``peer-link``.
PEER_KIND = 3
PEER_LINK = "peer-link"
#: Link kinds by number as the outputs name them: the routed kinds, then a dual-ToR peer link.
KIND_NAMES = (*LINK_KINDS, PEER_LINK)
assert KIND_NAMES.index(PEER_LINK) == PEER_KIND
#: Run length of a dual-ToR peer link, in metres: the two leaves of a pair stand side by side in
#: one rack, so the run is short whatever the fabric's other lengths (docs/cabling.md).
PEER_LINK_M = 3.0


@dataclass(frozen=True, eq=False)
class Links:
    """All links of a fabric as parallel arrays, one row per link (one cable end pair).

    ``lo`` is the lower-tier end. ``lo_port`` is the NIC index (= rail, from 0) on a server and the
    front-panel port (from 1) on a switch; ``hi_port`` is always a switch port (from 1); ``lane`` is
    the breakout lane (from 1) of the one end whose port is broken out, 1 when neither is: the leaf
    end of a server link, and where two tiers of different port speeds meet, the faster end
    (:meth:`~topo.sizing.Plan.lanes` says which; :func:`end_lanes` gives both ends).
    """

    lo: np.ndarray
    hi: np.ndarray
    lo_port: np.ndarray
    hi_port: np.ndarray
    lane: np.ndarray
    kind: np.ndarray
    gbps: np.ndarray

    def __len__(self) -> int:
        return int(self.lo.shape[0])


@dataclass(frozen=True, eq=False)
class Fabric:
    """A built fabric: the spec, its sizing, vertex and link arrays, and the graph.

    Attributes
    ----------
    spec : FabricSpec
    plan : Plan
        Counts of every tier.
    names : tuple of str
        Vertex names by index: servers first, then leaves, spines and cores.
    tier : ndarray of int8
        Tier of each vertex (0 server, 1 leaf, 2 spine, 3 core).
    su, pod, rail : ndarray of int32
        Scalable unit (servers, leaves), pod (servers, leaves, spines), rail (rail leaves); -1 where
        it does not apply. ``rail`` of a core is -1; its group is in ``group``.
    group : ndarray of int32
        Core group (= spine position in its pod) of cores; -1 elsewhere. With planes, pods and
        core groups are numbered across the planes (plane 0's first).
    plane : ndarray of int32
        Plane of each switch (0 in a one-plane fabric); -1 for a server, which is in every plane.
    links : Links
        Every routed link: server links, leaf-spine, spine-core.
    addressing : Addressing
        ASNs, loopbacks and link /31s (see :mod:`topo.addressing`).
    switches : tuple of TierSwitch
        The switch model of tiers 1, 2 and 3 (:func:`topo.spec.tier_switch`, picked once at build
        time): read it with :meth:`tier_switch`.
    ethernet : bool
        The link technology: True for Ethernet (switch configs apply), False for InfiniBand (every
        tier is of one technology: the spec checks it).
    port_names : PortNames
        The switch ports' names (SONiC's ``Ethernet<n>``), by tier, port, lane and breakout.
    graph : networkx.MultiGraph
        The same fabric as a graph, keyed by names, with documented attributes (built on first
        use: the analyses read only the arrays).
    peer_links : Links or None
        Dual-ToR: the peer links between the two leaves of each pair (kind ``PEER_KIND``), which
        are not routed; None without dual-ToR.
    """

    spec: FabricSpec
    plan: Plan
    names: tuple[str, ...]
    tier: np.ndarray
    su: np.ndarray
    pod: np.ndarray
    rail: np.ndarray
    group: np.ndarray
    plane: np.ndarray
    links: Links
    addressing: Addressing
    switches: tuple[TierSwitch, ...]
    ethernet: bool
    port_names: PortNames
    peer_links: Links | None = None

    @cached_property
    def graph(self) -> nx.MultiGraph:
        """The fabric as a networkx MultiGraph (built when first asked for: the analyses and the
        files of a build read the arrays, and :func:`vertex_attributes` and :func:`edge_attributes`
        give what the graph's nodes and edges carry)."""
        import networkx as nx

        g = nx.MultiGraph(name=self.spec.name)
        g.add_nodes_from(zip(self.names, vertex_attributes(self)))
        g.add_edges_from(edge_attributes(self))
        return g

    @cached_property
    def index(self) -> dict[str, int]:
        """Vertex index by name."""
        return {name: i for i, name in enumerate(self.names)}

    def tier_switch(self, tier: int) -> TierSwitch:
        """The switch model of a tier (1 leaf, 2 spine, 3 core), as the spec picks it."""
        return self.switches[tier - 1]

    def first(self, tier: int) -> int:
        """Index of the first vertex of a tier."""
        return int(np.searchsorted(self.tier, tier, side="left"))

    def count(self, tier: int) -> int:
        """Vertices of a tier."""
        return int(np.count_nonzero(self.tier == tier))


def design_facts(spec: FabricSpec, plan: Plan, addressing: Addressing) -> dict[str, Any]:
    """The facts a :class:`Fabric` carries beside its arrays, worked out once when it is built: each
    tier's switch model, the link technology and the port names."""
    switches = tuple(tier_switch(spec, t) for t in (1, 2, 3))
    model = switches[0].model  # every tier is of one technology (checked by the spec)
    ethernet = model is None or switch_catalog()[model].technology == "ethernet"
    return {"switches": switches, "ethernet": ethernet, "port_names": _port_names(plan, addressing)}


def _port_names(plan: Plan, addressing: Addressing) -> PortNames:
    """The port names of a fabric of ``plan``: each tier's SerDes lanes, each link kind's breakouts."""
    lanes = (0, *(addressing.tier_lanes(t) if t <= plan.tiers else 1 for t in (1, 2, 3)))
    breakouts = (*(plan.lanes(k) for k in range(3)), (1, 1))  # then a dual-ToR peer link's
    return PortNames(lanes=lanes, breakouts=breakouts)


def _width(count: int, least: int) -> int:
    return max(least, len(str(max(count - 1, 0))))


def _names(spec: FabricSpec, plan: Plan) -> list[str]:
    """Readable, deterministic, sortable names for every vertex, in index order.

    With planes, each switch name carries its plane after the fabric's name
    (``cluster-pl1-leaf-su00-r3``), and each tier lists plane 0's switches first.
    """
    if plan.planes > 1:
        one = _plane_plan(plan)
        per_plane = [_names(replace(plane_spec(spec), name=f"{spec.name}-pl{q}"), one)[one.nodes:]
                     for q in range(plan.planes)]
        names = node_names(spec)
        bounds = np.cumsum([0, one.leaves, one.spines, one.cores]).tolist()
        for t in range(3):
            for plane_names in per_plane:
                names += plane_names[bounds[t]:bounds[t + 1]]
        return names
    p = spec.name
    names = node_names(spec)
    # the two leaves of a dual-ToR pair end in a and b
    sides = ("a", "b") if plan.homes == 2 else ("",)
    if plan.placement == "rail":
        ws, wr = _width(plan.sus, 2), _width(plan.nic_rails, 1)
        names += [f"{p}-leaf-su{s:0{ws}d}-r{r:0{wr}d}{side}" for s in range(plan.sus)
                  for r in range(plan.nic_rails) for side in sides]
    else:
        wl = _width(plan.leaves // plan.homes, 2)
        names += [f"{p}-leaf-{leaf:0{wl}d}{side}" for leaf in range(plan.leaves // plan.homes) for side in sides]
    wj = _width(plan.spines_per_pod, 2)
    if plan.tiers == 2:
        names += [f"{p}-spine-{j:0{wj}d}" for j in range(plan.spines)]
    else:
        wp = _width(plan.pods, 2)
        names += [
            f"{p}-spine-p{pod:0{wp}d}-{j:0{wj}d}"
            for pod in range(plan.pods) for j in range(plan.spines_per_pod)
        ]
        wc = _width(plan.cores_per_group, 2)
        names += [
            f"{p}-core-g{g:0{wj}d}-{c:0{wc}d}"
            for g in range(plan.spines_per_pod) for c in range(plan.cores_per_group)
        ]
    return names


def rank_within(group: np.ndarray) -> np.ndarray:
    """Position of each element among the elements of its group (equal values), in input order.

    >>> rank_within(np.array([5, 3, 5, 5, 3])).tolist()
    [0, 0, 1, 2, 1]
    """
    group = np.asarray(group)
    order = np.argsort(group, kind="stable")
    ordered = group[order]
    start = np.ones(group.size, dtype=bool)
    start[1:] = ordered[1:] != ordered[:-1]
    starts = np.flatnonzero(start)
    rank = np.empty(group.size, dtype=np.int64)
    rank[order] = np.arange(group.size) - np.repeat(starts, np.diff(np.append(starts, group.size)))
    return rank


def edge_keys(lo: np.ndarray, hi: np.ndarray, vertices: int) -> np.ndarray:
    """Each link's key in the graph: its rank among the links between its two vertices, in row
    order (a dual-ToR rack node's links alternate between the two leaves of its pair, so a pair's
    rows are not always contiguous)."""
    return rank_within(np.asarray(lo, dtype=np.int64) * vertices + hi)


def cabled_links(fabric: "Fabric") -> Links:
    """Every cable between two vertices: ``fabric.links``, then a dual-ToR fabric's peer links (kind
    ``PEER_KIND``, which the analyses do not route); ``fabric.links`` itself otherwise."""
    links, peer = fabric.links, fabric.peer_links
    if peer is None or len(peer) == 0:
        return links
    return Links(*(np.concatenate([getattr(links, a), getattr(peer, a)])
                   for a in ("lo", "hi", "lo_port", "hi_port", "lane", "kind", "gbps")))


def _grid(*sizes: int) -> list[np.ndarray]:
    """Flattened index arrays of a full grid (C order), like ``itertools.product`` on ranges."""
    return [a.ravel() for a in np.meshgrid(*(np.arange(s, dtype=np.int64) for s in sizes), indexing="ij")]


def _node_leaf(spec: FabricSpec, plan: Plan, leaf0: int) -> tuple[np.ndarray, ...]:
    """Server link r -> leaf downlink: (lo, hi, lo_port, hi_port, lane).

    With dual-ToR, link ``r`` is member ``r % 2`` of NIC ``r // 2``'s bond and goes to that leaf of
    the NIC's pair, on the same down port and lane of both leaves.
    """
    node, nic = _grid(plan.nodes, plan.rails)
    if plan.placement == "rail":
        leaf = node // plan.su_nodes * plan.rails + nic
        slot = node % plan.su_nodes
    else:
        h = plan.homes
        leaf = node // plan.su_nodes * h + nic % h
        slot = node % plan.su_nodes * (plan.rails // h) + nic // h
    return node, leaf0 + leaf, nic, slot // plan.breakout + 1, slot % plan.breakout + 1


def _peer_links(spec: FabricSpec, plan: Plan) -> Links:
    """The peer link of every dual-ToR pair: ``peer_ports`` links between its two leaves, on the
    ports after the uplinks (the same port on both). Empty without dual-ToR."""
    pair, m = _grid(plan.pairs, plan.peer_ports)
    port = plan.leaf_down_ports + plan.leaf_up_ports + 1 + m
    return Links(lo=(plan.nodes + 2 * pair).astype(np.int32), hi=(plan.nodes + 2 * pair + 1).astype(np.int32),
                 lo_port=port.astype(np.int16), hi_port=port.astype(np.int16), lane=np.ones(m.size, np.int8),
                 kind=np.full(m.size, PEER_KIND, np.int8), gbps=np.full(m.size, spec.port_gbps, np.int32))


def _on_ports(lo_slot: np.ndarray, hi_slot: np.ndarray, lanes: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """(lo port offset, hi port offset, lane) of links at link slots ``lo_slot`` / ``hi_slot`` (from 0)
    of each end: a slot is a port, or a lane of a broken-out port at the end with ``lanes`` > 1."""
    lo_lanes, hi_lanes = lanes
    lane = np.where(lo_lanes > 1, lo_slot % lo_lanes, hi_slot % hi_lanes) + 1
    return lo_slot // lo_lanes, hi_slot // hi_lanes, lane


def _leaf_spine(plan: Plan, leaf0: int, spine0: int) -> tuple[np.ndarray, ...]:
    """Each leaf to each spine of its pod, ``leaf_spine_links`` parallel links each."""
    par = plan.leaf_spine_links
    leaf, j, m = _grid(plan.leaves, plan.spines_per_pod, par)
    pod, local = leaf // plan.leaves_per_pod, leaf % plan.leaves_per_pod
    spine = pod * plan.spines_per_pod + j
    leaf_off, spine_off, lane = _on_ports(j * par + m, local * par + m, plan.lanes(1))
    return leaf0 + leaf, spine0 + spine, plan.leaf_down_ports + 1 + leaf_off, spine_off + 1, lane


def _spine_core(plan: Plan, spine0: int, core0: int) -> tuple[np.ndarray, ...]:
    """Spine j of every pod to each core of group j, ``spine_core_links`` parallel links each."""
    par = plan.spine_core_links
    pod, j, c, m = _grid(plan.pods, plan.spines_per_pod, plan.cores_per_group, par)
    spine = pod * plan.spines_per_pod + j
    core = j * plan.cores_per_group + c
    spine_off, core_off, lane = _on_ports(c * par + m, pod * par + m, plan.lanes(2))
    return spine0 + spine, core0 + core, plan.spine_down_ports + 1 + spine_off, core_off + 1, lane


def end_lanes(plan: Plan, links: Links) -> tuple[np.ndarray, np.ndarray]:
    """(lane at the lower end, lane at the upper end) of every link, from 1: ``links.lane`` at the
    end whose port is broken out (:meth:`Plan.lanes`), 1 at the other."""
    at_lo = np.array([plan.lanes(k)[0] > 1 for k in range(3)] + [False])[links.kind]
    lane = links.lane.astype(np.int64)
    return np.where(at_lo, lane, 1), np.where(at_lo, 1, lane)


def switch_port_names(fabric: "Fabric", links: Links) -> tuple[list[str], list[str]]:
    """The SONiC names (``Ethernet<first SerDes lane>``) of the ports at the (lower, upper) end of
    every link of ``links`` (the fabric's, or :func:`cabled_links`), with each tier's SerDes lanes a
    port and each end's breakout: a server link's lower end (a NIC) is ``""``.

    >>> from topo import load_spec
    >>> f = build_fabric(load_spec({"gpus": 256, "spine_switch": "eth-51t-64x800"}))
    >>> lo, hi = switch_port_names(f, f.links)
    >>> [(lo[i], hi[i]) for i in np.flatnonzero(f.links.kind == 1)[:2]]
    [('Ethernet128', 'Ethernet0'), ('Ethernet132', 'Ethernet4')]
    """
    lo_lane, hi_lane = end_lanes(fabric.plan, links)
    return fabric.port_names.ends(links.kind, links.lo_port, links.hi_port, lo_lane, hi_lane)


def end_slots(plan: Plan, links: Links) -> tuple[np.ndarray, np.ndarray]:
    """Each link's slot (from 0) among the links of its lower end's uplinks and of its upper end's
    downlinks: the port's position on that side times its lanes, plus the lane. A server link's
    lower slot is its NIC; a leaf's uplinks and a spine's uplinks start after their downlinks."""
    lo_lane, hi_lane = end_lanes(plan, links)
    lanes = np.array([plan.lanes(k) for k in range(3)] + [(1, 1)], dtype=np.int64)[links.kind]
    first_up = np.array([0, plan.leaf_down_ports, plan.spine_down_ports, plan.leaf_down_ports + plan.leaf_up_ports],
                        dtype=np.int64)[links.kind]
    lo_port = links.lo_port.astype(np.int64)
    lo = np.where(links.kind == 0, lo_port, (lo_port - 1 - first_up) * lanes[:, 0] + lo_lane - 1)
    hi = (links.hi_port.astype(np.int64) - 1) * lanes[:, 1] + hi_lane - 1
    return lo, hi


def _vertex_arrays(plan: Plan) -> dict[str, np.ndarray]:
    n, L, S, C = plan.nodes, plan.leaves, plan.spines, plan.cores
    total = n + L + S + C
    tier = np.repeat(np.arange(4, dtype=np.int8), [n, L, S, C])
    su = np.full(total, -1, dtype=np.int32)
    pod = np.full(total, -1, dtype=np.int32)
    rail = np.full(total, -1, dtype=np.int32)
    group = np.full(total, -1, dtype=np.int32)
    nodes = np.arange(n)
    leaves = np.arange(L)
    su[:n] = nodes // plan.su_nodes
    if plan.placement == "rail":
        su[n:n + L] = leaves // plan.rails
        rail[n:n + L] = leaves % plan.rails // plan.homes
        first_leaf = su[:n] * plan.rails
    else:
        su[n:n + L] = leaves // plan.homes
        first_leaf = su[:n] * plan.homes
    pod[n:n + L] = leaves // plan.leaves_per_pod
    pod[:n] = first_leaf // plan.leaves_per_pod
    pod[n + L:n + L + S] = np.arange(S) // plan.spines_per_pod
    group[n + L + S:] = np.arange(C) // max(plan.cores_per_group, 1)
    return {"tier": tier, "su": su, "pod": pod, "rail": rail, "group": group,
            "plane": np.where(tier > 0, 0, -1).astype(np.int32)}


def _vertices(plan: Plan) -> dict[str, np.ndarray]:
    return _planar_vertex_arrays(plan) if plan.planes > 1 else _vertex_arrays(plan)


def _plane_plan(plan: Plan) -> Plan:
    """One plane of a multi-plane plan (itself for one plane)."""
    if plan.planes == 1:
        return plan
    return replace(plan, planes=1, rails=plan.nic_rails, leaves=plan.plane_leaves, pods=plan.plane_pods,
                   spines=plan.plane_spines, cores=plan.plane_cores)


def _plane_map(plan: Plan, q: int) -> np.ndarray:
    """The global index of each vertex of plane ``q``, in one plane's vertex order."""
    one = _plane_plan(plan)
    n, counts = one.nodes, (one.leaves, one.spines, one.cores)
    starts = np.cumsum([n, *(c * plan.planes for c in counts)])[:-1]
    parts = [np.arange(n)] + [starts[t] + q * c + np.arange(c) for t, c in enumerate(counts)]
    return np.concatenate(parts).astype(np.int64)


def _plane_maps(plan: Plan) -> tuple[Plan, list[np.ndarray]]:
    """One plane's plan, and for each plane the global index of each of that plane's vertices."""
    return _plane_plan(plan), [_plane_map(plan, q) for q in range(plan.planes)]


def _planar_vertex_arrays(plan: Plan) -> dict[str, np.ndarray]:
    """The vertex arrays of a multi-plane fabric: each plane's, pods and core groups numbered on."""
    one, maps = _plane_maps(plan)
    single = _vertex_arrays(one)
    total = plan.nodes + plan.leaves + plan.spines + plan.cores
    out = {key: np.full(total, -1, dtype=value.dtype) for key, value in single.items()}
    for q, where in enumerate(maps):
        for key, value in single.items():
            out[key][where] = value
        switches = where[one.nodes:]
        out["plane"][switches] = q
        shifted = single["pod"][one.nodes:] >= 0
        out["pod"][switches[shifted]] += q * one.pods
        grouped = single["group"][one.nodes:] >= 0
        out["group"][switches[grouped]] += q * one.spines_per_pod
    out["pod"][:plan.nodes] = single["pod"][:plan.nodes]  # a server's pod in every plane (plane 0's number)
    return out


def _planar_links(spec: FabricSpec, plan: Plan) -> Links:
    """Every plane's links, in the order of one plane's (server links by server and port, then
    leaf-spine, then spine-core), planes one after another within a kind. Port ``p`` of NIC ``r``
    is the server's link ``r * planes + p``; it goes into plane ``p``."""
    one, maps = _plane_maps(plan)
    single = _links(plane_spec(spec), one)
    n_planes = plan.planes
    host = single.kind == 0
    parts = []
    # server links: node-major, then NIC, then plane (the server's port order)
    hl = np.flatnonzero(host)
    order = np.argsort(single.lo[hl].astype(np.int64) * one.rails + single.lo_port[hl], kind="stable")
    hl = hl[order]
    node = np.repeat(single.lo[hl].astype(np.int64), n_planes)
    nic = np.repeat(single.lo_port[hl].astype(np.int64), n_planes)
    q = np.tile(np.arange(n_planes), hl.size)
    hi = np.stack([maps[p][single.hi[hl]] for p in range(n_planes)], axis=1).ravel()
    parts.append((node, hi, nic * n_planes + q, np.repeat(single.hi_port[hl], n_planes),
                  np.repeat(single.lane[hl], n_planes), np.zeros(node.size, np.int8),
                  np.repeat(single.gbps[hl], n_planes)))
    for kind in (1, 2):
        rows = np.flatnonzero(single.kind == kind)
        for p in range(n_planes):
            parts.append((maps[p][single.lo[rows]], maps[p][single.hi[rows]], single.lo_port[rows],
                          single.hi_port[rows], single.lane[rows], single.kind[rows], single.gbps[rows]))
    lo, hi, lo_port, hi_port, lane, kind, gbps = (np.concatenate([part[i] for part in parts]) for i in range(7))
    return Links(lo=lo.astype(np.int32), hi=hi.astype(np.int32), lo_port=lo_port.astype(np.int16),
                 hi_port=hi_port.astype(np.int16), lane=lane.astype(np.int8), kind=kind.astype(np.int8),
                 gbps=gbps.astype(np.int32))


def _links(spec: FabricSpec, plan: Plan) -> Links:
    if plan.planes > 1:
        return _planar_links(spec, plan)
    leaf0 = plan.nodes
    spine0 = leaf0 + plan.leaves
    core0 = spine0 + plan.spines
    parts = [_node_leaf(spec, plan, leaf0), _leaf_spine(plan, leaf0, spine0)]
    if plan.tiers == 3:
        parts.append(_spine_core(plan, spine0, core0))
    cols = [np.concatenate([part[i] for part in parts]) for i in range(5)]
    sizes = [len(part[0]) for part in parts]
    kind = np.repeat(np.arange(len(parts), dtype=np.int8), sizes)
    speeds = [spec.link_gbps, plan.spine_link_gbps, plan.core_link_gbps][:len(parts)]
    gbps = np.repeat(np.asarray(speeds, dtype=np.int32), sizes)
    lo, hi, lo_port, hi_port, lane = cols
    return Links(
        lo=lo.astype(np.int32), hi=hi.astype(np.int32), lo_port=lo_port.astype(np.int16),
        hi_port=hi_port.astype(np.int16), lane=lane.astype(np.int8), kind=kind, gbps=gbps,
    )


def vertex_attributes(fabric: "Fabric") -> list[dict[str, Any]]:
    """Every vertex's attributes (docs/fabric.md), in index order: what the graph's nodes carry,
    made from the arrays without the graph."""
    spec, plan, addressing = fabric.spec, fabric.plan, fabric.addressing
    tier = fabric.tier.tolist()
    su, pod, rail, group, plane = (getattr(fabric, k).tolist() for k in ("su", "pod", "rail", "group", "plane"))
    planes = plan.planes
    first = [0, plan.nodes, plan.nodes + plan.leaves, plan.nodes + plan.leaves + plan.spines]
    gpus, nics = spec.gpus_per_node, spec.nic_ports
    radix_of = [0, spec.radix, plan.spine_radix or spec.radix, plan.core_radix or spec.radix]
    asn = addressing.asn.tolist()
    loopback = [""] * plan.nodes + ip_text(addressing.loopback[plan.nodes:])

    def attrs(i: int) -> dict:
        t = tier[i]
        a = {"role": ROLES[t], "tier": t, "index": i - first[t]}
        if t == 0:
            a.update(su=su[i], pod=pod[i], gpus=gpus, nics=nics)
        else:
            a.update(radix=radix_of[t], asn=asn[i], loopback=loopback[i])
            if t == 1:
                a.update(su=su[i], pod=pod[i])
                if rail[i] >= 0:
                    a["rail"] = rail[i]
            elif t == 2:
                a["pod"] = pod[i]
            else:
                a["group"] = group[i]
            if planes > 1:
                a["plane"] = plane[i]
        return a

    return [attrs(i) for i in range(len(fabric.names))]


@dataclass(frozen=True, eq=False)
class EdgeGroup:
    """Edges whose attributes have the same names (one link kind): their positions in the edge
    order (``fabric.links`` row by row, then the peer links), and each attribute as a column of
    values in that order, or as one value that all of them share."""

    rows: np.ndarray
    names: tuple[str, ...]  # the attributes, in the order an edge's dict lists them
    columns: tuple[Any, ...]  # per attribute: a list of values (one per row), or a Shared value


@dataclass(frozen=True)
class Shared:
    """An attribute value that every edge of an :class:`EdgeGroup` has."""

    value: Any


def edge_groups(fabric: "Fabric") -> list[EdgeGroup]:
    """The attributes of every edge of the fabric's graph (docs/fabric.md), a link kind at a time:
    made in bulk from the arrays, for files written without per-edge objects (GraphML) and for
    :func:`edge_attributes`. Groups come in the order of their first edge."""
    plan, links, peer = fabric.plan, fabric.links, fabric.peer_links
    planes, homes = plan.planes, plan.homes
    lane_attr = [None] + [(f"{PORT_ATTRS[k][0][:-5]}_lane" if plan.lanes(k)[0] > 1
                           else f"{PORT_ATTRS[k][1][:-5]}_lane" if plan.lanes(k)[1] > 1 else None)
                          for k in (1, 2)]
    groups = []
    for k in np.unique(links.kind).tolist():
        rows = np.flatnonzero(links.kind == k)
        lo_name, hi_name = PORT_ATTRS[k]
        lo_port = links.lo_port[rows]
        names = ["kind", "bandwidth_gbps", lo_name, hi_name]
        columns: list[Any] = [Shared(LINK_KINDS[k]), links.gbps[rows].tolist(), lo_port.tolist(),
                              links.hi_port[rows].tolist()]
        if k and lane_attr[k]:  # the broken-out end's lane, where tiers of different port speeds meet
            names.append(lane_attr[k])
            columns.append(links.lane[rows].tolist())
        if k == 0:
            names.append("lane")
            columns.append(links.lane[rows].tolist())
            if planes > 1:
                names.append("plane")
                columns.append((lo_port % planes).tolist())
            elif homes > 1:  # member m of NIC r's bond is server link r * 2 + m: "nic" is r
                nic, member = np.divmod(lo_port.astype(np.int64), homes)
                columns[names.index("nic")] = nic.tolist()
                names.append("member")
                columns.append(member.tolist())
        groups.append(EdgeGroup(rows, tuple(names), tuple(columns)))
    if peer is not None and len(peer):
        port = peer.lo_port.tolist()
        groups.append(EdgeGroup(len(links) + np.arange(len(peer)),
                                ("kind", "bandwidth_gbps", "leaf_port", "peer_port"),
                                (Shared(PEER_LINK), peer.gbps.tolist(), port, port)))
    return sorted(groups, key=lambda g: int(g.rows[0]) if len(g.rows) else 0)


def edge_ends(fabric: "Fabric") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every edge's lower and upper vertex and its key (parallel links of a pair of vertices
    numbered from 0), in edge order: the links, then the peer links."""
    links, peer, plan = fabric.links, fabric.peer_links, fabric.plan
    lo, hi = links.lo, links.hi
    key = edge_keys(links.lo, links.hi, len(fabric.names))  # parallel links: keys 0, 1, ... in row order
    if peer is not None and len(peer):
        lo, hi = np.concatenate([lo, peer.lo]), np.concatenate([hi, peer.hi])
        key = np.concatenate([key, np.arange(len(peer)) % max(plan.peer_ports, 1)])
    return lo, hi, key


def edge_attributes(fabric: "Fabric") -> list[tuple[str, str, int, dict[str, Any]]]:
    """Every link as (lower end, upper end, key, attributes) in link order, then a dual-ToR
    fabric's peer links: what the graph's edges carry (the key numbers the parallel links of a
    pair of vertices from 0), made from the arrays without the graph."""
    names = fabric.names
    lo, hi, key = (a.tolist() for a in edge_ends(fabric))
    attrs: list[Any] = [None] * len(lo)
    for group in edge_groups(fabric):
        n = len(group.rows)
        columns = [c if not isinstance(c, Shared) else [c.value] * n for c in group.columns]
        for row, values in zip(group.rows.tolist(), zip(*columns)):
            attrs[row] = dict(zip(group.names, values))
    return [(names[a], names[b], k, d) for a, b, k, d in zip(lo, hi, key, attrs)]


#: Peak memory of building, analysing and writing a fabric: a fixed part and a part per link.
#: Measured: 1.6 KiB per link above about 60 MiB, from 131,072 to 524,288 GPUs (radix 128, three
#: tiers, with the analysis and every file; the switch configs do not raise the peak); the
#: constants add a margin of a quarter (docs/performance.md).
MEMORY_BASE_BYTES = 96 << 20
MEMORY_PER_LINK_BYTES = 2 << 10


def memory_estimate(plan: Plan) -> int:
    """Bytes that building, analysing and writing the fabric of ``plan`` needs at its peak."""
    return MEMORY_BASE_BYTES + MEMORY_PER_LINK_BYTES * sum(link_counts(plan))


def available_memory() -> int | None:
    """Bytes of memory this machine can give without swapping (Linux ``MemAvailable``), if known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(spec: FabricSpec, plan: Plan, available: int | None = None) -> None:
    """SpecError, before anything is allocated, when the fabric would not fit in memory."""
    need = memory_estimate(plan)
    have = available_memory() if available is None else available
    if have is not None and need > have:
        links = sum(link_counts(plan))
        raise SpecError([
            f"gpus={spec.gpus} with these settings is {links:,} links, which needs about "
            f"{need / (1 << 30):.1f} GiB of memory to build and analyse; this machine has "
            f"{have / (1 << 30):.1f} GiB available"])


def _addressing(spec: FabricSpec, plan: Plan, links: Links) -> Addressing:
    """Addresses and ASNs of ``links``, each server link placed by its leaf and down-port slot."""
    host = links.kind == 0
    leaf = np.where(host, links.hi.astype(np.int64) - plan.nodes, 0)
    slot = np.where(host, (links.hi_port.astype(np.int64) - 1) * plan.breakout + links.lane - 1, 0)
    return plan_addressing(spec, plan, links.kind, leaf, slot)


def _grown(spec: FabricSpec, plan: Plan) -> tuple[list[str], dict[str, np.ndarray], Links, Addressing]:
    """Today's part of the fabric of ``grow_to`` GPUs: that fabric is laid out whole (names, ports,
    addresses and ASNs), and the nodes, leaves and spines still to come are left out, so that every
    switch, port, address and ASN of today's fabric is the final one's and growing never renumbers
    or recables what is there."""
    final = final_spec(spec)
    fplan = plan_fabric(final)
    check_memory(final, fplan)  # the final fabric is laid out whole first
    fnames = _names(final, fplan)
    if spec.hostname_table is not None:  # a table names today's nodes only
        fnames[:plan.nodes] = node_names(spec)
    fvert = _vertices(fplan)
    flinks = _links(final, fplan)
    faddr = _addressing(final, fplan, flinks)
    tier = fvert["tier"]
    index = np.arange(tier.size)
    plane = fvert["plane"].astype(np.int64)  # today's leaves and spines are the first of each plane's
    keep = np.select([tier == 0, tier == 1, tier == 2],
                     [index < plan.nodes, index - fplan.nodes - plane * fplan.plane_leaves < plan.plane_leaves,
                      index - fplan.nodes - fplan.leaves - plane * fplan.plane_spines < plan.plane_spines], True)
    new = np.cumsum(keep) - 1
    kept_links = keep[flinks.lo] & keep[flinks.hi]
    links = Links(lo=new[flinks.lo[kept_links]].astype(np.int32), hi=new[flinks.hi[kept_links]].astype(np.int32),
                  lo_port=flinks.lo_port[kept_links], hi_port=flinks.hi_port[kept_links],
                  lane=flinks.lane[kept_links], kind=flinks.kind[kept_links], gbps=flinks.gbps[kept_links])
    vertices = {key: value[keep] for key, value in fvert.items()}
    addressing = Addressing(asn=faddr.asn[keep], loopback=faddr.loopback[keep], link_ip=faddr.link_ip[kept_links],
                            asn_size=faddr.asn_size, lanes_per_port=faddr.lanes_per_port,
                            spine_core_lanes=faddr.spine_core_lanes)
    names = [n for n, k in zip(fnames, keep.tolist()) if k]
    return names, vertices, links, addressing


def build_fabric(spec: FabricSpec) -> Fabric:
    """Build the fabric a spec asks for.

    Raises
    ------
    SpecError
        If the spec cannot be built (see :func:`topo.sizing.plan_fabric`).

    Examples
    --------
    >>> from topo.spec import load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 256}))
    >>> fabric.count(1), fabric.count(2), len(fabric.links)
    (8, 4, 512)
    >>> fabric.graph.nodes["cluster-leaf-su00-r3"]["rail"]
    3
    """
    plan = plan_fabric(spec)
    check_memory(spec, plan)
    if final_spec(spec) is not spec:
        names, vertices, links, addressing = _grown(spec, plan)
        peer = _peer_links(spec, plan) if plan.homes == 2 else None
        return Fabric(spec=spec, plan=plan, names=tuple(names), links=links, addressing=addressing,
                      peer_links=peer, **vertices, **design_facts(spec, plan, addressing))
    names = _names(spec, plan)
    if len({n.lower() for n in names}) != len(names):
        switches = {n.lower() for n in names[plan.nodes:]}
        clash = next(n for n in names[:plan.nodes] if n.lower() in switches)
        raise SpecError([f"hostnames: host name {quote(clash)} is also the name of a switch; host and switch "
                         f"names must differ, also in case (switches are named after name={spec.name!r})"])
    vertices = _vertices(plan)
    links = _links(spec, plan)
    addressing = _addressing(spec, plan, links)
    peer = _peer_links(spec, plan) if plan.homes == 2 else None
    return Fabric(spec=spec, plan=plan, names=tuple(names), links=links, addressing=addressing,
                  peer_links=peer, **vertices, **design_facts(spec, plan, addressing))


def plane_members(fabric: Fabric, plane: int) -> tuple[np.ndarray, np.ndarray]:
    """The vertices of one plane (every server, then the plane's switches; their indices, in the
    order of :func:`plane_view`) and its links (a mask over the fabric's links)."""
    plan = fabric.plan
    if plan.planes == 1:
        return np.arange(len(fabric.names)), np.ones(len(fabric.links), dtype=bool)
    where = _plane_map(plan, plane)
    mine = np.zeros(len(fabric.names), dtype=bool)
    mine[where] = True
    links = fabric.links
    keep = mine[links.lo] & mine[links.hi]
    keep &= (links.kind != 0) | (links.lo_port.astype(np.int64) % plan.planes == plane)
    return where, keep


def plane_view(fabric: Fabric, plane: int) -> Fabric:
    """One plane of a multi-plane fabric as a fabric of its own: every server, that plane's
    switches and the links among them, numbered as a one-plane fabric of the plane's spec
    (:func:`topo.sizing.plane_spec`) numbers them; its server links' NIC index is the NIC's (the
    port's device number divided by ``planes``). Names, ports and addresses are the fabric's. It
    is for the analyses, which read the arrays.

    >>> from topo.spec import load_spec
    >>> f = build_fabric(load_spec({"gpus": 512, "switch": "eth-51t-128x400", "nic_gbps": 800, "planes": 2}))
    >>> v = plane_view(f, 1)
    >>> v.count(1), v.count(2), len(v.links), v.names[v.first(1)]
    (8, 4, 1024, 'cluster-pl1-leaf-su00-r0')
    """
    plan = fabric.plan
    if plan.planes == 1:
        return fabric
    one = _plane_plan(plan)
    where, keep = plane_members(fabric, plane)
    local = np.full(len(fabric.names), -1, dtype=np.int64)
    local[where] = np.arange(where.size)
    links = fabric.links
    host = links.kind == 0
    lo_port = np.where(host, links.lo_port // plan.planes, links.lo_port)
    view_links = Links(lo=local[links.lo[keep]].astype(np.int32), hi=local[links.hi[keep]].astype(np.int32),
                       lo_port=lo_port[keep].astype(np.int16), hi_port=links.hi_port[keep],
                       lane=links.lane[keep], kind=links.kind[keep], gbps=links.gbps[keep])
    vertices = {"tier": fabric.tier[where], "su": fabric.su[where], "rail": fabric.rail[where],
                "pod": np.where((fabric.tier[where] > 0) & (fabric.pod[where] >= 0), fabric.pod[where] - plane * one.pods,
                                fabric.pod[where]),
                "group": np.where(fabric.group[where] >= 0, fabric.group[where] - plane * one.spines_per_pod, -1),
                "plane": np.where(fabric.tier[where] > 0, 0, -1).astype(np.int32)}
    vertices = {k: v.astype(fabric.su.dtype if k != "tier" else fabric.tier.dtype) for k, v in vertices.items()}
    a = fabric.addressing
    addressing = Addressing(asn=a.asn[where], loopback=a.loopback[where], link_ip=a.link_ip[keep],
                            asn_size=a.asn_size, lanes_per_port=a.lanes_per_port,
                            spine_core_lanes=a.spine_core_lanes)
    return Fabric(spec=plane_spec(fabric.spec), plan=one, names=tuple(fabric.names[i] for i in where.tolist()),
                  links=view_links, addressing=addressing, **vertices, switches=fabric.switches,
                  ethernet=fabric.ethernet, port_names=_port_names(one, addressing))
