"""The shape of the package: each part small enough to read, and in the place its kind belongs.

What these tests hold (issue 38's bounds, kept so the next capabilities land where they belong):

* no subpackage of ``topo/`` holds more than 35% of the package's lines;
* ``topo/cli.py`` only declares the commands (at most 900 lines), and no function in ``topo/``
  is over 100 lines;
* no renderer (``topo/outputs/``) reaches into the models' internals (routing, congestion, the
  NCCL tuner, ECMP, up-down routing): it reads results;
* one ``Gpu`` class in the package (the hardware catalogue's);
* every package's docstring names each of its modules, and the README's architecture section
  names the pipeline layer.

They read the source with ``ast``, so nothing is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.test_layout import imports, module_files

PACKAGE = Path(__file__).resolve().parent.parent / "topo"
README = PACKAGE.parent / "README.md"
MODULES = module_files(PACKAGE)
#: The models' internals a renderer may not import: it reads the analyses' results instead.
MODEL_INTERNALS = ("routing", "congestion", "tuner", "ecmp", "updown")


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_subpackage_holds_more_than_35_percent_of_the_lines():
    total = sum(lines(p) for p in PACKAGE.rglob("*.py"))
    shares = {sub.name: sum(lines(p) for p in sub.rglob("*.py")) / total
              for sub in PACKAGE.iterdir() if sub.is_dir() and (sub / "__init__.py").exists()}
    assert shares, "no subpackage found"
    over = {name: f"{share:.0%}" for name, share in shares.items() if share > 0.35}
    assert not over, f"subpackages over 35% of topo/'s {total} lines: {over}"


def test_the_cli_only_declares_the_commands():
    assert lines(PACKAGE / "cli.py") <= 900


def test_no_function_is_over_100_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 100:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, "functions over 100 lines:\n" + "\n".join(long)


def test_no_renderer_imports_the_models_internals():
    found = []
    for module, path in MODULES.items():
        if not module.startswith("topo.outputs"):
            continue
        for line, target, _ in imports(module, path, MODULES):
            if target.rpartition(".")[2] in MODEL_INTERNALS and target.startswith("topo.analysis"):
                found.append(f"{module}:{line} imports {target}")
    assert not found, "\n".join(found)


def test_one_gpu_class():
    classes = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
               for path in sorted(PACKAGE.rglob("*.py"))
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.ClassDef) and node.name == "Gpu"]
    assert len(classes) == 1, classes


@pytest.mark.parametrize("init", sorted(PACKAGE.rglob("__init__.py")), ids=lambda p: str(p.parent.name))
def test_every_package_docstring_maps_its_modules(init):
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    if init.parent == PACKAGE:
        parts = [p.name + "/" for p in sorted(PACKAGE.iterdir())
                 if p.is_dir() and (p / "__init__.py").exists() and p.name != "data"]
    else:
        parts = [p.stem if p.suffix == ".py" else p.name for p in sorted(init.parent.iterdir())
                 if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()]
    missing = [part for part in parts if not re.search(rf"\b{re.escape(part.rstrip('/'))}\b", doc)]
    assert not missing, f"{init.relative_to(PACKAGE.parent)}: its docstring does not name {missing}"


def test_the_readme_architecture_names_the_pipeline_layer():
    text = README.read_text(encoding="utf-8")
    section = text.partition("## Architecture")[2].partition("\n## ")[0]
    assert "topo/pipeline/" in section


def test_every_subpackage_is_shipped_in_the_wheel():
    """A package folder missing from pyproject.toml's list installs from a checkout but not from a wheel."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")
    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(PACKAGE.parent).parts) for init in PACKAGE.rglob("__init__.py")}
    assert found <= listed, f"not in pyproject.toml's packages: {sorted(found - listed)}"
