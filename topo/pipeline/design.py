"""Loading a design: a spec from a file and flags, or a DESIGN folder written by ``topo build``.

The DESIGN argument of ``topo analyze``, ``train``, ``report`` and ``check`` is a build folder:
its ``spec.yaml`` is read (:func:`design_spec_file`) and the fabric it builds is checked against
the folder's ``design.json`` (:func:`design_problems`, :func:`check_unchanged`) before it is
trusted. :func:`spec_from` reads a spec file with the flags over it, and :func:`build_inputs`
lists every file a build reads, which its output folder may not hold.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AnalysisError, UsageError
from ..outputs.design import design_json, spec_and_inputs
from ..outputs.manifest import MANIFEST, NotABuild, digest, read_manifest
from .progress import SILENT, Progress

if TYPE_CHECKING:
    from ..fabric import Fabric
    from ..spec import FabricSpec


def spec_from(spec_file: Path | None, fields: dict[str, Any], progress: Progress = SILENT) -> "FabricSpec":
    """The spec of ``spec_file`` (none: the defaults) with ``fields`` (flags, None for not given)
    over it; ``rail_only`` is its two fields, which the flags may not contradict. The notes of the
    loading (a value read in another unit) go to ``progress``."""
    from ..spec import load_spec, read_spec_file

    fields = dict(fields)
    if fields.pop("rail_only", None):  # the rail-only design: its two fields, which flags may not contradict
        clash = rail_only_clash(fields)
        if clash:
            raise UsageError("--rail-only is tiers=1 with rail placement; it contradicts "
                             + ", ".join(f"--{name} {value}" for name, value in clash))
        fields.update(tiers="1", placement="rail")
    data = read_spec_file(spec_file) if spec_file else {}
    notes: list[str] = []
    spec = load_spec(data, fields, base_dir=spec_file.parent if spec_file else None, notes=notes)
    for note in notes:
        progress.say(note)
    return spec


def rail_only_clash(fields: dict[str, Any]) -> list[tuple[str, Any]]:
    """The fields given that contradict rail-only (tiers=1, rail placement), as (name, value)."""
    return [(name, fields[name]) for name, want in (("tiers", "1"), ("placement", "rail"))
            if fields.get(name) is not None and str(fields[name]) != want]


def folder_spec(design: Path) -> Path:
    """``design/spec.yaml``, refused when the folder has none."""
    spec_file = design / "spec.yaml"
    if not spec_file.is_file():
        raise AnalysisError([f"{design} is not a design folder written by topo build: no spec.yaml"])
    return spec_file


def design_spec_file(design: Path | None, spec_file: Path | None) -> Path | None:
    """The spec file of a command given a DESIGN folder or ``-f SPEC`` (or neither), not both."""
    if design is None:
        return spec_file
    if spec_file is not None:
        raise UsageError("give a design folder or -f SPEC, not both")
    return folder_spec(design)


def server_base(spec_file: Path | None, fields: dict[str, Any]) -> Path | None:
    """The folder a server profile path is relative to: the spec file's when the file names it
    (no ``--server`` flag), else the working folder (None)."""
    return spec_file.parent if spec_file and fields.get("server") is None else None


def check_unchanged(design: Path, fabric: "Fabric", spec_file: Path) -> None:
    """AnalysisError when ``design``'s spec.yaml and design.json do not describe ``fabric`` (built
    from that spec.yaml): the folder was edited since the build."""
    problems = design_problems(design, fabric)
    if problems:
        raise AnalysisError([*problems, f"rebuild it (topo build -f {spec_file} -o NEW) or see what "
                                        f"changed with topo check {design}"])


def build_inputs(spec: "FabricSpec", spec_file: Path | None, server_base: Path | None, flags: dict[str, Any],
                 templates: tuple[Path, ...]) -> list[Path]:
    """Every file and folder a build reads: the output folder may not hold any of them."""
    from ..outputs.design import server_file
    from ..spec import hostnames_file

    paths = [*templates] + ([spec_file] if spec_file is not None else [])
    if spec.hostname_table is not None and spec.hostnames is not None:
        paths.append(hostnames_file(spec.hostnames, flags.get("hostnames") is not None,
                                    spec_file.parent if spec_file else None))
    if spec.prices is not None:  # read as the spec is loaded: from the spec file's folder when it names it
        paths.append(hostnames_file(spec.prices, flags.get("prices") is not None,
                                    spec_file.parent if spec_file else None))
    profile = server_file(spec, server_base)
    if profile is not None:
        paths.append(profile)
    return paths


# --- the quick check of a design folder ------------------------------------------------------------


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in blocks."""
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _version(path: Path) -> str | None:
    """The topo version a design.json names (its first lines)."""
    with open(path, "rb") as f:
        head = f.read(4096).decode("utf-8", errors="replace")
    match = re.search(r'"topo_version": "([^"\\]{1,40})"', head)
    return match.group(1) if match else None


def design_problems(folder: Path, fabric: "Fabric") -> list[str]:
    """Why ``folder``'s spec.yaml and design.json do not describe ``fabric`` (empty: they do).

    ``fabric`` is the one built from the folder's own ``spec.yaml``.
    """
    folder = Path(folder)
    try:
        listed: dict[str, str] | None = read_manifest(folder)
    except NotABuild:
        listed = None  # a folder of an earlier topo: design.json is still compared below
    problems = []
    for name in ("spec.yaml", "design.json"):
        path = folder / name
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif listed is not None and name in listed and file_digest(path) != listed[name]:
            problems.append(f"{path} was changed after topo wrote it (its SHA-256 is not the one {MANIFEST} "
                            f"lists)")
    if problems:
        return problems
    path = folder / "design.json"
    spec, _ = spec_and_inputs(fabric, folder)
    expected = design_json(fabric, spec, _version(path) or "")
    if digest(expected) != file_digest(path):
        problems.append(f"{path} does not describe the fabric that {folder / 'spec.yaml'} builds (edited, or "
                        f"written by another topo)")
    return problems
