"""The ``reasoning-gym`` verifier kind: a dataset's own scorer is the verifier.

    [verifier]
    kind = "reasoning-gym"
    dataset = "basic_arithmetic"

The answer is the text of the completion's last ``<answer>...</answer>`` (reasoning-gym's
convention; the system prompt asks for it), scored by the dataset's ``score_answer``
against the task's question, answer and metadata, with the dataset configured at the
task's level. Imported only when a manifest uses the kind (it imports pydantic).
"""

from __future__ import annotations

from typing import Any

from envhub.plugin import OptionsModel, Score, Task, Trajectory, Verifier, VerifierError, task_value
from pydantic import Field

from envhub_reasoning_gym import _datasets

__all__ = ["Options", "ReasoningGymVerifier"]


class Options(OptionsModel):
    """``[verifier]`` keys of ``kind = "reasoning-gym"``."""

    dataset: str = Field(min_length=1, description="The reasoning-gym dataset whose scorer is used "
                                                   "(its name in reasoning_gym.factory.DATASETS).")


class ReasoningGymVerifier(Verifier):
    """Reward = ``dataset.score_answer(<answer> text, task)``, in [0, 1].

    A completion without ``<answer>`` tags is scored as no answer (None), which
    reasoning-gym's scorers give 0; a scorer that raises on the candidate's text gives 0
    with the error in ``info`` (see :func:`envhub_reasoning_gym._datasets.score`)."""

    kind = "reasoning-gym"

    def __init__(self, options: Options) -> None:
        """Raises :class:`VerifierError` when reasoning-gym has no such dataset."""
        self.dataset = options.dataset
        try:
            _datasets.level_count(self.dataset)  # an unknown dataset fails when loading, not per episode
        except _datasets.DatasetError as e:
            raise VerifierError(f"reasoning-gym verifier: {e}",
                                hint="name a dataset of reasoning_gym.factory.DATASETS") from e

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:
        """Raises :class:`MissingFieldError` for a task without ``answer``, and
        :class:`VerifierError` for a task of another dataset, a level the dataset does not
        have, or a scorer returning something other than a reward in [0, 1]."""
        task_value(task, "answer", self.kind)
        made_for = task.get("dataset", self.dataset)
        if made_for != self.dataset:
            raise VerifierError(f"task {task.id!r} is from reasoning-gym dataset {made_for!r}, "
                                f"but this verifier scores {self.dataset!r}")
        try:
            reward, info = _datasets.score(self.dataset, trajectory.completion, task)
        except _datasets.DatasetError as e:
            raise VerifierError(f"task {task.id!r}: {e}") from e
        return Score(reward, info=info)
