"""Routing: up-down paths, ECMP hashing, faults, and the collective's connections."""

from __future__ import annotations

import numpy as np
import pytest

from topo import AnalysisError, build_fabric, load_spec
from topo.hardware.catalog import server_profiles
from topo.analysis.collective import channel_layout, connections, double_binary_tree, job_nodes
from topo.analysis.faults import apply_faults
from topo.analysis.routing import (
    HASH_FIELDS,
    ROUTING_MODES,
    dmodk_index,
    port_tables,
    queue_pair_numbers,
    route,
    udp_source_ports,
)


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
    node = server_profiles()["hgx-h100-4nic"].node_model()
    layout = channel_layout(node, 8, 376.0)
    # 4 NICs: the ring graph's 4 channels are duplicated (48 GB/s each), the communicator has 16
    assert (layout.graph_channels, layout.channels) == (8, 16)
    conns = connections(np.arange(8), layout, "ring")
    assert conns.src_nic.size == 8 * 16  # 8 ring edges x 16 channels
    assert np.array_equal(conns.src_nic % 4, conns.local_rank % 4)  # channel c on NIC c mod 4
    assert np.array_equal(conns.src_nic % 4, conns.dst_nic % 4)  # same-rank NIC of the next node
    assert np.array_equal(conns.dst_nic // 4, (conns.src_nic // 4 + 1) % 8)
    tree = connections(np.arange(8), layout, "tree")
    assert tree.src_nic.size == 2 * 7 * 16  # (n - 1) edges, both directions, every channel
    assert np.array_equal(tree.src_nic % 4, tree.dst_nic % 4)


# ---- sample seeds, hash fields, polarisation, D-mod-K ------------------------------------------

def leaf_nics(fabric, leaf):
    """Global NIC ids of the NICs on a leaf (leaf number from 0)."""
    links = fabric.links
    nic_link = port_tables(fabric).nic_link
    return np.flatnonzero(links.hi[nic_link] - fabric.first(1) == leaf)


def uplink_column(fabric, routes, leaf):
    """Column (port position) of each sub-flow's uplink among ``leaf``'s uplinks."""
    up = port_tables(fabric).leaf_up[leaf]
    column = np.full(up.max() + 1, -1)
    column[up] = np.arange(up.size)
    return column[routes.resources[:, 1] // 2]


@pytest.mark.parametrize("hash_field", HASH_FIELDS)
def test_a_sample_seed_redraws_the_queue_pair_entropy_and_the_switch_salts(three_tier, hash_field):
    rng = np.random.default_rng(2)
    nics = three_tier.plan.nodes * 8
    src, dst = rng.integers(0, nics, 500), rng.integers(0, nics, 500)
    a = route(three_tier, src, dst, qps=2, hash_seed=11, hash_field=hash_field)
    assert a.hash_field == hash_field and not a.polarized
    assert np.array_equal(a.resources, route(three_tier, src, dst, qps=2, hash_seed=11,
                                             hash_field=hash_field).resources)
    b = route(three_tier, src, dst, qps=2, hash_seed=12, hash_field=hash_field).resources
    moved = (a.resources[:, 1] != b[:, 1]).mean()  # leaf uplink, one of 32: redrawn ~97% of the time
    assert moved > 0.85
    # the entropy itself is redrawn (allocated anew when a job starts), not only the salts
    conns = np.arange(1000)
    assert (udp_source_ports(conns, 2, 11) != udp_source_ports(conns, 2, 12)).mean() > 0.99
    assert np.array_equal(udp_source_ports(conns, 2, 11), udp_source_ports(conns, 2, 11))
    assert (queue_pair_numbers(dst, 2, 11) != queue_pair_numbers(dst, 2, 12)).all()
    ports = udp_source_ports(conns, 4, 5)
    assert ports.min() >= 49152 and ports.max() <= 65535


def test_queue_pair_numbers_are_consecutive_per_receiving_nic_in_connection_order():
    dst = np.array([3, 9, 3, 3, 9])
    qpn = queue_pair_numbers(dst, qps=2, seed=4).reshape(5, 2).astype(np.int64)
    assert qpn.max() < 1 << 24
    mod = 1 << 24
    assert ((qpn[[0, 0, 2, 2, 3, 3], [0, 1, 0, 1, 0, 1]] - qpn[0, 0]) % mod).tolist() == [0, 1, 2, 3, 4, 5]
    assert ((qpn[[1, 1, 4, 4], [0, 1, 0, 1]] - qpn[1, 0]) % mod).tolist() == [0, 1, 2, 3]
    assert qpn[0, 0] != qpn[1, 0]  # a random base per NIC


def test_sport_and_qpn_hash_different_fields(three_tier):
    rng = np.random.default_rng(3)
    nics = three_tier.plan.nodes * 8
    src, dst = rng.integers(0, nics, 500), rng.integers(0, nics, 500)
    sport = route(three_tier, src, dst, qps=4, hash_seed=5, hash_field="sport").resources
    qpn = route(three_tier, src, dst, qps=4, hash_seed=5, hash_field="qpn").resources
    assert (sport[:, 1] != qpn[:, 1]).mean() > 0.85
    with pytest.raises(ValueError, match="hash field 'dport'"):
        route(three_tier, src, dst, hash_field="dport")


def test_qpn_hashing_spreads_queue_pairs_over_spines():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    routes = route(fabric, np.array([0]), np.array([1]), qps=4800, hash_field="qpn", hash_seed=1)
    spine = fabric.links.hi[routes.resources[:, 1] // 2] - fabric.first(2)
    counts = np.bincount(spine, minlength=16)
    assert counts.min() > 200 and counts.max() < 400  # 300 expected each


@pytest.mark.parametrize("options", [{"mode": "dmodk"}, {"hash_field": "qpn"}, {"polarized": True},
                                     {"mode": "dmodk", "qps": 3}])
def test_every_mode_gives_contiguous_up_down_paths(three_tier, options):
    rng = np.random.default_rng(4)
    nics = three_tier.plan.nodes * 8
    src, dst = rng.integers(0, nics, 200), rng.integers(0, nics, 200)
    keep = src // 8 != dst // 8
    routes = route(three_tier, src[keep], dst[keep], **{"qps": 2, **options})
    tier = three_tier.tier
    for row in range(routes.resources.shape[0]):
        seen = walk(three_tier, routes, row)
        tiers = tier[seen].tolist()
        top = tiers.index(max(tiers))
        assert tiers[: top + 1] == sorted(tiers[: top + 1]) and tiers[top:] == sorted(tiers[top:], reverse=True)
        assert len(seen) - 1 == routes.links[row]
        assert seen[-1] == dst[keep][row // routes.qps] // 8  # ends at the destination's server


def test_polarized_hashing_ties_the_spine_choice_to_the_leaf_choice(three_tier):
    # many flows from the NICs of leaf 0 to the NICs of pod 1 (rail 0): every one crosses a leaf
    # uplink (32) then a spine uplink (32 per spine)
    src = np.repeat(leaf_nics(three_tier, 0), 32)
    dst = np.tile(np.arange(128, 256, 4) * 8, 32)
    pairs = {}
    for polarized in (False, True):
        routes = route(three_tier, src, dst, qps=4, hash_seed=3, polarized=polarized)
        assert (routes.links == 6).all() and routes.polarized == polarized
        leaf_up, spine_up = routes.resources[:, 1], routes.resources[:, 2]
        assert np.unique(leaf_up).size == 32  # the first tier spreads either way
        pairs[polarized] = np.unique(leaf_up * (1 << 32) + spine_up).size
    # independent salts: ~1,000 of the 1,024 (leaf uplink, spine uplink) pairs occur among 4,096
    # sub-flows; one hash per tier: the spine uplink is a function of the leaf uplink
    assert pairs[False] > 900
    assert pairs[True] == 32


def test_dmodk_is_destination_routing_and_ignores_queue_pairs_and_seeds(three_tier):
    rng = np.random.default_rng(5)
    nics = three_tier.plan.nodes * 8
    src, dst = rng.integers(0, nics, 400), rng.integers(0, nics, 400)
    one = route(three_tier, src, dst, mode="dmodk")
    assert one.mode == "dmodk" and "dmodk" in ROUTING_MODES
    assert np.array_equal(one.resources, route(three_tier, src, dst, mode="dmodk").resources)
    many = route(three_tier, src, dst, qps=3, mode="dmodk", hash_seed=99, hash_field="qpn")
    assert np.array_equal(many.resources, np.repeat(one.resources, 3, axis=0))  # one path per connection
    # the NICs of one leaf, sending to one NIC elsewhere, all take the same path from their leaf up
    for target in (8 * 300 + 5, 8 * 40, 8 * 2):  # another pod; same pod; same leaf
        routes = route(three_tier, leaf_nics(three_tier, 0), np.full(32, target), mode="dmodk")
        assert np.unique(routes.resources[:, 1:], axis=0).shape[0] == 1


@pytest.mark.parametrize("remote", [8, 33, 127])  # a leaf of the same pod, of pod 1, of pod 3
def test_dmodk_spreads_a_leafs_destinations_evenly_over_the_uplinks(three_tier, remote):
    dst = leaf_nics(three_tier, remote)
    assert dmodk_index(three_tier, dst).tolist() == list(range(remote * 32, remote * 32 + 32))
    src = np.full(dst.size, leaf_nics(three_tier, 0)[5])
    counts = np.bincount(uplink_column(three_tier, route(three_tier, src, dst, mode="dmodk"), 0), minlength=32)
    assert counts.max() - counts.min() <= 1
    # with two uplinks of the source leaf down, the SM spreads over the 30 left, still evenly
    faults = apply_faults(three_tier, ["cluster-leaf-su00-r0:34", "cluster-leaf-su00-r0:50"])
    routes = route(three_tier, src, dst, mode="dmodk", faults=faults)
    counts = np.bincount(uplink_column(three_tier, routes, 0), minlength=32)
    assert counts[[1, 17]].tolist() == [0, 0]
    live = np.delete(counts, [1, 17])
    assert live.max() - live.min() <= 1
    assert faults.live[routes.resources[routes.resources >= 0] // 2].all()


def test_dmodk_routes_a_shift_permutation_without_sharing_a_link(three_tier):
    nics = three_tier.plan.nodes * 8
    src = np.arange(nics)
    for shift in (8 * 32, 8 * 128, 8 * 129 + 3):  # next SU; next pod; next pod and node, other rail
        routes = route(three_tier, src, (src + shift) % nics, mode="dmodk")
        used = np.bincount(routes.resources[routes.resources >= 0])
        assert used.max() == 1
    ecmp = route(three_tier, src, (src + 8 * 128) % nics)
    assert np.bincount(ecmp.resources[ecmp.resources >= 0]).max() > 1  # hashing collides


def test_dmodk_avoids_dead_links_and_reroutes_what_crossed_them(three_tier):
    faults = apply_faults(three_tier, fraction=0.05, seed=3)
    rng = np.random.default_rng(6)
    nics = three_tier.plan.nodes * 8
    src, dst = rng.integers(0, nics, 3000), rng.integers(0, nics, 3000)
    routes = route(three_tier, src, dst, mode="dmodk", faults=faults)
    assert routes.reachable.all()
    used = routes.resources[routes.resources >= 0] // 2
    assert faults.live[used].all()
    intact = route(three_tier, src, dst, mode="dmodk")
    crossed = (~faults.live[np.maximum(intact.resources, 0) // 2] & (intact.resources >= 0)).any(axis=1)
    assert crossed.any()
    assert not np.array_equal(routes.resources[crossed], intact.resources[crossed])


def test_precomputed_port_tables_give_the_same_routes(three_tier):
    tables = port_tables(three_tier)
    src, dst = np.arange(0, 4096, 7), np.arange(4095, -1, -7)
    for mode in ROUTING_MODES:
        a = route(three_tier, src, dst, qps=2, mode=mode, tables=tables)
        b = route(three_tier, src, dst, qps=2, mode=mode)
        assert np.array_equal(a.resources, b.resources) and np.array_equal(a.capacity_gbps, b.capacity_gbps)
