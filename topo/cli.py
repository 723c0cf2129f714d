"""The ``topo`` command line. The only module that touches the terminal and writes files.

Data goes to stdout (a table, JSON or YAML); progress and messages go to stderr. A user mistake in
a spec or its values is exit status 1 with one line per problem; a malformed flag is exit status 2
(click's usage error). Neither shows a traceback.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import signal
import sys
import time
from contextlib import ExitStack, contextmanager, nullcontext
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import click

from . import __version__
from .errors import QUOTE_LIMIT, AnalysisError, TopoError, key_name, quote
from .analysis.choices import (ALGORITHMS, DEFAULT_HASH_SAMPLES, DEFAULT_SIZES, HASH_BUDGET, HASH_FIELDS, MIN_AUTO_SAMPLES,
                               PROTOCOL_CHOICES, ROUTING_CHOICES)

if TYPE_CHECKING:  # pragma: no cover
    from .analysis.analyze import Analysis, AnalysisOptions
    from .summary import Summary
    from .spec import FabricSpec

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
    """Turn TopoError into a clean CLI error."""
    try:
        yield
    except TopoError as exc:
        raise TopoClickError(exc) from None


class Progress:
    """Stage timings and counters on stderr (silent with --quiet).

    A stage prints ``topo: what ...`` and, when it ends, its time on the same line; a counter
    inside a stage rewrites one line on a terminal, or prints a line every quarter elsewhere.
    """

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.open_line = False
        self.tty = sys.stderr.isatty()

    def _echo(self, text: str, nl: bool = True) -> None:
        if not self.quiet:
            click.echo(text, err=True, nl=nl)

    @contextmanager
    def stage(self, what: str) -> Iterator[None]:
        start = time.perf_counter()
        self._echo(f"topo: {what} ...", nl=False)
        self.open_line = True
        try:
            yield
        except BaseException as exc:
            # Ctrl-C and SIGTERM say so; only an error "failed" (its Error: line follows)
            how = ("terminated" if isinstance(exc, _Terminated) else "interrupted") \
                if isinstance(exc, KeyboardInterrupt) else "failed"
            self._echo(f" {how}" if self.open_line else f"topo: {what} {how}")
            self.open_line = False
            raise
        elapsed = f"{time.perf_counter() - start:.2f} s"
        self._echo(f" {elapsed}" if self.open_line else f"topo: {what} done in {elapsed}")
        self.open_line = False

    def counter(self, what: str, total: int) -> Callable[[int], None]:
        """A callback ``update(done)`` that shows the progress of ``total`` items."""
        state = {"shown": -1}
        steps = 100 if self.tty else 4

        def update(done: int) -> None:
            step = done * steps // max(total, 1)
            if step == state["shown"]:
                return
            state["shown"] = step
            if self.open_line:
                self._echo("")
                self.open_line = False
            text = f"  {what}: {done:,}/{total:,} ({100 * done // max(total, 1)}%)"
            if self.tty:
                self._echo("\r" + text, nl=done >= total)
            else:
                self._echo(text)

        return update

    def say(self, message: str) -> None:
        self._echo(f"topo: {message}")


# --- shared options --------------------------------------------------------------------------

SPEC_FLAGS: list[tuple[str, str, dict[str, Any]]] = [
    ("name", "--name", {"help": "Fabric name, the prefix of switch and host names [cluster]."}),
    ("gpus", "--gpus", {"metavar": "N", "help": "GPUs to connect, e.g. 1024 or 16k (k = 1,024) (required here or in the spec file)."}),
    ("gpus_per_node", "--gpus-per-node", {"type": INT, "help": "GPUs per server [8]."}),
    ("nics_per_node", "--nics-per-node", {"type": INT, "help": "NICs (rails) per server [one per GPU]."}),
    ("nic_gbps", "--nic-gbps", {"metavar": "GBPS", "help": "NIC speed in Gb/s: 400, 400G or 1.6T [400]."}),
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
    return click.option(
        "--format", "fmt", type=click.Choice(["table", "json", "yaml"]), default="table",
        show_default=True, help="How to print the results on stdout.",
    )(func)


def spec_from_cli(spec_file: Path | None, fields: dict[str, Any], progress: "Progress | None" = None) -> FabricSpec:
    from .spec import load_spec, read_spec_file

    fields = dict(fields)
    if fields.pop("rail_only", None):  # the rail-only design: its two fields, which flags may not contradict
        clash = _rail_only_clash(fields)
        if clash:
            raise click.UsageError("--rail-only is tiers=1 with rail placement; it contradicts "
                                   + ", ".join(f"--{name} {value}" for name, value in clash))
        fields.update(tiers="1", placement="rail")
    data = read_spec_file(spec_file) if spec_file else {}
    notes: list[str] = []
    spec = load_spec(data, fields, base_dir=spec_file.parent if spec_file else None, notes=notes)
    for note in notes:
        if progress is not None:
            progress.say(note)
    return spec


#: Message size prefixes: binary (nccl-tests counts 8G as 8 GiB), and decimal when a unit follows
#: (8GB, 8Gb); the prefix's case does not matter. The unit's does: B is bytes, b is bits.
_PREFIXES = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}
#: Largest message size and most sizes one analysis takes.
MAX_SIZE = 1 << 40
MAX_SIZES = 64
_SIZE = re.compile(r"([0-9]{1,13}(?:\.[0-9]{1,6})?)\s*(?:([KMGTkmgt])(i|I)?)?([Bb]?)")


def size_unit(text: str) -> tuple[int, str]:
    """``(bytes, how it was read)`` of a message size; ValueError for anything else.

    The prefix K, M, G, T (either case) is binary alone or with ``i`` (``8G``, ``8GiB``: 8 GiB, as
    nccl-tests counts) and decimal before a unit (``8GB``: 8,000,000,000 bytes). The unit's case
    matters: ``B`` is bytes and ``b`` bits, as on a data sheet (``8Gb`` is 8 gigabits, 1,000,000,000
    bytes; ``8Gib`` 8 gibibits, 1 GiB). A size must come to a whole number of bytes.

    >>> size_unit("8G")[0], size_unit("8GiB")[0], size_unit("8GB")[0], size_unit("8Gb")[0], size_unit("8Gib")[0]
    (8589934592, 8589934592, 8000000000, 1000000000, 1073741824)
    """
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(text)
    number, prefix, binary, unit = match.groups()
    prefix = (prefix or "").upper()
    power = _PREFIXES[prefix]
    decimal = bool(prefix) and not binary and bool(unit)
    scale = 1000 ** power if decimal else 1 << (10 * power)
    bits = unit == "b"
    value = Fraction(number) * scale / (8 if bits else 1)
    if value.denominator != 1 or not 1 <= value <= MAX_SIZE:
        raise ValueError(text)
    kind = ("bits" if bits else "bytes") if unit else "bytes"
    how = (f"{'decimal' if decimal else 'binary'} {kind}" if prefix else kind)
    return int(value), how


def parse_size(text: str) -> int:
    """``"1M"``, ``"1MiB"``, ``"8G"`` or ``"4096"`` -> bytes (binary units); ``"8GB"`` is decimal
    and ``"8Gb"`` decimal bits (:func:`size_unit`).

    >>> parse_size("8GiB"), parse_size("1m"), parse_size("4096"), parse_size("1GB"), parse_size("8Gb")
    (8589934592, 1048576, 4096, 1000000000, 1000000000)
    """
    return size_unit(text)[0]


def size_note(text: str) -> str | None:
    """A line saying how a size in decimal units or in bits was read (``8GB`` is 8,000,000,000
    bytes, not 8 GiB; ``8Gb`` is 8 gigabits, 1,000,000,000 bytes)."""
    size, how = size_unit(text)
    text = text.strip()
    match = _SIZE.fullmatch(text)
    number, prefix = match.group(1), (match.group(2) or "").upper()
    if how == "decimal bytes":
        binary = int(Fraction(number) * (1 << 10 * _PREFIXES[prefix]))  # not bounded: only said
        return (f"--sizes {text}: {size:,} bytes ({prefix}B is decimal; {number}{prefix} or {number}{prefix}iB "
                f"is {binary:,})")
    if how.endswith("bits"):
        binary = how.startswith("binary")
        names = _BINARY_NAMES if binary else _DECIMAL_NAMES
        as_bytes = f"{number}{prefix}{'i' if binary else ''}B"
        return (f"--sizes {text}: {size:,} bytes (b is bits: {number} {names[prefix]}bits; {as_bytes} is "
                f"{size * 8:,} bytes)")
    return None


_DECIMAL_NAMES = {"": "", "K": "kilo", "M": "mega", "G": "giga", "T": "tera"}
_BINARY_NAMES = {"": "", "K": "kibi", "M": "mebi", "G": "gibi", "T": "tebi"}


class Sizes(tuple):
    """Message sizes in bytes, with a line for each size given in a decimal unit."""

    notes: tuple[str, ...] = ()


class SizeList(click.ParamType):
    name = "SIZES"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        parts = [part for part in str(value).split(",") if part.strip()]
        if len(parts) > MAX_SIZES:
            self.fail(f"{len(parts)} sizes; at most {MAX_SIZES}", param, ctx)
        try:
            sizes = Sizes(parse_size(part) for part in parts)
        except ValueError as exc:
            self.fail(f"{quote(exc.args[0])} is not a size from 1 byte to 1 TiB, such as 1M, 256MiB, 8G, 8GB "
                      f"or 4096", param, ctx)
        sizes.notes = tuple(note for note in map(size_note, parts) if note)
        return sizes


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
    from .outputs.summary import breakout_line, dual_tor_line, switches_line

    s = summary
    kind = ("rail-only" if s.tiers == 1 else "rail-optimized") if s.placement == "rail" else "rack (ToR)"
    unit = "scalable units" if s.placement == "rail" else "racks"
    head = [
        f"{s.name}: {s.gpus:,} GPUs on {_plural(s.nodes, 'node')} ({_plural(s.gpus_per_node, 'GPU')}, "
        f"{s.nics_per_node} x {s.nic_gbps}G {'NIC' if s.nics_per_node == 1 else 'NICs'} each"
        + (f", {s.planes} x {s.nic_gbps // s.planes}G ports a NIC" if s.planes > 1 else "") + "), "
        f"{kind}, {_plural(s.tiers, 'tier')}" + (f", {s.planes} planes" if s.planes > 1 else ""),
        switches_line(s.to_dict()) + "; "
        + f"{_plural(s.scalable_units, unit[:-1])} of {_plural(s.su_nodes, 'node')}" + (f"; {s.pods} pods" + (" a plane" if s.planes > 1 else "") if s.tiers == 3 else ""),
        *([f"parallel links: {s.leaf_spine_parallel} per leaf-spine pair"
           + (f", {s.spine_core_parallel} per spine-core pair" if s.tiers == 3 else "")] if s.tiers > 1 else []),
        *([breakout_line(s.breakouts)] if s.breakouts else []),
        *([growth_line(s.growth)] if s.growth else []),
        *([dual_tor_line(s.dual_tor)] if s.dual_tor else []),
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


def growth_line(g: dict[str, Any]) -> str:
    """``growth: cabled for 1,024 GPUs (32 leaves, 16 spines); ...``"""
    f, r = g["final"], g["reserved_ports"]
    final = f"{f['leaves']:,} leaves, {f['spines']:,} spines" + (f", {f['cores']:,} cores" if f["cores"] else "")
    free = [f"{r[t]:,} {t} ports" for t in ("spine", "core") if r[t]]
    return (f"growth: cabled for {g['grow_to']:,} GPUs ({final}); "
            + (f"{' and '.join(free)} kept free; " if free else "")
            + f"{len(g['steps'])} steps to grow (docs/report.md)")


def headline(analysis: Analysis) -> dict[str, Any]:
    """The figures a build summary shows."""
    last = analysis.allreduce.rows[-1]
    return {
        "bisection_gbps": analysis.bisection.gbps,
        "bisection_maxflow_gbps": analysis.bisection.maxflow_gbps,
        "diameter_links": analysis.hops.diameter_links,
        "allreduce_size_bytes": last["size_bytes"],
        "allreduce_busbw_GBps": last["busbw_GBps"],
    }


def headline_lines(analysis: Analysis) -> list[str]:
    from .outputs.templating import format_size

    h = headline(analysis)
    o = analysis.options
    agree = "max-flow agrees" if analysis.bisection.agrees else f"max-flow {h['bisection_maxflow_gbps']:,}"
    hops = analysis.hops
    if hops.diameter_links is not None:
        diameter = f"diameter: {hops.diameter_links} links ({hops.diameter_switch_hops} switch hops)"
    else:
        diameter = "one node: no GPU pairs across the fabric" if not hops.pairs else "the fabric is cut"
    d = analysis.allreduce.details
    last = analysis.allreduce.rows[-1]
    choice = f"{last['algorithm']}/{last['protocol']}"
    if d["nvlink_only"]:
        allreduce = (f"all-reduce busbw: {h['allreduce_busbw_GBps']:,.1f} GB/s at "
                     f"{format_size(h['allreduce_size_bytes'])} ({choice}; one node of "
                     f"{analysis.allreduce.job_gpus} GPUs, NVLink only: no traffic on the fabric)")
    else:
        routing = d["routing"] + (f" {d['hash_field']}" if d["routing"] == "ecmp" else "") + (
            f", median of {d['hash_samples']} hash samples" if d["hash_samples"] > 1 else "")
        allreduce = (f"all-reduce busbw: {h['allreduce_busbw_GBps']:,.1f} GB/s at "
                     f"{format_size(h['allreduce_size_bytes'])} ({choice}, {routing}, {o.qps} QP, {o.cc}, "
                     f"{o.order} order)")
    return [f"bisection: {h['bisection_gbps']:,} Gb/s ({agree}); {diameter}", allreduce]


def analysis_table(analysis: Analysis) -> str:
    """The analysis for people: hops, bisection, ECMP width, all-reduce, faults."""
    a, o, f = analysis, analysis.options, analysis.fabric
    shape = "rail-only" if f.plan.tiers == 1 and f.plan.placement == "rail" else f"{f.plan.placement} placement"
    lines = [f"{f.spec.name}: {f.spec.gpus:,} GPUs, {_plural(f.plan.tiers, 'tier')}, {shape}"]
    if a.faults.any or o.fail:
        lines.append(f"faults: {a.faults.links_down:,} link{'s' if a.faults.links_down != 1 else ''} down"
                     + (f" ({', '.join(o.fail)})" if o.fail else "")
                     + (f", {o.fail_random:g} of switch links at random (seed {o.seed})" if o.fail_random else ""))
    for note in a.notes():
        lines.append(f"NOTE: {note}")
    h = a.hops
    lines += ["", f"hops between GPUs on different nodes (NIC to NIC): diameter {h.diameter_links} links "
              f"({h.diameter_switch_hops} switch hops), mean {h.mean_links:.3f} links" if h.mean_links is not None
              else "hops: one node, so no GPU pairs on different nodes" if not h.pairs
              else "hops: no pair of GPUs is reachable"]
    rows = [[r.links, r.switch_hops, r.pairs, r.same_rail_pairs, r.cross_rail_pairs] for r in h.distribution]
    if h.unreachable_pairs:
        rows.append(["unreachable", None, h.unreachable_pairs, h.unreachable_same_rail_pairs,
                     h.unreachable_cross_rail_pairs])
    lines.append(format_table(["links", "switch hops", "GPU pairs", "same rail", "cross rail"], rows))
    b = a.bisection
    source = "analytic" if b.source == "analytic" else "the least max-flow (the analytic value is a bound here)"
    lines += ["", f"bisection: {b.gbps:,} Gb/s {source}; max-flow {b.maxflow_gbps:,} Gb/s, the least of "
              f"{len(b.splits)} splits" + (" (agrees)" if b.agrees else "")]
    lines.append(format_table(["split", "max-flow Gb/s"], [[s.name, s.gbps] for s in b.splits]))
    e = a.ecmp.to_dict()
    ecmp = [f"ECMP width: same pod {e['same_pod']['switch_paths']['min']:g} switch paths "
            f"({e['same_pod']['link_paths']['min']:g} link paths)"]
    if e.get("cross_pod"):
        ecmp.append(f"across pods {e['cross_pod']['switch_paths']['min']:g} "
                    f"({e['cross_pod']['link_paths']['min']:g})")
    lines += ["", "; ".join(ecmp) + (" (least over pairs)" if a.faults.any else "")]
    lines += _allreduce_lines(a)
    if analysis.baseline is not None:
        c = analysis.change()
        lines += ["", "change from the intact fabric:"]
        lines.append(format_table(["metric", "intact", "with faults", "change %"], [
            [name, v["intact"] if not isinstance(v["intact"], float) else round(v["intact"], 3),
             v["with_faults"] if not isinstance(v["with_faults"], float) else round(v["with_faults"], 3),
             v.get("change_pct")]
            for name, v in c.items()]))
    return "\n".join(lines)


def _allreduce_lines(a: Analysis) -> list[str]:
    """The all-reduce part of the analysis table: connections, rates, times, bottlenecks."""
    from .outputs.templating import format_size

    o, d = a.options, a.allreduce.details
    node = d["node"]
    table = format_table(
        ["size", "algorithm", "protocol", "time (us)", "algbw GB/s", "busbw GB/s", "busbw p5"],
        [[format_size(r["size_bytes"]), r["algorithm"], r["protocol"],
          None if r["time_s"] is None else round(r["time_s"] * 1e6, 2), r["algbw_GBps"], r["busbw_GBps"],
          r["busbw_p5_GBps"]] for r in a.allreduce.rows])
    head = (f"all-reduce ({'NCCL ' + d['nccl_version'] + ' tuner' if o.algo == 'auto' else '--algo ' + o.algo}): "
            f"{d['job_gpus']:,} GPUs on {d['nodes']:,} node{'s' if d['nodes'] > 1 else ''}, {d['channels']} "
            f"channels; node sm {node['sm']}, NVLink {node['nvlink_bw']:,.0f} GB/s per GPU"
            + (", NVLS" if node["nvls"] else ""))
    if d["nvlink_only"]:
        return ["", head + "; NVLink only, no traffic on the fabric", table]
    samples = (f"; median and 5th percentile of {d['hash_samples']} hash samples" if d["hash_samples"] > 1
               else "; one hash draw" if d["hash_samples"] == 1 else "")
    routing = d["routing"] + (f" ({d['hash_field']}{', polarized' if d['hash_polarized'] else ''}{samples})"
                              if d["routing"] == "ecmp" else "")
    stages = d["stages_busbw_GBps"]
    def rate(value: float | None) -> str:  # None: no such stage (one GPU a node has no NVLink step)
        return "-" if value is None else f"{value:,.1f}"

    stage_text = "; ".join(
        f"{name} network {rate(st['network'])}, NVLink {rate(st['nvlink'])}, PCIe {rate(st['pcie'])} "
        f"(bound: {st['bottleneck']})" for name, st in stages.items())
    lines = ["", head,
             f"  {o.order} order, {routing}, {o.qps} queue pair{'s' if o.qps > 1 else ''} per connection, {d['flows_per_nic']:g} flows per NIC, "
             f"{o.cc}",
             f"  {d['pattern']} connections: {d['connections']:,}; leaving a leaf: {d['connections_leaving_leaf']:,}; "
             f"leaving a pod: {d['connections_leaving_pod']:,}",
             f"  slowest connection {d['slowest_connection_gbps']:,.1f} Gb/s (p5 {d['slowest_connection_gbps_p5']:,.1f}) "
             f"of {d['ideal_connection_gbps']:,.1f} with even sharing; mean {d['mean_connection_gbps']:,.1f}; "
             f"below: {d['connections_below_nic_rate']:,}",
             f"  stage limits, busbw GB/s: {stage_text}",
             f"  busbw limit (large messages, {d['algorithm_at_largest_size']}): {d['busbw_limit_GBps']:,.1f} GB/s",
             table]
    bott = d["bottlenecks"]
    kinds = ", ".join(f"{k} {v:,}" for k, v in bott["saturated_by_kind"].items()) or "none"
    lines += ["", f"bottlenecks of the {bott['slowest_connections']:,} slowest connections: saturated {kinds}"]
    for entry in bott["top"]:
        lines.append(f"  {entry['resource']} ({entry['kind']}): {entry['subflows']} queue pairs, "
                     f"{entry['utilisation']:.0%}")
    u = d["link_utilisation"]
    if u.get("resources"):
        lines.append(f"switch-link utilisation over {u['resources']:,} busy resources: p50 {u['p50']:.0%}, "
                     f"p90 {u['p90']:.0%}, p99 {u['p99']:.0%}, max {u['max']:.0%}")
    return lines


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def build_inputs(spec: FabricSpec, spec_file: Path | None, server_base: Path | None, flags: dict[str, Any],
                 templates: tuple[Path, ...]) -> list[Path]:
    """Every file and folder a build reads: the output folder may not hold any of them."""
    from .outputs.design import server_file
    from .spec import hostnames_file

    paths = [*templates] + ([spec_file] if spec_file is not None else [])
    if spec.hostname_table is not None and spec.hostnames is not None:
        paths.append(hostnames_file(spec.hostnames, flags.get("hostnames") is not None,
                                    spec_file.parent if spec_file else None))
    if spec.prices is not None:  # read as the spec is loaded: from the spec file's folder when it names it
        paths.append(hostnames_file(spec.prices, flags.get("prices") is not None,
                                    spec_file.parent if spec_file else None))
    profile = server_file(spec, server_base)
    if profile is not None:
        paths.append(profile)
    return paths


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
            with _interrupts_as_keyboard_interrupt():
                super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            if not isinstance(exc, TopoClickError):  # click's own line quotes a value whole
                exc.message = _LONG_WORD.sub(lambda m: m.group(0)[:QUOTE_LIMIT - 4] + "...'", exc.message)
            exc.show()
            sys.exit(exc.exit_code)
        except (click.Abort, KeyboardInterrupt) as exc:  # click turns KeyboardInterrupt into Abort
            if isinstance(exc, _Terminated) or isinstance(exc.__cause__, _Terminated):
                _echo_safely("Error: terminated", err=True)
                sys.exit(128 + signal.SIGTERM)
            _echo_safely("Error: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            _quiet_stdout()
            sys.exit(1)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                _quiet_stdout()
                sys.exit(1)
            _os_error_exit(exc)
        try:  # what is still buffered: a full disk shows here, not in Python's flush at exit
            sys.stdout.flush()
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                _quiet_stdout()
                sys.exit(1)
            _echo_safely(f"Error: cannot write the output to standard output ({exc.strerror or exc})", err=True)
            _quiet_stdout()
            sys.exit(1)
        sys.exit(0)


#: A value click quotes in its message ('...' of more than QUOTE_LIMIT characters): cut as quote() cuts.
_LONG_WORD = re.compile(r"'[^'\s]{%d,}'" % QUOTE_LIMIT)


def _raised_by_echo(exc: BaseException) -> bool:
    """Whether ``exc`` was raised where click writes to a stream (``click.echo``): what topo prints."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "echo" and tb.tb_frame.f_globals.get("__name__") == "click.utils"


def _os_error_exit(exc: OSError) -> None:
    """End with one ``Error:`` line and status 1 for a system call that failed on the user's
    system: standard output that cannot be written (``topo switches > /dev/full``), or a file the
    system refuses (a name too long, a folder that went away). Anything else is a bug, and raises."""
    reason = exc.strerror or type(exc).__name__
    if _raised_by_echo(exc) or exc.filename is None and _flush_fails():
        _echo_safely(f"Error: cannot write the output to standard output ({reason})", err=True)
        _quiet_stdout()
        sys.exit(1)
    if exc.filename is not None:
        _echo_safely(f"Error: {quote(str(exc.filename))}: {reason}", err=True)
        sys.exit(1)
    raise exc


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command runs so that it cleans up as for Ctrl-C."""


@contextmanager
def _interrupts_as_keyboard_interrupt() -> Iterator[None]:
    """SIGTERM raises _Terminated (a KeyboardInterrupt) in the main process while a command runs."""
    def stop(signum: int, frame: Any) -> None:
        raise _Terminated

    previous = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (e.g. a test runner's thread)
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _flush_fails() -> bool:
    """Whether what standard output still buffers cannot be written."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return False


def _echo_safely(text: str, err: bool = False) -> None:
    try:
        click.echo(text, err=err)
    except OSError:
        pass


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
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
    from .addressing import check_addressing
    from .fabric import build_fabric, check_memory, is_ethernet
    from .outputs.build import build_files
    from .cabling import plan_cabling
    from .outputs.cabling import cabling_line
    from .outputs.caveats import caveats
    from .outputs.configs import ConfigJob
    from .outputs.report import review
    from .summary import summarize
    from .outputs.writer import OutputFolder
    from .servers import resolve_server
    from .sizing import plan_fabric

    _check_discard(force, discard_edits)
    progress = Progress(quiet)
    with user_errors():
        # a server profile path is relative to the spec file when the file names it, else to here
        base_dir = spec_file.parent if spec_file and fields.get("server") is None else None
        spec = spec_from_cli(spec_file, fields, progress)
        out = output or Path(f"{spec.name}-{spec.gpus}gpus")
        folder = OutputFolder(out, force, build_inputs(spec, spec_file, base_dir, fields, templates), "build",
                              discard_edits)
        plan = plan_fabric(spec)
        check_addressing(spec, plan)  # refuse an impossible spec before any work
        check_memory(spec, plan)
        server = resolve_server(spec, base_dir)
        with folder, ExitStack() as stack:
            with progress.stage(f"building {spec.gpus:,} GPUs"):
                fabric = build_fabric(spec)
            configs = not no_configs and is_ethernet(fabric)
            workers = jobs or os.cpu_count() or 1
            # the switch configs are rendered and written by worker processes from now on, while
            # this one analyses and writes the rest; leaving the block (an error too) stops them
            # before the folder is tidied away
            job = stack.enter_context(ConfigJob(fabric, templates, workers, folder.tmp, folder.shown)) \
                if configs else None
            analysis, parts = None, 0
            if not no_analysis:  # only then the analyses are imported
                from .analysis.analyze import analyze, what_if_parts

                with progress.stage("analysing"):
                    analysis = analyze(fabric, node=server.node_model())
                parts = what_if_parts(fabric)
            cabling = plan_cabling(fabric)  # after the analysis: its arrays need not live through it
            summary = summarize(fabric, cabling)
            switches = len(fabric.names) - fabric.plan.nodes
            warnings = caveats(fabric, analysis, cabling, server, configs=not no_configs)
            with progress.stage("what-ifs for the design review") if parts else nullcontext():
                reviewed = review(fabric, summary, cabling, analysis, warnings, server, base_dir=base_dir, apart=True,
                                  progress=progress.counter(f"{parts} parts failed one at a time", parts)
                                  if parts else None)
            files = build_files(
                fabric, summary, analysis, templates, configs, base_dir, cabling, server,
                progress=progress.counter(f"configs of {switches:,} switches", switches) if configs else None,
                workers=workers, warnings=warnings, reviewed=reviewed, sink=folder.tmp, config_job=job)
            with progress.stage(f"writing {out}/"):
                count = folder.write(files)
        progress.say(f"wrote {count:,} files")
        if not no_warnings:  # shown even with -q: a review must not miss them
            for warning in warnings:
                click.echo(warning.line(), err=True)
    data = summary.to_dict()
    data["cabling"] = cabling.to_dict()
    data["warnings"] = [w.to_dict() for w in warnings]
    if analysis is not None:
        data["analysis"] = headline(analysis)
    lines = headline_lines(analysis) if analysis is not None else []
    lines.append(cabling_line(cabling))
    emit(data, fmt, lambda: "\n".join([summary_table(summary), "", *lines]).rstrip())


@main.command(name="analyze")
@click.argument("design", required=False, type=click.Path(file_okay=False, path_type=Path))
@spec_options(hide=BUILD_ONLY_FIELDS)
@analysis_options
@format_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def analyze_command(design: Path | None, spec_file: Path | None, fmt: str, quiet: bool, **fields: Any) -> None:
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
    from .addressing import check_addressing
    from .analysis.analyze import analyze, check_analysis_work
    from .fabric import build_fabric
    from .outputs.check import design_problems
    from .servers import resolve_server
    from .sizing import plan_fabric

    progress = Progress(quiet)
    with user_errors():
        options = options_from_cli(fields, progress)
        if design is not None:
            if spec_file is not None:
                raise click.UsageError("give a design folder or -f SPEC, not both")
            spec_file = design / "spec.yaml"
            if not spec_file.is_file():
                raise AnalysisError([f"{design} is not a design folder written by topo build: no spec.yaml"])
        overridden = any(value is not None for value in fields.values())
        spec = spec_from_cli(spec_file, fields, progress)
        options.check()
        plan = plan_fabric(spec)
        check_addressing(spec, plan)
        # a server profile path is relative to the spec file (or design folder) when it names it
        base_dir = spec_file.parent if spec_file and fields.get("server") is None else None
        node = resolve_server(spec, base_dir).node_model()
        check_analysis_work(spec, plan, options, node)  # memory and time, before anything is built
        with progress.stage(f"building {spec.gpus:,} GPUs"):
            fabric = build_fabric(spec)
        if design is not None and not overridden:
            problems = design_problems(design, fabric)
            if problems:
                raise AnalysisError([*problems, f"rebuild it (topo build -f {spec_file} -o NEW) or see what "
                                                f"changed with topo check {design}"])
        with progress.stage("analysing"):
            result = analyze(fabric, options, node=node)
    emit(result.to_dict(), fmt, lambda: analysis_table(result))


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
    from .addressing import check_addressing
    from .analysis.analyze import analyze
    from .fabric import build_fabric
    from .outputs.build import build_files
    from .cabling import plan_cabling
    from .outputs.check import check_folder
    from .outputs.manifest import NotABuild, read_manifest
    from .summary import summarize
    from .servers import resolve_server
    from .sizing import plan_fabric

    progress = Progress(quiet)
    with user_errors():
        spec_file = design / "spec.yaml"
        if not spec_file.is_file():
            raise AnalysisError([f"{design} is not a design folder written by topo build: no spec.yaml"])
        spec = spec_from_cli(spec_file, {}, progress)
        check_addressing(spec, plan_fabric(spec))
        with progress.stage(f"building {spec.gpus:,} GPUs"):
            fabric = build_fabric(spec)
        try:
            listed = read_manifest(design)
        except NotABuild:
            listed = {}
        analysis = None
        if "analysis.json" in listed:
            with progress.stage("analysing"):
                analysis = analyze(fabric, node=resolve_server(spec, design).node_model())
        configs = any(path.startswith("switches/") for path in listed)
        switches = len(fabric.names) - fabric.plan.nodes

        cabling = plan_cabling(fabric)  # once, for the summary and the files

        def render() -> Iterator[tuple[str, str]]:
            return build_files(
                fabric, summarize(fabric, cabling), analysis, templates, configs, design, cabling,
                progress=progress.counter(f"configs of {switches:,} switches", switches) if configs else None,
                workers=jobs or os.cpu_count() or 1)

        with progress.stage(f"checking {design}/"):
            report = check_folder(design, fabric, render)
    data = report.to_dict()
    summary = (f"{design}: {report.files:,} files as the stamp lists them and as {spec_file} gives them"
               + (f"; {report.sessions:,} BGP session ends consistent with the cabling" if report.sessions else ""))
    if fmt == "table":
        if report.ok:
            click.echo(summary)
        else:
            for problem in report.problems:
                click.echo(f"Error: {problem}", err=True)
    else:
        emit(data, fmt, lambda: summary)
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
    from .addressing import check_addressing
    from .analysis.analyze import analyze, what_if_parts
    from .fabric import build_fabric
    from .cabling import plan_cabling
    from .outputs.caveats import caveats
    from .outputs.check import design_problems
    from .outputs.manifest import with_manifest
    from .outputs.report import key_table, report_data, report_files, review
    from .summary import summarize
    from .outputs.writer import OutputFolder
    from .servers import resolve_server
    from .sizing import plan_fabric

    _check_discard(force, discard_edits)
    progress = Progress(quiet)
    with user_errors():
        labels = _report_labels(designs)
        spec_files = [d / "spec.yaml" if d.is_dir() else d for d in designs]
        for design, spec_file in zip(designs, spec_files):
            if design.is_dir() and not spec_file.is_file():
                raise AnalysisError([f"{design} is not a design folder written by topo build: no spec.yaml"])
        out = output or Path(("-vs-".join(labels) if len(labels) > 1 else labels[0]) + "-report")
        specs = [spec_from_cli(f, {}, progress) for f in spec_files]
        sweep = read_sweep_json(sweep_path) if sweep_path is not None else None
        train = read_train_json(train_path) if train_path is not None else None
        inputs = [*templates, *(p for p in (sweep_path, train_path) if p is not None)]
        for spec, spec_file in zip(specs, spec_files):
            inputs += build_inputs(spec, spec_file, spec_file.parent, {}, ())
        folder = OutputFolder(out, force, inputs, "report", discard_edits)
        for spec in specs:
            check_addressing(spec, plan_fabric(spec))
        reviews = []
        with folder:
            for design, spec_file, spec, label in zip(designs, spec_files, specs, labels):
                with progress.stage(f"{label}: building and analysing {spec.gpus:,} GPUs"):
                    fabric = build_fabric(spec)
                    if design.is_dir():
                        problems = design_problems(design, fabric)
                        if problems:
                            raise AnalysisError([*problems, f"rebuild it (topo build -f {spec_file} -o NEW) or "
                                                            f"see what changed with topo check {design}"])
                    server = resolve_server(spec, spec_file.parent)
                    analysis = analyze(fabric, node=server.node_model())
                    cabling = plan_cabling(fabric)
                    summary = summarize(fabric, cabling)
                    warnings = caveats(fabric, analysis, cabling, server)
                parts = what_if_parts(fabric)
                with progress.stage(f"{label}: what-ifs"):
                    reviews.append(review(fabric, summary, cabling, analysis, warnings, server, label=label,
                                          base_dir=spec_file.parent, source=str(design), apart=True,
                                          progress=progress.counter(f"{parts} parts failed one at a time", parts)))
            with progress.stage(f"writing {out}/"):
                count = folder.write(with_manifest(report_files(reviews, templates, in_build=False,
                                                                sweep=sweep, train=train).items(), "report"))
        progress.say(f"wrote {count:,} files")
    data = report_data(reviews)

    def table() -> str:
        headers, rows = key_table(reviews)
        text = format_table(headers, rows)
        return text + (f"\n\n{data['verdict']}" if "verdict" in data else "") + f"\n\nreport: {out}/report.html"

    emit(data, fmt, table)


def _read_result(file: Path, flag: str, what: str) -> Any:
    """The JSON of a result topo wrote, read back as ``flag`` gives it: a regular file of at most
    1 GiB (never a FIFO that blocks, nor /dev/zero), nested however deep; one error line, never
    the file's text."""
    from .inputs import MAX_RESULT_BYTES, InputFileError, parse_json, read_text, shown_path

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
    from .inputs import shown_path

    data = _read_result(path / "sweep.json" if path.is_dir() else path, "--sweep", "a sweep written by topo sweep")
    if not isinstance(data, dict) or not {"rows", "pareto", "columns"} <= set(data):
        raise AnalysisError([f"--sweep {shown_path(path)}: not a sweep.json written by topo sweep (no rows, pareto "
                             f"and columns)"])
    return data


def read_train_json(path: Path) -> dict[str, Any]:
    """The JSON that ``topo train -o`` wrote, checked."""
    from .inputs import shown_path
    from .outputs.train import result_problems

    data = _read_result(path, "--train", "a result written by topo train -o")
    problems = result_problems(data)
    if problems:
        raise AnalysisError([f"--train {shown_path(path)}: not a result written by topo train -o ({problems[0]}"
                             + (f", and {len(problems) - 1} more" if len(problems) > 1 else "") + ")"])
    return data


def _report_labels(designs: tuple[Path, ...]) -> list[str]:
    """A short distinct label per design: its folder name or spec file's stem."""
    labels: list[str] = []
    for design in designs:
        base = (design.resolve().name if design.is_dir() else design.stem) or "design"
        label, n = base, 2
        while label in labels:
            label, n = f"{base}-{n}", n + 1
        labels.append(label)
    return labels


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
    from .outputs.build import template_sources

    with user_errors():
        rows = template_sources(templates)
    emit({"templates": rows}, fmt, lambda: format_table(
        ["output", "for", "template", "from", "file"],
        [[r["output"], r["for"], r["template"], r["from"], r["file"]] for r in rows]))


@main.command(name="servers")
@format_option
def servers_command(fmt: str) -> None:
    """List the server profiles NCCL topology files are written for (use one with --server NAME).

    \b
    Examples:
      topo servers
      topo build --gpus 1024 --nics-per-node 4 --server hgx-h100-4nic
    """
    from .servers import server_profiles

    profiles = server_profiles()
    data = {name: profile.to_dict() for name, profile in profiles.items()}
    rows = [[p.name, p.gpu_count, p.nic_count, p.nic_gbps, p.description] for p in profiles.values()]
    emit(data, fmt, lambda: format_table(["profile", "GPUs", "NICs", "NIC Gb/s", "description"], rows))


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

    models = switch_catalog()
    platforms = platform_catalog()
    data = {name: model.to_dict() for name, model in models.items()}

    def skus(m: Any) -> str:
        names = sorted((p.name for p in platforms.values() if p.switch == m.name), key=lambda n: n != m.platform)
        return ", ".join(f"{n} ({platforms[n].hwsku})" for n in names) or "-"

    rows = [[m.name, m.radix, m.port_gbps, m.power_w, m.description, skus(m)] for m in models.values()]
    emit(data, fmt, lambda: format_table(["model", "radix", "port Gb/s", "power W", "description",
                                          "SONiC platforms (default first)"], rows))




# --- topo sweep -------------------------------------------------------------------------------------

#: Spec fields a sweep takes once, for every design (a file each; not an axis of the grid).
SWEEP_FIXED_SPEC = ("prices", "hostnames", "server")
#: Analysis options that are not axes of a sweep: the sizes are one list for every design, named
#: failures have different names in every design, and the Monte Carlo has its own flags.
SWEEP_FIXED_OPTIONS = ("sizes", "fail", "fail_random")
#: Message sizes of a sweep's busbw columns when none are given.
SWEEP_SIZES = (8 << 30,)


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


#: Most values one range of a sweep file gives.
MAX_RANGE_VALUES = 1000


def _grid_values(path: Path, name: str, value: Any) -> list[Any]:
    """The values of one axis of a sweep file's grid: a list, one value, or a range
    ``{from: A, to: B, step: S}`` (A, A + S, ... up to B) or ``{from: A, to: B, times: F}``
    (A, A x F, ... up to B), of numbers.

    >>> _grid_values(Path("s.yaml"), "gpus", {"from": 1024, "to": 8192, "times": 2})
    [1024, 2048, 4096, 8192]
    >>> _grid_values(Path("s.yaml"), "oversubscription", {"from": 1, "to": 2, "step": 0.5})
    [1, 1.5, 2]
    """
    if isinstance(value, (list, tuple)):
        return list(value)
    if not isinstance(value, dict):
        return [value]
    keys = set(value)
    if not ({"from", "to"} <= keys and len(keys & {"step", "times"}) == 1 and keys <= {"from", "to", "step", "times"}):
        raise AnalysisError([f"{path}: grid {name}: a range is {{from: A, to: B, step: S}} or {{from: A, to: B, "
                             f"times: F}}, got {quote(str(value))}"])
    nums = {k: v for k, v in value.items()}
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums.values()):
        raise AnalysisError([f"{path}: grid {name}: a range's from, to, step and times are numbers"])
    start, stop = Fraction(str(nums["from"])), Fraction(str(nums["to"]))
    step, times = nums.get("step"), nums.get("times")
    if (step is not None and step <= 0) or (times is not None and times <= 1) or start > stop or \
            (times is not None and start <= 0):
        raise AnalysisError([f"{path}: grid {name}: the range from {nums['from']} to {nums['to']} must rise "
                             f"(step above 0, times above 1 from a start above 0)"])
    out, v = [], start
    while v <= stop:
        out.append(int(v) if v.denominator == 1 else float(v))
        if len(out) > MAX_RANGE_VALUES:
            raise AnalysisError([f"{path}: grid {name}: the range gives more than {MAX_RANGE_VALUES} values"])
        v = v + Fraction(str(step)) if step is not None else v * Fraction(str(times))
    return out


def _read_sweep_file(path: Path) -> dict[str, Any]:
    """A sweep file: ``spec`` (a base spec file, relative to this one) or ``base`` (its fields),
    ``grid`` (field: list of values), ``cases`` (a list of field mappings), ``sizes``,
    ``fail_random``, ``trials``."""
    from .spec import MAX_YAML_VALUES, read_spec_file

    # YAML, bounded and with its errors as one line each; its aliases may not stand for more values
    # than a file could hold written out (the grid and base are walked, copied and hashed)
    data = read_spec_file(path, max_values=MAX_YAML_VALUES)
    known = ("spec", "base", "grid", "cases", "sizes", "fail_random", "trials")
    unknown = [k for k in data if k not in known]
    if unknown:
        raise AnalysisError([f"{path}: unknown key {key_name(k)}; a sweep file has {', '.join(known)}" for k in unknown])
    if data.get("base") is not None and not isinstance(data.get("base"), dict):
        raise AnalysisError([f"{path}: base must map spec fields to values"])
    grid = data.get("grid") or {}
    if not isinstance(grid, dict):
        raise AnalysisError([f"{path}: grid must map fields to lists of values"])
    grid = {str(k): _grid_values(path, str(k), v) for k, v in grid.items()}
    empty = [k for k, v in grid.items() if not v]
    if empty:
        raise AnalysisError([f"{path}: grid {k}: no values (an axis needs one or more)" for k in empty])
    cases = data.get("cases") or []
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise AnalysisError([f"{path}: cases must be a list of mappings of fields to values"])
    return {**data, "grid": grid, "cases": cases}


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
    from .analysis.analyze import AnalysisOptions
    from .outputs.manifest import with_manifest
    from .outputs.writer import OutputFolder
    from .servers import resolve_server
    from .spec import MAX_YAML_VALUES, load_spec, read_spec_file
    from .outputs.sweep import Cache, Sweep, SweepError, Task, busbw_column, fault_key, run, task_key, MAX_DESIGNS
    from .outputs.sweep import _cpus, check_sweep_work
    from .outputs.sweep import expand as expand_grid
    from .outputs.sweep_files import front_table, sweep_files

    _check_discard(force, discard_edits)
    progress = Progress(quiet)
    with user_errors():
        definition: dict[str, Any] = {}
        base: dict[str, Any] = {}
        base_dir: Path | None = None
        grid: dict[str, list[Any]] = {}
        cases: list[dict[str, Any]] = []
        if sweep_file is not None:
            data = _read_sweep_file(sweep_file)
            if data.get("spec"):
                if spec_file is not None:
                    raise AnalysisError([f"-f {spec_file} and {sweep_file}'s spec: give the base design once"])
                spec_file = (sweep_file.parent / str(data["spec"]))
            base = dict(data.get("base") or {})
            base_dir = sweep_file.parent
            grid, cases = data["grid"], data["cases"]
            if sizes is None and data.get("sizes") is not None:
                given = data["sizes"] if isinstance(data["sizes"], list) else [data["sizes"]]
                sizes = _convert(SizeList(), "sizes", ",".join(str(s) for s in given))
            if fail_random is None and data.get("fail_random") is not None:
                fail_random = _convert(FloatRange(0.0, 1.0, max_open=True), "fail_random", data["fail_random"])
            if trials is None and data.get("trials") is not None:
                trials = _convert(IntRange(0, 10_000), "trials", data["trials"])
        if spec_file is not None:
            base = {**read_spec_file(spec_file, max_values=MAX_YAML_VALUES), **base}
            base_dir = spec_file.parent
        fixed = {k: fields.pop(k) for k in SWEEP_FIXED_SPEC if fields.get(k) is not None}
        for name, values in fields.items():  # flags: an axis each, replacing the sweep file's
            if values:
                grid[name] = list(values)
        spec_names = {f for f, _, _ in SPEC_FLAGS} | {"rail_only"}
        option_names = {f for f, _, _ in ANALYSIS_FLAGS if f not in SWEEP_FIXED_OPTIONS}
        fixed_names = set(SWEEP_FIXED_SPEC) | set(SWEEP_FIXED_OPTIONS)
        for name in [*grid, *(k for c in cases for k in c)]:
            if name in fixed_names:
                raise AnalysisError([f"sweep: {name} is not an axis of a sweep: give it once (--{name.replace('_', '-')})"])
            if name not in spec_names and name not in option_names:
                raise AnalysisError([f"sweep: unknown field {quote(name)}; a sweep varies spec fields "
                                     f"(topo build --help) and analysis options (topo analyze --help)"])
        sizes = tuple(sizes) if sizes else SWEEP_SIZES
        trials = (16 if fail_random else 0) if trials is None else trials
        if trials and not fail_random:
            raise AnalysisError([f"--trials {trials} draws failures: give --fail-random FRACTION as well"])
        fail_random = fail_random or 0.0
        if fail_random and not trials:
            raise AnalysisError(["--fail-random with --trials 0 draws nothing: give --trials 1 or more"])
        if scheduler and jobs:
            raise AnalysisError([f"-j {jobs} is the number of local processes; with --scheduler the cluster's "
                                 f"workers run the designs: give one or the other"])
        count = (math.prod(len(v) for v in grid.values()) if grid else (0 if cases else 1)) + len(cases)
        if count > MAX_DESIGNS:  # counted before the grid is expanded: ten axes of 1,000 values never are
            raise AnalysisError([f"sweep: {count:,} designs; at most {MAX_DESIGNS:,} in one sweep"])
        designs = expand_grid(grid, cases)
        tasks = []
        option_defaults = {f: k.get("default") for f, _, k in ANALYSIS_FLAGS if f not in SWEEP_FIXED_OPTIONS}
        for index, params in enumerate(designs, 1):
            spec_fields = {**fixed, **{k: v for k, v in params.items() if k in spec_names}}
            option_fields = {k: _option_value(k, v) for k, v in params.items() if k in option_names}
            options = AnalysisOptions(**{**option_defaults, **option_fields}, sizes=sizes, fail=(), fail_random=0.0)
            options.check()
            as_given = tuple((k, _jsonable(v)) for k, v in params.items())
            try:
                spec = load_spec(base, _spec_overrides(spec_fields), base_dir=base_dir)
                node = resolve_server(spec, base_dir).node_model()
            except TopoError as exc:
                from .outputs.sweep import _one_line

                tasks.append(Task(index, as_given, None, options, sizes, key=_params_key(as_given),
                                  error=_one_line(exc)))
                continue
            built = spec.to_dict()
            # each field as the design has it (1k is 1024), each option as parsed
            shown = tuple((k, built.get(k, v) if k in spec_names else _jsonable(getattr(options, k)))
                          for k, v in params.items())
            extra = _file_digest(options.nccl_constants) if options.nccl_constants else None
            tasks.append(Task(index, shown, spec, options, sizes, fail_random, trials,
                              key=task_key(spec, options, sizes, fail_random, trials, node=node, extra=extra),
                              node=node, fault_key=fault_key(spec, fail_random)))
        columns = tuple(dict.fromkeys(k for t in tasks for k, _ in t.params))
        definition = {"base": base, "spec_file": str(spec_file) if spec_file else None, "grid": grid,
                      "cases": cases, "fixed": {k: str(v) for k, v in fixed.items()},
                      "sizes": list(sizes), "fail_random": fail_random, "trials": trials}
        sweep = Sweep(tuple(tasks), columns, sizes, fail_random, trials, definition=_jsonable(definition))
        if no_cache:
            cache = Cache(None)
        else:
            cache = Cache(cache_dir if cache_dir is not None else _default_cache(output))
            if cache_dir is None and cache.folder is not None and os.path.islink(cache.folder):
                # a name topo chose, not the user: a link there was planted, and is never followed
                raise SweepError(f"the sweep's cache {cache.folder} is a symbolic link, which topo does not "
                                 f"follow; remove it, or name the cache folder with --cache")
        if output is not None:
            inputs = [spec_file, sweep_file, cache.folder, *_named_files(fixed, base, base_dir),
                      *sorted({Path(t.options.nccl_constants) for t in tasks if t.options.nccl_constants})]
            folder = OutputFolder(output, force, inputs, "sweep", discard_edits)
        else:
            folder = None
        counters: dict[int, Callable[[int], None]] = {}

        def update(done: int, total: int) -> None:  # total: the distinct designs (a repeat is one)
            if total not in counters:
                counters[total] = progress.counter("designs", total)
            counters[total](done)

        cache.check()
        check_sweep_work(sweep, cache, None if scheduler else max(1, min(jobs or _cpus(), len(tasks))))
        with progress.stage(f"sweep of {len(tasks):,} designs" + (f" on {scheduler}" if scheduler else "")):
            rows, stats = run(sweep, cache, jobs=jobs, scheduler=scheduler, progress=update,
                              scheduler_timeout=scheduler_timeout)
        for found, what in ((cache.rejected, "cached row"), (cache.unwritten, "row")):
            if found:  # not progress: said also with -q
                path, why = found[0]
                more = f"; and {len(found) - 1:,} more" if len(found) > 1 else ""
                done = "not trusted, computed again" if found is cache.rejected else "could not be cached"
                _echo_safely(f"topo: {_plural(len(found), what)} {done} ({path.name}: {why}{more})", err=True)
        progress.say(f"{_plural(stats.designs, 'design')}: {stats.cached:,} from the cache, {stats.computed:,} computed"
                     + (f" on {stats.where}" if stats.computed else "")
                     + (f"; {stats.failed:,} could not be built (the error column says why)" if stats.failed else ""))
        if stats.failed == stats.designs:
            first = next(r["error"] for r in rows if r.get("error"))
            raise AnalysisError([f"no design of the sweep could be built; design 1: {first}"])
        specs = [_spec_for_build(t.spec, fixed, base, base_dir) if t.spec is not None else None for t in tasks]
        if folder is not None:
            with folder:
                count = folder.write(with_manifest(sweep_files(sweep, rows, specs).items(), "sweep"))
            progress.say(f"wrote {count:,} files to {output}/")
    from .outputs.sweep_files import fronts

    data = {"designs": len(rows), "cached": stats.cached, "computed": stats.computed, "failed": stats.failed,
            "columns": list(sweep.all_columns), "rows": rows, "pareto": fronts(sweep, rows)}

    def table() -> str:
        headers, front = front_table(sweep, rows)
        head = f"Pareto front of busbw at the largest size ({busbw_column(max(sizes)).split('@')[1]}) against " \
               f"{data['pareto']['x']}: {len(front)} of {len(rows)} designs"
        return head + "\n" + format_table(headers, front) + (f"\n\nsweep: {output}/sweep.csv" if output else "")

    emit(data, fmt, table)


def _default_cache(output: Path | None) -> Path | None:
    """The cache beside ``-o OUTPUT``: ``OUTPUT.cache``. An output without a name of its own
    (``.``, ``/``, ``dir/..``) is named by where it is; one with none even there (``/``) has no
    cache, and the output's own check refuses it."""
    if output is None:
        return None
    if output.name in ("", ".", ".."):
        output = Path(os.path.abspath(output))
        if not output.name:
            return None
    return output.with_name(output.name + ".cache")


def _spec_overrides(fields: dict[str, Any]) -> dict[str, Any]:
    """A design's spec fields as flag overrides (``rail_only`` is its two fields, which the design's
    own may not contradict)."""
    fields = dict(fields)
    if fields.pop("rail_only", None):
        clash = _rail_only_clash(fields)
        if clash:
            raise AnalysisError(["rail_only is tiers=1 with rail placement; it contradicts "
                                 + ", ".join(f"{name}={value}" for name, value in clash)])
        fields.update(tiers="1", placement="rail")
    return fields


def _rail_only_clash(fields: dict[str, Any]) -> list[tuple[str, Any]]:
    """The fields given that contradict rail-only (tiers=1, rail placement), as (name, value)."""
    return [(name, fields[name]) for name, want in (("tiers", "1"), ("placement", "rail"))
            if fields.get(name) is not None and str(fields[name]) != want]


def _spec_for_build(spec: FabricSpec, fixed: dict[str, Any], base: dict[str, Any], base_dir: Path | None
                    ) -> dict[str, Any]:
    """A design's spec as ``sweep.json`` keeps it: ``spec.to_dict()`` with the files it names
    (price list, host-name table, server profile) as absolute paths, as the flags (from the working
    folder) or the base spec (from its folder) gave them, so that ``topo build -f`` takes it from
    anywhere."""
    out = spec.to_dict()
    for key, path in _named_files(fixed, base, base_dir).items():
        out[key] = str(path.resolve())
    return out


def _named_files(fixed: dict[str, Any], base: dict[str, Any], base_dir: Path | None) -> dict[str, Path]:
    """The files a sweep's designs name (price list, host-name table, server profile), as the flags
    (from the working folder) or the base spec (from its folder) gave them: those that are files."""
    found = {}
    for key in ("prices", "hostnames", "server"):
        given, where = (fixed[key], Path.cwd()) if fixed.get(key) is not None else (base.get(key), base_dir or Path.cwd())
        if isinstance(given, str):
            path = Path(given) if Path(given).is_absolute() else where / given
            if path.is_file():
                found[key] = path
    return found


def _file_digest(name: str) -> str:
    """The SHA-256 of a file a design reads (an NCCL constants file), so that editing it recomputes."""
    import hashlib

    from .inputs import InputFileError, read_text

    try:  # as the analysis reads it: from the working folder, a regular file of at most 1 MiB
        text = read_text(name)
    except InputFileError as exc:
        raise AnalysisError([f"--nccl-constants {exc}"]) from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _params_key(params: tuple[tuple[str, Any], ...]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps([list(p) for p in params], default=str).encode()).hexdigest()


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


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


def _train_workload(fields: dict[str, Any]):
    from .inputs import InputFileError, read_text, shown_path
    from .spec import parse_yaml
    from .workload import workload_from

    values: dict[str, Any] = {}
    path = fields.pop("workload_file")
    origin: dict[str, str]
    if path is not None:
        try:  # a regular file of at most 1 MiB: never a FIFO that blocks or /dev/zero
            data = parse_yaml(read_text(path), f"--workload {shown_path(path)}")
        except InputFileError as exc:
            raise AnalysisError([f"--workload {exc}"]) from None
        except TopoError as exc:
            raise AnalysisError(exc.lines) from None
        if not isinstance(data, dict):
            raise AnalysisError([f"--workload {shown_path(path)}: expected a mapping of workload fields"])
        from .workload import WORKLOAD_KEYS

        unknown = sorted(str(k) for k in data if k not in WORKLOAD_KEYS)
        if unknown:
            raise AnalysisError([f"--workload {shown_path(path)}: {key_name(key).strip(chr(39))}: not a workload field; known: "
                                 f"{', '.join(WORKLOAD_KEYS)}" for key in unknown[:10]])
        values.update(data)
        origin = {key: f"--workload {shown_path(path)}: " for key in data}
    else:
        origin = {}
    for key, _, _ in TRAIN_FLAGS:
        if key == "workload_file":
            continue
        value = fields.pop(key)
        if value is not None:
            values[key] = value
            origin.pop(key, None)
    return workload_from(values, origin)


def _gpu_counts(text: str) -> list[int]:
    from .spec import _gpus

    counts = []
    for item in text.split(","):
        try:
            counts.append(_gpus(item.strip()))
        except ValueError as exc:
            raise AnalysisError([f"--scale {text}: {exc}"]) from None
    if not 1 <= len(counts) <= 64:
        raise AnalysisError([f"--scale {text}: give 1 to 64 GPU counts, comma-separated"])
    return counts


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
    from .addressing import check_addressing
    from .analysis.analyze import MAX_DRAWS, AnalysisOptions, check_analysis_work
    from .fabric import build_fabric
    from .outputs.check import design_problems
    from .outputs.writer import check_output_file, write_output_file
    from .servers import resolve_server
    from .sizing import plan_fabric
    from .workload import gpu_catalog, model_catalog

    if list_catalog:
        if output is not None:
            raise click.UsageError("--list prints the catalogues; -o/--output is for a training result")
        data = {"models": {n: m.to_dict() for n, m in model_catalog().items()},
                "gpus": {n: g.to_dict() for n, g in gpu_catalog().items()}}
        emit(data, fmt, lambda: _catalog_table(data))
        return
    from .outputs.train import curve, result, run, table, what_ifs

    progress = Progress(quiet)
    with user_errors():
        analysis = {name: fields.pop(name) for name in TRAIN_ANALYSIS}
        analysis["fail"] = tuple(analysis["fail"])
        options = AnalysisOptions(**analysis)
        problems: list[str] = []  # every bad option and workload field at once
        try:
            options.check()
        except TopoError as exc:
            problems += exc.lines
        workload_file = fields["workload_file"]
        try:
            workload = _train_workload(fields)
        except TopoError as exc:
            problems += exc.lines
        if problems:
            raise AnalysisError(problems)
        if output is not None:
            check_output_file(output, force)  # at once: it exists, or is a folder
        counts = _gpu_counts(scale) if scale is not None else None
        if weak and not counts:
            raise click.UsageError("--weak goes with --scale")
        if design is not None:
            if spec_file is not None:
                raise click.UsageError("give a design folder or -f SPEC, not both")
            spec_file = design / "spec.yaml"
            if not spec_file.is_file():
                raise AnalysisError([f"{design} is not a design folder written by topo build: no spec.yaml"])
        overridden = any(value is not None for value in fields.values())
        spec = spec_from_cli(spec_file, fields, progress)
        check_addressing(spec, plan_fabric(spec))
        base_dir = spec_file.parent if spec_file and fields.get("server") is None else None
        if output is not None:  # before any work: never one of the files this reads
            check_output_file(output, force, [design, workload_file, options.nccl_constants,
                                              *build_inputs(spec, spec_file, base_dir, fields, ())])
        server = resolve_server(spec, base_dir).node_model()
        # memory and time before anything is built: each step prices its collectives one after the
        # other, each at most an analysis of the whole job; the curve and what-ifs are more steps
        steps = 1 + (len(counts) if counts else 0) + (4 if what_if else 0)
        work = check_analysis_work(spec, plan_fabric(spec), options, server, what="pricing a step",
                                   job_flag=False)
        if work.draws * steps > MAX_DRAWS:
            raise AnalysisError([f"pricing {steps} steps (--scale, --what-if) routes up to {work.queue_pairs:,} "
                                 f"queue pairs {work.samples} times each, {work.draws * steps:,} queue-pair draws, "
                                 f"which would take hours (more than {MAX_DRAWS:,}): lower --hash-samples, --qps, "
                                 f"--channels or the --scale points"])
        with progress.stage(f"building {spec.gpus:,} GPUs"):
            fabric = build_fabric(spec)
        if design is not None and not overridden:
            stale = design_problems(design, fabric)
            if stale:
                raise AnalysisError([*stale, f"rebuild it (topo build -f {spec_file} -o NEW) or see what "
                                             f"changed with topo check {design}"])
        with progress.stage(f"pricing a step of {workload.model.name}"):
            step = run(spec, workload, options, server, fabric)
        if not step.memory["fits"]:  # a warning, shown with -q too
            m = step.memory
            click.echo(f"topo: warning: {m['total_GB']:,.1f} GB per GPU does not fit the {workload.gpu.name}'s "
                       f"{m['hbm_GB']:,.0f} GB (usable {m['usable_GB']:,.1f}): more tp, pp or cp, --zero, "
                       f"--recompute full or a smaller --micro-batch", err=True)
        points = variants = None
        if counts:
            with progress.stage(f"scaling curve, {len(counts)} points"):
                points = curve(spec, workload, options, counts, weak, server,
                               progress.counter("points", len(counts)))
        if what_if:
            with progress.stage("what-ifs"):
                variants = what_ifs(spec, workload, options, step, server, progress.counter("what-ifs", 4), fabric)
        data = result(fabric, step, points, variants, weak=weak)
        if output is not None:
            write_output_file(output, (json.dumps(data, indent=2) + "\n").encode("utf-8"), force,
                              [design, workload_file, options.nccl_constants,
                               *build_inputs(spec, spec_file, base_dir, fields, ())])
    emit(data, fmt, lambda: table(data))


def _catalog_table(data: dict[str, Any]) -> str:
    models = [[n, f"{m['params'] / 1e9:,.1f}", f"{m['active_params'] / 1e9:,.1f}", m["layers"], m["hidden"],
               m["heads"], m["kv_heads"], m["seq_len"], m["experts"] or ""] for n, m in data["models"].items()]
    gpus = [[n, g["tflops"].get("bf16", ""), g["tflops"].get("fp8", ""), g["tflops"].get("fp4", ""), g["hbm_gb"],
             g["hbm_tbps"], g["nvlink_GBps"], g["nvlink_domain"]] for n, g in data["gpus"].items()]
    return (format_table(["model", "params B", "active B", "layers", "hidden", "heads", "kv heads", "seq",
                          "experts"], models) + "\n\n"
            + format_table(["gpu", "bf16 TF", "fp8 TF", "fp4 TF", "HBM GB", "HBM TB/s", "NVLink GB/s", "domain"],
                           gpus))


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
