"""``cabling.csv`` and ``bom.csv``: the files of the cabling plan (:func:`topo.cabling.plan_cabling`),
and the one-line account of it that the console and the build's README print.

The plan itself (every cable, its medium and optics, the bill of materials and power) is a fact of
the design, made in :mod:`topo.cabling`; this module only lays it out, a row per link.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np

from ..addressing import member_port, rdma_device
from ..cabling import A_TIER, B_TIER, ROW_KINDS, Cabling, plan_cabling
from ..fabric import PEER_KIND, Fabric

#: File names in a build folder.
CABLING_CSV = "cabling.csv"
BOM_CSV = "bom.csv"
#: Columns of cabling.csv, in order.
CABLING_COLUMNS = (
    "cable_id", "tier", "a_device", "a_cage", "a_port", "a_lane", "a_interface",
    "b_device", "b_cage", "b_port", "b_lane", "b_interface", "gbps", "length_m", "cable_length_m",
    "medium", "cable", "a_transceiver", "b_transceiver",
)
#: Columns of bom.csv, in order.
BOM_COLUMNS = ("category", "item", "tier", "end", "length_m", "quantity", "unit_power_w", "power_w")
#: Columns bom.csv adds with a price list (``prices`` in the spec).
PRICE_COLUMNS = ("unit_price", "price")


def _number(value: float) -> str:
    """A length or power as written in the CSV files: ``3``, ``0.5``, ``1048576``, ``38.4``."""
    value = float(value)
    if value.is_integer():
        return str(int(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


def cabling_csv(fabric: Fabric, cabling: Cabling) -> str:
    """``cabling.csv``: one row per link, the rows of one cable adjacent and sharing its id."""
    names = fabric.names
    plan = fabric.plan
    ethernet = fabric.ethernet
    tiers = range(1, plan.tiers + 1)
    if ethernet:
        # port names of each tier's switches by breakout (their lanes a port may differ), made once:
        # name_of[tier, breakout][port][lane]
        name_of = {}
        for t in tiers:
            port_name, t_radix = fabric.port_names.name, fabric.tier_switch(t).radix
            for k in (t - 1, t):  # the kinds of link at its ports: from below, and up
                if not 0 <= k < plan.tiers:
                    continue
                out = plan.lanes(k)[1 if k == t - 1 else 0]
                if (t, out) not in name_of:
                    name_of[t, out] = [[""] + [port_name(t, p, ln, out) for ln in range(1, out + 1)]
                                       for p in range(t_radix + 1)]
            name_of.setdefault((t, 1), [[""] + [port_name(t, p)] for p in range(t_radix + 1)])
    if fabric.spec.dual_tor:  # server link r * 2 + m: port m + 1 of NIC r's bond
        rdma = [member_port(i // 2, i % 2) for i in range(max(2, fabric.spec.nic_links))]
    else:
        rdma = [rdma_device(i) for i in range(max(1, fabric.spec.nic_ports))]
    kind = cabling.kind.tolist()
    a_port, a_lane, b_port = cabling.a_port.tolist(), cabling.a_lane.tolist(), cabling.b_port.tolist()
    b_lane = cabling.b_lane.tolist()
    if ethernet:  # the switch at a is of tier A_TIER[kind], the one at b of B_TIER[kind]
        # the port-name table of each row kind's two ends
        def table(tier: int, k: int, end: int):  # end 0: the link's lower end, 1: its upper end
            if k == PEER_KIND:
                return name_of[tier, 1]
            return name_of[tier, plan.lanes(k)[end]] if k < plan.tiers else None

        a_names = [table(A_TIER[k], k, 1 if k == 0 else 0) for k in range(len(ROW_KINDS))]
        b_names = [None if k == 0 else table(B_TIER[k], k, 1) for k in range(len(ROW_KINDS))]
        a_iface = [a_names[k][p][ln] for k, p, ln in zip(kind, a_port, a_lane)]
        b_iface = [rdma[p] if k == 0 else b_names[k][p][ln] for k, p, ln in zip(kind, b_port, b_lane)]
    else:
        a_iface = [""] * len(kind)
        b_iface = [rdma[p] if k == 0 else "" for k, p in zip(kind, b_port)]
    # catalogue strings may need CSV quoting: escape each distinct one once
    cable_ids = cabling.cable_ids()
    most = max(2, int(cabling.pieces.max(initial=1)) + 1)
    cable_text = [[_field((f"{n}x " if n > 1 else "") + p) for n in range(most)] for p in cabling.parts]
    module_text = [_field(m) for m in cabling.modules] + [""]  # index -1 -> ""
    media = [_field(m) for m in cabling.media]
    tiers = [_field(t) for t in ROW_KINDS]
    tail = _row_tails(cabling, cable_text, module_text, media)
    lines = [",".join(CABLING_COLUMNS)]
    lines += [
        f"{cid},{tiers[k]},{names[av]},{ac},{ap},{al},{ai},{names[bv]},{'' if bc < 0 else bc},{bp},"
        f"{bl or ''},{bi},{t}"
        for cid, k, av, ac, ap, al, ai, bv, bc, bp, bl, bi, t in zip(
            (cable_ids[c] for c in cabling.cable.tolist()), kind, cabling.a.tolist(), cabling.a_cage.tolist(),
            a_port, a_lane, a_iface, cabling.b.tolist(), cabling.b_cage.tolist(), b_port, b_lane, b_iface, tail)
    ]
    return "\n".join(lines) + "\n"


#: Most combinations :func:`_row_tails` numbers before it renumbers them densely (int64 keys).
_KEY_SPAN = 1 << 62


def _row_tails(cabling: Cabling, cable_text: list[list[str]], module_text: list[str], media: list[str]) -> list[str]:
    """The last seven fields of every ``cabling.csv`` row (speed, length, stock length, medium,
    cable, the two ends' modules), each distinct combination formatted once: a fabric has few
    (three in the default fabric of 65,536 GPUs), its links hundreds of thousands."""
    columns = [cabling.gbps, cabling.length_m, cabling.cable_length_m, cabling.medium, cabling.part,
               cabling.pieces, cabling.a_module, cabling.b_module]
    key, span = np.zeros(len(cabling.kind), dtype=np.int64), 1
    for column in columns:  # each column by its distinct values, the combination in mixed radix
        values, which = np.unique(column, return_inverse=True)
        if span * len(values) >= _KEY_SPAN:  # renumber the combinations so far densely first
            key = np.unique(key, return_inverse=True)[1].ravel().astype(np.int64)
            span = int(key.max(initial=0)) + 1
        key, span = key * len(values) + which.ravel(), span * max(1, len(values))
    combos, row_combo = np.unique(key, return_inverse=True)
    example = np.zeros(len(combos), dtype=np.int64)
    example[row_combo.ravel()] = np.arange(len(key))  # a row of each combination
    texts = np.empty(len(combos), dtype=object)
    texts[:] = [
        f"{g},{_number(ln)},{_number(st)},{media[m]},{cable_text[p][pc]},{module_text[am]},{module_text[bm]}"
        for g, ln, st, m, p, pc, am, bm in zip(*(column[example].tolist() for column in columns))]
    return texts[row_combo.ravel()].tolist()


def _field(text: str) -> str:
    """One CSV field as the csv module writes it (quoted when it holds a comma, quote or newline)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow([text])
    return out.getvalue()


def bom_csv(cabling: Cabling) -> str:
    """``bom.csv``: switches, cables (by part, tier and ordered length) and transceivers."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    priced = cabling.cost is not None
    writer.writerow(BOM_COLUMNS + (PRICE_COLUMNS if priced else ()))
    for i, line in enumerate(cabling.bom):
        row = [line.category, line.item, line.tier, line.end, "" if line.length_m is None else _number(line.length_m),
               line.quantity, "" if line.unit_power_w is None else _number(line.unit_power_w),
               "" if line.power_w is None else _number(line.power_w)]
        if priced:
            unit, price = cabling.cost["lines"][i]
            row += ["" if unit is None else _number(unit), "" if price is None else _number(price)]
        writer.writerow(row)
    return out.getvalue()


def cabling_line(cabling: "Cabling") -> str:
    """Cables, links, transceivers and power in one line, in the words of every other output:
    cables (labelled assemblies, as cabling.csv numbers them), pieces (what bom.csv orders), links
    by medium, and power with the optics stated apart (docs/cabling.md)."""
    d = cabling.to_dict()
    media = ", ".join(f"{count:,} {medium}" for medium, count in d["links_by_medium"].items())
    cables = f"{d['cables']['total']:,} cables"
    if d["cables"]["pieces"] != d["cables"]["total"]:
        cables += f" ({d['cables']['pieces']:,} pieces)"
    line = (f"cabling: {cables} for {d['links']:,} links ({media}); {d['transceivers']['total']:,} "
            f"transceivers; {power_text(d['power_w'])}")
    cost = d.get("cost")
    if cost is not None:
        missing = len(cost["unpriced"])
        said = [cost["note"]] if cost["note"] else []
        said += [f"{missing} item{'s' if missing != 1 else ''} unpriced"] if missing else []
        line += f"; cost {cost['total']:,.0f} {cost['currency']}" + (f" ({'; '.join(said)})" if said else "")
    return line


def power_text(power: dict[str, Any]) -> str:
    """``network power 90,752 W (switches 82,560 W with 23,040 W of their optics; NIC optics
    8,192 W)``: the total, and the optics apart, each counted once."""
    nic = f"NIC optics {power['server_end']:,.0f} W"
    if power["total"] is None:
        return f"power unknown (no switch model or switch_watts; switch optics {power['switch_end']:,.0f} W, {nic})"
    like = f" (as {power['switch_power_of']})" if power.get("switch_power_of") else ""
    if power["switch_power_includes_optics"]:
        switches = f"switches {power['switches']:,.0f} W{like} with {power['switch_end']:,.0f} W of their optics"
    else:
        switches = f"switches {power['switches']:,.0f} W{like}, switch optics {power['switch_end']:,.0f} W"
    return f"network power {power['total']:,.0f} W ({switches}; {nic})"


def cabling_files(fabric: Fabric, cabling: Cabling | None = None) -> dict[str, str]:
    """The cabling plan and bill of materials of a build folder: ``cabling.csv`` and ``bom.csv``.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> files = cabling_files(build_fabric(load_spec({"gpus": 16})))
    >>> sorted(files)
    ['bom.csv', 'cabling.csv']
    >>> files["cabling.csv"].splitlines()[1].split(",")[:12]
    ['NL-0001', 'node-leaf', 'cluster-leaf-su00-r0', '1', '1', '1', 'Ethernet0', 'cluster-node0000', '', '0', '', 'mlx5_0']
    >>> files["cabling.csv"].splitlines()[1].split(",")[12:]
    ['400', '20', '20', 'mmf-sr', 'MPO-12/APC OM4 fibre', '400G OSFP SR4', '400G OSFP SR4']
    """
    cabling = cabling if cabling is not None else plan_cabling(fabric)
    return {CABLING_CSV: cabling_csv(fabric, cabling), BOM_CSV: bom_csv(cabling)}
