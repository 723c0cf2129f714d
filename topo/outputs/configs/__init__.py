"""Switch and host configs: the facts every config template prints, and the rendering of them.

The modules, in the order they build on each other:

``systems``
    the switch operating systems as a table (:data:`~.systems.SWITCH_OSES`): one row per OS, with
    the files every switch gets and their templates. SONiC with FRR today (``config_db.json`` from
    ``templates/sonic/``, ``frr.conf`` from ``templates/frr/``); a new OS is one more row plus its
    templates in ``templates/<os>/`` (docs/configs.md, "Adding a switch OS").
``qos_facts``
    the QoS and buffer facts of each tier: lossless buffer profiles (PFC headroom), buffer layouts,
    the QoS tables and the PFC watchdog.
``facts``
    :class:`ConfigFacts`: one plain dict of facts per switch (hostname, ASN, loopback, every port
    with its name, lanes, speed, peer, /31 and buffer profile, every BGP neighbor, MCLAG), derived
    from the fabric's arrays in bulk and made when the switch's files are rendered, so memory stays
    flat at any size. The templates only lay those facts out.
``hosts``
    the servers' files: ``hosts/roce-qos.sh`` (``templates/host/``) and ``hosts/addresses.csv``.
``job``
    :func:`config_files` and :class:`ConfigJob`: every switch rendered through its OS's row, one
    switch at a time, in one or several processes, then the servers' files.

Modules here import the design stage (``topo.fabric``, ``topo.qos``, ``topo.buffers``, ...) and
the outputs' template environment, manifest and folder writer; nothing imports the orchestration
of a build or the CLI.
"""

from __future__ import annotations

from .facts import PAIR_VLAN, PEER_PORTCHANNEL, SONIC_TYPES, ConfigFacts
from .hosts import DUAL_TOR_ADDRESS_COLUMNS, dual_tor_addresses_csv, host_addresses_csv, host_files, host_node_facts
from .job import CONFIG_CHUNK, ConfigJob, end_with_parent, config_files
from .qos_facts import DEFAULT_BUFFER_MB, QosFacts, buffer_mb, pfc_watchdog
from .systems import CONFIG_OUTPUTS, HOST_OUTPUTS, SONIC, SWITCH_OSES, SwitchFile, SwitchOS, render_switch, switch_os

__all__ = [
    "CONFIG_CHUNK", "CONFIG_OUTPUTS", "ConfigFacts", "ConfigJob", "DEFAULT_BUFFER_MB", "DUAL_TOR_ADDRESS_COLUMNS",
    "HOST_OUTPUTS", "PAIR_VLAN", "PEER_PORTCHANNEL", "QosFacts", "SONIC", "SONIC_TYPES", "SWITCH_OSES", "SwitchFile",
    "SwitchOS", "buffer_mb", "config_files", "dual_tor_addresses_csv", "host_addresses_csv", "host_files",
    "host_node_facts", "pfc_watchdog", "render_switch", "switch_os",
    "end_with_parent",  # also for the what-ifs process of pipeline/apart.py
]
