"""One training step of a workload on a fabric: compute, the communication of every parallel group,
the pipeline, and how close the job comes to linear speed-up (docs/train.md).

The job takes every GPU of the fabric, in Megatron-LM's rank order (tensor parallel fastest, then
context, data and pipeline): rank ``r`` is GPU ``r mod g`` of server ``r // g`` in fabric order,
so tensor-parallel groups stay in a server (or an NVLink domain), pipeline stages fill scalable
units one after another, and data-parallel groups are same-rank GPUs on one rail. Every group's
collectives are priced with the all-reduce model of ``docs/model.md``: the groups of one kind run
at the same time, so all of them are routed together (ECMP hashing, adaptive routing or D-mod-K),
rated under the congestion model with the failures asked for, and timed by NCCL's tuner for the
group's own shape (its ranks, and their servers or NVLink domains). Every collective is priced
through the one door, :func:`topo.analysis.pricing.price`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import AnalysisError, quote
from ..fabric import Fabric
from ..hardware.nvlink import domain_size
from ..hardware.pcie import pcie_mbps
from ..hardware.servers import NodeModel
from ..workload import BF16, GRAD_BYTES, Workload
from .collective import node_model_of
from .groups import GroupShape, group_shape
from .options import AnalysisOptions
from .pricing import Network, Timing, price

#: Fraction of the bf16 dense peak that flash attention reaches over forward and backward
#: (FlashAttention-2: 50-73% forward, 35-63% backward on A100; FlashAttention-3 on H100 alike).
ATTENTION_EFFICIENCY = 0.5
#: Fraction of the HBM bandwidth that memory-bound kernels (norms, activations, Adam) reach.
HBM_EFFICIENCY = 0.8
#: Megatron's gradient buckets: at least 40 M parameters, and 1 M per data-parallel rank.
BUCKET_PARAMS = 40_000_000
#: Bytes Adam moves per parameter of the optimizer's shard: 16-bit weights read and written, the
#: 32-bit gradient read, 32-bit master weights and both moments read and written.
ADAM_BYTES = 2 * 2 + 4 + 3 * 4 * 2


@dataclass(frozen=True)
class Collective:
    """One kind of collective of the step: what it moves and what it costs."""

    kind: str  #: dp, edp, tp, cp, pp, ep, zero3
    group: int  #: ranks of one group
    groups: int  #: groups running at once
    domains: int  #: servers (or NVLink domains) one group spans: 1 is NVLink only
    message_bytes: float
    time_s: float  #: of one call
    algorithm: str
    busbw_GBps: float | None
    calls: float  #: per step, on the critical path or not

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "group": self.group, "groups": self.groups, "domains": self.domains,
                "message_bytes": int(self.message_bytes), "time_s": float(f"{self.time_s:.6g}"),
                "algorithm": self.algorithm,
                "busbw_GBps": None if self.busbw_GBps is None else round(self.busbw_GBps, 3),
                "calls_per_step": round(self.calls, 3)}


@dataclass(frozen=True, eq=False)
class Step:
    """The predicted training step."""

    gpus: int
    workload: Workload
    step_time_s: float
    breakdown: dict[str, float]
    model_flops: float  #: per step, all GPUs
    hardware_flops: float  #: with recomputation
    replica_step_s: float  #: one replica taking the whole batch, without data parallelism
    memory: dict[str, Any]
    collectives: tuple[Collective, ...]
    domain_gpus: int
    notes: tuple[str, ...] = ()

    @property
    def tokens_per_s_per_gpu(self) -> float:
        w = self.workload
        return w.global_batch * w.seq_len / self.step_time_s / self.gpus

    @property
    def model_tflops_per_gpu(self) -> float:
        return self.model_flops / self.step_time_s / self.gpus / 1e12

    @property
    def hardware_tflops_per_gpu(self) -> float:
        return self.hardware_flops / self.step_time_s / self.gpus / 1e12

    @property
    def mfu(self) -> float:
        return self.model_tflops_per_gpu / self.workload.gpu.peak(self.workload.precision)

    @property
    def scaling_efficiency(self) -> float:
        """Step time of linear speed-up from one replica (its time over the data-parallel size),
        over the predicted step time: 1 is linear."""
        dp = self.workload.dp(self.gpus)
        return self.replica_step_s / (dp * self.step_time_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "workload": self.workload.to_dict(self.gpus),
            "step_time_s": float(f"{self.step_time_s:.6g}"),
            "tokens_per_s_per_gpu": round(self.tokens_per_s_per_gpu, 3),
            "model_tflops_per_gpu": round(self.model_tflops_per_gpu, 3),
            "hardware_tflops_per_gpu": round(self.hardware_tflops_per_gpu, 3),
            "mfu": round(self.mfu, 5),
            "peak_tflops": self.workload.gpu.peak(self.workload.precision),
            "scaling_efficiency": round(self.scaling_efficiency, 5),
            "breakdown": {k: float(f"{v:.6g}") for k, v in self.breakdown.items()},
            "memory": self.memory,
            "collectives": [c.to_dict() for c in self.collectives],
            "nvlink_domain_gpus": self.domain_gpus,
            "notes": list(self.notes),
        }


def gpu_node(fabric: Fabric, workload: Workload, server: NodeModel | None = None) -> NodeModel:
    """The fabric's server (``server``, else its spec's profile) as the all-reduce model sees it,
    with the workload's GPU: its compute capability, NVLink, NVSwitch and PCIe come from the GPU
    catalogue, the NICs and CPUs from the server."""
    base = server or node_model_of(fabric)
    g = workload.gpu
    gts = {3: "8.0", 4: "16.0", 5: "32.0", 6: "64.0"}[g.pcie]
    return replace(base, sm=g.sm, nvlink_bw=float(g.nvlink_GBps), nvswitch=g.nvswitch,
                   gpu_pcie_GBps=pcie_mbps(f"{gts} GT/s PCIe", 16) / 8000, assumed=())


def rank_grid(w: Workload, gpus: int) -> np.ndarray:
    """Ranks as (pp, dp, cp, tp): rank = t + tp (c + cp (d + dp s))."""
    return np.arange(gpus).reshape(w.pp, w.dp(gpus), w.cp, w.tp)


def groups_of(w: Workload, gpus: int, kind: str) -> np.ndarray:
    """The groups of one kind, (groups, size), each in rank order.

    ``tp``, ``cp``, ``pp``; ``dp``: the data x context ranks that hold the same dense weights;
    ``ep``: expert-parallel groups, ``ep`` consecutive ranks of a stage (experts are whole on each
    rank: expert tensor parallelism 1, so a stage's tensor x data x context ranks all take part);
    ``edp``: the ranks of a stage that hold the same experts.
    """
    grid = rank_grid(w, gpus)
    pp, dp, cp, tp = grid.shape
    if kind == "tp":
        return grid.reshape(-1, tp)
    if kind == "cp":
        return grid.transpose(0, 1, 3, 2).reshape(-1, cp)
    if kind == "pp":
        return grid.transpose(1, 2, 3, 0).reshape(-1, pp)
    if kind == "dp":
        return grid.reshape(pp, dp * cp, tp).transpose(0, 2, 1).reshape(-1, dp * cp)
    ep = w.ep
    experts = grid.reshape(pp, -1, ep)  # a stage's ranks in order, ep at a time
    if kind == "ep":
        return experts.reshape(-1, ep)
    if kind == "edp":
        return experts.transpose(0, 2, 1).reshape(-1, experts.shape[1])
    raise AnalysisError([f"group kind {kind}: expected tp, cp, pp, dp, ep or edp"])


#: How the errors name each kind of group.
KIND_NAMES = {"tp": "tensor-parallel (--tp)", "cp": "context-parallel (--cp)", "pp": "pipeline (--pp)",
              "dp": "data-parallel", "ep": "expert-parallel (--ep)", "edp": "expert data-parallel"}


class Pricer:
    """The collectives of one workload on one fabric, each priced by :func:`topo.analysis.pricing.price`
    for all the groups of one kind at once."""

    def __init__(self, fabric: Fabric, workload: Workload, options: AnalysisOptions,
                 server: NodeModel | None = None, baseline: AnalysisOptions | None = None) -> None:
        self.fabric, self.w = fabric, workload
        spec = fabric.spec
        self.gpus = spec.gpus
        self.per_node, self.nics = spec.gpus_per_node, spec.nic_ports
        node = gpu_node(fabric, workload, server)
        self.domain = domain_size(self.gpus, self.per_node, workload.gpu.nvlink_domain,
                                  workload.gpu.multi_node_nvlink)
        self.net = _network(fabric, options, node, self.domain, baseline)
        self.notes: list[str] = []
        g = workload.gpu
        if g.multi_node_nvlink and self.domain < g.nvlink_domain:
            self.notes.append(f"the job uses NVLink domains of {self.domain} GPUs ({self.domain // self.per_node} "
                              f"servers) of the {g.name}'s {g.nvlink_domain}: the largest whole number of "
                              f"servers that divides {self.gpus:,} GPUs")
        self._groups: dict[str, np.ndarray] = {}
        self._shapes: dict[str, GroupShape] = {}

    def groups(self, kind: str) -> np.ndarray:
        if kind not in self._groups:
            self._groups[kind] = groups_of(self.w, self.gpus, kind)
        return self._groups[kind]

    def shape(self, kind: str) -> GroupShape:
        """Where the groups of ``kind`` sit (AnalysisError when they split unevenly over domains)."""
        if kind not in self._shapes:
            self._shapes[kind] = group_shape(self.groups(kind), self.per_node, self.nics, self.domain,
                                             KIND_NAMES[kind])
        return self._shapes[kind]

    def reduce(self, kind: str, ops: tuple[str, ...], *sizes: float) -> list[Timing]:
        """Per size (bytes): one all-reduce, all-gather or reduce-scatter (``ops``, one per size) by
        every group of ``kind`` at once, all priced in one call (one routing, one set of hash draws)."""
        timings = price(self.net, ops, sizes, self.groups(kind), name=KIND_NAMES[kind]).rows
        if any(t.time_s is None for t in timings):
            raise AnalysisError([f"{kind} groups: no route between their servers under the failures "
                                 f"asked for"])
        return list(timings)

    def sends(self, kind: str, size: float, ring: bool = False) -> tuple[float, float | None]:
        """Time of one point-to-point send of ``size`` bytes from each member of every group of
        ``kind`` to the next (and from the last to the first with ``ring``), all at once, and its
        rate in GB/s."""
        groups = self.groups(kind)
        if ring and groups.shape[1] > 2:
            a, b = groups.ravel(), np.roll(groups, -1, axis=1).ravel()
        else:
            a, b = groups[:, :-1].ravel(), groups[:, 1:].ravel()
            if groups.shape[1] == 2 and ring:  # a pair passes both ways at once
                a, b = np.concatenate([a, b]), np.concatenate([b, a])
        return self._one(kind, price(self.net, "send-receive", (size,), np.stack([a, b], axis=1)).rows[0])

    def alltoall(self, size: float) -> tuple[float, float | None]:
        """Time of one all-to-all in which every rank of every expert group sends ``size`` bytes in
        all (``size / ep`` to each peer), and a connection's rate in GB/s (None on NVLink only)."""
        return self._one("ep", price(self.net, "all-to-all", (size,), self.groups("ep"), name=KIND_NAMES["ep"]).rows[0])

    @staticmethod
    def _one(kind: str, timing: Timing) -> tuple[float, float | None]:
        if timing.time_s is None:
            raise AnalysisError([f"{kind}: no route between the servers of the job under the failures asked for"])
        return timing.time_s, timing.bandwidth_GBps


def _network(fabric: Fabric, options: AnalysisOptions, node: NodeModel, domain: int,
             baseline: AnalysisOptions | None = None) -> Network:
    """The fabric under ``options``, checked for a training job. With failures, its baseline is the
    same collectives' network with ``baseline``'s failures only (by default none): each collective
    is priced on its hash draws and never quicker than there (none when it loses the same parts)."""
    net = Network(fabric, options, node, domain=domain)
    if net.faults.any:
        plain = baseline if baseline is not None else replace(options, fail=(), fail_random=0.0)
        fewer = _network(fabric, plain, node, domain)
        if not (fewer.faults.live == net.faults.live).all():
            net.baseline = fewer
    _check_network(net)
    return net


def _check_network(net: Network) -> None:
    """NCCL's tables read (a bad ``--nccl-constants`` file is the first error), then every NIC's
    link: a training job stops when one of its NICs loses its link, so such failures are refused."""
    net.constants  # noqa: B018  (read now, as the step's inputs are)
    homes = net.fabric.plan.homes
    live = net.faults.live[net.tables.nic_link.reshape(-1, homes)].any(axis=1)
    if not live.all():
        nic = int(np.flatnonzero(~live)[0])
        server = net.fabric.names[nic // net.nics]
        fail = net.options.fail
        asked = (", ".join(f"--fail {quote(f) if len(f) > 60 else f}" for f in fail[:3])
                 + (f" (and {len(fail) - 3:,} more --fail)" if len(fail) > 3 else "")
                 or f"--fail-random {net.options.fail_random}")
        raise AnalysisError([f"{asked}: takes the link of NIC {nic % net.nics} of {server} (and "
                             f"{int((~live).sum()) - 1:,} more) down, and a training job stops when a NIC "
                             f"loses its link; fail spines, cores or switch-to-switch links"])


def _compute(w: Workload, gpus: int, hbm_GBps: float) -> dict[str, float]:
    """Forward and backward compute time of one micro-batch on the busiest stage (seconds), and
    the model and hardware FLOPs of one step."""
    m, g = w.model, w.gpu
    tokens = w.micro_batch * w.seq_len / w.cp  # per rank of a tensor-parallel group
    layers = w.stage_layers()
    per_layer = m.flops_per_token(w.seq_len)
    matmul = (per_layer["matmul"] / m.layers * layers + per_layer["logits"] / w.pp) * tokens / w.tp
    attention = per_layer["attention"] / m.layers * layers * tokens / w.tp / 2  # causal: flash attention skips half
    gemm_rate = g.peak(w.precision) * g.efficiency[w.precision] * 1e12
    attn_rate = g.peak("bf16") * ATTENTION_EFFICIENCY * 1e12
    ffn = (m.top_k + m.shared_experts) * m.expert_ffn if m.moe else m.ffn
    up = 3 if m.mlp == "swiglu" else 2
    h = m.hidden
    elementwise = 3 * BF16 * (10 * h + up * ffn + 2 * (m.q_dim + m.kv_dim))
    if w.precision != "bf16":  # casts of every matrix multiply's inputs, forward and backward
        elementwise += 3 * (BF16 + 1) * (2 * h + m.q_dim + ffn)
    memory = elementwise * layers * tokens / w.tp / (hbm_GBps * 1e9 * HBM_EFFICIENCY)
    t = matmul / gemm_rate + attention / attn_rate + memory
    fwd, bwd = t / 3, 2 * t / 3
    recompute = {"none": 0.0, "selective": attention / attn_rate / 3, "full": t / 3}[w.recompute]
    other = (t - matmul / gemm_rate) * (4 / 3 if w.recompute == "full" else 1) + (
        recompute if w.recompute == "selective" else 0.0)  # what is not a matrix multiply
    per_token = per_layer["total"]
    model_flops = per_token * w.global_batch * w.seq_len
    extra = {"none": 0.0, "selective": per_layer["attention"] / 3,
             "full": (per_layer["matmul"] + per_layer["attention"]) / 3}[w.recompute]
    return {"fwd": fwd, "bwd": bwd + recompute, "recompute": recompute, "matmul": matmul / gemm_rate, "other": other,
            "model_flops": model_flops, "hardware_flops": model_flops + extra * w.global_batch * w.seq_len}


def _data_parallel(P: Pricer, w: Workload, c: dict[str, float], mbs: int, parts: list[tuple[str, float]],
                   sizes: dict[str, int], overlap: set[str], record=None) -> float:
    """The data-parallel time a step shows: for each kind of group (``dp`` for the dense weights,
    ``edp`` for the experts) and the weights it holds, the gradient reduction and the weight
    gather of the ZeRO stage, less what overlaps compute."""
    layers = w.stage_layers()
    grad = GRAD_BYTES[w.grad_precision]
    exposed = 0.0
    for kind, params in parts:
        if sizes[kind] <= 1 or params <= 0:
            continue
        if w.zero == 3:
            # every layer's weights gathered forward and backward, its gradients scattered, for
            # every micro-batch
            layer = params / layers
            (t_w, algo, bus), (t_g, _, _) = P.reduce(kind, ("all-gather", "reduce-scatter"), BF16 * layer,
                                                     grad * layer)
            per_mb = layers * (2 * t_w + t_g)
            window = c["fwd"] + c["bwd"] if "dp" in overlap else 0.0
            exposed += mbs * max(per_mb - window, per_mb / layers)
            if record:
                record(kind, BF16 * layer, t_w, algo, bus, 3 * layers * mbs)
            continue
        bucket = min(params, max(BUCKET_PARAMS, 1_000_000 * sizes[kind]))
        buckets = params / bucket
        # the gradients' all-reduce (ZeRO-0) or reduce-scatter, and the updated weights' all-gather,
        # priced in one call (one routing, one set of hash draws); ZeRO-0 gathers nothing
        (t_grad, algo, bus), (t_param, _, _) = P.reduce(
            kind, ("all-reduce" if w.zero == 0 else "reduce-scatter", "all-gather"), grad * bucket, BF16 * bucket)
        t_grad *= buckets
        t_param *= buckets
        if w.zero == 0:  # one all-reduce of the gradients a step
            t_param = 0.0
        elif w.zero == 2:  # ZeRO-2 keeps only its shard of the gradients: a reduce-scatter every micro-batch
            t_grad = mbs * t_grad
        if "dp" in overlap:
            window = (mbs if w.zero == 2 else 1) * c["bwd"] * (1 - 1 / layers)
            grad_exposed = max(t_grad - window, t_grad / buckets / (mbs if w.zero == 2 else 1))
            param_exposed = max(t_param - c["fwd"], t_param / buckets) if t_param else 0.0
        else:
            grad_exposed, param_exposed = t_grad, t_param
        exposed += grad_exposed + param_exposed
        if record:
            calls = buckets * ((mbs if w.zero == 2 else 1) + (1 if w.zero >= 1 else 0))
            record(kind, grad * bucket, t_grad / buckets / (mbs if w.zero == 2 else 1), algo, bus, calls)
    return exposed


def _optimizer_s(w: Workload, local: dict[str, float], dense_shard: int, expert_shard: int) -> float:
    """Adam's memory traffic over the GPU's shard of the dense weights and of its experts."""
    if w.zero == 0:
        dense_shard = expert_shard = 1
    params = local["dense"] / dense_shard + local["experts"] / max(1, expert_shard)
    return ADAM_BYTES * params / (w.gpu.hbm_tbps * 1e12 * HBM_EFFICIENCY)


def _model_parallel(P: Pricer, w: Workload, c: dict[str, float], overlap: set[str], record) -> dict[str, float]:
    """The exposed time of one micro-batch's tensor-, context- and expert-parallel collectives."""
    m = w.model
    layers = w.stage_layers()
    mbs = w.microbatches(P.gpus)
    tokens = w.micro_batch * w.seq_len / w.cp
    # tensor parallelism: per layer, two all-reduces' worth forward (all-gathers and reduce-scatters
    # with sequence parallelism), two backward, two more when the forward is recomputed
    tp_exposed = 0.0
    if w.tp > 1:
        act = tokens * m.hidden * BF16
        t_ar, algo, bus = P.reduce("tp", ("all-reduce",), act)[0]
        calls = layers * (4 + (2 if w.recompute == "full" else 0))
        t_tp = calls * t_ar
        tp_exposed = max(t_tp - c["matmul"], t_tp / w.tp) if "tp" in overlap else t_tp
        record("tp", act, t_ar, algo, bus, calls * mbs)
    # context parallelism: ring attention passes K and V around the ring (cp - 1 steps) forward,
    # K, V and their gradients backward, beside the attention compute
    cp_exposed = 0.0
    if w.cp > 1:
        kv = 2 * tokens * m.kv_dim * BF16 / w.tp
        t_send, rate = P.sends("cp", kv, ring=True)
        t_cp = layers * (w.cp - 1) * 3 * t_send
        cp_exposed = max(0.0, t_cp - c["other"]) if "cp" in overlap else t_cp
        record("cp", kv, t_send, "p2p", rate, layers * (w.cp - 1) * 3 * mbs)
    # expert parallelism: dispatch and combine, forward and backward (and again when recomputed)
    ep_time = 0.0
    if m.moe and w.ep > 1:
        moe_share = m.moe_layers / m.layers
        a2a = tokens / w.tp * m.top_k * m.hidden * BF16
        t_a2a, rate = P.alltoall(a2a)
        calls = layers * moe_share * (4 + (2 if w.recompute == "full" else 0))
        ep_time = calls * t_a2a
        if "ep" in overlap:  # another micro-batch's compute runs beside it (DualPipe, Megatron's a2a overlap)
            ep_time = max(0.0, ep_time - (c["fwd"] + c["bwd"]))
        record("ep", a2a, t_a2a, "alltoall", rate, calls * mbs)
    return {"tp": tp_exposed, "cp": cp_exposed, "ep": ep_time}


def _pipeline_sends(P: Pricer, w: Workload, overlap: set[str], record) -> float:
    """The pipeline sends a step shows: the activation of a micro-batch (split over the
    tensor-parallel ranks); the interleaved schedule also sends from the last stage to the first,
    between chunks."""
    if w.pp <= 1:
        return 0.0
    mbs = w.microbatches(P.gpus)
    act = w.micro_batch * w.seq_len / w.cp * w.model.hidden * BF16 / w.tp
    t_send, rate = P.sends("pp", act, ring=w.vpp > 1)
    sends = 2 * (w.pp - 1) if "pp" in overlap else 2 * (mbs * w.vpp + w.pp - 1)
    record("pp", act, t_send, "p2p", rate, 2 * mbs * w.vpp)
    return sends * t_send


def _replica_step(P: Pricer, w: Workload, c: dict[str, float], per_mb: float, bubble: float, send_time: float,
                  dp_exposed: float, sizes: dict[str, int], overlap: set[str]) -> float:
    """One replica taking every micro-batch of the step: the same pipeline, its gradients reduced
    over its own context-parallel ranks only."""
    gpus = P.gpus
    dp, mbs = w.dp(gpus), w.microbatches(gpus)
    local = w.local_params(gpus)
    replica_mbs = w.global_batch // w.micro_batch
    replica_sends = 0.0
    if w.pp > 1:
        replica_sends = send_time if "pp" in overlap else send_time / (2 * (mbs * w.vpp + w.pp - 1)) * \
            2 * (replica_mbs * w.vpp + w.pp - 1)
    if dp == 1:
        replica_dp = dp_exposed
    elif w.cp > 1:
        replica_dp = _data_parallel(P, w, c, replica_mbs, [("cp", local["dense"])], {**sizes, "cp": w.cp}, overlap)
    else:
        replica_dp = 0.0
    replica_optimizer = _optimizer_s(w, local, w.cp, max(1, sizes["edp"] // dp))
    return replica_mbs * per_mb + bubble + replica_sends + replica_dp + replica_optimizer


def train_step(fabric: Fabric, workload: Workload, options: AnalysisOptions | None = None,
               server: NodeModel | None = None, baseline: AnalysisOptions | None = None) -> Step:
    """Predict one training step of ``workload`` on all GPUs of ``fabric`` (whose server is
    ``server``, else its spec's profile). With failures in ``options``, every collective is
    priced on the hash draws of the fabric with ``baseline``'s failures only (by default none) and
    is never quicker there, so a lost part never makes the step shorter."""
    options = options or AnalysisOptions()
    spec = fabric.spec
    gpus = spec.gpus
    w = workload
    w.check(gpus, spec.gpus_per_node)
    P = Pricer(fabric, w, options, server, baseline)
    dp, mbs = w.dp(gpus), w.microbatches(gpus)
    overlap = set(w.overlap)
    c = _compute(w, gpus, w.gpu.hbm_tbps * 1000)
    collectives: list[Collective] = []

    sizes = {"tp": w.tp, "cp": w.cp, "pp": w.pp, "dp": dp * w.cp, "ep": w.ep, "edp": w.expert_replicas(gpus)}

    def record(kind: str, message: float, time_s: float, algo: str, busbw: float | None, calls: float) -> None:
        collectives.append(Collective(kind, sizes[kind], gpus // sizes[kind], P.shape(kind).domains, message,
                                      time_s, algo, busbw, calls))

    exposed = _model_parallel(P, w, c, overlap, record)
    per_mb = c["fwd"] + c["bwd"] + exposed["tp"] + exposed["cp"] + exposed["ep"]
    bubble = (w.pp - 1) / w.vpp * per_mb
    send_time = _pipeline_sends(P, w, overlap, record)
    local = w.local_params(gpus)
    parts = [("dp", local["dense"])] + ([("edp", local["experts"])] if local["experts"] > 0 else [])
    dp_exposed = _data_parallel(P, w, c, mbs, parts, sizes, overlap, record)
    optimizer = _optimizer_s(w, local, dp * w.cp, sizes["edp"])
    pipeline = mbs * per_mb
    breakdown = {
        "compute_s": mbs * (c["fwd"] + c["bwd"] - c["recompute"]),
        "recompute_s": mbs * c["recompute"],
        "pipeline_bubble_s": bubble,
        "pipeline_send_s": send_time,
        "tensor_parallel_s": mbs * exposed["tp"],
        "context_parallel_s": mbs * exposed["cp"],
        "expert_parallel_s": mbs * exposed["ep"],
        "data_parallel_s": dp_exposed,
        "optimizer_s": optimizer,
    }
    step = pipeline + bubble + send_time + dp_exposed + optimizer
    replica = _replica_step(P, w, c, per_mb, bubble, send_time, dp_exposed, sizes, overlap)
    return Step(gpus, w, step, breakdown, c["model_flops"], c["hardware_flops"], replica,
                w.memory(gpus), tuple(collectives), P.domain, tuple(P.notes))
