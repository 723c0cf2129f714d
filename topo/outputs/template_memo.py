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
string, number, boolean or ``None`` by its type and value (``0.0`` and ``-0.0`` apart, a NaN by
identity), a short or shallow list, tuple or dict item by item, a bigger plain container by its
identity, which the memo keeps alive. So two renders with equal keys read equal data, and print
the same text, provided the facts are not changed between renders: topo turns the memo on only
for the switch configs (:attr:`~topo.outputs.templating.TemplateSandbox.memo_includes`), whose
facts are made for each switch and never changed, and the immutable sandbox lets no template
change them. The same contract makes keys cheap: a container's key is made once while it is the
last one a need keyed (the fabric-wide facts are one object in every render), and the values of
a key over a list of dicts (the ports' names) once per list, for every include that reads them.
A render that reads anything else (the including template's loop, namespace, cycler or macro,
whose state changes under the same identity; a method or attribute of an object) is rendered,
not looked up.

A template is not memoised when its output could depend on something else, or when it changes
something: a macro, block, include or import of its own, ``{% set %}`` blocks, ``{% filter %}``,
``{% with %}``, recursive loops, ``{% set ns.x = ... %}`` (it may change the including template's
namespace), ``loop.changed`` and ``loop.cycle``, the ``cycler`` and ``joiner`` globals, the
``random`` filter (also by name through ``map`` or ``select``), the ``lipsum`` global, the
``sameas`` test (identity), a dict's method read without calling it, or any construct this module
does not know. Such a template renders as Jinja2 renders it, every time. Only ``render`` is the
same: a memoised include gives its text whole, so ``Template.generate`` streams it in one piece.
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
#: Globals whose objects change as they are called, or print their identity.
_STATEFUL_GLOBALS = frozenset({"cycler", "joiner"})
#: A loop's plain values (no methods): what a memoised template may read of ``loop``.
_LOOP_VALUES = frozenset({"index0", "index", "depth0", "depth", "length", "revindex0", "revindex", "first",
                          "last", "previtem", "nextitem"})
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


class Uncacheable(Exception):
    """A value read that cannot be keyed (its state may change under the same identity): this
    render is not looked up or kept."""


class Need:
    """What a template reads of one value: all of it (``whole``), some of its keys (``attrs``),
    and what it reads of each item when it loops over it (``each``)."""

    __slots__ = ("whole", "attrs", "each", "_items", "_last")

    def __init__(self) -> None:
        self.whole = False
        self.attrs: dict[str, Need] = {}
        self.each: Need | None = None
        self._items: tuple[tuple[str, Need], ...] | None = None
        # the container last keyed, its key and what the key keeps alive: the fabric-wide facts
        # are the same object in every render, and under the memo's contract (facts never
        # changed) the same object has the same key
        self._last: tuple[Any, Any, list] | None = None

    def attr(self, name: str) -> "Need":
        return self.attrs.setdefault(name, Need())

    def element(self) -> "Need":
        if self.each is None:
            self.each = Need()
        return self.each

    def freeze(self, value: Any, keep: list) -> Any:
        """The key of ``value`` for what this need reads of it (objects keyed by identity go into
        ``keep``, which must outlive the key)."""
        kind = type(value)
        if kind is not dict and kind is not list and kind is not tuple:
            return self._freeze(value, keep)
        last = self._last
        if last is not None and last[0] is value:
            keep.extend(last[2])
            return last[1]
        mark = len(keep)
        key = self._freeze(value, keep)
        self._last = (value, key, keep[mark:])
        return key

    def _freeze(self, value: Any, keep: list) -> Any:
        if self.whole:
            return whole(value, keep)
        parts: list[Any] = []
        if self.attrs:
            if type(value) is not dict:
                if any(hasattr(value, name) for name in self.attrs):  # a method, or an object's attribute
                    raise Uncacheable(type(value).__name__)
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
        return tuple(parts)

    def freeze_items(self, items: list | tuple, keep: list) -> Any:
        """The key of every item of a list this need reads each item of. Items that are dicts of
        which only some plain keys are read (a port's name and cable) are read a key at a time
        over all items: the values and their types."""
        names = self._flat_names()
        if names is not None and set(map(type, items)) <= _DICT_ONLY:
            columns: list[Any] = [len(items)]
            known = _COLUMNS.get(id(items))
            if known is None or known[0] is not items:
                if len(_COLUMNS) >= COLUMN_LISTS:
                    del _COLUMNS[next(iter(_COLUMNS))]
                known = _COLUMNS[id(items)] = (items, {})
            for name in names:
                key = known[1].get(name)
                if key is None:
                    key = known[1][name] = _column_key(items, name)
                if key is _UNFLAT:
                    break
                columns.extend(key)
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


def _column_key(items: list | tuple, name: str) -> tuple:
    """The key of the values of ``name`` over ``items`` (dicts): the values and their types, and
    the floats' reprs; ``_UNFLAT`` if a value is not flat or is a NaN."""
    column = tuple([item.get(name, _ABSENT) for item in items])
    kinds = tuple(map(type, column))
    if not set(kinds) <= _FLAT:
        return _UNFLAT
    if float in kinds:  # -0.0 == 0.0 but prints otherwise; a NaN is equal only to itself
        if any(v != v for v in column):
            return _UNFLAT
        return (column, kinds, tuple(map(repr, column)))
    return (column, kinds)


_UNFLAT: tuple = ()
#: The column keys of the lists of dicts keyed last (by the list's identity, the list kept alive):
#: the includes of one switch read the same ports' names again and again.
_COLUMNS: dict[int, tuple[Any, dict[str, tuple]]] = {}
COLUMN_LISTS = 4


class _Absent:
    """A name or key that is not there (hashable, equal only to itself)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()
_IDENTITY = object()  # first item of a key made from an object's identity
_SCALARS = (str, int, bool, type(None))
#: Objects that a template cannot change and that print nothing of their identity, keyed by it when
#: they are too big or too deep to key by value: facts (plain containers, never changed once
#: made) and the globals' classes and built-in functions (``range``, ``dict``).
_BY_IDENTITY = (dict, list, tuple, type, type(len))
#: Deepest nesting keyed by value.
VALUE_DEPTH = 8
_DICT_ONLY = frozenset({dict})
#: Values whose (value, type) is their key exactly (floats add their repr).
_FLAT = frozenset({str, int, bool, float, type(None), _Absent})


def whole(value: Any, keep: list, depth: int = 0) -> Any:
    """The key of a value read whole: scalars by type and value, short sequences and dicts item by
    item, plain containers too big or deep for that and the globals' classes and functions by
    identity (kept alive in ``keep``). Anything else (a loop, namespace, cycler or macro of the
    including template, whose state changes under the same identity) raises Uncacheable."""
    kind = type(value)
    if kind in _SCALARS:
        return (kind, value)
    if kind is float:
        if value == value:
            return (kind, repr(value))  # -0.0 == 0.0 but prints otherwise
        keep.append(value)
        return (_IDENTITY, id(value))  # NaN: equal only to itself
    if value is _ABSENT:
        return _ABSENT
    if depth < VALUE_DEPTH:
        if (kind is tuple or kind is list) and len(value) <= VALUE_ITEMS:
            return (kind, tuple([whole(item, keep, depth + 1) for item in value]))
        if kind is dict and len(value) <= VALUE_ITEMS:
            return (kind, tuple([(whole(k, keep, depth + 1), whole(v, keep, depth + 1)) for k, v in value.items()]))
    if kind in _BY_IDENTITY:
        keep.append(value)
        return (_IDENTITY, id(value))
    raise Uncacheable(kind.__name__)


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
        if isinstance(iterable, _Loop):  # for x in loop: the outer loop's items
            self.use(iterable)
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
        if isinstance(node.target, nodes.NSRef):  # changes a namespace, maybe the including template's
            raise Unsupported("namespace assignment")
        value = self.expr(node.node, scope)
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
            if attr in _DICT_ATTRIBUTES or attr[:1] == "_":  # a dict's method, not called: refused
                raise Unsupported(f"attribute {attr}")
            if isinstance(base, Need):
                return base.attr(attr)
            if isinstance(base, _Loop):
                if attr not in _LOOP_VALUES:  # loop.changed, loop.cycle: state, or unknown
                    raise Unsupported(f"loop.{attr}")
                return base.items if attr in ("previtem", "nextitem") else None
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
            func = node.node
            if isinstance(func, nodes.Getattr):  # a method of a value: a function of that value
                if func.attr[:1] == "_":
                    raise Unsupported(f"method {func.attr}")
                base = self.expr(func.node, scope)
                if isinstance(base, _Loop):
                    raise Unsupported(f"loop.{func.attr}()")
                self.use(base)
            elif isinstance(func, nodes.Name) and func.name in _STATEFUL_GLOBALS:
                raise Unsupported(func.name)
            else:
                callee = self.expr(func, scope)
                if isinstance(callee, _Loop):
                    raise Unsupported("loop()")
                self.use(callee)
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
        try:
            key = tuple([need.freeze(_ABSENT if (value := resolve(name)) is missing else value, keep)
                         for name, need in self.needs])
        except Uncacheable:
            return render()
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

