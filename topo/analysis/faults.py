"""Fault what-ifs: which links are down after failing named devices, ports, or a random fraction.

A fault set is a boolean mask over the fabric's links (``live``); every analysis takes it and treats
a dead link as absent. Failing a switch or a server takes down all its links.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import QUOTE_LIMIT, AnalysisError, close_matches, quote
from ..fabric import Fabric, plane_members


#: Unknown ``--fail`` names that get close matches (the rest are named without them).
UNKNOWN_HINTS = 10


@dataclass(frozen=True, eq=False)
class Faults:
    """Links that are down, and why.

    Attributes
    ----------
    live : ndarray of bool
        One entry per link of ``fabric.links``; False where the link is down.
    failed : tuple of str
        The names given (``switch``, ``node``, or ``device:port`` for one link).
    random_fraction : float
        Fraction of switch-to-switch links failed at random (seeded), 0 for none.
    seed : int
        Seed of the random failures.
    """

    live: np.ndarray
    failed: tuple[str, ...] = ()
    random_fraction: float = 0.0
    seed: int = 0
    dead_vertices: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @property
    def any(self) -> bool:
        """True when at least one link is down."""
        return not bool(self.live.all())

    @property
    def links_down(self) -> int:
        return int((~self.live).sum())

    def to_dict(self) -> dict[str, Any]:
        return {
            "failed": list(self.failed),
            "random_fraction": self.random_fraction,
            "seed": self.seed,
            "links_down": self.links_down,
            "switches_down": int(self.dead_vertices.sum()) if self.dead_vertices.size else 0,
        }


def no_faults(fabric: Fabric) -> Faults:
    """The intact fabric."""
    return Faults(live=np.ones(len(fabric.links), dtype=bool),
                  dead_vertices=np.zeros(len(fabric.names), dtype=bool))


def plane_names(fabric: Fabric) -> list[str]:
    """``--fail`` names of the planes of a multi-plane fabric (``cluster-pl0``, ...; none for one plane):
    failing one fails every switch of that plane and every link into it."""
    planes = fabric.plan.planes
    return [f"{fabric.spec.name}-pl{p}" for p in range(planes)] if planes > 1 else []


def apply_faults(
    fabric: Fabric, fail: Sequence[str] = (), fraction: float = 0.0, seed: int = 0
) -> Faults:
    """Fail named devices or ports, and a seeded random fraction of switch-to-switch links.

    Parameters
    ----------
    fail : sequence of str
        ``NAME`` fails a switch or server (all its links); ``NAME:PORT`` fails the link on that port
        (a switch port number from 1, or a server's NIC index from 0 (with planes, the NIC port's
        device number); every lane of a broken-out port); a plane's name (``cluster-pl1``) fails
        the whole plane.
    fraction : float
        Fraction in [0, 1) of the leaf-spine and spine-core links to fail at random.
    seed : int
        Seed for the random choice; the same seed fails the same links.

    Raises
    ------
    AnalysisError
        For unknown names (with close matches), ports a device does not use, or a bad fraction.

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> fabric = build_fabric(load_spec({"gpus": 256}))
    >>> apply_faults(fabric, ["cluster-spine-01"]).links_down
    64
    >>> apply_faults(fabric, ["cluster-leaf-su00-r0:33"]).links_down
    1
    """
    links = fabric.links
    live = np.ones(len(links), dtype=bool)
    dead = np.zeros(len(fabric.names), dtype=bool)
    problems: list[tuple[int, str]] = []  # (position in ``fail``, line): reported in the order given
    planes = {name: p for p, name in enumerate(plane_names(fabric))}
    # Each name is looked up once and the links are masked once for all of them (vectorised): a
    # mask over every link per name cost 14 ms a name on a 65,536-GPU fabric.
    ports: list[tuple[int, str, str, int, int]] = []  # (position, item, name, vertex, port)
    unknown = 0
    for at, item in enumerate(fail):
        name, _, port_text = item.partition(":")
        vertex = fabric.index.get(name)
        if vertex is None and name in planes and not port_text:
            dead |= fabric.plane == planes[name]
            continue
        if vertex is None:
            unknown += 1  # close matches for the first few only: each compares with every name
            hints = close_matches(name, fabric.names, n=3) if unknown <= UNKNOWN_HINTS else []
            hint = f"; close matches: {', '.join(hints)}" if hints else ""
            planes_hint = f" (planes: {', '.join(planes)})" if planes else ""
            problems.append((at, f"--fail {_shown(item)}: no switch or server named {quote(name)}{hint}{planes_hint}"))
            continue
        if not port_text:
            dead[vertex] = True
            continue
        try:
            port = int(port_text)
        except ValueError:
            problems.append((at, f"--fail {_shown(item)}: port {quote(port_text)} is not a number"))
            continue
        ports.append((at, item, name, vertex, port))
    if dead.any():
        live &= ~dead[links.lo] & ~dead[links.hi]
    if ports:
        problems += _fail_ports(fabric, live, ports)
    if not 0.0 <= fraction < 1.0:
        problems.append((len(fail), f"--fail-random {fraction}: must be a fraction from 0 up to (not including) 1"))
    if problems:
        raise AnalysisError([line for _, line in sorted(problems, key=lambda p: p[0])])
    if fraction > 0:
        candidates = np.flatnonzero(links.kind >= 1)
        count = int(round(fraction * candidates.size))
        rng = np.random.default_rng(seed)
        live[rng.choice(candidates, size=count, replace=False)] = False
    return Faults(live=live, failed=tuple(fail), random_fraction=float(fraction), seed=seed,
                  dead_vertices=dead)


def _shown(item: str) -> str:
    """A ``--fail`` value as an error line shows it: as given, or quoted and cut when long."""
    return item if len(item) <= QUOTE_LIMIT and item.isprintable() else quote(item)


def _fail_ports(fabric: Fabric, live: np.ndarray, ports: list[tuple[int, str, str, int, int]]
                ) -> list[tuple[int, str]]:
    """Take down (in ``live``) the links on the ``(position, item, name, vertex, port)`` ports asked
    for, all at once; the problems of the ports that have no link, with their positions."""
    links, peer = fabric.links, fabric.peer_links
    width = int(max(links.lo_port.max(initial=0), links.hi_port.max(initial=0),
                    peer.lo_port.max(initial=0) if peer is not None and len(peer) else 0)) + 1
    lo_key = links.lo.astype(np.int64) * width + links.lo_port
    hi_key = links.hi.astype(np.int64) * width + links.hi_port
    asked = np.array([v * width + p if 0 <= p < width else -1 for _, _, _, v, p in ports], dtype=np.int64)
    live &= ~(np.isin(lo_key, asked) | np.isin(hi_key, asked))
    found = np.isin(asked, lo_key) | np.isin(asked, hi_key)
    if found.all():
        return []
    # the ports without a link: which ports the device uses, and whether the port is a peer link
    vertices = len(fabric.names)
    low, high = np.full(vertices, np.iinfo(np.int64).max), np.full(vertices, -1, dtype=np.int64)
    for ends, port in ((links.lo, links.lo_port), (links.hi, links.hi_port)):
        np.minimum.at(low, ends, port.astype(np.int64))
        np.maximum.at(high, ends, port.astype(np.int64))
    peer_keys = (np.concatenate([peer.lo.astype(np.int64) * width + peer.lo_port,
                                 peer.hi.astype(np.int64) * width + peer.lo_port])
                 if peer is not None and len(peer) else np.zeros(0, dtype=np.int64))
    is_peer = np.isin(asked, peer_keys) & (asked >= 0)
    problems = []
    for i in np.flatnonzero(~found).tolist():
        at, item, name, vertex, port = ports[i]
        span = f"{low[vertex]}..{high[vertex]}" if high[vertex] >= 0 else "none"
        if is_peer[i]:
            problems.append((at, f"--fail {_shown(item)}: port {port} of {name} is its dual-ToR peer link, which "
                                 f"carries no routed traffic in the model (routed ports: {span})"))
        else:
            problems.append((at, f"--fail {_shown(item)}: {name} has no link on port {port} (ports in use: "
                                 f"{span})"))
    return problems


def plane_faults(fabric: Fabric, faults: Faults, plane: int) -> Faults:
    """``faults`` as they fall on one plane (:func:`topo.fabric.plane_view` of ``plane``)."""
    if fabric.plan.planes == 1:
        return faults
    where, keep = plane_members(fabric, plane)
    dead = faults.dead_vertices[where] if faults.dead_vertices.size else faults.dead_vertices
    return Faults(live=faults.live[keep], failed=faults.failed, random_fraction=faults.random_fraction,
                  seed=faults.seed, dead_vertices=dead)
