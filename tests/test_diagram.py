"""The fabric picture (graph/fabric.svg): one fixed page at any size, every box of its level drawn."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from topo import build_fabric, load_spec
from topo.outputs.diagram import DETAIL_MAX_SWITCHES, HEIGHT, WIDTH, fabric_svg
from topo.outputs.exports import aggregate

NS = {"svg": "http://www.w3.org/2000/svg"}
CASES = {
    "1024-rail": ({"gpus": 1024}, "switches"),
    "1024-rack": ({"gpus": 1024, "placement": "rack"}, "switches"),
    "radix8-3tier": ({"gpus": 128, "gpus_per_node": 1, "radix": 8, "tiers": 3}, "switches"),
    "16384": ({"gpus": 16384}, "groups"),
    "65536": ({"gpus": 65536}, "pods"),
    "131072-radix128": ({"gpus": 131072, "radix": 128}, "pods"),
    # dual-ToR: the leaves in pairs (switches) or a box per side of each unit's pairs
    "1024-rail-dual": ({"gpus": 1024, "dual_tor": True}, "switches"),
    "1024-rack-dual": ({"gpus": 1024, "dual_tor": True, "placement": "rack"}, "switches"),
    "4096-dual": ({"gpus": 4096, "dual_tor": True}, "groups"),
    "4096-radix32-dual": ({"gpus": 4096, "gpus_per_node": 1, "nics_per_node": 1, "radix": 32, "tiers": 3,
                           "dual_tor": True}, "pods"),
}


def boxes(root, tier):
    group = root.find(f".//svg:g[@class='tier'][@data-tier='{tier}']", NS)
    return [g for g in group.findall("svg:g", NS) if g.get("class", "").startswith("box")]


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_page_and_every_box_drawn(name):
    spec, level = CASES[name]
    fabric = build_fabric(load_spec(spec))
    svg = fabric_svg(fabric)
    root = ET.fromstring(svg)  # well-formed XML
    assert (root.get("width"), root.get("height")) == (str(WIDTH), str(HEIGHT))
    assert root.get("viewBox") == f"0 0 {WIDTH} {HEIGHT}" and root.get("data-level") == level
    plan, tier = fabric.plan, fabric.tier
    switches = len(fabric.names) - plan.nodes
    assert (switches <= DETAIL_MAX_SWITCHES) == (level == "switches")
    lower = fabric.su if plan.placement == "rail" else fabric.pod
    if level == "switches":
        expected = [len(np.unique(lower[tier == 0]))] + [fabric.count(t) for t in range(1, plan.tiers + 1)]
    elif level == "groups":
        agg = aggregate(fabric)
        expected = [sum(1 for g in agg.groups if g.tier == t) for t in range(plan.tiers + 1)]
    else:
        expected = [plan.pods, plan.pods * plan.homes, plan.pods] + (
            [int(fabric.group[tier == 3].max()) + 1] if plan.tiers == 3 else [])
    assert [len(boxes(root, t)) for t in range(plan.tiers + 1)] == expected[: plan.tiers + 1]
    # every box lies on the page and no two boxes of a row overlap
    for t in range(plan.tiers + 1):
        rects = [b.find("svg:rect", NS) for b in boxes(root, t)]
        xs = [(float(r.get("x")), float(r.get("width"))) for r in rects]
        assert all(0 <= x and x + w <= WIDTH for x, w in xs)
        assert all(a[0] + a[1] <= b[0] for a, b in zip(xs, xs[1:]))
    # each bundle's tooltip counts links; all bundles together are all the links (peer links too)
    counts = [int(t.text.rsplit(": ", 1)[1].split(" links")[0].replace(",", ""))
              for t in root.findall(".//svg:line/svg:title", NS)]
    peers = 0 if fabric.peer_links is None else len(fabric.peer_links)
    assert sum(counts) == len(fabric.links) + peers


def test_leaves_are_coloured_by_rail():
    root = ET.fromstring(fabric_svg(build_fabric(load_spec({"gpus": 1024}))))
    fills = [b.find("svg:rect", NS).get("fill") for b in boxes(root, 1)]
    assert len(set(fills)) == 8 and fills[:8] == fills[8:16]


def test_dual_tor_leaves_in_pairs():
    """1,024 GPUs, dual-ToR, rail: 16 pairs, each an a and a b box of one rail colour side by side in
    a frame, with a line of 2 peer links across the gap between them."""
    fabric = build_fabric(load_spec({"gpus": 1024, "dual_tor": True}))
    root = ET.fromstring(fabric_svg(fabric))
    leaves = boxes(root, 1)
    labels = [b.find("svg:text", NS).text for b in leaves]
    assert labels[:4] == ["r0a", "r0b", "r1a", "r1b"] and len(labels) == 32
    rects = [b.find("svg:rect", NS) for b in leaves]
    frames = root.findall(".//svg:rect[@class='pair']", NS)
    peers = root.findall(".//svg:line[@class='bundle peer-link']", NS)
    assert len(frames) == len(peers) == fabric.plan.pairs == 16
    for i, line in enumerate(peers):
        a, b = rects[2 * i], rects[2 * i + 1]
        assert a.get("fill") == b.get("fill")  # one rail
        assert float(line.get("x1")) == pytest.approx(float(a.get("x")) + float(a.get("width")), abs=0.11)
        assert float(line.get("x2")) == float(b.get("x")) > float(line.get("x1"))
        assert line.find("svg:title", NS).text.endswith(": 2 links, 800 Gb/s")


def test_same_fabric_same_bytes():
    fabric = build_fabric(load_spec({"gpus": 4096}))
    assert fabric_svg(fabric) == fabric_svg(build_fabric(load_spec({"gpus": 4096})))


@pytest.mark.skipif(shutil.which("rsvg-convert") is None, reason="librsvg's rsvg-convert is not installed "
                    "(bash scripts/test.sh installs librsvg2-bin)")
def test_librsvg_renders_it(tmp_path):
    for name in ("1024-rail", "1024-rail-dual", "65536"):
        path = tmp_path / f"{name}.svg"
        path.write_text(fabric_svg(build_fabric(load_spec(CASES[name][0]))))
        png = tmp_path / f"{name}.png"
        run = subprocess.run(["rsvg-convert", "-w", str(WIDTH), str(path), "-o", str(png)], capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0 and run.stderr == "", run.stderr
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
