"""Templates render in Jinja2's sandbox, read only files inside their folder, and report every
mistake as one ``TemplateError`` line naming the template and the line (docs/configs.md, "What a
template can and cannot do")."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import threading
import time
from pathlib import Path

import jinja2
import jinja2.sandbox
import pytest
from click.testing import CliRunner

from topo import build_fabric, load_spec
from topo.cli import main
from topo.outputs import templating
from topo.outputs.readme import all_outputs, template_sources
from topo.outputs.configs import CONFIG_CHUNK, config_files
from topo.outputs.placement import placement_facts
from topo.outputs.templating import (
    MAX_TEMPLATE_BYTES,
    TemplateError,
    TemplateLoader,
    TemplateSandbox,
    packaged_template_dir,
    render_template,
    template_environment,
)

#: Each would run a command, read a file or the environment, or change the facts, without the sandbox.
ESCAPES = {
    "cycler-globals": ("{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
                       "access to attribute '__init__' of 'type' object is unsafe."),
    "lipsum-globals": ("{{ lipsum.__globals__['os'].environ }}",
                       "access to attribute '__globals__' of 'function' object is unsafe."),
    "self-builtins": ("{{ self.__init__.__globals__.__builtins__.open('/etc/passwd').read() }}",
                      "access to attribute '__init__' of 'TemplateReference' object is unsafe."),
    "subclasses": ("{{ ''.__class__.__mro__[1].__subclasses__() }}",
                   "access to attribute '__class__' of 'str' object is unsafe."),
    "format-string": ("{{ '{0.__class__}'.format(sw) }}",
                      "access to attribute '__class__' of 'dict' object is unsafe."),
    "dict-class": ("{{ sw.__class__.__init__ }}", "access to attribute '__class__' of 'dict' object is unsafe."),
    "loop-class": ("{% for p in sw.ports %}{{ loop.__class__ }}{% endfor %}",
                   "access to attribute '__class__' of 'LoopContext' object is unsafe."),
    "mutate-list": ("{{ sw.ports.append(1) }}", "access to attribute 'append' of 'list' object is unsafe."),
    "mutate-dict": ("{{ sw.update(name='x') }}", "access to attribute 'update' of 'dict' object is unsafe."),
}

#: Python errors raised while a template runs, and how they are reported.
RUNTIME_ERRORS = {
    "zero-division": ("{{ 1 / 0 }}", "ZeroDivisionError: division by zero"),
    "recursion": ("{% macro down(n) %}{{ down(n + 1) }}{% endmacro %}{{ down(0) }}",
                  "RecursionError: maximum recursion depth exceeded"),
    "value-error-topo-filter": ("{{ sw.name | thousands }}", "ValueError: Cannot specify ',' with 's'."),
    "type-error-topo-filter": ("{{ none | size }}",
                               "TypeError: '>=' not supported between instances of 'NoneType' and 'int'"),
    "key-error-filter": ("{{ '%(rack)s' | format(row=1) }}", "KeyError: 'rack'"),
    "attribute-error-filter": ("{{ 1 | xmlattr }}", "AttributeError: 'int' object has no attribute 'items'"),
}


@pytest.fixture(scope="module")
def fabric256():
    return build_fabric(load_spec({"gpus": 256}))


def site(tmp_path, relative: str, text: str | bytes):
    """A user template folder holding one file at ``relative``."""
    path = tmp_path / "site" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return tmp_path / "site"


def build(tmp_path, folder, *args: str):
    return CliRunner().invoke(main, ["build", "--gpus", "256", "-o", str(tmp_path / "out"), "-q",
                                     "--templates", str(folder), *args], prog_name="topo")


def one_error_line(result) -> str:
    """The CLI's stderr for a clean TopoError: exit 1, one line, no traceback."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# --- 1. the sandbox ---------------------------------------------------------------------------------


def test_every_environment_is_the_immutable_sandbox(tmp_path):
    env = template_environment([tmp_path])
    assert isinstance(env, jinja2.sandbox.ImmutableSandboxedEnvironment) and isinstance(env, TemplateSandbox)
    assert isinstance(env.loader, TemplateLoader)
    assert env.globals["range"] is jinja2.sandbox.safe_range


@pytest.mark.parametrize("payload,message", ESCAPES.values(), ids=ESCAPES)
def test_a_user_template_cannot_reach_python_internals(tmp_path, monkeypatch, fabric256, payload, message):
    monkeypatch.chdir(tmp_path)
    folder = site(tmp_path, "frr/policy.j2", "! policy\n" + payload + "\n")
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert str(info.value) == f"template frr/policy.j2 (in {folder}), line 2: {message}"
    assert not (tmp_path / "MARKER").exists()


def test_the_sandbox_holds_in_the_worker_processes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fabric = build_fabric(load_spec({"gpus": 1024}))
    assert len(fabric.names) - fabric.plan.nodes > CONFIG_CHUNK  # more than one chunk: a process pool
    folder = site(tmp_path, "frr/policy.j2", ESCAPES["cycler-globals"][0] + "\n")
    with pytest.raises(TemplateError, match=r"^template frr/policy.j2 \(in .*\), line 1: access to attribute "
                                            r"'__init__' of 'type' object is unsafe\.$"):
        list(config_files(fabric, [folder], workers=2))
    result = CliRunner().invoke(main, ["build", "--gpus", "1024", "-j", "2", "-o", str(tmp_path / "out"), "-q",
                                       "--templates", str(folder)], prog_name="topo")
    assert one_error_line(result) == (f"Error: template frr/policy.j2 (in {folder}), line 1: access to "
                                      f"attribute '__init__' of 'type' object is unsafe.")
    assert not (tmp_path / "MARKER").exists() and not (tmp_path / "out").exists()


TOP_TEMPLATES = sorted({template for _, template, _ in all_outputs()})
#: Templates rendered only for a rack-scale server profile (an NVL72 tray), and the flags of one.
RACK_SCALE_TEMPLATES = {"imex/nodes_config.cfg.j2", "kubernetes/node-labels.sh.j2"}
RACK_SCALE = ("--gpus-per-node", "4", "--nics-per-node", "4", "--server", "gb200-nvl72")


@pytest.mark.parametrize("template", TOP_TEMPLATES)
def test_every_templated_output_renders_in_the_sandbox(tmp_path, monkeypatch, template):
    monkeypatch.chdir(tmp_path)
    folder = site(tmp_path, template, ESCAPES["cycler-globals"][0] + "\n")
    line = one_error_line(build(tmp_path, folder, *(RACK_SCALE if template in RACK_SCALE_TEMPLATES else ())))
    assert line == (f"Error: template {template} (in {folder}), line 1: access to attribute '__init__' of "
                    f"'type' object is unsafe.")
    assert not (tmp_path / "MARKER").exists() and not (tmp_path / "out").exists()


def test_the_fast_paths_keep_jinja2_semantics_and_verdicts():
    env, stock = TemplateSandbox(), jinja2.sandbox.ImmutableSandboxedEnvironment()
    facts = {"name": "leaf", "items": "a key", "ports": [1, 2]}
    for source in ("{{ d.name }} {{ d['name'] }} {{ d['items'] }} {{ d.items() | list }} {{ d.keys() | list }}",
                   "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.get('name') }}",
                   "{% for p in d.ports %}{{ loop.index }}{{ loop.last }}{{ loop.cycle('a', 'b') }}{% endfor %}",
                   "{{ d.nope is defined }} {{ d.ports | length }} {{ '{0}-{1}'.format(1, d.name) }}"):
        assert env.from_string(source).render(d=facts) == stock.from_string(source).render(d=facts)
        assert env.from_string(source).render(d=facts) == jinja2.Environment().from_string(source).render(d=facts)
    strict = TemplateSandbox(undefined=jinja2.StrictUndefined)
    with pytest.raises(jinja2.UndefinedError, match=r"^'dict object' has no attribute 'rack'$"):
        strict.from_string("{{ d.rack }}").render(d=facts)
    loop = jinja2.runtime.LoopContext(iter([1]), jinja2.StrictUndefined)
    ns, text = jinja2.utils.Namespace(), "x"
    for obj, attr in [(facts, "update"), (facts, "pop"), (facts, "keys"), (facts, "__class__"),
                      ([], "append"), ([], "index"), ({1}, "add"), (loop, "last"), (loop, "__class__"),
                      (loop, "_iterator"), (text, "upper"), (text, "__class__"), (ns, "__init__"),
                      (jinja2.utils.Cycler, "mro"), (len, "__self__")]:
        for _ in range(2):  # the second time from the cache
            assert env.is_safe_attribute(obj, attr, None) == stock.is_safe_attribute(obj, attr, None), (obj, attr)


def test_packaged_and_user_templates_render_the_same_bytes_as_before(tmp_path, fabric256):
    """The sandbox and its fast paths change no byte (the golden files check the rest)."""
    plain = jinja2.Environment(loader=jinja2.FileSystemLoader([str(packaged_template_dir())]),
                               undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                               keep_trailing_newline=True, autoescape=False)
    sandbox = template_environment()
    plain.filters.update({name: sandbox.filters[name] for name in ("thousands", "json", "size")})
    from topo.outputs.configs import job as configs

    saved = dict(configs._WORKER)
    try:
        configs._init_worker(fabric256, ())
        switches = [fabric256.plan.nodes, len(fabric256.names) - 1]
        configs._WORKER["env"] = plain
        expected = configs._render_chunk(switches)
        configs._WORKER["env"] = sandbox
        assert configs._render_chunk(switches) == expected
    finally:
        configs._WORKER.update(saved)


#: Templates that exercise what TemplateCodeGenerator compiles differently (attributes of dicts and
#: loops, runs of text and expressions) next to what it leaves to Jinja2 (macros, blocks, escaping).
CONSTRUCTS = {
    "dict-keys": "{{ d.name }} {{ d.index }} {{ d.last }}|{{ d.nested.deep }}",
    "dict-method-names": "{{ d.items() | list | length }} {{ d['keys'] }} {{ d.get('name') }}",
    "missing-key-default": "{{ d.missing | default('none') }} {{ d.missing is defined }}",
    "percent-text": "100% {{ d.name }} %s %(x)s %% {{ '%d%%' % 3 }}",
    "loop-values": ("{% for p in d.ports %}{{ loop.index }}/{{ loop.length }} {{ loop.first }} {{ loop.last }} "
                    "{{ loop.revindex }} {{ loop.previtem | default('-') }} {{ loop.nextitem | default('-') }} "
                    "{{ p.index }}{{ ',' if not loop.last }}\n{% endfor %}"),
    "nested-loops": ("{% for p in d.ports %}{% set outer = loop %}{% for q in [1, 2] %}"
                     "{{ p.name }}|{{ q }}{{ ',' if not (outer.last and loop.last) }}\n{% endfor %}{% endfor %}"),
    "filtered-loop": "{% for p in d.ports if p.index > 1 %}{{ p.name }}{{ loop.index }}{% endfor %}",
    # quick loops (TopoLoop): only loop.index0, index, first and last read
    "quick-loop": ("{% for p in d.ports %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}"
                   "{{ ',' if not loop.last }}{% if loop.first %}^{% endif %}\n{% endfor %}"),
    "quick-loop-filtered": ("{% for p in d.ports if p.index != 2 %}{{ p.name }}{{ ',' if not loop.last }}"
                            "{% endfor %}|{% for p in d.ports if p.index > 9 %}{{ loop.last }}{% endfor %}"),
    "quick-loop-first-only": "{% for k, v in d.nested.items() %}{{ '!' if loop.first }}{{ k }}={{ v }}{% endfor %}",
    "quick-loop-empty-and-else": ("{% for p in d.empty %}{{ loop.last }}{% else %}none{% endfor %}"
                                  "{% for c in d.name %}{{ c }}{{ '.' if not loop.last }}{% endfor %}"),
    "quick-loop-one-item": "{% for p in d.ports[:1] %}{{ loop.first }}{{ loop.last }}{{ loop.index }}{% endfor %}",
    "quick-inside-context-loop": ("{% for p in d.ports %}{% for q in [1, 2] %}{{ loop.index }}{% endfor %}"
                                  "{{ loop.last }}/{{ loop.length }};{% endfor %}"),
    "context-inside-quick-loop": ("{% for p in d.ports %}{{ loop.last }}{% for q in [1, 2] %}{{ loop.revindex }}"
                                  "{% endfor %};{% endfor %}"),
    "plain-inside-quick-loop": ("{% for p in d.ports %}{% for q in [1, 2] %}{{ q }}{% endfor %}"
                                "{{ ',' if not loop.last }}{% endfor %}"),
    "loop-as-value": ("{% for p in d.ports %}{% set l = loop %}{{ l.last }}{% endfor %}"
                      "{% for p in d.ports %}{{ loop.last }}{{ loop.changed(p.index) }}{% endfor %}"),
    "loop-in-a-macro": ("{% macro m(x) %}{{ x }}{% endmacro %}{% for p in d.ports %}{{ m(loop.index) }}"
                        "{{ loop.last }}{% endfor %}"),
    "concat": "{{ d.name ~ '|' ~ d.index ~ d.none ~ d.pair ~ d.flag ~ d.nested.deep }} {{ '%s' ~ d.name ~ '%%' }}",
    "tuple-value": "{{ d.pair }} {{ (1, 2) }} {{ d.none }} {{ d.flag }}",
    "macro-and-set-block": ("{% macro row(p) %}{{ p.name }}={{ p.index }}{% endmacro %}"
                            "{% set block %}{{ d.name }}!{% endset %}{{ row(d.ports[0]) }} {{ block }}"),
    "autoescape": "{% autoescape true %}{{ d.html }}{% endautoescape %} {{ d.html }}",
    "namespace": "{% set ns = namespace(n=0) %}{% for p in d.ports %}{% set ns.n = ns.n + p.index %}{% endfor %}"
                 "{{ ns.n }}",
    "cycler-and-joiner": "{% set c = cycler('a', 'b') %}{% for p in d.ports %}{{ c.next() }}{% endfor %}",
    "object-attributes": "{{ 'x'.upper() }} {{ (d.ports | first).name }} {{ d.name.upper() }}",
}
FACTS = {"name": "leaf-1", "index": 7, "last": "not the loop", "nested": {"deep": 1.5}, "pair": (1, "a"),
         "none": None, "flag": True, "html": "<b>&</b>", "keys": "k", "empty": [],
         "ports": [{"name": "Ethernet0", "index": 1}, {"name": "Ethernet4", "index": 2},
                   {"name": "Ethernet8", "index": 3}]}


def _stock_sandbox() -> jinja2.Environment:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, trim_blocks=True,
                                                       lstrip_blocks=True, keep_trailing_newline=True)
    return env


@pytest.mark.parametrize("source", CONSTRUCTS.values(), ids=CONSTRUCTS)
def test_the_code_generator_renders_what_jinja2_renders(source):
    ours, stock = template_environment(), _stock_sandbox()
    assert type(ours).code_generator_class is not type(stock).code_generator_class
    assert ours.from_string(source).render(d=FACTS) == stock.from_string(source).render(d=FACTS)


#: How many of each construct's loops are quick (TopoLoop, no LoopContext) and how many keep LoopContext.
QUICK_LOOPS = {"quick-loop": (1, 0), "quick-loop-filtered": (2, 0), "quick-loop-first-only": (1, 0),
               "quick-loop-empty-and-else": (2, 0), "quick-loop-one-item": (1, 0),
               "quick-inside-context-loop": (1, 1), "context-inside-quick-loop": (0, 2),
               "plain-inside-quick-loop": (1, 0), "loop-as-value": (0, 2), "loop-in-a-macro": (1, 0),
               "loop-values": (0, 1), "nested-loops": (1, 1), "filtered-loop": (1, 0)}


#: Loops whose included or imported templates see their ``loop``: never quick.
SEEN_LOOPS = {
    "include": "{% for p in d.ports %}{{ loop.last }}{% include 'child.j2' %}{% endfor %}",
    "include-deeper": "{% for p in d.ports %}{% if loop.first %}{% include 'child.j2' %}{% endif %}{% endfor %}",
    "import": "{% for p in d.ports %}{{ loop.index }}{% import 'm.j2' as m with context %}{% endfor %}",
    "from-import": "{% for p in d.ports %}{{ loop.index }}{% from 'm.j2' import row with context %}{% endfor %}",
    "block": "{% for p in d.ports %}{{ loop.last }}{% block row scoped %}{{ p }}{% endblock %}{% endfor %}",
}


@pytest.mark.parametrize("name", [*QUICK_LOOPS, *SEEN_LOOPS])
def test_only_loops_that_read_index_first_or_last_are_quick(name):
    code = template_environment().compile(CONSTRUCTS.get(name) or SEEN_LOOPS[name], raw=True)
    quick, context = QUICK_LOOPS.get(name, (0, 1))
    assert (code.count("environment.quick_"), code.count(" LoopContext(")) == (quick, context), code


def test_a_block_in_a_loop_sees_the_whole_loop_in_the_child_template(tmp_path):
    (tmp_path / "base.j2").write_text("{% for p in ps %}{% block row scoped %}{{ p }}{% endblock %}"
                                      "{{ ',' if not loop.last }}{% endfor %}", encoding="utf-8")
    (tmp_path / "child.j2").write_text("{% extends 'base.j2' %}{% block row %}{{ p }}/{{ loop.length }}"
                                       "{% endblock %}", encoding="utf-8")
    stock = _stock_sandbox()
    stock.loader = jinja2.FileSystemLoader(str(tmp_path))
    ours = template_environment([tmp_path])
    assert ours.get_template("child.j2").render(ps=["a", "b"]) == stock.get_template("child.j2").render(
        ps=["a", "b"]) == "a/2,b/2"


def test_the_packaged_per_port_tables_loop_quickly():
    env = template_environment()
    for name in ("sonic/port.j2", "sonic/interface.j2", "sonic/cable_length.j2", "sonic/buffer_pg.j2",
                 "frr/interfaces.j2"):
        code = env.compile(env.loader.get_source(env, name)[0], name, raw=True)
        assert "environment.quick_" in code and " LoopContext(" not in code, name


@pytest.mark.parametrize("source,line", [
    ("! a {{ sw.asn }}\n! b {{ sw.name }}\n! c {{ sw.asn / 0 }} {{ sw.name }}\n", 3),
    ("! a {{ sw.asn }}\n! b {{ sw.nothing.deeper }}\n! c\n", 2),
    ("{% for p in sw.active_ports %}\n{{ p.name }}\n{{ p.name }} {{ loop.last.nothing }}\n{% endfor %}\n", 3),
])
def test_an_error_in_a_run_of_text_names_its_own_line(tmp_path, fabric256, source, line):
    folder = site(tmp_path, "frr/policy.j2", source)
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert str(info.value).startswith(f"template frr/policy.j2 (in {folder}), line {line}: ")
    stock = _stock_sandbox()
    with pytest.raises(Exception) as theirs:
        stock.from_string(source).render(sw={"asn": 65000, "name": "x", "active_ports": [{"name": "E0"}]})
    assert str(info.value).endswith(str(theirs.value).split(": ")[-1])


# --- 2. the loader --------------------------------------------------------------------------------


def test_a_symlink_out_of_the_folder_is_refused(tmp_path, fabric256):
    folder = tmp_path / "site"
    (folder / "frr").mkdir(parents=True)
    (folder / "frr" / "policy.j2").symlink_to("/etc/passwd")
    expected = (f"template frr/policy.j2 (in {folder}) resolves to /etc/passwd, outside that folder; "
                f"a template must be a file inside its folder")
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert str(info.value) == expected
    with pytest.raises(TemplateError) as info:
        template_sources([folder])
    assert str(info.value) == expected
    result = CliRunner().invoke(main, ["templates", "--templates", str(folder)], prog_name="topo")
    assert one_error_line(result) == "Error: " + expected
    assert one_error_line(build(tmp_path, folder)) == "Error: " + expected


def test_an_include_through_a_symlink_or_a_linked_folder_is_refused(tmp_path, fabric256):
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-TOKEN\n")
    folder = site(tmp_path, "frr/policy.j2", '! policy\n{% include "frr/secret.j2" %}\n')
    (folder / "frr" / "secret.j2").symlink_to(secret)
    with pytest.raises(TemplateError, match=r"^template frr/secret.j2 \(in .*\) resolves to .*secret.txt, outside"):
        dict(config_files(fabric256, [folder]))
    (folder / "frr" / "secret.j2").unlink()
    (folder / "linked").symlink_to(tmp_path, target_is_directory=True)  # a folder out of the search folder
    (folder / "frr" / "policy.j2").write_text('{% include "linked/secret.txt" %}\n')
    with pytest.raises(TemplateError, match=r"^template linked/secret.txt \(in .*\) resolves to .*secret.txt"):
        dict(config_files(fabric256, [folder]))
    (folder / "frr" / "policy.j2").write_text('{% include "/etc/passwd" %}\n')  # names are relative
    with pytest.raises(TemplateError, match=r"template /etc/passwd not found"):
        dict(config_files(fabric256, [folder]))


def test_symlinks_inside_the_folder_and_a_linked_search_folder_are_fine(tmp_path, fabric256):
    folder = site(tmp_path, "shared/policy.j2", "! shared policy for {{ sw.name }}\n")
    (folder / "frr").mkdir()
    (folder / "frr" / "policy.j2").symlink_to("../shared/policy.j2")
    (tmp_path / "link").symlink_to(folder, target_is_directory=True)
    for where in (folder, tmp_path / "link"):
        files = dict(config_files(fabric256, [where]))
        assert "! shared policy for cluster-leaf-su00-r0\n" in files["switches/cluster-leaf-su00-r0/frr.conf"]
    rows = {r["template"]: r for r in template_sources([tmp_path / "link"])}
    assert rows["frr/policy.j2"]["from"] == "user" and rows["frr/policy.j2"]["file"] == str(
        tmp_path / "link" / "frr" / "policy.j2")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_or_a_directory_is_not_a_template(tmp_path, fabric256):
    folder = tmp_path / "site"
    (folder / "frr").mkdir(parents=True)
    os.mkfifo(folder / "frr" / "policy.j2")  # reading it would block for ever
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert str(info.value) == f"template frr/policy.j2 (in {folder}) is not a regular file"
    (folder / "frr" / "policy.j2").unlink()
    (folder / "frr" / "policy.j2").mkdir()  # not skipped in favour of the packaged template
    assert one_error_line(build(tmp_path, folder)) == f"Error: template frr/policy.j2 (in {folder}) is not a regular file"


def test_a_template_larger_than_1_mib_is_refused(tmp_path, fabric256):
    assert MAX_TEMPLATE_BYTES == 1 << 20
    folder = site(tmp_path, "frr/policy.j2", b"!" * (MAX_TEMPLATE_BYTES + 1))
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert str(info.value) == (f"template frr/policy.j2 (in {folder}) is 1,048,577 bytes; a template may "
                               f"have at most 1,048,576 (1 MiB)")
    (folder / "frr" / "policy.j2").write_bytes(b"!" * MAX_TEMPLATE_BYTES)
    source, _, _ = TemplateLoader([str(folder)]).get_source(None, "frr/policy.j2")
    assert len(source) == MAX_TEMPLATE_BYTES


def test_a_template_that_is_not_utf8_is_one_error_line(tmp_path):
    folder = site(tmp_path, "frr/policy.j2", b"! policy\n! caf\xe9\n")
    expected = (f"template frr/policy.j2 (in {folder}), line 2: not valid UTF-8 (byte 0xe9 at offset 14)")
    assert one_error_line(build(tmp_path, folder)) == "Error: " + expected
    result = CliRunner().invoke(main, ["templates", "--templates", str(folder)], prog_name="topo")
    assert one_error_line(result) == "Error: " + expected


def test_line_endings_are_read_as_before(tmp_path):
    folder = site(tmp_path, "t.j2", b"a\r\nb {{ x }}\rc\n\xc3\xa9\n")
    ours = TemplateLoader([str(folder)]).get_source(None, "t.j2")
    stock = jinja2.FileSystemLoader([str(folder)]).get_source(None, "t.j2")
    assert ours[:2] == stock[:2] and ours[2]()


# --- 3. runtime errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("source,message", RUNTIME_ERRORS.values(), ids=RUNTIME_ERRORS)
def test_a_runtime_error_names_template_line_and_error(tmp_path, fabric256, source, message):
    folder = site(tmp_path, "frr/policy.j2", "! policy\n" + source + "\n")
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert str(info.value).startswith(f"template frr/policy.j2 (in {folder}), line 2: {message}")
    assert "\n" not in str(info.value)


def test_a_runtime_error_in_the_cli_is_one_error_line(tmp_path):
    folder = site(tmp_path, "frr/policy.j2", "! policy\n\n! ratio {{ sw.asn / 0 }}\n")
    assert one_error_line(build(tmp_path, folder)) == (
        f"Error: template frr/policy.j2 (in {folder}), line 3: ZeroDivisionError: division by zero")
    assert not (tmp_path / "out").exists()


def test_a_runtime_error_in_an_included_template_names_that_template(tmp_path, fabric256):
    folder = site(tmp_path, "frr/policy.j2", '! policy\n{% include "frr/site.j2" %}\n')
    (folder / "frr" / "site.j2").write_text("! site\n!\n{{ sw.asn // 0 }}\n")
    with pytest.raises(TemplateError, match=r"^template frr/site.j2 \(in .*\), line 3: ZeroDivisionError"):
        dict(config_files(fabric256, [folder]))
    (folder / "frr" / "site.j2").write_text('{% include "frr/site.j2" %}\n')  # includes itself for ever
    with pytest.raises(TemplateError, match=r"^template frr/site.j2 \(in .*\), line 1: RecursionError"):
        dict(config_files(fabric256, [folder]))


def test_a_long_error_text_is_cut_to_one_short_line(tmp_path, fabric256):
    folder = site(tmp_path, "frr/policy.j2", "{{ ('%(' ~ 'x' * 1000 ~ ')s') | format(y=1) }}\n")
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    text = str(info.value)
    assert "\n" not in text and len(text) < 500 and text.endswith("...")
    assert re.match(r"template frr/policy.j2 \(in .*\), line 1: KeyError: 'xxxx", text)


def test_a_bug_outside_the_template_keeps_its_traceback(tmp_path, monkeypatch):
    env = template_environment()

    def broken_loader(environment, template):
        raise RuntimeError("a bug in topo")

    monkeypatch.setattr(env.loader, "get_source", broken_loader)
    with pytest.raises(RuntimeError, match="a bug in topo"):
        render_template(env, "frr/policy.j2", {})


# --- 4. bounded ranges ----------------------------------------------------------------------------


def test_range_is_bounded_by_the_sandbox(tmp_path, fabric256):
    assert jinja2.sandbox.MAX_RANGE == 100_000
    folder = site(tmp_path, "frr/policy.j2", "!\n{% for i in range(10 ** 12) %}{{ i }}{% endfor %}\n")
    start = time.perf_counter()
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert time.perf_counter() - start < 30
    assert str(info.value) == (f"template frr/policy.j2 (in {folder}), line 2: OverflowError: Range too big. "
                               f"The sandbox blocks ranges larger than MAX_RANGE (100000).")
    env = template_environment()
    assert env.from_string("{{ range(100000) | length }}").render() == "100000"
    with pytest.raises(OverflowError):
        env.from_string("{{ range(0, 100001) | length }}").render()
    with pytest.raises(OverflowError):
        env.from_string("{{ range(0, 10 ** 12, 1000) | length }}").render()  # 10**9 items


# --- 5. bounded and deterministic renders ---------------------------------------------------------

#: Loops that would run for hours (10**10 steps) and print nothing.
RUNAWAY = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


def budget_error(folder, template: str, line: int, seconds: float) -> str:
    return (f"Error: template {template} (in {folder}), line {line}: still rendering after {seconds:g} s of CPU "
            f"time; a render that runs a user template may take at most {seconds:g} s")


@pytest.mark.parametrize("template,jobs", [("frr/policy.j2", "1"), ("frr/policy.j2", "2"),
                                           ("sonic/port.j2", "2"), ("host/roce-qos.sh.j2", "2"),
                                           ("placement/hostfile.j2", "1"), ("report/report.md.j2", "1"),
                                           ("nccl/nccl.env.j2", "1"), ("summary.md.j2", "1")])
def test_a_runaway_template_is_stopped_after_its_budget(tmp_path, monkeypatch, template, jobs):
    # the switch configs in this process (-j 1) and in worker processes (-j 2, 1,024 GPUs: several
    # chunks), the files rendered in the main process while the workers render
    monkeypatch.setattr(templating, "RENDER_SECONDS", 0.3)
    folder = site(tmp_path, template, "!\n" + RUNAWAY + "\n")
    result = CliRunner().invoke(main, ["build", "--gpus", "1024", "-j", jobs, "-o", str(tmp_path / "out"), "-q",
                                       "--templates", str(folder)], prog_name="topo")
    assert one_error_line(result) == budget_error(folder, template, 2, 0.3)
    assert not (tmp_path / "out").exists()
    assert multiprocessing.active_children() == []  # the other workers are stopped
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0) and templating._TIMED is None


def test_the_budget_counts_from_the_first_user_template_and_stops_with_the_render(tmp_path, fabric256,
                                                                                  monkeypatch):
    monkeypatch.setattr(templating, "RENDER_SECONDS", 0.3)
    # an include of the user's, in a macro run by a packaged template: stopped on the loop's line
    folder = site(tmp_path, "frr/policy.j2", '{% include "frr/site.j2" %}\n')
    (folder / "frr" / "site.j2").write_text("{% macro spin() %}\n" + RUNAWAY + "\n{% endmacro %}\n{{ spin() }}\n")
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert str(info.value) == budget_error(folder, "frr/site.j2", 2, 0.3)[len("Error: "):]
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0) and templating._TIMED is None
    # a render that ends within its budget stops its timer: no signal comes after it
    (folder / "frr" / "site.j2").write_text("! site\n")
    files = dict(config_files(fabric256, [folder]))
    assert all("! site" in text for path, text in files.items() if path.endswith("frr.conf"))
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0) and templating._TIMED is None
    # a render that runs only packaged templates is not timed, in a build with user folders too
    monkeypatch.setattr(templating, "RENDER_SECONDS", 1e-6)
    env = template_environment([folder])
    assert isinstance(env, TemplateSandbox) and env.bound_renders and not template_environment().bound_renders
    context = {"p": placement_facts(fabric256)}
    assert (render_template(env, "placement/rankfile.j2", context)
            == render_template(template_environment(), "placement/rankfile.j2", context))
    assert templating._TIMED is None


@pytest.mark.parametrize("template", ["frr/policy.j2", "placement/rankfile.j2"])
def test_a_file_longer_than_the_cap_is_refused_before_it_is_made(tmp_path, monkeypatch, template):
    # 10**10 characters if it ran to the end; stopped at 1 MiB, long before its 10 s budget
    monkeypatch.setattr(templating, "MAX_OUTPUT_CHARS", 1 << 20)
    folder = site(tmp_path, template, "!\n{% for i in range(100000) %}{% for j in range(100000) %}"
                                      "{{ i }}.{{ j }}\n{% endfor %}{% endfor %}\n")
    run_by = ", run by frr/frr.conf.j2 (in " + str(packaged_template_dir()) + ")" if template == "frr/policy.j2" else ""
    assert one_error_line(build(tmp_path, folder)) == (
        f"Error: template {template} (in {folder}){run_by} made more than 1,048,576 characters (1 MiB of text), "
        f"the most a file rendered with a user template may hold")
    assert not (tmp_path / "out").exists()


REPEATS = {
    "string": ("{{ 'x' * 10 ** 10 }}", "a string of 1 repeated 10,000,000,000 times would hold 10,000,000,000 "
                                      "characters; at most 268,435,456"),
    "list": ("{{ ([1, 2] * 10 ** 9) | length }}", "a list of 2 items repeated 1,000,000,000 times would hold "
                                                 "2,000,000,000 items and characters; at most 268,435,456"),
    # few items, but joined (in C, at once) 2**20 times 2**20 characters: 1 TiB
    "list-of-long-strings": ("{{ (['x' * 2 ** 20] * 2 ** 20) | join }}",
                             "a list of 1 item repeated 1,048,576 times would hold 1,099,511,627,776 items "
                             "and characters; at most 268,435,456"),
    "nested-tuples": ("{% set row = ('abcd',) * 1000 %}{{ ([row] * 10 ** 6) | string | length }}",
                      "a list of 1 item repeated 1,000,000 times would hold 4,000,000,000 items and "
                      "characters; at most 268,435,456"),
    "power": ("{{ 9 ** (10 ** 9) }}", "a power of integers of at least 3,000,000,000 bits; a template's "
                                     "integers may have at most 65,536 bits"),
    "squares": ("{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
                "a product of integers of 51,937 and 51,937 bits; a template's integers may have at most "
                "65,536 bits"),
}


@pytest.mark.parametrize("source,message", REPEATS.values(), ids=REPEATS)
def test_a_product_or_power_too_big_to_make_is_refused_before_it_is_made(tmp_path, fabric256, source, message):
    folder = site(tmp_path, "frr/policy.j2", "!\n" + source + "\n")
    start = time.process_time()
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert str(info.value) == f"template frr/policy.j2 (in {folder}), line 2: {message}"
    assert time.process_time() - start < 5  # refused, not made (nor folded when compiled)
    env = template_environment()  # any template, the packaged ones too
    with pytest.raises(jinja2.sandbox.SecurityError, match=re.escape(message)):
        env.from_string(source).render()
    assert env.from_string("{{ 'ab' * 3 }} {{ [0] * 2 }} {{ 6 * 7 }} {{ 2 ** 64 }} {{ 1.5 * 2 }} {{ 2 ** -1 }} "
                           "{{ (['-' * 80] * 1000) | join | length }} {{ 3 * ('a', ['b']) }}"
                           ).render() == ("ababab [0, 0] 42 18446744073709551616 3.0 0.5 80000 "
                                          "('a', ['b'], 'a', ['b'], 'a', ['b'])")


#: Each prints Python's default text of an object, whose address changes from run to run.
ADDRESSES = {
    "global-function": "{{ range }}",
    "cycler-object": "{{ cycler('a', 'b') }}",
    "dict-method": "{{ sw.items }}",
    "generator": "{{ sw.ports | map(attribute='name') }}",
    "joined": "{{ [joiner()] | join }}",
    "string-filter": "{{ (lipsum | string)[:1] }}{{ range | string }}",
}


@pytest.mark.parametrize("source", ADDRESSES.values(), ids=ADDRESSES)
def test_a_template_that_prints_an_object_address_is_refused(tmp_path, fabric256, source):
    folder = site(tmp_path, "frr/policy.j2", "!\n" + source + "\n")
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert str(info.value) == (f"template frr/policy.j2 (in {folder}), run by frr/frr.conf.j2 (in "
                               f"{packaged_template_dir()}) printed a Python object's address (line 8 of its "
                               f"text ends like ' at 0x...>'), which differs from run to run; print the "
                               f"object's values instead")


def test_an_object_address_in_the_cli_is_one_error_line(tmp_path):
    folder = site(tmp_path, "placement/hostfile.j2", "# hosts\n# {{ cycler('a') }}\n")
    assert one_error_line(build(tmp_path, folder)) == (
        f"Error: template placement/hostfile.j2 (in {folder}) printed a Python object's address (line 2 of its "
        f"text ends like ' at 0x...>'), which differs from run to run; print the object's values instead")
    assert not (tmp_path / "out").exists()


def test_objects_with_a_stable_text_print_as_before(tmp_path, fabric256):
    source = ("! {{ dict }} {{ namespace(a=1) }} {{ range(2) }} {{ sw.name | list | first }} "
              "{% for p in sw.ports[:1] %}{{ loop }}{% endfor %} {{ cycler('a').next() }}\n")
    folder = site(tmp_path, "frr/policy.j2", source)
    files = dict(config_files(fabric256, [folder]))
    text = files["switches/cluster-leaf-su00-r0/frr.conf"]
    assert "! <class 'dict'> <Namespace {'a': 1}> range(0, 2) c <LoopContext 1/" in text and "> a\n" in text


NONDETERMINISTIC = {
    "random-filter": ("{{ [1, 2, 3] | random }}", "the random filter"),
    "random-by-name": ("{{ [[1, 2], [3, 4]] | map('random') | list }}", "the random filter"),
    "lipsum": ("{{ lipsum(1) }}", "lipsum()"),
}


@pytest.mark.parametrize("source,what", NONDETERMINISTIC.values(), ids=NONDETERMINISTIC)
def test_random_text_is_refused(tmp_path, fabric256, source, what):
    message = (f"{what} is not available: its result changes from run to run, and topo writes the same files "
               f"for the same input")
    folder = site(tmp_path, "frr/policy.j2", "!\n" + source + "\n")
    with pytest.raises(TemplateError) as info:
        dict(config_files(fabric256, [folder]))
    assert str(info.value) == f"template frr/policy.j2 (in {folder}), line 2: {message}"
    with pytest.raises(jinja2.sandbox.SecurityError, match=re.escape(message)):
        template_environment().from_string(source).render()


def test_in_another_thread_a_render_is_bounded_but_not_timed(tmp_path, fabric256):
    # signals run in the main thread only: no timer there, and no error for trying; the cap and
    # the address check hold
    folder = site(tmp_path, "frr/policy.j2", "! {{ sw.name }}\n")
    outcome: dict[str, object] = {}

    def work():
        outcome["files"] = dict(config_files(fabric256, [folder]))
        (folder / "frr" / "policy.j2").write_text("! {{ range }}\n")
        try:
            dict(config_files(fabric256, [folder]))
        except TemplateError as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert "! cluster-leaf-su00-r0" in outcome["files"]["switches/cluster-leaf-su00-r0/frr.conf"]
    assert "printed a Python object's address" in outcome["error"]
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0) and templating._TIMED is None


def test_a_sigprof_handler_of_someone_else_is_left_alone(tmp_path, fabric256, monkeypatch):
    # a profiler's: the render runs without a budget (but with the other bounds) and keeps it
    folder = site(tmp_path, "frr/policy.j2", "! {{ sw.name }}\n")
    calls = []
    previous = signal.signal(signal.SIGPROF, lambda signum, frame: calls.append(signum))
    try:
        monkeypatch.setattr(templating, "RENDER_SECONDS", 1e-3)
        files = dict(config_files(fabric256, [folder]))
        assert "! cluster-leaf-su00-r0" in files["switches/cluster-leaf-su00-r0/frr.conf"]
        assert signal.getsignal(signal.SIGPROF) is not templating._over_budget
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0) and templating._TIMED is None and calls == []
    finally:
        signal.signal(signal.SIGPROF, previous)


def test_every_fact_a_template_sees_is_plain_data(monkeypatch):
    # no set (its order follows PYTHONHASHSEED) and no object (its text may be its address) in
    # the context of any template of a build, single- or dual-ToR
    seen: dict[str, str] = {}
    plain = (dict, list, tuple, str, int, float, bool, type(None))
    new_context = jinja2.Template.new_context

    def walk(value, path, depth=0):
        if not isinstance(value, plain):
            seen.setdefault(path, type(value).__name__)
        elif isinstance(value, dict) and depth < 12:
            for key, item in value.items():
                walk(item, f"{path}.{key}", depth + 1)
        elif isinstance(value, (list, tuple)) and depth < 12:
            for item in value[:8]:
                walk(item, f"{path}[]", depth + 1)

    def spy(self, vars=None, shared=False, locals=None):
        for name, value in (vars or {}).items():
            if name not in self.globals:
                walk(value, f"{self.name}:{name}")
        return new_context(self, vars, shared, locals)

    monkeypatch.setattr(jinja2.Template, "new_context", spy)
    from topo.pipeline.build import render_build
    from topo.summary import summarize
    for spec in ({"gpus": 256}, {"gpus": 512, "dual_tor": True}):
        fabric = build_fabric(load_spec(spec))
        render_build(fabric, summarize(fabric))
    assert seen == {}


def test_the_docs_give_the_bounds_of_a_render():
    page = (Path(__file__).resolve().parent.parent / "docs" / "configs.md").read_text(encoding="utf-8")
    section = page.split("### What a template can and cannot do", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    assert (templating.RENDER_SECONDS, templating.MAX_OUTPUT_CHARS, templating.MAX_INT_BITS) == (10, 256 << 20, 1 << 16)
    for text in ("10 s of CPU time", "256 MiB", "65,536 bits", " at 0x", "`random`", "`lipsum`"):
        assert text in section, text


# --- 6. the docs ----------------------------------------------------------------------------------


def test_the_docs_list_every_filter_topo_registers():
    page = (Path(__file__).resolve().parent.parent / "docs" / "configs.md").read_text(encoding="utf-8")
    section = page.split("### What a template can and cannot do", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    ours = set(template_environment().filters) - set(jinja2.Environment().filters)
    assert ours == {"thousands", "json", "size"}
    for name in ours:
        assert f"`{name}`" in section, name
    assert "MAX_RANGE" in section and "1 MiB" in section
