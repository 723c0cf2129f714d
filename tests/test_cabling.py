"""Tests of the cabling plan and bill of materials (topo.cabling, docs/cabling.md)."""

from __future__ import annotations

import csv
import io
import json
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from topo import build_fabric, load_spec
from topo.addressing import sonic_port_name
from topo.fabric import LINK_KINDS
from topo.cabling import plan_cabling
from topo.outputs.cabling import cabling_line, BOM_COLUMNS, CABLING_COLUMNS, cabling_files
from topo.media import CablingError, _read_catalog, media_catalog, media_table_markdown

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "cabling.md"

#: Fabrics of every shape: two and three tiers, rail and rack, 400G and 800G ports, twin-port
#: cages, NIC breakouts (800G ports to 400G NICs, 400G ports to 200G NICs), InfiniBand.
SHAPES = {
    "default-256": {"gpus": 256},
    "rack-768-oversub3": {"gpus": 768, "placement": "rack", "oversubscription": 3},
    "ndr-1024": {"gpus": 1024, "switch": "ndr-64x400"},
    "ndr-rack-256": {"gpus": 256, "switch": "ndr-64x400", "placement": "rack", "cable_leaf_spine_m": 2},
    "eth800-512": {"gpus": 512, "switch": "eth-51t-64x800"},
    "eth800-rack-512": {"gpus": 512, "switch": "eth-51t-64x800", "placement": "rack"},
    "nic200-256": {"gpus": 256, "nic_gbps": 200},
    "fat-tree-k8": {"gpus": 128, "gpus_per_node": 1, "radix": 8, "tiers": 3},
    "ndr-3tier": {"gpus": 4096, "switch": "ndr-64x400"},
    "xdr-800": {"gpus": 1152, "switch": "xdr-144x800", "nic_gbps": 800},
}


def _build(**fields):
    return build_fabric(load_spec(fields))


def _rows(fabric):
    text = cabling_files(fabric)["cabling.csv"]
    reader = csv.reader(io.StringIO(text))
    header = next(reader)
    assert tuple(header) == CABLING_COLUMNS
    return [dict(zip(header, row)) for row in reader]


@pytest.fixture(scope="module", params=sorted(SHAPES))
def shape(request):
    fabric = _build(**SHAPES[request.param])
    return fabric, plan_cabling(fabric), _rows(fabric)


def test_one_row_per_link_with_both_ends_of_the_link(shape):
    fabric, cabling, rows = shape
    links, names = fabric.links, fabric.names
    assert len(rows) == len(links) == len(cabling)
    expected = Counter()
    for k, lo, hi, lo_port, hi_port, lane in zip(links.kind.tolist(), links.lo.tolist(), links.hi.tolist(),
                                                 links.lo_port.tolist(), links.hi_port.tolist(),
                                                 links.lane.tolist()):
        if k == 0:  # a is the leaf (with the breakout lane), b the server NIC
            expected[(LINK_KINDS[k], names[hi], hi_port, lane, names[lo], lo_port)] += 1
        else:
            expected[(LINK_KINDS[k], names[lo], lo_port, 1, names[hi], hi_port)] += 1
    got = Counter((r["tier"], r["a_device"], int(r["a_port"]), int(r["a_lane"]), r["b_device"], int(r["b_port"]))
                  for r in rows)
    assert got == expected
    speeds = {"node-leaf": fabric.spec.nic_gbps, "leaf-spine": fabric.spec.port_gbps,
              "spine-core": fabric.spec.port_gbps}
    assert all(int(r["gbps"]) == speeds[r["tier"]] for r in rows)


def test_each_switch_port_once_and_a_broken_out_port_once_per_lane(shape):
    fabric, _, rows = shape
    ends = Counter()
    for r in rows:
        ends[(r["a_device"], int(r["a_port"]), int(r["a_lane"]))] += 1
        if r["tier"] != "node-leaf":
            ends[(r["b_device"], int(r["b_port"]), 1)] += 1
    assert set(ends.values()) == {1}
    lanes = Counter((r["a_device"], int(r["a_port"])) for r in rows if r["tier"] == "node-leaf")
    assert max(lanes.values()) <= fabric.plan.breakout
    assert all(1 <= int(r["a_lane"]) <= fabric.plan.breakout for r in rows)
    # every port fits the radix, every NIC is cabled once
    assert all(1 <= int(r["a_port"]) <= fabric.spec.radix for r in rows)
    nics = Counter((r["b_device"], int(r["b_port"])) for r in rows if r["tier"] == "node-leaf")
    assert len(nics) == fabric.plan.nodes * fabric.spec.nics_per_node and set(nics.values()) == {1}


def test_rows_are_ordered_by_tier_switch_port_and_lane(shape):
    fabric, _, rows = shape
    index = fabric.index
    keys = [(LINK_KINDS.index(r["tier"]), index[r["a_device"]], int(r["a_port"]), int(r["a_lane"])) for r in rows]
    assert keys == sorted(keys)


def test_interface_names_and_cages(shape):
    fabric, _, rows = shape
    from topo.catalog import switch_catalog

    model = fabric.spec.switch
    ethernet = model is None or switch_catalog()[model].technology == "ethernet"
    per_cage = media_catalog().cage(model).ports_per_cage
    lanes = fabric.addressing.lanes_per_port
    for r in rows[:: max(1, len(rows) // 500)]:
        breakout = fabric.plan.breakout if r["tier"] == "node-leaf" else 1
        want = sonic_port_name(int(r["a_port"]), int(r["a_lane"]), lanes, breakout) if ethernet else ""
        assert r["a_interface"] == want
        assert int(r["a_cage"]) == (int(r["a_port"]) - 1) // per_cage + 1
        if r["tier"] == "node-leaf":
            assert r["b_interface"] == f"mlx5_{r['b_port']}" and r["b_cage"] == ""
        else:
            assert r["b_interface"] == (sonic_port_name(int(r["b_port"]), 1, lanes, 1) if ethernet else "")
            assert int(r["b_cage"]) == (int(r["b_port"]) - 1) // per_cage + 1


def test_cable_rows_are_adjacent_and_share_one_run(shape):
    _, cabling, rows = shape
    seen, previous = set(), None
    for r in rows:
        if r["cable_id"] != previous:
            assert r["cable_id"] not in seen, "the rows of a cable are adjacent"
            seen.add(r["cable_id"])
            previous = r["cable_id"]
    by_cable = {}
    for r in rows:
        first = by_cable.setdefault(r["cable_id"], r)
        for column in ("tier", "a_device", "a_cage", "medium", "cable", "length_m"):
            assert r[column] == first[column]
    assert len(by_cable) == cabling.cables
    prefixes = {"node-leaf": "NL-", "leaf-spine": "LS-", "spine-core": "SC-"}
    assert all(cid.startswith(prefixes[r["tier"]]) for cid, r in by_cable.items())


def test_totals_equal_the_rows(shape):
    fabric, cabling, rows = shape
    totals = cabling.to_dict()
    json.dumps(totals)  # plain data
    first = {}
    for r in rows:
        first.setdefault(r["cable_id"], r)
    assert totals["cables"]["total"] == len(first)
    assert totals["links"] == len(rows)

    def pieces(r):
        count = r["cable"].split("x ", 1)[0]
        return int(count) if count.isdigit() else 1

    assert totals["cables"]["pieces"] == sum(pieces(r) for r in first.values())
    assert sum(cabling.totals("cable").values()) == totals["cables"]["pieces"]
    # cables by medium, links by medium
    assert totals["cables"]["by_medium"] == dict(Counter(r["medium"] for r in first.values()))
    assert totals["links_by_medium"] == dict(Counter(r["medium"] for r in rows))
    # transceivers: one per switch cage position with optics, one per NIC with optics
    switch_end = {(r["a_device"], r["a_cage"], r["tier"]) for r in rows if r["a_transceiver"]}
    switch_end |= {(r["b_device"], r["b_cage"], r["tier"]) for r in rows
                   if r["tier"] != "node-leaf" and r["b_transceiver"]}
    server_end = [r for r in rows if r["tier"] == "node-leaf" and r["b_transceiver"]]
    assert totals["transceivers"]["switch_end"] == len(switch_end)
    assert totals["transceivers"]["server_end"] == len(server_end)
    assert totals["transceivers"]["total"] == len(switch_end) + len(server_end)
    # switches by model
    assert totals["switches"]["total"] == sum(fabric.count(t) for t in range(1, fabric.plan.tiers + 1))
    # bom.csv parses with its header and its quantities add up to the same totals
    bom = list(csv.DictReader(io.StringIO(cabling_files(fabric)["bom.csv"])))
    assert tuple(bom[0].keys()) == BOM_COLUMNS
    by_category = Counter()
    for line in bom:
        by_category[line["category"]] += int(line["quantity"])
    assert by_category["cable"] == totals["cables"]["pieces"]
    assert by_category["transceiver"] == totals["transceivers"]["total"]
    assert by_category["switch"] == totals["switches"]["total"]
    per_tier = totals["per_tier"]
    assert sum(t["links"] for t in per_tier.values()) == len(rows)
    assert sum(t["cables"] for t in per_tier.values()) == len(first)
    assert sum(t["transceivers"] for t in per_tier.values()) == totals["transceivers"]["total"]


def test_copper_has_no_transceivers_and_optics_two_ends(shape):
    _, _, rows = shape
    for r in rows:
        copper = r["medium"] in ("dac", "acc")
        assert (r["a_transceiver"] == "") == copper
        assert (r["b_transceiver"] == "") == copper


def test_two_transceivers_per_optical_cable_without_breakout_or_twin_ports():
    fabric = _build(gpus=4096)  # 400G ports, one per cage, 400G NICs; three tiers
    c = plan_cabling(fabric)
    d = c.to_dict()
    optical = sum(n for m, n in d["cables"]["by_medium"].items() if m.startswith(("mmf", "smf")))
    assert optical == d["cables"]["total"] == len(c)
    assert d["transceivers"]["total"] == 2 * optical
    assert d["transceivers"]["by_type"] == {"400G OSFP SR4": 2 * 4096 + 2 * 4096, "400G OSFP DR4": 2 * 4096}


def test_twin_port_cage_takes_one_module_for_two_ports():
    fabric = _build(gpus=1024, switch="ndr-64x400")
    d = plan_cabling(fabric).to_dict()
    # 1,024 NIC links + 1,024 leaf-spine links: every 2 switch ports share one 800G twin-port module
    assert d["transceivers"]["by_type"] == {"800G twin-port OSFP 2xSR4": (1024 + 2 * 1024) // 2,
                                            "400G OSFP SR4": 1024}


def test_breakout_port_takes_one_module_and_one_fibre_per_nic():
    fabric = _build(gpus=512, switch="eth-51t-64x800")  # 800G leaf ports, 2 x 400G NICs each
    c = plan_cabling(fabric)
    d = c.to_dict()
    assert d["transceivers"]["by_type"]["800G OSFP 2xSR4"] == 512 // 2 + 2 * 256  # NIC ports + leaf-spine ends
    assert d["transceivers"]["by_type"]["400G OSFP SR4"] == 512
    # an 800G switch-to-switch run over twin optics is 2 fibres with one label
    ls = c.tiers[1]
    assert ls.links == ls.cables == 256 and ls.pieces == 512


def test_copper_breakout_splitter_serves_the_nics_of_one_cage():
    rows = _rows(_build(gpus=512, switch="eth-51t-64x800", placement="rack"))
    nl = [r for r in rows if r["tier"] == "node-leaf"]
    assert {r["medium"] for r in nl} == {"dac"}
    legs = Counter(r["cable_id"] for r in nl)
    assert set(legs.values()) == {2}
    assert nl[0]["cable"] == "DAC 800G OSFP to 2x 400G OSFP splitter"
    assert [(r["a_port"], r["a_lane"], r["a_interface"]) for r in nl[:2]] == [("1", "1", "Ethernet0"),
                                                                              ("1", "2", "Ethernet4")]
    # twin-port cages: one splitter for the two ports of a cage
    rows = _rows(_build(gpus=256, switch="ndr-64x400", placement="rack"))
    nl = [r for r in rows if r["tier"] == "node-leaf"]
    assert nl[0]["cable"] == "DAC 800G twin-port OSFP to 2x 400G OSFP splitter"
    assert nl[0]["cable_id"] == nl[1]["cable_id"] and (nl[0]["a_port"], nl[1]["a_port"]) == ("1", "2")


def test_fibre_splitter_for_nics_slower_than_the_optical_port():
    rows = _rows(_build(gpus=256, nic_gbps=200))  # 400G ports, 2 x 200G NICs each
    nl = [r for r in rows if r["tier"] == "node-leaf"]
    assert set(Counter(r["cable_id"] for r in nl).values()) == {2}
    assert nl[0]["cable"] == "MPO-12/APC OM4 fibre 1:2 splitter"
    assert nl[0]["b_transceiver"] == "400G OSFP SR4 at 200G"


@pytest.mark.parametrize(("field", "metres", "medium"), [
    # 400G, one port per cage: DAC to 3 m, ACC to 5 m, SR to 50 m, DR to 500 m, FR to 2 km, then LR
    ("cable_node_leaf_m", 1, "dac"), ("cable_node_leaf_m", 3, "dac"), ("cable_node_leaf_m", 3.5, "acc"),
    ("cable_node_leaf_m", 5, "acc"), ("cable_node_leaf_m", 5.5, "mmf-sr"), ("cable_node_leaf_m", 50, "mmf-sr"),
    ("cable_node_leaf_m", 51, "smf-dr"), ("cable_node_leaf_m", 500, "smf-dr"),
    ("cable_node_leaf_m", 501, "smf-fr"), ("cable_node_leaf_m", 2000, "smf-fr"),
    ("cable_node_leaf_m", 2001, "smf-lr"), ("cable_node_leaf_m", 10000, "smf-lr"),
    ("cable_leaf_spine_m", 3, "dac"), ("cable_leaf_spine_m", 4, "acc"), ("cable_leaf_spine_m", 6, "mmf-sr"),
    ("cable_leaf_spine_m", 50, "mmf-sr"), ("cable_leaf_spine_m", 50.5, "smf-dr"),
    ("cable_spine_core_m", 2, "dac"), ("cable_spine_core_m", 5, "acc"), ("cable_spine_core_m", 30, "mmf-sr"),
    ("cable_spine_core_m", 100, "smf-dr"), ("cable_spine_core_m", 1000, "smf-fr"),
])
def test_media_switch_as_lengths_cross_the_thresholds(field, metres, medium):
    tier = field[len("cable_"):-len("_m")].replace("_", "-")
    fabric = _build(gpus=128, gpus_per_node=1, radix=8, tiers=3, **{field: metres})
    c = plan_cabling(fabric)
    by_tier = {t.tier: t for t in c.tiers}
    assert by_tier[tier].media == {medium: by_tier[tier].links}
    assert by_tier[tier].length_m == metres


@pytest.mark.parametrize(("fields", "tier", "medium"), [
    # 800G ports: straight DAC to 2 m, DAC splitters to 3 m, ACC (straight only) to 5 m
    ({"cable_leaf_spine_m": 2}, "leaf-spine", "dac"), ({"cable_leaf_spine_m": 2.5}, "leaf-spine", "acc"),
    ({"cable_leaf_spine_m": 5}, "leaf-spine", "acc"), ({"cable_leaf_spine_m": 6}, "leaf-spine", "mmf-sr"),
    ({"cable_node_leaf_m": 3}, "node-leaf", "dac"), ({"cable_node_leaf_m": 3.5}, "node-leaf", "mmf-sr"),
])
def test_800g_thresholds(fields, tier, medium):
    c = plan_cabling(_build(gpus=512, switch="eth-51t-64x800", **fields))
    by_tier = {t.tier: t for t in c.tiers}
    assert by_tier[tier].media == {medium: by_tier[tier].links}


def test_twin_port_copper_between_switches_needs_both_ports_to_one_cage():
    # 2,048 GPUs on ndr-64x400: one link from each leaf to each spine, so the two ports of a leaf
    # cage go to two spines and no twin-port copper cable can join them
    c = plan_cabling(_build(gpus=2048, switch="ndr-64x400", cable_leaf_spine_m=2))
    assert c.tiers[1].media == {"mmf-sr": 2048}
    # 1,024 GPUs: two parallel links per leaf-spine pair land in one cage at both ends
    c = plan_cabling(_build(gpus=1024, switch="ndr-64x400", cable_leaf_spine_m=2))
    assert c.tiers[1].media == {"dac": 1024} and c.tiers[1].cables == 512


def test_rack_and_rail_placement_defaults():
    rack = plan_cabling(_build(gpus=768, placement="rack", oversubscription=3))
    rail = plan_cabling(_build(gpus=768, placement="rail", oversubscription=3))
    assert rack.tiers[0].length_m == 3 and rack.tiers[0].media == {"dac": 768}
    assert rail.tiers[0].length_m == 20 and rail.tiers[0].media == {"mmf-sr": 768}
    rows = _rows(_build(gpus=768, placement="rack", oversubscription=3))
    assert {(r["length_m"], r["cable_length_m"]) for r in rows if r["tier"] == "node-leaf"} == {("3", "3")}


def test_ordered_length_is_the_next_stock_length():
    rows = _rows(_build(gpus=256, cable_node_leaf_m=17.5, cable_leaf_spine_m=120))
    assert {(r["tier"], r["length_m"], r["cable_length_m"]) for r in rows} == {
        ("node-leaf", "17.5", "20"), ("leaf-spine", "120", "150")}


def test_power_totals():
    c = plan_cabling(_build(gpus=1024, switch="ndr-64x400"))
    p = c.to_dict()["power_w"]
    # switch figures include their optics; the servers' 1,024 SR4 modules are added (8 W each)
    assert p["switches"] == 48 * 1720
    assert p["server_end"] == 1024 * 8
    assert p["switch_end"] == (512 + 1024) * 15
    assert p["switch_power_includes_optics"] is True
    assert p["total"] == 48 * 1720 + 1024 * 8
    # no model named: the catalogue's Ethernet model of the same shape gives the power, and says so
    generic = plan_cabling(_build(gpus=256)).to_dict()
    assert generic["power_w"]["switches"] == 12 * 1500
    assert generic["switches"]["by_model"][0]["item"] == "64x400G switch (no model named)"
    assert generic["power_w"]["switch_power_of"] == "eth-25t-64x400"
    assert "switches 18,000 W (as eth-25t-64x400)" in cabling_line(plan_cabling(_build(gpus=256)))
    assert not any("switch power unknown" in w for w in generic["warnings"])
    # a shape no catalogued model has: the power is not totalled, and the plan says why
    odd = plan_cabling(_build(gpus=256, radix=48)).to_dict()
    assert odd["power_w"]["switches"] is None and odd["power_w"]["total"] is None
    assert any("switch power unknown" in w for w in odd["warnings"])


def test_twin_port_cage_shared_by_two_tiers_is_reported():
    c = plan_cabling(_build(gpus=512, switch="ndr-64x400", oversubscription="33:31"))
    assert any("cages hold ports of two tiers or media" in w for w in c.warnings)
    assert not plan_cabling(_build(gpus=1024, switch="ndr-64x400")).warnings


def test_no_medium_reaches_the_run():
    with pytest.raises(CablingError, match=r"leaf-spine: no medium .* reaches 3000 m .*cable_leaf_spine_m"):
        plan_cabling(_build(gpus=1152, switch="xdr-144x800", nic_gbps=800, cable_leaf_spine_m=3000))


def test_speed_not_in_the_catalogue():
    with pytest.raises(CablingError, match=r"no 300G modules .*catalogued speeds are 100, 200"):
        plan_cabling(_build(gpus=16, nic_gbps=300, port_gbps=300))


def test_catalogue_problems_are_reported_together(tmp_path):
    bad = {
        "media": {"dac": {"kind": "copper", "max_legs": 0}, "sr": {"kind": "optical"}, "x": {"kind": "laser"}},
        "speeds": {"400": {"dac": {"reach_m": -1}, "sr": {"reach_m": 50, "reach_source": "nowhere"}},
                   "fast": {}},
        "default_switch": {"form_factor": "OSFP"}, "nic": {"form_factor": "OSFP"},
    }
    with pytest.raises(CablingError) as info:
        _read_catalog(bad, "bad.yaml")
    text = str(info.value)
    for part in ("media.dac.max_legs", "media.sr: an optical medium needs a fibre", "media.x.kind",
                 "speeds.400.dac.reach_m", "speeds.400.sr: an optical medium needs a transceiver",
                 "no source 'nowhere'", "speeds key 'fast'"):
        assert part in text
    with pytest.raises(CablingError, match="cannot read"):
        media_catalog(tmp_path / "missing.yaml")


def test_a_user_catalogue_changes_the_rules(tmp_path):
    import yaml

    data = yaml.safe_load((ROOT / "topo" / "data" / "optics.yaml").read_text(encoding="utf-8"))
    data["speeds"]["400"]["mmf-sr"]["reach_m"] = 100  # IEEE 802.3db 400GBASE-SR4 on OM4
    path = tmp_path / "optics.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    fabric = _build(gpus=256, cable_leaf_spine_m=80)
    assert plan_cabling(fabric).tiers[1].media == {"smf-dr": 256}
    assert plan_cabling(fabric, media_catalog(path)).tiers[1].media == {"mmf-sr": 256}


def test_deterministic_output():
    a = cabling_files(_build(gpus=1024, switch="ndr-64x400"))
    b = cabling_files(_build(gpus=1024, switch="ndr-64x400"))
    assert a == b


@pytest.mark.slow
def test_65536_gpus_compute_fast():
    fabric = _build(gpus=65536)
    start = time.perf_counter()
    c = plan_cabling(fabric)
    computed = time.perf_counter() - start
    files = cabling_files(fabric, c)
    written = time.perf_counter() - start
    assert computed < 2.0, f"plan_cabling took {computed:.2f} s"
    assert written < 8.0, f"plan and files took {written:.2f} s"
    assert len(c) == 3 * 65536 and files["cabling.csv"].count("\n") == 3 * 65536 + 1


def test_docs_carry_the_header_and_the_media_table():
    text = DOCS.read_text(encoding="utf-8")
    assert ",".join(CABLING_COLUMNS) in text
    assert ",".join(BOM_COLUMNS) in text
    assert media_table_markdown() in text, "regenerate the table in docs/cabling.md from media_table_markdown()"


@pytest.mark.parametrize("section, value", [("switches", 5), ("stock_lengths_m", "x"), ("media", [1]),
                                            ("speeds", 3)])
def test_a_malformed_section_of_a_media_catalogue_is_a_clean_error(section, value):
    data = yaml.safe_load(
        (Path(__file__).resolve().parent.parent / "topo" / "data" / "optics.yaml").read_text())
    data[section] = value
    with pytest.raises(CablingError, match=section):
        _read_catalog(data, "cat")


#: 1,024 GPUs dual-ToR on the default 64 x 400G leaf: 128 servers of 8 NICs, each NIC two 200G
#: links (16 a server); 16 leaf pairs (32 leaves: 32 down ports broken out to 2 x 200G, 30 up, 2
#: peer ports 63 and 64); 15 spines.
DUAL = {"rail": {"node_leaf": ("mmf-sr", "MPO-12/APC OM4 fibre 1:2 splitter", 20)},
        "rack": {"node_leaf": ("dac", "DAC 400G OSFP to 2x 200G OSFP splitter", 3)}}


@pytest.fixture(scope="module", params=sorted(DUAL))
def dual(request):
    fabric = _build(gpus=1024, dual_tor=True, placement=request.param)
    return request.param, fabric, plan_cabling(fabric), _rows(fabric)


def test_dual_tor_rows_labels_and_bom_in_closed_form(dual):
    placement, fabric, cabling, rows = dual
    medium, part, metres = DUAL[placement]["node_leaf"]
    links, peers, server_links = 2048 + 960 + 32, 32, 128 * 16
    assert len(rows) == len(cabling) == links
    assert Counter(r["tier"] for r in rows) == {"node-leaf": server_links, "leaf-spine": 960, "peer-link": peers}
    # node 0: member m of NIC r on port m + 1 of its bond, to the pair's a (m = 0) or b leaf, on the
    # same port and lane of both
    node0 = [r for r in rows if r["b_device"] == "cluster-node0000"]
    assert sorted((int(r["b_port"]), r["b_interface"]) for r in node0) == [
        (2 * n + m, f"mlx5_bond_{n}/p{m + 1}") for n in range(8) for m in range(2)]
    for r in node0:
        n, m = divmod(int(r["b_port"]), 2)
        leaf, port, lane = ((f"cluster-leaf-su00-r{n}", 1, 1) if placement == "rail"
                            else ("cluster-leaf-00", n // 2 + 1, n % 2 + 1))
        assert (r["a_device"], int(r["a_port"]), int(r["a_lane"])) == (leaf + "ab"[m], port, lane)
        assert (r["gbps"], r["length_m"], r["medium"], r["cable"]) == ("200", str(metres), medium, part)
    # peer links: ports 63 and 64 of both leaves of each pair, 400G, 3 m, DAC, no optics
    peer = [r for r in rows if r["tier"] == "peer-link"]
    assert [(r["cable_id"], r["a_device"][-1], r["a_port"], r["b_device"][-1], r["b_port"]) for r in peer[:2]] == [
        ("PL-0001", "a", "63", "b", "63"), ("PL-0002", "a", "64", "b", "64")]
    assert {(r["a_device"][:-1] == r["b_device"][:-1], r["a_interface"], r["b_interface"]) for r in peer} == {
        (True, "Ethernet248", "Ethernet248"), (True, "Ethernet252", "Ethernet252")}
    assert {(r["gbps"], r["length_m"], r["medium"], r["cable"], r["a_transceiver"], r["b_transceiver"])
            for r in peer} == {("400", "3", "dac", "DAC 400G OSFP to 400G OSFP", "", "")}
    # every leaf port once (a down port once per lane), the peer ports at both ends
    ends = Counter((r["a_device"], r["a_port"], r["a_lane"]) for r in rows)
    ends.update((r["b_device"], r["b_port"], "1") for r in rows if r["tier"] == "peer-link")
    assert set(ends.values()) == {1}
    leaf_ports = Counter(d for d, _, _ in ends if "-leaf-" in d)
    assert set(leaf_ports.values()) == {2 * 32 + 30 + 2}
    # totals: one NIC-end module per optical member link; peer links are cables, not optics
    d = cabling.to_dict()
    per_tier = d["per_tier"]
    assert per_tier["peer-link"] == {"tier": "peer-link", "length_m": 3.0, "links": 32, "cables": 32, "pieces": 32,
                                     "media": {"dac": 32}, "transceivers": 0}
    assert per_tier["node-leaf"]["cables"] == 1024 and per_tier["leaf-spine"]["cables"] == 960
    assert d["cables"]["total"] == 1024 + 960 + 32 and d["links"] == links
    optics = {"400G OSFP SR4": 1920 + (1024 if placement == "rail" else 0)}
    if placement == "rail":
        optics["400G OSFP SR4 at 200G"] = server_links
    assert d["transceivers"]["by_type"] == optics
    assert d["transceivers"]["server_end"] == (server_links if placement == "rail" else 0)
    nic_w = server_links * (5 if placement == "rail" else 0.1)  # SR4 at 200G; a DAC leg's NIC end
    assert d["power_w"]["switches"] == 47 * 1500 and d["power_w"]["server_end"] == pytest.approx(nic_w)
    assert d["power_w"]["total"] == pytest.approx(47 * 1500 + nic_w)
    bom = list(csv.DictReader(io.StringIO(cabling_files(fabric, cabling)["bom.csv"])))
    assert [line for line in bom if line["tier"] == "peer-link"] == [
        {"category": "cable", "item": "DAC 400G OSFP to 400G OSFP", "tier": "peer-link", "end": "", "length_m": "3",
         "quantity": "32", "unit_power_w": "0.2", "power_w": "0"}]
    if placement == "rail":
        assert cabling_line(cabling) == (
            "cabling: 2,016 cables for 3,040 links (32 dac, 3,008 mmf-sr); 4,992 transceivers; network power "
            "80,740 W (switches 70,500 W (as eth-25t-64x400) with 23,558 W of their optics; NIC optics 10,240 W)")
    # the shape-independent checks hold too
    test_totals_equal_the_rows((fabric, cabling, rows))
    test_copper_has_no_transceivers_and_optics_two_ends((fabric, cabling, rows))


@pytest.mark.parametrize("spec", [{"gpus": 2048, "tiers": 3}, {"gpus": 1024, "dual_tor": True},
                                  {"gpus": 2048, "leaf_switch": "eth-51t-64x800", "spine_switch": "eth-51t-128x400"}])
def test_cabling_csv_rows_are_the_same_when_their_tails_are_renumbered(spec, monkeypatch):
    """The rows' last fields are formatted once per distinct combination (a mixed-radix key over
    the columns' distinct values, renumbered densely before it could overflow): forcing a
    renumbering after every column gives the same file, and every row's tail is its own fields."""
    from topo.outputs import cabling as module

    fabric = build_fabric(load_spec(spec))
    cabling = plan_cabling(fabric)
    text = module.cabling_csv(fabric, cabling)
    monkeypatch.setattr(module, "_KEY_SPAN", 2)
    renumbered = module.cabling_csv(fabric, cabling).splitlines()
    lines = text.splitlines()
    differ = [i for i, (a, b) in enumerate(zip(renumbered, lines)) if a != b]  # not a diff of megabytes
    assert len(renumbered) == len(lines) and not differ, f"{len(differ)} rows differ, first {differ[:3]}"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(cabling.kind)
    for i in range(0, len(rows), max(1, len(rows) // 97)):
        assert float(rows[i]["length_m"]) == pytest.approx(float(cabling.length_m[i]), abs=5e-4)
        assert int(rows[i]["gbps"]) == int(cabling.gbps[i])
        assert rows[i]["medium"] == cabling.media[int(cabling.medium[i])]
