"""What does drawing tasks through a curriculum cost, and what do generated tasks cost?

    .venv/bin/python bench/curriculum.py [--rollouts 2000] [--repeat 5]

Three measurements on ``example_envs/number-sequences`` (a generator at four levels) and a
task file of the same tasks, each as a ratio against a baseline in the same run:

1. ``envhub eval --curriculum -n N -c 16`` (success-window, batches of 16 drawn and counted
   between batches) against ``envhub eval -n N -c 16`` on the same split (every rollout
   queued at once), reference policy, whole processes. The batch barrier and the
   bookkeeping are the cost.
2. In process: ``Curriculum.next()`` + ``update()`` per draw against indexing the split's
   tasks in order (both make the generated task).
3. Making a generated task against reading the same task from a JSONL file already loaded
   (``env.tasks(split)[i]`` on each).

A measurement, not a test: it exits 0 whatever the timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import envhub_command, run_once  # noqa: E402

BUNDLE = Path(__file__).resolve().parents[1] / "example_envs" / "number-sequences"


def in_process(draws: int, repeat: int) -> tuple[float, float, float, float]:
    import envhub
    from envhub.runtime import Curriculum

    env = envhub.load(BUNDLE, trust_code=True)
    tasks = env.tasks("train", limit=draws)

    with tempfile.TemporaryDirectory() as tmp:  # the same tasks, as a file
        from envhub.scaffold import create_bundle

        files = create_bundle("bench/sequences", Path(tmp) / "b")
        (files / "tasks" / "train.jsonl").write_text("".join(json.dumps(dict(t.data)) + "\n" for t in tasks))
        file_env = envhub.load(files)
        file_tasks = file_env.tasks("train")
        len(file_tasks)

        plain, curriculum, made, read = [], [], [], []
        for _ in range(repeat):
            start = time.perf_counter()
            for i in range(draws):
                tasks[i]
            plain.append(time.perf_counter() - start)

            c = Curriculum(env, "train")
            start = time.perf_counter()
            for _ in range(draws):
                c.update(c.next(), 1.0)
            curriculum.append(time.perf_counter() - start)

            start = time.perf_counter()
            for i in range(draws):
                tasks[i]
            made.append(time.perf_counter() - start)
            start = time.perf_counter()
            for i in range(draws):
                file_tasks[i]
            read.append(time.perf_counter() - start)
    med = statistics.median
    return med(curriculum), med(plain), med(made), med(read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    envhub = envhub_command()

    with tempfile.TemporaryDirectory() as tmp:
        common = [str(BUNDLE), "--split", "train", "-n", str(args.rollouts), "-c", "16", "--policy", "reference",
                  "--trust", "--json"]
        commands = {"eval": [*envhub, "eval", *common, "-o", f"{tmp}/out.jsonl"],
                    "eval --curriculum": [*envhub, "eval", *common, "--curriculum", "-o", f"{tmp}/out.jsonl"]}
        env = {"ENVHUB_HOME": f"{tmp}/home", "ENVHUB_CACHE": f"{tmp}/cache"}
        times: dict[str, list[float]] = {label: [] for label in commands}
        for i in range(args.repeat + 1):  # taking turns; the first round warms up, untimed
            for label, cmd in commands.items():
                Path(tmp, "out.jsonl").unlink(missing_ok=True)
                elapsed, done = run_once(cmd, extra_env=env)
                if done.returncode != 0:
                    sys.exit(f"error: {label} failed: {done.stderr.decode(errors='replace')}")
                if i:
                    times[label].append(elapsed)
    plain, cur = statistics.median(times["eval"]), statistics.median(times["eval --curriculum"])
    print(f"envhub eval, {args.rollouts} rollouts, -c 16, number-sequences train, reference policy")
    print(f"  every task queued at once   {plain:8.3f} s")
    print(f"  --curriculum (success-window, batches of 16)  {cur:8.3f} s")
    print(f"  ratio: {cur / plain:.2f}x")

    c, p, made, read = in_process(args.rollouts * 5, args.repeat)
    n = args.rollouts * 5
    print(f"in process, {n} draws")
    print(f"  Curriculum.next() + update()  {c / n * 1e6:7.2f} us/draw  vs indexing the split {p / n * 1e6:7.2f} us: "
          f"{c / p:.2f}x")
    print(f"  a generated task  {made / n * 1e6:7.2f} us  vs the same task read from a loaded JSONL file "
          f"{read / n * 1e6:7.2f} us: {made / read:.1f}x")


if __name__ == "__main__":
    main()
