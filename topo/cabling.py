"""The cabling plan and bill of materials: every cable with both ends, its medium and its optics.

:func:`plan_cabling` picks, for every link of a fabric, the medium its run needs (passive copper,
active copper, multimode or single-mode optics) from the run length (``spec.cable_m`` per tier),
the speeds at both ends and the breakout, using the rules of a media catalogue shipped as data
(``topo/data/optics.yaml``, read by :mod:`topo.media`). It groups links into physical
cables, counts the transceivers each end needs, and totals cables, transceivers, switches and
power. Everything is computed with numpy over the fabric's link arrays. The plan is a fact of the
design; ``cabling.csv`` and ``bom.csv`` are written from it by :mod:`topo.outputs.cabling`.

Terms (documented in ``docs/cabling.md``):

- *cage*: one pluggable socket on a switch. A twin-port OSFP cage holds two of the fabric's ports
  (``ports_per_cage`` in the catalogue); its module or cable serves both.
- *cable*: one physical assembly with one label: a copper cable (a breakout splitter has several
  legs, one per NIC) or an optical run between two transceivers (one or more fibres, or a fibre
  splitter to several NIC transceivers).
- *row*: one link of the fabric, the unit of ``cabling.csv``; the rows of one cable share its id.

Dual-ToR (``spec.dual_tor``): a server link is one member of a NIC's bond, cabled from the NIC's
port ``member_port(r, m)`` (a dual-port NIC, two cages of ``spec.link_gbps``) to its leaf; the peer
links of each leaf pair (``fabric.peer_links``) are rows of their own kind, ``peer-link``, of the
fixed run length :data:`PEER_LINK_M` (the two leaves of a pair stand side by side in one rack).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .catalog import power_class, switch_catalog
from .fabric import KIND_NAMES, LINK_KINDS, PEER_KIND, PEER_LINK_M, ROLES, Fabric, cabled_links, end_lanes
from .media import (COPPER, OPTICAL, Cage, CablingError, MediaCatalog, Medium, MediumAtSpeed, media_catalog,
                    speed_text)

#: Kinds of cabling.csv rows by number: the fabric's link kinds, then the dual-ToR peer link
#: (``topo.fabric.PEER_KIND``).
ROW_KINDS = KIND_NAMES
#: Cable id prefix per row kind.
CABLE_PREFIX = ("NL", "LS", "SC", "PL")
#: Tier of the switch at each row kind's ``a`` end and of the vertex at its ``b`` end (0: a server).
A_TIER = (1, 1, 2, 1)
B_TIER = (0, 2, 3, 1)


# --- the plan ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BomLine:
    """One line of the bill of materials."""

    category: str  #: ``switch``, ``cable`` or ``transceiver``
    item: str  #: model, cable part or transceiver name
    tier: str  #: switch role (``leaf``...) or link tier (``node-leaf``...)
    end: str  #: transceivers: ``switch`` or ``server``; empty otherwise
    length_m: float | None  #: ordered length of a cable
    quantity: int  #: switches, cable pieces (a 2-fibre run is 2 pieces) or transceivers
    unit_power_w: float | None  #: per item; None when unknown
    power_w: float | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class TierCabling:
    """Cabling of one link tier."""

    tier: str
    length_m: float
    links: int
    cables: int
    pieces: int  #: cable pieces to order (fibres of multi-fibre runs counted one by one)
    media: dict[str, int]  #: links per medium
    transceivers: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True, eq=False)
class Cabling:
    """Every cable of a fabric and the totals: the result of :func:`plan_cabling`.

    The row arrays have one entry per ``cabling.csv`` row (one per link), in row order: by tier
    (``kind``, an index into :data:`ROW_KINDS`), then the sorting switch (``a``: the leaf for
    node-leaf and leaf-spine, the spine for spine-core, the pair's ``a`` leaf for a dual-ToR peer
    link), then its port, then the breakout lane.

    Attributes
    ----------
    order : ndarray of int64
        Link index of each row: into ``fabric.links``, or, from ``len(fabric.links)`` on, into
        ``fabric.peer_links`` (plus ``len(fabric.links)``).
    a, b : ndarray of int32
        Vertex of each row's two ends (``a`` is the sorting switch; ``b`` a server or switch).
    a_port, a_lane, b_port, b_lane : ndarray
        Switch port (from 1) and breakout lane (from 1) at ``a``; port (switch, from 1) or NIC
        index (server, from 0; with dual-ToR the server's link ``r * 2 + m``, member ``m`` of NIC
        ``r``) at ``b``, and the lane at a switch ``b`` (a spine or core port broken out to slower
        ports below it; 0 at a server).
    a_cage, b_cage : ndarray of int32
        Cage (from 1) holding the port; ``b_cage`` is -1 at a server.
    cable : ndarray of int64
        Cable number (from 0) of each row; the rows of one cable are adjacent. Its label is
        ``cable_ids()[number]``.
    medium : ndarray of int8
        Index into ``media`` of each row.
    length_m, cable_length_m : ndarray of float
        Run length and the ordered cable length (next stock length up).
    part, pieces : ndarray
        Index into ``parts`` of each row's cable part, and pieces of it the cable has.
    a_module, b_module : ndarray of int32
        Index into ``modules`` of the transceiver at each end; -1 for copper.
    media, parts, modules : tuple of str
    tiers : tuple of TierCabling
    bom : tuple of BomLine
    power_w : dict
        ``switches`` (None when the switch model's power is unknown), ``switch_end`` and
        ``server_end`` (optics and active-copper ends), ``total`` and whether the switch figure
        already includes its optics.
    warnings : tuple of str
    """

    name: str
    order: np.ndarray
    a: np.ndarray
    b: np.ndarray
    a_port: np.ndarray
    a_lane: np.ndarray
    b_port: np.ndarray
    b_lane: np.ndarray
    a_cage: np.ndarray
    b_cage: np.ndarray
    kind: np.ndarray
    gbps: np.ndarray
    cable: np.ndarray
    medium: np.ndarray
    length_m: np.ndarray
    cable_length_m: np.ndarray
    part: np.ndarray
    pieces: np.ndarray
    a_module: np.ndarray
    b_module: np.ndarray
    media: tuple[str, ...]
    parts: tuple[str, ...]
    modules: tuple[str, ...]
    tiers: tuple[TierCabling, ...]
    bom: tuple[BomLine, ...]
    power_w: dict[str, Any]
    warnings: tuple[str, ...]
    #: with a price list: ``currency``, ``note``, ``total``, ``by_category``, ``unpriced`` (items
    #: the list does not price) and ``lines`` (unit price and price of each BOM line); else None
    cost: dict[str, Any] | None = None

    def __len__(self) -> int:
        return int(self.order.shape[0])

    @property
    def cables(self) -> int:
        """Physical cables (assemblies with one label)."""
        return int(self.cable[-1]) + 1 if len(self) else 0

    def cable_ids(self) -> list[str]:
        """Label of every cable, by cable number: ``NL-0001``, ``LS-0001``, ``SC-0001`` (and
        ``PL-0001`` for dual-ToR peer links) ..., numbered from 1 per tier in row order, zero-padded
        to the width of the tier's count (at least 4)."""
        first = _starts(self.cable)
        cable_kind = self.kind[first].astype(np.int64)
        per_kind = np.bincount(cable_kind, minlength=len(ROW_KINDS))
        kind_first = np.concatenate([[0], np.cumsum(per_kind)[:-1]])
        number = (np.arange(first.size) - kind_first[cable_kind] + 1).tolist()
        prefix = [f"{CABLE_PREFIX[k]}-" for k in range(len(ROW_KINDS))]
        formats = [f"{prefix[k]}%0{max(4, len(str(c)))}d" for k, c in enumerate(per_kind.tolist())]
        return [formats[k] % num for k, num in zip(cable_kind.tolist(), number)]

    def totals(self, category: str) -> dict[str, int]:
        """Quantity per item of one BOM category (``switch``, ``cable``, ``transceiver``)."""
        out: dict[str, int] = {}
        for line in self.bom:
            if line.category == category:
                out[line.item] = out.get(line.item, 0) + line.quantity
        return out

    def to_dict(self) -> dict[str, Any]:
        """Totals for the build summary and the report (not the rows: those are cabling.csv)."""
        by_medium = np.bincount(self.medium, minlength=len(self.media))
        first = _starts(self.cable)
        cables_by_medium = np.bincount(self.medium[first], minlength=len(self.media))
        transceivers = self.totals("transceiver")
        switch_lines = [line for line in self.bom if line.category == "switch"]
        return {
            "links": len(self),
            "cables": {
                "total": self.cables,
                "pieces": int(self.pieces[first].sum()),
                "by_medium": {m: int(cables_by_medium[i]) for i, m in enumerate(self.media) if cables_by_medium[i]},
                "by_part": [line.to_dict() for line in self.bom if line.category == "cable"],
            },
            "links_by_medium": {m: int(by_medium[i]) for i, m in enumerate(self.media) if by_medium[i]},
            "per_tier": {t.tier: t.to_dict() for t in self.tiers},
            "transceivers": {
                "total": sum(transceivers.values()),
                "switch_end": sum(line.quantity for line in self.bom
                                  if line.category == "transceiver" and line.end == "switch"),
                "server_end": sum(line.quantity for line in self.bom
                                  if line.category == "transceiver" and line.end == "server"),
                "by_type": transceivers,
            },
            "switches": {
                "total": sum(line.quantity for line in switch_lines),
                "by_model": [line.to_dict() for line in switch_lines],
            },
            "power_w": dict(self.power_w),
            **({"cost": {k: v for k, v in self.cost.items() if k != "lines"}} if self.cost is not None else {}),
            "warnings": list(self.warnings),
        }


def _starts(group: np.ndarray) -> np.ndarray:
    """Indices where a run of equal adjacent values begins."""
    if group.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    new = np.ones(group.shape[0], dtype=bool)
    new[1:] = group[1:] != group[:-1]
    return np.flatnonzero(new)


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort, faster than np.unique's hashing on large int arrays)."""
    ordered = np.sort(values, kind="stable")
    keep = np.ones(ordered.shape[0], dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def _index(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, index of each value among them)."""
    distinct = _distinct(values)
    return distinct, np.searchsorted(distinct, values)


def _group_ids(new: np.ndarray) -> np.ndarray:
    """Group number (from 0) of each row, from a boolean 'a new group starts here' array."""
    return np.cumsum(new) - 1


def _uniform(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per group (contiguous, beginning at ``starts``): True when all values are equal."""
    return np.minimum.reduceat(values, starts) == np.maximum.reduceat(values, starts)


def _stock(lengths: np.ndarray, stock: tuple[float, ...], step: float) -> np.ndarray:
    """The next stock length at or above each run; beyond the longest, a multiple of ``step``."""
    table = np.asarray(stock, dtype=float)
    out = np.ceil(lengths / step - 1e-9) * step
    if table.size:
        i = np.searchsorted(table, lengths - 1e-9, side="left")
        inside = i < table.size
        out[inside] = table[i[inside]]
    return out


def _lookup(catalog: MediaCatalog, gbps: int, lane_gbps: int, what: str) -> Mapping[str, MediumAtSpeed]:
    entry = catalog.entry(gbps, lane_gbps)
    if entry is None:
        raise CablingError([
            f"the media catalogue has no {speed_text(gbps)} modules ({what}; lanes of {lane_gbps}G): "
            f"catalogued speeds are {', '.join(catalog.speed_names())}"])
    return entry


def _column(media: tuple[Medium, ...], entries: Mapping[str, MediumAtSpeed], attr: str) -> np.ndarray:
    """One figure of every medium at one speed, in catalogue order; -1 where it is not offered."""
    return np.array([getattr(entries[m.key], attr) if m.key in entries else -1.0 for m in media])


@dataclass(frozen=True, eq=False)
class _CageClass:
    """One kind of switch cage of a fabric (every tier of one switch model has the same): its form
    factor, fabric ports, speed, and the media the catalogue offers for a module in it."""

    cage: Cage
    ports_per_cage: int  #: fabric ports per switch cage
    cage_gbps: int
    at_switch: Mapping[str, MediumAtSpeed]


@dataclass(frozen=True, eq=False)
class _Ends:
    """What the two ends of a fabric's links take: each switch tier's cage (``classes``, and the
    class of each tier), and the NIC, with the media the catalogue offers for each at its speed."""

    classes: tuple[_CageClass, ...]
    tier_class: np.ndarray  #: cage class of each tier (index 0 unused: servers)
    breakout: int  #: NIC links per leaf port
    nic_gbps: int  #: speed of a NIC end: one server link (``spec.link_gbps``)
    nic_form_factor: str
    at_nic: Mapping[str, MediumAtSpeed]  #: media for a module in a NIC

    @property
    def leaf(self) -> _CageClass:
        return self.classes[int(self.tier_class[1])]

    def interfaces(self, media: tuple[Medium, ...]) -> np.ndarray:
        """The optical interface of each medium's module in each cage class, with the speed of one of
        its optical ports (``SR4@400``, ``DR4@400``...; "" where not offered): two ends of a fibre
        must have the same one. The speed tells a 400G DR4 (4 x 100G) from an 800G one (4 x 200G),
        which meet where two tiers of different port speeds do."""
        return np.array([[f"{_optical_interface(c.at_switch[m.key].transceiver)}@"
                          f"{c.cage_gbps // max(c.at_switch[m.key].optical_ports, 1)}"
                          if m.key in c.at_switch and c.at_switch[m.key].transceiver else "" for m in media]
                         for c in self.classes])

    def column(self, media: tuple[Medium, ...], attr: str) -> np.ndarray:
        """One figure of every medium in every cage class: shape (classes, media), -1 where not offered."""
        return np.stack([_column(media, c.at_switch, attr) for c in self.classes])


_INTERFACE = re.compile(r"\b(?:\d+x)?([A-Z]{2,3}\d+)\b")


def _optical_interface(transceiver: str) -> str:
    """The optical interface of a module (``400G {ff} SR8`` -> ``SR8``, ``800G {ff} 2xSR4`` -> ``SR4``).

    >>> _optical_interface("800G {ff} 2xDR4"), _optical_interface("400G {ff} SR4 at 200G")
    ('DR4', 'SR4')
    """
    found = _INTERFACE.search(transceiver.replace("{ff}", ""))
    return found.group(1) if found else transceiver


def _ends(fabric: Fabric, catalog: MediaCatalog) -> _Ends:
    spec = fabric.spec
    classes: list[_CageClass] = []
    keys: dict[tuple, int] = {}
    tier_class = np.zeros(4, dtype=np.int64)
    lane_gbps = 1
    for t in range(1, fabric.plan.tiers + 1):
        sw = fabric.tier_switch(t)
        cage = catalog.cage(sw.model)
        lanes = fabric.addressing.tier_lanes(t)
        lane = max(1, sw.port_gbps // max(lanes, 1))
        if t == 1:
            lane_gbps = lane
        cage_gbps = cage.ports_per_cage * sw.port_gbps
        key = (cage.form_factor, cage.ports_per_cage, cage_gbps, lane)
        if key not in keys:
            keys[key] = len(classes)
            classes.append(_CageClass(cage=cage, ports_per_cage=cage.ports_per_cage, cage_gbps=cage_gbps,
                                      at_switch=_lookup(catalog, cage_gbps, lane,
                                                        f"{cage.ports_per_cage} x {sw.port_gbps}G ports per "
                                                        f"{cage.form_factor} cage")))
        tier_class[t] = keys[key]
    # a NIC end is one server link: the whole NIC, or with dual-ToR one of its two ports (cages)
    return _Ends(classes=tuple(classes), tier_class=tier_class, breakout=fabric.plan.breakout,
                 nic_gbps=spec.link_gbps, nic_form_factor=catalog.nic.form_factor,
                 at_nic=_lookup(catalog, spec.link_gbps, lane_gbps,
                                "server NIC ports" if spec.dual_tor else "server NICs"))


@dataclass(frozen=True, eq=False)
class _Rows:
    """Every link as a row of ``cabling.csv``, oriented so that ``a`` is the switch end the rows are
    sorted by (see :class:`Cabling`); int64 columns, in row order."""

    order: np.ndarray  #: link index of each row
    kind: np.ndarray
    a: np.ndarray
    a_port: np.ndarray
    a_lane: np.ndarray
    b: np.ndarray
    b_port: np.ndarray
    b_lane: np.ndarray  #: 0 at a server
    a_breakout: np.ndarray  #: links the port at ``a`` carries (its breakout; 1 when whole)
    gbps: np.ndarray
    nl: np.ndarray  #: node-leaf row
    a_cage: np.ndarray
    b_cage: np.ndarray  #: -1 at a server
    a_class: np.ndarray  #: cage class of the switch at ``a``
    b_class: np.ndarray  #: cage class of the switch at ``b`` (its NIC's side: -1)
    lengths: np.ndarray  #: run length of each link kind
    length: np.ndarray  #: run length of each row

    def __len__(self) -> int:
        return int(self.kind.shape[0])


def _link_columns(fabric: Fabric) -> tuple[np.ndarray, ...]:
    """(kind, lo, hi, lo_port, hi_port, lane, gbps) of every link to cable, int64: the fabric's
    links, then the dual-ToR peer links (lo: the pair's a leaf, hi: its b leaf)."""
    links = cabled_links(fabric)
    return tuple(getattr(links, f).astype(np.int64) for f in ("kind", "lo", "hi", "lo_port", "hi_port", "lane", "gbps"))


def _rows(fabric: Fabric, ends: _Ends) -> _Rows:
    kind, lo, hi, lo_port, hi_port, lane, gbps = _link_columns(fabric)
    plan = fabric.plan
    lo_lane, hi_lane = end_lanes(plan, cabled_links(fabric))
    lanes = np.array([plan.lanes(k) for k in range(3)] + [(1, 1)], dtype=np.int64)[kind]
    nl = kind == 0
    a = np.where(nl, hi, lo)
    a_port = np.where(nl, hi_port, lo_port)
    a_lane = np.where(nl, hi_lane, lo_lane)
    a_breakout = np.where(nl, lanes[:, 1], lanes[:, 0])
    b = np.where(nl, lo, hi)
    b_port = np.where(nl, lo_port, hi_port)
    b_lane = np.where(nl, 0, hi_lane)
    order = np.lexsort((a_lane, a_port, a, kind))
    kind, a, a_port, a_lane, a_breakout, b, b_port, b_lane = (
        x[order] for x in (kind, a, a_port, a_lane, a_breakout, b, b_port, b_lane))
    nl = kind == 0
    lengths = np.array([fabric.spec.cable_m[k] for k in LINK_KINDS] + [PEER_LINK_M])
    # the switch at a is of tier A_TIER[kind] (a leaf, or the lower end), the vertex at b of B_TIER[kind]
    a_class = ends.tier_class[np.asarray(A_TIER)[kind]]
    b_class = np.where(nl, -1, ends.tier_class[np.asarray(B_TIER)[kind]])
    per_cage = np.array([c.ports_per_cage for c in ends.classes], dtype=np.int64)
    return _Rows(order=order, kind=kind, a=a, a_port=a_port, a_lane=a_lane, b=b, b_port=b_port, b_lane=b_lane,
                 a_breakout=a_breakout,
                 gbps=gbps[order], nl=nl, a_cage=(a_port - 1) // per_cage[a_class] + 1,
                 b_cage=np.where(nl, -1, (b_port - 1) // per_cage[np.maximum(b_class, 0)] + 1),
                 a_class=a_class, b_class=b_class, lengths=lengths, length=lengths[kind])


@dataclass(frozen=True, eq=False)
class _CageGroups:
    """The rows grouped by their switch cage at ``a``: a copper cable serves one group (a
    splitter's legs are the cage's NIC links), and joins two switches only cage to cage."""

    new: np.ndarray  #: True where a group begins
    starts: np.ndarray  #: first row of each group
    legs: np.ndarray  #: rows in each row's group
    one_to_one: np.ndarray  #: the row's cages at both ends map one-to-one (always, at a NIC)
    cage_span: int  #: more than any cage number: vertex * cage_span + cage numbers every cage
    by_b: np.ndarray  #: switch-to-switch rows sorted by their cage at ``b``
    b_starts: np.ndarray  #: first of each ``b`` cage in ``by_b``


def _cage_groups(rows: _Rows, cage_span: int) -> _CageGroups:
    kind, a, a_cage, nl, n = rows.kind, rows.a, rows.a_cage, rows.nl, len(rows)
    new = np.ones(n, dtype=bool)
    new[1:] = (kind[1:] != kind[:-1]) | (a[1:] != a[:-1]) | (a_cage[1:] != a_cage[:-1])
    group = _group_ids(new)
    starts = np.flatnonzero(new)
    legs = np.diff(np.append(starts, n))[group]
    # a copper switch-to-switch cable joins one cage to one cage: both sides must map one-to-one
    far = rows.b * cage_span + rows.b_cage
    one_to_one = _uniform(far, starts)[group] | nl  # node-leaf legs go to separate NICs
    sw = np.flatnonzero(~nl)
    by_b = b_starts = np.zeros(0, dtype=np.int64)
    if sw.size:
        near = a * cage_span + a_cage
        by_b = sw[np.lexsort((near[sw], far[sw]))]
        b_starts = _starts(far[by_b])
        same = _uniform(near[by_b], b_starts)
        ok_b = np.ones(n, dtype=bool)
        ok_b[by_b] = np.repeat(same, np.diff(np.append(b_starts, by_b.size)))
        one_to_one &= ok_b
    return _CageGroups(new=new, starts=starts, legs=legs, one_to_one=one_to_one, cage_span=cage_span,
                       by_b=by_b, b_starts=b_starts)


def _choose_media(rows: _Rows, groups: _CageGroups, media: tuple[Medium, ...], ends: _Ends) -> np.ndarray:
    """Index into ``media`` of every row: the first medium, in catalogue order, that reaches the run.

    Copper also needs its splitter's legs within ``max_legs`` and, between switches, cages that map
    one-to-one; optics at a NIC need a module offered at both ends' speeds.
    """
    nl, length, legs = rows.nl, rows.length, groups.legs
    reach_sw, split_sw = ends.column(media, "reach_m"), ends.column(media, "split_reach_m")
    reach_nic = _column(media, ends.at_nic, "reach_m")
    b_class = np.maximum(rows.b_class, 0)
    # a fibre between two switch cages needs the same optical interface at both ends (SR8 and SR4
    # modules do not talk): with cages of one kind it always is
    interface = ends.interfaces(media)
    eligible = np.zeros((len(media), len(rows)), dtype=bool)
    fits = np.zeros(len(rows), dtype=bool)  # some fibre's optics fit both ends, whatever the length
    for i, m in enumerate(media):
        at_a, at_b = reach_sw[rows.a_class, i], reach_sw[b_class, i]
        if m.kind == COPPER:
            # a node-leaf cable fans out to its cage's NICs (a splitter when more than one);
            # a switch-to-switch cable joins two cages whatever the ports per cage
            splits = nl & (legs > 1)
            reach = np.where(splits, split_sw[rows.a_class, i], at_a)
            reach = np.where(nl, reach, np.minimum(reach, at_b))
            eligible[i] = ((at_a > 0) & (nl | (at_b > 0)) & (length <= reach + 1e-9) & groups.one_to_one
                           & (~nl | (legs <= m.max_legs)))
        else:
            nic = reach_nic[i] if reach_nic[i] > 0 else -1.0
            reach = np.where(nl, np.where(nic > 0, np.minimum(at_a, nic), -1.0),
                             np.where(at_b > 0, np.minimum(at_a, at_b), -1.0))
            same = nl | (interface[rows.a_class, i] == interface[b_class, i])
            eligible[i] = (at_a > 0) & (reach > 0) & (length <= reach + 1e-9) & same
            fits |= (at_a > 0) & (reach > 0) & same
    found = eligible.any(axis=0)
    if not found.all():
        problems = []
        for k in np.unique(rows.kind[~found]).tolist():
            row = int(np.flatnonzero(rows.kind == k)[0])
            cage = speed_text(ends.classes[int(rows.a_class[row])].cage_gbps)
            nic = speed_text(ends.nic_gbps)
            far = speed_text(ends.classes[int(max(rows.b_class[row], 0))].cage_gbps)
            where = f"a {cage} switch cage and a {nic} NIC" if k == 0 else \
                (f"two {cage} switch cages" if far == cage else f"a {cage} and a {far} switch cage")
            field = "the fixed peer-link run, PEER_LINK_M" if k == PEER_KIND else \
                f"cable_{LINK_KINDS[k].replace('-', '_')}_m"
            if k and far != cage and not fits[rows.kind == k].any():
                # tiers of different port speeds whose optics cannot meet at any length
                problems.append(
                    f"{ROW_KINDS[k]}: no optical module pair of the media catalogue joins {where} for a "
                    f"{speed_text(int(rows.gbps[row]))} link (the two ends need one optical interface at one "
                    f"optical-port speed, so a broken-out port's lanes each fill one optical port), and no "
                    f"copper reaches {rows.lengths[k]:g} m ({field}); pick models whose port speeds meet at "
                    f"their optics, or add such a medium")
                continue
            problems.append(
                f"{ROW_KINDS[k]}: no medium in the media catalogue reaches {rows.lengths[k]:g} m between "
                f"{where} ({field}); shorten the run or add a medium that reaches it")
        raise CablingError(problems)
    return eligible.argmax(axis=0).astype(np.int8)


@dataclass(frozen=True, eq=False)
class _Cables:
    """The rows grouped into physical cables."""

    cable: np.ndarray  #: cable number of each row
    first: np.ndarray  #: first row of each cable
    legs: np.ndarray  #: rows of each row's cable
    splitter: np.ndarray  #: NIC ends of each row's cable (1 when it does not split)
    pieces: np.ndarray  #: fibres (optics) or 1 (copper) of each row's cable


def _cables(rows: _Rows, groups: _CageGroups, medium: np.ndarray, copper: np.ndarray,
            media: tuple[Medium, ...], ends: _Ends) -> _Cables:
    """Optical ports and fibres: a module of ``optical_ports`` serves ``cage_gbps / optical_ports``
    each, so a NIC link slower than that shares a port through a fibre splitter; copper is one
    cable per cage group."""
    nl, gbps = rows.nl, rows.gbps
    P = np.array([c.ports_per_cage for c in ends.classes], dtype=np.int64)[rows.a_class]
    cage_gbps = np.array([c.cage_gbps for c in ends.classes], dtype=np.int64)[rows.a_class]
    ports_sw = ends.column(media, "optical_ports").astype(np.int64)
    optport_gbps = cage_gbps // np.maximum(ports_sw[rows.a_class, medium], 1)
    # a link's place in its cage at a: port, then breakout lane (each lane of a broken-out switch
    # port its own fibre, to its own far end)
    slot = ((rows.a_port - 1) % P) * rows.a_breakout + (rows.a_lane - 1)
    fibres = np.where(copper, 1, np.maximum(1, gbps // optport_gbps))
    share = (~copper) & nl & (gbps < optport_gbps)  # a 1:k fibre splitter to k NICs
    sub = np.where(share, slot * gbps // optport_gbps, slot)
    sub = np.where(copper, 0, sub)
    new = groups.new.copy()
    new[1:] |= (sub[1:] != sub[:-1]) | (medium[1:] != medium[:-1])
    cable = _group_ids(new)
    first = np.flatnonzero(new)
    legs = np.diff(np.append(first, len(rows)))[cable]
    splitter = np.where(copper, legs, np.where(share, optport_gbps // np.maximum(gbps, 1), 1))
    return _Cables(cable=cable, first=first, legs=legs, splitter=splitter, pieces=fibres)


def _parts(rows: _Rows, cables: _Cables, medium: np.ndarray, media: tuple[Medium, ...],
           ends: _Ends) -> tuple[np.ndarray, list[str]]:
    """(part index of each row, part names): one part per distinct medium, far end (a NIC or a
    switch) and splitter legs."""
    n_classes = len(ends.classes)
    far_class = np.where(rows.nl, 0, 1 + np.maximum(rows.b_class, 0))  # 0: a NIC, 1 + c: a switch cage
    splitter = np.where(rows.nl, cables.splitter, 1)  # a switch-to-switch copper cable joins cage to cage
    copper_row = np.array([m.kind == COPPER for m in media])[medium]
    near_class = np.where(copper_row, rows.a_class, 0)  # fibre is the same whatever the cages
    far_class = np.where(copper_row | rows.nl, far_class, 1)
    part_code = (((medium.astype(np.int64) * (n_classes + 1) + far_class) * n_classes + near_class) * 1024
                 + splitter)
    codes, part = _index(part_code)
    nic_ff, nic = ends.nic_form_factor, speed_text(ends.nic_gbps)
    names = []
    for code in codes.tolist():
        split, rest = code % 1024, code // 1024
        rest, near_c = divmod(rest, n_classes)
        m_i, far = divmod(rest, n_classes + 1)
        m, to_switch = media[m_i], far > 0
        if m.kind == COPPER:
            near = ends.classes[near_c]
            near_end = f"{speed_text(near.cage_gbps)} {near.cage.form_factor}"
            if to_switch:
                other = ends.classes[far - 1]
                names.append(f"{m.label} {near_end} to {speed_text(other.cage_gbps)} {other.cage.form_factor}")
            elif split > 1:
                names.append(f"{m.label} {near_end} to {split}x {nic} {nic_ff} splitter")
            else:
                names.append(f"{m.label} {near_end} to {nic} {nic_ff}")
        else:
            names.append(m.fibre + (f" 1:{split} splitter" if split > 1 else ""))
    return part, names


@dataclass(frozen=True, eq=False)
class _Modules:
    """The transceiver types of a fabric and which one each medium takes at each end."""

    names: list[str]
    switch: np.ndarray  #: per cage class and medium: index into ``names`` of the module in such a cage, -1 for copper
    nic: np.ndarray  #: per medium: the same in a NIC


def _modules(media: tuple[Medium, ...], ends: _Ends) -> _Modules:
    names: list[str] = []
    index: dict[str, int] = {}

    def module(name: str) -> int:
        if name not in index:
            index[name] = len(names)
            names.append(name)
        return index[name]

    nic_ff, at_nic = ends.nic_form_factor, ends.at_nic
    switch = np.array([[module(c.at_switch[m.key].transceiver.format(ff=c.cage.form_factor))
                        if m.kind == OPTICAL and m.key in c.at_switch else -1 for m in media]
                       for c in ends.classes], dtype=np.int32)
    nic = np.array([module(at_nic[m.key].transceiver.format(ff=nic_ff))
                    if m.kind == OPTICAL and m.key in at_nic and at_nic[m.key].transceiver else -1
                    for m in media], dtype=np.int32)
    return _Modules(names=names, switch=switch, nic=nic)


def _switch_module_counts(rows: _Rows, groups: _CageGroups, code: np.ndarray, optical: np.ndarray, media: int,
                          classes: int) -> np.ndarray:
    """Physical switch-end modules per (row kind, cage class, medium): one per optical switch cage
    (a cage group at ``a``, a cage at ``b``); a cage's rows share one medium (copper is chosen per
    cage, optics per tier). ``code`` is ``kind * media + medium`` of every row."""
    kind, medium = np.divmod(code, media)
    a_first = groups.starts[optical[groups.starts]]
    at_a = (kind * classes + rows.a_class) * media + medium
    size = len(ROW_KINDS) * classes * media
    counts = np.bincount(at_a[a_first], minlength=size)
    if groups.by_b.size:
        b_first = groups.by_b[groups.b_starts]
        b_first = b_first[optical[b_first]]
        at_b = (kind * classes + np.maximum(rows.b_class, 0)) * media + medium
        counts += np.bincount(at_b[b_first], minlength=size)
    return counts.reshape(len(ROW_KINDS), classes, media)


def _mixed_cages(rows: _Rows, groups: _CageGroups, code: np.ndarray, media: int) -> int:
    """Switch cages holding ports of more than one medium or tier (one module or cable cannot serve
    them)."""
    nl, span = rows.nl, groups.cage_span
    cage_of = np.concatenate([rows.a * span + rows.a_cage, (rows.b * span + rows.b_cage)[~nl]])
    what = np.concatenate([code, code[~nl]])
    codes = len(ROW_KINDS) * media
    pairs = _distinct(cage_of * codes + what) // codes
    return int(np.count_nonzero(pairs[1:] == pairs[:-1]))


def _switch_lines(fabric: Fabric) -> tuple[list[BomLine], float | None, str | None]:
    """The switches of every tier, their power, and the catalogue model that power is assumed from.

    The power is the model's, ``switch_watts`` for a switch without one, else that of the
    catalogue's Ethernet model of the same radix and port speed (:func:`~topo.catalog.power_class`,
    returned third so that every output can say so); None when none of these gives it.
    """
    spec = fabric.spec
    assumed = None
    lines = []
    for t in range(1, fabric.plan.tiers + 1):
        sw = fabric.tier_switch(t)
        if sw.model:
            unit_w, model_name = switch_catalog()[sw.model].power_w, sw.model
        else:
            model_name = f"{sw.radix}x{speed_text(sw.port_gbps)} switch (no model named)"
            unit_w = spec.switch_watts
            like = power_class(sw.radix, sw.port_gbps) if unit_w is None else None
            if like is not None:
                unit_w, assumed = like.power_w, assumed or like.name
        count = fabric.count(t)
        lines.append(BomLine("switch", model_name, ROLES[t], "", None, count, unit_w,
                             None if unit_w is None else float(unit_w * count)))
    known = all(line.power_w is not None for line in lines)
    return lines, float(sum(line.power_w for line in lines)) if known else None, assumed


def _cable_lines(rows: _Rows, cables: _Cables, medium: np.ndarray, copper: np.ndarray, part: np.ndarray,
                 part_names: list[str], catalog: MediaCatalog,
                 ends: _Ends) -> tuple[list[BomLine], np.ndarray, float, float]:
    """(cable lines by tier, part and ordered length; the ordered length of every row; the power of
    copper cable ends at switches and at servers). A line's ``power_w`` leaves out the switch ends
    when the switch figures include them (``switch_power_includes_optics``), so that the BOM's
    power column sums to the total once; ``unit_power_w`` stays the cable's own."""
    media, nl, length, first = catalog.media, rows.nl, rows.length, cables.first
    cable_length = np.where(copper, _stock(length, catalog.stock_lengths_m[COPPER], catalog.step_m),
                            _stock(length, catalog.stock_lengths_m[OPTICAL], catalog.step_m))
    power_sw = ends.column(media, "power_w")
    power_nic = _column(media, ends.at_nic, "power_w")
    # copper ends: the switch end(s) at their cage speed, NIC legs at the NIC speed when catalogued
    at_a = power_sw[rows.a_class, medium]
    at_b = power_sw[np.maximum(rows.b_class, 0), medium]
    nic_end_w = np.where(power_nic[medium] >= 0, power_nic[medium], at_a)
    cable_power = np.where(nl, at_a + cables.legs * nic_end_w, at_a + at_b)
    cable_power = np.where(copper, cable_power, 0.0)
    switch_share = np.where(nl, at_a, at_a + at_b)
    counted_power = np.where(copper, cable_power - switch_share, 0.0) if catalog.switch_power_includes_optics \
        else cable_power
    pieces = cables.pieces[first]
    stock_values, stock_of_cable = _index(cable_length[first])
    key = (rows.kind[first] * len(part_names) + part[first]) * len(stock_values) + stock_of_cable
    keys, inverse = _index(key)
    quantity = np.bincount(inverse, weights=pieces).astype(np.int64)
    unit_cable_w = np.zeros(len(keys))
    unit_cable_w[inverse] = cable_power[first] / np.maximum(pieces, 1)
    unit_counted_w = np.zeros(len(keys))
    unit_counted_w[inverse] = counted_power[first] / np.maximum(pieces, 1)
    lines = []
    for j, k in enumerate(keys.tolist()):
        s = k % len(stock_values)
        p = (k // len(stock_values)) % len(part_names)
        t = k // len(stock_values) // len(part_names)
        w, counted = float(unit_cable_w[j]), float(unit_counted_w[j])
        lines.append(BomLine("cable", part_names[p], ROW_KINDS[t], "", float(stock_values[s]), int(quantity[j]),
                             round(w, 3) if w else 0.0, round(counted * int(quantity[j]), 3)))
    ends_switch = ends_server = 0.0
    copper_first = first[copper[first]]
    if copper_first.size:
        sw_ends = switch_share[copper_first]
        ends_switch = float(sw_ends.sum())
        ends_server = float((cable_power[copper_first] - sw_ends).sum())
    return lines, cable_length, ends_switch, ends_server


def _transceiver_lines(rows: _Rows, medium: np.ndarray, optical: np.ndarray, switch_modules: np.ndarray,
                       modules: _Modules, media: tuple[Medium, ...], ends: _Ends,
                       in_switch_power: bool = False) -> tuple[list[BomLine], float, float]:
    """(transceiver lines: per tier, the switch-end modules, then the NIC-end ones; the power of
    the switch-end and of the server-end modules). With ``in_switch_power`` (the switch figures
    include their optics) a switch-end line's ``power_w`` is 0, its watts being in the switch
    line's; ``unit_power_w`` stays the module's."""
    lines = []
    switch_w = server_w = 0.0
    nic_counts = np.bincount(medium[optical & rows.nl], minlength=len(media))
    for t in range(len(ROW_KINDS)):
        for c_i, cls in enumerate(ends.classes):
            for m_i, m in enumerate(media):
                c = int(switch_modules[t, c_i, m_i])
                if c:
                    w = cls.at_switch[m.key].power_w
                    switch_w += w * c
                    lines.append(BomLine("transceiver", modules.names[modules.switch[c_i, m_i]], ROW_KINDS[t],
                                         "switch", None, c, w, 0.0 if in_switch_power else round(w * c, 3)))
        for m_i, m in enumerate(media):
            c = int(nic_counts[m_i]) if t == 0 else 0
            if c:
                w = ends.at_nic[m.key].power_w
                server_w += w * c
                lines.append(BomLine("transceiver", modules.names[modules.nic[m_i]], ROW_KINDS[t], "server",
                                     None, c, w, round(w * c, 3)))
    return lines, switch_w, server_w


def _tier_totals(fabric: Fabric, rows: _Rows, cables: _Cables, medium: np.ndarray, media: tuple[Medium, ...],
                 bom: list[BomLine]) -> tuple[TierCabling, ...]:
    cable_kind = rows.kind[cables.first]
    link_counts = np.bincount(rows.kind, minlength=len(ROW_KINDS))
    tiers = []
    # the fabric's link tiers, then (dual-ToR) the peer links
    for t in list(range(fabric.plan.tiers)) + ([PEER_KIND] if link_counts[PEER_KIND] else []):
        in_tier = rows.kind == t
        mids = np.bincount(medium[in_tier], minlength=len(media))
        cables_t = cables.first[cable_kind == t]
        optics = sum(line.quantity for line in bom if line.category == "transceiver" and line.tier == ROW_KINDS[t])
        tiers.append(TierCabling(
            tier=ROW_KINDS[t], length_m=float(rows.lengths[t]), links=int(link_counts[t]),
            cables=int(cables_t.size), pieces=int(cables.pieces[cables_t].sum()),
            media={media[i].key: int(c) for i, c in enumerate(mids) if c}, transceivers=int(optics)))
    return tuple(tiers)


def plan_cabling(fabric: Fabric, catalog: MediaCatalog | None = None) -> Cabling:
    """Choose the medium of every link, group links into cables, count optics and total the BOM.

    Parameters
    ----------
    fabric : Fabric
    catalog : MediaCatalog, optional
        Media rules; the catalogue shipped with topo by default.

    Raises
    ------
    CablingError
        If a speed of the fabric is not catalogued or no medium reaches a tier's run length.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> c = plan_cabling(build_fabric(load_spec({"gpus": 256})))
    >>> len(c), c.cables, c.totals("transceiver")
    (512, 512, {'400G OSFP SR4': 1024})
    >>> {t.tier: t.media for t in c.tiers}
    {'node-leaf': {'mmf-sr': 256}, 'leaf-spine': {'mmf-sr': 256}}
    """
    catalog = catalog or media_catalog()
    media = catalog.media
    ends = _ends(fabric, catalog)
    rows = _rows(fabric, ends)
    span = max(fabric.tier_switch(t).radix // ends.classes[int(ends.tier_class[t])].ports_per_cage
               for t in range(1, fabric.plan.tiers + 1)) + 2
    groups = _cage_groups(rows, span)
    medium = _choose_media(rows, groups, media, ends)
    copper = np.array([m.kind == COPPER for m in media])[medium]
    cables = _cables(rows, groups, medium, copper, media, ends)
    part, part_names = _parts(rows, cables, medium, media, ends)
    modules = _modules(media, ends)
    a_module = np.where(copper, -1, modules.switch[rows.a_class, medium]).astype(np.int32)
    b_module = np.where(copper, -1, np.where(rows.nl, modules.nic[medium],
                                             modules.switch[np.maximum(rows.b_class, 0), medium])).astype(np.int32)
    optical = ~copper
    code = rows.kind * len(media) + medium
    switch_modules = _switch_module_counts(rows, groups, code, optical, len(media), len(ends.classes))

    warnings: list[str] = []
    multi = [c for c in ends.classes if c.ports_per_cage > 1]
    mixed = _mixed_cages(rows, groups, code, len(media)) if multi else 0
    if mixed:
        warnings.append(
            f"{mixed} switch cages hold ports of two tiers or media (a {multi[0].cage.form_factor} cage takes one "
            f"module or cable); each is counted once per tier and medium: give the ports of a cage "
            f"the same kind of run")
    bom, switches_w, assumed = _switch_lines(fabric)
    if switches_w is None:
        warnings.append("switch power unknown: name a switch model (switch: ...) or give switch_watts to total the power")
    cable_lines, cable_length, copper_switch_w, copper_server_w = _cable_lines(
        rows, cables, medium, copper, part, part_names, catalog, ends)
    optics_lines, optics_switch_w, optics_server_w = _transceiver_lines(
        rows, medium, optical, switch_modules, modules, media, ends, catalog.switch_power_includes_optics)
    bom += cable_lines + optics_lines

    switch_end = optics_switch_w + copper_switch_w
    server_end = optics_server_w + copper_server_w
    includes = catalog.switch_power_includes_optics
    total = None if switches_w is None else switches_w + server_end + (0.0 if includes else switch_end)
    power = {
        "switches": switches_w,
        "switch_power_of": assumed,
        "switch_end": round(switch_end, 3),
        "server_end": round(server_end, 3),
        "switch_power_includes_optics": includes,
        "total": None if total is None else round(total, 3),
    }
    return Cabling(
        name=fabric.spec.name, order=rows.order, a=rows.a.astype(np.int32), b=rows.b.astype(np.int32),
        a_port=rows.a_port.astype(np.int32), a_lane=rows.a_lane.astype(np.int32),
        b_port=rows.b_port.astype(np.int32), b_lane=rows.b_lane.astype(np.int32), a_cage=rows.a_cage.astype(np.int32),
        b_cage=rows.b_cage.astype(np.int32), kind=rows.kind.astype(np.int8), gbps=rows.gbps.astype(np.int32),
        cable=cables.cable, medium=medium, length_m=rows.length, cable_length_m=cable_length,
        part=part.astype(np.int32), pieces=cables.pieces.astype(np.int32), a_module=a_module, b_module=b_module,
        media=tuple(m.key for m in media), parts=tuple(part_names), modules=tuple(modules.names),
        tiers=_tier_totals(fabric, rows, cables, medium, media, bom), bom=tuple(bom), power_w=power,
        warnings=tuple(warnings), cost=_cost(fabric, bom))


def _cost(fabric: Fabric, bom: list[BomLine]) -> dict[str, Any] | None:
    """The bill of materials priced with the spec's price list (None without one): a cable's
    price is per piece, as ``bom.csv`` counts cables; an item the list does not price is named
    in ``unpriced`` and left out of the totals."""
    table = fabric.spec.price_table
    if table is None:
        return None
    lines, by_category, unpriced = [], {"switch": 0.0, "cable": 0.0, "transceiver": 0.0}, []
    for line in bom:
        unit = table.price(line.category, line.item)
        if unit is None:
            if line.item not in unpriced:
                unpriced.append(line.item)
            lines.append((None, None))
            continue
        price = round(unit * line.quantity, 2)
        by_category[line.category] += price
        lines.append((unit, price))
    return {"currency": table.currency, "note": table.note,
            "total": round(sum(by_category.values()), 2),
            "by_category": {k: round(v, 2) for k, v in by_category.items()},
            "unpriced": unpriced, "lines": lines}
