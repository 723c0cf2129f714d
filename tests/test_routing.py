"""Routing: up-down paths, ECMP hashing, faults, and the collective's connections."""

from __future__ import annotations

import numpy as np
import pytest

from topo import AnalysisError, build_fabric, load_spec
from topo.analysis.collective import connections, double_binary_tree, job_nodes
from topo.analysis.faults import apply_faults
from topo.analysis.routing import route


@pytest.fixture(scope="module")
def three_tier():
    return build_fabric(load_spec({"gpus": 4096}))


def walk(fabric, routes, row):
    """Vertices visited by one sub-flow, checking that its links join up."""
    links = fabric.links
    path = routes.resources[row][routes.resources[row] >= 0]
    here = links.lo[path[0] // 2]
    seen = [int(here)]
    for resource in path:
        link, down = divmod(int(resource), 2)
        start, end = (links.hi[link], links.lo[link]) if down else (links.lo[link], links.hi[link])
        assert start == here
        here = end
        seen.append(int(here))
    return seen


def test_paths_are_up_down_and_contiguous(three_tier):
    rng = np.random.default_rng(0)
    nics = three_tier.plan.nodes * 8
    src, dst = rng.integers(0, nics, 300), rng.integers(0, nics, 300)
    keep = src // 8 != dst // 8
    routes = route(three_tier, src[keep], dst[keep], qps=2)
    tier = three_tier.tier
    for row in range(routes.resources.shape[0]):
        seen = walk(three_tier, routes, row)
        tiers = tier[seen].tolist()
        top = tiers.index(max(tiers))
        assert tiers[: top + 1] == sorted(tiers[: top + 1])  # up ...
        assert tiers[top:] == sorted(tiers[top:], reverse=True)  # ... then down, no valley
        assert len(seen) - 1 == routes.links[row]


def test_distances_by_placement(three_tier):
    # same leaf; same pod other rail; other pod
    routes = route(three_tier, np.array([0, 0, 0]), np.array([8, 1, 8 * 128]))
    assert routes.links.tolist() == [2, 4, 6]


def test_ecmp_spreads_queue_pairs_evenly_over_spines():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    routes = route(fabric, np.array([0]), np.array([1]), qps=4800)
    spine = fabric.links.hi[routes.resources[:, 1] // 2] - fabric.first(2)
    counts = np.bincount(spine, minlength=16)
    assert counts.min() > 200 and counts.max() < 400  # 300 expected each


def test_hash_seed_changes_paths_and_is_deterministic():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    src, dst = np.arange(0, 512, 8), np.arange(512, 1024, 8)
    a = route(fabric, src, dst, hash_seed=1).resources
    assert np.array_equal(a, route(fabric, src, dst, hash_seed=1).resources)
    assert not np.array_equal(a, route(fabric, src, dst, hash_seed=2).resources)


def test_routes_avoid_dead_links_and_report_unreachable(three_tier):
    faults = apply_faults(three_tier, ["cluster-spine-p00-00", "cluster-leaf-su00-r0:34"])
    rng = np.random.default_rng(1)
    src = rng.integers(0, 1024, 400) * 8 % (three_tier.plan.nodes * 8)
    dst = (src + 8 * rng.integers(1, 500, 400)) % (three_tier.plan.nodes * 8)
    routes = route(three_tier, src, dst, qps=2, faults=faults)
    used = routes.resources[routes.resources >= 0] // 2
    assert faults.live[used].all()
    # isolate a leaf: its NICs reach nobody beyond it
    leaf = "cluster-leaf-su01-r0"
    dead = apply_faults(three_tier, [f"{leaf}:{p}" for p in range(33, 65)])
    routes = route(three_tier, np.array([32 * 8, 32 * 8]), np.array([33 * 8, 0]), faults=dead)
    assert routes.links.tolist() == [2, 0]


def test_unknown_fault_names_list_close_matches(three_tier):
    with pytest.raises(AnalysisError, match=r"no switch or server named 'cluster-spine-p0-03'; close matches: "):
        apply_faults(three_tier, ["cluster-spine-p0-03"])
    with pytest.raises(AnalysisError, match=r"has no link on port 99 \(ports in use: 1\.\.64\)"):
        apply_faults(three_tier, ["cluster-leaf-su00-r0:99"])


def test_random_faults_are_seeded_and_spare_nic_links(three_tier):
    a = apply_faults(three_tier, fraction=0.05, seed=7)
    b = apply_faults(three_tier, fraction=0.05, seed=7)
    assert np.array_equal(a.live, b.live)
    assert a.links_down == round(0.05 * 8192)
    assert a.live[three_tier.links.kind == 0].all()


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13, 64, 100])
def test_double_binary_tree_is_two_spanning_trees(n):
    for parent in double_binary_tree(n):
        assert (parent == -1).sum() == 1
        for start in range(n):  # every rank reaches the root without a cycle
            seen, here = set(), start
            while parent[here] != -1:
                assert here not in seen
                seen.add(here)
                here = parent[here]
    first, second = double_binary_tree(n)
    if n % 2 == 0 and n > 2:
        interior = [set(np.flatnonzero(np.isin(np.arange(n), p[p >= 0]))) for p in (first, second)]
        assert not interior[0] & interior[1] - {0, n - 1}


def test_job_placement_and_its_errors():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    assert job_nodes(fabric, None, "topology", 0).tolist() == list(range(128))
    shuffled = job_nodes(fabric, 256, "random", 5)
    assert len(set(shuffled.tolist())) == 32 and not np.array_equal(shuffled, np.sort(shuffled))
    for gpus, message in ((12, "not a multiple"), (2048, "more than the fabric"), (0, "at least one node")):
        with pytest.raises(AnalysisError, match=message):
            job_nodes(fabric, gpus, "topology", 0)
    assert job_nodes(fabric, 8, "topology", 0).tolist() == [0]  # one node: NVLink only, not an error


def test_ring_connections_join_same_rank_nics():
    fabric = build_fabric(load_spec({"gpus": 64, "nics_per_node": 4}))
    conns = connections(fabric, np.arange(8), "ring")
    assert conns.src_nic.size == 64  # 8 ring edges x 8 local ranks
    assert np.array_equal(conns.src_nic % 4, conns.local_rank * 4 // 8)  # two ranks share a NIC
    assert np.array_equal(conns.dst_nic // 4, (conns.src_nic // 4 + 1) % 8)
