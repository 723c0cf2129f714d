"""The Jinja2 environment every templated output is rendered with.

Templates are looked up by relative path, first in the user's folders (``--templates DIR``, in the
order given), then in the packaged templates (``topo.templates``: the top-level ``templates/``
folder of the source tree). Undefined variables are errors (``StrictUndefined``), and any mistake
in a template becomes a :class:`TemplateError` that names the template file, the line and what
went wrong. Renderers use :func:`template_environment` and :func:`render_template`; this module
knows nothing of the outputs themselves (``topo.outputs.readme`` lists them).

Every template, packaged or the user's, renders in Jinja2's immutable sandbox
(:class:`TemplateSandbox`): no attribute that starts with ``_``, no method that changes a list,
dict or set, no ``range`` longer than ``jinja2.sandbox.MAX_RANGE``. So a template cannot reach
Python's internals, files, processes or the environment variables, and cannot change the facts
that the next switch's templates see. The loader (:class:`TemplateLoader`) reads only regular
UTF-8 files of at most :data:`MAX_TEMPLATE_BYTES` whose real path is inside the real path of the
folder they were found in, so a symlink cannot lead a template (or an ``{% include %}``) out of
its folder.

What a template prints may not change from run to run: the ``random`` filter and the ``lipsum``
global are refused in every template. A render that runs a user template (``--templates DIR``; the
template rendered, or one it includes, imports or extends) is bounded besides
(:func:`render_template`): it is stopped after :data:`RENDER_SECONDS` of CPU time, its text may not
pass :data:`MAX_OUTPUT_CHARS` characters, and the text may not hold an object's address (Python's
default text of an object, ``<... at 0x7f...>``). ``*`` and ``**`` refuse a result too big to make
(:data:`MAX_OUTPUT_CHARS` items, :data:`MAX_INT_BITS` bits) in every template.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import signal
import stat
import sys
import threading
from importlib import resources
from json.encoder import encode_basestring as _encode_string
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import jinja2
import jinja2.runtime
import jinja2.sandbox
import jinja2.utils
from jinja2.utils import missing
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.loaders import split_template_path
from jinja2.sandbox import SecurityError

from ..errors import TopoError
from ..inputs import problem_kind
from .template_memo import IncludeMemo, template_needs

#: A template not looked at yet for a memo.
_NO_MEMO = object()


class TemplateError(TopoError):
    """A template that fails to render: names the template, the line and what went wrong."""


#: Largest template file the loader reads (bytes); the packaged ones are under 10 KiB.
MAX_TEMPLATE_BYTES = 1 << 20

#: Most characters of a Python exception's text that a template error quotes.
MESSAGE_LIMIT = 300


def packaged_template_dir() -> Path:
    """Where the packaged templates are on this installation."""
    return Path(str(resources.files("topo.templates")))


class TemplateLoader(jinja2.FileSystemLoader):
    """A ``FileSystemLoader`` that reads only what is really inside its folders.

    A template is the first existing entry ``folder/relative/path`` over the search folders (a
    broken symlink or a directory counts: it is refused, not skipped). It must resolve (symlinks
    followed) to a path inside the resolved folder, be a regular file of at most
    :data:`MAX_TEMPLATE_BYTES` and be valid UTF-8; anything else is a :class:`TemplateError` naming
    the template and the folder.

    >>> import shutil, tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "x.j2").symlink_to("/etc/hostname")
    >>> TemplateLoader([str(folder)]).get_source(None, "x.j2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    topo.outputs.templating.TemplateError: template x.j2 (in ...) resolves to /etc/hostname, outside that folder; ...
    >>> shutil.rmtree(folder)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read: dict[str, str] = {}
        self._users: set[str] = set()  # names of the templates read from a user folder
        self._packaged = str(packaged_template_dir())

    def get_source(self, environment: Any, template: str) -> tuple[str, str, Callable[[], bool]]:
        pieces = split_template_path(template)
        for folder in self.searchpath:
            filename = posixpath.join(folder, *pieces)
            if os.path.lexists(filename):
                break
        else:
            return super().get_source(environment, template)  # Jinja2's TemplateNotFound
        where = f"template {template} (in {folder})"
        real, root = os.path.realpath(filename), os.path.realpath(folder)
        if not _inside(real, root):
            raise TemplateError(f"{where} resolves to {real}, outside that folder; a template must be a "
                                f"file inside its folder")
        contents = _read_template(real, where)
        mtime = os.path.getmtime(real)

        def uptodate() -> bool:
            try:
                return os.path.getmtime(real) == mtime
            except OSError:
                return False

        self._read[template] = contents
        if folder != self._packaged:
            self._users.add(template)
        return contents, os.path.normpath(filename), uptodate

    def load(self, environment: jinja2.Environment, name: str, globals: Any = None) -> jinja2.Template:
        """Jinja2's load, keeping on the template the source it was compiled from (for its memo)."""
        self._read = {}
        template = super().load(environment, name, globals)
        template.topo_source = self._read.get(name)  # type: ignore[attr-defined]
        template.topo_user = name in self._users  # type: ignore[attr-defined]
        return template


def _inside(path: str, folder: str) -> bool:
    """Whether the real path ``path`` is ``folder`` or below it."""
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # different drives (Windows)
        return False


def _read_template(path: str, where: str) -> str:
    """The text of a template file: a regular file of at most MAX_TEMPLATE_BYTES, valid UTF-8."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO does not block; O_NOFOLLOW: no late symlink
    except OSError as exc:
        raise TemplateError(f"{where} cannot be read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TemplateError(f"{where} is not a regular file")
        size = info.st_size
        if size <= MAX_TEMPLATE_BYTES:
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(MAX_TEMPLATE_BYTES + 1)  # + 1: a file that grew since fstat
            size = len(data)
    finally:
        os.close(fd)
    if size > MAX_TEMPLATE_BYTES:
        raise TemplateError(f"{where} is {size:,} bytes; a template may have at most {MAX_TEMPLATE_BYTES:,} "
                            f"(1 MiB)")
    try:
        # Universal newlines, as Jinja2's loader reads a template in text mode.
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TemplateError(f"{where}, line {line}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at "
                            f"offset {exc.start})") from None


#: Attributes that an instance of exactly ``dict`` has (its methods); any other name is a key.
_DICT_ATTRIBUTES = frozenset(dir(dict))

#: Types whose sandbox verdict depends only on the type and the attribute name (builtins and
#: Jinja2's runtime objects), so it can be computed once per (type, name).
_CACHED_TYPES = frozenset({dict, list, tuple, str, int, float, bool, type(None), jinja2.runtime.LoopContext,
                           jinja2.runtime.Macro, jinja2.utils.Cycler, jinja2.utils.Joiner,
                           jinja2.utils.Namespace})


#: LoopContext's attributes that are plain values (no methods): the ``loop.x`` a template reads.
_LOOP_ATTRIBUTES = frozenset({"index0", "index", "depth0", "depth", "length", "revindex0", "revindex", "first",
                              "last", "previtem", "nextitem"})


#: The ``loop.x`` a quick loop (:class:`TopoLoop`) keeps: those a comma between table entries, or a
#: line between blocks, needs; a loop that reads any other (``length``, ``cycle``, ``changed``...)
#: or uses ``loop`` as a value keeps Jinja2's ``LoopContext``.
_QUICK_LOOP_ATTRIBUTES = frozenset({"index0", "index", "first", "last"})


class TopoLoop:
    """The ``loop`` of a quick loop: the four values of :data:`_QUICK_LOOP_ATTRIBUTES` as plain
    attributes, set before each step (Jinja2's ``LoopContext`` computes each one by a Python call
    on every read, and steps through a Python ``__next__``)."""

    __slots__ = ("index0", "index", "first", "last")

    def __init__(self) -> None:
        self.index0, self.index, self.first, self.last = -1, 0, False, False


def quick_loop(iterable: Any, peek: bool) -> Iterator[tuple[Any, TopoLoop]]:
    """``(item, loop)`` for each item of ``iterable``. With ``peek`` (the loop reads
    ``loop.last``) each item is taken one step ahead, as ``LoopContext`` takes it when
    ``loop.last`` is read."""
    loop = TopoLoop()
    i = 0
    if not peek:
        for item in iterable:
            loop.index0, loop.index, loop.first = i, i + 1, i == 0
            yield item, loop
            i += 1
        return
    it = iter(iterable)
    for item in it:
        break
    else:
        return
    for ahead in it:
        loop.index0, loop.index, loop.first = i, i + 1, i == 0
        yield item, loop
        item = ahead
        i += 1
    loop.index0, loop.index, loop.first, loop.last = i, i + 1, i == 0, True
    yield item, loop


def _quick_loop_reads(node: nodes.For) -> tuple[set[str], set[int]] | None:
    """The ``loop.x`` that the body of the for-loop ``node`` reads, with the ``id`` of each such
    read's ``loop`` Name node; None when it needs Jinja2's
    ``LoopContext``: a recursive loop, ``loop`` read other than as one of
    :data:`_QUICK_LOOP_ATTRIBUTES` (a value, a call, another attribute), ``loop`` assigned, a
    nested loop, macro or call block that names a ``loop`` (which could be its own), or an
    include, import or block, whose template (a block: the child template's) sees this ``loop``
    and may read anything of it."""
    if node.recursive:
        return None
    scoped = (nodes.For, nodes.Macro, nodes.CallBlock)
    imports = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Block)
    for child in node.body:
        if isinstance(child, imports) or next(child.find_all(imports), None) is not None:
            return None
    reads: set[str] = set()
    quick: set[int] = set()  # the Name nodes of the loop.x reads
    for child in node.body:
        inside = [child, *child.find_all(nodes.Node)]
        for n in inside:
            if isinstance(n, scoped) and any(name.name == "loop" for name in n.find_all(nodes.Name)):
                return None
            if (isinstance(n, nodes.Getattr) and isinstance(n.node, nodes.Name) and n.node.name == "loop"
                    and n.attr in _QUICK_LOOP_ATTRIBUTES):
                reads.add(n.attr)
                quick.add(id(n.node))
        if any(isinstance(n, nodes.Name) and n.name == "loop" and (n.ctx != "load" or id(n) not in quick)
               for n in inside):
            return None
    return reads, quick


class TemplateCodeGenerator(CodeGenerator):
    """Jinja2's code generator, with the same results, for templates that read plain dicts in loops.

    Four changes to the Python that a template compiles to; what a template prints, and every error
    it raises (with its line), stay Jinja2's:

    - ``x.key`` (``key`` neither a dict attribute nor ``_``-prefixed) is compiled to an inline
      ``x["key"]`` when ``x`` is exactly a ``dict`` holding ``key``, and for a loop's own values
      (``loop.last``) to the attribute of the ``LoopContext``; anything else calls the
      environment's ``getattr`` as before. Both shortcuts give what :class:`TemplateSandbox`'s
      ``getattr`` would: items are data, and a loop's values are safe attributes.
    - A run of text and ``{{ ... }}`` between two tags is one ``yield`` of one ``%`` format instead
      of one ``yield`` per piece (``'%s' % x`` is ``str(x)``). Each expression keeps its own line of
      Python, so an error still names its template line. Templates that escape (``{% autoescape %}``)
      or write into a buffer (macros, ``{% set %}`` blocks) keep Jinja2's code, and so does every
      template before Python 3.11, where a ``%`` format would evaluate all its expressions before
      converting the first.
    - A for-loop whose body reads ``loop`` only as ``loop.index0``, ``index``, ``first`` or
      ``last`` (:func:`_quick_loop_reads`: no include, import or block in it, no nested loop or
      macro that names a ``loop``) steps through :func:`quick_loop`, whose :class:`TopoLoop`
      holds those four as plain attributes, read without a check; every other loop keeps
      ``LoopContext``. A loop that reads ``loop.last`` takes each item one step ahead, before the
      step's body runs (``LoopContext`` takes it when ``loop.last`` is read): the same items in
      the same order, so the same text; where both a step's body, before it reads ``loop.last``,
      and the filter (``if``) of the next item would fail, the filter's error is the one raised.
    - ``a ~ b ~ c`` is one ``'%s%s%s' % (a, b, c)`` (each part through ``str()``, as Jinja2's
      ``str_join`` does), except where the template escapes.
    """

    #: The prefix of the next loop header (see visit_For), and the ``loop`` Name nodes (by id) of
    #: the quick loops' ``loop.x`` reads, of the template being compiled.
    _quick_header: str | None = None
    _quick_names: frozenset[int] = frozenset()

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        quick = None if self.environment.is_async else _quick_loop_reads(node)
        if not quick or not quick[0]:  # no loop.x: Jinja2's plain loop, or a loop that needs LoopContext
            super().visit_For(node, frame)
            return
        reads, names = quick
        # Jinja2 writes the loop's header as "for item, loop in <prefix>LoopContext(iterable,
        # undefined):", its prefix from choose_async('Async'): the next such call (before the
        # body, after the filter function, which holds no loop) names the quick loop instead
        self._quick_header = "environment.quick_" + ("peek_" if "last" in reads else "")
        self._quick_names = self._quick_names | names
        super().visit_For(node, frame)

    def choose_async(self, async_value: str = "async ", sync_value: str = "") -> str:
        header = self._quick_header
        if header is not None and async_value == "Async" and sync_value == "":
            self._quick_header = None
            return header
        return super().choose_async(async_value, sync_value)

    def visit_Getattr(self, node: nodes.Getattr, frame: Frame) -> None:
        attr = node.attr
        if id(node.node) in self._quick_names:  # loop.x of a quick loop: a plain attribute
            self.write("(")
            self.visit(node.node, frame)
            self.write(f").{attr}")
            return
        if self.environment.is_async or attr in _DICT_ATTRIBUTES or attr[:1] == "_":
            super().visit_Getattr(node, frame)
            return
        self.write(f"(_v[{attr!r}] if (_v := ")
        self.visit(node.node, frame)
        self.write(f").__class__ is dict and {attr!r} in _v else ")
        if attr in _LOOP_ATTRIBUTES:
            self.write(f"_v.{attr} if _v.__class__ is LoopContext else ")
        self.write(f"environment.getattr(_v, {attr!r}))")

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        # ``a ~ b``: Jinja2's str_join((a, b)) is "".join(map(str, ...)); a '%s' format of the same
        # tuple converts each with str() too, in one step (escaping templates keep Jinja2's)
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super().visit_Concat(node, frame)
            return
        self.write(f"({'%s' * len(node.nodes)!r} % (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def visit_Include(self, node: nodes.Include, frame: Frame) -> None:
        if (node.ignore_missing or not node.with_context or self.environment.is_async or frame.buffer is not None
                or not isinstance(node.template, nodes.Const) or not isinstance(node.template.value, str)
                or not hasattr(self.environment, "render_include")):
            super().visit_Include(node, frame)
            return
        self.writeline("template = environment.get_template(", node)
        self.visit(node.template, frame)
        self.write(f", {self.name!r})")
        self.writeline(f"yield from environment.render_include(template, context, "
                       f"{self.dump_local_context(frame)})")

    def visit_Output(self, node: nodes.Output, frame: Frame) -> None:
        # before Python 3.11 a '%' format evaluates every expression before converting any, so an
        # error could name another line: Jinja2's code there
        if (sys.version_info < (3, 11) or frame.require_output_check or frame.buffer is not None or frame.eval_ctx.volatile
                or frame.eval_ctx.autoescape or self.environment.finalize is not None or self.environment.is_async):
            super().visit_Output(node, frame)
            return
        finalize = self._make_finalize()
        body: list[list[str] | nodes.Expr] = []  # runs of constant text, and expressions
        for child in node.nodes:
            try:
                if not (finalize.const or isinstance(child, nodes.TemplateData)):
                    raise nodes.Impossible()
                const = self._output_child_to_const(child, frame, finalize)
            except (nodes.Impossible, Exception):  # as Jinja2: evaluated when the template runs
                body.append(child)
                continue
            if body and isinstance(body[-1], list):
                body[-1].append(const)
            else:
                body.append([const])
        expressions = [item for item in body if not isinstance(item, list)]
        if not expressions:
            super().visit_Output(node, frame)
            return
        text = "".join("".join(item).replace("%", "%%") if isinstance(item, list) else "%s" for item in body)
        self.writeline(f"yield {text!r} % (", node)
        self.indent()
        for item in expressions:
            self.newline(item)
            self.visit(item, frame)
            self.write(",")
        self.outdent()
        self.writeline(")")


class TemplateSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """Jinja2's immutable sandbox, with the same verdicts, computed faster.

    Templates compile with :class:`TemplateCodeGenerator`, and two shortcuts, neither of which allows anything the sandbox refuses (and a ``_`` attribute of
    an undefined value raises that value's own error at once):

    - ``d.key`` on a plain ``dict`` (every fact topo passes is one) whose ``key`` is not a dict
      attribute goes straight to ``d["key"]``, as Jinja2 does after the failed attribute lookup
      (items are data, never checked by the sandbox); dict methods still take the checked path.
    - ``is_safe_attribute`` is remembered per (type, name) for the types of :data:`_CACHED_TYPES`,
      whose verdict (a ``_`` prefix, Python internals, a mutating method) depends on nothing else.
      Without it, ``loop.last`` costs four ABC ``isinstance`` checks per loop step.
    """

    code_generator_class = TemplateCodeGenerator

    #: ``*`` and ``**`` go through :meth:`call_binop`, which refuses a result too big to make
    #: (``'x' * 10**10``, ``9 ** (10**9)``) before Python makes it, in C, where no budget could stop
    #: it; nor are they folded when the template is compiled.
    intercepted_binops = frozenset({"*", "**"})

    #: Whether :func:`render_template` bounds the renders that run a user template (budget, output
    #: cap, no object address: :func:`_render_bounded`); :func:`template_environment` sets it when
    #: there are user folders.
    bound_renders = False

    #: Whether an included template that reads the same values as before gives its text again
    #: (:mod:`topo.outputs.template_memo`) instead of rendering it again. Off unless the caller
    #: knows its facts are never changed between renders (the switch configs turn it on).
    memo_includes = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._safe_attributes: dict[tuple[type, str], bool] = {}
        self._memos: dict[jinja2.Template, IncludeMemo | None] = {}
        self._render: _Render | None = None  # the bounded render in progress
        # nothing a template prints may change from run to run: no random filter, no lipsum
        self.filters["random"] = _unavailable("the random filter")
        self.globals["lipsum"] = _unavailable("lipsum()")

    def _load_template(self, name: str, globals: Any) -> jinja2.Template:
        """Jinja2's, for a template's own name and every include, import and extends: a user
        template loaded during a bounded render starts that render's budget."""
        template = super()._load_template(name, globals)
        render = self._render
        if render is not None and getattr(template, "topo_user", False):
            render.enter(template)
        return template

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        """``a * b`` and ``a ** b``, refused where the result would be too big to make."""
        if operator == "*":
            _check_product(left, right)
        elif operator == "**":
            _check_power(left, right)
        return super().call_binop(context, operator, left, right)

    def render_include(self, template: jinja2.Template, includer: jinja2.runtime.Context,
                       local_vars: dict[str, Any]) -> Iterator[str]:
        """What ``{% include %}`` of ``template`` renders in the context of the including template
        (``includer``, and its ``local_vars``, as Jinja2's include passes them): one text from the
        template's memo where it has one, else Jinja2's render of it."""
        memo = self._memos.get(template, _NO_MEMO) if self.memo_includes else None
        if memo is _NO_MEMO:
            memo = self._memos[template] = self._memo_of(template)
        def rendered() -> Iterator[str]:  # Jinja2's include: a context of its own
            return template.root_render_func(template.new_context(includer.get_all(), True, local_vars))

        if memo is None or not memo.useful:
            return rendered()

        def resolve(name: str) -> Any:
            # what the include's own context would give: a local of the includer that is set, else
            # the includer's variables, else its parent's (no context is made for a memo hit)
            value = local_vars.get(name, missing)
            return includer.resolve_or_missing(name) if value is missing else value

        render = self._render
        if render is None:
            return iter((memo.render(resolve, lambda: self.concat(rendered())),))
        # a bounded render: the include's text is capped as it is made, not once it is whole
        return iter((memo.render(resolve, lambda: _joined(rendered(), render)),))

    @staticmethod
    def quick_LoopContext(iterable: Any, undefined: Any) -> Iterator[tuple[Any, TopoLoop]]:  # noqa: N802
        """The loop of a for-loop that reads only ``loop.index0``, ``index`` or ``first``
        (:class:`TemplateCodeGenerator`)."""
        return quick_loop(iterable, peek=False)

    @staticmethod
    def quick_peek_LoopContext(iterable: Any, undefined: Any) -> Iterator[tuple[Any, TopoLoop]]:  # noqa: N802
        """The loop of a for-loop that reads ``loop.last`` (and perhaps the others)."""
        return quick_loop(iterable, peek=True)

    def _memo_of(self, template: jinja2.Template) -> IncludeMemo | None:
        source = getattr(template, "topo_source", None)
        if source is None:
            return None
        needs = template_needs(self.parse(source, template.name, template.filename), set(self.filters),
                               set(self.tests))
        return IncludeMemo(needs) if needs is not None else None

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        if isinstance(obj, jinja2.Undefined) and attribute[:1] == "_":
            # ``x.__class__.__init__``: report the first unsafe or undefined step, not that
            # ``__init__`` of the Undefined standing for it is unsafe too.
            obj._fail_with_undefined_error()
        return super().getattr(obj, attribute)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        kind = type(obj)
        if kind not in _CACHED_TYPES:
            return super().is_safe_attribute(obj, attr, value)
        key = (kind, attr)
        verdict = self._safe_attributes.get(key)
        if verdict is None:
            verdict = super().is_safe_attribute(obj, attr, value)
            if len(self._safe_attributes) < 4096:
                self._safe_attributes[key] = verdict
        return verdict


def template_environment(user_dirs: Iterable[str | Path] = ()) -> jinja2.Environment:
    """A sandboxed Jinja2 environment that looks in ``user_dirs`` first, then in the packaged templates.

    Undefined variables are errors (``StrictUndefined``); blocks do not leave blank lines.
    """
    search = [str(Path(d)) for d in user_dirs] + [str(packaged_template_dir())]
    env = TemplateSandbox(
        loader=TemplateLoader(search),
        auto_reload=False,  # a template is read once: no file checks on every render
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.bound_renders = bool(search[:-1])
    env.filters["thousands"] = lambda value: f"{value:,}"
    env.filters["json"] = json_value
    env.filters["size"] = format_size
    return env


def render_template(env: jinja2.Environment, template: str, context: dict[str, Any]) -> str:
    """Render one template; any template mistake becomes a TemplateError naming file and line.

    That covers Jinja2's errors (syntax, undefined names, the sandbox's ``SecurityError``) and any
    other exception raised while the template's own code runs (``{{ 1/0 }}``, a filter given a
    value it cannot take, a macro that calls itself forever). An exception that is not raised
    under a template frame is a bug in topo and keeps its traceback.

    In an environment with user folders (``env.bound_renders``) a render that runs a user
    template is bounded (:func:`_render_bounded`): its budget of :data:`RENDER_SECONDS` of CPU time
    (a ``SIGPROF`` timer, in the main thread only; the switch configs' worker processes render in
    theirs), :data:`MAX_OUTPUT_CHARS` characters, no object address in its text; each a
    TemplateError naming the template.

    >>> env = template_environment()
    >>> render_template(env, "summary.md.j2", {})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    topo.outputs.templating.TemplateError: template summary.md.j2 (in ...), line 2: 'summary' is undefined
    """
    try:
        compiled = env.get_template(template)
        if getattr(env, "bound_renders", False):
            return _render_bounded(env, compiled, context)
        return compiled.render(context)
    except TopoError:
        raise
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"template {exc.name} not found (included from {template})") from None
    except jinja2.TemplateError as exc:
        name, line = _template_location(exc)
        where = template_display_name(env, name or template) + (f", line {line}" if line else "")
        text = str(exc.message or exc)  # topo's own refusals as they are; Jinja2's without the template's text
        own = isinstance(exc, (RenderLimit, TopoSecurityError))
        raise TemplateError(f"template {where}: {text if own else problem_kind(text, names=True)}") from None
    except Exception as exc:
        name, line = _template_location(exc, frames_only=True)
        if name is None:
            raise
        where = template_display_name(env, name) + (f", line {line}" if line else "")
        text = " ".join(str(exc).split())
        if len(text) > MESSAGE_LIMIT:
            text = text[:MESSAGE_LIMIT - 3] + "..."
        raise TemplateError(f"template {where}: {type(exc).__name__}" + (f": {text}" if text else "")) from exc


# --- the bounds of a render that runs a user template ---------------------------------------------

#: CPU seconds (of the process that renders) one render may take from the moment it runs a user
#: template: ``{% for i in range(10**5) %}{% for j in range(10**5) %}`` is stopped there.
RENDER_SECONDS = 10.0

#: Characters one file rendered with a user template may hold (256 Mi; the largest packaged
#: output, the rankfile, has 19.4 M at 524,288 GPUs, so about 155 M at topo's most, 4,194,304).
#: Also the longest string ``*`` may make in any template, and the most items and characters of
#: strings in a list it makes.
MAX_OUTPUT_CHARS = 256 << 20

#: Bits of the largest integer that ``*`` or ``**`` may make in a template (about 19,700 decimal
#: digits; Python prints at most 4,300).
MAX_INT_BITS = 1 << 16

#: Seconds of CPU between two more budget signals after the first, in case Python swallowed one
#: (an exception raised in a ``__del__`` is only printed, one raised while Jinja2 compiles an
#: expression is taken for "cannot fold this"); the first thing a render that fails does is stop them.
_BUDGET_REPEAT = 0.25

#: Python's default text of an object: ``<jinja2.utils.Cycler object at 0x7f...>``. The address
#: differs from run to run.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")


class TopoSecurityError(SecurityError):
    """A refusal of topo's own sandbox (a product too big to make, random text): its message holds
    none of the template's text, and is shown whole."""


class RenderLimit(jinja2.exceptions.TemplateRuntimeError):
    """A render that ran past its CPU budget (raised by the budget's signal where the render was)."""


class _TooLong(Exception):
    """The text of a bounded render passed MAX_OUTPUT_CHARS."""


class _Render:
    """A bounded render in progress: the user templates it has run (their file names, in the order
    first run) and the budget it was given, if its timer runs."""

    __slots__ = ("users", "budget")

    def __init__(self) -> None:
        self.users: list[str] = []
        self.budget: float | None = None

    def enter(self, template: jinja2.Template) -> None:
        """A user template is run: the first one starts the budget."""
        if template.filename in self.users:
            return
        self.users.append(template.filename or template.name or "?")
        if len(self.users) == 1:
            _start_budget(self)


#: The render whose budget timer runs (in the main thread of this process), if any.
_TIMED: _Render | None = None


def _over_budget(signum: int, frame: Any) -> None:
    """SIGPROF: the render whose timer runs has spent its budget. Raised where the render is (a
    template's line), except in the frames that end a render, where the next signal comes
    ``_BUDGET_REPEAT`` later, or none once the timer is stopped."""
    render = _TIMED
    if render is None or render.budget is None or (frame is not None and frame.f_code in _QUIET_CODES):
        return
    raise RenderLimit(f"still rendering after {render.budget:g} s of CPU time; a render that runs a user "
                      f"template may take at most {render.budget:g} s")


def _start_budget(render: _Render) -> None:
    """Start ``render``'s budget: a SIGPROF after RENDER_SECONDS of this process's CPU time, and every
    ``_BUDGET_REPEAT`` after, until :func:`_stop_budget`. Only in the main thread (signals run
    there), where the platform has interval timers and no one else (a profiler) handles SIGPROF."""
    global _TIMED
    if (_TIMED is not None or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
        return
    handler = signal.getsignal(signal.SIGPROF)
    if handler is not _over_budget:
        if handler not in (signal.SIG_DFL, signal.SIG_IGN):
            return
        signal.signal(signal.SIGPROF, _over_budget)  # stays: a late signal finds a handler, not SIG_DFL's end
    render.budget = RENDER_SECONDS
    _TIMED = render
    signal.setitimer(signal.ITIMER_PROF, RENDER_SECONDS, _BUDGET_REPEAT)


def _stop_budget(render: _Render) -> None:
    global _TIMED
    if _TIMED is render:
        _TIMED = None  # first: a signal from now on does nothing
        signal.setitimer(signal.ITIMER_PROF, 0, 0)


def _joined(pieces: Iterator[str], render: _Render) -> str:
    """The pieces a template yields, joined; _TooLong as soon as they pass MAX_OUTPUT_CHARS in a
    render that has run a user template (the text is not made)."""
    parts: list[str] = []
    append = parts.append
    total = 0
    cap = MAX_OUTPUT_CHARS
    for piece in pieces:
        total += len(piece)
        if total > cap and render.users:
            raise _TooLong()
        append(piece)
    return "".join(parts)


def _render_bounded(env: TemplateSandbox, template: jinja2.Template, context: dict[str, Any]) -> str:
    """``template.render(context)`` in an environment with user folders. From the moment the render
    runs a user template (this one, or one it includes), it is stopped after RENDER_SECONDS of CPU
    time, its text may not pass MAX_OUTPUT_CHARS, and the text may not hold an object's address;
    each is a TemplateError naming the template."""
    render = _Render()
    previous, env._render = env._render, render
    try:
        if getattr(template, "topo_user", False):
            render.enter(template)
        try:
            text = _joined(template.root_render_func(template.new_context(dict(context))), render)
        except _TooLong:
            _stop_budget(render)  # no signal while the error is made (this frame is quiet, not the others)
            raise TemplateError(f"template {_names(env, template, render)} made more than {MAX_OUTPUT_CHARS:,} "
                                f"characters ({format_size(MAX_OUTPUT_CHARS)} of text), the most a file "
                                f"rendered with a user template may hold") from None
        except Exception:
            _stop_budget(render)
            try:
                env.handle_exception()  # Jinja2's: the traceback through the template's lines
            except RenderLimit as exc:
                # where the render was: a template's line, else (between two pieces of text) the
                # user templates it had run
                name, line = _template_location(exc, frames_only=True)
                where = _names(env, template, render) if name is None else template_display_name(env, name)
                raise TemplateError(f"template {where}" + (f", line {line}" if line else "")
                                    + f": {exc.message}") from None
    finally:
        env._render = previous
        _stop_budget(render)
    if render.users:
        found = _ADDRESS.search(text)
        if found is not None:
            line = text.count("\n", 0, found.start()) + 1
            raise TemplateError(f"template {_names(env, template, render)} printed a Python object's address "
                                f"(line {line} of its text ends like ' at 0x...>'), which differs from run to "
                                f"run; print the object's values instead")
    return text


_QUIET_CODES = frozenset({_render_bounded.__code__, _stop_budget.__code__})


def _names(env: jinja2.Environment, template: jinja2.Template, render: _Render) -> str:
    """The user templates a render ran, and the template rendered when it is not one of them:
    ``frr/policy.j2 (in site), run by frr/frr.conf.j2 (in ...)``."""
    top = template.filename or template.name or "?"
    names = ", ".join(template_display_name(env, name) for name in render.users)
    return names if render.users == [top] else f"{names}, run by {template_display_name(env, top)}"


def _check_product(left: Any, right: Any) -> None:
    """Refuse ``left * right`` where it would make a string longer than MAX_OUTPUT_CHARS, a list or
    tuple whose items and strings' characters (:func:`_weight`) pass that (``join`` or ``string``
    of it would make such a string, in C, at once), or an integer of more than MAX_INT_BITS."""
    for count, item in ((left, right), (right, left)):
        if not isinstance(count, int):
            continue
        if isinstance(item, str):
            if count > 0 and len(item) * count > MAX_OUTPUT_CHARS:
                raise TopoSecurityError(f"a string of {len(item):,} repeated {count:,} times would hold "
                                    f"{len(item) * count:,} characters; at most {MAX_OUTPUT_CHARS:,}")
            return
        if isinstance(item, (list, tuple)):
            if count > 0 and (len(item) * count > MAX_OUTPUT_CHARS
                              or _weight(item) * count > MAX_OUTPUT_CHARS):
                total = max(len(item), _weight(item)) * count
                items = f"{len(item):,} item" + ("" if len(item) == 1 else "s")
                raise TopoSecurityError(f"a {type(item).__name__} of {items} repeated {count:,} times "
                                    f"would hold {total:,} items and characters; at most {MAX_OUTPUT_CHARS:,}")
            return
        if isinstance(item, int) and count.bit_length() + item.bit_length() > MAX_INT_BITS + 1:
            raise TopoSecurityError(f"a product of integers of {count.bit_length():,} and {item.bit_length():,} "
                                f"bits; a template's integers may have at most {MAX_INT_BITS:,} bits")


def _weight(value: list | tuple, depth: int = 0) -> int:
    """The items of a list or tuple, each string counted by its characters, each list or tuple in it
    by its own weight (8 levels deep; below, 1 an item)."""
    total = 0
    for item in value:
        if isinstance(item, str):
            total += len(item) or 1
        elif isinstance(item, (list, tuple)) and depth < 8:
            total += _weight(item, depth + 1) or 1
        else:
            total += 1
    return total


def _check_power(base: Any, exponent: Any) -> None:
    """Refuse ``base ** exponent`` of integers where the result would have more than MAX_INT_BITS."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS:
            raise TopoSecurityError(f"a power of integers of at least {(abs(base).bit_length() - 1) * exponent:,} "
                                f"bits; a template's integers may have at most {MAX_INT_BITS:,} bits")


def _unavailable(what: str) -> Callable[..., Any]:
    """A filter or global that refuses to run: its result would change from run to run."""

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise TopoSecurityError(f"{what} is not available: its result changes from run to run, and topo "
                            f"writes the same files for the same input")

    refused.__name__ = refused.__qualname__ = "unavailable"
    return refused


def _template_location(exc: BaseException, frames_only: bool = False) -> tuple[str | None, int | None]:
    """(template name, line) of the innermost template frame of a rendering error.

    Without a template frame: the name and line the exception carries, or ``(None, None)`` with
    ``frames_only`` (a Python exception's ``name`` is not a template's).
    """
    name = None if frames_only else getattr(exc, "name", None) or getattr(exc, "filename", None)
    line = None if frames_only else getattr(exc, "lineno", None)
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.endswith(".j2") or "__jinja_exception__" in tb.tb_frame.f_globals:
            name, line = filename, tb.tb_lineno
        tb = tb.tb_next
    return name, line


def template_display_name(env: jinja2.Environment, filename: str) -> str:
    """A template's path as the user knows it: relative to its search folder when it is in one."""
    for folder in env.loader.searchpath:  # type: ignore[union-attr]
        try:
            return f"{Path(filename).resolve().relative_to(Path(folder).resolve())} (in {folder})"
        except ValueError:
            continue
    return filename


# --- filters --------------------------------------------------------------------------------------


def format_size(size: int) -> str:
    """Bytes as the largest whole binary unit: ``8 GiB``, ``256 MiB``, ``1.5 KiB``.

    >>> format_size(8 << 30), format_size(1536)
    ('8 GiB', '1.5 KiB')
    """
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def json_value(value: Any) -> str:
    """A value as a JSON string literal (numbers too: SONiC tables hold strings), fast."""
    kind = type(value)
    if kind is str:
        return _encode_string(value)
    if kind is int or kind is float:
        return f'"{value}"'
    if isinstance(value, str):
        return _encode_string(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f'"{value}"'
    return json.dumps(value)
