"""Racks of a server profile whose NVLink domain spans several servers (trays): an NVL72 rack.

A rack is one NVLink domain: a GB200 or GB300 NVL72 rack is 18 compute trays of 4 GPUs (72 GPUs)
joined by its NVLink switch trays. ``spare_trays`` of each rack are kept out of the job (every
published GB200 training run uses 16 of the 18, and operators guarantee 16 schedulable), so a
rack holds ``(trays - spare_trays) x GPUs a tray`` GPUs of the job. The spec's ``gpus`` are the
GPUs in use: the racks are as many as hold them, the last one partial when they do not fill it
(warning ``partial-rack``). The fabric connects the trays in use (``gpus / gpus_per_node``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .servers import ServerProfile


@dataclass(frozen=True)
class RackPlan:
    """The racks (NVLink domains) a job of ``trays`` trays in use takes.

    >>> from topo.hardware.catalog import server_profiles
    >>> r = rack_plan(server_profiles()["gb300-nvl72"], 1152, 2)
    >>> r.racks, r.nvlink_domains, r.gpus_per_rack, r.trays_installed, r.last_rack_trays
    (18, 18, 64, 324, 16)
    """

    profile: str
    gpus_per_tray: int
    trays_per_rack: int
    spare_trays: int
    trays: int  #: trays in use: the fabric's servers

    @property
    def usable_trays(self) -> int:
        """Trays of a rack in the job."""
        return self.trays_per_rack - self.spare_trays

    @property
    def gpus_per_rack(self) -> int:
        """GPUs of a rack in the job."""
        return self.usable_trays * self.gpus_per_tray

    @property
    def racks(self) -> int:
        return -(-self.trays // self.usable_trays)

    @property
    def nvlink_domains(self) -> int:
        """One NVLink domain a rack."""
        return self.racks

    @property
    def trays_installed(self) -> int:
        """Compute trays in the racks: those in use, the spares and a partial rack's others."""
        return self.racks * self.trays_per_rack

    @property
    def last_rack_trays(self) -> int:
        """Trays in use in the last rack (``usable_trays`` when it is full)."""
        return self.trays - (self.racks - 1) * self.usable_trays

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "racks": self.racks, "nvlink_domains": self.nvlink_domains,
                "trays_per_rack": self.trays_per_rack, "gpus_per_tray": self.gpus_per_tray,
                "spare_trays": self.spare_trays, "gpus_per_rack": self.gpus_per_rack, "trays_in_use": self.trays,
                "trays_installed": self.trays_installed, "last_rack_trays": self.last_rack_trays}


def trays_per_rack(profile: ServerProfile) -> int:
    """Servers (trays) of the profile's NVLink domain: 18 for an NVL72 tray, 1 for an HGX board."""
    return max((profile.nvlink_domain or 0) // max(profile.gpu_count, 1), 1)


def rack_plan(profile: ServerProfile, gpus: int, spare_trays: int = 0) -> RackPlan | None:
    """The racks of ``gpus`` GPUs in use on ``profile``'s trays; None when its NVLink domain is one
    server's (no racks of trays to count)."""
    per = trays_per_rack(profile)
    if per < 2 or spare_trays >= per:
        return None
    return RackPlan(profile.name, profile.gpu_count, per, spare_trays, gpus // profile.gpu_count)


def spare_tray_problems(profile: ServerProfile, spare_trays: int) -> list[str]:
    """Why ``spare_trays`` does not fit the profile's racks (empty: it does)."""
    if not spare_trays:
        return []
    per = trays_per_rack(profile)
    if per < 2:
        return [f"spare_trays={spare_trays}: server={profile.name} has an NVLink domain of "
                f"{profile.nvlink_domain or profile.gpu_count} GPUs in one server of {profile.gpu_count}; spare trays "
                f"are kept by a rack whose NVLink domain spans several trays (gb200-nvl72, gb300-nvl72)"]
    if spare_trays >= per:
        return [f"spare_trays={spare_trays} leaves no tray of a rack in the job: server={profile.name}'s rack "
                f"(NVLink domain) has {per} trays of {profile.gpu_count} GPUs, so at most {per - 1} spare"]
    return []
