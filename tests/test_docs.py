"""The README and docs/ are true to the code: the modules, names and files they mention exist, and
their ``>>>`` examples run and print what the page says."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: ``topo.outputs.cabling.plan_cabling``, not the ``topo.xml`` ending of a file name.
DOTTED = re.compile(r"(?<![\w./-])topo(?:\.[A-Za-z_]\w*)+")
#: ``from topo.analysis.hops import hop_counts, HopCounts`` in an example.
FROM_IMPORT = re.compile(r"^\s*(?:>>> )?from (topo(?:\.\w+)*) import ([\w, ]+)$", re.M)
#: A path in the source tree: ``topo/outputs/cabling.py``, ``templates/frr/bgp.j2``, ``examples/...``.
TREE_PATH = re.compile(r"(?<![\w./-])(?:topo|templates|benchmarks|tests|scripts|examples)/[\w./-]*\w")
#: A fenced code block.
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


def resolves(name: str) -> bool:
    """True when a dotted name is a module, or a module and attributes below it."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def missing_names(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    missing = [m.group(0) for m in DOTTED.finditer(text) if not resolves(m.group(0))]
    for m in FROM_IMPORT.finditer(text):
        missing += [f"from {m.group(1)} import {name.strip()}" for name in m.group(2).split(",")
                    if name.strip() and not resolves(f"{m.group(1)}.{name.strip()}")]
    missing += [path for path in (m.group(0) for m in TREE_PATH.finditer(text))
                if "<" not in path and "*" not in path and not (ROOT / path).exists()]
    return sorted(set(missing))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_module_name_and_file_a_page_mentions_exists(page):
    assert missing_names(page) == []


def code_blocks(text: str) -> str:
    """The page with everything outside fenced code blocks blanked (line numbers kept), so that a
    closing fence does not read as an example's expected output."""
    out = ["" for _ in text.split("\n")]
    lines = text.split("\n")
    for m in FENCE.finditer(text):
        first = text.count("\n", 0, m.start(1))
        for i, line in enumerate(m.group(1).split("\n")[:-1]):
            out[first + i] = lines[first + i]
    return "\n".join(out)


EXAMPLE_PAGES = [p for p in PAGES if ">>> " in code_blocks(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda p: p.name)
def test_the_examples_of_a_page_print_what_it_says(page):
    text = code_blocks(page.read_text(encoding="utf-8"))
    test = doctest.DocTestParser().get_doctest(text, {}, page.name, str(page), 0)
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


def test_the_checks_find_a_stale_name_and_a_failing_example(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("`topo.render.core_files` in `topo/render.py`; `topo.outputs.design.core_files` and\n"
                    "the file `cluster-topo.xml` are fine.\n\n```python\n>>> 1 + 1\n3\n```\n", encoding="utf-8")
    assert missing_names(page) == ["topo.render.core_files", "topo/render.py"]
    test = doctest.DocTestParser().get_doctest(code_blocks(page.read_text()), {}, "page", str(page), 0)
    runner = doctest.DocTestRunner()
    runner.run(test, out=lambda _: None)
    assert (runner.tries, runner.failures) == (1, 1)
