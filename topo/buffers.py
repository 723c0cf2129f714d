"""SONiC buffer tables of one switch, laid out as its SKU lays them out (docs/configs.md).

Three layouts:

``spectrum``
    NVIDIA SKUs that reserve headroom per port (SN5600, SN5400): two ingress pools (lossless and
    lossy), the egress pools, per-port ingress and egress profile lists, lossy queues on
    ``q_lossy_profile``. The pool sizes are what SONiC's Mellanox buffer manager
    (``cfgmgr/buffer_pool_mellanox.lua``) leaves once this switch's reservations are taken out of the
    chip's buffer.
``spectrum-shared``
    NVIDIA SKUs with a shared headroom pool (SN4700): one ingress pool whose ``xoff`` is the shared
    headroom, lossless PGs that reserve only ``xon``. topo sizes the shared pool to hold every
    lossless PG's ``xoff`` at once (no over-subscription).
``broadcom-shared``
    Tomahawk SKUs: ``ingress_lossless_pool`` with the SKU's size and shared headroom (``xoff``),
    one egress pool, no profile lists. A SKU without buffer templates of its own takes those of the
    SKU of the same chip that has them.

Without a platform, the generic layout of earlier releases: pools of 3/4 and 1/4 of the switch
model's buffer.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from .catalog import Platform, platform_catalog
from .qos import SPECTRUM_ASICS

#: cfgmgr/buffer_pool_mellanox.lua: management pool, egress mirror headroom per admin-up port,
#: private headroom per lossless port when the shared headroom pool is on.
MELLANOX_MGMT_POOL = 256 * 1024
MELLANOX_EGRESS_MIRROR = 10 * 1024
MELLANOX_PRIVATE_HEADROOM = 10 * 1024


@dataclass
class BufferLayout:
    """The buffer tables of one switch, ready for the templates."""

    style: str
    pools: dict[str, dict[str, str]]
    profiles: dict[str, dict[str, str]]
    ingress_list: str | None = None
    egress_list: str | None = None
    lossy_pg_profile: str = "ingress_lossy_profile"
    lossless_queue_profile: str = "egress_lossless_profile"
    lossy_queue_profile: str = "egress_lossy_profile"
    shared_headroom_bytes: int = 0
    lossless_xoff_bytes: int = 0  #: sum of xoff over the switch's lossless PGs
    source: str | None = None  #: the SKU whose buffer templates the layout follows

    @property
    def headroom_oversubscription(self) -> float | None:
        """Sum of the lossless PGs' xoff over the shared headroom pool (None without one)."""
        if not self.shared_headroom_bytes:
            return None
        return self.lossless_xoff_bytes / self.shared_headroom_bytes

    def to_dict(self) -> dict:
        ratio = self.headroom_oversubscription
        return {"style": self.style, "pools": self.pools, "profiles": self.profiles,
                "ingress_list": self.ingress_list, "egress_list": self.egress_list,
                "lossy_pg_profile": self.lossy_pg_profile,
                "lossless_queue_profile": self.lossless_queue_profile,
                "lossy_queue_profile": self.lossy_queue_profile,
                "shared_headroom_bytes": self.shared_headroom_bytes,
                "lossless_xoff_bytes": self.lossless_xoff_bytes,
                "headroom_oversubscription": round(ratio, 3) if ratio is not None else None,
                "source": self.source}


def buffer_source(platform: Platform) -> Platform | None:
    """The SKU whose buffer templates ``platform`` follows: itself when it has pools, else the SKU
    of the same vendor and ASIC that has them (None if there is none)."""
    if platform.buffer.get("pools"):
        return platform
    for other in platform_catalog().values():
        if other.vendor == platform.vendor and other.asic == platform.asic and other.buffer.get("pools"):
            return other
    return None


def _fields(raw: dict) -> dict[str, str]:
    """A pool's or profile's fields as config_db strings, dropping the research notes."""
    keep = ("type", "mode", "size", "xoff", "pool", "dynamic_th", "static_th")
    return {k: str(raw[k]) for k in keep if k in raw and not str(raw[k]).startswith(("template", "none"))}


@dataclass(frozen=True)
class PortLoad:
    """What one active port of a switch reserves: its lossless PG profile and lane count."""

    xon: int
    xoff: int
    size: int
    lanes: int


def switch_layout(platform: Platform | None, ports: Counter, lossless_pgs: int,
                  generic_total_bytes: int) -> BufferLayout:
    """The buffer layout of a switch whose active ports are ``ports`` (PortLoad -> count)."""
    xoff_sum = sum(p.xoff * n for p, n in ports.items()) * lossless_pgs
    if platform is None:
        total = generic_total_bytes
        return BufferLayout(
            style="generic",
            pools={"ingress_lossless_pool": {"mode": "dynamic", "type": "ingress", "size": str(total * 3 // 4)},
                   "egress_lossless_pool": {"mode": "static", "type": "egress", "size": str(total)},
                   "egress_lossy_pool": {"mode": "dynamic", "type": "egress", "size": str(total // 4)}},
            profiles={"ingress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0", "dynamic_th": "3"},
                      "egress_lossless_profile": {"pool": "egress_lossless_pool", "size": "0",
                                                  "static_th": str(total)},
                      "egress_lossy_profile": {"pool": "egress_lossy_pool", "size": "1518", "dynamic_th": "3"}},
            lossless_xoff_bytes=xoff_sum)
    src = buffer_source(platform)
    if src is None:  # pragma: no cover - every shipped ASIC has a SKU with buffer templates
        raise ValueError(f"no SKU with buffer templates for {platform.asic}")
    b = src.buffer
    profiles = {name: _fields(raw) for name, raw in b["profiles"].items() if "pool" in raw}
    if platform.vendor == "broadcom":
        pools = {name: _fields(raw) for name, raw in b["pools"].items()}
        return BufferLayout(style="broadcom-shared", pools=pools, profiles=profiles,
                            shared_headroom_bytes=int(b["pools"]["ingress_lossless_pool"]["xoff"]),
                            lossless_xoff_bytes=xoff_sum, source=src.name)
    return _mellanox_layout(platform, src, ports, lossless_pgs, profiles, xoff_sum)


def _mellanox_layout(platform: Platform, src: Platform, ports: Counter, lossless_pgs: int,
                     profiles: dict, xoff_sum: int) -> BufferLayout:
    """Spectrum layout, pools sized as buffer_pool_mellanox.lua sizes them for these ports."""
    b = src.buffer
    shared = platform.shared_headroom
    topo = b.get("default_topo", "t1")
    sizes = b["pool_sizes"][topo if topo in b["pool_sizes"] else sorted(b["pool_sizes"])[0]]
    mmu = int(sizes["egress_lossless_pool"])
    cell, pipeline_kb, _ = SPECTRUM_ASICS[platform.asic]
    lossy_reserved = pipeline_kb * 1024
    lossy_reserved_8 = (2 * pipeline_kb - 1) * 1024
    egress_lossy = int(b["profiles"]["egress_lossy_profile"]["size"])
    occupied = MELLANOX_MGMT_POOL
    up = sum(ports.values())
    for p, n in ports.items():
        reserved = lossy_reserved_8 if p.lanes == 8 else lossy_reserved
        occupied += n * (lossless_pgs * p.size      # lossless PGs (xon only with shared headroom)
                         + reserved                 # the lossy PG 0
                         + reserved                 # the management PG of an admin-up port
                         + MELLANOX_EGRESS_MIRROR   # egress mirror headroom
                         + egress_lossy)            # egress_lossy_profile of the port's egress list
    shp = 0
    if shared:
        private = up * MELLANOX_PRIVATE_HEADROOM
        occupied += private
        shp = max(0, sum((p.xon + p.xoff - p.size) * n for p, n in ports.items()) * lossless_pgs - private)
        occupied += shp
    pool_names = [n for n, raw in b["pools"].items() if "only" not in raw]
    ingress = [n for n in pool_names if b["pools"][n]["type"] == "ingress"]
    available = mmu - occupied
    size = available / 2 if len(ingress) == 2 else available
    size = min(size, (mmu // cell) * cell)
    pools: dict[str, dict[str, str]] = {}
    for name in pool_names:
        raw = b["pools"][name]
        entry = {"type": raw["type"], "mode": raw["mode"]}
        entry["size"] = str(mmu if name == "egress_lossless_pool" else math.ceil(size))
        if shared and name == "ingress_lossless_pool":
            entry["xoff"] = str(shp)
        pools[name] = entry
    return BufferLayout(
        style="spectrum-shared" if shared else "spectrum", pools=pools, profiles=profiles,
        ingress_list=b.get("BUFFER_PORT_INGRESS_PROFILE_LIST"), egress_list=b.get("BUFFER_PORT_EGRESS_PROFILE_LIST"),
        lossy_queue_profile="q_lossy_profile", shared_headroom_bytes=shp, lossless_xoff_bytes=xoff_sum,
        source=src.name)
