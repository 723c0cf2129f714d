"""The all-reduce model's structure: NCCL's tuner, channels, stage limits, hash samples, routing, faults.

These tests hold the model to physical bounds and to NCCL's own formulas, never to a fitted figure:
a ring never beats its slowest stage, no time is below NCCL's latency floor, times grow with the
message, a removed spine never helps, and the tuner reproduces values worked out by hand from
NCCL's source (tuning.cc of the release named in topo.analysis.tuner).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from topo import build_fabric, load_spec
from topo.analysis.analyze import AnalysisOptions, analyze
from topo.analysis.collective import channel_layout, ring_stages, tree_stages
from topo.analysis.tuner import (LL, RING, SIMPLE, TREE, Comm, DEFAULT_CONSTANTS, Graph,
                                 comm_channels, duplicate_channels, search_speed, tune)
from topo.errors import AnalysisError
from topo.hardware.catalog import server_profiles
from topo.hardware.servers import NodeModel

SIZES = tuple(1 << k for k in range(2, 34, 3))  # 4 B to 8 GiB


def node(gpus=8, nics=8, nic_gbps=400.0, sm=90, nvlink=450.0, nvswitch=3, pcie=63.0, cpu="intel"):
    return NodeModel(gpus=gpus, nics=nics, nic_gbps=nic_gbps, sm=sm, nvlink_bw=nvlink, nvswitch=nvswitch,
                     gpu_pcie_GBps=pcie, nic_pcie_GBps=pcie, cpu_vendor=cpu, assumed=())


# ---- NCCL's tuner, by hand --------------------------------------------------------------------------

def test_tuner_ring_and_tree_latencies_are_nccls_formulas():
    g = Graph(8, 48.0, 48.0)
    m = tune(Comm(nodes=2, ranks=16, sm=90, channels=16), {RING: g, TREE: g})
    # ring: base + (nsteps - inter steps) x max(NVLink latency, net overhead) + inter steps x net latency
    assert m.latency[RING, LL] == pytest.approx(6.6 + 28 * 1.0 + 2 * 2.7)
    assert m.latency[RING, SIMPLE] == pytest.approx(8.4 + 28 * max(3.4, 3 * 1.0) + 2 * 14.0)
    # tree: base + 2 ((ppn - 1) NVLink latency + log2(nodes) net latency)
    assert m.latency[TREE, LL] == pytest.approx(6.8 + 2 * (7 * 0.6 + 1 * 5.0))
    # bandwidths: ring Simple channels x bw x nRanks / nsteps; ring LL half of it, capped at llMaxBw
    assert m.bandwidth[RING, SIMPLE] == pytest.approx(8 * 48 * 16 / 30)
    assert m.bandwidth[RING, LL] == pytest.approx(min(39.0, 8 * 48 * 0.5) * 16 / 30)
    # tree on 2 nodes: 0.92 of channels x bw, capped at channels x perChMaxTreeBw (Hopper, 2 nodes: 41.4)
    assert m.bandwidth[TREE, SIMPLE] == pytest.approx(min(8 * 48 * 0.92, 8 * 41.4) * 0.5)
    uncapped = tune(Comm(nodes=2, ranks=16, sm=90, channels=16), {TREE: g}, tree_cap=False)
    assert uncapped.bandwidth[TREE, SIMPLE] == pytest.approx(8 * 48 * 0.92 * 0.5)


def test_amd_hosts_pay_twice_the_net_overhead_and_a_lower_ll_cap():
    g = Graph(8, 48.0, 48.0)
    intel = tune(Comm(nodes=4, ranks=32, sm=90, cpu_vendor="intel"), {RING: g})
    amd = tune(Comm(nodes=4, ranks=32, sm=90, cpu_vendor="amd"), {RING: g})
    steps, inter = 62, 6
    assert amd.latency[RING, LL] - intel.latency[RING, LL] == pytest.approx((steps - inter) * (2.0 - 1.0))
    assert amd.bandwidth[RING, LL] < intel.bandwidth[RING, LL]


def test_channel_duplication_follows_ncclTopoDupChannels_and_postset():
    assert duplicate_channels(8, 47.0, 90) == (8, 47.0)  # Hopper, under 50 GB/s, more than 4 channels
    assert duplicate_channels(8, 94.0, 100) == (16, 47.0)
    assert duplicate_channels(4, 23.5, 80) == (4, 23.5)  # under 25 GB/s: never
    assert comm_channels(8, 47.0, 90, 2) == 16 and comm_channels(8, 47.0, 90, 1) == 16
    assert comm_channels(4, 47.0, 90, 2) == 16  # Hopper across nodes, fast channels: twice again
    assert search_speed(46.35, 90) == 40.0


# ---- physical bounds ----------------------------------------------------------------------------------

PROFILES = sorted(server_profiles())


@pytest.mark.parametrize("name", PROFILES)
@pytest.mark.parametrize("nic_gbps", [100, 200, 400, 800])
def test_a_ring_never_beats_its_slowest_stage(name, nic_gbps):
    """For every shipped profile and NIC speed: busbw <= the least of network, NVLink and PCIe."""
    base = server_profiles()[name].node_model()
    n = NodeModel(**{**base.__dict__, "nic_gbps": float(nic_gbps)})
    spec = {"gpus": 8 * base.gpus, "gpus_per_node": base.gpus, "nics_per_node": base.nics,
            "nic_gbps": nic_gbps, "port_gbps": max(400, nic_gbps)}
    fabric = build_fabric(load_spec(spec))
    result = analyze(fabric, AnalysisOptions(algo="ring", sizes=SIZES, hash_samples=2), node=n).allreduce
    stages = result.details["stages_busbw_GBps"]["ring"]
    bound = min(stages["network"], stages["nvlink"], stages["pcie"])
    line = base.nics * nic_gbps / 8  # every NIC at line rate, GB/s
    assert bound <= line * (1 + 1e-9)
    for row in result.rows:
        assert row["busbw_GBps"] <= bound * (1 + 1e-6)
        assert row["busbw_GBps"] <= line
    assert result.details["busbw_limit_GBps"] == pytest.approx(bound, rel=1e-3)


def test_two_nodes_of_8x400g_ring_at_the_nics_rate_not_above():
    """The issue's 705 GB/s: a flat ring cannot beat the node's NICs (8 x 47 GB/s usable)."""
    fabric = build_fabric(load_spec({"gpus": 16}))
    row = analyze(fabric, AnalysisOptions(algo="ring", sizes=(8 << 30,))).allreduce.rows[-1]
    assert 360 < row["busbw_GBps"] <= 8 * 50 * 0.94


def test_hierarchical_algorithms_may_pass_the_nics_but_not_nvlink():
    """NVLSTree reduces inside the node first, so its busbw may exceed the NICs', never 2 x NVLink."""
    fabric = build_fabric(load_spec({"gpus": 16}))
    result = analyze(fabric, AnalysisOptions(algo="nvlstree", sizes=(8 << 30,))).allreduce
    busbw = result.rows[-1]["busbw_GBps"]
    assert busbw > 8 * 50 * 0.94 and busbw < 2 * 450


@pytest.mark.parametrize("algo", ["auto", "ring", "tree", "nvlstree"])
@pytest.mark.parametrize("gpus", [16, 1024])
def test_times_grow_with_the_message_and_never_go_below_nccls_floor(algo, gpus):
    fabric = build_fabric(load_spec({"gpus": gpus}))
    result = analyze(fabric, AnalysisOptions(algo=algo, sizes=SIZES, hash_samples=4)).allreduce
    times = [row["time_s"] for row in result.rows]
    assert times == sorted(times)
    busbw = [row["busbw_GBps"] for row in result.rows]
    assert busbw[0] < 0.01 * busbw[-1]  # small messages are latency-bound
    for row in result.rows:
        floor = DEFAULT_CONSTANTS.base_latency[("tree", "ring").index(row["algorithm"])][
            ("LL", "LL128", "Simple").index(row["protocol"])] if row["algorithm"] in ("tree", "ring") else 0.0
        assert row["latency_us"] >= floor and row["time_s"] * 1e6 >= row["latency_us"] * (1 - 1e-6)
        assert row["time_s"] * 1e6 >= 4.0  # no all-reduce across nodes in under a few microseconds


def test_auto_picks_what_the_tuner_would_latency_bound_small_bandwidth_bound_large():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    rows = analyze(fabric, AnalysisOptions(sizes=(4, 8 << 30))).allreduce.rows
    assert (rows[0]["algorithm"], rows[0]["protocol"]) == ("tree", "LL")
    assert rows[-1]["protocol"] == "Simple" and rows[-1]["algorithm"] in ("nvlstree", "ring", "tree")
    assert rows[0]["tuner_time_s"] * 1e6 == pytest.approx(rows[0]["latency_us"], rel=0.01)


def test_one_node_runs_on_nvlink_with_nvls_on_nvswitch3_and_ring_without():
    fabric = build_fabric(load_spec({"gpus": 8}))
    h100 = analyze(fabric, AnalysisOptions(sizes=(8 << 30,))).allreduce
    assert h100.details["nvlink_only"] and h100.rows[-1]["algorithm"] == "nvls"
    # NVLS: channels x 40 GB/s (NCCL's speed for 46 GB/s a head) x 0.85 x 7/8 x 2
    assert h100.rows[-1]["busbw_GBps"] == pytest.approx(8 * 40 * 0.85 * 7 / 8 * 2, rel=0.01)
    a100 = analyze(fabric, AnalysisOptions(sizes=(8 << 30,)), node=node(sm=80, nvlink=300.0, nvswitch=2)).allreduce
    assert a100.rows[-1]["algorithm"] == "ring"
    assert a100.rows[-1]["busbw_GBps"] <= 300 * 0.8 * (1 + 1e-6)


# ---- availability and errors ----------------------------------------------------------------------

def test_algorithms_a_job_cannot_run_are_refused_with_the_reason():
    fabric = build_fabric(load_spec({"gpus": 64}))
    with pytest.raises(AnalysisError, match="--algo nvls: across nodes needs in-network reduction"):
        analyze(fabric, AnalysisOptions(algo="nvls"))
    with pytest.raises(AnalysisError, match="--algo collnetdirect: needs --sharp"):
        analyze(fabric, AnalysisOptions(algo="collnetdirect"))
    with pytest.raises(AnalysisError, match="--sharp: in-network reduction"):
        analyze(fabric, AnalysisOptions(sharp=True))
    with pytest.raises(AnalysisError, match="--algo nvlstree: needs NVSwitch-3"):
        analyze(fabric, AnalysisOptions(algo="nvlstree"), node=node(sm=80, nvlink=300.0, nvswitch=2))
    with pytest.raises(AnalysisError, match="LL and LL128 are for ring and tree only"):
        analyze(fabric, AnalysisOptions(algo="nvlstree", proto="LL"))
    with pytest.raises(AnalysisError, match="--hash-samples 0"):
        analyze(fabric, AnalysisOptions(hash_samples=0))


def test_sharp_on_infiniband_offers_collnet_and_nvls_across_nodes():
    fabric = build_fabric(load_spec({"gpus": 64, "switch": "ndr-64x400"}))
    for algo in ("collnetdirect", "collnetchain", "nvls"):
        row = analyze(fabric, AnalysisOptions(algo=algo, sharp=True, sizes=(1 << 30,))).allreduce.rows[-1]
        assert row["algorithm"] == algo and 0 < row["busbw_GBps"] < 2 * 450


# ---- ECMP entropy, hash samples, routing ----------------------------------------------------------

def test_figures_are_the_median_over_hash_samples_and_the_5th_percentile_is_below():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    result = analyze(fabric, AnalysisOptions(algo="ring", order="random", sizes=(1 << 30,)))
    d, row = result.allreduce.details, result.allreduce.rows[-1]
    assert d["hash_samples"] == 16 and d["routing"] == "ecmp"
    assert row["busbw_p5_GBps"] <= row["busbw_GBps"]
    assert d["slowest_connection_gbps_p5"] <= d["slowest_connection_gbps"] <= d["ideal_connection_gbps"]
    # the median moves little with the first seed, unlike one sample
    other = analyze(fabric, AnalysisOptions(algo="ring", order="random", sizes=(1 << 30,), hash_seed=1000))
    assert other.allreduce.rows[-1]["busbw_GBps"] == pytest.approx(row["busbw_GBps"], rel=0.15)


def test_more_queue_pairs_and_qp_hashing_lift_a_congested_job():
    fabric = build_fabric(load_spec({"gpus": 512, "radix": 32, "placement": "rack"}))

    def busbw(**kw):
        return analyze(fabric, AnalysisOptions(sizes=(1 << 30,), **kw)).allreduce.rows[-1]["busbw_GBps"]

    one, many, adaptive = busbw(), busbw(qps=16, hash_field="qpn"), busbw(routing="adaptive")
    assert one < many <= adaptive * (1 + 1e-9)


def test_infiniband_designs_route_by_destination_and_say_so():
    fabric = build_fabric(load_spec({"gpus": 1024, "switch": "ndr-64x400"}))
    d = analyze(fabric, AnalysisOptions(sizes=(1 << 30,))).allreduce.details
    assert d["routing"] == "dmodk" and d["hash_samples"] == 1 and d["hash_field"] is None
    ethernet = analyze(build_fabric(load_spec({"gpus": 1024})), AnalysisOptions(sizes=(1 << 30,)))
    assert ethernet.allreduce.details["routing"] == "ecmp"


def test_hash_polarisation_never_helps():
    fabric = build_fabric(load_spec({"gpus": 4096, "tiers": 3}))
    base = AnalysisOptions(algo="ring", order="random", sizes=(1 << 30,), hash_samples=8)
    plain = analyze(fabric, base).allreduce.rows[-1]["busbw_GBps"]
    polar = analyze(fabric, AnalysisOptions(**{**base.__dict__, "hash_polarized": True})).allreduce
    assert polar.details["hash_polarized"] is True
    assert polar.rows[-1]["busbw_GBps"] <= plain * 1.02


# ---- faults ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("spine", ["cluster-spine-p00-01", "cluster-spine-p01-07"])
def test_a_removed_spine_never_looks_like_a_gain(spine):
    fabric = build_fabric(load_spec({"gpus": 4096, "oversubscription": 3}))
    for algo in ("ring", "auto"):
        result = analyze(fabric, AnalysisOptions(algo=algo, order="random", sizes=(8 << 30,), fail=(spine,)))
        change = result.change()["busbw_GBps"]
        assert change["with_faults"] <= change["intact"]


def test_a_nic_link_down_stops_the_job_and_the_restart_moves_its_channels():
    fabric = build_fabric(load_spec({"gpus": 64}))
    intact = analyze(fabric, AnalysisOptions(algo="ring", sizes=(8 << 30,)))
    down = analyze(fabric, AnalysisOptions(algo="ring", sizes=(8 << 30,), fail=("cluster-node0003:5",)))
    stopped = down.allreduce.details["stopped"]
    assert stopped["nic_links_down"] == [{"node": "cluster-node0003", "nic": 5}]
    assert any(note.startswith("the job stops: NIC 5 of cluster-node0003") for note in down.notes())
    # NIC 6 of that node now carries its own channels and NIC 5's: the ring runs at half its rate
    before, after = intact.allreduce.rows[-1]["busbw_GBps"], down.allreduce.rows[-1]["busbw_GBps"]
    assert after == pytest.approx(before / 2, rel=0.02)
    layout = channel_layout(node(), 8, 376.0, np.array([[True] * 8] * 3 + [[True] * 5 + [False] + [True] * 2]
                                                           + [[True] * 8] * 4))
    assert 5 not in layout.nic_of[3] and (layout.nic_of[3] == 6).sum() == 2 * (layout.nic_of[0] == 6).sum()


def test_a_failed_server_is_left_out_of_the_restart():
    fabric = build_fabric(load_spec({"gpus": 64}))
    result = analyze(fabric, AnalysisOptions(algo="ring", sizes=(1 << 30,), fail=("cluster-node0002",)))
    d = result.allreduce.details
    assert d["stopped"]["nodes_without_nic"] == ["cluster-node0002"] and d["nodes"] == 7


def test_stage_limits_of_a_ring_and_a_tree_by_hand():
    n = node()
    layout = channel_layout(n, 4, 376.0)
    ring = ring_stages(layout, n, 23.5)  # two channels a NIC at half of 47 GB/s
    N = 32
    assert ring.network == pytest.approx(16 * 23.5 * N / (2 * (N - 1)))
    assert ring.nvlink == pytest.approx(450 * 20.6 / 25 * 8 / 7 * N / (2 * (N - 1)))
    tree = tree_stages(layout, n, 11.75)
    assert tree.network == pytest.approx(16 * 11.75) and tree.nvlink == pytest.approx(450 * 20.6 / 25 / 2)
    assert math.isinf(ring_stages(channel_layout(n, 1, 376.0), n, 0.0).network)


# ---- the one door: every collective priced through topo.analysis.pricing.price ------------------------

def test_the_door_prices_the_jobs_all_reduce_as_analyze_does():
    from topo.analysis.pricing import Network, price

    fabric = build_fabric(load_spec({"gpus": 256}))
    options = AnalysisOptions(sizes=(1 << 20, 1 << 30))
    priced = price(Network(fabric, options), "all-reduce", options.sizes, detail=True)
    assert priced.allreduce.to_rows() == analyze(fabric, options).allreduce.to_rows()
    assert [t.time_s for t in priced.rows] == [r["time_s"] for r in priced.allreduce.rows]


def test_an_all_gather_or_a_reduce_scatter_is_half_an_all_reduce_at_the_same_busbw():
    from topo.analysis.pricing import Network, price

    fabric = build_fabric(load_spec({"gpus": 256}))
    net = Network(fabric, AnalysisOptions(hash_samples=2))
    groups = np.arange(256).reshape(8, 32).T  # 32 same-rank groups of 8 servers
    size = float(1 << 28)
    ar, ag, rs = price(net, ("all-reduce", "all-gather", "reduce-scatter"), (size, size, size), groups).rows
    assert ag.time_s == rs.time_s == ar.time_s / 2
    assert ag.bandwidth_GBps == rs.bandwidth_GBps == ar.bandwidth_GBps
    alone = price(net, "all-reduce", (size,), groups).rows[0]
    assert alone == ar  # one routing for the three, the same figures as alone at one size


def test_send_receive_and_all_to_all_over_nvlink_and_across_servers():
    from topo.analysis.collective import nvlink_usable
    from topo.analysis.pricing import Network, price

    fabric = build_fabric(load_spec({"gpus": 256}))
    net = Network(fabric, AnalysisOptions(hash_samples=2))
    size = float(1 << 26)
    inside = price(net, "send-receive", (size,), np.array([[0, 1], [2, 3]])).rows[0]
    assert inside.bandwidth_GBps == nvlink_usable(net.node) and inside.algorithm == "p2p"
    across = price(net, "send-receive", (size,), np.array([[0, 8], [1, 9]]))
    assert across.slowest_gbps is not None and across.rows[0].time_s > inside.time_s
    assert across.rows[0].time_s >= size / (across.rows[0].bandwidth_GBps * 1e9)
    one_server = price(net, "all-to-all", (size,), np.arange(256).reshape(-1, 8)).rows[0]
    assert one_server.bandwidth_GBps is None and one_server.time_s > 0
    two_servers = price(net, "all-to-all", (size,), np.arange(256).reshape(-1, 16)).rows[0]
    assert two_servers.time_s > one_server.time_s and two_servers.bandwidth_GBps > 0


def test_the_door_refuses_what_it_cannot_price():
    from topo.analysis.pricing import Network, price

    net = Network(build_fabric(load_spec({"gpus": 64})))
    with pytest.raises(ValueError):
        price(net, "broadcast", (1.0,), np.arange(64).reshape(-1, 8))
    with pytest.raises(ValueError):
        price(net, ("all-reduce", "all-to-all"), (1.0, 1.0), np.arange(64).reshape(-1, 8))
    with pytest.raises(ValueError):
        price(net, "all-to-all", (1.0,))
    with pytest.raises(AnalysisError, match="split unevenly"):
        price(net, "all-reduce", (1.0,), np.array([[0, 1, 2, 8]]), name="test")
