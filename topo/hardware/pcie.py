"""PCIe links as NCCL names them, and the data rate each carries.

NCCL's topology file gives every GPU, NIC and PCIe switch a ``link_speed`` (a string of its
dictionary, :data:`LINK_SPEEDS`) and a ``link_width`` (lanes). :func:`pcie_mbps` is what such a link
carries after line encoding; :func:`pcie_link_for` the link a generic server profile gives a NIC.
"""

from __future__ import annotations

#: The ``link_speed`` strings NCCL's dictionary holds (topo.cc ``kvDictPciGen``), to GB/s per lane x 8.
LINK_SPEEDS = {
    "2.5 GT/s": 15, "5 GT/s": 30, "8 GT/s": 60, "16 GT/s": 120, "32 GT/s": 240,
    "2.5 GT/s PCIe": 15, "5.0 GT/s PCIe": 30, "8.0 GT/s PCIe": 60, "16.0 GT/s PCIe": 120,
    "32.0 GT/s PCIe": 240, "64.0 GT/s PCIe": 480,
}
#: PCIe generations as NCCL's dumps spell them, slowest first: (link_speed, generation).
PCIE_GENERATIONS = (("2.5 GT/s PCIe", 1), ("5.0 GT/s PCIe", 2), ("8.0 GT/s PCIe", 3), ("16.0 GT/s PCIe", 4),
                    ("32.0 GT/s PCIe", 5), ("64.0 GT/s PCIe", 6))
#: Oldest generation a generic profile is given: Gen3, the link of the oldest GPUs NCCL supports (sm 60).
GENERIC_MIN_PCIE_GENERATION = 3
#: Lane counts a generic profile tries, narrowest first (x32 only when no x16 link carries the NIC).
GENERIC_PCIE_WIDTHS = (16, 32)


def pcie_mbps(link_speed: str, link_width: int) -> int:
    """Data rate of a PCIe link in Mb/s, each way, after line encoding.

    The transfer rate is the number ``link_speed`` starts with; 8b/10b encoding for 2.5 and 5 GT/s
    (Gen1-2), 128b/130b for 8 to 32 GT/s (Gen3-5), and Gen6's FLIT mode at 64 GT/s: a 256-byte flit
    carries 236 bytes of transaction layer packets (the rest is link-layer, CRC and FEC bytes).

    >>> pcie_mbps("32.0 GT/s PCIe", 16), pcie_mbps("64.0 GT/s PCIe", 16), pcie_mbps("16 GT/s", 8)
    (504123, 944000, 126030)
    """
    gts_mbps = round(float(link_speed.split()[0]) * 1000)
    num, den = (8, 10) if gts_mbps <= 5000 else (128, 130) if gts_mbps <= 32000 else (236, 256)
    return gts_mbps * link_width * num // den


def pcie_link_for(speed_mbps: int) -> tuple[str, int] | None:
    """The PCIe link a generic profile gives a NIC of ``speed_mbps``: the lowest generation from Gen3
    whose x16 link carries it, else the lowest whose x32 link does; None if no link NCCL knows does.

    >>> pcie_link_for(400_000), pcie_link_for(800_000), pcie_link_for(100_000), pcie_link_for(1_600_000)
    (('32.0 GT/s PCIe', 16), ('64.0 GT/s PCIe', 16), ('8.0 GT/s PCIe', 16), ('64.0 GT/s PCIe', 32))
    """
    for width in GENERIC_PCIE_WIDTHS:
        for speed, generation in PCIE_GENERATIONS:
            if generation >= GENERIC_MIN_PCIE_GENERATION and pcie_mbps(speed, width) >= speed_mbps:
                return speed, width
    return None
