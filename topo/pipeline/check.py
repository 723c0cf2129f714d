"""``topo check DIR``: a build folder checked whole against the fabric it describes.

A build folder says what it holds in its stamp (``topo-build.json``: every file and its SHA-256).
:func:`check_folder` is the whole check for a user's CI: every file is as the stamp lists it and
nothing else is there; the fabric rebuilt from ``spec.yaml`` renders every file to the same bytes;
and the switch configs on disk agree end to end with the cabling (every switch-to-switch link has a
BGP session on both ends, each naming the other's ASN and address). :func:`check` is the command's
run: the folder's spec loaded and built, analysed when the folder holds an analysis, and checked.
(The quick check ``topo analyze DIR`` makes, :func:`~topo.pipeline.design.design_problems`, is part
of loading a design folder.)
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..fabric import Fabric, switch_port_names
from ..inputs import MAX_SPEC_BYTES
from ..outputs.manifest import MANIFEST, NotABuild, digest, foreign_entries, read_manifest
from .design import file_digest, folder_spec, spec_from
from .progress import SILENT, Progress


#: Most problems of one kind listed by name (the rest are counted).
SHOWN = 10


def _regular(path: str) -> bool:
    """True for a regular file that is not a symbolic link (one ``lstat``)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):  # absent, a name too long, a NUL in it
        return False


@dataclass
class FolderCheck:
    """What :func:`check_folder` found."""

    folder: str
    files: int = 0  #: files the stamp lists
    sessions: int = 0  #: BGP sessions checked end to end (both ends of a switch-to-switch link)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"folder": self.folder, "ok": self.ok, "files": self.files, "bgp_sessions": self.sessions,
                "problems": list(self.problems)}


def _listing(what: str, names: list[str], sep: str = ", ") -> str:
    """``what (count): a, b, c and N more``."""
    shown = sep.join(names[:SHOWN]) + (f" and {len(names) - SHOWN:,} more" if len(names) > SHOWN else "")
    return f"{what} ({len(names):,}): {shown}"


def check_folder(folder: Path, fabric: Fabric, render: Callable[[], Iterable[tuple[str, str]]]) -> FolderCheck:
    """Check a build folder whole.

    Parameters
    ----------
    folder : path
        The build folder.
    fabric : Fabric
        The fabric built from the folder's ``spec.yaml``.
    render : callable
        Makes the folder's file set again (as ``topo build`` made it), as ``(path, text)`` pairs.
    """
    folder = Path(folder)
    report = FolderCheck(str(folder))
    try:
        listed = read_manifest(folder)
    except NotABuild as exc:
        report.problems.append(str(exc))
        return report
    report.files = len(listed)
    missing = [p for p in listed if not _regular(os.path.join(folder, p))]
    absent = set(missing)  # a set: a list here made the check quadratic in the stamp's entries
    changed = [p for p in listed if p not in absent and file_digest(folder / p) != listed[p]]
    foreign = foreign_entries(folder, listed)
    if missing:
        report.problems.append(_listing("missing: files the stamp lists that are not there", missing))
    if changed:
        report.problems.append(_listing("changed since topo wrote them", changed))
    if foreign:
        report.problems.append(_listing("not topo's: files the stamp does not list", foreign))
    edited = [name for name in ("spec.yaml", "design.json") if name in absent or name in changed]
    if edited:
        report.problems.append(f"{' and '.join(edited)} changed, so the rest of the folder cannot be checked "
                               f"against {'it' if len(edited) == 1 else 'them'}; rebuild the folder")
        return report
    rendered: dict[str, str] = {}
    for path, text in render():
        if path != MANIFEST:
            rendered[path] = digest(text)
    differ = sorted(p for p in rendered if p in listed and rendered[p] != listed[p])
    new = sorted(p for p in rendered if p not in listed)
    gone = sorted(p for p in listed if p not in rendered)
    if differ:
        report.problems.append(_listing(f"not what {folder / 'spec.yaml'} gives now (edited, or written by "
                                        f"another topo or with other templates)", differ))
    if new:
        report.problems.append(_listing("absent: files topo writes for this spec that the folder lacks", new))
    if gone:
        report.problems.append(_listing("left over: files topo no longer writes for this spec", gone))
    if fabric.ethernet:
        frr, dbs = {}, {}
        for v in range(fabric.first(1), len(fabric.names)):
            for name, store in (("frr.conf", frr), ("config_db.json", dbs)):
                path = folder / "switches" / fabric.names[v] / name
                if path.is_file() and path.stat().st_size <= 16 * MAX_SPEC_BYTES:
                    store[fabric.names[v]] = path.read_text(encoding="utf-8", errors="replace")
        if frr:
            sessions, problems = bgp_problems(fabric, frr, dbs)
            report.sessions = sessions
            if problems:
                report.problems.append(_listing("BGP sessions that do not match the cabling", problems, "; "))
    return report


def check(design: Path, templates: tuple[Path, ...] = (), jobs: int | None = None,
          progress: Progress = SILENT) -> tuple[FolderCheck, Path]:
    """``topo check DESIGN``: the folder's spec loaded and its fabric built, analysed when the
    folder holds ``analysis.json``, and the folder checked whole (:func:`check_folder`) against the
    files it renders with ``templates`` on ``jobs`` processes. Returns the check and the spec file."""
    from ..addressing import check_addressing
    from ..analysis.analyze import analyze
    from ..fabric import build_fabric
    from ..cabling import plan_cabling
    from ..summary import summarize
    from ..hardware.catalog import resolve_server
    from ..sizing import plan_fabric
    from .build import build_files

    spec_file = folder_spec(design)
    spec = spec_from(spec_file, {}, progress)
    check_addressing(spec, plan_fabric(spec))
    with progress.stage(f"building {spec.gpus:,} GPUs"):
        fabric = build_fabric(spec)
    try:
        listed = read_manifest(design)
    except NotABuild:
        listed = {}
    analysis = None
    server = resolve_server(spec, design)
    if "analysis.json" in listed:
        with progress.stage("analysing"):
            analysis = analyze(fabric, node=server.node_model())
    configs = any(path.startswith("switches/") for path in listed)
    switches = len(fabric.names) - fabric.plan.nodes

    cabling = plan_cabling(fabric)  # once, for the summary and the files

    def render() -> Iterable[tuple[str, str]]:
        return build_files(
            fabric, summarize(fabric, cabling, server), analysis, templates, configs, design, cabling, server,
            progress=progress.counter(f"configs of {switches:,} switches", switches) if configs else None,
            workers=jobs or os.cpu_count() or 1)

    with progress.stage(f"checking {design}/"):
        report = check_folder(design, fabric, render)
    return report, spec_file


# --- BGP end to end ----------------------------------------------------------------------------------


@dataclass
class _Frr:
    asn: int | None
    addresses: dict[str, str]  #: interface -> address (without the prefix length)
    neighbors: dict[str, int]  #: neighbor (an address, or an interface when unnumbered) -> remote-as


def interface_addresses(config_db: str) -> dict[str, str]:
    """Interface -> IPv4 address (without the prefix length) of a config_db.json's INTERFACE table,
    where SONiC keeps the addresses (its keys are ``Ethernet0|10.64.0.1/31``); {} when unreadable."""
    try:
        table = json.loads(config_db).get("INTERFACE", {})
    except (ValueError, AttributeError, RecursionError):  # an edited file, nested too deep: no addresses
        return {}
    out: dict[str, str] = {}
    for key in table if isinstance(table, dict) else ():
        interface, _, prefix = str(key).partition("|")
        if prefix and ":" not in prefix:
            out[interface] = prefix.split("/")[0]
    return out


def read_frr(text: str) -> _Frr:
    """The ASN, interface addresses and BGP neighbors of an frr.conf, as FRR would read them."""
    asn = re.search(r"^router bgp (\d+)$", text, re.M)
    addresses: dict[str, str] = {}
    interface = None
    for line in text.splitlines():
        if line.startswith("interface "):
            interface = line.split()[1]
        elif line.startswith(("exit", "!")):
            interface = None
        elif interface and line.startswith(" ip address "):
            addresses[interface] = line.split()[2].split("/")[0]
    neighbors = {n: int(a) for n, a in re.findall(r"^ neighbor (\S+) remote-as (\d+)$", text, re.M)}
    return _Frr(int(asn.group(1)) if asn else None, addresses, neighbors)


def bgp_problems(fabric: Fabric, frr: dict[str, str], config_dbs: dict[str, str] | None = None
                 ) -> tuple[int, list[str]]:
    """(sessions checked, problems): every switch-to-switch link of ``fabric`` has a BGP session on
    both ends in the frr.conf texts ``frr`` (by switch name), each naming the other end's address
    (or interface, unnumbered) and ASN; and no switch has a session the cabling does not explain.
    The addresses come from the switches' config_db.json texts ``config_dbs`` (SONiC owns them),
    and from the frr.conf where one names them."""
    parsed = {name: read_frr(text) for name, text in frr.items()}
    for name, text in (config_dbs or {}).items():
        if name in parsed:
            parsed[name].addresses.update(interface_addresses(text))
    links, names = fabric.links, fabric.names
    problems: list[str] = []
    expected: dict[str, set[str]] = {name: set() for name in parsed}
    sessions = 0
    rows = [i for i, k in enumerate(links.kind.tolist()) if k >= 1]
    lo, hi = links.lo.tolist(), links.hi.tolist()
    lo_name, hi_name = switch_port_names(fabric, links)  # with each end's breakout lane
    for i in rows:
        ends = ((names[lo[i]], lo_name[i]), (names[hi[i]], hi_name[i]))
        if ends[0][0] not in parsed or ends[1][0] not in parsed:
            continue
        for (me, my_port), (peer, peer_port) in (ends, ends[::-1]):
            mine, theirs = parsed[me], parsed[peer]
            key = my_port if fabric.spec.unnumbered else theirs.addresses.get(peer_port)
            if key is None:
                problems.append(f"{peer}: {peer_port} (the link to {me}:{my_port}) has no address")
                continue
            expected[me].add(key)
            remote = mine.neighbors.get(key)
            if remote is None:
                problems.append(f"{me}: no BGP session to {peer} on {my_port} (neighbor {key})")
            elif remote != theirs.asn:
                problems.append(f"{me}: neighbor {key} ({peer}) has remote-as {remote}, but {peer} is AS {theirs.asn}")
            else:
                sessions += 1
    for name, frr_ in parsed.items():
        extra = sorted(n for n in frr_.neighbors if n not in expected[name])
        if extra:
            problems.append(f"{name}: BGP neighbors no cable explains: {', '.join(extra[:SHOWN])}")
    return sessions, problems
