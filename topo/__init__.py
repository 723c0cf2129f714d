"""topo: design the network fabric of a GPU training cluster.

The stages, one folder each, every import pointing to an earlier one::

    topo/            spec -> sizing -> Fabric      load_spec(...) -> FabricSpec -> build_fabric(spec)
    topo/hardware/   the hardware catalogue        GPUs, server profiles, NVLink domains (design stage)
    topo/analysis/   Fabric -> results             analyze(fabric) -> Analysis
    topo/outputs/    Fabric + results -> files     one renderer a format: {relative path: text}
    topo/pipeline/   each command's run of them    topo.pipeline.build.build(spec_file, fields, ...)
    topo/cli.py      the command line              the only module that touches the terminal

The design stage (``topo/*.py`` and ``topo/hardware/``) also holds the facts of a design that every
later stage reads and none works out again: the counts (``summary``), the cabling plan
(``cabling``), lossless QoS and buffers (``qos``, ``buffers``), the media and switch catalogues
(``media``, ``catalog``), and on the Fabric itself each tier's switch, the link technology and the
port names.

The public API below is importable from ``topo`` itself. Its names are imported when first used,
so ``import topo`` (and a design-stage import) stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import AnalysisError, OutputError, SpecError, TopoError

__version__ = "0.1.0"

#: Public names -> the module that defines them, imported on first use: ``import topo`` (and
#: ``topo --version``) loads neither numpy nor networkx.
_LATER_STAGES = {
    "Fabric": "topo.fabric",
    "build_fabric": "topo.fabric",
    "Plan": "topo.sizing",
    "plan_fabric": "topo.sizing",
    "FabricSpec": "topo.spec",
    "load_spec": "topo.spec",
    "Analysis": "topo.analysis.analyze",
    "AnalysisOptions": "topo.analysis.analyze",
    "analyze": "topo.analysis.analyze",
    "Summary": "topo.summary",
    "summarize": "topo.summary",
    "Cabling": "topo.cabling",
    "plan_cabling": "topo.cabling",
    "build_files": "topo.pipeline.build",
    "render_build": "topo.pipeline.build",
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
