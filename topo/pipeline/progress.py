"""What the pipeline says while it runs: stages, counters, notes and warnings, never printed here.

Every verb of the pipeline takes a :class:`Progress`; the command line's implementation writes it
on stderr (``topo.cli.Progress``), and :data:`SILENT`, the default, drops it, so that a library
call prints nothing.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, ContextManager, Iterator, Protocol


class Progress(Protocol):
    """Where a run of the pipeline reports what it does."""

    def stage(self, what: str) -> ContextManager[None]:
        """A stage of the run (``building 1,024 GPUs``), timed while the block runs."""

    def counter(self, what: str, total: int) -> Callable[[int], None]:
        """A callback ``update(done)`` following ``total`` items of a stage."""

    def say(self, message: str) -> None:
        """A note on the run (``wrote 1,234 files``), quiet with ``-q``."""

    def warn(self, message: str) -> None:
        """A line that must be seen, said even with ``-q`` (a step that does not fit in memory)."""


class Silent:
    """A :class:`Progress` that says nothing."""

    @contextmanager
    def stage(self, what: str) -> Iterator[None]:
        yield

    def counter(self, what: str, total: int) -> Callable[[int], None]:
        return _nothing

    def say(self, message: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


def _nothing(done: int) -> None:
    pass


#: The default progress of every verb: nothing is said.
SILENT = Silent()
