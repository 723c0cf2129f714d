"""Bisection bandwidth: figures, brute force over every balanced split, max-flow cross-checks, faults."""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pytest

from topo import build_fabric, load_spec
from topo.analysis.bisection import (
    FlowNetwork,
    Split,
    bisection,
    endpoints,
    maxflow_networkx,
    random_balanced_splits,
    split_maxflow,
    tier_aligned_splits,
)
from topo.analysis.faults import apply_faults
from topo.errors import AnalysisError


def fabric_of(**fields):
    return build_fabric(load_spec(fields))


@pytest.mark.parametrize(
    "shape, gbps",
    [
        (dict(gpus=1024), 204_800),  # DESIGN.md: 1,024 GPUs at 400G, 1:1: 204.8 Tb/s
        (dict(gpus=768, oversubscription=3), 51_200),  # 16 leaves x 16 uplinks x 400 / 2
        (dict(gpus=1024, placement="rack"), 204_800),
        (dict(gpus=4096), 819_200),
        (dict(gpus=3072, spine_oversubscription=3, tiers=3, radix=32), 204_800),  # 128 x 8 x 400 / 2
        (dict(gpus=1000), 200_000),  # a partial SU: its NICs limit, not the full set of uplinks
    ],
)
def test_figures_and_agreement(shape, gbps):
    result = bisection(fabric_of(**shape))
    assert result.gbps == gbps
    assert result.maxflow_gbps == gbps
    assert result.agrees, result.note
    assert "equals the analytic value" in result.note


@pytest.mark.parametrize("k", [4, 8])
def test_k_ary_fat_tree_is_n_b_over_2(k):
    hosts = k**3 // 4
    result = bisection(fabric_of(gpus=hosts, gpus_per_node=1, radix=k, tiers=3))
    assert result.gbps == result.maxflow_gbps == hosts * 400 // 2
    names = ["half-of-each-leaf", "half-of-each-pod", "half-of-the-pods"]
    assert [s.name for s in result.splits[:3]] == names


def test_tiers_reported_with_half_capacities():
    result = bisection(fabric_of(gpus=768, oversubscription=3))
    assert [t.to_dict() for t in result.tiers] == [
        {"links": "node-leaf", "capacity_gbps": 307_200, "half_gbps": 153_600},
        {"links": "leaf-spine", "capacity_gbps": 102_400, "half_gbps": 51_200},
    ]
    flows = {s.name: s.gbps for s in result.splits}
    assert flows["half-of-each-leaf"] == 153_600 and flows["half-of-each-pod"] == 51_200


# --- brute force: every balanced split -----------------------------------------------------------

TINY = [
    dict(gpus=16, gpus_per_node=1, radix=4, tiers=3),  # k = 4 fat tree, 16 NICs
    dict(gpus=8, gpus_per_node=1, radix=4),  # two tiers, 4 leaves, 2 spines
    dict(gpus=12, gpus_per_node=1, radix=4, oversubscription=3),  # 3 down, 1 up per leaf
    dict(gpus=16, gpus_per_node=2, radix=8),  # 2 parallel links per leaf-spine pair
    dict(gpus=8, gpus_per_node=1, nics_per_node=2, radix=4),  # a GPU's 2 NICs move together
]


def all_balanced_splits(fabric):
    """Every split of the endpoints into two halves (endpoint 0 on side A: the value is symmetric)."""
    _, endpoint = endpoints(fabric)
    n = int(endpoint.max()) + 1
    for rest in combinations(range(1, n), n // 2 - 1):
        side = np.zeros(n, dtype=bool)
        side[[0, *rest]] = True
        yield side[endpoint]


@pytest.mark.parametrize("shape", TINY, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_brute_force_over_all_balanced_splits_equals_analytic(shape):
    fabric = fabric_of(**shape)
    network = FlowNetwork(fabric)
    least = min(network.value(side) for side in all_balanced_splits(fabric))
    result = bisection(fabric)
    assert least == result.gbps == result.maxflow_gbps
    assert result.agrees


def test_flow_is_symmetric_in_the_sides():
    fabric = fabric_of(gpus=12, gpus_per_node=1, radix=4, oversubscription=3)
    network = FlowNetwork(fabric)
    for side in list(all_balanced_splits(fabric))[:50]:
        assert network.value(side) == network.value(~side)


@pytest.mark.parametrize(
    "shape, fail",
    [
        (dict(gpus=16, gpus_per_node=1, radix=4, tiers=3), []),
        (dict(gpus=256), ["cluster-spine-01"]),
        (dict(gpus=96, gpus_per_node=4, radix=8, oversubscription=3), []),
        (dict(gpus=40, gpus_per_node=2, radix=8, tiers=3), ["cluster-core-g00-00"]),
    ],
)
def test_networkx_max_flow_agrees_with_scipy(shape, fail):
    fabric = fabric_of(**shape)
    faults = apply_faults(fabric, fail, fraction=0.2, seed=3)
    for split in tier_aligned_splits(fabric) + random_balanced_splits(fabric, 3, seed=1):
        assert maxflow_networkx(fabric, split, faults) == split_maxflow(fabric, split, faults)


# --- splits ---------------------------------------------------------------------------------------


def test_splits_are_balanced_and_keep_a_gpus_nics_together():
    fabric = fabric_of(gpus=64, gpus_per_node=4, nics_per_node=8)
    kind, endpoint = endpoints(fabric)
    assert kind == "gpu" and endpoint.max() + 1 == 64
    for split in tier_aligned_splits(fabric) + random_balanced_splits(fabric, 4, seed=5):
        sides = {}
        for e, a in zip(endpoint.tolist(), split.side_a.tolist()):
            assert sides.setdefault(e, a) == a
        assert sum(sides.values()) == 32


def test_tier_aligned_splits_are_what_their_names_say():
    fabric = fabric_of(gpus=4096)
    leaf = fabric.links.hi[fabric.links.kind == 0] - fabric.first(1)
    pod = leaf // fabric.plan.leaves_per_pod
    each_leaf, each_pod, pods = tier_aligned_splits(fabric)
    per_leaf = np.bincount(leaf, weights=each_leaf.side_a)
    assert np.all(per_leaf == 16)  # 32 NICs per leaf
    a_leaves = np.unique(leaf[each_pod.side_a])
    assert np.all(np.bincount(a_leaves // 32, minlength=4) == 16)  # 16 of 32 leaves per pod
    assert not np.intersect1d(a_leaves, leaf[~each_pod.side_a]).size  # whole leaves
    assert set(pod[pods.side_a].tolist()) == {0, 1} and set(pod[~pods.side_a].tolist()) == {2, 3}


def test_odd_groups_alternate_so_halves_stay_balanced():
    fabric = fabric_of(gpus=1000)  # the last SU has 29 nodes: 8 leaves with 29 NICs
    for split in tier_aligned_splits(fabric):
        assert split.side_a.sum() == 500


def test_random_splits_are_seeded():
    fabric = fabric_of(gpus=256)
    first = [s.side_a for s in random_balanced_splits(fabric, 3, seed=11)]
    again = [s.side_a for s in random_balanced_splits(fabric, 3, seed=11)]
    other = [s.side_a for s in random_balanced_splits(fabric, 3, seed=12)]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


# --- faults ---------------------------------------------------------------------------------------


def test_failed_spine_lowers_max_flow():
    fabric = fabric_of(gpus=1024)
    result = bisection(fabric, apply_faults(fabric, ["cluster-spine-00"]))
    # every leaf loses 2 of its 32 uplinks: 16 leaves x 30 x 400
    assert result.maxflow_gbps == 192_000 < result.gbps == 204_800
    assert not result.agrees
    assert "links are down" in result.note and "does not apply" in result.note
    assert result.links_down == 64


def test_fabric_cut_in_two_gives_zero():
    fabric = fabric_of(gpus=16, gpus_per_node=1, radix=4, tiers=3)
    cores = [n for n in fabric.names if "-core-" in n]
    result = bisection(fabric, apply_faults(fabric, cores))
    flows = {s.name: s.gbps for s in result.splits}
    assert flows["half-of-the-pods"] == 0 == result.maxflow_gbps
    assert flows["half-of-each-leaf"] == 3200  # each leaf's halves still talk locally


def test_two_tiers_without_spines_gives_zero():
    fabric = fabric_of(gpus=256)
    spines = [n for n in fabric.names if "-spine-" in n]
    assert bisection(fabric, apply_faults(fabric, spines)).maxflow_gbps == 0


def test_dead_nic_links_carry_nothing():
    fabric = fabric_of(gpus=16, gpus_per_node=1, radix=4, tiers=3)
    faults = apply_faults(fabric, ["cluster-node0000:0"])
    split = tier_aligned_splits(fabric)[0]
    assert split_maxflow(fabric, split, faults) == 3200 - 400


# --- output ---------------------------------------------------------------------------------------


def test_to_dict_is_plain_and_deterministic():
    fabric = fabric_of(gpus=4096)
    first, second = bisection(fabric).to_dict(), bisection(fabric).to_dict()
    assert first == second and json.loads(json.dumps(first)) == first
    assert first["gbps"] == first["maxflow_gbps"] == 819_200
    assert [s["name"] for s in first["splits"]] == [
        "half-of-each-leaf", "half-of-each-pod", "half-of-the-pods",
        "random-0", "random-1", "random-2", "random-3"]


def test_split_is_an_input_type():
    fabric = fabric_of(gpus=64)
    side = np.zeros(64, dtype=bool)
    side[:32] = True  # nodes 0-3 against nodes 4-7: every NIC pair on one rail leaf
    assert split_maxflow(fabric, Split("mine", "custom", side)) == 32 * 400


def test_bad_random_splits():
    with pytest.raises(AnalysisError, match="random_splits"):
        bisection(fabric_of(gpus=64), random_splits=-1)


@pytest.mark.slow
def test_65536_gpus():
    result = bisection(fabric_of(gpus=65536))
    assert result.gbps == result.maxflow_gbps == 65536 * 400 // 2
    assert len(result.splits) == 7
