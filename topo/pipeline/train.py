"""``topo train``: a workload's step on a fabric, its scaling curve and the fabric what-ifs.

The step model is :func:`topo.analysis.training.train_step`; this module runs it on the fabric of
a spec, on the same spec at other GPU counts (the scaling curve), and on the variants of the
fabric that a design review asks about (rail or rack placement, 1:1 or 3:1, ECMP or adaptive
routing, a failed spine), and returns the result (docs/train.md). :func:`train` is the command's
run: the workload assembled from its file and fields, the design loaded
(:mod:`topo.pipeline.design`), the work estimated before anything is built, and the result kept in
a file when asked. The terminal's table of a result is :func:`topo.outputs.terminal.train_table`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ..analysis.analyze import AnalysisOptions
from ..analysis.training import Step, train_step
from ..errors import AnalysisError, TopoError, UsageError, key_name, quote
from ..fabric import Fabric, build_fabric
from ..outputs.terminal import PARTS
from ..hardware.servers import NodeModel
from ..spec import FabricSpec, format_ratio, load_spec
from ..workload import Workload, fit_recipe
from .design import build_inputs, check_unchanged, design_spec_file, server_base, spec_from
from .progress import SILENT, Progress

def fabric_line(fabric: Fabric) -> dict[str, Any]:
    """The facts of the fabric a training result names."""
    spec = fabric.spec
    return {"gpus": spec.gpus, "gpus_per_node": spec.gpus_per_node, "nics_per_node": spec.nic_ports,
            "nic_gbps": spec.nic_port_gbps, "tiers": fabric.plan.tiers, "placement": spec.placement,
            "oversubscription": f"{format_ratio(spec.oversubscription)}:1", "switch": spec.switch,
            "ethernet": fabric.ethernet}


def variant(spec: FabricSpec, **changes: Any) -> FabricSpec:
    """The spec with some fields changed, checked again (files it names are not needed here)."""
    data = spec.to_dict()
    for key in ("hostnames", "prices"):
        data.pop(key, None)
    return load_spec(data, changes)


def run(spec: FabricSpec, workload: Workload, options: AnalysisOptions, server: NodeModel | None = None,
        fabric: Fabric | None = None, baseline: AnalysisOptions | None = None) -> Step:
    """The step of ``workload`` on the fabric of ``spec`` (built unless given); with failures,
    never shorter than with ``baseline``'s failures only (:func:`topo.analysis.training.train_step`)."""
    fabric = fabric or build_fabric(spec)
    try:
        return train_step(fabric, workload, options, server, baseline)
    except AnalysisError as exc:
        raise AnalysisError([_uneven(workload, spec.gpus, line) for line in exc.lines]) from None


def _uneven(w: Workload, gpus: int, line: str) -> str:
    """An error's line, and a layout that splits groups unevenly over servers named with the model's
    recipe when its parallelism is the recipe's (:meth:`topo.workload.Workload.refusal`)."""
    if " split unevenly over " not in line:
        return line
    keys = tuple(k for k in ("tp", "cp", "pp", "ep") if getattr(w, k) > 1)
    for k in keys:
        line = line.replace(f"(--{k})", f"({w.named(k)})")
    return w.refusal(gpus, keys, line)


def curve(spec: FabricSpec, workload: Workload, options: AnalysisOptions, counts: Sequence[int],
          weak: bool = False, server: NodeModel | None = None,
          progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """The scaling curve: the workload on the same fabric spec at each GPU count.

    The global batch stays as given (strong scaling), or with ``weak`` grows with the GPUs from
    its value at ``spec.gpus``. The values of the model's recipe that do not fit a count are
    adjusted there (:func:`topo.workload.fit_recipe`, the point's ``adjusted``). Each point gives
    the step, the throughput, its speed-up over the first point that runs, and that speed-up as a
    fraction of linear (``of_linear``); a count the spec or the workload refuses is a point with its
    ``error``.
    """
    points: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    batch = fit_recipe(workload, spec.gpus, spec.gpus_per_node)[0].global_batch  # as at spec.gpus
    for i, n in enumerate(counts):
        point: dict[str, Any] = {"gpus": int(n)}
        w = workload
        if weak:
            w = replace(workload, global_batch=max(1, round(batch * n / spec.gpus)))
        w, adjusted = fit_recipe(fit_micro_batch(w, int(n)), int(n), spec.gpus_per_node)
        point["global_batch"], point["micro_batch"] = w.global_batch, w.micro_batch
        if adjusted:
            point["adjusted"] = adjusted
        try:
            step = run(variant(spec, gpus=int(n)), w, options, server)
        except TopoError as exc:
            point["error"] = "; ".join(exc.lines)
        else:
            d = step.to_dict()
            point.update({"dp": step.workload.dp(step.gpus), "step_time_s": d["step_time_s"],
                          "tokens_per_s": round(step.tokens_per_s_per_gpu * step.gpus, 3),
                          "tokens_per_s_per_gpu": d["tokens_per_s_per_gpu"],
                          "model_tflops_per_gpu": d["model_tflops_per_gpu"], "mfu": d["mfu"],
                          "scaling_efficiency": d["scaling_efficiency"], "fits": d["memory"]["fits"],
                          "breakdown": d["breakdown"]})
            if first is None:
                first = point
            speedup = point["tokens_per_s"] / first["tokens_per_s"]
            point["speedup"] = round(speedup, 5)
            point["of_linear"] = round(speedup / (n / first["gpus"]), 5)
        points.append(point)
        if progress is not None:
            progress(i + 1)
    return points


def fit_micro_batch(w: Workload, gpus: int) -> Workload:
    """At a GPU count where the global batch does not fill ``dp x micro_batch`` evenly, the largest
    smaller micro-batch that does (as one shrinks the micro-batch when scaling a fixed batch out);
    the workload as it is when none does, or when the micro-batch already fits.

    >>> from topo.workload import workload_from
    >>> w = workload_from({"model": "gpt3-175b", "tp": 1, "pp": 1, "vpp": 1, "micro_batch": 4, "global_batch": 1536})
    >>> fit_micro_batch(w, 768).micro_batch, fit_micro_batch(w, 384).micro_batch, fit_micro_batch(w, 1000).micro_batch
    (2, 4, 4)
    """
    if gpus % w.model_parallel:
        return w
    dp = gpus // w.model_parallel
    if w.global_batch % dp:
        return w
    per_replica = w.global_batch // dp
    if per_replica % w.micro_batch == 0:
        return w
    fits = [m for m in range(min(w.micro_batch, per_replica), 0, -1) if per_replica % m == 0]
    return replace(w, micro_batch=fits[0])


def what_ifs(spec: FabricSpec, workload: Workload, options: AnalysisOptions, base: Step,
             server: NodeModel | None = None, progress: Callable[[int], None] | None = None,
             fabric: Fabric | None = None) -> list[dict[str, Any]]:
    """The same workload on the fabric variants a design review compares: the other placement,
    the other of 1:1 and 3:1, the other routing, and one spine failed; the change in step time."""
    fabric = fabric or build_fabric(spec)  # the fabric of ``spec``, when the caller has it
    tiers = fabric.plan.tiers
    routing = options.routing if options.routing != "auto" else ("ecmp" if fabric.ethernet else "dmodk")
    cases: list[tuple[str, Callable[[], Step]]] = []
    if tiers >= 2:
        other = "rack" if spec.placement == "rail" else "rail"
        cases.append((f"placement {other}", lambda: run(variant(spec, placement=other), workload, options, server)))
    ratio = 3 if spec.oversubscription == 1 else 1
    if tiers >= 2:
        cases.append((f"oversubscription {ratio}:1",
                      lambda: run(variant(spec, oversubscription=ratio), workload, options, server)))
    other_routing = "adaptive" if routing != "adaptive" else "ecmp"
    cases.append((f"routing {other_routing}",
                  lambda: run(spec, workload, replace(options, routing=other_routing), server, fabric)))
    if tiers >= 2:
        spine = fabric.names[fabric.first(2)]
        cases.append((f"fail {spine}",
                      lambda: run(spec, workload, replace(options, fail=(*options.fail, spine)), server, fabric,
                                  baseline=options)))
    out = []
    for i, (label, compute) in enumerate(cases):
        row: dict[str, Any] = {"what_if": label}
        try:
            step = compute()
        except TopoError as exc:
            row["error"] = "; ".join(exc.lines)
        else:
            row.update({"step_time_s": float(f"{step.step_time_s:.6g}"),
                        "change_pct": round(100 * (step.step_time_s / base.step_time_s - 1), 3),
                        "tokens_per_s_per_gpu": round(step.tokens_per_s_per_gpu, 3), "mfu": round(step.mfu, 5)})
        out.append(row)
        if progress is not None:
            progress(i + 1)
    return out


def result(fabric: Fabric, step: Step, points: list[dict[str, Any]] | None = None,
           variants: list[dict[str, Any]] | None = None, weak: bool = False,
           adjusted: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What ``topo train --format json`` prints (and ``-o FILE`` keeps): the fabric (its facts and
    its whole spec), the model, and the step, with the recipe's values ``adjusted`` to fit
    (:func:`topo.workload.fit_recipe`) when there are any; the scaling curve and the what-ifs when
    run."""
    spec = fabric.spec.to_dict()
    out = {"fabric": fabric_line(fabric), "spec": spec, "model": step.workload.model.to_dict(),
           "gpu": step.workload.gpu.name, **step.to_dict()}
    if adjusted:
        out["adjusted"] = adjusted
    if points is not None:
        out["scaling"] = points
        out["scaling_mode"] = "weak" if weak else "strong"
    if variants is not None:
        out["what_if"] = variants
    return out


#: What a result must hold, for ``topo report --train``: key -> type (a dict: its own keys).
_NUMBER = (int, float)
RESULT_SCHEMA: dict[str, Any] = {
    "fabric": {"gpus": int, "gpus_per_node": int, "nics_per_node": int, "nic_gbps": int, "placement": str,
               "oversubscription": str},
    "workload": {"tp": int, "pp": int, "cp": int, "ep": int, "dp": int, "global_batch": int, "seq_len": int,
                 "zero": int, "recompute": str, "precision": str},
    "model": {"name": str, "params": int},
    "gpus": int, "gpu": str, "step_time_s": _NUMBER, "tokens_per_s_per_gpu": _NUMBER,
    "model_tflops_per_gpu": _NUMBER, "mfu": _NUMBER, "peak_tflops": _NUMBER, "scaling_efficiency": _NUMBER,
    "breakdown": {key: _NUMBER for key, _ in PARTS},
    "memory": {"total_GB": _NUMBER, "hbm_GB": _NUMBER, "fits": bool},
}
POINT_SCHEMA = {"gpus": int, "step_time_s": _NUMBER, "tokens_per_s_per_gpu": _NUMBER, "mfu": _NUMBER,
                "speedup": _NUMBER, "of_linear": _NUMBER, "breakdown": RESULT_SCHEMA["breakdown"]}
WHAT_IF_SCHEMA = {"what_if": str, "step_time_s": _NUMBER, "change_pct": _NUMBER}


def _problems(data: Any, schema: dict[str, Any], where: str) -> list[str]:
    if not isinstance(data, dict):
        return [f"{where or 'the file'} is not a mapping"]
    out = []
    for key, kind in schema.items():
        name = f"{where}.{key}" if where else key
        if key not in data:
            out.append(f"no {name}")
        elif isinstance(kind, dict):
            out += _problems(data[key], kind, name)
        elif isinstance(data[key], bool) and kind is not bool or not isinstance(data[key], kind):
            out.append(f"{name} is {quote(data[key])}")
    return out


def result_problems(data: Any) -> list[str]:
    """What keeps ``data`` from being a result ``topo train -o`` wrote (nothing when it is one)."""
    out = _problems(data, RESULT_SCHEMA, "")
    if out:
        return out
    if data["step_time_s"] <= 0:
        out.append(f"step_time_s is {quote(data['step_time_s'])}")
    for name, schema in (("scaling", POINT_SCHEMA), ("what_if", WHAT_IF_SCHEMA)):
        rows = data.get(name, [])
        if not isinstance(rows, list):
            out.append(f"{name} is not a list")
            continue
        for i, row in enumerate(rows):
            if isinstance(row, dict) and "error" in row and isinstance(row["error"], str):
                continue
            out += _problems(row, schema, f"{name}[{i}]")
    return out


# --- the command's run ------------------------------------------------------------------------------


def train(design: Path | None = None, spec_file: Path | None = None, fields: dict[str, Any] | None = None,
          options: AnalysisOptions | None = None, workload: dict[str, Any] | None = None,
          workload_file: Path | None = None, scale: str | None = None, weak: bool = False, what_if: bool = False,
          output: Path | None = None, force: bool = False, progress: Progress = SILENT) -> dict[str, Any]:
    """``topo train``: the step of the workload (``workload_file`` with the ``workload`` fields over
    it) on the fabric of a DESIGN folder or a spec file with ``fields`` over it, priced under
    ``options``; with ``scale`` (``"N1,N2,..."``) the scaling curve (``weak``: the global batch grows
    with the GPUs), with ``what_if`` the fabric what-ifs. The result (:func:`result`) is returned,
    and also written as JSON to ``output`` (``force`` replaces it)."""
    from ..addressing import check_addressing
    from ..outputs.writer import check_output_file, write_output_file
    from ..hardware.catalog import resolve_server
    from ..sizing import plan_fabric

    fields = dict(fields or {})
    options = options if options is not None else AnalysisOptions()
    job = _workload_and_options(options, workload_file, dict(workload or {}))
    if output is not None:
        check_output_file(output, force)  # at once: it exists, or is a folder
    counts = gpu_counts(scale) if scale is not None else None
    if weak and not counts:
        raise UsageError("--weak goes with --scale")
    spec_file = design_spec_file(design, spec_file)
    overridden = any(value is not None for value in fields.values())
    spec = spec_from(spec_file, fields, progress)
    check_addressing(spec, plan_fabric(spec))
    inputs = _inputs(spec, spec_file, design, workload_file, options, fields)
    if output is not None:  # before any work: never one of the files this reads
        check_output_file(output, force, inputs)
    profile = resolve_server(spec, server_base(spec_file, fields))
    if spec.server is not None and profile.gpu_model is not None:  # the named server's GPUs
        job = workload_of(workload_file, dict(workload or {}), server=(profile.name, profile.gpu_model))
    server = profile.node_model()
    _check_work(spec, options, server, 1 + (len(counts) if counts else 0) + (4 if what_if else 0))
    with progress.stage(f"building {spec.gpus:,} GPUs"):
        fabric = build_fabric(spec)
    if design is not None and not overridden:
        check_unchanged(design, fabric, spec_file)
    data = _priced(spec, fabric, job, options, server, counts, weak, what_if, progress)
    if output is not None:
        write_output_file(output, (json.dumps(data, indent=2) + "\n").encode("utf-8"), force, inputs)
    return data


def _workload_and_options(options: AnalysisOptions, path: Path | None, values: dict[str, Any]) -> Workload:
    """The workload, with every bad option and workload field refused at once."""
    problems: list[str] = []
    try:
        options.check()
    except TopoError as exc:
        problems += exc.lines
    try:
        job = workload_of(path, values)
    except TopoError as exc:
        problems += exc.lines
    if problems:
        raise AnalysisError(problems)
    return job


def _inputs(spec: FabricSpec, spec_file: Path | None, design: Path | None, workload_file: Path | None,
            options: AnalysisOptions, fields: dict[str, Any]) -> list[Any]:
    """Every file a training run reads: its output file may be none of them."""
    return [design, workload_file, options.nccl_constants,
            *build_inputs(spec, spec_file, server_base(spec_file, fields), fields, ())]


def _check_work(spec: FabricSpec, options: AnalysisOptions, server: NodeModel, steps: int) -> None:
    """Memory and time before anything is built: each step prices its collectives one after the
    other, each at most an analysis of the whole job; the curve and what-ifs are more steps."""
    from ..analysis.analyze import MAX_DRAWS, check_analysis_work
    from ..sizing import plan_fabric

    work = check_analysis_work(spec, plan_fabric(spec), options, server, what="pricing a step", job_flag=False)
    if work.draws * steps > MAX_DRAWS:
        raise AnalysisError([f"pricing {steps} steps (--scale, --what-if) routes up to {work.queue_pairs:,} "
                             f"queue pairs {work.samples} times each, {work.draws * steps:,} queue-pair draws, "
                             f"which would take hours (more than {MAX_DRAWS:,}): lower --hash-samples, --qps, "
                             f"--channels or the --scale points"])


def _priced(spec: FabricSpec, fabric: Fabric, workload: Workload, options: AnalysisOptions, server: NodeModel,
            counts: list[int] | None, weak: bool, what_if: bool, progress: Progress) -> dict[str, Any]:
    """The step (the recipe's values that do not fit adjusted, each said as a note), and the curve
    and what-ifs asked for, as :func:`result` gives them."""
    asked = workload  # the curve adjusts the recipe at each of its counts
    workload, adjusted = fit_recipe(workload, spec.gpus, spec.gpus_per_node)
    with progress.stage(f"pricing a step of {workload.model.name}"):
        step = run(spec, workload, options, server, fabric)
    for change in adjusted:  # said once the adjusted workload runs (a refusal says it all)
        progress.say(change["note"])
    if not step.memory["fits"]:  # a warning, shown with -q too
        m = step.memory
        progress.warn(f"topo: warning: {m['total_GB']:,.1f} GB per GPU does not fit the {workload.gpu.name}'s "
                      f"{m['hbm_GB']:,.0f} GB (usable {m['usable_GB']:,.1f}): more tp, pp or cp, --zero, "
                      f"--recompute full or a smaller --micro-batch")
    points = variants = None
    if counts:
        with progress.stage(f"scaling curve, {len(counts)} points"):
            points = curve(spec, asked, options, counts, weak, server, progress.counter("points", len(counts)))
    if what_if:
        with progress.stage("what-ifs"):
            variants = what_ifs(spec, workload, options, step, server, progress.counter("what-ifs", 4), fabric)
    return result(fabric, step, points, variants, weak=weak, adjusted=adjusted)


def workload_of(path: Path | None, values: dict[str, Any], server: tuple[str, str] | None = None) -> Workload:
    """The workload of the YAML file ``path`` (None: none) with ``values`` (the flags; None for a
    field not given) over it; every mistake as one line naming the file or flag.

    ``server`` is the (name, GPU model) of the server profile the spec names, when it names one:
    its GPU is the workload's when neither the flags nor the file give one (before a catalogue
    model's recipe's), and a GPU given that is another model is refused, naming both."""
    from ..inputs import InputFileError, read_text, shown_path
    from ..spec import parse_yaml
    from ..workload import WORKLOAD_KEYS, workload_from

    fields: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if path is not None:
        try:  # a regular file of at most 1 MiB: never a FIFO that blocks or /dev/zero
            data = parse_yaml(read_text(path), f"--workload {shown_path(path)}")
        except InputFileError as exc:
            raise AnalysisError([f"--workload {exc}"]) from None
        except TopoError as exc:
            raise AnalysisError(exc.lines) from None
        if not isinstance(data, dict):
            raise AnalysisError([f"--workload {shown_path(path)}: expected a mapping of workload fields"])
        unknown = sorted(str(k) for k in data if k not in WORKLOAD_KEYS)
        if unknown:
            raise AnalysisError([f"--workload {shown_path(path)}: {key_name(key).strip(chr(39))}: not a workload field; "
                                 f"known: {', '.join(WORKLOAD_KEYS)}" for key in unknown[:10]])
        fields.update(data)
        origin = {key: f"--workload {shown_path(path)}: " for key in data}
    for key, value in values.items():
        if value is not None:
            fields[key] = value
            origin.pop(key, None)
    if server is not None:
        name, model = server
        given = fields.setdefault("gpu", model)
        if isinstance(given, str) and given != model:
            raise AnalysisError([f"{origin.get('gpu', '--')}gpu {quote(given)}: the server profile {name} holds "
                                 f"{model} GPUs; leave out --gpu to take them, or name a server of {given} GPUs "
                                 f"(topo servers)"])
    return workload_from(fields, origin)


def gpu_counts(text: str) -> list[int]:
    """The GPU counts of ``--scale N1,N2,...`` (1k is 1,024), one to 64 of them."""
    from ..spec import _gpus

    counts = []
    for item in text.split(","):
        try:
            counts.append(_gpus(item.strip()))
        except ValueError as exc:
            raise AnalysisError([f"--scale {text}: {exc}"]) from None
    if not 1 <= len(counts) <= 64:
        raise AnalysisError([f"--scale {text}: give 1 to 64 GPU counts, comma-separated"])
    return counts
