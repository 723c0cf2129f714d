"""The file set of a build folder: every renderer in turn, as ``(relative path, text)`` pairs.

This module only orchestrates: the design files (:mod:`topo.outputs.design`), rank placement,
NCCL, cabling, graph exports and switch configs come from their own modules, which never import
this one. Only the CLI writes the files (:mod:`topo.outputs.writer`). The build folder's
``README.md`` is rendered here, from ``summary.md.j2``, because it describes the whole folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import jinja2
import jinja2.meta

from .. import __version__
from ..inputs import problem_kind
from ..caveats import Caveat
from .caveats import caveats
from ..fabric import ROLES, Fabric, is_ethernet
from ..servers import resolve_server
from ..cabling import plan_cabling
from .cabling import cabling_files, cabling_line
from .configs import CONFIG_OUTPUTS, ConfigJob, config_files
from .design import core_files, spec_and_inputs
from .exports import EXPORT_OUTPUTS, FULL_DOT_MAX_LINKS, export_files
from .manifest import with_manifest
from .nccl import NCCL_OUTPUTS, nccl_files
from .placement import PLACEMENT_OUTPUTS, placement_files
from .report import REPORT_OUTPUTS, Review, report_files, review
from ..summary import Summary
from .templating import (TemplateError, packaged_template_dir, render_template, template_display_name,
                         template_environment)

if TYPE_CHECKING:
    from ..analysis.analyze import Analysis
    from ..servers import ServerProfile
    from ..cabling import Cabling

#: The build folder's own templated output: (output path, template, rendered for).
README_OUTPUTS = (("README.md", "summary.md.j2", "the build"),)


def all_outputs() -> tuple[tuple[str, str, str], ...]:
    """Every templated output of a build: (output path, template, rendered for)."""
    return (README_OUTPUTS + REPORT_OUTPUTS + CONFIG_OUTPUTS
            + tuple((path, template, "the job scheduler and launcher") for path, template in PLACEMENT_OUTPUTS)
            + NCCL_OUTPUTS + EXPORT_OUTPUTS)


def template_sources(user_dirs: Iterable[str | Path] = ()) -> list[dict[str, Any]]:
    """For every output: its template, the templates that one includes, and where each is found."""
    env = template_environment(user_dirs)
    rows: list[dict[str, Any]] = []
    try:
        _collect_sources(env, rows)
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"template {exc.name} not found") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template {template_display_name(env, exc.filename or exc.name or '?')}, "
                            f"line {exc.lineno}: {problem_kind(str(exc.message), names=True)}") from None
    return rows


def _collect_sources(env: jinja2.Environment, rows: list[dict[str, Any]]) -> None:
    packaged = str(packaged_template_dir())
    for output, template, scope in all_outputs():
        names = [template]
        seen: set[str] = set()
        while names:
            name = names.pop(0)
            if name in seen:
                continue
            seen.add(name)
            source, filename, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
            rows.append({"output": output, "for": scope, "template": name, "file": filename,
                         "from": "user" if not filename.startswith(packaged) else "package"})
            parsed = env.parse(source, name, filename)
            names += [n for n in jinja2.meta.find_referenced_templates(parsed) if n]


def readme(fabric: Fabric, summary: Summary, analysis: "Analysis | None" = None,
           user_dirs: Iterable[str | Path] = (), configs: bool = True,
           cabling: "Cabling | None" = None, server: "ServerProfile | None" = None,
           base_dir: str | Path | None = None, warnings: "list[Caveat] | None" = None,
           report: Iterable[str] = ("report.html", "report.md")) -> str:
    """The build folder's README.md, from the template ``summary.md.j2``; ``report`` names the
    design review's files."""
    env = template_environment(user_dirs)
    context = {
        "version": __version__,
        "spec": spec_and_inputs(fabric, base_dir)[0],
        "plan": fabric.plan.to_dict(),
        "summary": summary.to_dict(),
        "roles": ROLES,
        "analysis": analysis.to_dict() if analysis is not None else None,
        "configs": configs and is_ethernet(fabric),
        "switch_count": len(fabric.names) - fabric.plan.nodes,
        "cabling": cabling.to_dict() if cabling is not None else None,
        "cabling_line": cabling_line(cabling).removeprefix("cabling: ") if cabling is not None else None,
        "server": server.name if server is not None else None,
        "full_dot": len(fabric.links) <= FULL_DOT_MAX_LINKS,
        "warnings": [w.to_dict() for w in warnings or ()],
        "report_files": list(report),
    }
    return render_template(env, "summary.md.j2", context)


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
    configs = configs and is_ethernet(fabric)
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
    yield from placement_files(fabric, env).items()
    yield from nccl_files(fabric, server, analysis, env, base_dir=base_dir).items()
    yield from cabling_files(fabric, cabling).items()
    yield from export_files(fabric, configs=configs, user_dirs=user_dirs).items()
    report = report_files([reviewed], user_dirs, in_build=True)
    yield from report.items()
    if configs and config_job is not None:
        yield from config_job.files(progress)
    elif configs:
        yield from config_files(fabric, user_dirs, workers=workers, progress=progress, sink=sink)
    yield "README.md", readme(fabric, summary, analysis, user_dirs, configs, cabling, server, base_dir, warnings,
                              report)


def render_build(fabric: Fabric, summary: Summary, analysis: "Analysis | None" = None,
                 user_dirs: Iterable[str | Path] = (), configs: bool = True,
                 base_dir: str | Path | None = None) -> dict[str, str]:
    """Every file of a build folder, by relative path, in memory (the CLI streams them instead)."""
    return dict(build_files(fabric, summary, analysis, user_dirs, configs, base_dir))
