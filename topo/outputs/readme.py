"""The build folder's own README.md, and the list of every templated output of a build.

:func:`readme` renders ``README.md`` from ``summary.md.j2``: it describes the whole folder, so it is
rendered last (:func:`topo.pipeline.build.build_files`). :func:`all_outputs` lists every templated
output of a build, and :func:`template_sources` where each template is found (``topo templates``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import jinja2
import jinja2.meta

from .. import __version__
from ..fabric import ROLES, Fabric
from ..inputs import problem_kind
from .cabling import cabling_line
from .configs import CONFIG_OUTPUTS
from .design import spec_and_inputs
from .exports import EXPORT_OUTPUTS, FULL_DOT_MAX_LINKS
from .imex import IMEX_OUTPUTS
from .labels import LABEL_OUTPUTS
from .nccl import NCCL_OUTPUTS
from .placement import PLACEMENT_OUTPUTS
from .summary import power_line, racks_line
from .report import REPORT_OUTPUTS
from ..summary import Summary
from .templating import (TemplateError, packaged_template_dir, render_template, template_display_name,
                         template_environment)

if TYPE_CHECKING:
    from ..analysis.analyze import Analysis
    from ..caveats import Caveat
    from ..hardware.servers import ServerProfile
    from ..cabling import Cabling

#: The build folder's own templated output: (output path, template, rendered for).
README_OUTPUTS = (("README.md", "summary.md.j2", "the build"),)


def all_outputs() -> tuple[tuple[str, str, str], ...]:
    """Every templated output of a build: (output path, template, rendered for)."""
    return (README_OUTPUTS + REPORT_OUTPUTS + CONFIG_OUTPUTS
            + tuple((path, template, "the job scheduler and launcher") for path, template in PLACEMENT_OUTPUTS)
            + NCCL_OUTPUTS + IMEX_OUTPUTS + LABEL_OUTPUTS + EXPORT_OUTPUTS)


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
           report: Iterable[str] = ("report.html", "report.md"), rack: Iterable[str] = ()) -> str:
    """The build folder's README.md, from the template ``summary.md.j2``; ``report`` names the
    design review's files, ``rack`` the files of a rack-scale design (the IMEX node lists,
    :func:`topo.outputs.imex.imex_files`, and the node labels, :mod:`topo.outputs.labels`)."""
    env = template_environment(user_dirs)
    context = {
        "version": __version__,
        "spec": spec_and_inputs(fabric, base_dir)[0],
        "plan": fabric.plan.to_dict(),
        "summary": summary.to_dict(),
        "roles": ROLES,
        "analysis": analysis.to_dict() if analysis is not None else None,
        "configs": configs and fabric.ethernet,
        "switch_count": len(fabric.names) - fabric.plan.nodes,
        "cabling": cabling.to_dict() if cabling is not None else None,
        "cabling_line": cabling_line(cabling).removeprefix("cabling: ") if cabling is not None else None,
        "racks_line": racks_line(summary.rack).removeprefix("racks: ") if summary.rack else None,
        "power_line": power_line(summary.power).removeprefix("power: ") if summary.power else None,
        "server": server.name if server is not None else None,
        "full_dot": len(fabric.links) <= FULL_DOT_MAX_LINKS,
        "warnings": [w.to_dict() for w in warnings or ()],
        "report_files": list(report),
        "imex_files": sorted(f for f in rack if f.startswith("imex/")),
        "label_files": sorted(f for f in rack if f.startswith("kubernetes/")),
    }
    return render_template(env, "summary.md.j2", context)
