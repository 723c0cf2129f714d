"""Running a sweep's designs: each built, costed and analysed into one row, cached, locally or on Dask.

A sweep is a list of designs: every combination of a *grid* (spec fields and analysis options,
each with a list of values) and any *explicit cases* (one design each), over a base spec. Each
design is one :class:`Task`: its resolved :class:`~topo.spec.FabricSpec`, its
:class:`~topo.analysis.analyze.AnalysisOptions`, the message sizes of its busbw columns, and an
optional failure Monte Carlo (``trials`` draws of ``fail_random`` of the switch-to-switch links).
:func:`evaluate` turns a task into a row; it is a pure function of the task (the Monte Carlo
seeds come from the design's key and the trial number, never from the process that runs it), so
the rows are the same on local processes and on a Dask cluster, in any order.

Rows are cached by the task's key (a digest of the topo version, the spec, the options and the
sweep settings), one JSON file per design, written atomically as each design finishes: a sweep
run again after an interruption computes only what is missing.

The sweep's planning (its file, grid and tasks) is :mod:`topo.pipeline.sweep`; the columns and the
Pareto view are :mod:`topo.outputs.sweep_table`. docs/sweep.md describes the columns, the cache, the
Pareto view and how to point a sweep at a Dask cluster.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import errno
import os
import stat
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import MISSING, asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import __version__
from ..errors import TopoError
from ..outputs.sweep_table import TRIAL_COLUMNS, Sweep, busbw_column, param_column

#: Bumped when the meaning of a cached row changes (with the topo version, part of every key).
CACHE_FORMAT = 2
#: Most designs one sweep takes, and most Monte Carlo trials a design.
MAX_DESIGNS = 100_000
MAX_TRIALS = 10_000


class SweepError(TopoError):
    """A sweep that cannot run: a bad sweep file or value, an unreachable scheduler."""


@dataclass(frozen=True)
class Task:
    """One design of a sweep, everything :func:`evaluate` needs (picklable, self-contained)."""

    index: int  #: position in the sweep, from 1
    params: tuple[tuple[str, Any], ...]  #: the design's own fields and options, as given
    spec: Any  #: the resolved FabricSpec
    options: Any  #: the AnalysisOptions of the intact analysis
    sizes: tuple[int, ...]
    fail_random: float = 0.0
    trials: int = 0
    key: str = ""
    error: str | None = None  #: why the design's spec was refused (no spec then): its row says so
    node: Any = None  #: the NodeModel of its server profile, resolved where the sweep was defined
    fault_key: str = ""  #: what the failure draws depend on: the fabric and the fraction (see trial_seed)


def expand(grid: dict[str, Sequence[Any]], cases: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The designs of a grid (every combination, the last field varying fastest) then the explicit
    cases (each one design; with a grid, each case is a design of its own, not crossed with it).

    >>> expand({"gpus": [1024, 4096], "placement": ["rail", "rack"]})
    [{'gpus': 1024, 'placement': 'rail'}, {'gpus': 1024, 'placement': 'rack'}, {'gpus': 4096, 'placement': 'rail'}, {'gpus': 4096, 'placement': 'rack'}]
    >>> expand({}, [{"gpus": 2048}])
    [{'gpus': 2048}]
    """
    names = list(grid)
    designs = [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))] if names else []
    if not names and not cases:
        designs = [{}]
    return designs + [dict(c) for c in cases]


def _canonical(value: Any) -> Any:
    """JSON-able, order-stable form of spec and option values (tuples as lists, Fractions as text)."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "__dataclass_fields__"):
        return _canonical(asdict(value))
    return str(value)


def _node_payload(node: Any) -> Any:
    """The node model as a cache key holds it: its fields, less those at their default (a field the
    node model gained later with a default, such as ``nvlink_domain``, keeps the keys of the
    designs it does not change)."""
    if node is None:
        return None
    if hasattr(node, "__dataclass_fields__"):
        return _canonical({f.name: getattr(node, f.name) for f in fields(node)
                           if f.default is MISSING or getattr(node, f.name) != f.default})
    return _canonical(node)


def task_key(spec: Any, options: Any, sizes: Sequence[int], fail_random: float, trials: int,
             node: Any = None, extra: Any = None) -> str:
    """The cache key of a design: a digest of everything its row depends on (the node model of its
    server profile, ``extra`` such as the digest of an NCCL constants file), the topo version
    included (a new release recomputes)."""
    prices = spec.price_table
    payload = {
        "node": _node_payload(node),
        "extra": _canonical(extra),
        "format": CACHE_FORMAT,
        "topo": __version__,
        "spec": spec.to_dict(),
        "prices": _canonical(prices) if prices is not None else None,
        "hostnames": _canonical(spec.hostname_table) if spec.hostname_table is not None else None,
        "options": options.to_dict(),
        "sizes": list(sizes),
        "fail_random": fail_random,
        "trials": trials,
    }
    text = json.dumps(_canonical(payload), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def fault_key(spec: Any, fail_random: float) -> str:
    """What a design's failure draws depend on: its fabric (the spec without its name, prices, host
    names and server profile, which do not change the links) and the fraction failed."""
    fabric = {k: v for k, v in spec.to_dict().items() if k not in ("name", "prices", "hostnames", "server")}
    text = json.dumps(_canonical({"fabric": fabric, "fail_random": fail_random}), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def trial_seed(key: str, trial: int) -> int:
    """The failure draw of trial ``trial`` of the design whose :func:`fault_key` is ``key`` (32 bits):
    the same on any machine and worker, and for designs that differ only in what the draw does not
    touch (a price list, the message sizes, the name).

    >>> trial_seed("ab" * 32, 0) == trial_seed("ab" * 32, 0), trial_seed("ab" * 32, 0) != trial_seed("ab" * 32, 1)
    (True, True)
    """
    return int(hashlib.sha256(f"{key}:{trial}".encode()).hexdigest()[:8], 16)


def evaluate(task: Task) -> dict[str, Any]:
    """The row of one design: build it, cable and cost it, analyse it, and run its Monte Carlo.

    A design that cannot be built (a spec the sizing refuses, optics that do not meet) is a row
    whose ``error`` says why; the sweep goes on. The row holds no time or host, so that the same
    task gives the same row wherever it runs.
    """
    import numpy as np

    from ..analysis.analyze import analyze, analyze_faulted, node_model_of
    from ..analysis.faults import apply_faults
    from ..fabric import build_fabric
    from ..cabling import plan_cabling
    from ..summary import summarize

    row: dict[str, Any] = {}
    if task.spec is None:
        return {"error": task.error}
    row.update(describe(task.spec))
    try:
        fabric = build_fabric(task.spec)
        cabling = plan_cabling(fabric)
        summary = summarize(fabric, cabling).to_dict()
        options = replace(task.options, sizes=tuple(task.sizes))
        node = task.node or node_model_of(fabric)
        result = analyze(fabric, options, node=node)
    except TopoError as exc:
        return {**row, "error": _one_line(exc)}
    data = result.to_dict()
    if summary["tiers"] < 3:
        row["core_model"] = None
    power = cabling.power_w.get("total")
    cost = cabling.cost
    row.update({
        "tiers": summary["tiers"], "leaves": summary["switches"]["leaf"], "spines": summary["switches"]["spine"],
        "cores": summary["switches"]["core"], "switches": summary["switches"]["total"],
        "links": summary["links"]["total"], "cables": summary["cables"],
        "transceivers": sum(cabling.totals("transceiver").values()),
        "power_w": None if power is None else round(float(power), 3),
        "power_w_per_gpu": None if power is None else round(float(power) / task.spec.gpus, 3),
        "cost": None if cost is None else cost["total"],
        "cost_per_gpu": None if cost is None else round(cost["total"] / task.spec.gpus, 2),
        "currency": None if cost is None else cost["currency"],
        "bisection_gbps": int(data["bisection"]["gbps"]),
        "bisection_gbps_per_gpu": round(data["bisection"]["gbps"] / task.spec.gpus, 3),
        "maxflow_gbps": int(data["bisection"]["maxflow_gbps"]),
        "diameter_links": data["hops"]["diameter_links"],
    })
    by_size = {r["size_bytes"]: r["busbw_GBps"] for r in data["allreduce"]}
    for size in task.sizes:
        row[busbw_column(size)] = by_size[size]
    if task.trials:
        largest = (max(task.sizes),)
        trial_options = replace(options.for_fabric(fabric), sizes=largest)
        busbw, bisect = [], []
        for t in range(task.trials):
            faults = apply_faults(fabric, (), task.fail_random, trial_seed(task.fault_key or task.key, t))
            # on the intact analysis' hash draws, and no trial above it (docs/reliability.md)
            trial = analyze_faulted(fabric, trial_options, faults, node, intact=result)
            busbw.append(trial.allreduce.to_rows()[0]["busbw_GBps"])
            bisect.append(trial.bisection.maxflow_gbps)
        b, m = np.asarray(busbw, dtype=float), np.asarray(bisect, dtype=float)
        row.update({
            "trials": task.trials,
            "busbw_median_GBps": _sig(float(np.median(b))), "busbw_p5_GBps": _sig(float(np.percentile(b, 5))),
            "busbw_worst_GBps": _sig(float(b.min())),
            "bisection_median_gbps": int(np.median(m)), "bisection_p5_gbps": int(np.percentile(m, 5)),
            "bisection_worst_gbps": int(m.min()),
        })
    return row


def describe(spec: Any) -> dict[str, Any]:
    """The descriptive columns of a design's spec: GPUs, placement, NIC speed, oversubscription and
    each tier's switch model (``64x400G`` for a generic one)."""
    from ..spec import format_ratio, tier_switch

    models = {}
    for tier, role in ((1, "leaf"), (2, "spine"), (3, "core")):
        t = tier_switch(spec, tier)
        models[f"{role}_model"] = t.model or f"{t.radix}x{t.port_gbps}G"
    return {"gpus": spec.gpus, "placement": spec.placement, "nic_gbps": spec.nic_gbps,
            "oversubscription": format_ratio(spec.oversubscription), **models}


def _sig(value: float) -> float:
    return float(f"{value:.6g}")


def _one_line(exc: TopoError) -> str:
    problems = getattr(exc, "problems", None)
    text = "; ".join(problems) if problems else str(exc)
    return " ".join(text.split())


# --- the cache ----------------------------------------------------------------------------------


#: Largest cache file read (bytes): a row is a few kilobytes.
MAX_CACHE_BYTES = 1 << 20
#: Result columns of a row that are whole numbers of at least 0, and those that are numbers of at
#: least 0 or null; ``cost``, ``cost_per_gpu`` may be any number or null, ``currency`` text or null.
COUNT_COLUMNS = ("tiers", "leaves", "spines", "cores", "switches", "links", "cables", "transceivers",
                 "bisection_gbps", "maxflow_gbps")
AMOUNT_COLUMNS = ("power_w", "power_w_per_gpu", "bisection_gbps_per_gpu", "diameter_links")
TRIAL_AMOUNTS = TRIAL_COLUMNS[1:]


def row_digest(row: dict[str, Any]) -> str:
    """SHA-256 of a row's canonical JSON, kept beside it in the cache: a row edited since (by hand,
    or cut short) no longer matches it."""
    return hashlib.sha256(json.dumps(row, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def row_problem(row: Any, task: Task) -> str | None:
    """Why a cached ``row`` is not one that :func:`evaluate` gives for ``task`` (None: it may be):
    the design's descriptive columns as its spec has them, every result column of its type and
    range, a busbw column per size, and the Monte Carlo columns when the task has trials."""
    if not isinstance(row, dict) or not all(isinstance(k, str) for k in row):
        return "its row is not a mapping of columns"
    if task.spec is not None:
        for name, value in describe(task.spec).items():
            if name in row and row[name] != value and not (name == "core_model" and row[name] is None):
                return f"its {name} is not the design's"
    if "error" in row:
        return None if isinstance(row["error"], str) and row["error"] else "its error is not text"
    for name in COUNT_COLUMNS:
        value = row.get(name)
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            return f"its {name} is not a whole number of at least 0"
    for name in (*AMOUNT_COLUMNS, *(busbw_column(s) for s in task.sizes)):
        value = row.get(name)
        if not (value is None or (_number(value) and value >= 0)):
            return f"its {name} is not a number of at least 0"
    for name in ("cost", "cost_per_gpu"):
        if not (row.get(name) is None or _number(row[name])):
            return f"its {name} is not a number"
    if not (row.get("currency") is None or isinstance(row["currency"], str)):
        return "its currency is not text"
    if task.trials:
        if row.get("trials") != task.trials:
            return f"its trials are not {task.trials}"
        for name in TRIAL_AMOUNTS:
            value = row.get(name)
            if not (_number(value) and value >= 0):
                return f"its {name} is not a number of at least 0"
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON has")


class Cache:
    """One JSON file per design, named by its key, under ``folder``; None keeps nothing.

    A cached row is used only when its file is whole and as topo wrote it: a regular file (never
    read through a symbolic link: a link planted at an entry's name is not trusted), JSON of the
    right format and key, the row's digest matching (:func:`row_digest`) and the row shaped as
    :func:`evaluate` makes it (:func:`row_problem`). Any other file is computed again and listed in
    ``rejected`` (file, reason), which the command reports in one line. An entry is written to a
    temporary file of a random name (``mkstemp``, ``O_EXCL``) renamed over the entry's name, which
    replaces a link there, never the file it points to; one that cannot be written is listed in
    ``unwritten`` and reported the same way.
    """

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.rejected: list[tuple[Path, str]] = []
        self.unwritten: list[tuple[Path, str]] = []  #: rows that could not be kept (file, reason)

    def path(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / f"{key}.json"

    def get(self, key: str, task: Task | None = None) -> dict[str, Any] | None:
        """The cached row of ``key`` (checked against ``task`` when given), or None."""
        if self.folder is None:
            return None
        path = self.path(key)
        if not os.path.lexists(path):
            return None
        problem, row = self._read(path, key, task)
        if problem is not None:
            self.rejected.append((path, problem))
            return None
        return row

    def _read(self, path: Path, key: str, task: Task | None) -> tuple[str | None, Any]:
        try:  # never through a link, never waiting on a FIFO
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            return ("a symbolic link, not a file topo wrote" if exc.errno == errno.ELOOP
                    else f"cannot read it ({exc.strerror or exc})"), None
        try:
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    return "not a regular file", None
                if st.st_size > MAX_CACHE_BYTES:
                    return f"{st.st_size:,} bytes, more than a row takes ({MAX_CACHE_BYTES:,})", None
                text = f.read(MAX_CACHE_BYTES + 1).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return "not whole UTF-8 text (cut short, or edited)", None
        try:
            data = json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return "not whole JSON (cut short, or edited)", None
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or data.get("key") != key:
            return "not a row of this topo's cache for its key", None
        row = data.get("row")
        if not isinstance(row, dict) or data.get("digest") != row_digest(row):
            return "its row is not the one topo wrote (its digest does not match)", None
        problem = row_problem(row, task) if task is not None else None
        return problem, row

    def check(self) -> None:
        """Raise SweepError now, before any design is computed, when the folder cannot be written."""
        if self.folder is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            raise SweepError(f"--cache {self.folder}: cannot write there ({exc.strerror or exc})") from None

    def put(self, key: str, row: dict[str, Any]) -> None:
        if self.folder is None:
            return
        try:
            text = json.dumps({"format": CACHE_FORMAT, "key": key, "topo_version": __version__, "row": row,
                               "digest": row_digest(row)}, sort_keys=True, indent=1, allow_nan=False) + "\n"
        except ValueError:  # a figure that is not a number: not kept, computed again next time
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        except OSError as exc:  # the folder cannot be made or written: the row is not kept
            self.unwritten.append((self.path(key), exc.strerror or str(exc)))
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.path(key))  # a link at the entry's name is replaced, not followed
        except OSError as exc:  # (a folder where the file goes, a full disk): the row is not kept
            Path(tmp).unlink(missing_ok=True)
            self.unwritten.append((self.path(key), exc.strerror or str(exc)))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


# --- the work of a sweep, estimated before it starts ---------------------------------------------------


def check_sweep_work(sweep: Sweep, cache: "Cache", workers: int | None, available: int | None = None) -> None:
    """SweepError, before any design runs, when the designs still to compute would not fit this
    machine's memory on ``workers`` local processes at once (the largest ``workers`` designs side by
    side), or when their hash draws (each design's times 1 + its trials) would plainly take hours
    on those processes. ``workers`` None: the designs run on a Dask cluster, whose workers' memory
    and number this machine cannot see, and only each design's own time is checked."""
    from ..analysis.analyze import MAX_DRAWS, analysis_work
    from ..fabric import available_memory
    from ..sizing import plan_fabric

    estimates = []  # (bytes, draws, task)
    seen: set[str] = set()
    for task in sweep.tasks:
        if task.spec is None or task.key in seen:
            continue
        seen.add(task.key)
        if cache.folder is not None and os.path.exists(cache.path(task.key)):
            continue  # (most likely) taken from the cache
        try:
            options = replace(task.options, sizes=tuple(task.sizes))
            work = analysis_work(task.spec, plan_fabric(task.spec), options, task.node or _node(task.spec))
        except TopoError:
            continue  # its row will say why
        estimates.append((work.bytes, work.draws * (1 + task.trials), task))
    if not estimates:
        return
    trials = f" (each design's times 1 + {sweep.trials} trials)" if sweep.trials else ""
    if workers is not None:
        have = available_memory() if available is None else available
        at_once = sorted(estimates, key=lambda e: e[0], reverse=True)[:workers]
        need = sum(e[0] for e in at_once)
        if have is not None and need > have:
            big = at_once[0]
            raise SweepError(f"sweep: design {big[2].index} ({big[2].spec.gpus:,} GPUs) needs about "
                             f"{big[0] / (1 << 30):.1f} GiB of memory, and {len(at_once)} designs at once (-j) "
                             f"about {need / (1 << 30):.1f} GiB; this machine has {have / (1 << 30):.1f} GiB "
                             f"available: lower -j, or the designs' --gpus, --qps or --channels")
    draws = sum(e[1] for e in estimates)
    per_process = draws // (workers or 1) if workers is not None else max(e[1] for e in estimates)
    if per_process > MAX_DRAWS:
        where = f"on {workers} processes" if workers is not None else "for its largest design"
        raise SweepError(f"sweep: {len(estimates):,} designs to compute make {draws:,} queue-pair hash draws"
                         f"{trials}, {per_process:,} {where}, which would take hours (more than {MAX_DRAWS:,}): "
                         f"lower --trials, --hash-samples, --qps or the designs")


def _node(spec: Any) -> Any:
    from ..hardware.catalog import resolve_server

    return resolve_server(spec, None).node_model()


# --- running --------------------------------------------------------------------------------------


@dataclass
class RunStats:
    """What a run did: designs in all, taken from the cache, computed, and failed (an error row)."""

    designs: int = 0
    cached: int = 0
    computed: int = 0
    failed: int = 0
    where: str = ""


def run(sweep: Sweep, cache: Cache, jobs: int | None = None, scheduler: str | None = None,
        progress: Callable[[int, int], None] | None = None, scheduler_timeout: float | None = None
        ) -> tuple[list[dict[str, Any]], RunStats]:
    """Every design's row, in sweep order: from the cache, else computed on ``jobs`` local processes
    (default: the CPUs this process may use) or on the Dask cluster at ``scheduler``. Each computed
    row is cached as soon as it is back. ``progress(done, total)`` is called as designs finish. On a
    cluster that has had no workers for ``scheduler_timeout`` seconds (DASK_NO_WORKERS_TIMEOUT), or
    whose worker died running a design, SweepError says so; the rows back by then are cached."""
    stats = RunStats(designs=len(sweep.tasks))
    rows: dict[str, dict[str, Any]] = {}
    todo: dict[str, Task] = {}  # one computation per distinct key (a design listed twice is one)
    for task in sweep.tasks:
        if task.key in rows or task.key in todo:
            continue
        if task.spec is None:  # refused by the spec's checks: nothing to compute or cache
            rows[task.key] = evaluate(task)
            continue
        hit = cache.get(task.key, task)
        if hit is not None:
            rows[task.key] = hit
        else:
            todo[task.key] = task
    stats.cached = sum(1 for t in {t.key: t for t in sweep.tasks}.values() if t.key in rows and t.spec is not None)
    done = len(rows)
    distinct = len(rows) + len(todo)
    if progress is not None:
        progress(done, distinct)

    def finished(key: str, row: dict[str, Any]) -> None:
        nonlocal done
        cache.put(key, row)
        rows[key] = row
        done += 1
        if progress is not None:
            progress(done, distinct)

    if todo:
        tasks = list(todo.values())
        if scheduler:
            stats.where = f"Dask cluster at {scheduler}"
            _run_dask(scheduler, tasks, finished,
                      DASK_NO_WORKERS_TIMEOUT if scheduler_timeout is None else scheduler_timeout)
        else:
            workers = max(1, min(jobs or _cpus(), len(tasks)))
            stats.where = f"{workers} local process" + ("es" if workers > 1 else "")
            _run_local(tasks, workers, finished)
    else:
        stats.where = "the cache"
    stats.computed = len(todo)
    out = []
    for task in sweep.tasks:
        # the design's number and fields are this sweep's; the results are the key's
        row = {**rows[task.key], "design": task.index, "key": task.key[:12],
               **{param_column(k): v for k, v in task.params}}
        out.append({c: row.get(c) for c in sweep.all_columns})
    stats.failed = sum(1 for r in out if r.get("error"))
    return out, stats


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _run_local(tasks: list[Task], workers: int, finished: Callable[[str, dict[str, Any]], None]) -> None:
    if workers == 1:
        for task in tasks:
            finished(task.key, evaluate(task))
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(evaluate, task): task for task in tasks}
        try:
            for future in as_completed(futures):
                finished(futures[future].key, future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise


#: Seconds a sweep on a Dask cluster waits while the cluster has no worker (all stopped or gone)
#: before it ends with an error (``topo sweep --scheduler-timeout``).
DASK_NO_WORKERS_TIMEOUT = 60.0
#: Seconds between two looks at the cluster while no design finishes.
DASK_POLL = 1.0


def _run_dask(address: str, tasks: list[Task], finished: Callable[[str, dict[str, Any]], None],
              timeout: float = DASK_NO_WORKERS_TIMEOUT) -> None:
    try:
        from distributed import Client, wait
    except ImportError:
        raise SweepError(f"--scheduler {address}: Dask's distributed package is not installed here; "
                         f"install it with pip install 'topo[cluster]' (and topo on every worker)") from None
    try:
        client = Client(address, timeout="20s")
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise SweepError(f"--scheduler {address}: no Dask scheduler answered ({' '.join(str(exc).split())})") from None
    try:
        versions = client.run(_topo_version)
        if not versions:
            raise SweepError(f"--scheduler {address}: the cluster has no workers")
        wrong = sorted({v for v in versions.values() if v != __version__})
        if wrong:
            raise SweepError(f"--scheduler {address}: workers run topo {', '.join(wrong)}, this is {__version__}; "
                             f"install the same topo on every worker, so that the rows are this version's")
        futures = client.map(evaluate, tasks, key=[f"topo-sweep-{t.key}" for t in tasks])
        by_key = {f.key: t for f, t in zip(futures, tasks)}
        pending = set(futures)
        idle_since: float | None = None  # when the cluster was first seen without workers
        while pending:
            try:
                done, pending = wait(pending, timeout=DASK_POLL, return_when="FIRST_COMPLETED")
            except TimeoutError:  # none finished meanwhile
                done = set()
            for future in done:
                task = by_key[future.key]
                try:
                    row = future.result()
                except Exception as exc:  # the task's worker died (KilledWorker), or it was cancelled
                    raise SweepError(f"--scheduler {address}: design {task.index} did not run on the cluster "
                                     f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
                                     f"{len(pending):,} designs not run, the finished ones are cached") from None
                finished(task.key, row)
            if done:
                idle_since = None
                continue
            if _workers(client) > 0:
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= timeout:
                raise SweepError(f"--scheduler {address}: the cluster has had no workers for {timeout:g} s "
                                 f"(--scheduler-timeout); {len(pending):,} designs not run, the finished "
                                 f"ones are cached")
    finally:
        client.close(timeout=10)


def _workers(client: Any) -> int:
    """Workers the scheduler knows now (0 when it cannot say)."""
    try:
        return len(client.scheduler_info().get("workers", {}))
    except (OSError, TimeoutError, KeyError, AttributeError):
        return 0


def _topo_version() -> str:
    from topo import __version__ as version

    return version

