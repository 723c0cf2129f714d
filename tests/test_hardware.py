"""The hardware catalogue (``topo/hardware/``): one class per concept, one family of data files,
and the shipped server profiles in agreement with the GPU models they name."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from topo.hardware.catalog import GPU_MODELS, gpu_catalog, read_data, server_profiles
from topo.hardware.gpus import Gpu
from topo.hardware.nvlink import NvlinkDomain, domain_size
from topo.hardware.profiles import generic_profile

PACKAGE = Path(__file__).resolve().parent.parent / "topo"


def test_one_gpu_class_in_the_package():
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.match(r"class Gpu\b", line)]
    assert [f.split(":")[0] for f in found] == ["hardware/gpus.py"]


@pytest.mark.parametrize("name", sorted(server_profiles()))
def test_a_shipped_profile_names_a_gpu_model_and_agrees_with_it(name):
    profile = server_profiles()[name]
    gpu = gpu_catalog()[profile.gpu_model]
    assert all((slot.sm, slot.nvlink_bw, slot.nvswitch) == (gpu.sm, gpu.nvlink_GBps, gpu.nvswitch)
               for slot in profile.gpus)
    node = profile.node_model()
    assert (node.sm, node.nvlink_bw, node.nvswitch) == (gpu.sm, gpu.nvlink_GBps, gpu.nvswitch)
    # an HGX board's NVLink domain is the server: the profile's and the model's are the same
    assert profile.nvlink == NvlinkDomain(gpus=profile.gpu_count, GBps=float(gpu.nvlink_GBps),
                                          nvswitch=gpu.nvswitch)
    assert not gpu.multi_node_nvlink and gpu.nvlink_domain == profile.gpu_count


def test_the_gpu_models_entry_names_shipped_profiles_only():
    models = read_data("servers.yaml", "shipped server profiles")[GPU_MODELS]
    assert sorted(models) == sorted(server_profiles())
    assert set(models.values()) <= set(gpu_catalog())
    assert GPU_MODELS not in server_profiles()


def test_gpu_models_and_their_nvlink_domain():
    catalog = gpu_catalog()
    assert all(isinstance(g, Gpu) for g in catalog.values())
    assert catalog["h100"].nvlink == NvlinkDomain(gpus=8, GBps=450.0, nvswitch=3, multi_node=False)
    assert catalog["gb200"].nvlink == NvlinkDomain(gpus=72, GBps=900.0, nvswitch=4, multi_node=True)
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
