"""``topo sweep``: the planning of a sweep (its file, grid and designs) and its run.

:func:`plan` turns the sweep's definition (a base spec, a sweep file's grid, explicit cases and
settings, the axes given as flags) into a :class:`~topo.outputs.sweep_table.Sweep` of tasks, one
per design, each with its resolved spec, analysis options and cache key; a design whose spec is
refused is a task whose row says why. :func:`sweep` runs them (:mod:`topo.pipeline.sweep_run`:
the cache, local processes or a Dask cluster) and writes the sweep's folder
(:mod:`topo.outputs.sweep_files`). docs/sweep.md describes the sweep file and the columns.

The module imports nothing heavy at its top: the command line reads its constants to declare the
sweep's flags.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import AnalysisError, TopoError, key_name, quote
from .progress import SILENT, Progress

if TYPE_CHECKING:
    from ..outputs.sweep_table import Sweep
    from ..spec import FabricSpec
    from .sweep_run import Cache, RunStats, Task

#: Spec fields a sweep takes once, for every design (a file each; not an axis of the grid).
SWEEP_FIXED_SPEC = ("prices", "hostnames", "server")
#: Analysis options that are not axes of a sweep: the sizes are one list for every design, named
#: failures have different names in every design, and the Monte Carlo has its own flags.
SWEEP_FIXED_OPTIONS = ("sizes", "fail", "fail_random")
#: Message sizes of a sweep's busbw columns when none are given.
SWEEP_SIZES = (8 << 30,)
#: Most values one range of a sweep file gives.
MAX_RANGE_VALUES = 1000
#: The keys of a sweep file.
SWEEP_FILE_KEYS = ("spec", "base", "grid", "cases", "sizes", "fail_random", "trials")


@dataclass(frozen=True)
class Fields:
    """What the command line knows of the fields a sweep may vary.

    ``spec`` are the spec fields (``rail_only`` among them), ``options`` the analysis options an
    axis may vary with their defaults, and ``convert(name, value)`` converts a value of a sweep
    file as the flag of that name converts it (``sizes``, ``fail_random``, ``trials`` and the
    options), an AnalysisError naming the field when it cannot.
    """

    spec: frozenset[str]
    options: dict[str, Any]
    convert: Callable[[str, Any], Any]


@dataclass
class Plan:
    """A planned sweep: its designs, and where their files come from."""

    sweep: "Sweep"
    spec_file: Path | None
    fixed: dict[str, Any]  #: the spec fields given once (price list, host names, server profile)
    base: dict[str, Any]  #: the base spec's fields
    base_dir: Path | None  #: the folder the base spec's file names are relative to
    sweep_file: Path | None = None


@dataclass
class SweepResult:
    """What :func:`sweep` did: the rows in sweep order, the run's counts, and the sweep."""

    sweep: "Sweep"
    rows: list[dict[str, Any]]
    stats: "RunStats"
    data: dict[str, Any]  #: what ``--format json`` prints


def grid_values(path: Path, name: str, value: Any) -> list[Any]:
    """The values of one axis of a sweep file's grid: a list, one value, or a range
    ``{from: A, to: B, step: S}`` (A, A + S, ... up to B) or ``{from: A, to: B, times: F}``
    (A, A x F, ... up to B), of numbers.

    >>> grid_values(Path("s.yaml"), "gpus", {"from": 1024, "to": 8192, "times": 2})
    [1024, 2048, 4096, 8192]
    >>> grid_values(Path("s.yaml"), "oversubscription", {"from": 1, "to": 2, "step": 0.5})
    [1, 1.5, 2]
    """
    if isinstance(value, (list, tuple)):
        return list(value)
    if not isinstance(value, dict):
        return [value]
    keys = set(value)
    if not ({"from", "to"} <= keys and len(keys & {"step", "times"}) == 1 and keys <= {"from", "to", "step", "times"}):
        raise AnalysisError([f"{path}: grid {name}: a range is {{from: A, to: B, step: S}} or {{from: A, to: B, "
                             f"times: F}}, got {quote(str(value))}"])
    nums = {k: v for k, v in value.items()}
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums.values()):
        raise AnalysisError([f"{path}: grid {name}: a range's from, to, step and times are numbers"])
    start, stop = Fraction(str(nums["from"])), Fraction(str(nums["to"]))
    step, times = nums.get("step"), nums.get("times")
    if (step is not None and step <= 0) or (times is not None and times <= 1) or start > stop or \
            (times is not None and start <= 0):
        raise AnalysisError([f"{path}: grid {name}: the range from {nums['from']} to {nums['to']} must rise "
                             f"(step above 0, times above 1 from a start above 0)"])
    out, v = [], start
    while v <= stop:
        out.append(int(v) if v.denominator == 1 else float(v))
        if len(out) > MAX_RANGE_VALUES:
            raise AnalysisError([f"{path}: grid {name}: the range gives more than {MAX_RANGE_VALUES} values"])
        v = v + Fraction(str(step)) if step is not None else v * Fraction(str(times))
    return out


def read_sweep_file(path: Path) -> dict[str, Any]:
    """A sweep file: ``spec`` (a base spec file, relative to this one) or ``base`` (its fields),
    ``grid`` (field: list of values), ``cases`` (a list of field mappings), ``sizes``,
    ``fail_random``, ``trials``."""
    from ..spec import MAX_YAML_VALUES, read_spec_file

    # YAML, bounded and with its errors as one line each; its aliases may not stand for more values
    # than a file could hold written out (the grid and base are walked, copied and hashed)
    data = read_spec_file(path, max_values=MAX_YAML_VALUES)
    unknown = [k for k in data if k not in SWEEP_FILE_KEYS]
    if unknown:
        raise AnalysisError([f"{path}: unknown key {key_name(k)}; a sweep file has {', '.join(SWEEP_FILE_KEYS)}"
                             for k in unknown])
    if data.get("base") is not None and not isinstance(data.get("base"), dict):
        raise AnalysisError([f"{path}: base must map spec fields to values"])
    grid = data.get("grid") or {}
    if not isinstance(grid, dict):
        raise AnalysisError([f"{path}: grid must map fields to lists of values"])
    grid = {str(k): grid_values(path, str(k), v) for k, v in grid.items()}
    empty = [k for k, v in grid.items() if not v]
    if empty:
        raise AnalysisError([f"{path}: grid {k}: no values (an axis needs one or more)" for k in empty])
    cases = data.get("cases") or []
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise AnalysisError([f"{path}: cases must be a list of mappings of fields to values"])
    return {**data, "grid": grid, "cases": cases}


@dataclass
class _Definition:
    """A sweep as asked, before its designs are resolved."""

    spec_file: Path | None
    base: dict[str, Any]
    base_dir: Path | None
    grid: dict[str, list[Any]]
    cases: list[dict[str, Any]]
    sizes: Any
    fail_random: float | None
    trials: int | None


def _definition(spec_file: Path | None, sweep_file: Path | None, sizes: Any, fail_random: float | None,
                trials: int | None, fields: Fields) -> _Definition:
    """The sweep file (its settings where no flag gives them) over the base spec file."""
    from ..spec import MAX_YAML_VALUES, read_spec_file

    d = _Definition(spec_file, {}, None, {}, [], sizes, fail_random, trials)
    if sweep_file is not None:
        data = read_sweep_file(sweep_file)
        if data.get("spec"):
            if spec_file is not None:
                raise AnalysisError([f"-f {spec_file} and {sweep_file}'s spec: give the base design once"])
            d.spec_file = (sweep_file.parent / str(data["spec"]))
        d.base = dict(data.get("base") or {})
        d.base_dir = sweep_file.parent
        d.grid, d.cases = data["grid"], data["cases"]
        if sizes is None and data.get("sizes") is not None:
            given = data["sizes"] if isinstance(data["sizes"], list) else [data["sizes"]]
            d.sizes = fields.convert("sizes", ",".join(str(s) for s in given))
        if fail_random is None and data.get("fail_random") is not None:
            d.fail_random = fields.convert("fail_random", data["fail_random"])
        if trials is None and data.get("trials") is not None:
            d.trials = fields.convert("trials", data["trials"])
    if d.spec_file is not None:
        d.base = {**read_spec_file(d.spec_file, max_values=MAX_YAML_VALUES), **d.base}
        d.base_dir = d.spec_file.parent
    return d


def _check_names(d: _Definition, fields: Fields) -> None:
    """Every axis and case field is a spec field or an analysis option a sweep may vary."""
    fixed_names = set(SWEEP_FIXED_SPEC) | set(SWEEP_FIXED_OPTIONS)
    for name in [*d.grid, *(k for c in d.cases for k in c)]:
        if name in fixed_names:
            raise AnalysisError([f"sweep: {name} is not an axis of a sweep: give it once (--{name.replace('_', '-')})"])
        if name not in fields.spec and name not in fields.options:
            raise AnalysisError([f"sweep: unknown field {quote(name)}; a sweep varies spec fields "
                                 f"(topo build --help) and analysis options (topo analyze --help)"])


def _settings(d: _Definition, jobs: int | None, scheduler: str | None) -> None:
    """The sizes, trials and failure fraction with their defaults, and the settings that clash."""
    d.sizes = tuple(d.sizes) if d.sizes else SWEEP_SIZES
    d.trials = (16 if d.fail_random else 0) if d.trials is None else d.trials
    if d.trials and not d.fail_random:
        raise AnalysisError([f"--trials {d.trials} draws failures: give --fail-random FRACTION as well"])
    d.fail_random = d.fail_random or 0.0
    if d.fail_random and not d.trials:
        raise AnalysisError(["--fail-random with --trials 0 draws nothing: give --trials 1 or more"])
    if scheduler and jobs:
        raise AnalysisError([f"-j {jobs} is the number of local processes; with --scheduler the cluster's "
                             f"workers run the designs: give one or the other"])


def plan(fields: Fields, axes: dict[str, tuple[Any, ...]], spec_file: Path | None = None,
         sweep_file: Path | None = None, sizes: Any = None, fail_random: float | None = None,
         trials: int | None = None, jobs: int | None = None, scheduler: str | None = None) -> Plan:
    """The designs of a sweep: ``axes`` are the flags (a tuple of values each; the fields of
    SWEEP_FIXED_SPEC a single value or None), each non-empty one an axis replacing the sweep
    file's, over the base spec (``spec_file``, or the sweep file's)."""
    from ..outputs.sweep_table import Sweep
    from .sweep_run import MAX_DESIGNS, expand

    d = _definition(spec_file, sweep_file, sizes, fail_random, trials, fields)
    axes = dict(axes)
    fixed = {k: axes.pop(k) for k in SWEEP_FIXED_SPEC if axes.get(k) is not None}
    for name, values in axes.items():  # flags: an axis each, replacing the sweep file's
        if values:
            d.grid[name] = list(values)
    _check_names(d, fields)
    _settings(d, jobs, scheduler)
    count = (math.prod(len(v) for v in d.grid.values()) if d.grid else (0 if d.cases else 1)) + len(d.cases)
    if count > MAX_DESIGNS:  # counted before the grid is expanded: ten axes of 1,000 values never are
        raise AnalysisError([f"sweep: {count:,} designs; at most {MAX_DESIGNS:,} in one sweep"])
    tasks = [_task(index, params, d, fixed, fields) for index, params in enumerate(expand(d.grid, d.cases), 1)]
    columns = tuple(dict.fromkeys(k for t in tasks for k, _ in t.params))
    definition = {"base": d.base, "spec_file": str(d.spec_file) if d.spec_file else None, "grid": d.grid,
                  "cases": d.cases, "fixed": {k: str(v) for k, v in fixed.items()},
                  "sizes": list(d.sizes), "fail_random": d.fail_random, "trials": d.trials}
    sweep = Sweep(tuple(tasks), columns, d.sizes, d.fail_random, d.trials, definition=_jsonable(definition))
    return Plan(sweep, d.spec_file, fixed, d.base, d.base_dir, sweep_file)


def _task(index: int, params: dict[str, Any], d: _Definition, fixed: dict[str, Any], fields: Fields) -> "Task":
    """The task of one design: its spec and options resolved and its cache key, or why not."""
    from ..analysis.analyze import AnalysisOptions
    from ..hardware.catalog import resolve_server
    from ..spec import load_spec
    from .sweep_run import Task, _one_line, fault_key, task_key

    spec_fields = {**fixed, **{k: v for k, v in params.items() if k in fields.spec}}
    option_fields = {k: fields.convert(k, v) for k, v in params.items() if k in fields.options}
    options = AnalysisOptions(**{**fields.options, **option_fields}, sizes=d.sizes, fail=(), fail_random=0.0)
    options.check()
    as_given = tuple((k, _jsonable(v)) for k, v in params.items())
    try:
        spec = load_spec(d.base, _spec_overrides(spec_fields), base_dir=d.base_dir)
        node = resolve_server(spec, d.base_dir).node_model()
    except TopoError as exc:
        return Task(index, as_given, None, options, d.sizes, key=_params_key(as_given), error=_one_line(exc))
    built = spec.to_dict()
    # each field as the design has it (1k is 1024), each option as parsed
    shown = tuple((k, built.get(k, v) if k in fields.spec else _jsonable(getattr(options, k)))
                  for k, v in params.items())
    extra = _file_digest(options.nccl_constants) if options.nccl_constants else None
    return Task(index, shown, spec, options, d.sizes, d.fail_random, d.trials,
                key=task_key(spec, options, d.sizes, d.fail_random, d.trials, node=node, extra=extra),
                node=node, fault_key=fault_key(spec, d.fail_random))


def sweep(planned: Plan, output: Path | None = None, force: bool = False, discard_edits: bool = False,
          cache_dir: Path | None = None, no_cache: bool = False, jobs: int | None = None,
          scheduler: str | None = None, scheduler_timeout: float = 60.0, progress: Progress = SILENT) -> SweepResult:
    """Run a planned sweep: every design's row from the cache (``cache_dir``, by default
    ``OUTPUT.cache`` beside ``output``; none with ``no_cache``) or computed on ``jobs`` local
    processes or the Dask cluster at ``scheduler``; with ``output``, the sweep's folder written."""
    from ..outputs.manifest import with_manifest
    from ..outputs.sweep_files import fronts, sweep_files
    from ..outputs.writer import OutputFolder
    from .sweep_run import _cpus, check_sweep_work, run

    s = planned.sweep
    cache = _cache(cache_dir, no_cache, output)
    folder = None
    if output is not None:
        folder = OutputFolder(output, force, _inputs(planned, cache), "sweep", discard_edits)
    cache.check()
    check_sweep_work(s, cache, None if scheduler else max(1, min(jobs or _cpus(), len(s.tasks))))
    with progress.stage(f"sweep of {len(s.tasks):,} designs" + (f" on {scheduler}" if scheduler else "")):
        rows, stats = run(s, cache, jobs=jobs, scheduler=scheduler, progress=_counters(progress),
                          scheduler_timeout=scheduler_timeout)
    _report_run(cache, stats, rows, progress)
    specs = [spec_for_build(t.spec, planned.fixed, planned.base, planned.base_dir) if t.spec is not None else None
             for t in s.tasks]
    if folder is not None:
        with folder:
            count = folder.write(with_manifest(sweep_files(s, rows, specs).items(), "sweep"))
        progress.say(f"wrote {count:,} files to {output}/")
    data = {"designs": len(rows), "cached": stats.cached, "computed": stats.computed, "failed": stats.failed,
            "columns": list(s.all_columns), "rows": rows, "pareto": fronts(s, rows)}
    return SweepResult(s, rows, stats, data)


def _inputs(planned: Plan, cache: "Cache") -> list[Any]:
    """What the sweep reads, which its output folder may not hold: the spec and sweep files, the
    cache, the names of the files the designs name, the NCCL constants files."""
    s = planned.sweep
    return [planned.spec_file, planned.sweep_file, cache.folder,
            *named_files(planned.fixed, planned.base, planned.base_dir).values(),
            *sorted({Path(t.options.nccl_constants) for t in s.tasks if t.options.nccl_constants})]


def _cache(cache_dir: Path | None, no_cache: bool, output: Path | None) -> "Cache":
    """The sweep's cache: none, the folder named, or ``OUTPUT.cache`` (never through a link)."""
    from .sweep_run import Cache, SweepError

    if no_cache:
        return Cache(None)
    cache = Cache(cache_dir if cache_dir is not None else default_cache(output))
    if cache_dir is None and cache.folder is not None and os.path.islink(cache.folder):
        # a name topo chose, not the user: a link there was planted, and is never followed
        raise SweepError(f"the sweep's cache {cache.folder} is a symbolic link, which topo does not "
                         f"follow; remove it, or name the cache folder with --cache")
    return cache


def _counters(progress: Progress) -> Callable[[int, int], None]:
    """``update(done, total)`` for the run: a counter per total (the distinct designs; a repeat is one)."""
    counters: dict[int, Callable[[int], None]] = {}

    def update(done: int, total: int) -> None:
        if total not in counters:
            counters[total] = progress.counter("designs", total)
        counters[total](done)

    return update


def _report_run(cache: "Cache", stats: "RunStats", rows: list[dict[str, Any]], progress: Progress) -> None:
    """The cache's rejected and unwritten rows (said also with -q), the run's counts, and an
    error when no design could be built."""
    for found, what in ((cache.rejected, "cached row"), (cache.unwritten, "row")):
        if found:  # not progress: said also with -q
            path, why = found[0]
            more = f"; and {len(found) - 1:,} more" if len(found) > 1 else ""
            done = "not trusted, computed again" if found is cache.rejected else "could not be cached"
            progress.warn(f"topo: {_plural(len(found), what)} {done} ({path.name}: {why}{more})")
    progress.say(f"{_plural(stats.designs, 'design')}: {stats.cached:,} from the cache, {stats.computed:,} computed"
                 + (f" on {stats.where}" if stats.computed else "")
                 + (f"; {stats.failed:,} could not be built (the error column says why)" if stats.failed else ""))
    if stats.failed == stats.designs:
        first = next(r["error"] for r in rows if r.get("error"))
        raise AnalysisError([f"no design of the sweep could be built; design 1: {first}"])


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def default_cache(output: Path | None) -> Path | None:
    """The cache beside ``-o OUTPUT``: ``OUTPUT.cache``. An output without a name of its own
    (``.``, ``/``, ``dir/..``) is named by where it is; one with none even there (``/``) has no
    cache, and the output's own check refuses it."""
    if output is None:
        return None
    if output.name in ("", ".", ".."):
        output = Path(os.path.abspath(output))
        if not output.name:
            return None
    return output.with_name(output.name + ".cache")


def _spec_overrides(fields: dict[str, Any]) -> dict[str, Any]:
    """A design's spec fields as flag overrides (``rail_only`` is its two fields, which the design's
    own may not contradict)."""
    from .design import rail_only_clash

    fields = dict(fields)
    if fields.pop("rail_only", None):
        clash = rail_only_clash(fields)
        if clash:
            raise AnalysisError(["rail_only is tiers=1 with rail placement; it contradicts "
                                 + ", ".join(f"{name}={value}" for name, value in clash)])
        fields.update(tiers="1", placement="rail")
    return fields


def spec_for_build(spec: "FabricSpec", fixed: dict[str, Any], base: dict[str, Any], base_dir: Path | None
                   ) -> dict[str, Any]:
    """A design's spec as ``sweep.json`` keeps it: ``spec.to_dict()`` with the files it names
    (price list, host-name table, server profile) as absolute paths, as the flags (from the working
    folder) or the base spec (from its folder) gave them, so that ``topo build -f`` takes it from
    anywhere."""
    out = spec.to_dict()
    for key, path in named_files(fixed, base, base_dir).items():
        out[key] = str(path.resolve())
    return out


def named_files(fixed: dict[str, Any], base: dict[str, Any], base_dir: Path | None) -> dict[str, Path]:
    """The files a sweep's designs name (price list, host-name table, server profile), as the flags
    (from the working folder) or the base spec (from its folder) gave them: those that are files."""
    found = {}
    for key in ("prices", "hostnames", "server"):
        given, where = (fixed[key], Path.cwd()) if fixed.get(key) is not None else (base.get(key), base_dir or Path.cwd())
        if isinstance(given, str):
            path = Path(given) if Path(given).is_absolute() else where / given
            if path.is_file():
                found[key] = path
    return found


def _file_digest(name: str) -> str:
    """The SHA-256 of a file a design reads (an NCCL constants file), so that editing it recomputes."""
    import hashlib

    from ..inputs import InputFileError, read_text

    try:  # as the analysis reads it: from the working folder, a regular file of at most 1 MiB
        text = read_text(name)
    except InputFileError as exc:
        raise AnalysisError([f"--nccl-constants {exc}"]) from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _params_key(params: tuple[tuple[str, Any], ...]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps([list(p) for p in params], default=str).encode()).hexdigest()


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
