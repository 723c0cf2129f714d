"""Bisection on random valid specs: the analytic value is the least max-flow over the evaluated
splits, and on tiny fabrics the least over every balanced split (brute force on the graph)."""

from __future__ import annotations

from itertools import combinations

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topo import SpecError, build_fabric, load_spec
from topo.analysis.bisection import bisection, endpoints

from .brute import live_graph

#: Down:up ratios, and the ports one down:up group takes (a radix must be a multiple to split).
RATIOS = {1: 2, 3: 4, "3:1": 4, "5:3": 8}


@st.composite
def specs(draw, radixes=(8, 64), most_endpoints=None):
    """A spec that may or may not load (most do): the fields topo's fabrics vary in."""
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    nics = draw(st.sampled_from([n for n in (1, 2, 4, 8, 16) if gpn % n == 0 or n % gpn == 0]))
    per_node = min(gpn, nics)  # endpoints of one node: its NICs, or its GPUs when they have several
    if most_endpoints is None:
        nodes = draw(st.integers(1, 4096 // gpn))
    else:
        nodes = draw(st.integers(1, max(1, most_endpoints // per_node)))
    tiers = draw(st.sampled_from([2, 3]))
    over = draw(st.sampled_from(list(RATIOS)))
    spine_over = draw(st.sampled_from(list(RATIOS))) if tiers == 3 else 1
    step = np.lcm(RATIOS[over], RATIOS[spine_over])
    low, high = radixes
    radix = int(step * draw(st.integers(max(1, -(-low // step)), max(1, high // step))))
    nic_gbps = draw(st.sampled_from([100, 200, 400]))
    fields = dict(
        gpus=nodes * gpn, gpus_per_node=gpn, nics_per_node=nics, nic_gbps=nic_gbps,
        port_gbps=nic_gbps * draw(st.sampled_from([1, 1, 2, 4])), radix=radix, tiers=tiers,
        placement=draw(st.sampled_from(["rail", "rack"])), oversubscription=over,
    )
    if tiers == 3:
        fields["spine_oversubscription"] = spine_over
    if draw(st.integers(0, 3)) == 0:  # a spine count of choice: a divisor of the leaf uplinks
        up = radix * {1: 1, 3: 1, "3:1": 1, "5:3": 3}[over] // RATIOS[over]
        fields["spines"] = draw(st.sampled_from([d for d in range(1, up + 1) if up % d == 0]))
    return fields


def fabric_or_none(fields):
    try:
        return build_fabric(load_spec(fields))
    except SpecError:
        return None  # a spec topo refuses: nothing to check


def check_agreement(result):
    cut = result.least_cut
    least = min(s.gbps for s in result.splits)
    assert result.maxflow_gbps == least
    assert result.gbps == min(cut.gbps, least)  # the headline never exceeds a split's max-flow
    assert cut.lower_gbps <= result.gbps
    assert int(cut.split.side_a.sum()) > 0 or result.endpoints == 1
    if cut.exact:
        assert cut.lower_gbps == cut.gbps
        assert result.agrees, result.note
        assert result.gbps == cut.gbps == least, result.note
        assert result.source == "analytic"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_property_analytic_value_is_the_least_max_flow(fields):
    fabric = fabric_or_none(fields)
    if fabric is None:
        return
    result = bisection(fabric, random_splits=2, seed=1)
    check_agreement(result)
    _, endpoint = endpoints(fabric)
    side = np.zeros(result.endpoints, dtype=int)
    side[endpoint[result.least_cut.split.side_a]] = 1
    assert side.sum() == (result.endpoints + 1) // 2  # balanced, and a GPU's NICs on one side
    assert np.array_equal(side[endpoint] == 1, result.least_cut.split.side_a)
    flows = {s.name: s.gbps for s in result.splits}
    if "least-cut" in flows and result.least_cut.exact:
        assert flows["least-cut"] == result.least_cut.gbps


# --- brute force on tiny fabrics ------------------------------------------------------------------


def reference_network(fabric):
    """Switches and one vertex per NIC, from the graph (``brute.live_graph``), capacities summed."""
    g = live_graph(fabric)
    net = nx.DiGraph()
    for u, v, data in g.edges(data=True):
        if data["kind"] == "node-leaf":
            node, leaf = (u, v) if g.nodes[u]["tier"] == 0 else (v, u)
            u, v = (node, data["nic"]), leaf
        for a, b in ((u, v), (v, u)):
            cap = net.edges[a, b]["capacity"] if net.has_edge(a, b) else 0
            net.add_edge(a, b, capacity=cap + data["bandwidth_gbps"])
    return g, net


def brute_force_bisection(fabric):
    """The least max-flow over every split of the endpoints into halves (sizes differ by at most 1)."""
    spec = fabric.spec
    g, net = reference_network(fabric)
    gpn, npn = spec.gpus_per_node, spec.nic_ports  # NIC ports: with planes, each port is an endpoint's link
    per_node = min(gpn, npn)
    nics = {}  # endpoint -> its NIC vertices: a NIC, or a GPU's NICs (NIC i is GPU i * gpn // npn)
    for node in fabric.names[: fabric.plan.nodes]:
        index = g.nodes[node]["index"]
        for nic in range(npn):
            local = nic if npn <= gpn else nic * gpn // npn
            nics.setdefault(index * per_node + local, []).append((node, nic))
    n = len(nics)
    sizes = {max(n // 2, 1), (n + 1) // 2}
    best = None
    for size in sizes:
        for rest in combinations(range(1, n), size - 1):
            side_a = {0, *rest}
            h = net.copy()
            for e, vertices in nics.items():
                for vertex in vertices:
                    if e in side_a:
                        h.add_edge("source", vertex, capacity=spec.nic_port_gbps)
                    else:
                        h.add_edge(vertex, "sink", capacity=spec.nic_port_gbps)
            value = nx.maximum_flow_value(h, "source", "sink") if n > 1 else 0
            best = value if best is None else min(best, value)
    return best


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(radixes=(4, 8), most_endpoints=10))
def test_property_tiny_fabrics_equal_brute_force(fields):
    fabric = fabric_or_none(fields)
    if fabric is None or int(endpoints(fabric)[1].max()) + 1 > 10:
        return
    result = bisection(fabric, random_splits=1)
    check_agreement(result)
    truth = brute_force_bisection(fabric)
    assert result.least_cut.lower_gbps <= truth <= result.gbps
    if result.least_cut.exact:
        assert truth == result.gbps == result.least_cut.gbps


@pytest.mark.parametrize(
    "fields, gbps",
    [
        (dict(gpus=8, gpus_per_node=1, radix=4), 1600),  # 4 leaves, 2 spines: N B / 2
        (dict(gpus=12, gpus_per_node=1, radix=4, oversubscription=3), 800),  # 4 leaves, 1 uplink each
        # 3 leaves of 3 NICs and 1 uplink: no half is whole leaves, so not 3 x 400 / 2 = 600 but
        # one leaf's uplink and one NIC link (5 NICs of two leaves against the third leaf and 1 NIC)
        (dict(gpus=9, gpus_per_node=1, radix=4, oversubscription=3), 800),
        # two planes of the first: each GPU's 800G NIC is a 400G port in each plane
        (dict(gpus=8, gpus_per_node=1, radix=4, nic_gbps=800, planes=2), 3200),
        # dual-ToR: 4 nodes of 2 NICs on two rail pairs with 2 uplinks a leaf; a NIC's two 200G links
        # are one endpoint, so splitting the rails costs a pair's four uplinks
        (dict(gpus=8, gpus_per_node=2, radix=8, dual_tor=True), 1600),
    ],
)
def test_brute_force_reference_on_known_fabrics(fields, gbps):
    fabric = build_fabric(load_spec(fields))
    assert brute_force_bisection(fabric) == gbps == bisection(fabric).gbps
