"""Fault what-ifs: which links are down after failing named devices, ports, or a random fraction.

A fault set is a boolean mask over the fabric's links (``live``); every analysis takes it and treats
a dead link as absent. Failing a switch or a server takes down all its links.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import AnalysisError, close_matches
from ..fabric import Fabric, plane_members


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
    problems: list[str] = []
    planes = plane_names(fabric)
    for item in fail:
        name, _, port_text = item.partition(":")
        vertex = fabric.index.get(name)
        if vertex is None and name in planes and not port_text:
            in_plane = fabric.plane == planes.index(name)
            dead |= in_plane
            live &= ~in_plane[links.lo] & ~in_plane[links.hi]
            continue
        if vertex is None:
            hints = close_matches(name, fabric.names, n=3)
            hint = f"; close matches: {', '.join(hints)}" if hints else ""
            planes_hint = f" (planes: {', '.join(planes)})" if planes else ""
            problems.append(f"--fail {item}: no switch or server named {name!r}{hint}{planes_hint}")
            continue
        if not port_text:
            dead[vertex] = True
            live &= (links.lo != vertex) & (links.hi != vertex)
            continue
        try:
            port = int(port_text)
        except ValueError:
            problems.append(f"--fail {item}: port {port_text!r} is not a number")
            continue
        at_port = ((links.lo == vertex) & (links.lo_port == port)) | (
            (links.hi == vertex) & (links.hi_port == port)
        )
        if not at_port.any():
            used = np.union1d(links.lo_port[links.lo == vertex], links.hi_port[links.hi == vertex])
            span = f"{used.min()}..{used.max()}" if used.size else "none"
            peer = fabric.peer_links
            if peer is not None and (((peer.lo == vertex) | (peer.hi == vertex)) & (peer.lo_port == port)).any():
                problems.append(f"--fail {item}: port {port} of {name} is its dual-ToR peer link, which carries no "
                                f"routed traffic in the model (routed ports: {span})")
                continue
            problems.append(f"--fail {item}: {name} has no link on port {port} (ports in use: {span})")
            continue
        live &= ~at_port
    if not 0.0 <= fraction < 1.0:
        problems.append(f"--fail-random {fraction}: must be a fraction from 0 up to (not including) 1")
    if problems:
        raise AnalysisError(problems)
    if fraction > 0:
        candidates = np.flatnonzero(links.kind >= 1)
        count = int(round(fraction * candidates.size))
        rng = np.random.default_rng(seed)
        live[rng.choice(candidates, size=count, replace=False)] = False
    return Faults(live=live, failed=tuple(fail), random_fraction=float(fraction), seed=seed,
                  dead_vertices=dead)


def plane_faults(fabric: Fabric, faults: Faults, plane: int) -> Faults:
    """``faults`` as they fall on one plane (:func:`topo.fabric.plane_view` of ``plane``)."""
    if fabric.plan.planes == 1:
        return faults
    where, keep = plane_members(fabric, plane)
    dead = faults.dead_vertices[where] if faults.dead_vertices.size else faults.dead_vertices
    return Faults(live=faults.live[keep], failed=faults.failed, random_fraction=faults.random_fraction,
                  seed=faults.seed, dead_vertices=dead)
