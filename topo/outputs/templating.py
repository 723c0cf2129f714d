"""The Jinja2 environment every templated output is rendered with.

Templates are looked up by relative path, first in the user's folders (``--templates DIR``, in the
order given), then in the packaged templates (``topo.templates``: the top-level ``templates/``
folder of the source tree). Undefined variables are errors (``StrictUndefined``), and any mistake
in a template becomes a :class:`TemplateError` that names the template file, the line and what
went wrong. Renderers use :func:`template_environment` and :func:`render_template`; this module
knows nothing of the outputs themselves (``topo.outputs.build`` lists them).
"""

from __future__ import annotations

import json
from importlib import resources
from json.encoder import encode_basestring as _encode_string
from pathlib import Path
from typing import Any, Iterable

import jinja2

from ..errors import TopoError


class TemplateError(TopoError):
    """A template that fails to render: names the template, the line and what went wrong."""


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
    env.filters["json"] = json_value
    env.filters["size"] = format_size
    return env


def render_template(env: jinja2.Environment, template: str, context: dict[str, Any]) -> str:
    """Render one template; any template mistake becomes a TemplateError naming file and line."""
    try:
        return env.get_template(template).render(context)
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"template {exc.name} not found (included from {template})") from None
    except jinja2.TemplateError as exc:
        name, line = _template_location(exc)
        where = template_display_name(env, name or template) + (f", line {line}" if line else "")
        raise TemplateError(f"template {where}: {exc.message or exc}") from None


def _template_location(exc: BaseException) -> tuple[str | None, int | None]:
    """(template name, line) of the innermost template frame of a rendering error."""
    name = getattr(exc, "name", None) or getattr(exc, "filename", None)
    line = getattr(exc, "lineno", None)
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.endswith(".j2"):
            name, line = filename, tb.tb_lineno
        tb = tb.tb_next
    return name, line


def template_display_name(env: jinja2.Environment, filename: str) -> str:
    """A template's path as the user knows it: relative to its search folder when it is in one."""
    for folder in env.loader.searchpath:  # type: ignore[union-attr]
        try:
            return f"{Path(filename).resolve().relative_to(Path(folder).resolve())} (in {folder})"
        except ValueError:
            continue
    return filename


# --- filters --------------------------------------------------------------------------------------


def format_size(size: int) -> str:
    """Bytes as the largest whole binary unit: ``8 GiB``, ``256 MiB``, ``1.5 KiB``.

    >>> format_size(8 << 30), format_size(1536)
    ('8 GiB', '1.5 KiB')
    """
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def json_value(value: Any) -> str:
    """A value as a JSON string literal (numbers too: SONiC tables hold strings), fast."""
    if isinstance(value, str):
        return _encode_string(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f'"{value}"'
    return json.dumps(value)
