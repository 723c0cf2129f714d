"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden"
#: Files written by others that outputs are checked against; absent in a user's clone.
SHARED_REFERENCE = ROOT.parent / "shared" / "reference"

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
