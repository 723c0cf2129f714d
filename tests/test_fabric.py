"""Builder invariants on many shapes: ports, rails, full meshes between tiers, graph = arrays."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topo import SpecError, build_fabric, load_spec
from topo.fabric import LINK_KINDS, PORT_ATTRS
from topo.summary import ports_used

SHAPES = [
    dict(gpus=1024),
    dict(gpus=256),
    dict(gpus=1000),
    dict(gpus=768, oversubscription=3),
    dict(gpus=1024, placement="rack"),
    dict(gpus=760, placement="rack", oversubscription=3),
    dict(gpus=128, gpus_per_node=1, radix=8, tiers=3),
    dict(gpus=4096),
    dict(gpus=1024, tiers=3),
    dict(gpus=2048, switch="eth-51t-64x800"),
    dict(gpus=512, gpus_per_node=8, nics_per_node=4),
    dict(gpus=3072, spine_oversubscription=3, tiers=3, radix=32),
    dict(gpus=512, spines=32),
]


def check_invariants(fabric):
    spec, plan, links = fabric.spec, fabric.plan, fabric.links
    k = spec.radix
    tier = fabric.tier
    # counts per role
    assert [fabric.count(t) for t in range(4)] == [plan.nodes, plan.leaves, plan.spines, plan.cores]
    assert len(set(fabric.names)) == len(fabric.names)
    # every link goes one tier up
    assert np.array_equal(tier[links.hi], tier[links.lo] + 1)
    assert np.array_equal(links.kind, tier[links.lo])
    # ports: switch ports within 1..radix, NICs within 0..nics-1, lanes within 1..breakout
    switch_lo = tier[links.lo] > 0
    assert links.lo_port[switch_lo].min(initial=1) >= 1 and links.lo_port[switch_lo].max(initial=1) <= k
    assert links.hi_port.min() >= 1 and links.hi_port.max() <= k
    nic_ports = links.lo_port[~switch_lo]
    assert nic_ports.min() >= 0 and nic_ports.max() < spec.nics_per_node
    assert links.lane.min() >= 1 and links.lane.max() <= plan.breakout
    # no port (or lane) is used twice
    ends = Counter(zip(links.lo.tolist(), links.lo_port.tolist()))
    ends.update(zip(links.hi.tolist(), (links.hi_port.astype(int) * 100 + links.lane).tolist()))
    assert max(ends.values()) == 1
    # no switch uses more ports than it has; every server uses all its NICs
    used = ports_used(fabric)
    assert used[tier > 0].max() <= k
    assert np.all(used[tier == 0] == spec.nics_per_node)
    # rail placement: NIC r of a node lands on the rail-r leaf of the node's scalable unit
    nl = links.kind == 0
    if plan.placement == "rail":
        assert np.array_equal(fabric.rail[links.hi[nl]], links.lo_port[nl])
        assert np.array_equal(fabric.su[links.hi[nl]], fabric.su[links.lo[nl]])
    else:  # rack: all NICs of a node on one leaf
        leaf_of = Counter(zip(links.lo[nl].tolist(), links.hi[nl].tolist()))
        assert len(leaf_of) == plan.nodes
    # every leaf meets every spine of its pod with the same number of parallel links
    ls = links.kind == 1
    pairs = Counter(zip(links.lo[ls].tolist(), links.hi[ls].tolist()))
    assert len(pairs) == plan.leaves * plan.spines_per_pod
    assert set(pairs.values()) == {plan.leaf_spine_links}
    assert np.array_equal(fabric.pod[links.lo[ls]], fabric.pod[links.hi[ls]])
    if plan.tiers == 3:
        sc = links.kind == 2
        pairs = Counter(zip(links.lo[sc].tolist(), links.hi[sc].tolist()))
        assert len(pairs) == plan.spines * plan.cores_per_group
        assert set(pairs.values()) == {plan.spine_core_links}
        spine_pos = (links.lo[sc] - fabric.first(2)) % plan.spines_per_pod
        assert np.array_equal(fabric.group[links.hi[sc]], spine_pos)
    # the graph says the same as the arrays
    g = fabric.graph
    assert g.number_of_nodes() == len(fabric.names)
    assert g.number_of_edges() == len(links)
    assert nx.is_connected(g)


@pytest.mark.parametrize("fields", SHAPES, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_invariants(fields):
    check_invariants(build_fabric(load_spec(fields)))


def test_graph_attributes_are_documented_ones(build):
    fabric = build(gpus=4096)
    g = fabric.graph
    node = g.nodes["cluster-node0000"]
    assert node == {"role": "node", "tier": 0, "index": 0, "su": 0, "pod": 0, "gpus": 8, "nics": 8}
    leaf = g.nodes["cluster-leaf-su05-r3"]
    assert leaf == {"role": "leaf", "tier": 1, "index": 43, "radix": 64, "asn": 64560,
                    "loopback": "10.255.0.44", "su": 5, "pod": 1, "rail": 3}
    assert g.nodes["cluster-spine-p01-07"] == {"role": "spine", "tier": 2, "index": 39, "radix": 64,
                                               "asn": 64514, "loopback": "10.255.0.168", "pod": 1}
    assert g.nodes["cluster-core-g07-01"] == {"role": "core", "tier": 3, "index": 15, "radix": 64,
                                              "asn": 64512, "loopback": "10.255.1.16", "group": 7}
    edge = g.get_edge_data("cluster-node0000", "cluster-leaf-su00-r3")
    assert edge == {0: {"kind": "node-leaf", "bandwidth_gbps": 400, "nic": 3, "leaf_port": 1, "lane": 1}}
    spine_core = g.get_edge_data("cluster-spine-p01-07", "cluster-core-g07-01")
    assert sorted(spine_core) == list(range(16))
    assert spine_core[0]["spine_port"] == 33 + 16 and spine_core[0]["core_port"] == 17


def test_edge_port_attributes_match_arrays(build):
    fabric = build(gpus=512, oversubscription=3)
    links = fabric.links
    for e in range(0, len(links), 37):
        lo, hi = fabric.names[links.lo[e]], fabric.names[links.hi[e]]
        lo_attr, hi_attr = PORT_ATTRS[links.kind[e]]
        ports = {(d[lo_attr], d[hi_attr]) for d in fabric.graph.get_edge_data(lo, hi).values()}
        assert (int(links.lo_port[e]), int(links.hi_port[e])) in ports
        assert fabric.graph.get_edge_data(lo, hi)[0]["kind"] == LINK_KINDS[links.kind[e]]


def test_port_layout_leaf_down_then_up_grouped_per_spine(build):
    fabric = build(gpus=1024)
    links = fabric.links
    leaf = fabric.index["cluster-leaf-su01-r2"]
    down = np.sort(links.hi_port[links.hi == leaf])
    assert down.tolist() == list(range(1, 33))
    up = links.lo == leaf
    by_port = dict(zip(links.lo_port[up].tolist(), (links.hi[up] - fabric.first(2)).tolist()))
    assert sorted(by_port) == list(range(33, 65))
    assert [by_port[p] for p in (33, 34, 35, 36, 63, 64)] == [0, 0, 1, 1, 15, 15]


def test_breakout_lanes(build):
    fabric = build(gpus=1024, switch="eth-51t-64x800")
    links = fabric.links
    nl = links.kind == 0
    assert sorted(set(links.lane[nl].tolist())) == [1, 2]
    # 64 NIC links per leaf on 32 physical ports
    leaf = fabric.first(1)
    assert len(set(links.hi_port[links.hi == leaf].tolist())) == 32
    assert ports_used(fabric)[leaf] == 64


def test_build_is_deterministic(build):
    a, b = build(gpus=4096), build(gpus=4096)
    assert a.names == b.names
    for field in ("lo", "hi", "lo_port", "hi_port", "lane", "kind", "gbps"):
        assert np.array_equal(getattr(a.links, field), getattr(b.links, field))


@st.composite
def specs(draw):
    radix = draw(st.sampled_from([4, 8, 16, 32, 64]))
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    nics = draw(st.sampled_from([n for n in (1, 2, 4, 8) if gpn % n == 0 or n % gpn == 0]))
    over = draw(st.sampled_from([1, 3]))
    nodes = draw(st.integers(1, 300))
    return dict(
        gpus=nodes * gpn, gpus_per_node=gpn, nics_per_node=nics, radix=radix,
        oversubscription=over, placement=draw(st.sampled_from(["rail", "rack"])),
        tiers=draw(st.sampled_from(["auto", 3])),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_property_any_buildable_spec_keeps_invariants(fields):
    try:
        spec = load_spec(fields)
        fabric = build_fabric(spec)
    except SpecError:
        return  # an impossible spec is refused, never half-built
    check_invariants(fabric)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=300), st.booleans())
def test_ip_text_is_the_dotted_quad_of_every_address(values, in_order):
    """Both ways of ``ip_text`` (a prefix a run when the addresses come in order, a prefix a
    distinct /24 otherwise) give what ``ipaddress`` gives."""
    import ipaddress

    from topo.addressing import ip_text

    if in_order:  # long runs of a /24, as a pool's addresses come
        values = sorted(v & 0xFFFF0FFF for v in values)
    array = np.array(values, dtype=np.uint32)
    assert ip_text(array) == [str(ipaddress.IPv4Address(v)) for v in values]


def test_ip_text_of_a_pool_in_order():
    import ipaddress

    from topo.addressing import ip_text

    pool = np.arange(0x0A3FFF00, 0x0A400500, 2, dtype=np.uint32)  # across /24s and a /16
    assert ip_text(pool) == [str(ipaddress.IPv4Address(int(v))) for v in pool]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 128), st.integers(1, 8)), max_size=200),
       st.sampled_from([(8, 1), (8, 2), (8, 4), (8, 8), (4, 2), (2, 1)]))
def test_sonic_port_names_are_each_ports_name(ports, layout):
    from topo.addressing import sonic_port_name, sonic_port_names

    lanes, breakout = layout
    ports = [(p, (lane - 1) % breakout + 1) for p, lane in ports]
    port = np.array([p for p, _ in ports], dtype=np.int64)
    lane = np.array([lane for _, lane in ports], dtype=np.int64)
    assert sonic_port_names(port, lane, lanes, breakout) == [sonic_port_name(p, q, lanes, breakout) for p, q in ports]
