"""``json-match``: the completion parses as JSON equal to (or a superset of) the task's field."""

from __future__ import annotations

import json
import re
from typing import Any

from envhub.runtime._types import Score, Task, Trajectory
from envhub.runtime.verifiers._base import ScoringContext, Verifier, VerifierError, task_value
from envhub.runtime.verifiers._reference import Reference, field_reference

__all__ = ["JsonMatchVerifier", "json_difference", "parse_json_answer"]

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
_MAX_FAILED_STARTS = 1000


def parse_json_answer(text: str) -> tuple[Any, str] | None:
    """The JSON value a completion answers with, and where it was found, or None.

    Tried in order: the whole completion; the last fenced block (```json or ```); the last
    top-level ``{...}`` or ``[...]`` that parses.
    """
    attempts: list[tuple[str, str]] = [(text.strip(), "the whole completion")]
    fences = _FENCE.findall(text)
    if fences:
        attempts.append((fences[-1].strip(), "the last fenced block"))
    for candidate, where in attempts:
        try:
            return json.loads(candidate), where
        except (ValueError, RecursionError):
            pass
    last: Any = None
    found = False
    i = 0
    failures = 0
    # Each failed attempt may scan far ahead ("[[[[..."); bound them so an adversarial
    # completion costs milliseconds, not minutes.
    while failures < _MAX_FAILED_STARTS:
        starts = [p for p in (text.find("{", i), text.find("[", i)) if p >= 0]
        if not starts:
            break
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            i = start + 1
            failures += 1
            continue
        last, found, i = value, True, end
    return (last, "the last JSON object or array in the text") if found else None


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"  # JSON has one number type: 1 and 1.0 are equal
    return type(value).__name__


def json_difference(expected: Any, got: Any, *, subset: bool, path: str = "$") -> str | None:
    """Where ``got`` first differs from ``expected``, as ``"$.a[2]: expected 1, got 2"``; None
    when they match. With ``subset``, objects in ``got`` may have extra keys at any depth;
    arrays must still have the same length, and match element by element, in order."""
    if _kind(expected) != _kind(got):
        return f"{path}: expected {_kind(expected)} {_short(expected)}, got {_kind(got)} {_short(got)}"
    if isinstance(expected, dict):
        for key, value in expected.items():
            if key not in got:
                return f"{path}: missing key {key!r}"
            diff = json_difference(value, got[key], subset=subset, path=f"{path}.{key}")
            if diff:
                return diff
        if not subset:
            extra = [key for key in got if key not in expected]
            if extra:
                return f"{path}: unexpected key {extra[0]!r}"
        return None
    if isinstance(expected, list):
        if len(expected) != len(got):
            return f"{path}: expected {len(expected)} items, got {len(got)}"
        for index, (e, g) in enumerate(zip(expected, got, strict=True)):
            diff = json_difference(e, g, subset=subset, path=f"{path}[{index}]")
            if diff:
                return diff
        return None
    return None if expected == got else f"{path}: expected {_short(expected)}, got {_short(got)}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


class JsonMatchVerifier(Verifier):
    """Reward 1 when the completion's JSON equals the task's field (``subset``: contains it),
    else 0. An unparseable completion scores 0 with the reason in ``info``.

    A field holding a string is JSON text and is parsed (``'{"a": 1}'``, or ``'"yes"'`` for
    the string ``yes``), so Parquet string columns work; any other value is used as it is.
    """

    kind = "json-match"

    def __init__(self, spec: Any) -> None:
        self.field: str = spec.field
        self.subset: bool = spec.subset

    def _expected(self, task: Task) -> Any:
        value = task_value(task, self.field, self.kind, allow_null=True)
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError as e:
            raise VerifierError(
                f"task {task.id!r} field {self.field!r} is a string but not JSON text: {e}",
                hint='a string field is parsed as JSON; write the string "yes" as "\\"yes\\""',
            ) from e

    def reference(self, task: Task) -> Reference | None:
        """The task's field as JSON; None when it has none."""
        return field_reference(task, self.field, self.kind)

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None,
              context: ScoringContext | None = None) -> Score:
        """Raises :class:`MissingFieldError`, or :class:`VerifierError` when the field is a
        string that is not JSON text."""
        expected = self._expected(task)
        parsed = parse_json_answer(trajectory.completion)
        if parsed is None:
            return Score(0.0, info={"reason": "the completion contains no parseable JSON"})
        got, where = parsed
        diff = json_difference(expected, got, subset=self.subset)
        info = {"parsed_from": where}
        if diff:
            info["reason"] = diff
        return Score(0.0 if diff else 1.0, info=info)
