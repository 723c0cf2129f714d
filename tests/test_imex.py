"""The IMEX daemon's node lists (imex/<domain>/nodes_config.cfg) of a rack-scale design, checked
against the rest of the build folder: the Slurm blocks, hosts/addresses.csv, the README, the stamp.

No IMEX daemon runs here (it needs the NVIDIA driver and NVLink switch trays); the file follows the
format of NVIDIA's IMEX guide: one IP address a line, the domain's nodes, nothing else."""

from __future__ import annotations

import csv
import io
import ipaddress
import json

from click.testing import CliRunner

from topo import build_fabric, load_spec
from topo.cli import main
from topo.outputs.configs.hosts import host_addresses_csv
from topo.outputs.imex import IMEX_OUTPUTS, imex_files, tray_addresses
from topo.outputs.placement import expand_hostlist, placement_files
from topo.outputs.readme import all_outputs

GB300 = dict(gpus=1152, gpus_per_node=4, nics_per_node=4, server="gb300-nvl72", nic_gbps=800,
             switch="eth-51t-64x800")
GB300_FLAGS = ["--gpus", "1152", "--gpus-per-node", "4", "--nics-per-node", "4", "--server", "gb300-nvl72",
               "--nic-gbps", "800", "--switch", "eth-51t-64x800"]


def test_each_nvlink_domain_lists_the_addresses_of_its_18_trays():
    fabric = build_fabric(load_spec(GB300))
    files = imex_files(fabric)
    assert sorted(files) == [f"imex/cluster-domain{d:02d}/nodes_config.cfg" for d in range(16)]
    rows = csv.DictReader(io.StringIO(host_addresses_csv(fabric)))
    nic0 = {row["node"]: row["address"].split("/")[0] for row in rows if row["nic"] == "0"}
    assert tray_addresses(fabric) == nic0
    block = placement_files(fabric)["placement/topology-block.conf"]
    blocks = {}
    for line in block.splitlines():
        if line.startswith("BlockName="):
            name, nodes = line.split()
            blocks[name.removeprefix("BlockName=")] = nodes.removeprefix("Nodes=")
    seen = set()
    for path, text in files.items():
        assert text.endswith("\n") and "#" not in text and " " not in text
        lines = text.splitlines()
        assert len(lines) == 18
        assert all(ipaddress.IPv4Address(line) for line in lines)
        domain = path.split("/")[1]
        assert lines == [nic0[h] for h in expand_hostlist(blocks[domain])]
        seen.update(lines)
    assert len(seen) == 288


def test_no_imex_files_without_a_multi_node_nvlink_domain_or_addresses():
    assert imex_files(build_fabric(load_spec({"gpus": 1024}))) == {}
    assert imex_files(build_fabric(load_spec({"gpus": 512, "server": "dgx-b200"}))) == {}
    infiniband = {**GB300, "switch": "ndr-64x400", "nic_gbps": 400, "server": "gb200-nvl72"}
    assert imex_files(build_fabric(load_spec(infiniband))) == {}


def test_a_short_last_domain_lists_its_trays():
    files = imex_files(build_fabric(load_spec({**GB300, "gpus": 144 + 32})))
    assert [len(t.splitlines()) for t in files.values()] == [18, 18, 8]


def test_the_build_folder_lists_them(tmp_path):
    out = tmp_path / "gb300"
    result = CliRunner().invoke(main, ["build", *GB300_FLAGS, "-o", str(out), "-q", "--no-configs"])
    assert result.exit_code == 0, result.output
    written = sorted(p.relative_to(out).as_posix() for p in (out / "imex").rglob("*"))
    assert [p for p in written if p.endswith(".cfg")] == [f"imex/cluster-domain{d:02d}/nodes_config.cfg"
                                                        for d in range(16)]
    stamp = json.loads((out / "topo-build.json").read_text())["files"]
    assert all(p in stamp for p in written if p.endswith(".cfg"))
    assert "`imex/<domain>/nodes_config.cfg` (16 files" in (out / "README.md").read_text()
    assert IMEX_OUTPUTS[0] in all_outputs()
    listed = CliRunner().invoke(main, ["templates"])
    assert "imex/nodes_config.cfg.j2" in listed.output


def test_an_hgx_build_folder_has_no_imex_files(tmp_path):
    out = tmp_path / "h100"
    result = CliRunner().invoke(main, ["build", "--gpus", "64", "-o", str(out), "-q", "--no-configs"])
    assert result.exit_code == 0, result.output
    assert not (out / "imex").exists()
    assert "imex" not in (out / "README.md").read_text() and "imex" not in (out / "topo-build.json").read_text()
