"""Reading the files a user names: only regular files, only up to a size, only UTF-8 text.

Every input file (a spec, a server profile, a host-name table, a template, a build folder's
``spec.yaml``, a workload, NCCL constants, a sweep or training result read back) is read through
:func:`read_text`, so that a FIFO never blocks, ``/dev/zero`` never fills memory, and a binary or
truncated file is one clear error instead of a traceback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: Largest spec, server profile or build-folder spec.yaml read (bytes).
MAX_SPEC_BYTES = 1 << 20
#: Largest host-name table read (bytes): 8 million nodes of 60-character names fit.
MAX_TABLE_BYTES = 64 << 20
#: Largest result of topo read back (``topo report --sweep``'s sweep.json, ``--train``'s JSON):
#: a sweep of 100,000 designs fits.
MAX_RESULT_BYTES = 1 << 30


class InputFileError(ValueError):
    """A file that cannot be read as asked; the message names the file and says why."""


def read_text(path: str | Path, limit: int = MAX_SPEC_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes.

    Raises
    ------
    InputFileError
        If the file is missing, not a regular file (a folder, a FIFO, a device), larger than
        ``limit``, unreadable, or not UTF-8; the message starts with the path.

    Examples
    --------
    >>> read_text("/dev/zero")
    Traceback (most recent call last):
    ...
    topo.inputs.InputFileError: /dev/zero is not a regular file (a character device)
    """
    path = Path(path)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputFileError(f"{path} is not a regular file ({_kind(info.st_mode)})")
    if info.st_size > limit:
        raise InputFileError(f"{path} is {info.st_size:,} bytes; topo reads at most {limit:,} from such a file")
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise InputFileError(f"{path} grew beyond {limit:,} bytes while it was read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                             f"{exc.start:,})") from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"
