"""No impossible figure: a fabric with a part lost never shows a higher busbw or bisection than the
intact fabric, for every kind of part, over a grid of fabric shapes and analysis options; and the
two are compared on the same hash draws (common random numbers), so the change a loss shows is the
loss's and not the luck of a different draw."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from topo import build_fabric, load_spec
from topo.errors import AnalysisError
from topo.analysis.allreduce import allreduce, base_of
from topo.analysis.analyze import (AnalysisOptions, _parts, analyze, analyze_faulted, node_model_of,
                                   usable_pcie_gbps, what_if)
from topo.analysis.collective import channel_layout, connections, job_nodes
from topo.analysis.faults import apply_faults, no_faults, plane_names
from topo.analysis.routing import port_tables
from topo.analysis.updown import updown

SIZES = (1 << 20, 64 << 20, 8 << 30)

#: (id, spec, analysis options): rail and rack, two and three tiers, oversubscribed, ECMP on either
#: hash field, adaptive routing, D-mod-K (InfiniBand), several queue pairs, random rank order, PFC,
#: dual-ToR and two planes.
SHAPES = [
    ("rail-2tier", {"gpus": 1024}, {}),
    ("rack-2tier-random", {"gpus": 256, "placement": "rack"}, {"order": "random", "seed": 3}),
    ("rail-3tier", {"gpus": 1024, "tiers": 3}, {}),
    ("rack-3tier-oversub", {"gpus": 2048, "tiers": 3, "radix": 32, "placement": "rack", "oversubscription": 3},
     {"order": "random", "seed": 5}),
    ("rail-oversub-qps", {"gpus": 768, "oversubscription": 3}, {"qps": 4, "order": "random", "seed": 1}),
    ("rail-adaptive", {"gpus": 512, "oversubscription": 3}, {"routing": "adaptive"}),
    ("infiniband-dmodk", {"gpus": 512, "switch": "ndr-64x400", "oversubscription": 3}, {}),
    ("rack-qpn-pfc", {"gpus": 512, "placement": "rack", "oversubscription": 3},
     {"hash_field": "qpn", "cc": "pfc", "qps": 2}),
    ("dual-tor", {"gpus": 256, "dual_tor": True, "placement": "rack", "oversubscription": 3}, {"order": "random"}),
    ("two-planes", {"gpus": 512, "planes": 2}, {"order": "random", "seed": 2}),
]

#: Every kind of part a what-if or --fail can lose, as :func:`_parts` picks them.
KINDS = [("nic-link", ("link", 0)), ("leaf", ("switch", 1)), ("spine", ("switch", 2)), ("core", ("switch", 3)),
         ("leaf-spine-link", ("link", 1)), ("spine-core-link", ("link", 2)), ("plane", ("plane", 0))]


def _fabric(spec):
    return build_fabric(load_spec(dict(spec)))


def _lost_parts(fabric):
    """Two parts of every kind the fabric has, a server and a dual-ToR leaf pair's one leaf."""
    out = []
    for kind, what in KINDS:
        out += [(kind, p) for p in _parts(fabric, what, 2)]
    out.append(("server", fabric.names[fabric.plan.nodes - 1]))
    return out


def _assert_not_above(intact, failed, where):
    """Every busbw row (median and 5th percentile) and the bisection of ``failed`` at most ``intact``'s."""
    for a, b in zip(intact.allreduce.rows, failed.allreduce.rows, strict=True):
        assert a["size_bytes"] == b["size_bytes"]
        assert b["busbw_GBps"] <= a["busbw_GBps"], (where, b["size_bytes"], a["busbw_GBps"], b["busbw_GBps"])
        assert b["busbw_p5_GBps"] <= a["busbw_p5_GBps"], (where, b["size_bytes"])
        if b["time_s"] is not None and a["time_s"] is not None and failed.allreduce.job_gpus == intact.allreduce.job_gpus:
            assert b["time_s"] >= a["time_s"], (where, b["size_bytes"])  # a smaller restarted job may be quicker
    assert failed.bisection.maxflow_gbps <= intact.bisection.maxflow_gbps, where


@pytest.mark.parametrize("shape, spec, opts", SHAPES, ids=[s[0] for s in SHAPES])
def test_no_lost_part_raises_a_figure(shape, spec, opts):
    """``topo analyze --fail PART`` of every kind of part, against the intact fabric: no figure rises."""
    fabric = _fabric(spec)
    node = node_model_of(fabric)
    options = AnalysisOptions(sizes=SIZES, random_splits=1, **opts).for_fabric(fabric)
    intact = analyze(fabric, options, node=node)
    parts = _lost_parts(fabric)
    kinds = {kind for kind, _ in parts}
    assert {"nic-link", "leaf", "spine", "leaf-spine-link", "server"} <= kinds
    for kind, part in parts:
        faults = apply_faults(fabric, [part])
        try:
            failed = analyze_faulted(fabric, options, faults, node, intact=intact)
        except AnalysisError as exc:  # a loss that leaves no node with a live NIC: nothing to compare
            assert "no node with a live NIC" in str(exc), (shape, part, exc)
            continue
        _assert_not_above(intact, failed, (shape, kind, part))


@pytest.mark.parametrize("shape, spec, opts", SHAPES[:5], ids=[s[0] for s in SHAPES[:5]])
def test_fail_and_fail_random_report_no_gain(shape, spec, opts):
    """``analyze`` with --fail and --fail-random: the change against the intact fabric is never a gain."""
    fabric = _fabric(spec)
    node = node_model_of(fabric)
    parts = [p for _, p in _lost_parts(fabric)][::3]
    cases = [{"fail": (p,)} for p in parts] + [{"fail_random": 0.05, "seed": s} for s in (1, 2)]
    for case in cases:
        options = AnalysisOptions(sizes=SIZES, random_splits=1, **{**opts, **case})
        try:
            result = analyze(fabric, options, node=node)
        except AnalysisError as exc:
            assert "no node with a live NIC" in str(exc), (shape, case, exc)
            continue
        if result.baseline is None:
            continue
        _assert_not_above(result.baseline, result, (shape, case))
        change = result.change()
        assert change["busbw_GBps"].get("change_pct", 0) <= 0, (shape, case, change)
        assert change["bisection_maxflow_gbps"].get("change_pct", 0) <= 0, (shape, case, change)


@pytest.mark.parametrize("shape, spec, opts", SHAPES, ids=[s[0] for s in SHAPES])
def test_the_what_if_table_never_shows_a_gain(shape, spec, opts):
    fabric = _fabric(spec)
    node = node_model_of(fabric)
    options = AnalysisOptions(**opts)
    table = what_if(fabric, options, node, samples=3)
    assert table.rows
    for row in table.rows:
        for figure in ("busbw_GBps", "bisection_gbps"):
            spread = row[figure]
            assert spread["min"] <= spread["median"] <= spread["max"] <= spread["intact"], (shape, row)
            assert all(spread[f"{k}_change_pct"] <= 0 for k in ("min", "median", "max")
                       if spread[f"{k}_change_pct"] is not None), (shape, row)


def test_the_what_ifs_of_a_review_are_bounded_by_its_headline():
    """The 16k-GPU, 3:1 design whose review showed "-37.3 % to +20.8 %" for one NIC link: the what-ifs
    take fewer hash samples than the analysis, and each part is now measured against the intact
    fabric on its own draws, then scaled to the analysis' figure (smaller, with the same shape)."""
    fabric = _fabric({"gpus": 2048, "oversubscription": 3})
    node = node_model_of(fabric)
    intact = analyze(fabric, node=node)
    table = what_if(fabric, replace(intact.options, hash_samples=4), node, samples=3, intact=intact)
    headline = intact.allreduce.rows[-1]["busbw_GBps"]
    assert table.intact["busbw_GBps"] == headline
    assert table.hash_samples < intact.allreduce.details["hash_samples"]  # the what-ifs' cheaper draws
    for row in table.rows:
        assert row["busbw_GBps"]["max"] <= headline, row


def _ring_routes(fabric, options, faults, seed):
    """Every connection of the job's ring and the resources of its queue pairs, routed as the
    all-reduce samples them with hash seed ``seed`` (only the connections that leave their leaf
    are hashed; they are routed as a subset of the whole ring)."""
    options = options.for_fabric(fabric)
    node = node_model_of(fabric)
    tables = port_tables(fabric)
    order = job_nodes(fabric, None, options.order, options.seed)
    k = fabric.spec.nic_ports
    live_nics = faults.live[tables.nic_link.reshape(-1, fabric.plan.homes)[order[:, None] * k + np.arange(k)]
                            ].any(axis=-1)
    pcie = usable_pcie_gbps(node)
    layout = channel_layout(node, order.size, min(fabric.spec.nic_port_gbps, pcie), live_nics)
    conns = connections(order, layout, "ring")
    b = base_of(fabric, options, faults, updown(fabric, faults), tables, "ecmp", conns, pcie)
    hashed = (b.routes.links.reshape(-1, options.qps) >= 4).any(axis=1)
    part = b.route_some(hashed, seed)
    resources = b.routes.resources.copy()
    resources[np.repeat(hashed, options.qps)] = part.resources
    return conns, resources.reshape(conns.src_nic.size, options.qps, -1)


@pytest.mark.parametrize("spec, opts, lost", [
    ({"gpus": 512, "oversubscription": 3}, {"qps": 2}, "cluster-node0003:0"),  # channels move to NIC 1
    ({"gpus": 256, "placement": "rack"}, {"order": "random", "seed": 4}, "cluster-node0005:2"),
    ({"gpus": 512, "oversubscription": 3}, {"hash_field": "qpn"}, "cluster-spine-01"),
    ({"gpus": 256, "dual_tor": True, "placement": "rack"}, {}, "cluster-leaf-01a"),
])
def test_a_lost_part_moves_only_the_flows_it_carried(spec, opts, lost):
    """Common random numbers: on every hash draw, a connection the loss leaves alone (same NICs,
    and none of its intact path lost) keeps its path exactly; only the flows of the lost part move."""
    fabric = _fabric(spec)
    options = AnalysisOptions(**opts)
    faults = apply_faults(fabric, [lost])
    dead = np.flatnonzero(~faults.live)
    dead_resources = np.concatenate([2 * dead, 2 * dead + 1])
    moved_total = kept_total = 0
    for seed in (0, 1, 7):
        c0, r0 = _ring_routes(fabric, options, no_faults(fabric), seed)
        c1, r1 = _ring_routes(fabric, options, faults, seed)
        assert c0.src_nic.size == c1.src_nic.size
        same_ends = (c0.src_nic == c1.src_nic) & (c0.dst_nic == c1.dst_nic)
        untouched = same_ends & ~np.isin(r0, dead_resources).any(axis=(1, 2))
        kept = (r0 == r1).all(axis=(1, 2))
        assert kept[untouched].all(), f"{int((~kept[untouched]).sum())} untouched connections moved (seed {seed})"
        assert untouched.sum() < c0.src_nic.size  # the loss touches some connections
        moved_total += int((~kept).sum())
        kept_total += int(untouched.sum())
    assert moved_total > 0 and kept_total > 0


def test_faulted_analysis_takes_the_intact_draws():
    """With auto hash samples, the faulted all-reduce takes as many samples of each pattern as the
    intact one (the count follows the hashed flows, which a lost NIC link changes)."""
    fabric = _fabric({"gpus": 512, "oversubscription": 3})
    node = node_model_of(fabric)
    options = AnalysisOptions(sizes=SIZES).for_fabric(fabric)
    base = no_faults(fabric)
    intact = allreduce(fabric, options, base, None, node, rows_only=True)
    faults = apply_faults(fabric, ["cluster-node0000:0", "cluster-node0001:3"])
    failed = allreduce(fabric, options, faults, None, node, rows_only=True, baseline=intact)
    assert failed.draws == intact.draws
    assert failed.sample_busbw.shape == intact.sample_busbw.shape
    assert (failed.sample_busbw <= intact.sample_busbw).all()
    # a fixed count is taken as given, and the cap holds draw by draw
    fixed = replace(options, hash_samples=5)
    a = allreduce(fabric, fixed, base, None, node, rows_only=True)
    b = allreduce(fabric, fixed, faults, None, node, rows_only=True, baseline=a)
    assert a.sample_busbw.shape[0] == b.sample_busbw.shape[0] == 5
    assert (b.sample_busbw <= a.sample_busbw).all()


def test_plane_names_cover_the_plane_kind():
    fabric = _fabric({"gpus": 512, "planes": 2})
    assert [p for k, p in _lost_parts(fabric) if k == "plane"] == plane_names(fabric)
