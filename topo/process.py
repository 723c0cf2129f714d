"""The command's process: SIGTERM as an interrupt where the command runs, and a standard output
that can no longer be written.

A command stopped by SIGTERM cleans up as for Ctrl-C (:func:`interrupts_as_keyboard_interrupt`
raises :class:`Terminated`, a KeyboardInterrupt, in the main process: a temporary folder is
removed, worker processes stop); a reader of stdout that goes away, or a full disk behind it, ends
the command quietly (:func:`quiet_stdout`). Standard library only: the command line uses these
before any stage is loaded.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from typing import Any, Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command runs so that it cleans up as for Ctrl-C."""


@contextmanager
def interrupts_as_keyboard_interrupt() -> Iterator[None]:
    """SIGTERM raises Terminated (a KeyboardInterrupt) in the main process while a command runs."""
    def stop(signum: int, frame: Any) -> None:
        raise Terminated

    previous = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (e.g. a test runner's thread)
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def flush_fails() -> bool:
    """Whether what standard output still buffers cannot be written."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return False


def raised_by_echo(exc: BaseException) -> bool:
    """Whether ``exc`` was raised where click writes to a stream (``click.echo``): what topo prints."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "echo" and tb.tb_frame.f_globals.get("__name__") == "click.utils"


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
