"""Work estimated and bounded before it starts (docs/reliability.md, "Work: estimated before it
starts"): costs that grow no faster than their input, requests refused up front when they would not
fit the machine, sweep inputs read with the same safeguards as a spec, cached rows checked before
they are trusted, and a Dask sweep that ends when its cluster cannot run it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from topo import build_fabric, load_spec
from topo.cli import main
from topo.outputs.check import check_folder
from topo.outputs.manifest import MANIFEST


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="topo", catch_exceptions=False)


def one_error(result, *fragments: str) -> list[str]:
    """Exit status 1, no traceback, and every fragment in the stderr's Error lines."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert errors, result.stderr
    for fragment in fragments:
        assert any(fragment in line for line in errors), (fragment, result.stderr)
    return errors


def best_of(times: int, work) -> float:
    """The shortest of ``times`` runs of ``work()`` in seconds (the least disturbed by other load)."""
    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


# --- topo check: linear in the stamp's entries -----------------------------------------------------


def test_check_is_linear_in_the_stamps_entries(tmp_path):
    fabric = build_fabric(load_spec({"gpus": 64}))

    def folder(entries: int) -> Path:
        path = tmp_path / f"f{entries}"
        path.mkdir()
        files = {f"gone/deep/file{i:06d}.txt": "0" * 64 for i in range(entries)}
        (path / MANIFEST).write_text(json.dumps({"topo_build": 1, "topo_version": "0", "files": files}))
        return path

    small, large = folder(3_000), folder(30_000)
    reports = []
    t_small = best_of(3, lambda: reports.append(check_folder(small, fabric, lambda: [])))
    t_large = best_of(2, lambda: reports.append(check_folder(large, fabric, lambda: [])))
    assert "missing: files the stamp lists that are not there (30,000)" in reports[-1].problems[0]
    # ten times the entries: ten times the work (a list where a set belongs made it a hundred)
    assert t_large < 30 * t_small + 0.5, (t_small, t_large)
