"""``topo report``: the design review of one design, or several side by side, written to a folder.

:func:`report` loads each design (a build folder, checked against its ``design.json``, or a spec
file), builds, analyses and reviews it (its what-ifs in a child process,
:func:`topo.pipeline.apart.run_apart`), reads the results of ``topo sweep`` and ``topo train -o``
it is given (:func:`read_sweep_json`, :func:`read_train_json`), and writes ``report.html`` and
``report.md`` (:func:`topo.outputs.report.report_files`) into an atomic folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import AnalysisError
from .design import build_inputs, check_unchanged, spec_from
from .progress import SILENT, Progress

if TYPE_CHECKING:
    from ..outputs.report import Review
    from ..spec import FabricSpec


@dataclass
class ReportResult:
    """What :func:`report` made: a review per design, and the folder written."""

    reviews: list["Review"]
    folder: Path
    files: int


def report(designs: Sequence[Path], output: Path | None = None, force: bool = False, discard_edits: bool = False,
           sweep_path: Path | None = None, train_path: Path | None = None, templates: tuple[Path, ...] = (),
           progress: Progress = SILENT) -> ReportResult:
    """The review of each of ``designs`` (build folders or spec files; the first is the reference
    of a comparison), with the sweep at ``sweep_path`` and the training result at ``train_path``,
    written to ``output`` (default ``LABEL-report``, or ``A-vs-B-report``)."""
    from ..addressing import check_addressing
    from ..outputs.manifest import with_manifest
    from ..outputs.report import report_files
    from ..outputs.writer import OutputFolder
    from ..sizing import plan_fabric

    designs = list(designs)
    labels = report_labels(designs)
    spec_files = [d / "spec.yaml" if d.is_dir() else d for d in designs]
    for design, spec_file in zip(designs, spec_files):
        if design.is_dir() and not spec_file.is_file():
            raise AnalysisError([f"{design} is not a design folder written by topo build: no spec.yaml"])
    out = output or Path(("-vs-".join(labels) if len(labels) > 1 else labels[0]) + "-report")
    specs = [spec_from(f, {}, progress) for f in spec_files]
    sweep = read_sweep_json(sweep_path) if sweep_path is not None else None
    train = read_train_json(train_path) if train_path is not None else None
    inputs = [*templates, *(p for p in (sweep_path, train_path) if p is not None)]
    for spec, spec_file in zip(specs, spec_files):
        inputs += build_inputs(spec, spec_file, spec_file.parent, {}, ())
    folder = OutputFolder(out, force, inputs, "report", discard_edits)
    for spec in specs:
        check_addressing(spec, plan_fabric(spec))
    with folder:
        reviews = [_review(design, spec_file, spec, label, progress)
                   for design, spec_file, spec, label in zip(designs, spec_files, specs, labels)]
        with progress.stage(f"writing {out}/"):
            count = folder.write(with_manifest(report_files(reviews, templates, in_build=False,
                                                            sweep=sweep, train=train).items(), "report"))
    progress.say(f"wrote {count:,} files")
    return ReportResult(reviews, out, count)


def _review(design: Path, spec_file: Path, spec: "FabricSpec", label: str, progress: Progress) -> "Review":
    """One design built, checked against its folder, analysed and reviewed."""
    from ..analysis.analyze import analyze, what_if_parts
    from ..fabric import build_fabric
    from ..cabling import plan_cabling
    from ..outputs.caveats import caveats
    from ..outputs.report import review
    from ..summary import summarize
    from ..hardware.catalog import resolve_server
    from .apart import run_apart

    with progress.stage(f"{label}: building and analysing {spec.gpus:,} GPUs"):
        fabric = build_fabric(spec)
        if design.is_dir():
            check_unchanged(design, fabric, spec_file)
        server = resolve_server(spec, spec_file.parent)
        analysis = analyze(fabric, node=server.node_model())
        cabling = plan_cabling(fabric)
        summary = summarize(fabric, cabling, server)
        warnings = caveats(fabric, analysis, cabling, server)
    parts = what_if_parts(fabric)
    with progress.stage(f"{label}: what-ifs"):
        return review(fabric, summary, cabling, analysis, warnings, server, label=label,
                      base_dir=spec_file.parent, source=str(design), apart=run_apart,
                      progress=progress.counter(f"{parts} parts failed one at a time", parts))


def _read_result(file: Path, flag: str, what: str) -> Any:
    """The JSON of a result topo wrote, read back as ``flag`` gives it: a regular file of at most
    1 GiB (never a FIFO that blocks, nor /dev/zero), nested however deep; one error line, never
    the file's text."""
    from ..inputs import MAX_RESULT_BYTES, InputFileError, parse_json, read_text, shown_path

    try:
        text = read_text(file, MAX_RESULT_BYTES)
    except InputFileError as exc:
        raise AnalysisError([f"{flag} {exc}"]) from None
    try:
        return parse_json(text, shown_path(file))
    except ValueError as exc:
        raise AnalysisError([f"{flag} {exc}; not {what}"]) from None


def read_sweep_json(path: Path) -> dict[str, Any]:
    """``sweep.json`` of a folder written by ``topo sweep`` (the folder or the file), checked."""
    from ..inputs import shown_path

    data = _read_result(path / "sweep.json" if path.is_dir() else path, "--sweep", "a sweep written by topo sweep")
    if not isinstance(data, dict) or not {"rows", "pareto", "columns"} <= set(data):
        raise AnalysisError([f"--sweep {shown_path(path)}: not a sweep.json written by topo sweep (no rows, pareto "
                             f"and columns)"])
    return data


def read_train_json(path: Path) -> dict[str, Any]:
    """The JSON that ``topo train -o`` wrote, checked."""
    from ..inputs import shown_path
    from .train import result_problems

    data = _read_result(path, "--train", "a result written by topo train -o")
    problems = result_problems(data)
    if problems:
        raise AnalysisError([f"--train {shown_path(path)}: not a result written by topo train -o ({problems[0]}"
                             + (f", and {len(problems) - 1} more" if len(problems) > 1 else "") + ")"])
    return data


def report_labels(designs: Sequence[Path]) -> list[str]:
    """A short distinct label per design: its folder name or spec file's stem."""
    labels: list[str] = []
    for design in designs:
        base = (design.resolve().name if design.is_dir() else design.stem) or "design"
        label, n = base, 2
        while label in labels:
            label, n = f"{base}-{n}", n + 1
        labels.append(label)
    return labels
