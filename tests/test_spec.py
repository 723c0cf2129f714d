"""Reading and validating specs."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from topo import SpecError, load_spec
from topo.spec import FIELDS, read_spec_file

from .conftest import EXAMPLES


def test_defaults_reproduce_the_reference_design():
    spec = load_spec({"gpus": 1024})
    assert spec.to_dict() == {
        "name": "cluster", "gpus": 1024, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 400, "planes": 1, "dual_tor": False, "leaf_switch": None, "spine_switch": None, "core_switch": None,
        "switch": None, "radix": 64, "port_gbps": 400, "tiers": "auto", "oversubscription": 1,
        "spine_oversubscription": 1, "placement": "rail", "spines": None, "grow_to": None,
        "loopback_pool": "10.255.0.0/16", "p2p_pool": "10.64.0.0/11", "host_pool": "10.128.0.0/11",
        "asn_size": "auto", "unnumbered": False, "bfd": False, "qos": "nvidia", "mtu": 9100, "frr_version": "10.5.4", "routing_mode": "split-unified", "platform": None, "switch_watts": None, "prices": None,
        "cable_node_leaf_m": None, "cable_leaf_spine_m": 50, "cable_spine_core_m": 100,
        "hostnames": None, "server": None,
    }


@pytest.mark.parametrize("value, expected", [
    (3, Fraction(3)), ("3", Fraction(3)), ("3:1", Fraction(3)), ("48:16", Fraction(3)),
    (1.5, Fraction(3, 2)), ("5:3", Fraction(5, 3)), (1.0, Fraction(1)),
])
def test_oversubscription_forms(value, expected):
    assert load_spec({"gpus": 8, "oversubscription": value}).oversubscription == expected


def test_to_dict_round_trips():
    spec = load_spec({"gpus": 768, "oversubscription": "5:3", "tiers": "3", "placement": "rack"})
    assert load_spec(spec.to_dict()) == spec
    assert spec.to_dict()["oversubscription"] == "5:3" and spec.tiers == 3


def test_overrides_win_and_none_means_not_given():
    spec = load_spec({"gpus": 1024, "radix": 32}, {"radix": None, "gpus": 256})
    assert (spec.gpus, spec.radix) == (256, 32)


def test_switch_model_sets_radix_and_speed():
    spec = load_spec({"gpus": 1024, "switch": "eth-51t-128x400"})
    assert (spec.radix, spec.port_gbps) == (128, 400)
    # repeating the model's own values is not a conflict
    assert load_spec({"gpus": 8, "switch": "ndr-64x400", "radix": 64}).radix == 64


def test_bools_are_not_numbers():
    with pytest.raises(SpecError, match=r"gpus: expected a whole number, got True \(bool\)"):
        load_spec({"gpus": True})


def test_every_problem_is_reported_once_naming_its_field():
    with pytest.raises(SpecError) as info:
        load_spec({"gpus": -8, "radix": "big", "colour": "red", "placement": 3})
    problems = info.value.problems
    assert len(problems) == 4
    assert problems[0].startswith("unknown field 'colour'")
    assert {p.split(":")[0] for p in problems[1:]} == {"gpus", "radix", "placement"}


def test_name_must_be_host_name_safe():
    with pytest.raises(SpecError, match="name: expected a host-name-safe prefix"):
        load_spec({"gpus": 8, "name": "My Cluster"})


def test_nics_and_gpus_per_node_must_divide():
    with pytest.raises(SpecError, match="nics_per_node=3 and gpus_per_node=8"):
        load_spec({"gpus": 8, "nics_per_node": 3})
    assert load_spec({"gpus": 8, "nics_per_node": 4}).nics_per_node == 4


def test_nic_speed_must_divide_port_speed():
    with pytest.raises(SpecError, match="nic_gbps=300 does not divide port_gbps=400"):
        load_spec({"gpus": 8, "nic_gbps": 300})


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_examples_are_valid_specs(path):
    data = read_spec_file(path)
    assert set(data) <= set(FIELDS)
    load_spec(data, base_dir=path.parent)  # a relative path in it is read from its folder


def test_empty_spec_file_asks_for_gpus(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(SpecError, match="gpus: required"):
        load_spec(read_spec_file(path))


def test_missing_spec_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read it"):
        read_spec_file(tmp_path / "nope.yaml")


def test_name_with_a_trailing_newline_is_refused():
    with pytest.raises(SpecError, match="name: expected a host-name-safe prefix"):
        load_spec({"gpus": 8, "name": "abc\n"})


def test_unquoted_ratio_in_yaml_is_a_ratio_not_base_60(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("gpus: 1024\noversubscription: 3:1\nspine_oversubscription: 1.0\n")
    spec = load_spec(read_spec_file(path))
    assert spec.oversubscription == 3 and spec.spine_oversubscription == 1


def test_a_bad_field_causes_no_follow_up_errors():
    with pytest.raises(SpecError) as info:
        load_spec({"gpus": 12, "gpus_per_node": "x"})
    assert info.value.problems == ["gpus_per_node: expected a whole number, got 'x' (str)"]


def test_tiers_as_float_and_negative_ratios():
    assert load_spec({"gpus": 8, "tiers": 3.0}).tiers == 3
    with pytest.raises(SpecError, match="oversubscription: expected a ratio"):
        load_spec({"gpus": 8, "oversubscription": "-3:-1"})


@pytest.mark.parametrize("fields, message", [
    ({"gpus": 8, "nic_gbps": 1}, "breakout into 400 lanes; at most 8"),
    ({"gpus": 8, "radix": 4096}, "radix=4096 is more than any switch has"),
    ({"gpus": 8 * 10**6}, "gpus=8000000 is more than topo designs"),
])
def test_upper_bounds(fields, message):
    with pytest.raises(SpecError, match=message):
        load_spec(fields)


def test_hostname_pattern_names_the_servers():
    from topo import build_fabric

    fabric = build_fabric(load_spec({"gpus": 64, "hostnames": "gpu{number:03d}"}))
    assert fabric.names[:2] == ("gpu001", "gpu002")
    assert fabric.names[fabric.first(1)] == "cluster-leaf-su00-r0"


def test_hostname_csv_relative_to_the_spec_file(tmp_path):
    (tmp_path / "hosts.csv").write_text("node,hostname\n1,b-host\n0,a-host\n")
    (tmp_path / "spec.yaml").write_text("gpus: 16\nhostnames: hosts.csv\n")
    spec = load_spec(read_spec_file(tmp_path / "spec.yaml"), base_dir=tmp_path)
    assert spec.hostname_table == ("a-host", "b-host")
    assert spec.to_dict()["hostnames"] == "hostnames.csv"


@pytest.mark.parametrize("hostnames, csv_text, message", [
    ("gpu", None, "gives nodes 0 and 1 the same host name 'gpu'"),
    ("gpu_{node}", None, "host name 'gpu_0', which is not a valid host name"),
    ("gpu{rack}", None, "pattern 'gpu{rack}' cannot be filled"),
    ("hosts.csv", "node,hostname\n0,a\n1,a\n", "gives nodes 0 and 1 the same host name 'a'"),
    ("hosts.csv", "node,hostname\n0,a\n0,b\n", "line 3: node 0 is listed twice"),
    ("hosts.csv", "node,hostname\n0,a\n", "no host name for 1 of 2 nodes"),
    ("hosts.csv", "host,name\n", "the first line must be the header 'node,hostname'"),
    ("missing.csv", None, "cannot read"),
])
def test_bad_hostnames_are_clear_errors(tmp_path, hostnames, csv_text, message):
    if csv_text is not None:
        (tmp_path / hostnames).write_text(csv_text)
    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec({"gpus": 16, "hostnames": hostnames}, base_dir=tmp_path)
