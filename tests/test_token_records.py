"""Token-faithful rollout records: with ``record_tokens`` the policy asks its endpoint for the
tokens behind each completion (``logprobs``, ``return_token_ids``) and the record keeps them per
assistant turn (``turns_tokens``) with the sampling settings (``sampling``).

The local OpenAI-compatible server answers in the shapes vLLM and SGLang send (their response
models: vllm/entrypoints/openai/chat_completion/protocol.py ``ChatCompletionResponse``,
sglang python/sglang/srt/entrypoints/openai/protocol.py ``ChatCompletionResponse``), and, as
they do, sends the token data only when the request asks for it.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.context import make_plugin_manager
from envhub.runtime import ChatClient, read_records
from envhub.runtime.policies import make_policy
from envhub.settings import load_settings
from tests.openai_server import Reply, Request
from tests.runtime_fixtures import scaffold

PLUGINS = make_plugin_manager(autoload=False)
SCHEMA_FILE = Path(__file__).parent.parent / "spec" / "schema" / "rollout-record-v1.schema.json"


def settings():  # type: ignore[no-untyped-def]
    return load_settings({"ENVHUB_HOME": "/nonexistent/home", "ENVHUB_CACHE": "/nonexistent/cache"})


# --- a tokenizer and a model, enough to give every turn its own ids and log-probs ------------------


def render(messages: list[dict[str, Any]]) -> list[int]:
    """The 'chat template': each message as <role>content, one id per character."""
    text = "".join(f"<{m['role']}>{m.get('content') or json.dumps(m.get('tool_calls'))}" for m in messages)
    return [ord(c) for c in text + "<assistant>"]


def multiply_with_the_tool(request: Request) -> dict[str, Any]:
    """Call the calculator with the task's two numbers; once it answered, give the result."""
    results = [m for m in request.messages if m["role"] == "tool"]
    if results:
        return {"role": "assistant", "content": f"\\boxed{{{results[-1]['content']}}}"}
    a, b = re.findall(r"\d+", request.first_user_content)[:2]
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "calculate",
                                                          "arguments": json.dumps({"expression": f"{a} * {b}"})}}]}


class TokenServer:
    """A script answering as ``shape`` (``vllm``, ``sglang``, or ``plain``: a server that ignores
    the token fields), keeping what it sent per (task prompt, turn) so a test can compare."""

    def __init__(self, shape: str) -> None:
        self.shape = shape
        self.sent: dict[tuple[str, int], dict[str, Any]] = {}

    def __call__(self, request: Request) -> Reply:
        message = multiply_with_the_tool(request)
        turn = sum(1 for m in request.messages if m["role"] == "assistant")
        body = request.json or {}
        text = message["content"] or json.dumps(message["tool_calls"])
        prompt_ids = render(request.messages)
        # Distinct per turn and task, so a record that mixed turns up would not match.
        completion_ids = [1000 + ord(c) + turn for c in text]
        logprobs = [-round(0.001 * ((i + len(prompt_ids)) % 997), 3) for i in range(len(completion_ids))]
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        want_ids = body.get("return_token_ids") is True and self.shape != "plain"
        want_logprobs = body.get("logprobs") is True and self.shape != "plain"
        content = [{"token": c, "logprob": lp, "bytes": list(c.encode()), "top_logprobs": []}
                   for c, lp in zip(text, logprobs, strict=True)]
        usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": len(completion_ids),
                 "total_tokens": len(prompt_ids) + len(completion_ids)}
        if self.shape == "sglang":
            choice: dict[str, Any] = {
                "index": 0, "message": {"role": "assistant", "reasoning_content": None, **message},
                "logprobs": {"content": content} if want_logprobs else None,
                "finish_reason": finish, "matched_stop": None}
            if want_ids:  # SGLang leaves both out of the choice unless asked
                choice |= {"prompt_token_ids": prompt_ids, "token_ids": completion_ids}
            reply = {"id": "5f2c", "object": "chat.completion", "created": 1764160000, "model": request.model,
                     "choices": [choice], "usage": {**usage, "prompt_tokens_details": None, "reasoning_tokens": 0},
                     "metadata": {"weight_version": "default"}}
        else:  # vllm, and plain: vLLM's shape without any of the extension fields
            reply = {
                "id": "chatcmpl-9b1e", "object": "chat.completion", "created": 1764160000, "model": request.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "refusal": None, "annotations": None,
                                                     "audio": None, "function_call": None, "reasoning": None,
                                                     **message},
                             "logprobs": {"content": content} if want_logprobs else None,
                             "finish_reason": finish, "stop_reason": None,
                             "token_ids": completion_ids if want_ids else None}],
                "service_tier": None, "system_fingerprint": None, "usage": {**usage, "prompt_tokens_details": None},
                "prompt_logprobs": None, "prompt_token_ids": prompt_ids if want_ids else None,
                "kv_transfer_params": None}
            if self.shape == "plain":
                reply = {"id": reply["id"], "object": "chat.completion", "created": reply["created"],
                         "model": request.model, "usage": usage, "choices": [
                             {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}]}
        self.sent[(request.first_user_content, turn)] = {
            "prompt_token_ids": prompt_ids if want_ids else None,
            "completion_token_ids": completion_ids if want_ids else None,
            "logprobs": logprobs if want_logprobs else None, "finish_reason": finish}
        return Reply(200, reply)


def run_eval(tmp_path: Path, server: Any, *, record_tokens: bool, n: int = 3) -> list[Any]:
    root = scaffold(tmp_path, protocol="tool-use")
    policy = make_policy("openai:qwen-test", base_url=server.base_url, record_tokens=record_tokens,
                         sampling={"temperature": 0.7, "max_tokens": 256}, settings=settings(), plugins=PLUGINS)
    out = tmp_path / "records.jsonl"
    try:
        result = envhub.evaluate(root, policy, split="train", n=n, concurrency=2, output=out, trust_code=True)
    finally:
        asyncio.run(policy.aclose())
    assert (result.summary.mean_reward, result.failed) == (1.0, 0)
    return read_records(out)  # through the JSONL file, as a trainer reads them


@pytest.mark.parametrize("shape", ["vllm", "sglang"])
def test_each_turns_tokens_are_what_the_server_sent(tmp_path: Path, openai_server: Any, shape: str) -> None:
    import jsonschema

    script = TokenServer(shape)
    openai_server.script = script
    records = run_eval(tmp_path, openai_server, record_tokens=True)
    assert len(records) == 3
    for record in records:
        prompt = next(m["content"] for m in record.messages if m["role"] == "user")
        assert record.turns == 2 and record.tool_calls  # a tool call, then the answer
        assert [t.model_dump() for t in record.turns_tokens] == [script.sent[(prompt, 0)], script.sent[(prompt, 1)]]
        first, second = record.turns_tokens
        assert first.completion_token_ids and first.logprobs and first.prompt_token_ids  # not None, not empty
        assert len(first.completion_token_ids) == len(first.logprobs)
        assert (first.finish_reason, second.finish_reason) == ("tool_calls", "stop")
        # The second prompt is the first one's conversation carried on, as the server rendered it.
        assert second.prompt_token_ids[:len(first.prompt_token_ids) - len("<assistant>")] == \
            first.prompt_token_ids[:-len("<assistant>")]
        assert record.sampling.model_dump() == {"model": "qwen-test", "temperature": 0.7, "top_p": None,
                                                "max_tokens": 256, "stop": None}
    schema = json.loads(SCHEMA_FILE.read_text())
    for line in (tmp_path / "records.jsonl").read_text().splitlines():
        jsonschema.validate(json.loads(line), schema)
    # Every request asked for the tokens, with the sampling settings.
    for request in openai_server.requests:
        assert (request.json["logprobs"], request.json["return_token_ids"]) == (True, True)
        assert (request.json["temperature"], request.json["max_tokens"]) == (0.7, 256)


def test_without_the_option_the_request_and_the_record_are_as_before(tmp_path: Path, openai_server: Any) -> None:
    openai_server.script = TokenServer("vllm")
    records = run_eval(tmp_path, openai_server, record_tokens=False)
    for request in openai_server.requests:  # OpenAI's API refuses fields it does not know
        assert set(request.json) == {"model", "messages", "tools", "temperature", "max_tokens"}
    assert all(r.turns_tokens is None and r.sampling is None for r in records)
    line = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[0])
    assert (line["turns_tokens"], line["sampling"]) == (None, None)


def test_a_server_that_ignores_the_request_gives_null_fields_not_an_error(tmp_path: Path,
                                                                          openai_server: Any) -> None:
    openai_server.script = TokenServer("plain")
    records = run_eval(tmp_path, openai_server, record_tokens=True, n=2)
    assert openai_server.requests[0].json["return_token_ids"] is True  # asked, and not answered
    for record in records:
        assert [t.model_dump() for t in record.turns_tokens] == [
            {"prompt_token_ids": None, "completion_token_ids": None, "logprobs": None, "finish_reason": "tool_calls"},
            {"prompt_token_ids": None, "completion_token_ids": None, "logprobs": None, "finish_reason": "stop"}]
        assert record.sampling is not None and record.error is None


# --- the client, one reply at a time -----------------------------------------------------------------


def choice(**fields: Any) -> dict[str, Any]:
    return {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop", **fields}


def entry(token: str, logprob: Any) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}


REPLIES = [
    pytest.param({"prompt_token_ids": [1, 2, 3], "choices": [choice(token_ids=[9, 8], logprobs={"content": [
        entry("o", -0.5), entry("k", -9999.0)]})]}, ([1, 2, 3], [9, 8], [-0.5, -9999.0]), id="vllm"),
    pytest.param({"choices": [choice(prompt_token_ids=[1, 2], token_ids=[9], logprobs={"content": [
        entry("ok", 0)]})]}, ([1, 2], [9], [0.0]), id="sglang"),
    pytest.param({"choices": [choice(logprobs={"content": [entry("token_id:31", -1.5), entry("token_id:7", -0.1)]})]},
                 (None, [31, 7], [-1.5, -0.1]), id="vllm-tokens-as-token-ids"),
    pytest.param({"choices": [choice(logprobs={"token_logprobs": [-0.25, -0.5], "tokens": ["o", "k"]})]},
                 (None, None, [-0.25, -0.5]), id="completions-style-logprobs"),
    pytest.param({"choices": [choice(logprobs={"content": []}, token_ids=[])]}, (None, [], []), id="empty-completion"),
    pytest.param({"choices": [choice()]}, (None, None, None), id="openai-no-token-data"),
    pytest.param({"prompt_token_ids": "1 2 3", "choices": [choice(token_ids=[1, "2"], logprobs={"content": [
        entry("o", "-0.5")]})]}, (None, None, None), id="malformed-is-none"),
    pytest.param({"prompt_token_ids": [True], "choices": [choice(token_ids=[1.0], logprobs={"content": [
        entry("o", True)]})]}, (None, None, None), id="bools-and-floats-are-not-ids"),
    pytest.param({"choices": [choice(logprobs={"content": [entry("token_id:x", -1.0)]})]}, (None, None, [-1.0]),
                 id="token-strings-not-ids"),
]


@pytest.mark.parametrize(("body", "expected"), REPLIES)
def test_the_client_reads_token_data_where_each_server_puts_it(openai_server: Any, body: dict[str, Any],
                                                               expected: tuple[Any, Any, Any]) -> None:
    openai_server.script = lambda request: Reply(200, {"id": "x", "object": "chat.completion", "model": "m", **body})

    async def complete() -> Any:
        async with ChatClient(openai_server.base_url, max_retries=0) as client:
            return await client.complete(model="m", messages=[{"role": "user", "content": "hi"}])

    result = asyncio.run(complete())
    assert (result.prompt_token_ids, result.completion_token_ids, result.logprobs) == expected
    assert (result.message, result.finish_reason) == ({"role": "assistant", "content": "ok"}, "stop")


# --- envhub eval --record-tokens (needs the --record-tokens option of envhub/cli/eval.py) ---------------


@pytest.mark.parametrize("flag", [["--record-tokens"], []], ids=["on", "off"])
def test_eval_record_tokens_option(tmp_path: Path, openai_server: Any, envhub_cli: Any, flag: list[str]) -> None:
    script = TokenServer("vllm")
    openai_server.script = script
    root = scaffold(tmp_path, protocol="tool-use")
    out = tmp_path / "o.jsonl"
    result = envhub_cli("eval", str(root), "-s", "train", "-n", "2", "-p", "openai:qwen-test", "--base-url",
                        openai_server.base_url, "-o", str(out), "--trust", "--json", *flag)
    assert result.code == 0, result.err
    asked = [("logprobs" in r.json, "return_token_ids" in r.json) for r in openai_server.requests]
    assert asked == [(bool(flag), bool(flag))] * 4
    for record in read_records(out):
        prompt = next(m["content"] for m in record.messages if m["role"] == "user")
        if flag:
            assert [t.model_dump() for t in record.turns_tokens] == [script.sent[(prompt, 0)], script.sent[(prompt, 1)]]
            assert record.sampling.model == "qwen-test"
        else:
            assert (record.turns_tokens, record.sampling) == (None, None)


def test_evaluate_refuses_record_tokens_for_a_policy_object(tmp_path: Path) -> None:
    from envhub.errors import UsageError

    policy = make_policy("noop", settings=settings(), plugins=PLUGINS)
    with pytest.raises(UsageError) as exc:
        envhub.evaluate(scaffold(tmp_path), policy, split="train", record_tokens=True)
    assert exc.value.message == "record_tokens applies to a policy named by its spec, not to a policy object"
