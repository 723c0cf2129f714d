"""The ``topo`` command line: its options, and what each command prints.

Each command declares its options, converts them, calls its verb of the pipeline
(:mod:`topo.pipeline`) and prints what the verb returns, through the terminal's tables
(:mod:`topo.outputs.terminal`). The only module that imports click and writes to the terminal.

Data goes to stdout (a table, JSON or YAML); progress and messages go to stderr. A user mistake in
a spec or its values is exit status 1 with one line per problem; a malformed flag is exit status 2
(click's usage error). Neither shows a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import click

from . import __version__
from .errors import QUOTE_LIMIT, AnalysisError, TopoError, UsageError, quote
from .analysis.choices import (ALGORITHMS, DEFAULT_HASH_SAMPLES, DEFAULT_SIZES, HASH_BUDGET, HASH_FIELDS, MIN_AUTO_SAMPLES,
                               PROTOCOL_CHOICES, ROUTING_CHOICES)
from .pipeline.sweep import SWEEP_FIXED_OPTIONS, SWEEP_FIXED_SPEC
from .outputs.terminal import StageLines
from .process import Terminated, flush_fails, interrupts_as_keyboard_interrupt, quiet_stdout, raised_by_echo
from .sizes import parse_size, parse_sizes  # noqa: F401 (parse_size: importable from here, as before)

if TYPE_CHECKING:  # pragma: no cover
    from .analysis.analyze import AnalysisOptions

# Everything else is imported by the command that uses it: ``topo --version``, ``--help`` and the
# commands that do not analyse load neither numpy, scipy, networkx nor the analyses.


class _AsciiNumber(click.ParamType):
    """A number flag written in the digits 0-9: Python's int() and float() also read the digits of
    other scripts (``--gpus １０２４`` would be 1024), which topo refuses as a malformed value."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{quote(value)} is not a number written in the digits 0-9", param, ctx)
        return super().convert(value, param, ctx)  # type: ignore[misc]


class _Int(_AsciiNumber, click.types.IntParamType):
    pass


class _Float(_AsciiNumber, click.types.FloatParamType):
    pass


class IntRange(_AsciiNumber, click.IntRange):
    """click.IntRange, in the digits 0-9 only."""


class FloatRange(_AsciiNumber, click.FloatRange):
    """click.FloatRange, in the digits 0-9 only."""


INT, FLOAT = _Int(), _Float()


class TopoClickError(click.ClickException):
    """A TopoError shown as one ``Error: ...`` line per problem, exit status 1."""

    exit_code = 1

    def __init__(self, error: TopoError) -> None:
        super().__init__(error.message)
        self.lines = error.lines

    def show(self, file: Any = None) -> None:
        stream = file or sys.stderr
        for line in self.lines:
            click.echo(f"Error: {line}", file=stream)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn TopoError into a clean CLI error (UsageError into click's, exit status 2)."""
    try:
        yield
    except UsageError as exc:
        raise click.UsageError(exc.message) from None
    except TopoError as exc:
        raise TopoClickError(exc) from None


class Progress(StageLines):
    """Stage timings and counters on stderr (silent with --quiet): :class:`topo.outputs.terminal.StageLines`
    written with click, warnings shown even with --quiet."""

    def __init__(self, quiet: bool) -> None:
        super().__init__(quiet, lambda text, nl: click.echo(text, err=True, nl=nl), sys.stderr.isatty())

    def warn(self, message: str) -> None:
        _echo_safely(message, err=True)


# --- shared options --------------------------------------------------------------------------

SPEC_FLAGS: list[tuple[str, str, dict[str, Any]]] = [
    ("name", "--name", {"help": "Fabric name, the prefix of switch and host names [cluster]."}),
    ("gpus", "--gpus", {"metavar": "N", "help": "GPUs to connect, e.g. 1024 or 16k (k = 1,024) (required here or in the spec file)."}),
    ("gpus_per_node", "--gpus-per-node", {"type": INT, "help": "GPUs per server [the --server profile's, else 8]."}),
    ("nics_per_node", "--nics-per-node", {"type": INT, "help": "NICs (rails) per server [the --server profile's, else one per GPU]."}),
    ("nic_gbps", "--nic-gbps", {"metavar": "GBPS", "help": "NIC speed in Gb/s: 400, 400G or 1.6T [the --server profile's, else 400]."}),
    ("planes", "--planes", {"type": INT, "metavar": "N", "help": "Planes: each NIC has N ports of nic-gbps/N, port p into plane p, and no link joins two planes [1]."}),
    ("dual_tor", "--dual-tor/--single-tor", {"default": None, "help": "Cable each NIC to two leaves of a leaf pair (an MCLAG pair), bonded, half its speed to each, so a lost link or leaf halves it instead of cutting it [single]."}),
    ("switch", "--switch", {"help": "Switch model from the catalogue (see 'topo switches'); sets radix and port speed."}),
    ("leaf_switch", "--leaf-switch", {"metavar": "MODEL", "help": "Leaf model, if not --switch's [--switch]."}),
    ("spine_switch", "--spine-switch", {"metavar": "MODEL", "help": "Spine model, if not --switch's (its radix may differ) [--switch]."}),
    ("core_switch", "--core-switch", {"metavar": "MODEL", "help": "Core model, if not --switch's (its radix may differ) [--switch]."}),
    ("platform", "--platform", {"help": "SONiC SKU of the switch model (see 'topo switches') [the model's]."}),
    ("switch_watts", "--switch-watts", {"type": FLOAT, "metavar": "W",
                                        "help": "Power of one switch with its optics, for a switch without a catalogue model [unknown]."}),
    ("radix", "--radix", {"type": INT, "help": "Ports per switch [64]."}),
    ("port_gbps", "--port-gbps", {"metavar": "GBPS", "help": "Switch port speed in Gb/s: 400, 800G or 1.6T [400]."}),
    ("tiers", "--tiers", {"type": click.Choice(["auto", "1", "2", "3"]), "help": "Switch tiers [auto: fewest that fit; 1: one switch, or one per rail (rail-only), no spines]."}),
    ("oversubscription", "--oversubscription", {"help": "Leaf downlink:uplink bandwidth, e.g. 1, 3 or 3:1 [1]."}),
    ("spine_oversubscription", "--spine-oversubscription", {"help": "Spine downlink:uplink bandwidth, three tiers [1]."}),
    ("placement", "--placement", {"type": click.Choice(["rail", "rack"]), "help": "rail-optimized or rack (ToR) [rail]."}),
    ("spines", "--spines", {"type": INT, "help": "Spines (per pod in three tiers), to cable for growth [fewest that fit]."}),
    ("grow_to", "--grow-to", {"metavar": "N", "help": "GPUs the spines and cores are cabled for, to grow into later by adding leaves (and pods) [gpus]."}),
    ("loopback_pool", "--loopback-pool", {"help": "IPv4 prefix of switch loopbacks [10.255.0.0/16]."}),
    ("p2p_pool", "--p2p-pool", {"help": "IPv4 prefix of switch-to-switch /31s [10.64.0.0/11]."}),
    ("host_pool", "--host-pool", {"help": "IPv4 prefix of server-link /31s [10.128.0.0/11]."}),
    ("asn_size", "--asn-size", {"type": click.Choice(["auto", "2", "4"]), "help": "Private ASNs of 2 or 4 bytes [auto]."}),
    ("unnumbered", "--unnumbered/--numbered", {"default": None, "help": "BGP on interfaces (IPv6 link-local) instead of /31s [numbered]."}),
    ("bfd", "--bfd/--no-bfd", {"default": None, "help": "BFD on every BGP session [no]."}),
    ("qos", "--qos", {"type": click.Choice(["nvidia", "sonic"]), "help": "Lossless RoCE QoS profile [nvidia]."}),
    ("mtu", "--mtu", {"type": INT, "help": "MTU of switch ports and NICs [9100]."}),
    ("frr_version", "--frr-version", {"type": click.STRING, "metavar": "VERSION",
                                      "help": "FRR release the switches run, for 'frr version' [10.5.4]."}),
    ("routing_mode", "--routing-mode", {"type": click.Choice(["split-unified", "unified"]),
                                        "help": "Who owns BGP on SONiC: the rendered frr.conf (split-unified) or bgpcfgd from config_db (unified) [split-unified]."}),
    ("cable_node_leaf_m", "--cable-node-leaf-m", {"type": FLOAT, "help": "Server-to-leaf cable length [3 m rack, 20 m rail]."}),
    ("cable_leaf_spine_m", "--cable-leaf-spine-m", {"type": FLOAT, "help": "Leaf-to-spine cable length [50 m]."}),
    ("cable_spine_core_m", "--cable-spine-core-m", {"type": FLOAT, "help": "Spine-to-core cable length [100 m]."}),
    ("server", "--server", {"metavar": "PROFILE|YAML", "help": "Server profile for NCCL topology files: a name from 'topo servers' or a YAML file [one matching GPUs and NICs per node]."}),
    ("spare_trays", "--spare-trays", {"type": INT, "metavar": "N", "help": "Trays each rack (NVLink domain of --server) keeps out of the job: racks hold gpus / ((trays - N) x GPUs a tray) [0]."}),
    ("prices", "--prices", {"metavar": "YAML", "help": "Price list for the bill of materials' cost (examples/prices/) [none]."}),
    ("hostnames", "--hostnames", {"metavar": "PATTERN|CSV", "help": "Server host names: a pattern such as 'gpu{number:04d}' ({node} from 0, {number} from 1, {name}) or a CSV file node,hostname [NAME-node0000]."}),
]


#: Spec fields that only the build's files use (addresses, BGP, QoS, cables, names): the analysis
#: accepts them, from a spec file or a flag, but its --help does not list them. (The server profile
#: is listed: the all-reduce model takes the node's NVLink, NVSwitch and PCIe from it.)
BUILD_ONLY_FIELDS = ("switch_watts", "prices", "loopback_pool", "p2p_pool", "host_pool", "asn_size", "unnumbered", "bfd", "qos", "mtu", "frr_version", "routing_mode",
                     "cable_node_leaf_m", "cable_leaf_spine_m", "cable_spine_core_m", "hostnames")


def spec_options(func: Callable | None = None, *, hide: tuple[str, ...] = ()) -> Callable:
    """``-f SPEC`` plus one flag per spec field; flags override the file. Fields in ``hide`` are
    accepted but left out of --help."""
    if func is None:
        return lambda f: spec_options(f, hide=hide)
    func = click.option("--rail-only", "rail_only", is_flag=True, default=None,
                        help="One switch per rail and no spines: tiers=1 with rail placement.")(func)
    for field, flag, kwargs in reversed(SPEC_FLAGS):
        func = click.option(flag, field, **{"default": None, **kwargs, "hidden": field in hide})(func)
    func = click.option(
        "-f", "--file", "spec_file", type=click.Path(dir_okay=False, path_type=Path),
        help="YAML spec file; flags override its fields.",
    )(func)
    return func


def templates_option(func: Callable) -> Callable:
    """``--templates DIR`` (repeatable): folders searched before the packaged templates."""
    return click.option(
        "--templates", "templates", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
        help="Folder of templates that override the packaged ones by relative path (repeatable).",
    )(func)


def format_option(func: Callable) -> Callable:
    """``--format table|json|yaml`` for commands that print results."""
    return click.option("--format", "fmt", type=click.Choice(["table", "json", "yaml"]), default="table",
                        show_default=True, help="How to print the results on stdout.")(func)


class SizeList(click.ParamType):
    name = "SIZES"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        try:
            return parse_sizes(str(value))
        except ValueError as exc:
            self.fail(exc.args[0], param, ctx)


ANALYSIS_FLAGS: list[tuple[str, str, dict[str, Any]]] = [
    ("job_gpus", "--job-gpus", {"type": INT, "help": "GPUs of the job that all-reduces [all]."}),
    ("order", "--order", {"type": click.Choice(["topology", "random"]), "default": "topology", "show_default": True,
                          "help": "Rank order: keep scalable units and leaves together, or shuffled."}),
    ("seed", "--seed", {"type": IntRange(0, 2**32 - 1), "default": 0, "show_default": True,
                        "help": "Seed of --order random, --fail-random and random bisection splits."}),
    ("algo", "--algo", {"type": click.Choice(list(ALGORITHMS)), "default": "auto", "show_default": True,
                        "help": "All-reduce algorithm (NCCL_ALGO): NCCL's choice per size, or one of them."}),
    ("proto", "--proto", {"type": click.Choice(list(PROTOCOL_CHOICES)), "default": "auto", "show_default": True,
                          "help": "Protocol (NCCL_PROTO): NCCL's choice per size, or one of them."}),
    ("routing", "--routing", {"type": click.Choice(list(ROUTING_CHOICES)), "default": "auto", "show_default": True,
                              "help": "ECMP hashing, adaptive routing, or InfiniBand D-mod-K; auto: D-mod-K on "
                                      "InfiniBand switch models, ECMP on Ethernet."}),
    ("qps", "--qps", {"type": INT, "default": None,
                      "help": "Queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION) [1; 2 with --dual-tor, "
                              "one on each link of a NIC's bond]."}),
    ("hash_seed", "--hash-seed", {"type": IntRange(0, 2**32 - 1), "default": 0, "show_default": True,
                                  "help": "First seed of the ECMP hash samples."}),
    ("hash_samples", "--hash-samples", {"type": INT, "default": None,
                                        "help": f"ECMP hash draws; figures are their median (and 5th "
                                                f"percentile) [{DEFAULT_HASH_SAMPLES}, fewer (at least "
                                                f"{MIN_AUTO_SAMPLES}) past {HASH_BUDGET:,} hashed sub-flow draws]."}),
    ("hash_field", "--hash-field", {"type": click.Choice(list(HASH_FIELDS)), "default": "sport",
                                    "show_default": True,
                                    "help": "What switches hash per queue pair: the RoCEv2 UDP source port, or "
                                            "the QP number (enhanced ECMP)."}),
    ("hash_polarized", "--hash-polarized/--no-hash-polarized", {"default": False, "show_default": True,
                                                                "help": "Same hash function on every switch of "
                                                                        "a tier (hash polarisation)."}),
    ("sharp", "--sharp/--no-sharp", {"default": False, "show_default": True,
                                     "help": "In-network reduction (SHARP) on InfiniBand switches: enables "
                                             "CollNet and multi-node NVLS."}),
    ("channels", "--channels", {"type": INT, "default": None,
                                "help": "NCCL channels of the communicator (NCCL_MIN/MAX_NCHANNELS) [NCCL's]."}),
    ("cc", "--cc", {"type": click.Choice(["ecn", "pfc"]), "default": "ecn", "show_default": True,
                    "help": "Congestion control: ECN/DCQCN (max-min fair) or PFC alone (pause spreading)."}),
    ("link_efficiency", "--link-efficiency", {"type": FLOAT, "default": 0.94, "show_default": True,
                                              "help": "Usable fraction of every link (47 of 50 GB/s on NDR)."}),
    ("switch_latency_ns", "--switch-latency-ns", {"type": FLOAT, "default": 300.0, "show_default": True,
                                                  "help": "Latency per switch hop."}),
    ("step_latency_us", "--step-latency-us", {"type": FLOAT, "default": None,
                                              "help": "Network post overhead per ring step (NCCL_NET_OVERHEAD, "
                                                      "in us) [NCCL's: 1 on Intel, 2 on AMD hosts]."}),
    ("nccl_constants", "--nccl-constants", {"type": click.STRING, "default": None, "metavar": "FILE",
                                            "help": "YAML file of NCCL tuner tables to use instead of "
                                                    "NCCL's (measured latencies, another release)."}),
    ("sizes", "--sizes", {"type": SizeList(), "default": None,
                          "help": "Message sizes, comma-separated [1M to 8G in steps of 4x, and 8G]."}),
    ("fail", "--fail", {"multiple": True, "metavar": "NAME[:PORT]",
                        "help": "Fail a switch, a server, or the link on one port (repeatable)."}),
    ("fail_random", "--fail-random", {"type": FLOAT, "default": 0.0, "metavar": "FRACTION",
                                      "help": "Fail this fraction of switch-to-switch links at random (--seed)."}),
    ("random_splits", "--random-splits", {"type": IntRange(0, 64), "default": 4, "show_default": True,
                                          "help": "Random balanced splits that max-flow checks for bisection."}),
]


def analysis_options(func: Callable) -> Callable:
    """One flag per field of AnalysisOptions."""
    for field, flag, kwargs in reversed(ANALYSIS_FLAGS):
        func = click.option(flag, field, **kwargs)(func)
    return func


def options_from_cli(fields: dict[str, Any], progress: "Progress | None" = None) -> AnalysisOptions:
    from .analysis.analyze import AnalysisOptions

    values = {name: fields.pop(name) for name, _, _ in ANALYSIS_FLAGS}
    values["fail"] = tuple(values["fail"])
    if values["sizes"] is None:
        values["sizes"] = DEFAULT_SIZES
    for note in getattr(values["sizes"], "notes", ()):
        if progress is not None:
            progress.say(note)
    values["sizes"] = tuple(values["sizes"])
    return AnalysisOptions(**values)


def emit(data: dict[str, Any], fmt: str, table: Callable[[], str]) -> None:
    import yaml

    if fmt == "json":
        click.echo(json.dumps(data, indent=2, allow_nan=False))
    elif fmt == "yaml":
        click.echo(yaml.safe_dump(data, sort_keys=False), nl=False)
    else:
        click.echo(table())


def discard_edits_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--discard-edits``: with --force, replace a folder even when files in it were edited."""
    return click.option("--discard-edits", is_flag=True,
                        help="With --force: replace the folder even if files in it were changed since topo "
                             "wrote them (the changes are lost).")(func)


def _check_discard(force: bool, discard_edits: bool) -> None:
    if discard_edits and not force:
        raise click.UsageError("--discard-edits goes with --force")


# --- commands --------------------------------------------------------------------------------


#: Exit status of an interrupted command (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


class TopoGroup(click.Group):
    """The command group, ending every run with a documented exit status and no traceback for a
    user's action: 1 for a mistake in the input, 2 for a malformed command line, 130 for Ctrl-C
    and 143 for SIGTERM (after the command has cleaned up: no temporary folder stays), and a quiet
    exit when the reader of stdout goes away (``topo switches | head -1``)."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            with interrupts_as_keyboard_interrupt():
                super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            if not isinstance(exc, TopoClickError):  # click's own line quotes a value whole
                exc.message = _LONG_WORD.sub(lambda m: m.group(0)[:QUOTE_LIMIT - 4] + "...'", exc.message)
            exc.show()
            sys.exit(exc.exit_code)
        except (click.Abort, KeyboardInterrupt) as exc:  # click turns KeyboardInterrupt into Abort
            if isinstance(exc, Terminated) or isinstance(exc.__cause__, Terminated):
                _echo_safely("Error: terminated", err=True)
                sys.exit(128 + signal.SIGTERM)
            _echo_safely("Error: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            quiet_stdout()
            sys.exit(1)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                quiet_stdout()
                sys.exit(1)
            _os_error_exit(exc)
        try:  # what is still buffered: a full disk shows here, not in Python's flush at exit
            sys.stdout.flush()
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                quiet_stdout()
                sys.exit(1)
            _echo_safely(f"Error: cannot write the output to standard output ({exc.strerror or exc})", err=True)
            quiet_stdout()
            sys.exit(1)
        sys.exit(0)


#: A value click quotes in its message ('...' of more than QUOTE_LIMIT characters): cut as quote() cuts.
_LONG_WORD = re.compile(r"'[^'\s]{%d,}'" % QUOTE_LIMIT)


def _os_error_exit(exc: OSError) -> None:
    """End with one ``Error:`` line and status 1 for a system call that failed on the user's
    system: standard output that cannot be written (``topo switches > /dev/full``), or a file the
    system refuses (a name too long, a folder that went away). Anything else is a bug, and raises."""
    reason = exc.strerror or type(exc).__name__
    if raised_by_echo(exc) or exc.filename is None and flush_fails():
        _echo_safely(f"Error: cannot write the output to standard output ({reason})", err=True)
        quiet_stdout()
        sys.exit(1)
    if exc.filename is not None:
        _echo_safely(f"Error: {quote(str(exc.filename))}: {reason}", err=True)
        sys.exit(1)
    raise exc


def _echo_safely(text: str, err: bool = False) -> None:
    try:
        click.echo(text, err=err)
    except OSError:
        pass


@click.group(cls=TopoGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="topo", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Design the network fabric of a GPU training cluster.

    \b
    Example:
      topo build --gpus 1024          # size, build and write a 1,024-GPU design
    """
    if ctx.invoked_subcommand in ("switches", "servers"):  # they read and write no file
        return
    try:  # every other command reads or writes paths relative to the working folder
        os.getcwd()
    except OSError as exc:
        raise TopoClickError(TopoError(f"the working folder cannot be found ({exc.strerror}: it was removed "
                                       f"or renamed); cd to a folder that exists")) from None



@main.command()
@spec_options
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Output folder [./NAME-GPUSgpus].")
@click.option("--force", is_flag=True, help="Replace an existing design folder that topo wrote.")
@discard_edits_option
@click.option("--no-analysis", is_flag=True, help="Skip the analysis (analysis.json and the headline figures).")
@click.option("--no-configs", is_flag=True, help="Skip the switch and host configs.")
@click.option("-j", "--jobs", type=IntRange(1, 512), default=None,
              help="Processes that render switch configs [one per CPU].")
@templates_option
@format_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (warnings still, see --no-warnings).")
@click.option("--no-warnings", is_flag=True, help="No warnings on stderr (they stay in summary.json and README.md).")
def build(spec_file: Path | None, output: Path | None, force: bool, discard_edits: bool, no_analysis: bool,
          no_configs: bool,
          jobs: int | None, templates: tuple[Path, ...], fmt: str, quiet: bool, no_warnings: bool,
          **fields: Any) -> None:
    """Size and build a fabric, write the design folder and print its summary.

    \b
    Examples:
      topo build --gpus 1024
      topo build --gpus 768 --oversubscription 3 -o design-768
      topo build -f examples/h100-1024.yaml --format json
      topo build --gpus 16384 --tiers 3 --placement rack --force
    """
    from .outputs.cabling import cabling_line
    from .outputs.terminal import headline, headline_lines, power_lines, summary_table
    from .pipeline.build import build as run_build

    _check_discard(force, discard_edits)
    progress = Progress(quiet)
    with user_errors():
        made = run_build(spec_file, fields, output, force, discard_edits, analysis=not no_analysis,
                         configs=not no_configs, jobs=jobs, templates=templates, progress=progress)
        for warning in [] if no_warnings else made.warnings:  # shown even with -q: a review must not miss them
            click.echo(warning.line(), err=True)
    data = made.summary.to_dict()
    data["cabling"] = made.cabling.to_dict()
    data["warnings"] = [w.to_dict() for w in made.warnings]
    if made.analysis is not None:
        data["analysis"] = headline(made.analysis)
    lines = headline_lines(made.analysis) if made.analysis is not None else []
    lines += [cabling_line(made.cabling), *power_lines(made.summary)]
    emit(data, fmt, lambda: "\n".join([summary_table(made.summary), "", *lines]).rstrip())


@main.command(name="analyze")
@click.argument("design", required=False, type=click.Path(file_okay=False, path_type=Path))
@spec_options(hide=BUILD_ONLY_FIELDS)
@analysis_options
@format_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (warnings still, see --no-warnings).")
@click.option("--no-warnings", is_flag=True, help="No warnings on stderr (they stay in --format json).")
def analyze_command(design: Path | None, spec_file: Path | None, fmt: str, quiet: bool, no_warnings: bool, **fields: Any) -> None:
    """Hops, bisection bandwidth, ECMP width and the same-rank all-reduce of a fabric.

    DESIGN is a folder written by 'topo build': its spec.yaml is read, the fabric rebuilt and
    checked against the folder's design.json (a folder edited since the build is refused; spec
    flags override the folder's spec, and then the check is skipped). Without DESIGN, the spec
    comes from -f and the spec flags, as for 'topo build'. Spec fields that only the build's files
    use (addresses, BGP, QoS, cables, host names) are accepted but not listed here; the server
    profile (--server) gives the node's GPUs, NVLink and PCIe to the all-reduce model.

    \b
    Examples:
      topo analyze --gpus 1024
      topo analyze cluster-1024gpus --order random --qps 4
      topo analyze --gpus 768 --oversubscription 3 --order random --cc pfc
      topo analyze --gpus 4096 --fail cluster-spine-p00-03 --fail cluster-leaf-su00-r0:33
      topo analyze --gpus 16384 --fail-random 0.02 --seed 7 --format json
    """
    from .outputs.terminal import analysis_table
    from .pipeline.analyze import analyze

    progress = Progress(quiet)
    with user_errors():
        options = options_from_cli(fields, progress)
        result = analyze(design, spec_file, fields, options, progress)
        for warning in [] if no_warnings else result.warnings:  # shown even with -q, as by topo build
            click.echo(warning.line(), err=True)
    emit(result.to_dict(), fmt, lambda: analysis_table(result.analysis))


@main.command(name="check")
@click.argument("design", type=click.Path(file_okay=False, path_type=Path))
@templates_option
@click.option("-j", "--jobs", type=IntRange(1, 512), default=None,
              help="Processes that render switch configs [one per CPU].")
@format_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def check_command(design: Path, templates: tuple[Path, ...], jobs: int | None, fmt: str, quiet: bool) -> None:
    """Check a build folder whole: for a CI job that must fail when a design drifts.

    Every file is as the folder's topo-build.json lists it, and nothing else is there; the fabric
    rebuilt from its spec.yaml renders every file to the same bytes (give the --templates the build
    used); and the switch configs agree end to end with the cabling: every switch-to-switch link
    has a BGP session on both ends, each naming the other end's address and ASN. Exit status 0
    when all holds, 1 with one line per problem otherwise.

    \b
    Examples:
      topo check cluster-1024gpus
      topo check design --templates site-templates --format json
    """
    from .outputs.terminal import check_line
    from .pipeline.check import check

    progress = Progress(quiet)
    with user_errors():
        report, spec_file = check(design, templates, jobs, progress)
    summary = check_line(design, spec_file, report)
    if fmt == "table":
        if report.ok:
            click.echo(summary)
        else:
            for problem in report.problems:
                click.echo(f"Error: {problem}", err=True)
    else:
        emit(report.to_dict(), fmt, lambda: summary)
    if not report.ok:
        raise SystemExit(1)


@main.command(name="report")
@click.argument("designs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Output folder [./LABEL-report, or ./A-vs-B-report for a comparison].")
@click.option("--force", is_flag=True, help="Replace an existing report folder that topo wrote.")
@discard_edits_option
@click.option("--sweep", "sweep_path", type=click.Path(exists=True, path_type=Path), default=None,
              help="A folder (or its sweep.json) written by 'topo sweep': adds its Pareto fronts, the design ringed.")
@click.option("--train", "train_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The JSON of 'topo train -o': adds the training step, its scaling curve and what-ifs.")
@templates_option
@format_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def report_command(designs: tuple[Path, ...], output: Path | None, force: bool, discard_edits: bool,
                   sweep_path: Path | None, train_path: Path | None, templates: tuple[Path, ...], fmt: str,
                   quiet: bool) -> None:
    """The design review of one design, or several side by side: report.html and report.md.

    Each DESIGN is a folder written by 'topo build' (its spec.yaml is read, and the folder must be
    as the build left it) or a spec file. One design gives its review: spec, tiers, diagram, bill of
    materials, hops, bisection, busbw against message size, link utilisation, what-ifs and warnings
    (what 'topo build' writes into its folder). Several give a comparison: the first is the
    reference, every figure of the others comes with its change, better or worse, and a paragraph
    says what each gains and loses. report.html is self-contained (open it, print it, mail it);
    report.md shows the same with the pictures beside it in report/.

    \b
    Examples:
      topo report cluster-1024gpus
      topo report examples/h100-1024.yaml examples/rack-768-oversub3.yaml -o review
      topo report design-1to1 design-3to1 --format json
      topo report cluster-1024gpus --train train-llama3-70b.json
    """
    from .outputs.report import key_table, report_data
    from .outputs.terminal import report_table
    from .pipeline.report import report

    _check_discard(force, discard_edits)
    progress = Progress(quiet)
    with user_errors():
        made = report(designs, output, force, discard_edits, sweep_path, train_path, templates, progress)
    data = report_data(made.reviews)
    emit(data, fmt, lambda: report_table(*key_table(made.reviews), data, made.folder))


@main.command(name="templates")
@templates_option
@format_option
def templates_command(templates: tuple[Path, ...], fmt: str) -> None:
    """List every templated output, the templates that render it, and where each file is found.

    A folder given with --templates is searched first, by relative path, then the packaged
    templates: copy a packaged template into your folder at the same relative path to change it.

    \b
    Examples:
      topo templates
      topo templates --templates my-templates
      topo build --gpus 4096 --templates my-templates
    """
    from .outputs.readme import template_sources
    from .outputs.terminal import templates_table

    with user_errors():
        rows = template_sources(templates)
    emit({"templates": rows}, fmt, lambda: templates_table(rows))


@main.command(name="servers")
@format_option
def servers_command(fmt: str) -> None:
    """List the server profiles NCCL topology files are written for (use one with --server NAME).

    \b
    Examples:
      topo servers
      topo build --gpus 1024 --nics-per-node 4 --server hgx-h100-4nic
    """
    from .outputs.terminal import servers_table
    from .hardware.catalog import server_profiles

    profiles = server_profiles()
    data = {name: profile.to_dict() for name, profile in profiles.items()}
    emit(data, fmt, lambda: servers_table(profiles))


@main.command()
@format_option
def switches(fmt: str) -> None:
    """List the switch models of the catalogue (use one with --switch NAME) and their SONiC SKUs
    (--platform NAME; the first listed is the model's default).

    \b
    Example:
      topo switches
      topo build --gpus 4096 --switch eth-51t-128x400 --platform arista-7060x6-64pe-o128s2
    """
    from .catalog import platform_catalog, switch_catalog
    from .outputs.terminal import switches_table

    models = switch_catalog()
    platforms = platform_catalog()
    data = {name: model.to_dict() for name, model in models.items()}
    emit(data, fmt, lambda: switches_table(models, platforms))


# --- topo sweep -------------------------------------------------------------------------------------


def sweep_options(func: Callable) -> Callable:
    """Every spec field and analysis option as a repeatable flag: each value given is one value of
    that axis of the grid."""
    for field, flag, kwargs in reversed(ANALYSIS_FLAGS):
        if field in SWEEP_FIXED_OPTIONS:
            continue
        kw = {k: v for k, v in kwargs.items() if k not in ("default", "show_default")}
        func = click.option(flag, field, multiple=True, **kw)(func)
    for field, flag, kwargs in reversed(SPEC_FLAGS):
        kw = {k: v for k, v in kwargs.items() if k != "default"}
        if field in SWEEP_FIXED_SPEC:
            func = click.option(flag, field, default=None, **kw)(func)
        else:
            func = click.option(flag, field, multiple=True, default=(), **kw)(func)
    return func


def _option_value(name: str, value: Any) -> Any:
    """A value of analysis option ``name`` from a sweep file, converted as its flag converts it."""
    kwargs = next(k for f, _, k in ANALYSIS_FLAGS if f == name)
    if "/" in next(flag for f, flag, _ in ANALYSIS_FLAGS if f == name):  # --x/--no-x
        return value if isinstance(value, bool) else _convert(click.BOOL, name, value)
    kind = kwargs.get("type")
    return _convert(kind, name, value) if isinstance(kind, click.ParamType) else value


def _convert(kind: click.ParamType, name: str, value: Any) -> Any:
    """``kind.convert(value)``, its complaint as one error line naming the field."""
    try:
        return kind.convert(value, None, None)
    except click.BadParameter as exc:
        raise AnalysisError([f"sweep: {name}={quote(str(value))}: {exc.message}"]) from None



def _sweep_value(name: str, value: Any) -> Any:
    """A value of a sweep file (``sizes``, ``fail_random``, ``trials`` or an analysis option),
    converted as its flag converts it."""
    kind = {"sizes": SizeList(), "fail_random": FloatRange(0.0, 1.0, max_open=True),
            "trials": IntRange(0, 10_000)}.get(name)
    return _option_value(name, value) if kind is None else _convert(kind, name, value)


def _sweep_fields() -> Any:
    """The fields a sweep may vary, as the flags declare them (:class:`topo.pipeline.sweep.Fields`)."""
    from .pipeline.sweep import Fields

    return Fields(spec=frozenset({f for f, _, _ in SPEC_FLAGS} | {"rail_only"}),
                  options={f: k.get("default") for f, _, k in ANALYSIS_FLAGS if f not in SWEEP_FIXED_OPTIONS},
                  convert=_sweep_value)


@main.command(name="sweep")
@click.option("-f", "--file", "spec_file", type=click.Path(dir_okay=False, path_type=Path),
              help="YAML spec file of the base design; flags and the sweep file vary it.")
@click.option("--sweep", "sweep_file", type=click.Path(dir_okay=False, path_type=Path),
              help="YAML sweep file: a grid of fields and values, explicit cases, sizes, Monte Carlo.")
@sweep_options
@click.option("--sizes", "sizes", type=SizeList(), default=None,
              help="Message sizes of the busbw columns, comma-separated [8G].")
@click.option("--fail-random", "fail_random", type=FloatRange(0.0, 1.0, max_open=True), default=None,
              metavar="FRACTION", help="Failure Monte Carlo: fail this fraction of switch-to-switch links at random, "
                                       "--trials times a design.")
@click.option("--trials", type=IntRange(0, 10_000), default=None,
              help="Monte Carlo draws a design (with --fail-random) [16].")
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Folder of sweep.csv, sweep.json, the Pareto plots and README.md [none: print the table].")
@click.option("--force", is_flag=True, help="Replace an existing sweep folder that topo wrote.")
@discard_edits_option
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder of the designs' cached rows, to resume a sweep [OUTPUT.cache with -o, else none].")
@click.option("--no-cache", is_flag=True, help="Compute every design, cache nothing.")
@click.option("-j", "--jobs", type=IntRange(1, 512), default=None,
              help="Local processes [the CPUs this process may use].")
@click.option("--scheduler", metavar="tcp://HOST:PORT", default=None,
              help="Run the designs on the Dask cluster of this scheduler instead of local processes.")
@click.option("--scheduler-timeout", "scheduler_timeout", type=click.FloatRange(1, 86_400), default=60.0,
              show_default=True, metavar="SECONDS",
              help="With --scheduler: end with an error when the cluster has had no workers this long.")
@format_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def sweep_command(spec_file: Path | None, sweep_file: Path | None, sizes: Any, fail_random: float | None,
                  trials: int | None, output: Path | None, force: bool, discard_edits: bool,
                  cache_dir: Path | None, no_cache: bool, jobs: int | None, scheduler: str | None,
                  scheduler_timeout: float, fmt: str, quiet: bool, **fields: Any) -> None:
    """Build, cost and analyse many candidate fabrics: one row per design.

    Each flag of a spec field or analysis option may be given several times: the sweep is every
    combination of the values given (a grid), plus the explicit cases of a --sweep file. Each row
    has the design's fields, its switches, links, cables, transceivers, power (and cost with
    --prices), bisection, diameter and busbw at --sizes; with --fail-random and --trials, the
    median, 5th percentile and worst busbw and bisection over random failures. Designs run on local
    processes, or with --scheduler on a Dask cluster, with the same results; finished designs are
    cached, so a sweep run again resumes where it stopped. -o writes sweep.csv, sweep.json, the
    Pareto plots of cost (or power) against busbw and bisection, and README.md.

    \b
    Examples:
      topo sweep --gpus 1024 --gpus 4096 --oversubscription 1 --oversubscription 3 \\
                 --placement rail --placement rack -o sweep-8
      topo sweep --sweep examples/sweeps/sweep-12.yaml --prices examples/prices/illustrative.yaml -o sweep
      topo sweep --gpus 16k --oversubscription 1 --oversubscription 2 --fail-random 0.01 --trials 32
      topo sweep --sweep examples/sweeps/sweep-12.yaml -o sweep --scheduler tcp://10.0.0.5:8786
    """
    from .outputs.sweep_files import front_table
    from .outputs.sweep_table import busbw_column
    from .outputs.terminal import sweep_table
    from .pipeline.sweep import plan, sweep

    _check_discard(force, discard_edits)
    progress = Progress(quiet)
    with user_errors():
        planned = plan(_sweep_fields(), fields, spec_file, sweep_file, sizes, fail_random, trials, jobs, scheduler)
        made = sweep(planned, output, force, discard_edits, cache_dir, no_cache, jobs, scheduler, scheduler_timeout,
                     progress)

    def table() -> str:
        headers, front = front_table(made.sweep, made.rows)
        size = busbw_column(max(made.sweep.sizes)).split("@")[1]
        return sweep_table(headers, front, made.data, size, len(made.rows), output)

    emit(made.data, fmt, table)


# --- topo train ------------------------------------------------------------------------------------

#: Analysis options that price a training job's collectives (the job, its sizes and algorithm are
#: the workload's own, so --job-gpus, --order, --algo, --proto, --sizes and --random-splits are not here).
TRAIN_ANALYSIS = ("routing", "qps", "hash_seed", "hash_samples", "hash_field", "hash_polarized", "sharp", "channels",
                  "cc", "link_efficiency", "switch_latency_ns", "step_latency_us", "nccl_constants", "fail",
                  "fail_random", "seed")

TRAIN_FLAGS: list[tuple[str, str, dict[str, Any]]] = [
    ("workload_file", "--workload", {"type": click.Path(dir_okay=False, path_type=Path), "metavar": "FILE",
                                     "help": "YAML file of the workload (the fields below); flags override it."}),
    ("model", "--model", {"metavar": "NAME", "help": "Model of the catalogue (topo train --list) [none: give the "
                                                     "architecture]."}),
    ("gpu", "--gpu", {"metavar": "NAME", "help": "GPU of the catalogue (topo train --list) [h100]."}),
    ("params_b", "--params-b", {"type": FLOAT, "help": "The model's size in billions, checked against the "
                                                               "architecture (within 10%)."}),
    ("layers", "--layers", {"type": INT, "help": "Transformer layers."}),
    ("hidden", "--hidden", {"type": INT, "help": "Hidden size."}),
    ("heads", "--heads", {"type": INT, "help": "Attention heads."}),
    ("kv_heads", "--kv-heads", {"type": INT, "help": "Key-value heads (grouped-query attention) [heads]."}),
    ("head_dim", "--head-dim", {"type": INT, "help": "Width of one attention head [hidden / heads]."}),
    ("ffn", "--ffn", {"type": INT, "help": "Feed-forward width [4 x hidden]."}),
    ("mlp", "--mlp", {"type": click.Choice(["gelu", "swiglu"]), "help": "Feed-forward kind [gelu]."}),
    ("seq_len", "--seq-len", {"type": INT, "help": "Sequence length in tokens [the model's]."}),
    ("vocab", "--vocab", {"type": INT, "help": "Vocabulary size."}),
    ("experts", "--experts", {"type": INT, "help": "Routed experts per MoE layer (a mixture of experts)."}),
    ("top_k", "--top-k", {"type": INT, "help": "Experts each token goes to."}),
    ("expert_ffn", "--expert-ffn", {"type": INT, "help": "Feed-forward width of one expert."}),
    ("global_batch", "--global-batch", {"type": INT, "help": "Sequences per step [the recipe's, else 4 Mi "
                                                                   "tokens]."}),
    ("micro_batch", "--micro-batch", {"type": INT, "help": "Sequences per micro-batch [1]."}),
    ("tp", "--tp", {"type": INT, "help": "Tensor-parallel size (inside the NVLink domain) [recipe's, 1]."}),
    ("pp", "--pp", {"type": INT, "help": "Pipeline stages [recipe's, 1]."}),
    ("cp", "--cp", {"type": INT, "help": "Context-parallel size [recipe's, 1]."}),
    ("ep", "--ep", {"type": INT, "help": "Expert-parallel size (a mixture of experts) [recipe's, 1]."}),
    ("vpp", "--vpp", {"type": INT, "help": "Interleaved (virtual) stages per pipeline rank [recipe's, 1]."}),
    ("zero", "--zero", {"type": IntRange(0, 3), "help": "ZeRO stage: 0 none, 1 distributed optimizer, 2 and "
                                                              "gradients, 3 and weights [1]."}),
    ("recompute", "--recompute", {"type": click.Choice(["none", "selective", "full"]),
                                  "help": "Activation recomputation [selective]."}),
    ("precision", "--precision", {"type": click.Choice(["bf16", "fp8", "fp4"]),
                                  "help": "Matrix-multiply precision [bf16]."}),
    ("grad_precision", "--grad-precision", {"type": click.Choice(["bf16", "fp32"]),
                                            "help": "Precision the gradients are kept and reduced in [bf16]."}),
    ("overlap", "--overlap", {"metavar": "LIST", "help": "Communication overlapped with compute: some of dp, tp, "
                                                         "pp, cp, ep, or none [dp,tp,pp,cp]."}),
]


def train_options(func: Callable) -> Callable:
    """The workload flags, and the analysis options that price its collectives."""
    for field, flag, kwargs in reversed([f for f in ANALYSIS_FLAGS if f[0] in TRAIN_ANALYSIS]):
        if field == "fail":  # a training job stops when a NIC loses its link
            kwargs = {**kwargs, "help": "Fail a spine, a core or a switch-to-switch link on one port (repeatable)."}
        func = click.option(flag, field, **kwargs)(func)
    for field, flag, kwargs in reversed(TRAIN_FLAGS):
        func = click.option(flag, field, default=None, **kwargs)(func)
    return func


@main.command(name="train")
@click.argument("design", required=False, type=click.Path(file_okay=False, path_type=Path))
@spec_options(hide=BUILD_ONLY_FIELDS)
@train_options
@click.option("--scale", metavar="N1,N2,...", default=None,
              help="The scaling curve: the same workload on the fabric spec at each GPU count.")
@click.option("--weak", is_flag=True, help="With --scale: the global batch grows with the GPUs (weak scaling).")
@click.option("--what-if", "what_if", is_flag=True,
              help="The same workload with the other placement, 1:1 or 3:1, the other routing, a failed spine.")
@click.option("--list", "list_catalog", is_flag=True, help="List the model and GPU catalogues and exit.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the result as JSON to this file (for topo report --train).")
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
@format_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def train_command(design: Path | None, spec_file: Path | None, scale: str | None, weak: bool, what_if: bool,
                  list_catalog: bool, output: Path | None, force: bool, fmt: str, quiet: bool,
                  **fields: Any) -> None:
    """A training step of a workload on the fabric: step time and its breakdown, throughput, MFU,
    memory, and how close the cluster comes to linear speed-up.

    The fabric is a DESIGN folder, -f SPEC, or the spec flags, as for 'topo analyze'. The workload
    is --model from the catalogue (its recipe gives the parallelism and batch not given) or the
    architecture flags, on --gpu, with data parallelism from the GPU count. Every collective of
    every parallel group is priced on this fabric by the all-reduce model: routing, congestion and
    the failures asked for (docs/train.md).

    \b
    Examples:
      topo train --gpus 1024 --model llama3-70b
      topo train --gpus 16k --model gpt3-175b --tp 8 --pp 8 --global-batch 4096 --format json
      topo train --gpus 1024 --model llama3-8b --scale 128,256,512,1024 --what-if
      topo train cluster-1024gpus --model deepseek-v3 --gpu h800 --precision fp8
    """
    if list_catalog:
        if output is not None:
            raise click.UsageError("--list prints the catalogues; -o/--output is for a training result")
        from .outputs.terminal import catalog_table
        from .hardware.catalog import gpu_catalog
        from .workload import model_catalog

        catalogs = {"models": {n: m.to_dict() for n, m in model_catalog().items()},
                    "gpus": {n: g.to_dict() for n, g in gpu_catalog().items()}}
        return emit(catalogs, fmt, lambda: catalog_table(catalogs))
    from .analysis.analyze import AnalysisOptions
    from .outputs.terminal import train_table
    from .pipeline.train import train

    progress = Progress(quiet)
    with user_errors():
        analysis = {name: fields.pop(name) for name in TRAIN_ANALYSIS}
        analysis["fail"] = tuple(analysis["fail"])
        options = AnalysisOptions(**analysis)
        workload_file = fields.pop("workload_file")
        workload = {key: fields.pop(key) for key, _, _ in TRAIN_FLAGS if key != "workload_file"}
        data = train(design, spec_file, fields, options, workload, workload_file, scale, weak, what_if, output,
                     force, progress)
    emit(data, fmt, lambda: train_table(data))


def entry() -> None:
    """The ``topo`` program: :func:`main`; after Ctrl-C or SIGTERM, once the command has cleaned
    up and said so, the process ends without the interpreter's teardown of its modules (half a
    second with numpy, scipy and networkx loaded), so that the prompt is back at once."""
    try:
        main()
    except SystemExit as exc:
        if exc.code in (EXIT_INTERRUPTED, 128 + signal.SIGTERM):
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(int(exc.code))
        raise


if __name__ == "__main__":  # pragma: no cover
    entry()
