"""The switch catalogue: named models with radix, port speed and power, shipped as data."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import yaml


@dataclass(frozen=True)
class SwitchModel:
    """One switch model of the catalogue.

    Attributes
    ----------
    name : str
        Catalogue key, e.g. ``"ndr-64x400"``.
    description : str
        One line for people.
    radix : int
        Ports the fabric uses.
    port_gbps : int
        Speed of one port in Gb/s.
    lanes : int
        SerDes lanes of one port (SONiC numbers its ports by lane: ``Ethernet0``, ``Ethernet8``...).
    technology : str
        ``ethernet`` or ``infiniband``; only Ethernet switches get SONiC and FRR configs.
    buffer_mb : int
        Packet buffer of the switch chip in MB (0 where it does not apply).
    power_w : int
        Planning figure for the bill of materials, in watts.
    chassis : bool
        A modular chassis (line cards behind a switch fabric): SONiC runs one instance per line
        card there, so topo writes its ``frr.conf`` (one routing instance) but no ``config_db.json``.
    """

    name: str
    description: str
    radix: int
    port_gbps: int
    lanes: int
    technology: str
    buffer_mb: int
    power_w: int
    platform: str | None = None  #: default SONiC SKU (Ethernet models)
    chassis: bool = False  #: a modular chassis: SONiC per line card, so no config_db.json is written

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "radix": self.radix,
            "port_gbps": self.port_gbps,
            "lanes": self.lanes,
            "technology": self.technology,
            "buffer_mb": self.buffer_mb,
            "power_w": self.power_w,
            "platform": self.platform,
            "chassis": self.chassis,
            "platforms": sorted(p.name for p in platform_catalog().values() if p.switch == self.name),
        }


@lru_cache(maxsize=1)
def switch_catalog() -> dict[str, SwitchModel]:
    """All switch models shipped with topo, by name (read once)."""
    text = resources.files("topo.data").joinpath("switches.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    return {name: SwitchModel(name=name, **fields) for name, fields in raw.items()}


def power_class(radix: int, port_gbps: int) -> SwitchModel | None:
    """The catalogue's Ethernet model of ``radix`` x ``port_gbps``: whose power a switch without a
    model (and without ``switch_watts``) is taken to draw. None when no model has that shape.

    >>> power_class(64, 400).name, power_class(64, 400).power_w
    ('eth-25t-64x400', 1500)
    >>> power_class(48, 100) is None
    True
    """
    for model in switch_catalog().values():
        if model.name.startswith("eth-") and model.radix == radix and model.port_gbps == port_gbps:
            return model
    return None


# --- platforms: the SONiC SKUs of the Ethernet models ---------------------------------------------


@dataclass(frozen=True)
class Platform:
    """One real SONiC SKU of a switch model, as ``topo/data/platforms.yaml`` records it.

    A front-panel cage ``c`` (from 1) has ``cage_lanes`` SerDes lanes starting at
    ``first_lanes[c - 1]``; the SKU splits it into ``subports`` ports of the model (1, or 2 for the
    128 x 400G SKUs of a 64-cage chip). ``alias`` names a cage (``{c}``); ``alias_style`` says how
    its split ports are named: ``letter`` (``etp1a``, ``etp1b``), ``lane`` (``Ethernet1/1``,
    ``Ethernet1/5``) or ``none`` (the SKU offers no breakout).

    Examples
    --------
    >>> p = platform_catalog()["sn5600-o128"]
    >>> p.hwsku, p.platform, p.switch, p.port_lanes(1), p.port_lanes(2), p.port_alias(2, 1, 1)
    ('Mellanox-SN5600-O128', 'x86_64-nvidia_sn5600-r0', 'eth-51t-128x400', (0, 1, 2, 3), (4, 5, 6, 7), 'etp1b')
    """

    name: str
    description: str
    vendor: str
    asic: str
    switch: str
    platform: str
    hwsku: str
    cages: int
    cage_lanes: int
    subports: int
    first_lanes: tuple[int, ...]
    alias: str
    alias_style: str
    cable_lengths_m: tuple[int, ...]
    headroom_table: tuple[dict, ...]
    sources: tuple[str, ...]
    commit: str
    #: front-panel ports of the SKU beyond the model's radix (SFP ports), which its PORT table also has
    extra_ports: int = 0
    #: the SKU's buffer section of platforms.yaml (pools, profiles, profile lists), as recorded
    buffer: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def shared_headroom(self) -> bool:
        """Whether lossless PGs draw xoff from a shared headroom pool (every Tomahawk SKU; on
        Spectrum, SKUs whose pool sizes give ``ingress_lossless_pool`` an xoff, like the SN4700's)."""
        if self.vendor == "broadcom":
            return True
        return any("ingress_lossless_pool_xoff" in sizes for sizes in (self.buffer.get("pool_sizes") or {}).values())

    @property
    def lanes_per_port(self) -> int:
        return self.cage_lanes // self.subports

    def _cage(self, port: int) -> tuple[int, int]:
        return (port - 1) // self.subports + 1, (port - 1) % self.subports

    def port_lanes(self, port: int, lane: int = 1, breakout: int = 1) -> tuple[int, ...]:
        """SerDes lane numbers of model port ``port`` (from 1), breakout lane ``lane`` of ``breakout``."""
        cage, sub = self._cage(port)
        width = self.lanes_per_port // breakout
        first = self.first_lanes[cage - 1] + sub * self.lanes_per_port + (lane - 1) * width
        return tuple(range(first, first + width))

    def port_alias(self, port: int, lane: int = 1, breakout: int = 1) -> str:
        """The SKU's alias of that port (``port_config.ini``'s alias column)."""
        cage, sub = self._cage(port)
        base = self.alias.format(c=cage)
        parts = self.subports * breakout
        if parts == 1:
            return base
        k = sub * breakout + (lane - 1)
        if self.alias_style == "letter":
            return base + "abcdefgh"[k]
        if self.alias_style == "lane":
            return base.rsplit("/", 1)[0] + f"/{1 + k * self.cage_lanes // parts}"
        return base

    def table_cable_m(self, cable_m: float) -> int | None:
        """The shortest cable length the SKU's headroom table lists that is at least ``cable_m``
        (SONiC's buffer manager looks CABLE_LENGTH up there); whole metres when it lists none;
        None when the cable is longer than any it lists."""
        whole = math.ceil(cable_m)
        if not self.cable_lengths_m:
            return whole
        fits = [c for c in self.cable_lengths_m if c >= whole]
        return min(fits) if fits else None

    def port_index(self, port: int) -> int:
        return self._cage(port)[0]

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "vendor": self.vendor, "asic": self.asic,
                "switch": self.switch, "platform": self.platform, "hwsku": self.hwsku,
                "ports": self.cages * self.subports, "lanes_per_port": self.lanes_per_port,
                "cable_lengths_m": list(self.cable_lengths_m)}


def _platform(name: str, raw: dict) -> Platform:
    """A Platform from its entry of platforms.yaml (the port rule as the research recorded it)."""
    ports = raw["ports"]
    subports = 2 if "4*s" in str(ports["name"]) else 1
    per_port = int(ports["lanes_per_port"])
    cage_lanes = per_port * subports
    cages = int(ports["count"]) // subports
    if "first_lanes" in ports:
        first = tuple(int(x) for x in ports["first_lanes"])
    else:
        rule = str(ports["lanes"]).split("..")[0]
        base = 1 if rule.strip().endswith("+1") else 0
        first = tuple(base + cage_lanes * c for c in range(cages))
    alias = str(ports["alias"]).split(" / ")[0]
    alias = alias.replace("{p}a", "{p}").replace("{p}", "{c}")
    style = "none" if "GigE" in alias else "lane" if "/" in alias else "letter"
    cables = tuple(sorted(int(str(c).rstrip("m")) for c in raw.get("cable_lengths") or ()))
    headroom = raw.get("headroom") or {}
    table = (headroom.get("traditional") or {}).get("table") if isinstance(headroom.get("traditional"), dict) else None
    source = raw.get("source", {})
    return Platform(name=name, description=raw["description"], vendor=raw["vendor"], asic=raw["asic"],
                    switch=raw["switch"], platform=raw["platform"], hwsku=raw["hwsku"], cages=cages,
                    cage_lanes=cage_lanes, subports=subports, first_lanes=first, alias=alias,
                    alias_style=style, cable_lengths_m=cables, headroom_table=tuple(table or ()), sources=tuple(source.get("paths", ())),
                    commit=str(source.get("commit", "")), buffer=dict(raw.get("buffer") or {}),
                    extra_ports=len(ports.get("extra_ports") or ()))


@lru_cache(maxsize=1)
def platform_catalog() -> dict[str, Platform]:
    """All SONiC SKUs shipped with topo, by name (read once)."""
    text = resources.files("topo.data").joinpath("platforms.yaml").read_text(encoding="utf-8")
    return {name: _platform(name, raw) for name, raw in yaml.safe_load(text).items()}
