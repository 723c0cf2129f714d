"""The server facts the all-reduce model reads (``ServerProfile.node_model``): the GPU keys
``nvlink_bw`` and ``nvswitch``, their defaults by ``sm``, what a generic profile assumes, how bad
values are refused, and that neither key reaches the NCCL topology file (docs/nccl.md)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from topo import SpecError, build_fabric, load_spec
from topo.outputs.nccl import nccl_files, topology_xml
from topo.hardware.catalog import server_profiles
from topo.hardware.nvlink import NVLINK_GBPS_PER_LINK, nvlink_generation
from topo.hardware.pcie import pcie_mbps
from topo.hardware.profiles import generic_profile, load_server_profile
from topo.hardware.servers import NodeModel


def shipped_body(name: str = "hgx-h100-8nic") -> dict[str, Any]:
    """A shipped profile's mapping as the YAML file holds it, a copy to change."""
    text = resources.files("topo.data").joinpath("hardware/servers.yaml").read_text(encoding="utf-8")
    return copy.deepcopy(yaml.safe_load(text)[name])


def write_profile(tmp_path: Path, body: dict[str, Any], name: str = "site") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, **body}, sort_keys=False))
    return path


def profile_with(tmp_path: Path, gpu: dict[str, Any], drop: tuple[str, ...] = ("nvlink_bw", "nvswitch"),
                 base: str = "hgx-h100-8nic"):
    """A shipped profile with ``drop`` taken out of its ``gpu:`` block and ``gpu`` put in."""
    body = shipped_body(base)
    for key in drop:
        body["gpu"].pop(key, None)
    body["gpu"].update(gpu)
    return load_server_profile(write_profile(tmp_path, body))


def problems(tmp_path: Path, body: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_server_profile(write_profile(tmp_path, body))
    return info.value.lines


# --- the shipped profiles ----------------------------------------------------------------------


def test_shipped_profiles_give_every_value():
    gen5_x16 = pcie_mbps("32.0 GT/s PCIe", 16) / 8000
    assert gen5_x16 == pytest.approx(63.015375)
    eight = server_profiles()["hgx-h100-8nic"].node_model()
    assert eight == NodeModel(gpus=8, nics=8, nic_gbps=400.0, sm=90, nvlink_bw=450.0, nvswitch=3,
                              gpu_pcie_GBps=gen5_x16, nic_pcie_GBps=gen5_x16, cpu_vendor="intel", assumed=())
    assert eight.nvls
    four = server_profiles()["hgx-h100-4nic"].node_model()
    assert (four.gpus, four.nics, four.cpu_vendor, four.nvlink_bw, four.nvswitch, four.assumed) == \
        (8, 4, "amd", 450.0, 3, ())
    assert all(g.nvlink_bw == 450.0 and g.nvswitch == 3 for g in server_profiles()["hgx-h100-4nic"].gpus)


def test_to_dict_is_plain_json_rounded_to_three_decimals():
    d = server_profiles()["hgx-h100-8nic"].node_model().to_dict()
    assert d == {"gpus": 8, "nics": 8, "nic_gbps": 400.0, "sm": 90, "nvlink_bw": 450.0, "nvswitch": 3,
                 "nvls": True, "gpu_pcie_GBps": 63.015, "nic_pcie_GBps": 63.015, "cpu_vendor": "intel",
                 "assumed": []}
    assert json.loads(json.dumps(d)) == d


def test_node_model_is_frozen():
    m = server_profiles()["hgx-h100-8nic"].node_model()
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.nvlink_bw = 1.0  # type: ignore[misc]


def test_the_shipped_values_are_what_the_tables_give(tmp_path):
    # the shipped file states nvlink_bw and nvswitch; without them the defaults give the same
    derived = profile_with(tmp_path, {}).node_model()
    assert (derived.nvlink_bw, derived.nvswitch) == (450.0, 3)
    assert derived.assumed == ("nvlink_bw", "nvswitch")


# --- defaults by sm ------------------------------------------------------------------------------


@pytest.mark.parametrize("sm, links, bw, nvswitch, nvls", [
    (60, 4, 80.0, 0, False),      # P100: NVLink1, no NVSwitch generation
    (70, 6, 150.0, 1, False),     # V100: NVLink2, first NVSwitch
    (80, 12, 300.0, 2, False),    # A100: NVLink3
    (90, 18, 450.0, 3, True),     # H100: NVLink4
    (100, 18, 900.0, 4, True),    # B200: NVLink5, 50 GB/s per link
    (103, 18, 900.0, 4, True),    # later Blackwell: still NVLink5
    (90, 0, 0.0, 0, False),       # no NVLinks given: none counted, no NVSwitch
    (100, 0, 0.0, 0, False),
])
def test_defaults_by_sm(tmp_path, sm, links, bw, nvswitch, nvls):
    m = profile_with(tmp_path, {"sm": sm, "nvlink": links}).node_model()
    assert (m.sm, m.nvlink_bw, m.nvswitch, m.nvls) == (sm, bw, nvswitch, nvls)
    assert m.assumed == ("nvlink_bw", "nvswitch")


def test_per_link_rates_are_nvidias():
    assert [NVLINK_GBPS_PER_LINK[nvlink_generation(sm)] for sm in (70, 80, 90, 100)] == [25.0, 25.0, 25.0, 50.0]
    # NVIDIA's totals for both directions: H100 SXM 900 GB/s, B200 1.8 TB/s, A100 600 GB/s
    assert 2 * 18 * NVLINK_GBPS_PER_LINK[nvlink_generation(90)] == 900
    assert 2 * 18 * NVLINK_GBPS_PER_LINK[nvlink_generation(100)] == 1800
    assert 2 * 12 * NVLINK_GBPS_PER_LINK[nvlink_generation(80)] == 600


def test_given_values_win_over_the_tables(tmp_path):
    # an A100 board without NVSwitch (GPUs linked directly), with a measured bandwidth
    m = profile_with(tmp_path, {"sm": 80, "nvlink": 4, "nvlink_bw": 99.5, "nvswitch": 0}).node_model()
    assert (m.sm, m.nvlink_bw, m.nvswitch, m.assumed, m.nvls) == (80, 99.5, 0, (), False)
    # NVLink bandwidth given, links left to NCCL to detect: the NVSwitch follows the generation
    m = profile_with(tmp_path, {"nvlink": 0, "nvlink_bw": 450}).node_model()
    assert (m.nvlink_bw, m.nvswitch, m.assumed) == (450.0, 3, ("nvswitch",))
    assert isinstance(m.nvlink_bw, float)
    # Hopper on an older NVSwitch: no NVLink SHARP
    assert not profile_with(tmp_path, {"nvswitch": 2}).node_model().nvls


def test_gpu_without_sm_is_taken_for_an_h100(tmp_path):
    m = profile_with(tmp_path, {}, drop=("sm", "nvlink_bw", "nvswitch")).node_model()
    assert (m.sm, m.nvlink_bw, m.nvswitch) == (90, 450.0, 3)  # its 18 NVLinks at the NVLink4 rate
    assert m.assumed == ("nvlink_bw", "nvswitch", "sm")
    m = profile_with(tmp_path, {"nvlink": 6}, drop=("sm",)).node_model()
    assert (m.sm, m.nvlink_bw, m.nvswitch, m.assumed) == (90, 450.0, 3, ("sm",))


def test_a_gpu_entry_overrides_and_the_slowest_gpu_counts(tmp_path):
    body = shipped_body()
    switch = body["cpus"][1]["switches"][2]
    switch["gpus"] = [{"busid": switch["gpus"][0], "nvlink_bw": 100, "nvswitch": 2}]
    profile = load_server_profile(write_profile(tmp_path, body))
    assert sorted(g.nvlink_bw for g in profile.gpus) == [100.0] + [450.0] * 7
    m = profile.node_model()
    assert (m.nvlink_bw, m.nvswitch, m.assumed, m.nvls) == (100.0, 2, (), False)
    # one GPU that does not say is enough for the field to be assumed
    switch["gpus"] = [{"busid": switch["gpus"][0]["busid"], "sm": 80}]
    for key in ("nvlink_bw", "nvswitch"):
        body["gpu"].pop(key)
    body["cpus"][0]["switches"][0]["gpus"] = [{"busid": body["cpus"][0]["switches"][0]["gpus"][0],
                                               "nvlink_bw": 450, "nvswitch": 3}]
    m = load_server_profile(write_profile(tmp_path, body)).node_model()
    assert (m.sm, m.nvlink_bw, m.nvswitch, m.assumed) == (80, 450.0, 2, ("nvlink_bw", "nvswitch"))


# --- the generic profile -------------------------------------------------------------------------


def test_generic_profile_assumes_an_hgx_h100():
    m = generic_profile(8, 8, 400).node_model()
    assert (m.gpus, m.nics, m.nic_gbps, m.sm, m.nvlink_bw, m.nvswitch) == (8, 8, 400.0, 90, 450.0, 3)
    assert m.assumed == ("nvlink_bw", "nvswitch", "sm")
    assert m.nvls and m.cpu_vendor == "intel"
    assert m.gpu_pcie_GBps == m.nic_pcie_GBps == pcie_mbps("32.0 GT/s PCIe", 16) / 8000
    small = generic_profile(4, 8, 100).node_model()  # Gen3 x16 links
    assert small.nic_pcie_GBps == pytest.approx(126030 / 8000) and small.nic_gbps == 100.0


# --- slowest links and CPU vendor ---------------------------------------------------------------


def test_slowest_nic_and_pcie_links(tmp_path):
    body = shipped_body()
    switch = body["cpus"][0]["switches"][1]
    switch["gpus"] = [{"busid": switch["gpus"][0], "link_speed": "16.0 GT/s PCIe"}]
    switch["nics"] = [{"busid": switch["nics"][0], "link_width": 32}]
    m = load_server_profile(write_profile(tmp_path, body)).node_model()
    assert m.gpu_pcie_GBps == pcie_mbps("16.0 GT/s PCIe", 16) / 8000
    assert m.nic_pcie_GBps == pcie_mbps("32.0 GT/s PCIe", 16) / 8000  # the x32 one is not the slowest


@pytest.mark.parametrize("cpus, vendor", [
    ([{"arch": "arm64"}, {"arch": "arm64"}], "arm"),
    ([{"arch": "arm64"}, {}], "mixed"),
    ([{"vendor": "AuthenticAMD", "familyid": 25, "modelid": 17}, {}], "mixed"),
    ([{"vendor": "CentaurHauls"}, {"vendor": "CentaurHauls"}], "other"),
    ([{"arch": "ppc64"}, {"arch": "ppc64"}], "other"),
])
def test_cpu_vendor(tmp_path, cpus, vendor):
    body = shipped_body()
    for cpu, change in zip(body["cpus"], cpus):
        if change.get("arch", "x86_64") != "x86_64":
            for key in ("vendor", "familyid", "modelid"):
                cpu.pop(key)
        cpu.update(change)
    assert load_server_profile(write_profile(tmp_path, body)).node_model().cpu_vendor == vendor


# --- bad values ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key, value, message", [
    ("nvlink_bw", 0, "nvlink_bw: must be above 0 and at most 10,000, got 0"),
    ("nvlink_bw", -450, "nvlink_bw: must be above 0 and at most 10,000, got -450"),
    ("nvlink_bw", 10_000.5, "nvlink_bw: must be above 0 and at most 10,000, got 10000.5"),
    ("nvlink_bw", 10 ** 40, "nvlink_bw: must be above 0 and at most 10,000, got 1000000"),
    ("nvlink_bw", math.nan, "nvlink_bw: must be above 0 and at most 10,000, got nan"),
    ("nvlink_bw", math.inf, "nvlink_bw: must be above 0 and at most 10,000, got inf"),
    ("nvlink_bw", "450 GB/s", "nvlink_bw: expected a number above 0 and at most 10,000, got '450 GB/s'"),
    ("nvlink_bw", True, "nvlink_bw: expected a number above 0 and at most 10,000, got True"),
    ("nvlink_bw", [450], "nvlink_bw: expected a number above 0 and at most 10,000, got [450]"),
    ("nvswitch", 10, "nvswitch: must be from 0 to 9, got 10"),
    ("nvswitch", -1, "nvswitch: must be from 0 to 9, got -1"),
    ("nvswitch", 2.5, "nvswitch: expected a whole number from 0 to 9, got 2.5"),
    ("nvswitch", "third", "nvswitch: expected a whole number from 0 to 9, got 'third'"),
    ("nvswitch", False, "nvswitch: expected a whole number from 0 to 9, got False"),
])
def test_bad_values_are_refused_naming_field_and_value(tmp_path, key, value, message):
    body = shipped_body()
    body["gpu"][key] = value
    lines = problems(tmp_path, body)
    assert len(lines) == 8  # the default reaches every GPU, and each says so
    assert all(line.startswith(f"server profile 'site' ({tmp_path / 'site.yaml'}): cpus[") for line in lines)
    assert all(message in line for line in lines), lines
    assert f"cpus[0].switches[0].gpus[0].{key}: " in lines[0]


def test_a_bad_value_in_one_gpu_entry_names_that_gpu(tmp_path):
    body = shipped_body()
    switch = body["cpus"][1]["switches"][3]
    switch["gpus"] = [{"busid": switch["gpus"][0], "nvswitch": 12}]
    assert problems(tmp_path, body) == [
        f"server profile 'site' ({tmp_path / 'site.yaml'}): cpus[1].switches[3].gpus[0].nvswitch: "
        f"must be from 0 to 9, got 12"]


def test_unknown_keys_are_still_refused(tmp_path):
    body = shipped_body()
    body["gpu"]["nvlinkbw"] = 450
    (line,) = problems(tmp_path, body)
    assert line.endswith("gpu: unknown key 'nvlinkbw' (did you mean 'nvlink_bw'?); known: dev, sm, gdr, "
                         "nvlink, link_speed, link_width, nvlink_bw, nvswitch")
    body = shipped_body()
    switch = body["cpus"][0]["switches"][0]
    switch["gpus"] = [{"busid": switch["gpus"][0], "nvswitches": 3}]
    (line,) = problems(tmp_path, body)
    assert "cpus[0].switches[0].gpus[0]: unknown key 'nvswitches' (did you mean 'nvswitch'?)" in line
    # the keys belong to GPUs, not NICs
    body = shipped_body()
    body["nic"]["nvlink_bw"] = 450
    (line,) = problems(tmp_path, body)
    assert "nic: unknown key 'nvlink_bw'" in line


# --- the NCCL files do not change ----------------------------------------------------------------


def test_nccl_xml_is_the_same_with_and_without_the_keys(tmp_path):
    without = shipped_body()
    for key in ("nvlink_bw", "nvswitch"):
        without["gpu"].pop(key)
    with_keys = shipped_body()
    assert (with_keys["gpu"]["nvlink_bw"], with_keys["gpu"]["nvswitch"]) == (450, 3)
    with_keys["gpu"].update(nvlink_bw=123.25, nvswitch=7)  # values the tables would never give
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # named as the shipped profile, so that the shipped file can be compared too
    plain = load_server_profile(write_profile(tmp_path / "a", without, "hgx-h100-8nic"))
    keyed = load_server_profile(write_profile(tmp_path / "b", with_keys, "hgx-h100-8nic"))
    assert plain.gpus != keyed.gpus  # the profiles do differ ...
    text = topology_xml(keyed)
    assert text.encode() == topology_xml(plain).encode()  # ... their topology files do not
    assert text.encode() == topology_xml(server_profiles()["hgx-h100-8nic"]).encode()
    assert "nvlink_bw" not in text and "nvswitch" not in text.lower() and "123.25" not in text
    # the whole NCCL output of a build, topology and env file
    spec = load_spec({"gpus": 64})
    assert nccl_files(build_fabric(spec), keyed) == nccl_files(build_fabric(spec), plain)


def test_generic_profile_xml_is_unchanged_by_node_model():
    profile = generic_profile(8, 8, 400)
    before = topology_xml(profile)
    profile.node_model()
    assert topology_xml(profile) == before
    assert all(g.nvlink_bw is None and g.nvswitch is None for g in profile.gpus)


@pytest.mark.parametrize("name, sm, gen6", [("dgx-b200", 100, False), ("dgx-b300", 103, True),
                                            ("gb200-nvl72", 100, False), ("gb300-nvl72", 103, True)])
def test_a_blackwell_profile_gives_the_model_blackwell_limits(name, sm, gen6):
    from topo.analysis.collective import nvlink_usable
    m = server_profiles()[name].node_model()
    assert (m.sm, m.nvlink_bw, m.nvswitch, m.nvls, m.assumed) == (sm, 900.0, 4, True, ())
    assert m.gpu_pcie_GBps == (118.0 if gen6 else 63.015375) == m.nic_pcie_GBps
    # NVLink 5 as NCCL counts it (40.1 of 50 GB/s a link): about twice the H100 node's
    h100 = server_profiles()["hgx-h100-8nic"].node_model()
    assert nvlink_usable(m) == pytest.approx(900 * 40.1 / 50) and nvlink_usable(m) > 1.9 * nvlink_usable(h100)
    # a tray's NVLink domain is the rack's, named in the node's figures only when it spans servers
    assert m.to_dict().get("nvlink_domain") == (72 if name.endswith("nvl72") else None)
    assert "nvlink_domain" not in h100.to_dict()
