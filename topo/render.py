"""Renderers: from a fabric and its results to ``{relative path: text}``. Only the CLI writes files.

Text formats for people and tools come from Jinja2 templates (packaged in ``topo.templates``, which
is the top-level ``templates/`` folder of the source tree; a user folder may override any of them).
Bulk data (the link table) is serialised in Python, where a template would only loop.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
import multiprocessing
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import jinja2
import jinja2.meta
from json.encoder import encode_basestring as _encode_string
import yaml

from . import __version__
from .errors import TopoError
from .fabric import LINK_KINDS, ROLES, Fabric
from .spec import HOSTNAMES_CSV
from .summary import Summary

if TYPE_CHECKING:
    from .analyze import Analysis
    from .cabling import Cabling
    from .servers import ServerProfile


class TemplateError(TopoError):
    """A template that fails to render: names the template, the line and what went wrong."""


#: Every templated output of the core build and the configs: (output path, template, rendered for).
OUTPUTS = (
    ("README.md", "summary.md.j2", "the build"),
    ("switches/<switch>/config_db.json", "sonic/config_db.json.j2", "each Ethernet switch"),
    ("switches/<switch>/frr.conf", "frr/frr.conf.j2", "each Ethernet switch"),
    ("hosts/roce-qos.sh", "host/roce-qos.sh.j2", "the node type"),
)


def all_outputs() -> tuple[tuple[str, str, str], ...]:
    """Every templated output of a build, the other modules' included."""
    from .exports import EXPORT_OUTPUTS
    from .placement import PLACEMENT_OUTPUTS

    return (OUTPUTS + tuple((path, template, "the job scheduler and launcher")
                            for path, template in PLACEMENT_OUTPUTS)
            + (("nccl/<server>.env", "nccl/nccl.env.j2", "the server type"),) + EXPORT_OUTPUTS)


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


def render_template(env: jinja2.Environment, template: str, context: dict[str, Any]) -> str:
    """Render one template; any template mistake becomes a TemplateError naming file and line."""
    try:
        return env.get_template(template).render(context)
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"template {exc.name} not found (included from {template})") from None
    except jinja2.TemplateError as exc:
        name, line = _template_location(exc)
        where = _short(env, name or template) + (f", line {line}" if line else "")
        raise TemplateError(f"template {where}: {exc.message or exc}") from None


def _short(env: jinja2.Environment, filename: str) -> str:
    """A template's path as the user knows it: relative to its search folder when it is in one."""
    for folder in env.loader.searchpath:  # type: ignore[union-attr]
        try:
            return f"{Path(filename).resolve().relative_to(Path(folder).resolve())} (in {folder})"
        except ValueError:
            continue
    return filename


def template_sources(user_dirs: Iterable[str | Path] = ()) -> list[dict[str, Any]]:
    """For every output: its template, the templates that one includes, and where each is found."""
    env = template_environment(user_dirs)
    rows = []
    try:
        _collect_sources(env, rows)
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"template {exc.name} not found") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template {_short(env, exc.filename or exc.name or '?')}, line {exc.lineno}: "
                            f"{exc.message}") from None
    return rows


def _collect_sources(env: jinja2.Environment, rows: list[dict[str, Any]]) -> None:
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
                         "from": "user" if not filename.startswith(str(packaged_template_dir())) else "package"})
            parsed = env.parse(source, name, filename)
            names += [n for n in jinja2.meta.find_referenced_templates(parsed) if n]


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


def config_files(fabric: Fabric, user_dirs: Iterable[str | Path] = (), workers: int = 1,
                 progress: Callable[[int], None] | None = None) -> Iterator[tuple[str, str]]:
    """SONiC config_db.json and FRR frr.conf of every switch, then the servers' QoS script and
    address table, as ``(path, text)`` pairs made one switch at a time (memory stays flat).

    Nothing for an InfiniBand switch model. With ``workers`` > 1 the switches are rendered by that
    many processes (where the platform can fork), in the same order and with the same bytes.
    ``progress(switches_done)`` is called as switches are finished.
    """
    from .configs import host_addresses_csv, is_ethernet, rdma_device

    if not is_ethernet(fabric):
        return
    switches = list(range(fabric.first(1), len(fabric.names)))
    chunks = [switches[i:i + CONFIG_CHUNK] for i in range(0, len(switches), CONFIG_CHUNK)]
    done = 0
    if workers > 1 and len(chunks) > 1 and "fork" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("fork")
        with context.Pool(workers, initializer=_init_worker, initargs=(fabric, tuple(user_dirs))) as pool:
            for files in pool.imap(_render_chunk, chunks):
                yield from files
                done += len(files) // 2
                if progress:
                    progress(done)
    else:
        _init_worker(fabric, tuple(user_dirs))
        for chunk in chunks:
            files = _render_chunk(chunk)
            yield from files
            done += len(chunk)
            if progress:
                progress(done)
    env, facts, shared = _WORKER["env"], _WORKER["facts"], _WORKER["shared"]
    if facts is None:
        _init_worker(fabric, tuple(user_dirs))
        env, shared = _WORKER["env"], _WORKER["shared"]
    spec = fabric.spec
    node = {"gpus": spec.gpus_per_node, "nics": spec.nics_per_node,
            "rdma_devices": [rdma_device(i) for i in range(spec.nics_per_node)]}
    yield "hosts/roce-qos.sh", render_template(env, "host/roce-qos.sh.j2",
                                               {"fabric": shared, "node": node, "version": __version__})
    yield "hosts/addresses.csv", host_addresses_csv(fabric)


#: Switches rendered per task (one worker task, one progress step).
CONFIG_CHUNK = 32
_WORKER: dict[str, Any] = {"env": None, "facts": None, "shared": None}


def _init_worker(fabric: Fabric, user_dirs: tuple) -> None:
    from .configs import ConfigFacts

    facts = ConfigFacts(fabric)
    shared = facts.shared()
    shared["name"] = fabric.spec.name
    _WORKER.update(env=template_environment(user_dirs), facts=facts, shared=shared)


def _render_chunk(switches: list[int]) -> list[tuple[str, str]]:
    env, facts, shared = _WORKER["env"], _WORKER["facts"], _WORKER["shared"]
    out = []
    for v in switches:
        sw = facts.switch(v)
        context = {"sw": sw, "fabric": shared, "version": __version__}
        text = render_template(env, "sonic/config_db.json.j2", context)
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise TemplateError(
                f"template sonic/config_db.json.j2 made invalid JSON for {sw['name']}: {exc.msg} at "
                f"line {exc.lineno}, column {exc.colno}") from None
        out.append((f"switches/{sw['name']}/config_db.json", text))
        out.append((f"switches/{sw['name']}/frr.conf", render_template(env, "frr/frr.conf.j2", context)))
    return out


def dump_json(data: Any) -> str:
    """Deterministic, readable JSON (2-space indent, key order as built, trailing newline)."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def design_devices(fabric: Fabric) -> list[dict[str, Any]]:
    """Every server and switch with its graph attributes, in index order."""
    nodes = fabric.graph.nodes
    return [{"name": name, **nodes[name]} for name in fabric.names]


def design_json(fabric: Fabric, spec: dict[str, Any] | None = None) -> str:
    """The resolved design: spec, sizing, devices and every link with both ends' ports.

    One device or link per line, so the file diffs well and stays fast to write at 100,000+ GPUs.
    ``a`` is a link's lower-tier end; ``a_port`` is a NIC index (from 0) on a server and a port
    number (from 1) on a switch; ``lane`` is the breakout lane of the leaf port on node-leaf links.
    """
    links = fabric.links
    names = fabric.names
    head = {
        "topo_version": __version__,
        "spec": spec if spec is not None else fabric.spec.to_dict(),
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


#: Folder of a build that holds copies of the inputs the spec names by path (a server profile).
INPUTS = "inputs"


def _server_file(fabric: Fabric, base_dir: str | Path | None) -> Path | None:
    """The user's server profile file, when the spec names one (not a shipped profile)."""
    from .servers import server_profiles

    name = fabric.spec.server
    if name is None or name in server_profiles():
        return None
    path = Path(name)
    return path if path.is_absolute() or base_dir is None else Path(base_dir) / path


def spec_and_inputs(fabric: Fabric, base_dir: str | Path | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The spec as a build folder records it, and the copies of the input files it names."""
    spec = fabric.spec.to_dict()
    files: dict[str, str] = {}
    server_file = _server_file(fabric, base_dir)
    if server_file is not None:
        copy = f"{INPUTS}/{server_file.name}"  # same file name: a profile without name: keeps its name
        files[copy] = server_file.read_text(encoding="utf-8")
        spec["server"] = copy
    return spec, files


def core_files(fabric: Fabric, summary: Summary, analysis: "Analysis | None" = None,
               cabling: "Cabling | None" = None, base_dir: str | Path | None = None) -> dict[str, str]:
    """The design files of a build folder (not the configs and other outputs, not README.md).

    Inputs the spec names by path (a host-name table, a server profile) are copied in, and
    ``spec.yaml`` names the copies, so that ``topo build -f spec.yaml`` rebuilds the same folder.
    """
    spec, files = spec_and_inputs(fabric, base_dir)
    summary_data = summary.to_dict()
    if cabling is not None:
        summary_data["cabling"] = cabling.to_dict()
    files.update({
        "spec.yaml": yaml.safe_dump(spec, sort_keys=False),
        "design.json": design_json(fabric, spec),
        "summary.json": dump_json(summary_data),
    })
    if analysis is not None:
        files["analysis.json"] = dump_json(analysis.to_dict())
    if fabric.spec.hostname_table is not None:
        files[HOSTNAMES_CSV] = "node,hostname\n" + "".join(
            f"{i},{host}\n" for i, host in enumerate(fabric.spec.hostname_table))
    return files


def readme(fabric: Fabric, summary: Summary, analysis: "Analysis | None" = None,
           user_dirs: Iterable[str | Path] = (), configs: bool = True,
           cabling: "Cabling | None" = None, server: "ServerProfile | None" = None,
           base_dir: str | Path | None = None) -> str:
    """The build folder's README.md, from the template ``summary.md.j2``."""
    from .configs import is_ethernet
    from .exports import FULL_DOT_MAX_LINKS

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
        "server": server.name if server is not None else None,
        "full_dot": len(fabric.links) <= FULL_DOT_MAX_LINKS,
    }
    return render_template(env, "summary.md.j2", context)


def build_files(fabric: Fabric, summary: Summary, analysis: "Analysis | None" = None,
                user_dirs: Iterable[str | Path] = (), configs: bool = True,
                base_dir: str | Path | None = None, cabling: "Cabling | None" = None,
                server: "ServerProfile | None" = None,
                progress: Callable[[int], None] | None = None, workers: int = 1) -> Iterator[tuple[str, str]]:
    """Every file of a build folder as ``(path, text)``, made one after the other.

    ``configs`` false (or an InfiniBand switch model) leaves out the switch and host configs and the
    containerlab lab. ``progress(switches_done)`` follows the switch configs, the longest part,
    which ``workers`` processes render (the bytes do not depend on it).
    """
    from .cabling import cabling_files, plan_cabling
    from .configs import is_ethernet
    from .exports import export_files
    from .nccl import nccl_files
    from .placement import placement_files
    from .servers import resolve_server

    user_dirs = tuple(user_dirs)
    configs = configs and is_ethernet(fabric)
    cabling = cabling if cabling is not None else plan_cabling(fabric)
    server = server if server is not None else resolve_server(fabric.spec, base_dir)
    env = template_environment(user_dirs)
    yield from core_files(fabric, summary, analysis, cabling, base_dir).items()
    yield from placement_files(fabric, env).items()
    yield from nccl_files(fabric, server, analysis, env, base_dir=base_dir).items()
    yield from cabling_files(fabric, cabling).items()
    yield from export_files(fabric, configs=configs, user_dirs=user_dirs).items()
    if configs:
        yield from config_files(fabric, user_dirs, workers=workers, progress=progress)
    yield "README.md", readme(fabric, summary, analysis, user_dirs, configs, cabling, server, base_dir)


def render_build(fabric: Fabric, summary: Summary, analysis: "Analysis | None" = None,
                 user_dirs: Iterable[str | Path] = (), configs: bool = True,
                 base_dir: str | Path | None = None) -> dict[str, str]:
    """Every file of a build folder, by relative path, in memory (the CLI streams them instead)."""
    return dict(build_files(fabric, summary, analysis, user_dirs, configs, base_dir))
