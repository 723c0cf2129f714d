"""Rank placement files, checked by the programs that read them: a throw-away slurmctld for
topology.conf, Open MPI's mapper for the hostfile, and DeepSpeed's hostfile rules.

The real-program tests skip, saying why, when the program is missing (Debian: slurmctld,
slurm-client, openmpi-bin). Each slurmctld runs on 127.0.0.1 on a free port from a temporary folder
and is stopped by its PID.
"""

from __future__ import annotations

import getpass
import os
import random
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from topo import build_fabric, load_spec
from topo.outputs.placement import (
    PLACEMENT_OUTPUTS,
    block_sizes,
    compress_hostlist,
    expand_hostlist,
    placement_facts,
    placement_files,
    placement_order,
    ring_edges,
)
from topo.outputs.templating import TemplateError, template_environment


def _program(name: str) -> str | None:
    found = shutil.which(name)
    if found is None and Path("/usr/sbin", name).exists():
        found = str(Path("/usr/sbin", name))
    return found


SLURMCTLD = _program("slurmctld")
SCONTROL = _program("scontrol")
MPIRUN = shutil.which("mpirun")


def _slurm_version() -> tuple[int, int] | None:
    if SLURMCTLD is None:
        return None
    out = subprocess.run([SLURMCTLD, "-V"], capture_output=True, text=True).stdout
    m = re.search(r"(\d+)\.(\d+)\.\d+", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _open_mpi() -> bool:
    if MPIRUN is None:
        return False
    out = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True)
    return "Open MPI" in out.stdout + out.stderr


SLURM_VERSION = _slurm_version()
needs_slurm = pytest.mark.skipif(
    SLURMCTLD is None or SCONTROL is None,
    reason="Slurm is not installed (Debian packages slurmctld and slurm-client)",
)
needs_open_mpi = pytest.mark.skipif(
    not _open_mpi(), reason="Open MPI's mpirun is not installed (Debian package openmpi-bin)")

#: Small fabrics of every shape the tree takes.
SHAPES = {
    # two tiers, rail placement, 4 SUs of which the last is partial (29 of 32 nodes)
    "rail-2tier": dict(gpus=1000),
    # three tiers, rail placement: 3 pods of 2 SUs of 8 nodes
    "rail-3tier": dict(gpus=192, gpus_per_node=4, nics_per_node=4, radix=16, tiers=3),
    # three tiers where an SU's 8 rail leaves span two pods: no pod level
    "rail-3tier-wide-su": dict(gpus=64, radix=8, tiers=3),
    # two tiers, rack placement: 8 top-of-rack leaves of 4 nodes
    "rack-2tier": dict(gpus=256, placement="rack"),
    # three tiers, rack placement: 4 pods of 8 leaves of 1 node
    "rack-3tier": dict(gpus=256, placement="rack", radix=16, tiers=3),
    # the shapes of docs/fabric.md "Fabric shapes"
    "rail-only": dict(gpus=512, tiers=1),
    "grown-3tier": dict(gpus=1024, grow_to=4096),
    "undersubscribed": dict(gpus=960, oversubscription="15:17"),
    "two-planes": dict(gpus=1024, switch="eth-51t-128x400", nic_gbps=800, planes=2),
    "two-planes-rack-3tier": dict(gpus=256, placement="rack", radix=16, tiers=3, nic_gbps=800, planes=2),
    "mixed-leaf-spine": dict(gpus=4096, switch="eth-25t-64x400", spine_switch="eth-51t-128x400"),
    "spine-800g-over-400g-leaves": dict(gpus=1024, switch="eth-25t-64x400", spine_switch="eth-51t-64x800"),
    "dual-tor": dict(gpus=1024, dual_tor=True),
    "dual-tor-rack-3tier": dict(gpus=256, placement="rack", radix=16, tiers=3, dual_tor=True),
}


#: A GB300 NVL72 design: 1,152 GPUs on 288 compute trays of 4, 16 NVLink domains of 18 trays.
GB300 = dict(gpus=1152, gpus_per_node=4, nics_per_node=4, server="gb300-nvl72", nic_gbps=800,
             switch="eth-51t-64x800")


def fabric_of(shape: str, **extra):
    return build_fabric(load_spec({**SHAPES[shape], **extra}))


def hosts_of(fabric) -> list[str]:
    return [fabric.names[i] for i in placement_order(fabric).tolist()]


def body(text: str) -> list[str]:
    """Lines that are not comments or blank."""
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


# --- hostlists ------------------------------------------------------------------------------------

HOSTLISTS = [
    (["gpu0000", "gpu0001", "gpu0002"], "gpu[0000-0002]"),
    (["n8", "n9", "n10", "n11"], "n[8-11]"),
    (["n08", "n09", "n10"], "n[08-10]"),
    (["n1", "n3", "n4", "n5", "n9"], "n[1,3-5,9]"),
    (["n9", "n10", "n010", "n011"], "n[9-10,010-011]"),
    (["a7"], "a7"),
    (["login", "alpha", "bravo"], "login,alpha,bravo"),
    (["r1-gpu01", "r1-gpu02", "r2-gpu01", "r2-gpu02"], "r1-gpu[01-02],r2-gpu[01-02]"),
    (["x-leaf-00", "x-leaf-01", "y", "x-leaf-02"], "x-leaf-[00-01],y,x-leaf-02"),
    (["n3", "n2", "n1"], "n[3,2,1]"),
    (["007", "008"], "007,008"),
]


@pytest.mark.parametrize("names, expected", HOSTLISTS)
def test_hostlist_compression_round_trips(names, expected):
    assert compress_hostlist(names) == expected
    assert expand_hostlist(expected) == names


def test_hostlist_round_trips_on_random_names():
    rng = random.Random(7)
    for _ in range(300):
        names = []
        for _ in range(rng.randint(1, 30)):
            prefix = rng.choice(["gpu", "n", "rack1-node", "a-b-", "zz"])
            number = rng.randint(0, 120)
            width = rng.choice([1, 2, 3, 4])
            names.append(f"{prefix}{number:0{width}d}" if rng.random() < 0.9 else rng.choice(["login", "x"]))
        names = list(dict.fromkeys(names))
        assert expand_hostlist(compress_hostlist(names)) == names


def test_hostlist_reader_rejects_what_it_cannot_read():
    for bad in ("n[1-2", "n[2-1]", "n[[1]]", "a,,b", "n[1-x]"):
        with pytest.raises(ValueError):
            expand_hostlist(bad)


@needs_slurm
def test_slurm_reads_our_hostlists_as_we_do(tmp_path):
    """Slurm's own hostlist parser (scontrol show hostnames) expands every expression we write."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(slurm_conf(tmp_path, "n1", "topology/tree", port=free_port()))
    env = dict(os.environ, SLURM_CONF=str(conf))
    csv_names = [f"r{i // 4}-gpu{i % 4:02d}" if i % 5 else f"spare{chr(97 + i)}" for i in range(12)]
    expressions = [expected for _, expected in HOSTLISTS] + [compress_hostlist(csv_names)]
    for expression in expressions:
        out = subprocess.run([SCONTROL, "show", "hostnames", expression], capture_output=True, text=True,
                             env=env, timeout=30)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == expand_hostlist(expression), expression


# --- order, files, determinism --------------------------------------------------------------------


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_scalable_units_and_pods_are_adjacent(shape):
    fabric = fabric_of(shape)
    order = placement_order(fabric)
    n = fabric.plan.nodes
    assert sorted(order.tolist()) == list(range(n))
    su, pod = fabric.su[order], fabric.pod[order]
    # each SU (and each pod) is one run in placement order
    for values in (su, pod):
        runs = [v for i, v in enumerate(values.tolist()) if i == 0 or v != values[i - 1]]
        assert len(runs) == len(set(runs))
    # the fabric's node order already is the placement order (kept explicit by the sort)
    assert order.tolist() == list(range(n))
    edges, crossing = ring_edges(fabric)
    assert edges == n
    assert crossing == (fabric.plan.sus if fabric.plan.sus > 1 else 0)


def test_a_scattered_order_crosses_more():
    fabric = fabric_of("rail-2tier")
    scattered = placement_order(fabric)[::-1].reshape(-1, 5).T.ravel()  # every 5th node
    assert ring_edges(fabric, scattered)[1] > ring_edges(fabric)[1] == 4


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_files_are_deterministic_and_complete(shape):
    files = placement_files(fabric_of(shape))
    assert list(files) == [path for path, _ in PLACEMENT_OUTPUTS]
    assert placement_files(fabric_of(shape), template_environment()) == files
    assert all(text.endswith("\n") and "\n\n" not in text for text in files.values())


def test_hostfile_and_rankfile_agree(tmp_path):
    fabric = fabric_of("rail-2tier", gpus_per_node=8, nics_per_node=4)
    files = placement_files(fabric)
    gpus = fabric.spec.gpus_per_node
    hosts = hosts_of(fabric)
    assert body(files["placement/hostfile"]) == [f"{h} slots={gpus}" for h in hosts]
    lines = body(files["placement/rankfile"])
    assert len(lines) == fabric.spec.gpus
    for rank, line in enumerate(lines):
        m = re.fullmatch(r"rank (\d+)=(\S+) slot=(\d+)", line)
        assert m, line
        assert (int(m.group(1)), m.group(2), int(m.group(3))) == (rank, hosts[rank // gpus], rank % gpus)
    assert "GPU -> NIC: 0->0 1->0 2->1 3->1 4->2 5->2 6->3 7->3" in files["placement/rankfile"]


def deepspeed_hostfile(text: str) -> dict[str, int]:
    """DeepSpeed's hostfile rules (deepspeed/launcher/runner.py, _parse_hostfile), stricter in one
    way: no comment or blank lines, which older releases (splitting each line in two) reject."""
    pool: dict[str, int] = {}
    for line in text.splitlines():
        m = re.fullmatch(r"(\S+)\s+slots=(\d+)", line)
        if m is None:
            raise ValueError(f"bad entry {line!r}")
        if m.group(1) in pool:
            raise ValueError(f"multiple entries for {m.group(1)}")
        pool[m.group(1)] = int(m.group(2))
    if not pool:
        raise ValueError("empty hostfile")
    return pool


@pytest.mark.parametrize("bad", ["a slots=8\na slots=8\n", "a slot=8\n", "a:8\n", "", "# c\na slots=8\n"])
def test_deepspeed_rules_reject_bad_hostfiles(bad):
    with pytest.raises(ValueError):
        deepspeed_hostfile(bad)


@pytest.mark.parametrize("shape", ["rail-2tier", "rack-3tier"])
def test_deepspeed_hostfile_follows_deepspeed_rules(shape):
    fabric = fabric_of(shape)
    pool = deepspeed_hostfile(placement_files(fabric)["placement/deepspeed-hostfile"])
    assert list(pool) == hosts_of(fabric)
    assert set(pool.values()) == {fabric.spec.gpus_per_node}


def test_hostnames_from_a_pattern_flow_through():
    files = placement_files(build_fabric(load_spec({"gpus": 512, "hostnames": "gpu{number:03d}"})))
    assert body(files["placement/topology.conf"])[:2] == [
        "SwitchName=cluster-su00 Nodes=gpu[001-032]", "SwitchName=cluster-su01 Nodes=gpu[033-064]"]
    assert body(files["placement/hostfile"])[0] == "gpu001 slots=8"
    assert body(files["placement/rankfile"])[-1] == "rank 511=gpu064 slot=7"
    assert yaml.safe_load(files["placement/topology.yaml"])[0]["block"]["blocks"][1]["nodes"] == "gpu[033-064]"


def csv_hostnames(tmp_path: Path, nodes: int) -> list[str]:
    """Irregular names, as a site's inventory gives them."""
    names = [f"r{i // 6}-gpu{i % 6 + 1:02d}" if i % 7 else f"spare-{chr(97 + i % 26)}{i}" for i in range(nodes)]
    (tmp_path / "hosts.csv").write_text("node,hostname\n" + "".join(f"{i},{h}\n" for i, h in enumerate(names)))
    return names


def test_hostnames_from_a_csv_flow_through(tmp_path):
    names = csv_hostnames(tmp_path, 64)
    fabric = build_fabric(load_spec({"gpus": 512, "hostnames": str(tmp_path / "hosts.csv")}))
    files = placement_files(fabric)
    assert list(deepspeed_hostfile(files["placement/deepspeed-hostfile"])) == names
    tree = parse_topology_conf(files["placement/topology.conf"])
    assert expand_hostlist(tree["cluster-su00"]["Nodes"]) == names[:32]
    assert expand_hostlist(tree["cluster-su01"]["Nodes"]) == names[32:]
    assert "spare-a0,r0-gpu[02-06],r1-gpu01" in tree["cluster-su00"]["Nodes"]


# --- the Slurm files, structurally ----------------------------------------------------------------


def parse_topology_conf(text: str) -> dict[str, dict[str, str]]:
    """``SwitchName=...`` or ``BlockName=...`` lines as {name: {key: value}}; ``BlockSizes`` under ''."""
    out: dict[str, dict[str, str]] = {}
    for line in body(text):
        fields = dict(token.split("=", 1) for token in line.split())
        name = fields.pop("SwitchName", None) or fields.pop("BlockName", None) or ""
        assert name not in out, f"{name} defined twice"
        out[name] = fields
    return out


def expected_tree(fabric) -> dict[str, dict]:
    """The tree the fabric should give: {switch: {"nodes": [...], "children": [...], "level": L}}."""
    facts = placement_facts(fabric)
    tree = {}
    for unit in facts["units"]:
        tree[unit["name"]] = {"nodes": expand_hostlist(unit["nodes"]), "children": [], "level": 0}
    for pod in facts["pods"]:
        kids = expand_hostlist(pod["units"])
        tree[pod["name"]] = {"nodes": [h for k in kids for h in tree[k]["nodes"]], "children": kids, "level": 1}
    if facts["top"] is None:  # one tier: the one unit is the whole tree
        return tree
    kids = expand_hostlist(facts["top"]["children"])
    tree[facts["top"]["name"]] = {"nodes": hosts_of(fabric), "children": kids,
                                  "level": 1 + max(tree[k]["level"] for k in kids)}
    return tree


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_topology_conf_is_the_expected_tree(shape):
    fabric = fabric_of(shape)
    conf = parse_topology_conf(placement_files(fabric)["placement/topology.conf"])
    tree = expected_tree(fabric)
    assert list(conf) == list(tree)
    leaves = {name for name, entry in tree.items() if entry["level"] == 0}
    for name, fields in conf.items():
        if name in leaves:
            assert set(fields) == {"Nodes"} and expand_hostlist(fields["Nodes"]) == tree[name]["nodes"]
        else:
            assert set(fields) == {"Switches"} and expand_hostlist(fields["Switches"]) == tree[name]["children"]
    placed = [h for name in leaves for h in tree[name]["nodes"]]
    assert sorted(placed) == sorted(hosts_of(fabric))  # every node under exactly one leaf entry
    if fabric.plan.placement == "rack" and fabric.plan.planes == 1 and fabric.plan.homes == 1:
        assert leaves == {fabric.names[i] for i in range(fabric.first(1), fabric.first(2))}
    if fabric.plan.planes > 1 and fabric.plan.tiers == 3:  # pod p stands for pod p of every plane
        assert [n for n in conf if "-pod" in n] == [f"cluster-pod{p:02d}" for p in range(fabric.plan.plane_pods)]


def test_a_rack_of_a_multi_plane_fabric_stands_for_its_leaf_in_every_plane():
    conf = placement_files(fabric_of("two-planes-rack-3tier"))["placement/topology.conf"]
    assert "# cluster-rack00: leaves cluster-pl0-leaf-00,cluster-pl1-leaf-00\nSwitchName=cluster-rack00 Nodes=cluster-node0000" in conf


def test_a_rack_of_a_dual_tor_fabric_stands_for_its_pair():
    conf = placement_files(fabric_of("dual-tor-rack-3tier"))["placement/topology.conf"]
    assert "# cluster-rack00: leaves cluster-leaf-00a,cluster-leaf-00b\nSwitchName=cluster-rack00 Nodes=cluster-node[0000-0001]\n" in conf


def test_three_tier_tree_has_pods_unless_an_su_spans_pods():
    three = parse_topology_conf(placement_files(fabric_of("rail-3tier"))["placement/topology.conf"])
    assert three["cluster-pod01"] == {"Switches": "cluster-su[02-03]"}
    assert three["cluster-cores"] == {"Switches": "cluster-pod[00-02]"}
    wide = parse_topology_conf(placement_files(fabric_of("rail-3tier-wide-su"))["placement/topology.conf"])
    assert list(wide) == ["cluster-su00", "cluster-su01", "cluster-cores"]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_block_files_follow_slurm_rules(shape):
    """topology-block.conf and topology.yaml against the rules of topology.conf(5) and
    topology.yaml(5): unique block names, the base size at most every full block, each next size a
    power of two times the previous, and the yaml tree equal to topology.conf."""
    fabric = fabric_of(shape)
    files = placement_files(fabric)
    facts = placement_facts(fabric)
    conf = parse_topology_conf(files["placement/topology-block.conf"])
    sizes = [int(s) for s in conf.pop("")["BlockSizes"].split(",")]
    assert sizes == block_sizes([u["node_count"] for u in facts["units"]])
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))
    assert 2 ** (len(sizes) - 1) >= len(conf)  # the last size holds every block ...
    assert len(sizes) == 1 or 2 ** (len(sizes) - 2) < len(conf)  # ... and is the first that does
    blocks = {name: expand_hostlist(fields["Nodes"]) for name, fields in conf.items()}
    assert [h for nodes in blocks.values() for h in nodes] == hosts_of(fabric)
    full = [name for name, nodes in blocks.items() if len(nodes) >= sizes[0]]
    assert full[: len(blocks) - 1] == list(blocks)[:-1]  # only the last block may be short

    topologies = yaml.safe_load(files["placement/topology.yaml"])
    assert [list(t)[0] for t in topologies] == ["topology", "topology"]
    block, tree = topologies
    assert block["cluster_default"] is True and tree["cluster_default"] is False
    assert set(block) == {"topology", "cluster_default", "block"}
    assert set(tree) == {"topology", "cluster_default", "tree"}
    assert block["block"]["block_sizes"] == sizes
    assert {b["block"]: expand_hostlist(b["nodes"]) for b in block["block"]["blocks"]} == blocks
    tree_conf = parse_topology_conf(files["placement/topology.conf"])
    assert {s["switch"]: {"Nodes": s["nodes"]} if "nodes" in s else {"Switches": s["children"]}
            for s in tree["tree"]["switches"]} == tree_conf


def test_a_rack_scale_profile_has_one_block_per_nvlink_domain():
    """GB300 NVL72: 16 blocks of the 18 trays of one domain, in hostfile order, base block 18; the
    yaml's blocks are the same; the tree (topology.conf) still follows the switches."""
    fabric = build_fabric(load_spec(GB300))
    files = placement_files(fabric)
    conf = parse_topology_conf(files["placement/topology-block.conf"])
    assert conf.pop("")["BlockSizes"] == "18,36,72,144,288"
    assert list(conf) == [f"cluster-domain{d:02d}" for d in range(16)]
    blocks = {name: expand_hostlist(fields["Nodes"]) for name, fields in conf.items()}
    assert all(len(nodes) == 18 for nodes in blocks.values())
    hosts = [line.split()[0] for line in body(files["placement/hostfile"])]
    assert [h for nodes in blocks.values() for h in nodes] == hosts == hosts_of(fabric)
    block = yaml.safe_load(files["placement/topology.yaml"])[0]["block"]
    assert block["block_sizes"] == [18, 36, 72, 144, 288]
    assert {b["block"]: expand_hostlist(b["nodes"]) for b in block["blocks"]} == blocks
    assert "one block per NVLink domain" in files["placement/topology.yaml"]
    assert not any(name.startswith("cluster-domain") for name in parse_topology_conf(files["placement/topology.conf"]))
    facts = placement_facts(fabric)
    assert (facts["domain_trays"], facts["domain_gpus"], len(facts["domains"])) == (18, 72, 16)


def test_spare_trays_are_out_of_the_nvlink_domain_blocks():
    """With 2 spare trays a rack, a block is the 16 trays of one rack that the job uses."""
    fabric = build_fabric(load_spec({**GB300, "gpus": 1024, "spare_trays": 2}))
    files = placement_files(fabric)
    conf = parse_topology_conf(files["placement/topology-block.conf"])
    assert conf.pop("")["BlockSizes"] == "16,32,64,128,256"
    assert [len(expand_hostlist(f["Nodes"])) for f in conf.values()] == [16] * 16
    facts = placement_facts(fabric)
    assert (facts["domain_trays"], facts["domain_gpus"], len(facts["domains"])) == (16, 64, 16)


def test_a_partial_nvlink_domain_is_called_out():
    files = placement_files(build_fabric(load_spec({**GB300, "gpus": 144 + 32})))
    conf = parse_topology_conf(files["placement/topology-block.conf"])
    assert conf.pop("")["BlockSizes"] == "18,36,72"
    assert [len(expand_hostlist(f["Nodes"])) for f in conf.values()] == [18, 18, 8]
    assert "cluster-domain02 has fewer nodes than the base block" in files["placement/topology-block.conf"]


def test_a_partial_scalable_unit_is_called_out():
    files = placement_files(fabric_of("rail-2tier"))
    assert "cluster-su03 has fewer nodes than the base block" in files["placement/topology-block.conf"]
    assert "BlockSizes=32,64,128" in files["placement/topology-block.conf"]


def test_user_templates_override_and_errors_name_the_template(tmp_path):
    (tmp_path / "placement").mkdir()
    (tmp_path / "placement" / "hostfile.j2").write_text(
        "{% for h in p.hosts %}{{ h.name }} slots={{ p.gpus_per_node }} max_slots={{ p.gpus_per_node }}\n{% endfor %}")
    files = placement_files(fabric_of("rack-2tier"), template_environment([tmp_path]))
    assert files["placement/hostfile"].startswith("cluster-node0000 slots=8 max_slots=8\n")
    (tmp_path / "placement" / "hostfile.j2").write_text("{{ p.no_such_fact }}\n")
    with pytest.raises(TemplateError, match="placement/hostfile.j2"):
        placement_files(fabric_of("rack-2tier"), template_environment([tmp_path]))


# --- Slurm itself ---------------------------------------------------------------------------------

#: slurmctld log lines that mean the topology is wrong: any fatal error, and the warnings of the
#: topology/tree and topology/block plugins (their wording in Slurm 22.05 to 25.11).
TOPOLOGY_PROBLEM = re.compile(
    r"fatal:|switches lack access to|Invalid hostnames in (switch|block) configuration|"
    r"Multiple leaf switches contain nodes|no switch can reach all nodes|switch \S+ has no nodes|"
    r"has both child switches and nodes|has neither child switches nor nodes|No (switches|blocks) configured|"
    r"blocks lack access to|Blocks do not contain any nodes", re.IGNORECASE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(folder: Path, nodes: str, plugin: str | None, port: int) -> str:
    for sub in ("state", "spool"):
        (folder / sub).mkdir(exist_ok=True)
    return "\n".join([
        "ClusterName=topotest",
        "SlurmctldHost=localhost(127.0.0.1)",  # no name to look up: /etc/hosts may lack localhost
        f"SlurmctldPort={port}",
        "AuthType=auth/none",
        "CredType=cred/none",
        f"SlurmUser={getpass.getuser()}",
        "MpiDefault=none",
        "MailProg=/bin/true",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        "ReturnToService=2",
        f"TopologyPlugin={plugin}" if plugin else "# topology.yaml names its plugins",
        f"NodeName={nodes} CPUs=1 State=FUTURE",
        "PartitionName=all Nodes=ALL Default=YES",
        "",
    ])


@dataclass
class SlurmRun:
    returncode: int | None  #: None: the daemon was running until we stopped it
    topology: str | None  #: what `scontrol show topology` printed; None: no switch or block, ever
    log: str
    seconds: float

    def problems(self) -> list[str]:
        return [line for line in self.log.splitlines() if TOPOLOGY_PROBLEM.search(line)]


def run_slurmctld(folder: Path, files: dict[str, str], hosts: list[str],
                  plugin: str | None = "topology/tree") -> SlurmRun:
    """Start a throw-away slurmctld with these files beside its slurm.conf, ask it for the topology,
    stop it by its PID, and return what it said."""
    port = free_port()
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, compress_hostlist(hosts), plugin, port))
    for name, text in files.items():
        (folder / name).write_text(text)
    env = dict(os.environ, SLURM_CONF=str(conf))
    output = folder / "slurmctld.out"
    start = time.perf_counter()
    topology = None
    with open(output, "w") as out:
        daemon = subprocess.Popen([SLURMCTLD, "-D", "-i", "-f", str(conf)], stdout=out, stderr=subprocess.STDOUT,
                                  env=env, start_new_session=True)
    try:
        while time.perf_counter() - start < 15 and daemon.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            except OSError:
                time.sleep(0.02)
                continue
            shown = subprocess.run([SCONTROL, "show", "topology"], capture_output=True, text=True, env=env,
                                   timeout=30)
            # an answer names at least one switch or block: Slurm 24.11 answers with nothing, exit
            # status 0, while it has yet to read topology.conf (and then refuses a broken one and exits)
            if shown.returncode == 0 and shown.stdout.strip():
                topology = shown.stdout
                break
            time.sleep(0.05)
    finally:
        returncode = daemon.poll()
        if returncode is None:
            daemon.terminate()
            try:
                daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
    log = output.read_text()
    logfile = folder / "slurmctld.log"
    if logfile.exists():
        log += logfile.read_text()
    return SlurmRun(returncode, topology, log, time.perf_counter() - start)


def parse_show_topology(text: str) -> dict[str, dict[str, str]]:
    out = {}
    for line in text.splitlines():
        if line.strip():
            fields = dict(token.split("=", 1) for token in line.split())
            out[fields.pop("SwitchName")] = fields
    return out


SLURM_SHAPES = ["rail-2tier", "rail-3tier", "rail-3tier-wide-su", "rack-2tier", "rack-3tier", "rail-only", "grown-3tier",
                "undersubscribed", "two-planes", "two-planes-rack-3tier", "mixed-leaf-spine", "spine-800g-over-400g-leaves",
                "dual-tor-rack-3tier"]


@needs_slurm
@pytest.mark.parametrize("shape", SLURM_SHAPES)
def test_slurm_accepts_topology_conf(shape, tmp_path):
    fabric = fabric_of(shape)
    run = run_slurmctld(tmp_path, {"topology.conf": placement_files(fabric)["placement/topology.conf"]},
                        hosts_of(fabric))
    assert run.topology is not None, f"slurmctld did not answer (exit {run.returncode}):\n{run.log}"
    assert run.problems() == []
    shown = parse_show_topology(run.topology)
    tree = expected_tree(fabric)
    assert set(shown) == set(tree)
    for name, entry in tree.items():
        got = shown[name]
        assert int(got["Level"]) == entry["level"], name
        assert sorted(expand_hostlist(got["Nodes"])) == sorted(entry["nodes"]), name
        children = expand_hostlist(got["Switches"]) if "Switches" in got else []
        assert sorted(children) == sorted(entry["children"]), name
    print(f"{shape}: slurmctld answered in {run.seconds:.2f} s")


@needs_slurm
def test_slurm_accepts_csv_hostnames(tmp_path):
    csv_hostnames(tmp_path, 64)
    fabric = build_fabric(load_spec({"gpus": 512, "hostnames": str(tmp_path / "hosts.csv")}))
    run = run_slurmctld(tmp_path, {"topology.conf": placement_files(fabric)["placement/topology.conf"]},
                        hosts_of(fabric))
    assert run.topology is not None, run.log
    assert run.problems() == []
    shown = parse_show_topology(run.topology)
    assert sorted(expand_hostlist(shown["cluster-su01"]["Nodes"])) == sorted(hosts_of(fabric)[32:])


def _drop_line(text: str, prefix: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(prefix))


BROKEN = {
    # a switch names a child switch that is not defined: Slurm refuses to start
    "undefined child": (lambda t: _drop_line(t, "SwitchName=cluster-su01 "), "invalid child"),
    # a node under two leaf switches: Slurm starts but warns
    "node under two leaves": (lambda t: t.replace("Nodes=cluster-node[0032-0063]", "Nodes=cluster-node[0031-0063]"),
                              "Multiple leaf switches"),
    # a node that slurm.conf does not know
    "unknown node": (lambda t: t.replace("cluster-node[0096-0124]", "cluster-node[0096-0125]"), "Invalid hostnames"),
    # two roots
    "two roots": (lambda t: t.replace("Switches=cluster-su[00-03]", "Switches=cluster-su[00-02]"),
                  "no switch can reach all nodes"),
}


@needs_slurm
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_slurm_rejects_a_broken_topology_conf(case, tmp_path):
    fabric = fabric_of("rail-2tier")
    breaks, message = BROKEN[case]
    text = breaks(placement_files(fabric)["placement/topology.conf"])
    run = run_slurmctld(tmp_path, {"topology.conf": text}, hosts_of(fabric))
    assert run.problems(), run.log
    assert message in run.log
    if case == "undefined child":
        assert run.topology is None and run.returncode not in (None, 0)


@needs_slurm
@pytest.mark.skipif(SLURM_VERSION is not None and SLURM_VERSION < (24, 5),
                    reason=f"topology/block with BlockSizes needs Slurm 24.05+ (installed: {SLURM_VERSION})")
def test_slurm_accepts_topology_block_conf(tmp_path):
    fabric = fabric_of("rail-3tier")
    files = placement_files(fabric)
    run = run_slurmctld(tmp_path, {"topology.conf": files["placement/topology-block.conf"]}, hosts_of(fabric),
                        plugin="topology/block")
    assert run.topology is not None, run.log
    assert run.problems() == []
    for name, fields in parse_topology_conf(files["placement/topology-block.conf"]).items():
        if name:
            assert re.search(rf"BlockName={re.escape(name)}(\s|$)", run.topology, re.MULTILINE), name


@needs_slurm
@pytest.mark.skipif(SLURM_VERSION is not None and SLURM_VERSION < (24, 5),
                    reason=f"topology/block with BlockSizes needs Slurm 24.05+ (installed: {SLURM_VERSION})")
def test_slurm_accepts_the_nvlink_domain_blocks(tmp_path):
    fabric = build_fabric(load_spec(GB300))
    files = placement_files(fabric)
    run = run_slurmctld(tmp_path, {"topology.conf": files["placement/topology-block.conf"]}, hosts_of(fabric),
                        plugin="topology/block")
    assert run.topology is not None, run.log
    assert run.problems() == []
    for d in range(16):
        assert re.search(rf"BlockName=cluster-domain{d:02d}(\s|$)", run.topology, re.MULTILINE), d


@needs_slurm
@pytest.mark.skipif(SLURM_VERSION is not None and SLURM_VERSION < (25, 5),
                    reason=f"topology.yaml needs Slurm 25.05+ (installed: {SLURM_VERSION})")
def test_slurm_accepts_topology_yaml(tmp_path):
    fabric = fabric_of("rail-3tier")
    files = placement_files(fabric)
    run = run_slurmctld(tmp_path, {"topology.yaml": files["placement/topology.yaml"]}, hosts_of(fabric),
                        plugin=None)
    assert run.topology is not None, run.log
    assert run.problems() == []


# --- Open MPI -------------------------------------------------------------------------------------


def mapped_ranks(output: str) -> dict[int, str]:
    """rank -> node of mpirun's ``--display-map`` output (each rank once)."""
    placed: dict[int, str] = {}
    node = None
    for line in output.splitlines():
        m = re.search(r"Data for node: (\S+)", line)
        if m:
            node = m.group(1)
        m = re.search(r"Process rank: (\d+)", line)
        if m:
            assert int(m.group(1)) not in placed
            placed[int(m.group(1))] = node
    return placed


def _open_mpi_major() -> int | None:
    if not _open_mpi():
        return None
    out = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Open MPI\)? (\d+)\.", out)
    return int(m.group(1)) if m else None


def usage_lines(rankfile: str) -> dict[int, list[str]]:
    """Open MPI major version -> the mpirun arguments the rankfile's usage lines give for it."""
    out = {}
    for m in re.finditer(r"^# Use \(Open MPI (\d+)\): mpirun (.*) \.\.\.$", rankfile, re.MULTILINE):
        out[int(m.group(1))] = m.group(2).split()
    return out


def test_the_rankfile_says_how_each_open_mpi_reads_it():
    files = placement_files(fabric_of("rail-2tier"))
    n = fabric_of("rail-2tier").spec.gpus
    assert usage_lines(files["placement/rankfile"]) == {
        5: ["--hostfile", "hostfile", "--map-by", "rankfile:file=rankfile", "-np", str(n)],
        4: ["--hostfile", "hostfile", "--rankfile", "rankfile", "-np", str(n)]}


@needs_open_mpi
def test_the_rankfile_usage_line_of_this_open_mpi_works(tmp_path):
    """The installed mpirun takes its version's usage line as written (run from the build's
    placement folder): Open MPI 5 maps every rank where the rankfile puts it; Open MPI 4.1 takes
    its line's options (it maps a rankfile only on the real nodes, so it shows no map here) and
    refuses Open MPI 5's form, which is why both lines are given."""
    fabric = fabric_of("rail-2tier")
    files = placement_files(fabric)
    for name in ("hostfile", "rankfile"):
        (tmp_path / name).write_text(files[f"placement/{name}"])
    major = _open_mpi_major()
    lines = usage_lines(files["placement/rankfile"])
    assert major in lines, f"the rankfile has no usage line for Open MPI {major}"
    # the head node has fewer cores than slot=S names: bind nothing, map only
    test_args = ["--allow-run-as-root", "--bind-to", "none", "--display-map", "--do-not-launch",
                 "--mca", "if_base_do_not_resolve", "1", "/bin/true"]
    run = subprocess.run([MPIRUN, *lines[major], *test_args], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    said = run.stdout + run.stderr
    assert not re.search(r"unrecognized|unknown option|deprecated", said, re.IGNORECASE), said[-3000:]
    rankfile = {int(m.group(1)): m.group(2) for m in re.finditer(r"^rank (\d+)=(\S+) slot=", files["placement/rankfile"],
                                                                   re.MULTILINE)}
    if major >= 5:
        assert run.returncode == 0, said[-3000:]
        assert mapped_ranks(run.stdout) == rankfile
        # Open MPI 4's line still works on 5, with a warning that it is deprecated
        old = subprocess.run([MPIRUN, *lines[4], *test_args], capture_output=True, text=True, timeout=120,
                             cwd=tmp_path)
        assert "Deprecated option:   rankfile" in old.stdout + old.stderr
    else:
        assert run.returncode == 0, said[-3000:]
        new = subprocess.run([MPIRUN, *lines[5], *test_args], capture_output=True, text=True, timeout=120,
                             cwd=tmp_path)
        assert "unrecognized modifier" in new.stdout + new.stderr and new.returncode != 0


@needs_open_mpi
@pytest.mark.parametrize("shape", ["rail-2tier", "rack-3tier"])
def test_open_mpi_maps_every_rank_in_order(shape, tmp_path):
    fabric = fabric_of(shape)
    files = placement_files(fabric)
    (tmp_path / "hostfile").write_text(files["placement/hostfile"])
    np_ = fabric.spec.gpus
    run = subprocess.run(
        [MPIRUN, "--allow-run-as-root", "--oversubscribe", "--hostfile", str(tmp_path / "hostfile"), "-np", str(np_),
         "--bind-to", "none", "--display-map", "--do-not-launch", "--mca", "if_base_do_not_resolve", "1", "/bin/true"],
        capture_output=True, text=True, timeout=120)
    placed: dict[int, str] = {}
    node = None
    for line in run.stdout.splitlines():
        m = re.search(r"Data for node: (\S+)", line)
        if m:
            node = m.group(1)
        m = re.search(r"Process rank: (\d+)", line)
        if m:
            assert int(m.group(1)) not in placed
            placed[int(m.group(1))] = node
    assert sorted(placed) == list(range(np_)), run.stdout[-2000:] + run.stderr[-2000:]
    rankfile = {int(m.group(1)): m.group(2) for m in re.finditer(r"^rank (\d+)=(\S+) slot=", files["placement/rankfile"],
                                                                   re.MULTILINE)}
    assert placed == rankfile
