"""Included templates rendered once per distinct input: the same bytes, without rendering them again.

Most of a switch's ``config_db.json`` is tables that are the same on every switch with the same
ports (``QUEUE``, ``BUFFER_QUEUE``, ``PORT_QOS_MAP``, ``PFC_WD``...), each rendered by an
``{% include %}``d template. :class:`IncludeMemo` keeps the text that such a template rendered,
keyed by exactly the values it read, and gives it back when the next include reads the same values.

What a template reads is found from its syntax tree once (:func:`template_needs`): each name it
looks up, and below it the keys it reads (``sw.pfc_wd.action``), the lists it loops over and the
keys it reads of their items (``p.name`` of every ``p`` in ``sw.active_ports``). Anything it uses
in any other way (printed, compared, passed to a filter, a method called on it) it is taken to
depend on whole. The key of one render is those values, read from the include's context: a
string, number, boolean or ``None`` by its type and value, a short list or tuple of them item by
item, anything else (a dict or a long list) by its identity, which the memo keeps alive (facts are
never changed once made, and the immutable sandbox lets no template change them). So two renders
with equal keys read equal data, and print the same text.

A template is not memoised when its output could depend on something else: a macro, block,
include or import of its own, ``{% set %}`` blocks, recursive loops, loop controls, the
``random`` filter, the ``lipsum`` global and the ``sameas`` test (identity), or any construct this
module does not know. Such a template renders as Jinja2 renders it, every time.
"""

from __future__ import annotations

from typing import Any, Callable

from jinja2 import nodes
from jinja2.utils import missing

#: Names of the attributes of a dict: ``d.items`` is the method, not an item, so ``d`` is read whole.
_DICT_ATTRIBUTES = frozenset(dir(dict))

#: Filters, tests and globals whose result is not a function of their arguments' values.
IMPURE_FILTERS = frozenset({"random"})
IMPURE_TESTS = frozenset({"sameas"})
IMPURE_GLOBALS = frozenset({"lipsum"})
#: Filters that call another filter or test named by an argument (``map('random')``).
_BY_NAME = frozenset({"map", "select", "reject", "selectattr", "rejectattr"})
_IMPURE_NAMES = IMPURE_FILTERS | IMPURE_TESTS

#: Statements whose output is a function of what their expressions read (and their bodies').
_STATEMENTS = (nodes.Output, nodes.If, nodes.For, nodes.Assign)

#: Distinct keys kept per template (oldest dropped first): switches of one tier share a few.
MEMO_ENTRIES = 16
#: Renders after which a memo that mostly misses is given up.
MEMO_TRIAL = 16
#: Longest list, tuple or dict keyed by value rather than identity.
VALUE_ITEMS = 64


class Unsupported(Exception):
    """A construct whose output could depend on more than the values this module tracks."""


class Need:
    """What a template reads of one value: all of it (``whole``), some of its keys (``attrs``),
    and what it reads of each item when it loops over it (``each``)."""

    __slots__ = ("whole", "attrs", "each", "_items", "_last", "_last_key")

    def __init__(self) -> None:
        self.whole = False
        self.attrs: dict[str, Need] = {}
        self.each: Need | None = None
        self._items: tuple[tuple[str, Need], ...] | None = None
        self._last: Any = _NOTHING
        self._last_key: Any = None

    def attr(self, name: str) -> "Need":
        return self.attrs.setdefault(name, Need())

    def element(self) -> "Need":
        if self.each is None:
            self.each = Need()
        return self.each

    def freeze(self, value: Any, keep: list) -> Any:
        """The key of ``value`` for what this need reads of it (objects keyed by identity go into
        ``keep``, which must outlive the key)."""
        if self.whole:
            return whole(value, keep)
        if value is self._last:  # the same (unchanging) object as last time: the same key
            keep.append(value)
            return self._last_key
        parts: list[Any] = []
        if self.attrs:
            if type(value) is not dict:
                return whole(value, keep)
            items = self._items
            if items is None:
                items = self._items = tuple(sorted(self.attrs.items()))
            for name, need in items:
                parts.append(need.freeze(value[name], keep) if name in value else _ABSENT)
        if self.each is not None:
            kind = type(value)
            if kind is not list and kind is not tuple:
                return whole(value, keep)
            parts.append(self.each.freeze_items(value, keep))
        key = tuple(parts)
        if type(value) in _CONTAINERS:
            self._last, self._last_key = value, key
            keep.append(value)
        return key

    def freeze_items(self, items: list | tuple, keep: list) -> Any:
        """The key of every item of a list this need reads each item of. Items that are dicts of
        which only some plain keys are read (a port's name and cable) are read a key at a time
        over all items: the values and their types."""
        names = self._flat_names()
        if names is not None and set(map(type, items)) <= _DICT_ONLY:
            columns: list[Any] = [len(items)]
            for name in names:
                column = tuple([item.get(name, _ABSENT) for item in items])
                kinds = tuple(map(type, column))
                if not set(kinds) <= _FLAT:
                    break
                columns.append(column)
                columns.append(kinds)
                if float in kinds:  # -0.0 == 0.0 but prints otherwise
                    columns.append(tuple(map(repr, column)))
            else:
                return tuple(columns)
        return (len(items), tuple([self.freeze(item, keep) for item in items]))

    def _flat_names(self) -> tuple[str, ...] | None:
        """The keys read of this value when it is read as a dict of which only some keys are read,
        each of them whole (nothing below them)."""
        if self.whole or self.each is not None or not self.attrs:
            return None
        if any(not n.whole for n in self.attrs.values()):
            return None
        return tuple(sorted(self.attrs))


class _Absent:
    """A name or key that is not there (hashable, equal only to itself)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()
_NOTHING = object()  # no value seen yet (never a template's value)
_IDENTITY = object()  # first item of a key made from an object's identity
_SCALARS = (str, int, bool, type(None))
_CONTAINERS = (dict, list, tuple)
_DICT_ONLY = frozenset({dict})
#: Values whose (value, type) is their key exactly (floats add their repr).
_FLAT = frozenset({str, int, bool, float, type(None), _Absent})


def whole(value: Any, keep: list) -> Any:
    """The key of a value read whole: scalars by type and value, short sequences item by item,
    anything else by identity (kept alive in ``keep``)."""
    kind = type(value)
    if kind in _SCALARS:
        return (kind, value)
    if kind is float:
        return (kind, repr(value))  # -0.0 == 0.0 but prints otherwise
    if value is _ABSENT:
        return _ABSENT
    if (kind is tuple or kind is list) and len(value) <= VALUE_ITEMS:
        return (kind, tuple([whole(item, keep) for item in value]))
    if kind is dict and len(value) <= VALUE_ITEMS:
        return (kind, tuple([(whole(k, keep), whole(v, keep)) for k, v in value.items()]))
    keep.append(value)
    return (_IDENTITY, id(value))


class _Loop:
    """The ``loop`` of a for loop over a value whose items are ``items`` (None: not tracked)."""

    __slots__ = ("items",)

    def __init__(self, items: Need | None) -> None:
        self.items = items


class _Reads:
    """Walks a template's syntax tree, recording what it reads of each name of its context."""

    def __init__(self, filters: set[str], tests: set[str]) -> None:
        self.roots: dict[str, Need] = {}
        self.filters = filters
        self.tests = tests

    def root(self, name: str) -> Need:
        if name in IMPURE_GLOBALS:
            raise Unsupported(name)
        return self.roots.setdefault(name, Need())

    @staticmethod
    def use(value: Any) -> None:
        """The template depends on all of ``value``."""
        if isinstance(value, Need):
            value.whole = True
        elif isinstance(value, _Loop) and value.items is not None:
            value.items.whole = True  # the loop object gives its items (previtem, nextitem)

    # statements ----------------------------------------------------------------------------------

    def block(self, body: list[nodes.Node], scope: dict[str, tuple[Any, bool]]) -> None:
        for node in body:
            self.statement(node, scope)

    def statement(self, node: nodes.Node, scope: dict[str, tuple[Any, bool]]) -> None:
        if not isinstance(node, _STATEMENTS):
            raise Unsupported(type(node).__name__)
        if isinstance(node, nodes.Output):
            for child in node.nodes:
                if not isinstance(child, nodes.TemplateData):
                    self.use(self.expr(child, scope))
        elif isinstance(node, nodes.If):
            self.use(self.expr(node.test, scope))
            # an if opens no scope in Jinja2: what a branch sets stays set after it
            for branch in (node.body, *node.elif_, node.else_):
                self.block([branch] if isinstance(branch, nodes.If) else branch, scope)
        elif isinstance(node, nodes.For):
            self.for_loop(node, scope)
        else:
            self.assign(node, scope)

    def for_loop(self, node: nodes.For, scope: dict[str, tuple[Any, bool]]) -> None:
        if node.recursive:
            raise Unsupported("recursive loop")
        iterable = self.expr(node.iter, scope)
        items = iterable.element() if isinstance(iterable, Need) else None
        inner = dict(scope)  # a loop's body is its own scope
        if isinstance(node.target, nodes.Name):
            inner[node.target.name] = (items, True)
        else:  # for a, b in ...: each item unpacked, so read whole
            self.use(items)
            for name in node.target.find_all(nodes.Name):
                inner[name.name] = (None, True)
        if node.test is not None:
            self.use(self.expr(node.test, inner))
        inner["loop"] = (_Loop(items), True)
        self.block(node.body, inner)
        self.block(node.else_, scope)

    def assign(self, node: nodes.Assign, scope: dict[str, tuple[Any, bool]]) -> None:
        value = self.expr(node.node, scope)
        if isinstance(node.target, nodes.NSRef):
            self.expr(nodes.Name(node.target.name, "load"), scope)
            self.use(value)
            return
        names = [node.target.name] if isinstance(node.target, nodes.Name) else \
            [n.name for n in node.target.find_all(nodes.Name)]
        if not isinstance(node.target, nodes.Name):
            self.use(value)
            value = None
        for name in names:
            if name in scope:  # set in one branch and another: the template may read either
                self.use(scope[name][0])
            # not certain: the name may still be the context's (set in a branch not taken)
            scope[name] = (value if isinstance(value, (Need, _Loop)) else None, False)

    # expressions ---------------------------------------------------------------------------------

    def expr(self, node: nodes.Node, scope: dict[str, tuple[Any, bool]]) -> Any:
        """The Need (or loop) that ``node`` evaluates to, if it is one; None for a derived value,
        whose inputs have been recorded."""
        if isinstance(node, (nodes.Const, nodes.TemplateData)):
            return None
        if isinstance(node, nodes.Name):
            if node.name in scope:
                value, certain = scope[node.name]
                if not certain:
                    self.use(self.root(node.name))
                return value
            return self.root(node.name)
        if isinstance(node, nodes.Getattr):
            base = self.expr(node.node, scope)
            attr = node.attr
            if isinstance(base, Need) and attr not in _DICT_ATTRIBUTES and attr[:1] != "_":
                return base.attr(attr)
            if isinstance(base, _Loop):
                return base.items if attr in ("previtem", "nextitem") else None
            self.use(base)
            return None
        if isinstance(node, nodes.Filter):
            if node.name not in self.filters or node.node is None:
                raise Unsupported(f"filter {node.name}")
            if node.name in _BY_NAME and not all(isinstance(a, nodes.Const) and a.value not in _IMPURE_NAMES
                                                 for a in node.args):
                raise Unsupported(f"filter {node.name} calling a filter or test by name")
            self.use(self.expr(node.node, scope))
            self.arguments(node, scope)
            return None
        if isinstance(node, nodes.Test):
            if node.name not in self.tests:
                raise Unsupported(f"test {node.name}")
            self.use(self.expr(node.node, scope))
            self.arguments(node, scope)
            return None
        if isinstance(node, nodes.Call):
            self.use(self.expr(node.node, scope))
            self.arguments(node, scope)
            return None
        if isinstance(node, nodes.Compare):
            self.use(self.expr(node.expr, scope))
            for op in node.ops:
                self.use(self.expr(op.expr, scope))
            return None
        if isinstance(node, (nodes.Getitem, nodes.Slice, nodes.BinExpr, nodes.UnaryExpr, nodes.Concat,
                             nodes.CondExpr, nodes.Tuple, nodes.List, nodes.Dict, nodes.Pair, nodes.Keyword,
                             nodes.MarkSafe, nodes.MarkSafeIfAutoescape)):
            for child in node.iter_child_nodes():
                self.use(self.expr(child, scope))
            return None
        raise Unsupported(type(node).__name__)

    def arguments(self, node: nodes.Filter | nodes.Test | nodes.Call, scope: dict[str, tuple[Any, bool]]) -> None:
        for arg in node.args:
            self.use(self.expr(arg, scope))
        for keyword in node.kwargs:
            self.use(self.expr(keyword.value, scope))
        for extra in (node.dyn_args, node.dyn_kwargs):
            if extra is not None:
                self.use(self.expr(extra, scope))


def template_needs(tree: nodes.Template, filters: set[str], tests: set[str]) -> dict[str, Need] | None:
    """What a template reads of each name of its context; None when it cannot be memoised."""
    reads = _Reads(set(filters) - IMPURE_FILTERS, set(tests) - IMPURE_TESTS)
    try:
        reads.block(tree.body, {})
    except Unsupported:
        return None
    return reads.roots


class IncludeMemo:
    """The texts one template rendered, by the key of what it read."""

    def __init__(self, needs: dict[str, Need]) -> None:
        self.needs = tuple(sorted(needs.items()))
        self.texts: dict[Any, tuple[str, list]] = {}
        self.renders = self.hits = 0

    @property
    def useful(self) -> bool:
        """False once most renders have missed (the template prints each switch's own data): the
        keys cost more than they save, and the template is rendered as it is."""
        return self.renders < MEMO_TRIAL or self.hits * 4 >= self.renders

    def render(self, resolve: Callable[[str], Any], render: Callable[[], str]) -> str:
        """The text for the context that ``resolve`` looks names up in; ``render()`` makes it."""
        keep: list[Any] = []
        key = tuple([need.freeze(_ABSENT if (value := resolve(name)) is missing else value, keep)
                     for name, need in self.needs])
        self.renders += 1
        hit = self.texts.get(key)
        if hit is not None:
            self.hits += 1
            return hit[0]
        text = render()
        if len(self.texts) >= MEMO_ENTRIES:
            del self.texts[next(iter(self.texts))]
        self.texts[key] = (text, keep)
        return text

