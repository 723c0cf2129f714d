"""``topo train``: the FLOP and parameter counts, the rank layout on the fabric, the structure of the
step model (the bubble formula, efficiency never above linear, monotone in bandwidth and in
oversubscription), the memory check, every catalogue model on the command line, the scaling curve
and what-ifs, and bad input."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from topo import build_fabric, load_spec
from topo.analysis.analyze import AnalysisOptions
from topo.analysis.training import domain_size, groups_of, train_step
from topo.cli import main
from topo.hardware.catalog import gpu_catalog
from topo.workload import Model, Workload, model_catalog, resolve_gpu, workload_from


def train(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["train", *args], prog_name="topo")
    return result.exit_code, result.stdout, result.stderr


def step_of(spec: dict, **workload) -> "Step":  # noqa: F821
    return train_step(build_fabric(load_spec(spec)), workload_from(workload))


# --- counts --------------------------------------------------------------------------------------

def test_gpt3_flops_are_narayanans_formula():
    m = model_catalog()["gpt3-175b"]
    s, h, l, V = m.seq_len, m.hidden, m.layers, m.vocab
    per_token = 72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
    assert m.flops_per_token(s)["total"] == pytest.approx(per_token, rel=1e-12)
    # full recomputation adds a forward pass of the layers, not of the output layer: SC21's 96 (...)
    w = workload_from({"model": "gpt3-175b", "recompute": "full", "tp": 8, "pp": 8, "vpp": 1, "global_batch": 64})
    step = train_step(build_fabric(load_spec({"gpus": 64})), w)
    hardware = 96 * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) * 64 * s
    assert step.hardware_flops == pytest.approx(hardware, rel=1e-12)


@pytest.mark.parametrize("name", sorted(model_catalog()))
def test_catalogue_parameter_counts_match_the_published_sizes(name):
    m = model_catalog()[name]
    assert m.params()["total"] / 1e9 == pytest.approx(m.params_b, rel=0.02)


def test_moe_counts_active_parameters_and_flops_of_top_k_experts():
    m = model_catalog()["deepseek-v3"]
    assert 36e9 < m.active_params() < 40e9  # published: 37 B of 671 B
    dense = replace(m, experts=0, top_k=0, expert_ffn=0, shared_experts=0, dense_layers=0)
    assert m.flops_per_token(4096)["matmul"] != dense.flops_per_token(4096)["matmul"]
    # 6N plus attention: the matrix FLOPs are 6 x the active weights the layers multiply
    embed = m.vocab * m.hidden * 2
    norms = m.layers * 2 * m.hidden
    assert m.flops_per_token(4096)["matmul"] == pytest.approx(6 * (m.active_params() - embed - norms), rel=1e-9)


def test_every_catalogue_gpu_has_a_source_and_dense_peaks():
    for gpu in gpu_catalog().values():
        assert gpu.source and gpu.tflops["bf16"] > 0 and set(gpu.efficiency) == set(gpu.tflops)
        assert all(0 < e < 1 for e in gpu.efficiency.values())
        if "fp8" in gpu.tflops:  # dense FP8 is twice dense BF16 on Hopper and Blackwell
            assert gpu.tflops["fp8"] == pytest.approx(2 * gpu.tflops["bf16"], rel=0.01)
    names = set(gpu_catalog())
    assert {"a100-80g", "h100", "h200", "h800", "b200", "gb200", "gb300"} <= names


# --- the layout of the ranks -----------------------------------------------------------------------

def test_groups_follow_megatrons_order_on_the_servers():
    w = workload_from({"model": "gpt3-175b", "tp": 8, "pp": 4, "vpp": 1, "global_batch": 512})
    gpus = 1024
    tp = groups_of(w, gpus, "tp")
    assert (tp // 8 == tp[:, :1] // 8).all()  # a tensor-parallel group is one server
    dp = groups_of(w, gpus, "dp")
    assert dp.shape == (32, 32) and (dp % 8 == dp[:, :1] % 8).all()  # same-rank GPUs: one rail
    pp = groups_of(w, gpus, "pp")
    assert (np.diff(pp, axis=1) == gpus // 4).all()  # stage s is the s-th quarter of the servers
    for kind in ("tp", "dp", "pp"):  # every rank in exactly one group of each kind
        assert sorted(groups_of(w, gpus, kind).ravel().tolist()) == list(range(gpus))


def test_expert_groups_come_from_the_data_parallel_ranks():
    w = workload_from({"model": "deepseek-v3", "gpu": "h100", "pp": 4, "ep": 8, "global_batch": 512})
    ep, edp = groups_of(w, 256, "ep"), groups_of(w, 256, "edp")
    assert ep.shape == (32, 8) and edp.shape == (32, 8)
    assert (np.diff(ep, axis=1) == 1).all()  # tp 1: consecutive ranks
    assert sorted(ep.ravel().tolist()) == sorted(edp.ravel().tolist()) == list(range(256))


def test_nvl72_domains_keep_groups_on_nvlink():
    assert domain_size(256, 4, 72) == 64 and domain_size(288, 4, 72) == 72 and domain_size(64, 4, 8, False) == 4
    spec = {"gpus": 256, "gpus_per_node": 4, "nics_per_node": 4}
    step = step_of(spec, model="llama3-70b", gpu="gb200", tp=4, pp=4, cp=1, vpp=1, global_batch=256)
    kinds = {c.kind: c for c in step.collectives}
    # a data-parallel group (16 ranks 4 apart) stays in one 64-GPU domain; the pipeline spans four
    assert kinds["tp"].domains == 1 and kinds["dp"].domains == 1 and kinds["pp"].domains == 4
    assert step.domain_gpus == 64
    # the same job on 4-GPU servers of an 8-GPU NVLink domain puts the pipeline on the network
    on_h100 = step_of(spec, model="llama3-70b", gpu="h100", tp=4, pp=4, cp=1, vpp=1, global_batch=256)
    assert {c.kind: c for c in on_h100.collectives}["pp"].domains == 4
    assert on_h100.domain_gpus == 4


# --- the structure of the step ---------------------------------------------------------------------

def test_the_bubble_is_pp_minus_1_over_vpp_micro_batches():
    for vpp in (1, 2, 4):
        step = step_of({"gpus": 256}, model="llama3-8b", tp=1, pp=8, cp=1, vpp=vpp, global_batch=256,
                       overlap="dp,tp,pp,cp")
        b = step.breakdown
        mbs = step.workload.microbatches(256)
        per_mb = (b["compute_s"] + b["recompute_s"] + b["tensor_parallel_s"] + b["context_parallel_s"]
                  + b["expert_parallel_s"]) / mbs
        assert b["pipeline_bubble_s"] == pytest.approx(7 / vpp * per_mb, rel=1e-9)
        parts = sum(b.values())
        assert parts == pytest.approx(step.step_time_s, rel=1e-12)


def test_scaling_efficiency_never_passes_linear():
    code, out, err = train("--gpus", "64", "--model", "llama3-8b", "--cp", "1", "--global-batch", "512",
                           "--scale", "8,16,32,64,128,256,512", "--format", "json", "-q")
    assert code == 0, err
    data = json.loads(out)
    points = [p for p in data["scaling"] if "error" not in p]
    assert len(points) == 7
    assert all(0 < p["scaling_efficiency"] <= 1 and p["of_linear"] <= 1 + 1e-9 for p in points)
    # at a fixed batch, more data parallelism costs more: efficiency falls with the GPU count
    effs = [p["scaling_efficiency"] for p in points]
    assert effs == sorted(effs, reverse=True) and effs[-1] < effs[0]
    code, out, _ = train("--gpus", "64", "--model", "llama3-8b", "--cp", "1", "--global-batch", "512",
                         "--scale", "16,64,256", "--weak", "--format", "json", "-q")
    weak = json.loads(out)["scaling"]
    assert [p["global_batch"] for p in weak] == [128, 512, 2048]
    assert all(p["scaling_efficiency"] <= 1 for p in weak)


@pytest.mark.parametrize("zero", [0, 3])
def test_step_time_never_grows_with_nic_bandwidth(zero):
    times = []
    for gbps in (100, 200, 400, 800):
        step = step_of({"gpus": 256, "nic_gbps": gbps, "switch": "eth-51t-64x800"}, model="llama3-8b", tp=1, pp=1, cp=1, zero=zero,
                       global_batch=256, overlap="none")
        times.append(step.step_time_s)
    assert times == sorted(times, reverse=True) and times[0] > times[-1]


def test_oversubscription_and_failures_never_speed_a_step_up():
    w = {"model": "deepseek-v3", "gpu": "h100", "pp": 1, "ep": 64, "global_batch": 512, "recompute": "full",
         "overlap": "dp"}
    base = step_of({"gpus": 512, "placement": "rack"}, **w).step_time_s
    assert step_of({"gpus": 512, "placement": "rack", "oversubscription": 3}, **w).step_time_s > base
    fabric = build_fabric(load_spec({"gpus": 512, "placement": "rack"}))
    failed = train_step(fabric, workload_from(w), AnalysisOptions(fail=(fabric.names[fabric.first(2)],)))
    assert failed.step_time_s >= base


def test_an_overlapped_collective_is_never_slower():
    for kind in ("dp", "tp", "pp"):
        w = {"model": "llama3-70b", "tp": 4, "pp": 4, "cp": 1, "vpp": 1, "global_batch": 256}
        hidden = step_of({"gpus": 256}, **w, overlap="dp,tp,pp").step_time_s
        shown = step_of({"gpus": 256}, **w, overlap=",".join(k for k in ("dp", "tp", "pp") if k != kind))
        assert shown.step_time_s >= hidden


def test_zero3_exposes_more_communication_as_compute_per_gpu_shrinks():
    w = {"model": "llama3-8b", "tp": 1, "pp": 1, "cp": 1, "zero": 3, "global_batch": 128, "micro_batch": 1}
    share = []
    for gpus in (16, 64, 128):
        step = step_of({"gpus": gpus}, **w)
        share.append(step.breakdown["data_parallel_s"] / step.step_time_s)
    assert share == sorted(share) and share[-1] > share[0]


# --- memory ----------------------------------------------------------------------------------------

def test_memory_falls_with_each_zero_stage_and_with_recomputation():
    totals = []
    for zero in (0, 1, 2, 3):
        w = workload_from({"model": "llama3-8b", "tp": 1, "pp": 1, "cp": 1, "zero": zero, "global_batch": 64})
        totals.append(w.memory(64)["weights_and_optimizer_GB"])
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4
    acts = [workload_from({"model": "llama3-8b", "recompute": r, "global_batch": 64}).memory(64)["activations_GB"]
            for r in ("selective", "full")]
    assert acts[1] < acts[0] / 5


def test_a_job_that_does_not_fit_says_so():
    code, out, err = train("--gpus", "64", "--model", "llama3-405b", "--tp", "8", "--pp", "8", "--cp", "1",
                           "--global-batch", "64", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["memory"]["fits"] is False and data["memory"]["total_GB"] > 80
    assert "does not fit the h100's 80 GB" in err


# --- the command line ------------------------------------------------------------------------------

CATALOGUE_RUNS = {  # the recipe of each model on a fabric it fits
    "gpt3-175b": ["--gpus", "256"],
    "llama3-8b": ["--gpus", "64"],
    "llama3-70b": ["--gpus", "256", "--global-batch", "512"],
    "llama3-405b": ["--gpus", "1024"],
    "gpt-1t": ["--gpus", "1024"],
    "deepseek-v3": ["--gpus", "1024"],
}


@pytest.mark.parametrize("name", sorted(model_catalog()))
def test_every_catalogue_model_trains(name):
    code, out, err = train(*CATALOGUE_RUNS[name], "--model", name, "--format", "json", "-q")
    assert code == 0, err
    data = json.loads(out)
    for key in ("step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu", "breakdown"):
        assert key in data
    assert data["memory"]["fits"], data["memory"]
    assert 0.1 < data["mfu"] < 0.65 and 0 < data["scaling_efficiency"] <= 1
    assert sum(data["breakdown"].values()) == pytest.approx(data["step_time_s"], rel=1e-4)


def test_the_table_names_the_breakdown_and_the_figures():
    code, out, err = train("--gpus", "256", "--model", "gpt3-175b")
    assert code == 0, err
    for text in ("step time", "pipeline bubble", "tensor parallel", "tokens/s per GPU", "MFU", "scaling efficiency",
                 "memory per GPU", "collectives"):
        assert text in out
    assert "topo: pricing a step of gpt3-175b" in err


def test_same_input_same_output(tmp_path):
    args = ["--gpus", "256", "--model", "llama3-70b", "--global-batch", "512", "--what-if", "--scale", "128,256"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert train(*args, "-o", str(a), "-q")[0] == 0
    assert train(*args, "-o", str(b), "-q")[0] == 0
    assert a.read_bytes() == b.read_bytes()
    code, _, err = train(*args, "-o", str(a), "-q")
    assert code == 1 and "exists; give --force" in err


def test_what_ifs_name_each_variant():
    code, out, err = train("--gpus", "512", "--model", "deepseek-v3", "--gpu", "h100", "--pp", "1", "--ep", "64",
                           "--global-batch", "512", "--what-if", "--format", "json", "-q")
    assert code == 0, err
    rows = {r["what_if"].split()[0]: r for r in json.loads(out)["what_if"]}
    assert set(rows) == {"placement", "oversubscription", "routing", "fail"}
    # rack placement puts the all-to-all's same-rank traffic on the spines
    assert rows["placement"]["change_pct"] > 0


def test_a_workload_file_and_flags(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text("model: llama3-8b\ntp: 2\ncp: 1\nglobal_batch: 256\nprecision: fp8\n")
    code, out, err = train("--gpus", "64", "--workload", str(f), "--tp", "1", "--format", "json", "-q")
    assert code == 0, err
    w = json.loads(out)["workload"]
    assert (w["tp"], w["cp"], w["global_batch"], w["precision"]) == (1, 1, 256, "fp8")
    f.write_text("model: llama3-8b\ntensor_parallel: 2\n")
    code, _, err = train("--gpus", "64", "--workload", str(f))
    assert code == 1 and ": tensor_parallel: not a workload field" in err


def test_a_workload_file_is_read_as_a_spec_is(tmp_path):
    """Bounded before use: a regular file (a FIFO would block, /dev/zero never end), at most 1 MiB,
    UTF-8, YAML read strictly; an unknown key is quoted, cut to 60 characters."""
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path, message in [(fifo, "is not a regular file (a FIFO)"), ("/dev/zero", "is not a regular file")]:
        code, _, err = train("--gpus", "64", "--workload", str(path), "-q")
        assert code == 1 and f"Error: --workload {path} {message}" in err and "Traceback" not in err
    f = tmp_path / "job.yaml"
    f.write_bytes("model: caf\xe9\n".encode("latin-1"))
    code, _, err = train("--gpus", "64", "--workload", str(f), "-q")
    assert code == 1 and "is not UTF-8 text" in err and "Traceback" not in err
    f.write_text("model: llama3-8b\ntp: 2\ntp: 4\n")
    code, _, err = train("--gpus", "64", "--workload", str(f), "-q")
    assert code == 1 and f"--workload {f}: malformed YAML" in err
    f.write_text("k" * 1000 + ": 1\n")
    code, _, err = train("--gpus", "64", "--workload", str(f), "-q")
    assert code == 1 and "not a workload field" in err and max(map(len, err.splitlines())) < 600


def test_an_explicit_architecture():
    code, out, err = train("--gpus", "64", "--layers", "32", "--hidden", "4096", "--heads", "32", "--seq-len",
                           "4096", "--vocab", "32000", "--params-b", "6.7", "--global-batch", "256", "--format",
                           "json", "-q")
    assert code == 0, err
    assert json.loads(out)["model"]["params"] == pytest.approx(6.74e9, rel=0.01)


@pytest.mark.parametrize("args, message", [
    (["--model", "llama3-8b", "--tp", "3"], "--tp 3: the model's 32 attention heads are not a multiple of it"),
    (["--model", "llama3-8b", "--tp", "16"], "--tp 16: tensor parallelism must stay in the NVLink domain of 8"),
    (["--model", "llama3-8b", "--pp", "3"], "llama3-8b's recipe (tp 1, cp 2, global batch 2,048) with --pp 3 does "
                                            "not fit 64 GPUs: tp 1 x cp 2 x --pp 3 = 6 GPUs per model replica"),
    (["--model", "llama3-8b", "--tp", "2", "--cp", "2", "--pp", "3"], "--tp 2 x --cp 2 x --pp 3 = 12 GPUs per model "
                                                                       "replica: 64 GPUs"),
    (["--model", "llama3-8b", "--global-batch", "100"], "--global-batch 100: not a multiple of data-parallel 32"),
    (["--model", "llama3-8b", "--gpu", "a100-80g", "--precision", "fp8"], "the a100-80g has no fp8 tensor cores"),
    (["--model", "llama3-8b", "--zero", "3", "--pp", "2"], "--zero 3 with --pp 2"),
    (["--model", "llama3-8b", "--ep", "2"], "--ep 2: llama3-8b is a dense model"),
    (["--model", "llama-8b"], "--model llama-8b: unknown model (did you mean"),
    (["--model", "llama3-8b", "--gpu", "h1000"], "--gpu h1000: unknown GPU (did you mean"),
    (["--layers", "32"], "missing --hidden, --heads, --seq-len, --vocab"),
    (["--model", "llama3-8b", "--overlap", "dp,xx"], "--overlap xx: expected some of"),
    (["--model", "llama3-8b", "--scale", "64,abc"], "--scale 64,abc:"),
    (["--model", "llama3-8b", "--params-b", "70"], "--params-b 70: the architecture has 8.0 B parameters"),
])
def test_bad_input_is_one_line(args, message):
    code, out, err = train("--gpus", "64", *args)
    assert code == 1, (out, err)
    assert message in err and "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("Error:")][0].count("Error:") == 1


def test_list_shows_both_catalogues():
    code, out, _ = train("--list")
    assert code == 0 and "deepseek-v3" in out and "gb300" in out


def test_a_design_folder(tmp_path):
    folder = tmp_path / "d"
    result = CliRunner().invoke(main, ["build", "--gpus", "64", "-o", str(folder), "--no-configs", "-q"])
    assert result.exit_code == 0, result.stderr
    code, out, err = train(str(folder), "--model", "llama3-8b", "--format", "json", "-q")
    assert code == 0, err
    assert json.loads(out)["fabric"]["gpus"] == 64


def test_a_workload_object_can_be_built_directly():
    m = Model(name="tiny", layers=4, hidden=256, heads=4, vocab=1000, seq_len=128)
    w = Workload(model=m, gpu=resolve_gpu("h100"), global_batch=64)
    step = train_step(build_fabric(load_spec({"gpus": 16})), w)
    assert math.isfinite(step.step_time_s) and step.step_time_s > 0


# --- review findings: layouts, NICs, rings, and input ----------------------------------------------

def test_groups_that_split_unevenly_over_servers_are_refused_in_one_line():
    code, _, err = train("--gpus", "40", "--model", "llama3-8b", "--pp", "4", "--cp", "1", "--global-batch", "40")
    assert code == 1 and "Traceback" not in err
    assert "data-parallel groups of 10 ranks split unevenly over servers of 8 GPUs (one has 8, 2 in its 2)" in err


def test_servers_with_two_nics_a_gpu_use_both():
    four = step_of({"gpus": 64, "gpus_per_node": 4, "nics_per_node": 4}, model="llama3-8b", cp=1, global_batch=64)
    eight = step_of({"gpus": 64, "gpus_per_node": 4, "nics_per_node": 8}, model="llama3-8b", cp=1, global_batch=64)
    dp4, dp8 = ({c.kind: c for c in s.collectives}["dp"] for s in (four, eight))
    assert dp8.busbw_GBps > 1.2 * dp4.busbw_GBps


def test_a_context_parallel_ring_sends_one_way():
    rates = []
    for cp in (2, 4):
        step = step_of({"gpus": 32}, model="llama3-70b", tp=8, pp=1, vpp=1, cp=cp, global_batch=64, overlap="none")
        rates.append({c.kind: c for c in step.collectives}["cp"].busbw_GBps)
    assert rates[0] == rates[1] == pytest.approx(47.0)  # one 400G NIC's usable rate, both cases


def test_cross_rail_sends_take_the_destinations_rail():
    # a context-parallel ring of 16 over two rail-only servers: GPU 7 -> GPU 8 changes rail, which
    # NCCL's PXN crosses on NVLink, so the ring has a route on a fabric without spines
    code, out, err = train("--gpus", "16", "--rail-only", "--model", "llama3-8b", "--cp", "16", "--global-batch", "16",
                           "--format", "json", "-q")
    assert code == 0, err
    assert {c["kind"]: c for c in json.loads(out)["collectives"]}["cp"]["busbw_GBps"] == pytest.approx(47.0)


def test_one_replica_is_linear():
    step = step_of({"gpus": 32}, model="llama3-70b", tp=8, cp=4, pp=1, vpp=1, global_batch=64, overlap="none")
    assert step.workload.dp(32) == 1 and step.scaling_efficiency == pytest.approx(1.0)


def test_no_more_micro_batches_in_flight_than_a_step_has():
    w = workload_from({"model": "llama3-8b", "tp": 1, "cp": 1, "pp": 4, "vpp": 2, "global_batch": 64})
    assert w.microbatches(64) == 4 and w.memory(64)["in_flight_microbatches"] == 4


def test_a_failed_server_is_refused_naming_the_flag():
    code, _, err = train("--gpus", "64", "--model", "llama3-8b", "--cp", "1", "--pp", "2", "--fail", "cluster-node0000")
    assert code == 1 and "--fail cluster-node0000: takes the link of NIC 0 of cluster-node0000" in err


def test_every_problem_at_once_and_file_fields_name_the_file(tmp_path):
    code, _, err = train("--gpus", "64", "--model", "llama3-8b", "--tp", "0", "--pp", "0", "--qps", "0")
    assert code == 1
    assert {"--tp 0: must be at least 1", "--pp 0: must be at least 1"} <= {
        line.removeprefix("Error: ") for line in err.splitlines()}
    assert "--qps 0" in err
    f = tmp_path / "wl.yaml"
    f.write_text('model: llama3-8b\ntp: "8"\nzero: -1\n')
    code, _, err = train("--gpus", "64", "--workload", str(f))
    assert code == 1
    assert f"--workload {f}: tp: expected a whole number, got '8'" in err
    assert f"--workload {f}: zero -1: must be at least 0" in err


@pytest.mark.parametrize("args, message", [
    (["--layers", "2", "--hidden", "4096", "--heads", "48", "--seq-len", "2048", "--vocab", "32000"],
     "--hidden 4096: not a multiple of --heads 48"),
    (["--model", "llama3-8b", "--params-b", "nan"], "--params-b nan: expected a positive number of billions"),
    (["--model", "llama3-8b", "--overlap", ""], "--overlap: give some of dp, tp, pp, cp, ep"),
    (["--model", "llama3-8b", "--scale", ""], "--scale : "),
    (["--model", "llama3-70b", "--tp", "8", "--kv-heads", "4", "--heads", "64"],
     "--tp 8: the model's 4 key-value heads are not a multiple of it"),
])
def test_more_bad_input(args, message):
    code, _, err = train("--gpus", "64", *args)
    assert code == 1 and message in err and "Traceback" not in err


def test_the_memory_warning_shows_with_quiet():
    code, _, err = train("--gpus", "64", "--model", "llama3-405b", "--tp", "8", "--pp", "8", "--cp", "1",
                         "--global-batch", "64", "-q")
    assert code == 0 and "does not fit the h100's 80 GB" in err


def test_an_edited_design_folder_is_refused(tmp_path):
    folder = tmp_path / "d"
    assert CliRunner().invoke(main, ["build", "--gpus", "64", "-o", str(folder), "--no-configs", "-q"]).exit_code == 0
    spec = folder / "spec.yaml"
    spec.write_text(re.sub(r"^oversubscription: .*$", "oversubscription: '3'", spec.read_text(), flags=re.M))
    code, _, err = train(str(folder), "--model", "llama3-8b")
    assert code == 1 and "rebuild it" in err


def test_the_report_takes_a_result_and_refuses_anything_else(tmp_path):
    result = tmp_path / "t.json"
    assert train("--gpus", "64", "--model", "llama3-8b", "--scale", "32,64", "-o", str(result), "-q")[0] == 0
    spec = tmp_path / "s.yaml"
    spec.write_text("gpus: 64\n")
    other = tmp_path / "o.yaml"
    other.write_text("gpus: 64\noversubscription: 3\n")
    for design, says in ((spec, "on this design's fabric"), (other, "not the one reviewed here")):
        out = tmp_path / f"r-{design.stem}"
        r = CliRunner().invoke(main, ["report", str(design), "--train", str(result), "-o", str(out), "-q"])
        assert r.exit_code == 0, r.stderr
        md = (out / "report.md").read_text()
        assert "## Training" in md and says in md
        assert (out / "report" / "train-scaling.svg").is_file()
    bad = tmp_path / "bad.json"
    data = json.loads(result.read_text())
    del data["breakdown"]["optimizer_s"]
    bad.write_text(json.dumps(data))
    r = CliRunner().invoke(main, ["report", str(spec), "--train", str(bad), "-o", str(tmp_path / "r3"), "-q"])
    assert r.exit_code == 1 and "no breakdown.optimizer_s" in r.stderr and not (tmp_path / "r3").exists()


@pytest.mark.parametrize("spec", [{"gpus": 512, "placement": "rack"}, {"gpus": 512, "oversubscription": 3},
                                  {"gpus": 512, "placement": "rack", "oversubscription": 3}])
def test_no_lost_part_shortens_a_step(spec):
    """Every collective of a step with a part lost is priced on the hash draws of the fabric
    without it and is never quicker there; a second loss on top of a first is bounded by the first
    (``topo train --what-if``'s failed spine against the user's own failures)."""
    w = workload_from({"model": "deepseek-v3", "gpu": "h100", "pp": 1, "ep": 64, "global_batch": 512,
                       "recompute": "full", "overlap": "dp"})
    fabric = build_fabric(load_spec(spec))
    options = AnalysisOptions(qps=2)
    base = train_step(fabric, w, options).step_time_s
    spines = [fabric.names[i] for i in range(fabric.first(2), fabric.first(2) + 3)]
    links = [f"{fabric.names[fabric.first(1) + i]}:{fabric.links.lo_port[fabric.links.kind == 1].min()}"
             for i in (0, 5)]
    for part in spines + links:
        assert train_step(fabric, w, replace(options, fail=(part,))).step_time_s >= base, part
    first = replace(options, fail=(spines[0],))
    once = train_step(fabric, w, first).step_time_s
    twice = train_step(fabric, w, replace(first, fail=(spines[0], spines[1])), baseline=first).step_time_s
    assert twice >= once >= base


# --- a catalogue recipe that does not fit the GPU count (issue 39) --------------------------------

#: The flags of topo train: an error may name one only when the user typed it.
FLAGS = re.compile(r"--[a-z][a-z-]*")


def fits(data: dict) -> None:
    """The parallelism of a result multiplies out, the batch fills the pipelines, the interleaved
    schedule takes its micro-batches, and each adjustment is the value used."""
    w, gpus = data["workload"], data["gpus"]
    assert w["tp"] * w["pp"] * w["cp"] * w["dp"] == gpus
    assert w["global_batch"] % (w["dp"] * w["micro_batch"]) == 0
    assert w["microbatches"] == w["global_batch"] // (w["dp"] * w["micro_batch"])
    assert w["vpp"] == 1 or (w["pp"] > 1 and w["microbatches"] % w["pp"] == 0
                             and w["pp"] * w["vpp"] <= data["model"]["layers"])
    for a in data.get("adjusted", []):
        assert set(a) == {"field", "recipe", "used", "why", "note"} and a["recipe"] != a["used"]
        assert w[a["field"]] == a["used"]


def refused_by_recipe(err: str, model: str, typed: set[str]) -> None:
    """Every error line names the model's recipe, and no flag the user did not type before its
    ``give --...`` advice."""
    lines = [line for line in err.splitlines() if line.startswith("Error:")]
    assert lines and "Traceback" not in err
    for line in lines:
        assert line.startswith(f"Error: {model}'s recipe ("), line
        assert set(FLAGS.findall(line.split("; give ")[0])) <= typed, line


@pytest.mark.parametrize("model, adjusted", [
    ("gpt3-175b", [("vpp", 12, 1)]),
    ("llama3-405b", [("vpp", 8, 1)]),
    ("llama3-8b", [("global_batch", 2048, 8192)]),
])
def test_a_recipe_that_does_not_fit_16k_gpus_is_adjusted_and_said(model, adjusted):
    code, out, err = train("--gpus", "16k", "--model", model, "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    fits(data)
    assert [(a["field"], a["recipe"], a["used"]) for a in data["adjusted"]] == adjusted
    notes = [line for line in err.splitlines() if f"{model}'s recipe:" in line]
    assert notes == [f"topo: {a['note']}" for a in data["adjusted"]]
    assert "Error" not in err


@pytest.mark.slow
@pytest.mark.parametrize("gpus", ["512", "1k", "4k", "16k", "24k", "32k"])
@pytest.mark.parametrize("model", sorted(model_catalog()))
def test_every_recipe_runs_or_is_refused_naming_the_recipe(model, gpus):
    code, out, err = train("--gpus", gpus, "--model", model, "--format", "json", "-q")
    if code == 0:
        fits(json.loads(out))
    else:
        assert code == 1
        refused_by_recipe(err, model, {"--gpus", "--model", "--format"})


def test_an_adjusted_recipe_keeps_what_the_user_gave():
    # the batch typed stays; the recipe's vpp that the schedule does not take goes to 1
    code, out, err = train("--gpus", "16k", "--model", "llama3-405b", "--global-batch", "1536", "--format", "json",
                           "-q")
    assert code == 0, err
    data = json.loads(out)
    fits(data)
    assert data["workload"]["global_batch"] == 1536 and [a["field"] for a in data["adjusted"]] == ["vpp"]
    assert "--global-batch" not in data["adjusted"][0]["note"].split("(give")[0]
    # a recipe that fits is not touched: no adjusted key at all
    code, out, _ = train("--gpus", "1k", "--model", "llama3-405b", "--format", "json", "-q")
    assert code == 0 and "adjusted" not in json.loads(out)


def test_a_typed_flag_that_does_not_fit_still_fails_naming_it(tmp_path):
    every = ["--tp", "8", "--pp", "8", "--cp", "2", "--vpp", "8", "--global-batch", "1536"]
    code, _, err = train("--gpus", "16k", "--model", "llama3-405b", *every, "-q")
    assert code == 1 and err.strip() == ("Error: --vpp 8: the interleaved schedule needs the 12 micro-batches per "
                                         "pipeline to be a multiple of --pp 8")
    # typed with the recipe's pp and batch: the flag and the recipe, no flag not typed before the advice
    code, _, err = train("--gpus", "16k", "--model", "llama3-405b", "--vpp", "8", "-q")
    assert code == 1 and "with --vpp 8 does not fit 16,384 GPUs: --vpp 8: the interleaved schedule" in err
    refused_by_recipe(err, "llama3-405b", {"--vpp"})
    # a field of --workload FILE is the user's too
    f = tmp_path / "w.yaml"
    f.write_text("model: llama3-405b\ntp: 8\npp: 8\ncp: 2\nvpp: 8\nglobal_batch: 1536\n")
    code, _, err = train("--gpus", "16k", "--workload", str(f), "-q")
    assert code == 1 and "Error: --vpp 8: the interleaved schedule needs the 12 micro-batches" in err
    code, _, err = train("--gpus", "64", "--model", "llama3-8b", "--global-batch", "100", "-q")
    assert code == 1 and err.startswith("Error: --global-batch 100: not a multiple of data-parallel 32")


def test_the_recipe_fits_more_interleaving_where_the_layers_allow():
    # pp 32 x the recipe's vpp 8 makes more chunks than 126 layers: vpp 2 divides a stage's 4 layers
    code, out, err = train("--gpus", "4k", "--model", "llama3-405b", "--pp", "32", "--cp", "1", "--global-batch",
                           "2048", "--format", "json", "-q")
    assert code == 0, err
    data = json.loads(out)
    fits(data)
    assert [(a["field"], a["recipe"], a["used"]) for a in data["adjusted"]] == [("vpp", 8, 2)]
    code, out, err = train("--gpus", "64", "--model", "llama3-70b", "--pp", "1", "--format", "json", "-q")
    assert code == 0, err
    assert [(a["field"], a["used"]) for a in json.loads(out)["adjusted"]] == [("vpp", 1)]
    # more stages than layers: no vpp fits, and the typed --pp is what fails
    code, _, err = train("--gpus", "800", "--model", "gpt3-175b", "--pp", "200", "-q")
    assert code == 1 and err.strip() == "Error: --pp 200 x vpp 1 = 200 chunks: more than the model's 96 layers"


def test_the_default_batch_of_a_custom_model_is_adjusted_too():
    code, out, err = train("--gpus", "4k", "--layers", "24", "--hidden", "2048", "--heads", "16", "--seq-len",
                           "2048", "--vocab", "50000", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    fits(data)
    assert [(a["field"], a["recipe"], a["used"]) for a in data["adjusted"]] == [("global_batch", 2048, 4096)]
    assert "the default (4 Mi tokens): global batch 2,048 -> 4,096 sequences" in err


def test_a_curve_adjusts_or_refuses_the_recipe_per_point():
    code, out, err = train("--gpus", "16k", "--model", "llama3-405b", "--scale", "1024,2048,4096,8192,16384",
                           "--format", "json", "-q")
    assert code == 0, err
    points = json.loads(out)["scaling"]
    assert all("error" not in p for p in points)
    assert [[a["field"] for a in p.get("adjusted", [])] for p in points] == [[], [], [], [], ["vpp"]]
    code, out, err = train("--gpus", "16k", "--model", "llama3-405b", "--scale", "8192,16384", "-q")
    assert code == 0 and "16,384 GPUs: llama3-405b's recipe: vpp 8 -> 1 (no interleaving)" in out
    # a point the recipe cannot fit is a row that says why, naming the recipe
    code, out, err = train("--gpus", "1k", "--model", "deepseek-v3", "--scale", "512,1k", "--format", "json", "-q")
    assert code == 0, err
    first, second = json.loads(out)["scaling"]
    assert first["error"].startswith("deepseek-v3's recipe (tp 1, pp 16, ep 64, global batch 15,360) does not fit "
                                     "512 GPUs: ep 64:") and "error" not in second


def test_a_recipe_whose_groups_split_unevenly_is_refused_naming_it():
    code, _, err = train("--gpus", "96", "--model", "gpt3-175b", "-q")
    assert code == 1 and "data-parallel groups of 3 ranks split unevenly over servers of 8 GPUs" in err
    refused_by_recipe(err, "gpt3-175b", {"--gpus", "--model"})
    assert "topo: gpt3-175b's recipe:" not in err  # nothing said of adjustments when the workload is refused
    code, _, err = train("--gpus", "40", "--model", "llama3-8b", "--pp", "4", "--cp", "1", "--global-batch", "40",
                         "-q")
    assert code == 1 and err.startswith("Error: data-parallel groups of 10 ranks split unevenly")


def test_the_review_says_what_was_adjusted(tmp_path):
    design, result = tmp_path / "d", tmp_path / "t.json"
    assert CliRunner().invoke(main, ["build", "--gpus", "64", "-o", str(design), "--no-configs", "-q"]).exit_code == 0
    code, _, err = train(str(design), "--model", "llama3-70b", "--pp", "1", "-o", str(result), "-q")
    assert code == 0, err
    r = CliRunner().invoke(main, ["report", str(design), "--train", str(result), "-o", str(tmp_path / "r"), "-q"])
    assert r.exit_code == 0, r.stderr
    md = (tmp_path / "r" / "report.md").read_text()
    assert "Adjusted to fit: llama3-70b's recipe: vpp 5 -> 1 (no interleaving): interleaved stages need" in md
