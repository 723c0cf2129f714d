"""Imports on demand: ``topo --version``, ``--help`` and the commands that do not analyse load
neither numpy, scipy, networkx nor the analyses (the start-up time is in docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Runs the command line in a fresh interpreter and prints the heavy modules it loaded.
PROBE = """
import json, runpy, sys
sys.argv = ["topo", *json.loads(sys.argv[1])]
try:
    runpy.run_module("topo.cli", run_name="__main__")
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "scipy", "networkx")
               or (m.startswith("topo.analysis.") and m != "topo.analysis.choices"))
print("\\nMODULES " + json.dumps(sorted({m.split(".")[0] if not m.startswith("topo") else m for m in heavy})))
"""


def loaded(*args: str, cwd=None) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(args))], capture_output=True, text=True,
                         check=True, cwd=cwd).stdout
    return json.loads(out.rsplit("MODULES ", 1)[1])


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["build", "--help"], ["train", "--help"],
                                  ["switches"]])
def test_these_load_nothing_heavy(args):
    assert loaded(*args) == []


def test_listing_templates_loads_no_analysis():
    mods = loaded("templates")
    assert "scipy" not in mods and not [m for m in mods if m.startswith("topo.analysis")]


def test_a_build_without_analysis_loads_only_numpy(tmp_path):
    mods = loaded("build", "--gpus", "64", "--no-analysis", "--no-configs", "-o", str(tmp_path / "d"), "-q")
    # the design files (design.json, GraphML) are written from the arrays: no networkx graph either
    assert mods == ["numpy"]
    assert (tmp_path / "d" / "design.json").is_file()


def test_import_topo_is_light():
    code = "import sys, topo; print(sorted(m for m in ('numpy', 'networkx', 'scipy', 'topo.fabric') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
