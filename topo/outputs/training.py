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
from ..errors import AnalysisError, quote
from ..fabric import Fabric, is_ethernet
from ..hardware.nvlink import domain_size
from ..hardware.pcie import pcie_mbps
from ..hardware.servers import NodeModel
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


def gpu_nics(ranks: np.ndarray, per_node: int, nics: int) -> np.ndarray:
    """The global NICs of each rank's GPU, shape ``ranks.shape + (k,)``: GPU ``r`` of a server
    has NICs ``r k`` to ``r k + k - 1`` when the server has ``k`` NICs per GPU, else it shares NIC
    ``r nics / per_node`` with its neighbours.

    >>> gpu_nics(np.array([0, 9]), 8, 8).tolist(), gpu_nics(np.array([1, 5]), 4, 8).tolist()
    ([[0], [9]], [[2, 3], [10, 11]])
    """
    node, local = ranks // per_node, ranks % per_node
    if nics >= per_node and nics % per_node == 0:
        k = nics // per_node
        return (node * nics + local * k)[..., None] + np.arange(k)
    return (node * nics + local * nics // per_node)[..., None]


@dataclass(frozen=True, eq=False)
class _Shape:
    """Where the groups of one kind sit: ``nic_map`` (groups, domains, nics) and the members per domain."""

    nic_map: np.ndarray
    members: int  #: GPUs of a group in one domain
    domains: int


#: How the errors name each kind of group.
KIND_NAMES = {"tp": "tensor-parallel (--tp)", "cp": "context-parallel (--cp)", "pp": "pipeline (--pp)",
              "dp": "data-parallel", "ep": "expert-parallel (--ep)", "edp": "expert data-parallel"}


def _shape(kind: str, groups: np.ndarray, per_node: int, nics: int, domain: int, what: str) -> _Shape:
    """The groups' NICs per domain. A group's GPUs in one domain use their own NICs (GPU ``r`` of a
    server: NIC ``r nics / per_node``). Every group must have the same number of GPUs in each
    domain it touches (as NCCL's rings need, and any sensible layout gives): AnalysisError
    otherwise, naming the sizes."""
    count, size = groups.shape
    dom = groups // domain
    # members are in rank order and domains are blocks of consecutive ranks: a domain's members
    # are consecutive in a group
    change = np.concatenate([np.ones((count, 1), dtype=bool), dom[:, 1:] != dom[:, :-1]], axis=1)
    spans = change.sum(axis=1)
    m = int(spans[0])
    even = (spans == m).all() and size % m == 0
    if even:
        p = size // m
        blocks = dom.reshape(count, m, p)
        even = bool((blocks == blocks[:, :, :1]).all())
    if not even:
        first = groups[int(np.argmax(spans != m))] if (spans != m).any() else groups[0]
        per = np.unique(first // domain, return_counts=True)[1]
        raise AnalysisError([f"{KIND_NAMES[kind]} groups of {size} ranks split unevenly over {what} of "
                             f"{domain} GPUs (one has {', '.join(map(str, per.tolist()))} in its {per.size}); "
                             f"choose tp, cp, ep and pp so that each group's share of a {what[:-1]} is the same"])
    own = gpu_nics(groups, per_node, nics)  # (count, size, k)
    nic = np.sort(own.reshape(count, m, p * own.shape[-1]), axis=2)
    # a domain's share of a group uses each distinct NIC of its members once (on a server with
    # fewer NICs than GPUs, GPUs that share a NIC share its connections)
    q = int(np.unique(nic[0, 0]).size)
    if q < nic.shape[2]:
        nic = nic[:, :, ::nic.shape[2] // q]
    return _Shape(np.ascontiguousarray(nic[:, :, :q]), p, m)


class Pricer:
    """Prices the collectives of one workload on one fabric (routes and rates cached per kind)."""

    def __init__(self, fabric: Fabric, workload: Workload, options: AnalysisOptions,
                 server: NodeModel | None = None, baseline: AnalysisOptions | None = None) -> None:
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
        # with failures, the same collectives on the fabric without them (``baseline``'s failures
        # only; by default none): each is priced on its hash draws and never quicker than there
        self.baseline: Pricer | None = None
        if self.faults.any:
            plain = baseline if baseline is not None else replace(options, fail=(), fail_random=0.0)
            self.baseline = Pricer(fabric, workload, plain, server)
            if (self.baseline.faults.live == self.faults.live).all():
                self.baseline = None
        self.constants = load_constants(self.options.nccl_constants) if self.options.nccl_constants \
            else DEFAULT_CONSTANTS
        self.notes: list[str] = []
        g = workload.gpu
        if g.multi_node_nvlink and self.domain < g.nvlink_domain:
            self.notes.append(f"the job uses NVLink domains of {self.domain} GPUs ({self.domain // self.per_node} "
                              f"servers) of the {g.name}'s {g.nvlink_domain}: the largest whole number of "
                              f"servers that divides {self.gpus:,} GPUs")
        self._shapes: dict[str, _Shape] = {}
        self._check_nics()

    def _check_nics(self) -> None:
        """A training job stops when one of its NICs loses its link: refuse such failures."""
        homes = self.fabric.plan.homes
        live = self.faults.live[self.tables.nic_link.reshape(-1, homes)].any(axis=1)
        if not live.all():
            nic = int(np.flatnonzero(~live)[0])
            server = self.fabric.names[nic // self.nics]
            fail = self.options.fail
            asked = (", ".join(f"--fail {quote(f) if len(f) > 60 else f}" for f in fail[:3])
                     + (f" (and {len(fail) - 3:,} more --fail)" if len(fail) > 3 else "")
                     or f"--fail-random {self.options.fail_random}")
            raise AnalysisError([f"{asked}: takes the link of NIC {nic % self.nics} of {server} (and "
                                 f"{int((~live).sum()) - 1:,} more) down, and a training job stops when a NIC "
                                 f"loses its link; fail spines, cores or switch-to-switch links"])

    def _faults(self) -> Faults:
        o = self.options
        return apply_faults(self.fabric, o.fail, o.fail_random, o.seed)

    def shape(self, kind: str) -> _Shape:
        if kind not in self._shapes:
            what = "NVLink domains" if self.domain > self.per_node else "servers"
            self._shapes[kind] = _shape(kind, groups_of(self.w, self.gpus, kind), self.per_node, self.nics,
                                        self.domain, what)
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
        res = self._allreduce(kind, sizes)
        out = []
        for row in res.rows:
            if row["time_s"] is None:
                raise AnalysisError([f"{kind} groups: no route between their servers under the failures "
                                     f"asked for"])
            out.append((float(row["time_s"]), row["algorithm"], row["busbw_GBps"]))
        return out

    def _allreduce(self, kind: str, sizes: tuple[float, ...]) -> Any:
        """The AllReduce of every group of ``kind`` at once (with failures: on the baseline's hash
        draws, and capped by it draw by draw)."""
        s = self.shape(kind)
        opts = replace(self.options, sizes=tuple(max(1, int(x)) for x in sizes), fail=(), fail_random=0.0)
        base = self.baseline._allreduce(kind, sizes) if self.baseline is not None else None
        return allreduce(self.fabric, opts, self.faults, self.ud, self.vnode(s), rows_only=True,
                         nic_map=s.nic_map, tables=self.tables, baseline=base)

    def _slowest(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Per hash sample, the slowest of these connections' rates (Gb/s); with failures on the
        baseline's draws and never above its rate on the same draw."""
        conns = Connections(src.astype(np.int64), dst.astype(np.int64), np.zeros(src.size, dtype=np.int64),
                            "ring", 0, 0, 1)
        pcie = usable_pcie_gbps(self.node)
        intact = self.baseline._slowest(src, dst) if self.baseline is not None else None
        base = base_of(self.fabric, self.options, self.faults, self.ud, self.tables, self.routing, conns, pcie)
        pattern = sample_pattern(base, self.options, self.routing, True,
                                 None if intact is None else int(intact.size))
        slowest = pattern.slowest_gbps
        if intact is not None:
            common = min(slowest.size, intact.size)
            slowest = np.minimum(slowest[:common], intact[:common])
        return slowest

    def flow_gbps(self, kind: str, src: np.ndarray, dst: np.ndarray) -> float:
        """Median over hash samples of the slowest of these connections' rates (Gb/s), all at once."""
        if src.size == 0:
            return math.inf
        rate = float(np.median(self._slowest(src, dst)))
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

    def sends(self, kind: str, size: float, ring: bool = False) -> tuple[float, float | None]:
        """Time of one point-to-point send of ``size`` bytes from each member of every group of
        ``kind`` to the next (and from the last to the first with ``ring``), all at once, and its
        rate in GB/s. Between servers the send leaves on the destination GPU's rail (NCCL's PXN:
        over NVLink to the sender's GPU of that rank first), on two connections per peer."""
        groups = groups_of(self.w, self.gpus, kind)
        if ring and groups.shape[1] > 2:
            a, b = groups.ravel(), np.roll(groups, -1, axis=1).ravel()
        else:
            a, b = groups[:, :-1].ravel(), groups[:, 1:].ravel()
            if groups.shape[1] == 2 and ring:  # a pair passes both ways at once
                a, b = np.concatenate([a, b]), np.concatenate([b, a])
        net = (a // self.domain) != (b // self.domain)
        if not net.any():
            rate = self.nvlink_GBps()
            return 2e-6 + size / (rate * 1e9), rate
        a, b = a[net], b[net]
        rail = b % self.per_node  # the destination's local rank: its rail on both servers
        src = gpu_nics((a // self.per_node) * self.per_node + rail, self.per_node, self.nics)
        dst = gpu_nics(b, self.per_node, self.nics)
        channel = np.arange(P2P_CHANNELS) % src.shape[-1]
        src, dst = src[:, channel].ravel(), dst[:, channel].ravel()
        rate = P2P_CHANNELS * self.flow_gbps(kind, src, dst) / 8
        return self.net_latency_s() + size / (rate * 1e9), rate

    def alltoall(self, size: float) -> tuple[float, float | None]:
        """Time of one all-to-all in which every rank of every expert group sends ``size`` bytes in
        all (``size / ep`` to each peer): NVLink inside a domain, and across domains NCCL's PXN
        (the data goes over NVLink to the GPU on the destination's rail and leaves on its NIC)."""
        s = self.shape("ep")
        ep, p, m = self.w.ep, s.members, s.domains
        nvl = self.nvlink_GBps()
        if m == 1:
            return 2e-6 + size * (p - 1) / ep / (nvl * 1e9), None
        nm = s.nic_map  # (G, m, q)
        q = nm.shape[2]
        # NVLink carries the peers in the domain, and the remote data bound for another rail
        nvlink = size * ((p - 1) + (ep - p) * (1 - 1 / q)) / ep / (nvl * 1e9)
        i, j = np.nonzero(~np.eye(m, dtype=bool))
        src = nm[:, i, :].reshape(-1)
        dst = nm[:, j, :].reshape(-1)
        rate = self.flow_gbps("ep", src, dst) / 8  # GB/s of one connection
        per_connection = p * p * size / ep / q  # a domain's data for one remote domain, on one of q rails
        network = per_connection / (rate * 1e9)
        # NCCL posts every peer's send at once: one network latency
        return self.net_latency_s() + max(nvlink, network), rate


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
            # every micro-batch; an all-gather or a reduce-scatter moves half of an all-reduce
            layer = params / layers
            (t_w, algo, bus), (t_g, _, _) = P.allreduce(kind, BF16 * layer, grad * layer)
            per_mb = layers * (2 * t_w / 2 + t_g / 2)
            window = c["fwd"] + c["bwd"] if "dp" in overlap else 0.0
            exposed += mbs * max(per_mb - window, per_mb / layers)
            if record:
                record(kind, BF16 * layer, t_w / 2, algo, bus, 3 * layers * mbs)
            continue
        bucket = min(params, max(BUCKET_PARAMS, 1_000_000 * sizes[kind]))
        buckets = params / bucket
        (t_grad, algo, bus), (t_param, _, _) = P.allreduce(kind, grad * bucket, BF16 * bucket)
        t_grad *= buckets
        t_param *= buckets
        if w.zero == 0:  # one all-reduce of the gradients a step
            t_param = 0.0
        elif w.zero == 1:  # reduce-scatter the gradients, all-gather the updated weights
            t_grad, t_param = t_grad / 2, t_param / 2
        else:  # ZeRO-2 keeps only its shard of the gradients: a reduce-scatter every micro-batch
            t_grad, t_param = mbs * t_grad / 2, t_param / 2
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
    m = w.model
    dp, mbs = w.dp(gpus), w.microbatches(gpus)
    overlap = set(w.overlap)
    c = _compute(w, gpus, w.gpu.hbm_tbps * 1000)
    layers = w.stage_layers()
    moe_share = m.moe_layers / m.layers if m.moe else 0.0
    tokens = w.micro_batch * w.seq_len / w.cp
    collectives: list[Collective] = []

    sizes = {"tp": w.tp, "cp": w.cp, "pp": w.pp, "dp": dp * w.cp, "ep": w.ep, "edp": w.expert_replicas(gpus)}

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
        t_send, rate = P.sends("cp", kv, ring=True)
        t_cp = layers * (w.cp - 1) * 3 * t_send
        cp_exposed = max(0.0, t_cp - c["other"]) if "cp" in overlap else t_cp
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
    # pipeline sends: the activation of a micro-batch (split over the tensor-parallel ranks); the
    # interleaved schedule also sends from the last stage to the first, between chunks
    send_time = 0.0
    if w.pp > 1:
        act = tokens * m.hidden * BF16 / w.tp
        t_send, rate = P.sends("pp", act, ring=w.vpp > 1)
        sends = 2 * (w.pp - 1) if "pp" in overlap else 2 * (mbs * w.vpp + w.pp - 1)
        send_time = sends * t_send
        record("pp", act, t_send, "p2p", rate, 2 * mbs * w.vpp)
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
        "tensor_parallel_s": mbs * tp_exposed,
        "context_parallel_s": mbs * cp_exposed,
        "expert_parallel_s": mbs * ep_time,
        "data_parallel_s": dp_exposed,
        "optimizer_s": optimizer,
    }
    step = pipeline + bubble + send_time + dp_exposed + optimizer
    # one replica taking every micro-batch of the step: the same pipeline, its gradients reduced
    # over its own context-parallel ranks only
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
    replica = replica_mbs * per_mb + bubble + replica_sends + replica_dp + replica_optimizer
    return Step(gpus, w, step, breakdown, c["model_flops"], c["hardware_flops"], replica,
                w.memory(gpus), tuple(collectives), P.domain, tuple(P.notes))
