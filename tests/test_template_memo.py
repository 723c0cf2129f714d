"""An included template's memo (topo.outputs.template_memo) changes no byte: what it gives back is
what the template renders for the same values, and a template whose output could depend on
anything else is not memoised."""

from __future__ import annotations

import jinja2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topo import build_fabric, load_spec
from topo.outputs.configs import job as configs
from topo.outputs.template_memo import IncludeMemo, template_needs
from topo.outputs.templating import template_environment

#: Included templates that read their context in every way the analysis follows, and some it
#: cannot (each must render what Jinja2 renders, memo or not).
CHILDREN = {
    "keys": "{{ sw.name }} {{ sw.index }} {{ sw.flag }} {{ sw.ratio }} {{ sw.nested.deep | default('-') }}",
    "loop-keys": ("{% for p in sw.ports %}{{ p.name }}={{ p.speed }}{{ ',' if not loop.last }}{% endfor %}"
                  "|{{ fabric.mtu }}"),
    "nested-loops": ("{% for p in sw.ports %}{% set outer = loop %}{% for q in fabric.queues %}"
                     "{{ p.name }}|{{ q.id }}{{ ',' if not (outer.last and loop.last) }}{% endfor %}{% endfor %}"),
    "filtered-loop": "{% for p in sw.ports if p.speed > 100 and not sw.flag %}{{ p.name }}{{ loop.index }} {% endfor %}",
    "previous-item": "{% for p in sw.ports %}{{ loop.previtem.name if not loop.first }}>{{ p.name }} {% endfor %}",
    "loop-alias": ("{% for p in sw.ports %}{% set o = loop %}{% for x in [1] %}{{ o.nextitem.speed if not o.last }}"
                   "{% endfor %}{% endfor %}"),
    "set-in-branches": "{% if sw.flag %}{% set x = sw.name %}{% else %}{% set x = sw.index %}{% endif %}{{ x }}",
    "set-over-loop-item": "{% for p in sw.ports %}{% if p.speed == 1 %}{% set p = fabric %}{% endif %}{{ p.mtu }}"
                          "{% endfor %}",
    "maybe-set": "{% if sw.flag %}{% set extra = 'set' %}{% endif %}{{ extra | default('context') }}",
    "defined": "{{ sw.nested is defined }} {{ sw.nested.deep is defined }} {{ sw.missing is defined }}",
    "whole-values": "{{ sw.ports | length }} {{ sw.nested }} {{ sw.ports | map(attribute='name') | join(',') }}",
    "dict-methods": "{% for k, v in sw.items() | sort %}{{ k }} {% endfor %}{{ sw.get('name') }}",
    "formats": "{{ '%g' | format(sw.ratio) }} {{ sw.ratio | round(1) }} {{ (sw.index * 2) | string }}",
    "namespace": ("{% set ns = namespace(total=0) %}{% for p in sw.ports %}{% set ns.total = ns.total + p.speed %}"
                  "{% endfor %}{{ ns.total }}"),
    "tuple-unpack": "{% set a, b = sw.pair %}{{ a }}{{ b }} {% for x, y in sw.pairs %}{{ x }}{{ y }}{% endfor %}",
    "index-items": "{{ sw.ports[0].name if sw.ports }} {{ sw['name'] }} {{ fabric.queues[-1].id }}",
    "conditional": "{{ sw.name if sw.flag else fabric.mtu }} {{ sw.ratio > 0.5 and sw.index or 'no' }}",
}

#: Templates the memo must leave alone (their output is not a function of what they read).
NOT_MEMOISED = {
    "macro": "{% macro m(x) %}{{ x }}{% endmacro %}{{ m(sw.name) }}",
    "namespace-assignment": "{% set ns.n = ns.n + 1 %}.",
    "loop-cycle": "{% for p in sw.ports %}{{ loop.cycle('a', 'b') }}{% endfor %}",
    "cycler": "{% set c = cycler('a', 'b') %}{{ c.next() }}",
    "joiner": "{% set j = joiner(', ') %}{{ j() }}",
    "dict-method-not-called": "{{ sw.get }}",
    "include": '{% include "other.j2" %}',
    "import": '{% import "other.j2" as o %}{{ sw.name }}',
    "random": "{{ sw.ports | random }}",
    "map-random": "{{ sw.ports | map('random') | list }}",
    "sameas": "{{ sw.nested is sameas fabric }}",
    "lipsum": "{{ lipsum(1) }}",
    "set-block": "{% set x %}{{ sw.name }}{% endset %}{{ x }}",
    "recursive": "{% for p in sw.ports recursive %}{{ p.name }}{% endfor %}",
    "filter-block": "{% filter upper %}{{ sw.name }}{% endfilter %}",
    "with": "{% with x = sw.name %}{{ x }}{% endwith %}",
    "call-block": "{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}{{ sw.name }}{% endcall %}",
}


_NAN = float("nan")
_DEEP: list = []
_DEEP.append(_DEEP)  # a list that holds itself


def _needs(source: str):
    env = template_environment()
    return template_needs(env.parse(source), set(env.filters), set(env.tests))


@pytest.mark.parametrize("source", NOT_MEMOISED.values(), ids=NOT_MEMOISED)
def test_a_template_that_could_read_more_is_not_memoised(source):
    assert _needs(source) is None


def test_what_a_template_reads_is_found_key_by_key():
    needs = _needs(CHILDREN["nested-loops"])
    assert sorted(needs) == ["fabric", "outer", "sw"]  # outer: the context's, were the set not done
    ports = needs["sw"].attrs["ports"]
    assert not ports.whole and sorted(ports.each.attrs) == ["name"] and ports.each.attrs["name"].whole
    assert sorted(needs["fabric"].attrs["queues"].each.attrs) == ["id"]
    whole = _needs(CHILDREN["whole-values"])["sw"].attrs
    assert whole["ports"].whole and whole["nested"].whole
    assert _needs(CHILDREN["dict-methods"])["sw"].whole  # sw.items(): the dict's own method


def _folder(tmp_path, child: str):
    folder = tmp_path / "site"
    folder.mkdir(exist_ok=True)
    (folder / "main.j2").write_text('[{% include "child.j2" %}]')
    (folder / "child.j2").write_text(child)
    (folder / "other.j2").write_text("other {{ sw.name }}")
    return folder


def _render_all(folder, contexts, memo: bool) -> list[str]:
    env = template_environment([folder])
    env.memo_includes = memo
    out = []
    for context in contexts:
        try:
            out.append(env.get_template("main.j2").render(context))
        except Exception as exc:  # an error must be the same error, memo or not
            out.append(f"{type(exc).__name__}: {exc}")
    return out


#: Values that compare equal but print otherwise (1, True, 1.0; 0.0, -0.0), and lists of ports.
_scalars = st.sampled_from([0, 1, True, False, 1.0, 0.0, -0.0, 0.5, "a", "b", None])
_port = st.fixed_dictionaries({"name": st.sampled_from(["E0", "E4", "E8"]),
                               "speed": st.sampled_from([1, True, 400, 400.0, 0.0, -0.0]),
                               "mtu": st.sampled_from([1500, 9100])})
_switch = st.fixed_dictionaries(
    {"name": st.sampled_from(["leaf-1", "leaf-2"]), "index": _scalars, "flag": st.booleans(),
     "ratio": _scalars.filter(lambda v: isinstance(v, (int, float))),
     "ports": st.lists(_port, max_size=3),
     "pair": st.just((1, 2)), "pairs": st.just([("x", 1), ("y", 2)])},
    optional={"nested": st.one_of(st.none(), st.fixed_dictionaries({"deep": _scalars}))})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(switches=st.lists(_switch, min_size=2, max_size=8),
       queues=st.lists(st.fixed_dictionaries({"id": st.sampled_from([0, 3, 3.0])}), min_size=1, max_size=2))
@pytest.mark.parametrize("child", CHILDREN.values(), ids=CHILDREN)
def test_a_memoised_include_renders_what_the_template_renders(tmp_path, child, switches, queues):
    fabric = {"mtu": 9100, "queues": queues}
    contexts = [{"sw": sw, "fabric": fabric} for sw in switches + switches[:3]]  # repeats: memo hits
    folder = _folder(tmp_path, child)
    assert _render_all(folder, contexts, memo=True) == _render_all(folder, contexts, memo=False)


#: (including template, included template, contexts, what Jinja2 renders): state of the including
#: template that changes under the same identity, which a memo must not key by it.
INCLUDER_STATE = {
    "outer-loop": ("{% for x in xs %}{% include 'child.j2' %}{{ ',' if not loop.last }}{% endfor %}",
                   "{{ loop.index }}", [{"xs": [1, 2, 3]}], ["1,2,3"]),
    "namespace": ("{% set ns = namespace(v=1) %}{% include 'child.j2' %}{% set ns.v = 2 %}{% include 'child.j2' %}",
                  "{{ ns.v }}", [{}], ["12"]),
    "cycler": ("{% set c = cycler('a', 'b') %}{% for i in [1, 2, 3] %}{% include 'child.j2' %}{% endfor %}",
               "{{ c.next() }}", [{}], ["aba"]),
    "macro-closure": ("{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{% include 'child.j2' %}{% set x = 2 %}"
                      "{% include 'child.j2' %}", "{{ m() }}", [{}], ["12"]),
    "child-changes-namespace": ("{% set ns = namespace(n=0) %}{% for x in [1, 2, 3] %}{% include 'child.j2' %}"
                                "{% endfor %}{{ ns.n }}", "{% set ns.n = ns.n + 1 %}.", [{}], ["...3"]),
    "loop-changed": ("{% for x in [1, 1, 2] %}{% if loop.first %}{% endif %}{% include 'child.j2' %}{% endfor %}",
                     "{{ loop.changed(1) }}", [{}], ["TrueFalseFalse"]),
    "for-over-loop": ("{% include 'child.j2' %}", "{% for p in ps %}[{% for q, l in loop %}{{ q }}{% endfor %}]"
                      "{% endfor %}", [{"ps": ["a", "b", "c"]}, {"ps": ["x", "y", "z"]}], ["[bc]", "[yz]"]),
    "nan": ("{% include 'child.j2' %}", "{{ sw.a == sw.b }}",
            [{"sw": {"a": [_NAN], "b": [_NAN]}}, {"sw": {"a": [float("nan")], "b": [float("nan")]}}],
            ["True", "False"]),
    "deep-list": ("{% include 'child.j2' %}", "{{ x | length }}", [{"x": _DEEP}, {"x": _DEEP}], ["1", "1"]),
}


@pytest.mark.parametrize("main,child,contexts,expected", INCLUDER_STATE.values(), ids=INCLUDER_STATE)
def test_the_including_templates_state_is_never_a_key(tmp_path, main, child, contexts, expected):
    folder = _folder(tmp_path, child)
    (folder / "main.j2").write_text(main)
    assert _render_all(folder, contexts, memo=False) == expected
    assert _render_all(folder, contexts, memo=True) == expected


def test_the_memo_gives_back_a_text_only_for_the_same_values():
    memo = IncludeMemo(_needs(CHILDREN["loop-keys"]))
    made: list[str] = []

    def render(context):
        def make() -> str:
            made.append(context["sw"]["name"])
            return str(len(made))
        return memo.render(lambda name: context.get(name, jinja2.utils.missing), make)

    fabric = {"mtu": 9100}
    a = {"sw": {"name": "a", "ports": [{"name": "E0", "speed": 400}]}, "fabric": fabric}
    b = {"sw": {"name": "b", "ports": [{"name": "E0", "speed": 400, "ip": "x"}]}, "fabric": fabric}  # same reads
    c = {"sw": {"name": "c", "ports": [{"name": "E0", "speed": 400.0}]}, "fabric": fabric}  # 400.0 prints otherwise
    d = {"sw": {"name": "d", "ports": [{"name": "E0", "speed": 400}]}, "fabric": {"mtu": 1500}}
    e = {"sw": {"name": "e", "ports": [{"name": "E0", "speed": 1}]}, "fabric": fabric}
    f = {"sw": {"name": "f", "ports": [{"name": "E0", "speed": True}]}, "fabric": fabric}  # == 1, prints True
    g = {"sw": {"name": "g", "ports": [{"name": "E0", "speed": -0.0}]}, "fabric": fabric}
    h = {"sw": {"name": "h", "ports": [{"name": "E0", "speed": 0.0}]}, "fabric": fabric}  # == -0.0
    assert [render(x) for x in (a, b, c, d, a, e, f, g, h, f)] == ["1", "1", "2", "3", "1", "4", "5", "6", "7", "5"]
    assert made == ["a", "c", "d", "e", "f", "g", "h"]


def test_switch_configs_are_the_same_with_and_without_the_memo():
    """Every switch of a three-tier and a dual-ToR fabric, in order (the memo hits from the second
    switch of a tier on)."""
    for spec in ({"gpus": 2048, "radix": 32}, {"gpus": 256, "dual_tor": True}):
        fabric = build_fabric(load_spec(spec))
        switches = list(range(fabric.first(1), len(fabric.names)))
        saved = dict(configs._WORKER)
        try:
            configs._init_worker(fabric, ())
            configs._WORKER["env"].memo_includes = False
            expected = configs._render_chunk(switches)
            configs._init_worker(fabric, ())
            assert configs._WORKER["env"].memo_includes
            assert configs._render_chunk(switches) == expected
        finally:
            configs._WORKER.update(saved)


def test_a_container_keyed_again_keeps_what_its_key_names_alive():
    """The fabric-wide facts are one object in every render, so their key is made once; a key
    that names an object by identity (a long list) must keep it alive in every memo entry made
    with it, or a later object at the same address could be taken for it."""
    memo = IncludeMemo(_needs("{{ fabric.links | length }} {{ sw.name }}"))
    links = list(range(200))  # longer than VALUE_ITEMS: keyed by identity
    fabric = {"links": links}
    for name in ("a", "b", "c"):
        context = {"sw": {"name": name}, "fabric": fabric}
        memo.render(lambda n: context.get(n, jinja2.utils.missing), lambda: name)
    assert len(memo.texts) == 3
    assert all(any(kept is links for kept in keep) for _, keep in memo.texts.values())


def test_the_ports_columns_of_many_lists_are_never_mixed_up(tmp_path):
    """The columns of the lists read last are kept by the list's identity: lists of other names,
    taken in turn and more of them than are kept, render as without the memo."""
    folder = _folder(tmp_path, CHILDREN["loop-keys"])
    fabric = {"mtu": 9100}
    lists = [[{"name": f"E{i}{j}", "speed": 400 + i} for j in range(3)] for i in range(7)]
    contexts = [{"sw": {"ports": lists[i % 7]}, "fabric": fabric} for i in range(30)]
    contexts += [{"sw": {"ports": [dict(p) for p in lists[i % 7]]}, "fabric": fabric} for i in range(10)]
    assert _render_all(folder, contexts, memo=True) == _render_all(folder, contexts, memo=False)
