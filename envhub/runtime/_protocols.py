"""What every loaded environment offers, whatever runs it: :class:`EnvironmentProtocol` and
the episodes it hands out, :class:`EpisodeProtocol`.

:func:`envhub.load` returns an :class:`EnvironmentProtocol`: a local
:class:`~envhub.runtime.Environment`, a :class:`~envhub.runtime.CompositeEnvironment` that
routes each task to the environment it comes from, or a
:class:`~envhub.runtime.RemoteEnvironment` whose episodes run on an ``envhub serve``
server. The three satisfy it structurally (a type checker verifies it,
``tests/test_environment_protocol.py``); code written against it (``envhub eval``, the
rollout runner, ``validate --check``, a trainer) runs on any of them.

This module imports no implementation, so that each implementation, and each caller, can
import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Self

if TYPE_CHECKING:
    from pathlib import Path

    from envhub.manifest import Manifest
    from envhub.runtime._episode import EndedBy
    from envhub.runtime._types import Action, Message, Observation, Score, StepResult, Task, Trajectory
    from envhub.runtime.verifiers import ScoringContext

__all__ = ["EnvironmentProtocol", "EpisodeProtocol", "SplitInfo"]


@dataclass(frozen=True, slots=True)
class SplitInfo:
    """One split of an environment, as :attr:`EnvironmentProtocol.splits` lists it."""

    name: str
    held_out: bool
    #: False for a held-out split whose tasks this copy of the bundle does not have.
    available: bool
    rows: int | None
    generated: bool


class EpisodeProtocol(Protocol):
    """One rollout of one task: :meth:`reset` (or :meth:`areset`), then :meth:`step`
    (:meth:`astep`) until ``done``; then ``score`` holds the verifier's score. Use it as a
    context manager (``with`` / ``async with``) or :meth:`close` it, to free its state.

    :class:`~envhub.runtime.Episode` (local) and :class:`~envhub.runtime.RemoteEpisode`
    (served) satisfy it."""

    @property
    def task(self) -> Task: ...

    @property
    def messages(self) -> list[Message]:
        """The conversation so far: prompts, the model's turns, tool results, replies."""
        ...

    @property
    def turns(self) -> int:
        """Model turns taken."""
        ...

    @property
    def done(self) -> bool: ...

    @property
    def truncated(self) -> bool:
        """Whether the episode ended at the turn limit rather than by itself."""
        ...

    @property
    def tool_errors(self) -> int:
        """Tool calls answered with an error (the model's mistakes and the environment's faults)."""
        ...

    @property
    def score(self) -> Score | None:
        """The verifier's score once the episode is done; None before."""
        ...

    @property
    def max_turns(self) -> int:
        """This episode's turn limit (its task's own, when the task sets one)."""
        ...

    @property
    def turn_rewards(self) -> list[float | None]:
        """The environment's reward for each model turn (None where it gave none)."""
        ...

    @property
    def ended_by(self) -> EndedBy | None:
        """Who ended the episode (``"policy"``, ``"environment"``, ``"turn-limit"``); None
        while it runs."""
        ...

    @property
    def outcome(self) -> str | None:
        """Why the environment ended the episode, when it did and said."""
        ...

    @property
    def state(self) -> Any:
        """The live state (a workspace path, a SQLite connection, ...); None when there is
        none here (a served episode's state stays on the server)."""
        ...

    def observation(self) -> Observation:
        """What the model sees now."""
        ...

    def reset(self) -> Observation: ...

    def step(self, action: Action) -> StepResult: ...

    async def areset(self) -> Observation: ...

    async def astep(self, action: Action) -> StepResult: ...

    def close(self) -> None: ...

    async def aclose(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...


class EnvironmentProtocol(Protocol):
    """A loaded environment, local, composite or served: what :func:`envhub.load` returns.

    It names itself (``name``, ``version``, ``score_version``, ``digest``, ``manifest``,
    :meth:`provenance`), hands out tasks (``splits``, :meth:`tasks`, :meth:`task`), runs
    episodes (:meth:`episode`) and scores answers (:meth:`score`, :meth:`ascore`). Close it
    (or use ``with``) when done.

    Not ``runtime_checkable``: ``isinstance`` against a protocol reads every member, and
    ``digest`` of a bundle directory is computed by building it. Test for an implementation
    (``isinstance(env, RemoteEnvironment)``) instead.
    """

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def score_version(self) -> int: ...

    @property
    def manifest(self) -> Manifest:
        """The manifest (a served environment's: the public one the server sends)."""
        ...

    @property
    def root(self) -> Path | None:
        """The bundle directory this copy was loaded from; None when the bundle's files are
        not here (a served environment)."""
        ...

    @property
    def digest(self) -> str:
        """The digest of the public archive (what ``envhub push`` publishes)."""
        ...

    @property
    def splits(self) -> Mapping[str, SplitInfo]: ...

    @property
    def max_turns(self) -> int:
        """The harness's turn limit (a task may set its own)."""
        ...

    @property
    def tool_specs(self) -> list[dict[str, Any]]:
        """The tools the harness offers, as OpenAI ``tools`` entries (a task may narrow them)."""
        ...

    def tasks(self, split: str, *, seed: int | None = None, limit: int | None = None) -> Sequence[Task]:
        """The tasks of ``split``, in order or shuffled by ``seed``, at most ``limit``.
        Raises :class:`envhub.errors.EnvNotFoundError` for an unknown split."""
        ...

    def task(self, split: str, task_id: str) -> Task:
        """One task by id; :class:`envhub.errors.EnvNotFoundError` if there is none."""
        ...

    def episode(self, task: Task, *, seed: int | None = None, scoring: ScoringContext | None = None
                ) -> EpisodeProtocol:
        """A new episode of ``task``; ``reset()`` starts it. Its score is computed with
        ``scoring`` (the policy's model, so an llm-judge can refuse to grade its own model)."""
        ...

    def score(self, task: Task, completion_or_trajectory: str | Sequence[Message] | Trajectory, *,
              state: Any = None, context: ScoringContext | None = None) -> Score:
        """Score a completion or a trajectory for ``context`` (what this call knows about the
        run; never kept on the environment). A verifier that raises, or refuses ``context``,
        gives reward 0 with :attr:`Score.error` set."""
        ...

    async def ascore(self, task: Task, completion_or_trajectory: str | Sequence[Message] | Trajectory, *,
                     state: Any = None, context: ScoringContext | None = None) -> Score: ...

    def check_scoring(self, context: ScoringContext) -> None:
        """Raise :class:`envhub.errors.UsageError` when every score for ``context`` would be
        refused (an llm-judge of the policy's own model), so a run stops before it starts.
        A served environment checks on the server, per request, instead."""
        ...

    def reference_actions(self, task: Task) -> list[Message]:
        """The assistant turns that solve ``task`` (the ``reference`` policy plays them);
        empty when it has no reference."""
        ...

    def provenance(self) -> dict[str, Any]:
        """What every rollout record carries about where the environment came from."""
        ...

    def task_provenance(self, task: Task) -> dict[str, Any] | None:
        """Where ``task`` comes from when that is another environment (a composite's
        child); None when it is this one."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...
