"""What a verifier's :meth:`~envhub.runtime.verifiers.Verifier.reference` returns, and the
built-in kinds' rules for it.

A reference is what solves a task for one verifier: a completion (one assistant turn) or a
list of assistant turns, tool calls included. :func:`reference_messages` turns either into
the chat messages the ``reference`` policy plays. :func:`spec_reference` gives a built-in
kind's reference from its manifest spec without building the verifier (a served
environment's verifier lives on the server).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from envhub.runtime._types import Message

__all__ = ["Reference", "code_reference", "field_reference", "reference_messages", "spec_reference"]

#: A completion, or assistant turns (a string is a turn's text; a dict a message, whose
#: ``role`` defaults to ``assistant`` and whose tool calls' ids and JSON arguments are filled in).
Reference: TypeAlias = str | Sequence[str | Mapping[str, Any]]


def reference_messages(reference: Reference) -> list[Message]:
    """``reference`` as the assistant messages that play it.

    >>> reference_messages("42")
    [{'role': 'assistant', 'content': '42'}]
    >>> reference_messages([{"tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}])[0]["tool_calls"]
    [{'function': {'name': 'f', 'arguments': '{"x": 1}'}, 'id': 'ref-0-0', 'type': 'function'}]
    """
    if isinstance(reference, str):
        return [{"role": "assistant", "content": reference}]
    return [_turn(turn, i) for i, turn in enumerate(reference)]


def _turn(turn: str | Mapping[str, Any], index: int) -> Message:
    if isinstance(turn, str):
        return {"role": "assistant", "content": turn}
    message = dict(turn)
    message.setdefault("role", "assistant")
    calls = []
    for j, call in enumerate(message.get("tool_calls") or []):
        call = dict(call)
        call.setdefault("id", f"ref-{index}-{j}")
        call.setdefault("type", "function")
        function = dict(call.get("function") or {})
        if not isinstance(function.get("arguments", ""), str):
            function["arguments"] = json.dumps(function["arguments"])
        call["function"] = function
        calls.append(call)
    if calls:
        message["tool_calls"] = calls
    message.setdefault("content", None if calls else "")
    return message


def field_reference(task: Mapping[str, Any], field: str, kind: str, *, extract: str = "auto") -> str | None:
    """The task's expected ``field`` written the way a verifier of ``kind`` reads it
    (exact-match: the text; numeric: ``\\boxed{...}`` unless it extracts the last number;
    json-match: the JSON), or None when the task has no such field.

    >>> field_reference({"answer": 7}, "answer", "numeric")
    '\\\\boxed{7}'
    >>> field_reference({"answer": {"a": [1]}}, "answer", "json-match")
    '{"a": [1]}'
    """
    if field not in task:
        return None
    value = task[field]
    if kind == "numeric":
        return f"\\boxed{{{value}}}" if extract in ("boxed", "auto") else str(value)
    if kind == "json-match":
        return json.dumps(value, ensure_ascii=False)
    return value if isinstance(value, str) else str(value)


def code_reference(task: Mapping[str, Any]) -> str | None:
    """A code task's ``solution`` as a fenced Python block, or None when it has none."""
    solution = task.get("solution")
    return f"```python\n{solution}\n```" if isinstance(solution, str) else None


def spec_reference(spec: Any, task: Mapping[str, Any]) -> Reference | None:
    """The reference a built-in kind's ``[verifier]`` spec (or rubric criterion) gives for
    ``task``, the rule its verifier's ``reference`` follows, without building the verifier:
    None for kinds that cannot say (regex, python, llm-judge, workspace-tests) and for
    plugin kinds, whose rule is their verifier's."""
    kind = getattr(spec, "kind", None)
    if kind == "rubric":
        for criterion in spec.criteria:
            found = spec_reference(criterion, task)
            if found is not None:
                return found
        return None
    if kind == "code-tests":
        return code_reference(task)
    if kind in ("exact-match", "numeric", "json-match"):
        return field_reference(task, spec.field, kind, extract=getattr(spec, "extract", "auto"))
    return None
