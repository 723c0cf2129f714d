"""One training step of a workload on a fabric: compute, the communication of every parallel group,
the pipeline, and how close the job comes to linear speed-up (docs/train.md).

The job takes every GPU of the fabric, in Megatron-LM's rank order (tensor parallel fastest, then
context, data and pipeline): rank ``r`` is GPU ``r mod g`` of server ``r // g`` in fabric order,
so tensor-parallel groups stay in a server (or an NVLink domain), pipeline stages fill scalable
units one after another, and data-parallel groups are same-rank GPUs on one rail. Every group's
collectives are priced with the all-reduce model of ``docs/model.md``: the groups of one kind run
at the same time, so all of them are routed together (ECMP hashing, adaptive routing or D-mod-K),
rated under the congestion model with the failures asked for, and timed by NCCL's tuner for the
group's own shape (its ranks, and their servers or NVLink domains).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..analysis.analyze import AnalysisOptions, allreduce, base_of, node_model_of, sample_pattern, usable_pcie_gbps
from ..analysis.collective import Connections, nvlink_usable
from ..analysis.faults import Faults, apply_faults
from ..analysis.routing import port_tables
from ..analysis.tuner import DEFAULT_CONSTANTS, RING, SIMPLE, load_constants
from ..analysis.updown import updown
from ..errors import AnalysisError
from ..fabric import Fabric, is_ethernet
from ..servers import NodeModel, pcie_mbps
from ..workload import BF16, GRAD_BYTES, Workload

#: Fraction of the bf16 dense peak that flash attention reaches over forward and backward
#: (FlashAttention-2: 50-73% forward, 35-63% backward on A100; FlashAttention-3 on H100 alike).
ATTENTION_EFFICIENCY = 0.5
#: Fraction of the HBM bandwidth that memory-bound kernels (norms, activations, Adam) reach.
HBM_EFFICIENCY = 0.8
#: Megatron's gradient buckets: at least 40 M parameters, and 1 M per data-parallel rank.
BUCKET_PARAMS = 40_000_000
#: NCCL's connections per peer for point-to-point sends (NCCL_NCHANNELS_PER_NET_PEER).
P2P_CHANNELS = 2
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


def domain_size(gpus: int, per_node: int, nvlink_domain: int, multi_node: bool = True) -> int:
    """GPUs of one NVLink domain of the job. A board's domain (``multi_node`` false: HGX) is the
    server. A domain of several servers (NVL72) is the GPU's when it divides the job, else the
    largest whole number of servers under it that does (a 256-GPU job on NVL72 racks uses 64 GPUs
    of each), and never less than one server.

    >>> domain_size(1024, 8, 8), domain_size(256, 4, 72), domain_size(288, 4, 72), domain_size(64, 4, 8, False)
    (8, 64, 72, 4)
    """
    if not multi_node or nvlink_domain <= per_node:
        return per_node
    best = per_node
    for d in range(per_node, nvlink_domain + 1, per_node):
        if gpus % d == 0:
            best = d
    return best


def rank_grid(w: Workload, gpus: int) -> np.ndarray:
    """Ranks as (pp, dp, cp, tp): rank = t + tp (c + cp (d + dp s))."""
    return np.arange(gpus).reshape(w.pp, w.dp(gpus), w.cp, w.tp)


def groups_of(w: Workload, gpus: int, kind: str) -> np.ndarray:
    """The groups of one kind, (groups, size), each in rank order.

    ``tp``, ``cp``, ``pp``; ``dp``: the data x context ranks that hold the same dense weights;
    ``ep``: expert-parallel groups, consecutive ranks of the data x context plane (Megatron
    carves them out of it); ``edp``: the ranks that hold the same experts.
    """
    grid = rank_grid(w, gpus)
    pp, dp, cp, tp = grid.shape
    if kind == "tp":
        return grid.reshape(-1, tp)
    if kind == "cp":
        return grid.transpose(0, 1, 3, 2).reshape(-1, cp)
    if kind == "pp":
        return grid.transpose(1, 2, 3, 0).reshape(-1, pp)
    plane = grid.reshape(pp, dp * cp, tp)  # data x context, context fastest
    if kind == "dp":
        return plane.transpose(0, 2, 1).reshape(-1, dp * cp)
    ep = w.ep
    experts = plane.reshape(pp, dp * cp // ep, ep, tp)
    if kind == "ep":
        return experts.transpose(0, 1, 3, 2).reshape(-1, ep)
    if kind == "edp":
        return experts.transpose(0, 2, 3, 1).reshape(-1, dp * cp // ep)
    raise AnalysisError([f"group kind {kind}: expected tp, cp, pp, dp, ep or edp"])


@dataclass(frozen=True, eq=False)
class _Shape:
    """Where the groups of one kind sit: ``nic_map`` (groups, domains, nics) and the members per domain."""

    nic_map: np.ndarray
    members: int  #: GPUs of a group in one domain
    domains: int
    note: str | None = None


def _shape(groups: np.ndarray, per_node: int, nics: int, domain: int) -> _Shape:
    """The groups' NICs per domain. A group's GPUs in one domain use their own NICs (GPU ``r`` of a
    server: NIC ``r nics / per_node``); groups whose members do not split evenly over domains are
    priced by the most common shape (with a note)."""
    dom = groups // domain
    # domains of each group, in order of their first member: members are in rank order, so a
    # domain's members are consecutive when domains are blocks of consecutive ranks
    change = np.concatenate([np.ones((groups.shape[0], 1), dtype=bool), dom[:, 1:] != dom[:, :-1]], axis=1)
    counts = change.sum(axis=1)
    note = None
    if not (counts == counts[0]).all() or groups.shape[1] % counts[0]:
        values, freq = np.unique(counts, return_counts=True)
        keep = counts == values[np.argmax(freq)]
        note = (f"{int((~keep).sum())} of {groups.shape[0]} groups of {groups.shape[1]} split unevenly over "
                f"NVLink domains of {domain} GPUs; priced as the others")
        groups, dom, counts = groups[keep], dom[keep], counts[keep]
    m = int(counts[0])
    p = groups.shape[1] // m
    if (dom.reshape(groups.shape[0], m, p) != dom.reshape(groups.shape[0], m, p)[:, :, :1]).any():
        raise AnalysisError([f"groups of {groups.shape[1]} ranks do not split into {m} domains of {p}"])
    node = groups // per_node
    nic = (node * nics + (groups % per_node) * nics // per_node).reshape(groups.shape[0], m, p)
    # a domain's share of a group uses each distinct NIC of its members once (on a server with
    # fewer NICs than GPUs, GPUs that share a NIC share its connections)
    nic = np.sort(nic, axis=2)
    q = int(np.unique(nic[0, 0]).size)
    if q < p:
        nic = nic[:, :, ::p // q] if p % q == 0 else nic[:, :, :q]
    return _Shape(np.ascontiguousarray(nic[:, :, :q]), p, m, note)


class Pricer:
    """Prices the collectives of one workload on one fabric (routes and rates cached per kind)."""

    def __init__(self, fabric: Fabric, workload: Workload, options: AnalysisOptions,
                 server: NodeModel | None = None) -> None:
        self.fabric, self.w = fabric, workload
        self.options = options.for_fabric(fabric)
        spec = fabric.spec
        self.gpus = spec.gpus
        self.per_node, self.nics = spec.gpus_per_node, spec.nic_ports
        self.node = gpu_node(fabric, workload, server)
        self.domain = domain_size(self.gpus, self.per_node, workload.gpu.nvlink_domain,
                                  workload.gpu.multi_node_nvlink)
        self.faults = self._faults()
        self.ud = updown(fabric, self.faults)
        self.tables = port_tables(fabric)
        self.routing = self.options.routing if self.options.routing != "auto" else (
            "ecmp" if is_ethernet(fabric) else "dmodk")
        self.constants = load_constants(self.options.nccl_constants) if self.options.nccl_constants \
            else DEFAULT_CONSTANTS
        self.notes: list[str] = []
        self._shapes: dict[str, _Shape] = {}

    def _faults(self) -> Faults:
        o = self.options
        return apply_faults(self.fabric, o.fail, o.fail_random, o.seed)

    def shape(self, kind: str) -> _Shape:
        if kind not in self._shapes:
            s = _shape(groups_of(self.w, self.gpus, kind), self.per_node, self.nics, self.domain)
            if s.note:
                self.notes.append(f"{kind}: {s.note}")
            self._shapes[kind] = s
        return self._shapes[kind]

    def vnode(self, s: _Shape) -> NodeModel:
        """One domain's share of a group, as a server of the all-reduce model."""
        return replace(self.node, gpus=s.members, nics=s.nic_map.shape[2])

    def allreduce(self, kind: str, *sizes: float) -> list[tuple[float, str, float | None]]:
        """Per size (bytes): the time (s) of one all-reduce by every group of ``kind`` at once,
        NCCL's algorithm, and the bus bandwidth (GB/s)."""
        s = self.shape(kind)
        if s.members * s.domains == 1:
            return [(0.0, "none", None) for _ in sizes]
        opts = replace(self.options, sizes=tuple(max(1, int(x)) for x in sizes), fail=(), fail_random=0.0)
        res = allreduce(self.fabric, opts, self.faults, self.ud, self.vnode(s), rows_only=True,
                        nic_map=s.nic_map, tables=self.tables)
        out = []
        for row in res.rows:
            if row["time_s"] is None:
                raise AnalysisError([f"{kind} groups: no route between their servers under the failures "
                                     f"asked for"])
            out.append((float(row["time_s"]), row["algorithm"], row["busbw_GBps"]))
        return out

    def flow_gbps(self, kind: str, src: np.ndarray, dst: np.ndarray) -> float:
        """Median over hash samples of the slowest of these connections' rates (Gb/s), all at once."""
        if src.size == 0:
            return math.inf
        conns = Connections(src.astype(np.int64), dst.astype(np.int64), np.zeros(src.size, dtype=np.int64),
                            "ring", 0, 0, 1)
        pcie = usable_pcie_gbps(self.node)
        base = base_of(self.fabric, self.options, self.faults, self.ud, self.tables, self.routing, conns, pcie)
        pattern = sample_pattern(base, self.options, self.routing, True)
        rate = float(np.median(pattern.slowest_gbps))
        if rate <= 0:
            raise AnalysisError([f"{kind}: no route between the servers of the job under the failures asked for"])
        return rate

    def net_latency_s(self) -> float:
        """One network message's latency: NCCL's Simple-protocol network latency and the switch hops."""
        hops = 2 * (self.fabric.plan.tiers - 1)  # leaf to the top tier and down
        return (float(self.constants.table("hw_latency_net")[RING, SIMPLE])
                + hops * self.options.switch_latency_ns * 1e-3) * 1e-6

    def nvlink_GBps(self) -> float:
        return nvlink_usable(self.node)

    def sends(self, kind: str, size: float) -> tuple[float, float | None]:
        """Time of one point-to-point send of ``size`` bytes between consecutive members of every
        group of ``kind`` (both directions at once), and its rate in GB/s."""
        groups = groups_of(self.w, self.gpus, kind)
        a, b = groups[:, :-1].ravel(), groups[:, 1:].ravel()
        if kind == "cp" and groups.shape[1] > 2:  # ring attention: a ring
            a, b = groups.ravel(), np.roll(groups, -1, axis=1).ravel()
        net = (a // self.domain) != (b // self.domain)
        if not net.any():
            rate = self.nvlink_GBps()
            return 2e-6 + size / (rate * 1e9), rate
        nic = lambda r: (r // self.per_node) * self.nics + (r % self.per_node) * self.nics // self.per_node  # noqa: E731
        src, dst = nic(a[net]), nic(b[net])
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        src, dst = np.repeat(src, P2P_CHANNELS), np.repeat(dst, P2P_CHANNELS)
        rate = P2P_CHANNELS * self.flow_gbps(kind, src, dst) / 8
        return self.net_latency_s() + size / (rate * 1e9), rate

    def alltoall(self, size: float) -> tuple[float, float | None]:
        """Time of one all-to-all in which every rank of every expert group sends ``size`` bytes in
        all (``size / ep`` to each peer): NVLink inside a domain, and across domains NCCL's PXN
        (the data goes over NVLink to the GPU on the destination's rail and leaves on its NIC)."""
        s = self.shape("ep")
        ep, p, m = self.w.ep, s.members, s.domains
        nvl = self.nvlink_GBps()
        inside = size * (p - 1) / ep / (nvl * 1e9) if p > 1 else 0.0
        if m == 1:
            return 2e-6 + inside, None
        nm = s.nic_map  # (G, m, q)
        q = nm.shape[2]
        i, j = np.nonzero(~np.eye(m, dtype=bool))
        src = nm[:, i, :].reshape(-1)
        dst = nm[:, j, :].reshape(-1)
        rate = self.flow_gbps("ep", src, dst) / 8  # GB/s of one connection
        per_connection = p * (p / q) * size / ep  # to one remote domain's members on one rail
        network = per_connection / (rate * 1e9)
        latency = self.net_latency_s() * math.ceil(math.log2(m)) if m > 1 else 0.0
        return latency + max(inside, network), rate


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
    per_token = per_layer["total"]
    model_flops = per_token * w.global_batch * w.seq_len
    extra = {"none": 0.0, "selective": per_layer["attention"] / 3,
             "full": (per_layer["matmul"] + per_layer["attention"]) / 3}[w.recompute]
    return {"fwd": fwd, "bwd": bwd + recompute, "recompute": recompute, "matmul": matmul / gemm_rate,
            "model_flops": model_flops, "hardware_flops": model_flops + extra * w.global_batch * w.seq_len}


def train_step(fabric: Fabric, workload: Workload, options: AnalysisOptions | None = None,
               server: NodeModel | None = None) -> Step:
    """Predict one training step of ``workload`` on all GPUs of ``fabric`` (whose server is
    ``server``, else its spec's profile)."""
    options = options or AnalysisOptions()
    spec = fabric.spec
    gpus = spec.gpus
    w = workload
    w.check(gpus, spec.gpus_per_node)
    P = Pricer(fabric, w, options, server)
    m = w.model
    dp, mbs = w.dp(gpus), w.microbatches(gpus)
    overlap = set(w.overlap)
    c = _compute(w, gpus, w.gpu.hbm_tbps * 1000)
    layers = w.stage_layers()
    moe_share = m.moe_layers / m.layers if m.moe else 0.0
    tokens = w.micro_batch * w.seq_len / w.cp
    collectives: list[Collective] = []

    sizes = {"tp": w.tp, "cp": w.cp, "pp": w.pp, "dp": dp * w.cp, "ep": w.ep, "edp": dp * w.cp // w.ep}

    def record(kind: str, message: float, time_s: float, algo: str, busbw: float | None, calls: float) -> None:
        collectives.append(Collective(kind, sizes[kind], gpus // sizes[kind], P.shape(kind).domains, message,
                                      time_s, algo, busbw, calls))

    # tensor parallelism: per layer, two all-reduces' worth forward (all-gathers and reduce-scatters
    # with sequence parallelism), two backward, two more when the forward is recomputed
    tp_exposed = 0.0
    if w.tp > 1:
        act = tokens * m.hidden * BF16
        t_ar, algo, bus = P.allreduce("tp", act)[0]
        calls = layers * (4 + (2 if w.recompute == "full" else 0))
        t_tp = calls * t_ar
        tp_exposed = max(t_tp - c["matmul"], t_tp / w.tp) if "tp" in overlap else t_tp
        record("tp", act, t_ar, algo, bus, calls * mbs)
    # context parallelism: ring attention passes K and V around the ring (cp - 1 steps) forward,
    # K, V and their gradients backward, beside the attention compute
    cp_exposed = 0.0
    if w.cp > 1:
        kv = 2 * tokens * m.kv_dim * BF16 / w.tp
        t_send, rate = P.sends("cp", kv)
        t_cp = layers * (w.cp - 1) * 3 * t_send
        attention_time = c["fwd"] + c["bwd"] - c["matmul"]
        cp_exposed = max(0.0, t_cp - attention_time) if "cp" in overlap else t_cp
        record("cp", kv, t_send, "p2p", rate, layers * (w.cp - 1) * 3 * mbs)
    # expert parallelism: dispatch and combine, forward and backward (and again when recomputed)
    ep_time = 0.0
    if m.moe and w.ep > 1:
        a2a = tokens / w.tp * m.top_k * m.hidden * BF16
        t_a2a, rate = P.alltoall(a2a)
        calls = layers * moe_share * (4 + (2 if w.recompute == "full" else 0))
        ep_time = calls * t_a2a
        if "ep" in overlap:  # another micro-batch's compute runs beside it (DualPipe, Megatron's a2a overlap)
            ep_time = max(0.0, ep_time - (c["fwd"] + c["bwd"]))
        record("ep", a2a, t_a2a, "alltoall", rate, calls * mbs)
    per_mb = c["fwd"] + c["bwd"] + tp_exposed + cp_exposed + ep_time
    bubble = (w.pp - 1) / w.vpp * per_mb
    # pipeline sends: the activation of a micro-batch (split over the tensor-parallel ranks)
    send_time = 0.0
    if w.pp > 1:
        act = tokens * m.hidden * BF16 / w.tp
        t_send, rate = P.sends("pp", act)
        sends = 2 * (w.pp - 1) if "pp" in overlap else 2 * (mbs * w.vpp + w.pp - 1)
        send_time = sends * t_send
        record("pp", act, t_send, "p2p", rate, 2 * mbs * w.vpp)
    # data parallelism: gradients (fp32) and, with a distributed optimizer, the weights (16-bit)
    local = w.local_params(gpus)
    dp_exposed = 0.0
    shard = dp * w.cp
    if w.zero == 3:
        layer_bytes = local["total"] / layers * BF16
        t_ag, algo, bus = P.allreduce("dp", layer_bytes)[0]
        t_ag /= 2  # an all-gather (or a reduce-scatter) moves half of an all-reduce
        per_mb_z3 = 3 * layers * t_ag  # weights gathered forward and backward, gradients scattered
        window = c["fwd"] + c["bwd"] if "dp" in overlap else 0.0
        dp_exposed = mbs * max(per_mb_z3 - window, per_mb_z3 / layers)
        record("dp", layer_bytes, t_ag, algo, bus, 3 * layers * mbs)
    else:
        parts = [("dp", local["dense"], shard)]
        if local["experts"] > 0:
            parts.append(("edp", local["experts"], shard // w.ep))
        for kind, params, size in parts:
            if size <= 1:
                continue
            bucket = min(params, max(BUCKET_PARAMS, 1_000_000 * size))
            buckets = params / bucket
            grad_bytes = GRAD_BYTES[w.grad_precision] * bucket
            (t_grad, algo, bus), (t_param, _, _) = P.allreduce(kind, grad_bytes, BF16 * bucket)
            if w.zero >= 1:  # reduce-scatter the gradients, all-gather the updated weights
                t_grad, t_param = t_grad / 2, t_param / 2 * buckets
            else:
                t_param = 0.0
            t_grad *= buckets
            if "dp" in overlap:
                grad_exposed = max(t_grad - c["bwd"] * (1 - 1 / layers), t_grad / buckets)
                param_exposed = max(t_param - c["fwd"], t_param / buckets) if t_param else 0.0
            else:
                grad_exposed, param_exposed = t_grad, t_param
            dp_exposed += grad_exposed + param_exposed
            record(kind, grad_bytes, t_grad / buckets, algo, bus, buckets * (2 if w.zero >= 1 else 1))
    optimizer_params = local["total"] / (shard if w.zero >= 1 else 1)
    optimizer = ADAM_BYTES * optimizer_params / (w.gpu.hbm_tbps * 1e12 * HBM_EFFICIENCY)
    pipeline = mbs * per_mb
    breakdown = {
        "compute_s": mbs * (c["fwd"] + c["bwd"] - c["recompute"]),
        "recompute_s": mbs * c["recompute"],
        "pipeline_bubble_s": bubble,
        "pipeline_send_s": send_time,
        "tensor_parallel_s": mbs * tp_exposed,
        "context_parallel_s": mbs * cp_exposed,
        "expert_parallel_s": mbs * ep_time,
        "data_parallel_s": dp_exposed,
        "optimizer_s": optimizer,
    }
    step = pipeline + bubble + send_time + dp_exposed + optimizer
    # one replica taking every micro-batch of the step, without data-parallel traffic
    replica_mbs = w.global_batch // w.micro_batch
    replica_sends = 0.0
    if w.pp > 1:
        replica_sends = send_time if "pp" in overlap else send_time / (2 * (mbs * w.vpp + w.pp - 1)) * \
            2 * (replica_mbs * w.vpp + w.pp - 1)
    replica_optimizer = ADAM_BYTES * local["total"] / (w.cp if w.zero >= 1 else 1) / \
        (w.gpu.hbm_tbps * 1e12 * HBM_EFFICIENCY)
    replica = replica_mbs * per_mb + bubble + replica_sends + replica_optimizer
    return Step(gpus, w, step, breakdown, c["model_flops"], c["hardware_flops"], replica,
                w.memory(gpus), tuple(collectives), P.domain, tuple(P.notes))
