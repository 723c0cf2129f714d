"""Writing an output folder atomically: all files or none, and nothing overwritten unasked."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import OutputError


def check_output_dir(out: Path, force: bool) -> None:
    """Raise OutputError if writing ``out`` would overwrite something without ``force``."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"output {out} exists and is not a folder; choose another with -o")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise OutputError(
            f"output folder {out} exists and is not empty; use --force to replace it, "
            f"or -o to write elsewhere"
        )


def write_tree(
    out: Path, files: Mapping[str, str | bytes] | Iterable[tuple[str, str | bytes]], force: bool = False
) -> int:
    """Write ``files`` (relative path -> content, or such pairs as they are made) as the folder
    ``out``, atomically; returns how many files were written.

    The files go to a hidden temporary folder beside ``out``, which is renamed into place only when
    every file is written. With ``force`` an existing ``out`` is replaced as a whole (never merged);
    without it, an existing non-empty ``out`` is an error and nothing is written.
    """
    out = Path(out)
    check_output_dir(out, force)
    parent = out.parent if str(out.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=parent))
    try:
        items = sorted(files.items()) if isinstance(files, Mapping) else files
        count = 0
        for rel, content in items:
            count += 1
            path = tmp / rel
            if path.resolve().parent != tmp.resolve() and tmp.resolve() not in path.resolve().parents:
                raise OutputError(f"output file {rel!r} would be written outside {out}")
            path.parent.mkdir(parents=True, exist_ok=True)
            data = content.encode("utf-8") if isinstance(content, str) else content
            path.write_bytes(data)
            if rel.endswith(".sh"):
                os.chmod(path, 0o755)
        os.chmod(tmp, 0o755)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=parent))
            os.rename(out, old / out.name)
            try:
                os.rename(tmp, out)
            except OSError:
                os.rename(old / out.name, out)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
        return count
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
