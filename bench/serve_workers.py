"""Served episodes per second with ``envhub serve --workers 1`` against ``--workers 2``.

    .venv/bin/python bench/serve_workers.py [--tasks 3000] [--clients 3] [--concurrency 32]
                                            [--repeat 3] [--client aiohttp|envhub]

``envhub serve`` (the installed command) serves a single-turn exact-match environment on
127.0.0.1, once with one worker process and once with two, the rounds taking turns. The
load comes from ``--clients`` client processes (the client's own CPU must not be the
bottleneck: each is a process of its own), each playing ``--tasks / --clients`` episodes at
``--concurrency`` over keep-alive connections: create the episode, send the answer, check
the reward (two requests; the server closes an episode when it ends). The clients start
together and the rate is all their episodes over the span from the first start to the last
end. ``--client aiohttp`` (the default) sends the requests with a bare aiohttp session, so
the server's side is what is measured; ``--client envhub`` uses envhub's own client
(``envhub.load("http://...")``, ``areset``/``astep``), which costs more CPU per episode.

Also printed: the server's CPU seconds per 1,000 episodes (all its processes), and the share
of requests that reached a worker other than the one holding the episode (forwarded over
the local socket), estimated from the per-worker counts of ``/v1/health``.

A measurement, not a test: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import _child_env, envhub_command  # noqa: E402

NAME = "bench/exact"


_WORK = '''import time


def verify(task, completion):
    """Exact match, after WORK_MS of CPU (a verifier that does real work)."""
    end = time.thread_time() + WORK_MS / 1000
    while time.thread_time() < end:
        pass
    return completion.strip() == task["answer"]
'''


def exact_bundle(root: Path, n: int, work_ms: float) -> Path:
    """A single-turn bundle of ``n`` tasks scored by exact match, or (``work_ms`` > 0) by a
    python verifier that first burns ``work_ms`` of CPU."""
    from envhub.scaffold import create_bundle

    path = create_bundle(NAME, root / f"exact-{work_ms:g}")
    rows = [{"id": f"t{i}", "prompt": f"Repeat the word w{i}.", "answer": f"w{i}"} for i in range(n)]
    (path / "tasks" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = (path / "envhub.toml").read_text()
    start, end = text.index("[verifier]"), text.index("[state]")
    verifier = '[verifier]\nkind = "exact-match"\nfield = "answer"\n\n'
    if work_ms > 0:
        (path / "bench_work").mkdir()
        (path / "bench_work" / "__init__.py").write_text("")
        (path / "bench_work" / "verify.py").write_text(_WORK.replace("WORK_MS", repr(work_ms)))
        verifier = '[verifier]\nkind = "python"\nentry-point = "bench_work.verify:verify"\n\n'
    (path / "envhub.toml").write_text(text[:start] + verifier + text[end:])
    return path


# --- the clients (each in its own process) ------------------------------------------------


async def _aiohttp_client(url: str, indexes: list[int], concurrency: int) -> int:
    import aiohttp

    base = url.rsplit("/", 2)[0]
    pending = iter(indexes)
    scored = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(base, connector=connector) as http:
        async def worker() -> None:
            nonlocal scored
            for index in pending:
                async with http.post(f"/v1/environments/{NAME}/episodes", json={"split": "train", "index": index}) as r:
                    assert r.status == 201, await r.text()
                    created = await r.json()
                async with http.post(f"/v1/episodes/{created['episode_id']}/step",
                                     json={"action": created["task"]["data"]["answer"]}) as r:
                    step = await r.json()
                scored += step["reward"] == 1.0
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return scored


async def _envhub_client(url: str, indexes: list[int], concurrency: int) -> int:
    import envhub

    env = envhub.load(url)
    tasks = env.tasks("train")
    pending = iter(indexes)
    scored = 0

    async def worker() -> None:
        nonlocal scored
        for index in pending:
            task = tasks[index]
            episode = env.episode(task)
            await episode.areset()
            result = await episode.astep(task["answer"])
            scored += result.reward == 1.0
            episode.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return scored


def client(kind: str, url: str, indexes: list[int], concurrency: int, start_at: float) -> tuple[int, float, float]:
    """Play the episodes ``indexes`` from ``start_at`` on; (scored, start, end)."""
    time.sleep(max(0.0, start_at - time.time()))
    start = time.time()
    play = _aiohttp_client if kind == "aiohttp" else _envhub_client
    scored = asyncio.run(play(url, indexes, concurrency))
    return scored, start, time.time()


# --- the server ---------------------------------------------------------------------------


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_pids(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *map(int, children)]


def start_server(bundle: Path, workers: int, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    out = home / f"serve-{workers}.out"
    env = {**_child_env(), "ENVHUB_HOME": str(home)}
    with out.open("wb") as stdout:
        proc = subprocess.Popen([*envhub_command(), "serve", str(bundle), "--port", "0", "--workers", str(workers),
                                 "--trust"],
                                stdout=stdout, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"error: envhub serve --workers {workers} exited with {proc.returncode}")
        urls = out.read_text().split()
        if urls:
            return proc, urls[0]
        time.sleep(0.05)
    proc.kill()
    sys.exit("error: envhub serve did not start in 60 s")


def health(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url.rsplit("/", 2)[0] + "/v1/health", timeout=10) as r:
        result: dict[str, Any] = json.loads(r.read())
        return result


def one_round(bundle: Path, workers: int, args: argparse.Namespace, home: Path) -> tuple[float, float]:
    """Episodes/s and server CPU seconds per 1,000 episodes, for one server run."""
    proc, url = start_server(bundle, workers, home)
    try:
        pool = multiprocessing.get_context("spawn").Pool(args.clients)
        # Warm-up: every worker's first requests, and the clients' imports.
        pool.starmap(client, [(args.client, url, list(range(50)), 4, 0.0)] * args.clients)
        pids = server_pids(proc.pid)
        cpu_before = sum(cpu_s(p) for p in pids)
        share = [list(range(i, args.tasks, args.clients)) for i in range(args.clients)]
        start_at = time.time() + 1.0
        results = pool.starmap(client, [(args.client, url, s, args.concurrency, start_at) for s in share])
        pool.close()
        pool.join()
        cpu_after = sum(cpu_s(p) for p in pids)
        scored = sum(r[0] for r in results)
        assert scored == args.tasks, f"{scored} of {args.tasks} episodes scored 1"
        span = max(r[2] for r in results) - min(r[1] for r in results)
        if workers > 1:
            each = [w["opened"] for w in health(url)["workers"]["each"]]
            print(f"  --workers {workers}: episodes opened per worker {each}", flush=True)
        return args.tasks / span, (cpu_after - cpu_before) / args.tasks * 1000
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--client", choices=["aiohttp", "envhub"], default="aiohttp")
    parser.add_argument("--work-ms", default="0,2",
                        help="CPU milliseconds the verifier spends per episode, comma-separated (0: exact match)")
    args = parser.parse_args()
    works = [float(w) for w in args.work_ms.split(",")]
    figures: dict[tuple[float, int], list[tuple[float, float]]] = {(w, n): [] for w in works for n in (1, 2)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bundles = {w: exact_bundle(root, args.tasks, w) for w in works}
        for r in range(args.repeat):
            for work in works:
                for workers in (1, 2):
                    rate, cpu = one_round(bundles[work], workers, args, root)
                    figures[(work, workers)].append((rate, cpu))
                    print(f"round {r + 1}, verifier {work:g} ms, --workers {workers}: {rate:,.0f} episodes/s, "
                          f"server CPU {cpu:.2f} s per 1,000 episodes", flush=True)
    print(f"\n{os.cpu_count()} CPUs; {args.clients} client processes ({args.client}) at concurrency "
          f"{args.concurrency} each; {args.tasks} single-turn episodes per round; median of {args.repeat}")
    for work in works:
        rate = {n: statistics.median(x[0] for x in figures[(work, n)]) for n in (1, 2)}
        cpu = {n: statistics.median(x[1] for x in figures[(work, n)]) for n in (1, 2)}
        print(f"verifier {work:g} ms CPU: " + "; ".join(
            f"--workers {n}: {rate[n]:,.0f} episodes/s (server CPU {cpu[n]:.2f} s per 1,000)" for n in (1, 2))
              + f"; ratio 2/1: {rate[2] / rate[1]:.2f}x")


if __name__ == "__main__":
    main()
