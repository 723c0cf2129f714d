"""One family of exceptions for every mistake a user can make.

The CLI turns any :class:`TopoError` into a one-line message per problem and exit status 1;
nothing else is caught, so a bug still shows its traceback.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Sequence


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


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Names in ``choices`` that look like ``word`` (for "did you mean" hints)."""
    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.6)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` when a close match exists, else ``""``."""
    matches = close_matches(word, choices, n=1)
    return f" (did you mean '{matches[0]}'?)" if matches else ""


class AnalysisError(ProblemsError):
    """Analysis options that do not fit the fabric (unknown names to fail, a job too large, ...)."""
