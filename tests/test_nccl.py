"""NCCL topology files: the rules NCCL's parser and topology code hold a file to, the reader's
agreement with NCCL on published files, the comparison with vendors' H100 files, the env file,
server profile errors, and determinism."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from topo import SpecError, build_fabric, load_spec
from topo.analysis.analyze import AnalysisOptions, analyze
from topo.outputs.nccl import bonded_profile, nccl_files, topology_xml
from topo.outputs.nccl_xml import (
    NcclXmlError,
    check_topology,
    device_groups,
    read_nccl_graph,
    read_nccl_topology,
)
from topo.qos import QOS_PROFILES
from topo.hardware.catalog import resolve_server, server_profiles
from topo.hardware.pcie import LINK_SPEEDS
from topo.hardware.profiles import generic_profile, load_server_profile
from topo.hardware.servers import nic_guid

from .conftest import SHARED_REFERENCE

NCCL_REF = SHARED_REFERENCE / "nccl"
needs_reference = pytest.mark.skipif(
    not NCCL_REF.is_dir(),
    reason=f"the published NCCL topology files are not here ({NCCL_REF} is absent; they are not shipped "
           f"with topo)",
)
BUSID = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")
INT_KEYS = {"version", "numaid", "familyid", "modelid", "link_width", "dev", "sm", "gdr", "count", "speed",
            "port", "rail"}
#: Attributes NCCL fills in from the host when they are missing (xml.cc): on a node several ranks
#: share, each must already be in the file or the ranks' copies differ and do not fuse.
FILLED_BY_NCCL = {"cpu": {"affinity", "arch", "vendor", "familyid", "modelid"},
                  "pci": {"class", "link_speed", "link_width", "vendor", "device", "subsystem_vendor",
                          "subsystem_device"}}


def files_for(**fields) -> dict[str, str]:
    return nccl_files(build_fabric(load_spec({"gpus": 64, **fields})))


def xml_of(files: dict[str, str]) -> str:
    (text,) = [v for k, v in files.items() if k.endswith("-topo.xml")]
    return text


def env_of(files: dict[str, str]) -> dict[str, str]:
    """The env file as NCCL's conf parser reads it (param.cc setEnvFile): '#' lines skipped,
    KEY=VALUE split at the first '='."""
    (text,) = [v for k, v in files.items() if k.endswith(".env")]
    values = {}
    for line in text.splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        values[key] = value
    return values


PROFILES = {
    "hgx-h100-8nic": server_profiles()["hgx-h100-8nic"],
    "hgx-h100-4nic": server_profiles()["hgx-h100-4nic"],
    "generic-4gpu-8nic": generic_profile(4, 8, 400),
    "generic-16gpu-16nic": generic_profile(16, 16, 800),
    "generic-1gpu-1nic": generic_profile(1, 1, 100),
    # as a dual-ToR build writes it: a RoCE LAG device (mlx5_bond_r) per NIC
    "hgx-h100-8nic-bonded": bonded_profile(server_profiles()["hgx-h100-8nic"]),
}


# --- our files against every rule --------------------------------------------------------------


@pytest.mark.parametrize("name", PROFILES)
def test_our_files_pass_the_reader_and_every_exporter_rule(name):
    text = topology_xml(PROFILES[name])
    doc = read_nccl_topology(text)
    assert doc.notes == ()  # nothing ignored, no attribute dropped
    assert check_topology(text) == []


@pytest.mark.parametrize("name", PROFILES)
def test_lexical_rules_one_tag_per_line(name):
    text = topology_xml(PROFILES[name])
    assert "\t" not in text and "\r" not in text
    assert not text.startswith("\ufeff") and "<?xml" not in text and "<!DOCTYPE" not in text
    lines = text.splitlines()
    body = [line for line in lines if not line.startswith("<!--")]
    assert body[0] == '<system version="1">' and body[-1] == "</system>"
    depth = 0
    for line in body:
        stripped = line.lstrip(" ")
        closing = stripped.startswith("</")
        if closing:
            depth -= 1
        assert len(line) - len(stripped) == 2 * depth, line  # 2-space indent by depth
        assert stripped.count("<") == 1 and stripped.count(">") == 1, line  # one tag per line
        assert re.fullmatch(r'</?[a-z]+( [a-z_]+="[^"]*")*/?>', stripped), line  # double quotes, single spaces
        if not closing and not stripped.endswith("/>"):
            depth += 1
    assert depth == 0


@pytest.mark.parametrize("name", PROFILES)
def test_counts_busids_speeds_and_integers(name):
    doc = read_nccl_topology(topology_xml(PROFILES[name]))
    elements = list(doc.iter())
    assert len(elements) == doc.elements <= 255  # NCCL's parser fails on the 256th
    assert max(len(e.attrs) for e in elements) <= 10  # NCCL appends its own into 17 slots
    assert doc.root.attrs == [("version", "1")]
    for e in doc.iter("pci"):
        assert BUSID.fullmatch(e["busid"]), e
        assert e["link_speed"] in LINK_SPEEDS and e["link_speed"].endswith("PCIe")
    busids = [e["busid"] for e in doc.iter("pci")]
    assert len(busids) == len(set(busids))
    for e in elements:
        for key, value in e.attrs:
            if key in INT_KEYS:
                assert re.fullmatch(r"-?(0|[1-9][0-9]*)", value), (e, key, value)  # never zero-padded
    for cpu in doc.iter("cpu"):
        assert [k for k, _ in cpu.attrs] == ["numaid", "affinity", "arch", "vendor", "familyid", "modelid"]


def test_h100_element_budget_and_shape():
    doc = read_nccl_topology(topology_xml(PROFILES["hgx-h100-8nic"]))
    # system + 2 cpu + 8 x (switch, GPU pci, gpu, nvlink, NIC pci, nic, net)
    assert doc.elements == 1 + 2 + 8 * 7 == 59
    names = [e.name for e in doc.iter()]
    assert {n: names.count(n) for n in set(names)} == {
        "system": 1, "cpu": 2, "pci": 24, "gpu": 8, "nvlink": 8, "nic": 8, "net": 8}


@pytest.mark.parametrize("name", PROFILES)
def test_gpu_r_shares_its_switch_with_the_nic_of_rail_r(name):
    profile = PROFILES[name]
    doc = read_nccl_topology(topology_xml(profile))
    gpus, nics = profile.gpu_count, profile.nic_count
    seen_rails = []
    for group in device_groups(doc):
        assert group["switch"] is not None and group["gpus"] and group["nets"]
        devs = [int(d) for d in group["gpu_devs"]]
        rails = sorted(int(net["rail"]) for net in group["nets"])
        for net in group["nets"]:
            assert net["dev"] == net["rail"]  # plugin order = NCCL_IB_HCA order = rail order
        expected = sorted({d * nics // gpus for d in devs} if gpus >= nics
                          else {d * (nics // gpus) + j for d in devs for j in range(nics // gpus)})
        assert rails == expected
        seen_rails += rails
    assert sorted(seen_rails) == list(range(nics))
    if gpus == nics:  # the one-to-one case, literally: GPU r's switch holds mlx5_r with rail r
        for group in device_groups(doc):
            (dev,), (net,) = group["gpu_devs"], group["nets"]
            device = f"mlx5_bond_{dev}" if name.endswith("-bonded") else f"mlx5_{dev}"  # a dual-ToR bond
            assert net["name"] == device and net["rail"] == dev


def test_four_nic_node_pairs_two_gpus_per_nic():
    doc = read_nccl_topology(topology_xml(PROFILES["hgx-h100-4nic"]))
    pairs = [(g["gpu_devs"], [n["name"] for n in g["nets"]], [n["rail"] for n in g["nets"]])
             for g in device_groups(doc)]
    assert pairs == [(["0", "1"], ["mlx5_0"], ["0"]), (["2", "3"], ["mlx5_1"], ["1"]),
                     (["4", "5"], ["mlx5_2"], ["2"]), (["6", "7"], ["mlx5_3"], ["3"])]
    cpus = read_nccl_topology(topology_xml(PROFILES["hgx-h100-4nic"])).root.children
    assert [(c["vendor"], c["familyid"], c["modelid"]) for c in cpus] == [("AuthenticAMD", "25", "17")] * 2


@pytest.mark.parametrize("name", PROFILES)
def test_guids_unique_and_nets_complete(name):
    doc = read_nccl_topology(topology_xml(PROFILES[name]))
    nets = list(doc.iter("net"))
    assert len({n["guid"] for n in nets}) == len(nets)
    assert all(re.fullmatch(r"0x[0-9a-f]{16}", n["guid"]) for n in nets)
    for net in nets:
        assert [k for k, _ in net.attrs][:3] == ["name", "dev", "speed"] and "rail" in net
    assert {n["speed"] for n in nets} == {str(PROFILES[name].nic_gbps * 1000)}


def test_shared_nodes_carry_what_nccl_would_fill_in():
    # a switch is kept by every rank (its NIC is used by all); NCCL fills missing attributes only
    # on the rank whose GPU is below it, and copies that differ are not fused (NOTES 1.5)
    doc = read_nccl_topology(topology_xml(PROFILES["hgx-h100-8nic"]))
    for cpu in doc.iter("cpu"):
        assert FILLED_BY_NCCL["cpu"] <= {k for k, _ in cpu.attrs}
        for switch in cpu.children:
            assert FILLED_BY_NCCL["pci"] <= {k for k, _ in switch.attrs}


def test_nvlink_is_one_line_to_the_nvswitch():
    doc = read_nccl_topology(topology_xml(PROFILES["hgx-h100-8nic"]))
    for gpu in doc.iter("gpu"):
        assert gpu["sm"] == "90" and gpu["gdr"] == "1"
        (link,) = gpu.children
        assert link.attrs == [("target", "fffffff:ff:ff.0"), ("count", "18"), ("tclass", "0x068000")]
    generic = read_nccl_topology(topology_xml(PROFILES["generic-4gpu-8nic"]))
    for gpu in generic.iter("gpu"):  # unknown GPUs: no sm, no NVLinks, so NCCL detects them
        assert gpu.attrs == [("dev", gpu["dev"])] and gpu.children == []


def test_nic_class_follows_the_fabric():
    ethernet = read_nccl_topology(xml_of(files_for()))
    infiniband = read_nccl_topology(xml_of(files_for(switch="ndr-64x400")))
    classes = lambda doc: {p["class"] for p in doc.iter("pci") if any(c.name == "nic" for c in p.children)}
    assert classes(ethernet) == {"0x020000"} and classes(infiniband) == {"0x020700"}


# --- the reader: NCCL's parser rules -----------------------------------------------------------


GOOD = '<system version="1">\n  <cpu numaid="0">\n    <nic/>\n  </cpu>\n</system>\n'


@pytest.mark.parametrize("text, message", [
    ('<?xml version="1.0"?>\n' + GOOD, "expected >, got '?'"),
    ('<?xml?>\n' + GOOD, "unterminated"),
    ("\ufeff" + GOOD, "expecting '<'"),
    (GOOD.replace("  <cpu", "\t<cpu"), "expecting '<', got '\\t'"),
    (GOOD.replace('<cpu numaid="0">', '<cpu\tnumaid="0">'), "Unexpected value with name"),
    (GOOD.replace('<cpu numaid="0">', '<cpu numaid="0"\n       affinity="0000ffff">'), "expected >, got '\\n'"),
    (GOOD.replace('numaid="0"', "numaid=0"), "Expected (double) quote"),
    (GOOD.replace('numaid="0"', 'numaid = "0"'), "Expected (double) quote"),
    (GOOD.replace('version="1"', 'version="2"'), "XML Topology has wrong version 2, 1 needed"),
    (GOOD.replace('version="1"', 'version="08"'), "wrong version 0"),  # octal: 08 reads as 0
    (GOOD.replace('version="1"', 'name="x"'), "Attribute version of node system not found"),
    (GOOD.replace("</cpu>", "</cpux>"), "XML Mismatch : cpu / cpux"),
    (GOOD.replace("</cpu>", "</cpu >"), "unexpected trailing"),
    (GOOD.replace("<nic/>", "<nic/>text"), "expecting '<', got 't'"),
    (GOOD[:-10], "unterminated"),
    (GOOD.replace('numaid="0"', 'numaid="' + "7" * 254 + '"'), "too long"),
])
def test_reader_rejects_what_nccl_rejects(text, message):
    with pytest.raises(NcclXmlError) as info:
        read_nccl_topology(text)
    assert message in str(info.value)
    assert str(info.value).startswith("line ")


def test_reader_accepts_what_nccl_accepts():
    crlf = read_nccl_topology(GOOD.replace("\n", "\r\n"))
    assert crlf.elements == 3
    commented = read_nccl_topology("<!-- made by hand -- twice -->\n" + GOOD.replace("<nic/>", "<nic/> <!-- 0 -->"))
    assert commented.elements == 3 and commented.notes == ()
    single = read_nccl_topology(GOOD.replace('"1"', "'1'"))
    assert single.root["version"] == "1" and "2.27.3" in single.notes[0]
    assert read_nccl_topology(GOOD.replace('numaid="0"', 'numaid="' + "7" * 253 + '"')).elements == 3
    octal = read_nccl_topology(GOOD.replace('version="1"', 'version="01"'))  # strtol: octal 1
    assert octal.root["version"] == "01" and any("zero-padded" in p for p in check_topology(GOOD.replace(
        'version="1"', 'version="01"')))


def test_reader_counts_elements_as_nccl_does():
    def file_with(elements: int) -> str:
        nics = "    <nic/>\n" * (elements - 2)
        return f'<system version="1">\n  <cpu numaid="0">\n{nics}  </cpu>\n</system>\n'

    assert read_nccl_topology(file_with(255)).elements == 255
    with pytest.raises(NcclXmlError, match="limited to 256 nodes"):
        read_nccl_topology(file_with(256))
    # unknown elements are skipped with what they hold and not counted; leaves keep no children
    doc = read_nccl_topology(GOOD.replace("<nic/>", '<foo a="1"><cpu numaid="9"/></foo>\n    <gpu dev="0"/>\n'
                                          '    <nic><net name="x"><bar/></net></nic>'))
    assert doc.elements == 4
    assert [e.name for e in doc.iter()] == ["system", "cpu", "nic", "net"]
    assert any("Ignoring element foo" in n for n in doc.notes)
    assert any("Ignoring element gpu" in n for n in doc.notes)  # gpu belongs under pci, not cpu
    assert any("element bar under <net>" in n for n in doc.notes)


def test_reader_keeps_sixteen_attributes():
    attrs = " ".join(f'a{i}="{i}"' for i in range(17))
    doc = read_nccl_topology(f'<system version="1" {attrs}/>\n')
    assert len(doc.root.attrs) == 16 and any("max 16" in n for n in doc.notes)
    problems = check_topology(f'<system version="1" {attrs}/>\n')
    assert any("attributes; keep to 10" in p for p in problems)


def test_checker_finds_what_parses_but_misleads():
    text = GOOD.replace('<cpu numaid="0">', '<cpu numaid="0" rack="r1">').replace(
        "<nic/>", '<pci busid="0000:1B:00.0" class="0x060400" link_speed="16.0 GT/s" link_width="16"/>')
    problems = "\n".join(check_topology(text))
    assert "rack" in problems and "NCCL does not know" in problems
    assert 'busid="0000:1B:00.0"' in problems and "lower case" in problems
    assert 'link_speed="16.0 GT/s"' in problems
    assert "missing affinity, arch, vendor, familyid, modelid" in problems
    assert check_topology("\t" + GOOD)[0].startswith("NCCL would refuse it: line 1")


# --- published files ---------------------------------------------------------------------------


def reference_files() -> list[Path | None]:
    """The published files, or one placeholder so that the tests show the skip reason."""
    return sorted(NCCL_REF.rglob("*.xml")) if NCCL_REF.is_dir() else [None]


@needs_reference
def test_reference_folder_holds_the_files_we_compare_with():
    names = {p.relative_to(NCCL_REF).as_posix() for p in reference_files() if p}
    assert len(names) >= 15
    assert "Azure_azhpc-images/topology/ndv5-topo.xml" in names
    assert "oracle-quickstart_oci-hpc-oke/manifests/topology/BM.GPU.H100.8.xml" in names


@needs_reference
@pytest.mark.parametrize("path", reference_files(), ids=lambda p: p and p.relative_to(NCCL_REF).as_posix())
def test_reader_parses_every_published_file(path):
    data = path.read_bytes()
    if path.name == "topo_8p_942vm.xml":  # RCCL's dialect
        with pytest.raises(NcclXmlError, match="wrong version 2, 1 needed"):
            read_nccl_topology(data)
        return
    if data.lstrip().startswith(b"<graphs"):  # an NCCL_GRAPH_FILE
        as_topology = read_nccl_topology(data)
        assert as_topology.root is None and "Ignoring element graphs" in as_topology.notes[0]
        graph = read_nccl_graph(data)
        assert graph.root.name == "graphs" and [g.name for g in graph.root.children] == ["graph"] * 3
        assert all(c.name == "channel" for g in graph.root.children for c in g.children)
        return
    doc = read_nccl_topology(data)
    assert doc.root.name == "system" and doc.root["version"] == "1"
    assert 10 <= doc.elements <= 131 and doc.notes == ()
    assert all(c.name == "cpu" for c in doc.root.children)


def ref(path: str):
    return read_nccl_topology((NCCL_REF / path).read_bytes())


ORACLE_H100 = ["oracle-quickstart_oci-hpc/samples/gpu/H100-topology.xml",
               "oracle-quickstart_oci-hpc/samples/gpu/H100-topology-kubernetes.xml",
               "oracle-quickstart_oci-hpc-oke/manifests/topology/BM.GPU.H100.8.xml"]


@needs_reference
def test_h100_profile_has_the_shape_of_azure_nd_h100_v5():
    ours, azure = read_nccl_topology(topology_xml(PROFILES["hgx-h100-8nic"])), ref(
        "Azure_azhpc-images/topology/ndv5-topo.xml")
    for doc in (ours, azure):
        cpus = doc.root.children
        assert [(c["arch"], c["vendor"], c["familyid"], c["modelid"]) for c in cpus] == [
            ("x86_64", "GenuineIntel", "6", "143")] * 2  # two Sapphire Rapids NUMA nodes
        groups = device_groups(doc)
        assert [g["numaid"] for g in groups] == ["0"] * 4 + ["1"] * 4  # four switches per CPU
        assert all(len(g["gpus"]) == 1 and len(g["nics"]) == 1 for g in groups)  # 1 GPU + 1 NIC each
        switches = [s for c in cpus for s in c.children]
        assert all(s["class"] == "0x060400" for s in switches)
        assert {p["link_speed"] for p in doc.iter("pci")} == {"32.0 GT/s PCIe"}  # Gen5 x16 throughout
        assert {p["link_width"] for p in doc.iter("pci")} == {"16"}
    # the same attributes on the switches, ids included (so no rank fills them in)
    key_sets = lambda doc: {tuple(k for k, _ in s.attrs) for c in doc.root.children for s in c.children}
    assert key_sets(ours) == key_sets(azure)


@needs_reference
@pytest.mark.parametrize("path", ORACLE_H100)
def test_h100_profile_has_the_shape_of_oracle_h100_dumps(path):
    ours, dump = read_nccl_topology(topology_xml(PROFILES["hgx-h100-8nic"])), ref(path)
    # two SPR sockets of 56 cores: the same CPU masks, exactly
    assert [c["affinity"] for c in ours.root.children] == [c["affinity"] for c in dump.root.children]
    assert [c["modelid"] for c in dump.root.children] == ["143", "143"]
    for doc in (ours, dump):
        gpus = list(doc.iter("gpu"))
        assert len(gpus) == 8 and {g["sm"] for g in gpus} == {"90"}
        for gpu in gpus:  # all NVLinks to the NVSwitch class, 18 per GPU (theirs 5+5+4+4 over 4 lines)
            links = [c for c in gpu.children if c.name == "nvlink"]
            assert {link["tclass"] for link in links} == {"0x068000"}
            assert sum(int(link["count"]) for link in links) == 18
        groups = device_groups(doc)
        assert len(groups) == 8 and [g["numaid"] for g in groups] == ["0"] * 4 + ["1"] * 4
        for group in groups:  # each GPU shares a switch tree with one NIC ASIC
            assert len(group["gpus"]) == 1 and len(group["nics"]) == 1
    assert len(list(ours.iter("nvlink"))) == 8 and len(list(dump.iter("nvlink"))) == 32
    assert ours.elements < dump.elements == 107


@needs_reference
def test_oracle_kubernetes_h100_has_our_bandwidth_per_gpu():
    # Oracle's container file: one dual-port NIC per GPU, 2 x 200000 Mb/s; ours: one 400000 port
    dump = ref(ORACLE_H100[1])
    ours = read_nccl_topology(topology_xml(PROFILES["hgx-h100-8nic"]))
    per_gpu = lambda doc: [sum(int(n["speed"]) for n in g["nets"]) for g in device_groups(doc)]
    assert per_gpu(dump) == per_gpu(ours) == [400000] * 8
    # ports of one ASIC share a GUID; different ASICs never do
    for group in device_groups(dump):
        assert len({n["guid"] for n in group["nets"]}) == 1 and [n["port"] for n in group["nets"]] == ["1", "2"]


@needs_reference
def test_h100_profile_against_the_complete_p5_file():
    p5 = ref("aws_aws-ofi-nccl_PR1226/topology/p5.48xl-topo.xml")
    groups = device_groups(p5)
    assert len(groups) == 8 and all(len(g["gpus"]) == 1 and len(g["nets"]) == 4 for g in groups)
    assert {g["gpu_devs"][0] for g in groups} == {str(i) for i in range(8)}
    assert [sum(int(n["speed"]) for n in g["nets"]) for g in groups] == [400000] * 8  # 4 x 100G EFA
    assert not list(p5.iter("nvlink"))  # NCCL still detects NVLinks there; ours states them
    assert p5.elements == 122 and check_topology((NCCL_REF / "aws_aws-ofi-nccl_PR1226/topology/"
                                                              "p5.48xl-topo.xml").read_bytes()) == []


@needs_reference
def test_four_nic_profile_has_the_shape_of_aws_p4d():
    ours = read_nccl_topology(topology_xml(PROFILES["hgx-h100-4nic"]))
    for path in ("aws_aws-ofi-nccl/topology/p4d-24xl-topo.xml", "aws_aws-ofi-nccl/topology/p4de-24xl-topo.xml"):
        shape = lambda doc: [(g["numaid"], len(g["gpus"]), len(g["nics"])) for g in device_groups(doc)]
        assert shape(ref(path)) == shape(ours) == [("0", 2, 1)] * 2 + [("1", 2, 1)] * 2


@needs_reference
def test_checker_explains_known_problems_of_published_files():
    historic_p5 = check_topology((NCCL_REF / "aws_aws-ofi-nccl/topology/p5.48xl-topo.xml").read_bytes())
    # the cause of "Attribute arch of node cpu not found" (NVIDIA/nccl#1726)
    assert any("<cpu numaid=0>: missing affinity, arch" in p for p in historic_p5)
    assert any('link_speed="32 GT/s PCIe/s"' in p for p in historic_p5)  # prefix-matches "32 GT/s"
    ncv4 = check_topology((NCCL_REF / "Azure_azhpc-images/topology/ncv4-topo.xml").read_bytes())
    assert any('link_speed=""' in p for p in ncv4) and any('link_width="0"' in p for p in ncv4)
    b4 = check_topology((NCCL_REF / "oracle-quickstart_oci-hpc/samples/gpu/topo-flattened-b4.xml").read_bytes())
    assert b4 == ['line 18: <cpu numaid=7>: affinity="fff0000,00000000,00000000,00000000,ffff0000,00000000,'
                  '00000000,00000000" is not 32-bit hex words, most significant first']
    assert check_topology((NCCL_REF / "Azure_azhpc-images/topology/ndv5-topo.xml").read_bytes()) == []


@needs_reference
def test_bonded_nics_have_the_bandwidth_of_the_vendors_dual_port_nics():
    # Oracle's container file lists both ports of each GPU's dual-port NIC, 2 x 200000 Mb/s; a
    # dual-ToR build bonds them into one RoCE LAG device with their sum, as NCCL's plugin names it
    dump = ref(ORACLE_H100[1])
    ours = read_nccl_topology(topology_xml(PROFILES["hgx-h100-8nic-bonded"]))
    per_gpu = lambda doc: [sum(int(n["speed"]) for n in g["nets"]) for g in device_groups(doc)]
    assert per_gpu(dump) == per_gpu(ours) == [2 * 200000] * 8
    assert all(re.fullmatch(r"mlx5_\d+", n["name"]) for n in dump.iter("net"))  # one device per port
    assert [(g["nets"][0]["name"], g["nets"][0]["port"]) for g in device_groups(ours)] == [
        (f"mlx5_bond_{r}", "1") for r in range(8)]  # one device per NIC, port 1


# --- dual-ToR ----------------------------------------------------------------------------------


@pytest.mark.parametrize("placement", ["rail", "rack"])
def test_dual_tor_nccl_devices_are_the_bonds(placement):
    spec = load_spec({"gpus": 1024, "dual_tor": True, "placement": placement})
    files = nccl_files(build_fabric(spec))
    text = xml_of(files)
    doc = read_nccl_topology(text)
    assert doc.notes == () and check_topology(text) == []
    nics, link_gbps = 8, 400 // 2  # 400G NICs, each a bond of two 200G links
    assert [(n["name"], n["port"], n["speed"], n["rail"]) for n in doc.iter("net")] == [
        (f"mlx5_bond_{r}", "1", str(2 * link_gbps * 1000), str(r)) for r in range(nics)]
    assert "its net is the RoCE LAG device mlx5_bond_r at the bond's 400G" in text
    # the same tree as without dual-ToR but for the devices' names
    plain = xml_of(nccl_files(build_fabric(load_spec({"gpus": 1024, "placement": placement}))))
    body = lambda t: [line for line in t.splitlines() if not line.startswith("<!--")]
    assert [line.replace("mlx5_bond_", "mlx5_") for line in body(text)] == body(plain)
    env = env_of(files)
    assert env["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_bond_{r}:1" for r in range(nics))
    assert env["NCCL_CROSS_NIC"] == ("0" if placement == "rail" else "1")
    env_text = files["nccl/hgx-h100-8nic.env"]
    assert "# Dual-ToR: each NIC is a bond, the RoCE LAG device mlx5_bond_<rail>" in env_text
    assert "over two 200G links, one to each leaf\n# of the NIC's leaf pair (an MCLAG pair)" in env_text
    assert ("on a rail-r leaf pair," if placement == "rail" else "on the same leaf pair,") in env_text


# --- the env file ------------------------------------------------------------------------------


def test_env_file_without_analysis():
    files = files_for()
    assert sorted(files) == ["nccl/hgx-h100-8nic-topo.xml", "nccl/hgx-h100-8nic.env"]
    env = env_of(files)
    assert env == {
        "NCCL_TOPO_FILE": "/etc/nccl/hgx-h100-8nic-topo.xml",
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1",
        "NCCL_CROSS_NIC": "0",
        "NCCL_IB_QPS_PER_CONNECTION": "1",
        "NCCL_IB_TC": str(QOS_PROFILES["nvidia"].roce_tos),  # the RoCE class the switches use
    }
    text = files["nccl/hgx-h100-8nic.env"]
    assert "# Queue pairs per connection: NCCL's default of 1, as no congestion analysis was given" in text
    assert "NCCL_SOCKET_IFNAME is not set" in text
    assert all(line.startswith("#") or line == "" or re.fullmatch(r"NCCL_[A-Z_]+=\S+", line)
               for line in text.splitlines())


def test_env_file_takes_qps_from_the_analysis():
    fabric = build_fabric(load_spec({"gpus": 64, "radix": 16}))
    analysis = analyze(fabric, AnalysisOptions(qps=4, sizes=(1 << 20,)))
    files = nccl_files(fabric, analysis=analysis)
    assert env_of(files)["NCCL_IB_QPS_PER_CONNECTION"] == "4"
    assert "from the congestion analysis of this design (4 queue pairs per connection, ecmp routing" in \
        files["nccl/hgx-h100-8nic.env"]
    many = nccl_files(fabric, analysis=analyze(fabric, AnalysisOptions(qps=200, sizes=(1 << 20,))))
    assert env_of(many)["NCCL_IB_QPS_PER_CONNECTION"] == "128"
    assert "NCCL takes at most 128" in many["nccl/hgx-h100-8nic.env"]


def test_env_file_follows_the_fabric_and_profile(tmp_path):
    infiniband = env_of(files_for(switch="ndr-64x400"))
    assert "NCCL_IB_TC" not in infiniband
    assert env_of(files_for(qos="sonic"))["NCCL_IB_TC"] == str(QOS_PROFILES["sonic"].roce_tos)
    assert env_of(files_for(placement="rack"))["NCCL_CROSS_NIC"] == "1"
    four = env_of(files_for(nics_per_node=4))
    assert four["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"
    assert four["NCCL_TOPO_FILE"] == "/etc/nccl/hgx-h100-4nic-topo.xml"
    fabric = build_fabric(load_spec({"gpus": 64}))
    moved = nccl_files(fabric, install_dir="/opt/site/nccl")
    assert env_of(moved)["NCCL_TOPO_FILE"] == "/opt/site/nccl/hgx-h100-8nic-topo.xml"
    with pytest.raises(ValueError, match="absolute path"):
        nccl_files(fabric, install_dir="etc/nccl")
    path = tmp_path / "site.yaml"
    path.write_text(SITE_PROFILE.replace("socket_ifname: null", "socket_ifname: =eth0"))
    pinned = nccl_files(build_fabric(load_spec({"gpus": 8, "gpus_per_node": 2})), str(path))
    assert env_of(pinned)["NCCL_SOCKET_IFNAME"] == "=eth0"
    assert sorted(pinned) == ["nccl/site-topo.xml", "nccl/site.env"]


def test_generic_profile_says_so():
    files = files_for(gpus_per_node=4, nics_per_node=8, gpus=64)
    assert sorted(files) == ["nccl/generic-4gpu-8nic-topo.xml", "nccl/generic-4gpu-8nic.env"]
    assert all("GENERIC PROFILE" in text for text in files.values())
    assert env_of(files)["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_{i}:1" for i in range(8))


def test_user_template_overrides_the_env_file(tmp_path):
    from topo.outputs.templating import template_environment

    (tmp_path / "nccl").mkdir()
    (tmp_path / "nccl" / "nccl.env.j2").write_text("NCCL_TOPO_FILE={{ nccl.topo_file }}\nNCCL_DEBUG=WARN\n")
    files = nccl_files(build_fabric(load_spec({"gpus": 64})), env=template_environment([tmp_path]))
    assert env_of(files) == {"NCCL_TOPO_FILE": "/etc/nccl/hgx-h100-8nic-topo.xml", "NCCL_DEBUG": "WARN"}


# --- server profiles ---------------------------------------------------------------------------


SITE_PROFILE = """\
name: site
description: two H100 and two NICs
socket_ifname: null
gpu: {sm: 90, gdr: 1, nvlink: 18, link_speed: 32.0 GT/s PCIe, link_width: 16}
nic: {speed_mbps: 400000, link_speed: 32.0 GT/s PCIe, link_width: 16}
switch: {link_speed: 32.0 GT/s PCIe, link_width: 16, vendor: 0xffff, device: 0xffff,
         subsystem_vendor: 0xffff, subsystem_device: 0xffff}
cpus:
  - numaid: 0
    affinity: 0000ffff
    arch: x86_64
    vendor: GenuineIntel
    familyid: 6
    modelid: 143
    switches:
      - busid: 0000:16:00.0
        gpus: [0000:1b:00.0]
        nics: [{busid: 0000:18:00.0, name: mlx5_4}]
      - busid: 0000:30:00.0
        gpus: [0000:33:00.0]
        nics: [{busid: 0000:31:00.0, name: mlx5_5, guid: "0x00000000000000aa"}]
"""


def test_user_profile_file(tmp_path):
    (tmp_path / "site.yaml").write_text(SITE_PROFILE)
    spec = load_spec({"gpus": 8, "gpus_per_node": 2, "server": "site.yaml"})
    profile = resolve_server(spec, base_dir=tmp_path)
    assert profile.name == "site" and profile.source == str(tmp_path / "site.yaml")
    assert [(n.name, n.rail, n.guid) for n in profile.nics] == [
        ("mlx5_4", 0, nic_guid("0000:18:00.0")), ("mlx5_5", 1, "0x00000000000000aa")]
    assert profile.cpus[0].affinity == "0000ffff"
    text = xml_of(nccl_files(build_fabric(spec), profile))
    assert check_topology(text) == []
    assert '<pci busid="0000:16:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16" ' \
           'vendor="0xffff" device="0xffff" subsystem_vendor="0xffff" subsystem_device="0xffff">' in text
    # the same schema as the shipped file: a one-entry "name: profile" mapping works too
    (tmp_path / "map.yaml").write_text("other:\n" + "".join(
        "  " + line + "\n" for line in SITE_PROFILE.splitlines() if not line.startswith("name:")))
    assert load_server_profile(tmp_path / "map.yaml").name == "other"


def lines_of(exc: pytest.ExceptionInfo) -> list[str]:
    return exc.value.lines


def test_a_server_too_large_for_one_nccl_file():
    fabric = build_fabric(load_spec({"gpus": 512, "gpus_per_node": 64, "radix": 128}))
    with pytest.raises(SpecError) as info:
        nccl_files(fabric)
    assert lines_of(info) == ["server=generic-64gpu-64nic: its NCCL topology file would hold 387 elements "
                              "(64 GPUs, 64 NICs), but NCCL's parser takes at most 255"]


def test_a_profile_given_as_an_object_is_checked_too():
    with pytest.raises(SpecError, match="server=hgx-h100-4nic has 8 GPUs and 4 NICs per node"):
        nccl_files(build_fabric(load_spec({"gpus": 64})), server_profiles()["hgx-h100-4nic"])


def test_shipped_profile_is_chosen_by_the_node_shape():
    assert resolve_server(load_spec({"gpus": 64})).name == "hgx-h100-8nic"
    assert resolve_server(load_spec({"gpus": 64, "nics_per_node": 4})).name == "hgx-h100-4nic"
    assert resolve_server(load_spec({"gpus": 64, "nic_gbps": 200, "port_gbps": 400})).name == \
        "generic-8gpu-8nic"
    assert resolve_server(load_spec({"gpus": 64, "gpus_per_node": 4})).generic


def test_error_for_profile_counts_that_do_not_match_the_spec():
    spec = load_spec({"gpus": 64, "nics_per_node": 4, "server": "hgx-h100-8nic"})
    with pytest.raises(SpecError) as info:
        resolve_server(spec)
    assert lines_of(info) == ["server=hgx-h100-8nic has 8 GPUs and 8 NICs per node, but gpus_per_node=8 and "
                              "nics_per_node=4"]


def test_error_for_nic_speed_that_does_not_match():
    spec = load_spec({"gpus": 64, "nic_gbps": 200, "port_gbps": 400, "server": "hgx-h100-8nic"})
    with pytest.raises(SpecError) as info:
        resolve_server(spec)
    assert lines_of(info) == ["server=hgx-h100-8nic: NIC speed 400,000 Mb/s does not match nic_gbps=200 "
                              "(200,000 Mb/s); NCCL takes the file's speed over what it detects"]


def test_error_for_unknown_profile_names_a_close_match():
    with pytest.raises(SpecError) as info:
        resolve_server(load_spec({"gpus": 64, "server": "hgx-h100-nic8"}))
    (line,) = lines_of(info)
    assert line.startswith("server: unknown server profile 'hgx-h100-nic8' (did you mean 'hgx-h100-8nic'?)")
    assert "known: dgx-b200, dgx-b300, gb200-nvl72, gb300-nvl72, hgx-h100-4nic, hgx-h100-8nic, hgx-h200-8nic" in line


def test_error_for_malformed_or_missing_profile_file(tmp_path):
    (tmp_path / "bad.yaml").write_text("cpus: [\n  - numaid: 0\n")
    with pytest.raises(SpecError) as info:
        resolve_server(load_spec({"gpus": 64, "server": "bad.yaml"}), base_dir=tmp_path)
    (line,) = lines_of(info)
    assert line.startswith(f"server: profile file {tmp_path / 'bad.yaml'}: malformed YAML at line 2, column 3")
    with pytest.raises(SpecError, match="cannot read it"):
        resolve_server(load_spec({"gpus": 64, "server": "absent.yaml"}), base_dir=tmp_path)


@pytest.mark.parametrize("change, message", [
    (("0000:1b:00.0]", "0000:1B:00.0]"), "gpus[0]: '0000:1B:00.0' is not a bus id as NCCL compares them"),
    (("0000:1b:00.0]", "00000000:1B:00.0]"), "write '0000:1b:00.0'"),
    (("gpus: [0000:33:00.0]", "gpus: [0000:1b:00.0]"), "bus id 0000:1b:00.0 is also"),
    (("link_speed: 32.0 GT/s PCIe, link_width: 16}", "link_speed: 32 GT/s PCIe/s, link_width: 16}"),
     "not in NCCL's link_speed dictionary"),
    (("affinity: 0000ffff", "affinity: 0-15"), "not a hex-word mask"),
    (("vendor: GenuineIntel", "vendor: Intel"), "cpus[0].vendor: expected one of GenuineIntel"),
    (("    modelid: 143\n", ""), "cpus[0].modelid: required on x86_64"),
    (("guid: \"0x00000000000000aa\"", "guid: \"" + nic_guid("0000:18:00.0") + "\""), "NCCL would take them for one NIC"),
    (("name: mlx5_5", "name: mlx5_4"), "mlx5_4 is also the name of"),
    (("        gpus: [0000:33:00.0]\n", "        gpus: []\n"), "switches[1].gpus: expected a list of bus ids"),
    (("sm: 90,", "sm: 90, smm: 1,"), "gpu: unknown key 'smm'"),
    (("nic: {speed_mbps: 400000, ", "nic: {"), "nics[0].speed_mbps: required"),
    (("- numaid: 0\n    affinity:", "- affinity:"), "cpus[0].numaid: required"),
])
def test_profile_errors_name_the_field(tmp_path, change, message):
    old, new = change
    assert old in SITE_PROFILE
    (tmp_path / "p.yaml").write_text(SITE_PROFILE.replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_server_profile(tmp_path / "p.yaml")
    assert any(message in line for line in lines_of(info)), lines_of(info)
    assert all(line.startswith("server profile 'site' (") for line in lines_of(info))


def test_profile_error_when_a_gpu_and_its_nic_are_on_different_switches(tmp_path):
    # 4 GPUs, 2 NICs: GPUs 0 and 1 (bus-id order) share rail 0's NIC, GPUs 2 and 3 rail 1's
    mixed = SITE_PROFILE.replace("gpus: [0000:1b:00.0]", "gpus: [0000:1b:00.0, 0000:33:00.0]").replace(
        "        gpus: [0000:33:00.0]\n", "        gpus: [0000:1c:00.0, 0000:34:00.0]\n")
    (tmp_path / "p.yaml").write_text(mixed)
    with pytest.raises(SpecError) as info:
        load_server_profile(tmp_path / "p.yaml")
    assert lines_of(info)[0] == (
        f"server profile 'site' ({tmp_path / 'p.yaml'}): cpus[0].switches[0]: holds GPU 0, GPU 2 and 1 NIC(s), "
        f"but in a 4-GPU 2-NIC server they use 2 NIC(s) (rail 0, 1); GPU 1, 3 use the same NIC and must "
        f"be under this switch too")


def test_shipped_profiles_are_checked_and_summarised():
    profiles = server_profiles()
    assert sorted(profiles) == ["dgx-b200", "dgx-b300", "gb200-nvl72", "gb300-nvl72", "hgx-h100-4nic", "hgx-h100-8nic",
                               "hgx-h200-8nic"]
    summary = profiles["hgx-h100-4nic"].to_dict()
    assert (summary["gpus"], summary["nics"], summary["nic_gbps"]) == (8, 4, 400)
    assert summary["pairing"][3] == {"gpu": 3, "gpu_busid": "0000:4d:00.0", "nics": ["mlx5_1"]}


# --- determinism -------------------------------------------------------------------------------


def test_files_are_deterministic():
    first = files_for()
    assert files_for() == first
    server_profiles.cache_clear()
    assert files_for() == first
    assert nic_guid("0000:18:00.0") == "0x2bde0d644047d15e"  # a pinned derivation
    assert 'guid="0x2bde0d644047d15e"' in xml_of(first)


@pytest.mark.parametrize("server, shape", [
    ("hgx-h200-8nic", {}),
    ("dgx-b200", {}),
    ("dgx-b300", {"nic_gbps": 800, "switch": "eth-51t-64x800"}),
    ("dgx-b300", {"nic_gbps": 800, "planes": 2, "switch": "eth-51t-128x400"}),
    ("gb200-nvl72", {"gpus_per_node": 4, "nics_per_node": 4}),
    ("gb300-nvl72", {"gpus_per_node": 4, "nics_per_node": 4, "nic_gbps": 800, "switch": "eth-51t-64x800"}),
])
def test_a_profile_of_this_generation_writes_a_file_its_checker_accepts(server, shape):
    spec = load_spec({"gpus": 1152 if server.endswith("nvl72") else 512, "server": server, **shape})
    profile = resolve_server(spec)
    files = nccl_files(build_fabric(spec))
    xml = files[f"nccl/{server}-topo.xml"]
    assert check_topology(xml) == []
    assert xml.count("<gpu ") == profile.gpu_count and xml.count("<net ") == spec.nic_ports
    env = files[f"nccl/{server}.env"]
    assert "mlx5_0" in env


@pytest.mark.parametrize("server, shape", [
    ("gb200-nvl72", {"gpus_per_node": 4, "nics_per_node": 4}),
    ("gb300-nvl72", {"gpus_per_node": 4, "nics_per_node": 4, "nic_gbps": 800, "switch": "eth-51t-64x800"}),
])
def test_a_rack_scale_profile_asks_for_multi_node_nvlink(server, shape):
    """An NVL72 tray's env file sets NCCL_MNNVL_ENABLE=1 and NCCL_NVLS_ENABLE=1 (the names and values
    of NCCL's environment variables page), each after a comment saying why; nothing else changes."""
    files = nccl_files(build_fabric(load_spec({"gpus": 1152, "server": server, **shape})))
    text = files[f"nccl/{server}.env"]
    env = env_of(files)
    assert env["NCCL_MNNVL_ENABLE"] == "1" and env["NCCL_NVLS_ENABLE"] == "1"
    lines = text.splitlines()
    for key in ("NCCL_MNNVL_ENABLE=1", "NCCL_NVLS_ENABLE=1"):
        assert lines[lines.index(key) - 1].startswith("# ")
    assert "NVLink domain of 18 trays\n# (72 GPUs, one rack)" in text
    assert all(line.startswith("#") or line == "" or re.fullmatch(r"NCCL_[A-Z_]+=\S+", line) for line in lines)


@pytest.mark.parametrize("server", ["hgx-h100-8nic", "hgx-h200-8nic", "dgx-b200"])
def test_a_server_whose_nvlink_domain_is_the_server_has_no_multi_node_nvlink(server):
    env = env_of(nccl_files(build_fabric(load_spec({"gpus": 512, "server": server}))))
    assert "NCCL_MNNVL_ENABLE" not in env and "NCCL_NVLS_ENABLE" not in env
