"""The configs' rendering job: every switch's files, one switch at a time, in one or several
processes (:class:`ConfigJob`, :func:`config_files`), then the servers' files.

Each process holds the fabric's :class:`~topo.outputs.configs.facts.ConfigFacts`, the template
environment and the switch OS's row (:mod:`.systems`), and renders the chunks of switches it is
given; with a sink it writes them itself and sends back only their digests.
"""

from __future__ import annotations

import ctypes
import itertools
import multiprocessing
import multiprocessing.connection
import signal
import threading
from pathlib import Path
from queue import SimpleQueue
from typing import Any, Callable, Iterable, Iterator

from ... import __version__
from ...errors import TopoError
from ...fabric import Fabric
from ..manifest import Written, digest
from ..templating import template_environment
from ..writer import write_file
from .facts import ConfigFacts
from .hosts import host_files
from .systems import render_switch, switch_os

def config_files(fabric: Fabric, user_dirs: Iterable[str | Path] = (), workers: int = 1,
                 progress: Callable[[int], None] | None = None,
                 sink: str | Path | None = None) -> Iterator[tuple[str, "str | Written"]]:
    """SONiC config_db.json and FRR frr.conf of every switch, then the servers' QoS script and
    address table, as ``(path, text)`` pairs made one switch at a time (memory stays flat).

    Nothing for an InfiniBand switch model. With ``workers`` > 1 the switches are rendered by that
    many processes (where the platform can fork them; else in this one), in the
    same order and with the same bytes.
    ``progress(switches_done)`` is called as switches are finished.

    With ``sink`` (an :class:`~topo.outputs.writer.OutputFolder`'s temporary folder) each switch's
    files are written there by the process that renders them, and come as
    :class:`~topo.outputs.manifest.Written` (their digest and size) instead of their text: no
    rendered text crosses between processes. The packaged templates make valid JSON (the tests
    check it); with ``user_dirs`` every ``config_db.json`` is parsed to check its template.
    :class:`ConfigJob` starts the same work at once, to be collected later.
    """
    with ConfigJob(fabric, user_dirs, workers, sink) as job:
        yield from job.files(progress)


class ConfigJob:
    """The switch configs of a fabric (:func:`config_files`), rendered from the moment the job is
    made: with ``workers`` > 1, the worker processes render (and with a ``sink`` write) every
    switch while this process goes on with other work (``topo build`` analyses the fabric and
    writes the other files meanwhile), and :meth:`files` collects them, in order. With one worker
    (or where no process can be forked), :meth:`files` renders as it goes. Use it as a context
    manager: leaving it stops the workers, whatever they were doing. Its files are collected once.
    Jobs that render in this process share its module state: collect one before making the next.

    Each worker has two pipes of its own, nothing else shared: down one it is told which chunk of
    switches to render next (two ahead, so it never waits), up the other it sends each chunk's
    files, which a thread of this process receives as they come and hands out the next chunk. So
    the chunks go to whichever worker is free; a worker that dies (killed, or out of memory) closes
    its pipes, and collecting the configs stops with one error instead of waiting for its
    switches; stopping the workers is killing them. Without a sink, the rendered texts wait in
    this process until collected: collect them soon.

    The thread hands the chunks to :meth:`files` through a ``queue.SimpleQueue``, whose ``put``
    takes no lock a caller could hold: Ctrl-C or SIGTERM raise in the main thread wherever it is
    (inside a ``with lock:`` too, which then stays locked), and the thread, which :meth:`close`
    waits for, must still be able to end."""

    def __init__(self, fabric: Fabric, user_dirs: Iterable[str | Path] = (), workers: int = 1,
                 sink: str | Path | None = None, shown: str = "the output folder") -> None:
        self.fabric, self.user_dirs, self.sink = fabric, tuple(user_dirs), sink
        self.shown = shown  # the folder as write errors name it (the -o the user gave)
        switches = list(range(fabric.first(1), len(fabric.names))) if fabric.ethernet else []
        self.chunks = [switches[i:i + CONFIG_CHUNK] for i in range(0, len(switches), CONFIG_CHUNK)]
        self.workers: list[_Worker] = []
        self.results: dict[int, list[tuple[str, Any]]] = {}  # chunks files() has received, not yet taken
        self.failure: BaseException | None = None  # what stopped the collector, once files() has received it
        self.arrivals: SimpleQueue[tuple[int, Any]] = SimpleQueue()  # (chunk, files) or (-1, error)
        self.collector: threading.Thread | None = None
        self.collected = False
        self.closed = False
        workers = min(workers, len(self.chunks))  # no process without a chunk to render
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            self._start(multiprocessing.get_context("fork"), workers, sink)

    def _start(self, context: Any, workers: int, sink: str | Path | None) -> None:
        try:
            for w in range(workers):
                tasks_in, tasks_out = context.Pipe(duplex=False)
                files_in, files_out = context.Pipe(duplex=False)
                process = context.Process(target=_work, daemon=True, name=f"topo-configs-{w}",
                                          args=(self.fabric, self.user_dirs, sink, self.shown, self.chunks, tasks_in,
                                                files_out))
                process.start()  # the worker starts now
                tasks_in.close()  # the worker holds the only other ends: its end closes them
                files_out.close()
                self.workers.append(_Worker(process, tasks_out, files_in))
        except OSError:  # no more processes or pipes: render here
            self.close()
            return
        # the thread starts after the last fork: no worker inherits it, or a lock it holds
        self.collector = threading.Thread(target=self._collect, name="topo-configs", daemon=True)
        self.collector.start()

    def _collect(self) -> None:
        """The collector thread: files in, the next chunk out, until every chunk is in, a worker
        fails or dies, or the job is closed."""
        todo = iter(range(len(self.chunks)))
        sent = 0
        try:
            for worker in self.workers:  # two chunks each to start with
                for k in itertools.islice(todo, 2):
                    worker.give(k)
            busy = {w.files: w for w in self.workers}
            while busy:
                for conn in multiprocessing.connection.wait(list(busy)):
                    worker = busy[conn]
                    try:
                        kind, k, value = conn.recv()
                    except (EOFError, OSError):  # the worker is gone: it ends only when told, or stopped
                        del busy[conn]
                        if worker.given and not self.closed:
                            raise TopoError(f"a process rendering the switch configs died ({worker.end()}: "
                                            "killed, or out of memory); the build stopped, nothing was "
                                            "written; -j 1 renders them in this process") from None
                        continue
                    if kind == "error":
                        raise value
                    worker.given.discard(k)
                    self.arrivals.put((k, value))
                    sent += 1
                    k = next(todo, None)
                    if k is None:
                        worker.done()
                    else:
                        worker.give(k)
        except BaseException as exc:  # for files() to raise
            self.arrivals.put((-1, exc))
        else:
            if sent < len(self.chunks):
                self.arrivals.put((-1, RuntimeError("this ConfigJob was closed before its files were collected")))

    def __enter__(self) -> "ConfigJob":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (at once, if they are still rendering)."""
        self.closed = True
        workers, self.workers = self.workers, []
        for worker in workers:
            if worker.process.exitcode is None:
                worker.process.kill()
        for worker in workers:
            worker.process.join()
        if self.collector is not None:
            self.collector.join()  # it sees every worker's pipe close
        for worker in workers:
            worker.tasks.close()
            worker.files.close()

    def _chunk(self, k: int) -> list[tuple[str, Any]]:
        """Chunk ``k``'s files once a worker has sent them; the error that stopped the workers."""
        while k not in self.results and self.failure is None:
            got, value = self.arrivals.get()
            if got < 0:
                self.failure = value
            else:
                self.results[got] = value
        if k not in self.results:
            raise self.failure  # type: ignore[misc]
        return self.results.pop(k)

    def files(self, progress: Callable[[int], None] | None = None) -> Iterator[tuple[str, "str | Written"]]:
        """Every switch's files, in fabric order, then the host files; ``progress(switches_done)``
        as they come."""
        if not self.chunks:
            return
        if self.collected:
            raise RuntimeError("a ConfigJob's files are collected once")
        self.collected = True
        done = 0
        # this process's module state is this job's from here on (another job's may be there)
        _init_worker(self.fabric, self.user_dirs, self.sink, self.shown)
        if self.collector is not None and self.closed:
            raise RuntimeError("this ConfigJob was closed before its files were collected")
        # the host files first, though they come last: while the workers render (made after them,
        # they would be the only work left, on one core)
        hosts = self._host_files()
        if self.collector is not None:
            for k, chunk in enumerate(self.chunks):
                yield from self._chunk(k)
                done += len(chunk)
                if progress:
                    progress(done)
            self.close()
        else:
            for chunk in self.chunks:
                yield from _render_chunk(chunk)
                done += len(chunk)
                if progress:
                    progress(done)
        yield from hosts

    def _host_files(self) -> list[tuple[str, str]]:
        """The servers' QoS script and address table (made first, handed out after the switches' files)."""
        return host_files(self.fabric, _WORKER["env"], _WORKER["shared"])


class _Worker:
    """A config process, the pipe that tells it which chunk to render and the pipe its files come
    up, and the chunks it was given and has not sent back."""

    def __init__(self, process: Any, tasks: Any, files: Any) -> None:
        self.process, self.tasks, self.files = process, tasks, files
        self.given: set[int] = set()

    def give(self, k: int) -> None:
        self.given.add(k)
        self._send(k)

    def done(self) -> None:
        """Nothing more to render: it ends after the chunks it has."""
        self._send(None)

    def _send(self, message: int | None) -> None:
        try:
            self.tasks.send(message)
        except OSError:  # it has stopped: its files pipe says why (its error, or its end)
            pass

    def end(self) -> str:
        """How the process ended."""
        self.process.join()
        code = self.process.exitcode
        return f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"


#: Switches rendered per task (one worker task, one progress step).
CONFIG_CHUNK = 32
_WORKER: dict[str, Any] = {"env": None, "facts": None, "shared": None, "os": None, "sink": None, "made": None, "check": True,
                           "shown": "the output folder"}


def _work(fabric: Fabric, user_dirs: tuple, sink: str | Path | None, shown: str, chunks: list[list[int]],
          tasks: Any, out: Any) -> None:
    """A worker process: renders the chunks it is told to (by index, until told None) and sends
    each one's files up ``out``, or the first error, and stops. Ctrl-C is the parent's to handle
    (it stops the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    end_with_parent()
    try:
        _init_worker(fabric, user_dirs, sink, shown)
        while (k := tasks.recv()) is not None:
            out.send(("files", k, _render_chunk(chunks[k])))
    except EOFError:  # the parent is gone
        pass
    except Exception as exc:
        try:
            out.send(("error", -1, exc))
        except Exception:  # an error that does not pickle: its text
            out.send(("error", -1, TopoError(f"rendering the switch configs failed: {type(exc).__name__}: {exc}")))
    finally:
        out.close()


def end_with_parent() -> None:
    """Linux: a SIGTERM to this worker when the process that forked it dies (even by SIGKILL), so that
    no worker is left waiting for work that will never come."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _init_worker(fabric: Fabric, user_dirs: tuple, sink: str | Path | None = None,
                 shown: str = "the output folder") -> None:
    facts = ConfigFacts(fabric)
    shared = facts.shared()
    shared["name"] = fabric.spec.name
    env = template_environment(user_dirs)
    env.memo_includes = True  # each switch's facts are made for it and never changed
    _WORKER.update(env=env, facts=facts, shared=shared, os=switch_os(fabric),
                   sink=Path(sink) if sink is not None else None, made=set(), check=bool(user_dirs), shown=shown)


def _render_chunk(switches: list[int]) -> list[tuple[str, "str | Written"]]:
    """The files of ``switches`` (vertex indices), each as its OS's table row lists them; with a sink,
    written there, and their digests in their place."""
    env, facts, shared, system = _WORKER["env"], _WORKER["facts"], _WORKER["shared"], _WORKER["os"]
    out: list[tuple[str, Any]] = []
    for v in switches:
        sw = facts.switch(v)
        out += render_switch(system, env, sw, {"sw": sw, "fabric": shared, "version": __version__}, _WORKER["check"])
    sink = _WORKER["sink"]
    if sink is None:
        return out
    written = []
    for rel, text in out:  # write them here: only their digests go back to the parent
        data = text.encode("utf-8")
        write_file(sink, rel, data, _WORKER["made"], _WORKER["shown"])
        written.append((rel, Written(digest(data), len(data))))
    return written
