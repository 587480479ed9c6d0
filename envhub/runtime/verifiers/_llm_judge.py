"""``llm-judge``: a pinned judge model grades the completion through an OpenAI-compatible endpoint.

The judge is sent the rubric, the task's prompt, its reference answer when it has one, and the
response, and asked for ``{"score": 0..10, "reasoning": ...}``. docs/verifiers.md says how the
verdict is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envhub.errors import PolicyError, UsageError
from envhub.runtime._chat import DEFAULT_BASE_URL, ChatClient, ChatResult
from envhub.runtime._types import Message, Score, Task, Trajectory, _text
from envhub.runtime.verifiers._base import ScoringContext, Verifier, VerifierContext, VerifierError
from envhub.runtime.verifiers._reference import Reference

if TYPE_CHECKING:
    pass

__all__ = ["DEFAULT_RUBRIC", "LlmJudgeVerifier", "parse_verdict"]

DEFAULT_RUBRIC = ("Judge whether the response correctly and completely answers the task. "
                  "When a reference answer is given, the response must agree with it; wording may differ.")

_INSTRUCTIONS = """You are grading a response to a task, following the rubric below.

# Rubric
{rubric}

# How to answer
Reply with only a JSON object: {{"score": <a number from 0 to 10>, "reasoning": "<one or two sentences>"}}.
10 means the response fully meets the rubric, 0 that it does not meet it at all.
If the rubric defines another scale, use it and add "max_score": <the top of that scale>."""

#: Task fields read as the reference answer, in this order.
REFERENCE_FIELDS = ("answer", "reference", "reference_answer", "solution")
#: Longest part of a conversation shown to the judge (characters per message).
_MESSAGE_LIMIT = 4000
_SCORE_LINE = re.compile(
    r"(?im)^[\s*#_`>-]*score[\s*_`]*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?))?")


class LlmJudgeVerifier(Verifier):
    """Reward = the judge's score over its scale (0 to 10 unless the verdict says otherwise).

    ``info`` holds the judge model, its reasoning, the raw score and scale, and token usage.
    A verdict with no readable score is a failed score (reward 0) with an excerpt of the reply;
    an endpoint that keeps failing raises :class:`VerifierError`.
    """

    kind = "llm-judge"

    def reference(self, task: Task) -> Reference | None:
        """The task's ``reference`` field when it is text (the judge is shown it); else None."""
        reference = task.get("reference")
        return reference if isinstance(reference, str) else None

    def __init__(self, spec: Any, ctx: VerifierContext, *, client: ChatClient | None = None) -> None:
        """Raises :class:`UsageError` when ``ctx`` names the policy's model and it is the
        judge (unless the manifest allows it or ``ctx`` forces it), and :class:`VerifierError` when the rubric
        file cannot be read. ``client`` replaces the endpoint the spec names (tests, pools)."""
        self.model: str = spec.model
        self.temperature: float = spec.temperature
        self.api_key_env: str = spec.api_key_env
        self.allow_self_judge: bool = spec.allow_self_judge
        # A context built outside an environment may name the policy's model; an
        # environment's never does (the model comes per call, in a ScoringContext).
        self.check_context(ScoringContext(ctx.policy_model, ctx.force_self_judge))
        if spec.rubric is None:
            self.rubric = DEFAULT_RUBRIC
        else:
            path = ctx.root / spec.rubric
            try:
                self.rubric = path.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as e:
                raise VerifierError(f"llm-judge rubric {spec.rubric!r} cannot be read: {e}",
                                    hint="the rubric is a UTF-8 text file in the bundle") from e
        settings = ctx.settings
        self.base_url: str = spec.base_url or settings.openai_base_url or DEFAULT_BASE_URL
        self._key = settings.secret(self.api_key_env)
        self._client = client

    @property
    def client(self) -> ChatClient:
        """The judge's endpoint client, made on first use. Raises :class:`VerifierError` when
        OpenAI's endpoint is named and the key variable is unset: no request could succeed."""
        if self._client is None:
            if not self._key and "api.openai.com" in self.base_url:
                raise VerifierError(f"the llm-judge needs an API key for {self.base_url}: "
                                    f"{self.api_key_env} is not set",
                                    hint=f"set {self.api_key_env}, or point the verifier's base-url at a server "
                                         "that needs no key")
            self._client = ChatClient(self.base_url, self._key)
        return self._client

    def messages(self, task: Task, trajectory: Trajectory) -> list[Message]:
        """The conversation sent to the judge."""
        parts = [f"# Task\n{_task_prompt(task, trajectory)}"]
        reference = next((task.data[f] for f in REFERENCE_FIELDS if task.data.get(f) is not None), None)
        if reference is not None:
            text = reference if isinstance(reference, str) else json.dumps(reference, ensure_ascii=False)
            parts.append(f"# Reference answer\n{text}")
        parts.append(f"# Response to grade\n{_response(trajectory)}")
        return [{"role": "system", "content": _INSTRUCTIONS.format(rubric=self.rubric)},
                {"role": "user", "content": "\n\n".join(parts)}]

    def check_context(self, context: ScoringContext) -> None:
        """Raises :class:`UsageError` when ``context``'s policy model is the judge's, unless
        ``allow-self-judge = true`` or the context forces it."""
        if context.policy_model is not None and context.policy_model == self.model \
                and not (self.allow_self_judge or context.force_self_judge):
            raise UsageError(
                f"the llm-judge verifier would grade model {self.model!r} with itself",
                hint="use another policy model, set allow-self-judge = true in the verifier, "
                     "or pass --force-self-judge to grade anyway",
            )

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None,
              context: ScoringContext | None = None) -> Score:
        """Raises :class:`UsageError` when ``context`` refuses (:meth:`check_context`)."""
        if context is not None:
            self.check_context(context)
        try:
            result = self.client.complete_sync(model=self.model, messages=self.messages(task, trajectory),
                                               temperature=self.temperature)
        except PolicyError as e:
            raise self._endpoint_error(e) from e
        return self._verdict(result)

    async def ascore(self, task: Task, trajectory: Trajectory, *, state: Any = None,
                     context: ScoringContext | None = None) -> Score:
        if context is not None:
            self.check_context(context)
        try:
            result = await self.client.complete(model=self.model, messages=self.messages(task, trajectory),
                                                temperature=self.temperature)
        except PolicyError as e:
            raise self._endpoint_error(e) from e
        return self._verdict(result)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    def _endpoint_error(self, e: PolicyError) -> VerifierError:
        return VerifierError(f"llm-judge {self.model!r}: {e.message}", hint=e.hint)

    def _verdict(self, result: ChatResult) -> Score:
        reply = _text(result.message.get("content"))
        info: dict[str, Any] = {"judge_model": self.model, "usage": dict(result.usage)}
        try:
            value, scale, reasoning = parse_verdict(reply)
        except ValueError as e:
            return Score(0.0, {}, f"llm-judge {self.model!r}: {e}", info={**info, "reply": _excerpt(reply)})
        return Score(value / scale, {}, None,
                     info={**info, "score": value, "max_score": scale, "reasoning": reasoning})


def parse_verdict(reply: str) -> tuple[float, float, str]:
    """``(score, scale, reasoning)`` from a judge's reply, with ``0 <= score <= scale``.

    Read from the first JSON object with a ``score`` (fenced or inline), else from a
    ``SCORE: x`` or ``SCORE: x/y`` line. The scale is ``max_score`` or the ``/y``; with
    neither, 10, except that a fraction strictly between 0 and 1 is read on a scale of 1.
    Raises :class:`ValueError` saying what is missing or out of range.
    """
    found = _json_verdict(reply)
    if found is not None:
        raw, raw_scale, reasoning = found.get("score"), found.get("max_score"), found.get("reasoning")
    else:
        match = _SCORE_LINE.search(reply)
        if match is None:
            raise ValueError("the judge's reply has no score (no JSON object with \"score\", no SCORE: line)")
        raw, raw_scale, reasoning = match.group(1), match.group(2), reply.strip()
    value = _number(raw, "score")
    if raw_scale is not None:
        scale = _number(raw_scale, "max_score")
        if scale <= 0:
            raise ValueError(f"the judge's max_score is {raw_scale!r}; it must be above 0")
    else:
        scale = 1.0 if 0 < value < 1 else 10.0
    if not 0 <= value <= scale:
        raise ValueError(f"the judge's score {raw!r} is outside 0..{scale:g}")
    return value, scale, reasoning if isinstance(reasoning, str) else ""


def _json_verdict(reply: str) -> Mapping[str, Any] | None:
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", reply):
        try:
            value, _ = decoder.raw_decode(reply, match.start())
        except ValueError:
            continue
        if isinstance(value, Mapping) and "score" in value:
            return value
    return None


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"the judge's {what} is {value!r}, not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"the judge's {what} is {value!r}, not a number") from None
    if number != number:
        raise ValueError(f"the judge's {what} is NaN")
    return number


def _task_prompt(task: Task, trajectory: Trajectory) -> str:
    if task.prompt:
        return task.prompt
    for message in trajectory.messages:
        if message.get("role") == "user":
            return _text(message.get("content"))
    return "(no prompt)"


def _response(trajectory: Trajectory) -> str:
    """The completion; for a conversation with several turns or tool calls, the turns after
    the task's prompt, so the judge sees what the model did as well as what it concluded."""
    if trajectory.assistant_turns <= 1 and not trajectory.tool_calls:
        return trajectory.completion
    lines: list[str] = []
    seen_prompt = False
    for message in trajectory.messages:
        role = message.get("role")
        if role == "system" or (role == "user" and not seen_prompt):
            seen_prompt = seen_prompt or role == "user"
            continue
        text = _excerpt(_text(message.get("content")), _MESSAGE_LIMIT)
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                arguments = _excerpt(str(function.get("arguments")), _MESSAGE_LIMIT)
                lines.append(f"[assistant calls {function.get('name')}({arguments})]")
            if text:
                lines.append(f"[assistant] {text}")
        elif role == "tool":
            lines.append(f"[tool result] {text}")
        else:
            lines.append(f"[{role}] {text}")
    return "\n".join(lines)


def _excerpt(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
