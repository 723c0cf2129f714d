"""The design files of a build folder: the resolved spec, the design, the summary and the analysis.

``spec.yaml`` (``topo build -f spec.yaml`` rebuilds the folder), ``design.json`` (every server,
switch and link with both ends' ports), ``summary.json``, ``analysis.json``, and copies of the
input files the spec names by path (a host-name table, a server profile), which ``spec.yaml``
names instead of the originals. Serialised in Python: a template would only loop.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import yaml

from .. import __version__
from ..fabric import LINK_KINDS, PEER_LINK, Fabric, vertex_attributes
from ..hardware.catalog import server_profiles
from ..inputs import read_text
from ..spec import HOSTNAMES_CSV, PRICES_YAML, FabricSpec
from ..summary import Summary

if TYPE_CHECKING:
    from ..analysis.analyze import Analysis
    from ..cabling import Cabling

#: Folder of a build that holds copies of the inputs the spec names by path (a server profile).
INPUTS = "inputs"


def dump_json(data: Any) -> str:
    """Deterministic, readable JSON (2-space indent, key order as built, trailing newline)."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def design_devices(fabric: Fabric) -> list[dict[str, Any]]:
    """Every server and switch with its graph attributes, in index order (from the arrays: the
    networkx graph is not built)."""
    return [{"name": name, **attrs} for name, attrs in zip(fabric.names, vertex_attributes(fabric), strict=True)]


def design_json(fabric: Fabric, spec: dict[str, Any] | None = None, version: str = __version__) -> str:
    """The resolved design: spec, sizing, devices and every link with both ends' ports.

    One device or link per line, so the file diffs well and stays fast to write at 100,000+ GPUs.
    ``a`` is a link's lower-tier end; ``a_port`` is a NIC index (from 0) on a server and a port
    number (from 1) on a switch; ``lane`` is the breakout lane of the leaf port on node-leaf links.
    With dual-ToR a server's ``a_port`` is its link ``2 * nic + member``, and the peer links
    (``peer-link``, leaf a to leaf b of a pair) close the list.
    ``version`` is the topo version the file names (another one's, to compare with its file).
    """
    links = fabric.links
    names = fabric.names
    head = {
        "topo_version": version,
        "spec": spec if spec is not None else fabric.spec.to_dict(),
        "plan": fabric.plan.to_dict(),
    }
    lines = [dump_json(head).rstrip("\n")[:-2] + ","]  # reopen the object to append the tables
    lines.append('  "devices": [')
    devices = [json.dumps(device, separators=(", ", ": ")) for device in design_devices(fabric)]
    lines.append(",\n".join("    " + d for d in devices))
    lines.append("  ],")
    lines.append('  "links": [')
    kinds = [LINK_KINDS[k] for k in range(len(LINK_KINDS))]
    rows = zip(
        links.kind.tolist(), links.gbps.tolist(), links.lo.tolist(), links.lo_port.tolist(),
        links.hi.tolist(), links.hi_port.tolist(), links.lane.tolist(),
    )
    # the lane key of each kind: a server link's at its leaf ("lane"); a switch-to-switch link's at
    # the end whose port is broken out ("a_lane" or "b_lane"), where tiers of different speeds meet
    plan = fabric.plan
    lane_key = ["lane"] + [("a_lane" if plan.lanes(k)[0] > 1 else "b_lane" if plan.lanes(k)[1] > 1 else None)
                           for k in range(1, len(LINK_KINDS))]
    # names are validated host-name-safe strings, so they need no JSON escaping
    link_lines = [
        f'    {{"kind": "{kinds[k]}", "gbps": {g}, "a": "{names[a]}", "a_port": {ap}, '
        f'"b": "{names[b]}", "b_port": {bp}' + (f', "{lane_key[k]}": {ln}}}' if lane_key[k] else "}")
        for k, g, a, ap, b, bp, ln in rows
    ]
    peer = fabric.peer_links
    if peer is not None:  # dual-ToR: each pair's peer link, leaf a to leaf b on the same ports
        link_lines += [f'    {{"kind": "{PEER_LINK}", "gbps": {g}, "a": "{names[a]}", "a_port": {ap}, '
                       f'"b": "{names[b]}", "b_port": {bp}}}'
                       for g, a, ap, b, bp in zip(peer.gbps.tolist(), peer.lo.tolist(), peer.lo_port.tolist(),
                                                  peer.hi.tolist(), peer.hi_port.tolist())]
    lines.append(",\n".join(link_lines))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def server_file(spec: FabricSpec, base_dir: str | Path | None) -> Path | None:
    """The user's server profile file, when the spec names one (not a shipped profile)."""
    name = spec.server
    if name is None or name in server_profiles():
        return None
    path = Path(name)
    return path if path.is_absolute() or base_dir is None else Path(base_dir) / path


def spec_and_inputs(fabric: Fabric, base_dir: str | Path | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The spec as a build folder records it, and the copies of the input files it names."""
    spec = fabric.spec.to_dict()
    files: dict[str, str] = {}
    profile = server_file(fabric.spec, base_dir)
    if profile is not None:
        copy = f"{INPUTS}/{profile.name}"  # same file name: a profile without name: keeps its name
        files[copy] = read_text(profile)
        spec["server"] = copy
    return spec, files


def core_files(fabric: Fabric, summary: Summary, analysis: "Analysis | None" = None,
               cabling: "Cabling | None" = None, base_dir: str | Path | None = None,
               warnings: "Iterable[Any] | None" = None) -> dict[str, str]:
    """The design files of a build folder (not the configs and other outputs, not README.md).

    Inputs the spec names by path (a host-name table, a server profile) are copied in, and
    ``spec.yaml`` names the copies, so that ``topo build -f spec.yaml`` rebuilds the same folder.
    """
    spec, files = spec_and_inputs(fabric, base_dir)
    summary_data = summary.to_dict()
    if cabling is not None:
        summary_data["cabling"] = cabling.to_dict()
    if warnings is not None:
        summary_data["warnings"] = [w.to_dict() for w in warnings]
    files.update({
        "spec.yaml": yaml.safe_dump(spec, sort_keys=False),
        "design.json": design_json(fabric, spec),
        "summary.json": dump_json(summary_data),
    })
    if analysis is not None:
        files["analysis.json"] = dump_json(analysis.to_dict())
    if fabric.spec.price_table is not None:
        files[PRICES_YAML] = fabric.spec.price_table.to_yaml()
    if fabric.spec.hostname_table is not None:
        files[HOSTNAMES_CSV] = "node,hostname\n" + "".join(
            f"{i},{host}\n" for i, host in enumerate(fabric.spec.hostname_table))
    return files
