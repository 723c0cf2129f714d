"""The rows of a sweep, as its files and the terminal show them: the columns and the Pareto fronts.

Pure functions of a sweep's rows, shared by the sweep's files (:mod:`topo.outputs.sweep_files`),
the terminal (:mod:`topo.outputs.terminal`) and the pipeline that computes the rows
(:mod:`topo.pipeline.sweep_run`): the column names (:class:`Sweep`, :func:`busbw_column`,
:func:`param_column`), and the Pareto view (:func:`objective`, :func:`pareto`, :func:`ranked`).
This module imports nothing of topo.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

#: Row columns after the design's own fields, in order. ``busbw_GBps@SIZE`` columns follow
#: ``diameter_links``, one per message size; the Monte Carlo columns come last.
DESCRIPTIVE_COLUMNS = ("gpus", "placement", "nic_gbps", "oversubscription", "leaf_model", "spine_model", "core_model")
RESULT_COLUMNS = ("tiers", "leaves", "spines", "cores", "switches", "links", "cables", "transceivers",
                  "power_w", "power_w_per_gpu", "cost", "cost_per_gpu", "currency", "bisection_gbps",
                  "bisection_gbps_per_gpu", "maxflow_gbps", "diameter_links")
TRIAL_COLUMNS = ("trials", "busbw_median_GBps", "busbw_p5_GBps", "busbw_worst_GBps",
                 "bisection_median_gbps", "bisection_p5_gbps", "bisection_worst_gbps")


@dataclass(frozen=True)
class Sweep:
    """A sweep's designs and settings, ready to run."""

    tasks: tuple[Any, ...]  #: the designs (:class:`topo.pipeline.sweep_run.Task`)
    columns: tuple[str, ...]  #: the parameter columns (fields and options that a design sets)
    sizes: tuple[int, ...]
    fail_random: float
    trials: int
    definition: dict[str, Any] = field(default_factory=dict)  #: what was asked, for the JSON file

    @property
    def size_columns(self) -> tuple[str, ...]:
        return tuple(busbw_column(s) for s in self.sizes)

    @property
    def param_columns(self) -> tuple[str, ...]:
        """The columns of the swept fields: the field's name, or ``asked_NAME`` where a result column
        has that name (``asked_tiers``: what was asked; ``tiers``: what was built)."""
        return tuple(param_column(c) for c in self.columns)

    @property
    def all_columns(self) -> tuple[str, ...]:
        described = tuple(c for c in DESCRIPTIVE_COLUMNS if c not in self.columns)
        out = ("design", "key", *self.param_columns, *described, *RESULT_COLUMNS, *self.size_columns)
        return out + (TRIAL_COLUMNS if self.trials else ()) + ("error",)


def param_column(name: str) -> str:
    """The column of a swept field (``asked_tiers`` where ``tiers`` is a result column).

    >>> param_column("gpus"), param_column("tiers"), param_column("spines")
    ('gpus', 'asked_tiers', 'asked_spines')
    """
    return f"asked_{name}" if name in RESULT_COLUMNS else name


def busbw_column(size: int) -> str:
    """``busbw_GBps@8G``: the busbw column of a message size (binary units, as the CLI writes them).

    >>> busbw_column(8 << 30), busbw_column(1 << 20), busbw_column(3000)
    ('busbw_GBps@8G', 'busbw_GBps@1M', 'busbw_GBps@3000')
    """
    for unit, shift in (("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"busbw_GBps@{size >> shift}{unit}"
    return f"busbw_GBps@{size}"


# --- Pareto ---------------------------------------------------------------------------------------


def pareto(rows: Sequence[dict[str, Any]], x: str, y: str) -> list[int]:
    """Indices of the rows no other row beats: none has an ``x`` at most theirs (cost, power: less
    is better) and a ``y`` at least theirs (busbw, bisection: more is better), one of them strictly.
    Rows without both figures are left out; the front is in increasing ``x``.

    >>> pareto([{"c": 1, "b": 1}, {"c": 2, "b": 3}, {"c": 3, "b": 2}, {"c": 2, "b": 3}], "c", "b")
    [0, 1, 3]
    """
    points = [(float(r[x]), -float(r[y]), i) for i, r in enumerate(rows)
              if r.get(x) is not None and r.get(y) is not None and not r.get("error")]
    points.sort()
    front, best = [], -math.inf
    for px, ny, i in points:
        py = -ny
        if py > best:
            front.append(i)
            best = py
        elif py == best and front and float(rows[front[-1]][x]) == px:
            front.append(i)  # the same point twice: both are on the front
    return front


def objective(rows: Sequence[dict[str, Any]]) -> str:
    """The cost axis of a Pareto view, per GPU so that designs of different sizes compare:
    ``cost_per_gpu`` when every built design has a cost (a price list), else ``power_w_per_gpu``."""
    built = [r for r in rows if not r.get("error")]
    return "cost_per_gpu" if built and all(r.get("cost") is not None for r in built) else "power_w_per_gpu"


def ranked(rows: Sequence[dict[str, Any]], x: str, y: str) -> list[dict[str, Any]]:
    """The Pareto front of ``y`` against ``x``, cheapest first."""
    return [{"rank": rank, "design": rows[i]["design"], x: rows[i][x], y: rows[i][y]}
            for rank, i in enumerate(pareto(rows, x, y), 1)]
