"""Per-tier switch models (``leaf_switch``, ``spine_switch``, ``core_switch``): sizing with each
tier's radix, and every output built from each tier's own model (SKU, port names, cages, optics,
power)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from click.testing import CliRunner

from topo import build_fabric, load_spec, plan_fabric
from topo.cli import main
from topo.errors import SpecError
from topo.cabling import plan_cabling
from topo.outputs.cabling import cabling_csv
from topo.outputs.configs import config_files
from topo.summary import summarize
from topo.spec import tier_switch

#: 64-port 25.6T leaves under 128-port 51.2T spines, both 400G.
MIXED = dict(switch="eth-25t-64x400", spine_switch="eth-51t-128x400")


def test_a_wider_spine_keeps_4096_gpus_in_two_tiers():
    mixed = plan_fabric(load_spec({"gpus": 4096, **MIXED}))
    # 128 leaves of 32 uplinks; 128-port spines take 128 leaves: 32 spines, one link to each leaf
    assert (mixed.tiers, mixed.leaves, mixed.spines, mixed.leaf_spine_links, mixed.spine_radix) == (2, 128, 32, 1, 128)
    alone = plan_fabric(load_spec({"gpus": 4096, "switch": "eth-25t-64x400"}))
    assert (alone.tiers, alone.leaves + alone.spines + alone.cores) == (3, 320)


def test_wider_cores_take_more_pods():
    fields = {"gpus": 16384, "switch": "eth-12t-32x400"}
    with pytest.raises(SpecError, match="more than three tiers of radix=32"):
        plan_fabric(load_spec(fields))
    plan = plan_fabric(load_spec({**fields, "core_switch": "eth-25t-64x400"}))
    # 64 pods of 16 leaves and 16 spines; each core takes one link from spine j of every pod
    assert (plan.pods, plan.spines_per_pod, plan.cores_per_group, plan.cores, plan.spine_core_links) == (64, 16, 16, 256, 1)
    fabric = build_fabric(load_spec({**fields, "core_switch": "eth-25t-64x400"}))
    core = fabric.links.kind == 2
    assert np.bincount(fabric.links.hi[core] - fabric.first(3)).tolist() == [64] * 256
    assert fabric.graph.nodes[fabric.names[fabric.first(3)]]["radix"] == 64
    assert fabric.graph.nodes[fabric.names[fabric.first(2)]]["radix"] == 32


def test_tier_switch_defaults_and_platforms():
    spec = load_spec({"gpus": 4096, **MIXED})
    assert [(t.model, t.radix, t.platform) for t in (tier_switch(spec, 1), tier_switch(spec, 2), tier_switch(spec, 3))] == [
        ("eth-25t-64x400", 64, "sn5400-acs"), ("eth-51t-128x400", 128, "sn5600-o128"), ("eth-25t-64x400", 64, "sn5400-acs")]
    only_leaf = load_spec({"gpus": 256, "leaf_switch": "eth-25t-64x400"})
    assert (only_leaf.radix, tier_switch(only_leaf, 2).model) == (64, "eth-25t-64x400")  # the leaf's model


@pytest.mark.parametrize("fields, message", [
    (dict(gpus=256, switch="eth-25t-64x400", spine_switch="ndr-64x400"), "mix Ethernet and InfiniBand"),
    (dict(gpus=256, leaf_switch="eth-25t-64x400", radix=32), r"radix=32 conflicts with leaf_switch=eth-25t-64x400"),
    (dict(gpus=256, spine_switch="eth-51t-128k400"), r"unknown switch model 'eth-51t-128k400' \(did you mean 'eth-51t-128x400'\?\)"),
])
def test_bad_tier_models_are_refused(fields, message):
    with pytest.raises(SpecError, match=message):
        load_spec(fields)


def test_summary_gives_each_tier_its_model_radix_and_free_ports():
    fabric = build_fabric(load_spec({"gpus": 2048, **MIXED}))
    rows = {r.role: r for r in summarize(fabric).tier_rows}
    assert (rows["leaf"].model, rows["leaf"].radix, rows["spine"].model, rows["spine"].radix) == (
        "eth-25t-64x400", 64, "eth-51t-128x400", 128)
    # 64 leaves of 32 uplinks fill 16 spines of 128 ports, 2 links from each leaf to each spine
    assert (rows["spine"].switches, rows["spine"].ports_used, rows["spine"].ports_free) == (16, 2048, 0)
    assert fabric.plan.leaf_spine_links == 2


def test_cabling_puts_each_tiers_cage_and_one_optical_interface_at_both_ends():
    fabric = build_fabric(load_spec({"gpus": 4096, **MIXED}))
    cabling = plan_cabling(fabric)
    rows = list(csv.DictReader(io.StringIO(cabling_csv(fabric, cabling))))
    up = [r for r in rows if r["tier"] == "leaf-spine"]
    # a 25.6T leaf's 400G port has 8 lanes of 50G (SR8 over multimode), a 51.2T spine's 4 of 100G
    # (SR4): no common multimode optic, so the fibre is single mode with DR4 at both ends
    assert {(r["a_transceiver"], r["b_transceiver"], r["medium"]) for r in up} == {
        ("400G QSFP-DD DR4", "800G twin-port OSFP 2xDR4", "smf-dr")}
    # a twin-port spine cage holds two 400G ports: spine port 2k-1 and 2k share cage k
    assert {(int(r["b_port"]) - 1) // 2 + 1 == int(r["b_cage"]) for r in up} == {True}
    bom = {(line.category, line.item, line.tier, line.end): line for line in cabling.bom}
    assert bom["switch", "eth-25t-64x400", "leaf", ""].quantity == 128
    assert bom["switch", "eth-51t-128x400", "spine", ""].quantity == 32
    assert bom["transceiver", "800G twin-port OSFP 2xDR4", "leaf-spine", "switch"].quantity == 2048  # 4,096 links / 2
    assert cabling.power_w["switches"] == 128 * 1500 + 32 * 2200


def test_configs_use_each_tiers_sku_and_port_names():
    fabric = build_fabric(load_spec({"gpus": 512, **MIXED}))  # 16 leaves, 4 spines, 8 links a pair
    files = dict(config_files(fabric))
    leaf = json.loads(files["switches/cluster-leaf-su00-r1/config_db.json"])
    spine = json.loads(files["switches/cluster-spine-00/config_db.json"])
    assert (leaf["DEVICE_METADATA"]["localhost"]["hwsku"], spine["DEVICE_METADATA"]["localhost"]["hwsku"]) == (
        "ACS-SN5400", "Mellanox-SN5600-O128")
    assert (len(leaf["PORT"]), len(spine["PORT"])) == (64, 128)
    # leaf r1's first uplink is spine port 9: Ethernet32 on the 4-lane 400G ports of the SN5600
    # (it would be Ethernet64 on the leaf's own 8-lane ports); the leaf's port is Ethernet256
    assert leaf["PORT"]["Ethernet256"]["description"] == "to cluster-spine-00:Ethernet32"
    assert spine["PORT"]["Ethernet32"]["description"] == "to cluster-leaf-su00-r1:Ethernet256"
    assert len(spine["PORT"]["Ethernet32"]["lanes"].split(",")) == 4
    assert len(leaf["PORT"]["Ethernet256"]["lanes"].split(",")) == 8


def test_cli_builds_and_checks_a_mixed_design(tmp_path):
    out = tmp_path / "mixed"
    result = CliRunner().invoke(main, ["build", "--gpus", "512", "--switch", "eth-25t-64x400", "--spine-switch",
                                       "eth-51t-128x400", "-o", str(out), "-q", "--no-analysis"], prog_name="topo")
    assert result.exit_code == 0, result.output
    assert "switches: leaf 64 x 400G (eth-25t-64x400), spine 128 x 400G (eth-51t-128x400)" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["per_tier"]["spine"]["model"] == "eth-51t-128x400" and summary["tiers"] == 2
    check = CliRunner().invoke(main, ["check", str(out), "-q"], prog_name="topo")
    assert check.exit_code == 0, check.output


#: 64-port leaves under 648-port modular chassis spines (18 line cards of 36 x 400G).
CHASSIS = dict(switch="eth-25t-64x400", spine_switch="eth-chassis-648x400")


def test_a_chassis_is_no_leaf():
    with pytest.raises(SpecError, match="switch=eth-chassis-648x400 is a modular chassis, a spine or core"):
        load_spec({"gpus": 1024, "switch": "eth-chassis-648x400"})
    with pytest.raises(SpecError, match="leaf_switch=eth-chassis-648x400 is a modular chassis"):
        load_spec({"gpus": 1024, "leaf_switch": "eth-chassis-648x400", "spine_switch": "eth-25t-64x400"})


def test_chassis_spines_hold_648_leaves_in_two_tiers():
    # 648 leaves of 32 uplinks into 32 chassis of 648 ports, one link to each leaf: 20,736 GPUs,
    # where 64-port spines need three tiers
    plan = plan_fabric(load_spec({"gpus": 20736, **CHASSIS}))
    assert (plan.tiers, plan.leaves, plan.spines, plan.leaf_spine_links, plan.spine_radix) == (2, 648, 32, 1, 648)
    assert plan_fabric(load_spec({"gpus": 20736, "switch": "eth-25t-64x400"})).tiers == 3
    assert tier_switch(load_spec({"gpus": 256, **CHASSIS}), 2).chassis


def test_a_chassis_gets_its_routing_and_no_config_db():
    fabric = build_fabric(load_spec({"gpus": 256, **CHASSIS}))  # 8 leaves, 1 chassis spine of 648 ports
    files = dict(config_files(fabric))
    assert "switches/cluster-spine-00/config_db.json" not in files
    frr = files["switches/cluster-spine-00/frr.conf"]
    # no config_db.json to hold the addresses: the chassis's frr.conf names them, one a cabled port
    assert frr.count("\n ip address ") == 8 * 32 + 1 and "interface lo\n ip address 10.255.0.9/32\n" in frr
    assert "interface Ethernet0\n description to cluster-leaf-su00-r0:" in frr
    assert "\n ip address " not in files["switches/cluster-leaf-su00-r0/frr.conf"]
    from topo.pipeline.check import bgp_problems
    texts = {rel.split("/")[1]: text for rel, text in files.items() if rel.endswith("frr.conf")}
    dbs = {rel.split("/")[1]: text for rel, text in files.items() if rel.endswith("config_db.json")}
    sessions, problems = bgp_problems(fabric, texts, dbs)
    assert sessions == 2 * 8 * 32 and not problems  # FRR itself reads them in tests/test_configs.py


def test_a_chassis_is_named_in_a_warning_and_refuses_a_sonic_lab(tmp_path):
    from topo.outputs.caveats import caveats
    from topo.outputs.exports import ExportError, export_files

    fabric = build_fabric(load_spec({"gpus": 256, **CHASSIS}))
    codes = [c.code for c in caveats(fabric)]
    assert "chassis-no-config-db" in codes and "no-sonic-platform" not in codes
    with pytest.raises(ExportError, match="sonic-vs: the spine tier's eth-chassis-648x400 is a modular chassis"):
        export_files(fabric, kind="sonic-vs")
    out = tmp_path / "chassis"
    result = CliRunner().invoke(main, ["build", "--gpus", "256", "--switch", "eth-25t-64x400", "--spine-switch",
                                       "eth-chassis-648x400", "-o", str(out), "-q", "--no-analysis"], prog_name="topo")
    assert result.exit_code == 0, result.output
    assert not (out / "switches/cluster-spine-00/config_db.json").exists()
    check = CliRunner().invoke(main, ["check", str(out), "-q"], prog_name="topo")
    assert check.exit_code == 0, check.output
