"""Episodes per second through ``envhub serve``'s OpenEnv endpoint (WebSocket), against ``/v1``
on the same server, in one run.

    .venv/bin/python bench/serve_protocols.py [--tasks 2000] [--concurrency 64] [--repeat 3]

``envhub serve`` runs in its own process on 127.0.0.1 (the installed command), serving a
single-turn exact-match environment (bench/serve.py's). Both sides play the same episodes
(reset, the answer, the reward checked) as asyncio tasks at the same concurrency:

- ``/v1``: ``envhub.load("http://127.0.0.1:PORT/bench/exact")``, ``episode.areset()`` and
  ``episode.astep()`` (two HTTP requests an episode);
- ``/openenv``: openenv-core's ``GenericEnvClient``, one WebSocket per worker, kept open
  across its episodes, ``reset(split=, task_id=)`` and ``step({"content": answer})`` (two
  messages an episode).

Prints episodes/s of each (median of ``--repeat`` rounds, the sides taking turns), their ratio,
and the server's CPU per episode on each. A measurement, not a test: it exits 0 whatever the
figures.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

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
        url = f"{base}/openenv/bench/exact"
        try:
            remote = envhub.load(f"{base}/bench/exact")
            tasks = list(remote.tasks("train"))
            asyncio.run(play_all(remote, tasks[:300], args.concurrency))  # warm-up, both sides
            asyncio.run(play_openenv(url, tasks[:300], args.concurrency))
            v1: list[float] = []
            openenv: list[float] = []
            v1_cpu = openenv_cpu = 0.0
            for _ in range(args.repeat):
                s0 = cpu_s(proc.pid)
                v1.append(asyncio.run(play_all(remote, tasks, args.concurrency)))
                s1 = cpu_s(proc.pid)
                openenv.append(asyncio.run(play_openenv(url, tasks, args.concurrency)))
                v1_cpu += s1 - s0
                openenv_cpu += cpu_s(proc.pid) - s1
            remote.close()
        finally:
            proc.terminate()
            proc.wait()

    a, b = statistics.median(v1), statistics.median(openenv)
    episodes = args.tasks * args.repeat
    print(f"{args.tasks} single-turn episodes a side at concurrency {args.concurrency}, median of {args.repeat} "
          f"round(s), one server")
    print(f"  /v1 (envhub's http:// client):            {a:8.0f} episodes/s   "
          f"(rounds: {', '.join(f'{x:.0f}' for x in v1)}); server CPU {v1_cpu / episodes * 1e3:.2f} ms/episode")
    print(f"  /openenv (GenericEnvClient, WebSocket):   {b:8.0f} episodes/s   "
          f"(rounds: {', '.join(f'{x:.0f}' for x in openenv)}); server CPU {openenv_cpu / episodes * 1e3:.2f} "
          f"ms/episode")
    print(f"  ratio /openenv / /v1: {b / a:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
