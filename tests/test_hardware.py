"""The hardware catalogue (``topo/hardware/``): one class per concept, one family of data files,
and the shipped server profiles in agreement with the GPU models they name."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from topo.hardware.catalog import gpu_catalog, read_data, server_profiles
from topo.hardware.gpus import Gpu
from topo.hardware.nvlink import NvlinkDomain, domain_size
from topo.hardware.profiles import generic_profile

PACKAGE = Path(__file__).resolve().parent.parent / "topo"


def test_one_gpu_class_in_the_package():
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.match(r"class Gpu\b", line)]
    assert [f.split(":")[0] for f in found] == ["hardware/gpus.py"]


NEW_PROFILES = {"hgx-h200-8nic": ("h200", 8), "dgx-b200": ("b200", 8), "dgx-b300": ("b300", 8),
                "gb200-nvl72": ("gb200", 72), "gb300-nvl72": ("gb300", 72)}


@pytest.mark.parametrize("name", sorted(server_profiles()))
def test_a_shipped_profile_names_a_gpu_model_and_agrees_with_it(name):
    profile = server_profiles()[name]
    gpu = gpu_catalog()[profile.gpu_model]
    assert all((slot.sm, slot.nvlink_bw, slot.nvswitch) == (gpu.sm, gpu.nvlink_GBps, gpu.nvswitch)
               for slot in profile.gpus)
    node = profile.node_model()
    assert (node.sm, node.nvlink_bw, node.nvswitch) == (gpu.sm, gpu.nvlink_GBps, gpu.nvswitch)
    assert node.assumed == ()  # the all-reduce model assumes nothing of a shipped profile
    # the profile's NVLink domain is its GPU model's: the server on an HGX board, the rack for NVL72
    assert profile.nvlink_domain == gpu.nvlink_domain
    assert profile.nvlink == NvlinkDomain(gpus=gpu.nvlink_domain, GBps=float(gpu.nvlink_GBps),
                                          nvswitch=gpu.nvswitch, multi_node=gpu.multi_node_nvlink)
    assert gpu.multi_node_nvlink == (gpu.nvlink_domain > profile.gpu_count)
    # the PCIe generation of the GPUs is the model's
    assert {g.link_speed for g in profile.gpus} == {f"{[8, 16, 32, 64][gpu.pcie - 3]}.0 GT/s PCIe"}


def test_the_profiles_of_this_generation_are_shipped_and_listed():
    from click.testing import CliRunner
    from topo.cli import main
    result = CliRunner().invoke(main, ["servers", "--format", "json"])
    listed = json.loads(result.output)
    for name, (model, domain) in NEW_PROFILES.items():
        assert (listed[name]["gpu_model"], listed[name]["nvlink_domain"]) == (model, domain)
    assert listed["gb300-nvl72"]["gpus"] == 4 and listed["gb300-nvl72"]["nic_gbps"] == 800
    assert listed["dgx-b300"]["nic_gbps"] == 800 and listed["gb200-nvl72"]["nic_gbps"] == 400
    assert "gpu_model" not in read_data("servers.yaml", "shipped server profiles")  # no side table


def test_the_shape_alone_never_picks_a_profile_of_another_gpu():
    from topo.hardware.catalog import resolve_server
    from topo.spec import load_spec
    assert resolve_server(load_spec({"gpus": 64})).name == "hgx-h100-8nic"  # not dgx-b200 (8 x 400G too)
    assert resolve_server(load_spec({"gpus": 64, "gpus_per_node": 4, "nics_per_node": 4})).generic


def test_a_connectx8_is_two_plane_ports_in_a_fabric_of_planes():
    from topo.hardware.catalog import resolve_server
    from topo.spec import load_spec
    spec = load_spec({"gpus": 256, "nic_gbps": 800, "planes": 2, "server": "dgx-b300"})
    profile = resolve_server(spec)
    assert (profile.nic_count, profile.nic_gbps, profile.gpu_model) == (16, 400, "b300")
    assert [n.rail % 2 for n in profile.nics] == [0, 1] * 8
    assert len({n.name for n in profile.nics}) == 16 and len({n.guid for n in profile.nics}) == 16
    assert resolve_server(load_spec({"gpus": 256, "nic_gbps": 800, "switch": "eth-51t-64x800",
                                     "server": "dgx-b300"})).nic_count == 8


def test_gpu_models_and_their_nvlink_domain():
    catalog = gpu_catalog()
    assert all(isinstance(g, Gpu) for g in catalog.values())
    assert catalog["h100"].nvlink == NvlinkDomain(gpus=8, GBps=450.0, nvswitch=3, multi_node=False)
    assert catalog["gb200"].nvlink == NvlinkDomain(gpus=72, GBps=900.0, nvswitch=4, multi_node=True)
    b300 = catalog["b300"]  # Blackwell Ultra on an HGX board
    assert (b300.sm, b300.hbm_gb, b300.pcie, b300.nvlink) == (103, 288, 6, NvlinkDomain(8, 900.0, 4))
    # to_dict is the catalogue entry, which `topo train --list` prints: no derived field in it
    assert "nvlink" not in catalog["h100"].to_dict()


@pytest.mark.parametrize("gpus, per_node, size, multi", [(1024, 8, 8, False), (256, 4, 72, True),
                                                        (288, 4, 72, True), (64, 4, 8, False)])
def test_a_domain_gives_the_job_what_domain_size_says(gpus, per_node, size, multi):
    domain = NvlinkDomain(gpus=size, GBps=900.0, nvswitch=4, multi_node=multi)
    assert domain.job_gpus(gpus, per_node) == domain_size(gpus, per_node, size, multi)


def test_a_server_without_nvlinks_is_a_domain_of_one():
    profile = generic_profile(8, 8, 400)
    assert profile.gpu_model is None
    assert profile.nvlink.gpus == 8  # taken for an HGX H100: 18 NVLinks assumed
    node = profile.node_model()
    assert replace(node, nvlink_bw=0.0).nvlink.gpus == 1


def test_a_profile_file_may_name_its_gpu_model_and_nvlink_domain(tmp_path):
    from topo.errors import SpecError
    from topo.hardware.catalog import resolve_server
    from topo.spec import load_spec
    text = read_data("servers.yaml", "shipped server profiles")["gb200-nvl72"]
    import yaml
    body = dict(text)
    path = tmp_path / "tray.yaml"
    path.write_text(yaml.safe_dump(body))
    spec = {"gpus": 64, "gpus_per_node": 4, "nics_per_node": 4, "server": str(path)}
    profile = resolve_server(load_spec(spec))
    assert (profile.gpu_model, profile.nvlink.gpus, profile.nvlink.multi_node) == ("gb200", 72, True)
    path.write_text(yaml.safe_dump({**body, "gpu_model": "gb20", "nvlink_domain": 70}))
    with pytest.raises(SpecError) as info:
        resolve_server(load_spec(spec))
    lines = info.value.lines
    assert any("gpu_model: unknown GPU model 'gb20' (did you mean 'gb200'?); known: a100-80g, b200, b300" in x
               for x in lines), lines
    assert any("nvlink_domain: 70 GPUs is neither a whole number of servers of 4 GPUs" in x for x in lines), lines


@pytest.mark.parametrize("server, gpu", [(None, "h100"), ("dgx-b200", "b200"), ("hgx-h200-8nic", "h200")])
def test_train_takes_the_gpu_of_the_named_server(server, gpu):
    from click.testing import CliRunner
    from topo.cli import main
    args = ["train", "--gpus", "64", "--model", "llama3-8b", "--format", "json", "-q"]
    result = CliRunner().invoke(main, args + (["--server", server] if server else []))
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["workload"]["gpu"] == gpu


def test_train_refuses_a_gpu_the_named_server_does_not_hold():
    from click.testing import CliRunner
    from topo.cli import main
    result = CliRunner().invoke(main, ["train", "--gpus", "64", "--model", "llama3-8b", "--server", "dgx-b200",
                                       "--gpu", "h100", "-q"])
    assert result.exit_code == 1
    assert "--gpu 'h100': the server profile dgx-b200 holds b200 GPUs" in result.output
    assert "Traceback" not in result.output


def test_a_profile_file_naming_its_gpu_model_needs_no_nvlink_figures(tmp_path):
    import yaml
    from topo.hardware.catalog import resolve_server
    from topo.spec import load_spec
    body = dict(read_data("servers.yaml", "shipped server profiles")["dgx-b200"])
    body["gpu"] = {k: v for k, v in body["gpu"].items() if k not in ("sm", "nvlink_bw", "nvswitch")}
    path = tmp_path / "b200.yaml"
    path.write_text(yaml.safe_dump(body))
    node = resolve_server(load_spec({"gpus": 64, "server": str(path)})).node_model()
    assert (node.sm, node.nvlink_bw, node.nvswitch, node.assumed) == (100, 900.0, 4, ())
    path.write_text(yaml.safe_dump({k: v for k, v in body.items() if k != "gpu_model"}))
    assert resolve_server(load_spec({"gpus": 64, "server": str(path)})).node_model().assumed == (
        "nvlink_bw", "nvswitch", "sm")
