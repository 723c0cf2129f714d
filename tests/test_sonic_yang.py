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
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest

from topo import build_fabric, load_spec
from topo.catalog import switch_catalog
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


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) of each token: "string" (quoted or not, ``"a" + "b"`` joined) or "{", "}", ";"."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"cannot read YANG at {text[pos:pos + 40]!r}")
        pos = m.end()
        if m["punct"]:
            out.append((m["punct"], m["punct"]))
        elif m["dq"] is not None or m["sq"] is not None:
            value = m["sq"] if m["dq"] is None else re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e[1], e[1]),
                                                           m["dq"])
            if len(out) >= 2 and out[-1] == ("string", "+") and out[-2][0] == "quoted":
                out.pop()
                value = out.pop()[1] + value
            out.append(("quoted", value))
        elif m["word"]:
            out.append(("string", m["word"]))
    return [("string" if kind == "quoted" else kind, value) for kind, value in out]


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
            if tokens[pos][0] == "string":
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
            return frozenset().union(*(self._resolve(module, t, node) for t in type_stmt.children if t.keyword == "type"))
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
    for name in sorted({imp for m in list(modules.values()) for imp in m.imports.values()} - set(modules)):
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
    for name, value in fields.items():
        child = node.children.get(name)
        if child is not None and child.kind == "leaf":
            out[name] = yang_value(schema, child, value)
        elif child is not None and child.kind == "leaf-list":
            items = value.split(",") if isinstance(value, str) else value
            out[name] = [yang_value(schema, child, item) for item in items]
        elif (inner := [c for c in node.children.values() if c.kind == "list"]) and len(inner) == 1:
            # a map such as DSCP_TO_TC_MAP|ROCE {"26": "3"}: inner list keyed by "26" with one value leaf
            (key,) = inner[0].keys
            (leaf,) = (c for c in inner[0].children.values() if c.name != key)
            out.setdefault(inner[0].name, []).append({
                key: yang_value(schema, inner[0].children[key], name),
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


def modules_used(schema: Schema, data: dict) -> set[str]:
    return {key.partition(":")[0] for key in data}


# --- yanglint --------------------------------------------------------------------------------------------

#: Every module, implemented: the data's modules and whatever their when, must and leafref name.
MODULE_FILES = sorted(str(p) for p in MODELS.glob("*.yang"))


def yanglint(paths: list[Path]) -> subprocess.CompletedProcess:
    """Validate each YANG JSON file (separately) as configuration data against all of SONiC's modules."""
    return subprocess.run([YANGLINT, "-p", str(MODELS), "-t", "config", *MODULE_FILES, *map(str, paths)],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def sonic_schema() -> Schema:
    return read_schema(MODELS)


def validate(schema: Schema, dbs: dict[str, dict], folder: Path) -> dict[str, str]:
    """yanglint's errors per config (none: all valid): one run for all, then one per file to name the bad."""
    paths = {}
    for name, db in dbs.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps(translate(schema, db), indent=1))
        paths[name] = path
    if yanglint(list(paths.values())).returncode == 0:
        return {}
    failed = {name: yanglint([path]) for name, path in paths.items()}
    return {name: f"exit {run.returncode}: {run.stderr.strip()}" for name, run in failed.items() if run.returncode}
