"""``llm-judge``: a pinned judge model grades the completion through an OpenAI-compatible endpoint.

The judge is sent the rubric, the task's prompt, its reference answer when it has one, and the
response, and asked for ``{"score": 0..10, "reasoning": ...}``. docs/verifiers.md says how the
verdict is read.

A bundle may declare the judge's prompt instead (``prompt-template``, a Jinja file rendered per
call: :mod:`envhub._templates`) and how its answer is read (``verdict``: a regex or a JSON
field, labels with their rewards, a scale): :func:`read_verdict`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub._templates import PromptTemplate, TemplateError, task_variables
from envhub.errors import PolicyError, UsageError
from envhub.manifest import JudgeVerdict
from envhub.runtime._chat import DEFAULT_BASE_URL, ChatClient, ChatResult
from envhub.runtime._types import Message, Score, Task, Trajectory, _text
from envhub.runtime.verifiers._base import ScoringContext, Verifier, VerifierContext, VerifierError
from envhub.runtime.verifiers._reference import Reference

if TYPE_CHECKING:
    pass

__all__ = ["DEFAULT_RUBRIC", "LlmJudgeVerifier", "parse_verdict", "read_verdict"]

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
        self.template, self.verdict = _declared(spec, ctx.root)
        #: [config.params], the prompt template's ``params``.
        self.params: Mapping[str, Any] = ctx.params
        settings = ctx.settings
        self.base_url: str = spec.base_url or settings.openai_base_url or DEFAULT_BASE_URL
        self._key = settings.secret(self.api_key_env)
        self._client = client

    @property
    def client(self) -> ChatClient:
        """The judge's endpoint client, made on first use (its requests go through envhub's
        HTTP client, :mod:`envhub.runtime._http`, as a policy's do; pass ``client`` to share
        one). Raises :class:`VerifierError` when OpenAI's endpoint is named and the key variable
        is unset: no request could succeed."""
        if self._client is None:
            if not self._key and "api.openai.com" in self.base_url:
                raise VerifierError(f"the llm-judge needs an API key for {self.base_url}: "
                                    f"{self.api_key_env} is not set",
                                    hint=f"set {self.api_key_env}, or point the verifier's base-url at a server "
                                         "that needs no key")
            self._client = ChatClient(self.base_url, self._key)
        return self._client

    def messages(self, task: Task, trajectory: Trajectory) -> list[Message]:
        """The conversation sent to the judge: the rendered ``prompt-template`` alone as the
        user message when there is one; else the rubric and envhub's answer format as the
        system message (the rubric alone when a ``verdict`` is declared: the rubric then says
        how to answer) and the task, reference and response as the user message.

        Raises :class:`VerifierError` naming the template when it cannot be rendered."""
        if self.template is not None:
            return [{"role": "user", "content": self._render(task, trajectory)}]
        parts = [f"# Task\n{_task_prompt(task, trajectory)}"]
        reference = next((task.data[f] for f in REFERENCE_FIELDS if task.data.get(f) is not None), None)
        if reference is not None:
            text = reference if isinstance(reference, str) else json.dumps(reference, ensure_ascii=False)
            parts.append(f"# Reference answer\n{text}")
        parts.append(f"# Response to grade\n{_response(trajectory)}")
        system = self.rubric if self.verdict is not None else _INSTRUCTIONS.format(rubric=self.rubric)
        return [{"role": "system", "content": system},
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

    def _render(self, task: Task, trajectory: Trajectory) -> str:
        assert self.template is not None
        variables = task_variables(task.data, task_id=task.id, split=task.split, params=self.params,
                                   completion=trajectory.completion, messages=trajectory.messages,
                                   rubric=self.rubric)
        try:
            return self.template.render(**variables)
        except TemplateError as e:
            raise VerifierError(f"task {task.id!r}: {e.message}", hint=e.hint) from e

    def _verdict(self, result: ChatResult) -> Score:
        reply = _text(result.message.get("content"))
        info: dict[str, Any] = {"judge_model": self.model, "usage": dict(result.usage)}
        if self.verdict is not None:
            try:
                reward, raw, reasoning = read_verdict(reply, self.verdict)
            except VerifierError as e:
                return Score(0.0, {}, f"llm-judge {self.model!r}: {e.message}",
                             info={**info, "reply": _excerpt(reply)})
            return Score(reward, {}, None, info={**info, "score": raw, "reasoning": reasoning})
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


def _json_verdict(reply: str, key: str = "score") -> Mapping[str, Any] | None:
    """The first JSON object in ``reply`` (inline or in a fence) that has ``key``."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", reply):
        try:
            value, _ = decoder.raw_decode(reply, match.start())
        except ValueError:
            continue
        if isinstance(value, Mapping) and key in value:
            return value
    return None


def read_verdict(reply: str, verdict: JudgeVerdict) -> tuple[float, Any, str]:
    """``(reward, score, reasoning)`` from a judge's reply, read as ``verdict`` declares.

    The score is the first match of ``verdict.regex`` (its first group, or the whole match
    when it has no group), or the value of ``verdict.json-field`` in the first JSON object of
    the reply that has that key (inline or in a fenced block). With ``labels``, the score must
    be one of them (matched exactly, else ignoring case) and the reward is the label's; without,
    it is a number and the reward is ``score / scale``, which must lie in [0, 1]. The reasoning
    is the JSON object's ``reasoning`` (json-field), else the whole reply.

    Raises :class:`VerifierError` saying what was expected, with an excerpt of the reply.

    >>> read_verdict("The answer names Paris.\\nGRADE: C",
    ...              JudgeVerdict(regex=r"GRADE: *([CPI])", labels={"C": 1, "P": 0.5, "I": 0}))
    (1.0, 'C', 'The answer names Paris.\\nGRADE: C')
    """
    reasoning = reply.strip()
    if verdict.regex is not None:
        match = re.search(verdict.regex, reply)
        if match is None:
            raise _no_verdict(f"no match for verdict.regex '{verdict.regex}'", reply)
        raw: Any = match.group(1) if match.re.groups else match.group(0)
        if raw is None:
            raise _no_verdict(f"verdict.regex '{verdict.regex}' matched {match.group(0)!r} but its first group "
                              "took no part in the match", reply)
        raw = raw.strip()
        where = f"the score {raw!r} (from verdict.regex)"
    else:
        key = verdict.json_field
        assert key is not None  # the manifest's rules: exactly one of regex and json-field
        found = _json_verdict(reply, key)
        if found is None:
            raise _no_verdict(f"no JSON object with the key {key!r} (verdict.json-field)", reply)
        raw = found[key]
        where = f"the score {raw!r} (from the JSON key {key!r})"
        if isinstance(found.get("reasoning"), str):
            reasoning = found["reasoning"]
    if verdict.labels:
        label = _label(raw, verdict.labels)
        if label is None:
            expected = ", ".join(repr(name) for name in verdict.labels)
            raise _no_verdict(f"{where} is not one of the labels {expected}", reply)
        return float(verdict.labels[label]), label, reasoning
    try:
        number = _number(raw, "score")
    except ValueError:
        raise _no_verdict(f"{where} is not a number (declare verdict.labels to read words)", reply) from None
    reward = number / verdict.scale
    if not 0 <= reward <= 1:
        raise _no_verdict(f"{where} is outside 0..{verdict.scale:g} (verdict.scale)", reply)
    return reward, number, reasoning


def _label(raw: Any, labels: Mapping[str, float]) -> str | None:
    if not isinstance(raw, str):
        return None
    if raw in labels:
        return raw
    folded = [name for name in labels if name.casefold() == raw.casefold()]
    return folded[0] if len(folded) == 1 else None


def _no_verdict(what: str, reply: str) -> VerifierError:
    subject = f"the judge's reply has {what}" if what.startswith("no ") else what
    return VerifierError(f"{subject}; the reply: {_excerpt(reply.strip(), 200)!r}",
                         hint="make the judge's prompt ask for the answer format the verdict reads")


def _declared(spec: Any, root: Path) -> tuple[PromptTemplate | None, JudgeVerdict | None]:
    """The spec's prompt template, compiled, and its verdict, checked. Raises
    :class:`VerifierError` when the template cannot be read or compiled, or a label's reward
    is outside [0, 1]."""
    verdict: JudgeVerdict | None = spec.verdict
    if verdict is not None:
        for name, reward in verdict.labels.items():
            if not 0 <= reward <= 1:
                raise VerifierError(f"llm-judge verdict.labels: {name!r} = {reward:g} is outside [0, 1]",
                                    hint="a label's value is its reward, from 0 to 1")
    if spec.prompt_template is None:
        return None, verdict
    try:
        template = PromptTemplate.from_file(root, spec.prompt_template, what="llm-judge prompt-template")
    except TemplateError as e:
        raise VerifierError(e.message, hint=e.hint) from e
    return template, verdict


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
