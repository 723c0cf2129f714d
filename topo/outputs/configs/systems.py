"""The switch operating systems the configs are written for: a table, one row per OS.

A row (:class:`SwitchOS`) lists the files each switch gets, in order, and the template that makes
each; every template is given the same facts (``sw``: one switch's
:meth:`~topo.outputs.configs.facts.ConfigFacts.switch`, ``fabric``: the facts every switch shares,
``version``). SONiC with FRR is the one row today: ``config_db.json`` from ``templates/sonic/`` and
``frr.conf`` from ``templates/frr/``. A new OS (Arista EOS, NVIDIA Cumulus NVUE) is one more row
and its templates in ``templates/<os>/`` (docs/configs.md, "Adding a switch OS"); the facts and
the rendering job stay as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...fabric import Fabric
from ..templating import TemplateError, render_template


@dataclass(frozen=True)
class SwitchFile:
    """One file of a switch's config: its name in ``switches/<switch>/`` and its template."""

    name: str
    template: str
    chassis: bool = True  #: written for a modular chassis too (whose line cards each run the OS)
    json: bool = False  #: JSON: a user's template's output is parsed, to name the template if it is not


@dataclass(frozen=True)
class SwitchOS:
    """A switch operating system: its name and the files of every switch, in the order written."""

    name: str
    title: str
    files: tuple[SwitchFile, ...]


#: SONiC with FRR: SONiC's ``config_db.json`` (ports, addresses, QoS and buffers) and FRR's
#: ``frr.conf`` (BGP), which is all a chassis gets (SONiC runs one instance per line card of a
#: chassis: its routing only).
SONIC = SwitchOS("sonic", "SONiC with FRR", (
    SwitchFile("config_db.json", "sonic/config_db.json.j2", chassis=False, json=True),
    SwitchFile("frr.conf", "frr/frr.conf.j2"),
))

#: The switch operating systems, by name.
SWITCH_OSES = {row.name: row for row in (SONIC,)}

#: The servers' templated file (output path, template, rendered for).
HOST_OUTPUTS = (("hosts/roce-qos.sh", "host/roce-qos.sh.j2", "the node type"),)

#: Every templated output of the configs: (output path, template, rendered for).
CONFIG_OUTPUTS = tuple((f"switches/<switch>/{f.name}", f.template, "each Ethernet switch")
                       for row in SWITCH_OSES.values() for f in row.files) + HOST_OUTPUTS


def switch_os(fabric: Fabric) -> SwitchOS:
    """The OS the configs of a fabric's switches are written for: SONiC with FRR on every Ethernet
    switch (an InfiniBand fabric gets no switch configs)."""
    return SONIC


def render_switch(system: SwitchOS, env: Any, sw: dict[str, Any], context: dict[str, Any],
                  check: bool) -> list[tuple[str, str]]:
    """One switch's files as ``(path, text)``, in the OS's order; with ``check`` (user templates),
    a JSON file that does not parse is a :class:`~topo.outputs.templating.TemplateError` naming its
    template."""
    out = []
    for f in system.files:
        if sw["chassis"] and not f.chassis:
            continue
        text = render_template(env, f.template, context)
        if f.json and check:
            try:
                json.loads(text)
            except json.JSONDecodeError as exc:
                raise TemplateError(
                    f"template {f.template} made invalid JSON for {sw['name']}: {exc.msg} at "
                    f"line {exc.lineno}, column {exc.colno}") from None
        out.append((f"switches/{sw['name']}/{f.name}", text))
    return out
