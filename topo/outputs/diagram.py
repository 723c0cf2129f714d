"""The fabric as an SVG picture: tiers as rows, rails in colours, link counts on bundles.

Three levels of detail, picked by size so that the picture stays readable on one fixed 16:9 page
(``WIDTH`` x ``HEIGHT`` pixels) at any scale:

``switches``
    up to ``DETAIL_MAX_SWITCHES`` (128) switches: one box per switch (leaves coloured by rail), the
    servers as one box per scalable unit (rack placement: per leaf), and one bundle per pair of
    connected boxes, drawn wider for more links.
``groups``
    one box per scalable unit of servers and of leaves, per pod of spines and per core group
    (the groups of ``graph/fabric-aggregate.dot``), when no tier has more than ``GROUPS_PER_ROW``.
``pods``
    beyond that, one box per pod (its servers, its leaves, its spines) and per core group.

Every box of the level is drawn (none is elided); a label that does not fit its box is left out
and the box keeps a ``<title>`` (a tooltip) with its figures. Numeric work is numpy over the
link arrays; Python loops over boxes and bundles only (a few thousand at most).

Dual-ToR: the leaves row is drawn in pairs. At the ``switches`` level a pair's a and b leaves
(``r3a``, ``r3b``) stand side by side in a dotted frame, at the other levels a unit's a leaves and
b leaves are two boxes (as in ``graph/fabric-aggregate.dot``) framed the same way; between the two
boxes of a frame, a short line is the bundle of their peer links.

Examples
--------
>>> from topo import build_fabric, load_spec
>>> svg = fabric_svg(build_fabric(load_spec({"gpus": 1024})))
>>> svg.count('class="box switch'), 'width="1600" height="900"' in svg
(48, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import numpy as np

from .. import __version__
from ..fabric import LINK_KINDS, PEER_LINK, ROLES, Fabric

WIDTH, HEIGHT = 1600, 900
MARGIN_X, LEFT, TOP, BOTTOM = 40, 150, 90, 60
DETAIL_MAX_SWITCHES = 128
GROUPS_PER_ROW = 64
#: Colours of the rails (leaf boxes in rail placement), cycled past 8 rails.
RAIL_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
TIER_COLOURS = ("#d9d9d9", "#9ecae1", "#fdd0a2", "#c7e9c0")
KIND_COLOURS = ("#636363", "#3182bd", "#e6550d")
#: Colour of a dual-ToR peer-link bundle and of the frame around a leaf pair.
PEER_COLOUR = "#756bb1"


@dataclass
class Box:
    key: int  #: the box's number in its level
    tier: int
    label: str
    title: str
    colour: str
    x: float = 0.0
    w: float = 0.0


def _boxes_and_keys(fabric: Fabric) -> tuple[str, list[list[Box]], np.ndarray]:
    """(level, boxes per tier, box key of every vertex)."""
    plan, tier = fabric.plan, fabric.tier.astype(np.int64)
    switches = len(fabric.names) - plan.nodes
    by_su = plan.placement == "rail"
    lower = fabric.su if by_su else fabric.pod
    if switches <= DETAIL_MAX_SWITCHES:
        level = "switches"
        unit = np.where(tier == 0, lower.astype(np.int64), np.arange(len(tier)))
    else:
        su_groups = int(lower.max()) + 1
        cores = int(fabric.group[tier == 3].max()) + 1 if plan.tiers == 3 else 0
        level = "groups" if max(su_groups, cores) <= GROUPS_PER_ROW else "pods"
        low = lower if level == "groups" else fabric.pod
        unit = np.select([tier <= 1, tier == 2], [low, fabric.pod], fabric.group).astype(np.int64)
        if level == "groups" and plan.planes > 1 and by_su:  # an SU's leaves, one box per plane (pods are per plane already)
            leaf = tier == 1
            unit[leaf] += fabric.plane[leaf].astype(np.int64) * su_groups
        if plan.homes == 2:  # a unit's leaves, a box per side of their pairs: 2u (a leaves), 2u + 1 (b leaves)
            leaf = tier == 1
            unit[leaf] = unit[leaf] * 2 + (np.flatnonzero(leaf) - fabric.first(1)) % 2
    # box keys: per tier, numbered from 0 in vertex order
    keys = np.zeros(len(tier), dtype=np.int64)
    rows: list[list[Box]] = []
    for t in range(plan.tiers + 1):
        idx = np.flatnonzero(tier == t)
        values, first, inverse, counts = np.unique(unit[idx], return_index=True, return_inverse=True,
                                                   return_counts=True)
        keys[idx] = inverse
        row = []
        for k, (v, f, c) in enumerate(zip(values.tolist(), first.tolist(), counts.tolist())):
            vertex = int(idx[f])
            row.append(_box(fabric, level, t, k, int(v), vertex, int(c)))
        rows.append(row)
    return level, rows, keys


def _box(fabric: Fabric, level: str, t: int, k: int, value: int, vertex: int, members: int) -> Box:
    spec = fabric.spec
    role = ROLES[t]
    side = "ab"[value % 2] if (t == 1 and fabric.plan.homes == 2) else ""  # a dual-ToR leaf's side
    if level == "switches" and t >= 1:
        name = fabric.names[vertex]
        rail = int(fabric.rail[vertex])
        colour = RAIL_COLOURS[rail % len(RAIL_COLOURS)] if (t == 1 and rail >= 0 and fabric.plan.placement == "rail") \
            else TIER_COLOURS[t]
        short = f"r{rail}{side}" if (t == 1 and rail >= 0 and fabric.plan.placement == "rail") else \
            name.rsplit("-", 1)[-1] if side else name.split("-", 1)[-1]  # a rack pair's leaf: "07a"
        return Box(k, t, short, f"{name} ({role}{f', rail {rail}' if t == 1 and rail >= 0 else ''})", colour)
    if t == 0:
        unit = {"switches": "SU" if fabric.plan.placement == "rail" else "pod",
                "groups": "SU" if fabric.plan.placement == "rail" else "pod", "pods": "pod"}[level]
        gpus = members * spec.gpus_per_node
        label = f"{unit} {value}" if level == "switches" else str(value)
        return Box(k, t, label, f"{unit} {value}: {members:,} servers, {gpus:,} GPUs", TIER_COLOURS[0])
    where = {1: "SU" if (level == "groups" and fabric.plan.placement == "rail") else "pod", 2: "pod",
             3: "core group"}[t]
    plural = {1: "leaves", 2: "spines", 3: "cores"}[t]
    plan = fabric.plan
    if plan.planes > 1:  # the plane, and the unit's number in its plane
        plane = int(fabric.plane[vertex])
        per = {1: value - plane * plan.sus if where == "SU" else value - plane * plan.plane_pods,
               2: value - plane * plan.plane_pods, 3: value - plane * plan.spines_per_pod}[t]
        return Box(k, t, f"pl{plane} {per}", f"plane {plane}, {where} {per}: {members:,} {plural}", TIER_COLOURS[t])
    if side:
        unit = value // 2
        return Box(k, t, f"{unit}{side}", f"{where} {unit}, side {side}: {members:,} {plural}", TIER_COLOURS[t])
    return Box(k, t, str(value), f"{where} {value}: {members:,} {plural}", TIER_COLOURS[t])


def _layout(rows: list[list[Box]], paired: int = -1) -> None:
    """Place the boxes of each row evenly; the row ``paired`` (dual-ToR leaves, in a, b order) in
    pairs: the two boxes of a pair close together, a gap between pairs."""
    usable = WIDTH - LEFT - MARGIN_X
    for t, row in enumerate(rows):
        if t == paired:
            n = max(len(row) // 2, 1)
            pitch = usable / n
            span = min(2 * 140.0, pitch * 0.85)  # both boxes and the gap between them
            gap = span * 0.12
            w = (span - gap) / 2
            for i, box in enumerate(row):
                pair, side = divmod(i, 2)
                box.x = LEFT + pitch * (pair + 0.5) - span / 2 + side * (w + gap)
                box.w = w
            continue
        n = max(len(row), 1)
        pitch = usable / n
        w = min(140.0, pitch * 0.8)
        for i, box in enumerate(row):
            box.x = LEFT + pitch * (i + 0.5) - w / 2
            box.w = w


def fabric_svg(fabric: Fabric) -> str:
    """The picture of ``fabric`` as an SVG document (see the module docstring)."""
    plan, links = fabric.plan, fabric.links
    level, rows, keys = _boxes_and_keys(fabric)
    dual = plan.homes == 2 and fabric.peer_links is not None
    _layout(rows, paired=1 if dual else -1)
    if dual and any(b.w < 7.0 * len(b.label) for b in rows[1]):  # narrow pair boxes: their sides alone
        for b in rows[1]:
            b.label = b.label[-1]
    tiers = plan.tiers + 1
    box_h = 34.0
    gap = (HEIGHT - TOP - BOTTOM - box_h) / max(tiers - 1, 1)
    y_of = [HEIGHT - BOTTOM - box_h - t * gap for t in range(tiers)]

    # bundles: links between two boxes of adjacent tiers, counted with numpy
    tier = fabric.tier.astype(np.int64)
    lo_t, hi_t = tier[links.lo], tier[links.hi]
    lo_k, hi_k = keys[links.lo], keys[links.hi]
    width_of = [len(r) for r in rows]
    span = max(width_of) + 1
    code = (lo_t * span + lo_k) * (tiers * span) + hi_t * span + hi_k
    bundles, first, counts = np.unique(code, return_index=True, return_counts=True)
    gbps = np.bincount(np.searchsorted(bundles, code), weights=links.gbps.astype(np.float64))
    label_bundles = len(bundles) <= 48
    pair_of = lo_t[first]  # bundles of each pair of tiers: denser ones are drawn fainter
    per_pair = np.bincount(pair_of, minlength=tiers)

    s = fabric.spec
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif" '
           f'data-level="{level}">\n',
           f'<title>{escape(s.name)}: {s.gpus:,} GPUs, {plan.tiers} tiers ({level})</title>\n',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>\n',
           f'<text x="{MARGIN_X}" y="34" font-size="22" font-weight="bold">{escape(s.name)}: {s.gpus:,} GPUs, '
           f'{plan.tiers}-tier {("rail-only" if plan.tiers == 1 else "rail-optimized") if plan.placement == "rail" else "rack"} fabric'
           f'{", dual-ToR leaf pairs" if dual else ""}</text>\n',
           f'<text x="{MARGIN_X}" y="60" font-size="14" fill="#444">'
           f'{_level_line(fabric, level, rows)}; written by topo {__version__}</text>\n']
    out.append('<g class="bundles">\n')
    for j, b in enumerate(bundles.tolist()):
        r = int(first[j])
        lt, lk = int(lo_t[r]), int(lo_k[r])
        ht, hk = int(hi_t[r]), int(hi_k[r])
        a, c = rows[lt][lk], rows[ht][hk]
        x1, y1 = a.x + a.w / 2, y_of[lt]
        x2, y2 = c.x + c.w / 2, y_of[ht] + box_h
        n = int(counts[j])
        stroke = 0.6 + 1.4 * np.log2(1 + n) / np.log2(1 + counts.max())
        kind = int(links.kind[r])
        opacity = min(0.6, max(0.04, 40.0 / per_pair[lt]))
        out.append(f'<line class="bundle {LINK_KINDS[kind]}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" '
                   f'y2="{y2:.1f}" stroke="{KIND_COLOURS[kind]}" stroke-opacity="{opacity:.2f}" stroke-width="{stroke:.2f}">'
                   f'<title>{escape(a.title)} to {escape(c.title)}: {n:,} links, {gbps[j]:,.0f} Gb/s</title></line>\n')
        if label_bundles and n > 1:
            out.append(f'<text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2:.1f}" font-size="11" '
                       f'text-anchor="middle" fill="#333">{n:,}</text>\n')
    if dual:
        out.append(_peer_bundles(fabric, rows[1], keys, y_of[1], box_h))
    out.append("</g>\n")
    for t, row in enumerate(rows):
        role = "servers" if t == 0 else {1: "leaves", 2: "spines", 3: "cores"}[t]
        total = int(np.count_nonzero(tier == t))
        out.append(f'<g class="tier" data-tier="{t}">\n<text x="8" y="{y_of[t] + box_h / 2 - 3:.1f}" '
                   f'font-size="13" font-weight="bold" fill="#333">{role} ({total:,})</text>'
                   f'<text x="8" y="{y_of[t] + box_h / 2 + 12:.1f}" font-size="11" fill="#555">'
                   f'{_row_unit(fabric, level, t, len(row))}</text>\n')
        if dual and t == 1:  # a dotted frame around the two boxes of each pair
            for a, b in zip(row[::2], row[1::2]):
                out.append(f'<rect class="pair" x="{a.x - 3:.1f}" y="{y_of[t] - 3:.1f}" '
                           f'width="{b.x + b.w - a.x + 6:.1f}" height="{box_h + 6:.0f}" rx="6" fill="none" '
                           f'stroke="{PEER_COLOUR}" stroke-width="1" stroke-dasharray="3,2"/>\n')
        for box in row:
            kind = "servers" if t == 0 else "switch" if level == "switches" else "group"
            out.append(f'<g class="box {kind}"><title>{escape(box.title)}</title>'
                       f'<rect x="{box.x:.1f}" y="{y_of[t]:.1f}" width="{box.w:.1f}" height="{box_h:.0f}" '
                       f'rx="4" fill="{box.colour}" stroke="#555" stroke-width="0.6"/>')
            if box.w >= 7.0 * len(box.label) * 0.6:
                out.append(f'<text x="{box.x + box.w / 2:.1f}" y="{y_of[t] + box_h / 2 + 4:.1f}" '
                           f'font-size="11" text-anchor="middle">{escape(box.label)}</text>')
            out.append("</g>\n")
        out.append("</g>\n")
    out.append(_legend(fabric, level))
    out.append("</svg>\n")
    return "".join(out)


def _peer_bundles(fabric: Fabric, row: list[Box], keys: np.ndarray, y: float, box_h: float) -> str:
    """Dual-ToR: one short line per pair of leaf boxes, across the gap between them: the bundle of
    their peer links (every peer link joins a box 2u to the box 2u + 1 beside it)."""
    peer = fabric.peer_links
    a = keys[peer.lo]
    n = np.bincount(a, minlength=len(row))
    gbps = np.bincount(a, weights=peer.gbps.astype(np.float64), minlength=len(row))
    parts = []
    for k in np.flatnonzero(n).tolist():
        left, right = row[k], row[k + 1]
        parts.append(f'<line class="bundle {PEER_LINK}" x1="{left.x + left.w:.1f}" y1="{y + box_h / 2:.1f}" '
                     f'x2="{right.x:.1f}" y2="{y + box_h / 2:.1f}" stroke="{PEER_COLOUR}" stroke-width="2.50">'
                     f'<title>{escape(left.title)} to {escape(right.title)}: {int(n[k]):,} links, '
                     f'{gbps[k]:,.0f} Gb/s</title></line>\n')
    return "".join(parts)


def _row_unit(fabric: Fabric, level: str, t: int, boxes: int) -> str:
    """What one box of a row holds, for the row's label."""
    if level == "switches" and t >= 1:
        if t == 1 and fabric.plan.homes == 2:
            return "in pairs" + (", by rail" if fabric.plan.placement == "rail" else ", one box each")
        return "one box each" + (", by rail" if t == 1 and fabric.plan.placement == "rail" else "")
    planes = fabric.plan.planes if t >= 1 else 1
    if planes > 1:
        boxes //= planes
    each = f" in each of {planes} planes" if planes > 1 else ""
    if t == 1 and fabric.plan.homes == 2:  # a box per side of each unit's pairs
        unit = "SU" if (fabric.plan.placement == "rail" and level != "pods") else "pod"
        return f"{boxes // 2:,} {unit}{'s' if boxes != 2 else ''}, a and b sides"
    if t == 0 or (t == 1 and level != "pods"):
        unit = "SU" if (fabric.plan.placement == "rail" and level != "pods") else "pod"
        return f"{boxes:,} {unit}{'s' if boxes != 1 else ''}{each}"
    word = "pod" if t <= 2 else "core group"
    return f"{boxes:,} {word}{'s' if boxes != 1 else ''}{each}"


def _level_line(fabric: Fabric, level: str, rows: list[list[Box]]) -> str:
    counts = ", ".join(f"{len(r):,} {'server' if t == 0 else ROLES[t]} box{'es' if len(r) != 1 else ''}"
                       for t, r in enumerate(rows))
    what = {"switches": "one box per switch, servers by scalable unit",
            "groups": "one box per scalable unit, spine pod and core group",
            "pods": "one box per pod and core group"}[level]
    if fabric.plan.homes == 2 and level != "switches":
        what += ", leaves by side of their pairs"
    return f"{what} ({counts})"


def _legend(fabric: Fabric, level: str) -> str:
    y = HEIGHT - 22
    parts = ['<g class="legend" font-size="12">']
    x = MARGIN_X
    for k in range(fabric.plan.tiers):
        parts.append(f'<line x1="{x}" y1="{y - 4}" x2="{x + 24}" y2="{y - 4}" stroke="{KIND_COLOURS[k]}" '
                     f'stroke-width="2"/><text x="{x + 30}" y="{y}">{LINK_KINDS[k]} links</text>')
        x += 150
    if fabric.plan.homes == 2:
        parts.append(f'<line x1="{x}" y1="{y - 4}" x2="{x + 24}" y2="{y - 4}" stroke="{PEER_COLOUR}" '
                     f'stroke-width="2"/><text x="{x + 30}" y="{y}">peer links (leaf pairs)</text>')
        x += 190
    if level == "switches" and fabric.plan.placement == "rail":
        rails = min(fabric.plan.nic_rails, len(RAIL_COLOURS))  # the leaves' rail: a NIC's, in every plane or pair
        for r in range(rails):
            parts.append(f'<rect x="{x}" y="{y - 12}" width="14" height="14" fill="{RAIL_COLOURS[r]}"/>'
                         f'<text x="{x + 18}" y="{y}">rail {r}</text>')
            x += 70
    parts.append("</g>\n")
    return "".join(parts)
