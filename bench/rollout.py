"""What does envhub's episode machinery cost per episode, in process?

    .venv/bin/python bench/rollout.py [--episodes 20000] [--repeat 5]

Two measurements, each against a baseline loop in the same process and run:

1. Single-turn exact-match episodes. envhub: ``episode = env.episode(task); obs =
   episode.reset(); episode.step(policy(obs, task))``. Baseline: call the same policy on the
   same messages and compare its answer with the task's, by hand. Target: envhub's overhead
   <= 50 microseconds per episode.
2. Tool-use episodes on a SQLite snapshot, reset per episode: the policy calls ``run_sql``
   once, then answers. Baseline: the same policy, with the same query run on one shared
   connection, and the answer compared by hand (no reset, no tool-call parsing, no
   schema validation). Target: overhead <= 1 ms per episode.
3. Memory: 10,000 tool-use episodes reset and open at once (each with its own copy of the
   database). Target: peak RSS <= 1 GiB.

Prints medians over ``--repeat`` rounds (the sides take turns). A measurement, not a test:
it exits 0 whatever the timing.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import envhub
from envhub.scaffold import create_bundle


def single_turn_bundle(root: Path, n: int) -> Path:
    bundle = create_bundle("bench/exact", root / "exact")
    rows = "".join(json.dumps({"id": f"t{i}", "prompt": f"Repeat the word w{i}.", "answer": f"w{i}"}) + "\n"
                   for i in range(n))
    (bundle / "tasks" / "train.jsonl").write_text(rows)
    manifest = bundle / "envhub.toml"
    text = manifest.read_text()
    start = text.index("[verifier]")
    end = text.index("[state]")
    manifest.write_text(text[:start] + '[verifier]\nkind = "exact-match"\nfield = "answer"\n\n' + text[end:])
    return bundle


def policy(messages: list[dict], task: dict) -> str:
    return task["answer"]


def bench_single_turn(env: envhub.Environment, tasks: list) -> tuple[float, float]:
    start = time.perf_counter()
    for task in tasks:
        messages = env.harness.initial_messages(task)  # the same messages the episode builds
        reward = 1.0 if policy(messages, task).strip() == task["answer"].strip() else 0.0
        assert reward == 1.0
    baseline = time.perf_counter() - start
    start = time.perf_counter()
    for task in tasks:
        episode = env.episode(task)
        observation = episode.reset()
        result = episode.step(policy(observation.messages, task))
        assert result.reward == 1.0
    return baseline, time.perf_counter() - start


QUERY = "SELECT count(*) FROM products WHERE stock = 0"


def sql_policy_call() -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "run_sql", "arguments": json.dumps({"query": QUERY})}}]}


def bench_sqlite(env: envhub.Environment, tasks: list) -> tuple[float, float]:
    import sqlite3

    shared = sqlite3.connect(env.root / "state" / "shop.sqlite")
    start = time.perf_counter()
    for task in tasks:
        call = sql_policy_call()
        arguments = json.loads(call["tool_calls"][0]["function"]["arguments"])
        rows = shared.execute(arguments["query"]).fetchall()
        answer = f"\\boxed{{{rows[0][0]}}}"
        assert answer
    baseline = time.perf_counter() - start
    start = time.perf_counter()
    for task in tasks:
        episode = env.episode(task)
        episode.reset()
        result = episode.step(sql_policy_call())
        content = result.observation.messages[-1]["content"]
        episode.step(f"\\boxed{{{content}}}")
    shared.close()
    return baseline, time.perf_counter() - start


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20000, help="single-turn episodes per round")
    parser.add_argument("--sqlite-episodes", type=int, default=2000, help="tool-use episodes per round")
    parser.add_argument("--open", type=int, default=10000, help="episodes open at once for the memory figure")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (default: %(default)s)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="envhub-bench-rollout-") as tmp:
        root = Path(tmp)
        exact = envhub.load(single_turn_bundle(root, args.episodes))
        tasks = list(exact.tasks("train"))
        shop = envhub.load(create_bundle("bench/shop", root / "shop", protocol="tool-use", state="sqlite"),
                           trust_code=True)
        shop_tasks = [shop.tasks("train")[i % 6] for i in range(args.sqlite_episodes)]
        bench_single_turn(exact, tasks[:1000])  # warm-up
        bench_sqlite(shop, shop_tasks[:200])
        single: list[tuple[float, float]] = []
        sqlite: list[tuple[float, float]] = []
        for _ in range(args.repeat):
            single.append(bench_single_turn(exact, tasks))
            sqlite.append(bench_sqlite(shop, shop_tasks))

        def report(label: str, rounds: list[tuple[float, float]], n: int, target_us: float) -> None:
            base = statistics.median(b for b, _ in rounds) / n * 1e6
            ours = statistics.median(e for _, e in rounds) / n * 1e6
            overhead = ours - base
            verdict = "met" if overhead <= target_us else "NOT met"
            print(f"{label}: baseline {base:8.1f} us/episode, envhub {ours:8.1f} us/episode "
                  f"(ratio {ours / base:5.1f}x)")
            print(f"  overhead {overhead:8.1f} us/episode   target <= {target_us:g} us: {verdict}")

        print(f"median of {args.repeat} round(s)")
        report(f"single-turn exact-match, {len(tasks)} episodes", single, len(tasks), 50)
        report(f"tool-use sqlite with per-episode reset, {len(shop_tasks)} episodes", sqlite, len(shop_tasks), 1000)

        gc.collect()
        before = rss_mib()
        episodes = []
        task = shop.tasks("train")[0]
        for _ in range(args.open):
            episode = shop.episode(task)
            episode.reset()
            episodes.append(episode)
        peak = rss_mib()
        for episode in episodes:
            episode.close()
        verdict = "met" if peak <= 1024 else "NOT met"
        print(f"memory: {args.open} tool-use sqlite episodes open at once: peak RSS {peak:.0f} MiB "
              f"(before opening them {before:.0f} MiB)   target <= 1024 MiB: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
