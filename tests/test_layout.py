"""The package layout: one folder per stage, and every import points to an earlier stage.

Stages, in data-flow order: the design (``topo/*.py``: spec, sizing, fabric, ...), the analyses
(``topo/analysis/``), the outputs (``topo/outputs/``), the pipeline (``topo/pipeline/``: each
command's run of the stages), the CLI (``topo/cli.py``). A module may import its own stage and
earlier ones, never a later one; no chain of imports (function-level and ``TYPE_CHECKING``
imports included) comes back to where it started; the module that runs the analyses
(``analysis/analyze.py``) is imported by no part of its stage. The checks read the source with
``ast``, so they also see imports that never run in a test.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import topo

PACKAGE = Path(__file__).resolve().parent.parent / "topo"

#: Stage folders in data-flow order; a module's stage is its folder (``topo.cli`` is the last).
STAGES = ("design", "analysis", "outputs", "pipeline", "cli")
#: The module of a stage that runs the others of its stage (names below the package); the
#: pipeline's modules run the stages before them, and import each other freely (without a cycle).
ORCHESTRATORS = ("analysis.analyze",)
#: The only module that may talk to the terminal (imports click).
TERMINAL = "cli"


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``package``."""
    root = package.parent
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def stage(module: str) -> int:
    """Index in STAGES of a module's stage, from its dotted name."""
    parts = module.split(".")
    if parts[1:2] == ["cli"]:
        return STAGES.index("cli")
    if len(parts) > 1 and parts[1] in STAGES:
        return STAGES.index(parts[1])
    return STAGES.index("design")


def imports(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[int, str, str]]:
    """(line, imported module, first imported name) of every import of a package module, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    top = next(iter(modules)).split(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, "") for alias in node.names
                      if alias.name.split(".")[0] == top]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != top:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                # `from pkg import submodule` imports the submodule; other names come from pkg
                found.append((node.lineno, sub if sub in modules else target, alias.name))
    return found


def layout_problems(package: Path) -> list[str]:
    """Every import that breaks the stage order, every import cycle, every orchestrator imported
    by its own stage, and every module outside TERMINAL_MODULES that imports click."""
    modules = module_files(package)
    top = package.name
    orchestrators = {f"{top}.{name}" for name in ORCHESTRATORS}
    problems = []
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        where = path.relative_to(package.parent)
        for line, target, _ in imports(module, path, modules):
            if target not in modules:
                continue
            graph[module].add(target)
            if stage(target) > stage(module):
                problems.append(f"{where}:{line}: imports {target}, of the {STAGES[stage(target)]} stage, "
                                f"which comes after {STAGES[stage(module)]}")
            if target in orchestrators and stage(target) == stage(module) and module != target:
                problems.append(f"{where}:{line}: imports {target}, which runs the {STAGES[stage(module)]} "
                                f"stage; its parts may not import it")
        if module != f"{top}.{TERMINAL}":
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                if any(n.split(".")[0] == "click" for n in names):
                    problems.append(f"{where}:{node.lineno}: imports click; only the CLI talks to the terminal")
    problems += [f"import cycle: {' -> '.join(cycle)}" for cycle in cycles(graph)]
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a closed path) per strongly connected group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for group in groups:
        members = set(group)
        path, seen = [group[0]], {group[0]}
        while True:  # walk inside the group until a module repeats: that closes a cycle
            nxt = min(w for w in graph[path[-1]] if w in members)
            if nxt in seen:
                out.append(path[path.index(nxt):] + [nxt])
                break
            path.append(nxt)
            seen.add(nxt)
    return out


# --- the package ------------------------------------------------------------------------------------


def test_every_import_points_to_an_earlier_stage_and_none_forms_a_cycle():
    assert layout_problems(PACKAGE) == []


def test_every_stage_has_its_folder():
    modules = module_files(PACKAGE)
    assert {STAGES[stage(m)] for m in modules} == set(STAGES)
    for orchestrator in ORCHESTRATORS:
        assert f"topo.{orchestrator}" in modules


@pytest.mark.parametrize("name", [name for name in topo.__all__ if name != "__version__"])
def test_the_public_api_is_importable_from_topo(name):
    value = getattr(topo, name)
    assert getattr(importlib.import_module(value.__module__), name) is value
    assert name in dir(topo)


def test_import_topo_loads_no_later_stage():
    """``import topo`` and the design stage do not import the analyses, the outputs, the pipeline or scipy."""
    import subprocess
    import sys

    code = ("import sys, topo, topo.fabric, topo.spec; "
            "print(sorted(m for m in sys.modules if m.startswith(('topo.analysis', 'topo.outputs', 'topo.pipeline', "
            "'scipy'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent)
    assert out.stdout.strip() == "[]"


# --- the checker itself, on small made-up packages ----------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_checker_finds_an_import_from_a_later_stage(tmp_path):
    root = _package(tmp_path, {
        "spec.py": "def f():\n    from .outputs.build import files\n",
        "analysis/__init__.py": "", "analysis/hops.py": "from ..outputs import build\n",
        "outputs/__init__.py": "", "outputs/build.py": "from ..spec import f\n",
    })
    problems = layout_problems(root)
    assert any(p.startswith("pkg/spec.py:2: imports pkg.outputs.build, of the outputs stage") for p in problems)
    assert any(p.startswith("pkg/analysis/hops.py:1: imports pkg.outputs.build") for p in problems)
    assert "import cycle: pkg.outputs.build -> pkg.spec -> pkg.outputs.build" in problems
    assert len(problems) == 3


def test_the_checker_finds_a_cycle_inside_a_stage_and_a_part_importing_its_orchestrator(tmp_path):
    root = _package(tmp_path, {
        "analysis/__init__.py": "",
        "analysis/analyze.py": "from .hops import count\n",
        "analysis/hops.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .analyze import x\n",
        "outputs/__init__.py": "",
        "outputs/a.py": "import pkg.outputs.b\n", "outputs/b.py": "from . import a\n",
    })
    problems = layout_problems(root)
    assert "pkg/analysis/hops.py:3: imports pkg.analysis.analyze, which runs the analysis stage; its parts may " \
           "not import it" in problems
    assert "import cycle: pkg.outputs.a -> pkg.outputs.b -> pkg.outputs.a" in problems
    assert "import cycle: pkg.analysis.analyze -> pkg.analysis.hops -> pkg.analysis.analyze" in problems
    assert len(problems) == 3


def test_the_checker_finds_an_output_importing_the_pipeline_and_lets_the_pipeline_import_all(tmp_path):
    root = _package(tmp_path, {
        "analysis/__init__.py": "", "analysis/analyze.py": "",
        "outputs/__init__.py": "", "outputs/report.py": "from ..pipeline.apart import run_apart\n",
        "pipeline/__init__.py": "", "pipeline/apart.py": "",
        "pipeline/build.py": "from ..analysis.analyze import analyze\nfrom ..outputs import report\nfrom . import apart\n",
        "cli.py": "from .pipeline.build import build\n",
    })
    problems = layout_problems(root)
    assert problems == ["pkg/outputs/report.py:1: imports pkg.pipeline.apart, of the pipeline stage, which comes "
                        "after outputs"]


def test_the_checker_finds_click_outside_the_cli(tmp_path):
    root = _package(tmp_path, {"spec.py": "import click\n", "cli.py": "import click\n"})
    assert layout_problems(root) == ["pkg/spec.py:1: imports click; only the CLI talks to the terminal"]
