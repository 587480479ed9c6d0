"""ChatClient against a real OpenAI-compatible server on 127.0.0.1 (tests/openai_server.py)."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from envhub.errors import PolicyError
from envhub.runtime._chat import ChatClient
from tests.openai_server import Reply, error, fail_then, malformed_tool_call, tool_then_answer

USER = [{"role": "user", "content": "What is 2+2?"}]


def client(server, **kwargs) -> ChatClient:  # type: ignore[no-untyped-def]
    kwargs.setdefault("backoff_base_s", 0.001)  # real backoff, kept short so the suite stays fast
    return ChatClient(server.base_url, kwargs.pop("api_key", "sk-test"), **kwargs)


def complete(chat: ChatClient, **kwargs):  # type: ignore[no-untyped-def]
    async def run():  # type: ignore[no-untyped-def]
        try:
            return await chat.complete(model=kwargs.pop("model", "m-1"), messages=kwargs.pop("messages", USER),
                                       **kwargs)
        finally:
            await chat.aclose()

    return asyncio.run(run())


def test_returns_the_message_usage_and_sends_the_request(openai_server) -> None:
    openai_server.script = lambda request: "4"
    result = complete(client(openai_server), temperature=0.2, max_tokens=8, top_p=None)
    assert result.message == {"role": "assistant", "content": "4"}
    assert result.attempts == 1
    assert result.finish_reason == "stop"
    assert result.usage == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    assert result.latency_s > 0
    [request] = openai_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.authorization == "Bearer sk-test"
    # None values are not sent; no tools means no "tools" key at all
    assert request.json == {"model": "m-1", "messages": USER, "temperature": 0.2, "max_tokens": 8}


def test_no_key_sends_no_authorization(openai_server) -> None:
    complete(client(openai_server, api_key=None))
    assert openai_server.requests[0].authorization is None


def test_tools_are_sent_and_tool_calls_returned(openai_server) -> None:
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}]
    openai_server.script = tool_then_answer("add", {"a": 2, "b": 2}, "4")
    result = complete(client(openai_server), tools=tools)
    assert openai_server.requests[0].tools == tools
    assert result.finish_reason == "tool_calls"
    assert result.message == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}]}


def test_malformed_tool_arguments_are_passed_through(openai_server) -> None:
    openai_server.script = malformed_tool_call("run_sql", '{"query": "SELECT')
    result = complete(client(openai_server))
    assert result.message["tool_calls"][0]["function"]["arguments"] == '{"query": "SELECT'


def test_tool_calls_are_normalised(openai_server) -> None:
    # A server that sends parsed arguments and no id or type: the OpenAI form comes back.
    openai_server.script = lambda request: {"content": "", "refusal": None, "reasoning_content": "hm",
                                            "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}
    result = complete(client(openai_server))
    assert result.message == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]}


@pytest.mark.parametrize("status", [429, 500, 502, 503, 408], ids=str)
def test_retries_then_succeeds(openai_server, status: int) -> None:
    openai_server.script = fail_then(lambda request: "ok", times=2, status=status)
    result = complete(client(openai_server, max_retries=2))
    assert result.message["content"] == "ok"
    assert result.attempts == 3
    assert openai_server.attempts == 3


def test_retry_after_is_honoured(openai_server) -> None:
    openai_server.script = fail_then(lambda request: "ok", times=1, status=429, retry_after=0.3)
    start = time.perf_counter()
    result = complete(client(openai_server, backoff_base_s=0.0))
    assert result.attempts == 2
    assert time.perf_counter() - start >= 0.3


def test_backoff_grows_exponentially(openai_server) -> None:
    # 3 retries with base 0.05 s: at least 0.05*(1+2+4)*0.75 (jitter takes up to a quarter off)
    openai_server.script = fail_then(lambda request: "ok", times=3, status=503)
    start = time.perf_counter()
    complete(client(openai_server, max_retries=3, backoff_base_s=0.05))
    assert time.perf_counter() - start >= 0.05 * 7 * 0.75


def test_gives_up_after_the_last_retry(openai_server) -> None:
    openai_server.script = fail_then(lambda request: "ok", times=10, status=429, message="Rate limit reached for m-1")
    with pytest.raises(PolicyError) as exc:
        complete(client(openai_server, max_retries=2))
    assert openai_server.attempts == 3
    assert exc.value.message == (
        f"POST {openai_server.base_url}/chat/completions failed with 429 Too Many Requests after 3 attempts: "
        "Rate limit reached for m-1")
    assert exc.value.hint == "the endpoint is overloaded or failing; lower the concurrency (-c) or allow more retries"


@pytest.mark.parametrize(("status", "server_message", "hint"), [
    (401, "Incorrect API key provided: sk-test.", "check the API key (OPENAI_API_KEY, or the variable the manifest "
                                                  "names) for this endpoint"),
    (403, "You are not allowed to sample from this model", "the API key is valid but may not use this model or "
                                                           "endpoint: check its permissions and the model name"),
    (404, "The model `m-1` does not exist", "check the base URL (an API root such as https://api.openai.com/v1) "
                                            "and the model name"),
    (400, "Unsupported parameter: 'top_p'", "the endpoint rejected the request: check the model name and that it "
                                            "supports the sampling parameters and tools sent"),
], ids=["401", "403", "404", "400"])
def test_client_errors_are_not_retried(openai_server, status: int, server_message: str, hint: str) -> None:
    openai_server.script = lambda request: error(status, server_message)
    with pytest.raises(PolicyError) as exc:
        complete(client(openai_server, max_retries=5))
    assert openai_server.attempts == 1
    reason = {401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 400: "Bad Request"}[status]
    assert exc.value.message == (
        f"POST {openai_server.base_url}/chat/completions failed with {status} {reason}: {server_message}")
    assert exc.value.hint == hint


def test_a_non_json_error_body_is_quoted(openai_server) -> None:
    openai_server.script = lambda request: Reply(502, body=b"<html>bad gateway</html>")
    with pytest.raises(PolicyError) as exc:
        complete(client(openai_server, max_retries=0))
    assert exc.value.message == (
        f"POST {openai_server.base_url}/chat/completions failed with 502 Bad Gateway: <html>bad gateway</html>")


def test_a_reply_that_is_not_a_completion(openai_server) -> None:
    openai_server.script = lambda request: Reply(200, {"object": "list", "data": []})
    with pytest.raises(PolicyError) as exc:
        complete(client(openai_server))
    assert exc.value.message == (f"POST {openai_server.base_url}/chat/completions returned 200 but not a chat "
                                 'completion: {"object": "list", "data": []}')


def _free_port() -> int:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_endpoint_never_reached_fails_at_once() -> None:
    port = _free_port()
    chat = ChatClient(f"http://127.0.0.1:{port}/v1", max_retries=5, backoff_base_s=10)  # a retry would take 10 s
    started = time.perf_counter()
    with pytest.raises(PolicyError) as exc:
        complete(chat)
    assert time.perf_counter() - started < 5
    assert exc.value.message.startswith(
        f"POST http://127.0.0.1:{port}/v1/chat/completions failed: cannot connect to http://127.0.0.1:{port}/v1: ")
    assert exc.value.hint == ("check the base URL (--base-url, OPENAI_BASE_URL) and that the server is running "
                              "and reachable")


def test_connection_refused_after_the_endpoint_answered_is_retried_then_reported() -> None:
    from tests.openai_server import OpenAIServer

    port = _free_port()
    chat = ChatClient(f"http://127.0.0.1:{port}/v1", max_retries=2, backoff_base_s=0.001)

    async def twice():  # type: ignore[no-untyped-def]
        with OpenAIServer(lambda request: "4", port=port):
            await chat.complete(model="m-1", messages=USER)
        try:
            return await chat.complete(model="m-1", messages=USER)  # the server has gone
        finally:
            await chat.aclose()

    with pytest.raises(PolicyError) as exc:
        asyncio.run(twice())
    assert exc.value.message.startswith(
        f"POST http://127.0.0.1:{port}/v1/chat/completions failed after 3 attempts: ConnectError: ")
    assert exc.value.hint is not None and exc.value.hint.startswith("check the base URL")


def test_a_timeout_is_reported_as_one(openai_server) -> None:
    async def slow(request):  # type: ignore[no-untyped-def]
        await asyncio.sleep(1)
        return "late"

    openai_server.script = slow
    with pytest.raises(PolicyError) as exc:
        complete(client(openai_server, timeout=0.1, max_retries=0))
    assert exc.value.message.startswith(f"POST {openai_server.base_url}/chat/completions timed out: ReadTimeout")


def test_the_key_never_appears_in_repr_or_errors(openai_server) -> None:
    openai_server.script = lambda request: error(401, "bad key")
    chat = client(openai_server, api_key="sk-secret-123")
    assert "sk-secret" not in repr(chat)
    with pytest.raises(PolicyError) as exc:
        complete(chat)
    assert "sk-secret" not in str(exc.value)


def test_sync_completion_retries_too(openai_server) -> None:
    openai_server.script = fail_then(lambda request: "ok", times=1, status=500)
    chat = client(openai_server)
    try:
        result = chat.complete_sync(model="m", messages=USER, temperature=0.0)
    finally:
        chat.close_sync()
    assert (result.message["content"], result.attempts) == ("ok", 2)
    assert openai_server.requests[0].json["temperature"] == 0.0


def test_one_client_serves_several_event_loops(openai_server) -> None:
    # The runner and sync wrappers may call asyncio.run more than once with the same client.
    openai_server.script = lambda request: "ok"
    chat = client(openai_server)
    for _ in range(2):
        assert asyncio.run(chat.complete(model="m", messages=USER)).message["content"] == "ok"
    asyncio.run(chat.aclose())


def test_concurrency_256_keeps_connections_alive(openai_server) -> None:
    openai_server.script = lambda request: "ok"

    async def run() -> list[str]:
        async with ChatClient(openai_server.base_url, max_connections=256) as chat:
            results = await asyncio.gather(*(chat.complete(model="m", messages=USER) for _ in range(512)))
        return [r.message["content"] for r in results]

    assert asyncio.run(run()) == ["ok"] * 512
    assert openai_server.attempts == 512


# Retry-After's forms are read by envhub.runtime._http.retry_after: tests/test_http_core.py.
