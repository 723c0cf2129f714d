"""Golden outputs of every example in examples/.

Each example's build folder is compared with tests/golden/<example>/ (a file in a subfolder is
stored as ``sub__file``). Small designs keep every file; for large ones the files with a line per link or
GPU (design.json, the GraphML and full DOT graphs, cabling.csv, the server addresses, the rankfile,
the containerlab lab) are left out of the golden copy, and of the switch configs only those of the
first leaf, spine and core are kept. The files with matplotlib's plots in them (``report.html``,
``report/*.svg``) are left out, and out of the golden stamp: matplotlib's SVG changes between its
versions (tests/test_report.py checks them, and that two builds give the same bytes). When a
change is intended, regenerate with::

    TOPO_REGEN_GOLDEN=1 python -m pytest tests/test_golden.py

and review ``git diff tests/golden``.
"""

from __future__ import annotations

import difflib
import json

import pytest

from topo import build_fabric, load_spec
from topo.analysis.analyze import analyze
from topo.pipeline.build import render_build
from topo.summary import summarize
from topo.spec import read_spec_file

from .conftest import EXAMPLES, GOLDEN, REGEN

#: files with a line per link or per GPU are too large to keep as golden files above this many links
FULL_GOLDEN_MAX_LINKS = 3000
BULK = {"design.json", "graph/fabric.graphml", "graph/fabric.dot", "cabling.csv", "hosts/addresses.csv",
        "placement/rankfile"}
#: files whose bytes depend on the matplotlib version that drew their plots
PLOTTED = {"report.html", "report/busbw.svg", "report/links.svg"}


def rendered(example):
    """The example's build folder, keeping the configs of the first leaf, spine and core only."""
    fabric = build_fabric(load_spec(read_spec_file(example), base_dir=example.parent))
    files = render_build(fabric, summarize(fabric), analyze(fabric))
    if len(fabric.links) > FULL_GOLDEN_MAX_LINKS:
        for rel in [rel for rel in files if rel in BULK or rel.endswith(".clab.yml")]:
            files.pop(rel)
    for rel in PLOTTED:
        files.pop(rel, None)
    stamp = json.loads(files["topo-build.json"])
    stamp["files"] = {rel: sha for rel, sha in stamp["files"].items() if rel not in PLOTTED}
    stamp["sizes"] = {rel: size for rel, size in stamp["sizes"].items() if rel not in PLOTTED}
    files["topo-build.json"] = json.dumps(stamp, indent=2) + "\n"
    firsts = {fabric.names[fabric.first(t)] for t in (1, 2, 3) if fabric.count(t)}
    return {rel.replace("/", "__"): text for rel, text in files.items()
            if not rel.startswith("switches/") or rel.split("/")[1] in firsts}


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_example_matches_golden(example):
    folder = GOLDEN / example.stem
    files = rendered(example)
    if REGEN:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
        for rel, text in files.items():
            (folder / rel).write_text(text)
    assert sorted(p.name for p in folder.iterdir()) == sorted(files)
    for rel, text in files.items():
        expected = (folder / rel).read_text()
        if text != expected:
            diff = "".join(difflib.unified_diff(
                expected.splitlines(True), text.splitlines(True), f"golden/{rel}", f"now/{rel}", n=2))
            pytest.fail(f"{example.name}: {rel} differs (TOPO_REGEN_GOLDEN=1 to accept)\n{diff[:4000]}")


def test_same_spec_gives_byte_identical_output():
    example = EXAMPLES / "h100-4096-3tier.yaml"
    assert _built(example) == _built(example)


def _built(example):
    fabric = build_fabric(load_spec(read_spec_file(example), base_dir=example.parent))
    return render_build(fabric, summarize(fabric), analyze(fabric))
