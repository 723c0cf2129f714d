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
    least_cut,
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


# --- irregular fabrics: the least cut ------------------------------------------------------------

ISSUE = dict(gpus=256, gpus_per_node=1, nics_per_node=8, nic_gbps=100, port_gbps=200, radix=40,
             spine_oversubscription=3)


@pytest.mark.parametrize(
    "shape, gbps",
    [
        # the issue: half the spine uplinks is 60,000, but pod 0 (120 GPUs) and 8 GPUs across cut
        # one pod's spine uplinks and 8 GPUs' NIC links: 40,000 + 8 x 800
        (ISSUE, 46_400),
        (dict(gpus=1984, placement="rack", oversubscription="5:3", spine_oversubscription="3:1", radix=32,
              port_gbps=800), 89_600),  # was 115,200
        (dict(gpus=725, gpus_per_node=1, nics_per_node=8, radix=48, port_gbps=800, oversubscription="5:3",
              spine_oversubscription="5:3"), 524_800),  # was 648,000; less than every other split
        (dict(gpus=2368, radix=48, nic_gbps=200, port_gbps=400, oversubscription=3), 83_200),  # was 96,000
        (dict(gpus=1568, radix=32, port_gbps=800, spine_oversubscription="5:3"), 262_400),  # was 307,200
        (dict(gpus=760, placement="rack", oversubscription=3), 52_800),  # was 51,200: below every split
        (dict(gpus=13000, radix=64, oversubscription=3), 870_400),  # only least-cut realises it
    ],
)
def test_irregular_fabrics_agree_with_max_flow(shape, gbps):
    result = bisection(fabric_of(**shape))
    flows = {s.name: s.gbps for s in result.splits}
    assert result.gbps == result.least_cut.gbps == result.maxflow_gbps == flows["least-cut"] == gbps
    assert result.agrees and result.source == "analytic" and result.least_cut.exact
    assert "equals the analytic value" in result.note and "this fabric has" in result.note
    assert list(flows)[:-4][-1] == "least-cut"  # the last tier-aligned split, before the random ones


def test_least_cut_terms_of_the_issue_example():
    cut = least_cut(fabric_of(**ISSUE))
    d = cut.to_dict()
    assert (d["pods"], d["pods_a"], d["units_moved"], d["endpoints_across"]) == (3, 1, 0, 8)
    assert (d["pod_uplink_gbps"], d["unit_uplink_gbps"], d["endpoint_gbps"]) == (40_000, 32_000, 800)
    assert d["unit_leaves"] == 8 and d["method"] == "classes"
    assert d["gbps"] == d["pods_a"] * d["pod_uplink_gbps"] + d["endpoints_across"] * d["endpoint_gbps"]
    assert cut.split.name == "least-cut" and cut.split.kind == "tier"
    assert int(cut.split.side_a.sum()) == 128 * 8  # 128 GPUs with their 8 NICs each


def test_regular_fabrics_evaluate_no_extra_split():
    for shape in (dict(gpus=1024), dict(gpus=4096), dict(gpus=768, oversubscription=3)):
        names = [s.name for s in bisection(fabric_of(**shape)).splits]
        assert "least-cut" not in names


def test_gpu_nics_across_pods_few_units_are_tried_exhaustively():
    # 8 NICs per GPU on 8 rail leaves, pods of 4 leaves: a GPU's NICs reach two pods
    fabric = fabric_of(gpus=12, gpus_per_node=1, nics_per_node=8, radix=8, tiers=3)
    assert fabric.plan.leaves_per_pod % 8
    result = bisection(fabric)
    cut = result.least_cut
    assert (cut.method, cut.exact) == ("units", True) and cut.lower_gbps == cut.gbps
    assert result.gbps == result.maxflow_gbps == cut.gbps and result.agrees
    assert "least-cut" in [s.name for s in result.splits]
    assert "reach leaves of more than one pod" in result.note
    network = FlowNetwork(fabric)
    assert min(network.value(side) for side in all_balanced_splits(fabric)) == result.gbps


def test_gpu_nics_across_pods_many_units_give_bounds():
    # 18 units of 8 rail leaves, pods of 10 leaves: more units than are tried one by one
    fabric = fabric_of(gpus=1000, gpus_per_node=2, nics_per_node=16, radix=20, tiers=3, oversubscription=3,
                       nic_gbps=100, port_gbps=400)
    result = bisection(fabric)
    cut = result.least_cut
    assert (cut.method, cut.exact) == ("bounds", False)
    assert cut.lower_gbps == 136_000 < result.gbps == cut.gbps == result.maxflow_gbps == 144_000
    assert result.agrees and result.source == "analytic"
    assert "an upper bound, and the bisection is at least 136000 Gb/s" in result.note


def test_headline_is_never_above_a_split(monkeypatch):
    from dataclasses import replace

    import topo.analysis.bisection as module

    fabric = fabric_of(gpus=256)
    real = module.least_cut(fabric)
    monkeypatch.setattr(module, "least_cut", lambda f: replace(real, gbps=real.gbps + 1000, exact=False))
    result = module.bisection(fabric)
    assert result.gbps == result.maxflow_gbps == real.gbps and result.source == "max-flow"
    assert not result.agrees and "so gbps is its max-flow" in result.note


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
    assert first["source"] == "analytic" and first["least_cut"]["gbps"] == 819_200
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
