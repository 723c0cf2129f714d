"""Server profiles: one server (or compute tray) type, its GPUs, NICs, PCIe switches and CPUs.

A :class:`ServerProfile` is what NCCL sees of a server and what its topology file holds
(docs/nccl.md): the CPUs (one per NUMA node, as NCCL's ``<cpu>``), the PCIe switches under each, and
the GPUs (:class:`GpuSlot`) and fabric NICs (:class:`Nic`) under each switch, with the values NCCL
reads. A shipped profile also names the model of its GPUs (``gpu_model``, a
:class:`~topo.hardware.gpus.Gpu` of the catalogue). Profiles are read and checked by
:mod:`topo.hardware.profiles` (a user's YAML file) and :mod:`topo.hardware.catalog` (the shipped ones).

:meth:`ServerProfile.node_model` gives the hardware facts the all-reduce model needs (docs/model.md) as a
:class:`NodeModel`: counts, NVLink bandwidth and NVSwitch generation (from the GPU keys ``nvlink_bw`` and
``nvswitch``, else from ``sm`` and ``nvlink`` by the tables of :mod:`topo.hardware.nvlink`), PCIe rates
and the CPU vendor. The two keys are not written to the NCCL topology file. A profile and its
NodeModel give the server's NVLink domain as a :class:`~topo.hardware.nvlink.NvlinkDomain`
(``nvlink``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from .nvlink import (
    ASSUMED_NVLINKS,
    ASSUMED_SM,
    NVLINK_GBPS_PER_LINK,
    NVSWITCH_BY_NVLINK_GENERATION,
    NvlinkDomain,
    nvlink_generation,
)
from .pcie import pcie_mbps


@dataclass(frozen=True)
class GpuSlot:
    """One GPU of a server: its PCI function and the ``<gpu>`` values NCCL reads.

    A slot of the server, not a GPU model: the model of a shipped profile's GPUs is the profile's
    ``gpu_model`` (a :class:`~topo.hardware.gpus.Gpu` of the catalogue).

    ``nvlink_bw`` (GB/s each way) and ``nvswitch`` (generation, 0 for none) are for the all-reduce
    model only (:class:`NodeModel`): NCCL reads neither, and the topology file does not hold them.
    """

    busid: str
    dev: int
    sm: int | None
    gdr: int | None
    nvlink: int
    link_speed: str
    link_width: int
    nvlink_bw: float | None = None
    nvswitch: int | None = None


@dataclass(frozen=True)
class Nic:
    """One fabric NIC port: its PCI function and the ``<net>`` values NCCL reads."""

    busid: str
    name: str
    rail: int
    port: int
    speed_mbps: int
    guid: str
    gdr: int | None
    link_speed: str
    link_width: int
    pci_class: str | None


@dataclass(frozen=True)
class PciSwitch:
    """A PCIe switch with the GPUs and NICs below it."""

    busid: str
    link_speed: str
    link_width: int
    ids: tuple[tuple[str, str], ...]
    gpus: tuple[GpuSlot, ...]
    nics: tuple[Nic, ...]


@dataclass(frozen=True)
class Cpu:
    """One NUMA node (NCCL's ``<cpu>``) with its PCIe switches."""

    numaid: int
    affinity: str
    arch: str
    vendor: str | None
    familyid: int | None
    modelid: int | None
    switches: tuple[PciSwitch, ...]


@dataclass(frozen=True)
class NodeModel:
    """The facts of one server the all-reduce model needs (docs/model.md), from its profile.

    Where the GPUs of a profile differ, each value is the slowest GPU's (the lowest ``sm``,
    ``nvlink_bw`` and ``nvswitch``), as a collective runs at the pace of its slowest member.

    Attributes
    ----------
    gpus, nics : int
        GPUs and fabric NICs per server.
    nic_gbps : float
        Speed of the slowest NIC, Gb/s.
    sm : int
        Compute capability x 10; ASSUMED_SM (90) when the profile gives none (a generic profile).
    nvlink_bw : float
        NVLink bandwidth of one GPU, GB/s in each direction: the profile's ``nvlink_bw``, else its
        NVLinks x NVLINK_GBPS_PER_LINK of the generation ``sm`` gives; 0.0 for a GPU with ``nvlink``
        0 and a known ``sm``. A GPU with neither ``nvlink`` nor ``sm`` is taken for an HGX H100
        (ASSUMED_NVLINKS, 18 links: 450.0).
    nvswitch : int
        NVSwitch generation the NVLinks go to: the profile's ``nvswitch``, else the one that goes with
        the NVLink generation (NVSWITCH_BY_NVLINK_GENERATION) when the GPU has NVLinks, else 0.
    gpu_pcie_GBps, nic_pcie_GBps : float
        Data rate, GB/s each way, of the slowest GPU and the slowest NIC PCIe link
        (:func:`pcie_mbps` / 8000).
    cpu_vendor : str
        ``"intel"``, ``"amd"``, ``"arm"`` or ``"other"``; ``"mixed"`` when the CPUs differ.
    assumed : tuple of str
        The fields among ``sm``, ``nvlink_bw`` and ``nvswitch`` some GPU's profile entry does not
        give, so that a table or an assumption filled them in, sorted.
    nvlink_domain : int
        GPUs of the profile's NVLink domain (its ``nvlink_domain``) when it spans several servers
        (:attr:`multi_node_nvlink`: 72 for an NVL72 tray), else 0 (the domain is the server's or
        part of it; 0 keeps the model of such a server as it was, a sweep's cache key included).
        The model prices collectives within one server's GPUs all the same: a domain of several
        servers is named in :meth:`to_dict` and warned about.

    Examples
    --------
    >>> from topo.hardware.catalog import server_profiles
    >>> from topo.hardware.profiles import generic_profile
    >>> m = server_profiles()["hgx-h100-8nic"].node_model()
    >>> m.nvlink_bw, m.nvswitch, m.sm, m.nvls, m.assumed
    (450.0, 3, 90, True, ())
    >>> m.gpu_pcie_GBps, m.nic_gbps, m.cpu_vendor
    (63.015375, 400.0, 'intel')
    >>> g = generic_profile(8, 8, 400).node_model()
    >>> g.sm, g.nvlink_bw, g.nvswitch, g.assumed
    (90, 450.0, 3, ('nvlink_bw', 'nvswitch', 'sm'))
    >>> m.nvlink
    NvlinkDomain(gpus=8, GBps=450.0, nvswitch=3, multi_node=False)
    """

    gpus: int
    nics: int
    nic_gbps: float
    sm: int
    nvlink_bw: float
    nvswitch: int
    gpu_pcie_GBps: float
    nic_pcie_GBps: float
    cpu_vendor: str
    assumed: tuple[str, ...]
    nvlink_domain: int = 0

    @property
    def multi_node_nvlink(self) -> bool:
        """The profile's NVLink domain joins several servers (an NVL72 rack's trays): the all-reduce
        model prices only one server's GPUs of it (multi-node NVLink is not modelled yet)."""
        return self.nvlink_domain > self.gpus

    @property
    def nvls(self) -> bool:
        """Whether NVLink SHARP can run: it needs third-generation NVSwitches or later and Hopper or newer."""
        return self.nvswitch >= 3 and self.sm >= 90 and self.nvlink_bw > 0

    @property
    def nvlink(self) -> NvlinkDomain:
        """The server's NVLink domain as this model sees it: its GPUs (1 without NVLinks), the slowest
        GPU's NVLink bandwidth and NVSwitch generation."""
        return NvlinkDomain(gpus=self.gpus if self.nvlink_bw > 0 else 1, GBps=self.nvlink_bw,
                            nvswitch=self.nvswitch)

    def to_dict(self) -> dict[str, Any]:
        """Plain values for JSON, floats rounded to 3 decimals.

        >>> from topo.hardware.catalog import server_profiles
        >>> server_profiles()["hgx-h100-4nic"].node_model().to_dict()["nic_pcie_GBps"]
        63.015
        """
        return {
            "gpus": self.gpus, "nics": self.nics, "nic_gbps": round(self.nic_gbps, 3), "sm": self.sm,
            "nvlink_bw": round(self.nvlink_bw, 3), "nvswitch": self.nvswitch, "nvls": self.nvls,
            "gpu_pcie_GBps": round(self.gpu_pcie_GBps, 3), "nic_pcie_GBps": round(self.nic_pcie_GBps, 3),
            "cpu_vendor": self.cpu_vendor, "assumed": list(self.assumed),
            **({"nvlink_domain": self.nvlink_domain} if self.multi_node_nvlink else {}),
        }


def _slot_nvlink(gpu: GpuSlot, assumed: set[str], figures: tuple[int, float, int] | None = None
                 ) -> tuple[int, float, int]:
    """One GPU's (sm, nvlink_bw, nvswitch) for :class:`NodeModel`, adding what was not given to
    ``assumed``; ``figures``, the (sm, nvlink_bw, nvswitch) of the profile's GPU model, stand in
    for what the GPU leaves out, and are no assumption."""
    if figures is not None:
        gpu = replace(gpu, **{key: value for key, value in zip(("sm", "nvlink_bw", "nvswitch"), figures)
                              if getattr(gpu, key) is None})
    sm = ASSUMED_SM if gpu.sm is None else gpu.sm
    links = gpu.nvlink or (ASSUMED_NVLINKS if gpu.sm is None else 0)
    generation = nvlink_generation(sm)
    if gpu.sm is None:
        assumed.add("sm")
    if gpu.nvlink_bw is None:
        assumed.add("nvlink_bw")
    if gpu.nvswitch is None:
        assumed.add("nvswitch")
    bw = links * NVLINK_GBPS_PER_LINK[generation] if gpu.nvlink_bw is None else gpu.nvlink_bw
    nvswitch = gpu.nvswitch
    if nvswitch is None:
        nvswitch = NVSWITCH_BY_NVLINK_GENERATION[generation] if bw > 0 else 0
    return sm, bw, nvswitch


def _cpu_vendor(cpu: Cpu) -> str:
    """``"arm"`` for an arm64 CPU, ``"intel"`` or ``"amd"`` by the x86 vendor, else ``"other"``."""
    if cpu.arch in ("arm64", "aarch64"):
        return "arm"
    return {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(cpu.vendor or "", "other")


@dataclass(frozen=True)
class ServerProfile:
    """One server type, checked. Read one with :func:`topo.hardware.catalog.resolve_server` or
    :func:`topo.hardware.profiles.load_server_profile`.

    Attributes
    ----------
    name : str
        Profile name; the NCCL files are called ``nccl/<name>-topo.xml`` and ``nccl/<name>.env``.
    description : str
    cpus : tuple of Cpu
    socket_ifname : str or None
        ``NCCL_SOCKET_IFNAME`` for the bootstrap network, when the profile names one.
    source : str
        ``"shipped"``, ``"generic"`` or the path of the YAML file it came from.
    gpu_model : str or None
        The catalogue name of its GPUs' model (a :class:`~topo.hardware.gpus.Gpu`), the profile's
        ``gpu_model``: every shipped profile names it, a user's file may, a generic profile does not.
    nvlink_domain : int or None
        GPUs one NVLink fabric joins, the profile's ``nvlink_domain``: 8 on an HGX board, 72 for a
        tray of an NVL72 rack; None when the profile does not say (the server's GPUs).
    gpu_figures : (int, float, int) or None
        The (sm, NVLink GB/s each way, NVSwitch generation) of the GPU model, when the profile names
        one of the catalogue: what :meth:`node_model` takes for a value the GPU entries leave out.
    power_w : int or None
        The profile's ``power_w``: the system's maximum power, a server's (DGX B200: 14,300 W), or
        for a tray of an NVLink domain that spans trays the whole rack's (its compute and NVLink
        switch trays and power shelves); None when the profile does not say.

    Examples
    --------
    >>> from topo.hardware.catalog import server_profiles
    >>> p = server_profiles()["hgx-h100-8nic"]
    >>> p.gpu_count, p.nic_count, p.nic_gbps
    (8, 8, 400)
    >>> [(g.busid, g.dev) for g in p.gpus][:2]
    [('0000:1b:00.0', 0), ('0000:43:00.0', 1)]
    >>> [(n.name, n.rail) for n in p.nics_of_gpu(3)]
    [('mlx5_3', 3)]
    >>> p.gpu_model, p.nvlink
    ('h100', NvlinkDomain(gpus=8, GBps=450.0, nvswitch=3, multi_node=False))
    """

    name: str
    description: str
    cpus: tuple[Cpu, ...]
    socket_ifname: str | None
    source: str
    gpu_model: str | None = None
    nvlink_domain: int | None = None
    gpu_figures: tuple[int, float, int] | None = None
    power_w: int | None = None

    @property
    def switches(self) -> tuple[PciSwitch, ...]:
        return tuple(sw for cpu in self.cpus for sw in cpu.switches)

    @property
    def gpus(self) -> tuple[GpuSlot, ...]:
        """GPUs by ``dev`` (NVML index = local rank)."""
        return tuple(sorted((g for sw in self.switches for g in sw.gpus), key=lambda g: g.dev))

    @property
    def nics(self) -> tuple[Nic, ...]:
        """NICs by rail."""
        return tuple(sorted((n for sw in self.switches for n in sw.nics), key=lambda n: n.rail))

    @property
    def gpu_count(self) -> int:
        return sum(len(sw.gpus) for sw in self.switches)

    @property
    def nic_count(self) -> int:
        return sum(len(sw.nics) for sw in self.switches)

    @property
    def nic_gbps(self) -> int | None:
        """NIC speed in Gb/s when all NICs have the same one, else None."""
        speeds = {n.speed_mbps for n in self.nics}
        return speeds.pop() // 1000 if len(speeds) == 1 else None

    @property
    def generic(self) -> bool:
        """Built from counts alone: bus ids and CPU values are placeholders."""
        return self.source == "generic"

    def nics_of_gpu(self, dev: int) -> tuple[Nic, ...]:
        """The NICs GPU ``dev`` uses (its rail or rails)."""
        return tuple(n for n in self.nics if n.rail in rails_of_gpu(dev, self.gpu_count, self.nic_count))

    def node_model(self) -> NodeModel:
        """The facts the all-reduce model needs, as a :class:`NodeModel` (see there for the defaults).

        >>> from topo.hardware.catalog import server_profiles
        >>> from topo.hardware.profiles import generic_profile
        >>> server_profiles()["hgx-h100-4nic"].node_model().nics, generic_profile(8, 8, 400).node_model().nvls
        (4, True)
        """
        assumed: set[str] = set()
        per_gpu = [_slot_nvlink(g, assumed, self.gpu_figures) for g in self.gpus]
        vendors = {_cpu_vendor(c) for c in self.cpus}
        return NodeModel(
            gpus=self.gpu_count, nics=self.nic_count,
            nic_gbps=min(n.speed_mbps for n in self.nics) / 1000,
            sm=min(sm for sm, _, _ in per_gpu),
            nvlink_bw=float(min(bw for _, bw, _ in per_gpu)),
            nvswitch=min(ns for _, _, ns in per_gpu),
            gpu_pcie_GBps=min(pcie_mbps(g.link_speed, g.link_width) for g in self.gpus) / 8000,
            nic_pcie_GBps=min(pcie_mbps(n.link_speed, n.link_width) for n in self.nics) / 8000,
            cpu_vendor=vendors.pop() if len(vendors) == 1 else "mixed",
            assumed=tuple(sorted(assumed)),
            nvlink_domain=self.nvlink_domain if (self.nvlink_domain or 0) > self.gpu_count else 0,
        )

    @property
    def nvlink(self) -> NvlinkDomain:
        """The NVLink domain of the server's GPUs: the profile's ``nvlink_domain`` (an NVL72 tray's is
        the rack's 72 GPUs), else the server's as :attr:`NodeModel.nvlink` sees it; the slowest GPU's
        NVLink bandwidth and NVSwitch generation.

        >>> from topo.hardware.catalog import server_profiles
        >>> server_profiles()["gb200-nvl72"].nvlink
        NvlinkDomain(gpus=72, GBps=900.0, nvswitch=4, multi_node=True)
        """
        own = self.node_model().nvlink
        if self.nvlink_domain is None or own.GBps <= 0:
            return own
        return NvlinkDomain(gpus=self.nvlink_domain, GBps=own.GBps, nvswitch=own.nvswitch,
                            multi_node=self.nvlink_domain > self.gpu_count)

    def split_ports(self, planes: int) -> "ServerProfile | None":
        """The profile with each NIC as ``planes`` ports of 1/``planes`` its speed, each an RDMA device
        of its own (PCI functions 0 to ``planes`` - 1 of the NIC, named ``mlx5_<i>`` in bus-id order):
        a ConnectX-8 800G as 2 x 400G ports, one in each plane of a fabric with planes. Port ``k`` of
        the NIC of rail ``r`` is rail ``r * planes + k``, so in plane ``k``. None when a NIC is not
        function 0, its speed does not divide, or a new bus id is taken.

        >>> from topo.hardware.catalog import server_profiles
        >>> p = server_profiles()["dgx-b300"].split_ports(2)
        >>> p.nic_count, p.nic_gbps, [(n.busid, n.name, n.rail) for n in p.nics_of_gpu(0)]
        (16, 400, [('0000:17:00.0', 'mlx5_0', 0), ('0000:17:00.1', 'mlx5_1', 1)])
        """
        nics = self.nics
        if planes < 2 or planes > 8 or any(n.busid[-1] != "0" or n.speed_mbps % planes for n in nics):
            return None
        taken = {sw.busid for sw in self.switches} | {g.busid for g in self.gpus}
        ports = {n.busid: [n.busid[:-1] + str(k) for k in range(planes)] for n in nics}
        busids = sorted(b for names in ports.values() for b in names)
        if taken & set(busids) or len(set(busids)) != len(busids):
            return None
        order = {b: i for i, b in enumerate(busids)}

        def split(nic: Nic) -> tuple[Nic, ...]:
            return tuple(replace(nic, busid=b, name=f"mlx5_{order[b]}", rail=nic.rail * planes + k,
                                 speed_mbps=nic.speed_mbps // planes, guid=nic_guid(b))
                         for k, b in enumerate(ports[nic.busid]))

        cpus = tuple(replace(c, switches=tuple(replace(sw, nics=tuple(p for n in sw.nics for p in split(n)))
                                               for sw in c.switches)) for c in self.cpus)
        speed = nics[0].speed_mbps // planes // 1000
        return replace(self, cpus=cpus, description=f"{self.description}; each NIC as {planes} x {speed}G ports "
                                                    f"(planes)")

    def to_dict(self) -> dict[str, Any]:
        """A summary for people and for ``--format json``: counts, CPUs, and the GPU-NIC pairing."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "gpus": self.gpu_count,
            "nics": self.nic_count,
            "nic_gbps": self.nic_gbps,
            "gpu_model": self.gpu_model,
            "nvlink_domain": self.nvlink.gpus,
            **({"power_w": self.power_w} if self.power_w is not None else {}),
            "cpus": [{"numaid": c.numaid, "arch": c.arch, "vendor": c.vendor, "familyid": c.familyid,
                      "modelid": c.modelid, "switches": len(c.switches)} for c in self.cpus],
            "pairing": [{"gpu": g.dev, "gpu_busid": g.busid,
                         "nics": [n.name for n in self.nics_of_gpu(g.dev)]} for g in self.gpus],
        }


def rails_of_gpu(dev: int, gpus: int, nics: int) -> range:
    """Rails (NIC indices) GPU ``dev`` uses, as the fabric pairs them (see topo.analysis.collective).

    >>> list(rails_of_gpu(5, 8, 4)), list(rails_of_gpu(1, 4, 8)), list(rails_of_gpu(3, 8, 8))
    ([2], [2, 3], [3])
    """
    if gpus >= nics:
        rail = dev * nics // gpus
        return range(rail, rail + 1)
    per = nics // gpus
    return range(dev * per, dev * per + per)


def nic_guid(busid: str) -> str:
    """The GUID topo gives a NIC that has none in its profile: derived from its bus id.

    >>> nic_guid("0000:18:00.0")
    '0x2bde0d644047d15e'
    """
    return "0x" + hashlib.sha256(f"nic-guid:{busid}".encode()).hexdigest()[:16]
