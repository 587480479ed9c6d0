"""TEST INFRASTRUCTURE: an OpenAI-compatible chat-completions server on 127.0.0.1.

Not part of envhub. The tests (and the bench scripts) run the real client against it over
real HTTP, so retries, headers, JSON and keep-alive are exercised rather than mocked.

The server answers ``POST .../chat/completions`` from a *script*: a callable that takes the
:class:`Request` and returns one of

- a ``str``: the assistant's text;
- a ``dict``: the assistant message (``content`` and/or ``tool_calls``);
- a :class:`Reply`: a raw HTTP status, JSON body and headers (errors, malformed bodies);
- an awaitable of any of these (to answer slowly without blocking other connections).

Every request is recorded in ``server.requests`` so a test can assert what was sent.

It is a small HTTP/1.1 server on ``asyncio.start_server`` running in a thread of its own:
keep-alive, ``TCP_NODELAY``, a backlog of 2048. Chosen by measurement against
``ThreadingHTTPServer`` (a thread per connection), each in its own process, at concurrency 256
(``python -m tests.openai_server --bench``, 2-CPU VM): 10,500 to 12,600 requests/s against
3,700 to 4,000 with a raw keep-alive client. A client in the same process is the limit (envhub's
aiohttp-based ``HttpClient`` reaches ~6,000-6,800 requests/s at concurrency 256, bench/http_clients.py),
so benchmarks should run the server as a process.

Use it as a pytest fixture (``openai_server`` in ``tests/conftest.py``), as a context manager
(``with serve(script) as server: server.base_url``), or as a process
(``python -m tests.openai_server --answers table.json`` prints the base URL), which keeps the
server off the client's GIL in benchmarks.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "OpenAIServer",
    "Reply",
    "Request",
    "answer_table",
    "echo_last_user",
    "error",
    "fail_then",
    "malformed_tool_call",
    "serve",
    "tool_then_answer",
]


@dataclass
class Request:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    json: Any = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.json or {}).get("messages") or [])

    @property
    def model(self) -> str | None:
        return (self.json or {}).get("model")

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        return (self.json or {}).get("tools")

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    @property
    def first_user_content(self) -> str:
        for message in self.messages:
            if message.get("role") == "user":
                return message.get("content") or ""
        return ""


@dataclass
class Reply:
    """A raw HTTP reply: any status, a JSON body (or raw bytes), extra headers."""

    status: int = 200
    json: Any = None
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


ScriptResult = str | dict | Reply
Script = Callable[[Request], ScriptResult | Awaitable[ScriptResult]]

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            408: "Request Timeout", 413: "Payload Too Large", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout"}


# --- scripts --------------------------------------------------------------------------------


def error(status: int, message: str, *, type: str = "invalid_request_error",
          headers: Mapping[str, str] | None = None) -> Reply:
    """An error reply in OpenAI's shape: ``{"error": {"message", "type", "code"}}``."""
    return Reply(status, {"error": {"message": message, "type": type, "code": None}}, headers=dict(headers or {}))


def answer_table(table: Mapping[str, str], *, default: str = "") -> Script:
    """Answer each request with ``table[first user message]`` (the task prompt), else ``default``."""

    def script(request: Request) -> str:
        return table.get(request.first_user_content, default)

    return script


def echo_last_user(request: Request) -> str:
    """Answer with the content of the last user message."""
    for message in reversed(request.messages):
        if message.get("role") == "user":
            return message.get("content") or ""
    return ""


def tool_then_answer(tool: str, arguments: Mapping[str, Any] | str,
                     answer: str | Callable[[str], str]) -> Script:
    """Call ``tool`` with ``arguments`` first; once a tool result is in the conversation,
    answer ``answer`` (or ``answer(last tool result)``)."""
    counter = itertools.count(1)

    def script(request: Request) -> ScriptResult:
        results = [m for m in request.messages if m.get("role") == "tool"]
        if results:
            return answer(results[-1].get("content") or "") if callable(answer) else answer
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": f"call_{next(counter)}", "type": "function",
                                "function": {"name": tool, "arguments": raw}}]}

    return script


def malformed_tool_call(tool: str, raw_arguments: str = '{"query": "SELECT 1"') -> Script:
    """Always call ``tool`` with arguments that are not valid JSON (by default a cut-off object)."""

    def script(request: Request) -> ScriptResult:
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": "call_bad", "type": "function",
                                "function": {"name": tool, "arguments": raw_arguments}}]}

    return script


def fail_then(script: Script, *, times: int, status: int = 429, retry_after: float | None = None,
              message: str | None = None) -> Script:
    """Fail the first ``times`` requests with ``status`` (and a ``Retry-After`` header when
    given), then hand every request to ``script``."""
    remaining = [times]

    def failing(request: Request) -> Any:
        if remaining[0] > 0:
            remaining[0] -= 1
            headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
            text = message or _REASONS.get(status, "error")
            return error(status, text, type="rate_limit_error" if status == 429 else "server_error", headers=headers)
        return script(request)

    return failing


# --- the server -----------------------------------------------------------------------------


class OpenAIServer:
    """A running server: ``base_url`` (ends in ``/v1``), ``requests``, and a settable ``script``."""

    def __init__(self, script: Script | None = None, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.script: Script = script or (lambda request: "")
        self.requests: list[Request] = []
        self._host, self._port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._ids = itertools.count(1)
        self.base_url = ""

    # lifecycle

    def start(self) -> OpenAIServer:
        self._thread = threading.Thread(target=self._run, name="openai-test-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the test server did not start")
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def attempts(self) -> int:
        """Chat-completion requests received so far."""
        return sum(1 for r in self.requests if r.path.endswith("/chat/completions"))

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(
            asyncio.start_server(self._connection, self._host, self._port, backlog=2048))
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://{self._host}:{port}/v1"
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    # HTTP/1.1: just enough for JSON requests with Content-Length, keep-alive by default

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, version = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                request = Request(method, path.split("?", 1)[0], headers, body)
                status, payload, extra = await self._respond(request)
                keep_alive = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
                lines_out = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
                             "Content-Type: application/json",
                             f"Content-Length: {len(payload)}",
                             "Connection: keep-alive" if keep_alive else "Connection: close"]
                lines_out.extend(f"{k}: {v}" for k, v in extra.items())
                writer.write(("\r\n".join(lines_out) + "\r\n\r\n").encode("latin-1") + payload)
                await writer.drain()
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            writer.close()

    async def _respond(self, request: Request) -> tuple[int, bytes, dict[str, str]]:
        try:
            request.json = json.loads(request.body) if request.body else None
        except ValueError:
            return _reply_bytes(error(400, "the request body is not JSON"))
        self.requests.append(request)
        if request.method == "GET" and request.path.endswith("/models"):
            return _reply_bytes(Reply(200, {"object": "list", "data": []}))
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return _reply_bytes(error(404, f"no route {request.method} {request.path}"))
        try:
            result = self.script(request)
            if inspect.isawaitable(result):
                result = await result
        except Exception as e:  # a broken script is a 500 the test can see, not a hung client
            return _reply_bytes(error(500, f"script raised {type(e).__name__}: {e}", type="server_error"))
        if isinstance(result, Reply):
            return _reply_bytes(result)
        message = {"role": "assistant", "content": result} if isinstance(result, str) else dict(result)
        message.setdefault("role", "assistant")
        message.setdefault("content", None)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in request.messages)
        completion_tokens = len(str(message.get("content") or "").split())
        return _reply_bytes(Reply(200, {
            "id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
            "model": request.model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }))


def _reply_bytes(reply: Reply) -> tuple[int, bytes, dict[str, str]]:
    payload = reply.body if reply.body is not None else json.dumps(reply.json).encode()
    return reply.status, payload, reply.headers


@contextmanager
def serve(script: Script | None = None, *, port: int = 0) -> Iterator[OpenAIServer]:
    """Run a server for the ``with`` block; yields it (``server.base_url``, ``server.requests``)."""
    server = OpenAIServer(script, port=port).start()
    try:
        yield server
    finally:
        server.stop()


# --- as a process: python -m tests.openai_server ---------------------------------------------


def _main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.openai_server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--answers", help="a JSON object {task prompt: answer}; default: echo the last user message")
    parser.add_argument("--bench", action="store_true", help="measure requests/s at concurrency 256 and exit")
    parser.add_argument("--threading", action="store_true", help=argparse.SUPPRESS)  # the measured alternative
    args = parser.parse_args(argv)
    if args.bench:
        _bench()
        return
    if args.threading:
        with _threading_server() as base_url:
            print(base_url, flush=True)
            threading.Event().wait()
    script: Script = echo_last_user
    if args.answers:
        with open(args.answers, encoding="utf-8") as f:
            script = answer_table(json.load(f))
    server = OpenAIServer(script, port=args.port).start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


def _bench(concurrency: int = 256) -> None:
    """Requests/s at ``concurrency``, each server in its own process: the server's capacity
    (a raw keep-alive asyncio client) and what one httpx2.AsyncClient gets from it."""
    import subprocess
    import sys

    import httpx2

    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()

    async def raw(base_url: str, total: int) -> float:
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body))
        left = [total]

        async def worker() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            while left[0] > 0:
                left[0] -= 1
                writer.write(head + body)
                response_head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in response_head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                await reader.readexactly(length)
            writer.close()

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return total / (time.perf_counter() - start)

    async def client(base_url: str, total: int) -> float:
        limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx2.AsyncClient(limits=limits, timeout=60) as http:
            left = [total]

            async def worker() -> None:
                while left[0] > 0:
                    left[0] -= 1
                    (await http.post(base_url + "/chat/completions", content=body)).raise_for_status()

            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return total / (time.perf_counter() - start)

    for label, flags in (("asyncio server", []), ("ThreadingHTTPServer", ["--threading"])):
        proc = subprocess.Popen([sys.executable, "-m", "tests.openai_server", *flags], stdout=subprocess.PIPE,
                                text=True)
        try:
            base_url = (proc.stdout.readline() if proc.stdout else "").strip()
            capacity = asyncio.run(raw(base_url, 20_000))
            through_httpx2 = asyncio.run(client(base_url, 4_000))
        finally:
            proc.terminate()
            proc.wait()
        print(f"{label:20} raw client {capacity:8.0f} req/s   httpx2.AsyncClient {through_httpx2:6.0f} req/s"
              f"   (concurrency {concurrency})")


@contextmanager
def _threading_server() -> Iterator[str]:
    """The alternative measured by ``--bench``: stdlib ThreadingHTTPServer, keep-alive."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            payload = json.dumps({"id": "x", "object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer.request_queue_size = 2048
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


if __name__ == "__main__":
    _main()
