"""Dual-ToR: every NIC bonded over two links, one to each leaf of an MCLAG pair (docs/fabric.md).

Closed forms for the sizing and the layout, the routing of a bond's queue pairs, the analyses
under a lost link or leaf, and the two leaves' configs against each other.
"""

from __future__ import annotations

import ipaddress
import json

import numpy as np
import pytest

from topo import build_fabric, load_spec, plan_fabric
from topo.analysis.allreduce import allreduce
from topo.analysis.analyze import AnalysisOptions, what_if
from topo.analysis.bisection import bisection
from topo.analysis.faults import apply_faults, no_faults
from topo.analysis.routing import route
from topo.errors import SpecError
from topo.fabric import PEER_KIND
from topo.outputs.configs import config_files
from topo.summary import summarize


def fabric_of(**fields):
    return build_fabric(load_spec(fields))


@pytest.mark.parametrize("placement, su_nodes", [("rail", 64), ("rack", 8)])
def test_a_pair_takes_the_nics_of_two_leaves_and_its_peer_link_two_uplinks(placement, su_nodes):
    plan = plan_fabric(load_spec({"gpus": 1024, "dual_tor": True, "placement": placement}))
    # 200G links into 400G ports broken out in two: 64 links a leaf, the NICs of a pair
    assert (plan.breakout, plan.nics_per_leaf, plan.su_nodes) == (2, 64, su_nodes)
    assert (plan.leaves, plan.pairs, plan.rails, plan.nic_rails) == (32, 16, 16, 8)
    # 32 down, 30 up, 2 to the peer link: 32 leaves x 30 uplinks over 64-port spines is 15 spines
    assert (plan.leaf_down_ports, plan.leaf_up_ports, plan.peer_ports) == (32, 30, 2)
    assert (plan.spines, plan.leaf_spine_links) == (15, 2)


def test_three_tiers_keep_a_pair_in_one_pod():
    plan = plan_fabric(load_spec({"gpus": 16384, "dual_tor": True}))
    assert (plan.tiers, plan.leaves, plan.pods, plan.leaves_per_pod) == (3, 512, 16, 32)
    fabric = fabric_of(gpus=48, gpus_per_node=2, radix=8, dual_tor=True, placement="rack")
    leaf = fabric.pod[fabric.first(1):fabric.first(2)]
    assert (leaf[0::2] == leaf[1::2]).all()


@pytest.mark.parametrize("placement", ["rail", "rack"])
def test_both_links_of_a_nic_land_on_the_same_port_of_the_pair(placement):
    f = fabric_of(gpus=1024, dual_tor=True, placement=placement)
    links = f.links
    host = np.flatnonzero(links.kind == 0)
    assert host.size == 2 * 1024 and (links.gbps[host] == 200).all()
    node, port = links.lo[host].astype(np.int64), links.lo_port[host].astype(np.int64)
    order = np.lexsort((port, node))
    a, b = host[order][0::2], host[order][1::2]  # members 0 and 1 of each NIC, node-major
    assert (links.lo[a] == links.lo[b]).all() and (links.lo_port[b] == links.lo_port[a] + 1).all()
    leaf_a, leaf_b = links.hi[a] - f.first(1), links.hi[b] - f.first(1)
    assert (leaf_a % 2 == 0).all() and (leaf_b == leaf_a + 1).all()
    assert (links.hi_port[a] == links.hi_port[b]).all() and (links.lane[a] == links.lane[b]).all()
    # one subnet a pair: both links carry the bond's address; first address the gateway
    ip = f.addressing.link_ip
    assert (ip[a] == ip[b]).all()
    first = ipaddress.ip_address(int(ip[a][0]))
    assert str(first) == "10.128.0.2"
    assert f.names[links.hi[a][0]].endswith("a") and f.names[links.hi[b][0]].endswith("b")
    # 16 pairs x 2 peer links on the last two ports, not routed
    peer = f.peer_links
    assert len(peer) == 32 and (peer.kind == PEER_KIND).all()
    assert sorted(set(peer.lo_port.tolist())) == [63, 64] and (peer.lo_port == peer.hi_port).all()
    assert ((peer.lo - f.first(1)) % 2 == 0).all() and (peer.hi == peer.lo + 1).all()
    assert f.graph.number_of_edges() == len(links) + len(peer)


@pytest.mark.parametrize("fields, message", [
    (dict(planes=2, nic_gbps=800), "dual_tor with planes=2"),
    (dict(tiers=1), "dual_tor with tiers=1"),
    (dict(switch="ndr-64x400"), "InfiniBand has no link aggregation"),
    (dict(routing_mode="unified"), "dual_tor with routing_mode=unified"),
    (dict(radix=8, oversubscription=3, gpus=48, gpus_per_node=2), "peer link takes 2 of its 2 uplink ports"),
])
def test_what_dual_tor_cannot_be(fields, message):
    with pytest.raises(SpecError) as info:
        plan_fabric(load_spec({"gpus": 1024, "dual_tor": True, **fields}))
    assert message in str(info.value)


def test_a_bond_alternates_its_links_and_a_pair_delivers_locally():
    f = fabric_of(gpus=1024, dual_tor=True)
    # NIC 0 of node 0 to NIC 0 of node 1 (same rail pair) and of node 64 (the other SU's pair)
    r = route(f, np.array([0, 0]), np.array([8, 64 * 8]), qps=4)
    assert r.links.tolist() == [2] * 4 + [4] * 4
    first = r.resources[:, 0] // 2
    assert f.links.lo_port[first].tolist() == [0, 1, 0, 1, 0, 1, 0, 1]
    # a local queue pair arrives on the destination's link on its own leaf
    last = r.resources[np.arange(8), r.links.astype(np.int64) - 1] // 2
    assert (f.links.hi[last[:4]] == f.links.hi[first[:4]]).all()


def test_a_lost_link_moves_its_queue_pairs_to_the_other_and_both_cut_the_nic():
    f = fabric_of(gpus=1024, dual_tor=True)
    faults = apply_faults(f, ["cluster-node0001:0"])  # member a of NIC 0 of node 1
    r = route(f, np.array([0]), np.array([8]), qps=4, faults=faults)
    last = r.resources[np.arange(4), r.links.astype(np.int64) - 1] // 2
    assert r.reachable.all() and (f.links.lo_port[last] == 1).all()
    both = apply_faults(f, ["cluster-node0001:0", "cluster-node0001:1"])
    assert not route(f, np.array([0]), np.array([8]), qps=4, faults=both).reachable.any()


def test_the_peer_link_cannot_be_failed_and_says_why():
    from topo.errors import AnalysisError
    f = fabric_of(gpus=256, dual_tor=True)
    with pytest.raises(AnalysisError, match="port 63 of cluster-leaf-su00-r0a is its dual-ToR peer link"):
        apply_faults(f, ["cluster-leaf-su00-r0a:63"])


def test_bisection_is_the_leaves_uplinks_and_max_flow_agrees():
    for placement in ("rail", "rack"):
        b = bisection(fabric_of(gpus=1024, dual_tor=True, placement=placement))
        assert b.gbps == b.maxflow_gbps == 32 * 30 * 400 // 2


def test_a_lost_link_or_leaf_degrades_the_job_instead_of_stopping_it():
    options = AnalysisOptions(sizes=(1 << 30,), qps=4, hash_samples=2)
    for dual, stops in ((False, True), (True, False)):
        f = fabric_of(gpus=256, dual_tor=dual)
        leaf = f.names[f.first(1)]
        for part in ("cluster-node0003:0", leaf):
            result = allreduce(f, options, apply_faults(f, [part]))
            assert (result.details["stopped"] is not None) is stops, (dual, part)
            assert result.nodes == 32 and result.rows[-1]["busbw_GBps"] > 0
    rows = {r["scenario"]: r for r in what_if(fabric_of(gpus=256, dual_tor=True), samples=2).rows}
    assert not rows["leaf"]["stops_job"] and not rows["nic-link"]["stops_job"]
    assert rows["leaf"]["nodes_left_out"] == 0


def test_one_queue_pair_takes_half_a_nic_and_more_use_both_links():
    f = fabric_of(gpus=256, dual_tor=True)
    busbw = {q: allreduce(f, AnalysisOptions(sizes=(1 << 30,), qps=q, hash_samples=2), no_faults(f)).rows[-1]
             ["busbw_GBps"] for q in (1, 8)}
    one = fabric_of(gpus=256)
    single = allreduce(one, AnalysisOptions(sizes=(1 << 30,), hash_samples=2), no_faults(one))
    assert busbw[1] <= 0.55 * single.rows[-1]["busbw_GBps"] < busbw[8]


def test_summary_counts_the_pairs_and_the_built_ratio():
    s = summarize(fabric_of(gpus=1024, dual_tor=True)).to_dict()
    d = s["dual_tor"]
    assert (d["pairs"], d["link_gbps"], d["peer_links"], d["peer_link_gbps"], d["leaf_uplinks"]) == (16, 200, 32, 800, 30)
    assert s["oversubscription"]["leaf"] == "16:15"
    assert s["links"] == {"node-leaf": 2048, "leaf-spine": 960, "spine-core": 0, "peer-link": 32, "total": 3040}
    assert summarize(fabric_of(gpus=1024)).to_dict()["dual_tor"] is None


def test_the_two_leaves_of_a_pair_agree():
    f = fabric_of(gpus=256, dual_tor=True)
    dbs = {rel.split("/")[1]: json.loads(text) for rel, text in config_files(f) if rel.endswith("config_db.json")}
    a, b = dbs["cluster-leaf-su00-r0a"], dbs["cluster-leaf-su00-r0b"]
    (da,), (db,) = a["MCLAG_DOMAIN"].values(), b["MCLAG_DOMAIN"].values()
    assert (da["source_ip"], da["peer_ip"]) == (db["peer_ip"], db["source_ip"])
    assert set(a["MCLAG_DOMAIN"]) == set(b["MCLAG_DOMAIN"]) and da["peer_link"] == db["peer_link"]
    assert a["PORTCHANNEL_MEMBER"] == b["PORTCHANNEL_MEMBER"]  # the same port for each NIC on both
    assert a["VLAN_INTERFACE"] == b["VLAN_INTERFACE"] == {"Vlan1000": {}, "Vlan1000|10.128.0.1/25": {}}
    macs = {pc["system_mac"] for db_ in (a, b) for name, pc in db_["PORTCHANNEL"].items() if "system_mac" in pc}
    assert len(macs) == 1  # one LACP partner for the host's bond
    # 32 nodes on a 64-link leaf: 32 bonds, then the peer link of ports 63 and 64
    assert len(a["MCLAG_INTERFACE"]) == 32 and len(a["PORTCHANNEL"]) == 33


def test_growth_keeps_both_leaves_of_every_rack():
    grown = fabric_of(gpus=256, grow_to=1024, dual_tor=True, placement="rack")
    plan = grown.plan
    assert (plan.leaves, plan.pairs, plan.sus) == (8, 4, 4)  # 4 racks of 8 nodes, a pair each
    host = grown.links.kind == 0
    assert np.bincount(grown.links.lo[host], minlength=plan.nodes).tolist() == [16] * 32
    assert bisection(grown).agrees


def test_polarized_hashing_spreads_a_pairs_traffic_over_both_leaves_and_their_links():
    f = fabric_of(gpus=1024, dual_tor=True)
    src = np.arange(0, 64 * 8, 8)  # NIC 0 of the first SU's nodes to NIC 0 of the second SU's
    r = route(f, src, src + 64 * 8, qps=8, polarized=True)
    last = r.resources[np.arange(r.links.size), 2] // 2  # the spine's link down to the destination leaf
    side = (f.links.lo[last] - f.first(1)) % 2
    par = f.links.lo_port[last] - f.plan.leaf_down_ports - 1  # which of a leaf's uplinks (parallel link)
    joint = np.bincount(side * 2 + par % 2, minlength=4)
    assert joint.min() > 0.15 * joint.sum()  # every (leaf, parallel link) taken, none starved


def test_dmodk_counts_a_nic_by_its_slot():
    from topo.analysis.routing import dmodk_index
    f = fabric_of(gpus=1024, dual_tor=True)
    # NICs 0 and 8 (node 0 and 1, rail 0) sit on slots 0 and 1 of the pair's a leaf
    assert dmodk_index(f, np.array([0, 8, 1])).tolist() == [0, 1, 2 * 64]


def test_a_folder_without_analysis_still_gives_nccl_two_queue_pairs():
    from topo.outputs.nccl import nccl_files
    f = fabric_of(gpus=256, dual_tor=True)
    env = next(text for rel, text in nccl_files(f).items() if rel.endswith(".env"))
    assert "NCCL_IB_QPS_PER_CONNECTION=2\n" in env
