"""The values that flow through an episode: tasks, observations, actions, scores.

Messages are OpenAI chat-completions messages (plain dicts with ``role``, ``content`` and,
for the assistant, ``tool_calls``), so a policy can hand them to any compatible endpoint
unchanged. Tool specs are OpenAI ``tools`` entries.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Action",
    "Message",
    "Observation",
    "Reply",
    "Score",
    "StepResult",
    "Task",
    "Trajectory",
    "as_assistant_message",
    "clamp_reward",
]

#: One chat message: ``{"role": "user", "content": "..."}``, an assistant message with
#: ``tool_calls``, or ``{"role": "tool", "tool_call_id": ..., "content": ...}``.
Message = dict[str, Any]
#: What a policy returns: the assistant's text, or a whole assistant message.
Action = str | Message


@dataclass(frozen=True, slots=True)
class Task(Mapping[str, Any]):
    """One task: its row, plus where it came from. Reads like the row (``task["answer"]``)."""

    id: str
    split: str
    data: Mapping[str, Any]
    index: int = 0
    #: The prompt shown to the model (the manifest's ``prompt-field``).
    prompt: str = ""
    #: The manifest's ``difficulty-field``, when declared and present.
    difficulty: Any = None
    #: The seed that generated the task (``format = "generator"``).
    seed: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __hash__(self) -> int:
        return hash((self.split, self.id))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Task):
            return NotImplemented
        return (self.split, self.id, self.seed) == (other.split, other.id, other.seed) and self.data == other.data


@dataclass(slots=True)
class Observation:
    """What the model sees: the conversation so far and the tools it may call."""

    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class StepResult:
    """The outcome of one step. ``reward`` is the verifier's final reward in [0, 1], set
    when ``done``; ``turn_reward`` is what the environment gave for this turn (the sum of
    its tools' and responder's :class:`Reply` rewards; None when they gave none). ``info``
    carries the score breakdown, what each tool call returned, and ``outcome`` when the
    environment ended the episode."""

    observation: Observation
    reward: float | None
    done: bool
    info: dict[str, Any] = field(default_factory=dict)
    turn_reward: float | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """What a tool or a responder returns when it has more to say than its text.

    ``content`` is what the model sees (a tool's result, converted to text as a plain return
    value is; a responder's next user message; None from a responder: no message).
    ``reward`` is a per-turn reward for credit assignment, any finite float; it is recorded
    on the step and in the rollout record, and never enters the final reward unless the
    verifier reads it. ``done`` ends the episode after this turn (a win or a loss, the user
    hangs up, a transfer), and ``outcome`` says why, in a short label the summary counts.
    """

    content: Any = None
    reward: float | None = None
    done: bool = False
    outcome: str | None = None

    def __post_init__(self) -> None:
        if self.reward is not None:
            if isinstance(self.reward, bool) or not isinstance(self.reward, (int, float)):
                raise TypeError(f"Reply.reward must be a number, got {type(self.reward).__name__}")
            if not math.isfinite(self.reward):
                raise ValueError(f"Reply.reward must be finite, got {self.reward!r}")
        if self.outcome is not None and not isinstance(self.outcome, str):
            raise TypeError(f"Reply.outcome must be a string, got {type(self.outcome).__name__}")


@dataclass(frozen=True, slots=True)
class Score:
    """A verifier's verdict: ``reward`` in [0, 1], a per-criterion ``breakdown``, and the
    error that made the verifier fail, if it did (the reward is then 0)."""

    reward: float
    breakdown: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    info: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def failed(cls, error: str) -> Score:
        return cls(0.0, {}, error)


def clamp_reward(value: Any, *, what: str = "reward") -> float:
    """``value`` (a bool, int or float) as a reward in [0, 1].

    Raises :class:`TypeError` for anything else and :class:`ValueError` for NaN or a value
    outside [0, 1]: a verifier that returns 1.7 has a bug that clamping would hide.
    """
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number in [0, 1], got {type(value).__name__}")
    reward = float(value)
    if math.isnan(reward) or not 0.0 <= reward <= 1.0:
        raise ValueError(f"{what} must be in [0, 1], got {value!r}")
    return reward


@dataclass(slots=True)
class Trajectory:
    """The messages of one episode, the input of a verifier."""

    messages: list[Message]

    @classmethod
    def of(cls, value: str | Sequence[Message] | Trajectory) -> Trajectory:
        """A completion string (one assistant turn), a list of messages, or a trajectory."""
        if isinstance(value, Trajectory):
            return value
        if isinstance(value, str):
            return cls([{"role": "assistant", "content": value}])
        return cls(list(value))

    @property
    def completion(self) -> str:
        """The text of the last assistant message ("" when there is none)."""
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                return _text(message.get("content"))
        return ""

    @property
    def assistant_turns(self) -> int:
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Every tool call the assistant made, in order (OpenAI ``tool_calls`` entries)."""
        return [call for m in self.messages if m.get("role") == "assistant" for call in (m.get("tool_calls") or [])]


def _text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


def as_assistant_message(action: Action) -> Message:
    """A policy's action as an assistant message.

    Raises :class:`TypeError` for anything that is neither a string nor a message dict.
    """
    if isinstance(action, str):
        return {"role": "assistant", "content": action}
    if isinstance(action, Mapping):
        message = dict(action)
        message.setdefault("role", "assistant")
        if message["role"] != "assistant":
            raise TypeError(f"an action must be an assistant message, got role {message['role']!r}")
        message.setdefault("content", None if message.get("tool_calls") else "")
        return message
    raise TypeError(f"an action must be a string or an assistant message dict, got {type(action).__name__}")
