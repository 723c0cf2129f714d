"""YAML as topo reads it: YAML 1.1 without base-60 numbers, stricter where 1.1 would surprise.

One reader for every YAML input (spec files, server profiles, the hardware catalogue, workloads,
tuner tables): :func:`parse_yaml`. It imports nothing of topo but the input helpers, so that every
stage may read YAML without importing the spec.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .errors import SpecError, quote
from .inputs import parse_error


class _TopoProblem(yaml.constructor.ConstructorError):
    """A problem topo found in YAML, whose message quotes values only through ``quote``."""

    topo_message = True


class _SpecLoader(yaml.SafeLoader):
    """YAML 1.1 safe loader without base-60 numbers, so ``oversubscription: 3:1`` stays "3:1".

    Stricter than YAML 1.1 where it would read something else than what was meant: a key given
    twice in one mapping is an error (not "the last one wins"), and so is a number with a leading
    zero (YAML 1.1 reads ``0200`` as octal 128); integers are decimal only (``0x400`` is text).
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            if first is not None:
                raise _TopoProblem(
                    None, None, f"key {quote(key)} is given twice (first on line {first.line + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


_LEADING_ZERO = "tag:topo,2026:leading-zero-number"


def _refuse_leading_zero(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    value = loader.construct_scalar(node)
    raise _TopoProblem(
        None, None, f"{value if len(value) <= 20 else quote(value)} has a leading zero, which YAML 1.1 reads as octal; write it in decimal "
                    f"without the zero (or quote it if it is text)", node.start_mark)


_SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers
            if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)$"),  # decimal only: 0x10 and 0b10 stay text
    list("-+0123456789"),
)
_SpecLoader.add_implicit_resolver(_LEADING_ZERO, re.compile(r"^[-+]?0[0-9_]+$"), list("-+0"))
_SpecLoader.add_constructor(_LEADING_ZERO, _refuse_leading_zero)
_SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."),
)


def parse_yaml(text: str, where: str) -> Any:
    """YAML text as data (without base-60 numbers), or SpecError ``"<where>: malformed YAML at line
    L, column C: <problem>"``, which never quotes the text (:func:`topo.inputs.parse_error`)."""
    try:
        return yaml.load(text, Loader=_SpecLoader)  # noqa: S506 (a SafeLoader subclass)
    except (RecursionError, ValueError, yaml.YAMLError) as exc:  # ValueError: a number too long for int
        raise SpecError([parse_error(exc, where)]) from None
