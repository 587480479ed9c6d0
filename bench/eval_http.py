"""Rollouts per second through ``envhub eval``'s runner over HTTP, against a plain loop.

    .venv/bin/python bench/eval_http.py [--tasks 4000] [--concurrency 256] [--repeat 3]

An OpenAI-compatible server (tests/openai_server.py, test infrastructure) runs in its own
process on 127.0.0.1 and answers each task's prompt with its answer. Both sides send the
same requests through the same client (envhub's ChatClient, on its HttpClient) at the same
concurrency:

- baseline: a plain asyncio loop; each request is the system and task prompts, and the
  reply is compared with the answer by hand;
- envhub: the eval runner (LocalExecutor, ``openai:`` policy) on a single-turn exact-match
  environment, episodes, scoring and a JSONL record per rollout included.

Prints each side's rollouts/s and CPU-seconds per 10,000 rollouts (``time.process_time()`` of
this process: the server's CPU is its own), medians of ``--repeat`` rounds, sides taking turns,
and their ratios. Targets: envhub's rollouts/s >= 0.8x the baseline's, and envhub's CPU per
rollout at most half of what it was on httpx2 (~10 CPU-s per 10,000, i.e. ~1 ms a rollout, so
one core carries 2,000 rollouts/s): <= 5 CPU-s per 10,000. A measurement, not a test: it exits
0 whatever the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.openai_server

import envhub  # noqa: E402
from envhub.runtime import ChatClient, Evaluation, LocalExecutor  # noqa: E402
from envhub.runtime.policies import OpenAIPolicy  # noqa: E402
from envhub.scaffold import create_bundle  # noqa: E402


def bundle(root: Path, n: int) -> Path:
    path = create_bundle("bench/http", root / "http")
    rows = [{"id": f"t{i}", "prompt": f"Repeat the word w{i}.", "answer": f"w{i}"} for i in range(n)]
    (path / "tasks" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = (path / "envhub.toml").read_text()
    start, end = text.index("[verifier]"), text.index("[state]")
    (path / "envhub.toml").write_text(text[:start] + '[verifier]\nkind = "exact-match"\n\n' + text[end:])
    (root / "answers.json").write_text(json.dumps({r["prompt"]: r["answer"] for r in rows}))
    return path


async def baseline(env: envhub.Environment, base_url: str, concurrency: int) -> tuple[float, float]:
    tasks = list(env.tasks("train"))
    client = ChatClient(base_url, max_connections=concurrency, max_retries=0)
    # The conversation envhub opens with (a system prompt, then the task's prompt), built once.
    opening = list(env.episode(tasks[0]).reset().messages)
    assert opening[-1]["content"] == tasks[0]["prompt"], opening
    prefix = opening[:-1]
    pending = iter(tasks)
    correct = 0

    async def worker() -> None:
        nonlocal correct
        for task in pending:
            messages = [*prefix, {"role": "user", "content": task["prompt"]}]
            result = await client.complete(model="bench", messages=messages)
            correct += result.message.get("content") == task["answer"]

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await client.aclose()
    assert correct == len(tasks), f"baseline: {correct} of {len(tasks)} correct"
    return len(tasks) / elapsed, cpu / len(tasks) * 10_000


async def through_envhub(env: envhub.Environment, base_url: str, concurrency: int,
                        out: Path) -> tuple[float, float]:
    out.unlink(missing_ok=True)
    policy = OpenAIPolicy("bench", ChatClient(base_url, max_retries=0, max_connections=concurrency))
    evaluation = Evaluation.prepare(env, policy, split="train", concurrency=concurrency, output=out,
                                    executor=LocalExecutor(), close_policy=True)
    start, cpu = time.perf_counter(), time.process_time()
    result = await evaluation.run()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    done = result.ran
    rewards = [json.loads(line)["reward"] for line in out.read_text().splitlines()]
    assert done == len(rewards) == sum(rewards), "envhub: not every rollout scored 1"
    return done / elapsed, cpu / done * 10_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="envhub-bench-http-") as tmp:
        root = Path(tmp)
        env = envhub.load(bundle(root, args.tasks))
        _ = env.digest  # computed once, before timing
        server = subprocess.Popen([sys.executable, "-m", "tests.openai_server", "--answers",
                                   str(root / "answers.json")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip()
            asyncio.run(baseline(env, base_url, args.concurrency))  # warm-up
            base: list[tuple[float, float]] = []
            ours: list[tuple[float, float]] = []
            for _ in range(args.repeat):
                base.append(asyncio.run(baseline(env, base_url, args.concurrency)))
                ours.append(asyncio.run(through_envhub(env, base_url, args.concurrency, root / "out.jsonl")))
        finally:
            server.terminate()
            server.wait()
    b, o = statistics.median(r for r, _ in base), statistics.median(r for r, _ in ours)
    bc, oc = statistics.median(c for _, c in base), statistics.median(c for _, c in ours)
    print(f"{args.tasks} single-turn rollouts at concurrency {args.concurrency}, median of {args.repeat} round(s)")
    for label, rounds, rate, cpu in (("baseline (plain asyncio loop, same client)", base, b, bc),
                                     ("envhub eval runner", ours, o, oc)):
        print(f"  {label:43} {rate:7.0f} rollouts/s {cpu:6.2f} CPU-s per 10,000   "
              f"(rounds: {', '.join(f'{r:.0f}/s {c:.2f}' for r, c in rounds)})")
    print(f"  rollouts/s ratio {o / b:.2f}x   target >= 0.8x: {'met' if o / b >= 0.8 else 'NOT met'}")
    print(f"  CPU ratio envhub / baseline {oc / bc:.2f}x;   envhub {oc / 10:.2f} ms CPU a rollout, "
          f"target <= 0.5 ms: {'met' if oc <= 5.0 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
