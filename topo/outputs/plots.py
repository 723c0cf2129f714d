"""The plots of a design review, as SVG text: busbw against message size, and link utilisation.

matplotlib draws them without a display (a bare :class:`~matplotlib.figure.Figure` and its SVG
canvas, never pyplot), sized for a printed page: 7.2 x 3.3 inches, 9-point text kept as text so
that a browser or a printer sets it sharply. matplotlib is imported only here, and only when a
plot is drawn, so that commands that draw none start at once.

The same input gives the same bytes: no date in the file, and the ids of clip paths and markers
are salted with the plot's name (two plots inline in one page never share an id).

Examples
--------
>>> rows = [{"size_bytes": 1 << p, "algorithm": "ring", "busbw_GBps": 10.0 * p} for p in range(20, 24)]
>>> svg = busbw_svg([("a", rows)])
>>> svg.startswith("<?xml") and 'id="busbw' in svg, svg == busbw_svg([("a", rows)])
(True, True)
"""

from __future__ import annotations

import io
import math
from typing import Any, Sequence

#: Inches: fits the text width of an A4 or US Letter page with 2 cm margins.
WIDTH_IN, HEIGHT_IN = 7.2, 3.3
FONT_PT = 9
#: Markers of the NCCL algorithms, so that the algorithm chosen at each size can be read off.
ALGORITHM_MARKERS = {"ring": "o", "tree": "^", "nvls": "s", "nvlstree": "D",
                     "collnet_direct": "v", "collnet_chain": "<", "pat": "P"}
#: One colour per design (the first design is the reference of a comparison).
DESIGN_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _figure(salt: str):
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.rcParams.update({
        "svg.hashsalt": salt,  # ids from this salt: the same plot, the same bytes
        "svg.fonttype": "none",
        "font.size": FONT_PT,
        "font.family": "sans-serif",
        "axes.titlesize": FONT_PT + 1,
        "axes.spines.top": False,
        "axes.spines.right": False,
    })
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), layout="constrained")
    return fig, fig.add_subplot()


def _svg(fig, salt: str) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    # matplotlib names ids after a hash of their content; prefix them with the plot's name so two
    # plots inline in one HTML page never define the same id
    return prefix_ids(buffer.getvalue(), salt)


def prefix_ids(svg: str, prefix: str) -> str:
    """Every id of an SVG document, and every reference to one, prefixed with ``prefix-``: two
    pictures inline in one HTML page then never share an id.

    >>> prefix_ids('<clipPath id="c1"/><use xlink:href="#c1" clip-path="url(#c1)"/>', "p")
    '<clipPath id="p-c1"/><use xlink:href="#p-c1" clip-path="url(#p-c1)"/>'
    """
    return svg.replace('id="', f'id="{prefix}-').replace("url(#", f"url(#{prefix}-").replace(
        'href="#', f'href="#{prefix}-')


def _size_label(size: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g}{unit}"
    return str(size)


def busbw_svg(curves: Sequence[tuple[str, Sequence[dict[str, Any]]]], limit_GBps: float | None = None,
              salt: str = "busbw") -> str:
    """busbw (GB/s) against message size, one line per design, a marker per size showing the
    algorithm NCCL's tuner picks there; ``limit_GBps`` draws the bound the curve approaches (the largest size's algorithm as the message grows)."""
    fig, ax = _figure(salt)
    used: dict[str, None] = {}
    for i, (label, rows) in enumerate(curves):
        colour = DESIGN_COLOURS[i % len(DESIGN_COLOURS)]
        x = [r["size_bytes"] for r in rows]
        y = [r["busbw_GBps"] for r in rows]
        ax.plot(x, y, color=colour, linewidth=1.4, label=label if len(curves) > 1 else None)
        for algorithm in dict.fromkeys(r["algorithm"] for r in rows):
            used[algorithm] = None
            xs = [r["size_bytes"] for r in rows if r["algorithm"] == algorithm]
            ys = [r["busbw_GBps"] for r in rows if r["algorithm"] == algorithm]
            ax.plot(xs, ys, linestyle="none", marker=ALGORITHM_MARKERS.get(algorithm, "x"), markersize=4.5,
                    color=colour, markerfacecolor="white", markeredgewidth=1.1)
    if limit_GBps:
        ax.axhline(limit_GBps, color="#555555", linestyle="--", linewidth=0.9)
        ax.annotate(f"bound as the message grows: {limit_GBps:,.1f} GB/s", (0.01, limit_GBps), xycoords=("axes fraction", "data"),
                    xytext=(0, 3), textcoords="offset points", color="#555555", fontsize=FONT_PT - 1)
    ax.set_xscale("log", base=2)
    sizes = sorted({r["size_bytes"] for _, rows in curves for r in rows})
    if sizes:
        ticks = [s for s in sizes if round(math.log2(s)) % 2 == 0] or sizes
        ax.set_xticks(ticks, [_size_label(s) for s in ticks])
        ax.set_xticks([], minor=True)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)
    # the legend: designs (by colour) and algorithms (by marker)
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=DESIGN_COLOURS[i % len(DESIGN_COLOURS)], linewidth=1.4, label=label)
               for i, (label, _) in enumerate(curves)] if len(curves) > 1 else []
    handles += [Line2D([], [], linestyle="none", marker=ALGORITHM_MARKERS.get(a, "x"), color="#333333",
                       markerfacecolor="white", label=a) for a in used]
    ax.legend(handles=handles, loc="lower right", frameon=False, fontsize=FONT_PT - 1,
              title="algorithm" if len(curves) == 1 else None)
    return _svg(fig, salt)


def utilisation_svg(histograms: Sequence[tuple[str, Sequence[int]]], salt: str = "links") -> str:
    """The share of loaded switch-to-switch link directions in each 10 % utilisation band, one bar
    per design in each band."""
    fig, ax = _figure(salt)
    count = max(len(h) for _, h in histograms) if histograms else 10
    width = 0.8 / max(len(histograms), 1)
    for i, (label, histogram) in enumerate(histograms):
        total = sum(histogram) or 1
        shares = [100.0 * c / total for c in histogram]
        xs = [b + (i - (len(histograms) - 1) / 2) * width for b in range(len(histogram))]
        ax.bar(xs, shares, width=width * 0.95, color=DESIGN_COLOURS[i % len(DESIGN_COLOURS)],
               label=label if len(histograms) > 1 else None)
    ax.set_xticks(range(count), [f"{10 * b}-{10 * (b + 1)}" for b in range(count)])
    ax.set_xlabel("utilisation (% of the link direction's capacity)")
    ax.set_ylabel("share of loaded link directions (%)")
    ax.set_ylim(0, 100)
    ax.grid(True, axis="y", color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)
    if len(histograms) > 1:
        ax.legend(loc="upper left", frameon=False, fontsize=FONT_PT - 1)
    return _svg(fig, salt)


__all__ = ["breakdown_svg", "busbw_svg", "pareto_svg", "prefix_ids", "scaling_svg", "utilisation_svg"]


def pareto_svg(rows: Sequence[dict[str, Any]], x: str, y: str, front: Sequence[int], x_label: str, y_label: str,
               salt: str = "pareto", highlight: Sequence[int] = ()) -> str:
    """Every built design of a sweep as a point (``x``: cost or power, ``y``: busbw or bisection),
    the Pareto front (the designs in ``front``, by number) joined by a step line and labelled with
    their numbers; ``highlight`` rings designs (the one a design review is of)."""
    fig, ax = _figure(salt)
    built = [r for r in rows if not r.get("error") and r.get(x) is not None and r.get(y) is not None]
    on_front = set(front)
    others = [r for r in built if r["design"] not in on_front]
    ax.scatter([float(r[x]) for r in others], [float(r[y]) for r in others], s=14, color="#9a9a9a",
               label="dominated", zorder=2)
    for r in others:
        ax.annotate(str(r["design"]), (float(r[x]), float(r[y])), xytext=(3, 3), textcoords="offset points",
                    fontsize=FONT_PT - 3, color="#7a7a7a")
    by_design = {r["design"]: r for r in built}
    points = [(float(by_design[d][x]), float(by_design[d][y]), d) for d in front if d in by_design]
    if points:
        xs, ys, ds = zip(*points)
        ax.step(xs, ys, where="post", color=DESIGN_COLOURS[0], linewidth=1.2, zorder=3)
        ax.scatter(xs, ys, s=22, color=DESIGN_COLOURS[0], label="Pareto front", zorder=4)
        for px, py, d in points:
            ax.annotate(str(d), (px, py), xytext=(3, 3), textcoords="offset points", fontsize=FONT_PT - 2,
                        color=DESIGN_COLOURS[0])
    marked = [by_design[d] for d in highlight if d in by_design]
    if marked:
        ax.scatter([float(r[x]) for r in marked], [float(r[y]) for r in marked], s=90,
                   facecolors="none", edgecolors=DESIGN_COLOURS[1], linewidths=1.4, label="this design", zorder=5)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_ylim(bottom=0)
    ax.grid(True, color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="lower right", frameon=False, fontsize=FONT_PT - 1)
    return _svg(fig, salt)


def scaling_svg(points: Sequence[dict[str, Any]], salt: str = "scaling") -> str:
    """A training scaling curve (``topo train --scale``): the speed-up over the first point against
    the GPUs, with linear speed-up dashed, each point labelled with its share of linear."""
    fig, ax = _figure(salt)
    ok = [p for p in points if "error" not in p]
    gpus = [p["gpus"] for p in ok]
    ax.plot(gpus, [g / gpus[0] for g in gpus], linestyle="--", color="#9a9a9a", linewidth=1.0, label="linear")
    ax.plot(gpus, [p["speedup"] for p in ok], marker="o", color=DESIGN_COLOURS[0], linewidth=1.4,
            label="predicted")
    for p in ok:
        ax.annotate(f"{100 * p['of_linear']:.0f}%", (p["gpus"], p["speedup"]), xytext=(4, -10),
                    textcoords="offset points", fontsize=FONT_PT - 2, color=DESIGN_COLOURS[0])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(gpus, [f"{g:,}" for g in gpus], fontsize=FONT_PT - 2)
    ax.minorticks_off()
    ax.set_xlabel("GPUs")
    ax.set_ylabel(f"speed-up over {gpus[0]:,} GPUs")
    ax.grid(True, color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="upper left", frameon=False, fontsize=FONT_PT - 1)
    return _svg(fig, salt)


#: The parts of a training step, in the order of the stacked bars, and their colours.
STEP_PARTS = (("compute_s", "compute", "#1f77b4"), ("recompute_s", "recompute", "#aec7e8"),
              ("pipeline_bubble_s", "pipeline bubble", "#ff7f0e"), ("pipeline_send_s", "pipeline sends", "#ffbb78"),
              ("tensor_parallel_s", "tensor parallel", "#2ca02c"), ("context_parallel_s", "context parallel", "#98df8a"),
              ("expert_parallel_s", "expert all-to-all", "#9467bd"),
              ("data_parallel_s", "data parallel", "#d62728"), ("optimizer_s", "optimizer", "#8c564b"))


def breakdown_svg(points: Sequence[dict[str, Any]], salt: str = "breakdown") -> str:
    """Where a training step's time goes at each GPU count: stacked bars of the breakdown's parts
    as shares of the step."""
    fig, ax = _figure(salt)
    ok = [p for p in points if "error" not in p]
    x = list(range(len(ok)))
    bottom = [0.0] * len(ok)
    for key, label, colour in STEP_PARTS:
        share = [100 * p["breakdown"][key] / p["step_time_s"] for p in ok]
        if not any(v > 0.05 for v in share):
            continue
        ax.bar(x, share, bottom=bottom, color=colour, label=label, width=0.7)
        bottom = [b + v for b, v in zip(bottom, share, strict=True)]
    ax.set_xticks(x, [f"{p['gpus']:,}" for p in ok], fontsize=FONT_PT - 2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("share of the step (%)")
    ax.set_ylim(0, 100)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=FONT_PT - 2)
    return _svg(fig, salt)
