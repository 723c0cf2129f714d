"""SONiC platform (SKU) profiles: lane maps, aliases and names as the SKUs' port_config.ini give
them, the SKU a spec resolves to, and what the configs take from it."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import yaml

from topo import SpecError, build_fabric, load_spec
from topo.catalog import platform_catalog, switch_catalog
from topo.outputs.configs import config_files

PLATFORMS = sorted(platform_catalog())
RAW = yaml.safe_load(resources.files("topo.data").joinpath("platforms.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", PLATFORMS)
def test_a_platform_gives_its_port_config_rows(name):
    """The first eight rows of the SKU's port_config.ini (kept verbatim in the data) come out of the model."""
    p = platform_catalog()[name]
    for i, row in enumerate(RAW[name]["ports"]["first_8"]):
        port = i + 1
        assert f"Ethernet{(port - 1) * p.lanes_per_port}" == row["name"]
        assert ",".join(map(str, p.port_lanes(port))) == row["lanes"]
        assert p.port_alias(port) == row["alias"] and str(p.port_index(port)) == row["index"]


@pytest.mark.parametrize("name", PLATFORMS)
def test_every_lane_of_a_platform_belongs_to_one_port(name):
    p = platform_catalog()[name]
    model = switch_catalog()[p.switch]
    lanes = [lane for port in range(1, model.radix + 1) for lane in p.port_lanes(port)]
    assert len(lanes) == len(set(lanes)) == model.radix * p.lanes_per_port
    assert p.cages * p.subports == model.radix
    assert p.sources and len(p.commit) == 40  # every figure names where it came from


def test_every_ethernet_model_has_a_default_platform_of_its_own():
    for model in switch_catalog().values():
        if model.technology == "ethernet":
            assert platform_catalog()[model.platform].switch == model.name
        else:
            assert model.platform is None


def test_a_spec_resolves_its_platform():
    assert load_spec({"gpus": 64, "switch": "eth-51t-64x800"}).platform == "sn5600-acs"
    spec = load_spec({"gpus": 64, "platform": "arista-7060x6-64pe-o128s2"})
    assert (spec.switch, spec.radix, spec.port_gbps) == ("eth-51t-128x400", 128, 400)
    assert load_spec({"gpus": 64}).platform is None
    with pytest.raises(SpecError, match="platform=sn4700-o32 is a SKU of switch eth-12t-32x400, not of "
                                        "switch=eth-51t-64x800"):
        load_spec({"gpus": 64, "switch": "eth-51t-64x800", "platform": "sn4700-o32"})
    with pytest.raises(SpecError, match="unknown SONiC platform 'sn5601-acs' \\(did you mean 'sn5600-acs'"):
        load_spec({"gpus": 64, "platform": "sn5601-acs"})
    with pytest.raises(SpecError, match="platform=dellemc-z9664f-o64 offers no breakout"):
        load_spec({"gpus": 64, "platform": "dellemc-z9664f-o64", "nic_gbps": 200})


def _leaf_config(**fields) -> dict:
    fabric = build_fabric(load_spec({"gpus": 256, **fields}))
    wanted = f"switches/{fabric.names[fabric.first(1)]}/config_db.json"
    return json.loads(next(text for path, text in config_files(fabric) if path == wanted))


def test_configs_name_the_sku_and_use_its_lanes():
    db = _leaf_config(platform="dellemc-z9332f-o32")
    meta = db["DEVICE_METADATA"]["localhost"]
    assert (meta["hwsku"], meta["platform"]) == ("DellEMC-Z9332f-O32", "x86_64-dellemc_z9332f_d1508-r0")
    assert db["PORT"]["Ethernet0"]["lanes"] == "33,34,35,36,37,38,39,40"
    generic = _leaf_config()
    assert "hwsku" not in generic["DEVICE_METADATA"]["localhost"]
    assert generic["PORT"]["Ethernet0"]["lanes"] == "0,1,2,3"


def test_pfc_to_pg_map_follows_the_vendor():
    """SONiC's QoS template sets pfc_to_pg_map on Spectrum, never on Broadcom."""
    spectrum = _leaf_config(platform="sn4700-o32", qos="sonic")
    broadcom = _leaf_config(platform="dellemc-z9332f-o32", qos="nvidia")
    assert spectrum["PORT_QOS_MAP"]["Ethernet0"]["pfc_to_pg_map"] == "ROCE"
    assert "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP" in spectrum
    assert "pfc_to_pg_map" not in broadcom["PORT_QOS_MAP"]["Ethernet0"]
    assert "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP" not in broadcom


def test_a_breakout_sku_names_its_sub_ports_as_sonic_does():
    """800G ports split for 400G NICs: Ethernet0 and Ethernet4 (child k of n: Ethernet{B + k L/n})."""
    db = _leaf_config(platform="arista-7060dx5-64s", nic_gbps=200)
    assert db["PORT"]["Ethernet0"]["alias"] == "Ethernet1/1" and db["PORT"]["Ethernet4"]["alias"] == "Ethernet1/5"
    assert db["PORT"]["Ethernet0"]["lanes"] == "17,18,19,20" and db["PORT"]["Ethernet4"]["lanes"] == "21,22,23,24"


SPECTRUM_4_TABLES = [n for n, p in platform_catalog().items() if p.asic == "Spectrum-4" and p.headroom_table]


@pytest.mark.parametrize("name", SPECTRUM_4_TABLES)
def test_spectrum_headroom_is_within_a_few_percent_of_the_skus_tables(name):
    """SONiC's Mellanox formula (pipeline, cell occupancy, tile bytes) against pg_profile_lookup.ini."""
    from topo.outputs.qos import vendor_headroom
    p = platform_catalog()[name]
    for row in p.headroom_table:
        xon, xoff, size = vendor_headroom("nvidia", p.asic, int(row["speed"]) // 1000,
                                          float(str(row["cable"]).rstrip("m")), 9100)
        assert xon == int(row["xon"]) or int(row["speed"]) == 800000 or xon * 2 == int(row["xon"])
        assert abs(xoff - int(row["xoff"])) <= 0.03 * int(row["xoff"])
        assert abs(size - int(row["size"])) <= 0.03 * int(row["size"])


@pytest.mark.parametrize("name", [n for n, p in platform_catalog().items() if p.headroom_table])
def test_configs_never_reserve_less_headroom_than_the_sku_table(name):
    p = platform_catalog()[name]
    speed = switch_catalog()[p.switch].port_gbps
    listed = {float(str(r["cable"]).rstrip("m")) for r in p.headroom_table if int(r["speed"]) == speed * 1000}
    if not listed:
        pytest.skip(f"{name}'s table lists no {speed}G row")
    fabric = build_fabric(load_spec({"gpus": 256, "platform": name, "cable_leaf_spine_m": 30}))
    from topo.outputs.configs import ConfigFacts
    for profile in ConfigFacts(fabric).buffer_profiles.values():
        assert profile["cable_m"] in set(p.cable_lengths_m)  # a length the SKU's buffer manager knows
        if profile["vendor_table_xoff"] is not None:
            assert profile["xoff"] >= profile["vendor_table_xoff"]
            assert profile["size"] >= profile["xoff"] + profile["xon"]


def test_the_default_headroom_is_what_spectrum_reserves_not_a_third_of_it():
    """400G on 40 m: SN5600's table reserves 303,104 bytes, and so does topo's default profile."""
    from topo.outputs.qos import vendor_headroom
    assert vendor_headroom(None, None, 400, 40, 9100)[2] == 303104


def test_a_cable_longer_than_the_skus_table_is_refused_before_anything_is_written():
    with pytest.raises(SpecError, match="cable_leaf_spine_m=500: platform=sn5600-acs's headroom table lists "
                                        "cables up to 300 m"):
        load_spec({"gpus": 256, "platform": "sn5600-acs", "cable_leaf_spine_m": 500})
