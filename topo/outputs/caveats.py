"""Collects the warnings of a build (:mod:`topo.caveats` defines them) from its parts.

Examples
--------
>>> from topo import build_fabric, load_spec
>>> [c.code for c in caveats(build_fabric(load_spec({"gpus": 200})))]
['partial-scalable-unit', 'no-switch-model', 'no-sonic-platform']
>>> [c.code for c in analysis_caveats(build_fabric(load_spec({"gpus": 200})))]
['partial-scalable-unit']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..catalog import power_class
from ..caveats import CODES, CROSS_SPINE_SHARE, NCCL_ELEMENTS_WARN, Caveat
from ..fabric import ROLES, Fabric
from .nccl import detected_elements, topology_element
from .nccl_xml import TOPO_XML_MAX_NODES

if TYPE_CHECKING:  # pragma: no cover
    from ..analysis.analyze import Analysis
    from ..hardware.servers import ServerProfile
    from ..cabling import Cabling


def caveats(fabric: Fabric, analysis: "Analysis | None" = None, cabling: "Cabling | None" = None,
            server: "ServerProfile | None" = None, configs: bool = True) -> list[Caveat]:
    """Every caveat of a design, in the order of :data:`CODES` (the same input, the same list)."""
    found = analysis_caveats(fabric, analysis)
    if server is not None:
        found += _server(server)
        found += _racks(fabric, server)
        if analysis is None:  # with an analysis, its node says it (_traffic)
            found += _nvlink_domain(server.nvlink.gpus, server.gpu_count)
    found += _outputs(fabric, configs)
    if cabling is not None:  # its "switch power unknown" is no-switch-model's
        found += [Caveat("cabling", w) for w in cabling.warnings if not w.startswith("switch power unknown")]
        if cabling.cost is not None and cabling.cost["unpriced"]:
            missing = cabling.cost["unpriced"]
            found.append(Caveat("prices-incomplete",
                                f"the price list has no price for {', '.join(missing)}: the cost of "
                                f"{cabling.cost['total']:,.0f} {cabling.cost['currency']} leaves them out"))
    return _in_order(found)


def analysis_caveats(fabric: Fabric, analysis: "Analysis | None" = None) -> list[Caveat]:
    """The caveats of :func:`caveats` that qualify the analysis' figures (the codes of
    :data:`~topo.caveats.ANALYSIS_CODES`): the analysis' own, the fabric's shape and the traffic's,
    in the order of :data:`CODES`. ``topo analyze`` shows these; without an analysis, the shape's."""
    found: list[Caveat] = []
    if analysis is not None:
        found += analysis.caveats()
    found += _shape(fabric)
    if analysis is not None:
        found += _traffic(analysis)
    return _in_order(found)


def _in_order(found: list[Caveat]) -> list[Caveat]:
    """``found`` in the order of :data:`CODES` (a code's own caveats keep their order)."""
    order = {code: i for i, code in enumerate(CODES)}
    return sorted(found, key=lambda c: order[c.code])


def _shape(fabric: Fabric) -> Iterable[Caveat]:
    spec, plan = fabric.spec, fabric.plan
    full = plan.sus * plan.su_nodes
    if plan.nodes < full and plan.sus >= 1:
        last = plan.nodes - (plan.sus - 1) * plan.su_nodes
        unit = "scalable unit" if plan.placement == "rail" else "rack"
        yield Caveat("partial-scalable-unit",
                     f"the last {unit} has {last} of {plan.su_nodes} nodes: its leaves have free ports "
                     f"and the fabric is not symmetric (the bisection and ECMP figures are measured, "
                     f"not the full design's)")
    ratios = [(ROLES[1], spec.oversubscription)]
    if plan.tiers == 3:
        ratios.append((ROLES[2], spec.spine_oversubscription))
    for role, ratio in ratios:
        if ratio > 1:
            text = f"{ratio.numerator}:{ratio.denominator}"
            yield Caveat("oversubscription",
                         f"{role} downlink:uplink is {text}: traffic that leaves a {role} under full load "
                         f"gets at most {ratio.denominator}/{ratio.numerator} of its NIC bandwidth")


def _traffic(analysis: "Analysis") -> Iterable[Caveat]:
    ecmp = analysis.ecmp.to_dict()
    for scope in ("same_pod", "cross_pod"):
        width = ecmp.get(scope)
        if not width:
            continue
        where = "in a pod" if scope == "same_pod" else "across pods"
        for kind, paths in (("switch", width["switch_paths"]), ("link", width["link_paths"])):
            if paths["min"] != paths["max"]:
                yield Caveat("uneven-ecmp",
                             f"leaf pairs {where} have {paths['min']:,} to {paths['max']:,} equal-cost {kind} "
                             f"paths (mean {paths['mean']:,.3f}): hashing loads the links unevenly")
                break
    d = analysis.allreduce.details
    if d.get("hash_polarized"):
        yield Caveat("hash-polarization",
                     "the all-reduce figures model ECMP polarization (hash_polarized): successive tiers "
                     "hash connections alike, so they crowd the same uplinks")
    connections, leaving = d.get("connections") or 0, d.get("connections_leaving_leaf") or 0
    if connections and not d["nvlink_only"] and leaving / connections > CROSS_SPINE_SHARE:
        yield Caveat("rings-cross-spine",
                     f"{leaving:,} of the all-reduce's {connections:,} connections ({100 * leaving / connections:.0f} %) "
                     f"leave their leaf: its busbw depends on the spines and on ECMP hashing "
                     f"(rail-optimized placement keeps same-rank traffic on one leaf)")
    spec = analysis.fabric.spec
    if spec.dual_tor and analysis.options.qps < 2 and not d["nvlink_only"]:
        yield Caveat("dual-tor-queue-pairs",
                     f"dual-ToR with {analysis.options.qps} queue pair per connection: the bond (LACP) keeps a "
                     f"queue pair on one of its NIC's two {spec.link_gbps}G links, so a connection gets at most "
                     f"half its NIC and the leaves' ECMP towards a pair puts some NICs' connections on one link; "
                     f"analyse with --qps 2 or more (2, the default with dual-ToR, is what the build's NCCL env "
                     f"sets as NCCL_IB_QPS_PER_CONNECTION; docs/fabric.md, Dual-ToR)")
    node = d.get("node") or {}
    assumed = node.get("assumed") if isinstance(node, dict) else None
    if assumed:
        yield Caveat("assumed-node-model",
                     f"the server profile does not give {', '.join(assumed)}: the all-reduce model takes "
                     f"its GPU generation's defaults (an H100 HGX's for a generic profile); describe the "
                     f"server with --server FILE")
    if isinstance(node, dict):
        yield from _nvlink_domain(node.get("nvlink_domain") or 0, node.get("gpus") or 0)


def _server(server: "ServerProfile") -> Iterable[Caveat]:
    if server.generic:
        yield Caveat("placeholder-server-profile",
                     f"no shipped server profile has {server.gpu_count} GPUs and {server.nic_count} NICs: "
                     f"nccl/ holds a generic profile whose bus ids are placeholders (describe your "
                     f"server with --server FILE)")
    elements = sum(1 for _ in topology_element(server).iter()) + sum(detected_elements(server))
    if elements > NCCL_ELEMENTS_WARN:
        yield Caveat("nccl-xml-elements",
                     f"NCCL may hold {elements} elements for the server's topology file, of the "
                     f"{TOPO_XML_MAX_NODES - 1} its parser takes: a larger server needs each GPU's sm "
                     f"and NVLink count in its profile (docs/nccl.md)")


def _racks(fabric: Fabric, server: "ServerProfile") -> Iterable[Caveat]:
    """``partial-rack``: the GPUs in use do not fill the last rack (NVLink domain) of trays."""
    from ..hardware.racks import rack_plan

    spec = fabric.spec
    r = rack_plan(server, spec.gpus, spec.spare_trays)
    if r is not None and r.last_rack_trays < r.usable_trays:
        whole = [n * r.gpus_per_rack for n in (r.racks - 1, r.racks) if n]
        yield Caveat("partial-rack",
                     f"the last rack has {r.last_rack_trays} of its {r.usable_trays} trays in the job "
                     f"({spec.gpus:,} GPUs in {r.racks:,} racks of {r.gpus_per_rack} with spare_trays="
                     f"{r.spare_trays}): its NVLink domain is smaller than the others' and its other trays idle; "
                     f"{' or '.join(f'{n:,}' for n in whole)} GPUs fill whole racks")


def _nvlink_domain(domain: int, per: int) -> Iterable[Caveat]:
    """``multi-node-nvlink``: the server's NVLink domain of ``domain`` GPUs joins several servers of
    ``per``, of which the all-reduce model prices one server's GPUs."""
    if per and domain > per:
        yield Caveat("multi-node-nvlink",
                     f"the NVLink domain of {domain} GPUs spans {domain // per} servers (trays) of {per}; "
                     f"collectives are priced within each server's {per} GPUs (multi-node NVLink is not "
                     f"modelled yet), so busbw across servers is underestimated")


def _outputs(fabric: Fabric, configs: bool) -> Iterable[Caveat]:
    spec = fabric.spec
    if not fabric.ethernet:  # with or without --no-configs: the folder alone cannot tell, topo check must agree
        yield Caveat("infiniband-no-configs",
                     f"switch={fabric.tier_switch(1).model} is an InfiniBand model: no switch configs are written "
                     f"(the subnet manager configures the fabric)")
        return
    tiers = [fabric.tier_switch(t) for t in range(1, fabric.plan.tiers + 1)]
    generic = [t for t in tiers if t.model is None]
    if generic:
        first = generic[0]
        like = power_class(first.radix, first.port_gbps)
        if spec.switch_watts is not None:
            power = f"its power is the given switch_watts ({spec.switch_watts:,.0f} W a switch)"
        elif like is not None:
            power = (f"its power is taken as the catalogue's {like.name} ({like.power_w:,} W a switch; "
                     f"--switch-watts gives your own)")
        else:
            power = "power is not totalled (or give --switch-watts)"
        which = "" if len(generic) == len(tiers) else " for the " + ", ".join(ROLES[t.tier] for t in generic) + " tier"
        yield Caveat("no-switch-model",
                     f"no switch model{which}: radix {first.radix} x {first.port_gbps}G is generic, so {power} and "
                     f"the switch buffers are an assumed size (name one with --switch; topo switches "
                     f"lists them)")
    chassis = [t for t in tiers if t.chassis]
    if configs and any(t.platform is None for t in tiers if not t.chassis):
        yield Caveat("no-sonic-platform",
                     "config_db.json names no SONiC platform or HwSKU and numbers lanes generically: "
                     "merge it into the switch's own configuration (config load), never config reload "
                     "(docs/configs.md); --switch or --platform gives a real SKU")
    if configs and fabric.plan.homes == 2:
        yield Caveat("mclag-iccpd",
                     "the dual-ToR leaves' MCLAG pairs run on SONiC's iccpd, which SONiC builds only with "
                     "INCLUDE_ICCPD=y and many images leave out: check that the image has the iccpd container "
                     "(each config_db.json enables it, FEATURE|iccpd) before loading the configs")
    if configs and chassis:
        first = chassis[0]
        roles = ", ".join(ROLES[t.tier] for t in chassis)
        yield Caveat("chassis-no-config-db",
                     f"the {roles} tier's {first.model} is a modular chassis: SONiC runs one instance per "
                     f"line card and one on its supervisor, which one config_db.json cannot be, so its switches "
                     f"get an frr.conf (their BGP as one routing instance, with the ports' addresses) and no "
                     f"config_db.json; configure the chassis's line cards with its vendor's tools")
