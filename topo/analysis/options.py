"""What an analysis is asked: :class:`AnalysisOptions`, their defaults (docs/model.md) and their checks.

Every analysis and the collectives' pricing (:mod:`topo.analysis.pricing`) read their options from
here; the plain choices and defaults live in :mod:`topo.analysis.choices`, which imports nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from ..errors import AnalysisError
from ..fabric import Fabric
from ..spec import DUAL_TOR_QPS
from .choices import (ALGORITHMS, CC_MODES, DEFAULT_LINK_EFFICIENCY, DEFAULT_SIZES, HASH_FIELDS, MAX_HASH_SAMPLES,
                      ORDERS, PROTOCOL_CHOICES, ROUTING_CHOICES)
from .collective import MAX_CHANNELS

#: Largest message size an analysis takes.
MAX_SIZE_BYTES = 1 << 40


@dataclass(frozen=True)
class AnalysisOptions:
    """What to analyse and how (defaults as documented in docs/model.md)."""

    job_gpus: int | None = None
    order: str = "topology"
    seed: int = 0
    algo: str = "auto"
    proto: str = "auto"
    routing: str = "auto"
    qps: int | None = None  #: None: 1, or DUAL_TOR_QPS on a dual-ToR fabric (see :meth:`for_fabric`)
    hash_seed: int = 0
    hash_samples: int | None = None
    hash_field: str = "sport"
    hash_polarized: bool = False
    sharp: bool = False
    channels: int | None = None
    cc: str = "ecn"
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY
    switch_latency_ns: float = 300.0
    step_latency_us: float | None = None
    nccl_constants: str | None = None
    sizes: tuple[int, ...] = DEFAULT_SIZES
    fail: tuple[str, ...] = ()
    fail_random: float = 0.0
    random_splits: int = 4

    def for_fabric(self, fabric: Fabric) -> "AnalysisOptions":
        """These options with ``qps`` chosen when not given: NCCL's 1, or DUAL_TOR_QPS with dual-ToR."""
        if self.qps is not None:
            return self
        return replace(self, qps=DUAL_TOR_QPS if fabric.spec.dual_tor else 1)

    def check(self) -> None:
        """Raise AnalysisError naming every option that is out of range."""
        problems = []
        for name, value, allowed in (("order", self.order, ORDERS), ("algo", self.algo, ALGORITHMS),
                                     ("proto", self.proto, PROTOCOL_CHOICES),
                                     ("routing", self.routing, ROUTING_CHOICES), ("cc", self.cc, CC_MODES),
                                     ("hash-field", self.hash_field, HASH_FIELDS)):
            if value not in allowed:
                problems.append(f"--{name} {value}: expected one of {', '.join(allowed)}")
        if self.qps is not None and not 1 <= self.qps <= 256:
            problems.append(f"--qps {self.qps}: must be from 1 to 256 queue pairs per connection")
        if self.hash_samples is not None and not 1 <= self.hash_samples <= MAX_HASH_SAMPLES:
            problems.append(f"--hash-samples {self.hash_samples}: must be from 1 to {MAX_HASH_SAMPLES}")
        if self.channels is not None and not 1 <= self.channels <= MAX_CHANNELS:
            problems.append(f"--channels {self.channels}: must be from 1 to {MAX_CHANNELS} (NCCL's MAXCHANNELS)")
        if not 0 < self.link_efficiency <= 1:  # also refuses NaN
            problems.append(f"--link-efficiency {self.link_efficiency}: must be in (0, 1]")
        for flag, value, high in (("--switch-latency-ns", self.switch_latency_ns, 1e6),
                                  ("--step-latency-us", self.step_latency_us, 1e6)):
            if value is not None and not 0 <= value <= high:  # also refuses NaN and infinity
                problems.append(f"{flag} {value}: must be from 0 to {high:,.0f}")
        if not self.sizes or min(self.sizes) <= 0 or max(self.sizes) > MAX_SIZE_BYTES or len(self.sizes) > 64:
            problems.append("--sizes: at most 64 message sizes, each from 1 byte to 1 TiB")
        if not 0 <= self.random_splits <= 64:
            problems.append(f"--random-splits {self.random_splits}: must be from 0 to 64")
        for flag, value in (("--seed", self.seed), ("--hash-seed", self.hash_seed)):
            if not 0 <= value < 2**32:
                problems.append(f"{flag} {value}: must be from 0 to {2**32 - 1:,}")
        if problems:
            raise AnalysisError(problems)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["sizes"] = list(self.sizes)
        out["fail"] = list(self.fail)
        return out
