"""Graph and lab exports, read back by the programs they are for.

- GraphML: ``networkx.read_graphml`` gives back the same nodes, edges (parallel ones and their keys
  included) and attributes.
- DOT: Graphviz renders both files (``dot -Tsvg``), and Graphviz's own parser (``gvpr``) lists the
  same vertices and links as the fabric, or as the aggregation; every id is quoted.
- containerlab: the topology passes ``check-jsonschema`` against containerlab's schema (which uses
  JavaScript regexes that plain jsonschema cannot compile); every endpoint names a defined node,
  no interface is used twice, every interface is one the switch's frr.conf configures, and every
  bind points at a file of the build.
- dual-ToR (1,024 GPUs, rail and rack): the peer links are in every file, the server links are
  read back as (NIC, member) pairs, and the lab cables both members of every NIC.

Tests needing a missing program or the reference schema are skipped, saying which.
"""

from __future__ import annotations

import collections
import io
import ipaddress
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import networkx as nx
import numpy as np
import pytest
import yaml

from topo import build_fabric, load_spec
from topo.addressing import member_port, server_block_size, sonic_port_name
from topo.fabric import LINK_KINDS, PEER_KIND, PEER_LINK, PORT_ATTRS
from topo.outputs import exports
from topo.outputs.configs import config_files
from topo.outputs.exports import ExportError, aggregate, all_links, export_files, graphml_text

from .conftest import SHARED_REFERENCE, python_tool

DOT = shutil.which("dot")
GVPR = shutil.which("gvpr")
CHECK_JSONSCHEMA = python_tool("check-jsonschema")
CLAB_SCHEMA = SHARED_REFERENCE / "containerlab" / "clab.schema.json"

needs_dot = pytest.mark.skipif(
    DOT is None, reason="Graphviz 'dot' is not installed (apt-get install graphviz)")
needs_gvpr = pytest.mark.skipif(
    GVPR is None, reason="Graphviz 'gvpr' is not installed (apt-get install graphviz)")
needs_schema = pytest.mark.skipif(
    CHECK_JSONSCHEMA is None or not CLAB_SCHEMA.exists(),
    reason=("check-jsonschema is not installed (pip install check-jsonschema)" if CHECK_JSONSCHEMA is None
            else f"containerlab schema not found at {CLAB_SCHEMA} (a copy of srl-labs/containerlab's "
                 "schemas/clab.schema.json; absent in a user's clone)"),
)

SHAPES = {
    "two-tier": dict(gpus=256),  # 8 parallel links per leaf-spine pair
    "two-tier-rack": dict(gpus=512, placement="rack"),  # a node's NICs are parallel links to one leaf
    "three-tier": dict(gpus=16, gpus_per_node=1, radix=4, tiers=3),  # no parallel links at all
    # rack placement, 4 parallel links per spine-core pair
    "three-tier-parallel": dict(gpus=64, gpus_per_node=2, nics_per_node=1, radix=8, tiers=3,
                                placement="rack"),
    "host-names": dict(gpus=64, hostnames="gpu-{number:04d}"),  # gpu-0001: a DOT id that must be quoted
    # the shapes of docs/fabric.md "Fabric shapes"
    "rail-only": dict(gpus=64, tiers=1),
    "grown": dict(gpus=256, grow_to=1024),
    "undersubscribed": dict(gpus=960, oversubscription="15:17"),
    "two-planes": dict(gpus=128, nic_gbps=800, planes=2),
    "two-planes-three-tier": dict(gpus=16, gpus_per_node=1, nics_per_node=1, nic_gbps=800, planes=2, radix=4,
                                  tiers=3),
    "mixed-leaf-spine": dict(gpus=512, switch="eth-25t-64x400", spine_switch="eth-51t-128x400"),
    # tiers of different port speeds: the faster tier's ports broken out to the slower
    "spine-800g-over-400g-leaves": dict(gpus=256, switch="eth-25t-64x400", spine_switch="eth-51t-64x800"),
    "leaf-800g-under-400g-spines": dict(gpus=256, switch="eth-51t-64x800", spine_switch="eth-51t-128x400"),
    # leaf pairs: two half-speed member links per NIC (one to each leaf of a pair), peer links
    "dual-tor-rail": dict(gpus=1024, dual_tor=True),
    "dual-tor-rack": dict(gpus=256, dual_tor=True, placement="rack"),  # a node's members alternate a, b
}
#: Link kind names by kind number, the peer link's last.
KINDS = (*LINK_KINDS, PEER_LINK)


@pytest.fixture(scope="module", params=sorted(SHAPES))
def built(request):
    """(fabric, every file of its build folder: configs and exports)."""
    fabric = build_fabric(load_spec(SHAPES[request.param]))
    files = dict(config_files(fabric))
    files.update(export_files(fabric))
    return fabric, files


def write(tmp_path: Path, files: dict[str, str], *paths: str) -> list[Path]:
    out = []
    for rel in paths:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[rel])
        out.append(path)
    return out


# --------------------------------------------------------------------------------------------
# GraphML


def test_graphml_reads_back_equal(built):
    fabric, files = built
    g = fabric.graph
    text = files["graph/fabric.graphml"]
    back = nx.read_graphml(io.StringIO(text), force_multigraph=True)
    assert isinstance(back, nx.MultiGraph) and not back.is_directed()
    assert list(back.nodes) == list(g.nodes)
    assert dict(back.nodes(data=True)) == dict(g.nodes(data=True))
    assert back.graph["name"] == fabric.spec.name
    links = all_links(fabric)  # fabric.links, then the peer links of a dual-ToR fabric
    assert back.number_of_edges() == g.number_of_edges() == len(links)
    # parallel edges: the same number of edges, with the same attributes, between every pair
    def by_pair(graph):
        return sorted((min(u, v), max(u, v), sorted(d.items())) for u, v, d in graph.edges(data=True))
    assert by_pair(back) == by_pair(g)
    # edge ids (read back as keys) are the link numbers, the rows of design.json's links; a
    # dual-ToR fabric's peer links follow
    names, homes = fabric.names, fabric.plan.homes
    for u, v, r, d in back.edges(keys=True, data=True):
        k = int(links.kind[r])
        assert {u, v} == {names[links.lo[r]], names[links.hi[r]]} and d["kind"] == KINDS[k]
        if k == PEER_KIND:  # the same port on both leaves of the pair
            assert (d["leaf_port"], d["peer_port"]) == (links.lo_port[r], links.hi_port[r])
            assert r >= len(fabric.links)
        elif k == 0 and homes == 2:  # server link r * 2 + m: member m of NIC r's bond
            assert (d["nic"], d["member"], d["leaf_port"]) == (*divmod(int(links.lo_port[r]), 2), links.hi_port[r])
        else:
            lo_attr, hi_attr = PORT_ATTRS[k]
            assert (d[lo_attr], d[hi_attr]) == (links.lo_port[r], links.hi_port[r])
    ids = re.findall(r'<edge id="([^"]+)"', text)
    assert ids == [str(i) for i in range(len(links))]  # unique, as yEd and Gephi need
    # written a link kind at a time from the arrays: the text of the generic writer, edge by edge
    assert text == graphml_text(g, exports.fabric_edges(fabric))
    # networkx's own writer gives the same nodes, edges and attributes
    theirs = io.BytesIO()
    nx.write_graphml(g, theirs)
    theirs.seek(0)
    ref = nx.read_graphml(theirs, force_multigraph=True)
    assert dict(ref.nodes(data=True)) == dict(back.nodes(data=True))
    assert by_pair(ref) == by_pair(back)


def test_graphml_parallel_edges_make_a_multigraph():
    fabric = build_fabric(load_spec(SHAPES["two-tier"]))
    back = nx.read_graphml(io.StringIO(graphml_text(fabric.graph)))  # no force_multigraph
    assert isinstance(back, nx.MultiGraph)
    leaf, spine = "cluster-leaf-su00-r1", "cluster-spine-00"
    assert len(back[leaf][spine]) == fabric.plan.leaf_spine_links == 8
    assert sorted(d["leaf_port"] for d in back[leaf][spine].values()) == list(range(33, 41))


def test_graphml_without_parallel_edges_reads_as_graph():
    """networkx returns a Graph when no pair has parallel edges, unless force_multigraph=True."""
    fabric = build_fabric(load_spec(SHAPES["three-tier"]))
    text = graphml_text(fabric.graph)
    assert type(nx.read_graphml(io.StringIO(text))) is nx.Graph
    back = nx.read_graphml(io.StringIO(text), force_multigraph=True)
    assert type(back) is nx.MultiGraph and back.number_of_edges() == len(fabric.links)


def test_graphml_types_and_escaping():
    g = nx.MultiGraph(name="a&b")
    g.add_node("x<1>", label='say "hi" & go', ok=True, weight=0.5, asn=4294967294)
    g.add_node("y", weight=2)  # int and float under one name: written as double
    g.add_edge("x<1>", "y", key=3, kind="k", skip=None)
    back = nx.read_graphml(io.StringIO(graphml_text(g)), force_multigraph=True)
    assert back.nodes["x<1>"] == {"label": 'say "hi" & go', "ok": True, "weight": 0.5, "asn": 4294967294}
    assert back.nodes["y"] == {"weight": 2.0}
    assert list(back.edges(keys=True, data=True)) == [("x<1>", "y", 0, {"kind": "k"})]
    assert back.graph["name"] == "a&b"


def test_graphml_rejects_values_it_cannot_hold():
    g = nx.MultiGraph()
    g.add_node("a", ports=[1, 2])
    with pytest.raises(ExportError, match="node attribute 'ports'"):
        graphml_text(g)
    g = nx.MultiGraph()
    g.add_node("a", x=1)
    g.add_node("b", x="one")
    with pytest.raises(ExportError, match="both long and string"):
        graphml_text(g)


# --------------------------------------------------------------------------------------------
# DOT

#: Words allowed outside quoted strings in our DOT files: keywords, attribute names, values.
DOT_WORDS = {
    "graph", "node", "edge", "subgraph", "rank", "same", "rankdir", "BT", "newrank", "true",
    "ranksep", "nodesep", "splines", "line", "outputorder", "edgesfirst", "shape", "box", "style",
    "filled", "fontname", "fontsize", "height", "penwidth", "fillcolor", "color", "label", "role",
    "tier", "kind", "bandwidth_gbps", "members", "links", "dashed",
}
QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


def unquoted_words(text: str) -> set[str]:
    """Every word of a DOT text outside quoted strings and comments."""
    text = QUOTED.sub(" ", text)
    text = re.sub(r"^\s*//.*$", " ", text, flags=re.M)
    leftover = re.sub(r"[A-Za-z_][A-Za-z0-9_]*|\d+(\.\d+)?|--|[{}\[\];,=]|\s", "", text)
    assert leftover == "", f"unexpected characters outside quotes: {leftover[:80]!r}"
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def graphviz_read(path: Path) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(vertices as (name, role, tier), edges as (tail, head, kind)) as Graphviz's parser reads them."""
    program = ('N { printf("N\\t%s\\t%s\\t%s\\n", $.name, $.role, $.tier) } '
               'E { printf("E\\t%s\\t%s\\t%s\\n", $.tail.name, $.head.name, $.kind) }')
    out = subprocess.run([GVPR, program, str(path)], capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    return [tuple(r[1:]) for r in rows if r[0] == "N"], [tuple(r[1:]) for r in rows if r[0] == "E"]


def test_every_dot_id_is_quoted(built):
    fabric, files = built
    for rel in ("graph/fabric.dot", "graph/fabric-aggregate.dot"):
        words = unquoted_words(files[rel])
        assert words <= DOT_WORDS, f"{rel}: unquoted {sorted(words - DOT_WORDS)[:5]}"


@needs_dot
def test_graphviz_renders_both(built, tmp_path):
    _, files = built
    for path in write(tmp_path, files, "graph/fabric.dot", "graph/fabric-aggregate.dot"):
        result = subprocess.run([DOT, "-Tsvg", str(path), "-o", str(path.with_suffix(".svg"))],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stderr == "", result.stderr  # not even a warning
        assert path.with_suffix(".svg").stat().st_size > 0


@needs_gvpr
def test_full_dot_reads_back_as_the_fabric(built, tmp_path):
    fabric, files = built
    (path,) = write(tmp_path, files, "graph/fabric.dot")
    vertices, edges = graphviz_read(path)
    roles = ("node", "leaf", "spine", "core")
    assert vertices == [(n, roles[int(t)], str(int(t))) for n, t in zip(fabric.names, fabric.tier)]
    links = all_links(fabric)
    expected = [(fabric.names[a], fabric.names[b], KINDS[k])
                for a, b, k in zip(links.lo.tolist(), links.hi.tolist(), links.kind.tolist())]
    assert len(edges) == len(links)
    assert collections.Counter(edges) == collections.Counter(expected)


@needs_gvpr
def test_aggregate_dot_reads_back_as_the_aggregation(built, tmp_path):
    fabric, files = built
    agg = aggregate(fabric)
    (path,) = write(tmp_path, files, "graph/fabric-aggregate.dot")
    vertices, edges = graphviz_read(path)
    assert sorted(v[0] for v in vertices) == sorted(g.id for g in agg.groups)
    assert sorted(edges) == sorted((e.a, e.b, e.kind) for e in agg.edges)


def test_aggregation_accounts_for_everything(built):
    fabric, _ = built
    agg = aggregate(fabric)
    links = all_links(fabric)
    assert sum(g.members for g in agg.groups) == len(fabric.names)
    assert sum(e.links for e in agg.edges) == len(links)
    assert sum(e.bandwidth_gbps for e in agg.edges) == int(links.gbps.sum())
    assert len({g.id for g in agg.groups}) == len(agg.groups)
    assert len({(e.a, e.b) for e in agg.edges}) == len(agg.edges)
    plan = fabric.plan
    per_tier = collections.Counter(g.tier for g in agg.groups)
    groups_below = plan.sus if plan.placement == "rail" else plan.plane_pods
    # leaves: a group per plane, and with dual-ToR per side (a, b) of the unit's pairs
    assert per_tier[0] == groups_below and per_tier[1] == groups_below * plan.planes * plan.homes
    assert per_tier[2] == (plan.pods if plan.tiers > 1 else 0)  # one tier: no spines
    assert per_tier[3] == (plan.spines_per_pod * plan.planes if plan.tiers == 3 else 0)


def test_aggregate_groups_rack_leaves_by_pod():
    fabric = build_fabric(load_spec(dict(gpus=128, gpus_per_node=1, nics_per_node=1, radix=8,
                                         tiers=3, placement="rack")))
    agg = aggregate(fabric)
    assert agg.leaf_grouping == "pod"
    leaves = [g for g in agg.groups if g.tier == 1]
    assert len(leaves) == fabric.plan.pods and fabric.plan.sus > fabric.plan.pods
    assert all(g.members == fabric.plan.leaves_per_pod for g in leaves)


def test_dual_tor_counts(tmp_path):
    """1,024 GPUs, dual-ToR, rail: 128 nodes of 8 NICs, 2 SUs of 8 leaf pairs, 15 spines. Every file
    has 2 x 8 x 128 server links, 32 leaves x 30 uplinks and 16 pairs x 2 peer links."""
    fabric = build_fabric(load_spec(SHAPES["dual-tor-rail"]))
    plan = fabric.plan
    counts = {"node-leaf": 2 * 8 * 128, "leaf-spine": 32 * 30, PEER_LINK: 16 * 2}
    assert counts == {"node-leaf": plan.nodes * plan.nic_rails * plan.homes,
                      "leaf-spine": plan.leaves * plan.leaf_up_ports, PEER_LINK: plan.pairs * plan.peer_ports}
    files = export_files(fabric, configs=False)
    back = nx.read_graphml(io.StringIO(files["graph/fabric.graphml"]), force_multigraph=True)
    assert collections.Counter(d["kind"] for *_, d in back.edges(data=True)) == counts
    assert collections.Counter(re.findall(r'kind="([^"]+)", bandwidth_gbps', files["graph/fabric.dot"])) == counts
    agg = aggregate(fabric)
    assert [g.id for g in agg.groups] == ["nodes-su00", "nodes-su01", "leaves-su00a", "leaves-su00b",
                                          "leaves-su01a", "leaves-su01b", "spines-p00"]
    by_kind = collections.defaultdict(list)
    for e in agg.edges:
        by_kind[e.kind].append((e.a, e.b, e.links, e.bandwidth_gbps))
    # each side gets member m of all 8 NICs of the SU's 64 nodes, at 200G; a pair's peer link is 2 x 400G
    assert by_kind["node-leaf"] == [(f"nodes-su0{u}", f"leaves-su0{u}{s}", 512, 512 * 200) for u in (0, 1) for s in "ab"]
    assert by_kind[PEER_LINK] == [(f"leaves-su0{u}a", f"leaves-su0{u}b", 16, 16 * 400) for u in (0, 1)]
    assert [e[2] for e in by_kind["leaf-spine"]] == [8 * 30] * 4
    assert 'subgraph "cluster_leaves-su01" {\n    label="SU 1: 8 leaf pairs";' in files["graph/fabric-aggregate.dot"]


def test_full_dot_left_out_above_the_threshold(monkeypatch):
    fabric = build_fabric(load_spec(SHAPES["two-tier"]))
    monkeypatch.setattr(exports, "FULL_DOT_MAX_LINKS", len(fabric.links) - 1)
    files = export_files(fabric, configs=False)
    assert "graph/fabric.dot" not in files
    assert {"graph/fabric.graphml", "graph/fabric-aggregate.dot"} <= set(files)


# --------------------------------------------------------------------------------------------
# containerlab


def clab_problems(topology: dict, files: dict[str, str], clab_path: str) -> list[str]:
    """What containerlab would trip over that its schema does not check."""
    problems = []
    nodes = topology["topology"]["nodes"]
    used: dict[tuple[str, str], int] = {}
    for i, link in enumerate(topology["topology"].get("links", [])):
        for end in link["endpoints"]:
            node, _, iface = end.partition(":")
            if node not in nodes:
                problems.append(f"link {i}: endpoint {end} names no defined node")
            if not iface or len(iface) > 15 or "/" in iface or " " in iface:
                problems.append(f"link {i}: {iface!r} is not a Linux interface name")
            if (node, iface) in used:
                problems.append(f"link {i}: {end} already used by link {used[node, iface]}")
            used[node, iface] = i
    folder = PurePosixPath(clab_path).parent
    for name, node in nodes.items():
        for bind in node.get("binds", []):
            src = bind.split(":")[0]
            resolved = str(PurePosixPath(*_normalise(folder / src)))
            if resolved not in files:
                problems.append(f"{name}: bind source {src} ({resolved}) is not a file of the build")
    return problems


def _normalise(path: PurePosixPath) -> list[str]:
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            parts.pop()
        elif part != ".":
            parts.append(part)
    return parts


def test_containerlab_endpoints_and_binds(built):
    fabric, files = built
    rel = f"containerlab/{fabric.spec.name}.clab.yml"
    topology = yaml.safe_load(files[rel])
    assert clab_problems(topology, files, rel) == []
    dual = fabric.plan.homes == 2  # a dual-ToR lab has the servers too, and the peer links
    first = 0 if dual else fabric.first(1)
    assert list(topology["topology"]["nodes"]) == list(fabric.names[first:])
    links = topology["topology"].get("links", [])  # one tier: no switch-to-switch links
    server_links = int((fabric.links.kind == 0).sum()) if dual else 0
    assert len(links) == server_links + int((all_links(fabric).kind >= 1).sum())
    # each switch end is an interface the switch's frr.conf configures, facing the other end
    servers = set(fabric.names[:fabric.first(1)])
    for link in links:
        (a, ia), (b, ib) = (end.split(":") for end in link["endpoints"])
        if a in servers:  # the leaf's port faces member m of the server's NIC r: its eth{2r + m + 1}
            port = member_port(*divmod(int(ia.removeprefix("eth")) - 1, 2))
            assert f"interface {ib}\n description to {a}:{port}\n" in files[f"switches/{b}/frr.conf"]
            continue
        conf_a = files[f"switches/{a}/frr.conf"]
        assert f"interface {ia}\n description to {b}:{ib}\n" in conf_a
        assert f"interface {ib}\n description to {a}:{ia}\n" in files[f"switches/{b}/frr.conf"]


@needs_schema
@pytest.mark.parametrize("kind", ["linux", "sonic-vs"])
@pytest.mark.parametrize("shape", ["two-tier", "three-tier", "rail-only", "two-planes", "mixed-leaf-spine",
                                   "dual-tor-rail"])
def test_containerlab_passes_the_schema(kind, shape, tmp_path):
    fabric = build_fabric(load_spec(SHAPES[shape]))
    files = export_files(fabric, kind=kind)
    rel = f"containerlab/{fabric.spec.name}.clab.yml"
    (path,) = write(tmp_path, files, rel)
    result = subprocess.run([CHECK_JSONSCHEMA, "--schemafile", str(CLAB_SCHEMA), str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_schema
def test_schema_check_catches_a_broken_file(tmp_path):
    """The validator really validates: a wrong kind and a one-ended link are refused."""
    fabric = build_fabric(load_spec(SHAPES["three-tier"]))
    text = export_files(fabric)[f"containerlab/{fabric.spec.name}.clab.yml"]
    broken = text.replace('kind: "linux"', 'kind: "linuxx"', 1)
    path = tmp_path / "broken.clab.yml"
    path.write_text(broken)
    result = subprocess.run([CHECK_JSONSCHEMA, "--schemafile", str(CLAB_SCHEMA), str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0


def test_containerlab_sonic_vs():
    fabric = build_fabric(load_spec(SHAPES["two-tier"]))
    files = dict(config_files(fabric))
    files.update(export_files(fabric, kind="sonic-vs", image="docker-sonic-vs:202405"))
    rel = "containerlab/cluster.clab.yml"
    topology = yaml.safe_load(files[rel])
    assert clab_problems(topology, files, rel) == []
    assert "containerlab/daemons" not in files
    assert topology["topology"]["groups"]["leaf"] == {"kind": "sonic-vs", "image": "docker-sonic-vs:202405"}
    node = topology["topology"]["nodes"]["cluster-leaf-su00-r0"]
    assert "../switches/cluster-leaf-su00-r0/config_db.json:/var/sonic/config_db.json" in node["binds"]
    # front-panel port 33 (the first uplink of a leaf) is eth33; spine port 1 is eth1
    first = topology["topology"]["links"][0]
    assert first == {"endpoints": ["cluster-leaf-su00-r0:eth33", "cluster-spine-00:eth1"]}


def test_containerlab_dual_tor():
    """Both members of every NIC cabled from the server's eth2r+1, eth2r+2 to the same leaf port of
    the pair's a and b leaf, bonded with the NIC's address; the peer links on the leaves' last ports."""
    fabric = build_fabric(load_spec(SHAPES["dual-tor-rail"]))
    plan, names = fabric.plan, fabric.names
    topology = yaml.safe_load(export_files(fabric)["containerlab/cluster.clab.yml"])["topology"]
    assert topology["groups"]["node"] == {"kind": "linux", "image": exports.CLAB_SERVER_IMAGE}
    ends = {}  # (server, interface) -> (leaf, interface)
    for link in topology["links"]:
        (a, ia), (b, ib) = (end.split(":") for end in link["endpoints"])
        if a.startswith("cluster-node"):
            ends[a, ia] = (b, ib)
    assert len(ends) == plan.nodes * plan.nic_rails * 2
    prefix = 32 - (server_block_size(plan).bit_length() - 1)
    links = fabric.links
    lanes = fabric.addressing.tier_lanes(1)
    for node in (0, plan.nodes - 1):
        server = names[node]
        commands = topology["nodes"][server]["exec"]
        assert len(commands) == 7 * plan.nic_rails
        for r in range(plan.nic_rails):
            (leaf_a, port_a), (leaf_b, port_b) = ends[server, f"eth{2 * r + 1}"], ends[server, f"eth{2 * r + 2}"]
            assert leaf_a[:-1] == leaf_b[:-1] and (leaf_a[-1], leaf_b[-1]) == ("a", "b") and port_a == port_b
            row = int(np.flatnonzero((links.lo == node) & (links.lo_port == 2 * r))[0])
            assert port_a == sonic_port_name(int(links.hi_port[row]), int(links.lane[row]), lanes, plan.breakout)
            address = ipaddress.IPv4Address(int(fabric.addressing.link_ip[row]))
            assert commands[7 * r:7 * r + 7] == [
                f"ip link add bond{r} type bond {exports.CLAB_BOND_OPTIONS}",
                f"ip link set eth{2 * r + 1} down", f"ip link set eth{2 * r + 1} master bond{r}",
                f"ip link set eth{2 * r + 2} down", f"ip link set eth{2 * r + 2} master bond{r}",
                f"ip address add {address}/{prefix} dev bond{r}", f"ip link set bond{r} up"]
    # the last two ports of a 64-port leaf of 4 lanes a port (400G) carry the peer link, on both leaves
    assert topology["links"][-2:] == [
        {"endpoints": [f"cluster-leaf-su01-r7a:Ethernet{p}", f"cluster-leaf-su01-r7b:Ethernet{p}"]} for p in (248, 252)]
    # sonic-vs: the switches only, peer links by front-panel port
    vs = yaml.safe_load(export_files(fabric, kind="sonic-vs")["containerlab/cluster.clab.yml"])["topology"]
    assert list(vs["nodes"]) == list(names[fabric.first(1):]) and "node" not in vs["groups"]
    assert len(vs["links"]) == plan.leaves * plan.leaf_up_ports + plan.pairs * plan.peer_ports
    assert vs["links"][-1] == {"endpoints": ["cluster-leaf-su01-r7a:eth64", "cluster-leaf-su01-r7b:eth64"]}


def test_containerlab_daemons_follow_bfd():
    plain = export_files(build_fabric(load_spec(SHAPES["two-tier"])))
    bfd = export_files(build_fabric(load_spec(dict(gpus=256, bfd=True))))
    assert "bgpd=yes" in plain["containerlab/daemons"] and "bfdd=no" in plain["containerlab/daemons"]
    assert "bfdd=yes" in bfd["containerlab/daemons"]
    assert "service integrated-vtysh-config" in plain["containerlab/vtysh.conf"]


@pytest.mark.parametrize("frr_version", [None, "10.3", "8.4.4"])
def test_containerlab_runs_the_frr_the_configs_are_written_for(frr_version, tmp_path):
    """One source of truth: the lab's FRR image is the release each frr.conf names (the spec's
    frr_version), through the library and the CLI."""
    fields = dict(gpus=256) if frr_version is None else dict(gpus=256, frr_version=frr_version)
    fabric = build_fabric(load_spec(fields))
    want = fabric.spec.frr_version
    assert want == (frr_version or "10.5.4")
    topology = yaml.safe_load(export_files(fabric)["containerlab/cluster.clab.yml"])["topology"]
    assert {g["image"] for g in topology["groups"].values()} == {f"quay.io/frrouting/frr:{want}"}
    conf = dict(config_files(fabric))["switches/cluster-leaf-su00-r0/frr.conf"]
    assert f"frr version {want}\n" in conf
    # an image given explicitly still wins
    given = export_files(fabric, image="registry.example/frr:mine")["containerlab/cluster.clab.yml"]
    assert 'image: "registry.example/frr:mine"' in given and "frrouting" not in given
    if frr_version:
        from click.testing import CliRunner
        from topo.cli import main
        out = tmp_path / "lab"
        result = CliRunner().invoke(main, ["build", "--gpus", "256", "--frr-version", frr_version, "-o", str(out),
                                           "-q", "--no-analysis"])
        assert result.exit_code == 0, result.output
        assert f'image: "quay.io/frrouting/frr:{frr_version}"' in (out / "containerlab/cluster.clab.yml").read_text()
        assert f"frr version {frr_version}\n" in (out / "switches/cluster-leaf-su00-r0/frr.conf").read_text()


def test_no_containerlab_without_configs():
    fabric = build_fabric(load_spec(SHAPES["two-tier"]))
    assert not any(p.startswith("containerlab/") for p in export_files(fabric, configs=False))
    infiniband = build_fabric(load_spec(dict(gpus=256, switch="ndr-64x400")))
    assert sorted(export_files(infiniband)) == ["graph/fabric-aggregate.dot", "graph/fabric.dot",
                                                "graph/fabric.graphml", "graph/fabric.svg"]


def test_unknown_kind():
    fabric = build_fabric(load_spec(SHAPES["three-tier"]))
    with pytest.raises(ExportError, match="unknown containerlab kind 'ceos'; choose one of linux, sonic-vs"):
        export_files(fabric, kind="ceos")


def test_deterministic():
    spec = SHAPES["three-tier-parallel"]
    assert export_files(build_fabric(load_spec(spec))) == export_files(build_fabric(load_spec(spec)))
