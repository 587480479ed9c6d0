"""Episodes per second through ``envhub serve``, against the same episodes in process;
and the server's peak memory with 5,000 episodes open.

    .venv/bin/python bench/serve.py [--tasks 4000] [--concurrency 64] [--open 5000] [--repeat 3]

``envhub serve`` runs in its own process on 127.0.0.1 (the installed command, as a user runs
it), serving a single-turn exact-match environment and the scaffold's SQLite tool-use shop.

1. Throughput. Both sides play the same single-turn episodes (reset, the answer, the reward
   checked) as asyncio tasks at the same concurrency:
   - in process: ``envhub.load(BUNDLE)``, ``episode.areset()`` and ``episode.astep()``;
   - served: ``envhub.load("http://127.0.0.1:PORT/bench/exact")``, the same calls, each a
     request to the server (create, step; the server closes an episode when it ends).
   Prints episodes/s of each (median of ``--repeat`` rounds, the sides taking turns) and
   their ratio. No target: the ratio is the price of HTTP, JSON and a second process.
2. Memory. ``--open`` episodes of the SQLite shop are created on the server and left open
   (each holds its own in-memory copy of the database), then closed. Prints the server's
   resident memory before, and its peak (VmHWM from /proc/PID/status) with all of them open.

A measurement, not a test: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import envhub  # noqa: E402
from _common import _child_env, envhub_command  # noqa: E402
from envhub.scaffold import create_bundle  # noqa: E402


def exact_bundle(root: Path, n: int) -> Path:
    path = create_bundle("bench/exact", root / "exact")
    rows = [{"id": f"t{i}", "prompt": f"Repeat the word w{i}.", "answer": f"w{i}"} for i in range(n)]
    (path / "tasks" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = (path / "envhub.toml").read_text()
    start, end = text.index("[verifier]"), text.index("[state]")
    (path / "envhub.toml").write_text(text[:start] + '[verifier]\nkind = "exact-match"\nfield = "answer"\n\n' + text[end:])
    return path


async def play_all(env: object, tasks: list, concurrency: int) -> float:
    """Play every task once with its answer, ``concurrency`` at a time; episodes per second."""
    pending = iter(tasks)
    rewards = 0.0

    async def worker() -> None:
        nonlocal rewards
        for task in pending:
            episode = env.episode(task)  # type: ignore[attr-defined]
            await episode.areset()
            result = await episode.astep(task["answer"])
            rewards += result.reward
            episode.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    assert rewards == len(tasks), f"{rewards} of {len(tasks)} episodes scored 1"
    return len(tasks) / elapsed


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


async def open_many(env: object, task: object, count: int, concurrency: int) -> list:
    episodes = [env.episode(task) for _ in range(count)]  # type: ignore[attr-defined]
    queue = iter(episodes)

    async def worker() -> None:
        for episode in queue:
            await episode.areset()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return episodes


async def close_many(episodes: list) -> None:
    await asyncio.gather(*(e.__aexit__(None, None, None) for e in episodes))


def start_server(bundles: list[Path], root: Path, max_episodes: int) -> tuple[subprocess.Popen[bytes], str]:
    out = root / "serve.out"
    env = {**_child_env(), "ENVHUB_HOME": str(root / "home"), "ENVHUB_CACHE": str(root / "cache")}
    with out.open("wb") as stdout:
        proc = subprocess.Popen([*envhub_command(), "-q", "serve", *map(str, bundles), "--trust", "--port", "0",
                                 "--max-episodes", str(max_episodes)], stdout=stdout, stderr=subprocess.DEVNULL,
                                env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"error: envhub serve exited with {proc.returncode}")
        lines = out.read_text().split()
        if len(lines) == len(bundles):
            return proc, lines[0].rsplit("/", 2)[0]
        time.sleep(0.05)
    proc.kill()
    sys.exit("error: envhub serve did not start within 60 s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=4000, help="single-turn episodes per round")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--open", type=int, default=5000, help="episodes open at once for the memory figure")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if not Path("/proc/self/status").exists():
        sys.exit("error: the memory figure reads /proc/PID/status (Linux)")

    with tempfile.TemporaryDirectory(prefix="envhub-bench-serve-") as tmp:
        root = Path(tmp)
        exact = exact_bundle(root, args.tasks)
        shop = create_bundle("bench/shop", root / "shop", protocol="tool-use", state="sqlite")
        proc, base = start_server([exact, shop], root, max(args.open, args.concurrency) + 16)
        try:
            local = envhub.load(exact)
            remote = envhub.load(f"{base}/bench/exact")
            local_tasks = list(local.tasks("train"))
            remote_tasks = list(remote.tasks("train"))
            asyncio.run(play_all(local, local_tasks[:500], args.concurrency))  # warm-up, both sides
            asyncio.run(play_all(remote, remote_tasks[:500], args.concurrency))
            in_process: list[float] = []
            served: list[float] = []
            server_cpu = client_cpu = 0.0
            for _ in range(args.repeat):
                in_process.append(asyncio.run(play_all(local, local_tasks, args.concurrency)))
                s0, c0 = cpu_s(proc.pid), time.process_time()
                served.append(asyncio.run(play_all(remote, remote_tasks, args.concurrency)))
                server_cpu += cpu_s(proc.pid) - s0
                client_cpu += time.process_time() - c0
            remote.close()

            shop_env = envhub.load(f"{base}/bench/shop")
            task = shop_env.tasks("train")[0]
            time.sleep(0.5)
            before = status_kib(proc.pid, "VmRSS")

            async def memory() -> None:
                episodes = await open_many(shop_env, task, args.open, args.concurrency)
                open_now = json.loads(__import__("httpx2").get(f"{base}/v1/health").text)["episodes"]["open"]
                assert open_now == args.open, f"{open_now} episodes open, not {args.open}"
                await close_many(episodes)

            start = time.perf_counter()
            asyncio.run(memory())
            memory_s = time.perf_counter() - start
            peak = status_kib(proc.pid, "VmHWM")
            shop_env.close()
        finally:
            proc.terminate()
            proc.wait()

    ip, sv = statistics.median(in_process), statistics.median(served)
    cpus = os.cpu_count()
    print(f"{args.tasks} single-turn episodes at concurrency {args.concurrency}, median of {args.repeat} round(s), "
          f"{cpus} CPU(s)")
    print(f"  in process (areset/astep):                {ip:8.0f} episodes/s   "
          f"(rounds: {', '.join(f'{x:.0f}' for x in in_process)})")
    print(f"  served (envhub serve + http:// client):   {sv:8.0f} episodes/s   "
          f"(rounds: {', '.join(f'{x:.0f}' for x in served)})")
    print(f"  ratio served / in process: {sv / ip:.4f}x")
    episodes = args.tasks * args.repeat
    print(f"  CPU per served episode (2 requests): server {server_cpu / episodes * 1e3:.2f} ms, "
          f"client {client_cpu / episodes * 1e3:.2f} ms")
    print(f"{args.open} SQLite tool-use episodes open on the server at once (opened and closed in {memory_s:.1f} s)")
    print(f"  server RSS before: {before / 1024:7.1f} MiB")
    print(f"  server peak RSS:   {peak / 1024:7.1f} MiB   "
          f"({(peak - before) / args.open:.1f} KiB per open episode)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
