"""The hardware catalogue: the shipped data files, read by one loader, and a spec's server profile.

The catalogue is one family of data files under ``topo/data/hardware/``, read by :func:`read_data`:

``gpus.yaml``
    the GPU models (:class:`~topo.hardware.gpus.Gpu`), by name: :func:`gpu_catalog`.
``servers.yaml``
    the server profiles (:class:`~topo.hardware.servers.ServerProfile`), by name, each in the
    schema of a user's profile file and naming its GPU model (``gpu_model``, a name of
    ``gpus.yaml``) and its NVLink domain (``nvlink_domain``): :func:`server_profiles`.

A new GPU generation is a row of ``gpus.yaml`` (and the NVLink tables of
:mod:`topo.hardware.nvlink` when its NVLink is new); a new server type is a profile of
``servers.yaml`` that names its GPU model. :func:`resolve_server` finds the profile of a spec: a
shipped one by name, a user's file by path, or one chosen from the node shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import SpecError
from .profiles import generic_profile
from .racks import spare_tray_problems
from .servers import ServerProfile
from .shipped import DATA_FOLDER, data_text, find_profile, gpu_catalog, read_data, server_profiles

if TYPE_CHECKING:
    from pathlib import Path

    from ..spec import FabricSpec

__all__ = ["DATA_FOLDER", "SHAPE_GPU_MODEL", "check_server", "data_text", "gpu_catalog", "read_data",
           "resolve_server", "server_profiles"]

#: The GPU model of the shipped profiles a spec without ``server`` may be given by its node shape
#: (the GPU ``topo train`` takes by default): the other shipped profiles are taken by name only, so
#: that a design that names no server is analysed as it always was.
SHAPE_GPU_MODEL = "h100"


def resolve_server(spec: "FabricSpec", base_dir: str | Path | None = None) -> ServerProfile:
    """The server profile of a spec: its ``server`` field, or one chosen from the node shape.

    ``server`` is a shipped profile's name or the path of a YAML profile (relative to ``base_dir``,
    the spec file's folder, when given). Without it, the shipped profile of SHAPE_GPU_MODEL GPUs
    with the spec's GPUs, NICs and NIC speed per node is taken, else a :func:`generic_profile` for
    those counts. In a fabric of planes, a profile whose NICs are each as fast as the planes' ports
    together (a DGX B300's 800G ConnectX-8 in 2 planes of 400G) is taken with each NIC split into
    its ports (:meth:`~topo.hardware.servers.ServerProfile.split_ports`).

    Raises
    ------
    SpecError
        For an unknown name, an unreadable or malformed profile, or a profile whose GPU count, NIC
        count or NIC speed differs from the spec's.

    Examples
    --------
    >>> from topo.spec import load_spec
    >>> resolve_server(load_spec({"gpus": 64, "nics_per_node": 4})).name
    'hgx-h100-4nic'
    >>> resolve_server(load_spec({"gpus": 64, "server": "hgx-h100-8nik"}))
    Traceback (most recent call last):
    ...
    topo.errors.SpecError: server: unknown server profile 'hgx-h100-8nik' (did you mean 'hgx-h100-8nic'?); known: dgx-b200, dgx-b300, gb200-nvl72, gb300-nvl72, hgx-h100-4nic, hgx-h100-8nic, hgx-h200-8nic, or the path of a YAML profile (docs/nccl.md)
    """
    gpn, npn, gbps = spec.gpus_per_node, spec.nic_ports, spec.nic_port_gbps  # a NIC port is a device
    shipped = server_profiles()
    value = spec.server
    if value is None:
        shape = next((p for _, p in sorted(shipped.items()) if p.gpu_model == SHAPE_GPU_MODEL
                      and (p.gpu_count, p.nic_count, p.nic_gbps) == (gpn, npn, gbps)), None)
        profile = shape or generic_profile(gpn, npn, gbps)
        if spec.spare_trays:
            raise SpecError(spare_tray_problems(profile, spec.spare_trays))
        return profile
    profile = find_profile(value, base_dir)
    if spec.planes > 1 and (profile.nic_count * spec.planes, profile.nic_gbps) == (npn, gbps * spec.planes):
        profile = profile.split_ports(spec.planes) or profile
    check_server(profile, spec)
    return profile


def check_server(profile: ServerProfile, spec: "FabricSpec") -> None:
    """Raise SpecError when a profile's GPU count, NIC count or NIC speed differs from the spec's,
    or its racks cannot keep the spec's ``spare_trays``."""
    gpn, npn, gbps = spec.gpus_per_node, spec.nic_ports, spec.nic_port_gbps  # a NIC port is a device
    problems = spare_tray_problems(profile, spec.spare_trays)
    nics = f"nics_per_node={npn}" if spec.planes == 1 else \
        f"nics_per_node={spec.nics_per_node} x planes={spec.planes} = {npn} NIC ports (one RDMA device each)"
    speed = f"nic_gbps={gbps}" if spec.planes == 1 else f"nic_gbps={spec.nic_gbps} / planes={spec.planes} = {gbps}"
    if (profile.gpu_count, profile.nic_count) != (gpn, npn):
        problems.append(
            f"server={profile.name} has {profile.gpu_count} GPUs and {profile.nic_count} NICs per node, but "
            f"gpus_per_node={gpn} and {nics}")
    speeds = sorted({n.speed_mbps for n in profile.nics})
    if speeds != [gbps * 1000]:
        shown = " and ".join(f"{s:,} Mb/s" for s in speeds)
        problems.append(
            f"server={profile.name}: NIC speed {shown} does not match {speed} "
            f"({gbps * 1000:,} Mb/s); NCCL takes the file's speed over what it detects")
    if problems:
        raise SpecError(problems)

