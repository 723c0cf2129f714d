"""The build stamp: ``topo-build.json``, the list of every file topo wrote into a build folder.

The last file of every build folder records each other file with its SHA-256, in path order. It is
what marks a folder as topo's own: ``--force`` replaces only a folder whose every file is in its
stamp (so nothing the user put there is deleted), ``topo analyze DIR`` and ``topo check DIR`` read
it to know that the folder is whole and unedited. Same files, same bytes: the stamp holds no time.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from .. import __version__

#: File name of the stamp in a build folder.
MANIFEST = "topo-build.json"
#: Format of the stamp (``topo_build`` key); a reader refuses a newer one.
MANIFEST_FORMAT = 1


class Written(NamedTuple):
    """A file that the process which made it has already written into the output folder (the
    switch configs' workers do): its SHA-256 and size stand in for its text."""

    digest: str
    size: int


def digest(text: str | bytes) -> str:
    """SHA-256 of a file's bytes (text is UTF-8), in hex."""
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def with_manifest(files: Iterable[tuple[str, str | bytes]]) -> Iterator[tuple[str, str | bytes]]:
    """The files as they come, then the stamp that lists them."""
    digests: dict[str, str] = {}
    for path, text in files:
        digests[path] = text.digest if isinstance(text, Written) else digest(text)
        yield path, text
    yield MANIFEST, manifest_text(digests)


def manifest_text(digests: dict[str, str]) -> str:
    """The stamp's text for ``{path: sha256}``."""
    body = {"topo_build": MANIFEST_FORMAT, "topo_version": __version__,
            "files": {path: digests[path] for path in sorted(digests)}}
    return json.dumps(body, indent=2) + "\n"


class NotABuild(ValueError):
    """A folder that is not a whole build folder of topo's; the message says why."""


def read_manifest(folder: Path) -> dict[str, str]:
    """``{path: sha256}`` of a build folder's stamp.

    Raises
    ------
    NotABuild
        If the folder has no stamp, or one that cannot be read.
    """
    path = Path(folder) / MANIFEST
    if not path.is_file() or path.is_symlink():
        raise NotABuild(f"{folder} has no {MANIFEST}, so it is not a folder topo built (or one built before "
                        f"topo stamped its folders)")
    try:
        if path.stat().st_size > 64 << 20:
            raise ValueError("too large")
        data = json.loads(path.read_text(encoding="utf-8"))
        files = data["files"]
        fmt = data["topo_build"]
        if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in files.items()):
            raise ValueError("files is not a mapping of paths to digests")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NotABuild(f"{path} cannot be read as topo's build stamp ({exc})") from None
    if not isinstance(fmt, int) or fmt > MANIFEST_FORMAT:
        raise NotABuild(f"{path} is of a newer format ({fmt!r}) than this topo reads ({MANIFEST_FORMAT})")
    return files


def foreign_entries(folder: Path, files: Iterable[str]) -> list[str]:
    """Paths under ``folder`` (files, links, folders) that a stamp listing ``files`` does not account for.

    A folder is accounted for when a listed file is inside it; nothing is followed through a link.
    """
    listed = set(files) | {MANIFEST}
    dirs = {"."}
    for p in listed:
        dirs.update(_parents(p))
    foreign = []
    for root, subdirs, names in os.walk(folder):
        rel_root = Path(root).relative_to(folder)
        for name in sorted(subdirs):
            rel = str(rel_root / name)
            if rel not in dirs or os.path.islink(os.path.join(root, name)):
                foreign.append(rel + "/")
        subdirs[:] = [d for d in subdirs if str(rel_root / d) in dirs and not os.path.islink(os.path.join(root, d))]
        foreign += [str(rel_root / name) for name in sorted(names) if str(rel_root / name) not in listed]
    return sorted(foreign)


def _parents(path: str) -> list[str]:
    """The folders a stamp's path is inside (``a/b/c`` -> ``a/b``, ``a``, ``.``), as ``Path(path).parents``
    gives them, with string operations for a plain path (pathlib costs tens of microseconds a path,
    seconds for a stamp of 100,000 entries)."""
    if not path or path.startswith(("/", "./")) or "//" in path or "/./" in path or path.endswith(("/", "/.")):
        return [str(parent) for parent in Path(path).parents]
    out, end = [], path.rfind("/")
    while end > 0:
        out.append(path[:end])
        end = path.rfind("/", 0, end)
    out.append(".")
    return out
