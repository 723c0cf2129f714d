"""Long analyses in a process of their own, so that Ctrl-C and SIGTERM stop them at once.

Python runs a signal's handler between two of its own steps, never inside a call into compiled
code: a numpy or scipy call (a max-flow, a sort of a million flows) that takes a second delays
Ctrl-C by that second, and the design review's what-ifs are a chain of such calls. :func:`run_apart`
runs such work in a forked child while this process only waits on a pipe, a wait that a signal
ends at once: the interrupt raises here, and the child is killed before it propagates. The child
ignores SIGINT (a terminal sends Ctrl-C to the whole process group: the parent decides), dies
with its parent (Linux ``PR_SET_PDEATHSIG``) and leaves through ``os._exit``, so that none of the
parent's clean-up (the temporary build folder's removal) runs twice.
"""

from __future__ import annotations

import os
import pickle
import signal
from multiprocessing.connection import Connection
from typing import Any, Callable, TypeVar

from ..errors import TopoError
from ..outputs.configs import end_with_parent

T = TypeVar("T")

_STOPPING = {signal.SIGINT, signal.SIGTERM}


def run_apart(work: Callable[[Callable[[int], None]], T], progress: Callable[[int], None] | None = None,
              what: str = "the work") -> T:
    """``work(report)`` in a forked child process, its result returned here; ``report(done)`` in
    the child calls ``progress(done)`` here. An exception of the work is raised here (its text,
    when it does not pickle). Where no process can be forked, the work runs in this process.

    Ctrl-C or SIGTERM while it runs raise here as they would have (KeyboardInterrupt, or the
    command's SIGTERM handler) and the child is killed at once; a child that dies (killed, out of
    memory) is a TopoError naming ``what``.
    """
    if not hasattr(os, "fork"):
        return work(progress or (lambda done: None))
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return work(progress or (lambda done: None))
    # no signal between the fork and the child's own handlers: they wait, blocked, until then
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
    try:
        pid = os.fork()
    except OSError:  # no more processes: here, then
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.close(read_fd)
        os.close(write_fd)
        return work(progress or (lambda done: None))
    if pid == 0:  # the child: never returns
        _child(work, read_fd, write_fd, blocked, what)
    child = _Child(pid)
    os.close(write_fd)
    reader = Connection(read_fd, writable=False)
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a signal that came meanwhile raises here
        while True:
            try:
                kind, value = reader.recv()
            except EOFError:
                raise TopoError(f"the process computing {what} ended without its result ({child.ending()}: "
                                f"killed, or out of memory); nothing was written") from None
            if kind == "progress":
                if progress is not None:
                    progress(value)
            elif kind == "done":
                return value
            else:
                raise value
    finally:
        child.stop()
        reader.close()


def _child(work: Callable[[Callable[[int], None]], Any], read_fd: int, write_fd: int, blocked: Any,
           what: str) -> None:
    code = 1
    try:
        os.close(read_fd)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        parent = os.getppid()
        end_with_parent()
        if os.getppid() != parent:  # the parent died before the line above: nobody waits
            os._exit(1)
        writer = Connection(write_fd, readable=False)
        try:
            result = work(lambda done: writer.send(("progress", done)))
            writer.send(("done", result))
            code = 0
        except Exception as exc:
            try:
                pickle.dumps(exc)
                writer.send(("error", exc))
            except Exception:  # an error that does not pickle: its text
                writer.send(("error", TopoError(f"computing {what} failed: {type(exc).__name__}: {exc}")))
    except BaseException:  # a signal, a broken pipe: the parent is going, so is this process
        pass
    finally:
        os._exit(code)


class _Child:
    """The forked child, reaped exactly once (a pid reaped may be another process's soon)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.status = pid, None

    def _reap(self) -> None:
        while self.status is None:
            try:
                self.status = os.waitpid(self.pid, 0)[1]
            except ChildProcessError:
                self.status = 0

    def stop(self) -> None:
        """Kill the child (if it is still there) and reap it; a second Ctrl-C meanwhile waits."""
        if self.status is not None:
            return
        os.kill(self.pid, signal.SIGKILL)  # not reaped yet: the pid is still the child's
        try:
            self._reap()
        except KeyboardInterrupt:
            self._reap()
            raise

    def ending(self) -> str:
        """How the child ended."""
        self._reap()
        status = self.status or 0
        if os.WIFSIGNALED(status):
            return f"signal {os.WTERMSIG(status)}"
        return f"exit code {os.WEXITSTATUS(status)}"
