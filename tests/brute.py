"""Brute-force references for the analyses, straight from the networkx graph (small fabrics only).

Nothing here uses topo's arrays-based analyses: paths come from the graph, faults are applied by
removing edges from a copy of it.
"""

from __future__ import annotations

from collections import Counter

import networkx as nx

from topo.fabric import PORT_ATTRS


def live_graph(fabric, faults=None) -> nx.MultiGraph:
    """A copy of ``fabric.graph`` without the links that ``faults`` marks down.

    Link row ``e`` is the edge ``(names[lo], names[hi], key)`` where ``key`` counts the earlier rows
    between the same two vertices (docs/fabric.md, "Edge keys"); the ports are checked.
    """
    g = fabric.graph.copy()
    if faults is None:
        return g
    links, names = fabric.links, fabric.names
    seen: Counter = Counter()
    for row, (lo, hi) in enumerate(zip(links.lo.tolist(), links.hi.tolist())):
        key = seen[lo, hi]
        seen[lo, hi] += 1
        if faults.live[row]:
            continue
        data = g.edges[names[lo], names[hi], key]
        lo_attr, hi_attr = PORT_ATTRS[int(links.kind[row])]
        assert (data[lo_attr], data[hi_attr]) == (int(links.lo_port[row]), int(links.hi_port[row]))
        g.remove_edge(names[lo], names[hi], key)
    return g


def tiers(g) -> dict:
    return nx.get_node_attributes(g, "tier")


def gpu_nics(fabric) -> list[tuple[str, int]]:
    """(node name, NIC index) that every GPU uses, GPUs in node order then local rank (with planes, a
    NIC port: the GPU's NIC's port in plane 0)."""
    spec = fabric.spec
    out = []
    for node in fabric.names[: fabric.plan.nodes]:
        for r in range(spec.gpus_per_node):
            out.append((node, r * spec.nic_ports // spec.gpus_per_node))
    return out


def nic_leaf(g, node: str, nic: int) -> str | None:
    """The leaf a live NIC link of ``node`` goes to, None when that NIC's link is down."""
    for _, leaf, data in g.edges(node, data=True):
        if data["kind"] == "node-leaf" and data["nic"] == nic:
            return leaf
    return None


def endpoint_graph(g) -> nx.Graph:
    """Switches plus one vertex per NIC (``(node, nic)``): servers cannot forward traffic."""
    t = tiers(g)
    h = nx.Graph()
    for u, v, data in g.edges(data=True):
        if data["kind"] == "node-leaf":
            node, leaf = (u, v) if t[u] == 0 else (v, u)
            h.add_edge((node, data["nic"]), leaf)
        else:
            h.add_edge(u, v)
    return h


def updown_paths(g, a: str, b: str) -> list[list[str]]:
    """The shortest valley-free switch paths from leaf ``a`` to leaf ``b`` (``a != b``).

    Leaf-spine-leaf if any; otherwise leaf-spine-core-spine-leaf (up, up, down, down) with two
    distinct spines; empty when there is none.
    """
    t = tiers(g)

    def up(v):
        return sorted(w for w in g.adj[v] if t[w] == t[v] + 1)

    def down(v, tier):
        return sorted(w for w in g.adj[v] if t[w] == tier)

    two = [[a, s, b] for s in up(a) if b in g.adj[s]]
    if two:
        return two
    return [
        [a, s1, c, s2, b]
        for s1 in up(a) for c in up(s1) for s2 in down(c, 2)
        if s2 != s1 and b in g.adj[s2]
    ]


def link_paths(g, path: list[str]) -> int:
    """Link sequences along a switch path: the product of the parallel links of every hop."""
    count = 1
    for u, v in zip(path, path[1:]):
        count *= g.number_of_edges(u, v)
    return count
