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

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import SpecError, did_you_mean, quote
from ..spec import parse_yaml
from .gpus import Gpu
from .profiles import generic_profile, load_server_profile, profile_from_dict
from .servers import ServerProfile

if TYPE_CHECKING:
    from ..spec import FabricSpec

#: Folder of the hardware data files, in the package ``topo.data``.
DATA_FOLDER = "hardware"
#: The GPU model of the shipped profiles a spec without ``server`` may be given by its node shape
#: (the GPU ``topo train`` takes by default): the other shipped profiles are taken by name only, so
#: that a design that names no server is analysed as it always was.
SHAPE_GPU_MODEL = "h100"


def data_text(name: str) -> str:
    """The text of one data file of the catalogue, ``topo/data/hardware/<name>``."""
    return resources.files("topo.data").joinpath(DATA_FOLDER).joinpath(name).read_text(encoding="utf-8")


def read_data(name: str, what: str) -> Any:
    """One data file of the catalogue as data (YAML without base-60 numbers: a bus id stays text);
    SpecError naming ``what`` if it is malformed."""
    return parse_yaml(data_text(name), what)


@lru_cache(maxsize=1)
def gpu_catalog() -> dict[str, Gpu]:
    """The GPUs shipped with topo, by name.

    >>> gpu_catalog()["h100"].sm, gpu_catalog()["gb200"].nvlink.multi_node
    (90, True)
    """
    raw = read_data("gpus.yaml", "shipped GPU catalogue")
    return {name: Gpu(name=name, **entry) for name, entry in raw.items()}


@lru_cache(maxsize=1)
def server_profiles() -> dict[str, ServerProfile]:
    """The server profiles shipped with topo, by name (read and checked once), each with its GPU model.

    >>> server_profiles()["hgx-h100-4nic"].gpu_model, server_profiles()["gb300-nvl72"].nvlink.gpus
    ('h100', 72)
    """
    raw = read_data("servers.yaml", "shipped server profiles")
    models = gpu_catalog()
    return {name: profile_from_dict(name, body, "shipped", models) for name, body in raw.items()}


def _is_file(path: Path) -> bool:
    """Whether ``path`` names a file; False for a name the system refuses (too long, a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _is_path(value: str) -> bool:
    return value.lower().endswith((".yaml", ".yml")) or "/" in value or "\\" in value


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
        for name in sorted(shipped):
            p = shipped[name]
            if p.gpu_model == SHAPE_GPU_MODEL and (p.gpu_count, p.nic_count, p.nic_gbps) == (gpn, npn, gbps):
                return p
        return generic_profile(gpn, npn, gbps)
    if value in shipped:
        profile = shipped[value]
    elif _is_path(value) or _is_file(Path(base_dir or ".") / value):
        path = Path(value)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        profile = load_server_profile(path, gpu_catalog())
    else:
        known = ", ".join(sorted(shipped))
        raise SpecError([f"server: unknown server profile {quote(value)}{did_you_mean(value, shipped)}; "
                         f"known: {known}, or the path of a YAML profile (docs/nccl.md)"])
    if spec.planes > 1 and (profile.nic_count * spec.planes, profile.nic_gbps) == (npn, gbps * spec.planes):
        profile = profile.split_ports(spec.planes) or profile
    check_server(profile, spec)
    return profile


def check_server(profile: ServerProfile, spec: "FabricSpec") -> None:
    """Raise SpecError when a profile's GPU count, NIC count or NIC speed differs from the spec's."""
    gpn, npn, gbps = spec.gpus_per_node, spec.nic_ports, spec.nic_port_gbps  # a NIC port is a device
    problems = []
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

