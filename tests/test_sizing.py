"""Sizing rules against closed forms and published designs (DESIGN.md, DOMAIN.md)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from topo import SpecError, load_spec, plan_fabric
from topo.sizing import max_gpus, split_ports


def plan(**fields):
    return plan_fabric(load_spec(fields))


def test_default_1024_is_four_superpod_scalable_units():
    p = plan(gpus=1024)
    assert (p.nodes, p.tiers, p.sus, p.su_nodes) == (128, 2, 4, 32)
    assert (p.leaves, p.spines, p.cores) == (32, 16, 0)
    assert p.leaf_spine_links == 2
    assert (p.leaf_down_ports, p.leaf_up_ports) == (32, 32)


def test_256_gpus_is_one_scalable_unit():
    p = plan(gpus=256)
    assert (p.sus, p.leaves, p.spines, p.leaf_spine_links) == (1, 8, 4, 8)


@pytest.mark.parametrize("k", [4, 8, 16, 48])
def test_k_ary_fat_tree_counts(k):
    """Al-Fares et al.: k pods of k/2 + k/2 switches, (k/2)^2 cores, k^3/4 hosts, 5k^2/4 switches."""
    hosts = k**3 // 4
    p = plan(gpus=hosts, gpus_per_node=1, radix=k, tiers=3)
    assert p.pods == k
    assert p.leaves == k * k // 2
    assert p.spines == k * k // 2
    assert p.cores == (k // 2) ** 2
    assert p.leaves + p.spines + p.cores == 5 * k * k // 4
    assert p.leaf_spine_links == p.spine_core_links == 1


def test_fat_tree_k8_and_k4_figures_of_the_issue():
    p = plan(gpus=128, gpus_per_node=1, radix=8, tiers=3)
    assert (p.leaves, p.spines, p.cores) == (32, 32, 16)
    p4 = plan(gpus=16, gpus_per_node=1, radix=4, tiers=3)
    assert p4.leaves + p4.spines + p4.cores == 20


@pytest.mark.parametrize(
    "ratio, down, up",
    [(1, 32, 32), (3, 48, 16), (7, 56, 8), ("3:1", 48, 16), ("5:3", 40, 24), (1.5, Fraction(192, 5), None)],
)
def test_leaf_port_split(ratio, down, up):
    if up is None:
        with pytest.raises(SpecError, match=r"oversubscription=1.5 does not split radix=64"):
            plan(gpus=1024, oversubscription=ratio)
        return
    p = plan(gpus=1024, oversubscription=ratio)
    assert (p.leaf_down_ports, p.leaf_up_ports) == (down, up)


def test_oversubscription_3_gives_48_down_16_up_everywhere():
    p = plan(gpus=768, oversubscription=3)
    assert (p.leaf_down_ports, p.leaf_up_ports, p.su_nodes) == (48, 16, 48)
    assert (p.leaves, p.spines, p.leaf_spine_links) == (16, 4, 4)


def test_rack_placement_puts_four_8_nic_nodes_on_a_leaf():
    p = plan(gpus=1024, placement="rack")
    assert p.su_nodes == 4
    assert p.leaves == 32


def test_auto_tiers_switch_at_two_tier_capacity():
    assert max_gpus(load_spec({"gpus": 8}), 2) == 2048
    assert plan(gpus=2048).tiers == 2
    assert plan(gpus=2056).tiers == 3
    assert max_gpus(load_spec({"gpus": 8}), 3) == 65536
    assert plan(gpus=65536).tiers == 3


def test_too_many_gpus_names_the_maximum_and_a_radix_that_fits():
    with pytest.raises(SpecError) as info:
        plan(gpus=65544)
    message = str(info.value)
    assert "at most 65,536 GPUs" in message and "radix 128 would hold 524,288" in message


def test_forced_two_tiers_over_capacity():
    with pytest.raises(SpecError, match=r"two tiers of radix=64 hold at most 64 leaves \(2,048 GPUs\)"):
        plan(gpus=4096, tiers=2)


def test_partial_su_gets_full_set_of_leaves():
    """The published rule: a partial last SU still gets its full set of leaves and uplinks."""
    p = plan(gpus=1000)  # 125 nodes: three full SUs and one of 29 nodes
    assert (p.nodes, p.sus, p.leaves, p.spines) == (125, 4, 32, 16)


def test_spine_count_keeps_parallel_links_even():
    # 24 leaves x 32 uplinks = 768 = 12 spines' worth of ports, but 12 does not divide 32
    p = plan(gpus=768)
    assert p.spines == 16 and p.leaf_up_ports % p.spines == 0


def test_spines_override_for_growth_and_its_errors():
    assert plan(gpus=512, spines=16).spines == 16
    with pytest.raises(SpecError, match=r"spines=12 does not divide the 32 uplinks .* fit: 16, 32"):
        plan(gpus=768, spines=12)
    with pytest.raises(SpecError, match=r"spines=8 have 512 downlink ports but 32 leaves x 32 uplinks need 1024"):
        plan(gpus=1024, spines=8)


def test_breakout_800g_ports_to_400g_nics():
    p = plan(gpus=1024, switch="eth-51t-64x800")
    assert p.breakout == 2
    assert p.nics_per_leaf == 64 and p.su_nodes == 64
    assert (p.leaves, p.spines) == (16, 8)


def test_three_tier_oversubscribed_spines():
    p = plan(gpus=16384, spine_oversubscription=3)
    assert (p.spine_down_ports, p.spine_up_ports) == (48, 16)
    # a pod holds 48 leaves = 6 whole SUs of 8 rail leaves
    assert p.leaves_per_pod == 48


def test_spine_oversubscription_with_two_tiers_is_an_error():
    with pytest.raises(SpecError, match="spine_oversubscription=3 applies to the spine-core tier"):
        plan(gpus=1024, tiers=2, spine_oversubscription=3)


def test_split_ports_suggests_nearest_whole_splits():
    with pytest.raises(SpecError, match=r"nearest splits: 42 down/22 up \(21:11\), 43 down/21 up \(43:21\)"):
        split_ports(64, Fraction(2), "oversubscription")


def test_rack_nodes_must_fit_on_a_leaf():
    with pytest.raises(SpecError, match="do not fit on one leaf's 4 downlinks"):
        plan(gpus=64, placement="rack", radix=8)


def test_spine_oversubscription_is_not_silently_ignored_when_auto_picks_two_tiers():
    with pytest.raises(SpecError, match="fits two tiers, which have no core"):
        plan(gpus=1024, spine_oversubscription=3)


# --- under-subscription: more uplink than downlink ------------------------------------------------


def test_undersubscribed_leaf_1_to_1_125_on_a_68_port_switch():
    """1:1.125 (down:up 8:9) splits 68 ports into 32 down and 36 up; 32 leaves need 18 spines,
    each leaf with 2 links to each (36 uplinks), and every spine port a leaf's: 18 x 68 >= 32 x 36."""
    p = plan(gpus=1024, radix=68, oversubscription="1:1.125")
    assert (p.leaf_down_ports, p.leaf_up_ports, p.su_nodes) == (32, 36, 32)
    assert (p.leaves, p.spines, p.leaf_spine_links) == (32, 18, 2)
    assert p.spines * p.spine_down_ports >= p.leaves * p.leaf_up_ports


def test_undersubscribed_leaf_15_to_17_changes_the_scalable_unit():
    # 30 downlinks: a rail-optimized scalable unit of 30 nodes; 34 uplinks over 17 spines
    p = plan(gpus=960, oversubscription="15:17")
    assert (p.leaf_down_ports, p.leaf_up_ports, p.su_nodes, p.sus) == (30, 34, 30, 4)
    assert (p.leaves, p.spines, p.leaf_spine_links) == (32, 17, 2)


def test_undersubscription_bisection_is_the_nics():
    """With more bandwidth up than down, the NICs are the bottleneck: bisection is half the NIC
    bandwidth (960 NICs x 400G / 2), analytic and by max-flow."""
    from topo import build_fabric
    from topo.analysis.analyze import analyze
    a = analyze(build_fabric(load_spec({"gpus": 960, "oversubscription": "15:17"})))
    assert a.bisection.gbps == a.bisection.maxflow_gbps == 960 * 400 // 2
    assert a.bisection.agrees


def test_undersubscription_below_1_to_2_is_refused_with_the_flip():
    with pytest.raises(SpecError, match=r"must be at least 1:2 .* got 0.333333; did you mean 48:16\?"):
        plan(gpus=1024, oversubscription="16:48")
