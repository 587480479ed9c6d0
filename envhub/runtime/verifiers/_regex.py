"""``regex``: the completion matches a pattern, fixed in the manifest or read from the task."""

from __future__ import annotations

import functools
import re
from typing import Any

from envhub.runtime._types import Score, Task, Trajectory
from envhub.runtime.verifiers._base import ScoringContext, Verifier, VerifierError, task_value

__all__ = ["RegexVerifier"]


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str, flags: int) -> re.Pattern[str]:
    # Per-task patterns repeat across rollouts of the same task; compile each once.
    return re.compile(pattern, flags)


def _reason(error: Exception) -> str:
    # re.error says where; the engine's two other refusals are bare.
    if isinstance(error, OverflowError):
        return "a repetition count is too large (the limit is 4294967294)"
    if isinstance(error, RecursionError):
        return "groups are nested too deeply"
    return str(error)


class RegexVerifier(Verifier):
    """Reward 1 when the completion matches (``re.search``, or ``re.fullmatch`` with
    ``full-match``) the pattern, else 0. The completion is matched as it is, not stripped."""

    kind = "regex"

    def __init__(self, spec: Any) -> None:
        """Raises :class:`VerifierError` unless exactly one of ``pattern`` and
        ``pattern-field`` is set, or when ``pattern`` does not compile."""
        if (spec.pattern is None) == (spec.pattern_field is None):
            raise VerifierError("a regex verifier needs exactly one of 'pattern' and 'pattern-field'")
        self.flags = re.IGNORECASE if spec.ignore_case else 0
        self.full_match: bool = spec.full_match
        self.pattern_field: str | None = spec.pattern_field
        self.pattern: re.Pattern[str] | None = None
        if spec.pattern is not None:
            try:
                self.pattern = re.compile(spec.pattern, self.flags)
            except (re.error, OverflowError, RecursionError) as e:
                raise VerifierError(f"invalid regular expression {spec.pattern!r}: {_reason(e)}") from e

    def _pattern_for(self, task: Task) -> re.Pattern[str]:
        if self.pattern is not None:
            return self.pattern
        assert self.pattern_field is not None
        source = task_value(task, self.pattern_field, self.kind)
        if not isinstance(source, str):
            raise VerifierError(
                f"task {task.id!r} field {self.pattern_field!r} must be a regular expression string, "
                f"got {type(source).__name__}"
            )
        try:
            return _compile(source, self.flags)
        except (re.error, OverflowError, RecursionError) as e:
            raise VerifierError(
                f"task {task.id!r} field {self.pattern_field!r} is not a valid regular expression: {_reason(e)}"
            ) from e

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None,
              context: ScoringContext | None = None) -> Score:
        """Raises :class:`MissingFieldError` or :class:`VerifierError` when a per-task
        pattern is missing or does not compile."""
        pattern = self._pattern_for(task)
        text = trajectory.completion
        match = pattern.fullmatch(text) if self.full_match else pattern.search(text)
        if match is None:
            return Score(0.0)
        return Score(1.0, info={"match": match.group(0)[:200]})
