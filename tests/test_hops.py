"""Hop counts: brute force over GPU pairs on small fabrics, closed forms, faults, large sizes."""

from __future__ import annotations

import json
from collections import Counter
from math import comb

import networkx as nx
import pytest

from topo import build_fabric, load_spec
from topo.analysis.faults import apply_faults
from topo.analysis.hops import hop_counts

from .brute import endpoint_graph, gpu_nics, live_graph, nic_leaf, updown_paths

SMALL_SHAPES = [
    dict(gpus=256),  # two tiers, one SU, 8 parallel links per leaf-spine pair
    dict(gpus=200),  # a partial SU (25 of 32 nodes)
    dict(gpus=64, nics_per_node=4),  # 2 GPUs per NIC
    dict(gpus=64, gpus_per_node=4, nics_per_node=8),  # 2 NICs per GPU, only the even ones used
    dict(gpus=96, gpus_per_node=4, radix=8, oversubscription=3),  # oversubscribed leaves
    dict(gpus=64, gpus_per_node=2, radix=8, nic_gbps=200),  # breakout: 2 NIC links per leaf port
    dict(gpus=16, gpus_per_node=1, radix=4, tiers=3),  # k = 4 fat tree
    dict(gpus=128, gpus_per_node=1, radix=8, tiers=3),  # k = 8 fat tree
    dict(gpus=40, gpus_per_node=2, radix=8, tiers=3),  # rail, three tiers, partial SU and pod
    dict(gpus=48, gpus_per_node=2, radix=8, placement="rack"),  # rack, three tiers
    dict(gpus=32, gpus_per_node=4, nics_per_node=2, radix=8, placement="rack"),  # rack, two tiers
    dict(gpus=32, gpus_per_node=2, radix=8, tiers=3, nic_gbps=800, planes=2),  # two planes of three tiers
    dict(gpus=64, gpus_per_node=4, radix=8, dual_tor=True),  # dual-ToR rail pairs
    dict(gpus=48, gpus_per_node=2, radix=8, dual_tor=True, placement="rack"),  # dual-ToR racks, three tiers
]


def fabric_of(**fields):
    return build_fabric(load_spec(fields))


def as_counter(hops) -> Counter:
    """{(links or None, same_rail): pairs} from a HopCounts."""
    out: Counter = Counter()
    for row in hops.distribution:
        out[row.links, True] += row.same_rail_pairs
        out[row.links, False] += row.cross_rail_pairs
    out[None, True] += hops.unreachable_same_rail_pairs
    out[None, False] += hops.unreachable_cross_rail_pairs
    return +out  # drop zeros


def count_pairs(fabric, distance) -> Counter:
    """Count every GPU pair on different nodes with ``distance(nic_a, nic_b)`` (links or None)."""
    gpus = gpu_nics(fabric)
    out: Counter = Counter()
    for x in range(len(gpus)):
        for y in range(x + 1, len(gpus)):
            (na, ia), (nb, ib) = gpus[x], gpus[y]
            if na != nb:
                out[distance((na, ia), (nb, ib)), ia == ib] += 1
    return out


def brute_bfs(fabric) -> Counter:
    """Intact fabric: BFS between NIC endpoints (shortest paths of a Clos are up-down)."""
    h = endpoint_graph(fabric.graph)
    dist = {e: nx.single_source_shortest_path_length(h, e) for e in set(gpu_nics(fabric))}
    return count_pairs(fabric, lambda a, b: dist[a].get(b))


def brute_updown(fabric, faults) -> Counter:
    """Faulted fabric: up-down paths enumerated explicitly on the graph without the dead links."""
    g = live_graph(fabric, faults)
    leaf = {nic: nic_leaf(g, *nic) for nic in set(gpu_nics(fabric))}
    memo: dict = {}

    def leaf_links(a, b):
        if a == b:
            return 0
        if (a, b) not in memo:
            paths = updown_paths(g, a, b)
            memo[a, b] = len(paths[0]) - 1 if paths else None
        return memo[a, b]

    def distance(x, y):
        if leaf[x] is None or leaf[y] is None:
            return None
        d = leaf_links(leaf[x], leaf[y])
        return None if d is None else d + 2

    return count_pairs(fabric, distance)


@pytest.mark.parametrize("shape", SMALL_SHAPES, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_matches_bfs_over_every_gpu_pair(shape):
    fabric = fabric_of(**shape)
    hops = hop_counts(fabric)
    assert as_counter(hops) == +brute_bfs(fabric)
    assert hops.unreachable_pairs == 0
    assert hops.pairs == sum(row.pairs for row in hops.distribution)
    assert [row.links for row in hops.distribution] == list(range(2, 2 * fabric.plan.tiers + 1, 2))


def test_default_1024_closed_forms():
    """4 SUs of 32 nodes, 8 rails: same rail in one SU is one leaf; everything else one spine."""
    hops = hop_counts(fabric_of(gpus=1024))
    rails, sus, su_nodes, nodes, gpus = 8, 4, 32, 128, 1024
    pairs = comb(gpus, 2) - nodes * comb(8, 2)
    same_su_same_rail = rails * sus * comb(su_nodes, 2)
    same_rail = rails * comb(nodes, 2)
    assert hops.pairs == pairs == 520192
    two, four = hops.distribution
    assert (two.links, two.switch_hops, two.pairs) == (2, 1, same_su_same_rail)
    assert (two.same_rail_pairs, two.cross_rail_pairs) == (15872, 0)
    assert (four.links, four.switch_hops) == (4, 3)
    assert four.same_rail_pairs == same_rail - same_su_same_rail == 49152
    assert four.cross_rail_pairs == pairs - same_rail == 455168
    assert (hops.diameter_links, hops.diameter_switch_hops) == (4, 3)
    assert hops.mean_links == pytest.approx((2 * 15872 + 4 * (pairs - 15872)) / pairs)
    assert hops.mean_switch_hops == pytest.approx(hops.mean_links - 1)


def test_rack_1024_closed_forms():
    """Rack placement: 4 nodes per leaf, so every pair on one leaf is 2 links, same rail or not."""
    hops = hop_counts(fabric_of(gpus=1024, placement="rack"))
    two = hops.distribution[0]
    per_leaf = comb(32, 2) - 4 * comb(8, 2)
    assert two.pairs == 32 * per_leaf == 12288
    assert two.same_rail_pairs == 32 * 8 * comb(4, 2)
    assert hops.distribution[1].pairs == hops.pairs - two.pairs


def test_to_dict_is_plain_and_deterministic():
    fabric = fabric_of(gpus=4096)
    first, second = hop_counts(fabric).to_dict(), hop_counts(fabric).to_dict()
    assert first == second
    assert json.loads(json.dumps(first)) == first
    assert {"diameter_links", "diameter_switch_hops", "mean_links", "pairs", "unreachable_pairs",
            "distribution"} <= set(first)
    assert set(first["distribution"][0]) == {"links", "switch_hops", "pairs", "same_rail_pairs",
                                             "cross_rail_pairs"}
    assert [row["links"] for row in first["distribution"]] == [2, 4, 6]


def test_one_node_has_no_network_pairs():
    hops = hop_counts(fabric_of(gpus=8))
    assert hops.pairs == 0 and hops.unreachable_pairs == 0
    assert hops.diameter_links is None and hops.mean_links is None


# --- faults ---------------------------------------------------------------------------------------

K4 = dict(gpus=16, gpus_per_node=1, radix=4, tiers=3)


def test_leaf_uplinks_down_make_a_same_pod_pair_unreachable():
    """Leaves 0 and 1 of pod 0 keep one uplink each, to different spines: no valley-free path
    between them (through a core would come back up), while other pods stay 6 links away."""
    fabric = fabric_of(**K4)
    faults = apply_faults(fabric, ["cluster-leaf-su00-r0:3", "cluster-leaf-su01-r0:4"])
    hops = hop_counts(fabric, faults)
    assert as_counter(hops) == +brute_updown(fabric, faults)
    # leaf su00 has nodes 0, 1 and leaf su01 nodes 2, 3: 4 pairs lost
    assert hops.unreachable_pairs == 4
    assert hops.unreachable_same_rail_pairs == 4  # one NIC per node: every pair is same-rail
    assert hops.diameter_links == 6
    assert hop_counts(fabric).distribution[1].pairs - hops.distribution[1].pairs == 4


def test_failed_nic_reaches_nobody():
    fabric = fabric_of(**K4)
    faults = apply_faults(fabric, ["cluster-node0005:0"])
    hops = hop_counts(fabric, faults)
    assert hops.unreachable_pairs == 15
    assert as_counter(hops) == +brute_updown(fabric, faults)


def test_all_cores_down_cuts_the_pods_apart():
    fabric = fabric_of(**K4)
    cores = [n for n in fabric.names if "-core-" in n]
    hops = hop_counts(fabric, apply_faults(fabric, cores))
    assert hops.unreachable_pairs == comb(16, 2) - 4 * comb(4, 2) == 96
    assert [row.pairs for row in hops.distribution] == [8, 16, 0]
    assert (hops.diameter_links, hops.diameter_switch_hops, hops.mean_links) == (4, 3, 10 / 3)


def test_cross_pod_leaves_without_a_common_spine_position_are_cut():
    """Leaf su00 (pod 0) keeps only spine position 0, leaf su02 (pod 1) only position 1: core group
    j joins spines j only, so no valley-free path, although the graph is still connected."""
    fabric = fabric_of(**K4)
    faults = apply_faults(fabric, ["cluster-leaf-su00-r0:4", "cluster-leaf-su02-r0:3"])
    hops = hop_counts(fabric, faults)
    assert as_counter(hops) == +brute_updown(fabric, faults)
    assert hops.unreachable_pairs == 4  # nodes 0, 1 with nodes 4, 5
    switches = live_graph(fabric, faults).subgraph(n for n in fabric.names if "-node" not in n)
    assert nx.is_connected(switches)


def test_some_core_links_down_keep_six_links_via_other_cores():
    fabric = fabric_of(**K4)
    faults = apply_faults(fabric, ["cluster-core-g00-00", "cluster-spine-p01-01:3"])
    hops = hop_counts(fabric, faults)
    assert as_counter(hops) == +brute_updown(fabric, faults)
    assert hops.to_dict() == hop_counts(fabric).to_dict()


def test_failed_spine_two_tiers_changes_nothing():
    fabric = fabric_of(gpus=256)
    faults = apply_faults(fabric, ["cluster-spine-00"])
    assert hop_counts(fabric, faults).to_dict() == hop_counts(fabric).to_dict()


@pytest.mark.parametrize(
    "shape, fraction, seed",
    [
        (dict(gpus=256), 0.9, 0),
        (dict(gpus=64, nics_per_node=4), 0.6, 1),
        (dict(gpus=128, gpus_per_node=1, radix=8, tiers=3), 0.4, 2),
        (dict(gpus=128, gpus_per_node=1, radix=8, tiers=3), 0.7, 3),
        (dict(gpus=40, gpus_per_node=2, radix=8, tiers=3), 0.5, 4),
        (dict(gpus=48, gpus_per_node=2, radix=8, placement="rack"), 0.5, 5),
    ],
)
def test_random_faults_match_explicit_updown_paths(shape, fraction, seed):
    fabric = fabric_of(**shape)
    faults = apply_faults(fabric, fraction=fraction, seed=seed)
    hops = hop_counts(fabric, faults)
    assert as_counter(hops) == +brute_updown(fabric, faults)
    assert hops.pairs == sum(r.pairs for r in hops.distribution) + hops.unreachable_pairs


def test_random_faults_with_a_dead_nic_and_a_dead_leaf():
    fabric = fabric_of(gpus=64, nics_per_node=4)
    faults = apply_faults(fabric, ["cluster-node0002:1", "cluster-leaf-su00-r3"], fraction=0.3, seed=9)
    assert as_counter(hop_counts(fabric, faults)) == +brute_updown(fabric, faults)


# --- large fabrics --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("gpus, radix", [(65536, 64), (131072, 128)])
def test_large_fabrics_closed_forms(gpus, radix):
    """Three tiers of full pods: same rail and SU 2 links, same pod 4, otherwise 6."""
    fabric = fabric_of(gpus=gpus, radix=radix)
    plan = fabric.plan
    hops = hop_counts(fabric)
    su_gpus = plan.su_nodes * 8
    pod_gpus = plan.leaves_per_pod // 8 * su_gpus
    two = 8 * plan.sus * comb(plan.su_nodes, 2)
    pod_pairs = comb(pod_gpus, 2) - pod_gpus // 8 * comb(8, 2)
    assert [row.pairs for row in hops.distribution] == [
        two, plan.pods * pod_pairs - two, hops.pairs - plan.pods * pod_pairs]
    assert hops.pairs == comb(gpus, 2) - gpus // 8 * comb(8, 2)
    assert hops.diameter_links == 6
