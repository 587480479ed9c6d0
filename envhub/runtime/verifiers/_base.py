"""What every verifier shares: the base class, the context it is built with, its errors.

A verifier maps a task and a trajectory to a :class:`~envhub.runtime._types.Score`. It may
raise when the verifier itself is broken (a missing task field, a python entry point that
raises, tests that do not compile); the episode layer turns that into an error record with
reward 0. A candidate that fails (a wrong answer, code that times out) is a score, never an
exception.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, cast

from envhub.errors import EnvhubError
from envhub.runtime._types import Score, Task, Trajectory
from envhub.runtime.verifiers._reference import Reference

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup
    from envhub.settings import Settings

__all__ = ["MissingFieldError", "ScoringContext", "Verifier", "VerifierContext", "VerifierError", "ascore_with",
           "score_with", "task_value"]


class VerifierError(EnvhubError):
    """A verifier cannot score: its configuration, the task's data or its own code is broken.

    This is a bug of the environment, not of the candidate being scored.
    """


class MissingFieldError(VerifierError, KeyError):
    """A task lacks a field a verifier reads (``except KeyError`` catches it too)."""


@dataclass(frozen=True)
class VerifierContext:
    """What building a verifier may need from the environment that owns it."""

    #: The bundle root; relative paths in the verifier's spec (a judge's rubric) resolve here.
    root: Path
    #: Resolves a bundle ``module:attr`` string to the object. Provided by the loader; raises
    #: :class:`envhub.errors.TrustError` when the bundle's code is not trusted.
    load_entry_point: Callable[[str], Any]
    #: The settings of the run (an llm-judge's endpoint and key come from them).
    settings: Settings
    #: For verifiers built outside an environment: the policy's model, so an llm-judge
    #: refuses at build time to judge its own outputs. An environment never sets it: the
    #: policy's model reaches the verifier per call, in a :class:`ScoringContext`.
    policy_model: str | None = None
    #: With ``policy_model``: build an llm-judge despite ``allow-self-judge = false``.
    force_self_judge: bool = False
    #: The manifest's ``[state]`` table (a workspace-tests verifier starts its sandbox with its
    #: limits and base); None when the verifier is built without an environment.
    state: Any = None
    #: The plugins of the environment (a workspace-tests verifier runs its tests on the
    #: workspace backend of the state's base); None: envhub's own sandbox only.
    plugins: PluginLookup | None = None
    #: The manifest's ``[config.params]`` (read-only): a python verifier (or rubric criterion)
    #: whose function takes ``params`` receives them.
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class ScoringContext:
    """What one scoring call knows about the run it scores for, passed per call (never
    kept on the environment): the policy's model, so an llm-judge can refuse to grade its
    own model's work, unless ``force_self_judge``."""

    policy_model: str | None = None
    force_self_judge: bool = False


class Verifier:
    """Base class of verifiers. Subclasses set ``kind`` and implement :meth:`score`.

    Verifiers are built once per environment and then shared by every episode, so
    ``score`` must not keep per-call state on ``self``.
    """

    kind: ClassVar[str] = ""

    # ``score`` and ``ascore`` are declared without ``context``, so a kind written before
    # ScoringContext still type-checks as an override; a kind that wants the context adds
    # ``context: ScoringContext | None = None`` (a compatible override), and envhub passes it
    # to every method that takes it (score_with, ascore_with).

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:
        """Score ``trajectory`` on ``task``; ``state`` is the episode's state object, if any.
        A kind that declares ``context: ScoringContext | None = None`` also gets what this
        call knows about the run (the policy's model).

        Raises :class:`VerifierError` (or a subclass) when the verifier cannot score, and
        :class:`envhub.errors.UsageError` when it refuses to score for the context (an
        llm-judge asked to grade its own model's work).
        """
        raise NotImplementedError

    async def ascore(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:
        """The same as :meth:`score`, for an event loop. Verifiers that wait on I/O (a
        subprocess, an HTTP endpoint) override this so they never block the loop."""
        return self.score(task, trajectory, state=state)

    def check_context(self, context: ScoringContext) -> None:
        """Raise :class:`envhub.errors.UsageError` when every call scored for ``context``
        would be refused (an llm-judge of the policy's own model), so a run can stop before
        it starts. The default: accept every context."""

    def reference(self, task: Task) -> Reference | None:
        """What solves ``task`` for this verifier: a completion, or assistant turns (tool calls
        included; see :func:`~envhub.runtime.verifiers.reference_messages`), or None when it
        cannot say. The ``reference`` policy plays it and ``envhub validate --check`` checks
        that it scores 1; a task's own ``reference`` field comes first. The default: None."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} kind={self.kind!r}>"


def _takes_context(cls: type, method: str) -> bool:
    """Whether ``cls.<method>`` accepts ``context=`` (a plugin kind written before
    :class:`ScoringContext` does not). Read once per class and method."""
    key = (cls, method)
    found = _TAKES_CONTEXT.get(key)
    if found is None:
        try:
            parameters = inspect.signature(getattr(cls, method)).parameters.values()
        except (TypeError, ValueError):
            parameters = ()  # type: ignore[assignment]
        found = _TAKES_CONTEXT[key] = any(
            p.kind is p.VAR_KEYWORD or (p.name == "context" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
            for p in parameters)
    return found


#: (verifier class, method) -> whether it takes ``context``; classes live as long as their module.
_TAKES_CONTEXT: dict[tuple[type, str], bool] = {}


def score_with(verifier: Verifier, task: Task, trajectory: Trajectory, *, state: Any = None,
               context: ScoringContext | None = None) -> Score:
    """``verifier.score(...)`` with ``context`` when its class takes it; a verifier kind
    written before :class:`ScoringContext` (no ``context`` keyword) is called without it."""
    if context is not None and _takes_context(type(verifier), "score"):
        return cast(Any, verifier).score(task, trajectory, state=state, context=context)  # type: ignore[no-any-return]
    return verifier.score(task, trajectory, state=state)


async def ascore_with(verifier: Verifier, task: Task, trajectory: Trajectory, *, state: Any = None,
                      context: ScoringContext | None = None) -> Score:
    """:func:`score_with` for ``verifier.ascore``."""
    if context is not None:
        if type(verifier).ascore is Verifier.ascore:  # the default: score, with the context if it takes it
            return score_with(verifier, task, trajectory, state=state, context=context)
        if _takes_context(type(verifier), "ascore"):
            return await cast(Any, verifier).ascore(  # type: ignore[no-any-return]
                task, trajectory, state=state, context=context)
    return await verifier.ascore(task, trajectory, state=state)


_MISSING = object()


def task_value(task: Task, field: str, kind: str, *, allow_null: bool = False) -> Any:
    """``task[field]``, for a verifier of ``kind``.

    Raises :class:`MissingFieldError` naming the task and the field when it is absent, and
    :class:`VerifierError` when it is null (unless ``allow_null``): an expected answer of
    null is a data bug that would otherwise score silently.
    """
    value = task.get(field, _MISSING)
    if value is _MISSING:
        fields = ", ".join(repr(name) for name in sorted(task)) or "none"
        raise MissingFieldError(
            f"task {task.id!r} has no field {field!r}, which the {kind} verifier reads",
            hint=f"the task's fields are {fields}; set the verifier's field or fix the task file",
        )
    if value is None and not allow_null:
        raise VerifierError(f"task {task.id!r} field {field!r} is null; the {kind} verifier needs a value")
    return value
