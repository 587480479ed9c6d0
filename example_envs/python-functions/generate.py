#!/usr/bin/env python3
"""Write the task files of ``envhub-examples/python-functions`` from ``problems.py``.

    python generate.py                  # rewrite tasks/{train,dev,test}.jsonl
    python generate.py --out /tmp/tasks # somewhere else

Run it with a Python that has envhub installed, on Linux (it scores through envhub's sandbox).

The problems are written by hand (``problems.py``); this script turns each into a task row
and deals them into splits. Deterministic: the same problems and seed always give the same
bytes, so the ``rows`` and ``sha256`` recorded in ``envhub.toml`` can be checked by
``envhub validate`` after regenerating.

A task's tests are data when they can be: if every test of a problem is a top-level
``assert NAME(literal, ...) == literal`` (or ``is True``, ``is False``, ``is None``), the
task's ``tests`` field is code-tests' calls form, ``{"calls": [{"call": NAME, "args": [...],
"kwargs": {...}, "expected": ...}, ...]}``, compared in envhub's own process so the candidate
never holds an expected value. Otherwise (a "must raise" test function, a check that is not
plain equality, arguments built by an expression) the field keeps the Python test code.

Before writing anything it checks every problem:

- the reference solution passes every one of its tests;
- a stub that returns None fails at least one test, so the tests test something;
- there are at least five tests, and they call the function the prompt names.

Python test code is checked in this process (the problems are ours, so no sandbox is needed
for them); calls are checked by scoring the reference and the stub through envhub's own
code-tests verifier, with the limits of ``envhub.toml``, so the check compares exactly as a
score will (bools only equal bools, a tuple equals a list, floats within a tolerance).

The examples in each prompt are computed by calling the reference solution, so a prompt
can never promise a result its tests contradict.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import sys
import textwrap
from pathlib import Path
from typing import Any

from envhub import load_manifest
from envhub.runtime import Task, Trajectory
from envhub.runtime.verifiers import CodeTestsVerifier
from envhub.sandbox import codec
from problems import PROBLEMS, Problem

HERE = Path(__file__).resolve().parent
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


def call_case(node: ast.stmt, function: str) -> dict[str, Any] | None:
    """``node`` as a calls case, or None when it is not ``assert function(literals) == literal``.

    ``is True``, ``is False`` and ``is None`` convert too: the verifier's comparison lets a
    bool equal only a bool and None only None, which is what ``is`` checks for them.
    Tuples, sets and other types JSON lacks are written with the codec's tags.
    """
    if not (isinstance(node, ast.Assert) and node.msg is None and isinstance(node.test, ast.Compare)
            and len(node.test.ops) == 1):
        return None
    call, op, right = node.test.left, node.test.ops[0], node.test.comparators[0]
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == function):
        return None
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(kw.arg is None for kw in call.keywords):
        return None
    try:
        args = [ast.literal_eval(arg) for arg in call.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg is not None}
        expected = ast.literal_eval(right)
    except ValueError:  # not a literal: an expression, a name
        return None
    if isinstance(op, ast.Is):
        if not (expected is None or type(expected) is bool):
            return None
    elif not isinstance(op, ast.Eq):
        return None
    case: dict[str, Any] = {"call": function, "args": codec.encode(args)}
    if kwargs:
        case["kwargs"] = codec.encode(kwargs)
    case["expected"] = codec.encode(expected)
    return case


def calls_for(problem: Problem) -> dict[str, Any] | None:
    """The problem's tests as ``{"calls": [...]}``, or None unless every test converts."""
    cases = [call_case(node, problem.name) for node in ast.parse(problem.tests).body]
    if not cases or any(case is None for case in cases):
        return None
    return {"calls": cases}


def score_calls(verifier: CodeTestsVerifier, problem: Problem, tests: dict[str, Any], code: str) -> list[str]:
    """Score ``code`` on ``tests`` through the real verifier; return the names of the tests it
    fails (every test, with the reason, when the run failed as a whole)."""
    task = Task(id=f"pyfn-{problem.name}", split="generate", data={"tests": tests})
    score = verifier.score(task, Trajectory.of(f"```python\n{code.strip()}\n```"))
    if "reason" in score.info:
        return [f"every test ({score.info['reason']})"]
    return [f"{t['name']}: {t.get('error')}" for t in score.info["tests"] if not t["passed"]]


def check(problem: Problem, verifier: CodeTestsVerifier) -> tuple[dict[str, Any], str | dict[str, Any]]:
    """Check ``problem`` (see the module docstring); return its solution's namespace and the
    task's tests, as calls when they convert, else as code.

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
    calls = calls_for(problem)
    if calls is None:
        return namespace, problem.tests.strip() + "\n"
    failed = score_calls(verifier, problem, calls, problem.solution)
    if failed:
        raise fail("the reference solution fails its calls: " + "; ".join(failed))
    stub = f"def {problem.name}(*args, **kwargs):\n    return None\n"
    if not score_calls(verifier, problem, calls, stub):
        raise fail("a stub returning None passes every call")
    return namespace, calls


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


def row(problem: Problem, namespace: dict[str, Any], tests: str | dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"pyfn-{problem.name}",
        "prompt": prompt_for(problem, namespace),
        "difficulty": problem.difficulty,
        "function": problem.name,
        "tests": tests,
        "solution": problem.solution.strip() + "\n",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="for dealing problems into splits "
                        "(default: %(default)s)")
    parser.add_argument("--out", type=Path, default=HERE / "tasks",
                        help="directory for the JSONL files (default: tasks/ beside this script)")
    args = parser.parse_args(argv)

    names = [p.name for p in PROBLEMS]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SystemExit(f"problems defined twice: {', '.join(duplicates)}")
    verifier = CodeTestsVerifier(load_manifest(HERE).verifier)
    checked = {p.name: check(p, verifier) for p in PROBLEMS}
    as_calls = sorted(name for name, (_, tests) in checked.items() if isinstance(tests, dict))
    print(f"{len(as_calls)} of {len(PROBLEMS)} problems have calls, the others test code", file=sys.stderr)

    args.out.mkdir(parents=True, exist_ok=True)
    for split, problems in assign_splits(args.seed).items():
        problems.sort(key=lambda p: (p.difficulty, p.name))
        rows = [row(p, *checked[p.name]) for p in problems]
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
        path = args.out / f"{split}.jsonl"
        path.write_bytes(data)
        # In the form of envhub.toml's [tasks.splits.*], to paste there if the data changed.
        print(f"{split}: {path}\n  rows = {len(rows)}\n  sha256 = \"{hashlib.sha256(data).hexdigest()}\"")


if __name__ == "__main__":
    main()
