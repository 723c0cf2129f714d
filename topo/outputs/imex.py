"""The NVIDIA IMEX daemon's node list of each NVLink domain of a rack-scale design.

Multi-node NVLink (an NVL72 rack's 18 compute trays in one NVLink domain) needs the IMEX service
(``nvidia-imex``) on every tray of the domain, and each instance reads the list of the domain's
instances from ``IMEX_NODE_CONFIG_FILE`` (``/etc/nvidia-imex/nodes_config.cfg`` by default): one IP
address a line, the same list on every tray of the domain. :func:`imex_files` writes

``imex/<domain>/nodes_config.cfg``
    the addresses of the domain's trays, in placement order, from ``imex/nodes_config.cfg.j2``.

A domain is :func:`topo.outputs.placement.nvlink_domains`'s (the same as the Slurm block of that
name). A tray's address is the one it is known by in ``hosts/addresses.csv``: the address of its
NIC 0 (the rail-0 NIC, or with dual-ToR its bond), which the fabric routes to every other tray.
Only Ethernet fabrics have addresses (topo assigns none on InfiniBand), and only rack-scale
profiles have domains of several servers: otherwise there are no IMEX files.
"""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

from .. import __version__
from ..fabric import Fabric
from .configs.hosts import host_addresses_csv
from .placement import nvlink_domains, placement_order
from .templating import render_template, template_environment

if TYPE_CHECKING:
    import jinja2

    from ..hardware.servers import ServerProfile

#: The templated output of this module: (output path, template, rendered for).
IMEX_OUTPUTS = (("imex/<domain>/nodes_config.cfg", "imex/nodes_config.cfg.j2", "each NVLink domain"),)


def tray_addresses(fabric: Fabric) -> dict[str, str]:
    """Node name -> the address it is known by in ``hosts/addresses.csv`` (its NIC 0's, no prefix).

    >>> from topo import build_fabric, load_spec
    >>> tray_addresses(build_fabric(load_spec({"gpus": 16})))
    {'cluster-node0000': '10.128.0.1', 'cluster-node0001': '10.128.0.3'}
    """
    rows = csv.DictReader(io.StringIO(host_addresses_csv(fabric)))
    return {row["node"]: row["address"].split("/")[0] for row in rows if row["nic"] == "0"}


def imex_files(fabric: Fabric, server: "ServerProfile | None" = None,
               env: "jinja2.Environment | None" = None) -> dict[str, str]:
    """``imex/<domain>/nodes_config.cfg`` of every NVLink domain, by relative path; none for a profile
    whose NVLink domain is one server, or for a fabric without addresses (InfiniBand).

    ``server`` is the build's server profile (default: the spec's); ``env`` a template environment
    (default: the packaged templates). Same fabric, same bytes.

    >>> from topo import build_fabric, load_spec
    >>> files = imex_files(build_fabric(load_spec({"gpus": 144, "gpus_per_node": 4, "nics_per_node": 4,
    ...                                            "server": "gb200-nvl72"})))
    >>> sorted(files)
    ['imex/cluster-domain00/nodes_config.cfg', 'imex/cluster-domain01/nodes_config.cfg']
    >>> files['imex/cluster-domain01/nodes_config.cfg'].splitlines()[:2]
    ['10.128.0.37', '10.128.0.39']
    """
    if not fabric.ethernet:
        return {}
    domains = nvlink_domains(fabric, server, placement_order(fabric))
    if not domains:
        return {}
    addresses = tray_addresses(fabric)
    env = env or template_environment()
    files = {}
    for domain in domains:
        context = {"version": __version__, "name": fabric.spec.name,
                   "domain": {**domain, "addresses": [addresses[h] for h in domain["hosts"]]}}
        files[f"imex/{domain['name']}/nodes_config.cfg"] = render_template(env, "imex/nodes_config.cfg.j2", context)
    return files
