"""kubernetes/node-labels.sh of a rack-scale design: one kubectl line per node with its NVLink
domain and leaf, agreeing with the Slurm blocks and the scalable units. No Kubernetes cluster runs
here: the lines are checked against kubectl's syntax and Kubernetes' rules for label keys and values."""

from __future__ import annotations

import re
import shlex
import subprocess

from topo import build_fabric, load_spec
from topo.outputs.labels import LABEL_KEYS, node_label_files
from topo.outputs.placement import expand_hostlist, placement_facts

GB300 = dict(gpus=1152, gpus_per_node=4, nics_per_node=4, server="gb300-nvl72", nic_gbps=800,
             switch="eth-51t-64x800")
#: Kubernetes label rules: a key's prefix a DNS subdomain, its name and every value 63 characters of
#: [A-Za-z0-9_.-], starting and ending alphanumeric.
NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?")
PREFIX = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?")


def test_each_tray_has_its_domain_and_leaf():
    fabric = build_fabric(load_spec(GB300))
    text = node_label_files(fabric)["kubernetes/node-labels.sh"]
    assert subprocess.run(["sh", "-n"], input=text, text=True).returncode == 0
    lines = [line for line in text.splitlines() if line.startswith("kubectl ")]
    facts = placement_facts(fabric)
    assert len(lines) == 288
    domain_of = {h: d["name"] for d in facts["domains"] for h in d["hosts"]}
    leaf_of = {h: u["name"] for u in facts["units"] for h in expand_hostlist(u["nodes"])}
    seen = []
    for line in lines:
        words = shlex.split(line)
        assert words[:4] == ["kubectl", "label", "node", "--overwrite"]
        node, labels = words[4], dict(w.split("=", 1) for w in words[5:])
        assert labels == {LABEL_KEYS["domain"]: domain_of[node], LABEL_KEYS["leaf"]: leaf_of[node]}
        for key, value in labels.items():
            prefix, name = key.split("/")
            assert PREFIX.fullmatch(prefix) and NAME.fullmatch(name) and NAME.fullmatch(value)
        seen.append(node)
    assert seen == [h["name"] for h in facts["hosts"]]
    assert len(set(domain_of.values())) == 16


def test_three_tiers_add_the_pod():
    fabric = build_fabric(load_spec({"gpus": 288, "gpus_per_node": 4, "nics_per_node": 4, "server": "gb200-nvl72",
                                     "radix": 16, "tiers": 3}))
    text = node_label_files(fabric)["kubernetes/node-labels.sh"]
    assert f"{LABEL_KEYS['spine']}=cluster-pod00" in text


def test_no_labels_for_a_server_that_is_its_own_nvlink_domain():
    assert node_label_files(build_fabric(load_spec({"gpus": 1024}))) == {}
