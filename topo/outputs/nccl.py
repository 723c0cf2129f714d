"""NCCL files for the fabric's server type: the topology XML and the NCCL environment.

:func:`nccl_files` writes, for the spec's server profile (:mod:`topo.hardware.servers`):

``nccl/<profile>-topo.xml``
    the topology file NCCL loads from ``NCCL_TOPO_FILE``: CPUs, PCIe switches, and under each
    switch the GPUs and the fabric NICs of their rails, with ``rail="r"`` on NIC ``r``'s ``<net>``.
``nccl/<profile>.env``
    ``KEY=VALUE`` lines (``/etc/nccl.conf`` format): ``NCCL_TOPO_FILE``, ``NCCL_IB_HCA`` in rail
    order, ``NCCL_CROSS_NIC``, ``NCCL_IB_QPS_PER_CONNECTION`` from the congestion analysis, and
    ``NCCL_IB_TC`` / ``NCCL_SOCKET_IFNAME`` where they apply, and for a rack-scale profile (an NVL72
    compute tray, whose NVLink domain spans the rack) ``NCCL_MNNVL_ENABLE=1`` and, where the domain's
    NVSwitches run NVLink SHARP, ``NCCL_NVLS_ENABLE=1`` (:func:`mnnvl_facts`). Rendered from
    ``nccl/nccl.env.j2``.

With dual-ToR the NCCL devices are the NICs' bonds: NIC ``r`` is the RoCE LAG device
``mlx5_bond_r`` (:func:`bonded_profile`), one ``<net>`` per NIC at the NIC's whole speed (both of its
links), and ``NCCL_IB_HCA`` lists the bonds.

The XML is written in Python, line by line, exactly as NCCL's own writer does
(:func:`topo.outputs.nccl_xml.dump_xml`). A template would only loop, and a user override could
break rules NCCL's parser enforces; the values come from the profile, which users control. Every
file is read back with NCCL's rules (:func:`topo.outputs.nccl_xml.check_topology`) before it is
returned.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..addressing import rdma_device
from ..errors import SpecError
from ..fabric import Fabric
from ..spec import DUAL_TOR_QPS
from ..hardware.catalog import check_server, resolve_server
from ..hardware.racks import trays_per_rack
from ..hardware.nvlink import NVSWITCH_CLASS
from ..hardware.servers import ServerProfile
from .nccl_xml import TOPO_XML_MAX_NODES, NcclXmlError, XmlElement, check_topology, dump_xml
from ..qos import QOS_PROFILES
from .templating import render_template, template_environment

if TYPE_CHECKING:
    import jinja2

    from ..analysis.analyze import Analysis

#: The templated output of this module: (output path, template, rendered for).
NCCL_OUTPUTS = (("nccl/<server>.env", "nccl/nccl.env.j2", "the server type"),)

#: Where the topology file is installed unless told otherwise.
DEFAULT_INSTALL_DIR = "/etc/nccl"
#: NCCL_IB_QPS_PER_CONNECTION takes 1 to 128.
MAX_NCCL_QPS = 128
#: Placeholder target of NVLinks to the NVSwitch fabric (the target is not read for that class).
NVSWITCH_TARGET = "fffffff:ff:ff.0"
#: PCI classes topo writes.
SWITCH_CLASS = "0x060400"
GPU_CLASS = "0x030200"
IB_NIC_CLASS = "0x020700"
ETHERNET_NIC_CLASS = "0x020000"


def max_detected_nvlinks(sm: int | None) -> int:
    """The most ``<nvlink>`` elements NCCL adds under a ``<gpu>`` that the file gives none.

    NCCL then asks NVML about each of the GPU's links (4 below sm 70, 6 below 80, 12 below 90, else
    18; none below 60) and adds one ``<nvlink>`` per distinct peer (``ncclTopoGetXmlFromGpu`` in
    xml.cc): 4 per H100 of an HGX board (its 4 NVSwitches), 6 per A100, and up to one per link when
    every link reaches another NVSwitch (18 on GB200 NVL72). A GPU without ``sm`` may be any model: 18.

    >>> max_detected_nvlinks(None), max_detected_nvlinks(80), max_detected_nvlinks(90), max_detected_nvlinks(52)
    (18, 12, 18, 0)
    """
    if sm is None:
        return 18
    return 0 if sm < 60 else 4 if sm < 70 else 6 if sm < 80 else 12 if sm < 90 else 18


def detected_elements(profile: ServerProfile) -> tuple[int, int]:
    """The most elements NCCL adds to a profile's topology when it loads it: (``<nvlink>``, ``<c2c>``).

    Each local rank fills in its own GPU and the ranks' trees are fused into one buffer of
    TOPO_XML_MAX_NODES elements (topo.cc ``ncclTopoGetSystem``), so every GPU's additions count:
    the NVLinks of a GPU the file gives none (:func:`max_detected_nvlinks`), and one ``<c2c>`` for a
    GPU of sm 90 or later (or unknown) on an arm64 (Grace) CPU, where NVML reports C2C links.
    Everything else NCCL fills in is attributes, not elements. NVSwitches become one NVS node of
    NCCL's graph, not XML elements.

    >>> from topo.hardware.catalog import server_profiles
    >>> from topo.hardware.profiles import generic_profile
    >>> detected_elements(server_profiles()["hgx-h100-8nic"]), detected_elements(generic_profile(8, 8, 400))
    ((0, 0), (144, 0))
    """
    nvlinks = c2cs = 0
    for cpu in profile.cpus:
        for sw in cpu.switches:
            for gpu in sw.gpus:
                nvlinks += 0 if gpu.nvlink else max_detected_nvlinks(gpu.sm)
                c2cs += cpu.arch == "arm64" and (gpu.sm is None or gpu.sm >= 90)
    return nvlinks, c2cs


def _attrs(**values: Any) -> list[tuple[str, str]]:
    """Attributes in the given order, skipping None; integers in plain decimal (never zero-padded)."""
    return [(key, str(value)) for key, value in values.items() if value is not None]


def topology_element(profile: ServerProfile, nic_class: str = IB_NIC_CLASS) -> XmlElement:
    """The ``<system>`` tree of a server profile (what :func:`topology_xml` prints).

    Attribute order follows NCCL's dumps. Every attribute NCCL would fill in from the host when
    missing on a node that several ranks share (CPU model and mask, switch ids, link speed and
    width) is in the file, so that all local ranks' copies stay identical and fuse into one.
    """
    system = XmlElement("system", _attrs(version=1))
    for cpu in profile.cpus:
        c = system.append(XmlElement("cpu", _attrs(
            numaid=cpu.numaid, affinity=cpu.affinity, arch=cpu.arch, vendor=cpu.vendor,
            familyid=cpu.familyid, modelid=cpu.modelid)))
        for sw in cpu.switches:
            s = c.append(XmlElement("pci", _attrs(busid=sw.busid, **{"class": SWITCH_CLASS},
                                                  link_speed=sw.link_speed, link_width=sw.link_width)
                                    + list(sw.ids)))
            for gpu in sw.gpus:
                p = s.append(XmlElement("pci", _attrs(busid=gpu.busid, **{"class": GPU_CLASS},
                                                      link_speed=gpu.link_speed, link_width=gpu.link_width)))
                g = p.append(XmlElement("gpu", _attrs(dev=gpu.dev, sm=gpu.sm, gdr=gpu.gdr)))
                if gpu.nvlink:
                    g.append(XmlElement("nvlink", _attrs(target=NVSWITCH_TARGET, count=gpu.nvlink,
                                                         tclass=NVSWITCH_CLASS)))
            for nic in sw.nics:
                p = s.append(XmlElement("pci", _attrs(busid=nic.busid, **{"class": nic.pci_class or nic_class},
                                                      link_speed=nic.link_speed, link_width=nic.link_width)))
                n = p.append(XmlElement("nic"))
                n.append(XmlElement("net", _attrs(name=nic.name, dev=nic.rail, speed=nic.speed_mbps,
                                                  port=nic.port, guid=nic.guid, gdr=nic.gdr, rail=nic.rail)))
    return system


def topology_xml(profile: ServerProfile, nic_class: str = IB_NIC_CLASS,
                 comments: tuple[str, ...] | None = None) -> str:
    """The NCCL topology file of a server profile.

    >>> from topo.outputs.nccl_xml import read_nccl_topology
    >>> from topo.hardware.catalog import server_profiles
    >>> text = topology_xml(server_profiles()["hgx-h100-8nic"])
    >>> read_nccl_topology(text).elements, check_topology(text)
    (59, [])
    """
    if comments is None:
        comments = _xml_comments(profile)
    return dump_xml(topology_element(profile, nic_class), comments)


#: NIC names a dual-ToR build replaces with the bond's RoCE LAG device: the kernel's names of single
#: ports (``mlx5_<n>``), which the ports of a bonded NIC no longer have.
PORT_DEVICE_RE = re.compile(r"mlx5_[0-9]+")


def bonded_profile(profile: ServerProfile) -> ServerProfile:
    """The profile as NCCL sees a dual-ToR server: each NIC's two ports are bonded, so its RDMA
    device is the RoCE LAG device ``mlx5_bond_<rail>`` (port 1), at the NIC's speed (both links).

    A NIC named ``mlx5_<n>`` (the default name) is renamed; another name (``mlx5_bond_3`` as the
    host has it, say) is the profile's to give and is kept.

    >>> from topo.hardware.catalog import server_profiles
    >>> [(n.name, n.port, n.speed_mbps) for n in bonded_profile(server_profiles()["hgx-h100-8nic"]).nics[:2]]
    [('mlx5_bond_0', 1, 400000), ('mlx5_bond_1', 1, 400000)]
    """
    def nic(n):
        return replace(n, name=rdma_device(n.rail, bonded=True)) if PORT_DEVICE_RE.fullmatch(n.name) else n

    cpus = tuple(replace(cpu, switches=tuple(replace(sw, nics=tuple(nic(n) for n in sw.nics))
                                             for sw in cpu.switches)) for cpu in profile.cpus)
    return replace(profile, cpus=cpus)


def _xml_comments(profile: ServerProfile, bonded: bool = False) -> tuple[str, ...]:
    lines = [
        f"NCCL topology of the {profile.name} servers ({profile.gpu_count} GPUs, {profile.nic_count} NICs), "
        f"written by topo {__version__}.",
        "GPU r shares a PCIe switch with the NIC of its rail; rail=\"r\" on that NIC's net element.",
        "Bus ids and NIC names must be the host's: compare with the file NCCL_TOPO_DUMP_FILE writes.",
    ]
    if bonded:
        speed = profile.nic_gbps
        lines.append(f"Dual-ToR: each NIC's two ports are bonded (LACP) over two {speed // 2}G links, one to each "
                     f"leaf of a pair; its net is the RoCE LAG device mlx5_bond_r at the bond's {speed}G.")
    if profile.generic:
        lines.append("GENERIC PROFILE: bus ids and CPU values are placeholders. Describe the real server in a "
                     "profile file before installing this one (docs/nccl.md).")
    return tuple(lines)


# --- the files ------------------------------------------------------------------------------------


def mnnvl_facts(profile: ServerProfile) -> dict[str, Any] | None:
    """Multi-node NVLink of a rack-scale profile: ``domain_gpus``, ``trays`` (servers of one
    domain) and ``nvls`` (whether its NVSwitches run NVLink SHARP); None when the profile's NVLink
    domain is one server (HGX, DGX), whose env file is unchanged.

    >>> from topo.hardware.catalog import server_profiles
    >>> mnnvl_facts(server_profiles()["gb300-nvl72"]), mnnvl_facts(server_profiles()["dgx-b200"])
    ({'domain_gpus': 72, 'trays': 18, 'nvls': True}, None)
    """
    domain = profile.nvlink
    if not domain.multi_node:
        return None
    return {"domain_gpus": domain.gpus, "trays": trays_per_rack(profile),
            "nvls": profile.node_model().nvls}


def _env_facts(fabric: Fabric, profile: ServerProfile, analysis: "Analysis | None", topo_file: str) -> dict:
    spec = fabric.spec
    ethernet = fabric.ethernet
    if analysis is not None:
        o = analysis.options
        qps = min(o.qps, MAX_NCCL_QPS)
        pairs = "queue pair" if o.qps == 1 else "queue pairs"
        source = (f"from the congestion analysis of this design ({o.qps} {pairs} per connection, "
                  f"{analysis.allreduce.details['routing'] or 'no fabric'} routing, {o.cc} congestion control)")
        if o.qps > MAX_NCCL_QPS:
            source += f"; NCCL takes at most {MAX_NCCL_QPS}"
    elif spec.dual_tor:
        qps = DUAL_TOR_QPS
        source = (f"{DUAL_TOR_QPS}, one on each link of a NIC's dual-ToR bond, as no congestion analysis was "
                  f"given (topo analyze --qps N compares values on this fabric)")
    else:
        qps = 1
        source = ("NCCL's default of 1, as no congestion analysis was given (topo analyze --qps N "
                  "compares values on this fabric)")
    if fabric.plan.planes > 1:
        cross_nic, cross_why = 0, (f"Multi-plane fabric: port p of every NIC is in plane p (device NIC x "
                                   f"{fabric.plan.planes} + p) and no link joins two planes, so a connection must "
                                   f"stay on one device index from node to node")
    elif spec.placement == "rail" and fabric.plan.tiers == 1:
        cross_nic, cross_why = 0, ("Rail-only fabric: NIC r of every node is on the rail-r switch and the rails "
                                   "meet only inside the nodes, so a connection must stay on one rail; traffic "
                                   "between rails moves over NVLink first (PXN, on by default: leave "
                                   "NCCL_PXN_DISABLE unset)")
    elif spec.placement == "rail":
        cross_nic, cross_why = 0, ("Rail-optimized fabric: NIC r of every node is on a rail-r leaf, so "
                                   "rings and trees stay on one rail")
    else:
        cross_nic, cross_why = 1, ("Rack placement: all NICs of a node are on the same leaf, so crossing "
                                   "NICs between nodes costs nothing")
    if fabric.plan.homes == 2:  # a NIC is bonded to a leaf pair, which stands where a leaf would
        cross_why = cross_why.replace("a rail-r leaf", "a rail-r leaf pair").replace("the same leaf", "the same leaf pair")
    tc = None
    if ethernet:
        q = QOS_PROFILES[spec.qos]
        tc = {"value": q.roce_tos, "why": f"the ToS byte of DSCP {q.roce_dscp[0]}, the lossless RoCE class of "
                                          f"the '{q.name}' QoS profile (as the switch configs and "
                                          f"hosts/roce-qos.sh use it)"}
    return {
        "topo_file": topo_file,
        "hca": ",".join(f"{n.name}:{n.port}" for n in profile.nics),
        "cross_nic": cross_nic, "cross_nic_why": cross_why,
        "qps": qps, "qps_source": source,
        "tc": tc,
        "socket_ifname": profile.socket_ifname,
        "technology": "RoCE" if ethernet else "InfiniBand",
        "bond": {"link_gbps": spec.link_gbps, "nic_gbps": spec.nic_port_gbps} if fabric.plan.homes == 2 else None,
        "mnnvl": mnnvl_facts(profile),
    }


def nccl_files(fabric: Fabric, server: ServerProfile | str | None = None, analysis: "Analysis | None" = None,
               env: "jinja2.Environment | None" = None, *, install_dir: str = DEFAULT_INSTALL_DIR,
               base_dir: str | None = None) -> dict[str, str]:
    """The NCCL files of the fabric's server type, by relative path.

    Parameters
    ----------
    fabric : Fabric
    server : ServerProfile or str, optional
        The profile, or a profile name or YAML path; default: the spec's (:func:`resolve_server`).
    analysis : Analysis, optional
        The congestion analysis; its ``options.qps`` becomes ``NCCL_IB_QPS_PER_CONNECTION``.
    env : jinja2.Environment, optional
        Template environment (user folders first); default: the packaged templates.
    install_dir : str
        Folder the topology file is installed in on the servers (``NCCL_TOPO_FILE``).
    base_dir : str, optional
        Folder a relative profile path is read from (the spec file's folder).

    Returns
    -------
    dict
        ``nccl/<profile>-topo.xml`` and ``nccl/<profile>.env``.

    Raises
    ------
    SpecError
        When the profile cannot be read or does not fit the spec (see :func:`resolve_server`), or
        when the server is too large for NCCL: its file, with the elements NCCL adds when it loads it
        (:func:`detected_elements`), must hold fewer than TOPO_XML_MAX_NODES (256) elements.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> files = nccl_files(build_fabric(load_spec({"gpus": 64})))
    >>> sorted(files)
    ['nccl/hgx-h100-8nic-topo.xml', 'nccl/hgx-h100-8nic.env']
    >>> [line for line in files['nccl/hgx-h100-8nic.env'].splitlines() if line.startswith("NCCL_IB_HCA")]
    ['NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1']
    """
    spec = fabric.spec
    if isinstance(server, str):
        profile = resolve_server(replace(spec, server=server), base_dir)
    elif server is None:
        profile = resolve_server(spec, base_dir)
    else:
        profile = server
        check_server(profile, spec)
    bonded = fabric.plan.homes == 2
    if bonded:
        profile = bonded_profile(profile)
    if not install_dir.startswith("/") or any(ch in install_dir for ch in " \t\n\"'"):
        raise ValueError(f"install_dir {install_dir!r}: expected an absolute path without spaces or quotes")
    xml_name = f"{profile.name}-topo.xml"
    topo_file = str(PurePosixPath(install_dir) / xml_name)
    nic_class = ETHERNET_NIC_CLASS if fabric.ethernet else IB_NIC_CLASS
    elements = sum(1 for _ in topology_element(profile, nic_class).iter())
    if elements >= TOPO_XML_MAX_NODES:
        raise SpecError([
            f"server={profile.name}: its NCCL topology file would hold {elements} elements "
            f"({profile.gpu_count} GPUs, {profile.nic_count} NICs), but NCCL's parser takes at most "
            f"{TOPO_XML_MAX_NODES - 1}"])
    nvlinks, c2cs = detected_elements(profile)
    if elements + nvlinks + c2cs >= TOPO_XML_MAX_NODES:
        detecting = [g for g in profile.gpus if not g.nvlink]
        each = sorted({max_detected_nvlinks(g.sm) for g in detecting})
        span = f"{each[0]}" if len(each) == 1 else f"{each[0]} to {each[-1]}"
        added = [f"{nvlinks} <nvlink> for the {len(detecting)} GPUs whose NVLinks it detects "
                 f"(up to {span} each)"] if nvlinks else []
        added += [f"{c2cs} <c2c>"] if c2cs else []
        raise SpecError([
            f"server={profile.name}: NCCL would hold up to {elements + nvlinks + c2cs} elements for it "
            f"({profile.gpu_count} GPUs, {profile.nic_count} NICs): the file's {elements} and "
            f"{' and '.join(added)}, but NCCL's buffer takes at most {TOPO_XML_MAX_NODES - 1}; describe the server in a "
            f"profile file that gives each GPU's sm and nvlink count (--server FILE, docs/nccl.md)"])
    xml = topology_xml(profile, nic_class, _xml_comments(profile, bonded))
    problems = check_topology(xml)
    if problems:  # the profile is checked when read: this would be a bug
        raise NcclXmlError(f"the topology file of {profile.name} breaks a rule: {problems[0]}")
    context = {"version": __version__, "fabric": {"name": spec.name, "gpus": spec.gpus, "nodes": spec.nodes},
               "server": {"name": profile.name, "description": profile.description, "gpus": profile.gpu_count,
                          "nics": profile.nic_count, "generic": profile.generic, "xml": xml_name},
               "nccl": _env_facts(fabric, profile, analysis, topo_file)}
    env = env or template_environment()
    return {f"nccl/{xml_name}": xml,
            f"nccl/{profile.name}.env": render_template(env, "nccl/nccl.env.j2", context)}
