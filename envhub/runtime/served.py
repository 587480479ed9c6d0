"""The serve protocol's messages (spec/serve.md), as both ends encode and decode them.

``envhub serve`` (the ``envhub-registry`` distribution) answers with these records, and
envhub's client (:func:`envhub.load` for an ``http(s)://`` URL) reads them back; neither
side builds or reads the JSON of a message anywhere else. Responses are frozen dataclasses
with ``to_json()`` (a dict ready for a JSON encoder) and ``from_json(data)`` (which raises
:class:`ProtocolError` for a body that is not the record); request bodies are pydantic
models, so the server answers a bad body with every problem in it, and the client makes its
bodies with the same models (``to_json()`` leaves out fields at their defaults).

The protocol's version is :data:`PROTOCOL_VERSION`, and every path is under :data:`PREFIX`.

>>> from envhub.runtime import Observation, Score
>>> step = StepView(Observation([{"role": "user", "content": "2+2?"}]), [{"role": "assistant", "content": "4"}],
...                 reward=1.0, done=True, truncated=False, turns=1, info={})
>>> StepView.from_json(step.to_json()) == step
True
>>> ScoreView.of(Score(0.5, {"a": 0.5}, "no"), held_out=True).to_json() == {"reward": 0.5, "breakdown": None,
...                                                                   "error": WITHHELD}
True
>>> CreateEpisodeRequest(split="test", index=0, seed=None).to_json()
{'split': 'test', 'index': 0}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from envhub.errors import EnvhubError
from envhub.runtime._types import Message, Observation, Score, StepResult, Task

if TYPE_CHECKING:
    from envhub.runtime.verifiers import ScoringContext

__all__ = [
    "MAX_INT",
    "MAX_PAGE",
    "MIN_INT",
    "PREFIX",
    "PROTOCOL_VERSION",
    "WITHHELD",
    "judge_fields",
    "CreateEpisodeRequest",
    "EnvironmentDetail",
    "EpisodeCreated",
    "EpisodeStatus",
    "ErrorBody",
    "ProtocolError",
    "ScoreRequest",
    "ScoreView",
    "SplitView",
    "StepRequest",
    "StepView",
    "TaskPage",
    "TaskView",
    "observation_from_json",
    "observation_to_json",
]

#: The protocol's version; its paths are under :data:`PREFIX`.
PROTOCOL_VERSION = 1
PREFIX = f"/v{PROTOCOL_VERSION}"
#: Most tasks in one page of ``GET .../tasks``.
MAX_PAGE = 1000
#: The range of integers a query parameter or body field may hold: a 64-bit signed integer,
#: which JSON libraries read back exactly.
MAX_INT = 2**63 - 1
MIN_INT = -(2**63)
#: The error shown instead of a verifier's own, on a held-out split (it may quote the answer).
WITHHELD = "the verifier failed; details are withheld on held-out splits (see the server's log)"
#: What a held-out step's ``info`` keeps: the model saw the tool results anyway.
_HELD_OUT_INFO = ("tool_results", "tool_errors", "truncated")

_R = TypeVar("_R")


class ProtocolError(EnvhubError):
    """A body that is not the message the protocol says is there (a server of another
    protocol version, or not an ``envhub serve`` server at all)."""


def _field(data: Mapping[str, Any], key: str, kind: type[_R] | tuple[type, ...], what: str) -> Any:
    """``data[key]``, checked to be a ``kind``; :class:`ProtocolError` otherwise."""
    if not isinstance(data, Mapping):
        raise ProtocolError(f"{what}: expected a JSON object, got {type(data).__name__}",
                            hint="use the same envhub version on the client as on the server")
    if key not in data:
        raise ProtocolError(f"{what}: field {key!r} is missing",
                            hint="use the same envhub version on the client as on the server")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        raise ProtocolError(f"{what}: field {key!r} has the wrong type ({type(value).__name__})",
                            hint="use the same envhub version on the client as on the server")
    return value


def _optional(data: Mapping[str, Any], key: str, kind: type[_R] | tuple[type, ...], what: str) -> Any:
    return None if data.get(key) is None else _field(data, key, kind, what)


# --- observations, steps, scores -----------------------------------------------------------------


def observation_to_json(observation: Observation) -> dict[str, Any]:
    return {"messages": observation.messages, "tools": observation.tools}


def observation_from_json(data: Mapping[str, Any]) -> Observation:
    return Observation(list(_optional(data, "messages", list, "observation") or []),
                       list(_optional(data, "tools", list, "observation") or []))


@dataclass(frozen=True)
class StepView:
    """The answer to a step: the next observation, the messages the step added to the
    episode's history (the model's own turn first), and on the last step the reward."""

    observation: Observation
    new_messages: list[Message]
    reward: float | None
    done: bool
    truncated: bool
    turns: int
    info: dict[str, Any] = field(default_factory=dict)
    #: The environment's reward for this turn (None when it gave none, and mid-episode on a
    #: held-out split).
    turn_reward: float | None = None
    #: On the last step: every turn's reward (None when the environment gave none), who ended
    #: the episode and why.
    turn_rewards: list[float | None] | None = None
    ended_by: str | None = None
    outcome: str | None = None

    @classmethod
    def of(cls, result: StepResult, new_messages: list[Message], *, turns: int, truncated: bool,
           held_out: bool, episode: Any = None) -> StepView:
        """A step's result as a client may see it: on a held-out split, ``info`` keeps only
        what the model saw anyway (tool results), a verifier's error is :data:`WITHHELD`,
        and the turn rewards come only with the last step (a client that saw them as they
        came could search a held-out task's actions by their rewards)."""
        info = dict(result.info)
        if held_out:
            info = {k: v for k, v in info.items() if k in _HELD_OUT_INFO}
            if result.info.get("error") is not None:
                info["error"] = WITHHELD
        turn_reward = None if held_out and not result.done else result.turn_reward
        rewards = ended_by = outcome = None
        if result.done and episode is not None:
            given = list(getattr(episode, "turn_rewards", None) or [])
            rewards = given if any(r is not None for r in given) else None
            ended_by, outcome = getattr(episode, "ended_by", None), getattr(episode, "outcome", None)
        return cls(result.observation, new_messages, result.reward, result.done, truncated, turns, info,
                   turn_reward, rewards, ended_by, outcome)

    @classmethod
    def failed(cls, observation: Observation, new_messages: list[Message], error: str, *, turns: int) -> StepView:
        """A step the environment's own code failed in: the episode is over, unscored, and
        ``error`` says why, as a rollout record would."""
        return cls(observation, new_messages, None, True, False, turns, {"error": error, "environment_error": True})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "observation": observation_to_json(self.observation), "new_messages": self.new_messages,
            "reward": self.reward, "done": self.done, "truncated": self.truncated, "turns": self.turns,
            "info": self.info, "turn_reward": self.turn_reward}
        if self.done:
            out.update(turn_rewards=self.turn_rewards, ended_by=self.ended_by, outcome=self.outcome)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepView:
        what = "step"
        reward = _optional(data, "reward", (int, float), what)
        turn_reward = _optional(data, "turn_reward", (int, float), what)
        rewards = _optional(data, "turn_rewards", list, what)
        if rewards is not None and not all(r is None or (isinstance(r, (int, float)) and not isinstance(r, bool))
                                           for r in rewards):
            raise ProtocolError("step field 'turn_rewards' must be a list of numbers and nulls")
        ended_by = _optional(data, "ended_by", str, what)
        if ended_by not in (None, "policy", "environment", "turn-limit"):
            raise ProtocolError(f"step field 'ended_by' must be 'policy', 'environment' or 'turn-limit', "
                                f"got {ended_by!r}")
        return cls(observation_from_json(_field(data, "observation", Mapping, what)),
                   list(_optional(data, "new_messages", list, what) or []),
                   float(reward) if reward is not None else None, _field(data, "done", bool, what),
                   bool(data.get("truncated")), _field(data, "turns", int, what),
                   dict(_optional(data, "info", Mapping, what) or {}),
                   float(turn_reward) if turn_reward is not None else None,
                   [float(r) if r is not None else None for r in rewards] if rewards is not None else None,
                   ended_by, _optional(data, "outcome", str, what))

    def score(self) -> Score:
        """The episode's score, once it is done: the reward (0 when unscored), the
        breakdown and the error ``info`` carries."""
        return Score(float(self.reward or 0.0), dict(self.info.get("breakdown") or {}), self.info.get("error"))


@dataclass(frozen=True)
class ScoreView:
    """A score as a client sees it; on a held-out split without a breakdown."""

    reward: float
    breakdown: dict[str, float] | None
    error: str | None

    @classmethod
    def of(cls, score: Score, *, held_out: bool) -> ScoreView:
        if held_out:
            return cls(score.reward, None, WITHHELD if score.error is not None else None)
        return cls(score.reward, dict(score.breakdown), score.error)

    def to_json(self) -> dict[str, Any]:
        return {"reward": self.reward, "breakdown": self.breakdown, "error": self.error}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScoreView:
        breakdown = _optional(data, "breakdown", Mapping, "score")
        return cls(float(_field(data, "reward", (int, float), "score")),
                   dict(breakdown) if breakdown is not None else None, _optional(data, "error", str, "score"))

    def to_score(self) -> Score:
        return Score(self.reward, dict(self.breakdown or {}), self.error)


# --- tasks -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskView:
    """A task as a client may see it. A held-out task is ``{id, split, index, prompt,
    difficulty}``, what the model is shown; a public one adds ``seed`` and ``data`` (the row)."""

    id: str
    split: str
    index: int
    prompt: str | list[Any]
    difficulty: Any = None
    #: Public splits only: None for a held-out task, whose ``data`` is not sent.
    data: dict[str, Any] | None = None
    seed: int | None = None

    @classmethod
    def of(cls, task: Task, *, prompt_field: str, held_out: bool) -> TaskView:
        """``task`` as it is sent: its ``prompt_field`` (a string or chat messages) as the prompt."""
        prompt = task.data.get(prompt_field, task.prompt)
        if not isinstance(prompt, (str, list)):
            prompt = task.prompt
        if held_out:
            return cls(task.id, task.split, task.index, prompt, task.difficulty)
        return cls(task.id, task.split, task.index, prompt, task.difficulty, dict(task.data), task.seed)

    def to_json(self) -> dict[str, Any]:
        view: dict[str, Any] = {"id": self.id, "split": self.split, "index": self.index, "prompt": self.prompt,
                                "difficulty": self.difficulty}
        if self.data is not None:
            view["seed"] = self.seed
            view["data"] = self.data
        return view

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskView:
        what = "task"
        prompt = data.get("prompt")
        row = _optional(data, "data", Mapping, what)
        return cls(str(_field(data, "id", (str, int), what)), _field(data, "split", str, what),
                   int(_optional(data, "index", int, what) or 0), prompt if isinstance(prompt, (str, list)) else "",
                   data.get("difficulty"), dict(row) if row is not None else None,
                   _optional(data, "seed", int, what))

    def to_task(self, *, id_field: str, prompt_field: str, difficulty_field: str | None) -> Task:
        """The task for a client's runtime. A held-out task's row is what the model sees,
        under the manifest's field names (``id_field``, ...)."""
        row = self.data
        if row is None:
            row = {id_field: self.id, prompt_field: self.prompt}
            if difficulty_field and self.difficulty is not None:
                row[difficulty_field] = self.difficulty
        return Task(self.id, self.split, row, self.index, self.prompt if isinstance(self.prompt, str) else "",
                    self.difficulty, self.seed)


@dataclass(frozen=True)
class TaskPage:
    """One page of a split's tasks (``GET .../splits/{split}/tasks``)."""

    environment: str
    split: str
    held_out: bool
    total: int
    offset: int
    tasks: list[TaskView]
    tools: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"environment": self.environment, "split": self.split, "held_out": self.held_out,
                "total": self.total, "offset": self.offset, "tasks": [t.to_json() for t in self.tasks],
                "tools": self.tools}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskPage:
        what = "task page"
        return cls(str(data.get("environment", "")), str(data.get("split", "")), bool(data.get("held_out")),
                   _field(data, "total", int, what), int(_optional(data, "offset", int, what) or 0),
                   [TaskView.from_json(t) for t in _field(data, "tasks", list, what)],
                   list(_optional(data, "tools", list, what) or []))


# --- environments --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SplitView:
    """A split as listed: ``available`` is false for a held-out split the server does not
    have; ``rows`` is None for a generator split that declares no count."""

    name: str
    held_out: bool
    available: bool
    rows: int | None
    generated: bool

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "held_out": self.held_out, "available": self.available, "rows": self.rows,
                "generated": self.generated}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SplitView:
        what = "split"
        return cls(_field(data, "name", str, what), bool(data.get("held_out")), bool(data.get("available")),
                   _optional(data, "rows", int, what), bool(data.get("generated")))


@dataclass(frozen=True)
class EnvironmentDetail:
    """An environment as ``GET /v1/environments/{ns}/{name}`` describes it; its summary
    (``GET /v1/environments``) is the first five fields (:meth:`summary_json`)."""

    name: str
    version: str
    digest: str
    protocol: str
    splits: list[SplitView]
    score_version: int = 1
    description: str = ""
    max_turns: int = 1
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: ``env``, ``version``, ``digest``, ``score_version``, ``locator``, ``envhub_version``.
    provenance: dict[str, Any] = field(default_factory=dict)
    server_envhub_version: str = ""
    #: The text of the bundle's published ``envhub.toml``.
    manifest: str = ""

    def summary_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "digest": self.digest, "protocol": self.protocol,
                "splits": [s.to_json() for s in self.splits]}

    def to_json(self) -> dict[str, Any]:
        return {**self.summary_json(), "score_version": self.score_version, "description": self.description,
                "max_turns": self.max_turns, "tools": self.tools, "provenance": self.provenance,
                "server_envhub_version": self.server_envhub_version, "manifest": self.manifest}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EnvironmentDetail:
        what = "environment"
        return cls(_field(data, "name", str, what), str(_field(data, "version", str, what)),
                   _field(data, "digest", str, what), str(data.get("protocol") or ""),
                   [SplitView.from_json(s) for s in _optional(data, "splits", list, what) or []],
                   _field(data, "score_version", int, what), str(data.get("description") or ""),
                   _field(data, "max_turns", int, what), list(_optional(data, "tools", list, what) or []),
                   dict(_optional(data, "provenance", Mapping, what) or {}),
                   str(data.get("server_envhub_version") or ""), str(data.get("manifest") or ""))


# --- episodes ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeCreated:
    """The answer to ``POST .../episodes``: the new episode's id and first observation."""

    episode_id: str
    environment: str
    split: str
    task: TaskView
    held_out: bool
    observation: Observation
    max_turns: int
    idle_timeout_s: float
    episode_timeout_s: float

    def to_json(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "environment": self.environment, "split": self.split,
                "task": self.task.to_json(), "held_out": self.held_out,
                "observation": observation_to_json(self.observation), "max_turns": self.max_turns,
                "idle_timeout_s": self.idle_timeout_s, "episode_timeout_s": self.episode_timeout_s}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EpisodeCreated:
        what = "episode"
        return cls(_field(data, "episode_id", str, what), str(data.get("environment", "")),
                   str(data.get("split", "")), TaskView.from_json(_field(data, "task", Mapping, what)),
                   bool(data.get("held_out")), observation_from_json(_field(data, "observation", Mapping, what)),
                   int(_optional(data, "max_turns", int, what) or 1),
                   float(_optional(data, "idle_timeout_s", (int, float), what) or 0.0),
                   float(_optional(data, "episode_timeout_s", (int, float), what) or 0.0))


@dataclass(frozen=True)
class EpisodeStatus:
    """An open episode (``GET /v1/episodes/{episode_id}``)."""

    episode_id: str
    environment: str
    split: str
    task_id: str
    held_out: bool
    turns: int
    done: bool
    busy: bool
    observation: Observation
    deadline_in_s: float

    def to_json(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "environment": self.environment, "split": self.split,
                "task_id": self.task_id, "held_out": self.held_out, "turns": self.turns, "done": self.done,
                "busy": self.busy, "observation": observation_to_json(self.observation),
                "deadline_in_s": self.deadline_in_s}


# --- errors -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorBody:
    """Every error response: ``{"error": {status, code, message, hint}}``. ``code`` is
    stable (spec/serve.md lists them); ``hint`` may be None."""

    status: int
    code: str
    message: str
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"error": {"status": self.status, "code": self.code, "message": self.message, "hint": self.hint}}

    @classmethod
    def from_json(cls, data: Any, status: int) -> ErrorBody | None:
        """The error in ``data`` (a response of ``status``), or None when ``data`` holds none."""
        error = data.get("error") if isinstance(data, Mapping) else None
        if not isinstance(error, Mapping) or not isinstance(error.get("message"), str):
            return None
        hint, code = error.get("hint"), error.get("code")
        return cls(status, code if isinstance(code, str) else "", error["message"],
                   hint if isinstance(hint, str) else None)


# --- request bodies ------------------------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """The body as sent: fields at their defaults left out. A client makes its bodies
        with ``model_construct`` (no validation): the server is the one that validates."""
        return self.model_dump(mode="json", exclude_defaults=True)


class _JudgeContext(_Body):
    """The scoring context a request carries (an episode's, a score's): each request its
    own, never kept on the served environment."""

    #: The policy's model, so an llm-judge verifier refuses to grade its own model's answers.
    policy_model: str | None = None
    force_self_judge: bool = False

    @property
    def scoring(self) -> ScoringContext:
        """The :class:`~envhub.runtime.verifiers.ScoringContext` of this request."""
        from envhub.runtime.verifiers import ScoringContext

        return ScoringContext(self.policy_model, self.force_self_judge)


def judge_fields(context: ScoringContext | None) -> dict[str, Any]:
    """The fields of a request body that carry ``context`` (none for no context)."""
    if context is None:
        return {}
    return {"policy_model": context.policy_model, "force_self_judge": context.force_self_judge}


class CreateEpisodeRequest(_JudgeContext):
    """``POST .../episodes``: a task by id or by index, and the episode's seed."""

    split: str = Field(min_length=1)
    task_id: str | None = None
    index: int | None = Field(None, ge=0, le=MAX_INT, strict=True)
    seed: int | None = Field(None, ge=MIN_INT, le=MAX_INT, strict=True)

    @model_validator(mode="after")
    def _one_task(self) -> CreateEpisodeRequest:
        if (self.task_id is None) == (self.index is None):
            raise ValueError("give exactly one of task_id and index")
        return self


class StepRequest(_Body):
    """``POST /v1/episodes/{id}/step``: the model's turn, its text or an assistant message."""

    action: str | dict[str, Any]


class ScoreRequest(_JudgeContext):
    """``POST .../score``: a completion (text) or a trajectory (messages) of one task."""

    split: str = Field(min_length=1)
    task_id: str
    completion: str | None = None
    messages: list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _one_answer(self) -> ScoreRequest:
        if (self.completion is None) == (self.messages is None):
            raise ValueError("give exactly one of completion (the assistant's text) and messages (a trajectory)")
        return self
