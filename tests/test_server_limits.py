"""Server profiles against hostile or impossible input: every number is bounded before it is used
(CPU numbers, affinity masks, entry counts), error lines quote only a short prefix of a value, a
YAML alias bomb stays small, NCCL's element budget counts what NCCL adds to the file, and every
NIC gets a PCIe link that carries its speed (docs/nccl.md, "Limits of a profile")."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from topo import SpecError, build_fabric, load_spec
from topo.cli import main
from topo.errors import QUOTE_LIMIT, quote
from topo.outputs.nccl import detected_elements, max_detected_nvlinks, nccl_files, topology_element
from topo.outputs.nccl_xml import TOPO_XML_MAX_NODES, read_nccl_topology
from topo.hardware.catalog import server_profiles
from topo.hardware.pcie import pcie_link_for, pcie_mbps
from topo.hardware.profiles import (
    MAX_CPULIST_CHARS,
    MAX_ENTRIES,
    MAX_MASK_CHARS,
    MAX_PROBLEMS,
    generic_profile,
    load_server_profile,
    parse_cpulist,
    read_profile_text,
)

from .conftest import SHARED_REFERENCE

#: A hostile input must be refused within this many seconds.
QUICK_S = 5.0
#: An error line with a quoted value stays shorter than this (the value itself at most QUOTE_LIMIT).
SHORT_LINE = 400

SITE = """\
name: site
description: two H100 and two NICs
gpu: {sm: 90, gdr: 1, nvlink: 18, link_speed: 32.0 GT/s PCIe, link_width: 16}
nic: {speed_mbps: 400000, link_speed: 32.0 GT/s PCIe, link_width: 16}
switch: {link_speed: 32.0 GT/s PCIe, link_width: 16, vendor: 0xffff, device: 0xffff,
         subsystem_vendor: 0xffff, subsystem_device: 0xffff}
cpus:
  - numaid: 0
    cpulist: 0-15
    arch: x86_64
    vendor: GenuineIntel
    familyid: 6
    modelid: 143
    switches:
      - busid: 0000:16:00.0
        gpus: [0000:1b:00.0]
        nics: [0000:18:00.0]
      - busid: 0000:30:00.0
        gpus: [0000:33:00.0]
        nics: [0000:31:00.0]
"""
#: An alias bomb (billion laughs): nine levels of ten, 10^9 leaves if expanded, under a key topo
#: reports as unknown; ``*i`` then puts it in the field under test.
BOMB = "".join(
    f"  - &{name} [{','.join(['*' + prev] * 10) if prev else ','.join(['lol'] * 10)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi"))


def profile(**changes: str) -> str:
    """SITE with whole lines replaced: ``changes`` maps the start of a line to its new text ("" drops it)."""
    lines = SITE.splitlines()
    for start, new in changes.items():
        (i,) = [k for k, line in enumerate(lines) if line is not None and line.lstrip(" -").startswith(start)][:1]
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip(" -"))]
        lines[i] = indent + new if new else None
    return "\n".join(line for line in lines if line is not None) + "\n"


def with_bomb(text: str) -> str:
    """The profile with the bomb's anchors defined first (under an unknown key)."""
    return "laughs:\n" + BOMB + text


def build(tmp_path: Path, text: str, *args: object) -> tuple[object, float]:
    """``topo build`` of a 2-GPU-per-node fabric with ``text`` as its server profile; (result, seconds)."""
    path = tmp_path / "site.yaml"
    path.write_text(text)
    start = time.perf_counter()
    result = CliRunner().invoke(
        main, ["build", "--gpus", "8", "--gpus-per-node", "2", "--server", str(path), "-o", str(tmp_path / "out"),
               "-q", *map(str, args)], prog_name="topo", catch_exceptions=False)
    return result, time.perf_counter() - start


def refused(result, seconds: float) -> list[str]:
    """The error lines of a refused build, after checking it was refused quickly and cleanly."""
    assert seconds < QUICK_S, f"took {seconds:.1f} s"
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith("Error: ") for line in lines), lines
    assert len(lines) <= MAX_PROBLEMS
    return [line[len("Error: "):] for line in lines]


def test_the_site_profile_builds(tmp_path):
    result, _ = build(tmp_path, SITE)
    assert result.exit_code == 0, result.output
    xml = (tmp_path / "out" / "nccl" / "site-topo.xml").read_text()
    assert 'affinity="0000ffff"' in xml


# --- 1. every number bounded before it is used ------------------------------------------------


@pytest.mark.parametrize("cpulist, shown", [
    ("'4000000000'", "CPU 4000000000 is 8192 or more"),  # was: a 500 MB mask, spinning
    ("'0-300000000'", "CPU 300000000 is 8192 or more"),  # was: MemoryError
    ("4000000000", "CPU 4000000000 is 8192 or more"),  # a YAML number
    ("'8192'", "CPU 8192 is 8192 or more"),
    ("'0-8192'", "CPU 8192 is 8192 or more"),
    ("'" + "9" * 5000 + "'", "CPU 99999999999999999... is 8192 or more"),
], ids=["4000000000", "0-300000000", "yaml-number", "8192", "0-8192", "5000-digits"])
def test_cpu_numbers_at_or_above_8192_are_refused_before_a_range_is_expanded(tmp_path, cpulist, shown):
    lines = refused(*build(tmp_path, profile(cpulist=f"cpulist: {cpulist}")))
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith(f"server profile 'site' ({tmp_path / 'site.yaml'}): cpus[0].cpulist: ")
    assert f"{shown}; Linux numbers at most 8192 CPUs (0 to 8191, CONFIG_NR_CPUS)" in line
    assert len(line) < SHORT_LINE


def test_cpulists_up_to_linux_limit_are_read():
    assert MAX_CPULIST_CHARS == 39_849  # "0,1,2,...,8191"
    p = read_profile_text(profile(cpulist="cpulist: 0-8191"), "site.yaml", "site")
    assert p.cpus[0].affinity == ",".join(["ffffffff"] * 256)  # 256 words: 8192 CPUs
    p = read_profile_text(profile(cpulist="cpulist: '" + ",".join(map(str, range(8192))) + "'"), "site.yaml", "site")
    assert p.cpus[0].affinity == ",".join(["ffffffff"] * 256)
    assert sorted(parse_cpulist("8191")) == [8191]


@pytest.mark.parametrize("cpulist, message", [
    ("'" + "0," * 25_000 + "0'", "50,001 characters; a list of CPUs below 8192 that names each once has at most 39,849"),
    ("'0-8191,0-8191'", "names more than 8192 CPUs, more than Linux has (CONFIG_NR_CPUS)"),
    ("'" + ",".join(["0-8191"] * 5000) + "'", "names more than 8192 CPUs"),  # stops at the second range
    ("'5-3'", "range 5-3 runs backwards"),
    ("[0, 1]", "expected numbers and ranges such as 0-55,112-167"),
], ids=["too-long", "8192-twice", "5000-ranges", "backwards", "a-list"])
def test_cpulists_too_long_or_naming_too_many_cpus(tmp_path, cpulist, message):
    (line,) = refused(*build(tmp_path, profile(cpulist=f"cpulist: {cpulist}")))
    assert "cpus[0].cpulist: " in line and message in line, line
    assert len(line) < SHORT_LINE


@pytest.mark.parametrize("words, ok", [(256, True), (257, False), (100_000, False)])
def test_affinity_masks_are_at_most_256_words_checked_by_length_first(tmp_path, words, ok):
    mask = ",".join(["0000ffff"] + ["00000000"] * (words - 1))
    text = profile(cpulist=f"affinity: '{mask}'")
    if ok:
        assert read_profile_text(text, "site.yaml", "site").cpus[0].affinity == mask
        return
    (line,) = refused(*build(tmp_path, text))
    assert "cpus[0].affinity: '0000ffff,00000000," in line
    assert (f"is {len(mask):,} characters long; a mask has at most 256 hex words (8192 CPUs, CONFIG_NR_CPUS), "
            f"{MAX_MASK_CHARS:,} characters") in line
    assert len(line) < SHORT_LINE


def test_a_thousand_aliases_of_one_numa_node_stay_quick(tmp_path):
    # every NUMA node the same 8192-CPU mapping: 1,024 overlapping nodes, thousands of problems
    node = ("{numaid: 0, cpulist: '" + ",".join(map(str, range(8192))) + "', arch: x86_64, vendor: GenuineIntel, "
            "familyid: 6, modelid: 143, switches: [{busid: 0000:16:00.0, gpus: [0000:1b:00.0], "
            "nics: [0000:18:00.0]}]}")
    text = SITE.split("cpus:")[0].replace("description: two H100 and two NICs\n", "") + \
        f"description: &node {node}\ncpus: [{', '.join(['*node'] * (MAX_ENTRIES - 1))}]\n"
    lines = refused(*build(tmp_path, text))
    assert len(lines) == MAX_PROBLEMS and lines[-1].endswith("more problems")  # 6,000 problems, 100 shown
    assert int(lines[-1].split(": and ")[1].split()[0].replace(",", "")) > 5000
    assert any("cpus[1].switches[0].busid: bus id 0000:16:00.0 is also cpus[0].switches[0].busid" in line
               for line in lines)


@pytest.mark.parametrize("where, what, why", [
    ("switches", "PCIe switches", "one NCCL topology file holds 255 elements"),
    ("cpus", "NUMA nodes", "Linux's MAX_NUMNODES"),
])
def test_entry_counts_are_bounded_before_they_are_read(tmp_path, where, what, why):
    switch = "{busid: 0000:16:00.0, gpus: [0000:1b:00.0], nics: [0000:18:00.0]}"
    node = "{numaid: 0, cpulist: 0, arch: x86_64, vendor: GenuineIntel, familyid: 6, modelid: 143, switches: [*s]}"
    many = ", ".join(["*s" if where == "switches" else "*c"] * (MAX_ENTRIES + 1))
    text = ("name: site\nsocket_ifname: null\nlaughs:\n  - &s " + switch + "\n  - &c " + node + "\n"
            + SITE.split("cpus:")[0].split("\n", 2)[2])
    if where == "switches":
        text += f"cpus: [{{numaid: 0, cpulist: 0, arch: x86_64, vendor: GenuineIntel, familyid: 6, modelid: 143, " \
                f"switches: [{many}]}}]\n"
    else:
        text += f"cpus: [{many}]\n"
    lines = refused(*build(tmp_path, text))
    field = "cpus[0].switches" if where == "switches" else "cpus"
    assert lines[-1].endswith(f"{field}: 1,025 {what}; a server profile holds at most 1,024 ({why})"), lines


def test_aliased_gpu_lists_cannot_multiply_the_work(tmp_path):
    # 1,000 switches that each alias one list of 1,000 GPUs: 10^6 rows if read; refused at 1,024
    gpus = "[" + ", ".join(f"0000:{b:02x}:{d:02x}.0" for b in range(40) for d in range(25)) + "]"
    switch = "{busid: 0000:ff:00.0, gpus: *g, nics: [0000:18:00.0]}"
    text = ("name: site\nlaughs:\n  - &g " + gpus + "\n  - &s " + switch + "\n"
            + SITE.split("cpus:")[0].split("\n", 2)[2]
            + "cpus: [{numaid: 0, cpulist: 0, arch: x86_64, vendor: GenuineIntel, familyid: 6, modelid: 143, "
              "switches: [" + ", ".join(["*s"] * 1000) + "]}]\n")
    lines = refused(*build(tmp_path, text))
    assert lines[-1].endswith("cpus[0].switches[1].gpus: 2,000 GPUs in the profile by here; a server profile "
                              "holds at most 1,024 (one NCCL topology file holds 255 elements)"), lines[-1]


@pytest.mark.parametrize("change, field", [
    ({"gpu:": "gpu: {sm: 90, nvlink: 1" + "0" * 4000 + ", link_speed: 32.0 GT/s PCIe, link_width: 16}"},
     "gpus[0].nvlink: must be from 0 to 64, got 1000"),
    ({"gpus: [0000:1b": "gpus: [{busid: 0000:1b:00.0, dev: 1" + "0" * 30 + "}]"},
     "switches[0].gpus[0].dev: must be from 0 to 1, got 1000"),
    ({"nic:": "nic: {speed_mbps: 400000, port: 1" + "0" * 50 + ", link_speed: 32.0 GT/s PCIe, link_width: 16}"},
     "nics[0].port: must be from 1 to 255, got 1000"),
    ({"nic:": "nic: {speed_mbps: 400000, link_speed: 32.0 GT/s PCIe, link_width: 1" + "0" * 50 + "}"},
     "nics[0].link_width: must be from 1 to 32, got 1000"),
    ({"busid: 0000:16": "busid: 0000:16:00.0\n        vendor: '0x" + "f" * 5000 + "'"},
     "switches[0].vendor: expected a hex number of at most 4 digits such as '0x0001', got '0xffff"),
    ({"nics: [0000:18": "nics: [{busid: 0000:18:00.0, guid: '0x" + "a" * 5000 + "'}]"},
     "nics[0].guid: expected a hex number of at most 16 digits"),
    ({"numaid:": "numaid: 1" + "0" * 4000}, "cpus[0].numaid: must be from -1 to 4095, got 1000"),
], ids=["nvlink", "dev", "port", "link_width", "vendor", "guid", "numaid"])
def test_other_numbers_are_ranged_and_shown_short(tmp_path, change, field):
    lines = refused(*build(tmp_path, profile(**change)))
    assert any(field in line for line in lines), lines
    assert all(len(line) < SHORT_LINE for line in lines), max(lines, key=len)


def test_a_number_too_long_for_python_is_a_one_line_error(tmp_path):
    (line,) = refused(*build(tmp_path, profile(numaid="numaid: 1" + "0" * 5000)))
    assert line == f"server: profile file {tmp_path / 'site.yaml'}: malformed YAML: a number with more than 4,300 digits"


# --- 2. error lines quote a short prefix; alias bombs stay small --------------------------------


def test_error_lines_quote_at_most_a_short_prefix(tmp_path):
    (line,) = refused(*build(tmp_path, profile(description="description: " + "x" * 100_000)))
    value = line.split("description: expected one line of text, got ", 1)[1]
    assert value == quote("x" * 100_000) and value.startswith("'xxxxxxxx") and "..." in value
    assert len(value) <= QUOTE_LIMIT


@pytest.mark.parametrize("change", [
    {"description:": "description: *i"},
    {"name:": "name: *i"},
    {"cpulist:": "cpulist: *i"},
    {"cpulist:": "affinity: *i"},
    {"arch:": "arch: *i"},
    {"vendor:": "vendor: *i"},
    {"numaid:": "numaid: *i"},
    {"gpus: [0000:1b": "gpus: *i"},
    {"gpus: [0000:1b": "gpus: [*i]"},
    {"nics: [0000:18": "nics: [{busid: 0000:18:00.0, name: *i, guid: *i, class: *i}]"},
    {"switches:": "switches: *i", "busid: 0000:16": "", "gpus: [0000:1b": "",
     "nics: [0000:18": "", "busid: 0000:30": "", "gpus: [0000:33": "",
     "nics: [0000:31": ""},
    {"gpu:": "gpu: {sm: *i, gdr: *i, nvlink: *i, link_speed: *i, link_width: *i}"},
], ids=["description", "name", "cpulist", "affinity", "arch", "vendor", "numaid", "gpus", "gpu-busid",
        "nic-name-guid-class", "switches", "gpu-defaults"])
def test_a_yaml_alias_bomb_gives_a_short_error_quickly_in_bounded_memory(tmp_path, change):
    text = with_bomb(profile(**change))
    tracemalloc.start()
    try:
        result, seconds = build(tmp_path, text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    lines = refused(result, seconds * 0.5)  # tracemalloc slows Python down about twice
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MB"
    assert all(len(line) < SHORT_LINE for line in lines), max(lines, key=len)
    assert any("laughs" in line for line in lines)  # the unknown key that holds the anchors
    assert any("..." in line for line in lines), lines  # the bomb is shown cut


def test_a_bomb_as_the_whole_profile_name_map(tmp_path):
    # a file of several top-level entries names them, cut, without expanding any
    text = "laughs:\n" + BOMB + "other: *i\nthird: *i\n"
    (line,) = refused(*build(tmp_path, text))
    assert line == f"server: profile file {tmp_path / 'site.yaml'}: holds 3 profiles (laughs, other, third); " \
                   f"a profile file describes one server type"


@pytest.mark.parametrize("server, start", [
    ("x" * 10_000, f"server: unknown server profile {quote('x' * 10_000)}; known:"),
    ("x" * 10_000 + ".yaml", "server: profile file "),
], ids=["name", "path"])
def test_a_server_value_that_is_far_too_long(tmp_path, server, start):
    start_t = time.perf_counter()
    result = CliRunner().invoke(main, ["build", "--gpus", "8", "--server", server, "-o", str(tmp_path / "o"), "-q"],
                                prog_name="topo", catch_exceptions=False)
    (line,) = refused(result, time.perf_counter() - start_t)
    assert line.startswith(start) and len(line) < SHORT_LINE, line


@pytest.mark.parametrize("server, why", [
    ("/dev/zero", "/dev/zero is not a regular file (a character device)"),
    ("<tmp>", "<tmp> is not a regular file (a folder)"),
], ids=["dev-zero", "folder"])
def test_a_profile_file_that_is_no_file_is_never_read(tmp_path, server, why):
    server, why = server.replace("<tmp>", str(tmp_path)), why.replace("<tmp>", str(tmp_path))
    start = time.perf_counter()
    result = CliRunner().invoke(main, ["build", "--gpus", "8", "--server", server, "-o", str(tmp_path / "o"), "-q"],
                                prog_name="topo", catch_exceptions=False)
    assert refused(result, time.perf_counter() - start) == [f"server: profile file {why}"]


def test_ordinary_error_lines_are_unchanged(tmp_path):
    # quote() shows short values as repr() did: the error goldens keep their text
    result = CliRunner().invoke(main, ["build", "--gpus", "1024", "--server", "hgx-h100-8nc", "-o", str(tmp_path / "o")],
                                prog_name="topo", catch_exceptions=False)
    assert result.stderr == ("Error: server: unknown server profile 'hgx-h100-8nc' (did you mean 'hgx-h100-8nic'?); "
                             "known: dgx-b200, dgx-b300, gb200-nvl72, gb300-nvl72, hgx-h100-4nic, hgx-h100-8nic, hgx-h200-8nic, or the path of a YAML profile (docs/nccl.md)\n")
    lines = refused(*build(tmp_path, profile(**{"gpus: [0000:1b": "gpus: [0000:1B:00.0]"})))
    assert lines == [f"server profile 'site' ({tmp_path / 'site.yaml'}): cpus[0].switches[0].gpus[0]: '0000:1B:00.0' "
                     f"is not a bus id as NCCL compares them: dddd:bb:dd.f in lower-case hex, e.g. '0000:1b:00.0'; "
                     f"write '0000:1b:00.0'"]


# --- 3a. NCCL's element budget, with what NCCL adds ----------------------------------------------


def _counts(p):
    written = sum(1 for _ in topology_element(p).iter())
    return written, written + sum(detected_elements(p))


@pytest.mark.parametrize("gpus, nics, written, with_nccl", [
    (8, 8, 51, 195), (8, 4, 35, 179), (4, 8, 39, 111), (1, 1, 8, 26), (10, 10, 63, 243),
])
def test_generic_profiles_within_the_budget_with_what_nccl_adds(gpus, nics, written, with_nccl):
    p = generic_profile(gpus, nics, 400)
    assert _counts(p) == (written, with_nccl)
    assert detected_elements(p) == (18 * gpus, 0)  # no sm, no NVLinks in the file: up to 18 per GPU
    fabric = build_fabric(load_spec({"gpus": 16 * gpus, "gpus_per_node": gpus, "nics_per_node": nics}))
    files = nccl_files(fabric, p)
    assert read_nccl_topology(files[f"nccl/{p.name}-topo.xml"]).elements == written


def test_a_generic_16_gpu_server_is_refused_for_what_nccl_would_add(tmp_path):
    assert _counts(generic_profile(16, 16, 400)) == (99, 387)
    start = time.perf_counter()
    result = CliRunner().invoke(main, ["build", "--gpus", "256", "--gpus-per-node", "16", "-o", str(tmp_path / "o"),
                                       "-q"], prog_name="topo", catch_exceptions=False)
    assert refused(result, time.perf_counter() - start) == [
        "server=generic-16gpu-16nic: NCCL would hold up to 387 elements for it (16 GPUs, 16 NICs): the file's 99 "
        "and 288 <nvlink> for the 16 GPUs whose NVLinks it detects (up to 18 each), but NCCL's buffer takes at "
        "most 255; describe the server in a profile file that gives each GPU's sm and nvlink count "
        "(--server FILE, docs/nccl.md)"]
    assert not (tmp_path / "o").exists()


def test_the_same_server_with_nvlinks_in_its_profile_fits(tmp_path):
    # 16 GPUs whose NVLinks the file gives: NCCL adds none, 99 + 16 <nvlink> elements
    g = generic_profile(16, 16, 400)
    lines = ["name: big", "gpu: {sm: 90, nvlink: 18, link_speed: 32.0 GT/s PCIe, link_width: 16}",
             "nic: {speed_mbps: 400000, link_speed: 32.0 GT/s PCIe, link_width: 16}",
             "switch: {link_speed: 32.0 GT/s PCIe, link_width: 16, vendor: 0xffff, device: 0xffff, "
             "subsystem_vendor: 0xffff, subsystem_device: 0xffff}", "cpus:"]
    for cpu in g.cpus:
        lines += [f"  - {{numaid: {cpu.numaid}, affinity: '{cpu.affinity}', arch: x86_64, vendor: GenuineIntel, "
                  f"familyid: 6, modelid: 143, switches: ["
                  + ", ".join(f"{{busid: {sw.busid}, gpus: [{sw.gpus[0].busid}], nics: [{sw.nics[0].busid}]}}"
                              for sw in cpu.switches) + "]}"]
    (tmp_path / "big.yaml").write_text("\n".join(lines) + "\n")
    p = load_server_profile(tmp_path / "big.yaml")
    assert _counts(p) == (115, 115)
    files = nccl_files(build_fabric(load_spec({"gpus": 256, "gpus_per_node": 16})), p)
    assert read_nccl_topology(files["nccl/big-topo.xml"]).elements == 115


def test_what_nccl_adds_depends_on_sm_nvlinks_and_grace():
    assert [max_detected_nvlinks(sm) for sm in (None, 52, 60, 70, 80, 86, 90, 100)] == [18, 0, 4, 6, 12, 12, 18, 18]
    assert detected_elements(server_profiles()["hgx-h100-8nic"]) == (0, 0)  # NVLinks given: detection skipped
    assert _counts(server_profiles()["hgx-h100-8nic"]) == (59, 59)
    assert _counts(server_profiles()["hgx-h100-4nic"]) == (43, 43)
    a100 = read_profile_text(profile(**{"gpu:": "gpu: {sm: 80, link_speed: 32.0 GT/s PCIe, link_width: 16}"}),
                             "a.yaml", "site")
    assert detected_elements(a100) == (24, 0)  # 12 links each, none in the file
    grace = read_profile_text(profile(arch="arch: arm64"), "g.yaml", "site")
    assert detected_elements(grace) == (0, 2)  # NVLinks given, but a <c2c> per GPU on Grace


NCCL_REF = SHARED_REFERENCE / "nccl"


@pytest.mark.skipif(not NCCL_REF.is_dir(), reason=f"the published NCCL files are not here ({NCCL_REF})")
@pytest.mark.parametrize("dump, sm, per_gpu", [
    ("oracle-quickstart_oci-hpc/samples/gpu/H100-topology.xml", 90, 4),  # 4 NVSwitches: 5 + 5 + 4 + 4
    ("oracle-quickstart_oci-hpc-oke/manifests/topology/BM.GPU4.8.xml", 80, 6),  # A100: 6 NVSwitches
])
def test_nccl_dumps_hold_one_nvlink_per_nvswitch_within_the_budget(dump, sm, per_gpu):
    path = NCCL_REF / dump
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    doc = read_nccl_topology(path.read_text())
    gpus = list(doc.iter("gpu"))
    assert gpus and all(g["sm"] == str(sm) for g in gpus)
    assert {sum(1 for c in g.children if c.name == "nvlink") for g in gpus} == {per_gpu}
    assert per_gpu <= max_detected_nvlinks(sm)
    assert all(e.name != "pci" or e.get("class") != "0x068000" for e in doc.iter())  # no NVSwitch elements
    assert doc.elements < TOPO_XML_MAX_NODES


# --- 3b. PCIe links that carry the NIC -----------------------------------------------------------


def test_pcie_data_rates():
    assert [pcie_mbps(s, 16) for s in ("8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe")] == \
        [126_030, 252_061, 504_123, 944_000]
    assert pcie_mbps("2.5 GT/s PCIe", 16) == 32_000 and pcie_mbps("5 GT/s", 16) == 64_000  # 8b/10b
    assert pcie_mbps("32 GT/s", 8) == 252_061 and pcie_mbps("64.0 GT/s PCIe", 32) == 1_888_000


@pytest.mark.parametrize("gbps, link", [
    (25, ("8.0 GT/s PCIe", 16)), (100, ("8.0 GT/s PCIe", 16)), (200, ("16.0 GT/s PCIe", 16)),
    (400, ("32.0 GT/s PCIe", 16)), (800, ("64.0 GT/s PCIe", 16)), (1600, ("64.0 GT/s PCIe", 32)),
])
def test_generic_profiles_get_the_lowest_pcie_generation_that_carries_the_nic(gbps, link):
    assert pcie_link_for(gbps * 1000) == link
    p = generic_profile(8, 8, gbps)
    for element in [*p.gpus, *p.nics, *p.switches]:
        assert (element.link_speed, element.link_width) == link
        assert pcie_mbps(element.link_speed, element.link_width) >= gbps * 1000


def test_an_800g_generic_build_writes_pcie_gen6(tmp_path):
    start = time.perf_counter()
    result = CliRunner().invoke(main, ["build", "--gpus", "64", "--nic-gbps", "800", "--switch", "xdr-144x800",
                                       "-o", str(tmp_path / "o"), "-q"], prog_name="topo", catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert time.perf_counter() - start < 60
    xml = (tmp_path / "o" / "nccl" / "generic-8gpu-8nic-topo.xml").read_text()
    assert xml.count('link_speed="64.0 GT/s PCIe" link_width="16"') == 8 * 3  # switch, GPU, NIC
    assert "32.0 GT/s" not in xml and 'speed="800000"' in xml


def test_a_nic_faster_than_any_pcie_link_has_no_generic_profile():
    with pytest.raises(SpecError) as info:
        generic_profile(8, 8, 3200)
    assert info.value.lines == [
        "server: no PCIe link NCCL knows carries a 3,200 Gb/s NIC (nic_gbps=3200): the fastest, 64.0 GT/s PCIe "
        "x32, carries 1,888 Gb/s, so topo cannot write an NCCL topology file for it"]


@pytest.mark.parametrize("nic, message", [
    ("nic: {speed_mbps: 400000, link_speed: 16.0 GT/s PCIe, link_width: 16}",
     "16.0 GT/s PCIe at link_width 16 carries 252,061 Mb/s, less than speed_mbps 400,000; at link_width 16 "
     "it needs 32.0 GT/s PCIe (504,123 Mb/s), or lower nic_gbps to what the link carries"),
    ("nic: {speed_mbps: 400000, link_speed: 32.0 GT/s PCIe, link_width: 8}",
     "32.0 GT/s PCIe at link_width 8 carries 252,061 Mb/s, less than speed_mbps 400,000; at link_width 8 "
     "it needs 64.0 GT/s PCIe (472,000 Mb/s), or lower nic_gbps to what the link carries"),
    ("nic: {speed_mbps: 400000, link_speed: 8 GT/s, link_width: 4}",
     "8 GT/s at link_width 4 carries 31,507 Mb/s, less than speed_mbps 400,000; no link_speed carries it at "
     "link_width 4, or lower nic_gbps to what the link carries"),
])
def test_a_user_profile_whose_nic_link_cannot_carry_the_nic_is_refused(tmp_path, nic, message):
    lines = refused(*build(tmp_path, profile(nic=nic)))
    where = f"server profile 'site' ({tmp_path / 'site.yaml'}): cpus[0].switches"
    assert lines == [f"{where}[0].nics[0].link_speed: {message}", f"{where}[1].nics[0].link_speed: {message}"]


def test_a_nic_link_that_just_carries_the_nic_is_accepted():
    p = read_profile_text(profile(nic="nic: {speed_mbps: 800000, link_speed: 64.0 GT/s PCIe, link_width: 16}"),
                          "s.yaml", "site")
    assert {(n.link_speed, n.link_width) for n in p.nics} == {("64.0 GT/s PCIe", 16)}
