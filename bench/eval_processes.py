"""Rollouts per second of ``envhub eval --executor processes -j 2`` against the local executor.

    .venv/bin/python bench/eval_processes.py [--tasks 3000] [--jobs 2] [--repeat 3]

Two workloads, each run through ``envhub.evaluate`` on the same single-turn exact-match
environment, the local executor and the processes executor taking turns:

- cpu: a ``python:`` policy that does real CPU work each turn (``--cpu-ms`` of SHA-256) and
  answers correctly. One process is bound by one core; N workers by N.
- latency: an ``openai:`` policy against an OpenAI-compatible server (tests/openai_server.py,
  test infrastructure) in its own process that answers after ``--latency-ms`` (50 ms), at
  concurrency 256 and 1,024. The bound is min(concurrency / latency, N x one process's
  ceiling), where the ceiling is the local executor's rollouts/s against the same server
  without latency; each figure is also printed as a fraction of its bound.

The processes figures include starting the workers and loading the environment in each.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.openai_server

import envhub  # noqa: E402
from envhub.context import Context  # noqa: E402
from envhub.scaffold import create_bundle  # noqa: E402

CPU_POLICY = '''
import hashlib, os

ROUNDS = int(os.environ["BENCH_CPU_ROUNDS"])

def act(messages):
    digest = b"envhub"
    for _ in range(ROUNDS):
        digest = hashlib.sha256(digest).digest()
    return messages[-1]["content"].removeprefix("Repeat the word ").removesuffix(".")
'''


def bundle(root: Path, n: int) -> Path:
    path = create_bundle("bench/processes", root / "env")
    rows = [{"id": f"t{i}", "prompt": f"Repeat the word w{i}.", "answer": f"w{i}"} for i in range(n)]
    (path / "tasks" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = (path / "envhub.toml").read_text()
    start, end = text.index("[verifier]"), text.index("[state]")
    (path / "envhub.toml").write_text(text[:start] + '[verifier]\nkind = "exact-match"\n\n' + text[end:])
    (root / "answers.json").write_text(json.dumps({r["prompt"]: r["answer"] for r in rows}))
    return path


def rounds_for(ms: float) -> int:
    """SHA-256 rounds that take about ``ms`` milliseconds here."""
    import hashlib

    digest, count = b"envhub", 20000
    start = time.perf_counter()
    for _ in range(count):
        digest = hashlib.sha256(digest).digest()
    return max(1, int(count * ms / 1000 / (time.perf_counter() - start)))


def run(env: Path, policy: str, out: Path, *, concurrency: int, jobs: int | None, base_url: str | None = None,
        tasks: int) -> float:
    """Rollouts/s of one ``envhub.evaluate`` (local without ``jobs``), every rollout checked."""
    out.unlink(missing_ok=True)
    executor = "processes" if jobs else "local"
    start = time.perf_counter()
    result = envhub.evaluate(env, policy, split="train", output=out, concurrency=concurrency, executor=executor,
                             jobs=jobs, base_url=base_url, context=Context.create(cwd=out.parent))
    elapsed = time.perf_counter() - start
    assert result.ran == tasks and result.summary.mean_reward == 1.0, (executor, result.summary)
    return tasks / elapsed


def serve(answers: Path, latency_s: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", str(answers),
                             "--latency-ms", str(latency_s * 1000)], cwd=ROOT, stdout=subprocess.PIPE, text=True)


def _serve(answers: Path, latency_s: float) -> None:
    """The server process: the answer table, each answer after ``latency_s``."""
    import threading

    from tests.openai_server import OpenAIServer, Request, answer_table

    table = answer_table(json.loads(answers.read_text()))

    async def slow(request: Request) -> str:
        await asyncio.sleep(latency_s)
        return table(request)

    server = OpenAIServer(slow if latency_s else table).start()
    print(server.base_url, flush=True)
    threading.Event().wait()


def interleaved(sides: dict[str, object], repeat: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeat):
        for name, measure in sides.items():
            out[name].append(measure())  # type: ignore[operator]
    return out


def show(label: str, figures: dict[str, list[float]], bounds: dict[str, float] | None = None) -> None:
    print(label)
    for name, values in figures.items():
        median = statistics.median(values)
        bound = f"   {median / bounds[name]:.0%} of the bound {bounds[name]:.0f}" if bounds else ""
        print(f"  {name:<14} {median:8.0f} rollouts/s  (rounds: {', '.join(f'{v:.0f}' for v in values)}){bound}")
    names = list(figures)
    ratio = statistics.median(figures[names[1]]) / statistics.median(figures[names[0]])
    print(f"  ratio {names[1]} / {names[0]}: {ratio:.2f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpu-ms", type=float, default=2.0)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # the server process
    args = parser.parse_args(argv)
    if args.serve:
        _serve(args.serve, args.latency_ms / 1000)
        return 0

    print(f"{os.cpu_count()} CPU(s); {args.tasks} single-turn rollouts per run; medians of {args.repeat} round(s)")
    with tempfile.TemporaryDirectory(prefix="envhub-bench-processes-") as tmp:
        root = Path(tmp)
        env = bundle(root, args.tasks)
        out = root / "out.jsonl"
        n, j = args.tasks, args.jobs

        # cpu: a policy that works args.cpu_ms per turn
        (root / "cpu_policy.py").write_text(CPU_POLICY)
        os.environ["BENCH_CPU_ROUNDS"] = str(rounds_for(args.cpu_ms))  # read by the policy, workers included
        spec = f"python:{root / 'cpu_policy.py'}:act"
        run(env, spec, out, concurrency=16, jobs=j, tasks=n)  # warm-up
        show(f"cpu: a python policy working {args.cpu_ms:g} ms per turn, concurrency 16", interleaved({
            "local": lambda: run(env, spec, out, concurrency=16, jobs=None, tasks=n),
            f"processes -j {j}": lambda: run(env, spec, out, concurrency=16, jobs=j, tasks=n),
        }, args.repeat))

        # latency: openai:MODEL against a server answering after args.latency_ms
        fast = serve(root / "answers.json", 0)
        try:
            assert fast.stdout is not None
            url = fast.stdout.readline().strip()
            run(env, "openai:bench", out, concurrency=256, jobs=None, base_url=url, tasks=n)  # warm-up
            ceiling = statistics.median(run(env, "openai:bench", out, concurrency=256, jobs=None, base_url=url,
                                            tasks=n) for _ in range(args.repeat))
        finally:
            fast.terminate()
            fast.wait()
        print(f"one process's ceiling (local, no latency, concurrency 256): {ceiling:.0f} rollouts/s")
        latency = args.latency_ms / 1000
        slow = serve(root / "answers.json", latency)
        try:
            assert slow.stdout is not None
            url = slow.stdout.readline().strip()
            for concurrency in (256, 1024):
                bounds = {"local": min(concurrency / latency, ceiling),
                          f"processes -j {j}": min(concurrency / latency, j * ceiling)}
                show(f"latency: openai:MODEL, {args.latency_ms:g} ms per answer, concurrency {concurrency}",
                     interleaved({
                         "local": lambda c=concurrency: run(env, "openai:bench", out, concurrency=c, jobs=None,
                                                             base_url=url, tasks=n),
                         f"processes -j {j}": lambda c=concurrency: run(env, "openai:bench", out, concurrency=c,
                                                                         jobs=j, base_url=url, tasks=n),
                     }, args.repeat), bounds)
        finally:
            slow.terminate()
            slow.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
