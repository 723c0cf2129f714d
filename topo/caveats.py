"""Warnings as data: every caveat topo knows about a design, each with a stable code.

A caveat is something a design review must not miss: a figure that rests on an assumption, a
shape that is not symmetric, an output that is not what the real system will see. :func:`topo.outputs.caveats.caveats`
(``topo.outputs.caveats``) collects them from the build's parts; ``topo build`` prints them on stderr (``warning[CODE]: ...``,
even with ``-q``, unless ``--no-warnings``) and writes them into ``summary.json``, its
``--format json`` output and the folder's README. ``topo analyze`` shows those of
:data:`ANALYSIS_CODES` the same way (:func:`topo.outputs.caveats.analysis_caveats`).
docs/warnings.md lists every code.

Examples
--------
>>> Caveat("oversubscription", "leaf downlink:uplink is 3:1").line()
'warning[oversubscription]: leaf downlink:uplink is 3:1'
"""

from __future__ import annotations

from dataclasses import dataclass

#: Every code, with what it means (docs/warnings.md says more). Order is the order of the output.
CODES: dict[str, str] = {
    "fabric-cut": "some GPU pairs on different nodes have no route",
    "allreduce-unroutable": "some all-reduce connections have no route",
    "job-stops": "a NIC link is down: the running job stops, its figures are for the restart",
    "bisection-differs": "max-flow and the analytic bisection disagree, or links are down",
    "nvlink-only": "the job fits in one node: no traffic on the fabric",
    "partial-scalable-unit": "the last scalable unit (or rack) is not full",
    "oversubscription": "a tier has less bandwidth up than down",
    "uneven-ecmp": "switch pairs have different numbers of equal-cost paths",
    "hash-polarization": "ECMP hashing puts connections on the same uplinks",
    "rings-cross-spine": "much of the all-reduce leaves its leaf",
    "dual-tor-queue-pairs": "a dual-ToR connection's one queue pair takes one link of its NIC's bond",
    "placeholder-server-profile": "the NCCL topology files describe a generic server",
    "assumed-node-model": "the all-reduce model assumes parts of the server",
    "multi-node-nvlink": "the NVLink domain spans servers, the model prices one server's GPUs of it",
    "partial-rack": "the last rack (NVLink domain) has fewer trays in the job than the others",
    "nccl-xml-elements": "the NCCL topology file is near NCCL's element limit",
    "infiniband-no-configs": "an InfiniBand switch model gets no switch configs",
    "no-switch-model": "no switch model: power and buffers are not a real switch's",
    "no-sonic-platform": "the SONiC configs name no platform or HwSKU",
    "chassis-no-config-db": "a modular chassis gets an frr.conf but no config_db.json",
    "mclag-iccpd": "dual-ToR leaves need a SONiC image with the MCLAG daemon, iccpd",
    "cabling": "the cabling plan could not meet a rule",
    "prices-incomplete": "the price list leaves items of the bill of materials unpriced",
}

#: The codes that qualify what ``topo analyze`` reports (hops, bisection, ECMP width, the all-reduce
#: on the server's node model), which it shows: the analysis' own, the fabric's shape, the traffic's
#: and the node model's. The others are about files an analysis does not write (the NCCL topology
#: files, the switch configs, the cabling plan, the prices) or figures it does not give (power).
ANALYSIS_CODES: frozenset[str] = frozenset({
    "fabric-cut", "allreduce-unroutable", "job-stops", "bisection-differs", "nvlink-only",
    "partial-scalable-unit", "oversubscription", "uneven-ecmp", "hash-polarization", "rings-cross-spine",
    "dual-tor-queue-pairs", "assumed-node-model", "multi-node-nvlink",
})

#: Share of the all-reduce's connections leaving their leaf above which ``rings-cross-spine`` is raised.
CROSS_SPINE_SHARE = 0.25
#: NCCL topology elements (of 255) above which ``nccl-xml-elements`` is raised.
NCCL_ELEMENTS_WARN = 192


@dataclass(frozen=True)
class Caveat:
    """One warning: a stable ``code`` (a key of :data:`CODES`) and a sentence with the figures."""

    code: str
    message: str

    def __post_init__(self) -> None:
        assert self.code in CODES, self.code

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}

    def line(self) -> str:
        """How stderr shows it: ``warning[code]: message``."""
        return f"warning[{self.code}]: {self.message}"


__all__ = ["ANALYSIS_CODES", "CODES", "CROSS_SPINE_SHARE", "NCCL_ELEMENTS_WARN", "Caveat"]
