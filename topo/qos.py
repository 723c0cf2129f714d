"""Lossless RoCE QoS: the profiles and the PFC headroom of a port, computed (templates print them).

Two profiles (``qos`` in the spec):

``nvidia``
    RoCE data on DSCP 26, traffic class and priority 3, PFC on priority 3; congestion notification
    packets (CNP) on DSCP 48, traffic class 6, a strict-priority queue; ECN marking from 150 KB to
    1.5 MB with probability 100%.
``sonic``
    SONiC's defaults: lossless traffic classes 3 and 4 for DSCP 3 and 4, PFC on 3 and 4, ECN/WRED from
    1 MiB to 2 MiB with probability 5%; CNP as above on DSCP 48, class 6.

PFC headroom per lossless port and priority, after the rule in ``docs/configs.md``: the bytes that
keep arriving after the switch asks its peer to pause, each part rounded up to whole buffer cells:
two maximum frames (one in flight at each end), the round trip on the cable
(``2 * length / 1.98e8 m/s * rate``), the MAC/PHY delays at both ends, and the peer's response
time (IEEE 802.3 pause quanta of 512 bit times: 905 at 400G and 800G, 453 at 200G, 394 at 100G and
below). That is ``xoff``; ``xon`` (the hysteresis before resuming) is two maximum frames; the
profile's ``size`` is their sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SPEED_OF_LIGHT_IN_FIBRE_M_S = 1.98e8
PAUSE_QUANTUM_BITS = 512
CELL_BYTES = 256
PHY_DELAY_NS = 100.0


@dataclass(frozen=True)
class QosProfile:
    """A lossless RoCE QoS profile: classification, PFC and ECN."""

    name: str
    roce_dscp: tuple[int, ...]
    lossless_tc: tuple[int, ...]
    cnp_dscp: int
    cnp_tc: int
    ecn_min_bytes: int
    ecn_max_bytes: int
    ecn_probability_pct: int

    def dscp_to_tc(self) -> dict[int, int]:
        """All 64 DSCP values: RoCE DSCPs to their lossless class, CNP to its class, the rest to 0."""
        table = {dscp: 0 for dscp in range(64)}
        for dscp, tc in zip(self.roce_dscp, self.lossless_tc):
            table[dscp] = tc
        table[self.cnp_dscp] = self.cnp_tc
        return table

    def tc_to_pg(self) -> dict[int, int]:
        """Lossless classes to their own priority group, the rest to group 0."""
        return {tc: (tc if tc in self.lossless_tc else 0) for tc in range(8)}

    @property
    def roce_tos(self) -> int:
        """IP ToS byte a host puts on RoCE packets: the first RoCE DSCP, ECN-capable (ECT(0)).

        >>> QOS_PROFILES["nvidia"].roce_tos
        106
        """
        return self.roce_dscp[0] << 2 | 0b10

    @property
    def pfc_priorities(self) -> str:
        return ",".join(str(tc) for tc in self.lossless_tc)

    def pfc_vector(self) -> str:
        """Per-priority PFC enable flags as host tools take them: ``0,0,0,1,0,0,0,0``."""
        return ",".join("1" if p in self.lossless_tc else "0" for p in range(8))


QOS_PROFILES = {
    "nvidia": QosProfile("nvidia", (26,), (3,), 48, 6, 150_000, 1_500_000, 100),
    "sonic": QosProfile("sonic", (3, 4), (3, 4), 48, 6, 1_048_576, 2_097_152, 5),
}


def pause_quanta(speed_gbps: int) -> int:
    """Pause quanta a peer may take to react (IEEE 802.3): 905 at 400G/800G, 453 at 200G, else 394."""
    if speed_gbps >= 400:
        return 905
    if speed_gbps >= 200:
        return 453
    return 394


def _cells(nbytes: float) -> int:
    return math.ceil(nbytes / CELL_BYTES) * CELL_BYTES


@dataclass(frozen=True)
class Headroom:
    """PFC headroom of one lossless priority group of one port, in bytes."""

    speed_gbps: int
    cable_m: float
    cable_bytes: int
    response_bytes: int
    phy_bytes: int
    frame_bytes: int
    xoff: int
    xon: int

    @property
    def size(self) -> int:
        return self.xoff + self.xon


def pfc_headroom(speed_gbps: int, cable_m: float, mtu: int) -> Headroom:
    """Headroom of a lossless port of ``speed_gbps`` on a cable of ``cable_m`` metres.

    Examples
    --------
    >>> h = pfc_headroom(400, 100, 9100)
    >>> h.cable_bytes, h.response_bytes  # about 50 KB on the cable, 57,920 B of response
    (50506, 57920)
    >>> h.xoff, h.xon, h.size
    (137472, 18432, 155904)
    """
    rate_bytes_s = speed_gbps * 1e9 / 8
    cable = _cells(2 * cable_m / SPEED_OF_LIGHT_IN_FIBRE_M_S * rate_bytes_s)
    response = _cells(pause_quanta(speed_gbps) * PAUSE_QUANTUM_BITS / 8)
    phy = _cells(2 * PHY_DELAY_NS * 1e-9 * rate_bytes_s)
    frame = _cells(mtu)
    return Headroom(
        speed_gbps=speed_gbps, cable_m=cable_m,
        cable_bytes=math.ceil(2 * cable_m / SPEED_OF_LIGHT_IN_FIBRE_M_S * rate_bytes_s),
        response_bytes=pause_quanta(speed_gbps) * PAUSE_QUANTUM_BITS // 8,
        phy_bytes=math.ceil(2 * PHY_DELAY_NS * 1e-9 * rate_bytes_s), frame_bytes=mtu,
        xoff=2 * frame + cable + response + phy, xon=2 * frame,
    )


# --- vendor headroom --------------------------------------------------------------------------------

#: Spectrum ASIC constants (sonic-buildimage platform/mellanox/asic_table.j2): cell size in bytes,
#: pipeline latency, MAC/PHY delay in KB (x 1024 bytes).
SPECTRUM_ASICS = {
    "Spectrum-2": (144, 19, 0.8), "Spectrum-3": (144, 19, 0.8), "Spectrum-4": (192, 19, 0.8),
    "Spectrum-5": (192, 19, 0.8),
}
#: Pause quanta a peer takes to stop, by port speed in Gb/s (sonic-swss buffer_headroom_mellanox.lua).
SPECTRUM_PAUSE_QUANTA = {800: 905, 400: 905, 200: 453, 100: 394, 50: 147, 40: 118, 25: 80, 10: 67}
#: Speed of light in the cable and the lossless-traffic MTU that lua takes.
SPECTRUM_LIGHT_M_S = 198e6
SPECTRUM_LOSSLESS_MTU = 1024


def _ceil_1024(value: float) -> int:
    return math.ceil(value / 1024) * 1024


def cable_bytes(speed_gbps: float, cable_m: float) -> float:
    """Bytes on a cable of ``cable_m`` metres both ways at ``speed_gbps`` (light at 1.98e8 m/s)."""
    return 2 * cable_m * speed_gbps * 1e9 / SPECTRUM_LIGHT_M_S / 8


def spectrum_headroom(speed_gbps: int, cable_m: float, mtu: int = 9100, asic: str = "Spectrum-4",
                      lanes: int = 4, small_packet_pct: int = 100,
                      shared: bool = False) -> tuple[int, int, int]:
    """(xon, xoff, size) of a lossless PG as SONiC's Mellanox buffer manager computes them
    (sonic-swss ``cfgmgr/buffer_headroom_mellanox.lua``): the bytes in flight while a pause takes
    effect (the cable both ways, MAC/PHY delay, the peer's response, the port MTU, and on Spectrum-4
    and -5 the bytes on the tile) inflated by cell occupancy (a small packet still takes a whole
    cell), plus the pipeline latency as xon.

    ``small_packet_pct`` 100 reproduces the SKUs' ``pg_profile_lookup.ini`` tables of reserved
    headroom (every row within 1,024 bytes of xoff on the SN5600). With ``shared`` the PG reserves
    only ``xon`` (``size``) and draws ``xoff`` from the shared headroom pool, and xoff is the bytes
    in flight without cell inflation, as the shared-headroom tables (the SN4700's) have it.

    >>> spectrum_headroom(400, 40)  # SN5600 pg_profile_lookup.ini: the same
    (19456, 283648, 303104)
    >>> spectrum_headroom(400, 40, asic="Spectrum-3", lanes=8, shared=True)  # SN4700's table: 91,136
    (38912, 89088, 38912)
    """
    cell, pipeline_kb, mac_phy_kb = SPECTRUM_ASICS[asic]
    speed_mbps = speed_gbps * 1000
    pipeline = pipeline_kb * 1024 * (2 if lanes == 8 else 1)
    speed_overhead = mtu if lanes == 8 else 0
    worst = math.ceil(cell / 64) if cell > 128 else math.ceil(2 * cell / (1 + cell))
    spb = 100 * 64 / ((small_packet_pct * 64 + (100 - small_packet_pct) * SPECTRUM_LOSSLESS_MTU) / 100)
    occupancy = 1.0 if shared else (100 - spb + spb * worst) / 100
    response = SPECTRUM_PAUSE_QUANTA.get(speed_gbps, 394) * 512 / 8
    tile = speed_mbps / 1000 * 120 / 8 if asic in ("Spectrum-4", "Spectrum-5") else 0.0
    propagation = mtu + cable_bytes(speed_gbps, cable_m) + mac_phy_kb * 1024 + response + tile
    xoff = _ceil_1024(SPECTRUM_LOSSLESS_MTU + propagation * occupancy)
    xon = _ceil_1024(pipeline)
    if shared:
        return xon, xoff, xon
    return xon, xoff, _ceil_1024(xoff + xon + speed_overhead)


#: Broadcom buffer cell: every size of the Tomahawk SKUs' pg_profile_lookup.ini is a multiple of 254.
BROADCOM_CELL_BYTES = 254


@dataclass(frozen=True)
class BroadcomAsic:
    """Headroom constants of one Tomahawk generation, fitted to a SKU's ``pg_profile_lookup.ini``
    by ``scripts/fit_headroom.py``: ``xoff = fixed + per_gbps * S + cable_factor * cable(S, L)``
    rounded up to 254-byte cells, for a port of speed class ``S`` Gb/s on ``L`` metres. ``xon``,
    ``xon_offset``, ``size`` (what a PG reserves; xoff comes from the shared headroom pool) and
    ``dynamic_th`` are the table's, the same in every row."""

    fitted_on: str
    fixed_bytes: float
    per_gbps_bytes: float
    cable_factor: float
    xon: int
    xon_offset: int
    size: int
    dynamic_th: int
    speed_classes: tuple[tuple[int, int], ...] = ()

    def speed_class(self, speed_gbps: int) -> int:
        """The speed the table sizes a port by (Tomahawk 4's lists 10G as 25G and 40G as 50G)."""
        return dict(self.speed_classes).get(speed_gbps, speed_gbps)

    def xoff(self, speed_gbps: int, cable_m: float) -> int:
        s = self.speed_class(speed_gbps)
        raw = self.fixed_bytes + self.per_gbps_bytes * s + self.cable_factor * cable_bytes(s, cable_m)
        return math.ceil(raw / BROADCOM_CELL_BYTES) * BROADCOM_CELL_BYTES


#: Fitted by scripts/fit_headroom.py (largest error over the table: Tomahawk 3 0.1 %, Tomahawk 4
#: 2.2 %, Tomahawk 5 6.0 %, whose table lists one speed and one xoff for 5, 40 and 150 m).
BROADCOM_ASICS = {
    "Tomahawk 3": BroadcomAsic("dellemc-z9332f-o32", 31902, 358.62, 1.310, 2540, 2540, 2540, -2),
    "Tomahawk 4": BroadcomAsic("dellemc-z9664f-o64", 54395, 755.65, 3.055, 9144, 9144, 9144, 0,
                               ((10, 25), (40, 50))),
    "Tomahawk 5": BroadcomAsic("arista-7060x6-64pe-o128s2", 0, 1432.50, 1.000, 0, 3556, 18796, 0),
}


def vendor_headroom(vendor: str | None, asic: str | None, speed_gbps: int, cable_m: float,
                    mtu: int, lanes: int | None = None, shared: bool = False) -> tuple[int, int, int]:
    """(xon, xoff, size) of a lossless PG: SONiC's Spectrum formula (:func:`spectrum_headroom`)
    with the ASIC's constants on NVIDIA platforms and without a platform (Spectrum-4 constants),
    reserved per port unless ``shared``; on Broadcom platforms the Tomahawk generation's fitted
    constants (:data:`BROADCOM_ASICS`), which always share the headroom pool. ``lanes`` defaults
    to 8 at 800G and above, 4 below.

    >>> vendor_headroom(None, None, 400, 40, 9100)
    (19456, 283648, 303104)
    >>> vendor_headroom("broadcom", "Tomahawk 4", 400, 40, 9100)  # Z9664F's table: 424,434
    (9144, 418592, 9144)
    """
    if lanes is None:
        lanes = 8 if speed_gbps >= 800 else 4
    if vendor == "broadcom":
        b = BROADCOM_ASICS[asic or "Tomahawk 5"]
        return b.xon, b.xoff(speed_gbps, cable_m), b.size
    spectrum = asic if asic in SPECTRUM_ASICS else "Spectrum-4"
    return spectrum_headroom(speed_gbps, cable_m, mtu, spectrum, lanes, shared=shared)


def table_headroom(table: list[dict], speed_gbps: int, cable_m: float) -> tuple[int, int, int, int] | None:
    """(xon, xoff, size, table cable metres) of a SKU's pg_profile_lookup.ini for a port of
    ``speed_gbps`` on ``cable_m`` metres: the row of the shortest listed cable at least that long, as
    SONiC's buffer manager needs the CABLE_LENGTH to be one the table lists. None if no row fits."""
    rows = [r for r in table if int(r["speed"]) == speed_gbps * 1000 and float(str(r["cable"]).rstrip("m")) >= cable_m]
    if not rows:
        return None
    row = min(rows, key=lambda r: float(str(r["cable"]).rstrip("m")))
    return int(row["xon"]), int(row["xoff"]), int(row["size"]), int(float(str(row["cable"]).rstrip("m")))
