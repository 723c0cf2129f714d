"""Reading the files a user names: only regular files, only up to a size, only UTF-8 text.

Every input file (a spec, a server profile, a host-name table, a template, a build folder's
``spec.yaml``, a workload, NCCL constants, a sweep or training result read back) is read through
:func:`read_text`, so that a FIFO never blocks, ``/dev/zero`` never fills memory, and a binary or
truncated file is one clear error instead of a traceback.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

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
    shown = shown_path(path)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise InputFileError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputFileError(f"{shown} is not a regular file ({_kind(info.st_mode)})")
    if info.st_size > limit:
        raise InputFileError(f"{shown} is {info.st_size:,} bytes; topo reads at most {limit:,} from such a file")
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise InputFileError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise InputFileError(f"{shown} grew beyond {limit:,} bytes while it was read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{shown} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                             f"{exc.start:,})") from None


def ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more of the digits 0-9. Python's ``int()`` and ``str.isdigit()``
    also take the digits of other scripts (``"１０２４"`` is 1024 to them), which topo refuses.

    >>> ascii_digits("1024"), ascii_digits("１０２４"), ascii_digits("")
    (True, False, False)
    """
    return text.isascii() and text.isdigit()


def shown_path(path: Any, limit: int = 200) -> str:
    """A file path as an error line shows it: as it is, or its first characters if it is very long
    (a 5,000-character name is not repeated whole)."""
    text = str(path)
    return text if len(text) <= limit else text[:limit - 3] + "..."


#: A quoted value in a parser's message (PyYAML quotes with ``%r``): what the file holds.
_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'" r'|"(?:[^"\\\n]|\\.)*"')
#: Quoted words a parser's message may keep: token kinds (``'<stream end>'``) and one punctuation mark.
_KEEP = re.compile(r"'<[a-z ]{1,40}>'|'[^\w\s'\\]'")


_NAME = re.compile(r"'[A-Za-z_][A-Za-z0-9_. ]{0,39}'")


def problem_kind(problem: str, names: bool = False) -> str:
    """A parser's message without any text of the file it quotes: ``found undefined alias 'x'`` is
    ``found undefined alias``; ``expected ',' or ']', but got '<stream end>'`` stays as it is. With
    ``names``, a quoted name (``'owner' is undefined``, a template's variable) stays too, as an
    error names a field.

    >>> problem_kind("'owner' is undefined", names=True), problem_kind("unexpected '}'", names=True)
    ("'owner' is undefined", "unexpected '}'")
    """
    def keep(m: re.Match) -> str:
        return m.group(0) if _KEEP.fullmatch(m.group(0)) or names and _NAME.fullmatch(m.group(0)) else ""

    text = _QUOTED.sub(keep, problem)
    text = " ".join(text.split())
    text = re.sub(r"\s+([,;:)])", r"\1", text)
    text = re.sub(r"[,;:]?\s*(but )?(found|got)?\s*$", "", text) if text != problem else text
    text = text.replace(":)", ")").replace("()", "").strip(" ,;:")
    return text or "cannot be parsed"


def parse_error(exc: BaseException, where: str, kind: str = "YAML") -> str:
    """One error line for a file a parser could not read: ``WHERE: malformed YAML at line L,
    column C: <problem>``. The line never quotes the file: PyYAML's message shows the offending
    line with a caret and quotes its words, and only the kind of problem is kept of it.

    ``exc`` is what ``yaml.load`` or ``json.loads`` raised: a YAMLError, a JSONDecodeError, a
    RecursionError (nested too deeply) or a ValueError (a number too long for Python's int).

    >>> import json
    >>> try:
    ...     json.loads('{"secret": [1,')
    ... except ValueError as exc:
    ...     parse_error(exc, "x.json", "JSON")
    'x.json: malformed JSON at line 1, column 15: Expecting value'
    """
    if isinstance(exc, RecursionError):
        return f"{where}: malformed {kind}: nested too deeply"
    line = column = None
    if hasattr(exc, "lineno") and hasattr(exc, "colno") and hasattr(exc, "msg"):  # json.JSONDecodeError
        line, column, problem = exc.lineno, exc.colno, problem_kind(str(exc.msg))
    elif hasattr(exc, "problem_mark") or hasattr(exc, "context_mark"):  # yaml.MarkedYAMLError
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        if mark is not None:
            line, column = mark.line + 1, mark.column + 1
        raw = getattr(exc, "problem", None) or getattr(exc, "context", None) or ""
        problem = raw if getattr(exc, "topo_message", False) else problem_kind(raw)
        first = getattr(exc, "context_mark", None)
        if raw == "second occurrence" and first is not None:  # a duplicate anchor: the context names it
            problem = f"{problem_kind(exc.context or '').split(';')[0]} (first on line {first.line + 1:,})"
    elif hasattr(exc, "character") and hasattr(exc, "reason"):  # yaml.reader.ReaderError
        problem = (f"character #x{exc.character:04x} at offset {exc.position:,}: {exc.reason}"
                   if isinstance(exc.character, int) else str(exc.reason))
    elif isinstance(exc, ValueError) and "digits" in str(exc):  # int() of a number past sys.get_int_max_str_digits
        problem = "a number with more than 4,300 digits"
    else:
        problem = "cannot be parsed"
    at = f" at line {line:,}, column {column:,}" if line is not None else ""
    return f"{where}: malformed {kind}{at}: {problem}"


def parse_json(text: str, where: str) -> Any:
    """JSON text as data, or ValueError with one line (:func:`parse_error`): a syntax error at its
    line and column, nesting too deep for Python's parser (a RecursionError), or a number too long
    for Python's int."""
    try:
        return json.loads(text)
    except (RecursionError, ValueError) as exc:  # a JSONDecodeError is a ValueError
        raise ValueError(parse_error(exc, where, "JSON")) from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"
