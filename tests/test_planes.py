"""Multi-plane fabrics (``planes``): every NIC has one port into each plane, and no link joins two
planes. Closed forms: NVIDIA's DGX B300 SuperPOD (Spectrum-X, twin-planar) table, each plane the
one-plane fabric of the plane's spec, the bisection ``planes`` times a plane's, and the all-reduce
that of the same fabric with every NIC port taken as a NIC."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from topo import build_fabric, load_spec, plan_fabric
from topo.analysis.analyze import AnalysisOptions, analyze, what_if
from topo.analysis.bisection import bisection
from topo.analysis.faults import apply_faults
from topo.cli import main
from topo.errors import AnalysisError, SpecError
from topo.fabric import plane_view
from topo.sizing import growth, plane_spec

B300 = dict(switch="eth-51t-128x400", nic_gbps=800, planes=2)

#: DGX B300 SuperPOD with Spectrum-X, per scalable unit count: (SUs, nodes, GPUs, leaves, spines),
#: NVIDIA's published table.
B300_TABLE = [(1, 64, 512, 16, 8), (2, 128, 1024, 32, 16), (4, 256, 2048, 64, 32), (8, 512, 4096, 128, 64),
              (16, 1024, 8192, 256, 128)]


@pytest.mark.parametrize("sus, nodes, gpus, leaves, spines", B300_TABLE)
def test_b300_spectrum_x_table(sus, nodes, gpus, leaves, spines):
    plan = plan_fabric(load_spec({"gpus": gpus, **B300}))
    assert (plan.sus, plan.nodes, plan.leaves, plan.spines, plan.tiers, plan.planes) == (sus, nodes, leaves, spines, 2, 2)
    assert plan.plane_leaves == leaves // 2 and plan.plane_spines == spines // 2
    fabric = build_fabric(load_spec({"gpus": gpus, **B300}))
    assert fabric.count(1) == leaves and fabric.count(2) == spines
    # every port used: 64 NIC ports down and 64 up on a leaf, 128 down on a spine
    links = fabric.links
    assert np.bincount(links.hi[links.kind == 1] - fabric.first(2)).tolist() == [128] * spines


def test_no_link_joins_two_planes_and_port_p_goes_into_plane_p():
    fabric = build_fabric(load_spec({"gpus": 1024, **B300}))
    links, plane = fabric.links, fabric.plane
    switch = links.kind > 0
    assert (plane[links.lo[switch]] == plane[links.hi[switch]]).all()
    host = links.kind == 0
    assert (plane[links.hi[host]] == links.lo_port[host] % 2).all()
    assert (links.gbps[host] == 400).all()
    # every node has 16 ports: NIC r's port p is device 2r + p, on the rail-r leaf of plane p
    node0 = host & (links.lo == 0)
    leaf = links.hi[node0]
    assert links.lo_port[node0].tolist() == list(range(16))
    assert [fabric.names[i] for i in leaf[:4]] == ["cluster-pl0-leaf-su00-r0", "cluster-pl1-leaf-su00-r0",
                                                  "cluster-pl0-leaf-su00-r1", "cluster-pl1-leaf-su00-r1"]
    assert all(n.startswith(("cluster-pl0-", "cluster-pl1-")) for n in fabric.names[fabric.first(1):])
    assert fabric.graph.nodes["cluster-pl1-spine-03"]["plane"] == 1
    assert fabric.graph.edges["cluster-node0000", "cluster-pl1-leaf-su00-r0", 0]["plane"] == 1


@pytest.mark.parametrize("fields", [
    dict(gpus=1024, **B300),
    dict(gpus=384, radix=32, tiers=3, nic_gbps=800, planes=2),  # 3 tiers, a partial last pod in each plane
    dict(gpus=256, placement="rack", radix=16, tiers=3, nic_gbps=800, planes=2),
    dict(gpus=96, gpus_per_node=4, nics_per_node=2, nic_gbps=1200, port_gbps=400, planes=3, radix=16),
])
def test_each_plane_is_the_one_plane_fabric_of_its_spec(fields):
    spec = load_spec(fields)
    fabric = build_fabric(spec)
    one = build_fabric(plane_spec(spec))
    for p in range(spec.planes):
        view = plane_view(fabric, p)
        for col in ("lo", "hi", "lo_port", "hi_port", "lane", "kind", "gbps"):
            assert getattr(view.links, col).tolist() == getattr(one.links, col).tolist(), col
        for col in ("tier", "su", "pod", "rail", "group"):
            assert getattr(view, col).tolist() == getattr(one, col).tolist(), col
        assert [n.replace(f"cluster-pl{p}-", "cluster-") for n in view.names] == list(one.names)


@pytest.mark.parametrize("fields", [
    dict(gpus=1024, **B300),
    dict(gpus=384, radix=32, tiers=3, nic_gbps=800, planes=2),
])
def test_bisection_is_planes_times_one_planes(fields):
    spec = load_spec(fields)
    whole = bisection(build_fabric(spec))
    one = bisection(build_fabric(plane_spec(spec)))
    assert whole.gbps == 2 * one.gbps == whole.maxflow_gbps and whole.agrees
    # = half the GPUs' NIC bandwidth on a non-blocking fabric
    assert whole.gbps == spec.gpus // 2 * spec.nic_gbps


def test_allreduce_is_that_of_the_same_fabric_with_every_port_a_nic():
    planes = analyze(build_fabric(load_spec({"gpus": 512, **B300})))
    ports = analyze(build_fabric(load_spec({"gpus": 512, "switch": "eth-51t-128x400", "nics_per_node": 16})))
    assert planes.allreduce.to_rows() == ports.allreduce.to_rows()
    assert planes.hops.diameter_links == ports.hops.diameter_links == 4


def test_losing_a_whole_plane_halves_the_bisection_and_the_job_runs_on():
    fabric = build_fabric(load_spec({"gpus": 512, **B300}))
    faults = apply_faults(fabric, ["cluster-pl0"])
    assert faults.links_down == len(fabric.links) // 2
    result = analyze(fabric, AnalysisOptions(fail=("cluster-pl0",)))
    d = result.to_dict()
    assert d["change"]["bisection_maxflow_gbps"]["change_pct"] == -50.0
    assert d["hops"]["unreachable_pairs"] == 0 and d["hops"]["plane"] == 1
    assert d["hops"]["plane_unreachable_pairs"] == [512 * 511 // 2 - 64 * 28, 0]
    assert d["allreduce"][-1]["busbw_GBps"] > 0 and not result.allreduce.details["stopped"]["nodes_without_nic"]


def test_a_lost_nic_port_moves_its_channels_within_its_plane():
    fabric = build_fabric(load_spec({"gpus": 512, **B300}))
    result = analyze(fabric, AnalysisOptions(fail=("cluster-node0000:0",)))
    assert result.allreduce.routes.reachable.all()  # no connection asked to cross planes
    intact = result.baseline.allreduce.rows[-1]["busbw_GBps"]
    assert 0 < result.allreduce.rows[-1]["busbw_GBps"] < intact


def test_what_ifs_lose_a_plane():
    fabric = build_fabric(load_spec({"gpus": 512, **B300}))
    rows = {r["scenario"]: r for r in what_if(fabric, samples=2).rows}
    assert rows["plane"]["parts"] == ["cluster-pl0", "cluster-pl1"]
    assert rows["plane"]["bisection_gbps"]["median_change_pct"] == -50.0
    # a NIC port or a leaf lost degrades instead of stopping: the other plane carries on
    for kind in ("nic-link", "leaf", "plane"):
        assert rows[kind]["busbw_GBps"]["min"] > 0 and rows[kind]["nodes_left_out"] == 0
    one_plane = {r["scenario"] for r in what_if(build_fabric(load_spec({"gpus": 64})), samples=2).rows}
    assert "plane" not in one_plane


def test_unknown_fail_name_lists_the_planes():
    fabric = build_fabric(load_spec({"gpus": 512, **B300}))
    with pytest.raises(AnalysisError, match=r"no switch or server named 'cluster-pl2'.*planes: cluster-pl0, cluster-pl1"):
        apply_faults(fabric, ["cluster-pl2"])


@pytest.mark.parametrize("fields, message", [
    (dict(gpus=512, nic_gbps=800, planes=3), "nic_gbps=800 does not split into planes=3 ports"),
    (dict(gpus=512, nic_gbps=800, planes=9), "planes: must be at most 8"),
    (dict(gpus=512, nic_gbps=800, planes=0), "planes: must be at least 1"),
    (dict(gpus=512, nic_gbps=600, planes=2), r"nic_gbps=600 in planes=2 \(300G a port\) does not divide port_gbps=400"),
])
def test_bad_planes_are_refused_naming_the_numbers(fields, message):
    with pytest.raises(SpecError, match=message):
        load_spec(fields)


def test_sizing_errors_name_the_plane_port_speed():
    with pytest.raises(SpecError, match=r"planes=2 \(each plane's NIC ports 400G\): gpus=131072 is more than"):
        plan_fabric(load_spec({"gpus": 131072, "nic_gbps": 800, "planes": 2, "radix": 32}))


def test_growth_keeps_every_plane_cabled_for_the_final_size():
    spec = load_spec({"gpus": 512, "grow_to": 2048, **B300})
    plan = plan_fabric(spec)
    assert (plan.leaves, plan.spines) == (16, 32)  # today's leaves, the final size's spines
    g = growth(spec)
    assert g["final"]["leaves"] == 64 and g["reserved_ports"]["spine"] == (64 - 16) * 64
    fabric = build_fabric(spec)
    assert fabric.count(1) == 16 and fabric.count(2) == 32
    assert (fabric.plane[fabric.tier == 1] == np.repeat([0, 1], 8)).all()
    final = build_fabric(load_spec({"gpus": 2048, **B300}))
    kept = [n for n in final.names if n in set(fabric.names)]
    assert len(kept) == len(fabric.names)  # today's names are the final fabric's


def test_cli_builds_a_b300_design(tmp_path):
    out = tmp_path / "b300"
    result = CliRunner().invoke(main, ["build", "--gpus", "512", "--switch", "eth-51t-128x400", "--nic-gbps", "800",
                                       "--planes", "2", "-o", str(out), "-q"], prog_name="topo")
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["planes"] == 2 and summary["switches"] == {"leaf": 16, "spine": 8, "core": 0, "total": 24}
    assert "2 planes" in result.output and "2 x 400G ports a NIC" in result.output
    assert "2 planes, each its own fabric of 8 leaves and 4 spines" in (out / "README.md").read_text()
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["bisection"]["least_cut"]["planes"] == 2
    assert (out / "switches" / "cluster-pl1-spine-03").is_dir()
    check = CliRunner().invoke(main, ["check", str(out), "-q"], prog_name="topo")
    assert check.exit_code == 0, check.output


def test_rail_only_planes_are_one_switch_per_rail_and_plane():
    spec = load_spec({"gpus": 512, "tiers": 1, **B300})
    fabric = build_fabric(spec)
    assert (fabric.count(1), fabric.count(2)) == (16, 0)
    assert fabric.names[fabric.first(1)] == "cluster-pl0-leaf-su00-r0"
    result = analyze(fabric)
    ports = analyze(build_fabric(load_spec({"gpus": 512, "tiers": 1, "switch": "eth-51t-128x400",
                                            "nics_per_node": 16})))
    assert result.bisection.maxflow_gbps == ports.bisection.maxflow_gbps == 512 * 800 // 2
    assert result.hops.diameter_links == 2
    assert result.allreduce.to_rows() == ports.allreduce.to_rows()
