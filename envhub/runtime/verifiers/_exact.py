"""``exact-match``: the completion equals the task's field after normalisation."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from envhub.runtime._types import Score, Task, Trajectory
from envhub.runtime.verifiers._base import ScoringContext, Verifier, VerifierError, task_value
from envhub.runtime.verifiers._reference import Reference, field_reference

__all__ = ["ExactMatchVerifier", "normalize"]

_WHITESPACE = re.compile(r"\s+")
_ASCII_PUNCTUATION = frozenset(string.punctuation)


def _strip_punctuation(text: str) -> str:
    # ASCII punctuation (which includes symbols such as $ + < = > ^ ` | ~) plus every Unicode
    # punctuation character (categories P*), so "¿Qué?" and "「答え」" normalise as "Qué".
    return "".join(
        ch for ch in text if ch not in _ASCII_PUNCTUATION and not unicodedata.category(ch).startswith("P")
    )


_STEPS: dict[str, Callable[[str], str]] = {
    "strip": str.strip,
    "lower": str.lower,
    "collapse-whitespace": lambda text: _WHITESPACE.sub(" ", text),
    "strip-punctuation": _strip_punctuation,
}


def normalize(text: str, steps: Sequence[str]) -> str:
    """``text`` with each normalisation step applied in order.

    Raises :class:`VerifierError` for an unknown step (the manifest models refuse them first).
    """
    for step in steps:
        try:
            text = _STEPS[step](text)
        except KeyError:
            raise VerifierError(f"unknown normalisation {step!r}; expected one of {', '.join(_STEPS)}") from None
    return text


class ExactMatchVerifier(Verifier):
    """Reward 1 when ``normalize(completion) == normalize(str(task[field]))``, else 0."""

    kind = "exact-match"

    def __init__(self, spec: Any) -> None:
        self.field: str = spec.field
        self.steps: tuple[str, ...] = tuple(spec.normalize)
        normalize("", self.steps)  # refuse an unknown step now, not at the first episode

    def reference(self, task: Task) -> Reference | None:
        """The task's field as text; None when it has none."""
        return field_reference(task, self.field, self.kind)

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None,
              context: ScoringContext | None = None) -> Score:
        """Raises :class:`MissingFieldError` when the task lacks the field."""
        expected = normalize(str(task_value(task, self.field, self.kind)), self.steps)
        got = normalize(trajectory.completion, self.steps)
        return Score(1.0 if got == expected else 0.0)
