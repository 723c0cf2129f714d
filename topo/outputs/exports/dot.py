"""Graphviz DOT: every server, switch and link (``graph/fabric.dot``, tiers as ranks), and the
aggregate view (``graph/fabric-aggregate.dot``): one vertex per group of servers, leaves, spines or
cores (:func:`aggregate`) and one edge per pair of connected groups, labelled with its link count
and total Gb/s, a few hundred vertices even at the largest sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import __version__
from ...fabric import KIND_NAMES, PEER_KIND, ROLES, Fabric
from ...fabric import cabled_links as all_links

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
