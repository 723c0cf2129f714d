"""The media catalogue: which cable or optics a run needs, by speed and length, and what it draws.

The rules ship as data (``topo/data/optics.yaml``, its format documented in the file itself, with
the source of every reach and power figure); :func:`media_catalog` reads and checks that file or a
user's file of the same format, reporting every problem at once. :mod:`topo.cabling`
applies the rules to a fabric. ``docs/cabling.md`` carries :func:`media_table_markdown`'s table.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import yaml

from .errors import ProblemsError, quote
from .inputs import InputFileError, parse_error, read_text, shown_path

#: Media kinds.
COPPER, OPTICAL = "copper", "optical"
_MEDIUM_FIELDS = {"description", "kind", "label", "max_legs", "fibre"}
_SPEED_FIELDS = {"reach_m", "split_reach_m", "transceiver", "optical_ports", "power_w",
                 "reach_source", "power_source"}
ESTIMATE = "estimate"


class CablingError(ProblemsError):
    """A media catalogue that cannot be read, or a run that no catalogued medium reaches."""


@dataclass(frozen=True)
class Medium:
    """One medium of the catalogue (``dac``, ``acc``, ``mmf-sr``, ``smf-dr`` ...)."""

    key: str
    description: str
    kind: str  #: ``copper`` or ``optical``
    label: str = ""  #: copper: the cable's short name (``DAC``)
    max_legs: int = 1  #: copper: most ends a splitter may fan out to
    fibre: str = ""  #: optical: the fibre one optical port takes


@dataclass(frozen=True)
class MediumAtSpeed:
    """What a medium offers at one module speed."""

    reach_m: float
    split_reach_m: float  #: reach of a copper splitter (= reach_m when the catalogue is silent)
    transceiver: str | None  #: optical: module name template with ``{ff}`` for the form factor
    optical_ports: int  #: optical: fibre connectors of the module
    power_w: float  #: per transceiver (optical) or per cable end (copper)
    reach_source: str
    power_source: str


@dataclass(frozen=True)
class Cage:
    """Pluggable cages of a switch model or of a NIC."""

    form_factor: str
    ports_per_cage: int = 1


@dataclass(frozen=True, eq=False)
class MediaCatalog:
    """The media rules: media in order of preference, their reach and modules per speed.

    Read one with :func:`media_catalog`; the file format is documented in ``optics.yaml`` itself.
    """

    media: tuple[Medium, ...]
    speeds: Mapping[str, Mapping[str, MediumAtSpeed]]
    switches: Mapping[str, Cage]
    default_switch: Cage
    nic: Cage
    switch_power_includes_optics: bool
    stock_lengths_m: Mapping[str, tuple[float, ...]]
    step_m: float
    sources: Mapping[str, str]

    def entry(self, gbps: int, lane_gbps: int) -> Mapping[str, MediumAtSpeed] | None:
        """Media offered for modules of ``gbps`` on ``lane_gbps`` lanes (None if not catalogued)."""
        return self.speeds.get(f"{gbps}/{lane_gbps}") or self.speeds.get(str(gbps))

    def cage(self, model: str | None) -> Cage:
        """Cages of a switch model (the default cage when no model is named or it is not listed)."""
        return self.switches.get(model, self.default_switch) if model else self.default_switch

    def speed_names(self) -> list[str]:
        return list(self.speeds)


def _read_catalog(data: Any, where: str) -> MediaCatalog:
    """Check a catalogue mapping and build it; every problem is reported at once."""
    try:
        return _read_catalog_fields(data, where)
    except (TypeError, AttributeError, ValueError) as exc:  # a key or value of a shape no field takes
        raise CablingError([f"{where}: malformed media catalogue ({quote(str(exc))})"]) from None


def _read_catalog_fields(data: Any, where: str) -> MediaCatalog:
    problems: list[str] = []
    if not isinstance(data, Mapping):
        raise CablingError([f"{where}: expected a mapping with media, speeds, switches, ..."])
    sources = data.get("sources") or {}
    if not isinstance(sources, Mapping):
        problems.append(f"{where}: sources must be a mapping of key: text")
        sources = {}
    media = _read_media(data.get("media"), where, problems)
    speeds = _read_speeds(data.get("speeds"), {m.key: m.kind for m in media}, sources, where, problems)
    raw_switches = data.get("switches") or {}
    if not isinstance(raw_switches, Mapping):
        problems.append(f"{where}: switches must be a mapping of switch model: cage")
        raw_switches = {}
    switches = {str(k): _read_cage(v, where, f"switches.{k}", problems) for k, v in raw_switches.items()}
    default_switch = _read_cage(data.get("default_switch"), where, "default_switch", problems)
    nic = _read_cage(data.get("nic"), where, "nic", problems)
    lengths, step = _read_stock(data.get("stock_lengths_m") or {}, where, problems)
    includes = data.get("switch_power_includes_optics", False)
    if not isinstance(includes, bool):
        problems.append(f"{where}: switch_power_includes_optics must be true or false")
    if problems:
        raise CablingError(problems)
    return MediaCatalog(
        media=tuple(media), speeds=speeds, switches=switches, default_switch=default_switch, nic=nic,
        switch_power_includes_optics=bool(includes), stock_lengths_m=lengths, step_m=float(step),
        sources={str(k): " ".join(str(v).split()) for k, v in sources.items()})


def _read_media(raw: Any, where: str, problems: list[str]) -> list[Medium]:
    """The ``media`` section: each medium's kind, and what copper or optics needs besides."""
    if not isinstance(raw, Mapping) or not raw:
        problems.append(f"{where}: media must be a non-empty mapping of medium: fields")
        raw = {}
    media: list[Medium] = []
    for key, fields in raw.items():
        if not isinstance(fields, Mapping):
            problems.append(f"{where}: media.{key} must be a mapping")
            continue
        unknown = set(fields) - _MEDIUM_FIELDS
        if unknown:
            problems.append(f"{where}: media.{key}: unknown fields {', '.join(sorted(unknown))}")
        kind = fields.get("kind")
        if kind not in (COPPER, OPTICAL):
            problems.append(f"{where}: media.{key}.kind must be copper or optical, got {quote(kind)}")
            continue
        max_legs = fields.get("max_legs", 1)
        if isinstance(max_legs, bool) or not isinstance(max_legs, int) or not 1 <= max_legs <= 64:
            problems.append(f"{where}: media.{key}.max_legs must be a whole number from 1 to 64")
            max_legs = 1
        if kind == OPTICAL and not fields.get("fibre"):
            problems.append(f"{where}: media.{key}: an optical medium needs a fibre")
        media.append(Medium(key=str(key), description=str(fields.get("description", key)), kind=kind,
                            label=str(fields.get("label", key)), max_legs=int(max_legs),
                            fibre=str(fields.get("fibre", ""))))
    return media


def _read_speeds(raw: Any, kinds: Mapping[str, str], sources: Mapping, where: str,
                 problems: list[str]) -> dict[str, dict[str, MediumAtSpeed]]:
    """The ``speeds`` section: per module speed (``400`` or ``400/50``), what each medium offers."""
    if not isinstance(raw, Mapping) or not raw:
        problems.append(f"{where}: speeds must be a non-empty mapping of speed: media")
        raw = {}
    speeds: dict[str, dict[str, MediumAtSpeed]] = {}
    for speed, entries in raw.items():
        speed = str(speed)
        parts = speed.split("/")
        if len(parts) > 2 or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
            problems.append(f"{where}: speeds key {quote(speed)} must be SPEED or SPEED/LANE in Gb/s, e.g. 400 "
                            f"or 400/50")
            continue
        if not isinstance(entries, Mapping):
            problems.append(f"{where}: speeds.{speed} must be a mapping of medium: fields")
            continue
        speeds[speed] = {}
        for key, fields in entries.items():
            at = f"{where}: speeds.{speed}.{key}"
            if key not in kinds:
                problems.append(f"{at}: no medium {quote(key)} in media")
                continue
            if not isinstance(fields, Mapping):
                problems.append(f"{at} must be a mapping")
                continue
            entry = _read_medium_at_speed(fields, kinds[key], int(parts[0]), sources, at, problems)
            if entry is not None:
                speeds[speed][str(key)] = entry
    return speeds


def _read_medium_at_speed(fields: Mapping, kind: str, gbps: int, sources: Mapping, at: str,
                          problems: list[str]) -> MediumAtSpeed | None:
    """One medium at one speed: reach, power, transceiver and optical ports, and their sources."""
    unknown = set(fields) - _SPEED_FIELDS
    if unknown:
        problems.append(f"{at}: unknown fields {', '.join(sorted(unknown))}")
    reach = fields.get("reach_m")
    if isinstance(reach, bool) or not isinstance(reach, (int, float)) or reach <= 0:
        problems.append(f"{at}.reach_m must be a length in metres, got {quote(reach)}")
        return None
    split = fields.get("split_reach_m", reach)
    power = fields.get("power_w", 0)
    if isinstance(power, bool) or not isinstance(power, (int, float)) or power < 0:
        problems.append(f"{at}.power_w must be watts (0 or more), got {quote(power)}")
        power = 0
    ports = fields.get("optical_ports", 1)
    transceiver = fields.get("transceiver")
    if kind == OPTICAL:
        if not transceiver:
            problems.append(f"{at}: an optical medium needs a transceiver name")
        if not isinstance(ports, int) or ports < 1 or gbps % ports:
            problems.append(f"{at}.optical_ports must be a whole number dividing {gbps}")
            ports = 1
    for name in ("reach_source", "power_source"):
        source = fields.get(name, ESTIMATE)
        if source != ESTIMATE and source not in sources:
            problems.append(f"{at}.{name}: no source {quote(source)} in sources")
    return MediumAtSpeed(
        reach_m=float(reach), split_reach_m=float(split),
        transceiver=str(transceiver) if transceiver else None, optical_ports=int(ports) if kind == OPTICAL else 1,
        power_w=float(power), reach_source=str(fields.get("reach_source", ESTIMATE)),
        power_source=str(fields.get("power_source", ESTIMATE)))


def _read_cage(value: Any, where: str, at: str, problems: list[str]) -> Cage:
    """A switch model's or the NIC's cage: its form factor and the fabric ports it holds."""
    if not isinstance(value, Mapping) or not value.get("form_factor"):
        problems.append(f"{where}: {at} needs a form_factor")
        return Cage("?")
    per = value.get("ports_per_cage", 1)
    if not isinstance(per, int) or per < 1:
        problems.append(f"{where}: {at}.ports_per_cage must be a whole number, 1 or more")
        per = 1
    return Cage(str(value["form_factor"]), per)


def _read_stock(stock: Any, where: str, problems: list[str]) -> tuple[dict[str, tuple[float, ...]], float]:
    """The stock cable lengths of copper and optics, and the step beyond the longest."""
    if not isinstance(stock, Mapping):
        problems.append(f"{where}: stock_lengths_m must be a mapping of copper, optical and step_m")
        stock = {}
    lengths: dict[str, tuple[float, ...]] = {}
    for kind in (COPPER, OPTICAL):
        values = stock.get(kind, [])
        if not isinstance(values, list) or not all(isinstance(v, (int, float)) and v > 0 for v in values):
            problems.append(f"{where}: stock_lengths_m.{kind} must be a list of lengths in metres")
            values = []
        lengths[kind] = tuple(sorted(float(v) for v in values))
    step = stock.get("step_m", 50)
    if isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0:
        problems.append(f"{where}: stock_lengths_m.step_m must be a length in metres")
        step = 50
    return lengths, step


@lru_cache(maxsize=1)
def _packaged_catalog() -> MediaCatalog:
    text = resources.files("topo.data").joinpath("optics.yaml").read_text(encoding="utf-8")
    return _read_catalog(yaml.safe_load(text), "optics.yaml")


def media_catalog(path: str | Path | None = None) -> MediaCatalog:
    """The media catalogue shipped with topo, or one read from a YAML file of the same format.

    Raises
    ------
    CablingError
        If the file cannot be read or a field is wrong (all problems at once).
    """
    if path is None:
        return _packaged_catalog()
    path = Path(path)
    try:
        data = yaml.safe_load(read_text(path))
    except InputFileError as exc:
        raise CablingError([f"media catalogue {exc}"]) from None
    except (RecursionError, ValueError, yaml.YAMLError) as exc:
        raise CablingError([parse_error(exc, f"media catalogue {shown_path(path)}")]) from None
    return _read_catalog(data, str(path))


def speed_text(gbps: int) -> str:
    """``400G``, ``800G``, ``1.6T``.

    >>> speed_text(400), speed_text(1600)
    ('400G', '1.6T')
    """
    return f"{gbps / 1000:g}T" if gbps >= 1000 and gbps % 100 == 0 else f"{gbps}G"


def media_table_markdown(catalog: MediaCatalog | None = None) -> str:
    """The media rules as a Markdown table (docs/cabling.md carries this exact table)."""
    catalog = catalog or media_catalog()
    lines = ["| speed | medium | reach | splitter reach | transceiver | power | reach source | power source |",
             "|---|---|---|---|---|---|---|---|"]
    order = {m.key: i for i, m in enumerate(catalog.media)}
    for speed, entries in catalog.speeds.items():
        for key in sorted(entries, key=order.__getitem__):
            e = entries[key]
            split = f"{e.split_reach_m:g} m" if e.split_reach_m != e.reach_m else ""
            unit = "W per end" if e.transceiver is None else "W"
            lines.append(
                f"| {speed} | {key} | {e.reach_m:g} m | {split} | {e.transceiver or '(copper)'} | "
                f"{e.power_w:g} {unit} | {e.reach_source} | {e.power_source} |")
    return "\n".join(lines) + "\n"
