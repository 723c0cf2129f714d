"""``topo build``: spec -> fabric -> analysis -> files -> folder, and the file set of a build folder.

:func:`build` is the command's run of the stages: the spec checked, the fabric built, analysed
(unless asked not to), cabled and summed up, the design review's what-ifs run in a child process
(:mod:`topo.pipeline.apart`), and every file written into an atomic folder
(:class:`~topo.outputs.writer.OutputFolder`). :func:`build_files` is the folder's file set: every
renderer in turn (the design files, rank placement, NCCL, cabling, graph exports, switch configs,
the design review and the folder's ``README.md``), as ``(relative path, text)`` pairs, the build
stamp last (:mod:`topo.outputs.manifest`).
"""

from __future__ import annotations

import os
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from ..caveats import Caveat
from ..fabric import Fabric
from ..cabling import plan_cabling
from ..outputs.cabling import cabling_files
from ..outputs.caveats import caveats
from ..outputs.configs import ConfigJob, config_files
from ..outputs.design import core_files
from ..outputs.exports import export_files
from ..outputs.manifest import with_manifest
from ..outputs.nccl import nccl_files
from ..outputs.imex import imex_files
from ..outputs.labels import node_label_files
from ..outputs.placement import placement_files
from ..outputs.readme import readme
from ..outputs.report import Review, report_files, review
from ..summary import Summary, summarize
from ..outputs.templating import template_environment
from ..hardware.catalog import resolve_server
from .progress import SILENT, Progress

if TYPE_CHECKING:
    from ..analysis.analyze import Analysis
    from ..cabling import Cabling
    from ..hardware.servers import ServerProfile


@dataclass
class BuildResult:
    """What :func:`build` made: the design's facts, its warnings and the folder written."""

    fabric: Fabric
    summary: Summary
    cabling: "Cabling"
    analysis: "Analysis | None"
    warnings: list[Caveat]
    folder: Path  #: the folder written
    files: int  #: files written into it


def build(spec_file: Path | None = None, fields: dict[str, Any] | None = None, output: Path | None = None,
          force: bool = False, discard_edits: bool = False, analysis: bool = True, configs: bool = True,
          jobs: int | None = None, templates: tuple[Path, ...] = (), progress: Progress = SILENT) -> BuildResult:
    """``topo build``: the spec of ``spec_file`` with ``fields`` over it, checked, built, analysed
    (unless ``analysis`` is false), cabled and summed up, its design review and every file of its
    folder written atomically to ``output`` (default ``NAME-GPUSgpus``; ``force`` replaces a folder
    topo wrote, ``discard_edits`` one whose files were edited since). ``configs`` false leaves out
    the switch configs, which ``jobs`` processes render (default: one per CPU)."""
    from ..addressing import check_addressing
    from ..fabric import check_memory
    from ..outputs.writer import OutputFolder
    from ..sizing import plan_fabric
    from .design import build_inputs, server_base, spec_from

    fields = dict(fields or {})
    base_dir = server_base(spec_file, fields)
    spec = spec_from(spec_file, fields, progress)
    out = output or Path(f"{spec.name}-{spec.gpus}gpus")
    folder = OutputFolder(out, force, build_inputs(spec, spec_file, base_dir, fields, templates), "build",
                          discard_edits)
    plan = plan_fabric(spec)
    check_addressing(spec, plan)  # refuse an impossible spec before any work
    check_memory(spec, plan)
    server = resolve_server(spec, base_dir)
    with folder, ExitStack() as stack:
        result = _build_into(folder, out, stack, spec, server, base_dir, analysis, configs, jobs, templates, progress)
    progress.say(f"wrote {result.files:,} files")
    return result


def _build_into(folder: Any, out: Path, stack: ExitStack, spec: Any, server: "ServerProfile", base_dir: Path | None,
                analyse: bool, configs: bool, jobs: int | None, templates: tuple[Path, ...],
                progress: Progress) -> BuildResult:
    """The build's stages, inside its open output folder: fabric, analysis, facts, files."""
    from ..fabric import build_fabric

    with progress.stage(f"building {spec.gpus:,} GPUs"):
        fabric = build_fabric(spec)
    with_configs = configs and fabric.ethernet
    workers = jobs or os.cpu_count() or 1
    # the switch configs are rendered and written by worker processes from now on, while this one
    # analyses and writes the rest; leaving the block (an error too) stops them before the folder
    # is tidied away
    job = stack.enter_context(ConfigJob(fabric, templates, workers, folder.tmp, folder.shown)) \
        if with_configs else None
    analysis, parts = _analyse(fabric, server, progress) if analyse else (None, 0)
    cabling = plan_cabling(fabric)  # after the analysis: its arrays need not live through it
    summary = summarize(fabric, cabling, server)
    switches = len(fabric.names) - fabric.plan.nodes
    warnings = caveats(fabric, analysis, cabling, server, configs=configs)
    with progress.stage("what-ifs for the design review") if parts else nullcontext():
        from .apart import run_apart

        reviewed = review(fabric, summary, cabling, analysis, warnings, server, base_dir=base_dir, apart=run_apart,
                          progress=progress.counter(f"{parts} parts failed one at a time", parts)
                          if parts else None)
    files = build_files(
        fabric, summary, analysis, templates, with_configs, base_dir, cabling, server,
        progress=progress.counter(f"configs of {switches:,} switches", switches) if with_configs else None,
        workers=workers, warnings=warnings, reviewed=reviewed, sink=folder.tmp, config_job=job)
    with progress.stage(f"writing {out}/"):
        count = folder.write(files)
    return BuildResult(fabric, summary, cabling, analysis, warnings, out, count)


def _analyse(fabric: Fabric, server: "ServerProfile", progress: Progress) -> tuple["Analysis", int]:
    """The build's analysis, and how many parts its design review's what-ifs fail."""
    from ..analysis.analyze import analyze, what_if_parts  # only now: a build without analysis never loads it

    with progress.stage("analysing"):
        analysis = analyze(fabric, node=server.node_model())
    return analysis, what_if_parts(fabric)


def build_files(fabric: Fabric, summary: Summary, analysis: "Analysis | None" = None,
                user_dirs: Iterable[str | Path] = (), configs: bool = True,
                base_dir: str | Path | None = None, cabling: "Cabling | None" = None,
                server: "ServerProfile | None" = None,
                progress: Callable[[int], None] | None = None, workers: int = 1,
                warnings: "list[Caveat] | None" = None, reviewed: Review | None = None,
                sink: str | Path | None = None, config_job: ConfigJob | None = None) -> Iterator[tuple[str, Any]]:
    """Every file of a build folder as ``(path, text)``, made one after the other; the last is the
    build stamp (:mod:`topo.outputs.manifest`) that lists the others.

    ``reviewed`` is the design review (:func:`topo.outputs.report.review`) of the report files,
    made here when not given (its what-ifs re-run the all-reduce for each part they fail).

    ``configs`` false (or an InfiniBand switch model) leaves out the switch and host configs and the
    containerlab lab. ``progress(switches_done)`` follows the switch configs, the longest part,
    which ``workers`` processes render (the bytes do not depend on it). With ``sink`` (the
    temporary folder of the :class:`~topo.outputs.writer.OutputFolder` the files go to) those
    processes write the switch configs themselves (see :func:`topo.outputs.configs.config_files`).
    ``config_job`` is a :class:`~topo.outputs.configs.ConfigJob` of this fabric and these templates
    started earlier (by ``topo build``, right after the fabric is built), whose files are taken
    instead of rendering them here.
    """
    user_dirs = tuple(user_dirs)
    configs = configs and fabric.ethernet
    cabling = cabling if cabling is not None else plan_cabling(fabric)
    server = server if server is not None else resolve_server(fabric.spec, base_dir)
    if warnings is None:
        warnings = caveats(fabric, analysis, cabling, server, configs)
    if reviewed is None:
        reviewed = review(fabric, summary, cabling, analysis, warnings, server, base_dir=base_dir)
    yield from with_manifest(_files(fabric, summary, analysis, user_dirs, configs, base_dir, cabling, server,
                                    progress, workers, warnings, reviewed, sink, config_job))


def _files(fabric: Fabric, summary: Summary, analysis: "Analysis | None", user_dirs: tuple,
           configs: bool, base_dir: str | Path | None, cabling: "Cabling", server: "ServerProfile",
           progress: Callable[[int], None] | None, workers: int,
           warnings: "list[Caveat]", reviewed: Review, sink: str | Path | None,
           config_job: ConfigJob | None) -> Iterator[tuple[str, Any]]:
    env = template_environment(user_dirs)
    yield from core_files(fabric, summary, analysis, cabling, base_dir, warnings).items()
    yield from placement_files(fabric, env, server).items()
    yield from nccl_files(fabric, server, analysis, env, base_dir=base_dir).items()
    imex = imex_files(fabric, server, env)
    yield from imex.items()
    labels = node_label_files(fabric, server, env)
    yield from labels.items()
    yield from cabling_files(fabric, cabling).items()
    yield from export_files(fabric, configs=configs, user_dirs=user_dirs).items()
    report = report_files([reviewed], user_dirs, in_build=True)
    yield from report.items()
    if configs and config_job is not None:
        yield from config_job.files(progress)
    elif configs:
        yield from config_files(fabric, user_dirs, workers=workers, progress=progress, sink=sink)
    yield "README.md", readme(fabric, summary, analysis, user_dirs, configs, cabling, server, base_dir, warnings,
                              report, [*imex, *labels])


def render_build(fabric: Fabric, summary: Summary, analysis: "Analysis | None" = None,
                 user_dirs: Iterable[str | Path] = (), configs: bool = True,
                 base_dir: str | Path | None = None) -> dict[str, str]:
    """Every file of a build folder, by relative path, in memory (the CLI streams them instead)."""
    return dict(build_files(fabric, summary, analysis, user_dirs, configs, base_dir))
