#!/usr/bin/env python3
"""Write the task files of ``envhub-examples/python-functions`` from ``problems.py``.

    python generate.py                  # rewrite tasks/{train,dev,test}.jsonl
    python generate.py --out /tmp/tasks # somewhere else

The problems are written by hand (``problems.py``); this script turns each into a task row
and deals them into splits. Standard library only, and deterministic: the same problems and
seed always give the same bytes, so the ``rows`` and ``sha256`` recorded in ``envhub.toml``
can be checked by ``envhub validate`` after regenerating.

Before writing anything it checks every problem, in this process (the problems are ours,
so no sandbox is needed here; envhub's verifier runs candidates in one):

- the reference solution passes every one of its tests;
- a stub that returns None fails at least one test, so the tests test something;
- there are at least five tests, and they call the function the prompt names.

The examples in each prompt are computed by calling the reference solution, so a prompt
can never promise a result its tests contradict.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import textwrap
from pathlib import Path
from typing import Any

from problems import PROBLEMS, Problem

DEFAULT_SEED = 20240611
#: How many problems of each difficulty go to dev and to test; train gets the rest.
DEV = {1: 3, 2: 4, 3: 3}
TEST = {1: 4, 2: 4, 3: 4}
SPLITS = ("train", "dev", "test")


def count_tests(tests: str) -> int:
    """How many tests the code-tests verifier sees: top-level asserts and test functions."""
    tree = ast.parse(tests)
    return sum(isinstance(node, ast.Assert)
               or (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"))
               for node in tree.body)


def run_tests(namespace: dict[str, Any], tests: str) -> None:
    """Run ``tests`` against ``namespace`` the way the verifier does; raise on any failure."""
    scope = dict(namespace)
    exec(compile(tests, "<tests>", "exec"), scope)
    for name, value in list(scope.items()):
        if name.startswith("test") and callable(value) and name not in namespace:
            value()


def check(problem: Problem) -> dict[str, Any]:
    """Check ``problem`` (see the module docstring) and return its solution's namespace.

    Raises ``SystemExit`` naming the problem and what is wrong with it.
    """
    def fail(why: str) -> SystemExit:
        return SystemExit(f"problem {problem.name}: {why}")

    if not problem.signature.startswith(problem.name + "("):
        raise fail(f"the signature {problem.signature!r} does not define {problem.name}")
    if count_tests(problem.tests) < 5:
        raise fail("fewer than five tests")
    if problem.name not in problem.tests:
        raise fail("the tests never call the function")
    namespace: dict[str, Any] = {"__name__": "solution"}
    exec(compile(problem.solution, f"<{problem.name} solution>", "exec"), namespace)
    try:
        run_tests(namespace, problem.tests)
    except Exception as e:
        raise fail(f"the reference solution fails its tests: {type(e).__name__}: {e}") from e
    try:
        run_tests({"__name__": "solution", problem.name: lambda *args, **kwargs: None}, problem.tests)
    except Exception:
        pass
    else:
        raise fail("a stub returning None passes every test")
    return namespace


def prompt_for(problem: Problem, namespace: dict[str, Any]) -> str:
    """The prompt: the signature, the behaviour, and examples with their true results."""
    examples = "\n".join(f"    >>> {call}\n    {eval(call, dict(namespace))!r}" for call in problem.examples)
    behaviour = textwrap.fill(problem.behaviour, width=100)
    return (f"Write a Python function with this signature:\n\n    def {problem.signature}\n\n"
            f"{behaviour}\n\nExamples:\n\n{examples}\n")


def assign_splits(seed: int) -> dict[str, list[Problem]]:
    """Deal the problems into splits, the same number of each difficulty every time."""
    rng = random.Random(seed)
    splits: dict[str, list[Problem]] = {name: [] for name in SPLITS}
    for difficulty in sorted({p.difficulty for p in PROBLEMS}):
        # Sorted by name first, so the deal depends only on the seed and the set of problems,
        # not on the order they are written in problems.py.
        pool = sorted((p for p in PROBLEMS if p.difficulty == difficulty), key=lambda p: p.name)
        rng.shuffle(pool)
        n_test, n_dev = TEST[difficulty], DEV[difficulty]
        splits["test"] += pool[:n_test]
        splits["dev"] += pool[n_test:n_test + n_dev]
        splits["train"] += pool[n_test + n_dev:]
    return splits


def row(problem: Problem, namespace: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"pyfn-{problem.name}",
        "prompt": prompt_for(problem, namespace),
        "difficulty": problem.difficulty,
        "function": problem.name,
        "tests": problem.tests.strip() + "\n",
        "solution": problem.solution.strip() + "\n",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="for dealing problems into splits "
                        "(default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "tasks",
                        help="directory for the JSONL files (default: tasks/ beside this script)")
    args = parser.parse_args(argv)

    names = [p.name for p in PROBLEMS]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SystemExit(f"problems defined twice: {', '.join(duplicates)}")
    namespaces = {p.name: check(p) for p in PROBLEMS}

    args.out.mkdir(parents=True, exist_ok=True)
    for split, problems in assign_splits(args.seed).items():
        problems.sort(key=lambda p: (p.difficulty, p.name))
        rows = [row(p, namespaces[p.name]) for p in problems]
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
        path = args.out / f"{split}.jsonl"
        path.write_bytes(data)
        # In the form of envhub.toml's [tasks.splits.*], to paste there if the data changed.
        print(f"{split}: {path}\n  rows = {len(rows)}\n  sha256 = \"{hashlib.sha256(data).hexdigest()}\"")


if __name__ == "__main__":
    main()
