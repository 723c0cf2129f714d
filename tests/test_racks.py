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


# --- racks and NVLink domains ----------------------------------------------------------------------


def _summary(gpus, spare=0, server="gb300-nvl72"):
    from topo import build_fabric, summarize

    fields = {"gpus": gpus, "server": server, "switch": "eth-51t-64x800", "spare_trays": spare}
    return summarize(build_fabric(load_spec(fields))).to_dict()


@pytest.mark.parametrize("gpus, spare, racks, installed, last", [
    (72, 0, 1, 18, 18), (576, 0, 8, 144, 18), (1152, 0, 16, 288, 18),
    (72, 2, 2, 36, 2), (576, 2, 9, 162, 16), (1152, 2, 18, 324, 16),
])
def test_gb300_racks_domains_trays_and_nics(gpus, spare, racks, installed, last):
    s = _summary(gpus, spare)
    assert (s["racks"], s["nvlink_domains"]) == (racks, racks)
    r = s["rack"]
    assert (r["trays_per_rack"], r["gpus_per_tray"], r["spare_trays"]) == (18, 4, spare)
    assert (r["gpus_per_rack"], r["trays_in_use"], r["trays_installed"], r["last_rack_trays"]) == \
        ((18 - spare) * 4, gpus // 4, installed, last)
    assert (s["nodes"], s["nics_per_node"], s["nic_gbps"], s["links"]["node-leaf"]) == (gpus // 4, 4, 800, gpus)


def test_more_spares_never_fewer_racks():
    racks = [_summary(1152, spare)["racks"] for spare in range(0, 18, 4)]
    assert racks == sorted(racks) and racks[0] == 16 and racks[-1] == 1152 // 8


def test_a_server_without_racks_of_trays_has_no_rack_keys():
    from topo import build_fabric, summarize

    for fields in ({"gpus": 1024}, {"gpus": 1024, "server": "dgx-b200"}, {"gpus": 1024, "server": "hgx-h100-4nic"}):
        assert not {"racks", "nvlink_domains", "rack"} & set(summarize(build_fabric(load_spec(fields))).to_dict())
    assert "spare_trays" not in load_spec({"gpus": 1024}).to_dict()
    assert load_spec({"gpus": 1152, "server": "gb300-nvl72", "switch": "eth-51t-64x800",
                      "spare_trays": 2}).to_dict()["spare_trays"] == 2


@pytest.mark.parametrize("fields, message", [
    ({"server": "hgx-h100-8nic", "spare_trays": 2},
     "spare_trays=2: server=hgx-h100-8nic has an NVLink domain of 8 GPUs in one server of 8; spare trays are kept "
     "by a rack whose NVLink domain spans several trays (gb200-nvl72, gb300-nvl72)"),
    ({"server": "dgx-b300", "spare_trays": 1, "planes": 2},
     "spare_trays=1: server=dgx-b300 has an NVLink domain of 8 GPUs in one server of 8; spare trays are kept "
     "by a rack whose NVLink domain spans several trays (gb200-nvl72, gb300-nvl72)"),
    ({"server": "gb200-nvl72", "spare_trays": 18},
     "spare_trays=18 leaves no tray of a rack in the job: server=gb200-nvl72's rack (NVLink domain) has 18 trays "
     "of 4 GPUs, so at most 17 spare"),
])
def test_spare_trays_that_do_not_fit_the_profile_are_one_error(fields, message):
    from topo.hardware.catalog import resolve_server

    with pytest.raises(SpecError) as exc:
        resolve_server(load_spec({"gpus": 1152, **fields}))
    assert exc.value.problems == [message]


def test_spare_trays_is_bounded_in_the_spec():
    with pytest.raises(SpecError, match=r"spare_trays: must be from 0 to 64 \(trays a rack keeps out of the job\), got -1"):
        load_spec({"gpus": 72, "server": "gb300-nvl72", "spare_trays": -1})


def test_the_build_prints_and_writes_the_racks(tmp_path):
    import json

    from .test_cli import run

    out = tmp_path / "out"
    result = run("build", "--gpus", "72", "--server", "gb300-nvl72", "--switch", "eth-51t-64x800",
                 "--spare-trays", "2", "--no-analysis", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert ("racks: 2 of gb300-nvl72 (2 NVLink domains of 72 GPUs), 18 trays of 4 GPUs each: 16 in the job "
            "(64 GPUs), 2 spare; 36 trays installed; the last rack has 2 of its 16 trays in the job") in result.stdout
    assert "warning[partial-rack]: the last rack has 2 of its 16 trays in the job" in result.stderr
    data = json.loads((out / "summary.json").read_text())
    assert (data["racks"], data["nvlink_domains"]) == (2, 2)
    assert "partial-rack" in [w["code"] for w in data["warnings"]]


# --- the whole cluster's power ---------------------------------------------------------------------


@pytest.mark.parametrize("gpus, spare, racks", [(72, 0, 1), (576, 0, 8), (1152, 0, 16), (72, 2, 2), (576, 2, 9),
                                                (1152, 2, 18)])
def test_gb300_compute_power_is_its_racks(gpus, spare, racks):
    s = _summary(gpus, spare)
    p = s["power"]
    assert p["compute_w"] == racks * 140_000
    assert p["network_w"] > 0
    assert p["total_w"] == p["compute_w"] + p["network_w"]
    assert p["compute_of"] == {"profile": "gb300-nvl72", "unit": "rack", "units": racks, "unit_w": 140_000}


@pytest.mark.parametrize("server, each", [("dgx-b200", 14_300), ("dgx-b300", 14_500), ("hgx-h200-8nic", 10_200)])
def test_a_servers_compute_power_is_its_servers(server, each):
    from topo import build_fabric, summarize

    fields = {"gpus": 1024, "server": server, "switch": "eth-51t-128x400"}
    if server == "dgx-b300":
        fields["planes"] = 2
    s = summarize(build_fabric(load_spec(fields))).to_dict()
    assert s["power"]["compute_w"] == 128 * each and s["power"]["compute_of"]["unit"] == "server"
    assert "racks" not in s


def test_the_profiles_without_a_power_figure_keep_their_summary():
    from topo import build_fabric, summarize
    from topo.hardware.catalog import server_profiles

    assert [n for n, p in server_profiles().items() if p.power_w is None] == ["hgx-h100-8nic", "hgx-h100-4nic"]
    for fields in ({"gpus": 1024}, {"gpus": 1024, "server": "hgx-h100-4nic"}):
        assert "power" not in summarize(build_fabric(load_spec(fields))).to_dict()


def test_an_unknown_network_power_leaves_the_total_unknown():
    from topo import build_fabric, summarize

    s = summarize(build_fabric(load_spec({"gpus": 576, "server": "gb200-nvl72", "radix": 48}))).to_dict()
    assert s["power"]["compute_w"] == 8 * 120_000 and s["power"]["total_w"] is None


def test_the_build_prints_the_power_line(tmp_path):
    from .test_cli import run

    result = run("build", "--gpus", "1152", "--server", "gb300-nvl72", "--switch", "eth-51t-64x800", "--spare-trays",
                 "2", "--no-analysis", "--no-configs", "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert ("power: 2,686,880 W in all: compute 2,520,000 W (18 racks of gb300-nvl72 at 140,000 W), network "
            "166,880 W") in result.stdout.splitlines()


def test_the_design_review_has_the_racks_and_the_cluster_power(tmp_path):
    from .test_cli import run

    out = tmp_path / "out"
    result = run("build", "--gpus", "576", "--server", "gb300-nvl72", "--switch", "eth-51t-64x800", "--spare-trays", "2",
                 "--no-configs", "-q", "-o", str(out))
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    assert ("- racks: 9 of gb300-nvl72 (9 NVLink domains of 72 GPUs), 18 trays of 4 GPUs each: 16 in the job "
            "(64 GPUs), 2 spare; 162 trays installed") in report
    assert ("- cluster power: 1,347,840 W in all: compute 1,260,000 W (9 racks of gb300-nvl72 at 140,000 W), "
            "network 87,840 W") in report


def test_the_folders_readme_has_the_racks_and_the_cluster_power(tmp_path):
    """README.md, the folder's summary for people, says what the console says of racks and power."""
    from .test_cli import run

    out = tmp_path / "out"
    result = run("build", "--gpus", "1152", "--server", "gb300-nvl72", "--switch", "eth-51t-64x800", "--spare-trays",
                 "2", "--no-analysis", "--no-configs", "-q", "-o", str(out))
    assert result.exit_code == 0, result.output
    lines = (out / "README.md").read_text().splitlines()
    assert ("- racks: 18 of gb300-nvl72 (18 NVLink domains of 72 GPUs), 18 trays of 4 GPUs each: 16 in the job "
            "(64 GPUs), 2 spare; 324 trays installed") in lines
    assert ("- power: 2,686,880 W in all: compute 2,520,000 W (18 racks of gb300-nvl72 at 140,000 W), network "
            "166,880 W") in lines


def test_a_readme_without_racks_or_a_power_figure_has_neither_line(tmp_path):
    from .test_cli import run

    out = tmp_path / "out"
    assert run("build", "--gpus", "64", "--no-analysis", "--no-configs", "-q", "-o", str(out)).exit_code == 0
    text = (out / "README.md").read_text()
    assert "- racks:" not in text and "- power:" not in text
