"""Exports for other tools: the fabric graph as GraphML and Graphviz DOT, and a containerlab lab.

:func:`export_files` returns ``{relative path: text}`` like the other renderers (only the CLI
writes files):

- ``graph/fabric.graphml``: the networkx graph with every graph, node and edge attribute, parallel
  edges included, edge ids = link numbers (a dual-ToR fabric's peer links numbered after them);
  written here in one pass (networkx's own writer builds an XML tree first, is several times slower
  and repeats edge ids); ``networkx.read_graphml`` reads it back.
- ``graph/fabric.dot``: every server, switch and link for Graphviz, tiers as ranks, written while the
  fabric has at most :data:`FULL_DOT_MAX_LINKS` links (Graphviz cannot lay out larger ones).
- ``graph/fabric-aggregate.dot``: one vertex per group of servers, leaves, spines or cores (see
  :func:`aggregate`) and one edge per pair of connected groups, labelled with its link count and
  total Gb/s; a few hundred vertices even at the largest sizes.
- ``containerlab/NAME.clab.yml`` (with ``configs``, Ethernet fabrics only): the switches as
  containerlab nodes bound to their generated configs, cabled port for port as the configs say
  (with dual-ToR the peer links too, and with the ``linux`` kind the servers, each NIC's bond over
  its two member links); with the ``linux`` kind (FRR, the default) also ``containerlab/daemons``
  and ``containerlab/vtysh.conf``.

Every file depends only on the fabric and the arguments: the same input gives the same bytes.
The file formats are described in ``docs/exports.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from .. import __version__
from ..addressing import bond_name, ip_text, server_block_size, sonic_port_names
from ..errors import TopoError
from ..fabric import (KIND_NAMES, PEER_KIND, ROLES, Fabric, Shared, edge_attributes, edge_ends, edge_groups,
                      is_ethernet, switch_port_names, vertex_attributes)
from ..fabric import cabled_links as all_links
from ..summary import switch_breakouts as summary_breakouts
from ..spec import tier_switch
from .diagram import fabric_svg
from .templating import render_template, template_environment

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx


#: The full DOT (``graph/fabric.dot``) is written for fabrics with at most this many links (16,384
#: GPUs with the default spec have 49,152); above it only the aggregate view is. ``dot -Tsvg`` lays
#: out 24,576 links in about 6 s and 49,152 in 30 to 40 s, but 196,608 (65,536 GPUs) not within
#: 7 minutes. GraphML keeps the whole graph at every size.
FULL_DOT_MAX_LINKS = 50_000

#: containerlab node kinds: default image and what each switch's container is given. The FRR
#: image's tag is the spec's ``frr_version``, the release the configs are written for (their
#: ``frr version`` line): :func:`clab_image`.
CLAB_KINDS = {
    "linux": "quay.io/frrouting/frr:{frr_version}",
    "sonic-vs": "docker-sonic-vs:latest",
}
#: Image of the server containers of a dual-ToR lab (``linux`` kind): containerlab's usual test
#: client, with iproute2 for the bonds.
CLAB_SERVER_IMAGE = "ghcr.io/srl-labs/network-multitool"
#: Linux bond options of a dual-ToR NIC in the lab: LACP (802.3ad) towards the MCLAG pair.
CLAB_BOND_OPTIONS = "mode 802.3ad miimon 100 xmit_hash_policy layer3+4"
#: Linux caps interface names at 15 characters (containerlab renames a veth only when it fits).
MAX_INTERFACE_NAME = 15

#: Outputs made from templates (path, template, what for); :func:`topo.outputs.build.all_outputs` lists them all.
EXPORT_OUTPUTS = (
    ("containerlab/daemons", "exports/daemons.j2", "the containerlab lab (linux kind)"),
    ("containerlab/vtysh.conf", "exports/vtysh.conf.j2", "the containerlab lab (linux kind)"),
)

#: Link kind names by kind number: the routed kinds of ``fabric.links``, then a dual-ToR peer link
#: (``fabric.peer_links``, kind ``PEER_KIND``).
_KINDS = KIND_NAMES
#: Fill colours of vertices by tier, and of links by kind, in the DOT files.
_TIER_COLOURS = ("#e8e8e8", "#c6dbef", "#9ecae1", "#6baed6")
_KIND_COLOURS = ("#bdbdbd", "#4292c6", "#08519c", "#756bb1")
#: Names of the aggregate groups by tier (the group ids' prefix), and one and several members.
_GROUP_WORDS = (("nodes", "node", "nodes"), ("leaves", "leaf", "leaves"),
                ("spines", "spine", "spines"), ("cores", "core", "cores"))


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


class ExportError(TopoError):
    """An export that cannot be written as asked (an unknown containerlab kind, a bad attribute)."""


# --------------------------------------------------------------------------------------------
# Entry point


def export_files(fabric: Fabric, configs: bool = True, kind: str = "linux", image: str | None = None,
                 user_dirs: Iterable[str | Path] = ()) -> dict[str, str]:
    """Graph and lab files of a fabric, by path relative to the build folder.

    Parameters
    ----------
    fabric : Fabric
    configs : bool
        The build writes switch configs (``switches/<switch>/...``); the containerlab lab binds
        them, so without configs (``--no-configs``, or an InfiniBand switch model) it is left out.
    kind : {"linux", "sonic-vs"}
        containerlab kind of the switches: ``linux`` runs FRR with each switch's ``frr.conf``;
        ``sonic-vs`` runs SONiC's virtual switch with its ``config_db.json``.
    image : str, optional
        Container image; by default the kind's entry in :data:`CLAB_KINDS` (:func:`clab_image`: for
        ``linux``, FRR's image of the spec's ``frr_version``).
    user_dirs : iterable of path
        Template folders searched before the packaged templates (as for the configs).

    Raises
    ------
    ExportError
        For an unknown ``kind``.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 256}))
    >>> sorted(export_files(fabric))  # doctest: +NORMALIZE_WHITESPACE
    ['containerlab/cluster.clab.yml', 'containerlab/daemons', 'containerlab/vtysh.conf',
     'graph/fabric-aggregate.dot', 'graph/fabric.dot', 'graph/fabric.graphml', 'graph/fabric.svg']
    >>> sorted(export_files(fabric, configs=False))
    ['graph/fabric-aggregate.dot', 'graph/fabric.dot', 'graph/fabric.graphml', 'graph/fabric.svg']
    """
    if kind not in CLAB_KINDS:
        raise ExportError(f"unknown containerlab kind {kind!r}; choose one of {', '.join(CLAB_KINDS)}")
    chassis = [t for t in range(1, fabric.plan.tiers + 1) if tier_switch(fabric.spec, t).chassis]
    if kind == "sonic-vs" and chassis:
        t = tier_switch(fabric.spec, chassis[0])
        raise ExportError(f"containerlab kind sonic-vs: the {ROLES[t.tier]} tier's {t.model} is a modular chassis, "
                          f"which gets no config_db.json to boot SONiC VS from; use kind linux (FRR)")
    broken = summary_breakouts(fabric)
    if kind == "sonic-vs" and broken:
        b = broken[0]
        raise ExportError(f"containerlab kind sonic-vs: the {b['tier']}s' {b['port_gbps']}G ports are broken out into "
                          f"{b['lanes']} {b['links']} links, but SONiC VS maps one container interface (ethN) to "
                          f"each front-panel port; use kind linux (FRR)")
    files = {"graph/fabric.graphml": fabric_graphml(fabric)}
    if len(fabric.links) + _peer_count(fabric) <= FULL_DOT_MAX_LINKS:
        files["graph/fabric.dot"] = full_dot(fabric)
    files["graph/fabric-aggregate.dot"] = aggregate_dot(fabric)
    files["graph/fabric.svg"] = fabric_svg(fabric)
    if configs and is_ethernet(fabric):
        files[f"containerlab/{fabric.spec.name}.clab.yml"] = containerlab_topology(fabric, kind, image)
        if kind == "linux":
            files.update(frr_support_files(fabric, user_dirs))
    return files


def _peer_count(fabric: Fabric) -> int:
    return 0 if fabric.peer_links is None else len(fabric.peer_links)


def fabric_edges(fabric: Fabric) -> list[tuple[str, str, dict]]:
    """The graph's edges as (u, v, attributes) in link order: ``fabric.links`` row by row, then
    the peer links.

    ``fabric.graph.edges`` lists them by vertex adjacency, which is link order only while the links
    of each pair of vertices are contiguous and no later edge joins an earlier vertex: not so with
    dual-ToR (a rack server's links alternate between the pair's two leaves; a leaf's peer links
    come after every leaf's uplinks). A link's graph key is its rank among the links of its pair of
    vertices, in this order.
    """
    return [(u, v, attrs) for u, v, _, attrs in edge_attributes(fabric)]


def fabric_graphml(fabric: Fabric) -> str:
    """The fabric's graph as GraphML (``graph/fabric.graphml``), written from the arrays: the same
    text as :func:`graphml_text` of ``fabric.graph`` and :func:`fabric_edges`, without building
    the networkx graph or a Python object per edge (the edges are written a link kind at a time,
    each from one format and the attribute columns of :func:`topo.fabric.edge_groups`)."""
    nodes = list(zip(fabric.names, vertex_attributes(fabric)))
    groups = edge_groups(fabric)
    # the keys as the edges' dicts declare them: each group's names, groups in edge order
    samples = [dict(zip(g.names, (c.value if isinstance(c, Shared) else c[0] for c in g.columns)))
               for g in groups if len(g.rows)]
    lo, hi, _ = edge_ends(fabric)
    ids = np.array([_xml(str(n)) for n in fabric.names], dtype=object)
    lines = np.empty(len(lo), dtype=object)
    ekeys = _graphml_keys(samples, "edge")
    for group in groups:
        if not len(group.rows):
            continue
        text, values = ['    <edge id="%d" source="%s" target="%s">'], [group.rows.tolist(),
                                                                        ids[lo[group.rows]].tolist(),
                                                                        ids[hi[group.rows]].tolist()]
        for name, column in zip(group.names, group.columns):
            key, kind = ekeys[name]
            head = f'<data key="{_xml(key)}">'
            if isinstance(column, Shared):
                if column.value is not None:
                    text.append(head + _GRAPHML_FORMAT[kind](column.value).replace("%", "%%") + "</data>")
                continue
            if any(v is None for v in column):
                raise ExportError(f"edge attribute {name!r} is missing on some edges")  # not made so
            text.append(head + "%s</data>")
            values.append(column if kind == "long" and type(column[0]) is int else list(map(_GRAPHML_FORMAT[kind],
                                                                                            column)))
        line = "".join(text) + "</edge>\n"
        lines[group.rows] = [line % row for row in zip(*values)]
    return _graphml({"name": fabric.spec.name}, nodes, [], directed=False, ekeys=ekeys,
                    edge_lines=lines.tolist())


# --------------------------------------------------------------------------------------------
# GraphML

_GRAPHML_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
    'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
)


def _xml(text: str) -> str:
    """Text escaped for XML content and double-quoted attribute values."""
    if "&" in text or "<" in text or ">" in text or '"' in text:
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    return text


def _graphml_type(value: Any, what: str) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "boolean"
    if isinstance(value, (int, np.integer)):
        return "long"  # ASNs need 64 bits; networkx reads "long" as int
    if isinstance(value, (float, np.floating)):
        return "double"
    if isinstance(value, str):
        return "string"
    raise ExportError(f"GraphML cannot hold {what} = {value!r} ({type(value).__name__})")


#: How a value of each GraphML type is written.
_GRAPHML_FORMAT = {
    "boolean": lambda v: "true" if v else "false",
    "long": str,  # int and numpy integers alike (bools are "boolean")
    "double": lambda v: repr(float(v)),
    "string": _xml,
}


def _graphml_keys(items: Iterable[dict], domain: str) -> dict[str, tuple[str, str]]:
    """Attribute name -> (key id, GraphML type), in first-seen order.

    One type per name; a name with both ints and floats is ``double``. Looks at each (name, Python
    type) once, so a pass over 200,000 edges stays fast.
    """
    keys: dict[str, tuple[str, str]] = {}
    seen: set[tuple[str, type]] = set()
    for data in items:
        for name, value in data.items():
            sig = (name, type(value))
            if sig in seen or value is None:
                continue
            seen.add(sig)
            kind = _graphml_type(value, f"{domain} attribute {name!r}")
            if name not in keys:
                keys[name] = (f"{domain}.{name}", kind)
            elif keys[name][1] != kind:
                if {keys[name][1], kind} != {"long", "double"}:
                    raise ExportError(f"{domain} attribute {name!r} is both {keys[name][1]} and {kind}")
                keys[name] = (keys[name][0], "double")
    return keys


def _graphml_writer(keys: dict[str, tuple[str, str]]):
    """A function writing one element's attributes as ``<data>`` elements."""
    parts = {name: (f'<data key="{_xml(key)}">', _GRAPHML_FORMAT[kind])
             for name, (key, kind) in keys.items()}

    def write(data: dict) -> str:
        return "".join([parts[name][0] + parts[name][1](value) + "</data>"
                        for name, value in data.items() if value is not None])

    return write


def graphml_text(graph: nx.Graph, edges: list[tuple[Any, Any, dict]] | None = None) -> str:
    """A networkx graph (multigraphs too) as GraphML, one node or edge per line.

    Every graph, node and edge attribute is written under a key named after it (``node.tier``,
    ``edge.kind``); ints are ``long``, so 4-byte ASNs fit; attributes whose value is None are left
    out. Node ids are the node names. Edge ids number the edges 0, 1, 2, ... in the graph's edge
    order, or in the order of ``edges`` ((u, v, attributes) of every edge of the graph, as
    :func:`fabric_edges` lists a fabric's in link order), unique in the file as GraphML requires
    (yEd and Gephi drop edges whose ids repeat, as networkx's own writer makes them for parallel
    edges). ``networkx.read_graphml`` takes those ids as edge keys: read with
    ``force_multigraph=True`` to get a MultiGraph whether or not the file has parallel edges.

    Examples
    --------
    >>> import networkx as nx
    >>> g = nx.MultiGraph(name="x")
    >>> g.add_edge("a", "b", kind="leaf-spine", bandwidth_gbps=400)
    0
    >>> g.add_edge("a", "b", kind="leaf-spine", bandwidth_gbps=400)
    1
    >>> import io
    >>> back = nx.read_graphml(io.StringIO(graphml_text(g)), force_multigraph=True)
    >>> sorted(back.edges(keys=True, data=True))  # doctest: +NORMALIZE_WHITESPACE
    [('a', 'b', 0, {'kind': 'leaf-spine', 'bandwidth_gbps': 400}),
     ('a', 'b', 1, {'kind': 'leaf-spine', 'bandwidth_gbps': 400})]
    """
    edges = list(graph.edges(data=True)) if edges is None else edges
    return _graphml(graph.graph, list(graph.nodes(data=True)), edges, graph.is_directed())


def _graphml(graph_attrs: dict, nodes: list[tuple[Any, dict]], edges: list[tuple[Any, Any, dict]],
             directed: bool, ekeys: dict[str, tuple[str, str]] | None = None,
             edge_lines: list[str] | None = None) -> str:
    """GraphML of a graph given as its attributes, its (node, attributes) and (u, v, attributes);
    or with its edges' keys and their lines written already (``ekeys`` and ``edge_lines``)."""
    gkeys = _graphml_keys([graph_attrs], "graph")
    nkeys = _graphml_keys((d for _, d in nodes), "node")
    if ekeys is None:
        ekeys = _graphml_keys((d for *_, d in edges), "edge")
    out = [_GRAPHML_HEAD]
    for domain, keys in (("graph", gkeys), ("node", nkeys), ("edge", ekeys)):
        for name, (key, kind) in keys.items():
            out.append(f'  <key id="{_xml(key)}" for="{domain}" attr.name="{_xml(name)}" '
                       f'attr.type="{kind}"/>\n')
    kind = "directed" if directed else "undirected"
    gid = _xml(str(graph_attrs.get("name", "G")))
    out.append(f'  <graph id="{gid}" edgedefault="{kind}">\n')
    if gkeys:
        out.append(f"    {_graphml_writer(gkeys)(graph_attrs)}\n")
    ids = {n: _xml(str(n)) for n, _ in nodes}
    node_data, edge_data = _graphml_writer(nkeys), _graphml_writer(ekeys)
    out.extend(f'    <node id="{ids[n]}">{node_data(d)}</node>\n' for n, d in nodes)
    out.extend(f'    <edge id="{e}" source="{ids[u]}" target="{ids[v]}">{edge_data(d)}</edge>\n'
               for e, (u, v, d) in enumerate(edges))
    out.extend(edge_lines or ())
    out.append("  </graph>\n</graphml>\n")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Graphviz DOT


def dot_id(text: str) -> str:
    r"""A DOT id, always double-quoted (unquoted, ``gpu-0001`` would be read as ``gpu`` and ``-0001``).

    >>> print(dot_id("gpu-0001"), dot_id('a"b'))
    "gpu-0001" "a\"b"
    """
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot_label(text: str) -> str:
    r"""A quoted DOT label; each newline becomes a centred line break (``\n``).

    >>> print(dot_label("SU 3: 8 leaves\n256 links"))
    "SU 3: 8 leaves\n256 links"
    """
    return '"' + "\\n".join(dot_id(line)[1:-1] for line in text.split("\n")) + '"'


def full_dot(fabric: Fabric) -> str:
    """Every server, switch and link as an undirected DOT graph, one tier per rank.

    Each vertex carries ``role`` and ``tier``; each link ``kind`` and ``bandwidth_gbps``, in link
    row order (parallel links are separate edges), a dual-ToR fabric's peer links (``peer-link``,
    between the two leaves of a pair, in the leaves' rank) last. Lower tiers are drawn at the bottom.
    """
    names, links = fabric.names, all_links(fabric)
    tiers = fabric.plan.tiers
    q = [dot_id(n) for n in names]
    out = [
        f"// {fabric.spec.name}: {fabric.spec.gpus:,} GPUs, every server, switch and link "
        f"({len(names):,} vertices, {len(links):,} links). Written by topo {__version__}.\n",
        f"graph {dot_id(fabric.spec.name)} {{\n",
        '  graph [rankdir=BT, ranksep=3, nodesep=0.05, splines=line, outputorder=edgesfirst];\n',
        '  node [shape=box, style=filled, fontname="Helvetica", fontsize=10, height=0.3];\n',
        '  edge [penwidth=0.5];\n',
    ]
    for t in range(tiers + 1):
        start, stop = fabric.first(t), fabric.first(t + 1) if t < tiers else len(names)
        out.append(f'  subgraph {dot_id(f"tier{t}")} {{\n    rank=same;\n'
                   f'    node [fillcolor="{_TIER_COLOURS[t]}"];\n')
        role = ROLES[t]
        out.extend(f'    {q[i]} [role="{role}", tier={t}];\n' for i in range(start, stop))
        out.append("  }\n")
    lo, hi, kind, gbps = (a.tolist() for a in (links.lo, links.hi, links.kind, links.gbps))
    current = -1
    for a, b, k, g in zip(lo, hi, kind, gbps):
        if k != current:
            current = k
            out.append(f'  edge [color="{_KIND_COLOURS[k]}"];\n')
        out.append(f'  {q[a]} -- {q[b]} [kind="{_KINDS[k]}", bandwidth_gbps={g}];\n')
    out.append("}\n")
    return "".join(out)


@dataclass(frozen=True)
class Group:
    """One vertex of the aggregate view: the servers, leaves, spines or cores of one group."""

    id: str
    tier: int
    number: int  #: SU, pod or core group number
    members: int
    pod: int  #: pod of the group, -1 for a core group
    label: str
    side: str = ""  #: dual-ToR leaf group: "a" or "b", the side of its leaves' pairs; "" otherwise


@dataclass(frozen=True)
class GroupLink:
    """One edge of the aggregate view: all links between two groups."""

    a: str  #: lower-tier group
    b: str
    kind: str
    links: int
    bandwidth_gbps: int


@dataclass(frozen=True)
class Aggregate:
    """The fabric with every vertex replaced by its group: groups by tier then number, edges by
    (lower group, upper group)."""

    groups: tuple[Group, ...]
    edges: tuple[GroupLink, ...]
    leaf_grouping: str  #: "su" or "pod"

    def to_dict(self) -> dict[str, Any]:
        return {"leaf_grouping": self.leaf_grouping,
                "groups": [g.__dict__.copy() for g in self.groups],
                "edges": [e.__dict__.copy() for e in self.edges]}


def _width(count: int, least: int = 2) -> int:
    return max(least, len(str(max(count - 1, 0))))


def aggregate(fabric: Fabric) -> Aggregate:
    """Group the fabric for the aggregate view.

    Servers and leaves are grouped by scalable unit in rail placement (an SU's rail leaves are one
    group, its servers another) and by pod in rack placement (where an SU is a single leaf, which
    would give one group per leaf); spines by pod; cores by core group. With dual-ToR a unit's
    leaves are two groups, the a leaves and the b leaves of its leaf pairs (side ``a`` and ``b``,
    ids ending in ``a`` and ``b``), so that the servers' member links to either side and the peer
    links between the sides are edges. Every link between two groups (peer links included)
    becomes one edge with the number of links and their total bandwidth.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> agg = aggregate(build_fabric(load_spec({"gpus": 1024})))
    >>> [(g.id, g.members) for g in agg.groups][:5]
    [('nodes-su00', 32), ('nodes-su01', 32), ('nodes-su02', 32), ('nodes-su03', 32), ('leaves-su00', 8)]
    >>> agg.edges[-1]
    GroupLink(a='leaves-su03', b='spines-p00', kind='leaf-spine', links=256, bandwidth_gbps=102400)
    """
    plan = fabric.plan
    tier = fabric.tier.astype(np.int64)
    by_su = plan.placement == "rail"
    lower = fabric.su if by_su else fabric.pod
    number = np.select([tier <= 1, tier == 2], [lower, fabric.pod], fabric.group).astype(np.int64)
    planes = plan.planes
    if planes > 1 and by_su:  # a scalable unit's leaves, one group per plane (pods and core groups are already)
        leaf = tier == 1
        number[leaf] += fabric.plane[leaf].astype(np.int64) * plan.sus
    dual = plan.homes == 2
    if dual:  # a unit's leaves, one group per side: leaf 2p of pair p is its a leaf, 2p + 1 its b leaf
        leaf = tier == 1
        number[leaf] = number[leaf] * 2 + (np.flatnonzero(leaf) - fabric.first(1)) % 2
    sizes = [int(number[tier == t].max()) + 1 if np.any(tier == t) else 0 for t in range(plan.tiers + 1)]
    offset = np.concatenate([[0], np.cumsum(sizes)])
    vertex_group = offset[tier] + number
    members = np.bincount(vertex_group, minlength=int(offset[-1]))
    first_member = np.full(int(offset[-1]), -1, dtype=np.int64)
    first_member[vertex_group[::-1]] = np.arange(len(tier) - 1, -1, -1)
    gpus_per_node = fabric.spec.gpus_per_node

    # by tier: what a group number counts, in the id and in the label
    numbering = [("su", "SU") if by_su else ("p", "pod")] * 2 + [("p", "pod"), ("g", "core group")]
    groups = []
    for t, size in enumerate(sizes):
        prefix_word, one, many = _GROUP_WORDS[t]
        prefix, where = numbering[t]
        paired = dual and t == 1
        per_plane = size // planes if t >= 1 else size
        w = _width(per_plane // 2 if paired else per_plane)
        for n in range(size):
            g = int(offset[t]) + n
            count = int(members[g])
            pod = int(fabric.pod[first_member[g]]) if t <= 2 else -1
            if paired:
                local, s = divmod(n, 2)
                side = "ab"[s]
                groups.append(Group(id=f"{prefix_word}-{prefix}{local:0{w}d}{side}", tier=t, number=n,
                                    members=count, pod=pod, side=side,
                                    label=f"{where} {local}, side {side}: {_count(count, one, many)}"))
                continue
            plane, local = divmod(n, per_plane) if t >= 1 and planes > 1 else (0, n)
            label = f"{where} {local}: {_count(count, one, many)}"
            ident = f"{prefix_word}-{prefix}{local:0{w}d}"
            if t >= 1 and planes > 1:
                label, ident = f"plane {plane}, {label}", f"{prefix_word}-pl{plane}-{prefix}{local:0{w}d}"
            if t == 0:
                label += "\n" + _count(count * gpus_per_node, "GPU", "GPUs")
            groups.append(Group(id=ident, tier=t, number=n, members=count, pod=pod, label=label))

    links = all_links(fabric)  # a pair's a leaves group before its b leaves group: a < b for a peer link
    a = vertex_group[links.lo]
    b = vertex_group[links.hi]
    pair = a * int(offset[-1]) + b
    unique, first, inverse, counts = np.unique(pair, return_index=True, return_inverse=True,
                                               return_counts=True)
    total = np.zeros(len(unique), dtype=np.int64)
    np.add.at(total, inverse, links.gbps.astype(np.int64))
    edges = tuple(
        GroupLink(a=groups[int(a[r])].id, b=groups[int(b[r])].id, kind=_KINDS[int(links.kind[r])],
                  links=int(c), bandwidth_gbps=int(s))
        for r, c, s in zip(first.tolist(), counts.tolist(), total.tolist())
    )
    return Aggregate(groups=tuple(groups), edges=edges, leaf_grouping="su" if by_su else "pod")


def aggregate_dot(fabric: Fabric, agg: Aggregate | None = None) -> str:
    """The aggregate view (see :func:`aggregate`) as DOT: tiers as ranks, pods as boxes.

    Each vertex carries ``role``, ``tier`` and ``members``; each edge ``kind``, ``links`` and
    ``bandwidth_gbps``, and a label with both numbers. With dual-ToR the a and b leaf groups of a
    unit stand side by side in one dotted box (a ``cluster_leaves-...`` subgraph labelled with its
    leaf pairs), joined by their ``peer-link`` edge.
    """
    agg = agg or aggregate(fabric)
    pods = fabric.plan.pods
    name = fabric.spec.name
    unit = "scalable unit" if agg.leaf_grouping == "su" else "pod"
    grouping = (f"servers by {unit}, leaves by {unit} and side (a, b) of their leaf pairs"
                if fabric.plan.homes == 2 else f"servers and leaves by {unit}")
    out = [
        f"// {name}: {fabric.spec.gpus:,} GPUs, aggregated: {len(agg.groups):,} groups "
        f"({grouping}, spines by "
        f"pod, cores by core group), {len(agg.edges):,} group links. Written by topo {__version__}.\n",
        f"graph {dot_id(name + '-aggregate')} {{\n",
        '  graph [rankdir=BT, newrank=true, ranksep=1.5, nodesep=0.3, fontname="Helvetica"];\n',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];\n',
        '  edge [fontname="Helvetica", fontsize=8];\n',
    ]

    def vertex(g: Group, indent: str) -> str:
        return (f'{indent}{dot_id(g.id)} [role="{ROLES[g.tier]}", tier={g.tier}, members={g.members}, '
                f'label={dot_label(g.label)}, '
                f'fillcolor="{_TIER_COLOURS[g.tier]}"];\n')

    where = "SU" if agg.leaf_grouping == "su" else "pod"

    def vertices(groups: list[Group], indent: str) -> list[str]:
        """The groups' vertices; a unit's a and b leaf groups (adjacent) in their pairs' box."""
        lines: list[str] = []
        for i, g in enumerate(groups):
            if g.side == "a":
                b = groups[i + 1]
                label = f"{where} {g.number // 2}: {_count(g.members, 'leaf pair', 'leaf pairs')}"
                lines += [f'{indent}subgraph {dot_id("cluster_" + g.id[:-1])} {{\n',
                          f'{indent}  label={dot_label(label)}; style="dotted"; '
                          f'color="{_KIND_COLOURS[PEER_KIND]}";\n',
                          vertex(g, indent + "  "), vertex(b, indent + "  "), f"{indent}}}\n"]
            elif g.side != "b":
                lines.append(vertex(g, indent))
        return lines

    if pods > 1:
        wp = _width(pods)
        by_pod: dict[int, list[Group]] = {}
        for g in agg.groups:
            if g.tier <= 2:
                by_pod.setdefault(g.pod, []).append(g)
        for pod in sorted(by_pod):
            out.append(f'  subgraph {dot_id(f"cluster_pod{pod:0{wp}d}")} {{\n'
                       f'    label="pod {pod}"; style=dashed; color="#969696";\n')
            out.extend(vertices(by_pod[pod], "    "))
            out.append("  }\n")
        out.extend(vertex(g, "  ") for g in agg.groups if g.tier == 3)
    else:
        out.extend(vertices(list(agg.groups), "  "))
    for t in range(fabric.plan.tiers + 1):
        ids = " ".join(f"{dot_id(g.id)};" for g in agg.groups if g.tier == t)
        out.append(f'  subgraph {dot_id(f"tier{t}")} {{ rank=same; {ids} }}\n')
    for e in agg.edges:
        k = _KINDS.index(e.kind)
        label = dot_label(_count(e.links, "link", "links") + f"\n{e.bandwidth_gbps:,} Gb/s")
        out.append(f'  {dot_id(e.a)} -- {dot_id(e.b)} [kind="{e.kind}", links={e.links}, '
                   f'bandwidth_gbps={e.bandwidth_gbps}, label={label}, color="{_KIND_COLOURS[k]}"];\n')
    out.append("}\n")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# containerlab


def switch_interfaces(fabric: Fabric, kind: str = "linux",
                      port_names: tuple[list[str], list[str]] | None = None) -> list[tuple[str, str, str, str]]:
    """Every switch-to-switch link as (lower switch, its interface, upper switch, its interface).

    ``linux`` uses the configs' SONiC/FRR port names (``Ethernet0``, ``Ethernet8``, ...), which a
    Linux container takes as its interface names; ``sonic-vs`` uses ``ethN`` for front-panel port
    N, which SONiC's virtual switch maps to its own ports. Links in row order, then a dual-ToR
    fabric's peer links, a leaf to b leaf on the same whole (not broken-out) ports: ports 63 and 64
    of a 64-port leaf of 4 lanes a port are ``Ethernet248`` and ``Ethernet252`` on both.
    ``port_names``: :func:`~topo.fabric.switch_port_names` of the cabled links, if already made.
    """
    return list(zip(*_switch_ends(fabric, kind, port_names)))


def _switch_ends(fabric: Fabric, kind: str,
                 port_names: tuple[list[str], list[str]] | None) -> tuple[list[str], ...]:
    """:func:`switch_interfaces` as four columns (lower switch, its interface, upper switch, its
    interface), the interface names checked."""
    links = all_links(fabric)
    rows = np.flatnonzero(links.kind >= 1)
    if kind == "sonic-vs":  # whole ports only (a fabric with broken-out switch ports is refused)
        lo_name = [f"eth{p}" for p in links.lo_port[rows].tolist()]
        hi_name = [f"eth{p}" for p in links.hi_port[rows].tolist()]
    else:
        lo_all, hi_all = port_names or switch_port_names(fabric, links)
        pick = rows.tolist()
        lo_name, hi_name = [lo_all[r] for r in pick], [hi_all[r] for r in pick]
    _check_interface_names(lo_name, hi_name)
    names = _name_array(fabric)
    return names[links.lo[rows]].tolist(), lo_name, names[links.hi[rows]].tolist(), hi_name


def _name_array(fabric: Fabric) -> np.ndarray:
    """The fabric's vertex names as an object array, to pick many at once by index."""
    names = np.empty(len(fabric.names), dtype=object)
    names[:] = fabric.names
    return names


def _check_interface_names(*columns: list[str]) -> None:
    longest = max((len(n) for column in columns for n in set(column)), default=0)
    if longest > MAX_INTERFACE_NAME:
        raise ExportError(f"interface names of up to {longest} characters exceed Linux's "
                          f"{MAX_INTERFACE_NAME}; containerlab cannot create them")


def server_interface(link: int) -> str:
    """A server container's interface for its server link ``link`` (``lo_port``): ``eth{link + 1}``
    (containerlab keeps ``eth0`` for management). With dual-ToR, link ``2r + m`` is member ``m`` of
    NIC ``r``'s bond: ``eth1`` and ``eth2`` are NIC 0's members, to its a and b leaf.

    >>> [server_interface(r * 2 + m) for r in (0, 3) for m in (0, 1)]
    ['eth1', 'eth2', 'eth7', 'eth8']
    """
    return f"eth{link + 1}"


def server_interfaces(fabric: Fabric) -> list[tuple[str, str, str, str]]:
    """Dual-ToR: every server link as (server, its interface, leaf, its interface), in row order;
    empty without dual-ToR (a lab of single-homed servers is left to the user).

    The server end is :func:`server_interface` of the link's ``lo_port`` (``r * 2 + m``); the leaf
    end is the configs' name of the broken-out down port lane (``topo.addressing.sonic_port_name``
    with the plan's breakout): both members of a NIC have the same name on the two leaves.
    """
    return list(zip(*_server_ends(fabric)))


def _server_ends(fabric: Fabric) -> tuple[list[str], ...]:
    """:func:`server_interfaces` as four columns (server, its interface, leaf, its interface)."""
    if fabric.plan.homes != 2:
        return [], [], [], []
    links = fabric.links
    rows = np.flatnonzero(links.kind == 0)
    lanes, breakout = fabric.addressing.tier_lanes(1), fabric.plan.breakout
    server_name = [server_interface(nic) for nic in links.lo_port[rows].tolist()]
    leaf_name = sonic_port_names(links.hi_port[rows], links.lane[rows], lanes, breakout)
    _check_interface_names(server_name, leaf_name)
    names = _name_array(fabric)
    return names[links.lo[rows]].tolist(), server_name, names[links.hi[rows]].tolist(), leaf_name


def _server_commands(fabric: Fabric) -> dict[int, list[str]]:
    """Dual-ToR, per server vertex: the ``exec:`` commands that bond each NIC's two member links
    (LACP towards the leaf pair) and give the bond its address in the pair's subnet, as
    ``fabric.addressing.link_ip`` has it (the same on both members)."""
    links = fabric.links
    rows = np.flatnonzero(links.kind == 0)
    rows = rows[np.lexsort((links.lo_port[rows], links.lo[rows]))]
    member0 = rows[links.lo_port[rows] % 2 == 0]
    ips = ip_text(fabric.addressing.link_ip[member0])
    prefix = 33 - server_block_size(fabric.plan).bit_length()
    out: dict[int, list[str]] = {}
    for server, port, ip in zip(links.lo[member0].tolist(), links.lo_port[member0].tolist(), ips):
        bond = bond_name(port // 2)
        commands = out.setdefault(server, [])
        commands.append(f"ip link add {bond} type bond {CLAB_BOND_OPTIONS}")
        for member in (port, port + 1):
            eth = server_interface(member)
            commands += [f"ip link set {eth} down", f"ip link set {eth} master {bond}"]
        commands += [f"ip address add {ip}/{prefix} dev {bond}", f"ip link set {bond} up"]
    return out


def _lab_address_lines(fabric: Fabric, port_names: tuple[list[str], list[str]]) -> tuple[np.ndarray, list[str]]:
    """The ``exec:`` lines that give the switches' Linux containers their addresses, as (switch
    vertex of each line, the lines): each switch's loopback, and with numbered links each
    switch-to-switch /31 (the upper end even, the lower end odd), as the switch's config_db.json
    sets them on SONiC. A switch's lines in that order: its loopback, then its links in row order.
    ``port_names``: the cabled links' :func:`~topo.fabric.switch_port_names` (``fabric.links``
    come first in them)."""
    links, addressing = fabric.links, fabric.addressing
    first = fabric.first(1)
    vertex = [np.arange(first, len(fabric.names))]
    lines = [f'        - "ip address add {ip}/32 dev lo"\n' for ip in ip_text(addressing.loopback[first:])]
    if not fabric.spec.unnumbered:
        rows = np.flatnonzero(links.kind >= 1)
        lo_name, hi_name = port_names
        pick = rows.tolist()
        even = [f'        - "ip address add {ip}/31 dev {hi_name[r]}"\n'
                for ip, r in zip(ip_text(addressing.link_ip[rows]), pick)]
        odd = [f'        - "ip address add {ip}/31 dev {lo_name[r]}"\n'
               for ip, r in zip(ip_text(addressing.link_ip[rows] + 1), pick)]
        both = [""] * (2 * len(pick))  # each link's upper end, then its lower end
        both[0::2], both[1::2] = even, odd
        lines += both
        vertex.append(np.column_stack((links.hi[rows], links.lo[rows])).ravel())
    return np.concatenate(vertex), lines


def _switch_nodes(fabric: Fabric, kind: str, port_names: tuple[list[str], list[str]] | None) -> list[str]:
    """The ``nodes:`` entries of the switches, in vertex order: each one's group and binds, and
    for a Linux container the ``exec:`` lines that set its addresses (:func:`_lab_address_lines`)."""
    first = fabric.first(1)
    names, roles = fabric.names[first:], [ROLES[t] for t in fabric.tier[first:].tolist()]
    if kind != "linux":
        return [f"    {sw}:\n      group: {role}\n      binds:\n"
                f'        - "../switches/{sw}/config_db.json:/var/sonic/config_db.json"\n'
                f'        - "../switches/{sw}/frr.conf:/etc/frr/frr.conf"\n' for sw, role in zip(names, roles)]
    # SONiC sets the addresses on a switch (config_db.json); in a Linux container the lab does
    heads = [f"    {sw}:\n      group: {role}\n      binds:\n"
             f'        - "../switches/{sw}/frr.conf:/etc/frr/frr.conf"\n'
             '        - "daemons:/etc/frr/daemons"\n'
             '        - "vtysh.conf:/etc/frr/vtysh.conf"\n'
             "      exec:\n" for sw, role in zip(names, roles)]
    vertex, lines = _lab_address_lines(fabric, port_names)
    every = np.empty(len(heads) + len(lines), dtype=object)
    every[:len(heads)], every[len(heads):] = heads, lines
    # each switch's head, then its lines in the order made: a stable sort by vertex
    order = np.argsort(np.concatenate((np.arange(first, len(fabric.names)), vertex)), kind="stable")
    return every[order].tolist()


def clab_image(fabric: Fabric, kind: str = "linux") -> str:
    """The default container image of the lab's switches: for ``linux``, FRR's image of the spec's
    ``frr_version`` (``quay.io/frrouting/frr:10.5.4`` by default), the release every ``frr.conf``
    names, so the lab runs the FRR the configs are written for.

    >>> from topo import build_fabric, load_spec
    >>> clab_image(build_fabric(load_spec({"gpus": 256, "frr_version": "10.3"})))
    'quay.io/frrouting/frr:10.3'
    """
    return CLAB_KINDS[kind].format(frr_version=fabric.spec.frr_version)


def containerlab_topology(fabric: Fabric, kind: str = "linux", image: str | None = None) -> str:
    """The containerlab topology (``containerlab/NAME.clab.yml``) of the fabric's switches.

    One group per switch role sets the kind and image; each switch binds its generated config by
    a path relative to the ``containerlab`` folder (``../switches/<switch>/...``); each
    switch-to-switch link is one ``endpoints`` pair with the interface names the configs use.
    Servers are left out, except with dual-ToR and the ``linux`` kind: then every server is a
    ``linux`` node of :data:`CLAB_SERVER_IMAGE` (group ``node``) whose ``exec:`` list bonds each
    NIC's two links, and both member links of every NIC are cabled (:func:`server_interfaces`),
    before the switch-to-switch links; a dual-ToR fabric's peer links come last. Written as text
    (a fixed, simple layout), one node bind or link per line.
    """
    if kind not in CLAB_KINDS:
        raise ExportError(f"unknown containerlab kind {kind!r}; choose one of {', '.join(CLAB_KINDS)}")
    image = image or clab_image(fabric, kind)
    name = fabric.spec.name
    first_switch = fabric.first(1)
    switches = len(fabric.names) - first_switch
    servers = fabric.plan.homes == 2 and kind == "linux"  # dual-ToR: the servers and their bonds too
    roles = [ROLES[t] for t in range(1, fabric.plan.tiers + 1)]
    what = "FRR in Linux containers" if kind == "linux" else "SONiC virtual switches"
    whom = f"{switches:,} switches and {first_switch:,} servers" if servers else f"{switches:,} switches"
    out = [
        f"# containerlab lab of the {whom} of {name} ({what}), cabled as the configs in\n",
        f"# ../switches/ say. Written by topo {__version__}. Deploy from this folder:\n",
        f"#   containerlab deploy -t {name}.clab.yml\n",
        f"name: {json.dumps(name)}\n",
        "topology:\n",
        "  groups:\n",
    ]
    if servers:
        out.append(f"    {ROLES[0]}:\n      kind: \"linux\"\n      image: {json.dumps(CLAB_SERVER_IMAGE)}\n")
    for role in roles:
        out.append(f"    {role}:\n      kind: {json.dumps(kind)}\n      image: {json.dumps(image)}\n")
        if kind == "linux":
            out.append("      sysctls:\n"
                       "        net.ipv4.ip_forward: 1\n"
                       "        net.ipv6.conf.all.forwarding: 1\n")
    out.append("  nodes:\n")
    if servers:
        for v, commands in sorted(_server_commands(fabric).items()):
            out.append(f"    {fabric.names[v]}:\n      group: {ROLES[0]}\n      exec:\n")
            out.extend(f'        - "{c}"\n' for c in commands)
    # the SONiC names of every cabled link's ports, made once for the addresses and the links
    port_names = switch_port_names(fabric, all_links(fabric)) if kind == "linux" else None
    out += _switch_nodes(fabric, kind, port_names)
    ends = [_server_ends(fabric)] if servers else []
    ends.append(_switch_ends(fabric, kind, port_names))
    if any(column for column, *_ in ends):
        out.append("  links:\n")
        for a, ia, b, ib in ends:
            out += [f'    - endpoints: ["{x}:{ix}", "{y}:{iy}"]\n' for x, ix, y, iy in zip(a, ia, b, ib)]
    return "".join(out)


def frr_support_files(fabric: Fabric, user_dirs: Iterable[str | Path] = ()) -> dict[str, str]:
    """``containerlab/daemons`` (bgpd on; bfdd when the spec enables BFD) and
    ``containerlab/vtysh.conf``, from the templates in ``templates/exports``."""
    env = template_environment(user_dirs)
    context = {"bfd": bool(fabric.spec.bfd), "name": fabric.spec.name, "version": __version__}
    return {path: render_template(env, template, context) for path, template, _ in EXPORT_OUTPUTS}
