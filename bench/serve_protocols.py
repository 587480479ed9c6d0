"""Episodes per second through ``envhub serve``'s OpenEnv (WebSocket), MCP and ORS endpoints,
against ``/v1`` on the same server, in one run.

    .venv/bin/python bench/serve_protocols.py [--tasks 2000] [--concurrency 64] [--repeat 3]

``envhub serve`` runs in its own process on 127.0.0.1 (the installed command), serving a
single-turn exact-match environment (bench/serve.py's). Both sides play the same episodes
(reset, the answer, the reward checked) as asyncio tasks at the same concurrency:

- ``/v1``: ``envhub.load("http://127.0.0.1:PORT/bench/exact")``, ``episode.areset()`` and
  ``episode.astep()`` (two HTTP requests an episode);
- ``/openenv``: openenv-core's ``GenericEnvClient``, one WebSocket per worker, kept open
  across its episodes, ``reset(split=, task_id=)`` and ``step({"content": answer})`` (two
  messages an episode);
- ``/mcp``: the mcp SDK's ``Client`` over streamable HTTP, as an MCP client plays an episode:
  one session per worker on the environment's URL calling ``start_episode {split, task_id}``,
  then a session on the episode's URL calling ``submit {answer}`` (each session opens with the
  SDK's handshake);
- ``/ors``: plain HTTP (httpx2), the OpenReward SDK's requests (tests/data/ors/wire.json):
  ``POST /create_session`` (server-sent events), ``POST /create {split, index}``,
  ``GET /{env}/prompt``, ``POST /{env}/call`` with the terminal tool ``submit {answer}``
  (server-sent events), ``POST /delete``: five requests an episode.

Prints episodes/s of each (median of ``--repeat`` rounds, the sides taking turns), their ratio,
and the server's CPU per episode on each. A measurement, not a test: it exits 0 whatever the
figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve import cpu_s, exact_bundle, play_all, start_server  # noqa: E402

import envhub  # noqa: E402


async def play_openenv(url: str, tasks: list, concurrency: int) -> float:
    """Every task once with its answer over OpenEnv's client, ``concurrency`` sockets at a time."""
    from openenv.core import GenericEnvClient

    pending = iter(tasks)
    rewards = 0.0

    async def worker() -> None:
        nonlocal rewards
        async with GenericEnvClient(base_url=url) as env:
            for task in pending:
                await env.reset(split="train", task_id=task.id)
                result = await env.step({"content": task["answer"]})
                assert result.done
                rewards += result.reward or 0.0

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    assert rewards == len(tasks), f"{rewards} of {len(tasks)} episodes scored 1"
    return len(tasks) / elapsed


async def play_mcp(url: str, tasks: list, concurrency: int) -> float:
    """Every task once with its answer over the mcp SDK's client, ``concurrency`` workers at a time."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    base = url.split("/mcp/")[0]
    pending = iter(tasks)
    rewards = 0.0

    async def worker(http: httpx2.AsyncClient) -> None:
        nonlocal rewards
        async with Client(streamable_http_client(url, http_client=http)) as env:
            for task in pending:
                started = await env.call_tool("start_episode", {"split": "train", "task_id": task.id})
                data = started.structured_content
                assert data is not None and not started.is_error, started
                async with Client(streamable_http_client(base + data["url"], http_client=http)) as episode:
                    final = await episode.call_tool("submit", {"answer": task["answer"]})
                assert final.structured_content is not None and final.structured_content["done"]
                rewards += final.structured_content["reward"] or 0.0

    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    start = time.perf_counter()
    async with httpx2.AsyncClient(timeout=60, limits=limits) as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    assert rewards == len(tasks), f"{rewards} of {len(tasks)} episodes scored 1"
    return len(tasks) / elapsed


def _sse_end(text: str) -> str:
    """The data of a server-sent-events answer's ``end`` event."""
    event = None
    for line in text.splitlines():
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and event == "end":
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no end event in {text!r}")


def _sse_first(text: str) -> str:
    return next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("data:"))


async def play_ors(url: str, env_name: str, tasks: list, concurrency: int) -> float:
    """Every task once with its answer over ORS (the OpenReward SDK's requests), ``concurrency``
    sessions at a time."""
    import httpx2

    pending = iter(enumerate(tasks))
    rewards = 0.0
    sse = {"Accept": "text/event-stream"}

    async def worker(http: httpx2.AsyncClient) -> None:
        nonlocal rewards
        for index, task in pending:
            sid = _sse_first((await http.post("/create_session", headers=sse)).text)
            session = {"X-Session-ID": sid}
            r = await http.post("/create", json={"split": "train", "index": index, "env_name": env_name},
                                headers=session)
            assert r.status_code == 200, r.text
            r = await http.get(f"/{env_name}/prompt", headers=session)
            assert r.status_code == 200, r.text
            r = await http.post(f"/{env_name}/call", json={"name": "submit", "input": {"answer": task["answer"]}},
                                headers={**session, **sse})
            result = json.loads(_sse_end(r.text))
            assert result["ok"] and result["output"]["finished"], result
            rewards += result["output"]["reward"] or 0.0
            await http.post("/delete", headers=session)

    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    start = time.perf_counter()
    async with httpx2.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    assert rewards == len(tasks), f"{rewards} of {len(tasks)} episodes scored 1"
    return len(tasks) / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2000, help="single-turn episodes per round and side")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="envhub-bench-protocols-") as tmp:
        root = Path(tmp)
        exact = exact_bundle(root, args.tasks)
        proc, base = start_server([exact], root, args.concurrency + 16)
        try:
            remote = envhub.load(f"{base}/bench/exact")
            tasks = list(remote.tasks("train"))
            c = args.concurrency
            sides: dict[str, Callable[[list], Coroutine[Any, Any, float]]] = {
                "/v1 (envhub's http:// client)": lambda ts: play_all(remote, ts, c),
                "/openenv (GenericEnvClient, WebSocket)": lambda ts: play_openenv(f"{base}/openenv/bench/exact", ts, c),
                "/mcp (mcp Client, streamable HTTP)": lambda ts: play_mcp(f"{base}/mcp/bench/exact", ts, c),
                "/ors (HTTP, the SDK's requests)": lambda ts: play_ors(f"{base}/ors", "bench/exact", ts, c),
            }
            for play in sides.values():  # warm-up, every side
                asyncio.run(play(tasks[:300]))
            rates: dict[str, list[float]] = {name: [] for name in sides}
            cpu = dict.fromkeys(sides, 0.0)
            for _ in range(args.repeat):  # the sides take turns, round by round
                for name, play in sides.items():
                    s0 = cpu_s(proc.pid)
                    rates[name].append(asyncio.run(play(tasks)))
                    cpu[name] += cpu_s(proc.pid) - s0
            remote.close()
        finally:
            proc.terminate()
            proc.wait()

    episodes = args.tasks * args.repeat
    print(f"{args.tasks} single-turn episodes a side at concurrency {args.concurrency}, median of {args.repeat} "
          f"round(s), one server")
    v1 = statistics.median(next(iter(rates.values())))
    for name, values in rates.items():
        rate = statistics.median(values)
        print(f"  {name + ':':42s}{rate:8.0f} episodes/s  {rate / v1:6.3f}x /v1  "
              f"(rounds: {', '.join(f'{x:.0f}' for x in values)}); server CPU {cpu[name] / episodes * 1e3:.2f} "
              "ms/episode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
