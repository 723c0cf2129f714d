"""Reading a server profile: a user's YAML file (``--server FILE``), checked to the last value.

A profile lists the CPUs (one per NUMA node, as NCCL's ``<cpu>``), the PCIe switches under each,
and the GPUs and fabric NICs under each switch, with the values NCCL reads: bus ids, PCIe link
speed and width, the GPU's compute capability and NVLinks, the NIC's RDMA device name, port, speed
and GUID. The shipped profiles (``topo/data/hardware/servers.yaml``, read by
:mod:`topo.hardware.catalog`) have the same schema, and are read by the same code. Everything is
checked when a profile is read, and all problems are reported at once in one
:class:`~topo.errors.SpecError`. A profile file is user input: every number in it is bounded before
anything is computed from it (CPU numbers below MAX_CPUS, masks of at most MAX_MASK_WORDS words, at
most MAX_ENTRIES NUMA nodes, switches, GPUs and NICs), error lines quote values with
:func:`~topo.errors.quote`, and a YAML alias is never expanded (docs/nccl.md, "Bounds").

Derived facts, computed here so that the writer only prints them:

* GPU ``dev`` (NVML index): the GPU's position in bus-id order, unless given.
* NIC ``name``: ``mlx5_<i>`` with ``i`` its position in bus-id order, unless given.
* NIC ``rail``: from its GPU, as the fabric pairs them: with ``g`` GPUs and ``n`` NICs per node,
  GPU ``d`` uses NIC ``d * n // g`` (several GPUs per NIC), or NICs ``d * k ... d * k + k - 1``
  with ``k = n // g`` (several NICs per GPU). Every GPU must share a PCIe switch with its NICs.
* NIC ``guid``: ``0x`` and the first 16 hex digits of the SHA-256 of ``nic-guid:<busid>``, unless
  given: stable, and unique because bus ids are.
* CPU ``affinity``: NCCL's hex-word mask, computed from a Linux ``cpulist`` when one is given.

:func:`generic_profile` builds a profile from counts alone, for a spec that names none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Mapping

from ..errors import SpecError, did_you_mean, key_name, quote
from ..inputs import InputFileError, read_text, shown_path
from ..yamlio import parse_yaml  # YAML without base-60 numbers: 0000:16:00.0 stays a string
from .gpus import Gpu
from .nvlink import MAX_NVLINK_BW, MAX_NVSWITCH_GENERATION
from .pcie import GENERIC_PCIE_WIDTHS, LINK_SPEEDS, PCIE_GENERATIONS, pcie_link_for, pcie_mbps
from .servers import Cpu, GpuSlot, Nic, PciSwitch, ServerProfile, nic_guid, rails_of_gpu

#: Bus id in the form NCCL compares against: domain, bus, device (0-1f), function (0-7), lower case.
BUSID_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]")
#: Linux's most CPUs (CONFIG_NR_CPUS at its maximum): CPU numbers run from 0 to 8191.
MAX_CPUS = 8192
#: An affinity mask has a 32-bit hex word per 32 CPUs: at most 256 words, 2,303 characters with commas.
MAX_MASK_WORDS = MAX_CPUS // 32
MAX_MASK_CHARS = 9 * MAX_MASK_WORDS - 1
#: Longest cpulist that names each CPU below MAX_CPUS once, one by one: "0,1,2,...,8191".
MAX_CPULIST_CHARS = len(",".join(map(str, range(MAX_CPUS))))
#: Most NUMA nodes (Linux's MAX_NUMNODES at its maximum), and most PCIe switches, GPUs or NICs, a profile
#: may list: far above what one NCCL file holds (255 elements), low enough that reading stays fast.
MAX_ENTRIES = 1024
#: Most problems one error shows of a profile (the last line says how many more there are).
MAX_PROBLEMS = 100
#: CPU architectures and x86 vendors NCCL knows (topo.cc kvDictCpuArch / kvDictCpuVendor).
ARCHS = ("x86_64", "arm64", "ppc64")
X86_VENDORS = ("GenuineIntel", "AuthenticAMD", "CentaurHauls", "  Shanghai  ")
#: Vendor/device id attributes a switch may carry, in the order they are written.
SWITCH_IDS = ("vendor", "device", "subsystem_vendor", "subsystem_device")

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
_NIC_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}")
_HEX_RE = re.compile(r"0x[0-9a-f]+")
_MASK_RE = re.compile(r"[0-9a-f]{8}(,[0-9a-f]{8})*")
_CPULIST_RE = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")
_SAFE_TEXT_RE = re.compile(r"[ -~]{1,200}")  # printable ASCII, no quotes checked separately


def cpulist_to_mask(cpus: set[int], words: int) -> str:
    """A set of CPU numbers as NCCL's affinity mask: 32-bit hex words, most significant first.

    >>> cpulist_to_mask(set(range(48)), 3)
    '00000000,0000ffff,ffffffff'
    """
    return _bits_to_mask(sum(1 << c for c in cpus), words)


def _bits_to_mask(value: int, words: int) -> str:
    """CPUs as the bits of an int (CPU n is bit n) in NCCL's mask form, ``words`` 32-bit words."""
    return ",".join(f"{(value >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


def _cpu_number(text: str) -> int:
    """One CPU number of a cpulist, refused at MAX_CPUS or above before it is converted or used."""
    if not text.isdigit() or not text.isascii():
        raise ValueError(f"{quote(text)} is not a CPU number")
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_CPUS)) or int(digits) >= MAX_CPUS:
        shown = text if len(text) <= 20 else text[:17] + "..."
        raise ValueError(f"CPU {shown} is {MAX_CPUS} or more; Linux numbers at most {MAX_CPUS} CPUs "
                         f"(0 to {MAX_CPUS - 1}, CONFIG_NR_CPUS)")
    return int(digits)


def parse_cpulist(text: str) -> set[int]:
    """A Linux cpulist (``0-55,112-167``) as a set of CPU numbers.

    Every number is checked before a range is expanded: CPUs are numbered below MAX_CPUS (8192),
    and a list naming more than MAX_CPUS CPUs, or longer than MAX_CPULIST_CHARS, is refused.

    >>> sorted(parse_cpulist("0-2,8"))
    [0, 1, 2, 8]
    >>> parse_cpulist("0-300000000")
    Traceback (most recent call last):
    ...
    ValueError: CPU 300000000 is 8192 or more; Linux numbers at most 8192 CPUs (0 to 8191, CONFIG_NR_CPUS)
    """
    bits = _cpulist_bits(text)
    return {i for i in range(bits.bit_length()) if bits >> i & 1}


def _cpulist_bits(text: str) -> int:
    """A cpulist as an int whose bit n is CPU n (checked as :func:`parse_cpulist` says)."""
    if len(text) > MAX_CPULIST_CHARS:
        raise ValueError(f"{len(text):,} characters; a list of CPUs below {MAX_CPUS} that names each once "
                         f"has at most {MAX_CPULIST_CHARS:,}")
    bits = listed = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        first, last = _cpu_number(lo), _cpu_number(hi or lo)
        if last < first:
            raise ValueError(f"range {part} runs backwards")
        listed += last - first + 1
        if listed > MAX_CPUS:
            raise ValueError(f"names more than {MAX_CPUS} CPUs, more than Linux has (CONFIG_NR_CPUS)")
        bits |= (1 << (last + 1)) - (1 << first)
    return bits


# --- reading a profile ------------------------------------------------------------------------------


class _Reader:
    """Checks one profile mapping, collecting every problem with the field it is in."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.problems: list[str] = []

    def bad(self, field: str, message: str) -> None:
        self.problems.append(f"{self.where}: {field}: {message}")

    def reported(self) -> list[str]:
        """The problems as the error shows them: at most MAX_PROBLEMS lines, the last saying how many more."""
        if len(self.problems) <= MAX_PROBLEMS:
            return list(self.problems)
        more = len(self.problems) - (MAX_PROBLEMS - 1)
        return self.problems[:MAX_PROBLEMS - 1] + [f"{self.where}: and {more:,} more problems"]

    def mapping(self, value: Any, field: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.bad(field, f"expected a mapping, got {quote(value)}")
            return {}
        for key in value:
            if key not in allowed:
                hint = did_you_mean(key, allowed) if isinstance(key, str) else ""
                self.bad(field, f"unknown key {key_name(key)}{hint}; known: {', '.join(allowed)}")
        return dict(value)

    def integer(self, value: Any, field: str, low: int, high: int, default: Any = ...) -> Any:
        if value is None and default is not ...:
            return default
        if value is None:
            self.bad(field, f"required (a whole number from {low} to {high})")
            return low
        if isinstance(value, bool) or not isinstance(value, int):
            self.bad(field, f"expected a whole number from {low} to {high}, got {quote(value)}")
            return low
        if not low <= value <= high:
            self.bad(field, f"must be from {low} to {high}, got {quote(value)}")
        return value

    def number(self, value: Any, field: str, high: float) -> float | None:
        """An optional number above 0 and at most ``high`` (int or float, never a bool), as a float."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.bad(field, f"expected a number above 0 and at most {high:,}, got {quote(value)}")
            return None
        if not 0 < value <= high:  # false for NaN too
            self.bad(field, f"must be above 0 and at most {high:,}, got {quote(value)}")
            return None
        return float(value)

    def flag(self, value: Any, field: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool):
            return int(value)
        if value in (0, 1):
            return int(value)
        self.bad(field, f"expected 0 or 1, got {quote(value)}")
        return None

    def busid(self, value: Any, field: str) -> str:
        if isinstance(value, str) and BUSID_RE.fullmatch(value):
            return value
        hint = ""
        if isinstance(value, str):
            fixed = _normal_busid(value)
            if fixed:
                hint = f"; write {quote(fixed)}"
        self.bad(field, f"{quote(value)} is not a bus id as NCCL compares them: dddd:bb:dd.f in lower-case "
                        f"hex, e.g. '0000:1b:00.0'{hint}")
        return ""

    def link_speed(self, value: Any, field: str) -> str:
        if isinstance(value, str) and value in LINK_SPEEDS:
            return value
        if value is None:
            self.bad(field, "required, e.g. '32.0 GT/s PCIe' (Gen5) or '16.0 GT/s PCIe' (Gen4)")
            return ""
        self.bad(field, f"{quote(value)} is not in NCCL's link_speed dictionary (NCCL would read it as "
                        f"PCIe Gen3); use one of '16.0 GT/s PCIe', '32.0 GT/s PCIe', '64.0 GT/s PCIe', ...")
        return ""

    def hex_id(self, value: Any, field: str, digits: int) -> str:
        """A hex id of at most ``digits`` hex digits (4 for vendor ids, 6 for a class, 16 for a GUID)."""
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 16 ** digits:
            return f"0x{value:0{digits}x}"
        if isinstance(value, str) and len(value) <= digits + 2 and _HEX_RE.fullmatch(value.lower()):
            return value.lower()
        self.bad(field, f"expected a hex number of at most {digits} digits such as "
                        f"'0x{'0' * (digits - 1)}1', got {quote(value)}")
        return "0x0"

    def text(self, value: Any, field: str, pattern: re.Pattern = _SAFE_TEXT_RE) -> str:
        if isinstance(value, str) and pattern.fullmatch(value) and not set(value) & set("\"'<>&"):
            return value
        self.bad(field, f"expected plain text without quotes or <>&, got {quote(value)}")
        return ""


def _some(items: list[str], limit: int = 8) -> str:
    """Items joined with ", ", the first ``limit`` of them and "..." when there are more."""
    return ", ".join(items[:limit]) + (", ..." if len(items) > limit else "")


_shown_path = shown_path


def _normal_busid(text: str) -> str | None:
    """``00000000:1B:00.0`` (nvidia-smi) or ``1b:00.0`` (lspci) in NCCL's form, if it is one."""
    m = re.fullmatch(r"(?:([0-9A-Fa-f]{4,8}):)?([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])", text.strip())
    if not m:
        return None
    domain = int(m.group(1) or "0", 16)
    if domain > 0xFFFF:
        return None
    fixed = f"{domain:04x}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"
    return fixed if BUSID_RE.fullmatch(fixed) else None


_PROFILE_KEYS = ("name", "description", "gpu_model", "nvlink_domain", "power_w", "gpu", "nic", "switch", "cpus",
                 "socket_ifname")
#: Most watts a profile's ``power_w`` may give (a rack of an NVL72 system is about 140 kW).
MAX_SYSTEM_WATTS = 1_000_000
#: Most GPUs one NVLink domain of a profile may join (``nvlink_domain``): far above NVIDIA's largest
#: announced NVLink domain (576 GPUs), low enough that a domain is never a typo of a GPU count.
MAX_NVLINK_DOMAIN = 4096
_GPU_KEYS = ("busid", "dev", "sm", "gdr", "nvlink", "link_speed", "link_width", "nvlink_bw", "nvswitch")
_NIC_KEYS = ("busid", "name", "port", "speed_mbps", "guid", "gdr", "link_speed", "link_width", "class")
_SWITCH_KEYS = ("busid", "link_speed", "link_width", *SWITCH_IDS, "gpus", "nics")
_CPU_KEYS = ("numaid", "cpulist", "affinity", "arch", "vendor", "familyid", "modelid", "switches")


def profile_from_dict(name: str, data: Any, source: str, gpu_models: Mapping[str, Gpu] | None = None) -> ServerProfile:
    """Check one profile mapping (the schema of docs/nccl.md) and build the profile.

    ``gpu_models`` is the GPU catalogue (:func:`topo.hardware.catalog.gpu_catalog`) a
    ``gpu_model`` key must name a GPU of; the named model's ``sm``, NVLink bandwidth and NVSwitch
    generation stand in for those the GPU entries leave out (:meth:`ServerProfile.node_model`).
    None: the name is not checked (the catalogue's own loader, :mod:`topo.hardware.catalog`,
    always gives it).

    Raises
    ------
    SpecError
        One line per problem, each naming the profile, the field and the value.
    """
    r = _Reader(f"server profile {quote(name)}" + ("" if source == "shipped" else f" ({_shown_path(source)})"))
    top, description, socket_ifname = _read_top_level(r, name, data)
    # first pass: read every entry; GPU dev and NIC name/rail need the whole server
    rows = _read_rows(r, top)
    _check_busids(r, rows)
    _check_gpu_nic_counts(r, len(rows.gpus), len(rows.nics))
    devs = _assign_gpu_devs(r, rows.gpus)
    gpus = _build_gpus(r, rows.gpus, devs)
    rails = _assign_nic_rails(r, rows.switches, devs, len(rows.nics))
    nics = _build_nics(r, rows.nics, rails)
    switches = _build_switches(r, rows.switches, gpus, nics)
    cpus = _read_cpus(r, rows.cpus, switches)
    gpu_model = _read_gpu_model(r, top.get("gpu_model"), gpu_models)
    nvlink_domain = _read_nvlink_domain(r, top.get("nvlink_domain"), len(rows.gpus))
    power_w = None if top.get("power_w") is None else r.integer(top.get("power_w"), "power_w", 1, MAX_SYSTEM_WATTS)
    if r.problems:
        raise SpecError(r.reported())
    model = gpu_models.get(gpu_model) if gpu_models is not None and gpu_model is not None else None
    return ServerProfile(name=name, description=description, cpus=tuple(cpus),
                         socket_ifname=socket_ifname, source=source, gpu_model=gpu_model,
                         nvlink_domain=nvlink_domain, power_w=power_w,
                         gpu_figures=None if model is None else (model.sm, float(model.nvlink_GBps), model.nvswitch))


def _read_gpu_model(r: _Reader, value: Any, known: Mapping[str, Gpu] | None) -> str | None:
    """The profile's ``gpu_model``: a GPU of the catalogue (``topo train --list``), when given."""
    if value is None:
        return None
    names = sorted(known) if known is not None else None
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value) or (names is not None and value not in names):
        hint = did_you_mean(value, names) if isinstance(value, str) and names else ""
        listed = f"; known: {', '.join(names)}" if names else ""
        r.bad("gpu_model", f"unknown GPU model {quote(value)}{hint}{listed} (the GPU catalogue, topo train --list)")
        return None
    return value


def _read_nvlink_domain(r: _Reader, value: Any, gpus: int) -> int | None:
    """The profile's ``nvlink_domain``: GPUs one NVLink fabric joins, when given. It holds whole
    servers (a multiple of the server's GPUs: 72 for an NVL72 rack of 4-GPU trays) or divides the
    server (8 on an HGX board; 2 for GPUs paired by NVLink bridges)."""
    if value is None:
        return None
    domain = r.integer(value, "nvlink_domain", 1, MAX_NVLINK_DOMAIN)
    if gpus and 1 <= domain <= MAX_NVLINK_DOMAIN and domain % gpus and gpus % domain:
        r.bad("nvlink_domain", f"{domain} GPUs is neither a whole number of servers of {gpus} GPUs nor a "
                               f"divisor of {gpus}: an NVLink domain joins whole servers (72 for an NVL72 "
                               f"rack of 4-GPU trays) or part of one")
    return domain


@dataclass
class _Rows:
    """A profile's entries in file order, not yet checked (the ``gpu``/``nic``/``switch`` defaults merged in).

    Attributes
    ----------
    gpus, nics : list of (field, values)
    switches : list of (field, values, GPU row indices, NIC row indices)
    cpus : list of (field, values, switch row indices)
    """

    gpus: list[tuple[str, dict]]
    nics: list[tuple[str, dict]]
    switches: list[tuple[str, dict, list[int], list[int]]]
    cpus: list[tuple[str, dict, list[int]]]


def _read_top_level(r: _Reader, name: str, data: Any) -> tuple[dict[str, Any], str, str | None]:
    """Check the profile's name, that it is a mapping, its description and socket_ifname.

    Returns
    -------
    (top-level mapping, description, socket_ifname)
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        r.bad("name", f"{quote(name)} must be lower-case letters, digits, '.', '_' or '-' (it names files)")
        name = ""
    top = r.mapping(data, "profile", _PROFILE_KEYS)
    if not top and not r.problems:
        r.bad("profile", "is empty")
    description = top.get("description", name)
    if not isinstance(description, str) or "\n" in description or len(description) > 200:
        r.bad("description", f"expected one line of text, got {quote(description)}")
        description = ""
    socket_ifname = top.get("socket_ifname")
    if socket_ifname is not None:
        socket_ifname = r.text(socket_ifname, "socket_ifname", re.compile(r"[=^]?[A-Za-z0-9_.,:=-]{1,100}"))
    return top, description, socket_ifname


def _read_rows(r: _Reader, top: dict[str, Any]) -> _Rows:
    """Read the raw cpus, switches, GPUs and NICs from the nested mapping into flat rows."""
    gpu_d = r.mapping(top.get("gpu"), "gpu", _GPU_KEYS[1:])
    nic_d = r.mapping(top.get("nic"), "nic", _NIC_KEYS[1:])
    sw_d = r.mapping(top.get("switch"), "switch", _SWITCH_KEYS[1:-2])
    cpus_raw = top.get("cpus")
    if not isinstance(cpus_raw, list) or not cpus_raw:
        r.bad("cpus", f"expected a list with one entry per NUMA node, got {quote(cpus_raw)}")
        cpus_raw = []
    _bound_entries(r, "cpus", 0, len(cpus_raw), "NUMA nodes", "Linux's MAX_NUMNODES")
    rows = _Rows(gpus=[], nics=[], switches=[], cpus=[])
    for i, c in enumerate(cpus_raw):
        cf = f"cpus[{i}]"
        c = r.mapping(c, cf, _CPU_KEYS)
        switches_raw = c.get("switches")
        if not isinstance(switches_raw, list) or not switches_raw:
            r.bad(f"{cf}.switches", f"expected a list of PCIe switches, got {quote(switches_raw)}")
            switches_raw = []
        _bound_entries(r, f"{cf}.switches", len(rows.switches), len(switches_raw), "PCIe switches")
        sw_idx = [_read_switch_row(r, f"{cf}.switches[{j}]", s, rows, sw_d, gpu_d, nic_d)
                  for j, s in enumerate(switches_raw)]
        rows.cpus.append((cf, c, sw_idx))
    return rows


def _bound_entries(r: _Reader, field: str, before: int, count: int, what: str,
                   why: str = "one NCCL topology file holds 255 elements") -> None:
    """Stop reading (SpecError now) when ``count`` more entries would take the profile past MAX_ENTRIES
    ``what``: checked before the entries are read, so that aliases cannot multiply the work."""
    total = before + count
    if total > MAX_ENTRIES:
        so_far = " in the profile by here" if before else ""
        r.bad(field, f"{total:,} {what}{so_far}; a server profile holds at most {MAX_ENTRIES:,} ({why})")
        raise SpecError(r.reported())


def _read_switch_row(r: _Reader, sf: str, s: Any, rows: _Rows, sw_d: dict, gpu_d: dict, nic_d: dict) -> int:
    """Add one switch entry and the GPU and NIC entries under it to ``rows``; return the switch's index."""
    s = r.mapping(s, sf, _SWITCH_KEYS)
    merged = {**sw_d, **{k: v for k, v in s.items() if k not in ("gpus", "nics")}}
    g_idx = _read_device_rows(r, f"{sf}.gpus", s.get("gpus"), rows.gpus, _GPU_KEYS, gpu_d)
    n_idx = _read_device_rows(r, f"{sf}.nics", s.get("nics"), rows.nics, _NIC_KEYS, nic_d)
    rows.switches.append((sf, merged, g_idx, n_idx))
    return len(rows.switches) - 1


def _read_device_rows(r: _Reader, field: str, items: Any, rows: list[tuple[str, dict]],
                      keys: tuple[str, ...], defaults: dict) -> list[int]:
    """Add a switch's GPU or NIC entries (bus ids or mappings) to ``rows``; return their row indices."""
    if not isinstance(items, list) or not items:
        r.bad(field, f"expected a list of bus ids (each switch pairs GPUs with their NICs), "
                     f"got {quote(items)}")
        return []
    _bound_entries(r, field, len(rows), len(items), "GPUs" if keys is _GPU_KEYS else "NICs")
    indices = []
    for k, item in enumerate(items):
        f = f"{field}[{k}]"
        entry = {"busid": item} if not isinstance(item, Mapping) else r.mapping(item, f, keys)
        indices.append(len(rows))
        rows.append((f, {**defaults, **entry}))
    return indices


def _check_busids(r: _Reader, rows: _Rows) -> None:
    """Check that every switch, GPU and NIC bus id is well-formed and unique (stores the checked value)."""
    seen: dict[str, str] = {}
    entries = [(f"{f}.busid", v) for f, v, *_ in rows.switches] + rows.gpus + rows.nics
    for f, values in entries:
        values["busid"] = r.busid(values.get("busid"), f)
        if not values["busid"]:
            continue
        if values["busid"] in seen:
            r.bad(f, f"bus id {values['busid']} is also {seen[values['busid']]}")
        else:
            seen[values["busid"]] = f


def _check_gpu_nic_counts(r: _Reader, n_gpus: int, n_nics: int) -> None:
    """Check that the GPU count divides the NIC count or the other way round."""
    if n_gpus and n_nics and n_gpus % n_nics and n_nics % n_gpus:
        r.bad("cpus", f"{n_gpus} GPUs and {n_nics} NICs: one must divide the other so that every GPU "
                      f"has the same share of NICs")


def _assign_gpu_devs(r: _Reader, gpu_rows: list[tuple[str, dict]]) -> list[int]:
    """Each GPU's ``dev``: given, or its position in bus-id order (NVML's order); all 0 to n-1, each once."""
    n_gpus = len(gpu_rows)
    by_bus = sorted(range(n_gpus), key=lambda i: gpu_rows[i][1]["busid"])
    devs = [0] * n_gpus
    for order, i in enumerate(by_bus):
        f, v = gpu_rows[i]
        devs[i] = r.integer(v.get("dev"), f"{f}.dev", 0, max(n_gpus - 1, 0), default=order)
    if sorted(devs) != list(range(n_gpus)) and n_gpus:
        r.bad("gpus", f"GPU dev values {quote(sorted(devs))} must be 0 to {n_gpus - 1}, each once")
    return devs


def _build_gpus(r: _Reader, gpu_rows: list[tuple[str, dict]], devs: list[int]) -> list[GpuSlot]:
    """The GpuSlot objects, in row order, with their sm, gdr, NVLinks, PCIe link, NVLink bandwidth and
    NVSwitch generation checked."""
    gpus: list[GpuSlot] = []
    for i, (f, v) in enumerate(gpu_rows):
        sm = v.get("sm")
        gpus.append(GpuSlot(
            busid=v["busid"], dev=devs[i],
            sm=None if sm is None else r.integer(sm, f"{f}.sm", 10, 1000),
            gdr=r.flag(v.get("gdr"), f"{f}.gdr"),
            nvlink=r.integer(v.get("nvlink"), f"{f}.nvlink", 0, 64, default=0),
            link_speed=r.link_speed(v.get("link_speed"), f"{f}.link_speed"),
            link_width=r.integer(v.get("link_width"), f"{f}.link_width", 1, 32),
            nvlink_bw=r.number(v.get("nvlink_bw"), f"{f}.nvlink_bw", MAX_NVLINK_BW),
            nvswitch=r.integer(v.get("nvswitch"), f"{f}.nvswitch", 0, MAX_NVSWITCH_GENERATION, default=None),
        ))
    return gpus


def _assign_nic_rails(r: _Reader, switch_rows: list[tuple[str, dict, list[int], list[int]]], devs: list[int],
                      n_nics: int) -> list[int | None]:
    """Each NIC's rail, from the GPUs under the same PCIe switch; None where it cannot be decided.

    Rails are only decided when the counts fit and the GPU ``dev`` values are 0 to n-1.
    """
    n_gpus = len(devs)
    rails: list[int | None] = [None] * n_nics
    if n_gpus and n_nics and not (n_gpus % n_nics and n_nics % n_gpus) and sorted(devs) == list(range(n_gpus)):
        users: dict[int, set[int]] = {}  # rail -> the GPU rows that use it, built once
        for i, dev in enumerate(devs):
            for rail in rails_of_gpu(dev, n_gpus, n_nics):
                users.setdefault(rail, set()).add(i)
        for sf, _, g_idx, n_idx in switch_rows:
            if not g_idx or not n_idx:
                continue
            for rail, i in zip(_switch_rails(r, sf, g_idx, n_idx, devs, n_nics, users), n_idx):
                rails[i] = rail
    return rails


def _switch_rails(r: _Reader, sf: str, g_idx: list[int], n_idx: list[int], devs: list[int],
                  n_nics: int, users: dict[int, set[int]]) -> list[int]:
    """The rails of one switch's NICs: those its GPUs use, if no other GPU uses them and the NIC count fits.

    Returns ``[]`` (after reporting the problem) when the switch does not pair its GPUs with their NICs.
    """
    n_gpus = len(devs)
    want = sorted({rail for i in g_idx for rail in rails_of_gpu(devs[i], n_gpus, n_nics)})
    owners = set().union(*(users[rail] for rail in want))
    here = {i for i in g_idx}
    if owners != here or len(want) != len(n_idx):
        names = _some([f"GPU {devs[i]}" for i in sorted(g_idx, key=lambda i: devs[i])])
        others = sorted(devs[i] for i in owners - here)
        share = f"; GPU {_some(list(map(str, others)))} use the same NIC and must be under this switch too" \
            if others else ""
        r.bad(sf, f"holds {names} and {len(n_idx)} NIC(s), but in a {n_gpus}-GPU {n_nics}-NIC "
                  f"server they use {len(want)} NIC(s) (rail {_some(list(map(str, want)))}){share}")
        return []
    return want


def _build_nics(r: _Reader, nic_rows: list[tuple[str, dict]], rails: list[int | None]) -> list[Nic]:
    """The Nic objects in row order: name (given or ``mlx5_<bus-id order>``), GUID and class checked."""
    n_nics = len(nic_rows)
    nic_order = {i: k for k, i in enumerate(sorted(range(n_nics), key=lambda i: nic_rows[i][1]["busid"]))}
    nics: list[Nic] = []
    names_seen: dict[str, str] = {}
    guids_seen: dict[str, str] = {}
    for i, (f, v) in enumerate(nic_rows):
        nic_name = r.text(v.get("name", f"mlx5_{nic_order[i]}"), f"{f}.name", _NIC_NAME_RE)
        if nic_name and nic_name in names_seen:
            r.bad(f"{f}.name", f"{nic_name} is also the name of {names_seen[nic_name]}")
        names_seen.setdefault(nic_name, f)
        guid = r.hex_id(v["guid"], f"{f}.guid", 16) if v.get("guid") is not None else nic_guid(v["busid"])
        if guid in guids_seen:
            r.bad(f"{f}.guid", f"{guid} is also the GUID of {guids_seen[guid]}; NCCL would take them for "
                               f"one NIC")
        guids_seen.setdefault(guid, f)
        pci_class = _read_nic_class(r, v.get("class"), f"{f}.class")
        before = len(r.problems)
        speed_mbps = r.integer(v.get("speed_mbps"), f"{f}.speed_mbps", 1000, 100_000_000)
        link_speed = r.link_speed(v.get("link_speed"), f"{f}.link_speed")
        link_width = r.integer(v.get("link_width"), f"{f}.link_width", 1, 32)
        if len(r.problems) == before:  # all three read and in range
            _check_nic_link(r, f, speed_mbps, link_speed, link_width)
        nics.append(Nic(
            busid=v["busid"], name=nic_name, rail=rails[i] if rails[i] is not None else -1,
            port=r.integer(v.get("port"), f"{f}.port", 1, 255, default=1),
            speed_mbps=speed_mbps, guid=guid, gdr=r.flag(v.get("gdr"), f"{f}.gdr"),
            link_speed=link_speed, link_width=link_width, pci_class=pci_class,
        ))
    return nics


def _check_nic_link(r: _Reader, field: str, speed_mbps: int, link_speed: str, link_width: int) -> None:
    """Refuse a NIC whose PCIe link cannot carry its speed: the server could not feed the fabric at the
    NIC speed the design counts on (and NCCL plans with the slower of the two)."""
    carries = pcie_mbps(link_speed, link_width)
    if carries >= speed_mbps:
        return
    fit = next((speed for speed, _ in PCIE_GENERATIONS if pcie_mbps(speed, link_width) >= speed_mbps), None)
    need = (f"at link_width {link_width} it needs {fit} ({pcie_mbps(fit, link_width):,} Mb/s)" if fit else
            f"no link_speed carries it at link_width {link_width}")
    r.bad(f"{field}.link_speed", f"{link_speed} at link_width {link_width} carries {carries:,} Mb/s, less than "
                                 f"speed_mbps {speed_mbps:,}; {need}, or lower nic_gbps to what the link carries")


def _read_nic_class(r: _Reader, pci_class: Any, field: str) -> str | None:
    """A NIC's PCI class, when given: a hex id of a network controller (``0x02....``)."""
    if pci_class is not None:
        pci_class = r.hex_id(pci_class, field, 6)
        if not pci_class.startswith("0x02"):
            r.bad(field, f"{pci_class} is not a network controller class (0x02....)")
    return pci_class


def _build_switches(r: _Reader, switch_rows: list[tuple[str, dict, list[int], list[int]]], gpus: list[GpuSlot],
                    nics: list[Nic]) -> list[PciSwitch]:
    """The PciSwitch objects, in row order, with their PCIe link and vendor/device ids checked."""
    switches: list[PciSwitch] = []
    for sf, v, g_idx, n_idx in switch_rows:
        ids = tuple((key, r.hex_id(v[key], f"{sf}.{key}", 4)) for key in SWITCH_IDS if v.get(key) is not None)
        switches.append(PciSwitch(
            busid=v["busid"], link_speed=r.link_speed(v.get("link_speed"), f"{sf}.link_speed"),
            link_width=r.integer(v.get("link_width"), f"{sf}.link_width", 1, 32),
            ids=ids, gpus=tuple(gpus[i] for i in g_idx), nics=tuple(nics[i] for i in n_idx),
        ))
    return switches


def _read_cpus(r: _Reader, cpu_rows: list, switches: list[PciSwitch]) -> list[Cpu]:
    # CPU sets as ints, bit n for CPU n (below MAX_CPUS): overlaps and masks are one operation each
    cpulists: dict[int, int] = {}
    masks: dict[int, str] = {}  # masks given as such are written as given
    taken = 0  # the CPUs of the NUMA nodes kept so far
    parsed: dict[tuple[str, str], int] = {}  # a list given several times (YAML aliases) is read once
    for i, (cf, c, _) in enumerate(cpu_rows):
        bits = _read_cpu_bits(r, cf, c, masks, i, parsed)
        if bits is None:
            continue
        if not bits:
            r.bad(cf, "has no CPUs")
        shared = bits & taken
        if shared:  # checked as each list is read, so that the CPUs kept never exceed MAX_CPUS
            n = (shared & -shared).bit_length() - 1
            r.bad(cf, f"CPU {n} is also in {next(cpu_rows[j][0] for j in cpulists if cpulists[j] >> n & 1)}")
            masks.pop(i, None)
            continue
        taken |= bits
        cpulists[i] = bits
    words = max(1, (taken.bit_length() + 31) // 32)

    cpus: list[Cpu] = []
    numaids: dict[int, str] = {}
    for i, (cf, c, sw_idx) in enumerate(cpu_rows):
        numaid = r.integer(c.get("numaid"), f"{cf}.numaid", -1, 4095)
        if numaid in numaids:
            r.bad(f"{cf}.numaid", f"{quote(numaid)} is also the numaid of {numaids[numaid]}")
        numaids.setdefault(numaid, cf)
        arch = c.get("arch")
        if arch not in ARCHS:
            r.bad(f"{cf}.arch", f"expected one of {', '.join(ARCHS)}, got {quote(arch)}")
            arch = ""
        vendor, familyid, modelid = c.get("vendor"), c.get("familyid"), c.get("modelid")
        if arch == "x86_64":
            if vendor not in X86_VENDORS:
                r.bad(f"{cf}.vendor", f"expected one of GenuineIntel, AuthenticAMD, CentaurHauls (NCCL takes "
                                      f"an unknown x86 vendor for a free inter-socket link), got {quote(vendor)}")
            for key, value in (("familyid", familyid), ("modelid", modelid)):
                if value is None:
                    r.bad(f"{cf}.{key}", "required on x86_64 (decimal CPUID value, e.g. familyid 6, modelid "
                                         "143 for Sapphire Rapids): NCCL uses it for the inter-socket bandwidth")
        if vendor is not None and arch != "x86_64":
            vendor = r.text(vendor, f"{cf}.vendor")
        familyid = None if familyid is None else r.integer(familyid, f"{cf}.familyid", 0, 4095)
        modelid = None if modelid is None else r.integer(modelid, f"{cf}.modelid", 0, 4095)
        affinity = masks.get(i) or (_bits_to_mask(cpulists[i], words) if i in cpulists else "")
        cpus.append(Cpu(numaid=numaid, affinity=affinity, arch=arch, vendor=vendor,
                        familyid=familyid, modelid=modelid,
                        switches=tuple(switches[j] for j in sw_idx)))
    return cpus


def _read_cpu_bits(r: _Reader, cf: str, c: dict, masks: dict[int, str], i: int,
                   parsed: dict[tuple[str, str], int]) -> int | None:
    """The CPUs of one NUMA node (bit n for CPU n), from its cpulist or affinity mask; None after
    reporting a problem.

    Both are bounded before they are parsed: a cpulist's numbers below MAX_CPUS (before a range is
    expanded) and its length, a mask's length (at most MAX_MASK_WORDS words).
    """
    cpulist, affinity = c.get("cpulist"), c.get("affinity")
    if (cpulist is None) == (affinity is None):
        r.bad(cf, "give either cpulist (as in /sys/devices/system/node/nodeN/cpulist, e.g. 0-55,112-167) "
                  "or affinity (NCCL's hex-word mask, e.g. 00000000,0000ffff,ffffffff)")
        return None
    if cpulist is not None:
        try:
            if isinstance(cpulist, bool) or not isinstance(cpulist, (str, int)):
                raise ValueError("expected numbers and ranges such as 0-55,112-167")
            text = str(cpulist).replace(" ", "")  # an int has at most 4,300 digits (Python's limit)
            if len(text) > MAX_CPULIST_CHARS:
                return _cpulist_bits(text)  # raises, saying how long it is
            if ("cpulist", text) not in parsed:
                if not _CPULIST_RE.fullmatch(text):
                    raise ValueError("expected numbers and ranges such as 0-55,112-167")
                parsed["cpulist", text] = _cpulist_bits(text)
            return parsed["cpulist", text]
        except ValueError as exc:
            r.bad(f"{cf}.cpulist", f"{quote(cpulist)}: {exc}")
            return None
    if isinstance(affinity, int) and not isinstance(affinity, bool):
        affinity = str(affinity)  # e.g. 11111111, which YAML reads as a number
    if isinstance(affinity, str) and len(affinity) > MAX_MASK_CHARS:
        r.bad(f"{cf}.affinity", f"{quote(affinity)} is {len(affinity):,} characters long; a mask has at most "
                                f"{MAX_MASK_WORDS} hex words ({MAX_CPUS} CPUs, CONFIG_NR_CPUS), "
                                f"{MAX_MASK_CHARS:,} characters")
        return None
    mask = affinity.lower() if isinstance(affinity, str) else ""
    if not _MASK_RE.fullmatch(mask):
        r.bad(f"{cf}.affinity", f"{quote(affinity)} is not a hex-word mask such as "
                                f"00000000,0000ffff,ffffffff (8 hex digits per 32 CPUs, as in "
                                f"/sys/devices/system/node/nodeN/cpumap; '0-47' style is misread by NCCL)")
        return None
    masks[i] = mask
    if ("affinity", mask) not in parsed:
        parsed["affinity", mask] = int(mask.replace(",", ""), 16)
    return parsed["affinity", mask]


def read_profile_text(text: str, source: str, default_name: str,
                      gpu_models: Mapping[str, Gpu] | None = None) -> ServerProfile:
    """A profile from YAML text: one profile (``name:`` optional) or a one-entry ``name: profile`` map."""
    shown = _shown_path(source)
    data = parse_yaml(text, f"server: profile file {shown}")
    if not isinstance(data, Mapping) or not data:
        raise SpecError([f"server: profile file {shown}: expected a server profile (a mapping with cpus: "
                         f"...), got {type(data).__name__ if data is not None else 'an empty file'}"])
    if "cpus" in data:
        name = data.get("name", default_name)
        body = {k: v for k, v in data.items() if k != "name"}
        return profile_from_dict(_name_text(name), body, source, gpu_models)
    if len(data) != 1:  # its keys are named only when they are profile names, never a line of text
        keys = list(islice(data, 9))
        named = all(isinstance(k, str) and _NAME_RE.fullmatch(k) for k in keys)
        raise SpecError([f"server: profile file {shown}: holds {len(data)} profiles"
                         + (f" ({_some(keys)})" if named else "") + "; a profile file describes one server type"])
    (name, body), = data.items()
    if not (isinstance(body, Mapping) and "cpus" in body or isinstance(_name_text(name), str)
            and _NAME_RE.fullmatch(_name_text(name))):
        raise SpecError([f"server: profile file {shown}: not a server profile (no cpus: at the top level, and "
                         f"its one entry is not a profile name with cpus: under it)"])
    return profile_from_dict(_name_text(name), body, source, gpu_models)


def _name_text(name: Any) -> Any:
    """A profile name as text: a number as its digits; anything else as it is, for the name check."""
    return str(name) if isinstance(name, (int, float)) else name


def load_server_profile(path: str | Path, gpu_models: Mapping[str, Gpu] | None = None) -> ServerProfile:
    """Read a user's profile file (same schema as ``topo/data/hardware/servers.yaml``, see docs/nccl.md);
    ``gpu_models`` as :func:`profile_from_dict` takes them."""
    path = Path(path)
    try:  # a regular file of at most MAX_SPEC_BYTES: never a FIFO that blocks or a /dev/zero
        text = read_text(path)
    except InputFileError as exc:  # "<path>: cannot read it (...)", "<path> is not a regular file ..."
        message, shown = str(exc), str(path)
        if message.startswith(shown):
            message = _shown_path(shown) + message[len(shown):]
        raise SpecError([f"server: profile file {message}"]) from None
    except ValueError as exc:  # a path with a NUL byte
        raise SpecError([f"server: profile file {_shown_path(path)}: cannot read it ({exc})"]) from None
    stem = re.sub(r"[^a-z0-9._-]+", "-", path.stem.lower()).strip("-._") or "server"
    return read_profile_text(text, str(path), stem, gpu_models)


def generic_profile(gpus: int, nics: int, nic_gbps: int) -> ServerProfile:
    """A profile from counts alone: the pairing is right, bus ids and CPU values are placeholders.

    One PCIe switch per ``min(gpus, nics)`` group, each in its own PCI domain (``000N:``), split over
    two NUMA nodes when the count is even. GPUs get no ``sm``, ``gdr`` or NVLinks, so NCCL detects
    them; the CPUs are described as x86_64 Intel Sapphire Rapids, which NCCL needs to be told for
    a NUMA node whose GPUs are not its own. Every PCIe link (GPU, NIC, switch) is the one
    :func:`pcie_link_for` gives the NIC speed: the lowest generation from Gen3 that carries it.
    Not for installing as it is (see docs/nccl.md).

    Raises
    ------
    SpecError
        When no PCIe link NCCL knows carries the NIC speed, or the counts are beyond MAX_ENTRIES.

    >>> p = generic_profile(4, 8, 200)
    >>> p.name, p.gpu_count, p.nic_count, [n.name for n in p.nics_of_gpu(1)]
    ('generic-4gpu-8nic', 4, 8, ['mlx5_2', 'mlx5_3'])
    >>> p.nics[0].link_speed, p.nics[0].link_width, p.gpus[0].link_speed, p.switches[0].link_speed
    ('16.0 GT/s PCIe', 16, '16.0 GT/s PCIe', '16.0 GT/s PCIe')
    """
    for count, what in ((gpus, "gpus_per_node"), (nics, "nics_per_node")):
        if not 1 <= count <= MAX_ENTRIES:
            raise SpecError([f"server: a generic profile has 1 to {MAX_ENTRIES:,} GPUs and NICs, but "
                             f"{what}={count:,}"])
    link = pcie_link_for(nic_gbps * 1000)
    if link is None:
        top, width = PCIE_GENERATIONS[-1][0], GENERIC_PCIE_WIDTHS[-1]
        raise SpecError([f"server: no PCIe link NCCL knows carries a {nic_gbps:,} Gb/s NIC (nic_gbps={nic_gbps}): "
                         f"the fastest, {top} x{width}, carries {pcie_mbps(top, width) // 1000:,} Gb/s, so "
                         f"topo cannot write an NCCL topology file for it"])
    link_speed, link_width = link
    groups = min(gpus, nics)
    sockets = 2 if groups % 2 == 0 else 1
    per_socket = groups // sockets
    g_per, n_per = gpus // groups, nics // groups

    def switch(k: int) -> dict[str, Any]:
        return {"busid": f"{k + 1:04x}:00:00.0",
                "gpus": [f"{k + 1:04x}:{0x10 + j:02x}:00.0" for j in range(g_per)],
                "nics": [f"{k + 1:04x}:{0x80 + j:02x}:00.0" for j in range(n_per)]}

    cores = 64
    body = {
        "description": f"generic {gpus}-GPU {nics}-NIC server (placeholder bus ids and CPU model)",
        "gpu": {"link_speed": link_speed, "link_width": link_width},
        "nic": {"speed_mbps": nic_gbps * 1000, "port": 1, "link_speed": link_speed, "link_width": link_width},
        "switch": {"link_speed": link_speed, "link_width": link_width, **{k: "0xffff" for k in SWITCH_IDS}},
        "cpus": [{"numaid": s, "cpulist": f"{s * cores}-{s * cores + cores - 1}", "arch": "x86_64",
                  "vendor": "GenuineIntel", "familyid": 6, "modelid": 143,
                  "switches": [switch(s * per_socket + k) for k in range(per_socket)]}
                 for s in range(sockets)],
    }
    return profile_from_dict(f"generic-{gpus}gpu-{nics}nic", body, "generic")
