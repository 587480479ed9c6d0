"""CPU per chat-completion request through each async HTTP client envhub could build on.

    .venv/bin/python bench/http_clients.py [--requests 10000] [--concurrency 64 256] [--repeat 3]

An OpenAI-compatible server (tests/openai_server.py, test infrastructure) runs in its own
process on 127.0.0.1, so the client's CPU is measured alone (``time.process_time()`` of this
process). Every client sends the same request, a realistic chat-completion body (~1 KB: model,
a system prompt, a user turn, sampling fields), ``--requests`` times at each concurrency, and
parses the JSON reply:

- httpx2, as envhub used it up to this change (ChatClient): ``ceil(concurrency / 16)``
  ``httpx2.AsyncClient`` pools of 16 connections, the least busy one picked per request,
  ``post(json=...)`` and ``response.json()``;
- aiohttp: one ``ClientSession`` with a ``TCPConnector(limit=concurrency)``, orjson bodies;
- aiohttp sharded: the same, in pools of 16, to see whether sharding helps aiohttp too;
- envhub's HttpClient (envhub/runtime/_http.py), the client envhub uses now, as ChatClient
  calls it: orjson bodies, the whole answer read, orjson to parse it;
- plain asyncio: the floor. Keep-alive connections on ``asyncio.open_connection``, the
  HTTP/1.1 request written by hand, the reply read by its Content-Length, orjson both ways.
  No client does less per request.

Prints CPU-seconds per 10,000 requests and requests/s for each, the median of ``--repeat``
rounds (clients taking turns), and each client's CPU as a multiple of plain asyncio's.
A measurement, not a test: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAYLOAD: dict[str, Any] = {
    "model": "bench-model",
    "messages": [
        {"role": "system", "content": "You are a careful assistant. Answer the user's question with the final "
                                      "answer only, on one line, with no explanation. " * 4},
        {"role": "user", "content": "Natalia sold clips to 48 of her friends in April, and then she sold half as "
                                    "many clips in May. How many clips did Natalia sell altogether in April and May? "
                                    "Repeat the word w42."},
    ],
    "temperature": 0.7,
    "top_p": 0.95,
    "max_tokens": 512,
}

Send = Callable[[], Awaitable[None]]


async def run_client(name: str, base_url: str, requests: int, concurrency: int) -> tuple[float, float]:
    """CPU-seconds and wall seconds of ``requests`` requests through client ``name``."""
    url = base_url + "/chat/completions"
    setup, send, close = await CLIENTS[name](url, concurrency)
    left = requests
    await asyncio.gather(*(send() for _ in range(min(concurrency, 64))))  # connections opened, untimed

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await send()

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await close()
    del setup
    return cpu, wall


def _check(body: Any) -> None:
    assert body["choices"][0]["message"]["role"] == "assistant", body


async def httpx2_sharded(url: str, concurrency: int) -> tuple[Any, Send, Callable[[], Awaitable[None]]]:
    count = -(-concurrency // 16)
    size = -(-concurrency // count)
    limits = httpx2.Limits(max_connections=size, max_keepalive_connections=size)
    timeout = httpx2.Timeout(120.0, pool=None)
    pools = [httpx2.AsyncClient(timeout=timeout, limits=limits) for _ in range(count)]
    in_flight = [0] * count
    headers = {"Content-Type": "application/json"}

    async def send() -> None:
        index = min(range(count), key=in_flight.__getitem__)
        in_flight[index] += 1
        try:
            response = await pools[index].post(url, json=PAYLOAD, headers=headers, timeout=timeout)
        finally:
            in_flight[index] -= 1
        assert response.status_code == 200
        _check(response.json())

    async def close() -> None:
        for pool in pools:
            await pool.aclose()

    return pools, send, close


def _aiohttp(shard: int | None) -> Callable[[str, int], Awaitable[tuple[Any, Send, Callable[[], Awaitable[None]]]]]:
    async def make(url: str, concurrency: int) -> tuple[Any, Send, Callable[[], Awaitable[None]]]:
        count = 1 if shard is None else -(-concurrency // shard)
        size = -(-concurrency // count)
        sessions = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=size, limit_per_host=size),
                                          timeout=aiohttp.ClientTimeout(total=120)) for _ in range(count)]
        in_flight = [0] * count
        headers = {"Content-Type": "application/json"}

        async def send() -> None:
            index = 0 if count == 1 else min(range(count), key=in_flight.__getitem__)
            in_flight[index] += 1
            try:
                async with sessions[index].post(url, data=orjson.dumps(PAYLOAD), headers=headers) as response:
                    data = await response.read()
                    assert response.status == 200
            finally:
                in_flight[index] -= 1
            _check(orjson.loads(data))

        async def close() -> None:
            for session in sessions:
                await session.close()

        return sessions, send, close

    return make


async def envhub_http(url: str, concurrency: int) -> tuple[Any, Send, Callable[[], Awaitable[None]]]:
    from envhub.runtime._http import HttpClient

    http = HttpClient(max_connections=concurrency)
    headers = {"Content-Type": "application/json"}

    async def send() -> None:
        response = await http.request("POST", url, content=orjson.dumps(PAYLOAD), headers=headers)
        assert response.status == 200
        _check(response.json())

    return http, send, http.aclose


async def plain_asyncio(url: str, concurrency: int) -> tuple[Any, Send, Callable[[], Awaitable[None]]]:
    rest = url.split("://", 1)[1]
    hostport, path = rest.split("/", 1)
    host, port = hostport.rsplit(":", 1)
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    opened: list[asyncio.StreamWriter] = []
    head = (f"POST /{path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\n"
            f"Content-Length: ").encode()

    async def send() -> None:
        if idle:
            reader, writer = idle.pop()
        else:
            reader, writer = await asyncio.open_connection(host, int(port))
            opened.append(writer)
        body = orjson.dumps(PAYLOAD)
        writer.write(b"%s%d\r\n\r\n%s" % (head, len(body), body))
        response_head = await reader.readuntil(b"\r\n\r\n")
        assert response_head.startswith(b"HTTP/1.1 200"), response_head
        length = 0
        for line in response_head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        _check(orjson.loads(await reader.readexactly(length)))
        idle.append((reader, writer))

    async def close() -> None:
        for writer in opened:
            writer.close()

    return idle, send, close


CLIENTS: dict[str, Callable[[str, int], Awaitable[tuple[Any, Send, Callable[[], Awaitable[None]]]]]] = {
    "httpx2 (envhub's use before)": httpx2_sharded,
    "aiohttp": _aiohttp(None),
    "aiohttp, pools of 16": _aiohttp(16),
    "envhub HttpClient (aiohttp)": envhub_http,
    "plain asyncio": plain_asyncio,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    server = subprocess.Popen([sys.executable, "-m", "tests.openai_server"], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        for concurrency in args.concurrency:
            for name in CLIENTS:  # warm-up
                asyncio.run(run_client(name, base_url, 1000, concurrency))
            for _ in range(args.repeat):
                for name in CLIENTS:
                    results.setdefault((name, concurrency), []).append(
                        asyncio.run(run_client(name, base_url, args.requests, concurrency)))
    finally:
        server.terminate()
        server.wait()

    per = 10_000 / args.requests
    print(f"{args.requests} chat-completion requests ({len(json.dumps(PAYLOAD))}-byte body), server in its own "
          f"process, median of {args.repeat} round(s)")
    for concurrency in args.concurrency:
        floor = statistics.median(c for c, _ in results[("plain asyncio", concurrency)]) * per
        print(f"concurrency {concurrency}:")
        for name in CLIENTS:
            rounds = results[(name, concurrency)]
            cpu = statistics.median(c for c, _ in rounds) * per
            rate = statistics.median(args.requests / w for _, w in rounds)
            print(f"  {name:30} {cpu:6.2f} CPU-s per 10,000   {rate:7.0f} requests/s   "
                  f"{cpu / floor:5.2f}x plain asyncio's CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
