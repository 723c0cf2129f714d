"""One tier: the rail-only design (one switch per rail, no spines) and the single-switch segment.

Closed forms: 512 GPUs of 8-GPU, 8-NIC nodes on 64-port switches are 8 rail switches of 64 ports;
every GPU pair on different nodes is 2 links apart (across rails through NVLink first, NCCL's PXN);
the bisection is half the NICs (whole nodes on each side) and max-flow confirms it. The files go to
their real consumers where they are installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from topo import SpecError, build_fabric, load_spec, plan_fabric
from topo.analysis.analyze import analyze
from topo.analysis.faults import apply_faults
from topo.analysis.bisection import bisection
from topo.cli import main

from .test_configs import VTYSH, check_config_db, frr_check
from .test_placement import SLURMCTLD, parse_show_topology, run_slurmctld


def test_512_gpus_rail_only_are_8_switches():
    p = plan_fabric(load_spec({"gpus": 512, "tiers": 1}))
    assert (p.tiers, p.leaves, p.spines, p.cores, p.leaf_down_ports, p.leaf_up_ports) == (1, 8, 0, 0, 64, 0)
    fabric = build_fabric(load_spec({"gpus": 512, "tiers": 1}))
    assert fabric.count(1) == 8 and fabric.count(2) == 0 and len(fabric.links) == 512
    # rail r of every node on switch r, every port used
    assert {fabric.graph.nodes[n]["rail"] for n in fabric.names[64:]} == set(range(8))


def test_a_single_switch_segment_in_rack_placement():
    p = plan_fabric(load_spec({"gpus": 64, "tiers": 1, "placement": "rack"}))
    assert (p.leaves, p.spines, p.nodes) == (1, 0, 8)


def test_one_tier_refuses_what_does_not_fit_and_what_has_no_meaning():
    with pytest.raises(SpecError, match=r"tiers=1 puts each rail's 128 NICs .* which takes 64: at most 512 GPUs"):
        plan_fabric(load_spec({"gpus": 1024, "tiers": 1}))
    with pytest.raises(SpecError, match=r"tiers=1 puts the 128 NICs on one switch .* at most 64 GPUs"):
        plan_fabric(load_spec({"gpus": 128, "tiers": 1, "placement": "rack"}))
    with pytest.raises(SpecError, match=r"oversubscription=3 .* tiers=1 has no uplinks"):
        plan_fabric(load_spec({"gpus": 256, "tiers": 1, "oversubscription": 3}))
    with pytest.raises(SpecError, match=r"spines=4: tiers=1 has no spines"):
        plan_fabric(load_spec({"gpus": 256, "tiers": 1, "spines": 4}))


def test_rail_only_analysis():
    fabric = build_fabric(load_spec({"gpus": 512, "tiers": 1}))
    a = analyze(fabric)
    h = a.hops.to_dict()
    # every pair of GPUs on different nodes is reachable, 2 links apart: 64 x 63 / 2 node pairs x 64 GPU pairs
    assert h["unreachable_pairs"] == 0 and h["diameter_links"] == 2 and h["mean_links"] == 2.0
    assert h["pairs"] == 64 * 63 // 2 * 64
    assert h["distribution"][0]["same_rail_pairs"] == 64 * 63 // 2 * 8
    # half the nodes on each side: 32 NICs of every rail across, 8 x 32 x 400G; max-flow agrees
    assert a.bisection.gbps == a.bisection.maxflow_gbps == 8 * 32 * 400 and a.bisection.agrees
    assert a.bisection.endpoint == "node"
    # same-rank rings stay on their rail switch: the 2-tier figure (a NIC's line rate, bounded by NVLink)
    two_tier = analyze(build_fabric(load_spec({"gpus": 512}))).allreduce.rows[-1]["busbw_GBps"]
    assert abs(a.allreduce.rows[-1]["busbw_GBps"] - two_tier) / two_tier < 0.01
    assert "fabric-cut" not in {c.code for c in a.caveats()}


def test_losing_a_rail_switch_costs_its_rail():
    fabric = build_fabric(load_spec({"gpus": 512, "tiers": 1}))
    b = bisection(fabric, apply_faults(fabric, ["cluster-leaf-su00-r3"]))
    assert b.maxflow_gbps == 7 * 32 * 400
    from topo.analysis.hops import hop_counts
    # every node still has 7 live rails: every pair stays reachable through PXN
    assert hop_counts(fabric, apply_faults(fabric, ["cluster-leaf-su00-r3"])).unreachable_pairs == 0


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rail-only") / "d"
    result = CliRunner().invoke(main, ["build", "--gpus", "512", "--tiers", "1", "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert "rail-only, 1 tier" in result.stdout and "parallel links" not in result.stdout
    return out


def test_the_folder_is_whole_and_checks(folder):
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["switches"] == {"leaf": 8, "spine": 0, "core": 0, "total": 8}
    assert summary["per_tier"]["leaf"]["ports_free"] == 0 and summary["oversubscription"]["leaf"] is None
    assert "1-tier rail-only fabric" in (folder / "README.md").read_text()
    assert "1-tier rail-only" in (folder / "report.html").read_text()
    assert CliRunner().invoke(main, ["check", str(folder), "-q"]).exit_code == 0


@pytest.mark.skipif(VTYSH is None, reason="FRR is not installed (bash scripts/test.sh installs it)")
def test_frr_and_sonic_accept_a_rail_switch(folder):
    switch = folder / "switches" / "cluster-leaf-su00-r0"
    assert frr_check(switch / "frr.conf") == []
    check_config_db(json.loads((switch / "config_db.json").read_text()))


@pytest.mark.skipif(SLURMCTLD is None, reason="slurmctld is not installed (bash scripts/test.sh installs it)")
def test_slurm_reads_the_one_switch_tree(folder, tmp_path):
    hosts = [f"cluster-node{i:04d}" for i in range(64)]
    run = run_slurmctld(tmp_path, {"topology.conf": (folder / "placement/topology.conf").read_text()}, hosts)
    assert run.topology is not None, run.log
    assert run.problems() == []
    assert sorted(parse_show_topology(run.topology)) == ["cluster-su00"]


def test_rail_only_flag_is_tiers_1_with_rail_placement(tmp_path):
    out = tmp_path / "d"
    result = CliRunner().invoke(main, ["build", "--gpus", "512", "--rail-only", "-o", str(out), "-q", "--no-configs"])
    assert result.exit_code == 0, result.output
    spec = (out / "spec.yaml").read_text()
    assert "tiers: 1\n" in spec and "placement: rail\n" in spec
    clash = CliRunner().invoke(main, ["build", "--gpus", "512", "--rail-only", "--placement", "rack",
                                      "-o", str(tmp_path / "e")])
    assert clash.exit_code == 2 and "--rail-only is tiers=1 with rail placement; it contradicts --placement rack" in clash.output
    assert not (tmp_path / "e").exists()
