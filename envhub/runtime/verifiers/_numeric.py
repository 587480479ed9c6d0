"""``numeric``: a number read from the completion is within tolerance of the task's field.

Numbers are read as exact fractions (:class:`fractions.Fraction`), so large integers and
decimals such as ``0.1`` compare without binary rounding; only the tolerances are floats.

What counts as a number (``read_number``): an optional sign (``-``, ``+`` or ``−``) not glued
to a preceding word or digit (so ``10-12`` reads 10 and 12, not -12), digits with optional
thousands separators (``1,234,567``), an optional decimal part, an optional exponent
(``1.5e3``), an optional ``/denominator`` (``3/4`` is 0.75) and an optional ``%``, which is
ignored: ``50%`` reads as 50, because tasks that ask for a percentage store the number of
percent. Inside ``\\boxed{...}`` LaTeX fractions (``\\frac{3}{4}``, ``\\dfrac``, ``\\tfrac``)
and ``{,}`` thousands separators are understood too.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Literal

from envhub.runtime._types import Score, Task, Trajectory
from envhub.runtime.verifiers._base import ScoringContext, Verifier, VerifierError, task_value
from envhub.runtime.verifiers._reference import Reference, field_reference

__all__ = ["NumericVerifier", "extract_number", "parse_number"]

Extract = Literal["auto", "boxed", "last-number"]

_NUMBER = re.compile(
    r"""
    (?<![\w.])                         # not the tail of a word, a version or another number
    (?P<sign>[-+\u2212])?
    (?P<int>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)?
    (?:(?<=[0-9])|(?=\.[0-9]))         # at least one digit before the point, or a point then one
    (?P<frac>\.[0-9]+)?
    (?P<exp>[eE][-+]?[0-9]+)?
    (?:\s*/\s*(?P<den>[0-9]+)(?![0-9.,]))?
    %?
    """,
    re.VERBOSE,
)
_MAX_EXPONENT = 400
_FINAL_MARKER = re.compile(r"####|\banswer\b\s*(?:is\b\s*[:=]?|[:=])", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]*?)\s*\}\s*\{\s*([^{}]*?)\s*\}")
_LATEX_NOISE = re.compile(r"\\[,!;: ]|\\left|\\right|\$")


def _to_fraction(match: re.Match[str]) -> Fraction | None:
    """The value of a :data:`_NUMBER` match, or None for a zero denominator or an empty match."""
    integer, frac, exp, den = match.group("int"), match.group("frac"), match.group("exp"), match.group("den")
    if integer is None and frac is None:
        return None
    if exp is not None and abs(int(exp[1:])) > _MAX_EXPONENT:
        return None  # 1e999999999 would build a billion-digit integer
    text = (integer or "0").replace(",", "") + (frac or "") + (exp or "")
    try:
        value = Fraction(text)
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
        return None
    if den is not None:
        if int(den) == 0:
            return None
        value /= int(den)
    return -value if match.group("sign") in ("-", "\u2212") else value


def _numbers(text: str) -> list[tuple[str, Fraction]]:
    found = []
    for match in _NUMBER.finditer(text):
        value = _to_fraction(match)
        if value is not None:
            found.append((match.group(0), value))
    return found


def parse_number(text: str) -> Fraction | None:
    """``text`` as a number when it is exactly one number (outer spaces aside), else None."""
    text = text.strip()
    match = _NUMBER.fullmatch(text)
    return _to_fraction(match) if match else None


def _last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}``, braces balanced; None when there is none."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i]
    return None


def _boxed_number(content: str) -> tuple[str, Fraction] | None:
    cleaned = _LATEX_NOISE.sub("", content).replace("{,}", ",")
    cleaned = _LATEX_FRAC.sub(r"\1/\2", cleaned).replace("{", "").replace("}", "")
    whole = parse_number(cleaned)
    if whole is not None:
        return content, whole
    # \boxed{42 \text{ apples}} or \boxed{x = 7}: the last number inside the box.
    numbers = _numbers(re.sub(r"\\text\s*", "", cleaned))
    return numbers[-1] if numbers else None


def extract_number(text: str, how: Extract = "auto") -> tuple[str, Fraction] | None:
    """The number a completion answers with, as ``(the text read, its value)``, or None.

    ``boxed``: the last ``\\boxed{...}``. ``last-number``: the last number in the text.
    ``auto``: boxed if there is a box; else the first number after the last final-answer
    marker (``#### 42``, ``Answer: 42``, ``the answer is 42``); else the last number.
    """
    if how in ("boxed", "auto"):
        content = _last_boxed(text)
        if content is not None:
            return _boxed_number(content)
        if how == "boxed":
            return None
    if how == "auto":
        markers = list(_FINAL_MARKER.finditer(text))
        if markers:
            after = _numbers(text[markers[-1].end():])
            if after:
                return after[0]
    numbers = _numbers(text)
    return numbers[-1] if numbers else None


def _expected(task: Task, field: str) -> Fraction:
    value = task_value(task, field, "numeric")
    number: Fraction | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = Fraction(value)
    elif isinstance(value, float):
        # repr() is the shortest decimal that round-trips: 0.1 is 1/10, not 0.1000000000000000055...
        number = Fraction(repr(value)) if value == value and abs(value) != float("inf") else None
    elif isinstance(value, str):
        number = parse_number(value)
    if number is None:
        raise VerifierError(f"task {task.id!r} field {field!r} is not a number: {value!r}")
    return number


class NumericVerifier(Verifier):
    """Reward 1 when ``|got - expected| <= tolerance`` or
    ``|got - expected| <= relative-tolerance * |expected|``, else 0 (also 0 when the
    completion has no number)."""

    kind = "numeric"

    def __init__(self, spec: Any) -> None:
        self.field: str = spec.field
        self.tolerance = Fraction(repr(float(spec.tolerance)))
        self.relative_tolerance = Fraction(repr(float(spec.relative_tolerance)))
        self.extract: Extract = spec.extract

    def reference(self, task: Task) -> Reference | None:
        """The task's number, boxed unless the verifier extracts the last number; None when
        the task has no such field."""
        return field_reference(task, self.field, self.kind, extract=self.extract)

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None,
              context: ScoringContext | None = None) -> Score:
        """Raises :class:`MissingFieldError` when the task lacks the field and
        :class:`VerifierError` when its value is not a number."""
        expected = _expected(task, self.field)
        found = extract_number(trajectory.completion, self.extract)
        if found is None:
            return Score(0.0, info={"reason": f"no number found in the completion (extract = {self.extract!r})"})
        text, got = found
        diff = abs(got - expected)
        ok = diff <= self.tolerance or diff <= self.relative_tolerance * abs(expected)
        return Score(1.0 if ok else 0.0,
                     info={"read": text.strip()[:100], "value": float(got), "expected": float(expected)})
