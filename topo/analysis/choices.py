"""The analysis options' choices and defaults, as plain values.

Nothing here imports numpy or the analyses, so the command line can build its flags (and answer
``--help`` and ``--version``) without loading them. The modules that use these values import them
from here.
"""

from __future__ import annotations

MIB = 1 << 20
GIB = 1 << 30
#: 1 MiB to 8 GiB in steps of 4x, and 8 GiB itself.
DEFAULT_SIZES = (MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, GIB, 4 * GIB, 8 * GIB)
#: Measured NDR 400G all-reduce busbw per NIC is 46-48 GB/s of a 50 GB/s line rate: 47/50.
DEFAULT_LINK_EFFICIENCY = 0.94
#: ECMP hash draws per analysis (docs/model.md), unless the hashed sub-flows times the draws would
#: pass HASH_BUDGET: then fewer, down to MIN_AUTO_SAMPLES.
DEFAULT_HASH_SAMPLES = 16
MIN_AUTO_SAMPLES = 4
HASH_BUDGET = 1 << 22
MAX_HASH_SAMPLES = 256
#: How sub-flows are spread: ECMP hashing, adaptive (ideal pooled) spraying, InfiniBand D-mod-K.
ROUTING_MODES = ("ecmp", "adaptive", "dmodk")
#: ``--routing`` values; ``auto`` is D-mod-K on InfiniBand switch models and ECMP on Ethernet.
ROUTING_CHOICES = ("auto", *ROUTING_MODES)
#: What an ECMP hash takes per queue pair: the RoCEv2 UDP source port, or the destination QP number.
HASH_FIELDS = ("sport", "qpn")
#: Rank orders of a job's nodes.
ORDERS = ("topology", "random")
#: ``--algo`` values: NCCL's choice per size, or one algorithm (NCCL_ALGO).
ALGORITHMS = ("auto", "ring", "tree", "nvls", "nvlstree", "collnetdirect", "collnetchain")
#: ``--proto`` values: NCCL's choice per size, or one protocol (NCCL_PROTO).
PROTOCOL_CHOICES = ("auto", "LL", "LL128", "Simple")
#: Congestion control: ECN/DCQCN (max-min fair) or PFC alone (pause spreading).
CC_MODES = ("ecn", "pfc")
