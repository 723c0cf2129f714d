"""NVLink: the generations' rates, the NVSwitch that goes with each, and the NVLink domain.

The tables here are the one place an NVLink or NVSwitch generation is described: a server
profile's GPUs (:mod:`topo.hardware.servers`) take their NVLink bandwidth and NVSwitch generation
from them when the profile does not say, and a GPU of the catalogue (:mod:`topo.hardware.gpus`)
states its own. :class:`NvlinkDomain` is the set of GPUs one NVLink fabric joins, as both see it:
8 GPUs of an HGX board, a rack of 18 compute trays of 4 in a GB200 or GB300 NVL72 (a profile's
``nvlink_domain``, :attr:`topo.hardware.servers.ServerProfile.nvlink`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: NVSwitch PCI class: the target class of a GPU's NVLinks on an NVSwitch system.
NVSWITCH_CLASS = "0x068000"

#: NVLink bandwidth of one link, GB/s in each direction, by NVLink generation. NVIDIA's published rates:
#: NVLink1 (P100) 20, NVLink2 (V100), NVLink3 (A100) and NVLink4 (H100) 25, NVLink5 (B200) 50. Check
#: against the per-GPU totals NVIDIA quotes for both directions: V100 6 links 300 GB/s, A100 12 links
#: 600 GB/s, H100 SXM 18 links 900 GB/s, B200 18 links 1.8 TB/s.
NVLINK_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
#: NVLink generation of a GPU by compute capability x 10, newest first: (lowest sm, generation). sm 60
#: Pascal, 70 Volta, 80 Ampere, 90 Hopper, 100 and later Blackwell; below 60 counts as NVLink1.
NVLINK_GENERATION_BY_SM = ((100, 5), (90, 4), (80, 3), (70, 2), (60, 1))
#: NVSwitch generation that goes with an NVLink generation (NVIDIA's NVSwitch pages): the first NVSwitch
#: (DGX-2, V100) speaks NVLink2, the second (A100) NVLink3, the third (H100) NVLink4, the fourth (B200)
#: NVLink5; there was none for NVLink1.
NVSWITCH_BY_NVLINK_GENERATION = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4}
#: What :meth:`ServerProfile.node_model` takes for a GPU whose profile does not say (a generic profile):
#: an H100 (sm 90) on an HGX board, 18 NVLink4 links to third-generation NVSwitches.
ASSUMED_SM = 90
ASSUMED_NVLINKS = 18
#: Bounds of the GPU keys ``nvlink_bw`` (GB/s each way, above 0) and ``nvswitch`` (0 for none).
MAX_NVLINK_BW = 10_000
MAX_NVSWITCH_GENERATION = 9


def nvlink_generation(sm: int) -> int:
    """The NVLink generation of a GPU of compute capability ``sm`` (x 10), by NVLINK_GENERATION_BY_SM.

    >>> nvlink_generation(70), nvlink_generation(80), nvlink_generation(90), nvlink_generation(100)
    (2, 3, 4, 5)
    """
    return next((gen for low, gen in NVLINK_GENERATION_BY_SM if sm >= low), NVLINK_GENERATION_BY_SM[-1][1])


@dataclass(frozen=True)
class NvlinkDomain:
    """The GPUs one NVLink fabric joins, and how fast.

    Attributes
    ----------
    gpus : int
        GPUs in the domain: the server's on an HGX board (8), 72 in a GB200 or GB300 NVL72 rack; 1
        for a GPU without NVLinks.
    GBps : float
        NVLink bandwidth of one GPU, GB/s in each direction.
    nvswitch : int
        NVSwitch generation of the fabric, 0 for none (GPUs linked directly, or no NVLink).
    multi_node : bool
        The domain joins several servers (an NVL72 rack's compute trays), else it is one board.

    Examples
    --------
    >>> d = NvlinkDomain(gpus=72, GBps=900.0, nvswitch=4, multi_node=True)
    >>> d.job_gpus(256, 4), d.job_gpus(288, 4), NvlinkDomain(8, 450.0, 3).job_gpus(1024, 8)
    (64, 72, 8)
    """

    gpus: int
    GBps: float
    nvswitch: int
    multi_node: bool = False

    def job_gpus(self, gpus: int, per_node: int) -> int:
        """GPUs of one domain a job of ``gpus`` GPUs on servers of ``per_node`` uses (:func:`domain_size`)."""
        return domain_size(gpus, per_node, self.gpus, self.multi_node)


def domain_size(gpus: int, per_node: int, nvlink_domain: int, multi_node: bool = True) -> int:
    """GPUs of one NVLink domain of the job. A board's domain (``multi_node`` false: HGX) is the
    server. A domain of several servers (NVL72) is the GPU's when it divides the job, else the
    largest whole number of servers under it that does (a 256-GPU job on NVL72 racks uses 64 GPUs
    of each), and never less than one server.

    >>> domain_size(1024, 8, 8), domain_size(256, 4, 72), domain_size(288, 4, 72), domain_size(64, 4, 8, False)
    (8, 64, 72, 4)
    """
    if not multi_node or nvlink_domain <= per_node:
        return per_node
    best = per_node
    for d in range(per_node, nvlink_domain + 1, per_node):
        if gpus % d == 0:
            best = d
    return best
