"""example_envs/python-functions: the tasks are what generate.py makes, prompts tell the truth,
the tests catch wrong functions, and the verifier reads the reply the way the README says.

The generic checks (validate --check, the pytest plugin) run over every example elsewhere;
these test what is particular to this environment. In-process checks cover every public
task; only a few cases go through the real sandbox, to keep the file fast.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import envhub

BUNDLE = Path(__file__).resolve().parent.parent / "example_envs" / "python-functions"
SPLITS = ("train", "dev", "test")


def public_rows() -> list[dict[str, Any]]:
    rows = []
    for split in ("train", "dev"):
        with open(BUNDLE / "tasks" / f"{split}.jsonl", encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


ROWS = public_rows()


def solution_namespace(row: dict[str, Any]) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "solution"}
    exec(compile(row["solution"], f"<{row['id']} solution>", "exec"), namespace)
    return namespace


def run_tests(namespace: dict[str, Any], tests: str) -> None:
    """Run the tests against ``namespace`` (asserts, then test functions); raise on a failure."""
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
    drops_the_rest = "def chunk(items, size):\n    return [items[i:i + size] for i in range(0, len(items) - size + 1, size)]"
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
