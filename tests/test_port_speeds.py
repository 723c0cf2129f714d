"""Per-tier switch models of different port speeds: the tiers meet at the slower speed and each
port of the faster tier is broken out into ``faster / slower`` links (docs/fabric.md, "Per-tier
switch models"). Closed forms for the sizing, the port and lane of every link end, the analyses
(which must equal the same fabric built of one speed), the configs and the cabling."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import numpy as np
import pytest
from click.testing import CliRunner

from topo import build_fabric, load_spec, plan_fabric
from topo.analysis.analyze import AnalysisOptions, analyze
from topo.cli import main
from topo.errors import SpecError
from topo.fabric import end_lanes, switch_port_names
from topo.cabling import plan_cabling
from topo.outputs.cabling import cabling_csv
from topo.outputs.configs import config_files
from topo.outputs.exports import ExportError, containerlab_topology, export_files
from topo.summary import summarize

#: 64 x 400G leaves under 64 x 800G spines: each spine port broken out into 2 x 400G.
FAST_SPINE = dict(leaf_switch="eth-25t-64x400", spine_switch="eth-51t-64x800")
#: The same spines as 128 x 400G ports (the same silicon split at the factory): the equivalent fabric.
SPLIT_SPINE = dict(leaf_switch="eth-25t-64x400", spine_switch="eth-51t-128x400")
#: 64 x 800G leaves (400G NICs, 2 a port) under 128 x 400G spines: each leaf uplink broken out into 2.
FAST_LEAF = dict(leaf_switch="eth-51t-64x800", spine_switch="eth-51t-128x400")
#: Three tiers: 400G leaves, 800G spines broken out both ways, 400G cores.
FAST_MIDDLE = dict(leaf_switch="eth-25t-64x400", spine_switch="eth-51t-64x800", core_switch="eth-51t-128x400")


def _counts(plan):
    return (plan.tiers, plan.leaves, plan.spines, plan.cores, plan.pods, plan.leaf_spine_links, plan.spine_core_links)


@pytest.mark.parametrize("gpus", [1024, 4096, 8192])
def test_an_800g_spine_broken_out_sizes_like_its_128_port_split(gpus):
    fast, split = plan_fabric(load_spec({"gpus": gpus, **FAST_SPINE})), plan_fabric(load_spec({"gpus": gpus, **SPLIT_SPINE}))
    assert _counts(fast) == _counts(split)
    assert (fast.spine_down_lanes, fast.spine_downlinks) == (2, 2 * fast.spine_down_ports)
    assert fast.spine_down_ports == (64 if fast.tiers == 2 else 32)
    assert (fast.lanes(1), fast.spine_link_gbps) == ((1, 2), 400)


def test_1024_gpus_on_800g_spines():
    plan = plan_fabric(load_spec({"gpus": 1024, **FAST_SPINE}))
    # 32 leaves of 32 x 400G uplinks = 1,024 links; a spine takes 64 x 2 = 128: 8 spines, 4 links a leaf
    assert _counts(plan) == (2, 32, 8, 0, 1, 4, 0)


def test_800g_leaves_break_their_uplinks_out_to_400g_spines():
    plan = plan_fabric(load_spec({"gpus": 1024, **FAST_LEAF}))
    # a leaf: 32 ports down (64 NICs, 2 a port), 32 ports up = 64 x 400G uplinks; 16 leaves x 64
    # links over 128-port spines: 8 spines, 8 links a leaf
    assert (plan.breakout, plan.leaf_down_ports, plan.leaf_up_ports, plan.leaf_uplinks) == (2, 32, 32, 64)
    assert _counts(plan) == (2, 16, 8, 0, 1, 8, 0)
    assert plan.lanes(1) == (2, 1)


def test_three_tiers_with_a_faster_middle():
    plan = plan_fabric(load_spec({"gpus": 16384, **FAST_MIDDLE}))
    # a spine: 32 ports down, 32 up, each 2 x 400G: 64 leaves a pod, 64 uplinks; a 128-port core
    # takes one link from 128 ... spines of 8 pods: 16 links from each
    assert _counts(plan) == (3, 512, 256, 128, 8, 1, 16)
    assert (plan.lanes(1), plan.lanes(2), plan.spine_link_gbps, plan.core_link_gbps) == ((1, 2), (2, 1), 400, 400)


def test_faster_cores_take_more_pods():
    fields = {"gpus": 16384, "switch": "eth-12t-32x400"}
    with pytest.raises(SpecError, match="more than three tiers"):
        plan_fabric(load_spec(fields))
    plan = plan_fabric(load_spec({**fields, "core_switch": "eth-51t-64x800"}))
    # 32-port 400G cores hold 32 pods; 64 x 800G cores broken out to 128 x 400G hold 64: 64 pods of
    # 16 spines, each spine's 16 uplinks over 8 cores of its group (64 x 16 / 128), 2 links each
    assert (plan.pods, plan.cores_per_group, plan.cores, plan.spine_core_links) == (64, 8, 128, 2)
    assert (plan.core_down_lanes, plan.lanes(2)) == (2, (1, 2))


SHAPES = {
    "fast-spine": dict(gpus=1024, **FAST_SPINE),
    "fast-leaf": dict(gpus=1024, **FAST_LEAF),
    "fast-middle": dict(gpus=16384, **FAST_MIDDLE),
    "fast-leaf-rack": dict(gpus=2080, placement="rack", **FAST_LEAF),
    "fast-spine-rack-odd": dict(gpus=2080, placement="rack", **FAST_SPINE),
    "fast-core": dict(gpus=16384, switch="eth-12t-32x400", core_switch="eth-51t-64x800"),
    "fast-spine-dual-tor": dict(gpus=1024, dual_tor=True, **FAST_SPINE),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_link_end_is_one_port_lane_within_the_radix(name):
    fabric = build_fabric(load_spec(SHAPES[name]))
    plan, links = fabric.plan, fabric.links
    lo_lane, hi_lane = end_lanes(plan, links)
    for kind in (1, 2)[:plan.tiers - 1]:
        rows = links.kind == kind
        lo_lanes, hi_lanes = plan.lanes(kind)
        assert min(lo_lanes, hi_lanes) == 1
        assert set(links.gbps[rows].tolist()) == {(plan.spine_link_gbps, plan.core_link_gbps)[kind - 1]}
        for v, port, lane, lanes in ((links.lo[rows], links.lo_port[rows], lo_lane[rows], lo_lanes),
                                     (links.hi[rows], links.hi_port[rows], hi_lane[rows], hi_lanes)):
            assert 1 <= lane.min() and lane.max() <= lanes
            key = (v.astype(np.int64) * 1024 + port) * 16 + lane
            assert np.unique(key).size == key.size  # no port lane twice
    # every switch's ports, uplinks and downlinks, within its radix and its tier's ports
    radix = np.array([0] + [fabric.graph.nodes[fabric.names[fabric.first(t)]]["radix"] if fabric.count(t) else 0
                            for t in (1, 2, 3)])
    for end, port in ((links.lo, links.lo_port), (links.hi, links.hi_port)):
        switch = fabric.tier[end] > 0
        assert (port[switch] <= radix[fabric.tier[end[switch]]]).all()
    # the names of both ends are unique per switch
    lo_name, hi_name = switch_port_names(fabric, links)
    ends = [(int(v), n) for v, n in zip(links.lo.tolist(), lo_name) if n] + list(zip(links.hi.tolist(), hi_name))
    assert len(set(ends)) == len(ends)


@pytest.mark.parametrize("order", ["topology", "random"])
def test_the_analyses_equal_the_same_fabric_of_one_speed(order):
    options = AnalysisOptions(order=order, sizes=(1 << 20, 8 << 30), hash_samples=4)
    fast = analyze(build_fabric(load_spec({"gpus": 1024, **FAST_SPINE})), options).to_dict()
    split = analyze(build_fabric(load_spec({"gpus": 1024, **SPLIT_SPINE})), options).to_dict()
    for key in ("hops", "bisection", "ecmp", "allreduce"):
        assert fast[key] == split[key], key
    assert fast["bisection"]["gbps"] == fast["bisection"]["maxflow_gbps"] == 204_800


def test_three_tier_analyses_equal_the_fabric_of_one_speed():
    options = AnalysisOptions(order="random", sizes=(8 << 30,), hash_samples=2, routing="dmodk")
    fast = analyze(build_fabric(load_spec({"gpus": 8192, "switch": "eth-25t-64x400", "core_switch": "eth-51t-64x800"})),
                   options).to_dict()
    split = analyze(build_fabric(load_spec({"gpus": 8192, "switch": "eth-25t-64x400",
                                            "core_switch": "eth-51t-128x400"})), options).to_dict()
    for key in ("hops", "bisection", "ecmp", "allreduce"):
        assert fast[key] == split[key], key
    assert fast["bisection"]["agrees"]


def test_configs_name_both_lanes_of_a_broken_out_spine_port():
    fabric = build_fabric(load_spec({"gpus": 1024, **FAST_SPINE}))
    files = dict(config_files(fabric))
    spine = json.loads(files["switches/cluster-spine-00/config_db.json"])
    leaf = json.loads(files["switches/cluster-leaf-su00-r0/config_db.json"])
    # SN5600 port 1 (8 SerDes lanes) as 2 x 400G: Ethernet0 (lanes 0-3) and Ethernet4 (lanes 4-7)
    assert len(spine["PORT"]) == 128
    first, second = spine["PORT"]["Ethernet0"], spine["PORT"]["Ethernet4"]
    assert (first["speed"], first["lanes"], first["alias"], first["index"]) == ("400000", "0,1,2,3", "etp1a", "1")
    assert (second["speed"], second["lanes"], second["alias"], second["index"]) == ("400000", "4,5,6,7", "etp1b", "1")
    # leaf r0's first two uplinks (ports 33 and 34) go to spine port 1's two lanes
    assert first["description"] == "to cluster-leaf-su00-r0:Ethernet256"
    assert second["description"] == "to cluster-leaf-su00-r0:Ethernet264"
    assert leaf["PORT"]["Ethernet264"]["description"] == "to cluster-spine-00:Ethernet4"
    # every lossless port's profile is the 400G link's, with the lanes of half an 800G port
    assert {spine["BUFFER_PG"][f"{p}|3"]["profile"] for p in spine["PORT"]} == {"pg_lossless_400000_300m_profile"}
    frr = files["switches/cluster-spine-00/frr.conf"]
    assert "interface Ethernet4\n" in frr or " Ethernet4" in frr


def test_configs_break_an_800g_leaf_uplink_out_and_keep_an_unused_lane_down():
    fabric = build_fabric(load_spec({"gpus": 1024, **FAST_LEAF}))
    leaf = json.loads(dict(config_files(fabric))["switches/cluster-leaf-su00-r0/config_db.json"])
    # 64 ports of 2 x 400G: 32 down to NICs, 32 up to spines
    assert len(leaf["PORT"]) == 128 and {p["speed"] for p in leaf["PORT"].values()} == {"400000"}
    assert leaf["PORT"]["Ethernet256"]["description"] == "to cluster-spine-00:Ethernet0"
    assert leaf["PORT"]["Ethernet260"]["description"] == "to cluster-spine-00:Ethernet4"
    # 65 racks on 32-link spines: the last spine port's second lane is unused, in the PORT table and down
    odd = build_fabric(load_spec(SHAPES["fast-spine-rack-odd"]))
    assert (odd.plan.leaves, odd.plan.spines, odd.plan.leaf_spine_links) == (65, 32, 1)
    spine = json.loads(dict(config_files(odd))["switches/cluster-spine-31/config_db.json"])
    assert len(spine["PORT"]) == 33 * 2 + 31  # 33 ports broken out, 31 unused and whole
    last = spine["PORT"]["Ethernet260"]  # port 33, lane 2 of the SN5600: no 66th leaf
    assert (last["admin_status"], last["speed"], last["alias"]) == ("down", "400000", "etp33b")
    assert spine["PORT"]["Ethernet256"]["admin_status"] == "up"


def test_cabling_breaks_the_fast_ports_out_with_one_fibre_a_link():
    fabric = build_fabric(load_spec({"gpus": 1024, **FAST_SPINE}))
    cabling = plan_cabling(fabric)
    rows = [r for r in csv.DictReader(io.StringIO(cabling_csv(fabric, cabling))) if r["tier"] == "leaf-spine"]
    assert len(rows) == 1024 and len({r["cable_id"] for r in rows}) == 1024
    first = rows[:2]
    assert [(r["b_port"], r["b_lane"], r["b_interface"]) for r in first] == [("1", "1", "Ethernet0"), ("1", "2", "Ethernet4")]
    # an 800G 2xDR4 module serves both lanes of a spine port: 512 of them for 1,024 links
    bom = {(line.category, line.item, line.tier, line.end): line.quantity for line in cabling.bom}
    assert bom["transceiver", "800G OSFP 2xDR4", "leaf-spine", "switch"] == 512
    assert bom["transceiver", "400G QSFP-DD DR4", "leaf-spine", "switch"] == 1024
    leaf_fast = build_fabric(load_spec({"gpus": 1024, **FAST_LEAF}))
    up = [r for r in csv.DictReader(io.StringIO(cabling_csv(leaf_fast, plan_cabling(leaf_fast))))
          if r["tier"] == "leaf-spine"]
    assert [(r["a_port"], r["a_lane"], r["a_interface"]) for r in up[:2]] == [("33", "1", "Ethernet256"),
                                                                            ("33", "2", "Ethernet260")]


def test_summary_and_console_state_the_breakout(tmp_path):
    summary = summarize(build_fabric(load_spec(SHAPES["fast-middle"]))).to_dict()
    assert summary["breakouts"] == [
        {"links": "leaf-spine", "link_gbps": 400, "tier": "spine", "port_gbps": 800, "lanes": 2},
        {"links": "spine-core", "link_gbps": 400, "tier": "spine", "port_gbps": 800, "lanes": 2}]
    assert summary["per_tier"]["spine"]["port_gbps"] == 800
    out = tmp_path / "fast"
    result = CliRunner().invoke(main, ["build", "--gpus", "1024", "--leaf-switch", "eth-25t-64x400", "--spine-switch",
                                       "eth-51t-64x800", "-o", str(out), "--no-analysis"], prog_name="topo")
    assert result.exit_code == 0, result.output
    assert "switches: leaf 64 x 400G (eth-25t-64x400), spine 64 x 800G (eth-51t-64x800)" in result.output
    assert "port speeds: leaf-spine links at 400G, each 800G spine port broken out into 2" in result.output
    assert "port speeds: leaf-spine links at 400G" in (out / "README.md").read_text()
    design = json.loads((out / "design.json").read_text())
    up = [link for link in design["links"] if link["kind"] == "leaf-spine"]
    assert up[1] == {"kind": "leaf-spine", "gbps": 400, "a": "cluster-leaf-su00-r0", "a_port": 34,
                     "b": "cluster-spine-00", "b_port": 1, "b_lane": 2}
    check = CliRunner().invoke(main, ["check", str(out), "-q"], prog_name="topo")
    assert check.exit_code == 0, check.output


def test_the_lab_uses_the_lane_names_and_sonic_vs_is_refused():
    fabric = build_fabric(load_spec({"gpus": 256, **FAST_SPINE}))
    lab = containerlab_topology(fabric)
    assert '"cluster-spine-00:Ethernet4"' in lab or "cluster-spine-00:Ethernet4" in lab
    with pytest.raises(ExportError, match="spines' 800G ports are broken out into 2 leaf-spine links"):
        export_files(fabric, kind="sonic-vs")


@pytest.mark.parametrize("fields, message", [
    (dict(radix=64, port_gbps=300, nic_gbps=300, spine_switch="eth-25t-64x400"),
     r"spine_switch=eth-25t-64x400 \(400G ports\) over leaf_switch=generic \(300G ports\): 400G is not a whole "
     r"number of 300G links"),
    (dict(radix=64, port_gbps=25, nic_gbps=25, spine_switch="eth-25t-64x400"),
     r"a 400G port broken out into 16 links of 25G; at most 8 are supported"),
    (dict(radix=64, port_gbps=50, nic_gbps=50, spine_switch="eth-51t-128x400"),
     r"spine_switch=eth-51t-128x400's 400G ports meet leaf_switch=generic's 50G ports, a breakout into 8 links, "
     r"but a port has 4 SerDes lanes"),
])
def test_speeds_that_cannot_meet_are_refused(fields, message):
    with pytest.raises(SpecError, match=message):
        build_fabric(load_spec({"gpus": 256, **fields}))


def test_a_sku_without_breakout_is_refused_as_the_faster_tier(monkeypatch):
    import topo.catalog

    real = topo.catalog.platform_catalog()
    fake = {name: dataclasses.replace(p, alias_style="none") if name == "sn5600-acs" else p for name, p in real.items()}
    monkeypatch.setattr(topo.catalog, "platform_catalog", lambda: fake)
    with pytest.raises(SpecError, match="but platform sn5600-acs offers no breakout; pick another SKU of eth-51t-64x800"):
        build_fabric(load_spec({"gpus": 256, **FAST_SPINE}))


def test_growth_keeps_whole_fast_ports_free():
    from topo.sizing import growth

    fast = growth(load_spec({"gpus": 256, "grow_to": 1024, **FAST_SPINE}))
    split = growth(load_spec({"gpus": 256, "grow_to": 1024, **SPLIT_SPINE}))
    # 24 leaves to come x 32 uplinks = 768 links: 768 ports of 400G, or 384 ports of 800G in 2 lanes
    assert (fast["reserved_ports"]["spine"], split["reserved_ports"]["spine"]) == (384, 768)
    assert fast["steps"] == split["steps"]


def test_growth_counts_a_half_used_fast_port_once():
    from topo.sizing import growth

    # 3 racks of 32 GPUs on 32 spines, one link each: today every spine's port 2 has lane 1 in use;
    # the final 32 leaves use 16 ports of 2 lanes a spine: 14 more ports a spine
    g = growth(load_spec({"gpus": 96, "grow_to": 1024, "placement": "rack", "spines": 32, **FAST_SPINE}))
    assert g["reserved_ports"]["spine"] == 32 * 14


def test_bgp_takes_every_link_of_a_switch_with_more_links_than_ports():
    # 800G leaves at 3:5: 24 ports down, 40 up = 80 links of 400G to the spines, on 64 ports
    fabric = build_fabric(load_spec({"gpus": 256, "oversubscription": "3:5", **FAST_LEAF}))
    frr = dict(config_files(fabric))["switches/cluster-leaf-su00-r0/frr.conf"]
    assert frr.count(" remote-as ") == 80 and "  maximum-paths 80\n" in frr


def test_a_lost_link_what_if_names_the_port_of_one_link():
    from topo.analysis.analyze import _parts

    # the 800G leaf's uplink port carries 2 links: the what-if names the spine's 400G port instead
    names = _parts(build_fabric(load_spec({"gpus": 1024, **FAST_LEAF})), ("link", 1), 3)
    assert names[0] == "cluster-spine-00:1" and all(n.startswith("cluster-spine-") for n in names)


@pytest.mark.parametrize("fields, message", [
    (dict(leaf_switch="ndr-64x400", spine_switch="xdr-144x800"),
     "are InfiniBand models of different port speeds; topo breaks faster ports out only on Ethernet"),
    (dict(spines=2, **FAST_SPINE), r"spines=2 have 256 downlink links \(128 ports of 2 lanes\) but 32 leaves x 32 "
                                   r"uplinks need 1024"),
])
def test_more_mixes_that_are_refused(fields, message):
    with pytest.raises(SpecError, match=message):
        build_fabric(load_spec({"gpus": 1024, **fields}))


def test_optics_that_cannot_meet_are_one_error_line_and_no_folder(tmp_path):
    out = tmp_path / "x"
    result = CliRunner().invoke(main, ["build", "--gpus", "512", "--radix", "64", "--port-gbps", "200", "--nic-gbps",
                                       "200", "--spine-switch", "eth-51t-64x800", "-o", str(out), "-q"],
                                prog_name="topo")
    assert result.exit_code != 0 and not out.exists()
    assert result.output.strip().splitlines()[-1].startswith(
        "Error: leaf-spine: no optical module pair of the media catalogue joins a 200G and a 800G switch cage "
        "for a 200G link")
