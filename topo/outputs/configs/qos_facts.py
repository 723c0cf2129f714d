"""The QoS and buffer facts of a fabric's switches, tier by tier: the lossless buffer profile of
each tier's ports by the link kind they face (PFC headroom), the switch's buffer layout, the QoS
tables (DSCP, traffic classes, priority groups, queues) and the PFC watchdog.

They are worked out once per fabric (per tier, link kind and mix of active ports), from the QoS
profiles and PFC headroom of :mod:`topo.qos` and the buffer layouts of :mod:`topo.buffers`;
:class:`~topo.outputs.configs.facts.ConfigFacts` adds each switch's own facts on top.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

import numpy as np

from ...buffers import BufferLayout, PortLoad, switch_layout
from ...catalog import Platform, platform_catalog, switch_catalog
from ...fabric import KIND_NAMES, LINK_KINDS, PEER_KIND, PEER_LINK, PEER_LINK_M, Fabric
from ...qos import BROADCOM_ASICS, QOS_PROFILES, QosProfile, pfc_headroom, table_headroom, vendor_headroom

#: Switch buffer assumed when the switch model does not give one (MB).
DEFAULT_BUFFER_MB = 64
#: SONiC PFC watchdog settings (ms).
#: PFC watchdog as SONiC's ``pfcwd start_default`` sets it: 200 ms detection and restoration, times
#: one more for every 32 entries of the PORT table past the first 32; polling as often, at most 1 s.
PFC_WD_BASE_MS = 200
PFC_WD_PORTS_PER_STEP = 32
PFC_WD_MAX_POLL_MS = 1000


def pfc_watchdog(port_entries: int) -> dict[str, str]:
    """PFC watchdog timers of a switch with ``port_entries`` PORT rows, scaled as SONiC scales them.

    >>> pfc_watchdog(32)["detection_time"], pfc_watchdog(64)["detection_time"], pfc_watchdog(128)["poll_interval"]
    ('200', '400', '800')
    """
    multiply = max(1, (port_entries - 1) // PFC_WD_PORTS_PER_STEP + 1)
    time = str(PFC_WD_BASE_MS * multiply)
    return {"action": "drop", "detection_time": time, "restoration_time": time,
            "poll_interval": str(min(PFC_WD_BASE_MS * multiply, PFC_WD_MAX_POLL_MS))}


def buffer_mb(fabric: Fabric, tier: int = 1) -> int:
    """Packet buffer (MB) of a tier's switches: its model's, else DEFAULT_BUFFER_MB."""
    model = fabric.tier_switch(tier).model
    return switch_catalog()[model].buffer_mb if model else DEFAULT_BUFFER_MB


class QosFacts:
    """The QoS and buffer facts of one fabric's switches, by tier (shared by every switch of a tier)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        spec = fabric.spec
        self.qos: QosProfile = QOS_PROFILES[spec.qos]
        tiers = range(1, fabric.plan.tiers + 1)
        # each tier's switch model: its SONiC SKU and its SerDes lanes a port
        self.platforms: dict[int, Platform | None] = {}
        for t in tiers:
            sku = fabric.tier_switch(t).platform
            self.platforms[t] = platform_catalog()[sku] if sku else None
        self.platform = self.platforms[1]  # the leaves' (templates' fabric.platform)
        self.lanes = {t: fabric.port_names.lanes[t] for t in tiers}
        plan = fabric.plan
        # each kind's link speed: where tiers of different port speeds meet, the slower port's
        self.speeds = dict(zip(KIND_NAMES, (spec.link_gbps, plan.spine_link_gbps, plan.core_link_gbps,
                                            spec.port_gbps)))
        cable_m = dict(spec.cable_m, **({PEER_LINK: PEER_LINK_M} if fabric.plan.homes == 2 else {}))
        # SONiC's CABLE_LENGTH takes whole metres ("[0-9]+m"), and with a platform a length its
        # headroom table lists: round up, which keeps the headroom safe (docs/configs.md)
        self.cable_m: dict[int, dict[str, float]] = {}
        # a lossless profile per tier and link kind of its ports: tier t's ports face kinds t-1 and t
        self.buffer_profiles: dict[tuple[int, str], dict[str, Any]] = {}
        for t in tiers:
            p = self.platforms[t]
            self.cable_m[t] = {kind: float(p.table_cable_m(m) if p else math.ceil(m))
                               for kind, m in cable_m.items()}
            kinds = LINK_KINDS[t - 1:min(t + 1, fabric.plan.tiers)]
            if t == 1 and fabric.plan.homes == 2:
                kinds += (PEER_LINK,)
            for kind in kinds:
                self.buffer_profiles[t, kind] = self._lossless_profile(t, kind)
        self._layouts: dict[tuple, dict[str, Any]] = {}
        self._kind_facts: dict[tuple[int, bytes], dict[str, Any]] = {}  # see _buffer_facts_of()
        self._tier_profiles: dict[int, list[dict[str, Any]]] = {}

    def _lossless_profile(self, t: int, kind: str) -> dict[str, Any]:
        """The lossless buffer profile of tier ``t``'s ports that face links of ``kind``: its PFC
        headroom (the vendor's rule, never less than the SKU's own table) and how it was made."""
        spec, p = self.fabric.spec, self.platforms[t]
        shared = p.shared_headroom if p else False
        speed, cable = self.speeds[kind], self.cable_m[t][kind]
        # SerDes lanes of one link's port (a broken-out port's share)
        lanes = (p.lanes_per_port if p else self.lanes[t]) // self.end_breakout(t, kind)
        h = pfc_headroom(speed, cable, spec.mtu)  # the physical terms, for the docs' breakdown
        xon, xoff, size = vendor_headroom(p.vendor if p else None, p.asic if p else None, speed, cable,
                                          spec.mtu, lanes=lanes, shared=shared)
        vendor = table_headroom(list(p.headroom_table), speed, cable) if p and p.headroom_table else None
        if vendor is not None and vendor[1] > xoff:  # never less than the SKU's own table
            if not shared:  # a reserved PG holds its xoff; a shared one draws it from the pool
                size += vendor[1] - xoff
            xoff = vendor[1]
        name = f"pg_lossless_{speed * 1000}_{_metres(cable)}_profile"
        broadcom = BROADCOM_ASICS.get(p.asic) if p and p.vendor == "broadcom" else None
        return {
            "name": name, "speed_gbps": speed, "cable_m": cable, "lanes": lanes,
            "xoff": xoff, "xon": xon, "size": size, "cable_bytes": h.cable_bytes,
            "xon_offset": broadcom.xon_offset if broadcom else None,
            "dynamic_th": broadcom.dynamic_th if broadcom else 0,
            "shared_headroom": shared,
            "response_bytes": h.response_bytes, "phy_bytes": h.phy_bytes,
            "vendor_table_xoff": vendor[1] if vendor else None,
        }

    def end_breakout(self, tier: int, kind: str) -> int:
        """Links per port of a tier's ports that face links of ``kind`` (1 unless broken out)."""
        k = KIND_NAMES.index(kind)
        if k == PEER_KIND:
            return 1
        return self.fabric.plan.lanes(k)[0 if tier == k else 1]

    def buffer_layout(self, active_kinds: Counter, tier: int = 1) -> BufferLayout:
        """The buffer layout of a switch of ``tier`` with ``active_kinds`` (link kind -> active ports)."""
        loads: Counter = Counter()
        for kind, n in active_kinds.items():
            b = self.buffer_profiles[tier, kind]
            loads[PortLoad(b["xon"], b["xoff"], b["size"], b["lanes"])] += n
        return switch_layout(self.platforms[tier], loads, len(self.qos.lossless_tc),
                             buffer_mb(self.fabric, tier) * 1_000_000)

    def buffer_facts(self, active_kinds: Counter, tier: int = 1) -> dict[str, Any]:
        """The template facts of :meth:`buffer_layout`, made once per tier and distinct mix of ports, with
        the ``BUFFER_QUEUE`` and lossy ``BUFFER_PG`` values ready to print (the same on every port)."""
        key = (tier, *sorted(active_kinds.items()))
        if key not in self._layouts:
            facts = self.buffer_layout(active_kinds, tier).to_dict()
            facts["queues"] = [
                {"queues": r["queues"], "lossless": r["lossless"],
                 "entry": json.dumps({"profile": facts["lossless_queue_profile" if r["lossless"] else "lossy_queue_profile"]})}
                for r in _buffer_queue_ranges(self.qos)]
            facts["lossy_pg_entry"] = json.dumps({"profile": facts["lossy_pg_profile"]})
            self._layouts[key] = facts
        return self._layouts[key]

    def _buffer_facts_of(self, tier: int, kinds: np.ndarray) -> dict[str, Any]:
        """:meth:`buffer_facts` of a switch of ``tier`` whose active ports' link kinds are ``kinds``
        (in port order), looked up by those kinds without counting them again."""
        key = (tier, kinds.tobytes())
        facts = self._kind_facts.get(key)
        if facts is None:
            facts = self._kind_facts[key] = self.buffer_facts(Counter(KIND_NAMES[k] for k in kinds.tolist()), tier)
        return facts

    def qos_tables(self) -> dict[str, Any]:
        """The QoS profile and its tables, as every switch's templates print them (``fabric.qos``)."""
        q = self.qos
        return {
            "name": q.name,
            "roce_dscp": list(q.roce_dscp),
            "lossless_tc": list(q.lossless_tc),
            "pfc_priorities": q.pfc_priorities,
            "lossless_pg_key": _range_key(q.lossless_tc),
            "cnp_dscp": q.cnp_dscp,
            "cnp_tc": q.cnp_tc,
            "ecn_min_bytes": q.ecn_min_bytes,
            "ecn_max_bytes": q.ecn_max_bytes,
            "ecn_probability_pct": q.ecn_probability_pct,
            "dscp_to_tc": q.dscp_to_tc(),
            "tc_to_pg": q.tc_to_pg(),
            "tc_to_queue": {tc: tc for tc in range(8)},
            "pfc_to_queue": {p: p for p in range(8)},
            # priority groups of the PFC priorities: SONiC sets the map on Spectrum, never on
            # Broadcom; without a platform, with the nvidia profile
            "pfc_to_pg": ({p: q.tc_to_pg()[p] for p in q.lossless_tc} if self.pfc_to_pg_map() else {}),
            "queues": [_queue_role(q, queue) for queue in range(8)],
            "buffer_queues": _buffer_queue_ranges(q),
            "roce_tos": q.roce_tos,
            "pfc_vector": q.pfc_vector(),
        }

    def tier_buffer_profiles(self, tier: int) -> list[dict[str, Any]]:
        """The lossless buffer profiles a tier's switches list, one per name, by link kind: every
        kind of the fabric (as each switch has always listed them), with the tier's own values where
        it has ports of that kind, else those of the lowest tier that has. Made once per tier."""
        if tier not in self._tier_profiles:
            self._tier_profiles[tier] = self._profiles_of(tier)
        return self._tier_profiles[tier]

    def _profiles_of(self, tier: int) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        kinds = LINK_KINDS[: self.fabric.plan.tiers] + ((PEER_LINK,) if self.fabric.plan.homes == 2 else ())
        for kind in kinds:
            own = self.buffer_profiles.get((tier, kind))
            b = own or next(v for (t, k), v in sorted(self.buffer_profiles.items()) if k == kind)
            if b["name"] not in out or own is not None:
                out[b["name"]] = b
        return list(out.values())

    def pfc_to_pg_map(self, tier: int = 1) -> bool:
        """Whether ports get ``pfc_to_pg_map``: SONiC's QoS template sets it on NVIDIA Spectrum only."""
        platform = self.platforms[tier]
        if platform is not None:
            return platform.vendor == "nvidia"
        return self.qos.name == "nvidia"


def _queue_role(q: QosProfile, queue: int) -> dict[str, Any]:
    """Scheduler, ECN profile and egress buffer profile of one egress queue."""
    if queue in q.lossless_tc:
        role = {"queue": queue, "scheduler": "scheduler.lossless", "wred_profile": "ROCE_LOSSLESS",
                "buffer_profile": "egress_lossless_profile"}
    else:
        scheduler = "scheduler.cnp" if queue == q.cnp_tc else "scheduler.lossy"
        role = {"queue": queue, "scheduler": scheduler, "wred_profile": None,
                "buffer_profile": "egress_lossy_profile"}
    # the QUEUE table value, ready to print (the same for every port)
    entry = {"scheduler": role["scheduler"]}
    if role["wred_profile"]:
        entry["wred_profile"] = role["wred_profile"]
    role["entry"] = json.dumps(entry)
    return role


def _range_key(values: tuple[int, ...]) -> str:
    """``3`` or ``3-4``: a run of consecutive priority groups as SONiC keys it."""
    first, last = min(values), max(values)
    assert list(values) == list(range(first, last + 1)), values
    return str(first) if first == last else f"{first}-{last}"


def _buffer_queue_ranges(q: QosProfile) -> list[dict[str, str]]:
    """Egress buffer profiles over runs of queues, as SONiC keys them: ``0-2``, ``3``, ``4-7``."""
    runs: list[dict[str, Any]] = []
    for queue in range(8):
        profile = _queue_role(q, queue)["buffer_profile"]
        if runs and runs[-1]["profile"] == profile:
            runs[-1]["last"] = queue
        else:
            runs.append({"first": queue, "last": queue, "profile": profile})
    return [{"queues": f"{r['first']}" if r["first"] == r["last"] else f"{r['first']}-{r['last']}",
             "profile": r["profile"], "lossless": r["profile"] == "egress_lossless_profile"} for r in runs]


def _metres(value: float) -> str:
    return f"{value:g}m"
