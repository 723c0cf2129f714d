"""NCCL's all-reduce cost model: per algorithm and protocol, a latency and a bandwidth.

This is the model NCCL's tuner (``src/graph/tuning.cc``, ``ncclTopoTuneModel`` and
``ncclTopoGetAlgoTime``) uses to choose an algorithm and a protocol for every collective, written
out for all-reduce, with NCCL's own constants (:data:`NCCL_VERSION`). NCCL feeds it the graphs its
topology search found (channels, and the bandwidth of one channel inside a node and across nodes);
here the graphs come from :mod:`topo.analysis.collective`, which takes the network bandwidth from
the congestion model. The time of ``n`` bytes is::

    time_us = latency_us(algorithm, protocol) + n / (1000 * bandwidth_GBps(algorithm, protocol))

where the bandwidth is an algorithm bandwidth (bytes moved per second of the caller's buffer), so
nccl-tests' ``busbw = n / time * 2 (N - 1) / N``. Every formula, constant and source line is in
``docs/model.md``. Arrays are indexed ``[algorithm, protocol]`` in NCCL's order (:data:`ALGORITHMS`,
:data:`PROTOCOLS`); a bandwidth of 0 means the pair is not available.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

#: The NCCL release whose tuning constants these are (src/graph/tuning.cc, search.cc, connect.cc).
NCCL_VERSION = "2.30.7"

#: NCCL's algorithm order (NCCL_ALGO names in lower case), without PAT (not used by all-reduce).
ALGORITHMS = ("tree", "ring", "collnetdirect", "collnetchain", "nvls", "nvlstree")
#: NCCL's protocol order (NCCL_PROTO names).
PROTOCOLS = ("LL", "LL128", "Simple")
TREE, RING, COLLNET_DIRECT, COLLNET_CHAIN, NVLS, NVLS_TREE = range(6)
LL, LL128, SIMPLE = range(3)
#: Hardware classes of the latency table.
NVLINK_HW, PCI_HW, NET_HW = range(3)

#: Compute capability classes of NCCL's tables: Volta, Ampere, Hopper, Blackwell.
COMPCAP_NAMES = ("volta", "ampere", "hopper", "blackwell")


def compcap_index(sm: int) -> int:
    """NCCL's compute-capability class of ``sm`` (compute capability x 10).

    >>> [compcap_index(sm) for sm in (70, 80, 86, 90, 100, 103)]
    [0, 1, 1, 2, 3, 3]
    """
    return 3 if sm >= 100 else 2 if sm >= 90 else 1 if sm >= 80 else 0


@dataclass(frozen=True)
class TunerConstants:
    """NCCL's tuning constants (tuning.cc of :data:`NCCL_VERSION`); every field can be overridden.

    Latencies are in microseconds, bandwidths in GB/s. ``base_latency`` and the three
    ``hw_latency`` tables are ``[algorithm][protocol]``; the per-channel caps are
    ``[compute capability class][nodes class]`` with nodes classes 1 node, 2 nodes, more.
    """

    base_latency: tuple = ((6.8, 14.0, 8.4), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0))
    hw_latency_nvlink: tuple = ((0.6, 1.25, 4.0), (0.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25))
    hw_latency_pci: tuple = ((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0))
    hw_latency_net: tuple = ((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 20.9))
    #: LL bandwidth cap: [Volta-1 node / Intel-2 nodes / Intel-more, Ampere / AMD, Hopper / AMD, Blackwell / AMD]
    ll_max_bw: tuple = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
    per_channel_ring_ll128: tuple = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0))
    per_channel_tree_ll128: tuple = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
    per_channel_tree: tuple = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
    per_channel_nvls_tree: tuple = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0))
    nvls_efficiency: tuple = (0.0, 0.0, 0.85, 0.74)
    #: Tree bandwidth correction by log2(bytes / 64), per protocol (ncclTopoGetAlgoTime).
    tree_correction: tuple = (
        (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
        (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
        (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
    )
    #: NCCL_NET_OVERHEAD default by CPU: x86 Intel 1 us, x86 AMD 2 us, others 1 us (x3 for Simple).
    net_overhead_intel: float = 1.0
    net_overhead_amd: float = 2.0
    net_overhead_other: float = 1.0
    #: Ring Simple latency multiplier once every channel moves 64 bytes or more per rank (plateau).
    ring_plateau: tuple = (1.9, 1.4)  # before Ampere, Ampere and later

    def table(self, name: str) -> np.ndarray:
        return np.asarray(getattr(self, name), dtype=np.float64)

    def with_overrides(self, overrides: dict[str, Any]) -> "TunerConstants":
        """A copy with some tables replaced; each must have the shape of the default."""
        from ..errors import quote

        problems = []
        for key, value in overrides.items():
            if key not in _CONSTANT_FIELDS:
                problems.append(f"{quote(key)}: not a tuner constant (known: {', '.join(_CONSTANT_FIELDS)})")
                continue
            default = np.asarray(getattr(self, key), dtype=np.float64)
            try:
                array = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                problems.append(f"{key}: expected numbers shaped like the default {default.shape}")
                continue
            if array.shape != default.shape:
                problems.append(f"{key}: expected {default.size} numbers shaped {default.shape}, "
                                f"got shape {array.shape}")
            elif not np.all(np.isfinite(array)) or (array < 0).any():
                bad = array[~np.isfinite(array) | (array < 0)].ravel()[0]
                problems.append(f"{key}: every number must be finite and 0 or more, got {bad}")
        if problems:
            raise ValueError(problems)
        return replace(self, **{k: _as_tuple(np.asarray(v, dtype=np.float64)) for k, v in overrides.items()})


def load_constants(path: str) -> TunerConstants:
    """Tuner constants with the tables a YAML file gives (``name: nested list``) replacing the defaults.

    Raises
    ------
    AnalysisError
        For an unreadable file, malformed YAML, an unknown table or one of the wrong shape.
    """
    from ..errors import AnalysisError, TopoError
    from ..inputs import InputFileError, read_text, shown_path
    from ..spec import parse_yaml
    flag = f"--nccl-constants {shown_path(path)}"
    try:
        text = read_text(path)
    except InputFileError as exc:
        raise AnalysisError([f"--nccl-constants {exc}"]) from None
    try:
        data = parse_yaml(text, flag)
    except TopoError as exc:
        raise AnalysisError([f"{flag}: {line}" if not line.startswith(flag) else line
                             for line in exc.lines]) from None
    if not isinstance(data, dict) or not data:
        raise AnalysisError([f"{flag}: expected a mapping of tuner tables (known: {', '.join(_CONSTANT_FIELDS)})"])
    try:
        return DEFAULT_CONSTANTS.with_overrides({str(k): v for k, v in data.items()})
    except ValueError as exc:
        raise AnalysisError([f"{flag}: {problem}" for problem in exc.args[0]]) from None


def _as_tuple(array: np.ndarray) -> Any:
    return float(array) if array.ndim == 0 else tuple(_as_tuple(a) for a in array)


_CONSTANT_FIELDS = tuple(f for f in TunerConstants.__dataclass_fields__)
DEFAULT_CONSTANTS = TunerConstants()


@dataclass(frozen=True)
class Graph:
    """What NCCL's topology search reports for one algorithm.

    ``channels`` is the graph's channel count (before NCCL duplicates channels for the
    communicator); ``bw_intra`` and ``bw_inter`` are GB/s of one channel inside a node and across
    nodes; ``nvlink`` says the intra-node path is NVLink (else PCI); ``latency_inter`` is extra
    network latency in microseconds (NCCL adds it once per network step, twice for Simple).
    """

    channels: int
    bw_intra: float
    bw_inter: float
    nvlink: bool = True
    latency_inter: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"channels": self.channels, "bw_intra_GBps": round(self.bw_intra, 3),
                "bw_inter_GBps": round(self.bw_inter, 3), "nvlink": self.nvlink,
                "latency_inter_us": round(self.latency_inter, 3)}


@dataclass(frozen=True)
class Comm:
    """The communicator as the tuner sees it."""

    nodes: int
    ranks: int
    sm: int
    cpu_vendor: str = "intel"  #: intel, amd, arm, mixed or other
    channels: int = 0  #: the communicator's channels (after duplication), for the ring plateau
    net_overhead_us: float | None = None  #: NCCL_NET_OVERHEAD; None for NCCL's default by CPU


@dataclass(frozen=True, eq=False)
class Model:
    """Bandwidth (algbw, GB/s) and latency (us) per [algorithm, protocol] for one communicator."""

    comm: Comm
    graphs: dict[int, Graph] = field(repr=False)
    bandwidth: np.ndarray = field(repr=False)
    latency: np.ndarray = field(repr=False)
    constants: TunerConstants = field(repr=False, default=DEFAULT_CONSTANTS)

    def times_us(self, sizes: np.ndarray) -> np.ndarray:
        """Time of every [algorithm, protocol] for each size: shape (6, 3, sizes); inf where unavailable."""
        return algo_times(self, np.asarray(sizes, dtype=np.float64))

    def choose(self, sizes: np.ndarray, algorithms: tuple[int, ...] | None = None,
               protocols: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The fastest (algorithm, protocol) per size among those allowed, as NCCL's tuner picks.

        Returns the algorithm index, the protocol index and the time (us) per size. Ties go to
        the first pair in NCCL's order, as NCCL keeps the first minimum it finds.
        """
        times = self.times_us(sizes).copy()
        if algorithms is not None:
            mask = np.ones(len(ALGORITHMS), dtype=bool)
            mask[list(algorithms)] = False
            times[mask] = np.inf
        if protocols is not None:
            mask = np.ones(len(PROTOCOLS), dtype=bool)
            mask[list(protocols)] = False
            times[:, mask] = np.inf
        flat = times.reshape(len(ALGORITHMS) * len(PROTOCOLS), -1)
        best = np.argmin(flat, axis=0)
        chosen = flat[best, np.arange(flat.shape[1])]
        return best // len(PROTOCOLS), best % len(PROTOCOLS), chosen


def _log2i(n: int) -> int:
    return int(n).bit_length() - 1 if n > 0 else -1


def tune(comm: Comm, graphs: dict[int, Graph], constants: TunerConstants = DEFAULT_CONSTANTS,
         enabled: dict[int, bool] | None = None, ll128: bool = True, tree_cap: bool = True) -> Model:
    """Bandwidths and latencies of all-reduce, as ``ncclTopoTuneModel`` computes them.

    ``graphs`` maps an algorithm index to its :class:`Graph`; an algorithm without a graph, or
    disabled in ``enabled``, gets bandwidth 0. ``ll128`` says whether LL128 is enabled (NCCL
    enables it by default on NVLink nodes of Volta and later). ``tree_cap=False`` leaves out the
    per-channel Tree cap (``perChMaxTreeBw``), which steers NCCL's choice but is not a limit of
    the hardware (docs/model.md: the achieved times).

    Examples
    --------
    Two nodes of 8 GPUs, 8 ring channels of 48 GB/s (an NDR 400G NIC each):

    >>> g = Graph(8, 48.0, 48.0)
    >>> m = tune(Comm(nodes=2, ranks=16, sm=90, channels=16), {RING: g, TREE: g})
    >>> round(float(m.bandwidth[RING, SIMPLE]), 1), round(float(m.latency[RING, LL]), 1)
    (204.8, 40.0)
    """
    c = constants
    nodes, ranks = comm.nodes, comm.ranks
    cc = compcap_index(comm.sm)
    bandwidth = np.zeros((len(ALGORITHMS), len(PROTOCOLS)))
    latency = np.zeros((len(ALGORITHMS), len(PROTOCOLS)))
    if ranks <= 1:
        return Model(comm, graphs, bandwidth, latency, c)
    index2 = nodes - 1 if nodes <= 2 else 2
    amd = comm.cpu_vendor in ("amd", "mixed")
    index1 = cc if nodes == 1 else (1 if amd else 0)
    if comm.net_overhead_us is not None:
        overhead = comm.net_overhead_us
    else:
        overhead = {"intel": c.net_overhead_intel, "amd": c.net_overhead_amd}.get(comm.cpu_vendor,
                                                                                  c.net_overhead_other)
    k = _Tables(nodes=nodes, ranks=ranks, sm=comm.sm, ppn=ranks / nodes, nsteps=2 * (ranks - 1),
                ll_max=c.table("ll_max_bw")[index1, index2], ch_tree=c.table("per_channel_tree")[cc, index2],
                ch_ring_ll128=c.table("per_channel_ring_ll128")[cc, index2],
                ch_tree_ll128=c.table("per_channel_tree_ll128")[cc, index2],
                ch_nvls_tree=c.table("per_channel_nvls_tree")[cc, index2],
                nvls_eff=c.table("nvls_efficiency")[cc], overhead=overhead,
                hw=(c.table("hw_latency_nvlink"), c.table("hw_latency_pci"), c.table("hw_latency_net")),
                base=c.table("base_latency"), tree_cap=tree_cap)
    for a, graph in sorted(graphs.items()):
        if graph is None or graph.channels <= 0 or (enabled is not None and not enabled.get(a, True)):
            continue
        for p in range(len(PROTOCOLS)):
            if a in (NVLS, NVLS_TREE) and p != SIMPLE:
                continue
            if a in (COLLNET_DIRECT, COLLNET_CHAIN) and p != SIMPLE:
                continue
            if p == LL128 and not ll128:
                continue
            bus = _bus_bandwidth(k, a, p, graph)
            if bus is None:
                continue
            ratio = ranks / k.nsteps if a in (RING, NVLS, NVLS_TREE) else 0.5
            bandwidth[a, p] = bus * ratio
            latency[a, p] = _latency(k, a, p, graph)
    return Model(comm, graphs, bandwidth, latency, c)


class _Tables(NamedTuple):
    """What :func:`tune` reads for every algorithm and protocol of one communicator."""

    nodes: int
    ranks: int
    sm: int
    ppn: float
    nsteps: int
    ll_max: float
    ch_tree: float
    ch_ring_ll128: float
    ch_tree_ll128: float
    ch_nvls_tree: float
    nvls_eff: float
    overhead: float
    hw: tuple[np.ndarray, np.ndarray, np.ndarray]  #: NVLink, PCI and network hardware latencies
    base: np.ndarray
    tree_cap: bool


def _bus_bandwidth(k: _Tables, a: int, p: int, graph: Graph) -> float | None:
    """The bus bandwidth of algorithm ``a`` with protocol ``p`` (before NCCL's ratio), or None
    when the algorithm does not run (NVLS with fewer than two channels)."""
    nodes = k.nodes
    collnet = a in (COLLNET_DIRECT, COLLNET_CHAIN)
    bw = graph.bw_intra if nodes <= 2 or collnet else graph.bw_inter
    if a in (NVLS, NVLS_TREE):
        if graph.channels < 2:
            return None
        intra = graph.bw_intra * k.nvls_eff * (graph.channels - 1) / graph.channels * 2.0
        inter = graph.bw_inter * (2 if nodes <= 2 and a == NVLS_TREE else 1)
        bw = min(intra, inter, k.ch_nvls_tree if a == NVLS_TREE else math.inf)
    bus = graph.channels * bw
    if a == RING and p == LL:
        bus = min(k.ll_max, bus * 0.5)
    if a == RING and p == LL128:
        bus = min(bus * 0.92, graph.channels * k.ch_ring_ll128)
    if a == TREE:
        bus = min(bus * 0.92, graph.channels * k.ch_tree if k.tree_cap else math.inf)
    if a == TREE and p == LL:
        bus = min(bus / 3.8, k.ll_max)
    if a == TREE and p == LL128:
        bus = min(bus * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0), graph.channels * k.ch_tree_ll128)
    if a == COLLNET_DIRECT:
        factor = k.ppn / graph.channels  # GPUs per NIC
        factor -= (factor - 1) / 2
        bus /= factor
        if k.sm >= 90:
            bus *= 0.85
    return bus


def _latency(k: _Tables, a: int, p: int, graph: Graph) -> float:
    """The latency (us) of algorithm ``a`` with protocol ``p``."""
    nodes, ranks = k.nodes, k.ranks
    intra_hw = NVLINK_HW if graph.nvlink else PCI_HW
    lat = k.base[a, p]
    intra_lat = k.hw[intra_hw][a, p]
    inter_lat = (k.hw[NET_HW][TREE, p] if k.ppn == 1 else k.hw[NET_HW][a, p]) + graph.latency_inter
    if p == SIMPLE:
        inter_lat += graph.latency_inter  # the flush
    if a == RING:
        net = k.overhead * (3 if p == SIMPLE else 1) if nodes > 1 else 0.0
        intra_lat = max(intra_lat, net)
        inter_steps = 0 if nodes == 1 else 2 * (nodes - 1)
        lat += (k.nsteps - inter_steps) * intra_lat + inter_steps * inter_lat
    elif a == TREE:
        lat += 2 * ((ranks // nodes - 1) * intra_lat + _log2i(nodes) * inter_lat)
    elif a == COLLNET_DIRECT:
        local = ranks // nodes - 1
        lat += 2 * (min(1, local) * intra_lat + local * 0.4) + inter_lat
    elif a == COLLNET_CHAIN:
        lat += 2 * (ranks // nodes - 1) * intra_lat + inter_lat
    elif a == NVLS:
        lat = intra_lat + (inter_lat if nodes > 1 else 0.0)
    elif a == NVLS_TREE:
        lat += intra_lat + 2 * _log2i(nodes) * inter_lat
    return lat


def algo_times(model: Model, sizes: np.ndarray) -> np.ndarray:
    """``ncclTopoGetAlgoTime`` for one operation of each size: shape (algorithms, protocols, sizes)."""
    c = model.constants
    comm = model.comm
    bw = np.broadcast_to(model.bandwidth[:, :, None], (*model.bandwidth.shape, sizes.size)).copy()
    lat = np.broadcast_to(model.latency[:, :, None], bw.shape).copy()
    log_size = np.array([_log2i(int(s) >> 6) for s in sizes])
    correction = c.table("tree_correction")
    inside = (log_size >= 0) & (log_size < 23)
    for p in range(len(PROTOCOLS)):
        factor = np.ones(sizes.size)
        factor[inside] = correction[p, log_size[inside]]
        bw[TREE, p] *= factor
        if comm.sm >= 100:  # NVLSTree on Blackwell x86 hosts
            nvls_inside = (log_size >= 0) & (log_size < 24)
            f2 = np.ones(sizes.size)
            f2[nvls_inside] = correction[p, log_size[nvls_inside]]
            if comm.cpu_vendor in ("intel", "amd", "mixed"):
                bw[NVLS_TREE, p] *= f2
    if comm.nodes > 1 and comm.channels > 0:
        plateau = sizes / (comm.channels * comm.ranks) >= 64
        lat[RING, SIMPLE] *= np.where(plateau, c.ring_plateau[0 if comm.sm < 80 else 1], 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        time = lat + sizes[None, None, :] / (1000.0 * bw)
    return np.where(bw > 0, time, np.inf)


def bus_bandwidth(algbw: np.ndarray | float, ranks: int) -> np.ndarray | float:
    """nccl-tests all-reduce bus bandwidth: ``algbw * 2(n-1)/n``."""
    return algbw * 2 * (ranks - 1) / ranks


def duplicate_channels(channels: int, bw_intra: float, sm: int, max_channels: int = 64) -> tuple[int, float]:
    """``ncclTopoDupChannels``: NCCL doubles a graph's channels (halving their bandwidth) when fast.

    >>> duplicate_channels(8, 48.0, 90), duplicate_channels(4, 48.0, 90), duplicate_channels(8, 96.0, 100)
    ((8, 48.0), (8, 24.0), (16, 48.0))
    """
    if channels == 0 or bw_intra < 25.0 or (sm > 80 and bw_intra < 50.0 and channels > 4):
        return channels, bw_intra
    dup = min(2 * channels, max_channels)
    return dup, bw_intra / math.ceil(dup / channels)


def comm_channels(graph_channels: int, ring_bw_intra: float, sm: int, nodes: int, max_channels: int = 64) -> int:
    """The communicator's channels from the ring graph's (``ncclTopoPostset``): twice the graph's, and
    twice again on Hopper and later across nodes when a channel is faster than 45 GB/s and fewer
    than 16.

    >>> comm_channels(8, 48.0, 90, 2), comm_channels(8, 24.0, 90, 2), comm_channels(4, 48.0, 90, 4)
    (16, 16, 16)
    """
    channels = min(max_channels, 2 * graph_channels)
    if sm >= 90 and nodes > 1 and ring_bw_intra > 45.0 and channels < 16:
        channels = min(max_channels, 2 * channels)
    return channels


#: NCCL's search speeds (GB/s per channel) for intra-node graphs, by compute capability class.
SPEEDS_INTRA = {
    0: (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    2: (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    3: (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
SPEEDS_INTRA[1] = SPEEDS_INTRA[0]


def search_speed(limit: float, sm: int) -> float:
    """The largest of NCCL's intra-node search speeds at or below ``limit`` (its smallest if none).

    >>> search_speed(46.35, 90), search_speed(112.8, 100), search_speed(1.0, 90)
    (40.0, 90.0, 3.0)
    """
    speeds = SPEEDS_INTRA[compcap_index(sm)]
    return next((s for s in speeds if s <= limit), speeds[-1])
