"""The files of a sweep folder: ``sweep.csv``, ``sweep.json``, the Pareto plots and ``README.md``.

``sweep.csv`` has one row per design in sweep order (the columns of :attr:`topo.outputs.sweep_table.Sweep.
all_columns`); ``sweep.json`` the same rows with each design's whole spec, the sweep's settings and
the Pareto fronts; ``pareto-busbw.svg`` and ``pareto-bisection.svg`` plot the cost (with a price
list) or the network power of every design against its busbw at the largest message size and
against its bisection, the front drawn through the designs no other beats. The same rows give the
same bytes.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Sequence

from .. import __version__
from .sweep_table import Sweep, busbw_column, objective, ranked

#: The Pareto views: (file, y column of the rows, axis label).
PARETO_VIEWS = (("pareto-busbw.svg", None, "busbw at {size} (GB/s)"),
                ("pareto-bisection.svg", "bisection_gbps_per_gpu", "bisection per GPU (Gb/s)"))


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return value


def csv_text(sweep: Sweep, rows: Sequence[dict[str, Any]]) -> str:
    """``sweep.csv``: a header of :attr:`Sweep.all_columns`, then one line per design."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(sweep.all_columns)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in sweep.all_columns])
    return out.getvalue()


def fronts(sweep: Sweep, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The two Pareto fronts: the cost axis and, per view, the ranked designs on the front."""
    x = objective(rows)
    y_busbw = busbw_column(max(sweep.sizes))
    return {"x": x, "busbw": {"y": y_busbw, "front": ranked(rows, x, y_busbw)},
            "bisection": {"y": "bisection_gbps_per_gpu", "front": ranked(rows, x, "bisection_gbps_per_gpu")}}


def json_text(sweep: Sweep, rows: Sequence[dict[str, Any]], specs: Sequence[dict[str, Any] | None]) -> str:
    """``sweep.json``: the settings, the columns, every row (with its design's spec) and the fronts."""
    data = {
        "topo_version": __version__,
        "sweep": sweep.definition,
        "params": list(sweep.columns),
        "columns": list(sweep.all_columns),
        "rows": [{**{c: row.get(c) for c in sweep.all_columns}, "spec": spec} for row, spec in zip(rows, specs)],
        "pareto": fronts(sweep, rows),
    }
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def _size_text(size: int) -> str:
    return busbw_column(size).split("@", 1)[1]


def pareto_svgs(sweep: Sweep, rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """The two Pareto plots as SVG text, by file name (none when no design was built)."""
    from .plots import pareto_svg

    if not any(not r.get("error") for r in rows):
        return {}
    f = fronts(sweep, rows)
    x = f["x"]
    currency = next((r.get("currency") for r in rows if r.get("currency")), None)
    x_label = f"network cost per GPU ({currency})" if x == "cost_per_gpu" else "network power per GPU (W)"
    out = {}
    for (name, y, label), view in zip(PARETO_VIEWS, ("busbw", "bisection")):
        y = y or f[view]["y"]
        out[name] = pareto_svg(rows, x, y, [d["design"] for d in f[view]["front"]], x_label,
                               label.format(size=_size_text(max(sweep.sizes))), salt=name.split(".")[0])
    return out


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def front_table(sweep: Sweep, rows: Sequence[dict[str, Any]], view: str = "busbw") -> tuple[list[str], list[list[str]]]:
    """The ranked table of one Pareto front: (headers, rows of text), the designs' own fields first."""
    f = fronts(sweep, rows)
    x, y = f["x"], f[view]["y"]
    by_design = {r["design"]: r for r in rows}
    total = "cost" if x == "cost_per_gpu" else "power_w"
    headers = ["rank", "design", *sweep.columns, "switches", total, x, y]
    out = []
    for d in f[view]["front"]:
        r = by_design[d["design"]]
        out.append([str(d["rank"]), str(d["design"]), *(_fmt(r.get(c)) for c in sweep.columns),
                    _fmt(r.get("switches")), _fmt(r.get(total), 0), _fmt(r.get(x), 1), _fmt(r.get(y), 1)])
    return headers, out


def _markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def readme_text(sweep: Sweep, rows: Sequence[dict[str, Any]]) -> str:
    """``README.md`` of a sweep folder: what was swept, the two fronts, the files."""
    built = [r for r in rows if not r.get("error")]
    failed = len(rows) - len(built)
    size = _size_text(max(sweep.sizes))
    lines = [f"# Sweep of {len(rows):,} designs", "",
             f"Written by topo {__version__}. Each row of `sweep.csv` is one design; `sweep.json` has the same rows with "
             f"each design's whole spec (`topo build` takes it as a spec file).", "",
             f"- swept: {', '.join(f'`{c}`' for c in sweep.columns) or 'nothing (one design)'}",
             f"- busbw at {', '.join(_size_text(s) for s in sweep.sizes)}"
             + (f"; failure Monte Carlo: {sweep.trials} draws of {sweep.fail_random:g} of the switch-to-switch links "
                f"a design (at {size})" if sweep.trials else ""),
             f"- {len(built):,} designs built" + (f", {failed:,} could not be (their `error` column says why)"
                                                   if failed else ""), ""]
    for view, title in (("busbw", f"busbw at {size}"), ("bisection", "bisection")):
        headers, table = front_table(sweep, rows, view)
        lines += [f"## Pareto front: {title}", "",
                  f"![Pareto front of {title}](pareto-{view}.svg)", "",
                  _markdown_table(headers, table) if table else "No design was built.", ""]
    return "\n".join(lines)


def sweep_files(sweep: Sweep, rows: Sequence[dict[str, Any]], specs: Sequence[dict[str, Any] | None]
                ) -> dict[str, str]:
    """Every file of a sweep folder, by path."""
    files = {"sweep.csv": csv_text(sweep, rows), "sweep.json": json_text(sweep, rows, specs)}
    files.update(pareto_svgs(sweep, rows))
    files["README.md"] = readme_text(sweep, rows)
    return files
