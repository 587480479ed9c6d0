"""``python``: the reward comes from a function in the bundle's code.

The function is resolved when the verifier is built, so an untrusted bundle fails when it is
loaded, not in the middle of a run. It is called with the keyword arguments its signature
accepts among ``task``, ``completion``, ``trajectory``, ``messages``, ``state`` and ``params``
(the manifest's ``[config.params]``, a read-only mapping). A function that takes ``**kwargs``
gets the first five, and ``params`` only when it names it: ``**kwargs`` verifiers written
before ``params`` reached verifiers see what they always saw., and returns a bool, an int or a float in [0, 1], a
:class:`Score`, or a dict ``{"reward": ..., "breakdown": {...}, "info": {...}}``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from envhub.runtime._types import Score, Task, Trajectory, clamp_reward
from envhub.runtime.verifiers._base import ScoringContext, Verifier, VerifierContext, VerifierError

__all__ = ["ARGUMENTS", "PythonEntryPointVerifier"]

#: The keyword arguments a python verifier may ask for, in the order they are documented.
ARGUMENTS = ("task", "completion", "trajectory", "messages", "state", "params")


def _accepted_arguments(fn: Callable[..., Any], entry_point: str) -> tuple[str, ...]:
    """The names among :data:`ARGUMENTS` that ``fn`` accepts.

    Raises :class:`VerifierError` when ``fn`` requires a parameter envhub cannot supply.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise VerifierError(f"python verifier {entry_point!r}: cannot read its signature: {e}") from e
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        named = "params" in signature.parameters
        return ARGUMENTS if named else tuple(a for a in ARGUMENTS if a != "params")
    accepted = []
    for p in params:
        if p.name in ARGUMENTS and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            accepted.append(p.name)
        elif p.default is inspect.Parameter.empty and p.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            raise VerifierError(
                f"python verifier {entry_point!r} requires parameter {p.name!r}, "
                f"which envhub cannot supply; it may take: {', '.join(ARGUMENTS)}"
            )
    return tuple(accepted)


def _to_score(value: Any, entry_point: str, task: Task) -> Score:
    """The entry point's return value as a validated :class:`Score`.

    Raises :class:`VerifierError` for another type, or a reward (or breakdown value) that is
    NaN or outside [0, 1]: clamping would hide the verifier's bug.
    """
    where = f"python verifier {entry_point!r} on task {task.id!r}"
    try:
        if isinstance(value, Score):
            return Score(
                clamp_reward(value.reward, what="its reward"),
                {k: clamp_reward(v, what=f"breakdown[{k!r}]") for k, v in value.breakdown.items()},
                value.error,
                value.info,
            )
        if isinstance(value, Mapping):
            if "reward" not in value:
                raise TypeError(f"a dict result needs a 'reward' key, got keys {sorted(map(str, value))}")
            breakdown = value.get("breakdown") or {}
            info = value.get("info") or {}
            if not isinstance(breakdown, Mapping) or not isinstance(info, Mapping):
                raise TypeError("'breakdown' and 'info' must be dicts")
            return Score(
                clamp_reward(value["reward"], what="its reward"),
                {str(k): clamp_reward(v, what=f"breakdown[{k!r}]") for k, v in breakdown.items()},
                info=dict(info),
            )
        return Score(clamp_reward(value, what="its reward"))
    except (TypeError, ValueError) as e:
        raise VerifierError(f"{where} returned {_short(value)}: {e}") from e


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class PythonEntryPointVerifier(Verifier):
    """Calls a bundle function and validates what it returns.

    Raises at build time :class:`envhub.errors.TrustError` (from the loader) when the bundle
    is not trusted, and :class:`VerifierError` when the entry point is not callable or needs
    a parameter envhub cannot supply. Scoring raises :class:`VerifierError` for an invalid
    return value and lets any exception of the function itself propagate, unchanged.
    """

    kind = "python"

    def __init__(self, spec: Any, ctx: VerifierContext) -> None:
        self.entry_point: str = spec.entry_point
        fn = ctx.load_entry_point(spec.entry_point)
        if not callable(fn):
            raise VerifierError(f"python verifier {spec.entry_point!r} is a {type(fn).__name__}, not a function")
        self.fn: Callable[..., Any] = fn
        self.arguments = _accepted_arguments(fn, spec.entry_point)
        self.params = ctx.params
        call = fn.__call__ if not inspect.isroutine(fn) and not inspect.isclass(fn) else fn
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)

    def _kwargs(self, task: Task, trajectory: Trajectory, state: Any) -> dict[str, Any]:
        available = {
            "task": task,
            "completion": trajectory.completion,
            "trajectory": trajectory,
            "messages": trajectory.messages,
            "state": state,
            "params": self.params,
        }
        return {name: available[name] for name in self.arguments}

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None,
              context: ScoringContext | None = None) -> Score:
        """Calls the function; an ``async def`` one runs with :func:`asyncio.run`.

        Raises :class:`VerifierError` when an async function is scored with ``score`` from
        inside a running event loop (use :meth:`ascore` there).
        """
        if self.is_async:
            self._refuse_inside_loop()
        result = self.fn(**self._kwargs(task, trajectory, state))
        if inspect.isawaitable(result):
            # A sync function may still return an awaitable (functools.partial of a coroutine
            # function, a decorated one): run it the same way.
            self._refuse_inside_loop(result)
            result = asyncio.run(_await(result))
        return _to_score(result, self.entry_point, task)

    async def ascore(self, task: Task, trajectory: Trajectory, *, state: Any = None,
                     context: ScoringContext | None = None) -> Score:
        """Awaits an async function; runs a sync one in a worker thread, so a slow check does
        not hold up the other episodes on the loop (episode state is made for use from worker
        threads: tools run there too)."""
        if self.is_async:
            result = await self.fn(**self._kwargs(task, trajectory, state))
        else:
            result = await asyncio.to_thread(self.fn, **self._kwargs(task, trajectory, state))
            if inspect.isawaitable(result):
                result = await result
        return _to_score(result, self.entry_point, task)

    def _refuse_inside_loop(self, pending: Any = None) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        if inspect.iscoroutine(pending):
            pending.close()  # avoid "coroutine was never awaited"
        raise VerifierError(
            f"python verifier {self.entry_point!r} is async and score() was called inside a running event loop",
            hint="await verifier.ascore(...) instead",
        )


async def _await(awaitable: Any) -> Any:
    return await awaitable
