"""``rubric``: a weighted mean of criteria, each itself a verifier, with required gates."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from envhub.errors import UsageError
from envhub.runtime._types import Score, Task, Trajectory
from envhub.runtime.verifiers._base import ScoringContext, Verifier, VerifierError, ascore_with, score_with
from envhub.runtime.verifiers._reference import Reference

__all__ = ["Criterion", "RubricVerifier"]


@dataclass(frozen=True)
class Criterion:
    """One criterion of a rubric: its verifier, weight and whether it gates the reward."""

    name: str
    verifier: Verifier
    weight: float = 1.0
    required: bool = False


class RubricVerifier(Verifier):
    """Reward = sum(weight_i * reward_i) / sum(weight_i), or 0 when a ``required`` criterion
    scores below 1 (it did not fully pass). ``breakdown`` maps each criterion's name to its
    reward; ``info`` holds each criterion's own info (and breakdown, if it has one).

    A criterion that raises makes the rubric raise :class:`VerifierError` naming it: one
    broken criterion means the rubric's reward cannot be trusted.
    """

    kind = "rubric"

    def __init__(self, spec: Any, build: Callable[[Any], Verifier]) -> None:
        """``build`` makes the verifier of one criterion spec (``build_verifier`` bound to the
        same context and kinds). Raises whatever it raises (e.g. a TrustError)."""
        criteria = [Criterion(c.name, build(c), c.weight, c.required) for c in spec.criteria]
        self.criteria: tuple[Criterion, ...] = self._check(criteria)

    @staticmethod
    def _check(criteria: Sequence[Criterion]) -> tuple[Criterion, ...]:
        if not criteria:
            raise VerifierError("a rubric needs at least one criterion")
        names = [c.name for c in criteria]
        for name in names:
            if names.count(name) > 1:
                raise VerifierError(f"criterion name {name!r} is used twice")
        return tuple(criteria)

    @classmethod
    def of(cls, criteria: Sequence[Criterion]) -> RubricVerifier:
        """A rubric of already-built criteria (for code that builds verifiers itself)."""
        rubric = cls.__new__(cls)
        rubric.criteria = cls._check(criteria)
        return rubric

    def reference(self, task: Task) -> Reference | None:
        """The reference of the first criterion that has one (it need not satisfy the others)."""
        for criterion in self.criteria:
            found = criterion.verifier.reference(task)
            if found is not None:
                return found
        return None

    def check_context(self, context: ScoringContext) -> None:
        """Each criterion's check: a rubric with a self-judging llm-judge refuses too."""
        for criterion in self.criteria:
            criterion.verifier.check_context(context)

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None,
              context: ScoringContext | None = None) -> Score:
        """Scores the criteria in order, each with this call's ``context``."""
        scores = []
        for criterion in self.criteria:
            try:
                scores.append(score_with(criterion.verifier, task, trajectory, state=state, context=context))
            except UsageError:
                raise  # a refusal for this call (a self-judging llm-judge), not a broken criterion
            except Exception as e:
                raise _criterion_error(criterion, task, e) from e
        return self._combine(scores)

    async def ascore(self, task: Task, trajectory: Trajectory, *, state: Any = None,
                     context: ScoringContext | None = None) -> Score:
        """Scores the criteria concurrently; the first one to raise cancels the others."""

        async def one(criterion: Criterion) -> Score:
            try:
                return await ascore_with(criterion.verifier, task, trajectory, state=state, context=context)
            except UsageError:
                raise
            except Exception as e:
                raise _criterion_error(criterion, task, e) from e

        tasks = [asyncio.ensure_future(one(c)) for c in self.criteria]
        try:
            scores = await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            # Let cancelled criteria (a sandbox being killed) clean up before raising.
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return self._combine(list(scores))

    def _combine(self, scores: Sequence[Score]) -> Score:
        total_weight = sum(c.weight for c in self.criteria)
        reward = sum(c.weight * s.reward for c, s in zip(self.criteria, scores, strict=True)) / total_weight
        breakdown = {c.name: s.reward for c, s in zip(self.criteria, scores, strict=True)}
        info: dict[str, Any] = {}
        for c, s in zip(self.criteria, scores, strict=True):
            if s.info or s.breakdown:
                info[c.name] = {**dict(s.info), **({"breakdown": dict(s.breakdown)} if s.breakdown else {})}
        failed_gates = [c.name for c, s in zip(self.criteria, scores, strict=True) if c.required and s.reward < 1.0]
        if failed_gates:
            info["failed_required"] = failed_gates
            reward = 0.0
        # A criterion that could not score (a judge whose reply has no verdict) leaves the
        # rubric unscored too: reward 0 with the criteria's errors, as any failed verifier.
        errors = [f"rubric criterion {c.name!r}: {s.error}" for c, s in zip(self.criteria, scores, strict=True)
                  if s.error]
        if errors:
            return Score(0.0, breakdown, "; ".join(errors), info)
        # Rounding of the weighted sum can leave 1.0000000000000002.
        return Score(min(1.0, max(0.0, reward)), breakdown, info=info)


def _criterion_error(criterion: Criterion, task: Task, error: Exception) -> VerifierError:
    return VerifierError(f"rubric criterion {criterion.name!r} failed on task {task.id!r}: {error}")
