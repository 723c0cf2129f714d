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
from topo.fabric import ROLES

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
        if model.technology == "ethernet" and not model.chassis:
            assert platform_catalog()[model.platform].switch == model.name
        else:  # InfiniBand, or a modular chassis (SONiC per line card: no one config_db.json)
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


#: Rows of a vendor table that no lossless profile can match: the SN4700's (Mellanox-SN4700-O8C48's)
#: 400G rows at 1,500 and 2,000 m repeat the 200G rows, though the cable alone holds more bytes.
IMPOSSIBLE_ROWS = {("sn4700-o32", 400000, "1500m"), ("sn4700-o32", 400000, "2000m")}


def _table_rows():
    for name, p in platform_catalog().items():
        for row in p.headroom_table:
            yield name, p, row


@pytest.mark.parametrize("name", [n for n, p in platform_catalog().items() if p.headroom_table])
def test_headroom_is_within_ten_percent_of_every_row_of_the_skus_tables(name):
    """Spectrum: SONiC's Mellanox formula (pipeline, cell occupancy, tile bytes), without cell
    inflation where the SKU shares headroom; Tomahawk: the fitted constants. Every speed and cable
    length the SKU's pg_profile_lookup.ini lists; xon and (shared) size exactly the table's."""
    from topo.qos import vendor_headroom
    p = platform_catalog()[name]
    worst = 0.0
    for row in p.headroom_table:
        speed, cable = int(row["speed"]) // 1000, str(row["cable"])
        if (name, int(row["speed"]), cable) in IMPOSSIBLE_ROWS:
            continue
        # the tables' xon: 8 lanes at 800G, and at 400G on the SN4700 (8 x 50G); 4 lanes otherwise
        lanes = 8 if speed >= 800 or (p.asic == "Spectrum-3" and speed == 400) else 4
        xon, xoff, size = vendor_headroom(p.vendor, p.asic, speed, float(cable.rstrip("m")), 9100,
                                          lanes=lanes, shared=p.shared_headroom)
        err = (xoff - int(row["xoff"])) / int(row["xoff"])
        assert abs(err) <= 0.10, (name, speed, cable, xoff, row["xoff"])
        assert xon == int(row["xon"]), (name, speed, cable)
        if p.shared_headroom:
            assert size == int(row["size"])
        else:
            assert abs(size - int(row["size"])) <= 0.03 * int(row["size"])
        worst = max(worst, abs(err))
    assert worst > 0 or len(p.headroom_table) <= 3  # a real comparison, not an identity


def test_the_rows_left_out_are_physically_impossible():
    """The cable of those rows holds more bytes, both ways, than the row's whole xoff."""
    from topo.qos import cable_bytes
    for name, p, row in _table_rows():
        if (name, int(row["speed"]), str(row["cable"])) in IMPOSSIBLE_ROWS:
            assert cable_bytes(int(row["speed"]) // 1000, float(str(row["cable"]).rstrip("m"))) > int(row["xoff"])


def test_the_broadcom_constants_are_what_the_fit_gives():
    """scripts/fit_headroom.py rederives BROADCOM_ASICS from the tables; the shipped constants may
    differ (the minimax optimum is not unique) but not be worse than the fit by more than 0.5 %."""
    import importlib.util
    from pathlib import Path
    from topo.qos import BROADCOM_ASICS
    path = Path(__file__).resolve().parents[1] / "scripts" / "fit_headroom.py"
    spec = importlib.util.spec_from_file_location("fit_headroom", path)
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    for asic, model in BROADCOM_ASICS.items():
        *_, best = fit.fit(asic)
        rows = platform_catalog()[model.fitted_on].headroom_table
        ours = max(abs(model.xoff(int(r["speed"]) // 1000, float(str(r["cable"]).rstrip("m"))) - int(r["xoff"]))
                   / int(r["xoff"]) for r in rows)
        assert ours <= best + 0.005, (asic, ours, best)


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
            if p.shared_headroom:
                assert profile["size"] == profile["xon"] or p.vendor == "broadcom"
            else:
                assert profile["size"] >= profile["xoff"] + profile["xon"]


def test_the_default_headroom_is_what_spectrum_reserves_not_a_third_of_it():
    """400G on 40 m: SN5600's table reserves 303,104 bytes, and so does topo's default profile."""
    from topo.qos import vendor_headroom
    assert vendor_headroom(None, None, 400, 40, 9100)[2] == 303104


def test_a_cable_longer_than_the_skus_table_is_refused_before_anything_is_written():
    with pytest.raises(SpecError, match="cable_leaf_spine_m=500: platform=sn5600-acs's headroom table lists "
                                        "cables up to 300 m"):
        load_spec({"gpus": 256, "platform": "sn5600-acs", "cable_leaf_spine_m": 500})


@pytest.mark.parametrize("name", sorted(platform_catalog()))
def test_buffer_pools_fit_the_chip_and_follow_the_skus_layout(name):
    """Every SKU's layout on a leaf and a spine: Spectrum pools are what is left of the chip once
    the switch's own reservations are taken out (so a longer cable leaves smaller pools); a shared
    Spectrum headroom pool holds every lossless PG's xoff at once; Tomahawk keeps the SKU's pools."""
    from topo.buffers import buffer_source
    from topo.outputs.configs import ConfigFacts
    p = platform_catalog()[name]
    fabric = build_fabric(load_spec({"gpus": 256, "platform": name}))
    facts = ConfigFacts(fabric)
    for v in (fabric.first(1), len(fabric.names) - 1):
        sw = facts.switch(v)
        b = sw["buffer"]
        pools = b["pools"]
        mmu = int(pools["egress_lossless_pool"]["size"])
        assert b["source"] == buffer_source(p).name
        if p.vendor == "broadcom":
            assert b["style"] == "broadcom-shared" and "egress_lossy_pool" not in pools
            assert pools == {k: {f: str(x) for f, x in raw.items()} for k, raw in buffer_source(p).buffer["pools"].items()}
            assert b["ingress_list"] is None
            continue
        reserved = sum(int(facts.buffer_profiles[ROLES.index(sw["role"]), port["kind"]]["size"]) for port in sw["active_ports"])
        ingress = [n for n, pool in pools.items() if pool["type"] == "ingress"]
        assert sum(int(pools[n]["size"]) for n in ingress) + reserved < mmu
        assert b["ingress_list"] and b["egress_list"] and b["lossy_queue_profile"] == "q_lossy_profile"
        if p.shared_headroom:
            xoff = sum(facts.buffer_profiles[ROLES.index(sw["role"]), port["kind"]]["xoff"] for port in sw["active_ports"])
            assert int(pools["ingress_lossless_pool"]["xoff"]) == xoff - 10240 * len(sw["active_ports"])
            assert b["style"] == "spectrum-shared" and len(ingress) == 1
        else:
            assert b["style"] == "spectrum" and len(ingress) == 2
            assert pools["ingress_lossless_pool"]["size"] == pools["ingress_lossy_pool"]["size"]
    longer = ConfigFacts(build_fabric(load_spec({"gpus": 256, "platform": name, "cable_node_leaf_m": 100})))
    if p.vendor == "nvidia" and not p.shared_headroom:
        short = int(facts.switch(fabric.first(1))["buffer"]["pools"]["ingress_lossless_pool"]["size"])
        long_ = int(longer.switch(fabric.first(1))["buffer"]["pools"]["ingress_lossless_pool"]["size"])
        assert long_ < short


@pytest.mark.parametrize("name", sorted(platform_catalog()))
def test_the_watchdog_is_what_pfcwd_start_default_gives_on_the_skus_whole_port_table(name):
    """A spine (no breakout) has the SKU's port_config.ini rows once merged, the extra SFP ports
    included: its timers are the ones platforms.yaml records for the SKU."""
    import yaml
    from importlib import resources
    from topo.outputs.configs import ConfigFacts
    raw = yaml.safe_load(resources.files("topo.data").joinpath("platforms.yaml").read_text())[name]["pfcwd"]
    fabric = build_fabric(load_spec({"gpus": 256, "platform": name}))
    spine = ConfigFacts(fabric).switch(len(fabric.names) - 1)
    assert spine["role"] == "spine" and len(spine["ports"]) + platform_catalog()[name].extra_ports == raw["port_table_entries"]
    assert spine["pfc_wd"]["detection_time"] == str(raw["detection_time_ms"])
    assert spine["pfc_wd"]["poll_interval"] == str(raw["poll_interval_ms"])
