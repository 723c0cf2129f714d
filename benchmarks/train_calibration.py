"""Predict every published training run of ``training-calibration.csv`` and compare: the validation
table of docs/train.md.

Each row of the reference file (model, parallelism, GPUs, network, measured throughput, source) is
matched by id to a setup below: the fabric the run's network describes, and what the row leaves
out (recomputation, which communication the framework overlapped, the FLOP convention of the
metric), each with the reason written next to it. The prediction is what ``topo train`` gives for
it with the shipped constants; the ratio is predicted / measured. Nothing here is fitted to a row.

Usage::

    python benchmarks/train_calibration.py [--csv PATH] [--write-docs]

``--csv`` defaults to ``../shared/reference/training-calibration.csv`` beside the repository. With
``--write-docs`` the section between ``<!-- train-calibration:start -->`` and
``<!-- train-calibration:end -->`` of ``docs/train.md`` is replaced by the table. This is a
benchmark, not a test: tests/test_train.py checks the table is current and every miss explained.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_build import replace_section  # noqa: E402
from calibration import read_rows  # noqa: E402  (the same reader as the all-reduce table's)
from topo import build_fabric, load_spec  # noqa: E402
from topo.analysis.analyze import AnalysisOptions  # noqa: E402
from topo.analysis.training import Step, train_step  # noqa: E402
from topo.workload import Model, Workload, resolve_gpu  # noqa: E402

DEFAULT_CSV = ROOT.parent / "shared" / "reference" / "training-calibration.csv"
DOC = ROOT / "docs" / "train.md"
START, END = "<!-- train-calibration:start -->", "<!-- train-calibration:end -->"


@dataclass(frozen=True)
class Setup:
    """What a row's run was, as topo train takes it."""

    spec: dict[str, Any]  #: the fabric
    gpu: str
    model: dict[str, Any]  #: architecture fields the row does not give (vocab, kv heads, ffn, ...)
    workload: dict[str, Any]  #: recompute, zero, overlap, precision
    metric: str  #: the Step figure the row measured
    why: str  #: the assumptions, for the table
    extra: dict[str, Any] = field(default_factory=dict)


HDR_A100 = {"nic_gbps": 200}  # 8 x 200G HDR per DGX A100, a non-blocking fat tree
NDR_H100: dict[str, Any] = {}  # 8 x 400G per node (the DGX H100 reference; the default fabric)
GPT_MLP = {"mlp": "gelu", "tied": True}
LLAMA_405B = {"kv_heads": 8, "ffn": 53248, "mlp": "swiglu", "vocab": 128256}
LLAMA_8B = {"kv_heads": 8, "ffn": 14336, "mlp": "swiglu", "vocab": 128256}

SETUPS: dict[str, Setup] = {
    "K01": Setup(HDR_A100, "a100-80g", {**GPT_MLP, "vocab": 51200},
                 {"recompute": "full", "zero": 0, "overlap": (), "grad_precision": "fp32"}, "hardware_tflops_per_gpu",
                 "full recompute and the FLOP count that includes it (SC21 Sec. 5.1); Megatron of 2021 "
                 "overlaps nothing"),
    "K02": Setup(HDR_A100, "a100-80g", {**GPT_MLP, "vocab": 51200},
                 {"recompute": "full", "zero": 3, "overlap": ("dp",), "grad_precision": "fp32"}, "hardware_tflops_per_gpu",
                 "ZeRO-3 prefetches weights during compute; full recompute, SC21's FLOP count"),
    "K03": Setup(HDR_A100, "a100-80g", {**GPT_MLP, "vocab": 51200},
                 {"recompute": "selective", "zero": 0, "overlap": (), "grad_precision": "fp32"}, "mfu",
                 "selective recompute (the row); Megatron of 2022 overlaps no tensor-parallel traffic"),
    "K04": Setup(HDR_A100, "a100-80g", {**GPT_MLP, "vocab": 64000},
                 {"recompute": "selective", "zero": 1, "overlap": ("dp", "pp"), "micro_batch": 1,
                  "grad_precision": "fp32"},
                 "mfu", "micro-batch 1; Megatron of 2023 overlaps gradient reduction and pipeline sends, "
                        "not tensor-parallel traffic; 400G leaf ports split 2 x 200G"),
    "K05": Setup(NDR_H100, "h100", {**GPT_MLP, "vocab": 131072},
                 {"recompute": "selective", "zero": 1, "overlap": ("dp", "tp", "pp"), "micro_batch": 1,
                  "grad_precision": "fp32"},
                 "model_tflops_per_gpu", "micro-batch 1; every overlap the row names; 8 x 400G per node"),
    "K06": Setup(NDR_H100, "h100", {**GPT_MLP, "vocab": 51200},
                 {"recompute": "selective", "zero": 1, "overlap": ("dp", "tp", "pp")}, "step_time_s",
                 "NeMo's GPT-3 recipe: distributed optimizer, every overlap; 8 x 400G per node"),
    "K07": Setup({"gpus_per_node": 4, "nics_per_node": 4}, "gb200", LLAMA_405B,
                 {"recompute": "selective", "zero": 1, "overlap": ("dp", "tp", "pp")}, "tokens_per_s_per_gpu",
                 "tokens/s (the row's 864, free of FLOP conventions); 4 x 400G per tray"),
    "K08": Setup(NDR_H100, "h100", LLAMA_8B,
                 {"recompute": "none", "zero": 3, "overlap": ("dp",)}, "tokens_per_s_per_gpu",
                 "tokens/s (the row's 14,451); FSDP is ZeRO-3; one node"),
}

#: The measured value in the Step's terms: MFU in percent, the others as they are.
SCALE = {"mfu": 100.0}


def _int(text: str, default: int = 1) -> int:
    return int(float(text)) if text.strip() else default


def workload_of(row: dict[str, str], setup: Setup) -> tuple[dict[str, Any], Workload]:
    """The fabric spec and the workload of one row."""
    gpus = int(row["gpus"])
    spec = {"gpus": gpus, "gpus_per_node": int(row["gpus_per_node"]), **setup.spec}
    model = Model(name=row["id"], layers=int(row["layers"]), hidden=int(row["hidden"]), heads=int(row["heads"]),
                  seq_len=int(row["seq_len"]), params_b=float(row["params_b"]), **setup.model)
    fields = {"tp": _int(row["tp"]), "pp": _int(row["pp"]), "cp": _int(row["cp"]), "ep": _int(row["ep"]),
              "vpp": _int(row["vpp"]), "global_batch": int(row["global_batch"]),
              "micro_batch": _int(row["micro_batch"]),
              "precision": "fp8" if "FP8" in row["precision"].upper() else "bf16"}
    fields.update(setup.workload)
    return spec, Workload(model=model, gpu=resolve_gpu(setup.gpu), **fields)


def predict(row: dict[str, str], setup: Setup) -> Step:
    spec, workload = workload_of(row, setup)
    return train_step(build_fabric(load_spec(spec)), workload, AnalysisOptions())


def measured(row: dict[str, str], setup: Setup) -> float:
    value = float(row["value"])
    if setup.metric == "tokens_per_s_per_gpu" and "tokens/s/GPU" in row["notes"]:
        value = float(row["notes"].split(" tokens/s/GPU")[0].replace(",", "").split()[-1])
    return value


def table(rows: list[dict[str, str]], progress: Callable[[str], None]) -> tuple[str, list[float]]:
    """The markdown validation table, and the ratio of every row."""
    lines = ["| id | run | GPUs | metric | measured | predicted | ratio | memory | assumptions |",
             "|---|---|---:|---|---:|---:|---:|---|---|"]
    ratios = []
    for row in rows:
        setup = SETUPS[row["id"]]
        progress(f"{row['id']}: {row['model']} on {row['gpus']} {row['gpu']}")
        step = predict(row, setup)
        got = step.to_dict()[setup.metric] * SCALE.get(setup.metric, 1.0)
        want = measured(row, setup)
        ratio = got / want
        ratios.append(ratio)
        mem = step.memory
        fits = f"{mem['total_GB']:.0f} of {mem['hbm_GB']:.0f} GB" + ("" if mem["fits"] else " (over)")
        par = f"tp {step.workload.tp} pp {step.workload.pp} dp {step.workload.dp(step.gpus)}" + (
            f" vpp {step.workload.vpp}" if step.workload.vpp > 1 else "")
        lines.append(f"| {row['id']} | {row['model']}, {par} | {int(row['gpus']):,} | {setup.metric} | "
                     f"{want:,.4g} | {got:,.4g} | {ratio:.2f} | {fits} | {setup.why} |")
    return "\n".join(lines), ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    if not args.csv.is_file():
        print(f"train_calibration.py: no measurements at {args.csv}", file=sys.stderr)
        return 1
    rows = read_rows(args.csv)
    text, ratios = table(rows, lambda message: print(message, file=sys.stderr))
    inside = sum(0.8 <= r <= 1.2 for r in ratios)
    summary = f"{inside} of {len(ratios)} rows within +-20% of the measurement."
    print(text)
    print()
    print(summary)
    if args.write_docs:
        replace_section(DOC, START, END, f"{text}\n\n{summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
