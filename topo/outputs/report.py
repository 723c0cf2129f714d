"""The design review: one page a review board reads (HTML and Markdown), for one design or several.

:func:`review` gathers what a review needs of one design that is already built, cabled and
analysed: the busbw curve over message sizes and the what-if table (one part lost at a time) come
from :func:`topo.analysis.analyze.busbw_curve` and :func:`topo.analysis.analyze.what_if`.
:func:`report_files` turns one or more reviews into the page, as sections of plain blocks
(paragraphs, lists, tables, figures) that the templates ``report/report.html.j2`` and
``report/report.md.j2`` lay out; a user's template folder may override either.

With several designs the page compares them: the first is the reference, every figure of the
others is given with its change against it, coloured (HTML) or bold (Markdown) where it is better
or worse, and a paragraph says what each design gains and loses.

The HTML page is self-contained: its SVG (the fabric diagram, the plots) is inline, its style is
in the page, and it names no other file or address. The Markdown page shows the same content with
the pictures as SVG files beside it.
"""

from __future__ import annotations

import re
from html import escape
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .. import __version__
from ..fabric import Fabric
from .design import spec_and_inputs
from .diagram import fabric_svg
from .plots import busbw_svg, prefix_ids, utilisation_svg
from .summary import breakout_line, dual_tor_line, power_line, racks_line, switches_line
from .templating import format_size, render_template, template_environment

if TYPE_CHECKING:  # pragma: no cover
    from ..analysis.analyze import Analysis, WhatIf
    from ..caveats import Caveat
    from ..hardware.servers import ServerProfile
    from ..cabling import Cabling
    from ..summary import Summary

#: The templated outputs of a report: (output path, template, rendered for).
REPORT_OUTPUTS = (("report.html", "report/report.html.j2", "the design review"),
                  ("report.md", "report/report.md.j2", "the design review"))
#: A figure of a comparison differing by less than this share from the reference's is "the same".
SAME_WITHIN = 0.005


@dataclass(frozen=True, eq=False)
class Review:
    """What the report shows of one design (see :func:`review`)."""

    label: str
    fabric: Fabric
    summary: "Summary"
    cabling: "Cabling"
    analysis: "Analysis | None"
    warnings: tuple["Caveat", ...]
    server: "ServerProfile | None"
    curve: tuple[dict[str, Any], ...]
    what_if: "WhatIf | None"
    base_dir: str | Path | None = None
    source: str = ""  #: where the design came from, as the user named it


def review(fabric: Fabric, summary: "Summary", cabling: "Cabling", analysis: "Analysis | None",
           warnings: Sequence["Caveat"], server: "ServerProfile | None" = None, label: str | None = None,
           what_if_samples: int | None = None, base_dir: str | Path | None = None, source: str = "",
           progress: Callable[[int], None] | None = None, apart: Callable[..., Any] | None = None) -> Review:
    """The review of one built design: with its analysis, the busbw curve over message sizes and
    the what-if table (``what_if_samples`` parts of each kind, by default as many as the fabric's
    size allows; 0 for none). With ``apart``, a runner such as :func:`topo.pipeline.apart.run_apart`,
    the what-ifs run in a child process, so that Ctrl-C and SIGTERM stop them at once."""
    curve: tuple[dict[str, Any], ...] = ()
    table = None
    if analysis is not None:
        from ..analysis.analyze import busbw_curve, what_if
        node = server.node_model() if server is not None else None
        curve = tuple(busbw_curve(fabric, analysis.options, node))
        if what_if_samples is None or what_if_samples > 0:
            def work(report: Callable[[int], None] | None) -> "WhatIf":
                return what_if(fabric, analysis.options, node, samples=what_if_samples, intact=analysis,
                               progress=report)

            if apart is not None:
                table = apart(work, progress, "the what-ifs for the design review")
            else:
                table = work(progress)
    return Review(label or fabric.spec.name, fabric, summary, cabling, analysis, tuple(warnings), server,
                  curve, table, base_dir, source)


# --- cells and blocks -------------------------------------------------------------------------------


def _cell(text: Any, cls: str = "", note: str = "") -> dict[str, str]:
    return {"text": "-" if text is None else str(text), "cls": cls, "note": note}


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "",
           numeric: Sequence[bool] | None = None) -> dict[str, Any]:
    rows = [[c if isinstance(c, dict) else _cell(c) for c in row] for row in rows]
    numeric = list(numeric) if numeric is not None else [i > 0 for i in range(len(headers))]
    return {"kind": "table", "caption": caption, "headers": list(headers), "rows": rows, "numeric": numeric}


def _text(text: str) -> dict[str, Any]:
    return {"kind": "text", "text": text}


def _items(items: Iterable[str]) -> dict[str, Any]:
    return {"kind": "list", "items": list(items)}


def _figure(name: str, svg: str, src: str, caption: str) -> dict[str, Any]:
    return {"kind": "figure", "name": name, "svg": _inline(svg), "src": src, "caption": caption}


def _inline(svg: str) -> str:
    """An SVG document as an element to put inside HTML: no XML declaration, no DOCTYPE, no
    metadata block (the report's SVG files are this element with an XML declaration)."""
    svg = re.sub(r"^<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, count=1, flags=re.S)  # matplotlib's RDF block
    return re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg, count=1).strip()


def _n(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _w(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.0f} W"


# --- the figures of one design -----------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """One line of the key-figures table: ``better`` is +1 when more is better, -1 when less is, 0
    when neither."""

    key: str
    label: str
    better: int
    digits: int = 0
    unit: str = ""


METRICS = (
    Metric("gpus", "GPUs", 0),
    Metric("switches", "switches", -1),
    Metric("cables", "cable pieces", -1),
    Metric("transceivers", "transceivers", -1),
    Metric("power_w", "network power", -1, 0, "W"),
    Metric("power_per_gpu_w", "network power per GPU", -1, 1, "W"),
    Metric("cost", "cost", -1),
    Metric("cost_per_gpu", "cost per GPU", -1),
    Metric("bisection_gbps", "bisection (max-flow)", 1, 0, "Gb/s"),
    Metric("bisection_per_gpu_gbps", "bisection per GPU", 1, 1, "Gb/s"),
    Metric("diameter_links", "diameter", -1, 0, "links"),
    Metric("mean_links", "mean path", -1, 3, "links"),
    Metric("busbw_mid_GBps", "busbw at 64 MiB", 1, 1, "GB/s"),
    Metric("busbw_GBps", "busbw at the largest size", 1, 1, "GB/s"),
    Metric("busbw_p5_GBps", "busbw, 5th percentile of hash samples", 1, 1, "GB/s"),
    Metric("worst_loss_GBps", "busbw after the worst single loss", 1, 1, "GB/s"),
    Metric("warnings", "warnings", -1),
)


def figures(r: Review) -> dict[str, Any]:
    """The key figures of one design, by :data:`METRICS` key (None where not known)."""
    s, c = r.summary.to_dict(), r.cabling.to_dict()
    gpus = s["gpus"]
    power = c["power_w"]["total"]
    cost = c.get("cost")
    out: dict[str, Any] = {
        "gpus": gpus, "switches": s["switches"]["total"], "cables": c["cables"]["pieces"],
        "transceivers": c["transceivers"]["total"], "power_w": power,
        "power_per_gpu_w": None if power is None else power / gpus,
        "cost": None if cost is None else cost["total"],
        "cost_per_gpu": None if cost is None else cost["total"] / gpus,
        "currency": None if cost is None else cost["currency"],
        "warnings": len(r.warnings),
    }
    a = r.analysis
    if a is not None:
        rows = a.allreduce.rows
        big = rows[-1]
        mid = next((row for row in r.curve if row["size_bytes"] == 64 << 20), None)
        out.update({
            "bisection_gbps": a.bisection.maxflow_gbps,
            "bisection_per_gpu_gbps": a.bisection.maxflow_gbps / gpus,
            "diameter_links": a.hops.diameter_links, "mean_links": a.hops.mean_links,
            "busbw_GBps": big["busbw_GBps"], "busbw_p5_GBps": big["busbw_p5_GBps"],
            "busbw_mid_GBps": None if mid is None else mid["busbw_GBps"],
            "largest_size": big["size_bytes"],
        })
        if r.what_if is not None and r.what_if.rows:
            out["worst_loss_GBps"] = min(row["busbw_GBps"]["min"] for row in r.what_if.rows)
    return out


def _metric_text(m: Metric, value: Any, currency: str | None = None) -> str:
    if value is None:
        return "-"
    unit = currency if m.key.startswith("cost") and currency else m.unit
    text = _n(value, m.digits if not m.key.startswith("cost") else 0)
    return f"{text} {unit}".strip() if unit != "%" else f"{text} %"


# --- the sections of one design ----------------------------------------------------------------------


def _spec_section(r: Review) -> dict[str, Any]:
    spec = spec_and_inputs(r.fabric, r.base_dir)[0]
    rows = [[key, _spec_value(value)] for key, value in spec.items()]
    return {"id": "spec", "title": "Spec", "blocks": [
        _text("Every field of the resolved spec (`spec.yaml` of the build folder); "
              "`topo build -f spec.yaml` builds the same design again."),
        _table(["field", "value"], rows, numeric=[False, False])]}


def _spec_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _tier_section(r: Review) -> dict[str, Any]:
    s = r.summary.to_dict()
    rows = [[role, _n(t["switches"]), _n(t["ports_used"]), _n(t["ports_free"]), _n(t["links_below"]),
             _n(t["cables_below"]), t["oversubscription"] or "-"] for role, t in s["per_tier"].items()]
    rows.append(["total", _n(s["switches"]["total"]), "", "", _n(s["links"]["total"]), _n(s["cables"]), ""])
    unit = "scalable unit" if s["placement"] == "rail" else "rack"
    lines = [
        f"{s['nodes']:,} nodes of {s['gpus_per_node']} GPUs and {s['nics_per_node']} x {s['nic_gbps']}G NICs"
        + (f", each with {s['planes']} ports of {s['nic_gbps'] // s['planes']}G in {s['planes']} planes (no link joins "
           f"two planes)" if s.get("planes", 1) > 1 else ""),
        switches_line(s, generic=" (no model named)"),
        *([breakout_line(s["breakouts"])] if s.get("breakouts") else []),
        f"{s['scalable_units']:,} {unit}{'s' if s['scalable_units'] != 1 else ''} of {s['su_nodes']} nodes"
        + (f", {s['pods']} pods" + (" a plane" if s.get("planes", 1) > 1 else "") if s["tiers"] == 3 else ""),
        *([dual_tor_line(s["dual_tor"])] if s.get("dual_tor") else []),
        *([racks_line(s["rack"])] if s.get("rack") else []),
        (f"parallel links: {s['parallel_links']['leaf-spine']} per leaf-spine pair"
         + (f", {s['parallel_links']['spine-core']} per spine-core pair" if s["tiers"] == 3 else "")) if s["tiers"] > 1
        else "one tier: no spines" + (", one switch per rail (rail-only: traffic between rails crosses NVLink "
                                      "inside a node first)" if s["placement"] == "rail" else ""),
    ]
    return {"id": "tiers", "title": "Summary per tier", "blocks": [
        _items(lines),
        _table(["tier", "switches", "ports used", "ports free", "links from below", "cables from below",
                "oversubscription"], rows, numeric=[False, True, True, True, True, True, False])]}


#: Growth steps listed one by one up to this many; beyond, runs of like steps are one row.
GROWTH_ROWS = 16


def _step_words(step: dict[str, Any]) -> str:
    return (f"{step['nodes_added']} nodes" + (f", {step['leaves_added']} leaves" if step["leaves_added"] else "")
            + (f", a pod of {step['spines_added']} spines" if step["spines_added"] else ""))


def _growth_rows(steps: list[dict[str, Any]]) -> list[list[str]]:
    """One row per step; past GROWTH_ROWS, one row per run of like pods (or like steps in two tiers)."""
    def row(chunk: list[dict[str, Any]], added: str) -> list[str]:
        span = f"{chunk[0]['gpus']:,}" if len(chunk) == 1 else f"{chunk[0]['gpus']:,} to {chunk[-1]['gpus']:,}"
        return [span, added, _n(sum(x["leaf_spine_links_added"] for x in chunk)),
                _n(sum(x["spine_core_links_added"] for x in chunk))]

    if len(steps) <= GROWTH_ROWS:
        return [row([x], _step_words(x)) for x in steps]
    # segments: a new pod opens each (the first may fill today's last pod)
    segments: list[list[dict[str, Any]]] = []
    for x in steps:
        if not segments or x["pods_added"]:
            segments.append([])
        segments[-1].append(x)

    def shape(seg: list[dict[str, Any]]) -> tuple:
        return tuple((x["nodes_added"], x["leaves_added"], x["spines_added"]) for x in seg)

    def words(seg: list[dict[str, Any]]) -> str:
        parts = [_step_words(seg[0])]
        if len(seg) > 1:
            rest = seg[1:]
            same = all(shape([x]) == shape([rest[0]]) for x in rest)
            parts.append(f"{len(rest)} x ({_step_words(rest[0])})" if same else ", ".join(_step_words(x) for x in rest))
        return " then ".join(parts)

    rows, i = [], 0
    while i < len(segments):
        j = i + 1
        while j < len(segments) and shape(segments[j]) == shape(segments[i]):
            j += 1
        chunk = [x for seg in segments[i:j] for x in seg]
        count = j - i
        rows.append(row(chunk, words(segments[i]) if count == 1 else f"{count} x [{words(segments[i])}]"))
        i = j
    return rows


def _growth_section(r: Review) -> dict[str, Any] | None:
    g = r.summary.growth
    if not g:
        return None
    s, f, free = r.summary.to_dict(), g["final"], g["reserved_ports"]
    now = [s["gpus"], s["nodes"], s["switches"]["leaf"], s["switches"]["spine"], s["switches"]["core"], s["pods"]]
    then = [f["gpus"], f["nodes"], f["leaves"], f["spines"], f["cores"], f["pods"]]
    unit = "scalable unit" if s["placement"] == "rail" else "rack"
    rows = _growth_rows(g["steps"])
    return {"id": "growth", "title": "Growth", "blocks": [
        _text(f"Cabled for {g['grow_to']:,} GPUs: the spines{' and cores' if f['cores'] else ''} are those of the final "
              f"size, and every switch, port, address and ASN of today's fabric is the final fabric's, so growing "
              f"adds {unit}s and cables them into ports kept free for them; nothing there is recabled or "
              f"renumbered. Kept free now: {free['spine']:,} spine ports"
              + (f" and {free['core']:,} core ports" if f["cores"] else "") + "."),
        _table(["", "GPUs", "nodes", "leaves", "spines", "cores", "pods"],
               [["now", *[_n(v) for v in now]], ["final", *[_n(v) for v in then]]]),
        _table(["GPUs after the step", "added", "leaf-spine links", "spine-core links"], rows,
               caption=f"Steps, one {unit} at a time", numeric=[True, False, True, True]),
    ]}


def _diagram_section(r: Review, src: str) -> dict[str, Any]:
    return {"id": "diagram", "title": "Fabric diagram", "blocks": [
        _figure("fabric", fabric_svg(r.fabric), src,
                "Tiers as rows (servers at the bottom), leaves coloured by rail, link counts on the bundles; "
                "above 128 switches one box per scalable unit, spine group, pod and core group.")]}


def _bom_section(r: Review) -> dict[str, Any]:
    c = r.cabling.to_dict()
    cost = r.cabling.cost  # with the price of every line
    headers = ["category", "item", "tier", "end", "length (m)", "quantity", "unit power (W)", "power (W)"]
    numeric = [False, False, False, False, True, True, True, True]
    if cost is not None:
        headers += [f"unit price ({cost['currency']})", f"price ({cost['currency']})"]
        numeric += [True, True]
    rows = []
    for i, line in enumerate(r.cabling.bom):
        row = [line.category, line.item, line.tier, line.end or "",
               "" if line.length_m is None else f"{line.length_m:g}", _n(line.quantity),
               "-" if line.unit_power_w is None else f"{line.unit_power_w:g}", _n(line.power_w)]
        if cost is not None:
            unit, price = cost["lines"][i]
            row += [_n(unit, 2) if unit is not None else "unpriced", _n(price) if price is not None else "-"]
        rows.append(row)
    p = c["power_w"]
    includes = p["switch_power_includes_optics"]
    power = [
        f"switches: {_w(p['switches'])}" + (f", of which {p['switch_end']:,.0f} W is their optics "
                                             f"(the switch figure includes them)" if includes and p["switches"] is not None
                                             else ""),
        f"switch-end optics: {p['switch_end']:,.0f} W" + (" (counted in the switches' figure, not again)" if includes
                                                           else " (added to the switches')"),
        f"server-end optics (the NICs' transceivers): {p['server_end']:,.0f} W",
        f"network power: {_w(p['total'])}",
        *([f"cluster {power_line(r.summary.power)}"] if r.summary.power else []),
    ]
    blocks = [
        _text(f"{c['cables']['total']:,} cables ({c['cables']['pieces']:,} pieces to order) for "
              f"{c['links']:,} links; {c['transceivers']['total']:,} transceivers "
              f"({c['transceivers']['switch_end']:,} at switches, {c['transceivers']['server_end']:,} at servers). "
              f"The same counts as `bom.csv` and `summary.json`."),
        _table(headers, rows, numeric=numeric),
        _text("Power, each part counted once:"), _items(power)]
    if cost is not None:
        by = ", ".join(f"{k}es {v:,.0f}" if k == "switch" else f"{k}s {v:,.0f}" for k, v in cost["by_category"].items())
        note = f" {cost['note']}." if cost["note"] else ""
        missing = f" Unpriced: {', '.join(cost['unpriced'])} (left out of the total)." if cost["unpriced"] else ""
        blocks.append(_text(f"Cost: {cost['total']:,.0f} {cost['currency']} ({by}).{note}{missing}"))
    else:
        blocks.append(_text("Cost: no price list given (`--prices FILE`)."))
    return {"id": "bom", "title": "Bill of materials", "blocks": blocks}


def _hops_section(a: "Analysis") -> dict[str, Any]:
    h = a.hops.to_dict()
    blocks = []
    if h["mean_links"] is None:
        blocks.append(_text("No two GPUs on different nodes talk over the fabric."))
    else:
        blocks.append(_text(f"Between GPUs on different nodes: diameter {h['diameter_links']} links "
                            f"({h['diameter_switch_hops']} switch hops), mean {h['mean_links']:.3f} links; "
                            f"{h['unreachable_pairs']:,} of {h['pairs']:,} pairs unreachable."))
        blocks.append(_table(["links", "switch hops", "GPU pairs", "same rail", "across rails"],
                             [[d["links"], d["switch_hops"], _n(d["pairs"]), _n(d["same_rail_pairs"]),
                               _n(d["cross_rail_pairs"])] for d in h["distribution"]]))
    return {"id": "hops", "title": "Hops", "blocks": blocks}


def _bisection_section(a: "Analysis") -> dict[str, Any]:
    b = a.bisection.to_dict()
    return {"id": "bisection", "title": "Bisection bandwidth", "blocks": [
        _text(f"Analytic: {b['least_cut']['gbps']:,} Gb/s; max-flow: {b['maxflow_gbps']:,} Gb/s "
              f"({'agrees' if b['agrees'] else 'differs'}). {b['note'][:1].upper() + b['note'][1:]}."),
        _table(["links", "capacity (Gb/s)", "half (Gb/s)"],
               [[t["links"], _n(t["capacity_gbps"]), _n(t["half_gbps"])] for t in b["tiers"]],
               caption="Capacity of each link tier"),
        _table(["split", "kind", "max-flow (Gb/s)"],
               [[sp["name"], sp["kind"], _n(sp["gbps"])] for sp in b["splits"]],
               caption=f"Max-flow across each split ({b['endpoints']:,} {b['endpoint'].upper()}s, "
                       f"{b['random_splits']} random splits with seed {b['seed']})",
               numeric=[False, False, True]),
    ]}


def _allreduce_section(r: Review, src: str) -> dict[str, Any]:
    a = r.analysis
    assert a is not None
    d = a.allreduce.details
    o = a.options
    limit = d.get("busbw_limit_GBps")
    blocks = [_text(
        f"Same-rank all-reduce of the whole job ({d['job_gpus']:,} GPUs on {d['nodes']:,} nodes), the algorithm "
        f"and protocol NCCL {d['nccl_version']}'s tuner picks at each size; "
        + ("NVLink only (one node)." if d["nvlink_only"] else
           f"{d['routing']} routing{' hashing ' + d['hash_field'] if d['hash_field'] else ''}, median of "
           f"{d['hash_samples']} hash samples, {o.qps} QP per connection, {o.cc} congestion control, "
           f"{o.order} rank order, link efficiency {o.link_efficiency:g} (docs/model.md)."))]
    if r.curve:
        blocks.append(_figure("busbw", busbw_svg([(r.label, r.curve)], limit), src,
                              "busbw against message size; the marker shows the algorithm at each size"
                              + (f"; the dashed line is the bound as the message grows ({limit:,.1f} GB/s)" if limit else "")))
    rows = [[format_size(row["size_bytes"]), row["algorithm"], row["protocol"], _n(row["busbw_GBps"], 1),
             _n(row.get("busbw_p5_GBps"), 1), _n(row["latency_us"], 1), f"{row['time_s'] * 1e3:,.3f}"]
            for row in a.allreduce.rows]
    blocks.append(_table(["size", "algorithm", "protocol", "busbw (GB/s)", "busbw p5 (GB/s)", "latency (us)",
                          "time (ms)"], rows, numeric=[False, False, False, True, True, True, True]))
    if not d["nvlink_only"]:
        blocks.append(_text(
            f"{d['connections']:,} connections, {d['connections_leaving_leaf']:,} leave their leaf and "
            f"{d['connections_leaving_pod']:,} their pod; the slowest gets {d['slowest_connection_gbps']:,.1f} Gb/s "
            f"of the {d['ideal_connection_gbps']:,.1f} it would get with even sharing."))
    return {"id": "allreduce", "title": "All-reduce busbw", "blocks": blocks}


def _links_section(r: Review, src: str) -> dict[str, Any]:
    a = r.analysis
    assert a is not None
    u = a.allreduce.details["link_utilisation"]
    if not u.get("resources"):
        return {"id": "links", "title": "Link utilisation", "blocks": [
            _text("The all-reduce puts no traffic on switch-to-switch links.")]}
    return {"id": "links", "title": "Link utilisation", "blocks": [
        _figure("links", utilisation_svg([(r.label, u["histogram"])]), src,
                f"Utilisation of the {u['resources']:,} switch-to-switch link directions the all-reduce loads "
                f"(median hash sample, largest message size)"),
        _text(f"Mean {100 * u['mean']:.1f} %, median {100 * u['p50']:.1f} %, 90th percentile {100 * u['p90']:.1f} %, "
              f"99th {100 * u['p99']:.1f} %, busiest {100 * u['max']:.1f} %."),
    ]}


def _what_if_section(r: Review) -> dict[str, Any]:
    w = r.what_if
    assert w is not None
    rows = []
    for row in w.rows:
        bis, bus = row["bisection_gbps"], row["busbw_GBps"]
        rows.append([row["lost"], len(row["parts"]), _pct_range(bis), _pct(bus["median_change_pct"]),
                     _pct_range(bus), "yes" if row.get("stops_job") else "no", _n(row["nodes_left_out"]),
                     row["worst_part"]])
    return {"id": "what-if", "title": "What if a part fails", "blocks": [
        _text(f"Each row fails one part at a time, for {w.samples} parts of the kind spread over the fabric "
              f"({w.algorithm}, median of {w.hash_samples} hash samples each, the intact fabric's too: the same "
              f"draws), and gives the change against the intact fabric ({w.intact['bisection_gbps']:,.0f} Gb/s "
              f"bisection, "
              f"{w.intact['busbw_GBps']:,.1f} GB/s busbw at {format_size(w.size_bytes)}). Which part fails "
              f"matters where ECMP hashing and rank placement decide the load, so the busbw is a distribution; "
              f"`topo analyze --fail PART` shows any one in full. A lost NIC link stops the running job "
              f"(\"stops the job\"): its figure is for the job restarted on the remaining NICs; a dual-ToR NIC, "
              f"bonded over both leaves of its pair, keeps running on the link it has left. Where a loss leaves nodes with no "
              f"live NIC (a rack's leaf), the restarted job runs without them and has lost those nodes' GPUs. "
              f"No loss shows as a gain: on each hash draw a part's busbw is at most the intact fabric's."),
        _table(["lost", "parts tried", "bisection change", "busbw change (median)", "busbw change (range)",
                "stops the job", "nodes left out", "worst part"], rows,
               numeric=[False, True, True, True, True, False, True, False]),
    ]}


def _pct(value: float | None) -> str:
    if value is None:
        return "-"
    return "0 %" if abs(value) < 0.05 else f"{value:+.1f} %"


def _pct_range(spread: dict[str, Any]) -> str:
    lo, hi = spread["min_change_pct"], spread["max_change_pct"]
    return _pct(lo) if lo == hi else f"{_pct(lo)} to {_pct(hi)}"


def _warnings_section(r: Review) -> dict[str, Any]:
    if not r.warnings:
        return {"id": "warnings", "title": "Warnings", "blocks": [_text("None.")]}
    return {"id": "warnings", "title": "Warnings", "blocks": [
        _table(["code", "warning"], [[w.code, w.message] for w in r.warnings], numeric=[False, False]),
        _text("docs/warnings.md says what each code means and what to do about it.")]}


def _key_section(r: Review) -> dict[str, Any]:
    f = figures(r)
    rows = [[m.label, _metric_text(m, f.get(m.key), f.get("currency"))] for m in METRICS
            if f.get(m.key) is not None or m.key in ("power_w",)]
    return {"id": "key", "title": "Key figures", "blocks": [_table(["figure", "value"], rows)]}


def _design_sections(r: Review, paths: dict[str, str]) -> list[dict[str, Any]]:
    sections = [_key_section(r), _warnings_section(r), _spec_section(r), _tier_section(r)]
    grow = _growth_section(r)
    if grow is not None:
        sections.append(grow)
    sections += [_diagram_section(r, paths["fabric"]), _bom_section(r)]
    if r.analysis is not None:
        sections += [_hops_section(r.analysis), _bisection_section(r.analysis),
                     _allreduce_section(r, paths["busbw"]), _links_section(r, paths["links"])]
        if r.what_if is not None:
            sections.append(_what_if_section(r))
    else:
        sections.append({"id": "analysis", "title": "Analysis", "blocks": [
            _text("Not analysed (built with --no-analysis): no hops, bisection, all-reduce or what-if figures.")]})
    return sections


# --- comparison ---------------------------------------------------------------------------------------


def _change(value: Any, ref: Any) -> float | None:
    if not isinstance(value, (int, float)) or not isinstance(ref, (int, float)) or not ref:
        return None
    return (value - ref) / abs(ref)


def _compare_cells(m: Metric, values: list[Any], currency: list[str | None]) -> list[dict[str, str]]:
    ref = values[0]
    cells = [_cell(_metric_text(m, ref, currency[0]))]
    for value, cur in zip(values[1:], currency[1:]):
        text = _metric_text(m, value, cur)
        change = _change(value, ref)
        if change is None or abs(change) < SAME_WITHIN:
            cells.append(_cell(text, "same" if change is not None else ""))
            continue
        note = f"{100 * change:+.0f} %" if abs(change) >= 0.01 else f"{100 * change:+.1f} %"
        cls = "" if m.better == 0 else ("better" if change * m.better > 0 else "worse")
        cells.append(_cell(text, cls, note))
    return cells


def _gain_loss(m: Metric, value: Any, ref: Any) -> tuple[int, str] | None:
    """(+1 gain / -1 loss, words) of one figure against the reference, None when the same."""
    change = _change(value, ref)
    if change is None or abs(change) < SAME_WITHIN or m.better == 0:
        return None
    sign = 1 if change * m.better > 0 else -1
    size = abs(change)
    amount = f"{size * 100:.0f} %" if size >= 0.01 else f"{size * 100:.1f} %"
    more = "more" if change > 0 else "less"
    if m.key in ("switches", "cables", "transceivers", "diameter_links", "warnings"):
        more = "more" if change > 0 else "fewer"
    words = {"switches": "switches", "cables": "cable pieces", "transceivers": "transceivers",
             "power_w": "power", "cost": "cost", "power_per_gpu_w": "power per GPU", "cost_per_gpu": "cost per GPU", "bisection_per_gpu_gbps": "bisection per GPU",
             "diameter_links": "links of diameter", "busbw_GBps": "busbw at the largest size",
             "busbw_mid_GBps": "busbw at 64 MiB", "worst_loss_GBps": "busbw after the worst single loss",
             "warnings": "warnings"}[m.key]
    return sign, f"{amount} {more} {words}"


#: The figures a verdict weighs (per-GPU bisection, so that designs of other sizes compare).
VERDICT_KEYS = ("switches", "transceivers", "power_w", "cost", "bisection_per_gpu_gbps", "diameter_links",
                "busbw_mid_GBps", "busbw_GBps", "worst_loss_GBps")


def verdict(reviews: Sequence[Review]) -> str:
    """One paragraph: what each design gains and loses against the first."""
    ref = reviews[0]
    fr = figures(ref)
    parts = []
    metrics = {m.key: m for m in METRICS}
    for r in reviews[1:]:
        f = figures(r)
        gains, losses = [], []
        keys = VERDICT_KEYS if f["gpus"] == fr["gpus"] else tuple(
            {"power_w": "power_per_gpu_w", "cost": "cost_per_gpu"}.get(k, k) for k in VERDICT_KEYS)
        for key in keys:
            said = _gain_loss(metrics[key], f.get(key), fr.get(key))
            if said is not None:
                (gains if said[0] > 0 else losses).append(said[1])
        head = f"Against {ref.label}, {r.label}"
        if f["gpus"] != fr["gpus"]:
            head += f" ({f['gpus']:,} GPUs against {fr['gpus']:,}: compare the per-GPU figures)"
        if not gains and not losses:
            parts.append(f"{head} is the same on every figure weighed here.")
        elif not losses:
            parts.append(f"{head} has {_join(gains)}, and is worse on none of the figures weighed here.")
        elif not gains:
            parts.append(f"{head} is better on none of the figures weighed here, and has {_join(losses)}.")
        else:
            parts.append(f"{head} has {_join(gains)}, but {_join(losses)}.")
    best = _best(reviews)
    if best:
        parts.append(best)
    return " ".join(parts)


def _best(reviews: Sequence[Review]) -> str:
    figs = [figures(r) for r in reviews]
    said = []
    for key, words, more in (("busbw_GBps", "the highest busbw at the largest size", True),
                             ("power_per_gpu_w", "the least power per GPU", False),
                             ("cost_per_gpu", "the lowest cost per GPU", False)):
        values = [f.get(key) for f in figs]
        if any(v is None for v in values) or len(set(round(v, 6) for v in values)) == 1:
            continue
        i = max(range(len(values)), key=lambda k: values[k]) if more else min(range(len(values)), key=lambda k: values[k])
        said.append(f"{reviews[i].label} has {words}")
    return f"Of these designs, {_join(said)}." if said else ""


def _join(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _side_by_side(reviews: Sequence[Review]) -> dict[str, Any]:
    """The key figures of every design in one table, with each change against the first."""
    figs = [figures(r) for r in reviews]
    rows = []
    for m in METRICS:
        values = [f.get(m.key) for f in figs]
        if all(v is None for v in values):
            continue
        rows.append([m.label, *_compare_cells(m, values, [f.get("currency") for f in figs])])
    return _table(["figure", *[r.label for r in reviews]], rows)


def _compare_sections(reviews: Sequence[Review], paths: list[dict[str, str]],
                      shared: dict[str, str]) -> list[dict[str, Any]]:
    labels = [r.label for r in reviews]
    designs = [[r.label, r.source or "-", f"{r.summary.gpus:,}", f"{r.summary.tiers}",
                ("rail-only" if r.summary.tiers == 1 else "rail-optimized") if r.summary.placement == "rail"
                else "rack (ToR)",
                f"{r.summary.radix} x {r.summary.port_gbps}G" + (f" ({r.summary.switch_model})" if r.summary.switch_model
                                                                 else "")] for r in reviews]
    sections: list[dict[str, Any]] = [
        {"id": "designs", "title": "Designs", "blocks": [
            _table(["design", "from", "GPUs", "tiers", "placement", "switch"], designs,
                   numeric=[False, False, True, True, False, False]),
            _text(f"{labels[0]} is the reference: every other design's figures are given with their change "
                  f"against it, marked better or worse.")]},
        {"id": "verdict", "title": "Verdict", "blocks": [_text(verdict(reviews))]},
        {"id": "key", "title": "Side by side", "blocks": [_side_by_side(reviews)]},
    ]
    specs = [spec_and_inputs(r.fabric, r.base_dir)[0] for r in reviews]
    keys = list(dict.fromkeys(k for s in specs for k in s))
    differ = [[k, *[_spec_value(s.get(k)) for s in specs]] for k in keys
              if len({repr(s.get(k)) for s in specs}) > 1]
    sections.append({"id": "spec", "title": "Spec differences", "blocks": [
        _table(["field", *labels], differ, numeric=[False] * (len(labels) + 1)) if differ
        else _text("The specs are the same.")]})
    analysed = [r for r in reviews if r.analysis is not None and r.curve]
    if analysed:
        sections.append({"id": "allreduce", "title": "All-reduce busbw", "blocks": [
            _figure("busbw", busbw_svg([(r.label, r.curve) for r in analysed]), shared["busbw"],
                    "busbw against message size, one line per design; the marker shows the algorithm at each size")]})
        util = [(r.label, r.analysis.allreduce.details["link_utilisation"].get("histogram")) for r in analysed]
        util = [(label, h) for label, h in util if h]
        if util:
            sections.append({"id": "links", "title": "Link utilisation", "blocks": [
                _figure("links", utilisation_svg(util), shared["links"],
                        "Share of the loaded switch-to-switch link directions in each utilisation band, per design")]})
    with_what_if = [r for r in reviews if r.what_if is not None]
    if with_what_if:
        scenarios = list(dict.fromkeys(row["lost"] for r in with_what_if for row in r.what_if.rows))
        table = []
        for lost in scenarios:
            cells = [lost]
            for r in reviews:
                row = next((x for x in (r.what_if.rows if r.what_if else ()) if x["lost"] == lost), None)
                cells.append("-" if row is None else f"{_pct(row['busbw_GBps']['median_change_pct'])} "
                                                     f"({_pct_range(row['busbw_GBps'])})")
            table.append(cells)
        sections.append({"id": "what-if", "title": "What if a part fails", "blocks": [
            _text("Change of busbw at the largest size with one part lost: the median over the parts tried, "
                  "and the range."),
            _table(["lost", *labels], table, numeric=[False] + [True] * len(labels))]})
    warn_rows = [[r.label, w.code, w.message] for r in reviews for w in r.warnings]
    sections.append({"id": "warnings", "title": "Warnings", "blocks": [
        _table(["design", "code", "warning"], warn_rows, numeric=[False, False, False]) if warn_rows
        else _text("None.")]})
    for r, p in zip(reviews, paths):
        for section in (_tier_section(r), _diagram_section(r, p["fabric"]), _bom_section(r)):
            section = dict(section, id=f"{_slug(r.label)}-{section['id']}", title=f"{r.label}: {section['title']}")
            for block in section["blocks"]:
                if block["kind"] == "figure":
                    block["name"] = f"{_slug(r.label)}-{block['name']}"
                    block["svg"] = prefix_ids(block["svg"], _slug(r.label))
            sections.append(section)
    return sections


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "design"


# --- the files ----------------------------------------------------------------------------------------


def report_context(reviews: Sequence[Review], paths: Sequence[dict[str, str]],
                   shared: dict[str, str] | None = None) -> dict[str, Any]:
    """What the report templates get: ``title``, ``subtitle``, ``compare``, ``designs`` (labels)
    and ``sections`` (each with ``id``, ``title`` and ``blocks``: text, list, table or figure)."""
    compare = len(reviews) > 1
    if compare:
        title = "Design comparison: " + " / ".join(r.label for r in reviews)
        sections = _compare_sections(reviews, list(paths), shared or {"busbw": "busbw.svg", "links": "links.svg"})
        s = reviews[0].summary
        subtitle = f"{len(reviews)} designs, {reviews[0].label} the reference"
    else:
        r = reviews[0]
        s = r.summary
        title = f"Design review: {s.name}"
        subtitle = (f"{s.gpus:,} GPUs, {s.tiers}-tier "
                    f"{('rail-only' if s.tiers == 1 else 'rail-optimized') if s.placement == 'rail' else 'rack (ToR)'} "
                    f"fabric")
        sections = _design_sections(r, dict(paths[0]))
    return {"version": __version__, "title": title, "subtitle": subtitle, "compare": compare,
            "designs": [r.label for r in reviews], "sections": sections}


def sweep_section(sweep: dict[str, Any], reviews: Sequence[Review]) -> dict[str, Any]:
    """The section of a design review on a sweep (``sweep.json`` of ``topo sweep``, read): its two
    Pareto plots, the reviewed designs ringed where the sweep has them (the same spec), and the
    ranked fronts."""
    from .plots import pareto_svg

    rows = sweep["rows"]
    front = sweep["pareto"]
    x = front["x"]
    params = sweep.get("params", [])
    mine = [r["design"] for r in rows if r.get("spec") is not None
            and any(r["spec"] == rv.fabric.spec.to_dict() for rv in reviews)]
    currency = next((r.get("currency") for r in rows if r.get("currency")), None)
    x_label = f"network cost per GPU ({currency})" if x == "cost_per_gpu" else "network power per GPU (W)"
    blocks = [_text(f"{len(rows):,} designs of `topo sweep` (swept: {', '.join(params) or 'nothing'}); "
                    + (f"the design reviewed here is design {', '.join(map(str, mine))}, ringed."
                       if mine else "the design reviewed here is not among them."))]
    for view, y_label in (("busbw", f"busbw at {front['busbw']['y'].split('@', 1)[1]} (GB/s)"),
                          ("bisection", "bisection per GPU (Gb/s)")):
        y = front[view]["y"]
        on_front = [d["design"] for d in front[view]["front"]]
        svg = pareto_svg(rows, x, y, on_front, x_label, y_label, salt=f"sweep-{view}", highlight=mine)
        blocks.append(_figure(f"sweep-{view}", svg, f"report/pareto-{view}.svg",
                              f"{y_label} against {x_label}: the Pareto front in blue"))
        by_design = {r["design"]: r for r in rows}
        table = [[str(d["rank"]), str(d["design"]) + (" (this design)" if d["design"] in mine else ""),
                  *(str(by_design[d["design"]].get(p)) for p in params), _n(by_design[d["design"]].get("switches")),
                  _n(d[x], 1), _n(d[y], 1)] for d in front[view]["front"]]
        blocks.append(_table(["rank", "design", *params, "switches", x, y], table,
                             caption=f"the Pareto front of {view}, cheapest first"))
    return {"id": "sweep", "title": "Sweep", "blocks": blocks}


def train_section(train: dict[str, Any], reviews: Sequence[Review]) -> dict[str, Any]:
    """The section of a design review on a training job (the JSON of ``topo train -o``, read): the
    workload, the step and where its time goes, throughput, MFU and memory, the scaling curve and
    its breakdown as plots when the result has one, and the what-ifs when it has them."""
    from .plots import breakdown_svg, scaling_svg
    from .terminal import PARTS

    w, f, m = train["workload"], train["fabric"], train["model"]
    same = any(train.get("spec") == r.fabric.spec.to_dict() for r in reviews)
    where = ("on this design's fabric" if same else
             f"on a fabric of {f['gpus']:,} GPUs ({f['nics_per_node']} x {f['nic_gbps']}G, {f['placement']}, "
             f"{f['oversubscription']}), not the one reviewed here")
    blocks = [_text(f"`topo train`: {m['name']} ({m['params'] / 1e9:,.1f} B parameters) in {w['precision']} on "
                    f"{train['gpus']:,} {train['gpu']} {where}; tp {w['tp']}, pp {w['pp']}, cp {w['cp']}, "
                    f"ep {w['ep']}, dp {w['dp']}, global batch {w['global_batch']:,} x {w['seq_len']:,} tokens, "
                    f"ZeRO {w['zero']}, recompute {w['recompute']}.")]
    adjusted = [a["note"] for a in train.get("adjusted", []) if isinstance(a, dict) and isinstance(a.get("note"), str)]
    if adjusted:  # the recipe's values that did not fit the GPU count (docs/train.md)
        blocks.append(_text("Adjusted to fit: " + "; ".join(adjusted) + "."))
    mem = train["memory"]
    figures = [["step time (s)", _n(train["step_time_s"], 3)],
               ["tokens/s per GPU", _n(train["tokens_per_s_per_gpu"], 1)],
               ["model TFLOP/s per GPU", _n(train["model_tflops_per_gpu"], 1)],
               ["MFU", f"{100 * train['mfu']:.1f}% of {train['peak_tflops']:,.0f} TFLOP/s"],
               ["scaling efficiency (of linear from one replica)", f"{100 * train['scaling_efficiency']:.1f}%"],
               ["memory per GPU (GB)", f"{mem['total_GB']:,.1f} of {mem['hbm_GB']:,.0f}"
                + ("" if mem["fits"] else ": does not fit")]]
    blocks.append(_table(["figure", "value"], figures, caption="the predicted step"))
    step = train["step_time_s"]
    parts = [[label, _n(train["breakdown"][key], 3), f"{100 * train['breakdown'][key] / step:.1f}%"]
             for key, label in PARTS if train["breakdown"][key] > 0]
    blocks.append(_table(["part", "seconds", "share"], parts, caption="where the step's time goes"))
    points = [p for p in train.get("scaling", []) if "error" not in p]
    if len(points) >= 2:
        blocks.append(_figure("train-scaling", scaling_svg(points, salt="train-scaling"), "report/train-scaling.svg",
                              "speed-up against the GPU count (dashed: linear), each point's share of linear"))
        blocks.append(_figure("train-breakdown", breakdown_svg(points, salt="train-breakdown"),
                              "report/train-breakdown.svg", "where the step's time goes at each GPU count"))
        blocks.append(_table(["GPUs", "step (s)", "tokens/s/GPU", "MFU", "of linear"],
                             [[_n(p["gpus"]), _n(p["step_time_s"], 3), _n(p["tokens_per_s_per_gpu"], 1),
                               f"{100 * p['mfu']:.1f}%", f"{100 * p['of_linear']:.1f}%"] for p in points],
                             caption="the scaling curve"))
    if train.get("what_if"):
        rows = [[r["what_if"], _n(r.get("step_time_s"), 3),
                 f"{r['change_pct']:+.1f}%" if "change_pct" in r else r.get("error", "")]
                for r in train["what_if"]]
        blocks.append(_table(["the same workload with", "step (s)", "change"], rows, caption="what-ifs"))
    return {"id": "training", "title": "Training", "blocks": blocks}


def report_files(reviews: Sequence[Review], user_dirs: Iterable[str | Path] = (), in_build: bool = True,
                 sweep: dict[str, Any] | None = None, train: dict[str, Any] | None = None) -> dict[str, str]:
    """The report's files by relative path: ``report.html`` (self-contained), ``report.md`` and
    the SVG files the Markdown shows (``report/``). In a build folder the fabric diagram is the
    folder's ``graph/fabric.svg``; elsewhere it is written beside the plots. With ``sweep`` (a
    ``sweep.json`` read) a section shows the sweep's Pareto fronts; with ``train`` (the JSON of
    ``topo train -o``) a last section shows the training step and its scaling curve."""
    reviews = list(reviews)
    if not reviews:
        raise ValueError("a report needs at least one design")
    compare = len(reviews) > 1
    paths = []
    for r in reviews:
        slug = _slug(r.label)
        fabric = "graph/fabric.svg" if in_build and not compare else (
            f"report/fabric-{slug}.svg" if compare else "report/fabric.svg")
        paths.append({"fabric": fabric, "busbw": "report/busbw.svg", "links": "report/links.svg"})
    context = report_context(reviews, paths, {"busbw": "report/busbw.svg", "links": "report/links.svg"})
    if sweep is not None:
        context["sections"].append(sweep_section(sweep, reviews))
    if train is not None:
        context["sections"].append(train_section(train, reviews))
    env = template_environment(user_dirs)
    env.filters["md"] = markdown_cell
    env.filters["html"] = html_text
    files: dict[str, str] = {}
    for output, template, _ in REPORT_OUTPUTS:
        files[output] = render_template(env, template, context)
    for section in context["sections"]:
        for block in section["blocks"]:
            if block["kind"] == "figure" and block["src"] not in files and not (
                    in_build and block["src"] == "graph/fabric.svg"):
                files[block["src"]] = '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n' + block["svg"] + "\n"
    return files


def report_data(reviews: Sequence[Review]) -> dict[str, Any]:
    """The report as data (``topo report --format json``): each design's key figures, and the verdict
    when there are several."""
    out: dict[str, Any] = {"designs": [{"label": r.label, "source": r.source, "figures": figures(r),
                                        "warnings": [w.to_dict() for w in r.warnings],
                                        "what_if": r.what_if.to_dict() if r.what_if is not None else None}
                                       for r in reviews]}
    if len(reviews) > 1:
        out["verdict"] = verdict(reviews)
    return out


def key_table(reviews: Sequence[Review]) -> tuple[list[str], list[list[str]]]:
    """The key figures as plain text: headers and rows (a comparison's changes in brackets)."""
    table = _side_by_side(reviews) if len(reviews) > 1 else _key_section(reviews[0])["blocks"][0]
    rows = [[c["text"] + (f" ({c['note']})" if c["note"] else "") for c in row] for row in table["rows"]]
    return table["headers"], rows


def html_text(text: Any) -> str:
    """Text for HTML: escaped, with Markdown's `code` spans as <code>.

    >>> html_text("run `topo build` <now>")
    'run <code>topo build</code> &lt;now&gt;'
    """
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(str(text), quote=True))


def markdown_cell(text: Any) -> str:
    """Text safe in a Markdown table cell: pipes escaped, line breaks as spaces."""
    return str(text).replace("|", "\\|").replace("\n", " ")


__all__ = ["METRICS", "REPORT_OUTPUTS", "Review", "figures", "key_table", "report_context", "report_data",
           "report_files", "review", "verdict"]
