"""Sizing rules: from a spec to the counts of every tier (no graph yet).

The rules are those of ``docs/spec.md`` ("How a fabric is sized"), after published reference
designs (DGX SuperPOD scalable units, k-ary fat trees). Every function is pure and integer-exact;
an impossible spec raises :class:`~topo.errors.SpecError` saying which numbers clash and what
would fit. Nothing is silently rounded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from fractions import Fraction

from .errors import SpecError
from .spec import MAX_PAIR_NICS, PEER_LINK_PORTS, FabricSpec, format_ratio, tier_switch

#: Radixes tried when suggesting a switch that would hold a fabric.
COMMON_RADIXES = (32, 48, 64, 128, 144, 256, 512)


@dataclass(frozen=True)
class Plan:
    """Counts of every tier of a fabric, as :func:`plan_fabric` sizes them.

    In a two-tier fabric there is one "pod" holding every leaf and spine, and no core.
    """

    tiers: int
    placement: str
    nodes: int
    rails: int  #: links of a node; in rail placement, one leaf per rail per scalable unit
    breakout: int  #: NIC links per leaf downlink port (port_gbps / link speed)
    leaf_down_ports: int
    leaf_up_ports: int
    nics_per_leaf: int  #: leaf_down_ports * breakout
    su_nodes: int  #: nodes of one scalable unit (rack placement: nodes per leaf)
    sus: int
    leaves: int
    leaves_per_pod: int
    pods: int
    spines_per_pod: int
    spines: int
    leaf_spine_links: int  #: parallel links between a leaf and each spine of its pod
    spine_down_ports: int
    spine_up_ports: int
    cores_per_group: int  #: cores that spine j of every pod connects to (core group j)
    cores: int
    spine_core_links: int  #: parallel links between a spine and each core of its group
    planes: int = 1  #: planes; the other counts are of one plane, except the totals below
    spine_radix: int = 0  #: ports of a spine (its tier's model); 0 in one tier
    core_radix: int = 0  #: ports of a core (its tier's model); 0 below three tiers
    homes: int = 1  #: leaves each NIC port is cabled to (2: dual-ToR leaf pairs, leaves 2i and 2i + 1)
    peer_ports: int = 0  #: ports of each leaf of a pair that its peer link takes (after the uplinks)
    # Tiers whose models differ in port speed meet at the slower speed: each port of the faster side
    # is broken out into ``faster / slower`` links (lanes), so every count of links above is the
    # count of ports times these lanes (1 when the two tiers' ports are of one speed).
    leaf_up_lanes: int = 1  #: links a leaf uplink port carries (a leaf faster than its spines)
    spine_down_lanes: int = 1  #: links a spine downlink port carries (a spine faster than its leaves)
    spine_up_lanes: int = 1  #: links a spine uplink port carries (a spine faster than its cores)
    core_down_lanes: int = 1  #: links a core port carries (a core faster than its spines)
    spine_link_gbps: int = 0  #: speed of a leaf-spine link (the slower of the two ports); 0 in one tier
    core_link_gbps: int = 0  #: speed of a spine-core link; 0 below three tiers

    # With planes > 1, rails (links of a node), leaves, pods, spines and cores are totals over the
    # planes; every other count is one plane's (each plane is the same fabric).

    @property
    def plane_leaves(self) -> int:
        return self.leaves // self.planes

    @property
    def plane_pods(self) -> int:
        return self.pods // self.planes

    @property
    def plane_spines(self) -> int:
        return self.spines // self.planes

    @property
    def plane_cores(self) -> int:
        return self.cores // self.planes

    @property
    def nic_rails(self) -> int:
        """NICs of a node (rails of one plane)."""
        return self.rails // (self.planes * self.homes)

    @property
    def leaf_uplinks(self) -> int:
        """Links from one leaf to its pod's spines."""
        return self.leaf_up_ports * self.leaf_up_lanes

    @property
    def spine_downlinks(self) -> int:
        """Links a spine's downlink ports can carry (one per port, or per lane of a broken-out port)."""
        return self.spine_down_ports * self.spine_down_lanes

    @property
    def spine_uplinks(self) -> int:
        """Links from one spine to its core group."""
        return self.spine_up_ports * self.spine_up_lanes

    def lanes(self, kind: int) -> tuple[int, int]:
        """Links per port at the (lower, upper) end of a link of ``kind`` (0 server-leaf, 1
        leaf-spine, 2 spine-core): at most one end is broken out, and ``Links.lane`` numbers the
        lanes at that end."""
        return ((1, self.breakout), (self.leaf_up_lanes, self.spine_down_lanes),
                (self.spine_up_lanes, self.core_down_lanes))[kind]

    @property
    def pairs(self) -> int:
        """Dual-ToR leaf pairs (0 without dual-ToR)."""
        return self.leaves // 2 if self.homes == 2 else 0

    def to_dict(self) -> dict:
        return asdict(self)


def split_ports(radix: int, ratio: Fraction, field: str) -> tuple[int, int]:
    """Split ``radix`` ports into ``(down, up)`` with ``down / up == ratio``.

    Examples
    --------
    >>> split_ports(64, Fraction(1), "oversubscription")
    (32, 32)
    >>> split_ports(64, Fraction(3), "oversubscription")
    (48, 16)
    >>> split_ports(68, Fraction(8, 9), "oversubscription")  # under-subscribed: more up than down
    (32, 36)
    """
    down = Fraction(radix) * ratio / (1 + ratio)
    up = radix - down
    if down.denominator == 1 and up >= 1:
        return int(down), int(up)
    nearest = sorted(
        (abs(Fraction(d, radix - d) - ratio), d) for d in range(1, radix)
    )[:2]
    options = ", ".join(
        f"{d} down/{radix - d} up ({format_ratio(Fraction(d, radix - d))})" for _, d in sorted(
            nearest, key=lambda item: item[1])
    )
    raise SpecError(
        [
            f"{field}={format_ratio(ratio)} does not split radix={radix} into whole ports "
            f"({float(down):.2f} down, {float(up):.2f} up); nearest splits: {options}"
        ]
    )


def _smallest_divisor_at_least(n: int, low: Fraction | int) -> int | None:
    """Smallest divisor of ``n`` that is >= ``low`` (None if there is none)."""
    for d in range(1, n + 1):
        if n % d == 0 and d >= low:
            return d
    return None


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class _Shape:
    """What a radix allows before tiers are chosen."""

    down: int
    up: int  #: uplinks of a leaf (links; its uplink ports times ``lanes.leaf_up``)
    breakout: int
    nics_per_leaf: int
    su_nodes: int
    spine_down: int  #: links a spine's downlink ports carry
    spine_up: int  #: links a spine's uplink ports carry
    leaves_per_full_pod: int
    lanes: "Lanes"
    up_ports: int
    spine_down_ports: int
    spine_up_ports: int


@dataclass(frozen=True)
class Lanes:
    """Where tiers of different port speeds meet: the link speed (the slower port) and the links
    each port of either side carries (the faster side's ports broken out)."""

    leaf_up: int = 1
    spine_down: int = 1
    spine_up: int = 1
    core_down: int = 1
    spine_link_gbps: int = 0
    core_link_gbps: int = 0


def meet(lower_gbps: int, upper_gbps: int) -> tuple[int, int, int]:
    """(link speed, links per lower port, links per upper port) where ports of two speeds meet: the
    link runs at the slower speed and each faster port is broken out into ``faster / slower`` links.

    >>> meet(400, 400), meet(800, 400), meet(400, 800)
    ((400, 1, 1), (400, 2, 1), (400, 1, 2))
    """
    link = min(lower_gbps, upper_gbps)
    return link, lower_gbps // link, upper_gbps // link


def tier_lanes(spec: FabricSpec) -> Lanes:
    """The :class:`Lanes` of a spec's per-tier models (every count 1 when the tiers' ports are of
    one speed)."""
    leaf, spine, core = (tier_switch(spec, t).port_gbps for t in (1, 2, 3))
    sl, lu, sd = meet(leaf, spine)
    cl, su, cd = meet(spine, core)
    return Lanes(leaf_up=lu, spine_down=sd, spine_up=su, core_down=cd, spine_link_gbps=sl, core_link_gbps=cl)


def tier_radices(spec: FabricSpec) -> tuple[int, int, int]:
    """Ports of a leaf, a spine and a core: each tier's model's, else ``radix``."""
    return tuple(tier_switch(spec, t).radix for t in (1, 2, 3))  # type: ignore[return-value]


def _shape(spec: FabricSpec, radix: int, spine_radix: int | None = None) -> _Shape:
    down, up = split_ports(radix, spec.oversubscription, "oversubscription")
    spine_radix = spine_radix or radix
    spine_down, spine_up = split_ports(spine_radix, spec.spine_oversubscription, "spine_oversubscription")
    lanes = tier_lanes(spec)
    if spec.dual_tor:
        if up <= PEER_LINK_PORTS:
            raise SpecError([f"dual_tor: each leaf's peer link takes {PEER_LINK_PORTS} of its {up} uplink ports "
                             f"(radix={radix}, oversubscription={format_ratio(spec.oversubscription)}), "
                             f"leaving none to the spines; use a larger radix or a lower oversubscription"])
        up -= PEER_LINK_PORTS
    up_ports, spine_down_ports, spine_up_ports = up, spine_down, spine_up
    up, spine_down, spine_up = up * lanes.leaf_up, spine_down * lanes.spine_down, spine_up * lanes.spine_up
    breakout = spec.port_gbps // spec.link_gbps
    nics_per_leaf = down * breakout
    if spec.dual_tor and nics_per_leaf > MAX_PAIR_NICS:
        raise SpecError([f"dual_tor: a leaf pair would serve {nics_per_leaf:,} NICs ({down} downlinks of {breakout} "
                         f"links), but SONiC numbers its PortChannels with four digits: at most {MAX_PAIR_NICS:,}"])
    links = spec.nic_links  # rail placement: one leaf per link of a node in each scalable unit
    if spec.placement == "rail":
        su_nodes = nics_per_leaf
        # keep the rail leaves of one scalable unit inside one pod when a pod can hold them
        whole = spine_down // links * links
        per_pod = whole if whole else spine_down // spec.homes * spec.homes
    else:
        su_nodes = nics_per_leaf // spec.nics_per_node
        if su_nodes < 1:
            raise SpecError(
                [
                    f"placement=rack: a node's nics_per_node={spec.nics_per_node} NICs do not fit on "
                    f"one leaf's {nics_per_leaf} downlinks (radix={radix}, "
                    f"oversubscription={format_ratio(spec.oversubscription)})"
                ]
            )
        per_pod = spine_down // spec.homes * spec.homes  # a pair's two leaves in one pod
    return _Shape(down, up, breakout, nics_per_leaf, su_nodes, spine_down, spine_up, per_pod, lanes,
                  up_ports, spine_down_ports, spine_up_ports)


def _leaves_for(spec: FabricSpec, shape: _Shape, nodes: int) -> tuple[int, int]:
    """(scalable units, leaves) for ``nodes`` servers."""
    sus = _ceil_div(nodes, shape.su_nodes)
    leaves = sus * (spec.nic_links if spec.placement == "rail" else spec.homes)
    return sus, leaves


def max_gpus(spec: FabricSpec, tiers: int, radix: int | None = None) -> int:
    """Most GPUs a fabric of ``tiers`` tiers holds with this spec's settings (and ``radix`` for
    every tier, else each tier's own)."""
    leaf_k, spine_k, core_k = (radix,) * 3 if radix else tier_radices(spec)
    shape = _shape(spec, leaf_k, spine_k)
    lanes = shape.lanes
    max_leaves = spine_k * lanes.spine_down if tiers == 2 else core_k * lanes.core_down * shape.leaves_per_full_pod
    per_su = spec.nic_links if spec.placement == "rail" else spec.homes
    nodes = max_leaves // per_su * shape.su_nodes
    return nodes * spec.gpus_per_node


def _radix_that_fits(spec: FabricSpec) -> str:
    for radix in COMMON_RADIXES:
        if radix <= spec.radix:
            continue
        try:
            most = max_gpus(spec, 3, radix)
        except SpecError:
            continue
        if most >= spec.gpus:
            return f"; radix {radix} would hold {most:,} in three tiers"
    return "; no common radix up to 512 holds it in three tiers"


def plan_fabric(spec: FabricSpec) -> Plan:
    """Size every tier of the fabric the spec asks for.

    Raises
    ------
    SpecError
        When the spec cannot be built: ports over-committed, too many GPUs for the tiers and radix,
        a spine count that breaks the symmetry of parallel links.

    Examples
    --------
    >>> from topo.spec import load_spec
    >>> plan = plan_fabric(load_spec({"gpus": 1024}))
    >>> plan.tiers, plan.leaves, plan.spines, plan.leaf_spine_links, plan.cores
    (2, 32, 16, 2, 0)
    """
    if spec.planes > 1:
        return _plan_planes(spec)
    if spec.grow_to is not None and spec.grow_to > spec.gpus:
        return _plan_grown(spec)
    if spec.tiers == 1:
        return _plan_one_tier(spec)
    k, spine_k, core_k = tier_radices(spec)
    shape = _shape(spec, k, spine_k)
    nodes = spec.nodes
    sus, leaves = _leaves_for(spec, shape, nodes)

    tiers = spec.tiers
    fits_two = leaves <= spine_k * shape.lanes.spine_down
    fits_three = _ceil_div(leaves, shape.leaves_per_full_pod) <= core_k * shape.lanes.core_down
    if tiers == "auto":
        tiers = 2 if fits_two else 3
    if tiers == 2 and spec.spine_oversubscription != 1:
        raise SpecError(
            [
                f"spine_oversubscription={format_ratio(spec.spine_oversubscription)} applies to the "
                f"spine-core tier, but gpus={spec.gpus} fits two tiers, which have no core; drop it "
                f"or use tiers=3"
            ]
        )
    if tiers == 2 and not fits_two:
        raise SpecError(
            [
                f"gpus={spec.gpus} needs {leaves} leaves but two tiers of "
                f"{'radix=' + str(k) if spine_k == k else f'{spine_k}-port spines'} hold at most "
                f"{spine_k * shape.lanes.spine_down} leaves ({max_gpus(spec, 2):,} GPUs); use tiers=3 or auto"
            ]
        )
    if not fits_three:
        raise SpecError(
            [
                f"gpus={spec.gpus} is more than three tiers of "
                f"{'radix=' + str(k) if spine_k == k == core_k else f'{k}/{spine_k}/{core_k}-port leaves/spines/cores'} "
                f"hold with these settings (at most {max_gpus(spec, 3):,} GPUs){_radix_that_fits(spec)}"
            ]
        )

    if tiers == 2:
        return _plan_two_tiers(spec, shape, nodes, sus, leaves, spine_k)
    return _plan_three_tiers(spec, shape, nodes, sus, leaves, spine_k, core_k)


def plane_spec(spec: FabricSpec) -> FabricSpec:
    """The spec of one plane of a multi-plane fabric: one NIC port (``nic_gbps / planes``) per NIC."""
    if spec.planes == 1:
        return spec
    return replace(spec, planes=1, nic_gbps=spec.nic_gbps // spec.planes)


def _plan_planes(spec: FabricSpec) -> Plan:
    """``planes`` copies of one plane's fabric, sharing the servers: NIC port p of every NIC goes
    into plane p, and no link joins two planes.

    >>> from topo.spec import load_spec
    >>> p = plan_fabric(load_spec({"gpus": 512, "switch": "eth-51t-128x400", "nic_gbps": 800, "planes": 2}))
    >>> p.leaves, p.spines, p.plane_leaves, p.rails
    (16, 8, 8, 16)
    """
    try:
        one = plan_fabric(plane_spec(spec))
    except SpecError as exc:
        port = spec.nic_gbps // spec.planes
        raise SpecError([f"planes={spec.planes} (each plane's NIC ports {port}G): {p}" for p in exc.problems]) from None
    n = spec.planes
    return replace(one, planes=n, rails=one.rails * n, leaves=one.leaves * n, pods=one.pods * n,
                   spines=one.spines * n, cores=one.cores * n)


def _spines_for(
    spec: FabricSpec, up: int, leaves: int, spine_down: int, where: str, lanes: int = 1
) -> int:
    """Spines so that every leaf has the same number of links to each (a divisor of ``up``)."""
    needed = Fraction(leaves * up, spine_down)
    if spec.spines is None:
        spines = _smallest_divisor_at_least(up, needed)
        assert spines is not None  # leaves <= spine_down was checked
        return spines
    fitting = [d for d in _divisors(up) if d >= needed]
    if up % spec.spines:
        raise SpecError(
            [
                f"spines={spec.spines} does not divide the {up} uplinks of each leaf evenly, so "
                f"parallel links would be uneven and break ECMP symmetry; spine counts{where} that "
                f"fit: {', '.join(map(str, fitting))}"
            ]
        )
    if spec.spines < needed:
        raise SpecError(
            [
                f"spines={spec.spines}{where} have {spec.spines * spine_down} downlink "
                + ("ports" if lanes == 1 else f"links ({spec.spines * spine_down // lanes} ports of {lanes} lanes)")
                + " but "
                f"{leaves} leaves x {up} uplinks need {leaves * up}; spine counts that fit: "
                f"{', '.join(map(str, fitting))}"
            ]
        )
    return spec.spines


def _plan_one_tier(spec: FabricSpec) -> Plan:
    """One tier, no spines: one switch per rail (rail placement: the rail-only design, where traffic
    between rails crosses NVLink inside a node first) or one switch for every NIC (rack placement),
    every port a downlink.

    >>> from topo.spec import load_spec
    >>> p = plan_fabric(load_spec({"gpus": 512, "tiers": 1}))
    >>> p.leaves, p.spines, p.su_nodes, p.leaf_down_ports
    (8, 0, 64, 64)
    """
    k, breakout = spec.radix, spec.port_gbps // spec.nic_gbps
    problems = []
    for name, ratio in (("oversubscription", spec.oversubscription),
                        ("spine_oversubscription", spec.spine_oversubscription)):
        if ratio != 1:
            problems.append(f"{name}={format_ratio(ratio)} splits switch ports between downlinks and uplinks, "
                            f"but tiers=1 has no uplinks (every port goes to a server); drop it or use tiers=2")
    if spec.spines is not None:
        problems.append(f"spines={spec.spines}: tiers=1 has no spines; drop it or use tiers=2")
    nodes = spec.nodes
    per_switch = k * breakout  # NIC links one switch takes
    if spec.placement == "rail":
        needed, what = nodes, f"each rail's {nodes:,} NICs (one per node)"
        most = per_switch * spec.gpus_per_node
    else:
        needed, what = nodes * spec.nics_per_node, f"the {nodes * spec.nics_per_node:,} NICs"
        most = per_switch // spec.nics_per_node * spec.gpus_per_node
    if needed > per_switch:
        problems.append(f"tiers=1 puts {what} on one switch of radix={k}"
                        + (f" ({breakout} NIC links a port)" if breakout > 1 else "")
                        + f", which takes {per_switch:,}: at most {most:,} GPUs; use tiers=2 or auto")
    if problems:
        raise SpecError(problems)
    rails = spec.nics_per_node
    leaves = rails if spec.placement == "rail" else 1
    return Plan(
        tiers=1, placement=spec.placement, nodes=nodes, rails=rails, breakout=breakout,
        leaf_down_ports=k, leaf_up_ports=0, nics_per_leaf=per_switch,
        su_nodes=nodes if spec.placement == "rail" else nodes, sus=1, leaves=leaves, leaves_per_pod=leaves,
        pods=1, spines_per_pod=0, spines=0, leaf_spine_links=0, spine_down_ports=0, spine_up_ports=0,
        cores_per_group=0, cores=0, spine_core_links=0,
    )


def _lane_fields(shape: _Shape, tiers: int) -> dict:
    lanes = shape.lanes
    fields = {"leaf_up_lanes": lanes.leaf_up, "spine_down_lanes": lanes.spine_down,
              "spine_link_gbps": lanes.spine_link_gbps}
    if tiers == 3:
        fields.update(spine_up_lanes=lanes.spine_up, core_down_lanes=lanes.core_down,
                      core_link_gbps=lanes.core_link_gbps)
    return fields


def _plan_two_tiers(spec: FabricSpec, shape: _Shape, nodes: int, sus: int, leaves: int, spine_k: int) -> Plan:
    spine_links = spine_k * shape.lanes.spine_down
    spines = _spines_for(spec, shape.up, leaves, spine_links, "", shape.lanes.spine_down)
    return Plan(
        tiers=2, placement=spec.placement, nodes=nodes, rails=spec.nic_links,
        breakout=shape.breakout, leaf_down_ports=shape.down, leaf_up_ports=shape.up_ports,
        nics_per_leaf=shape.nics_per_leaf, su_nodes=shape.su_nodes, sus=sus, leaves=leaves,
        leaves_per_pod=leaves, pods=1, spines_per_pod=spines, spines=spines,
        leaf_spine_links=shape.up // spines, spine_down_ports=spine_k, spine_up_ports=0,
        cores_per_group=0, cores=0, spine_core_links=0, spine_radix=spine_k,
        homes=spec.homes, peer_ports=PEER_LINK_PORTS if spec.dual_tor else 0, **_lane_fields(shape, 2),
    )


def _plan_three_tiers(spec: FabricSpec, shape: _Shape, nodes: int, sus: int, leaves: int, spine_k: int,
                      k: int) -> Plan:
    """``k``: a core's ports."""
    per_pod = min(shape.leaves_per_full_pod, leaves)
    pods = _ceil_div(leaves, per_pod)
    spines_per_pod = _spines_for(spec, shape.up, per_pod, shape.spine_down, " per pod", shape.lanes.spine_down)
    core_links = k * shape.lanes.core_down
    cores_per_group = _smallest_divisor_at_least(shape.spine_up, Fraction(pods * shape.spine_up, core_links))
    assert cores_per_group is not None  # pods <= a core's links was checked
    return Plan(
        tiers=3, placement=spec.placement, nodes=nodes, rails=spec.nic_links,
        breakout=shape.breakout, leaf_down_ports=shape.down, leaf_up_ports=shape.up_ports,
        nics_per_leaf=shape.nics_per_leaf, su_nodes=shape.su_nodes, sus=sus, leaves=leaves,
        leaves_per_pod=per_pod, pods=pods, spines_per_pod=spines_per_pod,
        spines=pods * spines_per_pod, leaf_spine_links=shape.up // spines_per_pod,
        spine_down_ports=shape.spine_down_ports, spine_up_ports=shape.spine_up_ports,
        cores_per_group=cores_per_group, cores=spines_per_pod * cores_per_group,
        spine_core_links=shape.spine_up // cores_per_group, spine_radix=spine_k, core_radix=k,
        homes=spec.homes, peer_ports=PEER_LINK_PORTS if spec.dual_tor else 0, **_lane_fields(shape, 3),
    )


def final_spec(spec: FabricSpec) -> FabricSpec:
    """The spec of the fabric ``spec`` grows into (``grow_to`` GPUs), or ``spec`` itself."""
    if spec.grow_to is None or spec.grow_to <= spec.gpus:
        return spec
    # a host-name pattern names the final nodes too; a table names today's only
    table = spec.hostname_table is not None
    return replace(spec, gpus=spec.grow_to, grow_to=None, hostnames=None if table else spec.hostnames,
                   hostname_table=None)


def _plan_grown(spec: FabricSpec) -> Plan:
    """Today's part of the fabric of ``grow_to`` GPUs: its first nodes, their scalable units'
    leaves and their pods' spines, and every spine and core the final size has, so that growing is
    adding leaves (and pods) and cabling them into ports kept free for them.

    >>> from topo.spec import load_spec
    >>> p = plan_fabric(load_spec({"gpus": 256, "grow_to": 1024}))
    >>> p.leaves, p.spines, p.leaf_spine_links
    (8, 16, 2)
    """
    final_of = final_spec(spec)
    try:
        final = plan_fabric(final_of)
    except SpecError as exc:
        raise SpecError([f"grow_to={spec.grow_to}: {p}" for p in exc.problems]) from None
    # the final size's tiers from the start: a spec's tiers apply to the final size (checked there)
    nodes = spec.nodes
    sus = _ceil_div(nodes, final.su_nodes)
    leaves = sus * (final.rails if final.placement == "rail" else final.homes)  # a rack's leaf, or its pair
    pods = _ceil_div(leaves, final.leaves_per_pod)
    return replace(final, nodes=nodes, sus=sus, leaves=leaves, pods=pods, spines=pods * final.spines_per_pod)


def _ports_of(links: int, lanes: int) -> int:
    """Ports that ``links`` consecutive link slots take on ports of ``lanes`` lanes."""
    return _ceil_div(max(links, 0), lanes)


def growth(spec: FabricSpec) -> dict | None:
    """How a fabric cabled for ``grow_to`` GPUs grows: the final counts, the switch ports kept free
    for what is still to come, and the steps, one scalable unit (or rack) at a time. None without
    ``grow_to``.

    A step adds one scalable unit: its nodes, its leaves and their uplinks into the spines' free
    ports, and, when its leaves open a new pod, that pod's spines and their uplinks into the cores'
    free ports. Nothing that is there is recabled or renumbered.

    >>> from topo.spec import load_spec
    >>> g = growth(load_spec({"gpus": 256, "grow_to": 1024}))
    >>> g["reserved_ports"], len(g["steps"]), g["steps"][0]["leaves_added"]
    ({'spine': 768, 'core': 0}, 3, 8)
    """
    final_of = final_spec(spec)
    if final_of is spec:
        return None
    now, final = plan_fabric(spec), plan_fabric(final_of)
    # ports free today that the final size uses: a port counts as used once any of its lanes is
    reserved_spine = final.spines_per_pod * sum(
        _ports_of(min(final.leaves_per_pod, final.leaves - p * final.leaves_per_pod) * final.leaf_spine_links,
                  final.spine_down_lanes)
        - _ports_of(min(now.leaves_per_pod, now.leaves - p * now.leaves_per_pod) * final.leaf_spine_links,
                    final.spine_down_lanes)
        for p in range(now.pods))
    reserved_core = (final.cores * (_ports_of(final.pods * final.spine_core_links, final.core_down_lanes)
                                    - _ports_of(now.pods * final.spine_core_links, final.core_down_lanes))
                     if final.tiers == 3 else 0)
    steps = []
    previous = now
    for sus in range(now.sus, final.sus + 1):  # today's last unit first, when it is not full
        gpus = min(sus * final.su_nodes * spec.gpus_per_node, final_of.gpus)
        if gpus <= spec.gpus:
            continue
        step = final if gpus == final_of.gpus else plan_fabric(
            replace(spec, gpus=gpus, hostnames=None, hostname_table=None))
        steps.append({
            "gpus": gpus, "nodes_added": step.nodes - previous.nodes,
            "leaves_added": step.leaves - previous.leaves, "pods_added": step.pods - previous.pods,
            "spines_added": step.spines - previous.spines,
            "leaf_spine_links_added": (step.leaves - previous.leaves) * final.leaf_uplinks,
            "spine_core_links_added": (step.spines - previous.spines) * final.spine_uplinks if final.tiers == 3 else 0,
        })
        previous = step
    return {
        "grow_to": final_of.gpus,
        "final": {"gpus": final_of.gpus, "nodes": final.nodes, "leaves": final.leaves, "spines": final.spines,
                  "cores": final.cores, "pods": final.pods},
        "reserved_ports": {"spine": reserved_spine, "core": reserved_core},
        "steps": steps,
    }
