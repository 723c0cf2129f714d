"""The congestion model: known answers, exactness against a reference, and the issue's figures."""

from __future__ import annotations

import numpy as np
import pytest

from topo import build_fabric, load_spec
from topo.analysis.analyze import AnalysisOptions, analyze
from topo.analysis.congestion import max_min_rates, pfc_rates, solve_rates
from topo.analysis.routing import route

NIC = 400 * 0.94


def reference_max_min(paths, capacity):
    """Plain progressive filling, one level at a time (slow, obviously right)."""
    n = paths.shape[0]
    rate, active, remaining = np.zeros(n), np.ones(n, bool), capacity.astype(float).copy()
    while active.any():
        counts = np.zeros(capacity.size)
        for f in np.flatnonzero(active):
            for r in paths[f][paths[f] >= 0]:
                counts[r] += 1
        used = counts > 0
        delta = (remaining[used] / counts[used]).min()
        rate[active] += delta
        remaining -= delta * counts
        saturated = used & (remaining <= 1e-9)
        for f in np.flatnonzero(active):
            if saturated[paths[f][paths[f] >= 0]].any():
                active[f] = False
    return rate


@pytest.mark.parametrize("seed", range(40))
def test_max_min_matches_progressive_filling(seed):
    rng = np.random.default_rng(seed)
    resources, flows, hops = rng.integers(2, 15), rng.integers(1, 40), rng.integers(1, 6)
    paths = rng.integers(-1, resources, size=(flows, hops))
    paths[:, 0] = rng.integers(0, resources, size=flows)
    capacity = rng.choice([0.5, 1.0, 2.0, 3.0, 7.0], size=resources)
    assert np.allclose(max_min_rates(paths, capacity), reference_max_min(paths, capacity))


@pytest.mark.parametrize("seed", range(20))
def test_pfc_rates_are_feasible_and_never_above_offered(seed):
    rng = np.random.default_rng(seed)
    resources, flows = rng.integers(3, 12), rng.integers(1, 30)
    paths = rng.integers(-1, resources, size=(flows, 4))
    paths[:, 0] = rng.integers(0, resources, size=flows)
    capacity = rng.choice([1.0, 2.0, 4.0], size=resources)
    rate = pfc_rates(paths, capacity)
    load = np.zeros(resources)
    for f in range(flows):
        for r in set(paths[f][paths[f] >= 0].tolist()):
            load[r] += rate[f]
    assert np.all(load <= capacity * (1 + 1e-9))


def test_two_subflows_hashed_onto_one_link_each_get_half_and_adaptive_gives_full_rate():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    # one NIC talks to the same-rail NIC of another SU with many queue pairs: find two that collide
    routes = route(fabric, np.array([0]), np.array([8 * 32]), qps=64)
    uplink = routes.resources[:, 1]
    values, counts = np.unique(uplink, return_counts=True)
    pair = np.flatnonzero(uplink == values[np.argmax(counts == 2)])[:2]
    assert pair.size == 2
    # re-route just those two sub-flows as two flows from different NICs of the same leaf's nodes
    paths = routes.resources[pair].copy()
    paths[:, 0] = [paths[0, 0], paths[0, 0] + 2]  # distinct NIC ingress links (resource ids)
    paths[:, -1] = [paths[0, -1], paths[0, -1] + 2]
    rates = max_min_rates(paths, routes.capacity_gbps * 0.94)
    assert rates.tolist() == pytest.approx([NIC / 2, NIC / 2])
    spread = route(fabric, np.array([0, 16]), np.array([8 * 32, 8 * 32 + 16]), mode="adaptive")
    full = solve_rates(spread.resources, spread.capacity_gbps, spread.reachable, "ecn", 0.94)
    assert full.rate_gbps.tolist() == pytest.approx([NIC, NIC])


def test_mean_rate_under_ecmp_rises_toward_adaptive_as_queue_pairs_grow():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    means = []
    for qps in (1, 2, 4, 8, 16, 32):
        d = analyze(fabric, AnalysisOptions(algo="ring", order="random", qps=qps, sizes=(1 << 30,))).allreduce.details
        means.append(d["mean_connection_gbps"])
    adaptive = analyze(fabric, AnalysisOptions(algo="ring", order="random", routing="adaptive", sizes=(1 << 30,)))
    target = adaptive.allreduce.details["mean_connection_gbps"]
    assert target == pytest.approx(NIC / 2)  # two channels per NIC
    assert max(means[:2]) < min(means[-2:]) and means[0] < 0.9 * target and means[-1] > 0.95 * target


def test_defaults_at_1024_gpus_reach_eight_nics_at_line_rate_times_efficiency():
    result = analyze(build_fabric(load_spec({"gpus": 1024})), AnalysisOptions(algo="ring"))
    d = result.allreduce.details
    assert result.allreduce.rows[-1]["size_bytes"] == 8 << 30
    assert d["stages_busbw_GBps"]["ring"]["network"] == pytest.approx(8 * 50 * 0.94)
    assert d["busbw_limit_GBps"] == pytest.approx(8 * 50 * 0.94)
    # 16 channels, two per NIC, cross each SU boundary on every rail
    assert d["connections_leaving_leaf"] == 16 * 4
    two_nodes = analyze(build_fabric(load_spec({"gpus": 16})), AnalysisOptions(algo="ring")).allreduce
    assert two_nodes.rows[-1]["busbw_GBps"] == pytest.approx(8 * 50 * 0.94, rel=0.01)


def test_oversubscribed_leaves_with_random_order_are_slower_than_topology_order():
    fabric = build_fabric(load_spec({"gpus": 768, "oversubscription": 3}))
    topology = analyze(fabric, AnalysisOptions(order="topology")).allreduce.rows[-1]["busbw_GBps"]
    shuffled = analyze(fabric, AnalysisOptions(order="random", seed=3)).allreduce.rows[-1]["busbw_GBps"]
    assert shuffled < 0.5 * topology


def test_a_flow_that_only_shares_an_ingress_port_is_slowed_under_pfc_not_ecn():
    # resources: 0 a wide (800G) leaf uplink shared by A and B; 1 a congested egress used by A and C;
    # 2 B's uncongested egress; 3, 4, 5 the NIC links of A, B, C (400G)
    paths = np.array([[3, 0, 1], [4, 0, 2], [5, 1, -1]])
    capacity = np.array([800.0, 400.0, 400.0, 400.0, 400.0, 400.0])
    ecn = max_min_rates(paths, capacity)
    pfc = pfc_rates(paths, capacity)
    assert ecn.tolist() == [200.0, 400.0, 200.0]  # B, the victim candidate, runs at line rate
    assert pfc.tolist() == [200.0, 200.0, 200.0]  # B is paused with A's ingress port


def test_pfc_equals_ecn_without_congestion():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    # a ring in topology order: every NIC sends and receives its channels' connections, no incast
    busbw = [analyze(fabric, AnalysisOptions(algo="ring", cc=cc)).allreduce.rows[-1]["busbw_GBps"]
             for cc in ("ecn", "pfc")]
    assert busbw[0] == busbw[1] > 250


def test_tree_moves_twice_the_bytes_per_step_but_pays_less_latency():
    fabric = build_fabric(load_spec({"gpus": 16384}))
    ring = analyze(fabric, AnalysisOptions(algo="ring", order="topology", routing="adaptive")).allreduce
    tree = analyze(fabric, AnalysisOptions(algo="tree", order="topology", routing="adaptive")).allreduce
    assert tree.rows[0]["time_s"] < ring.rows[0]["time_s"]  # small messages: latency-bound
    assert tree.details["busbw_limit_GBps"] <= ring.details["busbw_limit_GBps"] * 1.01
