"""Kubernetes node labels of a rack-scale design: where each compute tray sits, for topology-aware
scheduling (Kueue's ``Topology`` levels, KAI Scheduler, Topograph's consumers).

:func:`node_label_files` writes, for a rack-scale server profile (an NVL72 tray) only,

``kubernetes/node-labels.sh``
    one ``kubectl label node --overwrite NODE KEY=VALUE ...`` line per node, in placement order, from
    ``kubernetes/node-labels.sh.j2``: its NVLink domain (which is its rack), its leaf (the scalable
    unit's rail leaves, or the rack's ToR leaf) and, in three tiers with pods, its pod's spines.

The label keys are those NVIDIA's Topograph writes (``network.topology.nvidia.com/accelerator``,
``/leaf``, ``/spine``), so that a Kueue ``Topology`` or a KAI Scheduler topology that names them works
on nodes labelled by either; :data:`LABEL_KEYS` lists them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import __version__
from ..fabric import Fabric
from .placement import placement_facts
from .templating import render_template, template_environment

if TYPE_CHECKING:
    import jinja2

    from ..hardware.servers import ServerProfile

#: The templated output of this module: (output path, template, rendered for).
LABEL_OUTPUTS = (("kubernetes/node-labels.sh", "kubernetes/node-labels.sh.j2", "the Kubernetes scheduler"),)
#: Label keys: the NVLink domain (an NVL72 rack), the leaf, the spine (Topograph's names).
LABEL_KEYS = {"domain": "network.topology.nvidia.com/accelerator", "leaf": "network.topology.nvidia.com/leaf",
              "spine": "network.topology.nvidia.com/spine"}


def node_labels(fabric: Fabric, server: "ServerProfile | None" = None) -> list[dict[str, Any]]:
    """Each node's labels in placement order: ``name`` and ``labels`` (key -> value, in the order
    domain, leaf, spine); empty for a profile whose NVLink domain is one server.

    >>> from topo import build_fabric, load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 144, "gpus_per_node": 4, "nics_per_node": 4,
    ...                                  "server": "gb200-nvl72"}))
    >>> node_labels(fabric)[18]["labels"]
    {'network.topology.nvidia.com/accelerator': 'cluster-domain01', 'network.topology.nvidia.com/leaf': 'cluster-su00'}
    """
    p = placement_facts(fabric, server)
    if not p["domains"]:
        return []
    domain_of = {h: d["name"] for d in p["domains"] for h in d["hosts"]}
    pod_of = {u["name"]: pod["name"] for pod in p["pods"]
              for u in p["units"] if u["pod"] == pod["index"]} if p["pod_level"] else {}
    out = []
    for unit in p["units"]:
        for host in unit["hosts"]:
            labels = {LABEL_KEYS["domain"]: domain_of[host["name"]], LABEL_KEYS["leaf"]: unit["name"]}
            if unit["name"] in pod_of:
                labels[LABEL_KEYS["spine"]] = pod_of[unit["name"]]
            out.append({"name": host["name"], "labels": labels})
    return out


def node_label_files(fabric: Fabric, server: "ServerProfile | None" = None,
                     env: "jinja2.Environment | None" = None) -> dict[str, str]:
    """``kubernetes/node-labels.sh`` of a rack-scale design, else nothing. Same fabric, same bytes."""
    nodes = node_labels(fabric, server)
    if not nodes:
        return {}
    context = {"version": __version__, "name": fabric.spec.name, "nodes": nodes, "keys": LABEL_KEYS,
               "spine": any(LABEL_KEYS["spine"] in n["labels"] for n in nodes)}
    env = env or template_environment()
    return {path: render_template(env, template, context) for path, template, _ in LABEL_OUTPUTS}
