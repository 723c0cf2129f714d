"""topo: design the network fabric of a GPU training cluster.

The stages, one folder each, every import pointing to an earlier one::

    topo/            spec -> sizing -> Fabric      load_spec(...) -> FabricSpec -> build_fabric(spec)
    topo/analysis/   Fabric -> results             analyze(fabric) -> Analysis
    topo/outputs/    Fabric + results -> files     build_files(fabric, summarize(fabric), ...)
    topo/cli.py      the command line              the only module that touches the terminal

The public API below is importable from ``topo`` itself. Names of the later stages are imported
when first used, so ``import topo`` (and a design-stage import) stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import AnalysisError, OutputError, SpecError, TopoError
from .fabric import Fabric, build_fabric
from .sizing import Plan, plan_fabric
from .spec import FabricSpec, load_spec

__version__ = "0.1.0"

#: Public names of the later stages -> the module that defines them (imported on first use).
_LATER_STAGES = {
    "Analysis": "topo.analysis.analyze",
    "AnalysisOptions": "topo.analysis.analyze",
    "analyze": "topo.analysis.analyze",
    "Summary": "topo.outputs.summary",
    "summarize": "topo.outputs.summary",
    "Cabling": "topo.outputs.cabling",
    "plan_cabling": "topo.outputs.cabling",
    "build_files": "topo.outputs.build",
    "render_build": "topo.outputs.build",
    "write_tree": "topo.outputs.writer",
}

__all__ = [
    "AnalysisError",
    "Fabric",
    "FabricSpec",
    "OutputError",
    "Plan",
    "SpecError",
    "TopoError",
    "__version__",
    "build_fabric",
    "load_spec",
    "plan_fabric",
    *_LATER_STAGES,
]


def __getattr__(name: str) -> Any:
    module = _LATER_STAGES.get(name)
    if module is None:
        raise AttributeError(f"module 'topo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LATER_STAGES))
