"""The terminal's tables: what ``topo`` prints on stdout with ``--format table``, as plain text.

One renderer for every command: the build summary and its headline figures (:func:`summary_table`,
:func:`headline_lines`), the analysis (:func:`analysis_table`), the training step (:func:`train_table`),
the catalogues (:func:`catalog_table`, :func:`servers_table`, :func:`switches_table`,
:func:`templates_table`), a sweep's Pareto front (:func:`sweep_table`), a design review's key figures
(:func:`report_table`) and a check's summary line (:func:`check_line`). Each returns text; only the
CLI prints it. :class:`StageLines` makes the lines of a command's progress (stages, counters) and
hands them to the CLI's writer. This module imports the design stage and earlier outputs, never click.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..process import Terminated

if TYPE_CHECKING:  # pragma: no cover
    from ..analysis.analyze import Analysis
    from ..summary import Summary

def format_table(headers: list[str], rows: list[list[Any]]) -> str:
    """Plain-text table: first column left-aligned, numbers right-aligned."""
    cells = [[_cell(v) for v in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) and i > 0
               for i in range(len(headers))]
    lines = []
    for r, row in enumerate(cells):
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(row, widths, numeric)]
        lines.append("  ".join(parts).rstrip())
        if r == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)



def summary_table(summary: Summary) -> str:
    from .summary import breakout_line, dual_tor_line, racks_line, switches_line

    s = summary
    kind = ("rail-only" if s.tiers == 1 else "rail-optimized") if s.placement == "rail" else "rack (ToR)"
    unit = "scalable units" if s.placement == "rail" else "racks"
    head = [
        f"{s.name}: {s.gpus:,} GPUs on {_plural(s.nodes, 'node')} ({_plural(s.gpus_per_node, 'GPU')}, "
        f"{s.nics_per_node} x {s.nic_gbps}G {'NIC' if s.nics_per_node == 1 else 'NICs'} each"
        + (f", {s.planes} x {s.nic_gbps // s.planes}G ports a NIC" if s.planes > 1 else "") + "), "
        f"{kind}, {_plural(s.tiers, 'tier')}" + (f", {s.planes} planes" if s.planes > 1 else ""),
        switches_line(s.to_dict()) + "; "
        + f"{_plural(s.scalable_units, unit[:-1])} of {_plural(s.su_nodes, 'node')}" + (f"; {s.pods} pods" + (" a plane" if s.planes > 1 else "") if s.tiers == 3 else ""),
        *([f"parallel links: {s.leaf_spine_parallel} per leaf-spine pair"
           + (f", {s.spine_core_parallel} per spine-core pair" if s.tiers == 3 else "")] if s.tiers > 1 else []),
        *([breakout_line(s.breakouts)] if s.breakouts else []),
        *([growth_line(s.growth)] if s.growth else []),
        *([dual_tor_line(s.dual_tor)] if s.dual_tor else []),
        *([racks_line(s.rack)] if s.rack else []),
        "",
    ]
    rows = [
        [r.role, r.switches, r.ports_used, r.ports_free, r.links_below, r.cables_below, r.oversubscription]
        for r in s.tier_rows
    ]
    rows.append(["total", sum(r.switches for r in s.tier_rows), sum(r.ports_used for r in s.tier_rows),
                 sum(r.ports_free for r in s.tier_rows), sum(s.links.values()), s.cables, None])
    headers = ["tier", "switches", "ports used", "ports free", "links below", "cables below", "oversub"]
    return "\n".join(head) + "\n" + format_table(headers, rows)


def power_lines(summary: Summary) -> list[str]:
    """The build's line on the whole cluster's power, when its server profile has a power figure."""
    from .summary import power_line

    return [power_line(summary.power)] if summary.power else []


def growth_line(g: dict[str, Any]) -> str:
    """``growth: cabled for 1,024 GPUs (32 leaves, 16 spines); ...``"""
    f, r = g["final"], g["reserved_ports"]
    final = f"{f['leaves']:,} leaves, {f['spines']:,} spines" + (f", {f['cores']:,} cores" if f["cores"] else "")
    free = [f"{r[t]:,} {t} ports" for t in ("spine", "core") if r[t]]
    return (f"growth: cabled for {g['grow_to']:,} GPUs ({final}); "
            + (f"{' and '.join(free)} kept free; " if free else "")
            + f"{len(g['steps'])} steps to grow (docs/report.md)")



def headline(analysis: Analysis) -> dict[str, Any]:
    """The figures a build summary shows."""
    last = analysis.allreduce.rows[-1]
    return {
        "bisection_gbps": analysis.bisection.gbps,
        "bisection_maxflow_gbps": analysis.bisection.maxflow_gbps,
        "diameter_links": analysis.hops.diameter_links,
        "allreduce_size_bytes": last["size_bytes"],
        "allreduce_busbw_GBps": last["busbw_GBps"],
    }


def headline_lines(analysis: Analysis) -> list[str]:
    from .templating import format_size

    h = headline(analysis)
    o = analysis.options
    agree = "max-flow agrees" if analysis.bisection.agrees else f"max-flow {h['bisection_maxflow_gbps']:,}"
    hops = analysis.hops
    if hops.diameter_links is not None:
        diameter = f"diameter: {hops.diameter_links} links ({hops.diameter_switch_hops} switch hops)"
    else:
        diameter = "one node: no GPU pairs across the fabric" if not hops.pairs else "the fabric is cut"
    d = analysis.allreduce.details
    last = analysis.allreduce.rows[-1]
    choice = f"{last['algorithm']}/{last['protocol']}"
    if d["nvlink_only"]:
        allreduce = (f"all-reduce busbw: {h['allreduce_busbw_GBps']:,.1f} GB/s at "
                     f"{format_size(h['allreduce_size_bytes'])} ({choice}; one node of "
                     f"{analysis.allreduce.job_gpus} GPUs, NVLink only: no traffic on the fabric)")
    else:
        routing = d["routing"] + (f" {d['hash_field']}" if d["routing"] == "ecmp" else "") + (
            f", median of {d['hash_samples']} hash samples" if d["hash_samples"] > 1 else "")
        allreduce = (f"all-reduce busbw: {h['allreduce_busbw_GBps']:,.1f} GB/s at "
                     f"{format_size(h['allreduce_size_bytes'])} ({choice}, {routing}, {o.qps} QP, {o.cc}, "
                     f"{o.order} order)")
    return [f"bisection: {h['bisection_gbps']:,} Gb/s ({agree}); {diameter}", allreduce]


def analysis_table(analysis: Analysis) -> str:
    """The analysis for people: hops, bisection, ECMP width, all-reduce, faults."""
    a, o, f = analysis, analysis.options, analysis.fabric
    shape = "rail-only" if f.plan.tiers == 1 and f.plan.placement == "rail" else f"{f.plan.placement} placement"
    lines = [f"{f.spec.name}: {f.spec.gpus:,} GPUs, {_plural(f.plan.tiers, 'tier')}, {shape}"]
    if a.faults.any or o.fail:
        lines.append(f"faults: {a.faults.links_down:,} link{'s' if a.faults.links_down != 1 else ''} down"
                     + (f" ({', '.join(o.fail)})" if o.fail else "")
                     + (f", {o.fail_random:g} of switch links at random (seed {o.seed})" if o.fail_random else ""))
    for note in a.notes():
        lines.append(f"NOTE: {note}")
    h = a.hops
    lines += ["", f"hops between GPUs on different nodes (NIC to NIC): diameter {h.diameter_links} links "
              f"({h.diameter_switch_hops} switch hops), mean {h.mean_links:.3f} links" if h.mean_links is not None
              else "hops: one node, so no GPU pairs on different nodes" if not h.pairs
              else "hops: no pair of GPUs is reachable"]
    rows = [[r.links, r.switch_hops, r.pairs, r.same_rail_pairs, r.cross_rail_pairs] for r in h.distribution]
    if h.unreachable_pairs:
        rows.append(["unreachable", None, h.unreachable_pairs, h.unreachable_same_rail_pairs,
                     h.unreachable_cross_rail_pairs])
    lines.append(format_table(["links", "switch hops", "GPU pairs", "same rail", "cross rail"], rows))
    b = a.bisection
    source = "analytic" if b.source == "analytic" else "the least max-flow (the analytic value is a bound here)"
    lines += ["", f"bisection: {b.gbps:,} Gb/s {source}; max-flow {b.maxflow_gbps:,} Gb/s, the least of "
              f"{len(b.splits)} splits" + (" (agrees)" if b.agrees else "")]
    lines.append(format_table(["split", "max-flow Gb/s"], [[s.name, s.gbps] for s in b.splits]))
    e = a.ecmp.to_dict()
    ecmp = [f"ECMP width: same pod {e['same_pod']['switch_paths']['min']:g} switch paths "
            f"({e['same_pod']['link_paths']['min']:g} link paths)"]
    if e.get("cross_pod"):
        ecmp.append(f"across pods {e['cross_pod']['switch_paths']['min']:g} "
                    f"({e['cross_pod']['link_paths']['min']:g})")
    lines += ["", "; ".join(ecmp) + (" (least over pairs)" if a.faults.any else "")]
    lines += _allreduce_lines(a)
    if analysis.baseline is not None:
        c = analysis.change()
        lines += ["", "change from the intact fabric:"]
        lines.append(format_table(["metric", "intact", "with faults", "change %"], [
            [name, v["intact"] if not isinstance(v["intact"], float) else round(v["intact"], 3),
             v["with_faults"] if not isinstance(v["with_faults"], float) else round(v["with_faults"], 3),
             v.get("change_pct")]
            for name, v in c.items()]))
    return "\n".join(lines)


def _allreduce_lines(a: Analysis) -> list[str]:
    """The all-reduce part of the analysis table: connections, rates, times, bottlenecks."""
    from .templating import format_size

    o, d = a.options, a.allreduce.details
    node = d["node"]
    table = format_table(
        ["size", "algorithm", "protocol", "time (us)", "algbw GB/s", "busbw GB/s", "busbw p5"],
        [[format_size(r["size_bytes"]), r["algorithm"], r["protocol"],
          None if r["time_s"] is None else round(r["time_s"] * 1e6, 2), r["algbw_GBps"], r["busbw_GBps"],
          r["busbw_p5_GBps"]] for r in a.allreduce.rows])
    head = (f"all-reduce ({'NCCL ' + d['nccl_version'] + ' tuner' if o.algo == 'auto' else '--algo ' + o.algo}): "
            f"{d['job_gpus']:,} GPUs on {d['nodes']:,} node{'s' if d['nodes'] > 1 else ''}, {d['channels']} "
            f"channels; node sm {node['sm']}, NVLink {node['nvlink_bw']:,.0f} GB/s per GPU"
            + (", NVLS" if node["nvls"] else ""))
    if d["nvlink_only"]:
        return ["", head + "; NVLink only, no traffic on the fabric", table]
    samples = (f"; median and 5th percentile of {d['hash_samples']} hash samples" if d["hash_samples"] > 1
               else "; one hash draw" if d["hash_samples"] == 1 else "")
    routing = d["routing"] + (f" ({d['hash_field']}{', polarized' if d['hash_polarized'] else ''}{samples})"
                              if d["routing"] == "ecmp" else "")
    stages = d["stages_busbw_GBps"]
    def rate(value: float | None) -> str:  # None: no such stage (one GPU a node has no NVLink step)
        return "-" if value is None else f"{value:,.1f}"

    stage_text = "; ".join(
        f"{name} network {rate(st['network'])}, NVLink {rate(st['nvlink'])}, PCIe {rate(st['pcie'])} "
        f"(bound: {st['bottleneck']})" for name, st in stages.items())
    lines = ["", head,
             f"  {o.order} order, {routing}, {o.qps} queue pair{'s' if o.qps > 1 else ''} per connection, {d['flows_per_nic']:g} flows per NIC, "
             f"{o.cc}",
             f"  {d['pattern']} connections: {d['connections']:,}; leaving a leaf: {d['connections_leaving_leaf']:,}; "
             f"leaving a pod: {d['connections_leaving_pod']:,}",
             f"  slowest connection {d['slowest_connection_gbps']:,.1f} Gb/s (p5 {d['slowest_connection_gbps_p5']:,.1f}) "
             f"of {d['ideal_connection_gbps']:,.1f} with even sharing; mean {d['mean_connection_gbps']:,.1f}; "
             f"below: {d['connections_below_nic_rate']:,}",
             f"  stage limits, busbw GB/s: {stage_text}",
             f"  busbw limit (large messages, {d['algorithm_at_largest_size']}): {d['busbw_limit_GBps']:,.1f} GB/s",
             table]
    bott = d["bottlenecks"]
    kinds = ", ".join(f"{k} {v:,}" for k, v in bott["saturated_by_kind"].items()) or "none"
    lines += ["", f"bottlenecks of the {bott['slowest_connections']:,} slowest connections: saturated {kinds}"]
    for entry in bott["top"]:
        lines.append(f"  {entry['resource']} ({entry['kind']}): {entry['subflows']} queue pairs, "
                     f"{entry['utilisation']:.0%}")
    u = d["link_utilisation"]
    if u.get("resources"):
        lines.append(f"switch-link utilisation over {u['resources']:,} busy resources: p50 {u['p50']:.0%}, "
                     f"p90 {u['p90']:.0%}, p99 {u['p99']:.0%}, max {u['max']:.0%}")
    return lines


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def catalog_table(data: dict[str, Any]) -> str:
    """``topo train --list``: the model and GPU catalogues."""
    models = [[n, f"{m['params'] / 1e9:,.1f}", f"{m['active_params'] / 1e9:,.1f}", m["layers"], m["hidden"],
               m["heads"], m["kv_heads"], m["seq_len"], m["experts"] or ""] for n, m in data["models"].items()]
    gpus = [[n, g["tflops"].get("bf16", ""), g["tflops"].get("fp8", ""), g["tflops"].get("fp4", ""), g["hbm_gb"],
             g["hbm_tbps"], g["nvlink_GBps"], g["nvlink_domain"]] for n, g in data["gpus"].items()]
    return (format_table(["model", "params B", "active B", "layers", "hidden", "heads", "kv heads", "seq",
                          "experts"], models) + "\n\n"
            + format_table(["gpu", "bf16 TF", "fp8 TF", "fp4 TF", "HBM GB", "HBM TB/s", "NVLink GB/s", "domain"],
                           gpus))



#: The breakdown's parts, in the order a step spends them, and their labels.
PARTS = (("compute_s", "compute"), ("recompute_s", "recompute"), ("pipeline_bubble_s", "pipeline bubble"),
         ("pipeline_send_s", "pipeline sends"), ("tensor_parallel_s", "tensor parallel"),
         ("context_parallel_s", "context parallel"), ("expert_parallel_s", "expert all-to-all"),
         ("data_parallel_s", "data parallel (exposed)"), ("optimizer_s", "optimizer"))


def _seconds(value: float) -> str:
    return f"{value * 1e3:,.1f} ms" if value < 1 else f"{value:,.3f} s"


def train_table(data: dict[str, Any]) -> str:
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
            errors += [f"  {p['gpus']:,} GPUs: {a['note']}" for a in p.get("adjusted", [])]
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


def templates_table(rows: list[dict[str, Any]]) -> str:
    """``topo templates``: every templated output, its templates and where each is found."""
    return format_table(["output", "for", "template", "from", "file"],
                        [[r["output"], r["for"], r["template"], r["from"], r["file"]] for r in rows])


def servers_table(profiles: dict[str, Any]) -> str:
    """``topo servers``: the server profiles."""
    rows = [[p.name, p.gpu_count, p.gpu_model or "-", p.nvlink.gpus, p.nic_count, p.nic_gbps, p.description]
            for p in profiles.values()]
    return format_table(["profile", "GPUs", "GPU", "NVLink domain", "NICs", "NIC Gb/s", "description"], rows)


def switches_table(models: dict[str, Any], platforms: dict[str, Any]) -> str:
    """``topo switches``: the switch models and their SONiC platforms (the model's default first)."""
    def skus(m: Any) -> str:
        names = sorted((p.name for p in platforms.values() if p.switch == m.name), key=lambda n: n != m.platform)
        return ", ".join(f"{n} ({platforms[n].hwsku})" for n in names) or "-"

    rows = [[m.name, m.radix, m.port_gbps, m.power_w, m.description, skus(m)] for m in models.values()]
    return format_table(["model", "radix", "port Gb/s", "power W", "description",
                         "SONiC platforms (default first)"], rows)


def check_line(design: Path, spec_file: Path, report: Any) -> str:
    """``topo check``'s line when the folder holds: files and BGP session ends checked."""
    return (f"{design}: {report.files:,} files as the stamp lists them and as {spec_file} gives them"
            + (f"; {report.sessions:,} BGP session ends consistent with the cabling" if report.sessions else ""))


def report_table(headers: list[str], rows: list[list[Any]], data: dict[str, Any], out: Path) -> str:
    """``topo report``: the key figures side by side, the verdict of a comparison, where the report is."""
    text = format_table(headers, rows)
    return text + (f"\n\n{data['verdict']}" if "verdict" in data else "") + f"\n\nreport: {out}/report.html"


def sweep_table(headers: list[str], front: list[list[Any]], data: dict[str, Any], size: str, designs: int,
                output: Path | None) -> str:
    """``topo sweep``: the Pareto front of busbw at the largest size (``size``) against the cost axis."""
    head = f"Pareto front of busbw at the largest size ({size}) against " \
           f"{data['pareto']['x']}: {len(front)} of {designs} designs"
    return head + "\n" + format_table(headers, front) + (f"\n\nsweep: {output}/sweep.csv" if output else "")


class StageLines:
    """Stage timings and counters, as lines written by ``echo(text, nl)`` (nothing with ``quiet``):
    the command line's :class:`~topo.pipeline.progress.Progress`.

    A stage prints ``topo: what ...`` and, when it ends, its time on the same line; a counter
    inside a stage rewrites one line on a terminal (``tty``), or prints a line every quarter elsewhere.
    """

    def __init__(self, quiet: bool, echo: Callable[[str, bool], None], tty: bool) -> None:
        self.quiet = quiet
        self.open_line = False
        self.tty = tty
        self.echo = echo

    def _echo(self, text: str, nl: bool = True) -> None:
        if not self.quiet:
            self.echo(text, nl)

    @contextmanager
    def stage(self, what: str) -> Iterator[None]:
        start = time.perf_counter()
        self._echo(f"topo: {what} ...", nl=False)
        self.open_line = True
        try:
            yield
        except BaseException as exc:
            # Ctrl-C and SIGTERM say so; only an error "failed" (its Error: line follows)
            how = ("terminated" if isinstance(exc, Terminated) else "interrupted") \
                if isinstance(exc, KeyboardInterrupt) else "failed"
            self._echo(f" {how}" if self.open_line else f"topo: {what} {how}")
            self.open_line = False
            raise
        elapsed = f"{time.perf_counter() - start:.2f} s"
        self._echo(f" {elapsed}" if self.open_line else f"topo: {what} done in {elapsed}")
        self.open_line = False

    def counter(self, what: str, total: int) -> Callable[[int], None]:
        """A callback ``update(done)`` that shows the progress of ``total`` items."""
        state = {"shown": -1}
        steps = 100 if self.tty else 4

        def update(done: int) -> None:
            step = done * steps // max(total, 1)
            if step == state["shown"]:
                return
            state["shown"] = step
            if self.open_line:
                self._echo("")
                self.open_line = False
            text = f"  {what}: {done:,}/{total:,} ({100 * done // max(total, 1)}%)"
            if self.tty:
                self._echo("\r" + text, nl=done >= total)
            else:
                self._echo(text)

        return update

    def say(self, message: str) -> None:
        self._echo(f"topo: {message}")

    def warn(self, message: str) -> None:
        """A line shown even with quiet."""
        self.echo(message, True)
