"""Exports for other tools: the fabric graph as GraphML and Graphviz DOT, and a containerlab lab.

One module per format, each with the functions that write its files:

``graphml``
    ``graph/fabric.graphml``: the networkx graph with every attribute, written from the arrays.
``dot``
    ``graph/fabric.dot`` (every server, switch and link, while the fabric has at most
    :data:`FULL_DOT_MAX_LINKS` links: Graphviz cannot lay out larger ones) and
    ``graph/fabric-aggregate.dot`` (one vertex per group, :func:`~topo.outputs.exports.dot.aggregate`).
``containerlab``
    ``containerlab/NAME.clab.yml`` (with ``configs``, Ethernet fabrics only) and, for the ``linux``
    kind (FRR, the default), ``containerlab/daemons`` and ``containerlab/vtysh.conf``.
``errors``
    :class:`ExportError`, which they share.

:func:`export_files` returns ``{relative path: text}`` like the other renderers (only the CLI
writes files), with ``graph/fabric.svg`` (:mod:`topo.outputs.diagram`) beside them. Every file
depends only on the fabric and the arguments: the same input gives the same bytes. The file
formats are described in ``docs/exports.md``. The modules here import the design stage and
:mod:`topo.outputs.templating`, :mod:`topo.outputs.diagram`; none imports another format's module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ...fabric import ROLES, Fabric
from ...fabric import cabled_links as all_links
from ...summary import switch_breakouts as summary_breakouts
from ..diagram import fabric_svg
from .containerlab import (CLAB_BOND_OPTIONS, CLAB_KINDS, CLAB_SERVER_IMAGE, EXPORT_OUTPUTS, MAX_INTERFACE_NAME,
                           clab_image, containerlab_topology, frr_support_files, server_interface, server_interfaces,
                           switch_interfaces)
from .dot import Aggregate, Group, GroupLink, aggregate, aggregate_dot, dot_id, dot_label, full_dot
from .errors import ExportError
from .graphml import fabric_edges, fabric_graphml, graphml_text

__all__ = [
    "Aggregate", "CLAB_BOND_OPTIONS", "CLAB_KINDS", "CLAB_SERVER_IMAGE", "EXPORT_OUTPUTS", "ExportError",
    "FULL_DOT_MAX_LINKS", "Group", "GroupLink", "MAX_INTERFACE_NAME", "aggregate", "aggregate_dot", "all_links",
    "clab_image", "containerlab_topology", "dot_id", "dot_label", "export_files", "fabric_edges", "fabric_graphml",
    "frr_support_files", "full_dot", "graphml_text", "server_interface", "server_interfaces", "switch_interfaces",
]

#: The full DOT (``graph/fabric.dot``) is written for fabrics with at most this many links (16,384
#: GPUs with the default spec have 49,152); above it only the aggregate view is. ``dot -Tsvg`` lays
#: out 24,576 links in about 6 s and 49,152 in 30 to 40 s, but 196,608 (65,536 GPUs) not within
#: 7 minutes. GraphML keeps the whole graph at every size.
FULL_DOT_MAX_LINKS = 50_000


def export_files(fabric: Fabric, configs: bool = True, kind: str = "linux", image: str | None = None,
                 user_dirs: Iterable[str | Path] = ()) -> dict[str, str]:
    """Graph and lab files of a fabric, by path relative to the build folder.

    Parameters
    ----------
    fabric : Fabric
    configs : bool
        The build writes switch configs (``switches/<switch>/...``); the containerlab lab binds
        them, so without configs (``--no-configs``, or an InfiniBand switch model) it is left out.
    kind : {"linux", "sonic-vs"}
        containerlab kind of the switches: ``linux`` runs FRR with each switch's ``frr.conf``;
        ``sonic-vs`` runs SONiC's virtual switch with its ``config_db.json``.
    image : str, optional
        Container image; by default the kind's entry in :data:`CLAB_KINDS` (:func:`clab_image`: for
        ``linux``, FRR's image of the spec's ``frr_version``).
    user_dirs : iterable of path
        Template folders searched before the packaged templates (as for the configs).

    Raises
    ------
    ExportError
        For an unknown ``kind``.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 256}))
    >>> sorted(export_files(fabric))  # doctest: +NORMALIZE_WHITESPACE
    ['containerlab/cluster.clab.yml', 'containerlab/daemons', 'containerlab/vtysh.conf',
     'graph/fabric-aggregate.dot', 'graph/fabric.dot', 'graph/fabric.graphml', 'graph/fabric.svg']
    >>> sorted(export_files(fabric, configs=False))
    ['graph/fabric-aggregate.dot', 'graph/fabric.dot', 'graph/fabric.graphml', 'graph/fabric.svg']
    """
    if kind not in CLAB_KINDS:
        raise ExportError(f"unknown containerlab kind {kind!r}; choose one of {', '.join(CLAB_KINDS)}")
    chassis = [t for t in range(1, fabric.plan.tiers + 1) if fabric.tier_switch(t).chassis]
    if kind == "sonic-vs" and chassis:
        t = fabric.tier_switch(chassis[0])
        raise ExportError(f"containerlab kind sonic-vs: the {ROLES[t.tier]} tier's {t.model} is a modular chassis, "
                          f"which gets no config_db.json to boot SONiC VS from; use kind linux (FRR)")
    broken = summary_breakouts(fabric)
    if kind == "sonic-vs" and broken:
        b = broken[0]
        raise ExportError(f"containerlab kind sonic-vs: the {b['tier']}s' {b['port_gbps']}G ports are broken out into "
                          f"{b['lanes']} {b['links']} links, but SONiC VS maps one container interface (ethN) to "
                          f"each front-panel port; use kind linux (FRR)")
    files = {"graph/fabric.graphml": fabric_graphml(fabric)}
    if len(fabric.links) + _peer_count(fabric) <= FULL_DOT_MAX_LINKS:
        files["graph/fabric.dot"] = full_dot(fabric)
    files["graph/fabric-aggregate.dot"] = aggregate_dot(fabric)
    files["graph/fabric.svg"] = fabric_svg(fabric)
    if configs and fabric.ethernet:
        files[f"containerlab/{fabric.spec.name}.clab.yml"] = containerlab_topology(fabric, kind, image)
        if kind == "linux":
            files.update(frr_support_files(fabric, user_dirs))
    return files


def _peer_count(fabric: Fabric) -> int:
    return 0 if fabric.peer_links is None else len(fabric.peer_links)
