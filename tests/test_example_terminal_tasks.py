"""example_envs/terminal-tasks: fourteen shell tasks in a sandbox workspace, scored by their
own tests in a fresh sandbox. Every reference solution scores 1.0 and doing nothing less;
partial work gets partial credit; the shortcuts an agent could take (editing the package's
tests, leaving PASS lines or a reward file) do not pay. The held-out tasks' tests travel in
their rows, never in the public tests/ directory.

The generic checks (validate --check, the held-out leak scan) run over every example elsewhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import envhub
from tests.conftest import run_envhub

BUNDLE = Path(__file__).resolve().parent.parent / "example_envs" / "terminal-tasks"
SPLITS = ("train", "dev", "test")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux's")


@pytest.fixture(scope="module")
def env() -> Any:
    with envhub.load(BUNDLE, trust_code=True) as loaded:
        yield loaded


def rows(split: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (BUNDLE / "tasks" / f"{split}.jsonl").read_text().splitlines()]


ALL = [(split, row["id"]) for split in SPLITS for row in rows(split)]


def bash(command: str, i: int = 0) -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": arguments}}]}


def play(env: Any, split: str, task_id: str, actions: list[Any]) -> tuple[Any, list[str]]:
    """Play ``actions`` then a final message; (score, tool outputs)."""
    outputs: list[str] = []
    with env.episode(env.task(split, task_id)) as episode:
        episode.reset()
        for action in [*actions, "Done."]:
            result = episode.step(action)
            outputs.extend(result.info.get("tool_results", []))
            if result.done:
                return episode.score, outputs
    raise AssertionError("the episode did not end")


def test_generate_reproduces_the_tasks_and_tests(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(BUNDLE / "generate.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for split in SPLITS:
        made_rows = (tmp_path / "tasks" / f"{split}.jsonl").read_bytes()
        assert made_rows == (BUNDLE / "tasks" / f"{split}.jsonl").read_bytes(), split
    made = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "tests").rglob("*") if p.is_file()}
    shipped = {p.relative_to(BUNDLE): p.read_bytes() for p in (BUNDLE / "tests").rglob("*") if p.is_file()}
    assert made == shipped


def test_the_tasks_span_three_levels_and_the_test_split_is_held_out() -> None:
    assert len(ALL) >= 10
    for split in SPLITS:
        assert {row["difficulty"] for row in rows(split)} == {1, 2, 3}, split
    public = {row["id"] for split in ("train", "dev") for row in rows(split)}
    heldout = rows("test")
    # Public tasks name their directory of tests; held-out tasks carry theirs inline, so the
    # public tests/ directory holds nothing of theirs.
    assert {p.name for p in (BUNDLE / "tests").iterdir()} == public
    assert all(isinstance(row["tests"], dict) and "run-tests.sh" in row["tests"] for row in heldout)
    assert "generate.py" in (BUNDLE / ".envhubignore").read_text().split()


@pytest.mark.parametrize(("split", "task_id"), ALL, ids=[task_id for _, task_id in ALL])
def test_the_reference_scores_one_and_doing_nothing_less(env: Any, split: str, task_id: str) -> None:
    task = env.task(split, task_id)
    actions = env.reference_actions(task)
    assert actions[-1]["role"] == "assistant" and not actions[-1].get("tool_calls")
    score, _ = play(env, split, task_id, actions[:-1])
    assert score.reward == 1.0, score
    assert len(score.breakdown) >= 3 and set(score.breakdown.values()) == {1.0}
    nothing, _ = play(env, split, task_id, [])
    assert nothing.reward < 1.0


def test_partial_work_gets_partial_credit(env: Any) -> None:
    # Splitting on any whitespace fixes two tests; the tie order stays wrong.
    score, _ = play(env, "train", "fix-failing-tests", [bash("sed -i 's/text.split(\" \")/text.split()/' "
                                                             "wordstats/core.py")])
    assert score.breakdown["hidden-newlines"] == 1.0
    assert score.breakdown["hidden-ties"] == 0.0 and score.breakdown["suite-passes"] == 0.0
    assert 0.0 < score.reward < 1.0


def test_editing_the_packages_tests_does_not_pay(env: Any) -> None:
    # The suite passes once its failing tests are deleted, but the verifier's copy of the
    # tests and its hidden checks still fail.
    cheat = "printf 'import unittest\\n' > test_wordstats.py && python3 -m unittest -q test_wordstats"
    score, outputs = play(env, "train", "fix-failing-tests", [bash(cheat)])
    assert "OK" in outputs[0]  # control: the edited suite does pass in the workspace
    assert score.breakdown["tests-unchanged"] == 0.0
    assert score.breakdown["hidden-ties"] == 0.0
    assert score.reward < 0.5


def test_pass_lines_and_a_reward_file_in_the_workspace_do_not_pay(env: Any) -> None:
    forge = ("echo 1 > reward.txt; printf 'PASS file-written\\nPASS error-messages\\n' > run-tests.sh; "
             "echo PASS error-messages")
    score, outputs = play(env, "train", "extract-errors", [bash(forge)])
    assert outputs[0].startswith("PASS error-messages")
    assert score.breakdown["error-messages"] == 0.0 and score.breakdown["file-written"] == 0.0


def test_a_wrong_answer_fails_the_check_that_looks_at_it(env: Any) -> None:
    # The INFO line that mentions ERROR is the trap: a plain grep catches it.
    score, _ = play(env, "train", "extract-errors", [bash("grep ERROR logs/app.log | cut -d' ' -f3- > errors.txt")])
    assert score.breakdown == {"file-written": 1.0, "error-messages": 0.0, "info-lines-left-out": 0.0,
                               "log-unchanged": 1.0}


def test_eval_of_the_reference_from_the_command_line(tmp_path: Path) -> None:
    # (validate --strict --check over every example is in test_example_envs.py.)
    result = run_envhub("eval", str(BUNDLE), "--split", "dev", "--policy", "reference", "--trust",
                        "-o", str(tmp_path / "records"))
    assert result.code == 0, result.err
    summary = json.loads((tmp_path / "records.summary.json").read_text())
    assert summary["mean_reward"] == 1.0 and summary["errors"] == 0


def test_eval_with_a_model_calling_the_shell_and_file_tools(tmp_path: Path, openai_server: Any) -> None:
    # A scripted model on the local OpenAI-compatible server: it looks around, fixes
    # fix-csv-total with edit_file and runs each other reference command through bash.
    dev = {row["prompt"]: row for row in rows("dev")}

    def tool_call(i: int, name: str, **arguments: Any) -> dict[str, Any]:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}

    def script(request: Any) -> Any:
        row = dev[request.first_user_content]
        done = sum(1 for m in request.messages if m["role"] == "tool")
        plan: list[tuple[str, dict[str, Any]]] = [("list_files", {"path": "."})]
        if row["id"] == "fix-csv-total":
            plan += [("read_file", {"path": "total.py"}),
                     ("edit_file", {"path": "total.py", "old": "rows[2:]", "new": "rows[1:]"}),
                     ("bash", {"command": row["solution"][1]})]
        else:
            plan += [("bash", {"command": command}) for command in row["solution"]]
        if done < len(plan):
            name, arguments = plan[done]
            return tool_call(done, name, **arguments)
        return "Done."

    openai_server.script = script
    out = tmp_path / "records.jsonl"
    result = run_envhub("eval", str(BUNDLE), "--split", "dev", "--policy", "openai:test-model", "-o", str(out),
                        "--json", "--trust", env={"OPENAI_BASE_URL": openai_server.base_url,
                                                  "OPENAI_API_KEY": "sk-local"})
    assert result.code == 0, result.err
    assert json.loads(result.out)["mean_reward"] == 1.0
    records = {r["task_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert sorted(records) == ["csv-join", "fix-csv-total", "fix-permissions", "rename-lowercase"]
    assert all(r["error"] is None for r in records.values())
    names = [c["function"]["name"] for c in records["fix-csv-total"]["tool_calls"]]
    assert names == ["list_files", "read_file", "edit_file", "bash"]
