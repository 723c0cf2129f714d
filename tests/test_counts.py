"""One truth for counts: cables, pieces, links, transceivers and power are the cabling plan's, and
every output (tier table, cabling line, summary.json, bom.csv, cabling.csv, README) prints them."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from click.testing import CliRunner

from topo.cli import main

BUILDS = {
    "no-model": ["--gpus", "1024"],
    "2xSR4-800G": ["--gpus", "1024", "--switch", "eth-51t-64x800"],
    "splitter-200G-NICs": ["--gpus", "1024", "--switch", "eth-51t-64x800", "--nic-gbps", "200"],
    "rack-copper": ["--gpus", "768", "--placement", "rack", "--switch", "eth-25t-64x400", "--oversubscription", "3"],
    "infiniband": ["--gpus", "1024", "--switch", "ndr-64x400"],
    "three-tier": ["--gpus", "2048", "--switch", "eth-25t-64x400", "--tiers", "3"],
    "dual-tor": ["--gpus", "512", "--dual-tor"],  # the peer links in every count
}


def _number(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.fixture(scope="module", params=sorted(BUILDS))
def build(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "d"
    args = ["build", *BUILDS[request.param], "-o", str(out), "-q", "--no-warnings", "--no-configs"]
    table = CliRunner().invoke(main, args, prog_name="topo")
    assert table.exit_code == 0, table.output
    data = json.loads(CliRunner().invoke(main, [*args, "--force", "--format", "json"], prog_name="topo").stdout)
    return request.param, out, table.stdout, data


def test_every_output_prints_the_same_counts(build):
    name, out, stdout, data = build
    cab = data["cabling"]
    cables, pieces, links = cab["cables"]["total"], cab["cables"]["pieces"], cab["links"]
    transceivers = cab["transceivers"]["total"]
    # summary.json and --format json: the tier rows are the cabling plan's
    assert data["cables"] == cables and data["cable_pieces"] == pieces
    # a dual-ToR pair's peer links join two leaves: in the totals, in no tier's "below"
    peer = data["dual_tor"] or {"peer_link_cables": 0, "peer_link_pieces": 0, "peer_links": 0}
    assert sum(row["cables_below"] for row in data["per_tier"].values()) + peer["peer_link_cables"] == cables
    assert sum(row["pieces_below"] for row in data["per_tier"].values()) + peer["peer_link_pieces"] == pieces
    assert sum(row["links_below"] for row in data["per_tier"].values()) + peer["peer_links"] == links \
        == data["links"]["total"]
    # the tier table's total row and the cabling line
    total = next(line for line in stdout.splitlines() if line.startswith("total "))
    assert _number(total.split()[-2]) == cables and _number(total.split()[-3]) == links
    line = next(line for line in stdout.splitlines() if line.startswith("cabling: "))
    m = re.match(r"cabling: ([\d,]+) cables(?: \(([\d,]+) pieces\))? for ([\d,]+) links \(([^)]*)\); ([\d,]+) transceivers", line)
    assert m, line
    assert _number(m[1]) == cables and _number(m[2] or m[1]) == pieces and _number(m[3]) == links
    assert sum(_number(part.split()[0]) for part in m[4].split(", ")) == links
    assert _number(m[5]) == transceivers
    # bom.csv: cable pieces and transceivers; cabling.csv: one row per link, one id per cable
    bom = list(csv.DictReader(io.StringIO((out / "bom.csv").read_text())))
    assert sum(int(r["quantity"]) for r in bom if r["category"] == "cable") == pieces
    assert sum(int(r["quantity"]) for r in bom if r["category"] == "transceiver") == transceivers
    rows = list(csv.DictReader(io.StringIO((out / "cabling.csv").read_text())))
    assert len(rows) == links and len({r["cable_id"] for r in rows}) == cables
    # the README says the same line
    assert line.removeprefix("cabling: ") in (out / "README.md").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cables"] == cables and summary["cabling"]["cables"] == cab["cables"]


def test_power_is_summed_once(build):
    name, out, stdout, data = build
    power = data["cabling"]["power_w"]
    bom = list(csv.DictReader(io.StringIO((out / "bom.csv").read_text())))
    if power["total"] is None:
        assert name == "no-model" and "power unknown" in stdout
        return
    assert sum(float(r["power_w"] or 0) for r in bom) == pytest.approx(power["total"])
    line = next(line for line in stdout.splitlines() if line.startswith("cabling: "))
    assert f"network power {power['total']:,.0f} W" in line
    assert f"NIC optics {power['server_end']:,.0f} W" in line
    switch = [r for r in bom if r["category"] == "switch"]
    assert sum(float(r["power_w"]) for r in switch) == pytest.approx(power["switches"])


@pytest.mark.parametrize("args, node_leaf, leaf_spine", [
    # 800G 2 x SR4 switch ports: one fibre per 400G NIC, and two fibre pieces per 800G leaf-spine run
    (["--switch", "eth-51t-64x800"], (1024, 1024, 1024), (512, 512, 1024)),
    # 200G NICs on 800G ports: one 1:2 splitter per two NICs
    (["--switch", "eth-51t-64x800", "--nic-gbps", "200"], (1024, 512, 512), (256, 256, 512)),
    # 400G everywhere: a cable per link
    ([], (1024, 1024, 1024), (1024, 1024, 1024)),
])
def test_breakout_builds_count_physical_cables(args, node_leaf, leaf_spine):
    """(links, cables, pieces) per tier, as an installer counts them."""
    from topo import build_fabric, load_spec
    from topo.cabling import plan_cabling
    fields = {"gpus": 1024}
    it = iter(args)
    for flag in it:
        fields[flag.lstrip("-").replace("-", "_")] = next(it)
    if "nic_gbps" in fields:
        fields["nic_gbps"] = int(fields["nic_gbps"])
    tiers = {t.tier: (t.links, t.cables, t.pieces) for t in plan_cabling(build_fabric(load_spec(fields))).tiers}
    assert tiers["node-leaf"] == node_leaf and tiers["leaf-spine"] == leaf_spine


def test_switch_watts_gives_a_custom_switch_its_power():
    from topo import SpecError, build_fabric, load_spec
    from topo.cabling import plan_cabling
    fabric = build_fabric(load_spec({"gpus": 1024, "switch_watts": 1500}))
    power = plan_cabling(fabric).to_dict()["power_w"]
    assert power["switches"] == 48 * 1500 and power["total"] == 48 * 1500 + power["server_end"]
    # without switch_watts, the catalogue's 64 x 400G model gives the power, and says so
    generic = plan_cabling(build_fabric(load_spec({"gpus": 1024}))).to_dict()["power_w"]
    assert generic["switch_power_of"] == "eth-25t-64x400" and power["switch_power_of"] is None
    assert generic["switches"] == 48 * 1500 and generic["switch_end"] == power["switch_end"]
    with pytest.raises(SpecError, match=r"switch_watts=1500 is for a switch without a model, but "
                                        r"switch=eth-25t-64x400 has its own power \(1,500 W\)"):
        load_spec({"gpus": 1024, "switch": "eth-25t-64x400", "switch_watts": 1500})
    with pytest.raises(SpecError, match=r"switch_watts: must be more than 0 and at most 100,000 W, got -5"):
        load_spec({"gpus": 1024, "switch_watts": -5})
