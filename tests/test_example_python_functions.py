"""example_envs/python-functions: the tasks are what generate.py makes, prompts tell the truth,
the tests catch wrong functions, most tests are data whose expected values never reach the
candidate, and the verifier reads the reply the way the README says.

The generic checks (validate --check, the pytest plugin) run over every example elsewhere;
these test what is particular to this environment. In-process checks cover every public
task; only a few cases go through the real sandbox, to keep the file fast.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.runtime import Task, Trajectory
from envhub.runtime.verifiers import CodeTestsVerifier
from envhub.sandbox import codec

BUNDLE = Path(__file__).resolve().parent.parent / "example_envs" / "python-functions"
SPLITS = ("train", "dev", "test")


def public_rows() -> list[dict[str, Any]]:
    rows = []
    for split in ("train", "dev"):
        with open(BUNDLE / "tasks" / f"{split}.jsonl", encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


def all_rows() -> list[dict[str, Any]]:
    """Every split's rows, the held-out test split's too (in the repository, before a build
    moves it to the private store)."""
    rows = []
    for split in SPLITS:
        with open(BUNDLE / "tasks" / f"{split}.jsonl", encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


ROWS = public_rows()


def solution_namespace(row: dict[str, Any]) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "solution"}
    exec(compile(row["solution"], f"<{row['id']} solution>", "exec"), namespace)
    return namespace


def run_tests(namespace: dict[str, Any], tests: str | dict[str, Any]) -> None:
    """Run the tests against ``namespace`` (test code: asserts, then test functions; calls:
    each call, compared as the verifier compares); raise on a failure."""
    if isinstance(tests, dict):
        for case in tests["calls"]:
            got = namespace[case["call"]](*codec.decode(case["args"]), **codec.decode(case.get("kwargs", {})))
            assert codec.same(got, codec.decode(case["expected"])), (case, got)
        return
    scope = dict(namespace)
    exec(compile(tests, "<tests>", "exec"), scope)
    for name, value in list(scope.items()):
        if name.startswith("test") and callable(value) and name not in namespace:
            value()


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def test_generate_reproduces_the_task_files(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(BUNDLE / "generate.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for split in SPLITS:
        assert (tmp_path / f"{split}.jsonl").read_bytes() == (BUNDLE / "tasks" / f"{split}.jsonl").read_bytes(), split


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_prompt_examples_are_what_the_reference_returns(row: dict[str, Any]) -> None:
    namespace = solution_namespace(row)
    examples = re.findall(r"^    >>> (.+)\n    (.+)$", row["prompt"], re.M)
    assert examples, "the prompt shows no examples"
    for call, shown in examples:
        assert call.startswith(row["function"] + "(")
        assert repr(eval(call, dict(namespace))) == shown
    assert f"    def {row['function']}(" in row["prompt"]


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_the_tests_pass_the_reference_and_reject_a_stub(row: dict[str, Any]) -> None:
    run_tests(solution_namespace(row), row["tests"])
    with pytest.raises(Exception):  # noqa: B017 - any failure will do: an assert, a TypeError on None
        run_tests({row["function"]: lambda *args, **kwargs: None}, row["tests"])


def test_a_wrong_function_fails_the_tests_it_breaks() -> None:
    env = envhub.load(BUNDLE)
    task = env.task("train", "pyfn-chunk")
    drops_the_rest = ("def chunk(items, size):\n"
                      "    return [items[i:i + size] for i in range(0, len(items) - size + 1, size)]")
    score = env.score(task, fenced(drops_the_rest))
    assert score.reward == pytest.approx(4 / 6)
    assert [t["name"] for t in score.info["tests"] if not t["passed"]] == [
        "line 2: assert chunk([1, 2, 3, 4, 5], 3) == [[1, 2, 3], [4, 5]]",
        "line 3: assert chunk([1, 2], 5) == [[1, 2]]",
    ]


def test_an_episode_is_one_turn_scored_on_the_last_python_block() -> None:
    env = envhub.load(BUNDLE)
    task = env.task("dev", "pyfn-merge_sorted")
    with env.episode(task) as episode:
        observation = episode.reset()
        assert [m["role"] for m in observation.messages] == ["system", "user"]
        assert "```python" in observation.messages[0]["content"]
        draft = "def merge_sorted(a, b):\n    return a + b"
        reply = f"A first try:\n{fenced(draft)}\nThat is not sorted. Fixed:\n{fenced(task['solution'])}"
        result = episode.step(reply)
    assert (result.done, result.reward, result.info["breakdown"]) == (True, 1.0, {"tests_passed": 1.0})


def test_a_reply_without_code_scores_zero_with_the_reason() -> None:
    env = envhub.load(BUNDLE)
    score = env.score(env.task("dev", "pyfn-initials"), "Take the first letter of each word.")
    assert score.reward == 0.0
    assert "SyntaxError" in score.info["reason"]


def test_most_problems_are_calls_and_the_rest_keep_test_code() -> None:
    rows = all_rows()
    calls = [r for r in rows if isinstance(r["tests"], dict)]
    code = [r for r in rows if isinstance(r["tests"], str)]
    assert (len(calls), len(code)) == (33, 20)
    for row in calls:
        assert list(row["tests"]) == ["calls"], row["id"]
        assert len(row["tests"]["calls"]) >= 5, row["id"]
        assert {case["call"] for case in row["tests"]["calls"]} == {row["function"]}, row["id"]
    # Test code stays only where data cannot say it: a test function ("must raise"), an assert
    # that is not a call with literal arguments compared with a literal, setup.
    for row in code:
        statements = ast.parse(row["tests"]).body
        assert not all(is_literal_call(node, row["function"]) for node in statements), row["id"]


def is_literal_call(node: ast.stmt, function: str) -> bool:
    """Whether ``node`` is ``assert function(literals) == literal`` (or ``is``)."""
    if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
        return False
    call, ops = node.test.left, node.test.ops
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == function
            and len(ops) == 1 and isinstance(ops[0], ast.Eq | ast.Is)):
        return False
    try:
        for value in [*call.args, *(kw.value for kw in call.keywords), node.test.comparators[0]]:
            ast.literal_eval(value)
    except ValueError:
        return False
    return True


# A candidate that searches its sandbox for one value, WANTED (given in hexadecimal, so that
# neither its source nor anything it builds holds the value's decimal digits whole): in the
# objects of the Python heap, in the process's raw memory (where the job's text arrived), and
# in every file it can see but the system's own. It prints where it found the value to stderr
# and returns the value if found anywhere, else -1.
SEARCHER = """
import ctypes, gc, os, sys

HEAD, TAIL = (str(part).encode() for part in divmod(WANTED, 10**7))
TAIL = TAIL.zfill(7)


def in_bytes(data):
    at = data.find(HEAD)
    while at != -1:
        if data[at + len(HEAD):at + len(HEAD) + len(TAIL)] == TAIL:
            return True
        at = data.find(HEAD, at + 1)
    return False


def in_objects():
    for obj in gc.get_objects():
        items = list(obj.items()) if type(obj) is dict else obj if type(obj) in (list, tuple) else ()
        for item in items:
            for x in (item if type(obj) is dict else (item,)):
                if type(x) is int and x == WANTED and x is not WANTED:
                    return True
    return False


def in_memory():
    with open("/proc/self/maps") as maps:
        for line in maps.read().splitlines():
            fields = line.split()
            if "r" in fields[1] and fields[-1] not in ("[vvar]", "[vvar_vclock]", "[vsyscall]"):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                if in_bytes(ctypes.string_at(start, end - start)):
                    return True
    return False


def in_files():
    skip = {"/proc", "/sys", "/dev", "/usr", sys.base_prefix, sys.prefix}
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
        for name in files:
            try:
                with open(os.path.join(root, name), "rb") as f:
                    if in_bytes(f.read(64 << 20)):
                        return True
            except OSError:
                pass
    return False


FOUND = {}


def next_palindrome(n):
    if not FOUND:  # search once, at the first call: the run holds all it was given by then
        FOUND.update(objects=in_objects(), memory=in_memory(), files=in_files())
        print("found:", FOUND, file=sys.stderr)
    return WANTED if any(FOUND.values()) else -1
"""


def test_a_calls_problem_never_gives_the_candidate_its_expected_values() -> None:
    env = envhub.load(BUNDLE)
    task = env.task("dev", "pyfn-next_palindrome")
    [case] = [c for c in task["tests"]["calls"] if c["args"] == [123456789012345]]
    wanted = case["expected"]
    assert wanted == 123456797654321
    searcher = fenced(f"WANTED = {hex(wanted)}\n" + SEARCHER)
    assert str(wanted) not in searcher
    score = env.score(task, searcher)
    assert score.reward == 0.0
    errors = {t["name"]: t.get("error") for t in score.info["tests"]}
    assert errors["next_palindrome(123456789012345)"] == "returned -1, expected 123456797654321"
    assert "found: {'objects': False, 'memory': False, 'files': False}" in score.info["stderr_tail"]
    # Positive control: the same search, once the value is in the sandbox (as an argument of
    # one more call, which arrives the way an expected value would if it were sent), finds it.
    verifier = CodeTestsVerifier(env.manifest.verifier)
    given = {"calls": [*task["tests"]["calls"], {"call": "next_palindrome", "args": [wanted], "expected": 0}]}
    control = verifier.score(Task(id=task.id, split="dev", data={"tests": given}), Trajectory.of(searcher))
    passed = [t["name"] for t in control.info["tests"] if t["passed"]]
    assert passed == ["next_palindrome(123456789012345)"], control.info
    assert "found: {'objects': True, 'memory': True, 'files': False}" in control.info["stderr_tail"]
