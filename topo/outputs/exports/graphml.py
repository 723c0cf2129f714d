"""GraphML (``graph/fabric.graphml``): the networkx graph with every graph, node and edge attribute,
parallel edges included, edge ids = link numbers (a dual-ToR fabric's peer links numbered after
them).

It is written here in one pass from the fabric's arrays (networkx's own writer builds an XML tree
first, is several times slower and repeats edge ids); ``networkx.read_graphml`` reads it back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from ...fabric import Fabric, Shared, edge_attributes, edge_ends, edge_groups, vertex_attributes
from .errors import ExportError

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx


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
