"""One episode: reset, then steps until done; the verifier scores the trajectory at the end.

The three harness protocols differ only in what happens after the model's turn:

- ``single-turn``: the episode ends and is scored.
- ``multi-turn``: the environment's responder answers (a new user message), or returns
  ``None`` to end the episode.
- ``tool-use``: the assistant's tool calls are run and their results become tool messages;
  a turn without tool calls ends the episode. Tool errors and malformed calls are answered
  as observations, never raised.

Every protocol ends when ``max-turns`` model turns have been taken. A verifier that raises
does not raise out of :meth:`Episode.step`: the score is 0 with the error recorded, so a
run of many episodes goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from envhub.errors import UsageError
from envhub.runtime._state import StateHandle
from envhub.runtime._tools import Tool, ToolCallResult, unknown_tool
from envhub.runtime._types import (
    Action,
    Message,
    Observation,
    Score,
    StepResult,
    Task,
    Trajectory,
    as_assistant_message,
)

if TYPE_CHECKING:
    from envhub.manifest import HarnessSection, StateSection

__all__ = ["Episode", "EpisodeHost"]

T = TypeVar("T")


class EpisodeHost(Protocol):
    """What an episode reads from the environment that runs it. The local
    :class:`~envhub.runtime.Environment` is the implementation; the underscored members
    are the harness's parts, which the environment holds today."""

    max_turns: int
    tools: list[Tool]
    tool_specs: list[dict[str, Any]]
    _harness: HarnessSection
    _protocol: Any
    _state_spec: StateSection
    _tool_error_rate: float
    _tools_by_name: dict[str, Tool]

    def score(self, task: Task, completion_or_trajectory: Any, *, state: Any = None) -> Score: ...

    async def ascore(self, task: Task, completion_or_trajectory: Any, *, state: Any = None) -> Score: ...

    def _acquire_state(self, task: Task) -> StateHandle: ...

    def _initial_messages(self, task: Task) -> list[Message]: ...

_NOISE_ERROR = "Error: the tool is temporarily unavailable; try again"


class Episode:
    """A single rollout of one task. Use :meth:`reset` first, then :meth:`step` until
    ``done``; or ``async with`` / :meth:`areset` / :meth:`astep` in an event loop.

    An episode owns its state: it is released when the episode ends (after scoring) or on
    :meth:`close`.
    """

    __slots__ = ("env", "task", "seed", "messages", "turns", "done", "score", "tool_errors",
                 "environment_faults", "_state", "_started", "_rng", "_prompt_len", "truncated")

    def __init__(self, env: EpisodeHost, task: Task, *, seed: int | None = None) -> None:
        self.env = env
        self.task = task
        self.seed = seed
        self.messages: list[Message] = []
        self.turns = 0
        self.done = False
        self.truncated = False
        self.score: Score | None = None
        self.tool_errors = 0
        self.environment_faults = 0
        self._state: StateHandle | None = None
        self._started = False
        self._rng: random.Random | None = None
        self._prompt_len = 0

    # -- the sync API -------------------------------------------------------------------

    def reset(self) -> Observation:
        """Start (or restart) the episode: fresh state, the system and task prompts."""
        self._release_state()
        self._state = self.env._acquire_state(self.task)
        return self._start()

    def _start(self) -> Observation:
        env = self.env
        self.messages = env._initial_messages(self.task)
        self._prompt_len = len(self.messages)
        self.turns = 0
        self.done = False
        self.truncated = False
        self.score = None
        self.tool_errors = 0
        self.environment_faults = 0
        self._started = True
        return self.observation()

    def step(self, action: Action) -> StepResult:
        """Take the model's turn. Raises :class:`UsageError` before :meth:`reset` or after
        the episode is done, and :class:`TypeError` for an action that is not a string or
        an assistant message."""
        calls = self._tool_calls(self._take_turn(action))
        loop = self._state.loop if self._state is not None else None
        if loop is not None:  # a state that lives on a loop of its own (a sandbox made by reset())
            results = [_on(loop, self._arun_tool(call)) for call in calls] if calls else None
        else:
            results = [self._run_tool(call) for call in calls] if calls else None
        going_on, info, ask = self._continue(results)
        if ask:
            going_on = self._replied(self._respond(loop), info)
        if going_on is not None:
            return going_on
        trajectory = Trajectory(self.messages)
        if loop is not None:
            score = _on(loop, self.env.ascore(self.task, trajectory, state=self.state))
        else:
            score = self.env.score(self.task, trajectory, state=self.state)
        return self._finish(score, info)

    # -- the async API ------------------------------------------------------------------

    async def areset(self) -> Observation:
        """:meth:`reset` for an event loop: state that lives on a loop (a sandbox workspace)
        starts on this one."""
        await self._arelease_state()
        acquire = getattr(self.env, "_aacquire_state", None)
        self._state = await acquire(self.task) if acquire is not None else self.env._acquire_state(self.task)
        return self._start()

    async def astep(self, action: Action) -> StepResult:
        """:meth:`step` for an event loop: tools that are not ``async def`` run in worker
        threads, and verifiers that do I/O (code tests, LLM judges) do not block the loop."""
        calls = self._tool_calls(self._take_turn(action))
        results = [await self._here(self._arun_tool(call)) for call in calls] if calls else None
        going_on, info, ask = self._continue(results)
        if ask:
            going_on = self._replied(await self._here(self._arespond()), info)
        if going_on is not None:
            return going_on
        score = await self._here(self.env.ascore(self.task, Trajectory(self.messages), state=self.state))
        result = self._finish(score, info, release=False)
        if self.env._state_spec.reset == "per-episode":
            await self._arelease_state()
        return result

    async def _here(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the loop the state lives on (this one, unless reset() made it)."""
        loop = self._state.loop if self._state is not None else None
        if loop is None or loop is asyncio.get_running_loop():
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    async def aclose(self) -> None:
        """:meth:`close` for an event loop: a sandbox workspace is closed by awaiting."""
        await self._arelease_state()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- shared -------------------------------------------------------------------------

    @property
    def state(self) -> Any:
        """The live state (a workspace path, a SQLite connection, ...) or None."""
        return self._state.value if self._state is not None else None

    @property
    def trajectory(self) -> Trajectory:
        return Trajectory(self.messages)

    @property
    def reward(self) -> float | None:
        return self.score.reward if self.score is not None else None

    def observation(self) -> Observation:
        """What the model sees now: all messages, or (``context = "recent-turns"``) the
        system and task prompts plus the last ``keep-turns`` turns."""
        harness = self.env._harness
        if harness.context == "recent-turns" and harness.keep_turns is not None:
            return Observation(_recent(self.messages, self._prompt_len, harness.keep_turns), self.env.tool_specs)
        return Observation(list(self.messages), self.env.tool_specs)

    def close(self) -> None:
        """Release the episode's state; safe to call more than once."""
        self._release_state()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take_turn(self, action: Action) -> Message:
        if not self._started:
            raise UsageError("call reset() before step()")
        if self.done:
            raise UsageError("the episode is done; reset() it or start a new one")
        message = as_assistant_message(action)
        self.messages.append(message)
        self.turns += 1
        return message

    def _tool_calls(self, message: Message) -> list[dict[str, Any]]:
        """The calls to run: only tool-use episodes run tools."""
        if not self.env._protocol.runs_tools:
            return []
        return list(message.get("tool_calls") or [])

    def _continue(self, results: list[ToolCallResult] | None) -> tuple[StepResult | None, dict[str, Any], bool]:
        """After the model's turn (and its tool results, if it called tools): the step that
        continues the episode, or None when the episode ends now; the step's info; and
        whether the responder is to answer (then :meth:`_replied` decides)."""
        info: dict[str, Any] = {}
        if results is not None:
            self._add_tool_results(results, info)
            if self.turns < self.env.max_turns:
                return StepResult(self.observation(), None, False, info), info, False
            self.truncated = True
        elif self.env._protocol.respond is not None:
            if self.turns >= self.env.max_turns:
                self.truncated = True
            else:
                return None, info, True
        return None, info, False

    def _replied(self, reply: str | None, info: dict[str, Any]) -> StepResult | None:
        """The step that continues the episode with the responder's ``reply``, or None (it ended it)."""
        if reply is None:
            return None
        self.messages.append({"role": "user", "content": reply})
        return StepResult(self.observation(), None, False, info)

    def _respond(self, loop: asyncio.AbstractEventLoop | None) -> str | None:
        """The responder's reply on the sync path: an ``async def`` responder is run to
        completion (on the state's loop when it has one)."""
        try:
            reply = self.env._protocol.respond(self.env, self.task, self.messages, self.state)
            if inspect.isawaitable(reply):
                reply = _on(loop, _awaited(reply)) if loop is not None else asyncio.run(_awaited(reply))
        except Exception as e:
            raise _from_responder(e, self.env) from None
        return _reply_text(reply, self.env)

    async def _arespond(self) -> str | None:
        """The responder's reply on the async path: a plain function runs in a worker thread
        (so a slow one does not hold up other episodes), an ``async def`` one is awaited."""
        try:
            reply = await asyncio.to_thread(self.env._protocol.respond, self.env, self.task, self.messages,
                                            self.state)
            if inspect.isawaitable(reply):
                reply = await reply
        except Exception as e:
            raise _from_responder(e, self.env) from None
        return _reply_text(reply, self.env)

    def _noise(self) -> bool:
        rate = self.env._tool_error_rate
        if not rate:
            return False
        if self._rng is None:
            self._rng = random.Random(f"{self.seed}:{self.task.split}:{self.task.id}")
        return self._rng.random() < rate

    def _tool_for(self, call: dict[str, Any]) -> Tool | ToolCallResult:
        """The tool a call names, or the answer when there is none (or noise strikes)."""
        tool = self.env._tools_by_name.get(str((call.get("function") or {}).get("name") or ""))
        if tool is None:
            return unknown_tool(call, self.env.tools)
        if self._noise():
            return ToolCallResult({"role": "tool", "tool_call_id": call.get("id", ""), "name": tool.name,
                                   "content": _NOISE_ERROR}, error=_NOISE_ERROR)
        return tool

    def _run_tool(self, call: dict[str, Any]) -> ToolCallResult:
        tool = self._tool_for(call)
        return tool if isinstance(tool, ToolCallResult) else tool.call(call, self.state)

    async def _arun_tool(self, call: dict[str, Any]) -> ToolCallResult:
        tool = self._tool_for(call)
        return tool if isinstance(tool, ToolCallResult) else await tool.acall(call, self.state)

    def _add_tool_results(self, results: list[ToolCallResult], info: dict[str, Any]) -> None:
        errors = [r.error for r in results if r.error is not None]
        self.tool_errors += len(errors)
        # Of those, the calls that failed because the environment's code raised (not the model's mistakes).
        self.environment_faults += sum(r.fault == "environment" for r in results)
        self.messages.extend(r.message for r in results)
        info["tool_results"] = [r.message["content"] for r in results]
        if errors:
            info["tool_errors"] = errors

    def _finish(self, score: Score, info: dict[str, Any], *, release: bool = True) -> StepResult:
        self.done = True
        self.score = score
        if release and self.env._state_spec.reset == "per-episode":
            self._release_state()
        info["breakdown"] = dict(score.breakdown)
        if score.error is not None:
            info["error"] = score.error
        if self.truncated:
            info["truncated"] = True
        return StepResult(self.observation(), score.reward, True, info)

    def _release_state(self) -> None:
        if self._state is not None and self.env._state_spec.reset == "per-episode":
            self._state.release()
        self._state = None

    async def _arelease_state(self) -> None:
        state, self._state = self._state, None
        if state is not None and self.env._state_spec.reset == "per-episode":
            await state.arelease()


#: The note an exception raised by the responder carries (``validate --check`` reads it).
RESPONDER_NOTE = "raised by the responder"


def _from_responder(e: Exception, env: EpisodeHost) -> Exception:
    """``e``, noted as the responder's (:data:`RESPONDER_NOTE`), unchanged otherwise, so an
    eval records it as it always has."""
    entry = getattr(env._harness, "responder", None)
    note = f"{RESPONDER_NOTE} {entry}" if entry else RESPONDER_NOTE
    if note not in getattr(e, "__notes__", ()):
        e.add_note(note)
    return e


def _reply_text(reply: Any, env: EpisodeHost) -> str | None:
    if reply is not None and not isinstance(reply, str):
        entry = getattr(env._harness, "responder", None) or "the responder"
        raise _from_responder(TypeError(f"responder {entry} returned {type(reply).__name__}, "
                                        "not a string or None"), env)
    return reply


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on ``loop`` (running in another thread) and wait for its result."""
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def _recent(messages: list[Message], prompt_len: int, keep_turns: int) -> list[Message]:
    """The prompt messages plus the last ``keep_turns`` turns (a turn starts at an
    assistant message; tool results stay with the call that asked for them)."""
    starts = [i for i in range(prompt_len, len(messages)) if messages[i].get("role") == "assistant"]
    if len(starts) <= keep_turns:
        return list(messages)
    cut = starts[-keep_turns]
    # The environment's reply to the turn before the cut is kept: it is what the kept turns answer.
    while cut > prompt_len and messages[cut - 1].get("role") == "user":
        cut -= 1
    return messages[:prompt_len] + messages[cut:]
