"""The ``topo`` command line. The only module that touches the terminal and writes files.

Data goes to stdout (a table, JSON or YAML); progress and messages go to stderr. A user mistake in
a spec or its values is exit status 1 with one line per problem; a malformed flag is exit status 2
(click's usage error). Neither shows a traceback.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import click
import yaml

from . import __version__
from .catalog import switch_catalog
from .errors import TopoError
from .fabric import build_fabric
from .render import render_build
from .sizing import plan_fabric
from .spec import FabricSpec, load_spec, read_spec_file
from .summary import Summary, summarize
from .writer import check_output_dir, write_tree


class TopoClickError(click.ClickException):
    """A TopoError shown as one ``Error: ...`` line per problem, exit status 1."""

    exit_code = 1

    def __init__(self, error: TopoError) -> None:
        super().__init__(error.message)
        self.lines = error.lines

    def show(self, file: Any = None) -> None:
        stream = file or click.get_text_stream("stderr")
        for line in self.lines:
            click.echo(f"Error: {line}", file=stream)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn TopoError into a clean CLI error."""
    try:
        yield
    except TopoError as exc:
        raise TopoClickError(exc) from None


class Progress:
    """Stage timings on stderr (silent with --quiet)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    @contextmanager
    def stage(self, what: str) -> Iterator[None]:
        start = time.perf_counter()
        if not self.quiet:
            click.echo(f"topo: {what} ...", err=True, nl=False)
        try:
            yield
        except BaseException:
            if not self.quiet:
                click.echo(" failed", err=True)
            raise
        if not self.quiet:
            click.echo(f" {time.perf_counter() - start:.2f} s", err=True)

    def say(self, message: str) -> None:
        if not self.quiet:
            click.echo(f"topo: {message}", err=True)


# --- shared options --------------------------------------------------------------------------

SPEC_FLAGS: list[tuple[str, str, dict[str, Any]]] = [
    ("name", "--name", {"help": "Fabric name, the prefix of switch and host names [cluster]."}),
    ("gpus", "--gpus", {"type": click.INT, "help": "GPUs to connect (required here or in the spec file)."}),
    ("gpus_per_node", "--gpus-per-node", {"type": click.INT, "help": "GPUs per server [8]."}),
    ("nics_per_node", "--nics-per-node", {"type": click.INT, "help": "NICs (rails) per server [one per GPU]."}),
    ("nic_gbps", "--nic-gbps", {"type": click.INT, "help": "NIC speed in Gb/s [400]."}),
    ("switch", "--switch", {"help": "Switch model from the catalogue (see 'topo switches'); sets radix and port speed."}),
    ("radix", "--radix", {"type": click.INT, "help": "Ports per switch [64]."}),
    ("port_gbps", "--port-gbps", {"type": click.INT, "help": "Switch port speed in Gb/s [400]."}),
    ("tiers", "--tiers", {"type": click.Choice(["auto", "2", "3"]), "help": "Switch tiers [auto: fewest that fit]."}),
    ("oversubscription", "--oversubscription", {"help": "Leaf downlink:uplink bandwidth, e.g. 1, 3 or 3:1 [1]."}),
    ("spine_oversubscription", "--spine-oversubscription", {"help": "Spine downlink:uplink bandwidth, three tiers [1]."}),
    ("placement", "--placement", {"type": click.Choice(["rail", "rack"]), "help": "rail-optimized or rack (ToR) [rail]."}),
    ("spines", "--spines", {"type": click.INT, "help": "Spines (per pod in three tiers), to cable for growth [fewest that fit]."}),
]


def spec_options(func: Callable) -> Callable:
    """``-f SPEC`` plus one flag per spec field; flags override the file."""
    for field, flag, kwargs in reversed(SPEC_FLAGS):
        func = click.option(flag, field, default=None, **kwargs)(func)
    func = click.option(
        "-f", "--file", "spec_file", type=click.Path(dir_okay=False, path_type=Path),
        help="YAML spec file; flags override its fields.",
    )(func)
    return func


def format_option(func: Callable) -> Callable:
    """``--format table|json|yaml`` for commands that print results."""
    return click.option(
        "--format", "fmt", type=click.Choice(["table", "json", "yaml"]), default="table",
        show_default=True, help="How to print the results on stdout.",
    )(func)


def spec_from_cli(spec_file: Path | None, fields: dict[str, Any]) -> FabricSpec:
    data = read_spec_file(spec_file) if spec_file else {}
    return load_spec(data, fields)


def emit(data: dict[str, Any], fmt: str, table: Callable[[], str]) -> None:
    if fmt == "json":
        click.echo(json.dumps(data, indent=2))
    elif fmt == "yaml":
        click.echo(yaml.safe_dump(data, sort_keys=False), nl=False)
    else:
        click.echo(table())


def format_table(headers: list[str], rows: list[list[Any]]) -> str:
    """Plain-text table: first column left-aligned, numbers right-aligned."""
    cells = [[_cell(v) for v in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) and i > 0
               for i in range(len(headers))]
    lines = []
    for r, row in enumerate(cells):
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(row, widths, numeric)]
        lines.append("  ".join(parts).rstrip())
        if r == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def summary_table(summary: Summary) -> str:
    s = summary
    kind = "rail-optimized" if s.placement == "rail" else "rack (ToR)"
    model = f" ({s.switch_model})" if s.switch_model else ""
    unit = "scalable units" if s.placement == "rail" else "racks"
    head = [
        f"{s.name}: {s.gpus:,} GPUs on {s.nodes:,} nodes ({_plural(s.gpus_per_node, 'GPU')}, "
        f"{s.nics_per_node} x {s.nic_gbps}G {'NIC' if s.nics_per_node == 1 else 'NICs'} each), "
        f"{kind}, {s.tiers} tiers",
        f"switches: radix {s.radix} x {s.port_gbps}G{model}; {s.scalable_units:,} {unit} of "
        f"{_plural(s.su_nodes, 'node')}" + (f"; {s.pods} pods" if s.tiers == 3 else ""),
        f"parallel links: {s.leaf_spine_parallel} per leaf-spine pair"
        + (f", {s.spine_core_parallel} per spine-core pair" if s.tiers == 3 else ""),
        "",
    ]
    rows = [
        [r.role, r.switches, r.ports_used, r.ports_free, r.links_below, r.cables_below, r.oversubscription]
        for r in s.tier_rows
    ]
    rows.append(["total", sum(r.switches for r in s.tier_rows), sum(r.ports_used for r in s.tier_rows),
                 sum(r.ports_free for r in s.tier_rows), sum(s.links.values()), s.cables, None])
    headers = ["tier", "switches", "ports used", "ports free", "links below", "cables below", "oversub"]
    return "\n".join(head) + "\n" + format_table(headers, rows)


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


# --- commands --------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="topo", message="%(prog)s %(version)s")
def main() -> None:
    """Design the network fabric of a GPU training cluster.

    \b
    Example:
      topo build --gpus 1024          # size, build and write a 1,024-GPU design
    """


@main.command()
@spec_options
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Output folder [./NAME-GPUSgpus].")
@click.option("--force", is_flag=True, help="Replace an existing non-empty output folder.")
@format_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def build(spec_file: Path | None, output: Path | None, force: bool, fmt: str, quiet: bool,
          **fields: Any) -> None:
    """Size and build a fabric, write the design folder and print its summary.

    \b
    Examples:
      topo build --gpus 1024
      topo build --gpus 768 --oversubscription 3 -o design-768
      topo build -f examples/h100-1024.yaml --format json
      topo build --gpus 16384 --tiers 3 --placement rack --force
    """
    progress = Progress(quiet)
    with user_errors():
        spec = spec_from_cli(spec_file, fields)
        out = output or Path(f"{spec.name}-{spec.gpus}gpus")
        check_output_dir(out, force)
        plan_fabric(spec)  # refuse an impossible spec before any work is shown
        with progress.stage(f"building {spec.gpus:,} GPUs"):
            fabric = build_fabric(spec)
        summary = summarize(fabric)
        with progress.stage("rendering"):
            files = render_build(fabric, summary)
        with progress.stage(f"writing {out}/"):
            write_tree(out, files, force=force)
    emit(summary.to_dict(), fmt, lambda: summary_table(summary))


@main.command()
@format_option
def switches(fmt: str) -> None:
    """List the switch models of the catalogue (use one with --switch NAME).

    \b
    Example:
      topo switches
      topo build --gpus 4096 --switch eth-51t-128x400
    """
    models = switch_catalog()
    data = {name: model.to_dict() for name, model in models.items()}
    rows = [[m.name, m.radix, m.port_gbps, m.power_w, m.description] for m in models.values()]
    emit(data, fmt, lambda: format_table(["model", "radix", "port Gb/s", "power W", "description"], rows))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
