"""Sizing by rack: a server profile sets the node shape, NVL72 racks and NVLink domains, power."""

from __future__ import annotations

import pytest

from topo.errors import SpecError
from topo.spec import load_spec


def test_server_profile_sets_the_node_shape():
    notes: list[str] = []
    spec = load_spec({"gpus": 1152, "server": "gb300-nvl72", "switch": "eth-51t-64x800"}, notes=notes)
    assert (spec.gpus_per_node, spec.nics_per_node, spec.nic_gbps, spec.nodes) == (4, 4, 800, 288)
    assert notes == ["server=gb300-nvl72: gpus_per_node=4, nics_per_node=4, nic_gbps=800 from the profile"]


def test_a_profile_of_the_default_shape_says_nothing():
    notes: list[str] = []
    spec = load_spec({"gpus": 1024}, {"server": "hgx-h100-8nic"}, notes=notes)
    assert (spec.gpus_per_node, spec.nics_per_node, spec.nic_gbps) == (8, 8, 400) and notes == []


def test_the_four_nic_hgx_needs_no_nics_flag():
    spec = load_spec({"gpus": 1024, "server": "hgx-h100-4nic"})
    assert (spec.gpus_per_node, spec.nics_per_node) == (8, 4)


def test_planes_split_the_profiles_nic():
    from topo.hardware.catalog import resolve_server

    spec = load_spec({"gpus": 4096, "server": "dgx-b300", "planes": 2, "switch": "eth-51t-128x400"})
    assert (spec.nic_gbps, spec.nic_ports, spec.nic_port_gbps) == (800, 16, 400)
    assert resolve_server(spec).nic_count == 16


def test_values_given_win_over_the_profile():
    spec = load_spec({"gpus": 1152, "server": "gb300-nvl72", "gpus_per_node": 4, "nics_per_node": 4,
                      "nic_gbps": 800, "switch": "eth-51t-64x800"})
    assert (spec.gpus_per_node, spec.nics_per_node, spec.nic_gbps) == (4, 4, 800)


@pytest.mark.parametrize("flags, message", [
    (["--nics-per-node", "8"],
     "Error: server=gb300-nvl72 has 4 GPUs and 4 NICs per node, but gpus_per_node=4 and nics_per_node=8"),
    (["--nic-gbps", "400"],
     "Error: server=gb300-nvl72: NIC speed 800,000 Mb/s does not match nic_gbps=400 (400,000 Mb/s); "
     "NCCL takes the file's speed over what it detects"),
])
def test_a_value_that_contradicts_the_profile_is_one_error_line(flags, message, tmp_path):
    from .test_cli import run

    result = run("build", "--gpus", "1152", "--server", "gb300-nvl72", "--switch", "eth-51t-64x800", *flags,
                 "-o", str(tmp_path / "out"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert [line for line in result.stderr.splitlines() if line.startswith("Error")] == [message]
    assert not (tmp_path / "out").exists()


def test_an_unknown_profile_is_left_to_its_own_error():
    from topo.hardware.catalog import resolve_server

    spec = load_spec({"gpus": 1024, "server": "nosuch"})  # the defaults: resolve_server reports the name
    assert (spec.gpus_per_node, spec.nics_per_node, spec.nic_gbps) == (8, 8, 400)
    with pytest.raises(SpecError, match="unknown server profile 'nosuch'"):
        resolve_server(spec)
