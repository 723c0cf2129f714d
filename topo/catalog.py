"""The switch catalogue: named models with radix, port speed and power, shipped as data."""

from __future__ import annotations

from dataclasses import dataclass
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
    """

    name: str
    description: str
    radix: int
    port_gbps: int
    lanes: int
    technology: str
    buffer_mb: int
    power_w: int

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
        }


@lru_cache(maxsize=1)
def switch_catalog() -> dict[str, SwitchModel]:
    """All switch models shipped with topo, by name (read once)."""
    text = resources.files("topo.data").joinpath("switches.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    return {name: SwitchModel(name=name, **fields) for name, fields in raw.items()}
