"""``topo train``: a workload's step on a fabric, its scaling curve and the fabric what-ifs.

The step model is :func:`topo.outputs.training.train_step`; this module runs it on the fabric of
a spec, on the same spec at other GPU counts (the scaling curve), and on the variants of the
fabric that a design review asks about (rail or rack placement, 1:1 or 3:1, ECMP or adaptive
routing, a failed spine), and prints or returns the results (docs/train.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from ..analysis.analyze import AnalysisOptions
from .training import Step, train_step
from ..errors import TopoError, quote
from ..fabric import Fabric, build_fabric, is_ethernet
from ..hardware.servers import NodeModel
from ..spec import FabricSpec, format_ratio, load_spec
from ..workload import Workload

#: The breakdown's parts, in the order a step spends them, and their labels.
PARTS = (("compute_s", "compute"), ("recompute_s", "recompute"), ("pipeline_bubble_s", "pipeline bubble"),
         ("pipeline_send_s", "pipeline sends"), ("tensor_parallel_s", "tensor parallel"),
         ("context_parallel_s", "context parallel"), ("expert_parallel_s", "expert all-to-all"),
         ("data_parallel_s", "data parallel (exposed)"), ("optimizer_s", "optimizer"))


def fabric_line(fabric: Fabric) -> dict[str, Any]:
    """The facts of the fabric a training result names."""
    spec = fabric.spec
    return {"gpus": spec.gpus, "gpus_per_node": spec.gpus_per_node, "nics_per_node": spec.nic_ports,
            "nic_gbps": spec.nic_port_gbps, "tiers": fabric.plan.tiers, "placement": spec.placement,
            "oversubscription": f"{format_ratio(spec.oversubscription)}:1", "switch": spec.switch,
            "ethernet": is_ethernet(fabric)}


def variant(spec: FabricSpec, **changes: Any) -> FabricSpec:
    """The spec with some fields changed, checked again (files it names are not needed here)."""
    data = spec.to_dict()
    for key in ("hostnames", "prices"):
        data.pop(key, None)
    return load_spec(data, changes)


def run(spec: FabricSpec, workload: Workload, options: AnalysisOptions, server: NodeModel | None = None,
        fabric: Fabric | None = None, baseline: AnalysisOptions | None = None) -> Step:
    """The step of ``workload`` on the fabric of ``spec`` (built unless given); with failures,
    never shorter than with ``baseline``'s failures only (:func:`topo.outputs.training.train_step`)."""
    fabric = fabric or build_fabric(spec)
    return train_step(fabric, workload, options, server, baseline)


def curve(spec: FabricSpec, workload: Workload, options: AnalysisOptions, counts: Sequence[int],
          weak: bool = False, server: NodeModel | None = None,
          progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """The scaling curve: the workload on the same fabric spec at each GPU count.

    The global batch stays as given (strong scaling), or with ``weak`` grows with the GPUs from
    its value at ``spec.gpus``. Each point gives the step, the throughput, its speed-up over the
    first point that runs, and that speed-up as a fraction of linear (``of_linear``); a count the
    spec or the workload refuses is a point with its ``error``.
    """
    points: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    for i, n in enumerate(counts):
        point: dict[str, Any] = {"gpus": int(n)}
        w = workload
        if weak:
            w = replace(workload, global_batch=max(1, round(workload.global_batch * n / spec.gpus)))
        w = fit_micro_batch(w, int(n))
        point["global_batch"], point["micro_batch"] = w.global_batch, w.micro_batch
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
    routing = options.routing if options.routing != "auto" else ("ecmp" if is_ethernet(fabric) else "dmodk")
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
           variants: list[dict[str, Any]] | None = None, weak: bool = False) -> dict[str, Any]:
    """What ``topo train --format json`` prints (and ``-o FILE`` keeps): the fabric (its facts and
    its whole spec), the model, and the step; the scaling curve and the what-ifs when run."""
    spec = fabric.spec.to_dict()
    out = {"fabric": fabric_line(fabric), "spec": spec, "model": step.workload.model.to_dict(),
           "gpu": step.workload.gpu.name, **step.to_dict()}
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


def _seconds(value: float) -> str:
    return f"{value * 1e3:,.1f} ms" if value < 1 else f"{value:,.3f} s"


def table(data: dict[str, Any]) -> str:
    """The result for people: the workload, the step and its breakdown, throughput, memory."""
    w, f = data["workload"], data["fabric"]
    model = data["model"]
    size = model["params"] / 1e9
    lines = [
        f"workload: {model['name']} ({size:,.1f} B parameters"
        + (f", {model['active_params'] / 1e9:,.1f} B active" if model.get("experts") else "") + f"), "
        f"{w['precision']} on {data['gpus']:,} {data['gpu']} ({f['gpus'] // f['gpus_per_node']:,} servers x "
        f"{f['gpus_per_node']}, {f['nics_per_node']} x {f['nic_gbps']}G, {f['tiers']} tiers, {f['placement']}, "
        f"{f['oversubscription']})",
        f"parallelism: tp {w['tp']}, pp {w['pp']}" + (f" (vpp {w['vpp']})" if w["vpp"] > 1 else "")
        + f", cp {w['cp']}, ep {w['ep']}, dp {w['dp']}; global batch {w['global_batch']:,} x {w['seq_len']:,} "
          f"tokens, micro-batch {w['micro_batch']} ({w['microbatches']:,} per pipeline); zero {w['zero']}, "
          f"recompute {w['recompute']}, overlap {','.join(w['overlap']) or 'none'}",
        "",
        f"step time {_seconds(data['step_time_s'])}:",
    ]
    total = data["step_time_s"]
    rows = [[label, _seconds(data["breakdown"][key]), f"{100 * data['breakdown'][key] / total:.1f}%"]
            for key, label in PARTS if data["breakdown"][key] > 0]
    width = max(len(r[0]) for r in rows)
    for label, value, share in rows:
        lines.append(f"  {label:<{width}}  {value:>12}  {share:>6}")
    lines += [
        "",
        f"throughput: {data['tokens_per_s_per_gpu']:,.1f} tokens/s per GPU, {data['model_tflops_per_gpu']:,.1f} "
        f"model TFLOP/s per GPU ({data['hardware_tflops_per_gpu']:,.1f} with recomputation), MFU "
        f"{100 * data['mfu']:.1f}% of {data['peak_tflops']:,.0f} TFLOP/s {w['precision']}",
        f"scaling efficiency: {100 * data['scaling_efficiency']:.1f}% of linear speed-up from one replica "
        f"({w['tp'] * w['pp'] * w['cp']} GPUs)",
    ]
    mem = data["memory"]
    lines.append(f"memory per GPU: {mem['total_GB']:,.1f} GB of {mem['hbm_GB']:,.0f} GB (weights and optimizer "
                 f"{mem['weights_and_optimizer_GB']:,.1f}, activations {mem['activations_GB']:,.1f}"
                 + (f", logits {mem['logits_GB']:,.1f}" if mem["logits_GB"] else "") + "): "
                 + ("fits" if mem["fits"] else f"DOES NOT FIT (usable {mem['usable_GB']:,.1f} GB)"))
    coll = [c for c in data["collectives"]]
    if coll:
        lines += ["", "collectives (one call; all groups of a kind at once):"]
        head = ["kind", "group", "groups", "spans", "message", "algorithm", "busbw GB/s", "time", "per step"]
        body = [[c["kind"], c["group"], f"{c['groups']:,}",
                 "NVLink" if c["domains"] <= 1 else f"{c['domains']} domains" if data["nvlink_domain_gpus"] >
                 f["gpus_per_node"] else f"{c['domains']} servers",
                 _bytes(c["message_bytes"]), c["algorithm"],
                 "" if c["busbw_GBps"] is None else f"{c['busbw_GBps']:,.1f}", _seconds(c["time_s"]),
                 f"{c['calls_per_step']:,.0f}"] for c in coll]
        lines += _grid(head, body)
    for note in data.get("notes", []):
        lines.append(f"note: {note}")
    if data.get("scaling"):
        lines += ["", "scaling (" + ("weak: the global batch grows with the GPUs" if
                                     data.get("scaling_mode") == "weak" else "strong: the same global batch") + "):"]
        head = ["GPUs", "dp", "batch", "micro", "step", "tokens/s/GPU", "TFLOP/s/GPU", "MFU", "speed-up",
                "of linear", "efficiency"]
        body, errors = [], []
        for p in data["scaling"]:
            if "error" in p:
                body.append([f"{p['gpus']:,}", "", f"{p['global_batch']:,}", str(p["micro_batch"]), "not run",
                             "", "", "", "", "", ""])
                errors.append(f"  {p['gpus']:,} GPUs: {p['error']}")
                continue
            body.append([f"{p['gpus']:,}", f"{p['dp']:,}", f"{p['global_batch']:,}", str(p["micro_batch"]),
                         _seconds(p["step_time_s"]), f"{p['tokens_per_s_per_gpu']:,.1f}",
                         f"{p['model_tflops_per_gpu']:,.1f}", f"{100 * p['mfu']:.1f}%", f"{p['speedup']:.2f}x",
                         f"{100 * p['of_linear']:.1f}%",
                         f"{100 * p['scaling_efficiency']:.1f}%" + ("" if p["fits"] else " (memory)")])
        lines += _grid(head, body) + errors
    if data.get("what_if"):
        lines += ["", "what if (the same workload):"]
        body = []
        for row in data["what_if"]:
            if "error" in row:
                body.append([row["what_if"], "", "", row["error"]])
            else:
                body.append([row["what_if"], _seconds(row["step_time_s"]), f"{row['change_pct']:+.1f}%",
                             f"{row['tokens_per_s_per_gpu']:,.1f}"])
        lines += _grid(["fabric", "step", "change", "tokens/s/GPU"], body)
    return "\n".join(lines)


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{int(n)} B"


def _grid(head: list[str], body: list[list[Any]]) -> list[str]:
    cells = [head, *[[str(c) for c in row] for row in body]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    out = ["  " + "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip(),
           "  " + "  ".join("-" * w for w in widths)]
    for row in cells[1:]:
        out.append("  " + "  ".join(c.rjust(w) if i else c.ljust(w)
                                    for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    return out
