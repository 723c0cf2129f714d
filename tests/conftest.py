"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden"
#: Files written by others that outputs are checked against; absent in a user's clone.
SHARED_REFERENCE = ROOT.parent / "shared" / "reference"


def python_tool(name: str) -> str | None:
    """A command that a test dependency installs (``check-jsonschema``): the one beside this Python
    (its virtual environment's ``bin``, which need not be on PATH), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else shutil.which(name)


#: Set TOPO_REGEN_GOLDEN=1 to rewrite the golden files from the current code (then review the diff).
REGEN = os.environ.get("TOPO_REGEN_GOLDEN") == "1"


@pytest.fixture
def spec_factory():
    from topo import load_spec

    def make(**fields):
        return load_spec(fields)

    return make


@pytest.fixture
def build():
    from topo import build_fabric, load_spec

    def make(**fields):
        return build_fabric(load_spec(fields))

    return make
