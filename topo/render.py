"""Renderers: from a fabric and its results to ``{relative path: text}``. Only the CLI writes files.

Text formats for people and tools come from Jinja2 templates (packaged in ``topo.templates``, which
is the top-level ``templates/`` folder of the source tree; a user folder may override any of them).
Bulk data (the link table) is serialised in Python, where a template would only loop.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import jinja2
import yaml

from . import __version__
from .fabric import LINK_KINDS, ROLES, Fabric
from .summary import Summary

if TYPE_CHECKING:
    from .analyze import Analysis


def packaged_template_dir() -> Path:
    """Where the packaged templates are on this installation."""
    return Path(str(resources.files("topo.templates")))


def template_environment(user_dirs: Iterable[str | Path] = ()) -> jinja2.Environment:
    """A Jinja2 environment that looks in ``user_dirs`` first, then in the packaged templates.

    Undefined variables are errors (``StrictUndefined``); blocks do not leave blank lines.
    """
    search = [str(Path(d)) for d in user_dirs] + [str(packaged_template_dir())]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["thousands"] = lambda value: f"{value:,}"
    return env


def dump_json(data: Any) -> str:
    """Deterministic, readable JSON (2-space indent, key order as built, trailing newline)."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def design_devices(fabric: Fabric) -> list[dict[str, Any]]:
    """Every server and switch with its graph attributes, in index order."""
    nodes = fabric.graph.nodes
    return [{"name": name, **nodes[name]} for name in fabric.names]


def design_json(fabric: Fabric) -> str:
    """The resolved design: spec, sizing, devices and every link with both ends' ports.

    One device or link per line, so the file diffs well and stays fast to write at 100,000+ GPUs.
    ``a`` is a link's lower-tier end; ``a_port`` is a NIC index (from 0) on a server and a port
    number (from 1) on a switch; ``lane`` is the breakout lane of the leaf port on node-leaf links.
    """
    links = fabric.links
    names = fabric.names
    head = {
        "topo_version": __version__,
        "spec": fabric.spec.to_dict(),
        "plan": fabric.plan.to_dict(),
    }
    lines = [dump_json(head).rstrip("\n")[:-2] + ","]  # reopen the object to append the tables
    lines.append('  "devices": [')
    devices = [json.dumps(device, separators=(", ", ": ")) for device in design_devices(fabric)]
    lines.append(",\n".join("    " + d for d in devices))
    lines.append("  ],")
    lines.append('  "links": [')
    kinds = [LINK_KINDS[k] for k in range(len(LINK_KINDS))]
    rows = zip(
        links.kind.tolist(), links.gbps.tolist(), links.lo.tolist(), links.lo_port.tolist(),
        links.hi.tolist(), links.hi_port.tolist(), links.lane.tolist(),
    )
    # names are validated host-name-safe strings, so they need no JSON escaping
    link_lines = [
        f'    {{"kind": "{kinds[k]}", "gbps": {g}, "a": "{names[a]}", "a_port": {ap}, '
        f'"b": "{names[b]}", "b_port": {bp}' + (f', "lane": {ln}}}' if k == 0 else "}")
        for k, g, a, ap, b, bp, ln in rows
    ]
    lines.append(",\n".join(link_lines))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_build(fabric: Fabric, summary: Summary, analysis: "Analysis | None" = None,
                 user_dirs: Iterable[str | Path] = ()) -> dict[str, str]:
    """Every file of a build folder, by relative path (``analysis.json`` when an analysis is given)."""
    env = template_environment(user_dirs)
    context = {
        "version": __version__,
        "spec": fabric.spec.to_dict(),
        "plan": fabric.plan.to_dict(),
        "summary": summary.to_dict(),
        "roles": ROLES,
        "analysis": analysis.to_dict() if analysis is not None else None,
    }
    files = {
        "spec.yaml": yaml.safe_dump(fabric.spec.to_dict(), sort_keys=False),
        "design.json": design_json(fabric),
        "summary.json": dump_json(summary.to_dict()),
        "README.md": env.get_template("summary.md.j2").render(context),
    }
    if analysis is not None:
        files["analysis.json"] = dump_json(context["analysis"])
    return files
