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
