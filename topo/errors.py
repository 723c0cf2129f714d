"""One family of exceptions for every mistake a user can make.

The CLI turns any :class:`TopoError` into a one-line message per problem and exit status 1
(:class:`UsageError`: click's usage message and exit status 2); nothing else is caught, so a bug
still shows its traceback.
"""

from __future__ import annotations

import difflib
import re
import reprlib
from typing import Any, Iterable, Sequence


class TopoError(Exception):
    """Base class of every error topo reports to a user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def lines(self) -> list[str]:
        """The problems, one line each."""
        return [self.message]


class ProblemsError(TopoError):
    """An error made of several problems, one line each, all reported at once.

    Parameters
    ----------
    problems : sequence of str
        One line per problem, each naming the field or option and the numbers.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))

    @property
    def lines(self) -> list[str]:
        return list(self.problems)


class SpecError(ProblemsError):
    """A fabric spec that cannot be built, e.g. ``"gpus=1020 is not a multiple of gpus_per_node=8"``."""


class OutputError(TopoError):
    """An output folder that cannot be written as asked (it exists, or is not writable)."""


class UsageError(TopoError):
    """Options that do not go together (``--weak`` without ``--scale``): the CLI shows it as click
    shows a malformed command line, with exit status 2."""


#: Most characters of a value that an error line quotes.
QUOTE_LIMIT = 60

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 2, 4, 4, 4, 4
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = QUOTE_LIMIT, QUOTE_LIMIT, QUOTE_LIMIT


def quote(value: Any) -> str:
    """A value as an error line shows it: its ``repr``, cut to about QUOTE_LIMIT characters.

    The cost does not grow with the value, so a huge string or a YAML alias bomb is never
    expanded into a message.

    >>> quote("gpu"), quote(3), quote("x" * 1000)[:12], len(quote("x" * 1000)) <= QUOTE_LIMIT
    ("'gpu'", '3', "'xxxxxxxxxxx", True)
    >>> quote([[1, 2], [3, [4, [5]]]] * 100)
    '[[1, 2], [3, [...]], [1, 2], [3, [...]], ...]'
    """
    text = _REPR.repr(value)
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT - 3] + "..."


_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}")


def key_name(key: Any) -> str:
    """An unknown key of a user's file as an error line names it: quoted when it looks like a field
    name (``'gpu'``), else only said to be one, so that a line of text read as a key (a README's
    first line, ``Some title: ...``) is never repeated.

    >>> key_name("gpu"), key_name("The first line of my notes")
    ("'gpu'", 'a key that is no field name')
    """
    return quote(key) if isinstance(key, str) and _KEY_NAME.fullmatch(key) else "a key that is no field name"


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Names in ``choices`` that look like ``word`` (for "did you mean" hints); none for a word far
    longer than any name, which no name resembles (and which would be slow to compare)."""
    if len(word) > 200:
        return []
    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.6)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` when a close match exists, else ``""``."""
    matches = close_matches(word, choices, n=1)
    return f" (did you mean '{matches[0]}'?)" if matches else ""


class AnalysisError(ProblemsError):
    """Analysis options that do not fit the fabric (unknown names to fail, a job too large, ...)."""
