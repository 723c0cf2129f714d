"""Growth: a fabric cabled for a later size (grow_to) is the final fabric's first part, with every
switch, port, address and ASN as the final fabric has them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from topo import SpecError, build_fabric, load_spec, plan_fabric
from topo.analysis.analyze import analyze
from topo.cli import main
from topo.sizing import growth


def link_table(fabric):
    """Every link by its two ends' names, ports and lane, with its address."""
    names, links, ip = fabric.names, fabric.links, fabric.addressing.link_ip
    return {(names[a], names[b], int(p), int(q), int(lane)): int(addr) for a, b, p, q, lane, addr in zip(
        links.lo.tolist(), links.hi.tolist(), links.lo_port.tolist(), links.hi_port.tolist(), links.lane.tolist(),
        ip.tolist())}


def test_256_grown_to_1024_has_the_final_spines():
    """The issue's figures: 8 leaves and 16 spines, each leaf with 2 links to each spine."""
    p = plan_fabric(load_spec({"gpus": 256, "grow_to": 1024}))
    assert (p.leaves, p.spines, p.leaf_spine_links, p.tiers) == (8, 16, 2, 2)
    g = growth(load_spec({"gpus": 256, "grow_to": 1024}))
    assert g["reserved_ports"] == {"spine": (32 - 8) * 32, "core": 0}
    assert [s["gpus"] for s in g["steps"]] == [512, 768, 1024]
    assert all(s["leaves_added"] == 8 and s["leaf_spine_links_added"] == 256 for s in g["steps"])


@pytest.mark.parametrize("now, final, extra", [
    (256, 1024, {}), (1000, 1024, {}), (768, 1024, {"placement": "rack"}), (1024, 4096, {}),
    (4096, 16384, {}), (2048, 8192, {"oversubscription": 3}),
])
def test_a_grown_fabric_is_the_first_part_of_the_final_one(now, final, extra):
    grown = build_fabric(load_spec({"gpus": now, "grow_to": final, **extra}))
    whole = build_fabric(load_spec({"gpus": final, **extra}))
    # every link, with its ports, lanes and address, is the final fabric's
    mine, theirs = link_table(grown), link_table(whole)
    assert all(theirs.get(key) == ip for key, ip in mine.items())
    # every switch has the final fabric's loopback and ASN
    at = {name: i for i, name in enumerate(whole.names)}
    for i, name in enumerate(grown.names[grown.plan.nodes:], start=grown.plan.nodes):
        j = at[name]
        assert grown.addressing.loopback[i] == whole.addressing.loopback[j]
        assert grown.addressing.asn[i] == whole.addressing.asn[j]
    # the final tiers, spines per pod and cores from the start
    assert grown.plan.tiers == whole.plan.tiers
    assert grown.plan.spines_per_pod == whole.plan.spines_per_pod and grown.count(3) == whole.count(3)
    assert grown.plan.nodes == now // 8
    # and adding the steps' links gives the final fabric's
    g = growth(load_spec({"gpus": now, "grow_to": final, **extra}))
    added = sum(s["leaf_spine_links_added"] + s["spine_core_links_added"] for s in g["steps"])
    nodes_added = sum(s["nodes_added"] for s in g["steps"])
    assert len(mine) + added + nodes_added * 8 == len(theirs)


def test_a_grown_fabric_analyses_like_its_size():
    grown = analyze(build_fabric(load_spec({"gpus": 256, "grow_to": 1024})))
    # 256 NICs of 400G: half of them across the bisection, which max-flow confirms
    assert grown.bisection.gbps == grown.bisection.maxflow_gbps == 256 * 400 // 2
    assert grown.hops.diameter_links == 4


def test_growth_errors_name_the_field():
    with pytest.raises(SpecError, match=r"grow_to=128 is fewer GPUs than gpus=256"):
        load_spec({"gpus": 256, "grow_to": 128})
    with pytest.raises(SpecError, match=r"grow_to=1028 is not a multiple of gpus_per_node=8"):
        load_spec({"gpus": 256, "grow_to": 1028})
    # the tiers asked for apply to the final size: 256 GPUs grown to 4,096 cannot stay in two tiers
    with pytest.raises(SpecError, match=r"grow_to=4096: gpus=4096 needs 128 leaves but two tiers of radix=64"):
        plan_fabric(load_spec({"gpus": 256, "grow_to": 4096, "tiers": 2}))
    with pytest.raises(SpecError, match=r"grow_to=131072: gpus=131072 is more than three tiers of radix=64"):
        plan_fabric(load_spec({"gpus": 256, "grow_to": "128k"}))


def test_build_says_it_and_the_report_lists_the_steps(tmp_path):
    out = tmp_path / "d"
    result = CliRunner().invoke(main, ["build", "--gpus", "256", "--grow-to", "1k", "-o", str(out), "-q",
                                       "--no-configs", "--no-warnings"])
    assert result.exit_code == 0, result.output
    assert ("growth: cabled for 1,024 GPUs (32 leaves, 16 spines); 768 spine ports kept free; 3 steps to grow"
            in result.stdout)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["growth"]["final"]["spines"] == 16 and summary["switches"]["spine"] == 16
    assert summary["per_tier"]["spine"]["ports_free"] == 768
    md = (out / "report.md").read_text()
    assert "## Growth" in md and "| 512 | 32 nodes, 8 leaves | 256 | 0 |" in md
    assert "grow_to: 1024" in (out / "spec.yaml").read_text()
    # the folder rebuilds from its spec, and topo check agrees
    assert CliRunner().invoke(main, ["check", str(out), "-q"]).exit_code == 0


def test_no_growth_is_the_plain_fabric():
    assert growth(load_spec({"gpus": 1024})) is None
    assert growth(load_spec({"gpus": 1024, "grow_to": 1024})) is None
    plain = build_fabric(load_spec({"gpus": 1024}))
    same = build_fabric(load_spec({"gpus": 1024, "grow_to": 1024}))
    assert link_table(plain) == link_table(same)
