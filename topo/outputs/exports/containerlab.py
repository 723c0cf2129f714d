"""The containerlab lab (``containerlab/NAME.clab.yml``, with ``containerlab/daemons`` and
``containerlab/vtysh.conf`` for the ``linux`` kind): the switches as containerlab nodes bound to
their generated configs, cabled port for port as the configs say (with dual-ToR the peer links
too, and with the ``linux`` kind the servers, each NIC's bond over its two member links).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np

from ... import __version__
from ...addressing import bond_name, ip_text, server_block_size
from ...fabric import ROLES, Fabric, switch_port_names
from ...fabric import cabled_links as all_links
from ..templating import render_template, template_environment
from .errors import ExportError

#: containerlab node kinds: default image and what each switch's container is given. The FRR
#: image's tag is the spec's ``frr_version``, the release the configs are written for (their
#: ``frr version`` line): :func:`clab_image`.
CLAB_KINDS = {
    "linux": "quay.io/frrouting/frr:{frr_version}",
    "sonic-vs": "docker-sonic-vs:latest",
}
#: Image of the server containers of a dual-ToR lab (``linux`` kind): containerlab's usual test
#: client, with iproute2 for the bonds.
CLAB_SERVER_IMAGE = "ghcr.io/srl-labs/network-multitool"
#: Linux bond options of a dual-ToR NIC in the lab: LACP (802.3ad) towards the MCLAG pair.
CLAB_BOND_OPTIONS = "mode 802.3ad miimon 100 xmit_hash_policy layer3+4"
#: Linux caps interface names at 15 characters (containerlab renames a veth only when it fits).
MAX_INTERFACE_NAME = 15

#: Outputs made from templates (path, template, what for); :func:`topo.outputs.readme.all_outputs` lists them all.
EXPORT_OUTPUTS = (
    ("containerlab/daemons", "exports/daemons.j2", "the containerlab lab (linux kind)"),
    ("containerlab/vtysh.conf", "exports/vtysh.conf.j2", "the containerlab lab (linux kind)"),
)


def switch_interfaces(fabric: Fabric, kind: str = "linux",
                      port_names: tuple[list[str], list[str]] | None = None) -> list[tuple[str, str, str, str]]:
    """Every switch-to-switch link as (lower switch, its interface, upper switch, its interface).

    ``linux`` uses the configs' SONiC/FRR port names (``Ethernet0``, ``Ethernet8``, ...), which a
    Linux container takes as its interface names; ``sonic-vs`` uses ``ethN`` for front-panel port
    N, which SONiC's virtual switch maps to its own ports. Links in row order, then a dual-ToR
    fabric's peer links, a leaf to b leaf on the same whole (not broken-out) ports: ports 63 and 64
    of a 64-port leaf of 4 lanes a port are ``Ethernet248`` and ``Ethernet252`` on both.
    ``port_names``: :func:`~topo.fabric.switch_port_names` of the cabled links, if already made.
    """
    return list(zip(*_switch_ends(fabric, kind, port_names)))


def _switch_ends(fabric: Fabric, kind: str,
                 port_names: tuple[list[str], list[str]] | None) -> tuple[list[str], ...]:
    """:func:`switch_interfaces` as four columns (lower switch, its interface, upper switch, its
    interface), the interface names checked."""
    links = all_links(fabric)
    rows = np.flatnonzero(links.kind >= 1)
    if kind == "sonic-vs":  # whole ports only (a fabric with broken-out switch ports is refused)
        lo_name = [f"eth{p}" for p in links.lo_port[rows].tolist()]
        hi_name = [f"eth{p}" for p in links.hi_port[rows].tolist()]
    else:
        lo_all, hi_all = port_names or switch_port_names(fabric, links)
        pick = rows.tolist()
        lo_name, hi_name = [lo_all[r] for r in pick], [hi_all[r] for r in pick]
    _check_interface_names(lo_name, hi_name)
    names = _name_array(fabric)
    return names[links.lo[rows]].tolist(), lo_name, names[links.hi[rows]].tolist(), hi_name


def _name_array(fabric: Fabric) -> np.ndarray:
    """The fabric's vertex names as an object array, to pick many at once by index."""
    names = np.empty(len(fabric.names), dtype=object)
    names[:] = fabric.names
    return names


def _check_interface_names(*columns: list[str]) -> None:
    longest = max((len(n) for column in columns for n in set(column)), default=0)
    if longest > MAX_INTERFACE_NAME:
        raise ExportError(f"interface names of up to {longest} characters exceed Linux's "
                          f"{MAX_INTERFACE_NAME}; containerlab cannot create them")


def server_interface(link: int) -> str:
    """A server container's interface for its server link ``link`` (``lo_port``): ``eth{link + 1}``
    (containerlab keeps ``eth0`` for management). With dual-ToR, link ``2r + m`` is member ``m`` of
    NIC ``r``'s bond: ``eth1`` and ``eth2`` are NIC 0's members, to its a and b leaf.

    >>> [server_interface(r * 2 + m) for r in (0, 3) for m in (0, 1)]
    ['eth1', 'eth2', 'eth7', 'eth8']
    """
    return f"eth{link + 1}"


def server_interfaces(fabric: Fabric) -> list[tuple[str, str, str, str]]:
    """Dual-ToR: every server link as (server, its interface, leaf, its interface), in row order;
    empty without dual-ToR (a lab of single-homed servers is left to the user).

    The server end is :func:`server_interface` of the link's ``lo_port`` (``r * 2 + m``); the leaf
    end is the configs' name of the broken-out down port lane (``fabric.port_names``, with the
    plan's breakout): both members of a NIC have the same name on the two leaves.
    """
    return list(zip(*_server_ends(fabric)))


def _server_ends(fabric: Fabric) -> tuple[list[str], ...]:
    """:func:`server_interfaces` as four columns (server, its interface, leaf, its interface)."""
    if fabric.plan.homes != 2:
        return [], [], [], []
    links = fabric.links
    rows = np.flatnonzero(links.kind == 0)
    server_name = [server_interface(nic) for nic in links.lo_port[rows].tolist()]
    leaf_name = fabric.port_names.names(1, links.hi_port[rows], links.lane[rows], fabric.plan.breakout)
    _check_interface_names(server_name, leaf_name)
    names = _name_array(fabric)
    return names[links.lo[rows]].tolist(), server_name, names[links.hi[rows]].tolist(), leaf_name


def _server_commands(fabric: Fabric) -> dict[int, list[str]]:
    """Dual-ToR, per server vertex: the ``exec:`` commands that bond each NIC's two member links
    (LACP towards the leaf pair) and give the bond its address in the pair's subnet, as
    ``fabric.addressing.link_ip`` has it (the same on both members)."""
    links = fabric.links
    rows = np.flatnonzero(links.kind == 0)
    rows = rows[np.lexsort((links.lo_port[rows], links.lo[rows]))]
    member0 = rows[links.lo_port[rows] % 2 == 0]
    ips = ip_text(fabric.addressing.link_ip[member0])
    prefix = 33 - server_block_size(fabric.plan).bit_length()
    out: dict[int, list[str]] = {}
    for server, port, ip in zip(links.lo[member0].tolist(), links.lo_port[member0].tolist(), ips):
        bond = bond_name(port // 2)
        commands = out.setdefault(server, [])
        commands.append(f"ip link add {bond} type bond {CLAB_BOND_OPTIONS}")
        for member in (port, port + 1):
            eth = server_interface(member)
            commands += [f"ip link set {eth} down", f"ip link set {eth} master {bond}"]
        commands += [f"ip address add {ip}/{prefix} dev {bond}", f"ip link set {bond} up"]
    return out


def _lab_address_lines(fabric: Fabric, port_names: tuple[list[str], list[str]]) -> tuple[np.ndarray, list[str]]:
    """The ``exec:`` lines that give the switches' Linux containers their addresses, as (switch
    vertex of each line, the lines): each switch's loopback, and with numbered links each
    switch-to-switch /31 (the upper end even, the lower end odd), as the switch's config_db.json
    sets them on SONiC. A switch's lines in that order: its loopback, then its links in row order.
    ``port_names``: the cabled links' :func:`~topo.fabric.switch_port_names` (``fabric.links``
    come first in them)."""
    links, addressing = fabric.links, fabric.addressing
    first = fabric.first(1)
    vertex = [np.arange(first, len(fabric.names))]
    lines = [f'        - "ip address add {ip}/32 dev lo"\n' for ip in ip_text(addressing.loopback[first:])]
    if not fabric.spec.unnumbered:
        rows = np.flatnonzero(links.kind >= 1)
        lo_name, hi_name = port_names
        pick = rows.tolist()
        even = [f'        - "ip address add {ip}/31 dev {hi_name[r]}"\n'
                for ip, r in zip(ip_text(addressing.link_ip[rows]), pick)]
        odd = [f'        - "ip address add {ip}/31 dev {lo_name[r]}"\n'
               for ip, r in zip(ip_text(addressing.link_ip[rows] + 1), pick)]
        both = [""] * (2 * len(pick))  # each link's upper end, then its lower end
        both[0::2], both[1::2] = even, odd
        lines += both
        vertex.append(np.column_stack((links.hi[rows], links.lo[rows])).ravel())
    return np.concatenate(vertex), lines


def _switch_nodes(fabric: Fabric, kind: str, port_names: tuple[list[str], list[str]] | None) -> list[str]:
    """The ``nodes:`` entries of the switches, in vertex order: each one's group and binds, and
    for a Linux container the ``exec:`` lines that set its addresses (:func:`_lab_address_lines`)."""
    first = fabric.first(1)
    names, roles = fabric.names[first:], [ROLES[t] for t in fabric.tier[first:].tolist()]
    if kind != "linux":
        return [f"    {sw}:\n      group: {role}\n      binds:\n"
                f'        - "../switches/{sw}/config_db.json:/var/sonic/config_db.json"\n'
                f'        - "../switches/{sw}/frr.conf:/etc/frr/frr.conf"\n' for sw, role in zip(names, roles)]
    # SONiC sets the addresses on a switch (config_db.json); in a Linux container the lab does
    heads = [f"    {sw}:\n      group: {role}\n      binds:\n"
             f'        - "../switches/{sw}/frr.conf:/etc/frr/frr.conf"\n'
             '        - "daemons:/etc/frr/daemons"\n'
             '        - "vtysh.conf:/etc/frr/vtysh.conf"\n'
             "      exec:\n" for sw, role in zip(names, roles)]
    vertex, lines = _lab_address_lines(fabric, port_names)
    every = np.empty(len(heads) + len(lines), dtype=object)
    every[:len(heads)], every[len(heads):] = heads, lines
    # each switch's head, then its lines in the order made: a stable sort by vertex
    order = np.argsort(np.concatenate((np.arange(first, len(fabric.names)), vertex)), kind="stable")
    return every[order].tolist()


def clab_image(fabric: Fabric, kind: str = "linux") -> str:
    """The default container image of the lab's switches: for ``linux``, FRR's image of the spec's
    ``frr_version`` (``quay.io/frrouting/frr:10.5.4`` by default), the release every ``frr.conf``
    names, so the lab runs the FRR the configs are written for.

    >>> from topo import build_fabric, load_spec
    >>> clab_image(build_fabric(load_spec({"gpus": 256, "frr_version": "10.3"})))
    'quay.io/frrouting/frr:10.3'
    """
    return CLAB_KINDS[kind].format(frr_version=fabric.spec.frr_version)


def containerlab_topology(fabric: Fabric, kind: str = "linux", image: str | None = None) -> str:
    """The containerlab topology (``containerlab/NAME.clab.yml``) of the fabric's switches.

    One group per switch role sets the kind and image; each switch binds its generated config by
    a path relative to the ``containerlab`` folder (``../switches/<switch>/...``); each
    switch-to-switch link is one ``endpoints`` pair with the interface names the configs use.
    Servers are left out, except with dual-ToR and the ``linux`` kind: then every server is a
    ``linux`` node of :data:`CLAB_SERVER_IMAGE` (group ``node``) whose ``exec:`` list bonds each
    NIC's two links, and both member links of every NIC are cabled (:func:`server_interfaces`),
    before the switch-to-switch links; a dual-ToR fabric's peer links come last. Written as text
    (a fixed, simple layout), one node bind or link per line.
    """
    if kind not in CLAB_KINDS:
        raise ExportError(f"unknown containerlab kind {kind!r}; choose one of {', '.join(CLAB_KINDS)}")
    image = image or clab_image(fabric, kind)
    name = fabric.spec.name
    first_switch = fabric.first(1)
    switches = len(fabric.names) - first_switch
    servers = fabric.plan.homes == 2 and kind == "linux"  # dual-ToR: the servers and their bonds too
    roles = [ROLES[t] for t in range(1, fabric.plan.tiers + 1)]
    what = "FRR in Linux containers" if kind == "linux" else "SONiC virtual switches"
    whom = f"{switches:,} switches and {first_switch:,} servers" if servers else f"{switches:,} switches"
    out = [
        f"# containerlab lab of the {whom} of {name} ({what}), cabled as the configs in\n",
        f"# ../switches/ say. Written by topo {__version__}. Deploy from this folder:\n",
        f"#   containerlab deploy -t {name}.clab.yml\n",
        f"name: {json.dumps(name)}\n",
        "topology:\n",
        "  groups:\n",
    ]
    if servers:
        out.append(f"    {ROLES[0]}:\n      kind: \"linux\"\n      image: {json.dumps(CLAB_SERVER_IMAGE)}\n")
    for role in roles:
        out.append(f"    {role}:\n      kind: {json.dumps(kind)}\n      image: {json.dumps(image)}\n")
        if kind == "linux":
            out.append("      sysctls:\n"
                       "        net.ipv4.ip_forward: 1\n"
                       "        net.ipv6.conf.all.forwarding: 1\n")
    out.append("  nodes:\n")
    if servers:
        for v, commands in sorted(_server_commands(fabric).items()):
            out.append(f"    {fabric.names[v]}:\n      group: {ROLES[0]}\n      exec:\n")
            out.extend(f'        - "{c}"\n' for c in commands)
    # the SONiC names of every cabled link's ports, made once for the addresses and the links
    port_names = switch_port_names(fabric, all_links(fabric)) if kind == "linux" else None
    out += _switch_nodes(fabric, kind, port_names)
    ends = [_server_ends(fabric)] if servers else []
    ends.append(_switch_ends(fabric, kind, port_names))
    if any(column for column, *_ in ends):
        out.append("  links:\n")
        for a, ia, b, ib in ends:
            out += [f'    - endpoints: ["{x}:{ix}", "{y}:{iy}"]\n' for x, ix, y, iy in zip(a, ia, b, ib)]
    return "".join(out)


def frr_support_files(fabric: Fabric, user_dirs: Iterable[str | Path] = ()) -> dict[str, str]:
    """``containerlab/daemons`` (bgpd on; bfdd when the spec enables BFD) and
    ``containerlab/vtysh.conf``, from the templates in ``templates/exports``."""
    env = template_environment(user_dirs)
    context = {"bfd": bool(fabric.spec.bfd), "name": fabric.spec.name, "version": __version__}
    return {path: render_template(env, template, context) for path, template, _ in EXPORT_OUTPUTS}
