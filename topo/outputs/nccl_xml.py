"""NCCL's XML files as NCCL reads and writes them: the element tree, a reader, the writer, the rules.

:func:`read_nccl_topology` is a port of NCCL's parser (``xmlGetNode`` / ``xmlLoadSub`` in
``src/graph/xml.cc``, NCCL 2.30.7): it fails where NCCL fails, with NCCL's message and the line,
and keeps what NCCL keeps (recognised elements only, at most 16 attributes each).
:func:`dump_xml` writes a tree exactly as NCCL's own writer (``ncclTopoDumpXmlRec``) does: one tag
per line, two-space indent, ``key="value"`` separated by single spaces, no XML declaration.
:func:`check_topology` adds the rules an exporter should follow beyond what parses (docs/nccl.md).
:mod:`topo.outputs.nccl` builds the files of a server profile on top of this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

from ..errors import TopoError
from ..hardware.pcie import LINK_SPEEDS

#: NCCL's limits (src/graph/xml.h, topo.h at 2.30.7).
MAX_STR_LEN = 255
MAX_ATTR_COUNT = 16
MAX_SUBS = 640
TOPO_XML_MAX_NODES = 256
GRAPH_XML_MAX_NODES = 65536
#: Rules an exporter keeps to, stricter than the parser (docs/nccl.md).
MAX_EXPORT_ATTRS = 10
MAX_PORTABLE_SUBS = 128

#: Element -> elements NCCL loads under it (xml.cc handler tables); None is the top level.
TOPOLOGY_GRAMMAR: dict[str | None, tuple[str, ...]] = {
    None: ("system",), "system": ("cpu",), "cpu": ("pci", "nic"), "pci": ("pci", "gpu", "nic", "pcilink"),
    "gpu": ("nvlink", "c2c"), "nic": ("net",), "nvlink": (), "c2c": (), "pcilink": (), "net": (),
}
#: The same for NCCL_GRAPH_FILE (xml.cc ncclTopoXmlGraphLoad*).
GRAPH_GRAMMAR: dict[str | None, tuple[str, ...]] = {
    None: ("graphs",), "graphs": ("graph",), "graph": ("channel",), "channel": ("net", "gpu"),
    "net": (), "gpu": (),
}
#: Attributes NCCL reads or writes on each topology element; others are custom metadata.
KNOWN_ATTRS: dict[str, frozenset[str]] = {
    "system": frozenset({"version", "name"}),
    "cpu": frozenset({"numaid", "affinity", "arch", "vendor", "familyid", "modelid", "host_hash"}),
    "pci": frozenset({"busid", "class", "link_speed", "link_width", "vendor", "device", "subsystem_vendor",
                      "subsystem_device"}),
    "gpu": frozenset({"dev", "sm", "rank", "gdr", "mlopart"}),
    "nvlink": frozenset({"target", "count", "tclass"}),
    "c2c": frozenset({"bw", "count"}),
    "pcilink": frozenset({"target"}),
    "nic": frozenset(),
    "net": frozenset({"name", "dev", "speed", "latency", "port", "guid", "maxconn", "gdr", "coll", "rail",
                      "plane", "net", "gin", "rma"}),
}
#: Decimal integer attributes (read with strtol base 0: a leading 0 means octal).
INT_ATTRS = frozenset({"version", "numaid", "familyid", "modelid", "link_width", "dev", "sm", "rank", "gdr",
                       "mlopart", "count", "bw", "speed", "port", "maxconn", "coll", "rail", "plane", "net",
                       "gin", "rma"})
_BUSID_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")
_MASK_RE = re.compile(r"[0-9a-f]{8}(,[0-9a-f]{8})*")
_PADDED_RE = re.compile(r"[-+]?0[0-9]+")


class NcclXmlError(TopoError):
    """A file NCCL's parser would reject (``ncclCommInitRank`` fails): NCCL's message and the line."""


# --- the tree -------------------------------------------------------------------------------------


class XmlElement:
    """One element as NCCL keeps it: name, attributes in file order (duplicates kept), children.

    >>> e = XmlElement("net", [("name", "mlx5_0"), ("rail", "0")])
    >>> e["name"], e.get("guid"), e.get("rail")
    ('mlx5_0', None, '0')
    """

    __slots__ = ("name", "attrs", "children", "parent", "line")

    def __init__(self, name: str, attrs: list[tuple[str, str]] | None = None,
                 children: list["XmlElement"] | None = None, line: int = 0) -> None:
        self.name = name
        self.attrs = list(attrs or [])
        self.children: list[XmlElement] = []
        self.parent: XmlElement | None = None
        self.line = line
        for child in children or ():
            self.append(child)

    def append(self, child: "XmlElement") -> "XmlElement":
        child.parent = self
        self.children.append(child)
        return child

    def get(self, key: str, default: str | None = None) -> str | None:
        """The first attribute ``key`` (as NCCL's ``xmlGetAttr``), or ``default``."""
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def __getitem__(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise KeyError(f"<{self.name}> (line {self.line}) has no attribute {key!r}")
        return value

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def iter(self, name: str | None = None) -> Iterator["XmlElement"]:
        """This element and its descendants in document order, optionally only those called ``name``."""
        stack = [self]
        while stack:
            element = stack.pop()
            if name is None or element.name == name:
                yield element
            stack.extend(reversed(element.children))

    def ancestors(self) -> Iterator["XmlElement"]:
        element = self.parent
        while element is not None:
            yield element
            element = element.parent

    def __repr__(self) -> str:
        attrs = " ".join(f'{k}="{v}"' for k, v in self.attrs)
        return f"<{self.name}{' ' + attrs if attrs else ''}> ({len(self.children)} children, line {self.line})"


@dataclass(frozen=True, eq=False)
class NcclXml:
    """A parsed NCCL XML file.

    Attributes
    ----------
    kind : str
        ``"topology"`` (NCCL_TOPO_FILE) or ``"graph"`` (NCCL_GRAPH_FILE).
    roots : tuple of XmlElement
        The recognised top-level elements (``<system>`` or ``<graphs>``); NCCL uses the first.
    elements : int
        Elements NCCL stored, which its node budget counts (256 for a topology file).
    notes : tuple of str
        What NCCL only reports at INFO level: ignored elements, dropped attributes, and values
        older NCCL versions read differently.
    """

    kind: str
    roots: tuple[XmlElement, ...]
    elements: int
    notes: tuple[str, ...]

    @property
    def root(self) -> XmlElement | None:
        return self.roots[0] if self.roots else None

    def iter(self, name: str | None = None) -> Iterator[XmlElement]:
        for root in self.roots:
            yield from root.iter(name)


# --- the reader (a port of NCCL's parser) ---------------------------------------------------------

_NONE, _OPEN, _CLOSE, _SINGLE = 0, 1, 2, 3


def _c_strtol(text: str) -> int:
    """C ``strtol(text, NULL, 0)`` then conversion to a 32-bit ``int``, as NCCL reads integers.

    >>> _c_strtol("1"), _c_strtol("0x10"), _c_strtol("010"), _c_strtol("08"), _c_strtol(" 2x")
    (1, 16, 8, 0, 2)
    """
    s = text.lstrip(" \t\n\v\f\r")
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s[:2].lower() == "0x" and s[2:3] and s[2:3] in "0123456789abcdefABCDEF":
        base, s = 16, s[2:]
    elif s[:1] == "0":
        base = 8
    else:
        base = 10
    digits = "0123456789abcdef"[:base]
    n = 0
    for ch in s:
        if ch.lower() not in digits:
            break
        n = n * base + int(ch, 16)
    value = max(-(1 << 63), min((1 << 63) - 1, sign * n))  # long, saturated
    value &= 0xFFFFFFFF  # then stored in an int
    return value - (1 << 32) if value >= 1 << 31 else value


def _show(byte: int) -> str:
    return {9: "\\t", 10: "\\n", 13: "\\r"}.get(byte, chr(byte) if 32 <= byte < 127 else f"\\x{byte:02x}")


class _Node:
    """One tag as ``xmlGetNode`` returns it: type (``_NONE`` at the end of the file), name, attrs, line."""

    __slots__ = ("type", "name", "attrs", "line")

    def __init__(self) -> None:
        self.type, self.name, self.attrs, self.line = _NONE, "", [], 0


class _TagReader:
    """Bytes -> one tag at a time, as NCCL's ``xmlGetNode`` and the functions under it read them.

    Knows the line of the last byte read, fails with NCCL's lexical messages, and adds to ``notes``
    what NCCL reads without complaint but may not mean what it says (single quotes, empty or extra
    attributes).
    """

    def __init__(self, data: bytes, notes: list[str]) -> None:
        self.data, self.pos = data, 0
        self.notes = notes
        self._counted = (0, 1)  # (position, line there): lines are counted forward only

    def fail(self, message: str) -> None:
        raise NcclXmlError(f"line {self.line()}: {message}")

    def line(self) -> int:
        """Line of the last character read."""
        end = max(self.pos - 1, 0)
        start, line = self._counted
        if end < start:
            start, line = 0, 1
        line += self.data.count(b"\n", start, end)
        self._counted = (end, line)
        return line

    def char(self) -> int:  # xmlGetChar
        if self.pos >= len(self.data):
            self.fail("XML Parse : Unexpected EOF")
        c = self.data[self.pos]
        self.pos += 1
        return c

    @staticmethod
    def text(raw: bytearray) -> str:
        """Bytes as the C string NCCL sees (it ends at a NUL byte)."""
        return bytes(raw).split(b"\0", 1)[0].decode("utf-8", errors="surrogateescape")

    def value(self) -> tuple[str, int]:  # xmlGetValue
        c = self.char()
        if c not in (0x22, 0x27):
            self.fail("XML Parse : Expected (double) quote.")
        quote, out = c, bytearray()
        if quote == 0x27:
            self.notes.append(f"line {self.line()}: single-quoted value (NCCL before 2.27.3 reads it up to "
                              f"the next double quote)")
        while True:
            c = self.char()
            out.append(c)
            if len(out) == MAX_STR_LEN:
                self.fail(f"Error : value {self.text(out[:-1])} too long (max {MAX_STR_LEN})")
            if c == quote:
                break
        return self.text(out[:-1]), self.char()

    def token(self, want_value: bool) -> tuple[str, str | None, int]:  # xmlGetToken
        out = bytearray()
        while True:
            c = self.char()
            if c == 0x3D:  # '='
                if not want_value:
                    self.fail(f"XML Parse : Unexpected value with name {self.text(out)}")
                value, last = self.value()
                return self.text(out), value, last
            out.append(c)
            if len(out) == MAX_STR_LEN:
                self.fail(f"Error : name {self.text(out[:-1])} too long (max {MAX_STR_LEN})")
            if c in (0x20, 0x3E, 0x2F, 0x0A, 0x0D):  # ' ' > / \n \r
                return self.text(out[:-1]), None, c

    def skip_comment(self, start: str, nxt: int) -> None:  # xmlSkipComment
        end = b"..."
        for ch in start.encode("utf-8", errors="surrogateescape") + bytes([nxt]):
            end = end[1:] + bytes([ch])
        while end != b"-->":
            if self.pos >= len(self.data):
                self.fail("XML Parse error : unterminated comment")
            end = end[1:] + self.data[self.pos:self.pos + 1]
            self.pos += 1

    def next_tag(self) -> _Node:  # xmlGetNode
        """The next tag after blanks and comments; one of type ``_NONE`` at the end of the file."""
        tag = _Node()
        c = self._skip_blanks()
        if c is None:
            return tag
        tag.line = self.line()
        if c != 0x3C:
            self.fail(f"XML Parse error : expecting '<', got '{_show(c)}'")
        name, _, c = self.token(False)
        if name.startswith("!--"):
            self.skip_comment(name[3:], c)
            return self.next_tag()
        if name == "" and c == 0x2F:  # a closing tag, </name>
            tag.type = _CLOSE
            tag.name, _, c = self.token(False)
            if c != 0x3E:
                self.fail(f"XML Parse error : unexpected trailing {_show(c)} in closing tag {tag.name}")
            return tag
        tag.type, tag.name = _OPEN, name  # an opening tag, <name ...> or <name .../>
        while c == 0x20:
            key, value, c = self.token(True)
            self._add_attribute(tag, key, value)
        if c == 0x2F:
            tag.type = _SINGLE
            _, _, c = self.token(False)
        if c != 0x3E:
            self.fail(f"XML Parse : expected >, got '{_show(c)}'")
        return tag

    def _skip_blanks(self) -> int | None:
        """The first byte that is not a space or a line break, or None at the end of the file."""
        c = 0x20
        while c in (0x20, 0x0A, 0x0D):
            if self.pos >= len(self.data):
                return None
            c = self.data[self.pos]
            self.pos += 1
        return c

    def _add_attribute(self, tag: _Node, key: str, value: str | None) -> None:
        """Keep an attribute in one of NCCL's 16 slots, or note that NCCL drops it."""
        if len(tag.attrs) == MAX_ATTR_COUNT:
            self.notes.append(f"line {tag.line}: <{tag.name}>: Ignoring extra attributes "
                              f"(max {MAX_ATTR_COUNT}): {key}")
            return
        if key == "":
            self.notes.append(f"line {tag.line}: <{tag.name}>: an empty attribute (two spaces, or a space "
                              f"before '/>' or '>') takes one of the {MAX_ATTR_COUNT} slots")
        tag.attrs.append((key, value or ""))


class _TreeLoader:
    """Tags -> the :class:`XmlElement` tree NCCL keeps, as ``xmlLoadSub`` builds it with its handlers.

    Stores the elements ``grammar`` allows under each parent and skips the others (noting them),
    within NCCL's budgets (``max_nodes`` stored elements, :data:`MAX_SUBS` children each), and
    checks the version of each top-level element.
    """

    def __init__(self, data: bytes, grammar: dict, max_nodes: int) -> None:
        self.grammar, self.max_nodes = grammar, max_nodes
        self.count = 0
        self.roots: list[XmlElement] = []
        self.notes: list[str] = []
        self.tags = _TagReader(data, self.notes)

    def load_top_level(self) -> None:  # xmlLoadSub with handlers, head NULL
        """Load the file: each top-level element the grammar names, version checked, with what it holds.

        NCCL does not look at a top-level tag's type: ``</system>`` there starts a ``<system>``.
        """
        allowed = self.grammar[None]
        while True:
            if self.count == self.max_nodes:
                self.tags.fail(f"Error : XML parser is limited to {self.max_nodes} nodes")
            tag = self.tags.next_tag()
            if tag.type == _NONE:
                return
            if tag.name in allowed:
                element = self._store(tag, None)
                self.check_version(element)
                self.load(element, tag.type)
            else:
                self._note_ignored(tag, None, allowed)
                self.skip(tag)

    def load(self, head: XmlElement, head_type: int) -> None:  # xmlLoadSub with handlers
        """Load what ``head`` holds, up to its closing tag."""
        if head_type == _SINGLE:
            return
        allowed = self.grammar[head.name]
        while True:
            if self.count == self.max_nodes:
                self.tags.fail(f"Error : XML parser is limited to {self.max_nodes} nodes")
            tag = self.tags.next_tag()
            if tag.type == _NONE:
                self.tags.fail(f"XML Parse : unterminated {head.name}")
            if tag.type == _CLOSE:
                if tag.name != head.name:
                    self.tags.fail(f"XML Mismatch : {head.name} / {tag.name}")
                return
            if tag.name in allowed:
                if len(head.children) == MAX_SUBS:
                    self.tags.fail(f"Error : XML parser is limited to {MAX_SUBS} subnodes")
                self.load(self._store(tag, head), tag.type)
            else:
                self._note_ignored(tag, head, allowed)
                self.skip(tag)

    def _store(self, tag: _Node, head: XmlElement | None) -> XmlElement:
        """The element of a recognised tag, added under ``head`` (as a root when None) and counted."""
        element = XmlElement(tag.name, tag.attrs, line=tag.line)
        if head is None:
            self.roots.append(element)
        else:
            head.append(element)
        self.count += 1
        return element

    def _note_ignored(self, tag: _Node, head: XmlElement | None, allowed: tuple[str, ...]) -> None:
        """Note an element NCCL does not load where it is (NCCL says so at INFO level, or not at all)."""
        where = f"<{head.name}>" if head is not None else "the top level"
        if allowed:
            self.notes.append(f"line {tag.line}: Ignoring element {tag.name} (and what it holds) "
                              f"under {where}")
        else:
            self.notes.append(f"line {tag.line}: element {tag.name} under {where}, which NCCL reads "
                              f"as a leaf, is skipped silently")

    def skip(self, head: _Node) -> None:  # xmlLoadSub without handlers: the node's slot is reused
        """Read past what an unrecognised tag holds, storing nothing."""
        if head.type == _SINGLE:
            return
        while True:
            if self.count == self.max_nodes:
                self.tags.fail(f"Error : XML parser is limited to {self.max_nodes} nodes")
            tag = self.tags.next_tag()
            if tag.type == _NONE:
                self.tags.fail(f"XML Parse : unterminated {head.name}")
            if tag.type == _CLOSE:  # compared with itself in NCCL: any closing tag ends it
                return
            self.skip(tag)

    def check_version(self, element: XmlElement) -> None:
        """The version check of the top-level handlers (ncclTopoXmlLoadSystem, ncclTopoXmlGraphLoadGraphs)."""
        what = {"system": "Topology", "graphs": "Graph"}[element.name]
        version = element.get("version")
        if version is None:
            self.tags.fail(f"Attribute version of node {element.name} not found")
        number = _c_strtol(version)
        if number != 1:
            self.tags.fail(f"XML {what} has wrong version {number}, 1 needed")


def _read(text: str | bytes, grammar: dict, max_nodes: int, kind: str) -> NcclXml:
    data = text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else bytes(text)
    loader = _TreeLoader(data, grammar, max_nodes)
    try:
        loader.load_top_level()
    except RecursionError:
        raise NcclXmlError("elements nested too deeply to check") from None
    return NcclXml(kind, tuple(loader.roots), loader.count, tuple(loader.notes))


def read_nccl_topology(text: str | bytes) -> NcclXml:
    """Parse an NCCL topology file (``NCCL_TOPO_FILE``) as NCCL 2.30.7 does.

    Raises
    ------
    NcclXmlError
        Where NCCL's parser fails, with its message and the line: an XML declaration, a tab, an
        attribute on a continuation line, a quote missing, a mismatched closing tag, text between
        tags, a name or value longer than 253 characters, 256 or more elements, or a ``<system>``
        whose ``version`` is not 1.

    Examples
    --------
    >>> doc = read_nccl_topology('<system version="1">\\n  <cpu numaid="0"/>\\n</system>\\n')
    >>> doc.root.name, doc.root.children[0]["numaid"], doc.elements
    ('system', '0', 2)
    >>> read_nccl_topology('<?xml version="1.0"?>\\n<system version="1"/>')
    Traceback (most recent call last):
    ...
    topo.outputs.nccl_xml.NcclXmlError: line 1: XML Parse : expected >, got '?'
    """
    return _read(text, TOPOLOGY_GRAMMAR, TOPO_XML_MAX_NODES, "topology")


def read_nccl_graph(text: str | bytes) -> NcclXml:
    """Parse an ``NCCL_GRAPH_FILE`` (``<graphs version="1">``) as NCCL does."""
    return _read(text, GRAPH_GRAMMAR, GRAPH_XML_MAX_NODES, "graph")


# --- the writer -----------------------------------------------------------------------------------


def _check_value(element: str, key: str, value: str) -> None:
    if '"' in value or any(ord(ch) < 32 for ch in value) or len(value.encode()) > MAX_STR_LEN - 2:
        raise ValueError(f"<{element} {key}=...>: {value!r} cannot be written for NCCL "
                         f"(no quotes or control characters, at most {MAX_STR_LEN - 2} bytes)")


def dump_xml(root: XmlElement, comments: tuple[str, ...] = ()) -> str:
    """Text of an element tree as NCCL writes it (``ncclTopoDumpXmlRec``), after optional comments.

    >>> print(dump_xml(XmlElement("system", [("version", "1")], [XmlElement("cpu", [("numaid", "0")])])), end="")
    <system version="1">
      <cpu numaid="0"/>
    </system>
    """
    lines = []
    for comment in comments:
        if "--" in comment or "\n" in comment:
            raise ValueError(f"comment {comment!r} may not hold '--' or a line break")
        lines.append(f"<!-- {comment} -->")

    def walk(element: XmlElement, indent: int) -> None:
        for key, value in element.attrs:
            _check_value(element.name, key, value)
        attrs = "".join(f' {key}="{value}"' for key, value in element.attrs)
        if not element.children:
            lines.append(f"{' ' * indent}<{element.name}{attrs}/>")
            return
        lines.append(f"{' ' * indent}<{element.name}{attrs}>")
        for child in element.children:
            walk(child, indent + 2)
        lines.append(f"{' ' * indent}</{element.name}>")

    walk(root, 0)
    return "\n".join(lines) + "\n"


# --- rule checks ----------------------------------------------------------------------------------


def check_topology(text: str | bytes) -> list[str]:
    """Every way a topology file breaks the exporter rules of docs/nccl.md (empty: none).

    Beyond what NCCL's parser refuses: NCCL's own layout (one tag per line, two-space indent,
    double quotes, single spaces), at most 255 elements, at most 10 attributes per element and 128
    children, exact lower-case bus ids, ``link_speed`` strings from NCCL's dictionary, decimal
    integers without leading zeros, complete ``<cpu>`` attributes, unique NIC GUIDs, NVLink
    targets that exist, and no attributes NCCL does not know.

    >>> for problem in check_topology('<system version="1">\\n  <cpu numaid="00"/>\\n</system>\\n'):
    ...     print(problem)
    line 2: <cpu numaid=00>: numaid="00" is zero-padded (NCCL reads a leading 0 as octal)
    line 2: <cpu numaid=00>: missing affinity, arch, vendor, familyid, modelid
    """
    try:
        doc = read_nccl_topology(text)
    except NcclXmlError as exc:
        return [f"NCCL would refuse it: {exc}"]
    problems: list[str] = []
    if doc.root is None:
        return ["no <system> element: NCCL would load nothing from it"]
    if len(doc.roots) > 1:
        problems.append(f"{len(doc.roots)} <system> elements; NCCL uses the first")
    problems += [f"NCCL notes: {note}" for note in doc.notes]
    problems += _layout_problems(text, doc.root)
    if doc.root.get("version") != "1":
        problems.append(f'line {doc.root.line}: <system version="{doc.root.get("version")}">: write version="1"')
    if doc.elements > TOPO_XML_MAX_NODES - 1:
        problems.append(f"{doc.elements} elements: NCCL's parser stops at {TOPO_XML_MAX_NODES}")
    busids: dict[str, int] = {}
    gpu_busids = set()
    guids: dict[str, XmlElement] = {}
    for e in doc.iter():
        where = f"line {e.line}: <{e.name}"
        label = f"{where}{' ' + e.attrs[0][0] + '=' + e.attrs[0][1] if e.attrs else ''}>"
        if len(e.attrs) > MAX_EXPORT_ATTRS:
            problems.append(f"{label}: {len(e.attrs)} attributes; keep to {MAX_EXPORT_ATTRS} (NCCL adds its own "
                            f"to a {MAX_ATTR_COUNT + 1}-slot array)")
        if len(e.children) > MAX_PORTABLE_SUBS:
            problems.append(f"{label}: {len(e.children)} children; NCCL 2.21 to 2.29.2 take {MAX_PORTABLE_SUBS}")
        unknown = [k for k, _ in e.attrs if k not in KNOWN_ATTRS.get(e.name, frozenset())]
        if unknown:
            problems.append(f"{label}: attributes NCCL does not know: {', '.join(unknown)} (put metadata in "
                            f"comments)")
        for key, value in e.attrs:
            if key in INT_ATTRS and _PADDED_RE.fullmatch(value):
                problems.append(f'{label}: {key}="{value}" is zero-padded (NCCL reads a leading 0 as octal)')
        if e.name == "cpu":
            missing = [k for k in ("numaid", "affinity", "arch", "vendor", "familyid", "modelid") if k not in e]
            if e.get("arch") not in (None, "x86_64"):
                missing = [k for k in missing if k not in ("vendor", "familyid", "modelid")]
            if missing:
                problems.append(f"{label}: missing {', '.join(missing)}")
            affinity = e.get("affinity")
            if affinity is not None and not _MASK_RE.fullmatch(affinity):
                problems.append(f'{label}: affinity="{affinity}" is not 32-bit hex words, most significant first')
        elif e.name == "pci":
            busid = e.get("busid", "")
            if not _BUSID_RE.fullmatch(busid):
                problems.append(f'{label}: busid="{busid}" is not dddd:bb:dd.f in lower case')
            if busid in busids:
                problems.append(f"{label}: bus id {busid} already on line {busids[busid]}")
            busids.setdefault(busid, e.line)
            for key in ("class", "link_speed", "link_width"):
                if key not in e:
                    problems.append(f"{label}: missing {key}")
            speed = e.get("link_speed")
            if speed is not None and speed not in LINK_SPEEDS:
                problems.append(f'{label}: link_speed="{speed}" is not in NCCL\'s dictionary')
            width = e.get("link_width")
            if width is not None and not re.fullmatch(r"[1-9][0-9]*", width):
                problems.append(f'{label}: link_width="{width}" is not a lane count')
            if any(c.name == "gpu" for c in e.children):
                gpu_busids.add(busid)
        elif e.name == "net":
            if "name" not in e:
                problems.append(f"{label}: missing name")
            guid = e.get("guid")
            nic = e.parent
            if guid is not None:
                other = guids.get(guid)
                if other is not None and other is not nic:
                    problems.append(f"{label}: guid {guid} is also on another NIC (line {other.line})")
                guids.setdefault(guid, nic)
            speed = e.get("speed")
            if speed is not None and not re.fullmatch(r"[1-9][0-9]*", speed):
                problems.append(f'{label}: speed="{speed}" is not a positive number of Mb/s')
        elif e.name == "nvlink":
            for key in ("count", "tclass", "target"):
                if key not in e:
                    problems.append(f"{label}: missing {key}")
    for e in doc.iter("nvlink"):
        if (e.get("tclass") or "").startswith("0x03") and e.get("target") not in gpu_busids:
            problems.append(f"line {e.line}: <nvlink target={e.get('target')}>: no GPU with that bus id")
    return problems


def _layout_problems(text: str | bytes, root: XmlElement) -> list[str]:
    """Differences from NCCL's own layout (comment lines before ``<system>`` allowed)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    lines = text.split("\n")
    start = 0
    while start < len(lines) and (lines[start].startswith("<!--") and lines[start].endswith("-->")):
        start += 1
    want = dump_xml(root).split("\n")
    got = lines[start:]
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return [f"line {start + i + 1}: not in NCCL's layout: {a.strip()[:60]!r} (expected {b.strip()[:60]!r})"]
    if len(got) != len(want):
        return [f"line {start + min(len(got), len(want)) + 1}: not in NCCL's layout (extra or missing lines)"]
    return []


# --- structure ------------------------------------------------------------------------------------


def _pci_kind(e: XmlElement) -> str | None:
    cls = e.get("class") or ""
    if any(c.name == "gpu" for c in e.children) or cls.startswith("0x03"):
        return "gpu"
    if any(c.name == "nic" for c in e.children) or cls.startswith("0x02"):
        return "nic"
    return None


def device_groups(doc: NcclXml) -> list[dict[str, Any]]:
    """GPUs and NICs grouped by the top-level PCIe switch (a ``<pci>`` right under a ``<cpu>``).

    Each group: ``numaid``, ``switch`` (bus id), ``gpus`` (bus ids), ``gpu_devs`` (``dev`` of
    their ``<gpu>``, None in skeleton files), ``nics`` (bus ids), ``nets`` (``<net>`` elements).
    A GPU or NIC directly under a ``<cpu>`` forms a group of its own with ``switch`` None.
    """
    groups = []
    if doc.root is None:
        return groups
    for cpu in doc.root.children:
        for top in cpu.children:
            group = {"numaid": cpu.get("numaid"), "switch": None, "gpus": [], "gpu_devs": [], "nics": [],
                     "nets": []}
            if top.name == "pci" and _pci_kind(top) is None:
                group["switch"] = top.get("busid")
            for e in top.iter():
                if e.name == "pci" and _pci_kind(e) == "gpu":
                    group["gpus"].append(e.get("busid"))
                    gpu = next((c for c in e.children if c.name == "gpu"), None)
                    group["gpu_devs"].append(None if gpu is None else gpu.get("dev"))
                elif e.name == "pci" and _pci_kind(e) == "nic":
                    group["nics"].append(e.get("busid"))
                elif e.name == "net":
                    group["nets"].append(e)
            groups.append(group)
    return groups
