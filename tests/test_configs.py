"""Switch and host configs: FRR's own parser, SONiC table checks, end-to-end BGP consistency."""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from topo import SpecError, build_fabric, load_spec
from topo.cli import main
from topo.outputs.readme import template_sources
from topo.outputs.configs import ConfigFacts, config_files
from topo.qos import pfc_headroom
from topo.outputs.templating import TemplateError

VTYSH = shutil.which("vtysh")
BGPD = "/usr/lib/frr/bgpd"
needs_frr = pytest.mark.skipif(
    VTYSH is None or not Path(BGPD).exists(),
    reason="FRR is not installed (bash scripts/test.sh installs it)",
)

SONIC_TABLES = {
    "DEVICE_METADATA", "PORT", "INTERFACE", "LOOPBACK_INTERFACE", "DSCP_TO_TC_MAP",
    "TC_TO_PRIORITY_GROUP_MAP", "TC_TO_QUEUE_MAP", "MAP_PFC_PRIORITY_TO_QUEUE", "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP", "SCHEDULER", "QUEUE", "PORT_QOS_MAP", "WRED_PROFILE",
    "BUFFER_POOL", "BUFFER_PROFILE", "BUFFER_PG", "BUFFER_QUEUE", "CABLE_LENGTH", "PFC_WD",
    "BUFFER_PORT_INGRESS_PROFILE_LIST", "BUFFER_PORT_EGRESS_PROFILE_LIST",
    # a dual-ToR leaf: its servers' bonds and the MCLAG pair
    "FEATURE", "PORTCHANNEL", "PORTCHANNEL_MEMBER", "MCLAG_DOMAIN", "MCLAG_INTERFACE", "VLAN", "VLAN_MEMBER", "VLAN_INTERFACE",
}
SONIC_SPEEDS = {"10000", "25000", "40000", "50000", "100000", "200000", "400000", "800000"}
PORT_RE = re.compile(r"^Ethernet\d+$")


def configs(**fields) -> tuple[object, dict[str, str]]:
    fabric = build_fabric(load_spec(fields))
    return fabric, dict(config_files(fabric))


def frr_check(path: Path) -> list[str]:
    """Problems FRR finds in one frr.conf: vtysh's parser, then bgpd's own reading."""
    problems = []
    syntax = subprocess.run([VTYSH, "-m", "-f", str(path)], capture_output=True, text=True)
    if syntax.returncode != 0:
        problems.append(f"vtysh: {syntax.stderr.strip()}")
    # -p 0: no BGP listener, so bgpd reads the file as any user (port 179 needs root)
    meaning = subprocess.run([BGPD, "-C", "-S", "-Z", "-n", "-p", "0", "-f", str(path.resolve()), "--log", "stdout"],
                             capture_output=True, text=True, timeout=60)
    for line in (meaning.stdout + meaning.stderr).splitlines():
        if "% " in line or "Config Failed" in line:
            problems.append(f"bgpd: {line.strip()}")
    if meaning.returncode != 0 and not problems:  # bgpd could not read the file at all: not a pass
        problems.append(f"bgpd exited {meaning.returncode}: {(meaning.stdout + meaning.stderr).strip()[-300:]}")
    return problems


def write_frr_confs(files: dict[str, str], folder: Path) -> list[Path]:
    """Every frr.conf of a build, written flat into ``folder`` (switches/a/frr.conf -> switches_a_frr.conf)."""
    paths = []
    for rel, text in files.items():
        if rel.endswith("frr.conf"):
            path = folder / rel.replace("/", "_")
            path.write_text(text)
            paths.append(path)
    return paths


SHAPES = {
    "two-tier": dict(gpus=256),
    "same-cable-lengths": dict(gpus=256, cable_node_leaf_m=50),
    "two-tier-unnumbered-bfd": dict(gpus=256, unnumbered=True, bfd=True, qos="sonic"),
    "three-tier": dict(gpus=16, gpus_per_node=1, radix=4, tiers=3),
    "breakout-800g": dict(gpus=128, switch="eth-51t-64x800"),
    # the shapes of docs/fabric.md "Fabric shapes"
    "undersubscribed-15-17": dict(gpus=240, oversubscription="15:17"),  # one SU: 8 leaves of 30 down, 34 up
    "grown-256-to-1024": dict(gpus=256, grow_to=1024),
    "grown-three-tier": dict(gpus=32, gpus_per_node=1, radix=8, tiers=3, grow_to=64),
    "rail-only": dict(gpus=64, tiers=1),
    "single-switch-rack": dict(gpus=64, tiers=1, placement="rack"),
    "two-planes": dict(gpus=128, nic_gbps=800, planes=2),
    "two-planes-three-tier": dict(gpus=16, gpus_per_node=1, nics_per_node=1, nic_gbps=800, planes=2, radix=4,
                                  tiers=3),
    "mixed-leaf-spine": dict(gpus=512, switch="eth-25t-64x400", spine_switch="eth-51t-128x400"),
    "mixed-core": dict(gpus=32, gpus_per_node=1, nics_per_node=1, radix=8, core_switch="eth-12t-32x400", tiers=3),
    "chassis-spine": dict(gpus=256, switch="eth-25t-64x400", spine_switch="eth-chassis-648x400"),
    # tiers of different port speeds: the faster tier's ports broken out to the slower
    "spine-800g-over-400g-leaves": dict(gpus=256, switch="eth-25t-64x400", spine_switch="eth-51t-64x800"),
    "leaf-800g-under-400g-spines": dict(gpus=256, switch="eth-51t-64x800", spine_switch="eth-51t-128x400"),
    "core-800g-over-400g-spines": dict(gpus=32, gpus_per_node=1, nics_per_node=1, switch="eth-12t-32x400",
                                       core_switch="eth-51t-64x800", tiers=3),
    "dual-tor": dict(gpus=256, dual_tor=True),
    "dual-tor-rack-three-tier": dict(gpus=32, gpus_per_node=1, nics_per_node=1, radix=8, tiers=3, dual_tor=True,
                                     placement="rack"),
}


@needs_frr
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_frr_accepts_every_frr_conf(shape, tmp_path):
    _, files = configs(**SHAPES[shape])
    paths = write_frr_confs(files, tmp_path)
    assert paths
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(paths, pool.map(frr_check, paths)))
    bad = {p.name: r for p, r in results.items() if r}
    assert not bad, bad


@needs_frr
@pytest.mark.slow
def test_a_three_tier_build_configs_every_switch_and_frr_parses_them_all(tmp_path):
    fabric, files = configs(gpus=2048, tiers=3)  # 2 pods: 64 leaves, 64 spines, 32 cores
    switches = {rel.split("/")[1] for rel in files if rel.startswith("switches/")}
    assert len(switches) == len(fabric.names) - fabric.plan.nodes == 160
    paths = write_frr_confs(files, tmp_path)

    def syntax(path):
        return subprocess.run([VTYSH, "-m", "-f", str(path)], capture_output=True, text=True).returncode

    with ThreadPoolExecutor(max_workers=2) as pool:
        codes = list(pool.map(syntax, paths))
    assert codes == [0] * len(paths)
    # bgpd's deeper reading on one switch of every role
    for role in ("leaf-su00-r0", "spine-p00-00", "core-g00-00"):
        assert frr_check(tmp_path / f"switches_cluster-{role}_frr.conf") == []


def test_frr_checker_catches_a_broken_file(tmp_path):
    if VTYSH is None:
        pytest.skip("FRR is not installed (bash scripts/test.sh installs it)")
    _, files = configs(gpus=256)
    text = files["switches/cluster-leaf-su00-r0/frr.conf"]
    bad = tmp_path / "bad.conf"
    bad.write_text(text.replace("neighbor FABRIC peer-group\n", ""))  # members of an undefined group
    assert frr_check(bad)


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    return dict(pairs)


def check_config_db(data: dict) -> None:
    assert set(data) <= SONIC_TABLES, set(data) - SONIC_TABLES
    meta = data["DEVICE_METADATA"]["localhost"]
    assert meta["type"] in {"ToRRouter", "LeafRouter", "SpineRouter"} and 64512 <= int(meta["bgp_asn"]) <= 4294967294
    lanes_seen: set[int] = set()
    for name, port in data["PORT"].items():
        assert PORT_RE.match(name)
        assert port["speed"] in SONIC_SPEEDS and 1500 <= int(port["mtu"]) <= 9216
        lanes = [int(x) for x in port["lanes"].split(",")]
        assert not lanes_seen & set(lanes)
        lanes_seen |= set(lanes)
        assert port["admin_status"] in {"up", "down"} and port["fec"] in {"rs", "fc", "none"}
    for key in data["INTERFACE"]:
        name, _, prefix = key.partition("|")
        assert name in data["PORT"]
        if prefix:
            assert ipaddress.ip_interface(prefix).network.prefixlen == 31
    for table in ("QUEUE", "BUFFER_PG", "BUFFER_QUEUE"):
        for key in data[table]:
            name, queues = key.split("|")
            first, _, last = queues.partition("-")
            assert name in data["PORT"] and 0 <= int(first) <= int(last or first) <= 7
    for key, profile in data["BUFFER_PG"].items():
        assert profile["profile"] in data["BUFFER_PROFILE"]
    for profile in data["BUFFER_PROFILE"].values():
        assert profile["pool"] in data["BUFFER_POOL"]
    for key, queue in data["BUFFER_QUEUE"].items():
        assert queue["profile"] in data["BUFFER_PROFILE"]
    for table in ("BUFFER_PORT_INGRESS_PROFILE_LIST", "BUFFER_PORT_EGRESS_PROFILE_LIST"):
        for name, entry in data.get(table, {}).items():
            assert name in data["PORT"]
            assert all(p in data["BUFFER_PROFILE"] for p in entry["profile_list"].split(","))
    pools = sum(int(p["size"]) for n, p in data["BUFFER_POOL"].items() if n != "egress_lossless_pool")
    assert 0 < pools
    for port_map in data["PORT_QOS_MAP"].values():
        assert port_map["dscp_to_tc_map"] in data["DSCP_TO_TC_MAP"]
        assert port_map["tc_to_pg_map"] in data["TC_TO_PRIORITY_GROUP_MAP"]
    assert set(data["CABLE_LENGTH"]["AZURE"]) <= set(data["PORT"])
    assert all(re.match(r"^\d+m$", v) for v in data["CABLE_LENGTH"]["AZURE"].values())
    if "PORTCHANNEL" in data:  # every member a port, lossless like the routed ports; no address on it
        members = [key.split("|") for key in data["PORTCHANNEL_MEMBER"]]
        assert {pc for pc, _ in members} == set(data["PORTCHANNEL"])
        for _, port in members:
            assert port in data["PORT"] and port not in data["INTERFACE"]
            assert data["PORT_QOS_MAP"][port]["pfc_enable"]
            assert any(k.startswith(f"{port}|") and v["profile"].startswith("pg_lossless_")
                       for k, v in data["BUFFER_PG"].items())
        (domain, mclag), = data["MCLAG_DOMAIN"].items()
        assert mclag["peer_link"] in data["PORTCHANNEL"]
        assert {key.split("|")[1] for key in data["MCLAG_INTERFACE"]} == set(data["PORTCHANNEL"]) - {mclag["peer_link"]}
        assert {key.split("|")[1] for key in data["VLAN_MEMBER"]} == set(data["PORTCHANNEL"])


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_config_db_is_valid(shape):
    _, files = configs(**SHAPES[shape])
    dbs = [json.loads(text, object_pairs_hook=_no_duplicate_keys)
           for rel, text in files.items() if rel.endswith("config_db.json")]
    assert dbs
    for data in dbs:
        check_config_db(data)


def _frr_facts(text: str) -> tuple[int, dict[str, str], list[tuple[str, int]]]:
    """(ASN, interface -> address, [(neighbor, remote-as)]) read back from an frr.conf."""
    asn = int(re.search(r"^router bgp (\d+)$", text, re.M).group(1))
    addresses = dict(re.findall(r"^interface (\S+)\n(?: description .*\n)? ip address (\S+)$", text, re.M))
    neighbors = [(n, int(a)) for n, a in re.findall(r"^ neighbor (\S+) remote-as (\d+)$", text, re.M)]
    return asn, addresses, neighbors


@pytest.mark.parametrize("fields", [dict(gpus=1024), dict(gpus=4096), dict(gpus=768, oversubscription=3)])
def test_bgp_sessions_are_consistent_end_to_end(fields):
    fabric, files = configs(**fields)
    facts = {}
    for rel, text in files.items():
        if rel.endswith("frr.conf"):
            asn, _, neighbors = _frr_facts(text)
            # SONiC owns the addresses: the INTERFACE table of the switch's config_db.json
            interfaces = json.loads(files[rel.replace("frr.conf", "config_db.json")])["INTERFACE"]
            addresses = dict(key.split("|") for key in interfaces if "|" in key)
            facts[rel.split("/")[1]] = (asn, addresses, neighbors)
    owner = {}  # address -> (switch, asn)
    for switch, (asn, addresses, _) in facts.items():
        for address in addresses.values():
            owner[str(ipaddress.ip_interface(address).ip)] = (switch, asn)
    sessions = set()
    for switch, (asn, _, neighbors) in facts.items():
        for address, remote_as in neighbors:
            peer, peer_asn = owner[address]  # the neighbor address is an interface of the peer ...
            assert remote_as == peer_asn  # ... with the peer's ASN
            sessions.add((switch, peer))
    assert all((b, a) in sessions for a, b in sessions)  # both sides configured
    # every leaf peers with every spine it is cabled to (and every spine with its cores)
    links = fabric.links
    cabled = {(fabric.names[a], fabric.names[b]) for a, b, k in
              zip(links.lo.tolist(), links.hi.tolist(), links.kind.tolist()) if k >= 1}
    assert {(a, b) for a, b in sessions if (a, b) in cabled or (b, a) in cabled} == sessions
    assert cabled <= sessions


def test_asns_follow_rfc_7938():
    fabric = build_fabric(load_spec({"gpus": 4096}))
    asn = fabric.addressing.asn
    leaves = asn[fabric.tier == 1]
    spines = asn[fabric.tier == 2]
    cores = asn[fabric.tier == 3]
    assert len(set(leaves.tolist())) == leaves.size  # one per leaf
    assert len(set(spines.tolist())) == fabric.plan.pods  # one per pod's spines
    assert set(cores.tolist()) == {64512}  # one for the core tier
    assert asn.max() <= 65534
    big = build_fabric(load_spec({"gpus": 65536}))
    assert big.addressing.asn_size == 4 and big.addressing.asn.max() <= 4294967294


def test_pools_too_small_and_asn_range_too_small_are_errors_with_numbers():
    with pytest.raises(SpecError, match=r"loopback_pool=10.0.0.0/28 holds 16 addresses but 48 switch "
                                        r"loopbacks need 50; use a /26 or larger"):
        build_fabric(load_spec({"gpus": 1024, "loopback_pool": "10.0.0.0/28"}))
    with pytest.raises(SpecError, match=r"asn_size=2: the fabric needs 2,113 private ASNs"):
        build_fabric(load_spec({"gpus": 65536, "asn_size": 2}))
    with pytest.raises(SpecError, match="overlap"):
        load_spec({"gpus": 8, "p2p_pool": "10.0.0.0/8"})


def test_qos_profiles_reach_the_tables():
    _, nvidia = configs(gpus=256)
    _, sonic = configs(gpus=256, qos="sonic")
    a = json.loads(nvidia["switches/cluster-leaf-su00-r0/config_db.json"])
    b = json.loads(sonic["switches/cluster-leaf-su00-r0/config_db.json"])
    assert a["DSCP_TO_TC_MAP"]["ROCE"]["26"] == "3" and a["DSCP_TO_TC_MAP"]["ROCE"]["48"] == "6"
    assert a["PORT_QOS_MAP"]["Ethernet0"]["pfc_enable"] == "3"
    assert a["WRED_PROFILE"]["ROCE_LOSSLESS"]["green_min_threshold"] == "150000"
    assert a["WRED_PROFILE"]["ROCE_LOSSLESS"]["green_drop_probability"] == "100"
    assert a["QUEUE"]["Ethernet0|6"] == {"scheduler": "scheduler.cnp"}
    assert b["DSCP_TO_TC_MAP"]["ROCE"]["3"] == "3" and b["DSCP_TO_TC_MAP"]["ROCE"]["4"] == "4"
    assert b["PORT_QOS_MAP"]["Ethernet0"]["pfc_enable"] == "3,4"
    assert b["WRED_PROFILE"]["ROCE_LOSSLESS"]["green_max_threshold"] == "2097152"
    assert b["WRED_PROFILE"]["ROCE_LOSSLESS"]["green_drop_probability"] == "5"


def test_pfc_headroom_follows_the_formula_per_port_speed_and_cable():
    fabric = build_fabric(load_spec({"gpus": 4096, "cable_leaf_spine_m": 100}))
    facts = ConfigFacts(fabric)
    profile = facts.buffer_profiles[1, "leaf-spine"]  # the leaves' ports to spines
    from topo.qos import spectrum_headroom
    assert (profile["xon"], profile["xoff"], profile["size"]) == spectrum_headroom(400, 100, 9100)
    h = pfc_headroom(400, 100, 9100)  # the physical terms the docs break down
    assert h.cable_bytes == pytest.approx(50_505, abs=2) and h.response_bytes == 57_920
    longer = pfc_headroom(400, 200, 9100)
    assert longer.xoff - h.xoff == pytest.approx(50_505, abs=300)
    assert pfc_headroom(800, 100, 9100).cable_bytes == pytest.approx(2 * h.cable_bytes, abs=2)
    db = json.loads(dict(config_files(fabric))["switches/cluster-spine-p00-00/config_db.json"])
    assert db["BUFFER_PG"]["Ethernet0|3"]["profile"] == "pg_lossless_400000_100m_profile"
    assert db["CABLE_LENGTH"]["AZURE"]["Ethernet0"] == "100m"
    assert db["CABLE_LENGTH"]["AZURE"]["Ethernet128"] == "100m"  # spine-core uplinks, default 100 m
    _, sonic = configs(gpus=256, qos="sonic", cable_node_leaf_m=50)
    db = json.loads(sonic["switches/cluster-leaf-su00-r0/config_db.json"])
    assert db["BUFFER_PG"]["Ethernet0|3-4"]["profile"] == "pg_lossless_400000_50m_profile"


def test_breakout_ports_are_named_by_lane():
    _, files = configs(gpus=128, switch="eth-51t-64x800")
    db = json.loads(files["switches/cluster-leaf-su00-r0/config_db.json"])
    assert db["PORT"]["Ethernet0"]["lanes"] == "0,1,2,3" and db["PORT"]["Ethernet0"]["speed"] == "400000"
    assert db["PORT"]["Ethernet4"]["lanes"] == "4,5,6,7" and db["PORT"]["Ethernet4"]["alias"] == "etp1b"
    uplink = db["PORT"]["Ethernet256"]
    assert uplink["speed"] == "800000" and uplink["lanes"] == "256,257,258,259,260,261,262,263"


def test_infiniband_switches_get_no_ethernet_configs():
    fabric = build_fabric(load_spec({"gpus": 256, "switch": "ndr-64x400"}))
    assert dict(config_files(fabric)) == {}


def test_host_script_is_valid_bash_and_matches_the_switches(tmp_path):
    _, files = configs(gpus=256)
    script = tmp_path / "roce-qos.sh"
    script.write_text(files["hosts/roce-qos.sh"])
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    run = subprocess.run(["bash", str(script), "--dry-run"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "cma_roce_tos -d mlx5_0 -t 106" in run.stdout  # DSCP 26 << 2, ECT(0)
    assert "--trust dscp --pfc 0,0,0,1,0,0,0,0" in run.stdout
    assert "echo 48 > /sys/class/net/" in run.stdout
    shellcheck = shutil.which("shellcheck")
    if shellcheck:
        assert subprocess.run([shellcheck, str(script)]).returncode == 0
    rows = files["hosts/addresses.csv"].splitlines()
    assert rows[0] == "node,nic,rdma_device,address,gateway,leaf,leaf_port"
    assert rows[1] == "cluster-node0000,0,mlx5_0,10.128.0.1/31,10.128.0.0,cluster-leaf-su00-r0,Ethernet0"
    assert len(rows) == 1 + 256


#: every program the host script runs, by variant
HOST_TOOLS = {"single": ["ip", "mlnx_qos", "cma_roce_tos", "basename"],
              "dual-tor": ["ip", "mlnx_qos", "cma_roce_tos", "basename", "dirname", "awk", "readlink", "seq", "sleep"]}


def stub_tools(folder: Path, tools: list[str], log: Path) -> None:
    """A fake of each tool in ``folder`` that only appends its name and arguments to ``log``."""
    folder.mkdir()
    for tool in tools:
        (folder / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {log}\n')
        (folder / tool).chmod(0o755)


@pytest.mark.parametrize("variant, lacking", [("single", ["mlnx_qos"]), ("single", ["cma_roce_tos"]),
                                              ("single", ["ip"]), ("single", ["ip", "cma_roce_tos"]),
                                              ("dual-tor", ["mlnx_qos"]), ("dual-tor", ["awk"])])
def test_host_script_names_every_missing_tool_before_it_changes_anything(tmp_path, variant, lacking):
    _, files = configs(gpus=256, dual_tor=variant == "dual-tor")
    script = tmp_path / "roce-qos.sh"
    script.write_text(files["hosts/roce-qos.sh"])
    for tool in HOST_TOOLS[variant]:
        assert re.search(rf"(^|[\s(]){re.escape(tool)} ", files["hosts/roce-qos.sh"].split("missing=\"\"", 1)[1]), tool
    log = tmp_path / "calls"
    stub_tools(tmp_path / "bin", [t for t in HOST_TOOLS[variant] if t not in lacking], log)
    env = {"PATH": str(tmp_path / "bin"), "NODE": "cluster-node0000", "PORTS_0": "ens1f0np0 ens1f1np1"}
    run = subprocess.run([shutil.which("bash"), str(script)], capture_output=True, text=True, env=env)
    assert run.returncode == 1
    assert run.stderr == (f"roce-qos: {' '.join(lacking)} not found on PATH, nothing changed (mlnx_qos and cma_roce_tos "
                          "come with NVIDIA's DOCA-OFED or MLNX_OFED, ip with iproute2)\n")
    assert not log.exists()  # no tool ran before the refusal
    # a dry run prints the commands that change the NICs and runs none of them (the dual-ToR
    # variant reads names with dirname, awk and basename where they are)
    dry = subprocess.run([shutil.which("bash"), str(script), "--dry-run"], capture_output=True, text=True, env=env)
    assert dry.returncode == 0, dry.stderr
    assert "mlnx_qos -i " in dry.stdout and "cma_roce_tos -d " in dry.stdout and "ip link set " in dry.stdout
    ran = log.read_text().splitlines() if log.exists() else []
    assert not [call for call in ran if call.split()[0] in ("ip", "mlnx_qos", "cma_roce_tos")]


@pytest.mark.skipif(Path("/sys/class/infiniband/mlx5_0").exists(), reason="this machine has an mlx5_0 RDMA device")
def test_host_script_with_every_tool_goes_past_the_check(tmp_path):
    _, files = configs(gpus=256)
    script = tmp_path / "roce-qos.sh"
    script.write_text(files["hosts/roce-qos.sh"])
    stub_tools(tmp_path / "bin", HOST_TOOLS["single"], tmp_path / "calls")
    run = subprocess.run([shutil.which("bash"), str(script)], capture_output=True, text=True,
                         env={"PATH": str(tmp_path / "bin")})
    # the check passes; the script then stops at the first NIC, which this machine lacks
    assert (run.returncode, run.stderr) == (1, "roce-qos: no network device for mlx5_0\n")


def dual_tor_node0_rows(placement: str) -> list[list[str]]:
    """The addresses.csv rows of node 0 at 1024 GPUs with dual-ToR, from the rules: 8 NICs of 400G,
    each two 200G links into a leaf pair, so a 400G leaf port breaks out into 2 lanes and a pair
    has 64 NICs, so a pair subnet of 2^ceil(log2(64 + 3)) = 128 addresses (/25)."""
    pool, size, lanes, breakout = int(ipaddress.IPv4Address("10.128.0.0")), 128, 4, 2
    rows = []
    for r in range(8):
        # rail: NIC r of node 0 is first on the rail-r pair of SU 0; rack: slot r of pair 0
        pair, slot = (r, 0) if placement == "rail" else (0, r)
        block = pool + pair * size
        leaf = f"cluster-leaf-su00-r{r}" if placement == "rail" else "cluster-leaf-00"
        port, lane = slot // breakout + 1, slot % breakout + 1
        leaf_port = f"Ethernet{(port - 1) * lanes + (lane - 1) * (lanes // breakout)}"
        rows.append([
            "cluster-node0000", str(r), f"mlx5_bond_{r}", f"bond{r}",
            f"{ipaddress.IPv4Address(block + 2 + slot)}/25", str(ipaddress.IPv4Address(block + 1)),
            f"mlx5_bond_{r}/p1", f"{leaf}a", leaf_port, f"mlx5_bond_{r}/p2", f"{leaf}b", leaf_port])
    return rows


@pytest.mark.parametrize("placement", ["rail", "rack"])
def test_dual_tor_host_files_bond_each_nic_over_its_leaf_pair(tmp_path, placement):
    _, files = configs(gpus=1024, dual_tor=True, placement=placement)
    rows = [line.split(",") for line in files["hosts/addresses.csv"].splitlines()]
    assert rows[0] == ["node", "nic", "rdma_device", "bond", "address", "gateway", "member_a", "leaf_a",
                       "leaf_a_port", "member_b", "leaf_b", "leaf_b_port"]
    assert len(rows) == 1 + 128 * 8  # one row per NIC (bond), not per link
    assert rows[1:9] == dual_tor_node0_rows(placement)
    assert len({r[4] for r in rows[1:]}) == 1024 and len({r[5] for r in rows[1:]}) == 32 // 2  # a gateway a pair
    script = tmp_path / "roce-qos.sh"
    script.write_text(files["hosts/roce-qos.sh"])
    (tmp_path / "addresses.csv").write_text(files["hosts/addresses.csv"])
    shellcheck = shutil.which("shellcheck")
    if shellcheck:
        assert subprocess.run([shellcheck, str(script)]).returncode == 0
    run = subprocess.run(["env", "NODE=cluster-node0000", "PORTS_3=ens3f0np0 ens3f1np1", "bash", str(script),
                          "--dry-run"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    out = run.stdout.splitlines()
    assert len(out) == 8 * 25
    for r, row in enumerate(rows[1:9]):
        address, gateway = row[4], row[5]
        subnet = str(ipaddress.IPv4Interface(address).network)
        ports = ("ens3f0np0", "ens3f1np1") if r == 3 else (f"<port1-of-mlx5_bond_{r}>", f"<port2-of-mlx5_bond_{r}>")
        assert f"ip link add bond{r} type bond mode 802.3ad lacp_rate fast xmit_hash_policy layer3+4 miimon 100" in out
        for port in ports:
            assert f"ip link set dev {port} master bond{r}" in out
            assert f"mlnx_qos -i {port} --trust dscp --pfc 0,0,0,1,0,0,0,0" in out
            assert f"echo 48 > /sys/class/net/{port}/ecn/roce_np/cnp_dscp" in out
            assert f"echo 1 > /sys/class/net/{port}/ecn/roce_rp/enable/3" in out
        assert f"ip addr replace {address} dev bond{r}" in out
        assert f"ip route replace {subnet} dev bond{r} src {address[:-3]} table {100 + r}" in out
        assert f"ip route replace 10.128.0.0/11 via {gateway} dev bond{r} src {address[:-3]} table {100 + r}" in out
        assert f"ip rule add from {address[:-3]} lookup {100 + r} priority {100 + r}" in out
        assert f"cma_roce_tos -d mlx5_bond_{r} -t 106" in out
    assert sum(line.startswith("mlnx_qos ") for line in out) == 16  # both ports of each NIC


def test_user_templates_override_by_relative_path(tmp_path):
    (tmp_path / "frr").mkdir()
    (tmp_path / "frr" / "policy.j2").write_text("! site policy for {{ sw.name }}\n")
    fabric = build_fabric(load_spec({"gpus": 256}))
    files = dict(config_files(fabric, [tmp_path]))
    assert "! site policy for cluster-leaf-su00-r0" in files["switches/cluster-leaf-su00-r0/frr.conf"]
    rows = {r["template"]: r for r in template_sources([tmp_path])}
    assert rows["frr/policy.j2"]["from"] == "user" and rows["frr/bgp.j2"]["from"] == "package"


def test_undefined_variable_in_a_user_template_names_template_line_and_variable(tmp_path):
    (tmp_path / "frr").mkdir()
    (tmp_path / "frr" / "policy.j2").write_text("! policy\n! owner {{ sw.owner }}\n")
    fabric = build_fabric(load_spec({"gpus": 256}))
    with pytest.raises(TemplateError, match=r"template frr/policy.j2 \(in .*\), line 2: .*'owner'"):
        dict(config_files(fabric, [tmp_path]))
    result = CliRunner().invoke(main, ["build", "--gpus", "256", "-o", str(tmp_path / "out"), "-q",
                                       "--templates", str(tmp_path)], prog_name="topo")
    assert result.exit_code == 1
    assert re.match(r"Error: template frr/policy.j2 \(in .*\), line 2: .*'owner'", result.stderr)
    assert not (tmp_path / "out").exists()


def test_a_user_template_that_breaks_json_is_an_error(tmp_path):
    (tmp_path / "sonic").mkdir()
    (tmp_path / "sonic" / "scheduler.j2").write_text('    "SCHEDULER": {,}')
    fabric = build_fabric(load_spec({"gpus": 256}))
    with pytest.raises(TemplateError, match=r"made invalid JSON for cluster-leaf-su00-r0"):
        dict(config_files(fabric, [tmp_path]))


def test_a_breakout_wider_than_the_lanes_of_a_port_is_refused():
    with pytest.raises(SpecError, match=r"nic_gbps=50 on port_gbps=400 is a breakout into 8 links, but a "
                                        r"port has 4 SerDes lanes"):
        build_fabric(load_spec({"gpus": 256, "nic_gbps": 50}))


def test_topo_templates_reports_template_mistakes_without_traceback(tmp_path):
    (tmp_path / "frr").mkdir()
    (tmp_path / "frr" / "policy.j2").write_text("{% if %}\n")
    result = CliRunner().invoke(main, ["templates", "--templates", str(tmp_path)], prog_name="topo")
    assert result.exit_code == 1 and result.stderr.startswith("Error: template frr/policy.j2")
    (tmp_path / "frr" / "policy.j2").write_text('{% include "frr/nowhere.j2" %}\n')
    result = CliRunner().invoke(main, ["templates", "--templates", str(tmp_path)], prog_name="topo")
    assert result.exit_code == 1 and "frr/nowhere.j2 not found" in result.stderr


def test_host_script_is_executable_in_the_build_folder(tmp_path):
    result = CliRunner().invoke(main, ["build", "--gpus", "64", "-o", str(tmp_path / "b"), "-q"], prog_name="topo")
    assert result.exit_code == 0
    assert (tmp_path / "b" / "hosts" / "roce-qos.sh").stat().st_mode & 0o111


def test_rendering_in_several_processes_gives_the_same_bytes_in_the_same_order():
    fabric = build_fabric(load_spec({"gpus": 1024}))  # 48 switches: two chunks
    done = []
    serial = list(config_files(fabric, workers=1))
    parallel = list(config_files(fabric, workers=2, progress=done.append))
    assert serial == parallel
    assert done[-1] == 48


@pytest.mark.parametrize("spec", [{"gpus": 1024}, {"gpus": 768, "oversubscription": 3, "placement": "rack"},
                                  {"gpus": 256, "nic_gbps": 200}, {"gpus": 4096, "tiers": 3}])
def test_each_leaf_owns_one_server_block_and_advertises_it_as_one_route(spec):
    """Server /31s are contiguous per leaf, so a spine carries one server route per leaf."""
    fabric = build_fabric(load_spec(spec))
    links = fabric.links
    host = np.flatnonzero(links.kind == 0)
    facts = ConfigFacts(fabric)
    blocks = {}
    for v in range(fabric.first(1), fabric.first(2)):
        block = ipaddress.IPv4Network(facts.switch(v)["server_block"])
        blocks[v] = block
        mine = host[links.hi[host] == v]
        for ip in fabric.addressing.link_ip[mine]:
            assert ipaddress.IPv4Address(int(ip)) in block and ipaddress.IPv4Address(int(ip) + 1) in block
    nets = sorted(blocks.values())
    assert all(not a.overlaps(b) for a, b in zip(nets, nets[1:], strict=False))
    assert all(b.subnet_of(ipaddress.IPv4Network(fabric.spec.host_pool)) for b in nets)
    assert len(set(fabric.addressing.link_ip[host].tolist())) == host.size
    leaf = fabric.first(1)
    wanted = f"switches/{fabric.names[leaf]}/frr.conf"
    conf = next(text for path, text in config_files(fabric) if path == wanted)
    assert f"aggregate-address {blocks[leaf]} summary-only" in conf
    assert f"ip prefix-list SERVERS seq 10 permit {blocks[leaf]} ge 31 le 31" in conf


def test_parallel_configs_do_not_take_an_earlier_builds_host_script():
    """The host script is rendered in the parent process; after a serial render of another fabric
    in the same process, a parallel render must still describe its own fabric."""
    small = build_fabric(load_spec({"gpus": 16, "name": "other", "mtu": 1500}))
    dict(config_files(small))  # leaves this process's worker state on the other fabric
    fabric = build_fabric(load_spec({"gpus": 1024}))
    parallel = dict(config_files(fabric, workers=2))["hosts/roce-qos.sh"]
    assert parallel == dict(config_files(fabric))["hosts/roce-qos.sh"]
