"""envhub.runtime._http: the HTTP client under the chat client and the served-environment client,
against real servers in their own processes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import email.utils
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
import pytest

from envhub.runtime._http import (
    ConnectError,
    HttpClient,
    HttpResponse,
    ReadError,
    ReadTimeout,
    TransportError,
    backoff,
    jitter,
    retry_after,
)

# A small HTTP/1.1 server (keep-alive) whose listen backlog is argv[1]. Paths:
#   /echo  -> {"target": the request target as sent, "port": the client's port, "body": the body}
#   /slow  -> the same, after 2 s
#   /drop  -> closes the connection without an answer
#   /busy  -> 503 with Retry-After: 7
SERVER = r'''
import asyncio, json, sys

async def handle(reader, writer):
    port = writer.get_extra_info("peername")[1]
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = (await reader.readexactly(length)).decode() if length else None
            if target.endswith("/drop"):
                writer.close()
                return
            if target.endswith("/slow"):
                await asyncio.sleep(2)
            status, extra = ("503 Service Unavailable", "Retry-After: 7\r\n") if target.endswith("/busy") \
                else ("200 OK", "")
            payload = json.dumps({"target": target, "port": port, "body": body, "method": method}).encode()
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
                         f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=int(sys.argv[1]))
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()

asyncio.run(main())
'''


@contextmanager
def serve(backlog: int = 128) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(backlog)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve() as base:
        yield base


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- Retry-After and backoff -------------------------------------------------------------------

_SOON = email.utils.format_datetime(email.utils.localtime().astimezone().replace(microsecond=0), usegmt=False)


@pytest.mark.parametrize(("headers", "limit", "expected"), [
    ({"retry-after": "2"}, 120.0, 2.0),
    ({"retry-after": "0.5"}, 120.0, 0.5),
    ({"retry-after": "-3"}, 120.0, 0.0),
    ({"retry-after-ms": "250", "retry-after": "9"}, 120.0, 0.25),  # ms first: the finer one
    ({"retry-after-ms": "x", "retry-after": "9"}, 120.0, 9.0),
    ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 120.0, 0.0),  # a date past: no wait
    ({"retry-after": "soon"}, 120.0, None),
    ({"retry-after": "121"}, 120.0, None),  # past the limit: the server is out of service
    ({"retry-after": "31"}, 30.0, None),
    ({"retry-after": "30"}, 30.0, 30.0),
    ({}, 120.0, None),
], ids=["seconds", "fraction", "negative", "ms-first", "bad-ms", "past-date", "garbage", "over-limit",
        "over-a-lower-limit", "at-the-limit", "absent"])
def test_retry_after_forms(headers: dict[str, str], limit: float, expected: float | None) -> None:
    assert retry_after(headers, limit=limit) == expected


def test_retry_after_http_date_in_the_future() -> None:
    when = email.utils.formatdate(time.time() + 10, usegmt=True)
    seconds = retry_after({"retry-after": when})
    assert seconds is not None and 8.0 <= seconds <= 10.0


def test_retry_after_reads_aiohttp_and_httpx_headers_in_any_case() -> None:
    import httpx2
    from multidict import CIMultiDict, CIMultiDictProxy

    assert retry_after(httpx2.Headers({"Retry-After": "3"})) == 3.0
    assert retry_after(CIMultiDictProxy(CIMultiDict({"Retry-After-Ms": "1500"}))) == 1.5


def test_backoff_doubles_up_to_its_cap_less_jitter() -> None:
    for _ in range(200):
        assert 0.75 <= backoff(1, 1.0, 30.0) <= 1.0
        assert 6.0 <= backoff(4, 1.0, 30.0) <= 8.0
        assert 22.5 <= backoff(10, 1.0, 30.0) <= 30.0
        assert 4.0 <= jitter(4.0) <= 5.0  # a pause the server asked for: never shorter


# --- requests ---------------------------------------------------------------------------------


def test_a_request_and_its_answer(server: str) -> None:
    async def go() -> HttpResponse:
        async with HttpClient() as http:
            return await http.request("POST", f"{server}/echo", content=b'{"a": 1}', params={"page": 2},
                                      headers={"Content-Type": "application/json"})

    response = asyncio.run(go())
    assert (response.status, response.reason) == (200, "OK")
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"target": "/echo?page=2", "port": response.json()["port"], "body": '{"a": 1}',
                               "method": "POST"}


def test_the_sync_path_answers_the_same(server: str) -> None:
    http = HttpClient()
    try:
        response = http.request_sync("POST", f"{server}/echo", content=b"{}", params={"page": 2})
        busy = http.request_sync("GET", f"{server}/busy")
    finally:
        http.close_sync()
    assert response.json()["target"] == "/echo?page=2"
    assert (busy.status, retry_after(busy.headers)) == (503, 7.0)


def test_connections_are_kept_alive_and_bounded_per_origin(server: str) -> None:
    async def go() -> list[int]:
        async with HttpClient(max_connections=4) as http:
            answers = await asyncio.gather(*(http.request("GET", f"{server}/echo") for _ in range(200)))
        return [a.json()["port"] for a in answers]

    ports = asyncio.run(go())
    assert 1 <= len(set(ports)) <= 4


def test_each_origin_has_its_own_connections(server: str) -> None:
    with serve() as other:
        async def go() -> None:
            async with HttpClient(max_connections=2) as http:
                await asyncio.gather(*(http.request("GET", f"{base}/echo") for base in [server, other] * 8))
                assert sorted(http._sessions) == sorted([server, other])

        asyncio.run(go())


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_no_server_is_a_connect_error(sync: bool) -> None:
    url = f"http://127.0.0.1:{_free_port()}/echo"
    http = HttpClient()
    with pytest.raises(ConnectError) as e:
        if sync:
            http.request_sync("GET", url)
        else:
            asyncio.run(http.request("GET", url))
    # The words each path's errors have always had (tests/test_rough_edges.py holds both).
    assert str(e.value) == ("[Errno 111] Connection refused" if sync else "All connection attempts failed")


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_a_slow_answer_is_a_read_timeout(server: str, sync: bool) -> None:
    http = HttpClient(timeout_s=30)
    started = time.perf_counter()
    with pytest.raises(ReadTimeout):
        if sync:
            http.request_sync("GET", f"{server}/slow", timeout_s=0.2)
        else:
            asyncio.run(http.request("GET", f"{server}/slow", timeout_s=0.2))
    assert time.perf_counter() - started < 1.5
    http.close_sync()


def test_a_connection_dropped_before_the_answer_is_a_read_error(server: str) -> None:
    async def go() -> None:
        async with HttpClient() as http:
            await http.request("POST", f"{server}/drop", content=b"{}")

    with pytest.raises(ReadError):
        asyncio.run(go())


def test_proxy_from_the_environment_and_no_proxy(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The test server acts as the proxy: a request sent through a proxy names the whole URL.
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server)
    monkeypatch.setenv("NO_PROXY", "skip.invalid")

    async def go(url: str) -> str:
        async with HttpClient() as http:
            return str((await http.request("GET", url)).json()["target"])

    assert asyncio.run(go("http://model.invalid/v1/echo")) == "http://model.invalid/v1/echo"
    with pytest.raises(ConnectError):  # skip.invalid is not proxied, and does not resolve
        asyncio.run(go("http://skip.invalid/v1/echo"))


def test_one_client_serves_several_event_loops_without_warnings(server: str) -> None:
    # Two asyncio.run with one client, closed from a third loop; another dropped unclosed: no
    # "Unclosed client session" or "Unclosed connector" (aiohttp logs them to stderr whatever
    # the warning filters). The sockets of a finished loop went with it, as with any asyncio
    # client; Python's own ResourceWarning for them is off by default.
    script = f"""
import asyncio, gc
from envhub.runtime._http import HttpClient
http = HttpClient()
for _ in range(2):
    assert asyncio.run(http.request("GET", "{server}/echo")).status == 200
asyncio.run(http.aclose())
other = HttpClient()
asyncio.run(other.request("GET", "{server}/echo"))
del other
gc.collect()
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert (result.stdout, result.stderr) == ("ok\n", "")


def test_bodies_are_sent_as_given(server: str) -> None:
    body = orjson.dumps({"messages": [{"role": "user", "content": "é" * 10_000}]})

    async def go() -> str:
        async with HttpClient() as http:
            return str((await http.request("POST", f"{server}/echo", content=body)).json()["body"])

    assert asyncio.run(go()).encode() == body


# --- a server with a small accept backlog -----------------------------------------------------


async def _burst(base: str, http: HttpClient, requests: int, concurrency: int) -> tuple[float, int]:
    """The slowest of ``requests`` requests sent ``concurrency`` at a time, in seconds, and how
    many got no answer; requests still waiting after 3 s count as slowest 3 s."""
    slowest = 0.0
    failed = 0
    left = requests

    async def worker() -> None:
        nonlocal left, slowest, failed
        while left > 0:
            left -= 1
            started = time.perf_counter()
            try:
                assert (await http.request("POST", f"{base}/echo", content=b"{}")).status == 200
            except TransportError:
                failed += 1
            slowest = max(slowest, time.perf_counter() - started)

    try:
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), 3)
    except TimeoutError:
        slowest = max(slowest, 3.0)
    finally:
        await http.aclose()
    return slowest, failed


def test_a_small_accept_backlog_does_not_stall_the_run() -> None:
    # 64 connections opened at once into a listen backlog of 1: the accept queue overflows and
    # the kernel drops SYNs, resending each only after 1 s (then 3 s, 7 s...). The client
    # abandons a connect not made in 0.25 s and makes it again at once.
    with serve(backlog=1) as base:
        for _ in range(3):
            # Only the slowest request is bounded, below the kernel's first SYN retry (1 s): a
            # bound on the whole burst would also measure how busy the machine is.
            slowest, failed = asyncio.run(_burst(base, HttpClient(max_connections=64), 640, 64))
            assert failed == 0 and slowest < 0.9, (slowest, failed)


def test_control_the_same_burst_stalls_when_the_kernel_retries_the_connects() -> None:
    # The positive control: the same client leaving connects to the kernel's SYN retries
    # (connect_retry_s=None) waits out a second at least once in three bursts (measured: 1.5 s
    # to minutes, a connection the server never accepted ending in a reset).
    with serve(backlog=1) as base:
        stalls = []
        for _ in range(3):
            stalls.append(asyncio.run(_burst(base, HttpClient(max_connections=64, connect_retry_s=None), 640, 64)))
            if stalls[-1][0] >= 0.9:
                break
    assert max(s for s, _ in stalls) >= 0.9, stalls


# --- one client shared by the clients of a run -------------------------------------------------


def test_clients_of_a_run_share_one_http_client_and_leave_it_open(openai_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The run's owner makes one HttpClient and passes it to a policy's and a judge's ChatClient
    # and to a served environment; closing those leaves it open, and it holds one pool per origin.
    from envhub.context import Context
    from envhub.runtime import ChatClient, load_remote
    from tests.serve_fixtures import make_bundles, start_server

    openai_server.script = lambda request: "4"
    bundles = make_bundles(tmp_path / "bundles")
    served = start_server([str(bundles["single-turn"])], tmp_path / "serve")
    try:
        async def run() -> list[str]:
            async with HttpClient(max_connections=8) as http:
                policy = ChatClient(openai_server.base_url, http=http)
                judge = ChatClient(openai_server.base_url, "sk-judge", http=http)
                settings = Context.create(autoload=False, environ={}).settings
                env = load_remote(served.url("acme/arith"), settings=settings, http=http)
                task = env.tasks("dev")[0]
                episode = env.episode(task)
                await episode.areset()
                assert (await episode.astep(str(task["answer"]))).done  # the server closes it
                answers = [(await policy.complete(model="m", messages=[{"role": "user", "content": "2+2"}])).message,
                           (await judge.complete(model="j", messages=[{"role": "user", "content": "grade"}])).message]
                await policy.aclose()
                await judge.aclose()
                await env.aclose()
                # still open: the run's owner closes it
                assert (await http.request("GET", f"{served.base_url}/v1/health")).status == 200
                assert sorted(http._sessions) == sorted({openai_server.base_url.rsplit("/", 1)[0], served.base_url})
                env.close()
                return [str(a["content"]) for a in answers]

        assert asyncio.run(run()) == ["4", "4"]
    finally:
        served.stop()
    assert [r.headers.get("authorization") for r in openai_server.requests] == [None, "Bearer sk-judge"]
