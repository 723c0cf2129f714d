"""Where concurrent groups of GPUs sit on a fabric: their servers (or NVLink domains) and NICs.

A group is a row of global GPU ranks (GPU ``r mod g`` of server ``r // g`` in fabric order, ``g``
GPUs a server). :func:`gpu_nics` gives each GPU's NICs; :func:`group_shape` gives, for groups that
run at once, the NICs each group uses in each domain it touches, as the all-reduce model takes them
(:mod:`topo.analysis.pricing` prices collectives of such groups).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import AnalysisError


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
class GroupShape:
    """Where some groups sit: ``nic_map`` (groups, domains, nics) and the members per domain."""

    nic_map: np.ndarray
    members: int  #: GPUs of a group in one domain
    domains: int


def group_shape(groups: np.ndarray, per_node: int, nics: int, domain: int, name: str) -> GroupShape:
    """The groups' NICs per domain (of ``domain`` GPUs). A group's GPUs in one domain use their own
    NICs (GPU ``r`` of a server: NIC ``r nics / per_node``). Every group must have the same number
    of GPUs in each domain it touches (as NCCL's rings need, and any sensible layout gives):
    AnalysisError otherwise, naming the groups (``name``) and the sizes."""
    what = "NVLink domains" if domain > per_node else "servers"
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
        raise AnalysisError([f"{name} groups of {size} ranks split unevenly over {what} of "
                             f"{domain} GPUs (one has {', '.join(map(str, per.tolist()))} in its {per.size}); "
                             f"choose tp, cp, ep and pp so that each group's share of a {what[:-1]} is the same"])
    own = gpu_nics(groups, per_node, nics)  # (count, size, k)
    nic = np.sort(own.reshape(count, m, p * own.shape[-1]), axis=2)
    # a domain's share of a group uses each distinct NIC of its members once (on a server with
    # fewer NICs than GPUs, GPUs that share a NIC share its connections)
    q = int(np.unique(nic[0, 0]).size)
    if q < nic.shape[2]:
        nic = nic[:, :, ::nic.shape[2] // q]
    return GroupShape(np.ascontiguousarray(nic[:, :, :q]), p, m)
