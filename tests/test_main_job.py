"""The main job end to end: `topo build --gpus 1024`, then every file read by its real consumer.

Each check runs the program that will consume the file in production (FRR, slurmctld, Open MPI,
Graphviz, the containerlab schema, NCCL's parsing rules) and is skipped, saying why, where that
program is not installed (`bash scripts/test.sh` installs them).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import networkx as nx
import pytest
from click.testing import CliRunner

from topo.cli import main
from topo.outputs.nccl_xml import check_topology, read_nccl_topology
from topo.outputs.placement import expand_hostlist

from .test_configs import VTYSH, check_config_db, frr_check
from .test_exports import CHECK_JSONSCHEMA, CLAB_SCHEMA, DOT
from .test_placement import MPIRUN, SLURMCTLD, parse_show_topology, run_slurmctld


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("main-job") / "cluster-1024gpus"
    result = CliRunner().invoke(main, ["build", "--gpus", "1024", "-o", str(out), "-q"], prog_name="topo")
    assert result.exit_code == 0, result.output
    return out


def test_the_folder_holds_every_output(folder):
    expected = {
        "README.md", "analysis.json", "bom.csv", "cabling.csv", "design.json", "spec.yaml", "summary.json",
        "containerlab/cluster.clab.yml", "containerlab/daemons", "containerlab/vtysh.conf",
        "graph/fabric-aggregate.dot", "graph/fabric.dot", "graph/fabric.graphml", "graph/fabric.svg",
        "hosts/addresses.csv", "hosts/roce-qos.sh", "nccl/hgx-h100-8nic-topo.xml", "nccl/hgx-h100-8nic.env",
        "placement/deepspeed-hostfile", "placement/hostfile", "placement/rankfile",
        "placement/topology-block.conf", "placement/topology.conf", "placement/topology.yaml",
        "report.html", "report.md", "report/busbw.svg", "report/links.svg", "topo-build.json",
    }
    files = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    switches = {f for f in files if f.startswith("switches/")}
    assert files - switches == expected
    assert len(switches) == 2 * 48


@pytest.mark.skipif(VTYSH is None, reason="FRR is not installed (bash scripts/test.sh installs it)")
def test_frr_accepts_a_leaf_and_a_spine(folder):
    for switch in ("cluster-leaf-su00-r0", "cluster-spine-00"):
        assert frr_check(folder / "switches" / switch / "frr.conf") == []
        check_config_db(json.loads((folder / "switches" / switch / "config_db.json").read_text()))


@pytest.mark.skipif(SLURMCTLD is None, reason="slurmctld is not installed (bash scripts/test.sh installs it)")
def test_slurm_accepts_the_topology(folder, tmp_path):
    hosts = [f"cluster-node{i:04d}" for i in range(128)]
    run = run_slurmctld(tmp_path, {"topology.conf": (folder / "placement/topology.conf").read_text()}, hosts)
    assert run.topology is not None, run.log
    assert run.problems() == []
    shown = parse_show_topology(run.topology)
    assert sorted(shown) == ["cluster-spines", "cluster-su00", "cluster-su01", "cluster-su02", "cluster-su03"]
    assert sorted(expand_hostlist(shown["cluster-su01"]["Nodes"])) == hosts[32:64]


@pytest.mark.skipif(MPIRUN is None, reason="Open MPI is not installed (bash scripts/test.sh installs it)")
def test_open_mpi_maps_all_1024_ranks(folder):
    run = subprocess.run(
        [MPIRUN, "--allow-run-as-root", "--oversubscribe", "--hostfile", str(folder / "placement/hostfile"),
         "-np", "1024", "--bind-to", "none", "--display-map", "--do-not-launch",
         "--mca", "if_base_do_not_resolve", "1", "/bin/true"],
        capture_output=True, text=True, timeout=120)
    ranks = [int(m) for m in re.findall(r"Process rank: (\d+)", run.stdout)]
    assert sorted(ranks) == list(range(1024)), run.stderr[-1000:]


@pytest.mark.skipif(DOT is None, reason="Graphviz is not installed (bash scripts/test.sh installs it)")
def test_graphviz_renders_both_views(folder, tmp_path):
    for name in ("fabric.dot", "fabric-aggregate.dot"):
        run = subprocess.run([DOT, "-Tsvg", str(folder / "graph" / name), "-o", str(tmp_path / f"{name}.svg")],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr


def test_graphml_reads_back_with_the_fabric_counts(folder):
    graph = nx.read_graphml(folder / "graph/fabric.graphml", force_multigraph=True)
    assert graph.number_of_nodes() == 128 + 48 and graph.number_of_edges() == 2048


@pytest.mark.skipif(CHECK_JSONSCHEMA is None or not CLAB_SCHEMA.exists(),
                    reason="check-jsonschema or the shared containerlab schema is missing")
def test_containerlab_lab_passes_the_schema(folder):
    run = subprocess.run([CHECK_JSONSCHEMA, "--schemafile", str(CLAB_SCHEMA),
                          str(folder / "containerlab/cluster.clab.yml")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_nccl_topology_follows_nccls_rules(folder):
    text = (folder / "nccl/hgx-h100-8nic-topo.xml").read_text()
    read_nccl_topology(text)  # raises as NCCL's parser would
    assert check_topology(text) == []
    env = (folder / "nccl/hgx-h100-8nic.env").read_text()
    assert "NCCL_CROSS_NIC=0" in env and "NCCL_IB_QPS_PER_CONNECTION=1" in env
