"""``topo analyze``: a design's fabric built and analysed (hops, bisection, ECMP width, all-reduce).

:func:`analyze` loads the design (a DESIGN folder, checked against its ``design.json`` unless spec
fields override it, or a spec file and fields: :mod:`topo.pipeline.design`), checks the memory and
time the analysis would take before anything is built, builds the fabric and runs
:func:`topo.analysis.analyze.analyze` on it. Its warnings are those of the build that qualify the
analysis (:func:`topo.outputs.caveats.analysis_caveats`, the same function the build's list comes
from): a DESIGN folder analysed with the default options has those its ``summary.json`` lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .design import check_unchanged, design_spec_file, server_base, spec_from
from .progress import SILENT, Progress

if TYPE_CHECKING:
    from ..analysis.analyze import Analysis, AnalysisOptions
    from ..caveats import Caveat


@dataclass(frozen=True)
class AnalyzeResult:
    """What :func:`analyze` made: the analysis and the warnings that qualify its figures."""

    analysis: "Analysis"
    warnings: "list[Caveat]"

    def to_dict(self) -> dict[str, Any]:
        """The analysis' data, its ``warnings`` these (as ``topo build --format json`` lists its own)."""
        data = self.analysis.to_dict()
        data["warnings"] = [w.to_dict() for w in self.warnings]
        return data


def analyze(design: Path | None = None, spec_file: Path | None = None, fields: dict[str, Any] | None = None,
            options: "AnalysisOptions | None" = None, progress: Progress = SILENT) -> AnalyzeResult:
    """The analysis of a design: the DESIGN folder ``design`` or the spec file ``spec_file`` (not
    both), with the spec ``fields`` over it (None for a field not given), under ``options``; and
    its warnings."""
    from ..addressing import check_addressing
    from ..analysis.analyze import AnalysisOptions, check_analysis_work
    from ..analysis.analyze import analyze as analyses
    from ..fabric import build_fabric
    from ..hardware.catalog import resolve_server
    from ..outputs.caveats import analysis_caveats
    from ..sizing import plan_fabric

    fields = dict(fields or {})
    options = options if options is not None else AnalysisOptions()
    spec_file = design_spec_file(design, spec_file)
    overridden = any(value is not None for value in fields.values())
    spec = spec_from(spec_file, fields, progress)
    options.check()
    plan = plan_fabric(spec)
    check_addressing(spec, plan)
    # a server profile path is relative to the spec file (or design folder) when it names it
    node = resolve_server(spec, server_base(spec_file, fields)).node_model()
    check_analysis_work(spec, plan, options, node)  # memory and time, before anything is built
    with progress.stage(f"building {spec.gpus:,} GPUs"):
        fabric = build_fabric(spec)
    if design is not None and not overridden:
        check_unchanged(design, fabric, spec_file)
    with progress.stage("analysing"):
        analysis = analyses(fabric, options, node=node)
    return AnalyzeResult(analysis, analysis_caveats(fabric, analysis))
