"""What does the sandbox cost per code-tests run?

    .venv/bin/python bench/sandbox.py [--runs 40] [--concurrent 64]

Measured in one run, taking turns so a slow spell falls on every side alike:

1. the baseline: a bare interpreter, ``python -I -c pass``, started and waited for;
2. a sandbox that runs nothing (every namespace, the private view, Landlock, rlimits);
3. a code-tests score with tests as data (``{"calls": [...]}``, one sandbox);
4. a code-tests score with Python test code (two sandboxes: the candidate's and the tests');
5. ``--concurrent`` scores of 3. at once on the event loop, against as many bare
   interpreters at once.

Each line prints the median per run and its ratio to the baseline (the target for 3. is
under 4x). A measurement, not a test: it exits 0 whatever the timing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envhub.manifest._models import CodeTests  # noqa: E402
from envhub.runtime._types import Task, Trajectory  # noqa: E402
from envhub.runtime.verifiers import CodeTestsVerifier  # noqa: E402
from envhub.sandbox import Limits, Sandbox, probe  # noqa: E402

CANDIDATE = "```python\ndef add(a, b):\n    return a + b\n```"
CALLS = {"calls": [{"call": "add", "args": [i, i], "expected": 2 * i} for i in range(5)]}
CODE = "\n".join(f"assert add({i}, {i}) == {2 * i}" for i in range(5)) + "\n"


async def bare() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-I", "-c", "pass")
    await proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--concurrent", type=int, default=64)
    args = parser.parse_args()

    found = probe()
    print(f"sandbox layers: {', '.join(found.layers)}")
    if found.missing:
        print(f"missing here:   {', '.join(found.missing)}")
    verifier = CodeTestsVerifier(CodeTests(kind="code-tests", timeout_s=30))
    sandbox = Sandbox(Limits(timeout_s=30))
    data_task = Task(id="calls", split="bench", data={"id": "calls", "tests": CALLS})
    code_task = Task(id="code", split="bench", data={"id": "code", "tests": CODE})
    completion = Trajectory.of(CANDIDATE)

    async def empty() -> None:
        await sandbox.run("pass", None)

    async def calls() -> None:
        score = await verifier.ascore(data_task, completion)
        assert score.reward == 1.0, score.info

    async def code() -> None:
        score = await verifier.ascore(code_task, completion)
        assert score.reward == 1.0, score.info

    sides: dict[str, Callable[[], Awaitable[None]]] = {
        "python -I -c pass": bare, "empty sandbox": empty, "code-tests, calls": calls, "code-tests, test code": code,
    }
    times: dict[str, list[float]] = {name: [] for name in sides}

    async def sequential() -> None:
        for fn in sides.values():
            await fn()  # warm up: page cache, the first run's probe of the kernel
        for _ in range(args.runs):
            for name, fn in sides.items():
                start = time.perf_counter()
                await fn()
                times[name].append(time.perf_counter() - start)

    async def concurrent(fn: Callable[[], Awaitable[None]]) -> float:
        start = time.perf_counter()
        await asyncio.gather(*(fn() for _ in range(args.concurrent)))
        return time.perf_counter() - start

    asyncio.run(sequential())
    base = statistics.median(times["python -I -c pass"])
    print(f"\none at a time, median of {args.runs} runs:")
    for name, values in times.items():
        median = statistics.median(values)
        target = "   (target: under 4x)" if name == "code-tests, calls" else ""
        print(f"  {name:<24} {median * 1000:7.1f} ms   {median / base:5.2f}x{target}")

    async def both() -> tuple[float, float]:
        bare_s, calls_s = [], []
        for _ in range(3):
            bare_s.append(await concurrent(bare))
            calls_s.append(await concurrent(calls))
        return statistics.median(bare_s), statistics.median(calls_s)

    bare_s, calls_s = asyncio.run(both())
    print(f"\n{args.concurrent} at once, median of 3 rounds:")
    print(f"  {args.concurrent} x python -I -c pass    {bare_s * 1000:7.0f} ms")
    print(f"  {args.concurrent} x code-tests, calls    {calls_s * 1000:7.0f} ms   {calls_s / bare_s:5.2f}x   "
          f"({args.concurrent / calls_s:.0f} scores/s)")


if __name__ == "__main__":
    main()
