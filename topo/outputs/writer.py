"""Writing an output folder or file: all of it or none, and nothing of the user's replaced.

:class:`OutputFolder` checks the target before any work, reserves it while the command runs, and
publishes the finished folder in one rename:

- A new folder appears whole or not at all: files go to a hidden temporary folder beside it
  (``.NAME.tmp-<time>-<pid>-<random>``, made with ``mkdir``, which never follows or reuses what is
  there), renamed into place at the end without replacing anything that appeared meanwhile
  (``renameat2(RENAME_NOREPLACE)`` where the system has it). Files are created with ``O_EXCL``,
  so a link planted in the folder is never written through.
- An existing folder is replaced only with ``force``, only when it is a folder of topo's written
  by the same command (its ``topo-build.json`` names the command and lists every file in it, each
  with the digest it was written with; an edited file needs ``discard_edits`` as well), and never
  when it is the working folder or holds it, the home folder, a mount point, or holds an input of
  the command (the spec file, a host-name table, a server profile, a template folder...). The swap
  is atomic where the system can exchange two folders (``RENAME_EXCHANGE``), and the old folder is
  checked again after it.
- Two builds to one folder: the one that started first goes on, the other stops at once with an
  error; a temporary folder left by a killed build (its lock file, no longer held) is removed by
  the next build to that folder. Nothing else is ever removed: a folder of such a name that topo
  cannot prove it made stays.
- :func:`write_output_file` writes one file (``topo train -o``) with the same care.
- Every failure is an :class:`~topo.errors.OutputError` with one line, and leaves nothing behind.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import OutputError, quote
from ..inputs import shown_path
from .manifest import KINDS, NotABuild, Written, changed_files, foreign_entries, kind_name, read_stamp

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux or macOS
    fcntl = None  # type: ignore[assignment]

#: Lock file inside a temporary folder, held while its build runs (never published).
LOCK = ".topo-lock"
#: A folder set aside by a replacement (``.NAME.old-<time>-<pid>-<random>``) is removed when this
#: old (seconds), and only when it is a whole, unedited folder of topo's.
LEGACY_AGE_S = 3600
#: Most changed files an error line names (the rest are counted).
SHOWN_CHANGED = 3
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


def _token() -> str:
    """A random part of a temporary name, so that no one can plant anything at it beforehand."""
    return secrets.token_hex(4)


def _listing(paths: list[str]) -> str:
    """The first few paths, quoted, and how many more."""
    shown = ", ".join(quote(p) for p in paths[:SHOWN_CHANGED])
    more = len(paths) - SHOWN_CHANGED
    return shown + (f" and {more:,} more" if more > 0 else "")


class OutputFolder:
    """A build folder: checked when made, reserved by :meth:`__enter__`, written by :meth:`write`.

    Parameters
    ----------
    out : path
        The folder to write.
    force : bool
        Replace ``out`` if it is an earlier folder of topo's written by ``command``.
    inputs : paths
        Files and folders the command reads; ``out`` may not hold any of them.
    command : str
        The command writing the folder (``build``, ``report``, ``sweep``): it replaces only a
        folder whose stamp names the same command.
    discard_edits : bool
        With ``force``, replace the folder even when files in it were changed since topo wrote them.
    """

    def __init__(self, out: str | Path, force: bool = False, inputs: Iterable[str | Path] = (),
                 command: str = "build", discard_edits: bool = False) -> None:
        assert command in KINDS, command
        self.given = Path(out)
        self.shown = shown_path(out)  # as error lines show it: a very long name cut
        self.force = force
        self.command = command
        self.discard_edits = discard_edits
        #: a key of each file of the folder to replace found unchanged (see changed_files)
        self._seen: dict[str, tuple[int, int, int, int]] = {}
        self.out, self.state = self._check(Path(out), force, [Path(p) for p in inputs if p is not None])
        self.tmp: Path | None = None
        self._lock: int | None = None

    # --- before any work ----------------------------------------------------------------------

    def _check(self, out: Path, force: bool, inputs: list[Path]) -> tuple[Path, str]:
        """(the folder to write, "absent" | "empty" | "build"), or OutputError."""
        shown = self.shown
        try:  # a name too long, a loop of links: one error line, as any other
            if out.is_symlink():
                target = Path(os.path.realpath(out))
                if not target.exists():
                    raise OutputError(f"output {shown} is a symbolic link to {shown_path(target)}, which does not exist")
                out = target
            real = Path(os.path.realpath(out))
            exists = out.exists()
        except OSError as exc:
            raise OutputError(f"output {shown}: {exc.strerror or exc}") from None
        if exists and not out.is_dir():
            raise OutputError(f"output {shown} exists and is not a folder; choose another with -o")
        ancestor = next((p for p in real.parents if p.exists()), None)
        if not exists and ancestor is not None and not ancestor.is_dir():
            raise OutputError(f"output {shown}: {shown_path(ancestor)} is a file, not a folder")
        cwd = Path(os.path.realpath(Path.cwd()))
        if _inside(cwd, real):
            raise OutputError(f"output {shown} is the working folder or holds it; write the design to a "
                              f"folder of its own with -o")
        if real == Path(os.path.realpath(Path.home())):
            raise OutputError(f"output {shown} is the home folder; write the design to a folder of its own with -o")
        for path in inputs:
            if _inside(Path(os.path.realpath(path)), real):
                raise OutputError(f"output {shown} holds {shown_path(path)}, an input of this {self.command}, which writing "
                                  f"the folder would delete; write to another folder (e.g. {shown}-new)")
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
        self._seen = self._check_replaceable(real, shown)
        return real, "build"

    def _check_replaceable(self, folder: Path, shown: str, seen: Mapping[str, tuple[int, int, int, int]] | None = None
                           ) -> dict[str, tuple[int, int, int, int]]:
        """OutputError unless ``folder`` is a folder of this command's that holds exactly what its
        stamp lists, each file as topo wrote it (unless :attr:`discard_edits`); returns a key of
        each file found unchanged (files whose key is in ``seen`` are not read again)."""
        try:
            stamp = read_stamp(folder)
        except NotABuild as exc:
            raise OutputError(f"--force replaces only a {self.command} folder of topo's: {exc}; move it away or "
                              f"write elsewhere") from None
        if stamp.command != self.command:
            raise OutputError(f"output {shown} is {kind_name(stamp.command)}, and topo {self.command} --force "
                              f"replaces only {KINDS[self.command]}; write elsewhere with -o")
        foreign = foreign_entries(folder, stamp.files)
        if foreign:
            more = f" and {len(foreign) - 1:,} more" if len(foreign) > 1 else ""
            raise OutputError(f"--force replaces only what topo wrote: {shown} also holds {quote(foreign[0])}{more}, "
                              f"which topo did not write; move it out first")
        if self.discard_edits:
            return {}
        changed, unchanged = changed_files(folder, stamp, seen)
        if changed:
            raise OutputError(f"--force replaces only what topo wrote unchanged: in {shown}, {_listing(changed)} "
                              f"changed since topo wrote {'it' if len(changed) == 1 else 'them'}; give "
                              f"--discard-edits as well to lose the changes, or copy them out first")
        return unchanged

    def __enter__(self) -> "OutputFolder":
        parent = self.out.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            # a name no one can plant anything at beforehand; mkdir fails on whatever is there
            self.tmp = parent / f".{self.out.name}.tmp-{time.time_ns():020d}-{os.getpid()}-{_token()}"
            os.mkdir(self.tmp, 0o755)
            if fcntl is not None:
                # a POSIX record lock: held by this process only, not by the processes it forks (the
                # config workers), so it ends with this process however that ends
                self._lock = os.open(self.tmp / LOCK, os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_RDWR
                                     | os.O_CLOEXEC, 0o600)
                fcntl.lockf(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._cleanup()
            raise OutputError(f"output {self.shown}: cannot make a folder in {shown_path(parent)} "
                              f"({exc.strerror or exc})") from None
        try:
            self._tidy_siblings()
        except BaseException:
            self._cleanup()
            raise
        return self

    def _tidy_siblings(self) -> None:
        """Remove what dead builds left beside the folder; stop if an earlier build is writing it.

        Only a folder topo can prove it made is removed: a temporary folder with topo's lock file
        that no process holds (its build died), or a folder set aside by a replacement
        (``.NAME.old-<time>-<pid>-<random>``) that is older than :data:`LEGACY_AGE_S` and whole
        and unedited as its stamp lists it. A folder of such a name without that proof is the
        user's, and stays: so does one named as an earlier topo named its folders
        (``.NAME.tmp-XXXXXXXX``, ``.NAME.old-XXXXXXXX``), which had no lock, and whose set-aside
        folder held the old one a level down, never a stamp of its own."""
        assert self.tmp is not None
        prefix = f".{self.out.name}."
        ours = re.compile(re.escape(prefix) + r"tmp-(\d{20})-(\d+)(-[0-9a-f]{8})?$")
        # only the name topo gives a folder it sets aside: an earlier topo's .NAME.old-XXXXXXXX (made
        # by mkdtemp) held the old folder one level down, never a stamp of its own, so a whole folder
        # of that name is a copy someone made (cp -a out .out.old-20261205), and stays
        aside = re.compile(re.escape(prefix) + r"old-\d{20}-\d+(-[0-9a-f]{8})?$")
        for entry in os.scandir(self.out.parent):
            if not entry.name.startswith(prefix) or entry.path == str(self.tmp) or entry.is_symlink():
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            match = ours.match(entry.name)
            if match:
                state = _lock_state(Path(entry.path) / LOCK)
                if state == "held" and entry.name < self.tmp.name:
                    raise OutputError(f"another topo build (process {match.group(2)}) is writing {self.shown}; "
                                      f"wait for it to finish, or write elsewhere with -o")
                if state == "free":
                    shutil.rmtree(entry.path, ignore_errors=True)
            elif aside.match(entry.name):
                try:
                    old = time.time() - entry.stat(follow_symlinks=False).st_mtime > LEGACY_AGE_S
                except OSError:
                    old = False
                if old and _whole_and_unedited(Path(entry.path)):
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
                output_path(root, rel, self.shown)
                count += 1
                continue
            data = content.encode("utf-8") if isinstance(content, str) else content
            write_file(self.tmp, rel, data, made, self.shown)
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
                    if os.path.lexists(out):  # anything, a dangling link too
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
                raise OutputError(f"output {self.shown} was written by someone else while topo was building; "
                                  f"nothing was replaced") from None
            raise OutputError(f"cannot write {self.shown}: {exc.strerror or exc}") from None
        self.tmp = None
        self._release()

    def _replace(self) -> None:
        """Swap the new folder in for the old build folder, checking the old one once more."""
        assert self.tmp is not None
        tmp, out = self.tmp, self.out
        if _rename(tmp, out, _RENAME_EXCHANGE):
            try:
                self._check_replaceable(tmp, self.shown, self._seen)  # tmp now holds what was at out
            except OutputError as exc:
                _rename(tmp, out, _RENAME_EXCHANGE)
                raise OutputError(f"output {self.shown} changed while topo was building, so nothing was "
                                  f"replaced ({exc.message})") from None
            except BaseException:  # Ctrl-C before the old folder was checked: it goes back, unremoved
                _rename(tmp, out, _RENAME_EXCHANGE)
                raise
            shutil.rmtree(tmp, ignore_errors=True)
            return
        # no exchange: set the old folder aside first and check it there, where nothing lands by
        # its name any more (a check at its own name would leave a window before the rename)
        old = out.parent / f".{out.name}.old-{time.time_ns():020d}-{os.getpid()}-{_token()}"
        os.rename(out, old)
        try:
            self._check_replaceable(old, self.shown, self._seen)
        except OutputError as exc:
            os.rename(old, out)
            raise OutputError(f"output {self.shown} changed while topo was building, so nothing was "
                              f"replaced ({exc.message})") from None
        except BaseException:
            os.rename(old, out)
            raise
        try:
            os.rename(tmp, out)
        except BaseException:
            try:
                os.rename(old, out)
            except OSError:  # something took its name meanwhile: say where the old folder is now
                raise OutputError(f"output {self.shown} was made by someone else while topo replaced it; "
                                  f"nothing of theirs was replaced, and the folder that was there is now "
                                  f"{old}") from None
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


def _whole_and_unedited(folder: Path) -> bool:
    """Whether ``folder`` holds exactly what its stamp lists, every file as topo wrote it."""
    try:
        stamp = read_stamp(folder)
        return not foreign_entries(folder, stamp.files) and not changed_files(folder, stamp)[0]
    except (NotABuild, OSError):
        return False


def _lock_state(lock: Path) -> str:
    """"held" by a running build, "free" (its build died), or "none" (no lock file: not a
    regular file of that name, never followed through a link)."""
    if fcntl is None:
        return "none"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return "none"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "none"
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
               force: bool = False, inputs: Iterable[str | Path] = (), command: str = "build",
               discard_edits: bool = False) -> int:
    """Write ``files`` as the folder ``out``, atomically (see :class:`OutputFolder`); returns how
    many files were written."""
    with OutputFolder(out, force, inputs, command, discard_edits) as folder:
        return folder.write(files)


def check_output_file(path: str | Path, force: bool, inputs: Iterable[str | Path] = (),
                      shown: str = "--output") -> None:
    """OutputError, before any work, when the file ``path`` may not be written: it exists (a file,
    or a link, even a dangling one) and ``force`` is not given, it is a folder or anything else
    that is not a regular file or a link (a device such as ``/dev/null``, a FIFO), or it is (or is
    inside, or links to) an input of the command. A link at ``path`` is replaced by the file, never
    written through."""
    path = Path(path)
    name = f"{shown} {shown_path(path)}"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{name}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{name}: is a folder; give a file name")
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        # /dev/null, a FIFO, a socket: --force would replace the node itself with a file
        raise OutputError(f"{name}: is not a regular file (a device, a FIFO or a socket), which topo never "
                          f"replaces; give a file name")
    if st is not None and not force:
        raise OutputError(f"{name}: exists; give --force to replace it")
    written = Path(os.path.realpath(path.parent)) / path.name  # what the rename replaces
    targets = {written, Path(os.path.realpath(path))}
    given_inputs = [(p, Path(os.path.realpath(p))) for p in inputs if p is not None]
    for given, real in sorted(given_inputs, key=lambda pair: pair[1] not in targets):  # the file itself first
        if any(_inside(target, real) for target in targets):
            where = "" if real in targets else "inside "
            raise OutputError(f"{name}: is {where}{shown_path(given)}, an input of this command, which writing it would "
                              f"replace; write to another file")


def write_output_file(path: str | Path, data: bytes, force: bool, inputs: Iterable[str | Path] = (),
                      shown: str = "--output") -> None:
    """Write one file whole or not at all, replacing nothing of the user's.

    The bytes go to a temporary file beside ``path`` made by :func:`tempfile.mkstemp` (a random
    name, created with ``O_EXCL``: a link planted there is never followed), then renamed to
    ``path``: without ``force`` only when nothing is there (``RENAME_NOREPLACE``, or a hard link,
    which never replaces); with ``force`` replacing what is there, a symbolic link itself and not
    the file it points to. The checks of :func:`check_output_file` are made first."""
    path = Path(path)
    check_output_file(path, force, inputs, shown)
    parent = path.parent
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"{shown} {shown_path(path)}: cannot write it ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # as open() would make it, not mkstemp's 0600
            os.fsync(f.fileno())
        if force:
            os.replace(tmp, path)
        elif not _rename(Path(tmp), path, _RENAME_NOREPLACE):
            _link_or_rename(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if exc.errno == errno.EEXIST:
            raise OutputError(f"{shown} {shown_path(path)}: was written by someone else meanwhile; nothing was "
                              f"replaced (give --force to replace it)") from None
        raise OutputError(f"{shown} {shown_path(path)}: cannot write it ({exc.strerror or exc})") from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _link_or_rename(tmp: str, path: Path) -> None:
    """Put ``tmp`` at ``path`` only if nothing is there: a hard link (which fails on whatever is
    there, a link too) or, on a file system without hard links, a check and a rename."""
    try:
        os.link(tmp, path, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "exists", str(path)) from None
        os.rename(tmp, path)
        return
    os.unlink(tmp)


@functools.lru_cache(maxsize=1)
def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
