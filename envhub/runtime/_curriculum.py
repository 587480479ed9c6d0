"""Curricula: which task to draw next, from the difficulty of the tasks and how the policy
has been doing (``[config.curriculum]``, manifest spec 13.2).

A :class:`Curriculum` draws the tasks of one split, one :class:`Draw` at a time, and is told
each outcome with :meth:`Curriculum.update`:

- ``none``: the split's tasks in order (or shuffled by ``seed``), over and over;
- ``ordered``: easiest level first. A task file's tasks are drawn in difficulty order, each
  once per pass. A generator's levels are unbounded, so ``ordered`` needs the number of
  draws planned (``total``) and spends an equal share of them on each level in turn;
- ``success-window``: start at the easiest level; when the success rate over the last
  ``window`` outcomes at the current level reaches ``promote-at``, move one level up; when it
  falls to ``demote-at`` (if set), one level down. The window starts empty at each move, and
  outcomes of tasks drawn at another level than the current one are not counted.

It is plain, synchronous bookkeeping, so a training loop can drive it directly::

    curriculum = Curriculum(env, "train", seed=0)
    for step in range(1000):
        draw = curriculum.next()
        reward = my_trainer.rollout(env, draw.task)
        curriculum.update(draw, reward)

``envhub eval --curriculum`` drives one with the rollout executor, a batch of
``--concurrency`` draws at a time (see :class:`envhub.runtime.CurriculumRun`).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envhub.errors import UsageError
from envhub.manifest import Curriculum as CurriculumSpec
from envhub.runtime._tasks import group_by_level
from envhub.runtime._types import Task

if TYPE_CHECKING:
    from envhub.runtime._protocols import EnvironmentProtocol

__all__ = ["Curriculum", "Draw", "LevelChange"]


@dataclass(frozen=True, slots=True)
class Draw:
    """One drawn task, and where the curriculum stood when it was drawn."""

    task: Task
    #: The number of this draw, from 0.
    step: int
    #: The difficulty level the task was drawn at, and its index among the levels.
    level: Any
    level_index: int

    def as_record(self, curriculum: Curriculum) -> dict[str, Any]:
        """What a rollout record says about this draw (its ``curriculum`` field)."""
        return {"strategy": curriculum.strategy, "step": self.step, "level": self.level,
                "level_index": self.level_index, "levels": len(curriculum.levels)}


@dataclass(frozen=True, slots=True)
class LevelChange:
    """A promotion or demotion: after outcome number ``after`` (counting from 1), the success
    rate over the window was ``rate``, and the level moved from ``old`` to ``new``."""

    after: int
    old: Any
    new: Any
    old_index: int
    new_index: int
    rate: float

    @property
    def kind(self) -> str:
        return "promote" if self.new_index > self.old_index else "demote"


@dataclass
class _Cursor:
    """Where the next draw of one level comes from: a position in the level's task order."""

    tasks: Sequence[Task]
    offset: int
    position: int = 0

    def next(self) -> Task:
        task = self.tasks[(self.offset + self.position) % len(self.tasks)]
        self.position += 1
        return task


@dataclass
class Curriculum:
    """Draws the tasks of ``split`` of ``env`` by the curriculum ``spec`` (default: the
    manifest's ``[config.curriculum]``).

    ``seed`` shuffles the order within each level (a task file's level is permuted; a
    generator's starts at a seeded offset); ``total`` is the number of draws planned (needed
    by ``ordered`` over a generator); a rollout succeeds when its reward is at least
    ``success_threshold``.

    Raises :class:`envhub.errors.UsageError` when the split's tasks have no difficulty, or
    the strategy cannot be run on this split.
    """

    env: EnvironmentProtocol
    split: str
    spec: CurriculumSpec | None = None
    seed: int | None = None
    total: int | None = None
    success_threshold: float = 1.0
    #: Every promotion and demotion so far, in order.
    changes: list[LevelChange] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.spec is None:
            manifest = getattr(self.env, "manifest", None)
            self.spec = (manifest.config.curriculum if manifest is not None else None) or CurriculumSpec()
        self.strategy: str = self.spec.strategy
        rng = random.Random(self.seed)
        if self.strategy == "none":
            tasks = self.env.tasks(self.split, seed=self.seed)
            if not len(tasks):
                raise UsageError(f"{self.env.name}: split {self.split!r} has no tasks")
            self._plain = _Cursor(tasks, 0)
            self.levels: list[Any] = []
            self._cursors: list[_Cursor] = []
        else:
            by_level = (self.env.tasks_by_level(self.split) if hasattr(self.env, "tasks_by_level")
                        else group_by_level(self.env.tasks(self.split), f"{self.env.name}: split {self.split!r}"))
            if not by_level:
                raise UsageError(f"{self.env.name}: split {self.split!r} has no tasks")
            self.levels = list(by_level)
            self._cursors = [_cursor(tasks, rng if self.seed is not None else None) for tasks in by_level.values()]
        self._generated = self.env.splits[self.split].generated
        if self.strategy == "ordered" and self._generated and self.total is None:
            raise UsageError(f"{self.env.name}: an ordered curriculum over generated tasks needs the number of draws",
                             hint="pass -n N (envhub eval --curriculum) or total=N: each level gets N / levels draws")
        self.level_index = 0
        self._window: deque[bool] = deque(maxlen=self.spec.window)
        self._steps = 0
        self._outcomes = 0

    @property
    def level(self) -> Any:
        """The current difficulty level (None for ``strategy = "none"``)."""
        return self.levels[self.level_index] if self.levels else None

    @property
    def window_rate(self) -> float | None:
        """The success rate over the current window, or None while it is empty."""
        return sum(self._window) / len(self._window) if self._window else None

    def next(self) -> Draw:
        """The next task to roll out."""
        step = self._steps
        self._steps += 1
        if self.strategy == "none":
            task = self._plain.next()
            return Draw(task, step, task.difficulty, -1)
        if self.strategy == "ordered":
            if self._generated:
                assert self.total is not None
                self.level_index = min(len(self.levels) - 1, step * len(self.levels) // max(self.total, 1))
            else:  # every task once per pass, easiest level first
                size = sum(len(c.tasks) for c in self._cursors)
                at = step % size
                for index, cursor in enumerate(self._cursors):
                    if at < len(cursor.tasks):
                        self.level_index = index
                        task = cursor.tasks[(cursor.offset + at) % len(cursor.tasks)]
                        return Draw(task, step, self.levels[index], index)
                    at -= len(cursor.tasks)
        task = self._cursors[self.level_index].next()
        return Draw(task, step, self.level, self.level_index)

    def update(self, draw: Draw, reward: float) -> LevelChange | None:
        """Count the outcome of ``draw``; returns the level change it caused, if any."""
        self._outcomes += 1
        if self.strategy != "success-window" or draw.level_index != self.level_index:
            return None
        assert self.spec is not None
        self._window.append(reward >= self.success_threshold)
        if len(self._window) < self.spec.window:
            return None
        rate = sum(self._window) / len(self._window)
        new = self.level_index
        if rate >= self.spec.promote_at and self.level_index < len(self.levels) - 1:
            new += 1
        elif self.spec.demote_at is not None and rate <= self.spec.demote_at and self.level_index > 0:
            new -= 1
        if new == self.level_index:
            return None
        change = LevelChange(self._outcomes, self.levels[self.level_index], self.levels[new],
                             self.level_index, new, rate)
        self.changes.append(change)
        self.level_index = new
        self._window.clear()
        return change


def _cursor(tasks: Sequence[Task], rng: random.Random | None) -> _Cursor:
    if rng is None:
        return _Cursor(tasks, 0)
    if isinstance(tasks, list):  # a task file's level: a seeded permutation of it
        shuffled = list(tasks)
        rng.shuffle(shuffled)
        return _Cursor(shuffled, 0)
    return _Cursor(tasks, rng.randrange(len(tasks)))  # a generator's: a seeded start

