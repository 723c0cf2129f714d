"""The servers' side of the configs: ``hosts/roce-qos.sh`` (the RoCE QoS of a node, from
``templates/host/``) and ``hosts/addresses.csv`` (every NIC's address, gateway and leaf port).
"""

from __future__ import annotations

import csv
import io
import ipaddress
from typing import Any

import numpy as np

from ... import __version__
from ...addressing import bond_name, ip_text, member_port, pair_gateway, rdma_device, server_block_size
from ...fabric import Fabric
from ..templating import render_template
from .systems import HOST_OUTPUTS

def host_addresses_csv(fabric: Fabric) -> str:
    """One row per server NIC: node, NIC, RDMA device, address/31, gateway, leaf and its port.

    With dual-ToR, one row per NIC too, in another layout (:data:`DUAL_TOR_ADDRESS_COLUMNS`): its
    bond, the bond's address in the pair subnet and the pair's gateway, and both member ports with
    their leaf and leaf port (:func:`dual_tor_addresses_csv`).
    """
    if fabric.plan.homes == 2:
        return dual_tor_addresses_csv(fabric)
    links = fabric.links
    rows = np.flatnonzero(links.kind == 0)
    base = fabric.addressing.link_ip[rows]
    nic_ip = ip_text(base + 1)
    gateway = ip_text(base)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["node", "nic", "rdma_device", "address", "gateway", "leaf", "leaf_port"])
    names = fabric.names
    nic = links.lo_port[rows].tolist()
    device = [rdma_device(r) for r in range(max(nic, default=-1) + 1)]  # each NIC port's, made once
    writer.writerows(zip(
        [names[v] for v in links.lo[rows].tolist()], nic, [device[r] for r in nic], [ip + "/31" for ip in nic_ip],
        gateway, [names[v] for v in links.hi[rows].tolist()],
        fabric.port_names.names(1, links.hi_port[rows], links.lane[rows], fabric.plan.breakout)))
    return out.getvalue()


#: Columns of a dual-ToR ``hosts/addresses.csv``: member ``a`` (port 1) goes to the pair's a leaf,
#: member ``b`` (port 2) to its b leaf.
DUAL_TOR_ADDRESS_COLUMNS = ("node", "nic", "rdma_device", "bond", "address", "gateway",
                            "member_a", "leaf_a", "leaf_a_port", "member_b", "leaf_b", "leaf_b_port")


def dual_tor_addresses_csv(fabric: Fabric) -> str:
    """One row per NIC of a dual-ToR fabric, by node then NIC: its RoCE LAG device (``mlx5_bond_r``),
    bond (``bond<r>``), the bond's address with the pair subnet's prefix, the pair's gateway (the
    subnet's first address), and each member port (``mlx5_bond_r/p1``, ``/p2``) with its leaf and
    SONiC port name (the same on both leaves).

    >>> from topo import build_fabric, load_spec
    >>> print(dual_tor_addresses_csv(build_fabric(load_spec({"gpus": 256, "dual_tor": True}))).splitlines()[1])
    cluster-node0000,0,mlx5_bond_0,bond0,10.128.0.2/25,10.128.0.1,mlx5_bond_0/p1,cluster-leaf-su00-r0a,Ethernet0,mlx5_bond_0/p2,cluster-leaf-su00-r0b,Ethernet0
    """
    links = fabric.links
    rows = np.flatnonzero(links.kind == 0)
    nic_of = links.lo.astype(np.int64)[rows] * fabric.plan.nic_rails + links.lo_port[rows] // 2
    order = np.lexsort((links.lo_port[rows] % 2, nic_of))  # by node, NIC, then member
    a, b = rows[order[0::2]], rows[order[1::2]]
    assert (links.lo_port[a] % 2 == 0).all() and (links.lo_port[b] == links.lo_port[a] + 1).all()
    address = fabric.addressing.link_ip[a]
    size = server_block_size(fabric.plan)
    host_pool = int(ipaddress.IPv4Network(fabric.spec.host_pool).network_address)
    block = host_pool + (address - host_pool) // size * size

    def ports(r: np.ndarray) -> list[str]:
        return fabric.port_names.names(1, links.hi_port[r], links.lane[r], fabric.plan.breakout)

    nic = (links.lo_port[a] // 2).tolist()
    names = fabric.names
    prefix = f"/{33 - size.bit_length()}"
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(DUAL_TOR_ADDRESS_COLUMNS)
    rails = range(fabric.plan.nic_rails)  # the names of each NIC index, made once
    device, bond = [rdma_device(r, bonded=True) for r in rails], [bond_name(r) for r in rails]
    port_a, port_b = [member_port(r, 0) for r in rails], [member_port(r, 1) for r in rails]
    writer.writerows(zip(
        [names[v] for v in links.lo[a].tolist()], nic, [device[r] for r in nic], [bond[r] for r in nic],
        [ip + prefix for ip in ip_text(address)], ip_text(pair_gateway(block)),
        [port_a[r] for r in nic], [names[v] for v in links.hi[a].tolist()], ports(a),
        [port_b[r] for r in nic], [names[v] for v in links.hi[b].tolist()], ports(b)))
    return out.getvalue()


def host_node_facts(fabric: Fabric) -> dict[str, Any]:
    """The ``node`` facts of ``host/roce-qos.sh.j2``: counts and RDMA devices; with dual-ToR the
    devices are the bonds' RoCE LAG devices, and ``bonds`` names the bonds (NIC order)."""
    spec = fabric.spec
    dual = fabric.plan.homes == 2
    return {"gpus": spec.gpus_per_node, "nics": spec.nic_ports,
            "rdma_devices": [rdma_device(i, bonded=dual) for i in range(spec.nic_ports)],
            "dual_tor": dual, "bonds": [bond_name(i) for i in range(spec.nic_ports)] if dual else []}


def host_files(fabric: Fabric, env: Any, shared: dict[str, Any]) -> list[tuple[str, str]]:
    """The servers' QoS script and address table, as ``(path, text)``."""
    node = host_node_facts(fabric)
    (path, template, _), = HOST_OUTPUTS
    return [(path, render_template(env, template, {"fabric": shared, "node": node, "version": __version__})),
            ("hosts/addresses.csv", host_addresses_csv(fabric))]
