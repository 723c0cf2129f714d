"""The fabric spec: what the user asks for, validated, with defaults merged.

A spec comes from a YAML file, from CLI flags, or both (flags win). :func:`load_spec` checks every
field and reports all problems at once in one :class:`~topo.errors.SpecError`, each line naming the
field and the numbers. Whether the fields fit together as a fabric (ports, radix, tiers) is checked
by :func:`topo.sizing.plan_fabric`.
"""

from __future__ import annotations

import csv
import io
import ipaddress
import re
import string
from dataclasses import asdict, dataclass, field, fields
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from .catalog import platform_catalog, switch_catalog
from .errors import SpecError, did_you_mean, key_name, quote
from .inputs import MAX_TABLE_BYTES, InputFileError, ascii_digits, parse_error, problem_kind, read_text, shown_path
from .yamlio import parse_yaml

#: Values of ``tiers``.
TIERS = ("auto", 1, 2, 3)
#: Values of ``placement``.
PLACEMENTS = ("rail", "rack")
#: The FRR release a current SONiC ships (sonic-buildimage rules/frr.mk), written as ``frr version``.
DEFAULT_FRR_VERSION = "10.5.4"
#: The most watts topo takes for one switch (a large chassis is a few kW).
MAX_SWITCH_WATTS = 100_000
_FRR_VERSION_RE = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}")

#: Values of ``qos``: lossless RoCE profiles (see docs/configs.md).
QOS_PROFILES = ("nvidia", "sonic")
#: Values of ``asn_size``.
ASN_SIZES = ("auto", 2, 4)
#: Largest MTU a SONiC port takes.
MAX_MTU = 9216

_NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,39}")
#: Upper bounds that keep every port, lane and index inside its array type and every loop short.
MAX_GPUS = 4_194_304
MAX_RADIX = 2048
MAX_BREAKOUT = 8
#: GPUs or NICs in one server (an NVL72 rack is 18 servers of 4 GPUs).
MAX_PER_NODE = 64
#: Most spare trays a rack may keep (the server profile bounds it by its trays per NVLink domain).
MAX_SPARE_TRAYS = 64
#: Fastest link, in Gb/s (a 1.6T port is 1,600).
MAX_GBPS = 12_800
#: Most planes a fabric may have (a NIC port of a 1.6T NIC split eight ways is 200G).
MAX_PLANES = 8
#: Most spines a spec may ask for (per pod in three tiers).
MAX_SPINES = 4096
#: Largest down:up ratio, and most digits in either number of one.
MAX_RATIO = 1000
#: Least downlink:uplink ratio: a leaf may have up to twice the bandwidth up that it has down
#: (under-subscribed, as some production leaves are: 1:1.125), no more.
MIN_RATIO = Fraction(1, 2)
#: Longest host name (RFC 1123 label) and host-name pattern.
MAX_HOSTNAME = 63
MAX_PATTERN = 253


@dataclass(frozen=True, kw_only=True)
class FabricSpec:
    """A validated fabric spec. Build one with :func:`load_spec`.

    Every field is documented in ``docs/spec.md``; bandwidths are in Gb/s.

    Examples
    --------
    >>> spec = load_spec({"gpus": 1024})
    >>> spec.gpus, spec.gpus_per_node, spec.nics_per_node, spec.radix, spec.tiers
    (1024, 8, 8, 64, 'auto')
    >>> spec.nodes
    128
    """

    name: str = "cluster"
    gpus: int
    gpus_per_node: int = 8
    nics_per_node: int = 8
    nic_gbps: int = 400
    planes: int = 1
    dual_tor: bool = False
    switch: str | None = None
    leaf_switch: str | None = None
    spine_switch: str | None = None
    core_switch: str | None = None
    platform: str | None = None
    switch_watts: float | None = None
    radix: int = 64
    port_gbps: int = 400
    tiers: str | int = "auto"
    oversubscription: Fraction = Fraction(1)
    spine_oversubscription: Fraction = Fraction(1)
    placement: str = "rail"
    spines: int | None = None
    grow_to: int | None = None
    loopback_pool: str = "10.255.0.0/16"
    p2p_pool: str = "10.64.0.0/11"
    host_pool: str = "10.128.0.0/11"
    asn_size: str | int = "auto"
    unnumbered: bool = False
    bfd: bool = False
    qos: str = "nvidia"
    mtu: int = 9100
    frr_version: str = DEFAULT_FRR_VERSION
    routing_mode: str = "split-unified"
    cable_node_leaf_m: float | None = None
    cable_leaf_spine_m: float = 50.0
    cable_spine_core_m: float = 100.0
    hostnames: str | None = None
    server: str | None = None
    prices: str | None = None
    #: trays of each rack (NVLink domain) kept out of the job, for a profile whose domain spans trays
    spare_trays: int = 0
    #: host names read from a ``hostnames`` CSV file, by node index (None for a pattern)
    hostname_table: tuple[str, ...] | None = field(default=None, repr=False)
    #: the price list ``prices`` names, read and checked (None without one)
    price_table: "PriceTable | None" = field(default=None, repr=False)

    @property
    def nodes(self) -> int:
        """Servers in the fabric."""
        return self.gpus // self.gpus_per_node

    @property
    def nic_ports(self) -> int:
        """Fabric links of one server: each NIC's ``planes`` ports, one into each plane.

        A port is its own RDMA device (a PCI function of the NIC), so the NCCL topology, the host
        configs and the all-reduce model see ``nic_ports`` devices of ``nic_port_gbps`` each.

        >>> s = load_spec({"gpus": 512, "nic_gbps": 800, "planes": 2})
        >>> s.nic_ports, s.nic_port_gbps
        (16, 400)
        """
        return self.nics_per_node * self.planes

    @property
    def nic_port_gbps(self) -> int:
        """Speed of one NIC port (one device; into one plane): ``nic_gbps / planes``."""
        return self.nic_gbps // self.planes

    @property
    def homes(self) -> int:
        """Leaves each NIC port is cabled to: 2 with ``dual_tor`` (a leaf pair), else 1."""
        return 2 if self.dual_tor else 1

    @property
    def nic_links(self) -> int:
        """Cables from one server into the fabric: ``nic_ports`` x ``homes``.

        With ``dual_tor`` a NIC port's two links (members of one bond, one to each leaf of its
        pair) are one device, so ``nic_ports`` counts devices and ``nic_links`` cables.

        >>> s = load_spec({"gpus": 1024, "dual_tor": True})
        >>> s.nic_ports, s.nic_links, s.link_gbps
        (8, 16, 200)
        """
        return self.nic_ports * self.homes

    @property
    def link_gbps(self) -> int:
        """Speed of one server link: ``nic_port_gbps / homes``."""
        return self.nic_port_gbps // self.homes

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data; :func:`load_spec` reads it back to the same spec."""
        out = asdict(self)
        out["oversubscription"] = format_ratio(self.oversubscription)
        out["spine_oversubscription"] = format_ratio(self.spine_oversubscription)
        del out["hostname_table"], out["price_table"]
        if not self.spare_trays:
            del out["spare_trays"]  # as a spec of a server without multi-node NVLink was written before it
        if self.hostname_table is not None:
            out["hostnames"] = HOSTNAMES_CSV  # written beside spec.yaml in a build folder
        if self.price_table is not None:
            out["prices"] = PRICES_YAML  # likewise
        for key in ("cable_node_leaf_m", "cable_leaf_spine_m", "cable_spine_core_m"):
            value = out[key]
            if isinstance(value, float) and value.is_integer():
                out[key] = int(value)
        return out

    @property
    def cable_m(self) -> dict[str, float]:
        """Cable length per link kind; node-leaf defaults to 3 m in a rack, 20 m to rail leaves."""
        node_leaf = self.cable_node_leaf_m
        if node_leaf is None:
            node_leaf = 3.0 if self.placement == "rack" else 20.0
        return {"node-leaf": float(node_leaf), "leaf-spine": float(self.cable_leaf_spine_m),
                "spine-core": float(self.cable_spine_core_m)}


#: Spec fields of each switch tier's own model (tier 1 leaf, 2 spine, 3 core).
TIER_SWITCH_FIELDS = {1: "leaf_switch", 2: "spine_switch", 3: "core_switch"}


@dataclass(frozen=True)
class TierSwitch:
    """The switches of one tier: their model (None for a generic switch), ports and SONiC SKU."""

    tier: int
    model: str | None
    radix: int
    port_gbps: int
    platform: str | None
    chassis: bool = False  #: a modular chassis model: no config_db.json (SONiC runs per line card)


def tier_switch(spec: FabricSpec, tier: int) -> TierSwitch:
    """The switch of a tier: its own model (``leaf_switch``, ``spine_switch``, ``core_switch``), else
    ``switch``, else the leaf's model, else a generic switch of ``radix`` x ``port_gbps`` (which
    are the leaf's). The SKU is ``platform`` where it is of that model, else the model's default.

    >>> s = load_spec({"gpus": 4096, "switch": "eth-25t-64x400", "spine_switch": "eth-51t-128x400"})
    >>> [(t.model, t.radix, t.platform) for t in (tier_switch(s, 1), tier_switch(s, 2), tier_switch(s, 3))]
    [('eth-25t-64x400', 64, 'sn5400-acs'), ('eth-51t-128x400', 128, 'sn5600-o128'), ('eth-25t-64x400', 64, 'sn5400-acs')]
    """
    model = getattr(spec, TIER_SWITCH_FIELDS[tier]) or spec.switch or spec.leaf_switch
    if model is None:
        return TierSwitch(tier, None, spec.radix, spec.port_gbps, None)
    m = switch_catalog()[model]
    platform = spec.platform if spec.platform and platform_catalog()[spec.platform].switch == model else m.platform
    return TierSwitch(tier, model, m.radix, m.port_gbps, platform, m.chassis)


#: Field names, in the order they are documented and written.
FIELDS = tuple(f.name for f in fields(FabricSpec) if f.name not in ("hostname_table", "price_table"))
_FIELD_DEFAULTS = {f.name: f.default for f in fields(FabricSpec)}
#: File name of a host-name table in a build folder.
HOSTNAMES_CSV = "hostnames.csv"
#: The price list's copy in a build folder (spec.yaml names it).
PRICES_YAML = "prices.yaml"
#: The sections of a price list: what the bill of materials calls each category.
PRICE_SECTIONS = {"switches": "switch", "cables": "cable", "transceivers": "transceiver"}
MAX_PRICE = 10_000_000


@dataclass(frozen=True)
class PriceTable:
    """A price list: per unit, by BOM category and item (``examples/prices/``, docs/cabling.md)."""

    currency: str
    note: str
    prices: tuple[tuple[str, str, float], ...]  #: (category, item, price per unit), sorted

    def price(self, category: str, item: str) -> float | None:
        for c, i, p in self.prices:
            if c == category and i == item:
                return p
        return None

    def to_yaml(self) -> str:
        """The canonical copy a build folder holds (reads back to the same table)."""
        data: dict[str, Any] = {"currency": self.currency}
        if self.note:
            data["note"] = self.note
        for section, category in PRICE_SECTIONS.items():
            items = {i: (int(p) if float(p).is_integer() else p) for c, i, p in self.prices if c == category}
            if items:
                data[section] = items
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def read_price_table(path: Path) -> PriceTable:
    """Read and check a price list; ValueError naming the file, the entry and the value."""
    try:
        text = read_text(path, MAX_TABLE_BYTES)
    except InputFileError as exc:
        raise ValueError(str(exc)) from None
    try:
        data = yaml.safe_load(text)
    except (RecursionError, ValueError, yaml.YAMLError) as exc:
        raise ValueError(parse_error(exc, shown_path(path))) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with currency and switches, cables, transceivers")
    unknown = sorted(set(map(str, data)) - {"currency", "note", *PRICE_SECTIONS})
    if unknown:
        raise ValueError(f"{shown_path(path)}: unknown key {key_name(unknown[0])} (keys: currency, note, {', '.join(PRICE_SECTIONS)})")
    currency = data.get("currency", "USD")
    if not isinstance(currency, str) or not re.fullmatch(r"[A-Za-z$€£¥]{1,8}", currency):
        raise ValueError(f"{path}: currency: expected a short name such as USD, got {quote(currency)}")
    note = data.get("note", "")
    if not isinstance(note, str) or len(note) > 500:
        raise ValueError(f"{path}: note: expected a line of text, got {quote(note)}")
    prices = []
    for section, category in PRICE_SECTIONS.items():
        entries = data.get(section) or {}
        if not isinstance(entries, dict):
            raise ValueError(f"{path}: {section}: expected a mapping of item to price per unit")
        for item, value in entries.items():
            if not isinstance(item, str) or not item.strip() or len(item) > 200:
                raise ValueError(f"{path}: {section}: expected an item name, got {quote(item)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_PRICE:
                raise ValueError(f"{path}: {section}: {item}: expected a price from 0 to {MAX_PRICE:,}, "
                                 f"got {quote(value)}")
            prices.append((category, item, float(value)))
    return PriceTable(currency=currency, note=note, prices=tuple(sorted(prices)))
#: Fields a host-name pattern may use.
HOSTNAME_FIELDS = ("node", "number", "name")
_HOSTNAME_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def format_ratio(value: Fraction) -> int | float | str:
    """A ratio as the user would write it: ``3``, ``1.5``, ``"5:3"``, or ``"8:9"`` below 1.

    >>> format_ratio(Fraction(3)), format_ratio(Fraction(3, 2)), format_ratio(Fraction(1, 2))
    (3, 1.5, '1:2')
    """
    if value < 1:
        return f"{value.numerator}:{value.denominator}"
    if value.denominator == 1:
        return int(value.numerator)
    as_float = float(value)
    if Fraction(str(as_float)) == value and len(str(as_float)) <= 6:
        return as_float
    return f"{value.numerator}:{value.denominator}"


# --- field readers: each returns the value or raises ValueError with the reason -------------------


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"expected a whole number, got {quote(value)} ({type(value).__name__})")
    return value


def _positive_int(value: Any) -> int:
    number = _int(value)
    if number < 1:
        raise ValueError(f"must be at least 1, got {number}")
    return number


def _bounded(high: int, what: str) -> Callable[[Any], int]:
    """A reader of a whole number from 1 to ``high``."""

    def read(value: Any) -> int:
        number = _positive_int(value)
        if number > high:
            raise ValueError(f"must be at most {high:,} ({what}), got {number:,}")
        return number

    return read


_SUFFIXED = re.compile(r"\s*(\d{1,9}(?:\.\d{1,6})?)\s*([kKmM]?)\s*", re.ASCII)
#: GPU counts: k and M are binary, as GPU counts are quoted (a "16K" cluster has 16,384 GPUs).
_COUNT_UNITS = {"": 1, "k": 1 << 10, "K": 1 << 10, "m": 1 << 20, "M": 1 << 20}


def _gpus(value: Any) -> int:
    """``1024``, or a count with a binary suffix: ``"1k"`` (1,024), ``"16K"``, ``"1.5k"`` (1,536)."""
    if isinstance(value, str) and ascii_digits(value.strip()) and len(value.strip()) <= 4000:
        value = int(value)  # the bound is checked with the other fields
    if isinstance(value, str):
        match = _SUFFIXED.fullmatch(value)
        if not match:
            raise ValueError(f"expected a whole number such as 1024 or 16k, got {quote(value)}")
        number = Fraction(match.group(1)) * _COUNT_UNITS[match.group(2)]
        if number.denominator != 1:
            raise ValueError(f"{quote(value)} is not a whole number of GPUs ({float(number):g})")
        value = int(number)
    return _positive_int(value)


_GBPS = re.compile(r"\s*(\d{1,6}(?:\.\d{1,4})?)\s*([gGtT]?)(?:b/s|bps|bit/s)?\s*", re.ASCII)


def _gbps(value: Any) -> int:
    """A link speed in Gb/s: ``400``, ``"400G"``, ``"400Gb/s"``, ``"1.6T"`` (1,600)."""
    if isinstance(value, str):
        match = _GBPS.fullmatch(value)
        if not match:
            raise ValueError(f"expected a speed in Gb/s such as 400, 400G or 1.6T, got {quote(value)}")
        number = Fraction(match.group(1)) * (1000 if match.group(2) in "tT" and match.group(2) else 1)
        if number.denominator != 1:
            raise ValueError(f"{quote(value)} is not a whole number of Gb/s ({float(number):g})")
        value = int(number)
    number = _positive_int(value)
    if number > MAX_GBPS:
        raise ValueError(f"must be at most {MAX_GBPS:,} Gb/s, got {number:,}")
    return number


_RATIO_NUMBER = r"\s*(\d{1,6}(?:\.\d{1,6})?)\s*"
_RATIO = re.compile(_RATIO_NUMBER + r"(?::" + _RATIO_NUMBER + r")?", re.ASCII)


def _ratio(value: Any) -> Fraction:
    """``3``, ``1.5``, ``"3:1"`` or ``"48:16"`` -> Fraction(down, up).

    Numbers are read from their text (at most 6 digits before and after the point), never as
    arbitrary-precision exponents, so ``1e99999999`` is refused at once.
    """
    expected = f"expected a ratio such as 1, 3 or '3:1' (downlink:uplink), got {quote(value)}"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(expected)
    text = value if isinstance(value, str) else repr(value)
    match = _RATIO.fullmatch(text)
    if not match:
        raise ValueError(expected)
    down = Fraction(match.group(1))
    up = Fraction(match.group(2)) if match.group(2) is not None else Fraction(1)
    if down <= 0 or up <= 0:
        raise ValueError(expected)
    ratio = down / up if match.group(2) is not None else down.limit_denominator(10_000)
    if ratio > MAX_RATIO:
        raise ValueError(f"must be at most {MAX_RATIO}:1, got {float(ratio):g}")
    if ratio < MIN_RATIO:
        inverse = 1 / ratio
        flipped = (f"{match.group(2).strip()}:{match.group(1).strip()}" if match.group(2) is not None
                   else f"{inverse.numerator}:{inverse.denominator}")
        raise ValueError(
            f"must be at least {MIN_RATIO.numerator}:{MIN_RATIO.denominator} (downlink:uplink bandwidth; 1 is "
            f"non-blocking, below 1 under-subscribed), got {float(ratio):g}; did you mean {flipped}?"
        )
    return ratio


def _tiers(value: Any) -> str | int:
    if isinstance(value, str) and ascii_digits(value.strip()) and len(value.strip()) <= 4:
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value in TIERS and not isinstance(value, bool):
        return value
    raise ValueError(f"expected one of auto, 1, 2, 3, got {quote(value)}")


def _one_of(allowed: tuple[str, ...]) -> Callable[[Any], str]:
    """A reader that takes one of ``allowed`` strings, with a "did you mean" hint otherwise."""

    def read(value: Any) -> str:
        if value in allowed:
            return value
        hint = did_you_mean(value, allowed) if isinstance(value, str) else ""
        raise ValueError(f"expected {' or '.join(allowed) if len(allowed) == 2 else 'one of ' + ', '.join(allowed)}"
                         f", got {quote(value)}{hint}")

    return read


_placement = _one_of(PLACEMENTS)


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise ValueError(
            f"expected a host-name-safe prefix (lower-case letters, digits and '-', starting with a "
            f"letter, at most 40 characters), got {quote(value)}"
        )
    return value


def _catalog_name(what: str, catalog: Callable[[], Mapping[str, Any]]) -> Callable[[Any], str | None]:
    """A reader of a name from a catalogue (or None), refusing unknown names with close matches."""
    def read(value: Any) -> str | None:
        if value is None:
            return None
        names = catalog()
        if not isinstance(value, str) or value not in names:
            hint = did_you_mean(value, names) if isinstance(value, str) else ""
            raise ValueError(f"unknown {what} {quote(value)}{hint}; known: {', '.join(names)}")
        return value
    return read


_platform = _catalog_name("SONiC platform", platform_catalog)
_switch = _catalog_name("switch model", switch_catalog)


def _optional_positive_int(value: Any) -> int | None:
    return None if value is None else _positive_int(value)


def _pool(value: Any) -> str:
    try:
        net = ipaddress.IPv4Network(value, strict=True) if isinstance(value, str) else None
    except ValueError as exc:
        raise ValueError(f"expected an IPv4 prefix such as 10.64.0.0/11, got {quote(value)} ({exc})") from None
    if net is None:
        raise ValueError(f"expected an IPv4 prefix such as 10.64.0.0/11, got {quote(value)}")
    return str(net)


def _asn_size(value: Any) -> str | int:
    if isinstance(value, str) and ascii_digits(value.strip()) and len(value.strip()) <= 4:
        value = int(value)
    if value in ASN_SIZES and not isinstance(value, bool):
        return value
    raise ValueError(f"expected auto, 2 or 4 (bytes), got {quote(value)}")


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError(f"expected true or false, got {quote(value)}")


_qos = _one_of(QOS_PROFILES)
#: SONiC's docker_routing_config_mode values topo writes: split-unified (frr.conf owns BGP) or
#: unified (bgpcfgd makes BGP from config_db's BGP_NEIGHBOR and STATIC_ROUTE).
ROUTING_MODES = ("split-unified", "unified")
_routing_mode = _one_of(ROUTING_MODES)


def _frr_version(value: Any) -> str:
    text = value if isinstance(value, str) else None
    if text is None or not _FRR_VERSION_RE.fullmatch(text):
        raise ValueError(f"expected an FRR release such as {DEFAULT_FRR_VERSION} or 8.4, got {quote(value)}")
    return text


def _mtu(value: Any) -> int:
    mtu = _int(value)
    if not 1500 <= mtu <= MAX_MTU:
        raise ValueError(f"must be from 1500 to {MAX_MTU} bytes, got {mtu}")
    return mtu


def _metres(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a length in metres, got {quote(value)}")
    if not 0 < value <= 10_000:
        raise ValueError(f"must be more than 0 and at most 10,000 m, got {value}")
    return float(value)


def _optional_metres(value: Any) -> float | None:
    return None if value is None else _metres(value)


def _switch_watts(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected the watts of one switch, got {quote(value)}")
    if not 0 < value <= MAX_SWITCH_WATTS:
        raise ValueError(f"must be more than 0 and at most {MAX_SWITCH_WATTS:,} W, got {value:g}")
    return float(value)


_READERS: dict[str, Callable[[Any], Any]] = {
    "name": _name,
    "gpus": _gpus,
    "gpus_per_node": _bounded(MAX_PER_NODE, "GPUs in one server"),
    "nics_per_node": lambda value: None if value is None else _bounded(MAX_PER_NODE, "NICs in one server")(value),
    "nic_gbps": _gbps,
    "planes": _bounded(MAX_PLANES, "planes"),
    "dual_tor": _bool,
    "switch": _switch,
    "leaf_switch": _switch,
    "spine_switch": _switch,
    "core_switch": _switch,
    "platform": _platform,
    "switch_watts": _switch_watts,
    "radix": _positive_int,
    "port_gbps": _gbps,
    "tiers": _tiers,
    "oversubscription": _ratio,
    "spine_oversubscription": _ratio,
    "placement": _placement,
    "spines": lambda value: None if value is None else _bounded(MAX_SPINES, "spines")(value),
    "grow_to": lambda value: None if value is None else _gpus(value),
    "loopback_pool": _pool,
    "p2p_pool": _pool,
    "host_pool": _pool,
    "asn_size": _asn_size,
    "unnumbered": _bool,
    "bfd": _bool,
    "qos": _qos,
    "mtu": _mtu,
    "frr_version": _frr_version,
    "routing_mode": _routing_mode,
    "cable_node_leaf_m": _optional_metres,
    "cable_leaf_spine_m": _metres,
    "cable_spine_core_m": _metres,
    "hostnames": lambda value: None if value is None else _text(value),
    "server": lambda value: None if value is None else _profile(value),
    "prices": lambda value: None if value is None else _text(value),
    "spare_trays": lambda value: _spare_trays(value),
}
assert set(_READERS) == set(FIELDS)


def _spare_trays(value: Any) -> int:
    number = _int(value)
    if not 0 <= number <= MAX_SPARE_TRAYS:
        raise ValueError(f"must be from 0 to {MAX_SPARE_TRAYS} (trays a rack keeps out of the job), got {number:,}")
    return number


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a pattern such as 'gpu{{node:04d}}' or a CSV file, got {quote(value)}")
    return value


def _profile(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a server profile name (topo servers) or a YAML file, got {quote(value)}")
    return value


def default_hostname(name: str, nodes: int) -> str:
    """The pattern used when ``hostnames`` is not given: ``{name}-node0000`` ..."""
    width = max(4, len(str(max(nodes - 1, 0))))
    return f"{name}-node{{node:0{width}d}}"


def hostnames_from_pattern(pattern: str, name: str, nodes: int) -> list[str]:
    """Host names of ``nodes`` servers from a pattern with {node} (from 0), {number} (from 1), {name}.

    The pattern is checked before any name is made: at most 253 characters, only those fields,
    and no field wider than a host name (63 characters).

    >>> hostnames_from_pattern("gpu{number:03d}", "c", 3)
    ['gpu001', 'gpu002', 'gpu003']
    """
    _check_pattern(pattern)
    try:
        return [pattern.format(node=i, number=i + 1, name=name) for i in range(nodes)]
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise ValueError(
            f"pattern {quote(pattern)} cannot be filled ({type(exc).__name__}: {exc}); it may use "
            f"{{node}} (from 0), {{number}} (from 1) and {{name}}, e.g. 'gpu{{number:04d}}'"
        ) from None


def _check_pattern(pattern: str) -> None:
    """ValueError unless every field of a host-name pattern is one of HOSTNAME_FIELDS, at most as
    wide as a host name, with a format spec of plain characters (no nested fields)."""
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"pattern of {len(pattern):,} characters; at most {MAX_PATTERN}")
    try:
        fields_ = list(string.Formatter().parse(pattern))
    except ValueError as exc:
        raise ValueError(f"pattern {quote(pattern)} cannot be filled ({exc}); it may use {{node}} (from 0), "
                         f"{{number}} (from 1) and {{name}}, e.g. 'gpu{{number:04d}}'") from None
    for _, field_name, spec, _ in fields_:
        if field_name is None:
            continue
        if "{" in (spec or ""):
            raise ValueError(f"pattern {quote(pattern)}: a field's format may not hold another field")
        widths = [int(w) for w in re.findall(r"\d+", spec or "")]
        if widths and max(widths) > MAX_HOSTNAME:
            raise ValueError(f"pattern {quote(pattern)}: field width {max(widths):,} is more than a host name "
                             f"holds ({MAX_HOSTNAME} characters)")


def read_hostname_table(path: Path, nodes: int) -> list[str]:
    """Host names by node index from a CSV file with the columns ``node,hostname``."""
    text = read_text(path, MAX_TABLE_BYTES)  # an InputFileError is a ValueError naming the file
    where = shown_path(path)
    # newline="": the csv module splits the lines itself, so a lone carriage return ends a line as
    # "\r\n" and "\n" do, instead of being an error
    reader = csv.reader(io.StringIO(text, newline=""))
    names: dict[int, str] = {}
    try:
        header = next(reader, None)
        if header is None or [c.strip() for c in header] != ["node", "hostname"]:
            raise ValueError(f"{where}: the first line must be the header 'node,hostname'")
        for row in reader:
            if not row or not "".join(row).strip():
                continue
            line = reader.line_num
            if len(row) != 2:
                raise ValueError(f"{where}, line {line:,}: expected the two fields node,hostname, got {len(row):,}")
            index = row[0].strip()
            if not (len(index) <= 9 and ascii_digits(index)):  # int() takes any script's digits
                raise ValueError(f"{where}, line {line:,}: expected a node index (digits 0-9) in the first field")
            node, host = int(index), row[1].strip()
            if node >= nodes:
                raise ValueError(f"{where}, line {line:,}: node {node:,} is beyond the fabric's {nodes:,} nodes "
                                 f"(0-{nodes - 1})")
            if node in names:
                raise ValueError(f"{where}, line {line:,}: node {node:,} is listed twice")
            names[node] = host
    except csv.Error as exc:  # a field past csv.field_size_limit(), a NUL, an unclosed quote
        kind = ("a field longer than csv's limit of 131,072 characters" if "field limit" in str(exc)
                else problem_kind(str(exc)))
        raise ValueError(f"{where}, line {max(reader.line_num, 1):,}: not a CSV row ({kind})") from None
    missing = [i for i in range(nodes) if i not in names]
    if missing:
        shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
        raise ValueError(f"{where}: no host name for {len(missing):,} of {nodes:,} nodes ({shown})")
    return [names[i] for i in range(nodes)]


def check_hostnames(names: list[str], source: str) -> None:
    """Every name a valid, unique host name (RFC 1123 label), or ValueError naming the first bad one."""
    for i, host in enumerate(names):
        if not _HOSTNAME_RE.fullmatch(host):
            raise ValueError(
                f"{source} gives node {i} the host name {quote(host)}, which is not a valid host name "
                f"(letters, digits and '-', at most 63, not starting or ending with '-')")
    seen: dict[str, int] = {}
    for i, host in enumerate(names):
        key = host.lower()  # DNS and Slurm compare host names without regard to case
        if key in seen:
            same = "the same host name" if names[seen[key]] == host else "host names that differ only in case"
            raise ValueError(f"{source} gives nodes {seen[key]} and {i} {same}: "
                             f"{quote(names[seen[key]])} and {quote(host)}"
                             if names[seen[key]] != host else
                             f"{source} gives nodes {seen[key]} and {i} {same} {quote(host)}")
        seen[key] = i


def node_names(spec: "FabricSpec") -> list[str]:
    """Host names of the spec's servers, by node index."""
    if spec.hostname_table is not None:
        return list(spec.hostname_table)
    pattern = spec.hostnames or default_hostname(spec.name, spec.nodes)
    return hostnames_from_pattern(pattern, spec.name, spec.nodes)


#: Most values (scalars, lists and mappings, each alias counted as what it stands for) that a file
#: read with ``max_values`` may hold: a 1 MiB file written out holds fewer than this.
MAX_YAML_VALUES = 1 << 20
#: Deepest nesting of lists and mappings such a file may have.
MAX_YAML_DEPTH = 200


class YamlTooDeep(ValueError):
    """Data nested deeper than MAX_YAML_DEPTH."""


def expanded_size(data: Any, limit: int = MAX_YAML_VALUES) -> int:
    """How many values ``data`` holds with every YAML alias counted as the values it stands for,
    counted without expanding anything (each distinct list or mapping once), up to ``limit + 1``;
    YamlTooDeep when it nests deeper than MAX_YAML_DEPTH.

    >>> leaves = ["x"] * 10
    >>> bomb = [[[leaves] * 10] * 10] * 10  # an alias bomb: ten times ten times ten aliases of one list
    >>> expanded_size(leaves), expanded_size(bomb), expanded_size(bomb, limit=1000)
    (11, 11111, 1001)
    """
    sizes: dict[int, int] = {}

    def size(value: Any, depth: int) -> int:
        if not isinstance(value, (list, dict)):
            return 1
        known = sizes.get(id(value))
        if known is not None:
            return known
        if depth > MAX_YAML_DEPTH:
            raise YamlTooDeep
        children = value.values() if isinstance(value, dict) else value
        total = 1 + (len(value) if isinstance(value, dict) else 0)  # the mapping and its keys
        for child in children:
            total += size(child, depth + 1)
            if total > limit:
                total = limit + 1
                break
        sizes[id(value)] = total
        return total

    return size(data, 0)


def read_spec_file(path: str | Path, max_values: int | None = None) -> dict[str, Any]:
    """Read a YAML spec file into a mapping, or raise SpecError saying what is wrong with it.

    With ``max_values``, a file whose aliases stand for more values than that (an alias bomb: a few
    lines that expand to a billion values) is refused before anything walks through it.
    """
    path = Path(path)
    try:
        text = read_text(path)
    except InputFileError as exc:
        raise SpecError([f"spec file {exc}"]) from None
    data = parse_yaml(text, f"spec file {path}")
    if max_values is not None:
        try:
            too_many = expanded_size(data, max_values) > max_values
        except YamlTooDeep:
            raise SpecError([f"spec file {path}: lists and mappings nested deeper than {MAX_YAML_DEPTH}"]) from None
        if too_many:
            raise SpecError([f"spec file {path}: more than {max_values:,} values with each alias (*name) counted "
                             f"as the values it stands for (an alias bomb?); write the values out, or alias fewer"])
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SpecError(
            [f"spec file {path}: expected a mapping of fields (gpus: 1024, ...), "
             f"got a {type(data).__name__}"]
        )
    return dict(data)


def load_spec(
    data: Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None,
    base_dir: str | Path | None = None, notes: list[str] | None = None,
) -> FabricSpec:
    """Validate a spec mapping (plus overrides, e.g. CLI flags) into a :class:`FabricSpec`.

    Parameters
    ----------
    data : mapping, optional
        Fields as read from a spec file.
    overrides : mapping, optional
        Fields that win over ``data``; ``None`` values are ignored (a flag not given).
    base_dir : path, optional
        Folder that a ``hostnames`` CSV path in ``data`` is relative to (the spec file's folder);
        a path given in ``overrides`` is relative to the working folder.
    notes : list, optional
        Receives a line for each value read in a unit the user may not have meant (``gpus: 16k``
        is 16,384: a binary k, as GPU counts are quoted).

    Raises
    ------
    SpecError
        With one line per problem, each naming the field and the value.

    Examples
    --------
    >>> load_spec({"gpus": 256}, {"radix": 32}).radix
    32
    >>> load_spec({"gpus": 1020})
    Traceback (most recent call last):
    ...
    topo.errors.SpecError: gpus=1020 is not a multiple of gpus_per_node=8 (1,016 or 1,024 would fit)
    """
    if data is not None and not isinstance(data, Mapping):
        raise SpecError([f"spec: expected a mapping of fields, got a {type(data).__name__}"])
    merged: dict[str, Any] = dict(data or {})
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})

    problems: list[str] = []
    for key in merged:
        if key not in _READERS:
            name = key_name(key)
            problems.append(f"unknown field {name}{did_you_mean(str(key), FIELDS)}" if name.startswith("'")
                            else f"unknown field: {name}")
    values: dict[str, Any] = {}
    for key, reader in _READERS.items():
        if key not in merged:
            continue
        try:
            values[key] = reader(merged[key])
        except ValueError as exc:
            problems.append(f"{key}: {exc}")
            continue
        raw = merged[key]
        if notes is not None and key == "gpus" and isinstance(raw, str) and raw.strip()[-1:] in _COUNT_UNITS:
            notes.append(f"gpus: {raw.strip()} read as {values[key]:,} GPUs (k = 1,024, M = 1,048,576)")
    if "gpus" not in merged:
        problems.append("gpus: required (how many GPUs the fabric connects), e.g. gpus: 1024")

    _merge_server_shape(values, merged, overrides or {}, base_dir, notes)
    _merge_switch_model(values, merged, problems)
    if values.get("switch") is None:
        _leaf_geometry(values, merged, problems)
    bad = {p.split(":")[0] for p in problems}
    for f in fields(FabricSpec):  # defaults for fields not given (nor refused)
        if f.name not in values and f.name not in bad and f.name not in ("gpus", "nics_per_node"):
            values[f.name] = f.default
    if values.get("nics_per_node") is None:
        values["nics_per_node"] = values.get("gpus_per_node", 8)
    _check_relations(values, problems)
    _check_tier_switches(values, problems)
    if not problems:
        _resolve_hostnames(values, overrides or {}, base_dir, problems)
        _resolve_prices(values, overrides or {}, base_dir, problems)
    if problems:
        raise SpecError(problems)
    return FabricSpec(**values)


def _resolve_prices(values: dict[str, Any], overrides: Mapping[str, Any],
                    base_dir: str | Path | None, problems: list[str]) -> None:
    """Read the price list ``prices`` names (relative to the spec file when the spec names it)."""
    given = values.get("prices")
    if given is None:
        return
    try:
        values["price_table"] = read_price_table(hostnames_file(given, overrides.get("prices") is not None, base_dir))
    except ValueError as exc:
        problems.append(f"prices: {exc}")


def _resolve_hostnames(values: dict[str, Any], overrides: Mapping[str, Any],
                       base_dir: str | Path | None, problems: list[str]) -> None:
    """Check the host names now (the node count is known), reading a CSV table if one is named."""
    given = values.get("hostnames")
    nodes = values["gpus"] // values["gpus_per_node"]
    try:
        if given is None:
            names = hostnames_from_pattern(default_hostname(values["name"], nodes), values["name"], nodes)
            source = "the default pattern"
        else:
            path = hostnames_file(given, overrides.get("hostnames") is not None, base_dir)
            if given.lower().endswith(".csv") or _is_file(path):
                names = read_hostname_table(path, nodes)
                values["hostname_table"] = tuple(names)
                source = shown_path(path)
            else:
                names = hostnames_from_pattern(given, values["name"], nodes)
                source = f"pattern {quote(given)}"
        check_hostnames(names, source)
    except ValueError as exc:
        problems.append(f"hostnames: {exc}")


def _is_file(path: Path) -> bool:
    """Whether a regular file is at ``path``; False for a name the system refuses (too long, a NUL)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def hostnames_file(given: str, from_flag: bool, base_dir: str | Path | None) -> Path:
    """Where a ``hostnames`` value would be read as a CSV table: relative to the spec file's folder
    when the spec file names it, to the working folder when a flag does."""
    path = Path(given)
    if not path.is_absolute() and not from_flag and base_dir is not None:
        path = Path(base_dir) / path
    return path


#: The node shape a server profile sets when the spec does not give it: field -> the profile's value.
SERVER_SHAPE_FIELDS = {"gpus_per_node": "gpu_count", "nics_per_node": "nic_count", "nic_gbps": "nic_gbps"}


def _merge_server_shape(values: dict[str, Any], given: Mapping[str, Any], overrides: Mapping[str, Any],
                        base_dir: str | Path | None, notes: list[str] | None) -> None:
    """Take GPUs and NICs per node and the NIC speed from the ``server`` profile where the spec
    does not give them (a NIC's whole speed: with ``planes`` it is split into one port per plane).
    A value given that contradicts the profile is refused later, by the profile's check; a profile
    that cannot be read is reported there too (nothing is taken from it here)."""
    from .hardware.shipped import find_profile  # the catalogue reads YAML through topo.yamlio, not this module

    server = values.get("server")
    if server is None or all(given.get(f) is not None for f in SERVER_SHAPE_FIELDS):
        return
    from_flag = overrides.get("server") is not None  # a path the spec file names is relative to its folder
    try:
        profile = find_profile(server, None if from_flag else base_dir)
    except SpecError:
        return
    taken = []
    for name, attribute in SERVER_SHAPE_FIELDS.items():
        if given.get(name) is None:
            values[name] = getattr(profile, attribute)
            if values[name] != _FIELD_DEFAULTS[name]:
                taken.append(f"{name}={values[name]}")
    if taken and notes is not None:
        notes.append(f"server={profile.name}: {', '.join(taken)} from the profile")


def _merge_switch_model(values: dict[str, Any], given: Mapping[str, Any], problems: list[str]) -> None:
    """Take radix and port speed from the named switch model; explicit values must agree."""
    model_name = values.get("switch")
    platform = values.get("platform")
    if platform is not None:
        sku = platform_catalog()[platform]
        if model_name is None:
            values["switch"] = model_name = sku.switch  # the SKU names its model
        elif model_name != sku.switch:
            problems.append(f"platform={platform} is a SKU of switch {sku.switch}, not of switch={model_name}; "
                            f"{model_name}'s platforms: "
                            f"{', '.join(n for n, p in platform_catalog().items() if p.switch == model_name) or 'none'}")
            return
    if model_name is None:
        return
    if values.get("switch_watts") is not None and "switch_watts" in given:
        problems.append(f"switch_watts={values['switch_watts']:g} is for a switch without a model, but "
                        f"switch={model_name} has its own power ({switch_catalog()[model_name].power_w:,} W); "
                        f"give one or the other")
    model = switch_catalog()[model_name]
    if platform is None and model.platform is not None:
        values["platform"] = model.platform
    _leaf_geometry(values, given, problems)


def _leaf_geometry(values: dict[str, Any], given: Mapping[str, Any], problems: list[str]) -> None:
    """radix and port_gbps are the leaf's: of leaf_switch, else of switch (explicit values must agree)."""
    field = "leaf_switch" if values.get("leaf_switch") else "switch"
    model_name = values.get(field)
    if model_name is None:
        return
    model = switch_catalog()[model_name]
    for field_name in ("radix", "port_gbps"):
        model_value = getattr(model, field_name)
        if field_name in given and field_name in values and values[field_name] != model_value:
            problems.append(
                f"{field_name}={values[field_name]} conflicts with {field}={model_name} "
                f"({field_name} {model_value}); give one or the other"
            )
        values[field_name] = model_value


def _check_tier_switches(values: dict[str, Any], problems: list[str]) -> None:
    """Per-tier models fit together: one technology, port speeds where the faster is a whole number
    of the slower (its ports are broken out to meet them), and no modular chassis as a leaf."""
    tiered = [values.get(f) for f in TIER_SWITCH_FIELDS.values()]
    leaf = tiered[0] or values.get("switch")
    if leaf and switch_catalog()[leaf].chassis:
        field = "leaf_switch" if tiered[0] else "switch"
        problems.append(f"{field}={leaf} is a modular chassis, a spine or core: a leaf's server ports need its own "
                        f"SONiC config_db.json, which a chassis (SONiC per line card) does not get; name it as "
                        f"spine_switch or core_switch and a fixed switch as the leaf")
    if not any(tiered):
        return
    chain = [tiered[0] or values.get("switch")]
    chain += [t or values.get("switch") or values.get("leaf_switch") for t in tiered[1:]]
    catalog = switch_catalog()
    speeds = [catalog[m].port_gbps if m else values.get("port_gbps") for m in chain]
    techs = {catalog[m].technology if m else "ethernet" for m in chain}
    if len(techs) > 1:
        problems.append("leaf_switch, spine_switch, core_switch: "
                        + ", ".join(f"{name}={m or 'generic Ethernet'}" for name, m in zip(TIER_SWITCH_FIELDS.values(), chain))
                        + " mix Ethernet and InfiniBand; every tier must be of one technology")
    elif techs == {"infiniband"} and len({s for s in speeds if isinstance(s, int)}) > 1:
        problems.append("leaf_switch, spine_switch, core_switch: "
                        + ", ".join(f"{name}={m}" for name, m in zip(TIER_SWITCH_FIELDS.values(), chain))
                        + " are InfiniBand models of different port speeds; topo breaks faster ports out only on "
                        "Ethernet (an InfiniBand generation's split ports and optics are not modelled): pick one speed")
        return
    names = list(TIER_SWITCH_FIELDS.values())
    for t in (1, 2):
        lo, hi = speeds[t - 1], speeds[t]
        if not tiered[t] and not (t == 2 and values.get("tiers") == 3):
            continue  # a tier without its own model (a core in two tiers is none): sizing checks it if built
        if isinstance(lo, int) and isinstance(hi, int) and hi != lo:
            # the tiers meet at the slower speed, each faster port broken out into equal lanes
            fast, slow = max(lo, hi), min(lo, hi)
            pair = (f"{names[t]}={chain[t] or 'generic'} ({hi}G ports) over {names[t - 1]}="
                    f"{chain[t - 1] or 'generic'} ({lo}G ports)")
            if fast % slow:
                problems.append(f"{pair}: {fast}G is not a whole number of {slow}G links, so the faster ports "
                                f"cannot be broken out to the slower; pick models whose port speeds divide")
            elif fast // slow > MAX_BREAKOUT:
                problems.append(f"{pair}: a {fast}G port broken out into {fast // slow} links of {slow}G; "
                                f"at most {MAX_BREAKOUT} are supported")


#: Ports of each leaf of a dual-ToR pair that its peer link (the MCLAG inter-switch link) takes,
#: out of the leaf's uplinks.
PEER_LINK_PORTS = 2
#: Queue pairs per connection on a dual-ToR fabric when none are asked for: the least that gives each
#: link of a NIC's bond one of a connection's queue pairs (its LAG keeps a queue pair on one link).
DUAL_TOR_QPS = 2
#: Most NICs one dual-ToR pair serves: SONiC numbers PortChannels with at most four digits, and the
#: peer link takes the last number.
MAX_PAIR_NICS = 9998


def _check_dual_tor(values: dict[str, Any], nic_gbps: int | None, planes: Any, problems: list[str]) -> None:
    """What ``dual_tor`` cannot be combined with."""
    if nic_gbps is not None and nic_gbps % 2:
        problems.append(f"dual_tor: nic_gbps={values['nic_gbps']} does not split into two links of equal whole Gb/s "
                        f"(each NIC port is bonded over two links, one to each leaf of a pair)")
    if isinstance(planes, int) and planes > 1:
        problems.append(f"dual_tor with planes={planes}: a dual-ToR pair is two leaves of one plane; "
                        f"use one or the other")
    if values.get("tiers") == 1:
        problems.append("dual_tor with tiers=1: the leaves of a pair reach each other's servers over spines "
                        "when a link fails; use tiers=2 or auto")
    if values.get("routing_mode") == "unified":
        problems.append("dual_tor with routing_mode=unified: bgpcfgd advertises a leaf's server block as a "
                        "blackhole static route, which would hold a pair's subnet on a leaf that lost it; "
                        "use routing_mode=split-unified")
    models = [values.get(f) for f in ("switch", *TIER_SWITCH_FIELDS.values())]
    ib = [m for m in models if m and switch_catalog()[m].technology == "infiniband"]
    if ib:
        problems.append(f"dual_tor with switch {ib[0]} (InfiniBand): InfiniBand has no link aggregation "
                        f"across two switches; dual_tor bonds a NIC port over an Ethernet MCLAG leaf pair")


def _check_relations(values: dict[str, Any], problems: list[str]) -> None:
    """Checks between fields that need no sizing."""
    gpus, gpn = values.get("gpus"), values.get("gpus_per_node")
    nics = values.get("nics_per_node")
    if gpus is not None and gpn is not None and gpus % gpn:
        below, above = gpus // gpn * gpn, (gpus // gpn + 1) * gpn
        fits = f"{below:,} or {above:,}" if below else f"{above:,}"
        problems.append(
            f"gpus={gpus} is not a multiple of gpus_per_node={gpn} ({fits} would fit)"
        )
    if nics is not None and gpn is not None and gpn % nics and nics % gpn:
        problems.append(
            f"nics_per_node={nics} and gpus_per_node={gpn}: one must divide the other so that every "
            f"GPU has the same share of NICs"
        )
    if gpus is not None and gpus > MAX_GPUS:
        problems.append(f"gpus={gpus} is more than topo designs (at most {MAX_GPUS:,})")
    grow = values.get("grow_to")
    if grow is not None and gpus is not None:
        if grow < gpus:
            problems.append(f"grow_to={grow} is fewer GPUs than gpus={gpus}: it is the size the spines "
                            f"and cores are cabled for, at least gpus")
        elif gpn and grow % gpn:
            problems.append(f"grow_to={grow} is not a multiple of gpus_per_node={gpn}")
        elif grow > MAX_GPUS:
            problems.append(f"grow_to={grow} is more than topo designs (at most {MAX_GPUS:,})")
    radix = values.get("radix")
    if radix is not None and radix > MAX_RADIX:
        problems.append(f"radix={radix} is more than any switch has (at most {MAX_RADIX})")
    elif radix is not None and (radix % 2 or radix < 4):
        problems.append(
            f"radix={radix} must be even and at least 4 (ports split between downlinks and uplinks)"
        )
    nic_gbps, port_gbps = values.get("nic_gbps"), values.get("port_gbps")
    planes = values.get("planes", 1)
    if nic_gbps is not None and isinstance(planes, int) and planes > 1:
        if nic_gbps % planes:
            problems.append(f"nic_gbps={nic_gbps} does not split into planes={planes} ports of equal whole Gb/s "
                            f"(each NIC has one port into each plane)")
            nic_gbps = None
        else:
            nic_gbps //= planes  # the speed of one link: a NIC port into one plane
    what = (f"nic_gbps={nic_gbps}" if planes == 1 or nic_gbps is None
            else f"nic_gbps={values['nic_gbps']} in planes={planes} ({nic_gbps}G a port)")
    if values.get("dual_tor"):
        _check_dual_tor(values, nic_gbps, planes, problems)
        if nic_gbps is not None:
            if nic_gbps % 2:
                nic_gbps = None
            else:
                what = f"{what} with dual_tor ({nic_gbps // 2}G to each leaf of the pair)"
                nic_gbps //= 2  # the speed of one link: half a NIC port, to one leaf of its pair
    if nic_gbps is not None and port_gbps is not None and port_gbps % nic_gbps:
        problems.append(
            f"{what} does not divide port_gbps={port_gbps}: a switch port must carry a "
            f"whole number of NIC links (1 or a breakout of {port_gbps}G into equal lanes)"
        )
    platform = values.get("platform")
    if platform is not None and nic_gbps and port_gbps and port_gbps % nic_gbps == 0 \
            and port_gbps // nic_gbps > 1 and platform_catalog()[platform].alias_style == "none":
        others = [n for n, p in platform_catalog().items()
                  if p.switch == values.get("switch") and p.alias_style != "none"]
        problems.append(f"platform={platform} offers no breakout, but nic_gbps={nic_gbps} on port_gbps={port_gbps} "
                        f"splits each leaf downlink into {port_gbps // nic_gbps}; use "
                        f"{', '.join(others) or 'another platform'}")
    if platform is not None:
        sku = platform_catalog()[platform]
        node_leaf = values.get("cable_node_leaf_m")
        if node_leaf is None:
            node_leaf = 3.0 if values.get("placement") == "rack" else 20.0
        for name, metres in (("cable_node_leaf_m", node_leaf), ("cable_leaf_spine_m", values.get("cable_leaf_spine_m")),
                             ("cable_spine_core_m", values.get("cable_spine_core_m"))):
            if isinstance(metres, (int, float)) and sku.table_cable_m(metres) is None:
                problems.append(f"{name}={metres:g}: platform={platform}'s headroom table lists cables up to "
                                f"{max(sku.cable_lengths_m)} m ({', '.join(f'{c} m' for c in sku.cable_lengths_m)}); "
                                f"SONiC's buffer manager has no profile for a longer one")
    if values.get("routing_mode") == "unified":
        if values.get("unnumbered"):
            problems.append("routing_mode=unified needs numbered links (unnumbered=false): SONiC's bgpcfgd "
                            "keys BGP_NEIGHBOR by peer address; use routing_mode=split-unified for unnumbered BGP")
        if values.get("bfd"):
            problems.append("routing_mode=unified cannot run BFD (bfd=true): SONiC starts bfdd only with "
                            "frr_mgmt_framework_config, which replaces bgpcfgd; use routing_mode=split-unified")
    pools = [(k, ipaddress.IPv4Network(values[k])) for k in ("loopback_pool", "p2p_pool", "host_pool")
             if values.get(k)]
    for i, (name_a, a) in enumerate(pools):
        for name_b, b in pools[i + 1:]:
            if a.overlaps(b):
                problems.append(f"{name_a}={a} and {name_b}={b} overlap; address pools must be disjoint")
    if nic_gbps is not None and port_gbps is not None and port_gbps % nic_gbps == 0 \
            and port_gbps // nic_gbps > MAX_BREAKOUT:
        problems.append(
            f"nic_gbps={nic_gbps} on port_gbps={port_gbps} is a breakout into "
            f"{port_gbps // nic_gbps} lanes; at most {MAX_BREAKOUT} are supported"
        )
