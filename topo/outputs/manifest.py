"""The build stamp: ``topo-build.json``, the list of every file topo wrote into a folder.

The last file of every folder topo writes (a build, a report or a sweep folder) records the command
that wrote it and each other file with its SHA-256 and size, in path order. It is what marks a
folder as topo's own: ``--force`` replaces only a folder of its own command's kind whose every
file is in its stamp, unchanged (so nothing the user put there or edited is lost); ``topo analyze
DIR`` and ``topo check DIR`` read it to know that the folder is whole and unedited. Same files,
same bytes: the stamp holds no time.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Iterator, Mapping, NamedTuple

from .. import __version__
from ..errors import quote
from ..inputs import parse_json, read_text, shown_path

#: File name of the stamp in a build folder.
MANIFEST = "topo-build.json"
#: Format of the stamp (``topo_build`` key); a reader refuses a newer one. The keys ``command``
#: and ``sizes`` came later within format 1: a reader that does not know them reads the rest.
MANIFEST_FORMAT = 1
#: The commands that stamp a folder, and what the folder each writes is called in messages.
KINDS = {"build": "a design folder (topo build)", "report": "a report folder (topo report)",
         "sweep": "a sweep folder (topo sweep)"}
#: Files that only a folder of that command holds: the kind of a stamp written before stamps named
#: their command (a design folder holds a report.html too, so design.json is looked for first).
KIND_MARKERS = (("design.json", "build"), ("sweep.json", "sweep"), ("report.html", "report"))


class Written(NamedTuple):
    """A file that the process which made it has already written into the output folder (the
    switch configs' workers do): its SHA-256 and size stand in for its text."""

    digest: str
    size: int


def digest(text: str | bytes) -> str:
    """SHA-256 of a file's bytes (text is UTF-8), in hex."""
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def with_manifest(files: Iterable[tuple[str, str | bytes]], command: str = "build"
                  ) -> Iterator[tuple[str, str | bytes]]:
    """The files as they come, then the stamp that lists them, written by ``command``."""
    digests: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for path, text in files:
        if isinstance(text, Written):
            digests[path], sizes[path] = text.digest, text.size
        else:
            data = text.encode("utf-8") if isinstance(text, str) else text
            digests[path], sizes[path] = digest(data), len(data)
        yield path, text
    yield MANIFEST, manifest_text(digests, sizes, command)


def manifest_text(digests: Mapping[str, str], sizes: Mapping[str, int] | None = None, command: str = "build") -> str:
    """The stamp's text for ``{path: sha256}`` and ``{path: bytes}``, written by ``command``."""
    assert command in KINDS, command
    body: dict[str, object] = {"topo_build": MANIFEST_FORMAT, "command": command, "topo_version": __version__,
                               "files": {path: digests[path] for path in sorted(digests)}}
    if sizes is not None:
        body["sizes"] = {path: sizes[path] for path in sorted(sizes)}
    return json.dumps(body, indent=2) + "\n"


class NotABuild(ValueError):
    """A folder that is not a whole build folder of topo's; the message says why."""


class Stamp(NamedTuple):
    """A folder's stamp as read: ``{path: sha256}``, ``{path: bytes}`` (empty in a stamp of an
    earlier topo) and the command that wrote the folder (one of :data:`KINDS`, or what a newer topo
    named)."""

    files: dict[str, str]
    sizes: dict[str, int]
    command: str


def read_manifest(folder: Path) -> dict[str, str]:
    """``{path: sha256}`` of a build folder's stamp.

    Raises
    ------
    NotABuild
        If the folder has no stamp, or one that cannot be read.
    """
    return read_stamp(folder).files


def read_stamp(folder: Path) -> Stamp:
    """The stamp of a folder topo wrote. A stamp without ``command`` (written before stamps named
    their command) is of the command whose file it lists (:data:`KIND_MARKERS`): ``design.json``
    a build, ``sweep.json`` a sweep, ``report.html`` a report; one listing none of them is of no
    command (``""``), which no command replaces.

    Raises
    ------
    NotABuild
        If the folder has no stamp, or one that cannot be read.
    """
    path = Path(folder) / MANIFEST
    if not path.is_file() or path.is_symlink():
        raise NotABuild(f"{folder} has no {MANIFEST}, so it is not a folder topo built (or one built before "
                        f"topo stamped its folders)")
    try:  # at most 64 MiB, and nested however deep: one line saying why, never a traceback
        data = parse_json(read_text(path, 64 << 20), shown_path(path))
    except ValueError as exc:  # an InputFileError or a JSON error, neither quoting the file's text
        raise NotABuild(f"{exc}; it cannot be read as topo's build stamp") from None

    def unreadable(why: str) -> NotABuild:
        return NotABuild(f"{shown_path(path)} cannot be read as topo's build stamp ({why})")

    if not isinstance(data, dict):
        raise unreadable("not a mapping")
    files, fmt = data.get("files"), data.get("topo_build")
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise unreadable("files is not a mapping of paths to digests")
    if isinstance(fmt, bool) or not isinstance(fmt, int):
        raise unreadable("topo_build is not a format number")
    sizes = data.get("sizes", {})
    if not isinstance(sizes, dict) or not all(isinstance(k, str) and type(v) is int for k, v in sizes.items()):
        raise unreadable("sizes is not a mapping of paths to sizes")
    command = data.get("command")
    if command is not None and not isinstance(command, str):
        raise unreadable("command is not a name")
    if fmt > MANIFEST_FORMAT:
        raise NotABuild(f"{shown_path(path)} is of a newer format ({quote(fmt)}) than this topo reads "
                        f"({MANIFEST_FORMAT})")
    if command is None:
        command = next((kind for marker, kind in KIND_MARKERS if marker in files), "")
    return Stamp(files, sizes, command)


def kind_name(command: str) -> str:
    """What a folder written by ``command`` is called in a message."""
    return KINDS.get(command) or (f"a folder of topo {quote(command)}" if command else "a folder of no known kind")


#: Below this many files to hash, one thread hashes them all.
_THREADED_FROM = 64


def _file_key(st: os.stat_result) -> tuple[int, int, int, int]:
    """What changes whenever a file's bytes do (ctime moves on any write, and no user can set it)."""
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _sha256_of(path: str, key: tuple[int, int, int, int]) -> str | None:
    """SHA-256 of the regular file at ``path`` (never followed through a link, a FIFO never waited
    on); None when it is not the file ``key`` describes any more, or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_ino != key[0]:
            return None
        try:
            if hasattr(hashlib, "file_digest"):  # Python 3.11+: read and hashed in C, without the GIL
                return hashlib.file_digest(f, "sha256").hexdigest()
            h = hashlib.sha256()  # Python 3.10: hashlib releases the GIL for blocks this size too
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            return h.hexdigest()
        except OSError:
            return None


def changed_files(folder: str | Path, stamp: Stamp, seen: Mapping[str, tuple[int, int, int, int]] | None = None
                  ) -> tuple[list[str], dict[str, tuple[int, int, int, int]]]:
    """The files a stamp lists that are not as topo wrote them (sorted), and a key of each file
    found unchanged.

    A file is changed when it is not a regular file (a link, a folder), when its size is not the
    stamp's (no need to read it), or when its SHA-256 is not; only files of the stamp's size are
    hashed, several at once (hashlib reads and hashes in C, outside the GIL). A file whose key is
    in ``seen`` as it was (a check made earlier: same inode, size, mtime and ctime) is not read
    again. A listed file that is gone is not changed: nothing of the user's is in it.
    """
    root = os.path.abspath(os.fspath(folder))
    unchanged: dict[str, tuple[int, int, int, int]] = {}
    changed: list[str] = []
    to_hash: list[tuple[str, str, tuple[int, int, int, int]]] = []
    for rel, want in stamp.files.items():
        path = os.path.normpath(os.path.join(root, rel))
        if not path.startswith(root + os.sep):
            continue  # never a file of this folder: replacing the folder cannot lose it
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError:
            changed.append(rel)
            continue
        if not stat.S_ISREG(st.st_mode):
            changed.append(rel)
            continue
        key = _file_key(st)
        if seen is not None and seen.get(rel) == key:
            unchanged[rel] = key
        elif rel in stamp.sizes and stamp.sizes[rel] != st.st_size:
            changed.append(rel)
        else:
            to_hash.append((rel, path, key))
    def hash_all(items: list[tuple[str, str, tuple[int, int, int, int]]]) -> list[str]:
        return [rel for rel, path, key in items if _sha256_of(path, key) != stamp.files[rel]]

    threads = min(4, os.cpu_count() or 1) if len(to_hash) >= _THREADED_FROM else 1
    if threads == 1:
        changed += hash_all(to_hash)
    else:  # one share each, not a task per file: ten thousand futures cost more than they save
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for found in pool.map(hash_all, [to_hash[i::threads] for i in range(threads)]):
                changed += found
    bad = set(changed)
    unchanged.update((rel, key) for rel, _, key in to_hash if rel not in bad)
    return sorted(changed), unchanged


def foreign_entries(folder: Path, files: Iterable[str]) -> list[str]:
    """Paths under ``folder`` (files, links, folders) that a stamp listing ``files`` does not account for.

    A folder is accounted for when a listed file is inside it; nothing is followed through a link
    (a link to a folder is never accounted for), and a folder that cannot be read is not either.
    Plain strings and ``os.scandir``: a 65,536-GPU folder has ten thousand files.
    """
    listed = set(files) | {MANIFEST}
    dirs: set[str] = set()
    for path in listed:
        parent = os.path.dirname(path)
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = os.path.dirname(parent)
    foreign: list[str] = []

    def walk(path: str, rel_dir: str) -> None:
        try:
            with os.scandir(path) as entries:
                found = [(entry.name, entry.path, entry.is_dir(follow_symlinks=False), entry.is_symlink())
                         for entry in entries]
        except OSError:
            foreign.append(rel_dir + "/")
            return
        for name, full, is_dir, is_link in found:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if is_dir:
                if rel in dirs:
                    walk(full, rel)
                else:
                    foreign.append(rel + "/")
            elif is_link and os.path.isdir(full):
                foreign.append(rel + "/")
            elif rel not in listed:
                foreign.append(rel)

    walk(os.fspath(folder), "")
    return sorted(foreign)

