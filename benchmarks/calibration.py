"""Predict every published measurement of ``calibration.csv`` and compare: the validation table.

Each row of the reference file (id, quantity, measured, unit, setting, source) is matched by id to a
setup below: the fabric spec, the node (GPU generation, NVLink, NVSwitch, NICs, PCIe, CPU) and the
analysis options the measurement describes. The prediction is what ``topo analyze`` gives for it
with default model constants; the ratio is predicted / measured. Nothing here is fitted to the
rows: a setup only states what the source states (or the assumption written next to it).

Usage::

    python benchmarks/calibration.py [--csv PATH] [--write-docs]

``--csv`` defaults to ``../shared/reference/calibration.csv`` beside the repository. With
``--write-docs`` the section between ``<!-- calibration:start -->`` and ``<!-- calibration:end -->``
of ``docs/model.md`` is replaced by the table. Progress goes to stderr. This is a benchmark, not a
test: pytest does not collect it (tests/test_calibration.py checks the structural bounds).
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from topo import build_fabric, load_spec  # noqa: E402
from topo.analysis.analyze import AnalysisOptions, analyze  # noqa: E402
from topo.hardware.servers import NodeModel  # noqa: E402

GIB = 1 << 30
MIB = 1 << 20
DEFAULT_CSV = ROOT.parent / "shared" / "reference" / "calibration.csv"
DOC = ROOT / "docs" / "model.md"
START, END = "<!-- calibration:start -->", "<!-- calibration:end -->"


def node(gpu: str, nics: int, nic_gbps: int, cpu: str = "intel", gpus: int = 8) -> NodeModel:
    """A node of a published GPU generation (NVIDIA's data sheets): NVLink per GPU each way, NVSwitch
    generation, and the PCIe link of GPU and NIC (Gen5 x16 = 63.0 GB/s, Gen6 x16 = 118.0 GB/s each
    way after encoding)."""
    table = {  # sm, NVLink GB/s each way, NVSwitch generation, GPU PCIe GB/s
        "a100": (80, 300.0, 2, 31.5),   # 12 NVLink3 links x 25 GB/s; PCIe Gen4 x16
        "h100": (90, 450.0, 3, 63.0),   # 18 NVLink4 links x 25 GB/s; PCIe Gen5 x16
        "h20": (90, 450.0, 3, 63.0),    # H20: 900 GB/s NVLink (both ways), NVSwitch-3 HGX board
        "gb200": (100, 900.0, 4, 63.0),  # NVLink5 1.8 TB/s (both ways); NVLink Switch
        "b300": (103, 900.0, 4, 118.0),  # NVLink5; ConnectX-8 on PCIe Gen6 x16
    }
    sm, nvl, nvs, pcie = table[gpu]
    nic_pcie = 118.0 if nic_gbps > 400 else 63.0 if nic_gbps > 200 else 31.5
    return NodeModel(gpus=gpus, nics=nics, nic_gbps=float(nic_gbps), sm=sm, nvlink_bw=nvl, nvswitch=nvs,
                     gpu_pcie_GBps=pcie, nic_pcie_GBps=nic_pcie, cpu_vendor=cpu, assumed=())


@dataclass
class Setup:
    """How to predict one row: spec, node, options, and what to read from the analysis."""

    spec: dict[str, Any]
    node: NodeModel
    options: dict[str, Any]
    read: str = "busbw"  # busbw at the last size, or latency (us) at the first size
    assumptions: str = ""
    compare: dict[str, Any] | None = None  # for a ratio: the options of the denominator
    #: the tuner tables of the NCCL release the measurement ran, where they differ from the default
    matched: tuple[str, dict[str, Any]] | None = None


IB = {"switch": "ndr-64x400", "port_gbps": 400}
SETUPS: dict[str, Setup] = {
    "C01": Setup({"gpus": 16, **IB}, node("h100", 8, 400), {"algo": "ring", "sizes": (8 * GIB,)},
                 assumptions="8 GiB as the large message"),
    "C02": Setup({"gpus": 32, **IB}, node("h100", 8, 400), {"algo": "ring", "sizes": (8 * GIB,)},
                 assumptions="InfiniBand NDR switches; 8 GiB"),
    "C03": Setup({"gpus": 128, "nic_gbps": 800, "port_gbps": 800, "switch": "eth-51t-64x800"},
                 node("b300", 8, 800), {"algo": "ring", "sizes": (8 * GIB,)},
                 assumptions="rail-optimised 51.2T Ethernet leaves, ECMP, 1 QP; 8 GiB"),
    "C04": Setup({"gpus": 16, "nics_per_node": 4, "nic_gbps": 200, "port_gbps": 400},
                 node("a100", 4, 200), {"algo": "ring", "sizes": (8 * 10**9,)},
                 assumptions="A100-class GPUs (the source does not name them; the NICs bound the ring)"),
    "C05": Setup({"gpus": 16, **IB}, node("h20", 8, 400), {"algo": "nvlstree", "sizes": (4,)}, read="latency",
                 assumptions="Intel host CPUs",
                 matched=("NCCL 2.21.5, the release measured: its NVLSTree network latency is 14 us, not 20.9",
                          {"hw_latency_net": [[5.0, 8.5, 28], [2.7, 4.0, 14.0], [0, 0, 31], [0, 0, 30],
                                              [0, 0, 18], [0, 0, 14]]})),
    "C06": Setup({"gpus": 16, **IB}, node("h20", 8, 400), {"algo": "nvls", "sharp": True, "sizes": (16 * MIB,)},
                 assumptions="NVLS across nodes runs only with in-network reduction (SHARP) in NCCL"),
    "C07": Setup({"gpus": 24, **IB}, node("gb200", 8, 400, cpu="arm"), {"algo": "tree", "sizes": (16 * GIB,)},
                 assumptions="each NVLink partition of 8 GPUs is one node with 8 x 400G NICs; Grace CPUs"),
    "C08": Setup({"gpus": 512, "radix": 32, "placement": "rack", "port_gbps": 400},
                 node("h100", 8, 400), {"hash_field": "qpn", "qps": 16, "sizes": (GIB,)}, read="ratio",
                 compare={"hash_field": "sport", "qps": 1, "sizes": (GIB,)},
                 assumptions="32-port rack switches (16 down: 2 servers, 16 up) under 16 spines, 512 GPUs, "
                             "topology order, NCCL's choice of algorithm, 1 GiB"),
}


def predict(setup: Setup, constants: dict[str, Any] | None = None) -> tuple[float, str]:
    """The predicted value and a short description of what the model chose."""
    fabric = build_fabric(load_spec(setup.spec))

    def run(opts: dict[str, Any]):
        if constants is None:
            return analyze(fabric, AnalysisOptions(**opts), node=setup.node).allreduce
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as handle:
            json.dump(constants, handle)  # JSON is YAML
            handle.flush()
            return analyze(fabric, AnalysisOptions(**opts, nccl_constants=handle.name), node=setup.node).allreduce

    result = run(setup.options)
    row = result.rows[-1]
    chosen = f"{row['algorithm']}/{row['protocol']}"
    if setup.read == "latency":
        return row["time_s"] * 1e6, chosen
    if setup.read == "ratio":
        base = run(setup.compare).rows[-1]
        return row["busbw_GBps"] / base["busbw_GBps"], (
            f"{chosen}: {row['busbw_GBps']:.1f} against {base['busbw_GBps']:.1f} GB/s")
    return row["busbw_GBps"], chosen


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def table(rows: list[dict[str, str]], progress: Callable[[str], None]) -> tuple[str, list[float]]:
    lines = ["| id | quantity | setting (abridged) | measured | predicted | ratio | model's choice | assumptions |",
             "|---|---|---|---:|---:|---:|---|---|"]
    ratios = []
    for row in rows:
        setup = SETUPS.get(row["id"])
        if setup is None:
            lines.append(f"| {row['id']} | {row['quantity']} | {row['setting'][:60]} | {row['measured']} | "
                         f"no setup | | | |")
            continue
        progress(f"predicting {row['id']}")
        value, chosen = predict(setup)
        measured = float(row["measured"])
        ratio = value / measured
        ratios.append(ratio)
        setting = re.sub(r"\s+", " ", row["setting"])
        setting = setting if len(setting) <= 90 else setting[:87] + "..."
        unit = row["unit"] if row["unit"] != "ratio" else ""
        notes = setup.assumptions
        if setup.matched is not None:
            label, constants = setup.matched
            again, _ = predict(setup, constants)
            notes += f"; with {label}: {again:.3g} {unit}, ratio {again / measured:.2f}"
        lines.append(f"| {row['id']} | {row['quantity']} | {setting} | {measured:g} {unit} | {value:.3g} {unit} | "
                     f"{ratio:.2f} | {chosen} | {notes} |")
    return "\n".join(lines), ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    if not args.csv.is_file():
        print(f"calibration.py: no calibration file at {args.csv} (give --csv)", file=sys.stderr)
        return 1
    rows = read_rows(args.csv)
    text, ratios = table(rows, lambda message: print(message, file=sys.stderr))
    within = sum(1 for r in ratios if 0.8 <= r <= 1.2)
    summary = f"{within} of {len(ratios)} rows within +-20%; median |ratio - 1| = " + (
        f"{sorted(abs(r - 1) for r in ratios)[len(ratios) // 2]:.2f}" if ratios else "n/a")
    print(text)
    print()
    print(summary)
    if args.write_docs:
        doc = DOC.read_text(encoding="utf-8")
        if START not in doc or END not in doc:
            print(f"calibration.py: {DOC.name} has no {START} ... {END} section", file=sys.stderr)
            return 1
        head, rest = doc.split(START, 1)
        _, tail = rest.split(END, 1)
        DOC.write_text(f"{head}{START}\n{text}\n\n{summary}\n{END}{tail}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
