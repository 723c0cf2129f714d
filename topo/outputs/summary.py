"""The summary's lines as the console, the build's README and the design review print them, from a
:class:`topo.summary.Summary` (the counts are a fact of the design, made in :mod:`topo.summary`).
"""

from __future__ import annotations

from typing import Any


def dual_tor_line(d: dict[str, Any]) -> str:
    """The summary's line on a dual-ToR fabric's leaf pairs (``d``: its ``dual_tor`` facts), as the
    console and the design review print it."""
    pairs = f"{d['pairs']:,} leaf pair" + ("" if d["pairs"] == 1 else "s")
    return (f"dual-ToR: {pairs} (MCLAG), each NIC bonded over 2 x {d['link_gbps']}G links, one to each leaf of "
            f"its pair; a peer link of {d['peer_link_ports']} x {d['peer_link_gbps'] // d['peer_link_ports']}G per "
            f"pair, out of the leaves' uplinks ({d['leaf_uplinks']} left)")


def switches_line(s: dict[str, Any], generic: str = "") -> str:
    """``switches: radix 64 x 400G (eth-25t-64x400)``, or each tier's model where they differ, from a
    summary's :meth:`Summary.to_dict`; ``generic`` follows a tier without a model (the console
    leaves it out, the design review says so).

    >>> from topo import build_fabric, load_spec, summarize
    >>> switches_line(summarize(build_fabric(load_spec({"gpus": 1024, "spine_switch": "eth-51t-64x800"}))).to_dict())
    'switches: leaf 64 x 400G, spine 64 x 800G (eth-51t-64x800)'
    """
    tiers = list(s["per_tier"].values())

    def model(t: dict[str, Any]) -> str:
        return f" ({t['model']})" if t["model"] else generic

    if len({(t["model"], t["radix"], t["port_gbps"]) for t in tiers}) == 1:
        return f"switches: radix {tiers[0]['radix']} x {tiers[0]['port_gbps']}G{model(tiers[0])}"
    return "switches: " + ", ".join(f"{t['role']} {t['radix']} x {t['port_gbps']}G{model(t)}" for t in tiers)


def breakout_line(breakouts: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> str | None:
    """The summary's line on tiers of different port speeds (None when there are none), as the console
    and the design review print it.

    >>> breakout_line([{"links": "leaf-spine", "link_gbps": 400, "tier": "spine", "port_gbps": 800, "lanes": 2}])
    'port speeds: leaf-spine links at 400G, each 800G spine port broken out into 2'
    """
    if not breakouts:
        return None
    return "port speeds: " + "; ".join(f"{b['links']} links at {b['link_gbps']}G, each {b['port_gbps']}G "
                                       f"{b['tier']} port broken out into {b['lanes']}" for b in breakouts)


def power_line(power: dict[str, Any]) -> str:
    """The summary's line on the whole cluster's power, from a summary's ``power`` facts.

    >>> power_line({"compute_w": 2240000, "network_w": 166880.0, "total_w": 2406880.0,
    ...             "compute_of": {"profile": "gb300-nvl72", "unit": "rack", "units": 16, "unit_w": 140000}})
    'power: 2,406,880 W in all: compute 2,240,000 W (16 racks of gb300-nvl72 at 140,000 W), network 166,880 W'
    """
    of = power["compute_of"]
    units = f"{of['units']:,} {of['unit']}" + ("" if of["units"] == 1 else "s")
    compute = f"compute {power['compute_w']:,.0f} W ({units} of {of['profile']} at {of['unit_w']:,} W)"
    if power["total_w"] is None:
        return f"power: {compute}; network unknown (no switch model or switch_watts)"
    return f"power: {power['total_w']:,.0f} W in all: {compute}, network {power['network_w']:,.0f} W"


def racks_line(rack: dict[str, Any]) -> str:
    """The summary's line on the racks (NVLink domains) of trays, from a summary's ``rack`` facts.

    >>> racks_line({"profile": "gb300-nvl72", "racks": 18, "nvlink_domains": 18, "trays_per_rack": 18,
    ...             "gpus_per_tray": 4, "spare_trays": 2, "gpus_per_rack": 64, "trays_in_use": 288,
    ...             "trays_installed": 324, "last_rack_trays": 16})
    'racks: 18 of gb300-nvl72 (18 NVLink domains of 72 GPUs), 18 trays of 4 GPUs each: 16 in the job (64 GPUs), 2 spare; 324 trays installed'
    """
    r = rack
    domains = f"{r['nvlink_domains']:,} NVLink domain" + ("" if r["nvlink_domains"] == 1 else "s")
    use = r["trays_per_rack"] - r["spare_trays"]
    line = (f"racks: {r['racks']:,} of {r['profile']} "
            f"({domains} of {r['trays_per_rack'] * r['gpus_per_tray']} GPUs), {r['trays_per_rack']} trays of "
            f"{r['gpus_per_tray']} GPUs each: {use} in the job ({r['gpus_per_rack']} GPUs), {r['spare_trays']} spare; "
            f"{r['trays_installed']:,} trays installed")
    if r["last_rack_trays"] < use:
        line += f"; the last rack has {r['last_rack_trays']} of its {use} trays in the job"
    return line
