"""The simulated customer of ``envhub-examples/customer-service``: the responder.

In ``tool-use``, a turn in which the agent calls no tool is a message to the customer, and
envhub asks this responder for the customer's answer. ``[config.params] user`` picks who
plays the customer:

- ``"scripted"`` (the default): the task's ``user.script``, one line per agent message, in
  order; when the script is used up the customer hangs up (``Reply(done=True,
  outcome="hangup")``). Deterministic: the reference solutions are written against it.
- ``"llm"``: a model behind an OpenAI-compatible endpoint plays the customer, with the
  task's scenario (``user.instructions``) as its system prompt. It sees the conversation
  from the customer's side (the agent's messages as ``user`` turns, its own as
  ``assistant``, tool calls and results left out). When it writes ``###STOP###`` the
  customer hangs up. The endpoint is ``user-base-url`` and ``user-model`` from
  ``[config.params]``, else the environment variables ``CUSTOMER_SERVICE_USER_BASE_URL``
  and ``CUSTOMER_SERVICE_USER_MODEL``; a key, if the endpoint needs one, only from
  ``CUSTOMER_SERVICE_USER_API_KEY``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from envhub.runtime import ChatClient, Reply, Task

__all__ = ["STOP", "customer_messages", "respond"]

#: What the LLM customer writes when the conversation is over for them.
STOP = "###STOP###"

_SYSTEM = """\
You are a customer contacting an online shop's support chat. Play this customer:

{instructions}

Rules:
- Write only what the customer says, one short message at a time, in plain language.
- Give the information above only when you are asked for it; never make up order ids, item
  ids or other details you were not given.
- Do not offer to do the agent's work; answer its questions.
- When your request has been handled, or the agent says it cannot be, thank them and end
  your message with {stop} on its own line.
"""


async def respond(task: Task, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> Reply | str | None:
    """The customer's answer to the agent's last message."""
    mode = params.get("user", "scripted")
    if mode == "scripted":
        return _scripted(task, messages)
    if mode == "llm":
        return await _llm(task, messages, params)
    raise ValueError(f"[config.params] user must be 'scripted' or 'llm', got {mode!r}")


def _scripted(task: Task, messages: list[dict[str, Any]]) -> Reply | str:
    script = list(task["user"]["script"])
    said = sum(1 for m in messages if m.get("role") == "assistant" and not m.get("tool_calls"))
    if said <= len(script):
        return str(script[said - 1])
    return Reply(done=True, outcome="hangup")


async def _llm(task: Task, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> Reply | str:
    base_url = params.get("user-base-url") or os.environ.get("CUSTOMER_SERVICE_USER_BASE_URL")
    model = params.get("user-model") or os.environ.get("CUSTOMER_SERVICE_USER_MODEL")
    if not base_url or not model:
        raise ValueError("the LLM customer needs an endpoint: set [config.params] user-base-url and user-model, "
                         "or CUSTOMER_SERVICE_USER_BASE_URL and CUSTOMER_SERVICE_USER_MODEL")
    async with ChatClient(str(base_url), os.environ.get("CUSTOMER_SERVICE_USER_API_KEY"), max_retries=2) as client:
        result = await client.complete(model=str(model), messages=customer_messages(task, messages),
                                       temperature=float(params.get("user-temperature", 0.0)))
    text = str(result.message.get("content") or "")
    if STOP in text:
        said = text.replace(STOP, "").strip()
        return Reply(said or None, done=True, outcome="hangup")
    return text


def customer_messages(task: Task, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the customer sees it: the scenario as the system prompt, their own
    messages as ``assistant``, the agent's text as ``user``; tool calls and results, and the
    agent's system prompt, are the agent's business."""
    seen: list[dict[str, Any]] = [{"role": "system", "content": _SYSTEM.format(
        instructions=task["user"]["instructions"], stop=STOP)}]
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role == "user":
            seen.append({"role": "assistant", "content": str(content)})
        elif role == "assistant" and content and not message.get("tool_calls"):
            seen.append({"role": "user", "content": str(content)})
    return seen
