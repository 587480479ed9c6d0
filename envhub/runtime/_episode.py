"""One episode: reset, then steps until done; the verifier scores the trajectory at the end.

The episode asks its environment's :class:`~envhub.runtime.Harness` what the task starts
with and what answers each turn. After the model's turn:

- tool calls (when the protocol runs tools) are run and their results become tool
  messages; errors and malformed calls are answered as observations, never raised;
- a turn without tool calls goes to the harness's responder when it has one (``multi-turn``,
  and ``tool-use`` with a simulated user), whose reply is the next user message;
- otherwise the episode ends (the model answered).

A tool or the responder may return a :class:`~envhub.runtime.Reply` with a per-turn
``reward`` (recorded on the step, :attr:`Episode.turn_rewards`) and ``done`` (the
environment ends the episode: a win, a loss, the user hangs up). Every episode also ends
after its task's last allowed turn (truncated). A verifier that raises does not raise out of
:meth:`Episode.step`: the score is 0 with the error recorded, so a run of many episodes goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, TypeVar

from envhub.errors import UsageError
from envhub.runtime._harness import Harness, TaskHarness, as_reply
from envhub.runtime._mcp import McpSession, McpTool, McpToolset
from envhub.runtime._state import StateHandle
from envhub.runtime._tools import ToolCallResult, ToolLike, unknown_tool
from envhub.runtime._types import (
    Action,
    Message,
    Observation,
    Reply,
    Score,
    StepResult,
    Task,
    Trajectory,
    as_assistant_message,
)

if TYPE_CHECKING:
    from envhub.manifest import StateSection
    from envhub.runtime.verifiers import ScoringContext

__all__ = ["EndedBy", "Episode", "EpisodeHost"]

T = TypeVar("T")

#: Who ended an episode: the policy (a final answer), the environment (a tool's or the
#: responder's ``done``, or a responder that returned None), or the turn limit.
EndedBy = Literal["policy", "environment", "turn-limit"]


class EpisodeHost(Protocol):
    """What an episode reads from the environment that runs it. The local
    :class:`~envhub.runtime.Environment` is the implementation."""

    harness: Harness
    #: The MCP servers of the harness, or None (spec 10.2).
    mcp: McpToolset | None
    _state_spec: StateSection
    _tool_error_rate: float

    def score(self, task: Task, completion_or_trajectory: Any, *, state: Any = None,
              context: ScoringContext | None = None) -> Score: ...

    async def ascore(self, task: Task, completion_or_trajectory: Any, *, state: Any = None,
                     context: ScoringContext | None = None) -> Score: ...

    def _acquire_state(self, task: Task) -> StateHandle: ...

    async def _aacquire_state(self, task: Task) -> StateHandle: ...


_NOISE_ERROR = "Error: the tool is temporarily unavailable; try again"
#: The answer to a tool call made in the same turn after another call ended the episode.
_NOT_RUN = "Not run: the episode ended."


class Episode:
    """A single rollout of one task. Use :meth:`reset` first, then :meth:`step` until
    ``done``; or ``async with`` / :meth:`areset` / :meth:`astep` in an event loop.

    An episode owns its state: it is released when the episode ends (after scoring) or on
    :meth:`close`. ``scoring`` is what the verifier is told about the run (the policy's
    model), passed to every scoring call of this episode.
    """

    __slots__ = ("env", "task", "seed", "scoring", "messages", "turns", "done", "score", "tool_errors",
                 "environment_faults", "turn_rewards", "outcome", "ended_by", "_state", "_started", "_rng",
                 "_prompt_len", "truncated", "_task_harness", "_mcp")

    def __init__(self, env: EpisodeHost, task: Task, *, seed: int | None = None,
                 scoring: ScoringContext | None = None) -> None:
        self.env = env
        self.task = task
        self.seed = seed
        self.scoring = scoring
        self.messages: list[Message] = []
        self.turns = 0
        self.done = False
        self.truncated = False
        self.score: Score | None = None
        self.tool_errors = 0
        self.environment_faults = 0
        #: The environment's reward for each model turn (None where it gave none).
        self.turn_rewards: list[float | None] = []
        #: Why the environment ended the episode (a Reply's ``outcome``), when it did and said.
        self.outcome: str | None = None
        self.ended_by: EndedBy | None = None
        self._state: StateHandle | None = None
        self._started = False
        self._rng: random.Random | None = None
        self._prompt_len = 0
        self._task_harness: TaskHarness | None = None
        #: The episode's MCP servers (spec 10.2), open from reset to the episode's end.
        self._mcp: McpSession | None = None

    # -- the sync API -------------------------------------------------------------------

    def reset(self) -> Observation:
        """Start (or restart) the episode: fresh state, the system and task prompts."""
        self._release_state()
        self._state = self.env._acquire_state(self.task)
        if self.env.mcp is not None:
            self._mcp = self.env.mcp.open()
        return self._start()

    def _start(self) -> Observation:
        self._task_harness = self.env.harness.start(self.task)
        self.messages = self._task_harness.messages  # made for this episode by start()
        self._prompt_len = len(self.messages)
        self.turns = 0
        self.done = False
        self.truncated = False
        self.score = None
        self.tool_errors = 0
        self.environment_faults = 0
        self.turn_rewards = []
        self.outcome = None
        self.ended_by = None
        self._started = True
        return self.observation()

    def step(self, action: Action) -> StepResult:
        """Take the model's turn. Raises :class:`UsageError` before :meth:`reset` or after
        the episode is done, and :class:`TypeError` for an action that is not a string or
        an assistant message."""
        calls = self._tool_calls(self._take_turn(action))
        loop = self._state.loop if self._state is not None else None
        info: dict[str, Any] = {}
        if calls:
            results: list[ToolCallResult] = []
            for call in calls:
                if self._ended_in_turn(results):
                    results.append(_not_run(call))
                elif loop is not None:  # a state that lives on a loop of its own (a sandbox made by reset())
                    results.append(_on(loop, self._arun_tool(call)))
                else:
                    results.append(self._run_tool(call))
            going_on = self._after_tools(results, info)
        elif self.env.harness.responds:
            going_on = self._after_reply(self._respond(loop), info) if self.turns < self.max_turns \
                else self._ends("turn-limit", info)
        else:  # the model answered
            self.ended_by = "policy"
            going_on = None
        if going_on is not None:
            return going_on
        trajectory = Trajectory(self.messages)
        if loop is not None:
            score = _on(loop, self.env.ascore(self.task, trajectory, state=self.state, context=self.scoring))
        else:
            score = self.env.score(self.task, trajectory, state=self.state, context=self.scoring)
        return self._finish(score, info)

    # -- the async API ------------------------------------------------------------------

    async def areset(self) -> Observation:
        """:meth:`reset` for an event loop: state that lives on a loop (a sandbox workspace)
        starts on this one."""
        await self._arelease_state()
        self._state = await self.env._aacquire_state(self.task)
        if self.env.mcp is not None:
            self._mcp = await self.env.mcp.aopen()
        return self._start()

    async def astep(self, action: Action) -> StepResult:
        """:meth:`step` for an event loop: tools that are not ``async def`` run in worker
        threads, and verifiers that do I/O (code tests, LLM judges) do not block the loop."""
        calls = self._tool_calls(self._take_turn(action))
        info: dict[str, Any] = {}
        if calls:
            results: list[ToolCallResult] = []
            for call in calls:
                results.append(_not_run(call) if self._ended_in_turn(results)
                               else await self._here(self._arun_tool(call)))
            going_on = self._after_tools(results, info)
        elif self.env.harness.responds:
            going_on = self._after_reply(await self._here(self._arespond()), info) if self.turns < self.max_turns \
                else self._ends("turn-limit", info)
        else:  # the model answered
            self.ended_by = "policy"
            going_on = None
        if going_on is not None:
            return going_on
        score = await self._here(self.env.ascore(self.task, Trajectory(self.messages), state=self.state,
                                                 context=self.scoring))
        result = self._finish(score, info, release=False)
        await self._aclose_mcp()
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

    @property
    def max_turns(self) -> int:
        """This episode's turn limit: its task's own, or the harness's."""
        harness = self._task_harness
        return harness.max_turns if harness is not None else self.env.harness.max_turns

    @property
    def tool_specs(self) -> list[dict[str, Any]]:
        """The tools this episode's model may call (its task may narrow the harness's)."""
        harness = self._task_harness
        return harness.tool_specs if harness is not None else self.env.harness.tool_specs

    def observation(self) -> Observation:
        """What the model sees now: all messages, or (``context = "recent-turns"``) the
        system and task prompts plus the last ``keep-turns`` turns."""
        harness = self.env.harness
        specs = self._task_harness.tool_specs if self._task_harness is not None else harness.tool_specs
        if harness.keep_turns is None and type(harness).observe is Harness.observe:  # the common case, inline
            return Observation(list(self.messages), specs)
        return harness.observe(self.messages, self._prompt_len, specs)

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
        self.turn_rewards.append(None)
        return message

    def _tool_calls(self, message: Message) -> list[dict[str, Any]]:
        """The calls to run: only protocols that run tools run them."""
        if not self.env.harness.runs_tools:
            return []
        return list(message.get("tool_calls") or [])

    @staticmethod
    def _ended_in_turn(results: list[ToolCallResult]) -> bool:
        return any(r.reply is not None and r.reply.done for r in results)

    def _after_tools(self, results: list[ToolCallResult], info: dict[str, Any]) -> StepResult | None:
        """After the turn's tool calls ran: the step that continues the episode, or None
        when it ends now (a tool ended it, or the turn limit)."""
        self._add_tool_results(results, info)
        for result in results:
            if result.reply is not None:
                self._take_reply(result.reply)
        if self.ended_by is not None:
            return self._ends("environment", info)
        if self.turns < self.max_turns:
            return StepResult(self.observation(), None, False, info, self.turn_rewards[-1])
        return self._ends("turn-limit", info)

    def _after_reply(self, reply: Reply | None, info: dict[str, Any]) -> StepResult | None:
        """After the responder answered a turn: the step that continues the episode with its
        message, or None when it ends now (the responder ended it). The responder is not
        asked after the last allowed turn: the verifier has the last word."""
        if reply is None:
            return self._ends("environment", info)
        if reply.content is not None:
            self.messages.append({"role": "user", "content": str(reply.content)})
        self._take_reply(reply)
        if self.ended_by is not None:
            return self._ends("environment", info)
        if reply.content is None:  # nothing to answer: the episode cannot go on
            return self._ends("environment", info)
        return StepResult(self.observation(), None, False, info, self.turn_rewards[-1])

    def _take_reply(self, reply: Reply) -> None:
        if reply.reward is not None:
            current = self.turn_rewards[-1]
            self.turn_rewards[-1] = reply.reward if current is None else current + reply.reward
        if reply.done:
            self.ended_by = "environment"
            if reply.outcome is not None and self.outcome is None:
                self.outcome = reply.outcome

    def _ends(self, by: EndedBy, info: dict[str, Any]) -> StepResult | None:
        """Note that the episode ends now, ``by`` whom; None (no step continues it)."""
        self.ended_by = by
        self.truncated = by == "turn-limit"
        if self.outcome is not None:
            info["outcome"] = self.outcome
        return None

    def _respond(self, loop: asyncio.AbstractEventLoop | None) -> Reply | None:
        """The responder's reply on the sync path: an ``async def`` responder is run to
        completion (on the state's loop when it has one)."""
        try:
            reply = self.env.harness.respond(self.task, self.messages, self.state)
            if inspect.isawaitable(reply):
                reply = _on(loop, _awaited(reply)) if loop is not None else asyncio.run(_awaited(reply))
            return as_reply(reply, who=_responder_name(self.env.harness))
        except Exception as e:
            raise _from_responder(e, self.env.harness) from None

    async def _arespond(self) -> Reply | None:
        """The responder's reply on the async path: a plain function runs in a worker thread
        (so a slow one does not hold up other episodes), an ``async def`` one is awaited."""
        try:
            reply = await asyncio.to_thread(self.env.harness.respond, self.task, self.messages, self.state)
            if inspect.isawaitable(reply):
                reply = await reply
            return as_reply(reply, who=_responder_name(self.env.harness))
        except Exception as e:
            raise _from_responder(e, self.env.harness) from None

    def _noise(self) -> bool:
        rate = self.env._tool_error_rate
        if not rate:
            return False
        if self._rng is None:
            self._rng = random.Random(f"{self.seed}:{self.task.split}:{self.task.id}")
        return self._rng.random() < rate

    def _tool_for(self, call: dict[str, Any]) -> ToolLike | ToolCallResult:
        """The tool a call names, or the answer when there is none (or noise strikes)."""
        tools = self._task_harness.tools if self._task_harness is not None else self.env.harness.tools_by_name
        tool = tools.get(str((call.get("function") or {}).get("name") or ""))
        if tool is None:
            return unknown_tool(call, list(tools.values()))
        if isinstance(tool, McpTool) and self._mcp is not None:
            tool = self._mcp.tool(tool.name)  # the tool bound to this episode's servers
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
        if release:
            if self._mcp is not None:
                self._close_mcp()  # the episode's MCP servers stop when it ends
            if self.env._state_spec.reset == "per-episode":
                self._release_state()
        info["breakdown"] = dict(score.breakdown)
        if score.error is not None:
            info["error"] = score.error
        if self.truncated:
            info["truncated"] = True
        return StepResult(self.observation(), score.reward, True, info, self.turn_rewards[-1])

    def _close_mcp(self) -> None:
        mcp, self._mcp = self._mcp, None
        if mcp is not None:
            mcp.close()

    async def _aclose_mcp(self) -> None:
        mcp, self._mcp = self._mcp, None
        if mcp is not None:
            await mcp.aclose()

    def _release_state(self) -> None:
        if self._mcp is not None:
            self._close_mcp()
        if self._state is not None and self.env._state_spec.reset == "per-episode":
            self._state.release()
        self._state = None

    async def _arelease_state(self) -> None:
        if self._mcp is not None:
            await self._aclose_mcp()
        state, self._state = self._state, None
        if state is not None and self.env._state_spec.reset == "per-episode":
            await state.arelease()


def _not_run(call: dict[str, Any]) -> ToolCallResult:
    name = str((call.get("function") or {}).get("name") or "")
    return ToolCallResult({"role": "tool", "tool_call_id": str(call.get("id") or ""), "name": name,
                           "content": _NOT_RUN})


#: The note an exception raised by the responder carries (``validate --check`` reads it).
RESPONDER_NOTE = "raised by the responder"


def _responder_name(harness: Harness) -> str:
    entry = harness.section.responder
    return f"responder {entry}" if entry else "the responder"


def _from_responder(e: Exception, harness: Harness) -> Exception:
    """``e``, noted as the responder's (:data:`RESPONDER_NOTE`), unchanged otherwise, so an
    eval records it as it always has."""
    entry = harness.section.responder
    note = f"{RESPONDER_NOTE} {entry}" if entry else RESPONDER_NOTE
    if note not in getattr(e, "__notes__", ()):
        e.add_note(note)
    return e


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on ``loop`` (running in another thread) and wait for its result."""
    return asyncio.run_coroutine_threadsafe(coro, loop).result()
