"""Writing a build folder: all files or none, and nothing of the user's replaced.

:class:`OutputFolder` checks the target before any work, reserves it while the build runs, and
publishes the finished folder in one rename:

- A new folder appears whole or not at all: files go to a hidden temporary folder beside it
  (``.NAME.tmp-<time>-<pid>``), renamed into place at the end without replacing anything that
  appeared meanwhile (``renameat2(RENAME_NOREPLACE)`` where the system has it).
- An existing folder is replaced only with ``force``, only when it is a build folder of topo's
  (its ``topo-build.json`` lists every file in it), and never when it is the working folder or
  holds it, the home folder, a mount point, or holds an input of the build (the spec file, a
  host-name table, a server profile, a template folder). The swap is atomic where the system can
  exchange two folders (``RENAME_EXCHANGE``), and the old folder is checked again after it.
- Two builds to one folder: the one that started first goes on, the other stops at once with an
  error; a temporary folder left by a killed build is removed by the next build to that folder.
- Every failure is an :class:`~topo.errors.OutputError` with one line, and leaves nothing behind.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import shutil
import time
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import OutputError, quote
from .manifest import NotABuild, Written, foreign_entries, read_manifest

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux or macOS
    fcntl = None  # type: ignore[assignment]

#: Lock file inside a temporary folder, held while its build runs (never published).
LOCK = ".topo-lock"
#: Temporary folders of builds of earlier versions of topo, removed when this old (seconds).
LEGACY_AGE_S = 3600
_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2
_AT_FDCWD = -100


@functools.lru_cache(maxsize=1)
def _renameat2():
    """libc's renameat2 (the C library already loaded in this process), or None where there is none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return function


def _rename(src: Path, dst: Path, flags: int) -> bool:
    """renameat2 with ``flags``; False when the system or file system cannot do it."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(dst))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class OutputFolder:
    """A build folder: checked when made, reserved by :meth:`__enter__`, written by :meth:`write`.

    Parameters
    ----------
    out : path
        The folder to write.
    force : bool
        Replace ``out`` if it is an earlier build folder of topo's.
    inputs : paths
        Files and folders the build reads; ``out`` may not hold any of them.
    """

    def __init__(self, out: str | Path, force: bool = False, inputs: Iterable[str | Path] = ()) -> None:
        self.given = Path(out)
        self.force = force
        self.out, self.state = self._check(Path(out), force, [Path(p) for p in inputs if p is not None])
        self.tmp: Path | None = None
        self._lock: int | None = None

    # --- before any work ----------------------------------------------------------------------

    def _check(self, out: Path, force: bool, inputs: list[Path]) -> tuple[Path, str]:
        """(the folder to write, "absent" | "empty" | "build"), or OutputError."""
        shown = self.given
        if out.is_symlink():
            target = Path(os.path.realpath(out))
            if not target.exists():
                raise OutputError(f"output {shown} is a symbolic link to {target}, which does not exist")
            out = target
        try:
            real = Path(os.path.realpath(out))
            exists = out.exists()
        except OSError as exc:
            raise OutputError(f"output {shown}: {exc.strerror or exc}") from None
        if exists and not out.is_dir():
            raise OutputError(f"output {shown} exists and is not a folder; choose another with -o")
        ancestor = next((p for p in real.parents if p.exists()), None)
        if not exists and ancestor is not None and not ancestor.is_dir():
            raise OutputError(f"output {shown}: {ancestor} is a file, not a folder")
        cwd = Path(os.path.realpath(Path.cwd()))
        if _inside(cwd, real):
            raise OutputError(f"output {shown} is the working folder or holds it; write the design to a "
                              f"folder of its own with -o")
        if real == Path(os.path.realpath(Path.home())):
            raise OutputError(f"output {shown} is the home folder; write the design to a folder of its own with -o")
        for path in inputs:
            if _inside(Path(os.path.realpath(path)), real):
                raise OutputError(f"output {shown} holds {path}, an input of this build, which writing the "
                                  f"folder would delete; write to another folder (e.g. {shown}-new)")
        if not exists:
            return real, "absent"
        if os.path.ismount(real):  # a rename can neither replace nor fill it
            raise OutputError(f"output {shown} is a mount point; write the design to a folder inside it")
        try:
            entries = os.listdir(real)
        except OSError as exc:
            raise OutputError(f"output {shown}: cannot read it ({exc.strerror or exc})") from None
        if not entries:
            return real, "empty"
        if not force:
            raise OutputError(f"output folder {shown} exists and is not empty; use --force to replace it, "
                              f"or -o to write elsewhere")
        self._check_replaceable(real, shown)
        return real, "build"

    @staticmethod
    def _check_replaceable(folder: Path, shown: Path) -> None:
        """OutputError unless ``folder`` holds exactly what its build stamp lists."""
        try:
            listed = read_manifest(folder)
        except NotABuild as exc:
            raise OutputError(f"--force replaces only a build folder of topo's: {exc}; move it away or "
                              f"write elsewhere") from None
        foreign = foreign_entries(folder, listed)
        if foreign:
            more = f" and {len(foreign) - 1:,} more" if len(foreign) > 1 else ""
            raise OutputError(f"--force replaces only what topo wrote: {shown} also holds {quote(foreign[0])}{more}, "
                              f"which topo did not write; move it out first")

    def __enter__(self) -> "OutputFolder":
        parent = self.out.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self.tmp = parent / f".{self.out.name}.tmp-{time.time_ns():020d}-{os.getpid()}"
            os.mkdir(self.tmp, 0o755)
            if fcntl is not None:
                # a POSIX record lock: held by this process only, not by the processes it forks (the
                # config workers), so it ends with this process however that ends
                self._lock = os.open(self.tmp / LOCK, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
                fcntl.lockf(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._cleanup()
            raise OutputError(f"output {self.given}: cannot make a folder in {parent} "
                              f"({exc.strerror or exc})") from None
        try:
            self._tidy_siblings()
        except BaseException:
            self._cleanup()
            raise
        return self

    def _tidy_siblings(self) -> None:
        """Remove what dead builds left beside the folder; stop if an earlier build is writing it."""
        assert self.tmp is not None
        prefix = f".{self.out.name}."
        ours = re.compile(re.escape(prefix) + r"tmp-(\d{20})-(\d+)$")
        legacy = re.compile(re.escape(prefix) + r"(tmp|old)-[A-Za-z0-9_]{8}$")
        for entry in os.scandir(self.out.parent):
            if not entry.name.startswith(prefix) or entry.path == str(self.tmp) or entry.is_symlink():
                continue
            if not entry.is_dir():
                continue
            match = ours.match(entry.name)
            if match:
                state = _lock_state(Path(entry.path) / LOCK)
                if state == "held" and entry.name < self.tmp.name:
                    raise OutputError(f"another topo build (process {match.group(2)}) is writing {self.given}; "
                                      f"wait for it to finish, or write elsewhere with -o")
                if state == "free":
                    shutil.rmtree(entry.path, ignore_errors=True)
            elif legacy.match(entry.name):
                try:
                    old = time.time() - entry.stat().st_mtime > LEGACY_AGE_S
                except OSError:
                    old = False
                if old:
                    shutil.rmtree(entry.path, ignore_errors=True)

    # --- the files -------------------------------------------------------------------------------

    def write(self, files: Mapping[str, str | bytes] | Iterable[tuple[str, str | bytes]]) -> int:
        """Write ``files`` (relative path -> content, or such pairs as they are made) and publish
        the folder; returns how many files were written. A content that is
        :class:`~topo.outputs.manifest.Written` is a file its maker already wrote into
        :attr:`tmp` (with :func:`write_file`): counted, not written again."""
        assert self.tmp is not None, "use the OutputFolder in a with block"
        items = sorted(files.items()) if isinstance(files, Mapping) else files
        count = 0
        made: set[str] = {str(self.tmp)}
        root = str(self.tmp)
        for rel, content in items:
            if isinstance(content, Written):  # its maker wrote it (with write_file)
                output_path(root, rel, str(self.given))
                count += 1
                continue
            data = content.encode("utf-8") if isinstance(content, str) else content
            write_file(self.tmp, rel, data, made, str(self.given))
            if rel.endswith(".sh"):
                os.chmod(self.tmp / rel, 0o755)
            count += 1
        self._publish()
        return count

    def _publish(self) -> None:
        assert self.tmp is not None
        tmp, out = self.tmp, self.out
        try:
            if self._lock is not None:
                os.unlink(tmp / LOCK)  # the lock stays held through the open descriptor
            os.chmod(tmp, 0o755)
            if self.state == "absent":
                if not _rename(tmp, out, _RENAME_NOREPLACE):
                    if out.exists():
                        raise FileExistsError(errno.EEXIST, "exists", str(out))
                    os.rename(tmp, out)
            elif self.state == "empty":
                os.rename(tmp, out)  # replaces the empty folder; fails if it was filled meanwhile
            else:
                self._replace()
        except OutputError:
            raise
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise OutputError(f"output {self.given} was written by someone else while topo was building; "
                                  f"nothing was replaced") from None
            raise OutputError(f"cannot write {self.given}: {exc.strerror or exc}") from None
        self.tmp = None
        self._release()

    def _replace(self) -> None:
        """Swap the new folder in for the old build folder, checking the old one once more."""
        assert self.tmp is not None
        tmp, out = self.tmp, self.out
        if _rename(tmp, out, _RENAME_EXCHANGE):
            try:
                self._check_replaceable(tmp, self.given)  # tmp now holds what was at out
            except OutputError as exc:
                _rename(tmp, out, _RENAME_EXCHANGE)
                raise OutputError(f"output {self.given} changed while topo was building, so nothing was "
                                  f"replaced ({exc.message})") from None
            shutil.rmtree(tmp, ignore_errors=True)
            return
        self._check_replaceable(out, self.given)
        old = out.parent / f".{out.name}.old-{time.time_ns():020d}-{os.getpid()}"
        os.rename(out, old)
        try:
            os.rename(tmp, out)
        except OSError:
            os.rename(old, out)
            raise
        shutil.rmtree(old, ignore_errors=True)

    # --- the end -------------------------------------------------------------------------------

    def __exit__(self, *exc: object) -> None:
        self._cleanup()

    def _cleanup(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def _lock_state(lock: Path) -> str:
    """"held" by a running build, "free" (its build died), or "none" (no lock file)."""
    if fcntl is None:
        return "none"
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return "none"
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return "held"
    finally:
        os.close(fd)
    return "free"


def output_path(root: str, rel: str, shown: str = "the output folder") -> str:
    """The path of the output file ``rel`` in the folder ``root``, normalised; OutputError, naming
    the folder as ``shown``, when it would land outside it (``..``, an absolute name) or is the
    lock file."""
    path = os.path.normpath(os.path.join(root, rel))  # an absolute rel stays absolute: refused
    if not path.startswith(root + os.sep) or rel == LOCK:
        raise OutputError(f"output file {quote(rel)} would be written outside {shown}")
    return path


def write_file(root: str | Path, rel: str, data: bytes, made: set[str], shown: str = "the output folder") -> None:
    """Write one new file ``rel`` of the temporary folder ``root`` (its folder made once: ``made``
    holds the folders made so far, as strings); OutputError, naming the folder as ``shown``, when it
    would land outside, exists, or cannot be written. :meth:`OutputFolder.write` writes with it,
    and so do the processes that write their own files into an OutputFolder's
    :attr:`~OutputFolder.tmp`. Paths are plain strings here: this runs once per file, ten
    thousand times for a big fabric."""
    path = output_path(os.fspath(root), rel, shown)
    try:
        folder = os.path.dirname(path)
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        with open(path, "xb") as f:
            f.write(data)
    except FileExistsError:
        raise OutputError(f"output file {quote(rel)} is made twice") from None
    except OSError as exc:
        raise OutputError(f"cannot write {shown}/{rel}: {exc.strerror or exc}") from None


def write_tree(out: str | Path, files: Mapping[str, str | bytes] | Iterable[tuple[str, str | bytes]],
               force: bool = False, inputs: Iterable[str | Path] = ()) -> int:
    """Write ``files`` as the folder ``out``, atomically (see :class:`OutputFolder`); returns how
    many files were written."""
    with OutputFolder(out, force, inputs) as folder:
        return folder.write(files)
