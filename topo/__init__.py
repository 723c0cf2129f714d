"""topo: design the network fabric of a GPU training cluster.

The stages, each an importable pure function::

    load_spec(...) -> FabricSpec -> build_fabric(spec) -> Fabric -> summarize(fabric) -> ...
"""

from .errors import AnalysisError, OutputError, SpecError, TopoError
from .fabric import Fabric, build_fabric
from .sizing import Plan, plan_fabric
from .spec import FabricSpec, load_spec

__version__ = "0.1.0"

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
]
