"""Rank placement: host and rank files for launchers, and the fabric's shape for the Slurm scheduler.

:func:`placement_files` returns ``{relative path: text}`` for

``placement/hostfile``
    Open MPI hostfile, ``host slots=GPUS`` per node, in placement order.
``placement/rankfile``
    Open MPI rankfile, ``rank N=host slot=S`` for every GPU; ranks are node-major, so a rank's local
    rank is its GPU index ``S`` (and GPU ``S`` uses NIC ``S * nics_per_node // gpus_per_node``).
``placement/deepspeed-hostfile``
    DeepSpeed hostfile, ``host slots=GPUS`` (no comments or blank lines: older DeepSpeed rejects them).
``placement/topology.conf``
    Slurm ``topology/tree``: one switch entry per scalable unit, then pods and a top entry.
``placement/topology-block.conf``
    Slurm ``topology/block`` in ``topology.conf`` form (Slurm 24.05+): one block per scalable unit,
    or, for a rack-scale server profile (an NVL72 compute tray), one block per NVLink domain.
``placement/topology.yaml``
    Slurm ``topology.yaml`` (Slurm 25.05+): the same blocks (the default topology) and the same tree.

A rack-scale profile's NVLink domain spans several servers (:attr:`ServerProfile.nvlink`,
``multi_node``): its ``nvlink_domain // gpus_per_node`` consecutive nodes in placement order are one
domain (:func:`nvlink_domains`), the unit a job's tensor-parallel groups must not leave, so the
blocks follow the domains instead of the scalable units.

Placement order is explicit: nodes sorted by pod, then scalable unit (in rack placement the SU is the
ToR leaf), then node index (:func:`placement_order`). The nodes of one SU are adjacent, so a
same-rank ring over a job's nodes crosses a leaf only where it passes from one SU to the next
(:func:`ring_edges`). The fabric's own node order already is this order; the sort keeps it true if
that ever changes.

Every fact the templates print is computed here; the templates (``templates/placement/``) only lay
them out. Host lists use Slurm's hostlist syntax, compressed by :func:`compress_hostlist` and read
back by :func:`expand_hostlist`. Names and reasons are in ``docs/placement.md``.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

import jinja2
import numpy as np

from .. import __version__
from ..fabric import Fabric
from ..hardware.servers import ServerProfile
from .templating import render_template, template_environment

#: Every placement file and the template it comes from, in output order.
PLACEMENT_OUTPUTS = (
    ("placement/hostfile", "placement/hostfile.j2"),
    ("placement/rankfile", "placement/rankfile.j2"),
    ("placement/deepspeed-hostfile", "placement/deepspeed-hostfile.j2"),
    ("placement/topology.conf", "placement/topology.conf.j2"),
    ("placement/topology-block.conf", "placement/topology-block.conf.j2"),
    ("placement/topology.yaml", "placement/topology.yaml.j2"),
)
#: Most block levels Slurm's topology/block takes (levels 0-15: up to 2**15 base blocks).
MAX_BLOCK_LEVELS = 16

_TRAILING_NUMBER = re.compile(r"(.*?)([0-9]+)")
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


# --- Slurm hostlists ------------------------------------------------------------------------------


def compress_hostlist(names: Iterable[str]) -> str:
    """Names as a Slurm hostlist expression, in the given order: ``gpu[0000-0031]``.

    A name splits into a prefix and a trailing number. Sequence-adjacent names with the same prefix
    go into one bracket; within it, consecutive numbers that print with the width of the range's
    first number (Slurm's rule: ``[08-10]`` is 08, 09, 10; ``[8-10]`` is 8, 9, 10) form a range.
    A name without a trailing number (or with nothing before it) is written as it is, so names that
    share no pattern (from a CSV table) become a plain comma list. :func:`expand_hostlist` gives
    back exactly the input, in order.

    Examples
    --------
    >>> compress_hostlist(["gpu0000", "gpu0001", "gpu0002", "gpu0003"])
    'gpu[0000-0003]'
    >>> compress_hostlist(["n8", "n9", "n10", "n12", "n012", "login", "x-leaf-00"])
    'n[8-10,12,012],login,x-leaf-00'
    >>> compress_hostlist(["a1"])
    'a1'
    """
    groups: list[tuple[str, list[list]]] = []  # (prefix, [[first digits, first, last], ...]); "" prefix = plain
    for name in names:
        m = _TRAILING_NUMBER.fullmatch(name)
        if m is None or not m.group(1):
            groups.append(("", [[name, 0, 0]]))
            continue
        prefix, digits = m.groups()
        value = int(digits)
        if groups and groups[-1][0] == prefix:
            ranges = groups[-1][1]
            head, _, last = ranges[-1]
            if value == last + 1 and f"{value:0{len(head)}d}" == digits:
                ranges[-1][2] = value
            else:
                ranges.append([digits, value, value])
        else:
            groups.append((prefix, [[digits, value, value]]))
    parts = []
    for prefix, ranges in groups:
        if not prefix:
            parts.append(ranges[0][0])
        elif len(ranges) == 1 and ranges[0][1] == ranges[0][2]:
            parts.append(prefix + ranges[0][0])
        else:
            inner = ",".join(
                head if first == last else f"{head}-{last:0{len(head)}d}" for head, first, last in ranges)
            parts.append(f"{prefix}[{inner}]")
    return ",".join(parts)


def expand_hostlist(expression: str) -> list[str]:
    """The names of a Slurm hostlist expression with at most one bracket per name, in order.

    ``[lo-hi]`` prints every number with the width of ``lo`` (as Slurm does); a comma outside
    brackets separates names.

    Examples
    --------
    >>> expand_hostlist("gpu[08-10],login,n[1,3-4]x")
    ['gpu08', 'gpu09', 'gpu10', 'login', 'n1x', 'n3x', 'n4x']

    Raises
    ------
    ValueError
        For an expression this reader does not take (nested or unbalanced brackets, bad ranges).
    """
    out: list[str] = []
    for part in _split_top_level(expression):
        if "[" not in part and "]" not in part:
            out.append(part)
            continue
        m = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)", part)
        if m is None:
            raise ValueError(f"hostlist {expression!r}: cannot read {part!r} (one bracket per name)")
        prefix, ranges, suffix = m.groups()
        for piece in ranges.split(","):
            r = _RANGE.fullmatch(piece)
            if r is None:
                raise ValueError(f"hostlist {expression!r}: bad range {piece!r}")
            lo, hi = r.group(1), r.group(2) if r.group(2) is not None else r.group(1)
            if int(hi) < int(lo):
                raise ValueError(f"hostlist {expression!r}: range {piece!r} runs backwards")
            out += [f"{prefix}{v:0{len(lo)}d}{suffix}" for v in range(int(lo), int(hi) + 1)]
    return out


def _split_top_level(expression: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expression):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(expression[start:i])
            start = i + 1
    parts.append(expression[start:])
    if depth != 0 or any(not p for p in parts):
        raise ValueError(f"hostlist {expression!r}: unbalanced brackets or an empty name")
    return parts


# --- order and facts ------------------------------------------------------------------------------


def placement_order(fabric: Fabric) -> np.ndarray:
    """Node indices in placement order: by pod, then scalable unit (rack: leaf), then node index.

    The nodes of one SU (in rack placement, of one ToR leaf) are adjacent, and SUs of one pod are
    adjacent, so same-rank rings stay on rail leaves except where they pass from one SU to the next.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> placement_order(build_fabric(load_spec({"gpus": 64, "gpus_per_node": 8}))).tolist()
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    n = fabric.plan.nodes
    return np.lexsort((np.arange(n), fabric.su[:n], fabric.pod[:n])).astype(np.int64)


def ring_edges(fabric: Fabric, order: np.ndarray | None = None) -> tuple[int, int]:
    """(ring edges, edges that leave their SU) of one same-rank ring over the nodes in ``order``.

    A ring over ``n`` nodes has ``n`` edges (node ``i`` to node ``i + 1``, the last back to the
    first; none for one node). An edge between nodes of one SU goes through one rail leaf (rack: one
    ToR); the others climb to a spine or core.

    >>> from topo import build_fabric, load_spec
    >>> ring_edges(build_fabric(load_spec({"gpus": 1024})))
    (128, 4)
    """
    order = placement_order(fabric) if order is None else np.asarray(order, dtype=np.int64)
    if order.size < 2:
        return 0, 0
    su = fabric.su[order]
    return int(order.size), int(np.count_nonzero(su != np.roll(su, -1)))


def gpu_nics(fabric: Fabric) -> list[int]:
    """The NIC (rail) of each local rank: GPU ``r`` uses NIC ``r * nics_per_node // gpus_per_node``."""
    gpus, nics = fabric.spec.gpus_per_node, fabric.spec.nic_ports
    return [r * nics // gpus for r in range(gpus)]


def block_sizes(unit_nodes: Sequence[int]) -> list[int]:
    """Slurm ``BlockSizes`` for blocks of these node counts: the base, then doubling up to all blocks.

    The base is the largest block (a full scalable unit); each next size is twice the previous, until
    one size holds every block (at most :data:`MAX_BLOCK_LEVELS` sizes).

    >>> block_sizes([32, 32, 32, 29])
    [32, 64, 128]
    >>> block_sizes([16])
    [16]
    """
    sizes = [max(unit_nodes)]
    while len(sizes) < MAX_BLOCK_LEVELS and 2 ** (len(sizes) - 1) < len(unit_nodes):
        sizes.append(sizes[-1] * 2)
    return sizes


def _span(names: Sequence[str]) -> str:
    """A short description of many switch names: their hostlist when it is one bracket, else first to last."""
    compressed = compress_hostlist(names)
    return compressed if len(_split_top_level(compressed)) == 1 else f"{names[0]} to {names[-1]}"


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _width(count: int, least: int) -> int:
    return max(least, len(str(max(count - 1, 0))))


def domain_trays(fabric: Fabric, server: ServerProfile | None = None) -> int:
    """Nodes (compute trays) of one NVLink domain in the job when the server profile's domain spans
    several servers (18 for an NVL72 tray of 4 GPUs, less the spec's ``spare_trays``, which are not
    in the fabric), else 0. ``server`` defaults to the spec's profile.

    >>> from topo import build_fabric, load_spec
    >>> domain_trays(build_fabric(load_spec({"gpus": 64})))
    0
    >>> domain_trays(build_fabric(load_spec({"gpus": 144, "gpus_per_node": 4, "nics_per_node": 4,
    ...                                      "server": "gb200-nvl72"})))
    18
    >>> domain_trays(build_fabric(load_spec({"gpus": 128, "server": "gb200-nvl72", "spare_trays": 2})))
    16
    """
    from ..hardware.racks import rack_plan

    if server is None:
        from ..hardware.catalog import resolve_server
        server = resolve_server(fabric.spec)
    racks = rack_plan(server, fabric.spec.gpus, fabric.spec.spare_trays)
    return racks.usable_trays if racks is not None else 0


def nvlink_domains(fabric: Fabric, server: ServerProfile | None = None,
                   order: np.ndarray | None = None) -> list[dict[str, Any]]:
    """The NVLink domains of a rack-scale profile's nodes, in placement order (none for a profile
    whose domain is one server): ``index``, ``name`` (``<name>-domainNN``), ``hosts`` (node names),
    ``nodes`` (their hostlist), ``node_count``, ``nodes_index`` (node indices) and ``about``.

    Domain ``d`` is nodes ``d * trays`` to ``(d + 1) * trays - 1`` of the placement order; a last
    domain of fewer trays (a GPU count that is not a whole number of racks) is kept, shorter.
    """
    trays = domain_trays(fabric, server)
    if not trays:
        return []
    order = placement_order(fabric) if order is None else order
    names, count = fabric.names, -(-order.size // trays)
    width = _width(count, 2)
    domains = []
    for d in range(count):
        members = order[d * trays:(d + 1) * trays].tolist()
        hosts = [names[v] for v in members]
        name = f"{fabric.spec.name}-domain{d:0{width}d}"
        domains.append({"index": d, "name": name, "hosts": hosts, "nodes": compress_hostlist(hosts),
                        "node_count": len(hosts), "nodes_index": members,
                        "about": f"{name}: NVLink domain of {_count(len(hosts), 'tray')}, {compress_hostlist(hosts)}"})
    return domains


def placement_facts(fabric: Fabric, server: ServerProfile | None = None) -> dict[str, Any]:
    """Everything the placement templates print, as plain data (documented in docs/placement.md).

    ``server`` is the build's server profile (default: the spec's); a rack-scale one makes the
    blocks the NVLink domains (:func:`nvlink_domains`).
    """
    spec, plan = fabric.spec, fabric.plan
    n, gpus = plan.nodes, spec.gpus_per_node
    rail = plan.placement == "rail"
    order = placement_order(fabric)
    units, starts, ends = _units(fabric, order)
    pods = _pods(fabric, units)
    top = _top(fabric, pods or units)
    sizes = [u["node_count"] for u in units]
    base = max(sizes)
    hosts = [{"name": fabric.names[v], "ranks": [(k * gpus + r, r) for r in range(gpus)]}
             for k, v in enumerate(order.tolist())]
    for unit, start, end in zip(units, starts.tolist(), ends.tolist()):
        unit["hosts"] = hosts[start:end]
    edges, crossing = ring_edges(fabric, order)
    domains = nvlink_domains(fabric, server, order)
    blocks = domains or units
    block_nodes = [b["node_count"] for b in blocks]
    trays = domains[0]["node_count"] if domains else 0
    unit_term = "scalable unit" if rail else "leaf pair" if plan.homes == 2 else "leaf"
    return {
        "version": __version__,
        "name": spec.name,
        "tiers": plan.tiers,
        "placement": plan.placement,
        "unit_term": unit_term,
        "gpus": n * gpus,
        "node_count": n,
        "gpus_per_node": gpus,
        "nics_per_node": spec.nic_ports,
        "gpu_nics": gpu_nics(fabric),
        "su_nodes": plan.su_nodes,
        "hosts": hosts,
        "units": units,
        "pods": pods,
        "pod_level": plan.tiers == 3 and bool(pods),
        "planes": plan.planes,
        "dual_tor": plan.homes == 2,
        "top": top,
        "tree": _tree(units, pods, top, rail),
        "domains": domains,
        "domain_trays": trays,
        "domain_gpus": trays * gpus,
        "blocks": blocks,
        "block_term": "NVLink domain" if domains else unit_term,
        "block_sizes": block_sizes(block_nodes),
        "partial_units": [u["name"] for u in units if u["node_count"] < base],
        "partial_blocks": [b["name"] for b in blocks if b["node_count"] < max(block_nodes)],
        "ring": {"edges": edges, "crossing": crossing, "leaf_local": edges - crossing},
    }


def _units(fabric: Fabric, order: np.ndarray) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    """The scalable units (rack placement: the leaves) in placement order with their nodes and
    leaves, and where each one's nodes start and end in ``order``."""
    spec, plan, names = fabric.spec, fabric.plan, fabric.names
    rail = plan.placement == "rail"
    node_pod = fabric.pod[:plan.nodes]
    leaf0 = fabric.first(1)
    leaf_su = fabric.su[leaf0:leaf0 + plan.leaves]
    su_in_order = fabric.su[:plan.nodes][order]
    starts = np.flatnonzero(np.r_[True, su_in_order[1:] != su_in_order[:-1]])
    ends = np.r_[starts[1:], order.size]
    ws = _width(plan.sus, 2)
    units = []
    for start, end in zip(starts.tolist(), ends.tolist()):
        s = int(su_in_order[start])
        members = order[start:end]
        leaves = [names[leaf0 + i] for i in np.flatnonzero(leaf_su == s).tolist()]
        hosts = [names[i] for i in members.tolist()]
        # rack: the real ToR leaf; with planes a rack has one in each plane, which one entry stands for
        # (and with dual-ToR the rack's pair of leaves)
        whole = plan.planes == 1 and plan.homes == 1  # one real leaf a rack
        name = f"{spec.name}-su{s:0{ws}d}" if rail else leaves[0] if whole else f"{spec.name}-rack{s:0{ws}d}"
        leaf_list = compress_hostlist(leaves)
        units.append({
            "index": s,
            "name": name,
            "pod": int(node_pod[members[0]]),
            "nodes": compress_hostlist(hosts),
            "node_count": len(hosts),
            "leaves": leaf_list,
            "leaf_count": len(leaves),
            "about": (f"{name}: {_count(len(hosts), 'node')} on rail leaves {leaf_list}" if rail
                      else f"leaf {name}: {_count(len(hosts), 'node')}" if whole
                      else f"{name}: {_count(len(hosts), 'node')} on leaves {leaf_list}"),
        })
    return units, starts, ends


def _pods(fabric: Fabric, units: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of a three-tier fabric with their units and spines; none when some unit's leaves
    lie in two pods (the unit would need two parents in the tree)."""
    spec, plan, names = fabric.spec, fabric.plan, fabric.names
    leaf0, spine0, core0 = fabric.first(1), fabric.first(2), fabric.first(3)
    leaf_su = fabric.su[leaf0:leaf0 + plan.leaves]
    # with planes, pod p of the tree stands for pod p of every plane (the planes are the same fabric)
    leaf_pod = fabric.pod[leaf0:leaf0 + plan.leaves] % plan.plane_pods
    units_in_one_pod = all(len(set(leaf_pod[leaf_su == u["index"]].tolist())) == 1 for u in units)
    pods: list[dict[str, Any]] = []
    if plan.tiers == 3 and units_in_one_pod:
        wp = _width(plan.pods, 2)
        spine_pod = fabric.pod[spine0:core0] % plan.plane_pods
        for p in sorted({u["pod"] for u in units}):
            pod_units = [u for u in units if u["pod"] == p]
            spines = [names[spine0 + i] for i in np.flatnonzero(spine_pod == p).tolist()]
            pods.append({
                "index": p,
                "name": f"{spec.name}-pod{p:0{wp}d}",
                "units": compress_hostlist(u["name"] for u in pod_units),
                "unit_count": len(pod_units),
                "spines": _span(spines),
                "spine_count": len(spines),
            })
    return pods


def _top(fabric: Fabric, children: list[dict[str, Any]]) -> dict[str, Any]:
    """The root of the tree: the spines (two tiers) or the cores (three), above ``children``; None
    in one tier, whose one unit is the whole tree."""
    spec, names = fabric.spec, fabric.names
    spine0, core0 = fabric.first(2), fabric.first(3)
    if fabric.plan.tiers == 1:
        return None
    if fabric.plan.tiers == 2:
        switches = [names[i] for i in range(spine0, core0)]
        name, role = f"{spec.name}-spines", "spines"
    else:
        switches = [names[i] for i in range(core0, len(names))]
        name, role = f"{spec.name}-cores", "cores"
    return {
        "name": name,
        "role": role,
        "children": compress_hostlist(c["name"] for c in children),
        "child_count": len(children),
        "switches": _span(switches),
        "switch_count": len(switches),
    }


def _tree(units: list[dict[str, Any]], pods: list[dict[str, Any]], top: dict[str, Any] | None,
          rail: bool) -> list[dict[str, Any]]:
    """The tree, leaves first: one entry per unit, then the pods, then the top."""
    tree = [{"name": u["name"], "nodes": u["nodes"], "switches": None,
             "about": f"{u['name']}: rail leaves {u['leaves']}" if rail
             else f"{u['name']}: leaves {u['leaves']}" if u["leaf_count"] > 1 else ""} for u in units]
    tree += [{"name": p["name"], "nodes": None, "switches": p["units"],
              "about": f"{p['name']}: {_count(p['spine_count'], 'spine')}, {p['spines']}"} for p in pods]
    if top is not None:
        tree.append({"name": top["name"], "nodes": None, "switches": top["children"],
                     "about": f"{top['name']}: {_count(top['switch_count'], top['role'][:-1])}, {top['switches']}"})
    return tree


def placement_files(fabric: Fabric, env: jinja2.Environment | None = None,
                    server: ServerProfile | None = None) -> dict[str, str]:
    """Every placement file of a build folder, by relative path (see the module docstring).

    ``env`` is a Jinja2 environment from :func:`topo.outputs.templating.template_environment` (the packaged
    templates when None). ``server`` is the server profile (default: the spec's). Same fabric, same bytes.

    Raises
    ------
    TemplateError
        When a (user) template fails to render.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> files = placement_files(build_fabric(load_spec({"gpus": 16})))
    >>> print(files["placement/deepspeed-hostfile"], end="")
    cluster-node0000 slots=8
    cluster-node0001 slots=8
    >>> [line for line in files["placement/topology.conf"].splitlines() if not line.startswith("#")]
    ['SwitchName=cluster-su00 Nodes=cluster-node[0000-0001]', 'SwitchName=cluster-spines Switches=cluster-su00']
    """
    env = env or template_environment()
    context = {"p": placement_facts(fabric, server)}
    return {path: render_template(env, template, context) for path, template in PLACEMENT_OUTPUTS}
