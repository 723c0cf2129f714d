"""The GPU model: one class for a GPU of the catalogue (``topo/data/hardware/gpus.yaml``).

A :class:`Gpu` is a model (an H100 SXM5, a GB200), with its datasheet figures: compute capability,
dense tensor-core peaks, HBM, NVLink bandwidth and domain, NVSwitch and PCIe generations, power, and
the fitted efficiency of its matrix multiplies. ``topo train --gpu NAME`` takes one by name
(:func:`topo.hardware.catalog.gpu_catalog`); a shipped server profile names the model of its GPUs
(:attr:`topo.hardware.servers.ServerProfile.gpu_model`). The GPUs of one server as NCCL sees them
(bus ids, NVLinks, PCIe links) are :class:`topo.hardware.servers.GpuSlot`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .nvlink import NvlinkDomain


@dataclass(frozen=True)
class Gpu:
    """One GPU model of the catalogue (``topo/data/hardware/gpus.yaml``).

    >>> from topo.hardware.catalog import gpu_catalog
    >>> gpu_catalog()["h100"].nvlink
    NvlinkDomain(gpus=8, GBps=450.0, nvswitch=3, multi_node=False)
    """

    name: str
    description: str
    sm: int
    tflops: dict[str, float]  #: dense tensor-core peak per precision, TFLOP/s
    hbm_gb: float
    hbm_tbps: float
    nvlink_GBps: float  #: each way
    nvlink_domain: int
    nvswitch: int
    pcie: int
    tdp_w: float
    efficiency: dict[str, float]  #: achievable fraction of the dense peak in a layer's matrix multiplies
    source: str
    multi_node_nvlink: bool = False  #: the NVLink domain joins servers (NVL72), else it is one board

    @property
    def nvlink(self) -> NvlinkDomain:
        """The NVLink domain this GPU is built into: its size, NVLink bandwidth and NVSwitch generation."""
        return NvlinkDomain(gpus=self.nvlink_domain, GBps=float(self.nvlink_GBps), nvswitch=self.nvswitch,
                            multi_node=self.multi_node_nvlink)

    def peak(self, precision: str) -> float:
        """Dense peak TFLOP/s at ``precision``."""
        return float(self.tflops[precision])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
