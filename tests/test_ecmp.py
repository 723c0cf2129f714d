"""ECMP width: closed forms, brute-force path counting on the graph, faults, sampling."""

from __future__ import annotations

import json
from itertools import combinations

import networkx as nx
import numpy as np
import pytest

from topo import build_fabric, load_spec
from topo.analysis.ecmp import ecmp_width
from topo.analysis.faults import apply_faults
from topo.errors import AnalysisError

from .brute import link_paths, live_graph, updown_paths


def fabric_of(**fields):
    return build_fabric(load_spec(fields))


def leaves_of(fabric):
    return [fabric.names[i] for i in range(fabric.first(1), fabric.first(2))]


def brute_pairs(fabric, faults=None):
    """{(leaf a, leaf b): (switch paths, link paths)} over every leaf pair, from the graph."""
    g = live_graph(fabric, faults)
    out = {}
    for a, b in combinations(leaves_of(fabric), 2):
        paths = updown_paths(g, a, b)
        out[a, b] = (len(paths), sum(link_paths(g, p) for p in paths))
    return out


def brute_shortest(fabric):
    """Intact: networkx all_shortest_paths between leaves on the switches alone."""
    switches = fabric.graph.subgraph(n for n in fabric.graph if fabric.graph.nodes[n]["tier"] > 0)
    simple = nx.Graph(switches)
    out = {}
    for a, b in combinations(leaves_of(fabric), 2):
        paths = list(nx.all_shortest_paths(simple, a, b))
        out[a, b] = (len(paths), sum(link_paths(switches, p) for p in paths))
    return out


def summarize(values):
    values = np.asarray(values)
    return int(values.min()), float(values.mean()), int(values.max()), int((values == 0).sum())


def check_group(group, values, exact=True):
    """Compare a PairGroup with brute-force (switch, link) counts."""
    switch, link = zip(*values) if values else ((), ())
    assert group.pairs == len(values)
    assert group.exact is exact
    s = summarize(switch)
    assert (group.switch_paths.min, group.switch_paths.max, group.unreachable) == (s[0], s[2], s[3])
    assert group.switch_paths.mean == pytest.approx(s[1])
    lk = summarize(link)
    assert (group.link_paths.min, group.link_paths.max) == (lk[0], lk[2])
    assert group.link_paths.mean == pytest.approx(lk[1])


def split_by_pod(fabric, counts):
    pod = {fabric.names[i]: int(fabric.pod[i]) for i in range(fabric.first(1), fabric.first(2))}
    same = [v for (a, b), v in counts.items() if pod[a] == pod[b]]
    cross = [v for (a, b), v in counts.items() if pod[a] != pod[b]]
    return same, cross


# --- closed forms ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, same, cross",
    [
        (dict(gpus=1024), (16, 16 * 2**2), None),  # 16 spines, 2 parallel links
        (dict(gpus=256), (4, 4 * 8**2), None),  # 4 spines, 8 parallel links
        (dict(gpus=4096), (32, 32), (32 * 2, 32 * 2 * 16**2)),  # 2 cores per group, 16 links
        (dict(gpus=32, gpus_per_node=1, radix=8, tiers=3), (4, 4), (4, 4 * 4**2)),
        pytest.param(dict(gpus=65536), (32, 32), (1024, 1024), marks=pytest.mark.slow),
    ],
)
def test_intact_closed_forms(shape, same, cross):
    width = ecmp_width(fabric_of(**shape))
    group = width.same_pod
    assert (group.intact_switch_paths, group.intact_link_paths) == same
    assert (group.switch_paths.min, group.switch_paths.max) == (same[0], same[0])
    assert (group.link_paths.min, group.link_paths.max) == (same[1], same[1])
    if cross is None:
        assert width.cross_pod is None
    else:
        group = width.cross_pod
        assert (group.intact_switch_paths, group.intact_link_paths) == cross
        assert (group.switch_paths.min, group.switch_paths.max) == (cross[0], cross[0])
        assert (group.link_paths.min, group.link_paths.max) == (cross[1], cross[1])
        assert group.unreachable == 0


@pytest.mark.parametrize("k", [4, 8, 16])
def test_k_ary_fat_tree(k):
    """Al-Fares et al.: k/2 paths between edge switches of one pod, (k/2)^2 across pods."""
    width = ecmp_width(fabric_of(gpus=k**3 // 4, gpus_per_node=1, radix=k, tiers=3))
    assert width.same_pod.switch_paths.max == width.same_pod.switch_paths.min == k // 2
    assert width.cross_pod.switch_paths.max == width.cross_pod.switch_paths.min == (k // 2) ** 2
    assert width.cross_pod.link_paths.max == (k // 2) ** 2  # one link per pair of switches


# --- brute force ----------------------------------------------------------------------------------

SMALL = [
    dict(gpus=256),
    dict(gpus=1024),
    dict(gpus=16, gpus_per_node=1, radix=4, tiers=3),
    dict(gpus=32, gpus_per_node=1, radix=8, tiers=3),  # 4 parallel spine-core links
    dict(gpus=40, gpus_per_node=2, radix=8, tiers=3),  # partial pod
    dict(gpus=48, gpus_per_node=2, radix=8, placement="rack"),
]


@pytest.mark.parametrize("shape", SMALL, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_intact_matches_networkx_all_shortest_paths(shape):
    fabric = fabric_of(**shape)
    counts = brute_shortest(fabric)
    assert counts == brute_pairs(fabric)  # shortest paths of an intact Clos are up-down
    same, cross = split_by_pod(fabric, counts)
    width = ecmp_width(fabric)
    check_group(width.same_pod, same)
    if fabric.plan.tiers == 3:
        check_group(width.cross_pod, cross)


@pytest.mark.parametrize(
    "shape, fail, fraction, seed",
    [
        (dict(gpus=256), ["cluster-spine-01"], 0.5, 0),
        (dict(gpus=256), [], 0.9, 1),
        (dict(gpus=16, gpus_per_node=1, radix=4, tiers=3), ["cluster-core-g00-00"], 0.2, 2),
        (dict(gpus=32, gpus_per_node=1, radix=8, tiers=3), [], 0.5, 3),
        (dict(gpus=128, gpus_per_node=1, radix=8, tiers=3), [], 0.3, 4),
        (dict(gpus=40, gpus_per_node=2, radix=8, tiers=3), ["cluster-spine-p00-00"], 0.3, 5),
    ],
)
def test_faults_match_explicit_updown_paths(shape, fail, fraction, seed):
    fabric = fabric_of(**shape)
    faults = apply_faults(fabric, fail, fraction=fraction, seed=seed)
    same, cross = split_by_pod(fabric, brute_pairs(fabric, faults))
    width = ecmp_width(fabric, faults, samples=10_000)  # more than the pairs: all are evaluated
    check_group(width.same_pod, same)
    if fabric.plan.tiers == 3:
        check_group(width.cross_pod, cross)
    assert width.links_down == faults.links_down


def test_unreachable_pairs_are_counted():
    fabric = fabric_of(gpus=16, gpus_per_node=1, radix=4, tiers=3)
    faults = apply_faults(fabric, ["cluster-leaf-su00-r0:3", "cluster-leaf-su01-r0:4"])
    width = ecmp_width(fabric, faults)
    assert width.same_pod.unreachable == 1  # su00 and su01 share no spine
    assert width.same_pod.switch_paths.min == 0
    assert width.cross_pod.unreachable == 0
    assert width.cross_pod.switch_paths.min == 2  # su00 or su01 keeps one spine position of 2


def test_cross_pod_sampling_is_seeded_and_counted():
    fabric = fabric_of(gpus=4096)
    faults = apply_faults(fabric, fraction=0.1, seed=0)
    first = ecmp_width(fabric, faults, samples=64, seed=3)
    assert first.cross_pod.pairs == 64 and first.cross_pod.exact is False
    assert first.to_dict() == ecmp_width(fabric, faults, samples=64, seed=3).to_dict()
    assert first.same_pod.pairs == 4 * 32 * 31 // 2 and first.same_pod.exact
    every = ecmp_width(fabric, faults, samples=100_000)
    assert every.cross_pod.exact and every.cross_pod.pairs == 128 * 96 // 2


def test_to_dict_is_plain():
    d = ecmp_width(fabric_of(gpus=4096)).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert set(d) == {"same_pod", "cross_pod", "samples", "seed", "links_down"}
    assert set(d["same_pod"]) == {"pairs", "exact", "unreachable", "switch_paths", "link_paths",
                                  "intact_switch_paths", "intact_link_paths"}
    assert d["cross_pod"]["switch_paths"] == {"min": 64, "mean": 64.0, "max": 64}


def test_bad_samples():
    with pytest.raises(AnalysisError, match="samples"):
        ecmp_width(fabric_of(gpus=64), samples=0)
