"""The shipped data files of the hardware catalogue, and a server profile found by name or path.

:mod:`topo.hardware.catalog` is the catalogue's public face (it re-exports these and resolves a
spec's profile); this module imports nothing of the spec, so that :func:`topo.spec.load_spec` may
take a node shape from a profile (:func:`find_profile`) without an import cycle.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import SpecError, did_you_mean, quote
from ..yamlio import parse_yaml
from .gpus import Gpu
from .profiles import load_server_profile, profile_from_dict
from .servers import ServerProfile

#: Folder of the hardware data files, in the package ``topo.data``.
DATA_FOLDER = "hardware"


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


def find_profile(value: str, base_dir: str | Path | None = None) -> ServerProfile:
    """The profile a ``server`` value names: a shipped profile's name, or the path of a YAML profile
    (relative to ``base_dir`` when given); SpecError for an unknown name or a bad file."""
    shipped = server_profiles()
    if value in shipped:
        return shipped[value]
    if _is_path(value) or _is_file(Path(base_dir or ".") / value):
        path = Path(value)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        return load_server_profile(path, gpu_catalog())
    known = ", ".join(sorted(shipped))
    raise SpecError([f"server: unknown server profile {quote(value)}{did_you_mean(value, shipped)}; "
                     f"known: {known}, or the path of a YAML profile (docs/nccl.md)"])
