"""A training workload: the model, the GPU, the batch and the parallelism, and what they cost.

This is the part of ``topo train`` that needs no fabric (docs/train.md): the model catalogue
(``topo/data/models.yaml``; the GPUs are those of the hardware catalogue, :mod:`topo.hardware`), a
:class:`Workload` checked for consistency with a GPU count, the FLOPs of a step, the parameters each
GPU holds, and the memory check. :mod:`topo.analysis.training` puts the workload on a fabric and
prices its communication.

FLOPs follow the convention of published MFU figures (Megatron-LM, NeMo, MegaScale): per token,
2 FLOPs per multiply-accumulate of every weight matrix, attention scores over the full sequence
(QK^T and AV: ``4 s d`` per layer for ``d`` the width of the queries), the output layer, and
training as three times the forward pass. For GPT-3 that is Narayanan et al.'s
``72 B s l h^2 (1 + s/(6h) + V/(12 l h))`` per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from .errors import ProblemsError, did_you_mean, quote
from .hardware.catalog import gpu_catalog
from .hardware.gpus import Gpu

PRECISIONS = ("bf16", "fp8", "fp4")
RECOMPUTE = ("none", "selective", "full")
#: Communication that the framework overlaps with compute when asked (docs/train.md).
OVERLAPS = ("dp", "tp", "pp", "cp", "ep")
#: What is overlapped unless the workload says otherwise: everything but the expert all-to-all.
DEFAULT_OVERLAP = ("dp", "tp", "pp", "cp")
ZERO_STAGES = (0, 1, 2, 3)
#: Bytes of one value in 16-bit precision: weights, activations and gradients on the wire.
BF16 = 2
#: Bytes per parameter of mixed-precision Adam (Megatron's distributed optimizer, docs/train.md):
#: 16-bit weights, 32-bit master weights and Adam's two 32-bit moments; the gradients are kept and
#: reduced in ``grad_precision`` (GRAD_BYTES).
WEIGHT_BYTES, OPTIMIZER_BYTES = 2, 12
GRAD_BYTES = {"bf16": 2, "fp32": 4}
#: HBM that the job cannot use for its tensors: CUDA context, NCCL and cuBLAS workspaces, the
#: caching allocator's fragmentation (GB).
HBM_RESERVED_GB = 6.0
#: Default tokens of a global batch when neither the catalogue nor the user gives one.
DEFAULT_BATCH_TOKENS = 1 << 22


class WorkloadError(ProblemsError):
    """A workload that cannot run as asked, e.g. ``"--tp 3: heads=96 is not a multiple of it"``."""


@dataclass(frozen=True)
class Model:
    """A transformer's architecture, as the FLOP, parameter and memory counts need it."""

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    ffn: int = 0  #: feed-forward width (0: 4 x hidden)
    kv_heads: int = 0  #: 0: heads (multi-head attention)
    head_dim: int = 0  #: 0: hidden / heads
    score_dim: int = 0  #: width of the attention scores' dot products (QK^T and AV); 0: heads x head_dim
    mlp: str = "gelu"
    tied: bool = False
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    description: str = ""
    params_b: float | None = None  #: the published size, for reference
    source: str = ""
    train: dict[str, Any] = field(default_factory=dict, compare=False)  #: the catalogue's default recipe

    def __post_init__(self) -> None:
        if not self.head_dim and self.heads > 0 and self.hidden % self.heads:
            raise WorkloadError([f"--hidden {self.hidden}: not a multiple of --heads {self.heads} "
                                 f"(or give --head-dim)"])
        object.__setattr__(self, "ffn", self.ffn or 4 * self.hidden)
        object.__setattr__(self, "kv_heads", self.kv_heads or self.heads)
        object.__setattr__(self, "head_dim", self.head_dim or (self.hidden // self.heads if self.heads else 0))

    def check(self, where: str = "--") -> None:
        """Raise WorkloadError naming every architecture field that does not make a model."""
        problems = []
        if self.heads % self.kv_heads:
            problems.append(f"{where}kv-heads {self.kv_heads}: the {self.heads} query heads are not a multiple "
                            f"of it")
        if self.mlp not in ("gelu", "swiglu"):
            problems.append(f"{where}mlp {self.mlp}: expected gelu or swiglu")
        if self.experts:
            if not 1 <= self.top_k <= self.experts:
                problems.append(f"{where}top-k {self.top_k}: must be from 1 to the {self.experts} experts")
            if self.expert_ffn < 1:
                problems.append(f"{where}expert-ffn {self.expert_ffn}: a mixture of experts needs the width "
                                f"of one expert")
            if self.dense_layers >= self.layers:
                problems.append(f"{where}dense-layers {self.dense_layers}: leaves no MoE layer of {self.layers}")
        elif self.top_k or self.expert_ffn:
            problems.append(f"{where}top-k/expert-ffn: given without --experts")
        if problems:
            raise WorkloadError(problems)

    # --- shape --------------------------------------------------------------------------------
    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.mlp == "swiglu" else 2

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.moe else 0

    # --- parameters ---------------------------------------------------------------------------
    @property
    def attention_params(self) -> int:
        """Weights of one layer's attention: Q, K, V and the output projection."""
        h = self.hidden
        return h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h

    @property
    def dense_mlp_params(self) -> int:
        return self.mlp_matrices * self.hidden * self.ffn

    @property
    def expert_params(self) -> int:
        """Weights of one expert (all experts have the expert width)."""
        return self.mlp_matrices * self.hidden * self.expert_ffn

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    def params(self) -> dict[str, int]:
        """Parameter counts: ``dense`` (everything but the routed experts) and ``experts``."""
        dense_layers = self.layers - self.moe_layers
        dense = (self.layers * (self.attention_params + 2 * self.hidden)  # and two norms
                 + dense_layers * self.dense_mlp_params + self.embedding_params)
        experts = 0
        if self.moe:
            dense += self.moe_layers * (self.shared_experts * self.expert_params + self.hidden * self.experts)
            experts = self.moe_layers * self.experts * self.expert_params
        return {"dense": dense, "experts": experts, "total": dense + experts}

    def active_params(self) -> int:
        """Parameters one token goes through (the routed experts: ``top_k`` of them)."""
        p = self.params()
        return p["dense"] + (self.moe_layers * self.top_k * self.expert_params if self.moe else 0)

    # --- FLOPs --------------------------------------------------------------------------------
    def layer_flops(self, seq_len: int, moe_layer: bool) -> dict[str, float]:
        """Forward FLOPs of one token through one layer: ``matmul`` (weights) and ``attention`` (scores)."""
        mlp = (self.top_k + self.shared_experts) * self.expert_params if moe_layer else self.dense_mlp_params
        router = self.hidden * self.experts if moe_layer else 0
        return {"matmul": 2.0 * (self.attention_params + mlp + router),
                "attention": 4.0 * seq_len * (self.score_dim or self.q_dim)}

    def flops_per_token(self, seq_len: int) -> dict[str, float]:
        """Training FLOPs of one token (three times the forward pass): ``matmul`` (the layers'
        weights), ``attention`` (scores, full square), ``logits`` (the output layer), ``total``."""
        dense = self.layer_flops(seq_len, False)
        moe = self.layer_flops(seq_len, True)
        dense_layers = self.layers - self.moe_layers
        out = {k: 3.0 * (dense_layers * dense[k] + self.moe_layers * moe[k]) for k in ("matmul", "attention")}
        out["logits"] = 3.0 * 2.0 * self.hidden * self.vocab
        out["total"] = out["matmul"] + out["attention"] + out["logits"]
        return out

    def activation_bytes(self, precision: str) -> float:
        """Bytes one layer keeps per token for the backward pass (16-bit, flash attention, no
        dropout): the inputs of its norms, of every matrix multiply (1 byte each under FP8
        training, whose kernels keep an FP8 copy), Q, K, V and the attention output, and the
        feed-forward activations (SwiGLU keeps both halves of its first matrix's output)."""
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        ffn = (self.top_k + self.shared_experts) * self.expert_ffn if self.moe else self.ffn
        fc1_in = (self.top_k + self.shared_experts) * h if self.moe else h  # the tokens dispatched to experts
        gemm_in = 1 if precision != "bf16" else BF16
        up = 2 if self.mlp == "swiglu" else 1
        norms = 2 * BF16 * h
        # Q, K, V and the attention output (flash attention keeps them); the output projection's
        # input is that output, kept again only as an FP8 copy
        attention = BF16 * (q + 2 * kv) + BF16 * q + gemm_in * h + (gemm_in * q if gemm_in != BF16 else 0)
        mlp = gemm_in * (fc1_in + ffn) + BF16 * up * ffn
        return float(norms + attention + mlp)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "train"}
        p = self.params()
        out["params"] = p["total"]
        out["active_params"] = self.active_params()
        return out


@lru_cache(maxsize=1)
def model_catalog() -> dict[str, Model]:
    """The models shipped with topo, by name."""
    raw = yaml.safe_load(resources.files("topo.data").joinpath("models.yaml").read_text(encoding="utf-8"))
    return {name: Model(name=name, **entry) for name, entry in raw.items()}


@dataclass(frozen=True)
class Workload:
    """One training job's configuration, before it meets a fabric.

    Parallelism follows Megatron-LM's rank order (tensor fastest, then context, then data, then
    pipeline; expert parallelism is carved from the data-parallel ranks): see docs/train.md.
    """

    model: Model
    gpu: Gpu
    global_batch: int  #: sequences per step
    micro_batch: int = 1
    seq_len: int = 0  #: 0: the model's
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    vpp: int = 1
    zero: int = 1
    recompute: str = "selective"
    precision: str = "bf16"
    overlap: tuple[str, ...] = DEFAULT_OVERLAP
    grad_precision: str = "bf16"  #: gradients kept and reduced in bf16 (MCore's default) or fp32
    #: The job fields the user gave (flags, ``--workload FILE``); the others are the model's recipe or
    #: the defaults, which :func:`fit_recipe` may adjust. None: all given (a workload built directly).
    given: frozenset[str] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "seq_len", self.seq_len or self.model.seq_len)

    @property
    def model_parallel(self) -> int:
        """GPUs of one model replica: tp x cp x pp."""
        return self.tp * self.cp * self.pp

    def dp(self, gpus: int) -> int:
        return gpus // self.model_parallel

    def microbatches(self, gpus: int) -> int:
        """Micro-batches each pipeline runs per step."""
        return self.global_batch // (self.dp(gpus) * self.micro_batch)

    def expert_replicas(self, gpus: int) -> int:
        """Ranks of a stage that hold the same experts: the stage's tp x dp x cp ranks over ep."""
        return max(1, self.tp * self.dp(gpus) * self.cp // self.ep)

    def stage_layers(self) -> int:
        """Layers of the busiest pipeline stage: ``vpp`` chunks of ``ceil(layers / (pp vpp))``."""
        return math.ceil(self.model.layers / (self.pp * self.vpp)) * self.vpp

    def named(self, key: str) -> str:
        """How an error names the field ``key``: its flag (``--global-batch``) when the user gave it,
        else its plain name (``global batch``), the recipe's or the default value."""
        if self.given is None or key in self.given or key not in JOB_FIELDS:
            return "--" + key.replace("_", "-")
        return key.replace("_", " ")

    def check(self, gpus: int, gpus_per_node: int) -> None:
        """Raise WorkloadError naming every field that does not fit ``gpus`` GPUs: a field the user
        gave by its flag, one of the model's recipe with the recipe (:meth:`refusal`)."""
        problems = self.problems(gpus, gpus_per_node)
        if problems:
            raise WorkloadError([self.refusal(gpus, keys, text) for keys, text in problems])

    def problems(self, gpus: int, gpus_per_node: int) -> list[tuple[tuple[str, ...], str]]:
        """Every field that does not fit ``gpus`` GPUs: (the fields at fault, the line naming them)."""
        g, f = self.gpu, self.named
        problems: list[tuple[tuple[str, ...], str]] = []
        for key in ("tp", "pp", "cp", "ep", "vpp", "micro_batch", "global_batch", "seq_len"):
            if getattr(self, key) < 1:
                problems.append(((key,), f"{f(key)} {getattr(self, key)}: must be at least 1"))
        if problems:
            return problems
        if self.zero not in ZERO_STAGES:
            problems.append((("zero",), f"{f('zero')} {self.zero}: expected 0, 1, 2 or 3"))
        if self.recompute not in RECOMPUTE:
            problems.append((("recompute",), f"{f('recompute')} {self.recompute}: expected one of "
                                             f"{', '.join(RECOMPUTE)}"))
        if self.grad_precision not in GRAD_BYTES:
            problems.append((("grad_precision",), f"{f('grad_precision')} {self.grad_precision}: expected bf16 "
                                                  f"or fp32"))
        if self.precision not in PRECISIONS:
            problems.append((("precision",), f"{f('precision')} {self.precision}: expected one of "
                                             f"{', '.join(PRECISIONS)}"))
        elif self.precision not in g.tflops:
            problems.append((("precision",), f"{f('precision')} {self.precision}: the {g.name} has no "
                                             f"{self.precision} tensor cores (it has {', '.join(g.tflops)})"))
        for o in self.overlap:
            if o not in OVERLAPS:
                problems.append((("overlap",), f"{f('overlap')} {o}: expected some of {', '.join(OVERLAPS)} "
                                               f"(or none)"))
        problems += self._layout_problems(gpus, gpus_per_node)
        if not problems:
            problems += self._batch_problems(gpus)
        return problems

    def _layout_problems(self, gpus: int, gpus_per_node: int) -> list[tuple[tuple[str, ...], str]]:
        """The parallelism that does not fit the GPUs, the NVLink domain or the model."""
        m, g, f = self.model, self.gpu, self.named
        problems: list[tuple[tuple[str, ...], str]] = []
        mp = self.model_parallel
        if gpus % mp:
            keys = tuple(k for k in ("tp", "cp", "pp") if getattr(self, k) > 1)
            problems.append((keys, f"{f('tp')} {self.tp} x {f('cp')} {self.cp} x {f('pp')} {self.pp} = {mp} GPUs "
                                   f"per model replica: {gpus:,} GPUs are not a whole number of replicas"))
        domain = g.nvlink.job_gpus(gpus, gpus_per_node)
        if self.tp > domain or domain % self.tp:
            problems.append((("tp",), f"{f('tp')} {self.tp}: tensor parallelism must stay in the NVLink domain of "
                                      f"{domain} GPUs ({g.name}, as this job of {gpus:,} uses it) and divide it"))
        elif self.tp > gpus_per_node and self.tp % gpus_per_node:
            problems.append((("tp",), f"{f('tp')} {self.tp}: across servers of {gpus_per_node} GPUs it must be a "
                                      f"multiple of {gpus_per_node}"))
        if m.heads % self.tp:
            problems.append((("tp",), f"{f('tp')} {self.tp}: the model's {m.heads} attention heads are not a "
                                      f"multiple of it"))
        elif m.kv_heads % self.tp:
            problems.append((("tp",), f"{f('tp')} {self.tp}: the model's {m.kv_heads} key-value heads are not a "
                                      f"multiple of it"))
        if self.seq_len % (2 * self.cp) and self.cp > 1:
            problems.append((("cp",), f"{f('cp')} {self.cp}: sequence length {self.seq_len:,} is not a multiple "
                                      f"of 2 x cp (each rank takes two balanced chunks of a causal sequence)"))
        if self.vpp > 1 and self.pp == 1:
            problems.append((("vpp",), f"{f('vpp')} {self.vpp}: interleaved stages need pipeline parallelism "
                                       f"(--pp 2 or more)"))
        if self.pp * self.vpp > m.layers:
            keys = ("pp", "vpp") if self.vpp > 1 else ("pp",)
            problems.append((keys, f"{f('pp')} {self.pp} x {f('vpp')} {self.vpp} = {self.pp * self.vpp} chunks: "
                                   f"more than the model's {m.layers} layers"))
        if self.zero == 3 and self.pp > 1:
            problems.append((("zero", "pp"), f"{f('zero')} 3 with {f('pp')} {self.pp}: ZeRO-3 shards every layer "
                                             f"over the data-parallel ranks and does not combine with pipeline "
                                             f"parallelism"))
        if m.moe:
            if m.experts % self.ep:
                problems.append((("ep",), f"{f('ep')} {self.ep}: the model's {m.experts} experts are not a "
                                          f"multiple of it"))
        elif self.ep > 1:
            problems.append((("ep",), f"{f('ep')} {self.ep}: {m.name} is a dense model (no experts to spread)"))
        return problems

    def _batch_problems(self, gpus: int) -> list[tuple[tuple[str, ...], str]]:
        """Expert parallelism over a stage's ranks, and the batch over the pipelines (a layout that fits)."""
        f = self.named
        problems: list[tuple[tuple[str, ...], str]] = []
        dp = self.dp(gpus)
        stage = self.tp * dp * self.cp
        if stage % self.ep:
            problems.append((("ep",), f"{f('ep')} {self.ep}: expert parallelism spreads a stage's experts over its "
                                      f"tp x dp x cp ranks ({self.tp} x {dp} x {self.cp} = {stage}), which it must "
                                      f"divide"))
        per_step = dp * self.micro_batch
        if self.global_batch % per_step:
            problems.append((("global_batch", "micro_batch") if self.micro_batch > 1 else ("global_batch",),
                             f"{f('global_batch')} {self.global_batch:,}: not a multiple of data-parallel {dp:,} "
                             f"x micro-batch {self.micro_batch} = {per_step:,} sequences"))
        elif self.vpp > 1 and self.microbatches(gpus) % self.pp:
            problems.append((("vpp", "pp", "global_batch"),
                             f"{f('vpp')} {self.vpp}: the interleaved schedule needs the {self.microbatches(gpus)} "
                             f"micro-batches per pipeline to be a multiple of {f('pp')} {self.pp}"))
        return problems

    def recipe_keys(self) -> list[str]:
        """The fields of the model's recipe that the workload takes (the user gave no other value)."""
        if self.given is None:
            return []
        return [k for k in self.model.train if k in JOB_FIELDS and k not in self.given]

    def recipe_text(self, also: tuple[str, ...] = ()) -> str:
        """The model's recipe as an error names it: ``llama3-405b's recipe (tp 8, pp 8, cp 2, vpp 8,
        global batch 1,536)``, its parallelism and batch and the fields ``also`` that it gives."""
        train = self.model.train
        shown = [k for k in ("tp", "pp", "cp", "ep", "vpp", "global_batch", "micro_batch", *also)
                 if k in self.recipe_keys()]
        parts = [f"{k.replace('_', ' ')} {_shown(train[k])}" for k in dict.fromkeys(shown)]
        return f"{self.model.name}'s recipe ({', '.join(parts)})"

    def refusal(self, gpus: int, keys: tuple[str, ...], text: str) -> str:
        """The line of a problem: ``text`` as it is when the user gave every field at fault (or they
        are defaults); else the model's recipe named, that it does not fit, and the flags to give."""
        recipe = [k for k in keys if k in self.recipe_keys()]
        if not recipe:
            return text
        typed = [k for k in keys if k not in recipe and self.given is not None and k in self.given]
        with_flags = f" with {', '.join(f'{self.named(k)} {_shown(getattr(self, k))}' for k in typed)}" if typed \
            else ""
        flags = "/".join(f"--{k.replace('_', '-')}" for k in (*typed, *recipe))
        where = f"the {self.gpu.name}" if keys == ("precision",) else f"{gpus:,} GPUs"
        return f"{self.recipe_text(tuple(recipe))}{with_flags} does not fit {where}: {text}; give {flags}"

    # --- what each GPU holds ------------------------------------------------------------------
    def local_params(self, gpus: int) -> dict[str, float]:
        """Parameters on the busiest GPU: ``dense`` (its stage's share, split by tp; the embedding
        and output layer counted on a stage as one more layer's worth, as balanced pipeline
        splits place them) and ``experts`` (its stage's experts split over ep)."""
        m = self.model
        p = m.params()
        per_layer_dense = (p["dense"] - m.embedding_params) / m.layers
        layers = self.stage_layers()
        embed = m.embedding_params if self.pp == 1 else m.vocab * m.hidden  # a stage holds one of the two
        dense = (layers * per_layer_dense + embed) / self.tp
        experts = p["experts"] / m.layers * layers / self.ep if m.moe else 0.0
        return {"dense": dense, "experts": experts, "total": dense + experts}

    def memory(self, gpus: int) -> dict[str, Any]:
        """The memory check of the busiest GPU (the first pipeline stage), in GB (10^9 bytes)."""
        m = self.model
        dp = self.dp(gpus)
        local = self.local_params(gpus)
        shard = dp * self.cp  # Megatron shards the optimizer over the data x context parallel ranks
        expert_shard = self.expert_replicas(gpus)
        state = 0.0
        grad = GRAD_BYTES[self.grad_precision]
        for count, d in ((local["dense"], shard), (local["experts"], expert_shard)):
            state += count * {0: WEIGHT_BYTES + grad + OPTIMIZER_BYTES,
                              1: WEIGHT_BYTES + grad + OPTIMIZER_BYTES / d,
                              2: WEIGHT_BYTES + (grad + OPTIMIZER_BYTES) / d,
                              3: (WEIGHT_BYTES + grad + OPTIMIZER_BYTES) / d}[self.zero]
        tokens = self.micro_batch * self.seq_len / self.cp
        per_layer = tokens * m.activation_bytes(self.precision) / self.tp
        if self.recompute == "full":
            per_layer = tokens * BF16 * m.hidden / self.tp  # only each layer's input
        microbatches = self.microbatches(gpus)
        in_flight = float(self.pp)
        if self.vpp > 1:
            in_flight *= 1 + (self.pp - 1) / (self.pp * self.vpp)
        in_flight = min(float(microbatches), in_flight)
        recomputing = tokens * m.activation_bytes(self.precision) / self.tp if self.recompute == "full" else 0.0
        # the first stage keeps the most micro-batches; the last one (one in flight) has the logits
        first = per_layer * self.stage_layers() * in_flight + recomputing
        logits = tokens * m.vocab / self.tp * 4 * 2  # fp32 logits and their gradient
        last = per_layer * self.stage_layers() + recomputing  # the same as first without a pipeline
        if self.pp > 1 and first >= last + logits:
            activations, logits = first, 0.0
        else:
            activations = first if self.pp == 1 else last
        total = state + activations + logits
        usable = self.gpu.hbm_gb - HBM_RESERVED_GB
        return {
            "weights_and_optimizer_GB": round(state / 1e9, 2),
            "activations_GB": round(activations / 1e9, 2),
            "logits_GB": round(logits / 1e9, 2),
            "total_GB": round(total / 1e9, 2),
            "hbm_GB": self.gpu.hbm_gb,
            "usable_GB": round(usable, 2),
            "fits": total / 1e9 <= usable,
            "in_flight_microbatches": round(in_flight, 3),
        }

    def to_dict(self, gpus: int) -> dict[str, Any]:
        return {
            "model": self.model.name, "gpu": self.gpu.name, "precision": self.precision,
            "global_batch": self.global_batch, "micro_batch": self.micro_batch, "seq_len": self.seq_len,
            "tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep, "vpp": self.vpp, "dp": self.dp(gpus),
            "microbatches": self.microbatches(gpus), "zero": self.zero, "recompute": self.recompute,
            "overlap": list(self.overlap), "grad_precision": self.grad_precision,
        }


def _entry(catalog: dict[str, Any], flag: str, what: str, name: str, hint: str = "") -> Any:
    if name not in catalog:
        raise WorkloadError([f"{flag} {name if len(name) <= 60 else quote(name)}: unknown {what}{did_you_mean(name, catalog)}; known: "
                             f"{', '.join(catalog)}{hint}"])
    return catalog[name]


def resolve_gpu(name: str) -> Gpu:
    """The GPU of the hardware catalogue named by ``--gpu`` (:func:`topo.hardware.catalog.gpu_catalog`)."""
    return _entry(gpu_catalog(), "--gpu", "GPU", name)


def resolve_model(name: str) -> Model:
    return _entry(model_catalog(), "--model", "model", name, " (or give --layers, --hidden, --heads, ...)")


def default_batch(model: Model) -> int:
    """The catalogue recipe's global batch, else 4 Mi tokens' worth of sequences."""
    return int(model.train.get("global_batch") or max(1, DEFAULT_BATCH_TOKENS // model.seq_len))


def _shown(value: Any) -> str:
    """A field's value as a line shows it: ``1,536``, ``fp8``, ``dp,tp``."""
    if isinstance(value, bool) or not isinstance(value, (int, list, tuple)):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else ",".join(map(str, value))


def fit_recipe(w: Workload, gpus: int, gpus_per_node: int) -> tuple[Workload, list[dict[str, Any]]]:
    """The workload with the values the user did not give adjusted where they do not fit ``gpus``
    GPUs and practice has a rule (docs/train.md, "When a recipe does not fit"), and the adjustments:
    ``{"field", "recipe", "used", "why", "note"}`` each (``note``: the line that says it). A value
    the user gave is never changed, and a workload that fits is returned as it is; what no rule
    fixes is left to :meth:`Workload.check`.

    - the global batch (the recipe's, or the default 4 Mi tokens) that is not a multiple of
      ``dp x micro-batch``: the nearest multiple, at least one micro-batch per pipeline;
    - the recipe's interleaved stages (``vpp``) that the schedule does not take: the largest ``vpp``
      under it that divides a stage's layers and takes the micro-batches, else 1 (no interleaving).

    >>> w = workload_from({"model": "llama3-405b"})
    >>> [(a["field"], a["recipe"], a["used"]) for a in fit_recipe(w, 16384, 8)[1]]
    [('vpp', 8, 1)]
    >>> [(a["field"], a["recipe"], a["used"]) for a in fit_recipe(w, 24576, 8)[1]]
    []
    """
    if w.given is None or w.problems(gpus, gpus_per_node) == []:
        return w, []
    adjusted: list[dict[str, Any]] = []
    source = f"{w.model.name}'s recipe" if "global_batch" in w.model.train else "the default (4 Mi tokens)"
    layout = not replace(w, vpp=1)._layout_problems(gpus, gpus_per_node)  # the GPUs make whole replicas
    per_step = w.dp(gpus) * w.micro_batch
    if layout and "global_batch" not in w.given and w.global_batch % per_step:
        used = max(1, (2 * w.global_batch + per_step) // (2 * per_step)) * per_step
        why = (f"not a multiple of data-parallel {w.dp(gpus):,} x micro-batch {w.micro_batch} = {per_step:,} "
               f"sequences; " + ("the nearest multiple" if used > per_step or 2 * w.global_batch >= per_step
                                 else "one micro-batch per pipeline"))
        adjusted.append({"field": "global_batch", "recipe": w.global_batch, "used": used, "why": why,
                         "note": f"{source}: global batch {w.global_batch:,} -> {used:,} sequences: {why} "
                                 f"(give --global-batch)"})
        w = replace(w, global_batch=used)
    if "vpp" not in w.given and w.vpp > 1:
        why, keep = _vpp_misfit(w, gpus, layout)
        if why:
            used = _fitting_vpp(w, gpus, layout)
            give = "give --vpp" + (f", or --global-batch {keep:,} to keep vpp {w.vpp}" if keep else "")
            adjusted.append({"field": "vpp", "recipe": w.vpp, "used": used, "why": why,
                             "note": f"{w.model.name}'s recipe: vpp {w.vpp} -> {used}"
                                     + (" (no interleaving)" if used == 1 else "") + f": {why} ({give})"})
            w = replace(w, vpp=used)
    return w, adjusted


def _vpp_misfit(w: Workload, gpus: int, layout: bool) -> tuple[str, int]:
    """Why the interleaved schedule does not take ``w.vpp`` (nothing when it does), and the global
    batch that would keep it (0: none, or the user gave the batch)."""
    f = w.named
    if w.pp == 1:
        return f"interleaved stages need pipeline parallelism ({f('pp')} 1 has none)", 0
    if w.pp * w.vpp > w.model.layers:
        return (f"{f('pp')} {w.pp} x vpp {w.vpp} = {w.pp * w.vpp} chunks: more than the model's "
                f"{w.model.layers} layers"), 0
    per_step = w.dp(gpus) * w.micro_batch
    if layout and w.global_batch % per_step == 0 and w.microbatches(gpus) % w.pp:
        keep = 0 if "global_batch" in (w.given or ()) else -(-w.global_batch // (per_step * w.pp)) * per_step * w.pp
        return (f"the interleaved schedule needs the {w.microbatches(gpus)} micro-batches per pipeline to be a "
                f"multiple of {f('pp')} {w.pp}"), keep
    return "", 0


def _fitting_vpp(w: Workload, gpus: int, layout: bool) -> int:
    """The largest ``vpp`` up to ``w.vpp`` that divides a stage's ``ceil(layers / pp)`` layers (the
    busiest stage keeps its layers), makes no more chunks than layers, and whose schedule takes the
    micro-batches; 1 when none does."""
    per_step = w.dp(gpus) * w.micro_batch
    if w.pp == 1 or (layout and w.global_batch % per_step == 0 and w.microbatches(gpus) % w.pp):
        return 1
    per_stage = math.ceil(w.model.layers / w.pp)
    return max((v for v in range(1, w.vpp + 1) if per_stage % v == 0 and w.pp * v <= w.model.layers), default=1)



#: Workload fields a YAML file or the flags may give, and their types.
MODEL_FIELDS = {"layers": int, "hidden": int, "heads": int, "kv_heads": int, "head_dim": int, "score_dim": int,
                "ffn": int,
                "mlp": str, "vocab": int, "seq_len": int, "experts": int, "top_k": int, "expert_ffn": int,
                "shared_experts": int, "dense_layers": int, "tied": bool}
JOB_FIELDS = {"global_batch": int, "micro_batch": int, "tp": int, "pp": int, "cp": int, "ep": int, "vpp": int,
              "zero": int, "recompute": str, "precision": str, "overlap": tuple, "grad_precision": str}
WORKLOAD_KEYS = ("model", "gpu", "params_b", *MODEL_FIELDS, *JOB_FIELDS)
MLPS = ("gelu", "swiglu")


#: The least value of each whole-number field (the others: 1).
LEAST = {"experts": 0, "top_k": 0, "expert_ffn": 0, "shared_experts": 0, "dense_layers": 0, "zero": 0,
         "score_dim": 0}


#: The most of each whole-number field: well past any model trained (a 405B model has 126 layers of
#: width 16,384, a vocabulary of 128 Ki and sequences of 128 Ki tokens), and small enough that a
#: step's FLOPs, bytes and times stay finite numbers a table can show.
MOST = {"layers": 4096, "hidden": 1 << 20, "heads": 1 << 16, "kv_heads": 1 << 16, "head_dim": 1 << 16,
        "score_dim": 1 << 16, "ffn": 1 << 22, "vocab": 1 << 24, "seq_len": 1 << 24, "experts": 1 << 16,
        "top_k": 1 << 16, "expert_ffn": 1 << 22, "shared_experts": 1 << 10, "dense_layers": 4096,
        "global_batch": 1 << 24, "micro_batch": 1 << 16, "tp": 1 << 22, "pp": 1 << 22, "cp": 1 << 22,
        "ep": 1 << 22, "vpp": 1 << 10, "zero": 3}
#: The largest model size ``params_b`` may give, in billions.
MOST_PARAMS_B = 1_000_000


def _typed(key: str, value: Any, kind: type, where: str) -> Any:
    """``value`` as the field's type, or WorkloadError naming ``where`` (``--`` for a flag, a
    file's ``FILE: `` for its field) and the value."""
    name = f"--{key.replace('_', '-')}" if where == "--" else f"{where}{key}"
    if kind is tuple:
        if isinstance(value, str):
            if not value.strip():
                raise WorkloadError([f"{name}: give some of {', '.join(OVERLAPS)}, comma-separated, or none"])
            value = [] if value.strip().lower() == "none" else [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise WorkloadError([f"{name}: expected a list of {', '.join(OVERLAPS)} (or none), got {quote(value)}"])
        return tuple(value)
    if kind is bool:
        if not isinstance(value, bool):
            raise WorkloadError([f"{name}: expected true or false, got {quote(value)}"])
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise WorkloadError([f"{name}: expected a whole number, got {quote(value)}"])
        least, most = LEAST.get(key, 1), MOST[key]
        if value < least:
            raise WorkloadError([f"{name} {quote(value)}: must be at least {least}"])
        if value > most:
            raise WorkloadError([f"{name} {quote(value)}: must be at most {most:,}"])
        return value
    if not isinstance(value, str):
        raise WorkloadError([f"{name}: expected text, got {quote(value)}"])
    return value


def workload_from(values: dict[str, Any], origin: dict[str, str] | None = None) -> Workload:
    """A workload from a YAML file's mapping and flags merged (``None`` values are not given).

    ``model`` is a catalogue name (its recipe gives the parallelism and batch that are not given)
    or left out, and then the architecture fields are all required. Architecture fields given
    with a catalogue model change it (``--seq-len 4096``). ``gpu`` defaults to ``h100``.
    ``origin`` says where a field came from, for its errors: ``"--"`` (a flag, the default) or a
    file's ``"FILE: "``.
    """
    origin = origin or {}
    values = {k: v for k, v in values.items() if v is not None}
    unknown = sorted(set(values) - set(WORKLOAD_KEYS))
    if unknown:
        raise WorkloadError([f"{origin.get(key, '--')}{key}: not a workload field{did_you_mean(key, WORKLOAD_KEYS)}; "
                             f"known: {', '.join(WORKLOAD_KEYS)}" for key in unknown])
    problems: list[str] = []
    typed: dict[str, Any] = {}
    for key, kind in {**MODEL_FIELDS, **JOB_FIELDS}.items():
        if key in values:
            try:
                typed[key] = _typed(key, values[key], kind, origin.get(key, "--"))
            except WorkloadError as exc:
                problems += exc.lines
    if typed.get("mlp", "gelu") not in MLPS:
        problems.append(f"{origin.get('mlp', '--')}mlp {typed['mlp']}: expected gelu or swiglu")
    params_b = values.get("params_b")
    if params_b is not None and (isinstance(params_b, bool) or not isinstance(params_b, (int, float))
                                 or not math.isfinite(params_b) or not 0 < params_b <= MOST_PARAMS_B):
        problems.append(f"{origin.get('params_b', '--')}params-b {quote(params_b)}: expected a positive number of "
                        f"billions, at most {MOST_PARAMS_B:,}")
        params_b = None
    if problems:
        raise WorkloadError(problems)
    arch = {k: v for k, v in typed.items() if k in MODEL_FIELDS}
    job = {k: v for k, v in typed.items() if k in JOB_FIELDS}
    where = "--"
    name = values.get("model")
    if name is not None:
        if not isinstance(name, str):
            raise WorkloadError([f"{origin.get('model', '--')}model: expected a catalogue name, got {quote(name)}"])
        base = resolve_model(name)
        own = {f.name: getattr(base, f.name) for f in fields(base)}
        if ("hidden" in arch or "heads" in arch) and "head_dim" not in arch:
            own["head_dim"] = 0  # derived again from the new width or heads
        model = Model(**{**own, **arch})
        recipe = {k: _typed(k, v, JOB_FIELDS[k], f"{name} recipe: ") for k, v in base.train.items()
                  if k in JOB_FIELDS}
    else:
        missing = [k for k in ("layers", "hidden", "heads", "seq_len", "vocab") if k not in arch]
        if missing:
            raise WorkloadError([f"{where}model: give a catalogue model ({', '.join(model_catalog())}) or the "
                                 f"architecture; missing {', '.join(where + m.replace('_', '-') for m in missing)}"])
        model = Model(name="custom", params_b=params_b, **arch)
        recipe = {}
    model.check(where)
    if params_b is not None:
        counted = model.params()["total"] / 1e9
        if abs(counted - params_b) > 0.1 * params_b:
            raise WorkloadError([f"{where}params-b {params_b:g}: the architecture has {counted:,.1f} B "
                                 f"parameters (more than 10% off); check --layers, --hidden, --ffn, --vocab"])
    gpu = values.get("gpu") or (base.train.get("gpu") if name is not None else None) or "h100"
    if not isinstance(gpu, str):
        raise WorkloadError([f"{origin.get('gpu', '--')}gpu: expected a catalogue name, got {quote(gpu)}"])
    merged = {**recipe, **job}
    merged.setdefault("global_batch", default_batch(model) if name is None else
                      int(base.train.get("global_batch") or default_batch(model)))
    return Workload(model=model, gpu=resolve_gpu(gpu), given=frozenset(job), **merged)
