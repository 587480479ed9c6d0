"""``example_envs/number-sequences``: a procedural generator with difficulty levels, checked
against an independent solver, reproduced in another process, driven by a curriculum, and
with its held-out seed range kept out of the public bundle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.errors import EnvNotFoundError
from tests.conftest import run_envhub

BUNDLE = Path(__file__).resolve().parents[1] / "example_envs" / "number-sequences"


@pytest.fixture(scope="module")
def env() -> Any:
    with envhub.load(BUNDLE, trust_code=True) as env:
        yield env


def next_term(rule: dict[str, Any], terms: list[int]) -> int:
    """The next term, worked out from the rule's parameters and the shown terms only (not
    with the generator's code), so a generator bug shows up as a disagreement."""
    kind, n = rule["kind"], len(terms)
    if kind == "arithmetic":
        return terms[-1] + rule["step"]
    if kind == "geometric":
        return terms[-1] * rule["ratio"]
    if kind == "alternating":
        return terms[-1] + (rule["up"] if n % 2 else -rule["down"])
    if kind == "growing-steps":
        return terms[-1] + terms[-1] - terms[-2] + rule["growth"]
    if kind == "sum-of-two-before":
        return terms[-1] + terms[-2]
    if kind == "interleaved":
        same = terms[-2::-2][::-1]  # every other term, ending with the one two back
        return same[-1] + (same[-1] - same[-2])
    if kind == "multiply-add":
        return terms[-1] * rule["factor"] + rule["add"]
    raise AssertionError(f"unknown rule {kind}")


def shown(task: Any) -> list[int]:
    return [int(x) for x in task.prompt.split("\n")[-1].removesuffix(", ...").split(", ")]


def test_every_answer_follows_its_rule_at_every_level(env: Any) -> None:
    tasks = list(env.tasks("train", limit=400))
    kinds: dict[int, set[str]] = {}
    for task in tasks:
        kinds.setdefault(task.difficulty, set()).add(task["rule"]["kind"])
        terms = shown(task)
        assert len(terms) == 5 + max(0, task.difficulty - 2)
        assert int(task["answer"]) == next_term(task["rule"], terms), task.id
    assert kinds == {1: {"arithmetic"}, 2: {"geometric", "alternating"},
                     3: {"growing-steps", "sum-of-two-before"}, 4: {"interleaved", "multiply-add"}}


def test_levels_rotate_and_a_split_covers_each_evenly(env: Any) -> None:
    assert [t.difficulty for t in env.tasks("dev")] == [1, 2, 3, 4] * 10
    assert {level: len(tasks) for level, tasks in env.tasks_by_level("train").items()} == {
        1: 250_000_000, 2: 250_000_000, 3: 250_000_000, 4: 250_000_000}


def test_the_same_seed_gives_the_same_task_in_another_process(env: Any) -> None:
    code = ("import envhub, json, sys; env = envhub.load(sys.argv[1], trust_code=True); "
            "print(json.dumps([dict(t.data) for t in env.tasks('dev')]))")
    out = subprocess.run([sys.executable, "-c", code, str(BUNDLE)], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PATH": ""}).stdout
    assert json.loads(out) == [dict(t.data) for t in env.tasks("dev")]


def test_a_wrong_or_missing_answer_scores_zero(env: Any) -> None:
    task = env.tasks("dev")[3]
    assert env.score(task, f"The rule is clear. \\boxed{{{task['answer']}}}").reward == 1.0
    assert env.score(task, f"\\boxed{{{int(task['answer']) + 1}}}").reward == 0.0
    assert env.score(task, task["answer"]).reward == 0.0  # not boxed: the prompt asks for \boxed{}


def test_a_curriculum_run_moves_a_learning_policy_up_the_levels(tmp_path: Path) -> None:
    policy = tmp_path / "learner.py"
    policy.write_text(
        "calls = 0\n"
        "def act(messages, task):\n"
        "    global calls\n"
        "    skill = 1 + calls // 40  # masters one more level every 40 answers\n"
        "    calls += 1\n"
        "    return '\\\\boxed{%s}' % (task['answer'] if task.difficulty <= skill else 0)\n")
    out = tmp_path / "run.jsonl"
    result = run_envhub("eval", str(BUNDLE), "--split", "train", "--curriculum", "-n", "160", "-c", "8",
                        "--seed", "1", "--policy", f"python:{policy}:act", "--trust", "-o", str(out), "--json")
    assert result.code == 0, result.err
    summary = json.loads(result.out)["curriculum"]
    assert summary["highest_level"] == 4 and summary["draws"] == 160
    records = [json.loads(line) for line in out.read_text().splitlines()]
    levels = [r["curriculum"]["level"] for r in sorted(records, key=lambda r: r["curriculum"]["step"])]
    assert levels[:32] == [1] * 32 and levels[-1] >= 3
    assert levels == sorted(levels)  # this learner never forgets: it is never demoted


def test_the_test_split_is_drawn_from_the_committed_secret(env: Any) -> None:
    from envhub.tasks import heldout_seeds, read_secret

    key = read_secret(BUNDLE / "secrets" / "test.key")
    seeds = heldout_seeds(key, "test", 80, [1_100_000_000, 2_100_000_000])
    tasks = env.tasks("test")
    assert [t.seed for t in tasks] == seeds and len(set(seeds)) == 80
    assert [t.id for t in tasks] == [f"test-{i}" for i in range(80)]  # the seed is not in the id
    assert [t.difficulty for t in tasks] == [1, 2, 3, 4] * 20
    assert all(str(seed) not in t.prompt for t, seed in zip(tasks, seeds, strict=True))


def test_pushing_keeps_the_held_out_seeds_private(tmp_path: Path) -> None:
    assert run_envhub("push", str(BUNDLE)).code == 0
    public = envhub.load("envhub-examples/number-sequences", trust_code=True)
    assert not public.splits["test"].available and public.splits["test"].rows == 80
    key = (BUNDLE / "secrets" / "test.key").read_text().strip()
    manifest = (public.root / "envhub.toml").read_text()
    assert "seed-space" in manifest and "1100000000" in manifest  # the public domain, not the seeds
    assert key not in manifest and "secret =" not in manifest and not (public.root / "secrets").exists()
    with pytest.raises(EnvNotFoundError, match="its seeds are not in this copy of the bundle"):
        public.tasks("test")
    full = envhub.load("envhub-examples/number-sequences", trust_code=True, with_heldout=True)
    with envhub.load(BUNDLE, trust_code=True) as source:
        expected = [(t.id, t.seed, t["answer"]) for t in source.tasks("test")]
    assert [(t.id, t.seed, t["answer"]) for t in full.tasks("test")] == expected
