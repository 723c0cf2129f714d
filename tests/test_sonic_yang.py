"""SONiC's own schema: every config_db.json topo renders passes libyang's validation.

SONiC checks a config_db.json (``config load``, ``config reload``, the generic config updater) by
translating each CONFIG_DB table into YANG JSON instance data of the module that models it and
validating the whole tree with libyang. This file does the same translation (read from the YANG
files themselves: no list of tables or types is written here) and runs ``yanglint`` on the result.
The 146 modules of sonic-yang-models are reference data outside the repository
(``../shared/reference/sonic-yang/``; see SOURCES.md there); without them, or without ``yanglint``
(Debian's libyang2-tools, installed by ``bash scripts/test.sh``), the tests are skipped.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import CliRunner

from topo import build_fabric, load_spec
from topo.catalog import platform_catalog, switch_catalog
from topo.spec import tier_switch
from topo.cli import main
from topo.outputs.configs import config_files

SONIC_YANG = Path(__file__).resolve().parent.parent.parent / "shared" / "reference" / "sonic-yang"
MODELS = SONIC_YANG / "models"
YANGLINT = shutil.which("yanglint")

pytestmark = [
    pytest.mark.skipif(not MODELS.is_dir(), reason=f"SONiC's YANG models are not at {MODELS} (reference data "
                                                   "outside the repository)"),
    pytest.mark.skipif(YANGLINT is None, reason="yanglint is not installed (Debian package libyang2-tools; "
                                                "bash scripts/test.sh installs it)"),
]


# --- Reading YANG: statements, modules, the data tree of each table -------------------------------------

class Stmt(NamedTuple):
    """One YANG statement: ``keyword argument { children }``."""

    keyword: str
    arg: str | None
    children: tuple[Stmt, ...]

    def find(self, keyword: str) -> Stmt | None:
        return next((c for c in self.children if c.keyword == keyword), None)


_TOKEN = re.compile(r"""
    \s+ | //[^\n]* | /\*.*?\*/            # blanks and comments
  | "(?P<dq>(?:[^"\\]|\\.)*)"             # a double-quoted string
  | '(?P<sq>[^']*)'                       # a single-quoted string
  | (?P<punct>[{};])
  | (?P<word>[^\s{};"']+)                 # an unquoted string
""", re.S | re.X)


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), text)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) of each token: kind "{", "}", ";", "word" or "quoted" (``"a" + "b"`` joined)."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"cannot read YANG at {text[pos:pos + 40]!r}")
        pos = m.end()
        if m["punct"]:
            out.append((m["punct"], m["punct"]))
        elif m["word"]:
            out.append(("word", m["word"]))
        elif m["dq"] is not None or m["sq"] is not None:
            value = _unescape(m["dq"]) if m["sq"] is None else m["sq"]
            if len(out) >= 2 and out[-1] == ("word", "+") and out[-2][0] == "quoted":
                del out[-1]
                value = out.pop()[1] + value
            out.append(("quoted", value))
    return out


def parse_yang(text: str) -> Stmt:
    """The top statement (``module ...``) of one YANG file."""
    tokens = _tokens(text)
    pos = 0

    def statements() -> list[Stmt]:
        nonlocal pos
        found = []
        while pos < len(tokens) and tokens[pos][0] != "}":
            keyword = tokens[pos][1]
            pos += 1
            arg = None
            if tokens[pos][0] in ("word", "quoted"):
                arg = tokens[pos][1]
                pos += 1
            children: list[Stmt] = []
            if tokens[pos][0] == "{":
                pos += 1
                children = statements()
                assert tokens[pos][0] == "}", f"unbalanced braces after {keyword} {arg}"
            pos += 1  # the ";" or "}"
            found.append(Stmt(keyword, arg, tuple(children)))
        return found

    (top,) = statements()
    return top


@dataclass
class Module:
    name: str
    prefix: str
    imports: dict[str, str]  # prefix -> module name, the module's own prefix included
    top: Stmt

    @classmethod
    def read(cls, text: str) -> Module:
        top = parse_yang(text)
        prefix = top.find("prefix").arg
        imports = {imp.find("prefix").arg: imp.arg for imp in top.children if imp.keyword == "import"}
        return cls(top.arg, prefix, {prefix: top.arg, **imports}, top)

    def named(self, keyword: str, name: str) -> Stmt:
        """The typedef or grouping ``name`` of this module (at the top or nested anywhere)."""
        todo = list(self.top.children)
        while todo:
            stmt = todo.pop(0)
            if stmt.keyword == keyword and stmt.arg == name:
                return stmt
            todo.extend(stmt.children)
        raise KeyError(f"{self.name} has no {keyword} {name}")


@dataclass(eq=False)
class Node:
    """A data node of the schema: leaf, leaf-list, list or container."""

    kind: str
    name: str
    module: str  # the module whose prefixes its statements use (a grouping's, for a used grouping)
    stmt: Stmt
    parent: Node | None
    keys: tuple[str, ...] = ()
    children: dict[str, Node] = field(default_factory=dict)


INTEGERS = {"int8", "int16", "int32", "uint8", "uint16", "uint32"}
#: RFC 7951: 64-bit integers and decimals are JSON strings.
STRING_NUMBERS = {"int64", "uint64", "decimal64"}
BUILTIN_TYPES = INTEGERS | STRING_NUMBERS | {
    "binary", "bits", "boolean", "empty", "enumeration", "identityref", "instance-identifier", "string"}


class Schema:
    """SONiC's YANG modules read just far enough to translate CONFIG_DB tables into YANG JSON."""

    def __init__(self, modules: dict[str, Module]):
        self.modules = modules
        self.trees = {name: self._nodes(name, m.top.children, None) for name, m in modules.items()}
        #: CONFIG_DB table -> (module, its top container, the table's container)
        self.tables: dict[str, tuple[str, Node, Node]] = {}
        for name, tree in self.trees.items():
            for top in tree.values():
                for table in top.children.values():
                    if top.kind == "container" and table.kind == "container":
                        assert table.name not in self.tables, f"table {table.name} is in two modules"
                        self.tables[table.name] = (name, top, table)
        self._types: dict[Node, frozenset[str]] = {}

    def _nodes(self, module: str, stmts: tuple[Stmt, ...], parent: Node | None) -> dict[str, Node]:
        nodes: dict[str, Node] = {}
        for stmt in stmts:
            if stmt.keyword in ("leaf", "leaf-list", "list", "container"):
                key = stmt.find("key")
                node = Node(stmt.keyword, stmt.arg, module, stmt, parent, tuple(key.arg.split()) if key else ())
                node.children = self._nodes(module, stmt.children, node)
                nodes[node.name] = node
            elif stmt.keyword == "uses":
                where, grouping = self._definition(module, "grouping", stmt.arg)
                nodes.update(self._nodes(where, grouping.children, parent))
            elif stmt.keyword in ("choice", "case"):  # no data node of their own
                nodes.update(self._nodes(module, stmt.children, parent))
        return nodes

    def _definition(self, module: str, keyword: str, ref: str) -> tuple[str, Stmt]:
        """(defining module, statement) of a ``prefix:name`` or local typedef or grouping."""
        prefix, _, name = ref.rpartition(":")
        where = self.modules[module].imports[prefix] if prefix else module
        return where, self.modules[where].named(keyword, name)

    def types(self, node: Node) -> frozenset[str]:
        """Built-in types a leaf's value can have: typedefs resolved, unions flattened, leafrefs followed."""
        if node not in self._types:
            self._types[node] = self._resolve(node.module, node.stmt.find("type"), node)
        return self._types[node]

    def _resolve(self, module: str, type_stmt: Stmt, node: Node) -> frozenset[str]:
        name = type_stmt.arg
        if name == "union":
            members = (t for t in type_stmt.children if t.keyword == "type")
            return frozenset().union(*(self._resolve(module, t, node) for t in members))
        if name == "leafref":
            return self.types(self._follow(module, type_stmt.find("path").arg, node))
        if name in BUILTIN_TYPES:
            return frozenset({name})
        where, typedef = self._definition(module, "typedef", name)
        return self._resolve(where, typedef.find("type"), node)

    def _follow(self, module: str, path: str, node: Node) -> Node:
        """The leaf a leafref path names (absolute, or relative to ``node``; predicates ignored)."""
        steps = re.sub(r"\[[^\]]*\]", "", path).strip().split("/")
        if steps[0] == "":  # absolute: /prefix:top/prefix:TABLE/...
            prefix, _, top = steps[1].rpartition(":")
            here = self.trees[self.modules[module].imports[prefix] if prefix else module][top]
            steps = steps[2:]
        else:
            here = node
        for step in steps:
            here = here.parent if step == ".." else here.children[step.rpartition(":")[2]]
        return here


def read_schema(folder: Path) -> Schema:
    """Every module in ``folder``, and the built-in ones of libyang they import (ietf-inet-types...)."""
    modules = {m.name: m for m in (Module.read(p.read_text()) for p in sorted(folder.glob("*.yang")))}
    for name in sorted({imp for m in modules.values() for imp in m.imports.values()} - set(modules)):
        printed = subprocess.run([YANGLINT], input=f"print -f yang {name}\n", capture_output=True, text=True,
                                 timeout=30)
        assert printed.stdout.startswith(f"module {name} "), f"yanglint does not know module {name}: {printed}"
        modules[name] = Module.read(printed.stdout)
    return Schema(modules)


# --- CONFIG_DB -> YANG JSON ------------------------------------------------------------------------------

class TranslationError(Exception):
    pass


def yang_value(schema: Schema, leaf: Node, text):
    """A CONFIG_DB string as the leaf's YANG JSON value: numbers for integers, true/false for booleans."""
    if not isinstance(text, str):
        return text
    types = schema.types(leaf)
    if types & INTEGERS and re.fullmatch(r"-?\d+", text):
        return int(text)
    if "boolean" in types and text in ("true", "false"):
        return text == "true"
    return text


def yang_fields(schema: Schema, node: Node, fields: dict) -> dict:
    """The fields of one CONFIG_DB entry as leaves, leaf-lists, or entries of an inner one-key list."""
    out: dict = {}
    maps = [c for c in node.children.values() if c.kind == "list" and len(c.keys) == 1 and len(c.children) == 2]
    for name, value in fields.items():
        child = node.children.get(name)
        if child is not None and child.kind == "leaf":
            out[name] = yang_value(schema, child, value)
        elif child is not None and child.kind == "leaf-list":
            items = value.split(",") if isinstance(value, str) else value
            out[name] = [yang_value(schema, child, item) for item in items]
        elif len(maps) == 1:
            # a map such as DSCP_TO_TC_MAP|ROCE {"26": "3"}: an entry {"dscp": "26", "tc": 3} of the inner list
            (inner,) = maps
            key = inner.children[inner.keys[0]]
            leaf = next(c for c in inner.children.values() if c is not key)
            out.setdefault(inner.name, []).append({key.name: yang_value(schema, key, name),
                                                   leaf.name: yang_value(schema, leaf, value)})
        else:
            out[name] = value  # not in the model: left for yanglint to reject
    return out


def yang_table(schema: Schema, table: Node, entries: dict) -> dict:
    """One CONFIG_DB table as the content of its YANG container."""
    out: dict = {}
    lists = [c for c in table.children.values() if c.kind == "list"]
    for key, fields in entries.items():
        inner = table.children.get(key)
        if inner is not None and inner.kind == "container":  # DEVICE_METADATA|localhost
            out[key] = yang_fields(schema, inner, fields)
            continue
        parts = key.split("|")
        fits = [lst for lst in lists if len(lst.keys) == len(parts)]
        if len(fits) != 1:
            raise TranslationError(f"{table.name}|{key}: {len(fits)} lists of {table.name} have {len(parts)} "
                                   f"keys ({', '.join(f'{lst.name} {lst.keys}' for lst in lists)})")
        (lst,) = fits
        entry = {k: yang_value(schema, lst.children[k], v) for k, v in zip(lst.keys, parts)}
        entry.update(yang_fields(schema, lst, fields))
        out.setdefault(lst.name, []).append(entry)
    return out


def translate(schema: Schema, config_db: dict) -> dict:
    """A config_db.json as YANG JSON instance data; a table no module models is an error."""
    out: dict = {}
    for name, entries in config_db.items():
        if name not in schema.tables:
            raise TranslationError(f"table {name}: no SONiC YANG module models it")
        module, top, table = schema.tables[name]
        out.setdefault(f"{module}:{top.name}", {})[name] = yang_table(schema, table, entries)
    return out


# --- yanglint --------------------------------------------------------------------------------------------

#: All 146 modules, implemented: the data's own and every module their when, must and leafref expressions
#: name (loading them all takes yanglint about 0.3 s, less than working out which are needed).
MODULE_FILES = sorted(str(p) for p in MODELS.glob("*.yang"))


def yanglint(paths: list[Path]) -> subprocess.CompletedProcess:
    """Validate YANG JSON files, each on its own, as configuration data (-Q: errors only, no warnings)."""
    return subprocess.run([YANGLINT, "-Q", "-p", str(MODELS), "-t", "config", *MODULE_FILES, *map(str, paths)],
                          capture_output=True, text=True, timeout=300)


def write_yang(schema: Schema, dbs: dict[str, dict], folder: Path) -> dict[str, Path]:
    paths = {}
    for name, db in dbs.items():
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(json.dumps(translate(schema, db), indent=1))
    return paths


def yang_errors(schema: Schema, dbs: dict[str, dict], folder: Path) -> dict[str, str]:
    """yanglint's errors per config, none when all are valid.

    One yanglint run checks every file; it stops at the first bad one, so after a failure each file
    is checked on its own (two at a time) to name them all.
    """
    paths = write_yang(schema, dbs, folder)
    if yanglint(list(paths.values())).returncode == 0:
        return {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(paths, pool.map(lambda path: yanglint([path]), paths.values())))
    return {name: f"exit {run.returncode}: {run.stderr.strip()}" for name, run in runs.items() if run.returncode}


@pytest.fixture(scope="session")
def sonic_schema() -> Schema:
    return read_schema(MODELS)


# --- The configs topo renders ----------------------------------------------------------------------------

ETHERNET_SWITCHES = sorted(name for name, model in switch_catalog().items() if model.technology == "ethernet" and not model.chassis)
#: DEVICE_METADATA type of each role, as topo's templates write it.
ROLES = {"ToRRouter": "leaf", "LeafRouter": "spine", "SpineRouter": "core"}

BUILDS = {
    **{f"switch-{name}": dict(gpus=256, switch=name) for name in ETHERNET_SWITCHES},
    **{f"platform-{name}": dict(gpus=256, platform=name) for name in sorted(platform_catalog())},
    "qos-nvidia": dict(gpus=256, qos="nvidia"),
    "qos-sonic": dict(gpus=256, qos="sonic"),
    "unnumbered": dict(gpus=256, unnumbered=True),
    "unnumbered-bfd-qos-sonic": dict(gpus=256, unnumbered=True, bfd=True, qos="sonic"),
    "three-tier": dict(gpus=256, tiers=3),
    "unified-routing": dict(gpus=256, routing_mode="unified"),
    "unified-routing-three-tier-broadcom": dict(gpus=256, tiers=3, routing_mode="unified",
                                                platform="dellemc-z9664f-o64"),
    "three-tier-radix-4": dict(gpus=16, gpus_per_node=1, radix=4, tiers=3),
    "three-tier-rack-unnumbered-qos-sonic": dict(gpus=256, tiers=3, placement="rack", unnumbered=True, qos="sonic"),
    "rack": dict(gpus=256, placement="rack"),
    "breakout-800g": dict(gpus=128, switch="eth-51t-64x800"),
    "oversubscribed-3-to-1": dict(gpus=768, oversubscription=3),
    "four-byte-asns": dict(gpus=256, asn_size=4),
    "mtu-1500": dict(gpus=256, mtu=1500),
    "mtu-9216-long-name": dict(gpus=256, mtu=9216, name="a" * 40),
    "spines-for-growth": dict(gpus=256, spines=8),
    "partly-filled-leaves": dict(gpus=200),
    "cable-lengths-in-tenths": dict(gpus=256, cable_node_leaf_m=2.5, cable_leaf_spine_m=30.5),
    # the shapes of docs/fabric.md "Fabric shapes"
    "undersubscribed-15-17": dict(gpus=240, oversubscription="15:17"),
    "grown-256-to-1024": dict(gpus=256, grow_to=1024),
    "rail-only": dict(gpus=64, tiers=1),
    "b300-two-planes": dict(gpus=512, switch="eth-51t-128x400", nic_gbps=800, planes=2),
    "mixed-leaf-spine": dict(gpus=512, switch="eth-25t-64x400", spine_switch="eth-51t-128x400"),
    "mixed-core": dict(gpus=32, gpus_per_node=1, nics_per_node=1, radix=8, core_switch="eth-12t-32x400", tiers=3),
    "chassis-spine": dict(gpus=256, switch="eth-25t-64x400", spine_switch="eth-chassis-648x400"),
    # tiers of different port speeds: the faster tier's ports broken out to the slower
    "spine-800g-over-400g-leaves": dict(gpus=256, switch="eth-25t-64x400", spine_switch="eth-51t-64x800"),
    "leaf-800g-under-400g-spines": dict(gpus=256, switch="eth-51t-64x800", spine_switch="eth-51t-128x400"),
    "dual-tor": dict(gpus=256, dual_tor=True),
    "dual-tor-sn5600-rack": dict(gpus=128, switch="eth-51t-64x800", nic_gbps=400, dual_tor=True, placement="rack"),
    "dual-tor-three-tier": dict(gpus=32, gpus_per_node=1, nics_per_node=1, radix=8, tiers=3, dual_tor=True),
}
#: Builds whose configs SONiC refuses, with yanglint's error for every one of their configs and why:
#: none now. (Fractional cable lengths, which sonic-cable-length.yang's "[0-9]+m" refuses, are rounded
#: up to whole metres; the "cable-lengths-in-tenths" build holds that.)
REFUSED: dict[str, tuple[str, str]] = {}


class RefusedAsDocumented(Exception):
    """Every config of a REFUSED build fails with the error written there (any other failure fails)."""


def build_case(name: str):
    marks = []
    if name in REFUSED:  # strict: once topo's configs pass, the mark has to go
        marks = [pytest.mark.xfail(raises=RefusedAsDocumented, strict=True, reason=REFUSED[name][1])]
    return pytest.param(name, marks=marks, id=name)


def config_dbs(fields: dict) -> dict[str, dict]:
    """Every switch's config_db.json of one build, by switch name."""
    files = config_files(build_fabric(load_spec(fields)))
    return {rel.split("/")[1]: json.loads(text) for rel, text in files if rel.endswith("/config_db.json")}


def roles(dbs: dict[str, dict]) -> set[str]:
    return {ROLES[db["DEVICE_METADATA"]["localhost"]["type"]] for db in dbs.values()}


def ends_of_each_role(dbs: dict[str, dict]) -> dict[str, dict]:
    """The first and the last switch of each role, by name (the highest index has the longest name,
    the last ports and addresses): a build's switches of one role differ only in such values."""
    by_role: dict[str, list[str]] = {}
    for name in sorted(dbs):
        by_role.setdefault(ROLES[dbs[name]["DEVICE_METADATA"]["localhost"]["type"]], []).append(name)
    return {n: dbs[n] for names in by_role.values() for n in dict.fromkeys((names[0], names[-1]))}


@pytest.mark.parametrize("name", [build_case(name) for name in BUILDS])
def test_every_config_db_of_a_build_passes_sonic_yang(name, sonic_schema, tmp_path):
    """The first and last switch of each role of every build (the main job's folder below has all
    of its switches checked)."""
    fields = BUILDS[name]
    dbs = config_dbs(fields)
    spec = load_spec(fields)
    tiers = build_fabric(spec).plan.tiers  # a modular chassis tier gets no config_db.json
    assert roles(dbs) == {("leaf", "spine", "core")[t - 1] for t in range(1, tiers + 1) if not tier_switch(spec, t).chassis}
    if not dbs:
        return
    dbs = ends_of_each_role(dbs)
    errors = yang_errors(sonic_schema, dbs, tmp_path)
    report = f"{len(errors)} of {len(dbs)} configs fail:\n" + "\n".join(
        f"{switch}: {message}" for switch, message in sorted(errors.items()))
    if name in REFUSED and len(errors) == len(dbs) and all(REFUSED[name][0] in m for m in errors.values()):
        raise RefusedAsDocumented(report)
    assert not errors, report


def test_the_files_topo_build_writes_pass_sonic_yang(sonic_schema, tmp_path):
    out = tmp_path / "design"
    result = CliRunner().invoke(main, ["build", "--gpus", "1024", "-o", str(out), "--no-analysis", "-q"],
                                prog_name="topo", catch_exceptions=False)
    assert result.exit_code == 0, result.output
    dbs = {path.parent.name: json.loads(path.read_text()) for path in sorted(out.glob("switches/*/config_db.json"))}
    assert len(dbs) == 48 and roles(dbs) == {"leaf", "spine"}
    errors = yang_errors(sonic_schema, dbs, tmp_path)
    assert not errors, "\n".join(f"{name}: {message}" for name, message in sorted(errors.items()))


# --- The translation itself ------------------------------------------------------------------------------

SMALL = {
    "DEVICE_METADATA": {"localhost": {"hostname": "sw0", "bgp_asn": "64512", "type": "ToRRouter",
                                      "t2_group_asns": "65001,65002"}},
    "PORT": {"Ethernet0": {"lanes": "0,1,2,3", "speed": "400000", "mtu": "9100", "index": "1", "fec": "rs",
                           "admin_status": "up"}},
    "INTERFACE": {"Ethernet0": {}, "Ethernet0|10.0.0.0/31": {}},
    "DSCP_TO_TC_MAP": {"ROCE": {"26": "3", "48": "6"}},
    "WRED_PROFILE": {"W": {"wred_green_enable": "true", "green_min_threshold": "150000",
                           "green_max_threshold": "1500000"}},
    "PFC_WD": {"GLOBAL": {"POLL_INTERVAL": "200"}, "Ethernet0": {"action": "drop", "detection_time": "200"}},
}


def test_translation_follows_the_models(sonic_schema, tmp_path):
    data = translate(sonic_schema, SMALL)
    assert data == {
        "sonic-device_metadata:sonic-device_metadata": {"DEVICE_METADATA": {"localhost": {
            "hostname": "sw0", "bgp_asn": 64512, "type": "ToRRouter", "t2_group_asns": [65001, 65002]}}},
        "sonic-port:sonic-port": {"PORT": {"PORT_LIST": [{
            "name": "Ethernet0", "lanes": "0,1,2,3", "speed": 400000, "mtu": 9100, "index": 1, "fec": "rs",
            "admin_status": "up"}]}},
        "sonic-interface:sonic-interface": {"INTERFACE": {
            "INTERFACE_LIST": [{"name": "Ethernet0"}],
            "INTERFACE_IPPREFIX_LIST": [{"name": "Ethernet0", "ip-prefix": "10.0.0.0/31"}]}},
        "sonic-dscp-tc-map:sonic-dscp-tc-map": {"DSCP_TO_TC_MAP": {"DSCP_TO_TC_MAP_LIST": [{
            "name": "ROCE", "DSCP_TO_TC_MAP": [{"dscp": "26", "tc": 3}, {"dscp": "48", "tc": 6}]}]}},
        "sonic-wred-profile:sonic-wred-profile": {"WRED_PROFILE": {"WRED_PROFILE_LIST": [{  # uint64: strings
            "name": "W", "wred_green_enable": True, "green_min_threshold": "150000",
            "green_max_threshold": "1500000"}]}},
        "sonic-pfcwd:sonic-pfcwd": {"PFC_WD": {"PFC_WD_LIST": [
            {"ifname": "GLOBAL", "POLL_INTERVAL": 200}, {"ifname": "Ethernet0", "action": "drop",
                                                         "detection_time": 200}]}},
    }
    assert yang_errors(sonic_schema, {"small": SMALL}, tmp_path) == {}


def test_a_key_no_list_of_the_table_fits_is_an_error(sonic_schema):
    with pytest.raises(TranslationError, match=r"INTERFACE\|Ethernet0\|10.0.0.0/31\|x: 0 lists of INTERFACE have 3"):
        translate(sonic_schema, {"INTERFACE": {"Ethernet0|10.0.0.0/31|x": {}}})


# --- Negative controls: what SONiC refuses, yanglint refuses here ----------------------------------------

@pytest.fixture(scope="module")
def leaf_db() -> dict:
    return config_dbs(dict(gpus=256))["cluster-leaf-su00-r0"]


def test_a_mistyped_table_name_fails(sonic_schema, leaf_db, tmp_path):
    db = copy.deepcopy(leaf_db)
    db["PROT"] = db.pop("PORT")
    with pytest.raises(TranslationError, match="table PROT: no SONiC YANG module models it"):
        translate(sonic_schema, db)
    # and yanglint, given the mistyped table where PORT belongs, refuses it too
    data = translate(sonic_schema, leaf_db)
    data["sonic-port:sonic-port"]["PROT"] = data["sonic-port:sonic-port"].pop("PORT")
    path = tmp_path / "prot.json"
    path.write_text(json.dumps(data))
    run = yanglint([path])
    assert run.returncode != 0 and 'Node "PROT" not found' in run.stderr, run.stderr


def _mtu(db):
    db["PORT"]["Ethernet0"]["mtu"] = "99999"


def _fec(db):
    db["PORT"]["Ethernet0"]["fec"] = "rs528"


def _pg_profile(db):
    db["BUFFER_PG"]["Ethernet0|3"]["profile"] = "pg_lossless_undefined_profile"


def _queue_profile(db):
    db["BUFFER_QUEUE"]["Ethernet0|3"]["profile"] = "egress_undefined_profile"


def _unknown_field(db):
    db["PORT"]["Ethernet0"]["mtu_bytes"] = "9100"


@pytest.mark.parametrize("break_it, expected", [
    (_mtu, 'Value "99999" is out of type uint16 min/max bounds'),
    (_fec, 'Unsatisfied pattern - "rs528" does not conform to "rs|fc|none|auto"'),
    (_pg_profile, 'Invalid union value "pg_lossless_undefined_profile"'),  # leafref to BUFFER_PROFILE or "NULL"
    (_queue_profile, 'Invalid leafref value "egress_undefined_profile"'),
    (_unknown_field, 'Node "mtu_bytes" not found'),
], ids=["mtu-99999", "unknown-fec", "buffer-pg-undefined-profile", "buffer-queue-undefined-profile",
        "unknown-field"])
def test_sonic_yang_refuses_a_broken_config(break_it, expected, sonic_schema, leaf_db, tmp_path):
    assert_refused(break_it, expected, sonic_schema, leaf_db, tmp_path)


def assert_refused(break_it, expected, sonic_schema, good_db, tmp_path):
    """yanglint refuses ``good_db`` broken by ``break_it`` with ``expected`` in its error, and
    passes the unbroken config."""
    db = copy.deepcopy(good_db)
    break_it(db)
    (path,) = write_yang(sonic_schema, {"broken": db}, tmp_path).values()
    run = yanglint([path])
    assert run.returncode != 0 and expected in run.stderr, run.stderr
    assert yang_errors(sonic_schema, {"good": good_db}, tmp_path) == {}


@pytest.fixture(scope="module")
def unified_spectrum_leaf_db() -> dict:
    return config_dbs(dict(gpus=256, routing_mode="unified", platform="sn5600-acs"))["cluster-leaf-su00-r0"]


def _neighbor_asn(db):
    next(iter(db["BGP_NEIGHBOR"].values()))["asn"] = "0"


def _static_route_blackhole(db):
    next(iter(db["STATIC_ROUTE"].values()))["advertise"] = "yes"


def _profile_list(db):
    db["BUFFER_PORT_INGRESS_PROFILE_LIST"]["Ethernet0"]["profile_list"] = "ingress_undefined_profile"


def _pool_of_profile(db):
    db["BUFFER_PROFILE"]["q_lossy_profile"]["pool"] = "egress_undefined_pool"


@pytest.mark.parametrize("break_it, expected", [
    (_neighbor_asn, "ASN must be greater than 0"),
    (_static_route_blackhole, 'does not conform to "((true|false),)*(true|false)"'),
    (_profile_list, "ingress_undefined_profile"),
    (_pool_of_profile, 'Invalid leafref value "egress_undefined_pool"'),
], ids=["bgp-neighbor-asn-0", "static-route-advertise-yes", "undefined-profile-in-list", "profile-of-undefined-pool"])
def test_sonic_yang_refuses_a_broken_unified_spectrum_config(break_it, expected, sonic_schema,
                                                            unified_spectrum_leaf_db, tmp_path):
    assert_refused(break_it, expected, sonic_schema, unified_spectrum_leaf_db, tmp_path)
