"""A client for any OpenAI-compatible ``/chat/completions`` endpoint.

One request per :meth:`ChatClient.complete`, retried with exponential backoff and jitter on
408, 409, 429, 5xx, timeouts and connection errors, honouring ``Retry-After``. 400, 401, 403
and 404 are answered at once with a :class:`~envhub.errors.PolicyError` that says what to check.
So is a connection that cannot be made before the endpoint has ever answered this client: a
wrong URL or a server that is not running fails in a moment, not after minutes of retries.

Requests go through an :class:`~envhub.runtime._http.HttpClient` (aiohttp from an event loop),
not the ``openai`` package: the request is one JSON POST, and retries must be ours to count
and record.
"""

from __future__ import annotations

import asyncio
import json
import time
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from envhub.errors import PolicyError
from envhub.runtime._http import (
    ConnectError,
    HttpClient,
    HttpResponse,
    Timeout,
    TransportError,
    backoff,
    retry_after,
)
from envhub.runtime._types import Message

__all__ = ["DEFAULT_BASE_URL", "TOKEN_REQUEST_FIELDS", "ChatClient", "ChatResult"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Statuses worth another attempt: rate limits, overload, lock contention, server errors.
_RETRY_STATUSES = frozenset({408, 409, 429})
#: A server asking for a longer pause than this is out of service; waiting is not a retry.
_MAX_RETRY_AFTER_S = 120.0


@dataclass(frozen=True, slots=True)
class ChatResult:
    """One completion: the assistant ``message``, the server's ``usage`` (token counts, as
    sent), the wall-clock ``latency_s`` including retries, and the ``attempts`` it took."""

    message: Message
    usage: Mapping[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    attempts: int = 1
    finish_reason: str | None = None
    #: The model the server says answered (may differ from the one asked for, e.g. a snapshot).
    model: str | None = None
    #: The token ids of the prompt as the server rendered it (chat template applied), when it
    #: sent them: vLLM and SGLang do when asked with ``return_token_ids`` (see :func:`_token_data`).
    prompt_token_ids: list[int] | None = None
    #: The token ids the model sampled for this completion, when the server sent them.
    completion_token_ids: list[int] | None = None
    #: The log-probability of each sampled token (``logprobs.content[].logprob``), when the
    #: server sent them (asked with ``logprobs: true``).
    logprobs: list[float] | None = None


class ChatClient:
    """An async client for one OpenAI-compatible endpoint.

    ``base_url`` is the API root (``https://api.openai.com/v1``, ``http://127.0.0.1:8000/v1``);
    requests go to ``{base_url}/chat/completions``. ``max_retries`` counts retries after the
    first attempt. ``backoff_base_s`` is the first pause; each retry doubles it, up to
    ``backoff_max_s``, less up to 25% jitter. ``max_connections`` bounds open connections
    (size it to the runner's concurrency). Pass ``http``, an
    :class:`~envhub.runtime._http.HttpClient`, to share its connections with other clients of
    the run (it is then yours to close, and its ``max_connections`` applies); without one the
    client makes its own and closes it in :meth:`aclose`.

    The client is safe to share between the tasks of one event loop. Its connections belong
    to the loop that first used them; used from another loop (a later ``asyncio.run``), it
    opens new ones rather than reuse connections bound to a closed loop.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        max_connections: int = 256,
        headers: Mapping[str, str] | None = None,
        http: HttpClient | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._timeout_s = timeout  # waiting for a free connection is not a failure (HttpClient's rule)
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._own_http = http is None
        self._http = http if http is not None else HttpClient(max_connections=max_connections, timeout_s=timeout)
        #: Whether the endpoint has answered (any status) since this client was made: until
        #: it has, a refused connection is a wrong URL or a server that is not up, not a blip.
        self._answered = False

    def __repr__(self) -> str:  # never the key
        return f"ChatClient({self.base_url!r})"

    # --- the request --------------------------------------------------------------------

    def _body(self, model: str, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None,
              sampling: Mapping[str, Any]) -> bytes:
        """The request's JSON, encoded once for every attempt. Raises :class:`PolicyError` for
        a value JSON cannot hold."""
        payload: dict[str, Any] = {"model": model, "messages": list(messages)}
        if tools:  # some servers reject "tools": [] outright
            payload["tools"] = list(tools)
        payload.update((k, v) for k, v in sampling.items() if v is not None)
        try:
            return orjson.dumps(payload, default=_jsonable)
        except TypeError as e:
            raise PolicyError(f"POST {self.url}: the request cannot be sent as JSON: {e}",
                              hint="messages, tools and sampling parameters must hold JSON values "
                                   "(str, numbers, bools, None, lists, dicts)") from None

    async def complete(self, *, model: str, messages: Sequence[Message],
                       tools: Sequence[Mapping[str, Any]] | None = None, **sampling: Any) -> ChatResult:
        """The first choice's assistant message for ``messages`` (and ``tools``, when any).

        ``sampling`` is sent as is (``temperature``, ``top_p``, ``max_tokens``, ``stop``, ...;
        ``None`` values are dropped). Raises :class:`PolicyError` for a request the endpoint
        refuses, a reply that is not a chat completion, or a failure that outlives the retries.
        """
        content = self._body(model, messages, tools, sampling)
        start = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request("POST", self.url, content=content, headers=self._headers,
                                                     timeout_s=self._timeout_s)
            except TransportError as e:
                failure: HttpResponse | TransportError = e
            else:
                self._answered = True
                if response.status == 200:
                    return self._result(response, start, attempt)
                failure = response
            delay = self._retry_delay(failure, attempt)
            if delay is None:
                raise self._error(failure, attempt)
            await asyncio.sleep(delay)

    def complete_sync(self, *, model: str, messages: Sequence[Message],
                      tools: Sequence[Mapping[str, Any]] | None = None, **sampling: Any) -> ChatResult:
        """:meth:`complete` for synchronous callers (a verifier's ``score``), with the same
        retries and errors, on a blocking connection pool of its own."""
        content = self._body(model, messages, tools, sampling)
        start = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request_sync("POST", self.url, content=content, headers=self._headers,
                                                   timeout_s=self._timeout_s)
            except TransportError as e:
                failure: HttpResponse | TransportError = e
            else:
                self._answered = True
                if response.status == 200:
                    return self._result(response, start, attempt)
                failure = response
            delay = self._retry_delay(failure, attempt)
            if delay is None:
                raise self._error(failure, attempt)
            time.sleep(delay)

    # --- the reply ----------------------------------------------------------------------

    def _result(self, response: HttpResponse, start: float, attempts: int) -> ChatResult:
        try:
            body = response.json()
            choice = body["choices"][0]
            raw = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise PolicyError(
                f"POST {self.url} returned 200 but not a chat completion: {_excerpt(response.text)}",
                hint="check that the base URL points at an OpenAI-compatible API root (it usually ends in /v1)",
            ) from None
        if not isinstance(raw, Mapping):
            raise PolicyError(f"POST {self.url} returned a choice whose message is not an object: "
                              f"{_excerpt(response.text)}")
        prompt_ids, completion_ids, logprobs = _token_data(body, choice)
        return ChatResult(
            message=_assistant_message(raw),
            usage=body.get("usage") or {},
            latency_s=time.perf_counter() - start,
            attempts=attempts,
            finish_reason=choice.get("finish_reason"),
            model=body.get("model"),
            prompt_token_ids=prompt_ids,
            completion_token_ids=completion_ids,
            logprobs=logprobs,
        )

    def _retry_delay(self, failure: HttpResponse | TransportError, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or None when there is none to make."""
        if attempt > self.max_retries:
            return None
        if isinstance(failure, ConnectError) and not self._answered:
            return None  # never reached: retrying a wrong URL or a stopped server only delays the error
        if isinstance(failure, HttpResponse):
            if failure.status not in _RETRY_STATUSES and failure.status < 500:
                return None
            asked = retry_after(failure.headers, limit=_MAX_RETRY_AFTER_S)
            if asked is not None:
                return asked
        return backoff(attempt, self.backoff_base_s, self.backoff_max_s)

    def _error(self, failure: HttpResponse | TransportError, attempts: int) -> PolicyError:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        if isinstance(failure, ConnectError) and not self._answered:
            return PolicyError(
                f"POST {self.url} failed: cannot connect to {self.base_url}: {failure or 'no detail'}",
                hint="check the base URL (--base-url, OPENAI_BASE_URL) and that the server is running and reachable",
            )
        if isinstance(failure, TransportError):
            kind = "timed out" if isinstance(failure, Timeout) else "failed"
            return PolicyError(
                f"POST {self.url} {kind}{tries}: {type(failure).__name__}: {failure or 'no detail'}",
                hint="check the base URL and that the server is running and reachable; "
                     "raise the timeout or allow more retries for a slow server",
            )
        status = failure.status
        message = f"POST {self.url} failed with {status} {failure.reason}{tries}: {_server_message(failure)}"
        hint = _HINTS.get(status)
        if hint is None:
            hint = ("the endpoint is overloaded or failing; lower the concurrency (-c) or allow more retries"
                    if status in _RETRY_STATUSES or status >= 500 else
                    "check the base URL, the model name and the request parameters")
        return PolicyError(message, hint=hint)

    # --- closing ------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connections this client opened (not an ``http`` client passed in)."""
        if self._own_http:
            await self._http.aclose()

    def close_sync(self) -> None:
        """Close the blocking pool of :meth:`complete_sync` (not an ``http`` client's passed in)."""
        if self._own_http:
            self._http.close_sync()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_HINTS = {
    400: "the endpoint rejected the request: check the model name and that it supports the sampling "
         "parameters and tools sent",
    401: "check the API key (OPENAI_API_KEY, or the variable the manifest names) for this endpoint",
    403: "the API key is valid but may not use this model or endpoint: check its permissions and the model name",
    404: "check the base URL (an API root such as https://api.openai.com/v1) and the model name",
}


def _jsonable(value: Any) -> Any:
    """What orjson does not encode itself but a request may hold: any other mapping or
    sequence (a ``MappingProxyType``, a tuple subclass)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def _assistant_message(raw: Mapping[str, Any]) -> Message:
    """The fields of a returned message a conversation can carry forward, normalised.

    Servers differ in what they add (``refusal``, ``audio``, ``reasoning_content``) and some
    reject those fields when sent back; keep the chat-completions core. Tool call arguments
    stay the string the model produced, valid JSON or not: the harness reports a malformed call
    to the model instead of the client failing the episode.
    """
    message: Message = {"role": "assistant", "content": raw.get("content")}
    calls = raw.get("tool_calls")
    if calls:
        normalised = []
        for i, call in enumerate(calls):
            function = dict(call.get("function") or {})
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                # A few servers send a parsed object; the OpenAI format is a JSON string.
                arguments = json.dumps(arguments if arguments is not None else {})
            normalised.append({
                "id": call.get("id") or f"call_{i}",
                "type": call.get("type") or "function",
                "function": {"name": function.get("name") or "", "arguments": arguments},
            })
        message["tool_calls"] = normalised
    return message


#: The request fields that ask an OpenAI-compatible server for the tokens behind a completion.
#: Both vLLM and SGLang accept exactly these on /v1/chat/completions (non-streaming):
#: - ``logprobs: true``: the standard OpenAI field; ``choices[0].logprobs.content[]`` then holds
#:   ``{token, logprob, bytes, top_logprobs}`` per sampled token (vLLM
#:   vllm/entrypoints/openai/chat_completion/protocol.py ``ChatCompletionLogProbsContent``;
#:   SGLang python/sglang/srt/entrypoints/openai/protocol.py ``ChatCompletionTokenLogprob``).
#:   ``top_logprobs`` is left out: it defaults to 0 (vLLM) / None (SGLang), the sampled token only.
#: - ``return_token_ids: true``: an extension (vLLM ``ChatCompletionRequest.return_token_ids``;
#:   SGLang the same name since sgl-project/sglang#30917). vLLM answers with the prompt's ids on
#:   the response (``prompt_token_ids``) and the completion's on the choice
#:   (``choices[0].token_ids``); SGLang puts both on the choice (``choices[0].prompt_token_ids``,
#:   ``choices[0].token_ids``).
#: vLLM's own test of the chat shape: tests/entrypoints/openai/basic/test_return_token_ids.py
#: (``response.prompt_token_ids``, ``response.choices[0].token_ids``; both None when not asked).
#: Neither is sent unless asked for: OpenAI's own API refuses unknown fields such as
#: ``return_token_ids``, and a server that ignores them answers without the data (None fields).
TOKEN_REQUEST_FIELDS: Mapping[str, Any] = types.MappingProxyType({"logprobs": True, "return_token_ids": True})


def _token_ids(value: Any) -> list[int] | None:
    """``value`` if it is a list of token ids (ints), else None (absent or not ids)."""
    if isinstance(value, list) and all(type(v) is int for v in value):
        return value
    return None


def _token_data(body: Mapping[str, Any],
                choice: Mapping[str, Any]) -> tuple[list[int] | None, list[int] | None, list[float] | None]:
    """The prompt's token ids, the completion's token ids and the completion's per-token
    log-probs in a chat completion, each None when the server did not send it (or sent
    something that is not one): a server that ignores the request is not an error.

    Where each server puts them (see :data:`TOKEN_REQUEST_FIELDS`): the prompt's ids on the
    response (vLLM) or on the choice (SGLang); the completion's on the choice (both); the
    log-probs in ``logprobs.content[].logprob`` (the OpenAI shape, both), or in the completions
    API's ``logprobs.token_logprobs`` (the other shape SGLang's chat choice may carry). A vLLM
    started with ``--return-tokens-as-token-ids`` (or asked with ``return_tokens_as_token_ids``)
    spells each token ``"token_id:{id}"``; the completion's ids are read from those when
    ``token_ids`` is absent (vLLM before ``return_token_ids``).

    >>> _token_data({"prompt_token_ids": [1, 2]}, {"token_ids": [7], "logprobs": {"content": [
    ...     {"token": "hi", "logprob": -0.25, "bytes": [104, 105], "top_logprobs": []}]}})
    ([1, 2], [7], [-0.25])
    >>> _token_data({}, {"logprobs": {"content": [{"token": "token_id:42", "logprob": 0}]}})
    (None, [42], [0.0])
    >>> _token_data({}, {"logprobs": None})
    (None, None, None)
    """
    prompt = _token_ids(body.get("prompt_token_ids"))
    if prompt is None:
        prompt = _token_ids(choice.get("prompt_token_ids"))
    completion = _token_ids(choice.get("token_ids"))
    logprobs: list[float] | None = None
    raw = choice.get("logprobs")
    if isinstance(raw, Mapping):
        content = raw.get("content")
        if isinstance(content, list) and all(isinstance(entry, Mapping) for entry in content):
            logprobs = _numbers([entry.get("logprob") for entry in content])
            if completion is None and content:
                completion = _ids_from_tokens([entry.get("token") for entry in content])
        elif isinstance(raw.get("token_logprobs"), list):
            logprobs = _numbers(raw["token_logprobs"])
    return prompt, completion, logprobs


def _numbers(values: list[Any]) -> list[float] | None:
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return [float(v) for v in values]
    return None


def _ids_from_tokens(tokens: list[Any]) -> list[int] | None:
    """The ids of tokens spelt ``"token_id:{id}"`` (vLLM's ``return_tokens_as_token_ids``),
    or None if any is spelt otherwise."""
    ids = []
    for token in tokens:
        if not isinstance(token, str) or not token.startswith("token_id:") or not token[9:].isdigit():
            return None
        ids.append(int(token[9:]))
    return ids


def _server_message(response: HttpResponse) -> str:
    """The error message the server sent: OpenAI's ``{"error": {"message"}}`` and common variants."""
    try:
        body = response.json()
    except ValueError:
        return _excerpt(response.text) or "(empty body)"
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            for key in ("message", "detail", "msg"):
                if isinstance(message := err.get(key), str):
                    return message
        elif isinstance(err, str):
            return err
        if isinstance(detail := body.get("detail"), str):
            return detail
    return _excerpt(response.text)


def _excerpt(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
