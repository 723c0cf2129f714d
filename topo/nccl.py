"""NCCL files for the fabric's server type, and a reader that parses topology XML the way NCCL does.

:func:`nccl_files` writes, for the spec's server profile (:mod:`topo.servers`):

``nccl/<profile>-topo.xml``
    the topology file NCCL loads from ``NCCL_TOPO_FILE``: CPUs, PCIe switches, and under each
    switch the GPUs and the fabric NICs of their rails, with ``rail="r"`` on NIC ``r``'s ``<net>``.
``nccl/<profile>.env``
    ``KEY=VALUE`` lines (``/etc/nccl.conf`` format): ``NCCL_TOPO_FILE``, ``NCCL_IB_HCA`` in rail
    order, ``NCCL_CROSS_NIC``, ``NCCL_IB_QPS_PER_CONNECTION`` from the congestion analysis, and
    ``NCCL_IB_TC`` / ``NCCL_SOCKET_IFNAME`` where they apply. Rendered from ``nccl/nccl.env.j2``.

The XML is written in Python, line by line, exactly as NCCL's own writer (``ncclTopoDumpXmlRec``)
does: one tag per line, two-space indent, ``key="value"`` separated by single spaces, no XML
declaration. A template would only loop, and a user override could break rules NCCL's parser
enforces; the values come from the profile, which users control.

:func:`read_nccl_topology` is a port of NCCL's parser (``xmlGetNode`` / ``xmlLoadSub`` in
``src/graph/xml.cc``, NCCL 2.30.7): it fails where NCCL fails, with NCCL's message and the line,
and keeps what NCCL keeps (recognised elements only, at most 16 attributes each).
:func:`check_topology` adds the rules an exporter should follow beyond what parses (docs/nccl.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Iterator

from . import __version__
from .errors import SpecError, TopoError
from .servers import LINK_SPEEDS, NVSWITCH_CLASS, ServerProfile, check_server, resolve_server

if TYPE_CHECKING:
    import jinja2

    from .analyze import Analysis
    from .fabric import Fabric

#: NCCL's limits (src/graph/xml.h, topo.h at 2.30.7).
MAX_STR_LEN = 255
MAX_ATTR_COUNT = 16
MAX_SUBS = 640
TOPO_XML_MAX_NODES = 256
GRAPH_XML_MAX_NODES = 65536
#: Rules an exporter keeps to, stricter than the parser (docs/nccl.md).
MAX_EXPORT_ATTRS = 10
MAX_PORTABLE_SUBS = 128
#: Where the topology file is installed unless told otherwise.
DEFAULT_INSTALL_DIR = "/etc/nccl"
#: NCCL_IB_QPS_PER_CONNECTION takes 1 to 128.
MAX_NCCL_QPS = 128
#: Placeholder target of NVLinks to the NVSwitch fabric (the target is not read for that class).
NVSWITCH_TARGET = "fffffff:ff:ff.0"
#: PCI classes topo writes.
SWITCH_CLASS = "0x060400"
GPU_CLASS = "0x030200"
IB_NIC_CLASS = "0x020700"
ETHERNET_NIC_CLASS = "0x020000"

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
    __slots__ = ("type", "name", "attrs", "line")

    def __init__(self) -> None:
        self.type, self.name, self.attrs, self.line = _NONE, "", [], 0


class _Parser:
    def __init__(self, data: bytes, grammar: dict, max_nodes: int) -> None:
        self.data, self.pos = data, 0
        self.grammar, self.max_nodes = grammar, max_nodes
        self.count = 0
        self.roots: list[XmlElement] = []
        self.notes: list[str] = []
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

    def char(self) -> int:
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

    def node(self) -> _Node:  # xmlGetNode
        node = _Node()
        c = 0x20
        while c in (0x20, 0x0A, 0x0D):
            if self.pos >= len(self.data):
                return node
            c = self.data[self.pos]
            self.pos += 1
        node.line = self.line()
        if c != 0x3C:
            self.fail(f"XML Parse error : expecting '<', got '{_show(c)}'")
        name, _, c = self.token(False)
        if name.startswith("!--"):
            self.skip_comment(name[3:], c)
            return self.node()
        if name == "" and c == 0x2F:
            node.type = _CLOSE
            node.name, _, c = self.token(False)
            if c != 0x3E:
                self.fail(f"XML Parse error : unexpected trailing {_show(c)} in closing tag {node.name}")
            return node
        node.type, node.name = _OPEN, name
        while c == 0x20:
            key, value, c = self.token(True)
            if len(node.attrs) == MAX_ATTR_COUNT:
                self.notes.append(f"line {node.line}: <{name}>: Ignoring extra attributes (max {MAX_ATTR_COUNT}): "
                                  f"{key}")
            else:
                if key == "":
                    self.notes.append(f"line {node.line}: <{name}>: an empty attribute (two spaces, or a space "
                                      f"before '/>' or '>') takes one of the {MAX_ATTR_COUNT} slots")
                node.attrs.append((key, value or ""))
        if c == 0x2F:
            node.type = _SINGLE
            _, _, c = self.token(False)
        if c != 0x3E:
            self.fail(f"XML Parse : expected >, got '{_show(c)}'")
        return node

    def load(self, head: XmlElement | None, head_type: int) -> None:  # xmlLoadSub with handlers
        if head is not None and head_type == _SINGLE:
            return
        allowed = self.grammar[head.name if head is not None else None]
        while True:
            if self.count == self.max_nodes:
                self.fail(f"Error : XML parser is limited to {self.max_nodes} nodes")
            node = self.node()
            if node.type == _NONE:
                if head is not None:
                    self.fail(f"XML Parse : unterminated {head.name}")
                return
            if head is not None and node.type == _CLOSE:
                if node.name != head.name:
                    self.fail(f"XML Mismatch : {head.name} / {node.name}")
                return
            if node.name in allowed:
                element = XmlElement(node.name, node.attrs, line=node.line)
                if head is not None:
                    if len(head.children) == MAX_SUBS:
                        self.fail(f"Error : XML parser is limited to {MAX_SUBS} subnodes")
                    head.append(element)
                else:
                    self.roots.append(element)
                self.count += 1
                if head is None:
                    self.check_version(element)
                self.load(element, node.type)
            else:
                where = f"<{head.name}>" if head is not None else "the top level"
                if allowed:
                    self.notes.append(f"line {node.line}: Ignoring element {node.name} (and what it holds) "
                                      f"under {where}")
                else:
                    self.notes.append(f"line {node.line}: element {node.name} under {where}, which NCCL reads "
                                      f"as a leaf, is skipped silently")
                self.skip(node)

    def skip(self, head: _Node) -> None:  # xmlLoadSub without handlers: the node's slot is reused
        if head.type == _SINGLE:
            return
        while True:
            if self.count == self.max_nodes:
                self.fail(f"Error : XML parser is limited to {self.max_nodes} nodes")
            node = self.node()
            if node.type == _NONE:
                self.fail(f"XML Parse : unterminated {head.name}")
            if node.type == _CLOSE:  # compared with itself in NCCL: any closing tag ends it
                return
            self.skip(node)

    def check_version(self, element: XmlElement) -> None:
        what = {"system": "Topology", "graphs": "Graph"}[element.name]
        version = element.get("version")
        if version is None:
            self.fail(f"Attribute version of node {element.name} not found")
        number = _c_strtol(version)
        if number != 1:
            self.fail(f"XML {what} has wrong version {number}, 1 needed")


def _read(text: str | bytes, grammar: dict, max_nodes: int, kind: str) -> NcclXml:
    data = text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else bytes(text)
    parser = _Parser(data, grammar, max_nodes)
    try:
        parser.load(None, _NONE)
    except RecursionError:
        raise NcclXmlError("elements nested too deeply to check") from None
    return NcclXml(kind, tuple(parser.roots), parser.count, tuple(parser.notes))


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
    topo.nccl.NcclXmlError: line 1: XML Parse : expected >, got '?'
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


def _attrs(**values: Any) -> list[tuple[str, str]]:
    """Attributes in the given order, skipping None; integers in plain decimal (never zero-padded)."""
    return [(key, str(value)) for key, value in values.items() if value is not None]


def topology_element(profile: ServerProfile, nic_class: str = IB_NIC_CLASS) -> XmlElement:
    """The ``<system>`` tree of a server profile (what :func:`topology_xml` prints).

    Attribute order follows NCCL's dumps. Every attribute NCCL would fill in from the host when
    missing on a node that several ranks share (CPU model and mask, switch ids, link speed and
    width) is in the file, so that all local ranks' copies stay identical and fuse into one.
    """
    system = XmlElement("system", _attrs(version=1))
    for cpu in profile.cpus:
        c = system.append(XmlElement("cpu", _attrs(
            numaid=cpu.numaid, affinity=cpu.affinity, arch=cpu.arch, vendor=cpu.vendor,
            familyid=cpu.familyid, modelid=cpu.modelid)))
        for sw in cpu.switches:
            s = c.append(XmlElement("pci", _attrs(busid=sw.busid, **{"class": SWITCH_CLASS},
                                                  link_speed=sw.link_speed, link_width=sw.link_width)
                                    + list(sw.ids)))
            for gpu in sw.gpus:
                p = s.append(XmlElement("pci", _attrs(busid=gpu.busid, **{"class": GPU_CLASS},
                                                      link_speed=gpu.link_speed, link_width=gpu.link_width)))
                g = p.append(XmlElement("gpu", _attrs(dev=gpu.dev, sm=gpu.sm, gdr=gpu.gdr)))
                if gpu.nvlink:
                    g.append(XmlElement("nvlink", _attrs(target=NVSWITCH_TARGET, count=gpu.nvlink,
                                                         tclass=NVSWITCH_CLASS)))
            for nic in sw.nics:
                p = s.append(XmlElement("pci", _attrs(busid=nic.busid, **{"class": nic.pci_class or nic_class},
                                                      link_speed=nic.link_speed, link_width=nic.link_width)))
                n = p.append(XmlElement("nic"))
                n.append(XmlElement("net", _attrs(name=nic.name, dev=nic.rail, speed=nic.speed_mbps,
                                                  port=nic.port, guid=nic.guid, gdr=nic.gdr, rail=nic.rail)))
    return system


def topology_xml(profile: ServerProfile, nic_class: str = IB_NIC_CLASS,
                 comments: tuple[str, ...] | None = None) -> str:
    """The NCCL topology file of a server profile.

    >>> from topo.servers import server_profiles
    >>> text = topology_xml(server_profiles()["hgx-h100-8nic"])
    >>> read_nccl_topology(text).elements, check_topology(text)
    (59, [])
    """
    if comments is None:
        comments = _xml_comments(profile)
    return dump_xml(topology_element(profile, nic_class), comments)


def _xml_comments(profile: ServerProfile) -> tuple[str, ...]:
    lines = [
        f"NCCL topology of the {profile.name} servers ({profile.gpu_count} GPUs, {profile.nic_count} NICs), "
        f"written by topo {__version__}.",
        "GPU r shares a PCIe switch with the NIC of its rail; rail=\"r\" on that NIC's net element.",
        "Bus ids and NIC names must be the host's: compare with the file NCCL_TOPO_DUMP_FILE writes.",
    ]
    if profile.generic:
        lines.append("GENERIC PROFILE: bus ids and CPU values are placeholders. Describe the real server in a "
                     "profile file before installing this one (docs/nccl.md).")
    return tuple(lines)


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


# --- the files ------------------------------------------------------------------------------------


def _env_facts(fabric: "Fabric", profile: ServerProfile, analysis: "Analysis | None", topo_file: str) -> dict:
    from .configs import is_ethernet
    from .qos import QOS_PROFILES

    spec = fabric.spec
    ethernet = is_ethernet(fabric)
    if analysis is not None:
        o = analysis.options
        qps = min(o.qps, MAX_NCCL_QPS)
        pairs = "queue pair" if o.qps == 1 else "queue pairs"
        source = (f"from the congestion analysis of this design ({o.qps} {pairs} per connection, "
                  f"{o.routing} routing, {o.cc} congestion control)")
        if o.qps > MAX_NCCL_QPS:
            source += f"; NCCL takes at most {MAX_NCCL_QPS}"
    else:
        qps = 1
        source = ("NCCL's default of 1, as no congestion analysis was given (topo analyze --qps N "
                  "compares values on this fabric)")
    if spec.placement == "rail":
        cross_nic, cross_why = 0, ("Rail-optimized fabric: NIC r of every node is on a rail-r leaf, so "
                                   "rings and trees stay on one rail")
    else:
        cross_nic, cross_why = 1, ("Rack placement: all NICs of a node are on the same leaf, so crossing "
                                   "NICs between nodes costs nothing")
    tc = None
    if ethernet:
        q = QOS_PROFILES[spec.qos]
        tc = {"value": q.roce_tos, "why": f"the ToS byte of DSCP {q.roce_dscp[0]}, the lossless RoCE class of "
                                          f"the '{q.name}' QoS profile (as the switch configs and "
                                          f"hosts/roce-qos.sh use it)"}
    return {
        "topo_file": topo_file,
        "hca": ",".join(f"{n.name}:{n.port}" for n in profile.nics),
        "cross_nic": cross_nic, "cross_nic_why": cross_why,
        "qps": qps, "qps_source": source,
        "tc": tc,
        "socket_ifname": profile.socket_ifname,
        "technology": "RoCE" if ethernet else "InfiniBand",
    }


def nccl_files(fabric: "Fabric", server: ServerProfile | str | None = None, analysis: "Analysis | None" = None,
               env: "jinja2.Environment | None" = None, *, install_dir: str = DEFAULT_INSTALL_DIR,
               base_dir: str | None = None) -> dict[str, str]:
    """The NCCL files of the fabric's server type, by relative path.

    Parameters
    ----------
    fabric : Fabric
    server : ServerProfile or str, optional
        The profile, or a profile name or YAML path; default: the spec's (:func:`resolve_server`).
    analysis : Analysis, optional
        The congestion analysis; its ``options.qps`` becomes ``NCCL_IB_QPS_PER_CONNECTION``.
    env : jinja2.Environment, optional
        Template environment (user folders first); default: the packaged templates.
    install_dir : str
        Folder the topology file is installed in on the servers (``NCCL_TOPO_FILE``).
    base_dir : str, optional
        Folder a relative profile path is read from (the spec file's folder).

    Returns
    -------
    dict
        ``nccl/<profile>-topo.xml`` and ``nccl/<profile>.env``.

    Raises
    ------
    SpecError
        When the profile cannot be read or does not fit the spec (see :func:`resolve_server`), or
        when the server is too large for one NCCL file (255 elements).

    Examples
    --------
    >>> from topo import build_fabric, load_spec
    >>> files = nccl_files(build_fabric(load_spec({"gpus": 64})))
    >>> sorted(files)
    ['nccl/hgx-h100-8nic-topo.xml', 'nccl/hgx-h100-8nic.env']
    >>> [line for line in files['nccl/hgx-h100-8nic.env'].splitlines() if line.startswith("NCCL_IB_HCA")]
    ['NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1']
    """
    from dataclasses import replace

    from .configs import is_ethernet
    from .render import render_template, template_environment

    spec = fabric.spec
    if isinstance(server, str):
        profile = resolve_server(replace(spec, server=server), base_dir)
    elif server is None:
        profile = resolve_server(spec, base_dir)
    else:
        profile = server
        check_server(profile, spec)
    if not install_dir.startswith("/") or any(ch in install_dir for ch in " \t\n\"'"):
        raise ValueError(f"install_dir {install_dir!r}: expected an absolute path without spaces or quotes")
    xml_name = f"{profile.name}-topo.xml"
    topo_file = str(PurePosixPath(install_dir) / xml_name)
    nic_class = ETHERNET_NIC_CLASS if is_ethernet(fabric) else IB_NIC_CLASS
    elements = sum(1 for _ in topology_element(profile, nic_class).iter())
    if elements >= TOPO_XML_MAX_NODES:
        raise SpecError([
            f"server={profile.name}: its NCCL topology file would hold {elements} elements "
            f"({profile.gpu_count} GPUs, {profile.nic_count} NICs), but NCCL's parser takes at most "
            f"{TOPO_XML_MAX_NODES - 1}"])
    xml = topology_xml(profile, nic_class)
    problems = check_topology(xml)
    if problems:  # the profile is checked when read: this would be a bug
        raise NcclXmlError(f"the topology file of {profile.name} breaks a rule: {problems[0]}")
    context = {"version": __version__, "fabric": {"name": spec.name, "gpus": spec.gpus, "nodes": spec.nodes},
               "server": {"name": profile.name, "description": profile.description, "gpus": profile.gpu_count,
                          "nics": profile.nic_count, "generic": profile.generic, "xml": xml_name},
               "nccl": _env_facts(fabric, profile, analysis, topo_file)}
    env = env or template_environment()
    return {f"nccl/{xml_name}": xml,
            f"nccl/{profile.name}.env": render_template(env, "nccl/nccl.env.j2", context)}
