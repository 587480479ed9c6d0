"""Rollouts per second through ``envhub eval``'s runner over HTTP, against a plain loop.

    .venv/bin/python bench/eval_http.py [--tasks 4000] [--concurrency 256] [--repeat 3]

An OpenAI-compatible server (tests/openai_server.py, test infrastructure) runs in its own
process on 127.0.0.1 and answers each task's prompt with its answer. Both sides send the
same requests through the same client (envhub's ChatClient on httpx2) at the same
concurrency:

- baseline: a plain asyncio loop; each request is the system and task prompts, and the
  reply is compared with the answer by hand;
- envhub: the eval runner (LocalExecutor, ``openai:`` policy) on a single-turn exact-match
  environment, episodes, scoring and a JSONL record per rollout included.

Target: envhub's rollouts/s >= 0.8x the baseline's. Prints medians of ``--repeat`` rounds,
sides taking turns. A measurement, not a test: it exits 0 whatever the figure.
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
from envhub.runtime._chat import ChatClient  # noqa: E402
from envhub.runtime._eval import EvalRun, plan_jobs  # noqa: E402
from envhub.runtime._runner import RolloutPlan  # noqa: E402
from envhub.runtime.policies import make_policy  # noqa: E402
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


async def baseline(env: envhub.Environment, base_url: str, concurrency: int) -> float:
    tasks = list(env.tasks("train"))
    client = ChatClient(base_url, max_connections=concurrency, max_retries=0)
    system = env._initial_messages(tasks[0])[0]
    pending = iter(tasks)
    correct = 0

    async def worker() -> None:
        nonlocal correct
        for task in pending:
            messages = [system, {"role": "user", "content": task["prompt"]}]
            result = await client.complete(model="bench", messages=messages)
            correct += result.message.get("content") == task["answer"]

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    await client.aclose()
    assert correct == len(tasks), f"baseline: {correct} of {len(tasks)} correct"
    return len(tasks) / elapsed


async def through_envhub(env: envhub.Environment, base_url: str, concurrency: int, out: Path) -> float:
    out.unlink(missing_ok=True)
    policy = make_policy("openai:bench", base_url=base_url, max_retries=0, max_connections=concurrency)
    plan = RolloutPlan(env, policy, concurrency=concurrency,
                       provenance={**env.provenance(), "policy": policy.name, "split": "train"})
    run = EvalRun(plan, plan_jobs(env.tasks("train"), 1, None), out)
    todo = run.prepare()
    start = time.perf_counter()
    done = await run.run(todo)
    elapsed = time.perf_counter() - start
    await policy.aclose()
    rewards = [json.loads(line)["reward"] for line in out.read_text().splitlines()]
    assert done == len(todo) and sum(rewards) == len(todo), "envhub: not every rollout scored 1"
    return done / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="envhub-bench-http-") as tmp:
        root = Path(tmp)
        env = envhub.load(bundle(root, args.tasks))
        env.digest  # computed once, before timing
        server = subprocess.Popen([sys.executable, "-m", "tests.openai_server", "--answers",
                                   str(root / "answers.json")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip()
            asyncio.run(baseline(env, base_url, args.concurrency))  # warm-up
            base: list[float] = []
            ours: list[float] = []
            for _ in range(args.repeat):
                base.append(asyncio.run(baseline(env, base_url, args.concurrency)))
                ours.append(asyncio.run(through_envhub(env, base_url, args.concurrency, root / "out.jsonl")))
        finally:
            server.terminate()
            server.wait()
    b, o = statistics.median(base), statistics.median(ours)
    verdict = "met" if o / b >= 0.8 else "NOT met"
    print(f"{args.tasks} single-turn rollouts at concurrency {args.concurrency}, median of {args.repeat} round(s)")
    print(f"  baseline (plain asyncio loop, same client): {b:8.0f} rollouts/s   "
          f"(rounds: {', '.join(f'{x:.0f}' for x in base)})")
    print(f"  envhub eval runner:                         {o:8.0f} rollouts/s   "
          f"(rounds: {', '.join(f'{x:.0f}' for x in ours)})")
    print(f"  ratio {o / b:.2f}x   target >= 0.8x: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
