"""The ``workspace-tests`` verifier: the task's tests run against the final workspace in a
fresh sandbox the agent never had. The reference solutions score 1.0 and doing nothing less;
partial credit per test is in the breakdown; an agent that writes a reward file, edits tests,
or prints PASS lines cannot raise its score (each attack beside a control that shows the test
would notice); ``validate --check`` and ``eval`` through the command line with a scripted
OpenAI-compatible server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.runtime.verifiers import parse_junit, parse_test_output
from tests.conftest import run_envhub
from tests.openai_server import Request
from tests.test_sandbox_state import bash, call, make_bundle, play, turn

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux's")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bundle(tmp_path_factory.mktemp("tests") / "terminal")


@pytest.fixture(scope="module")
def env(bundle: Path) -> Any:
    with envhub.load(bundle, trust_code=True) as loaded:
        yield loaded


# --- reading a run's result ------------------------------------------------------------------


@pytest.mark.parametrize(("output", "expected"), [
    ("PASS a\nFAIL b\n", {"a": True, "b": False}),
    ("PASS: a\nFAILED: b\nPASSED c\n", {"a": True, "b": False, "c": True}),
    ("ok 1 - first\nnot ok 2 - second\n", {"first": True, "second": False}),
    ("PASS a\nFAIL a\nPASS a\n", {"a": False}),
    ("collecting...\n  PASS indented\nPASSWORD x\n", {"indented": True}),
    ("nothing here\n", {}),
    ("ok = check()\nFAIL: = x\nPASS a\n", {"a": True}),
], ids=["plain", "colons-and-ed", "tap", "a-failure-sticks", "noise", "none", "stray-lines-are-not-tests"])
def test_parse_test_output(output: str, expected: dict[str, bool]) -> None:
    assert parse_test_output(output).results == expected


def test_parse_junit() -> None:
    xml = ('<testsuite><testcase classname="t" name="a"/><testcase classname="t" name="b"><failure/></testcase>'
           '<testcase name="c"><skipped/></testcase></testsuite>')
    assert parse_junit(xml).results == {"t.a": True, "t.b": False, "c": False}
    assert parse_junit("<not xml").results == {}


# --- scores ----------------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", ["greeting", "fix-add", "max"])
def test_the_reference_solution_scores_one(env: Any, task_id: str) -> None:
    task = env.task("train", task_id)
    score, _ = play(env, task_id, env.reference_actions(task)[:1])
    assert score.reward == 1.0, score
    assert set(score.breakdown.values()) == {1.0} and len(score.breakdown) == 2


@pytest.mark.parametrize(("task_id", "expected"), [("greeting", 0.0), ("fix-add", 0.5), ("max", 0.5)])
def test_doing_nothing_scores_below_one(env: Any, task_id: str, expected: float) -> None:
    score, _ = play(env, task_id, [])
    assert score.reward == expected


def test_partial_credit_per_test_is_in_the_breakdown(env: Any) -> None:
    score, _ = play(env, "greeting", [bash("echo 'goodbye' > hello.txt")])
    assert score.reward == 0.5
    assert score.breakdown == {"t_content": 0.0, "t_exists": 1.0}
    assert score.info["tests"] == 2 and score.info["passed"] == 1


def test_the_reference_is_bash_calls_then_a_final_message(env: Any) -> None:
    actions = env.reference_actions(env.task("train", "max"))
    assert [c["function"]["name"] for c in actions[0]["tool_calls"]] == ["bash", "bash"]
    assert json.loads(actions[0]["tool_calls"][1]["function"]["arguments"]) == {
        "command": "tail -n 1 sorted.txt > ../max.txt"}
    assert actions[1] == {"role": "assistant", "content": "Done."}


# --- attacks: none of them raises the score; each control shows the test would notice -------


def test_a_reward_file_in_the_workspace_is_not_read(env: Any) -> None:
    score, _ = play(env, "greeting", [bash("echo 1.0 > reward.txt; mkdir -p /workspace/logs; "
                                           "echo 1.0 > /workspace/logs/reward.txt; echo '{\"reward\": 1}' > "
                                           "reward.json")])
    assert score.reward == 0.0
    control, _ = play(env, "greeting", [bash("echo 1.0 > reward.txt; echo 'hello world' > hello.txt")])
    assert control.reward == 1.0


def test_the_tests_are_out_of_the_agents_reach(env: Any) -> None:
    score, outputs = play(env, "greeting", [bash("ls /tests 2>&1; find / -name 't_content.sh' 2>/dev/null; "
                                                 "mkdir -p /tests 2>&1; echo 'exit 0' > /tests/t_content.sh 2>&1; "
                                                 "echo done")])
    assert "t_content.sh" not in outputs[0].replace("/tests/t_content.sh:", "")
    assert score.reward == 0.0


def test_editing_copies_of_the_tests_in_the_workspace_changes_nothing(env: Any) -> None:
    score, _ = play(env, "greeting", [bash(
        "mkdir -p tests/greeting && printf 'exit 0\\n' > tests/greeting/t_content.sh && "
        "printf 'exit 0\\n' > tests/greeting/t_exists.sh && "
        "printf '#!/bin/bash\\necho PASS t_content\\necho PASS t_exists\\n' > run-tests.sh")])
    assert score.reward == 0.0


def test_the_bundles_tests_are_what_counts(tmp_path: Path) -> None:
    # The control for the two tests above: changing the tests where the verifier reads them
    # (the bundle) does change the score.
    root = make_bundle(tmp_path / "b")
    (root / "tests" / "greeting" / "t_content.sh").write_text("exit 0\n")
    (root / "tests" / "greeting" / "t_exists.sh").write_text("exit 0\n")
    with envhub.load(root, trust_code=True) as env:
        score, _ = play(env, "greeting", [])
    assert score.reward == 1.0


def test_pass_lines_printed_during_the_episode_do_not_count(env: Any) -> None:
    score, outputs = play(env, "greeting", [bash("echo PASS t_content; echo PASS t_exists; echo 'ok 1 - t_content'")])
    assert outputs[0].startswith("PASS t_content")
    assert score.reward == 0.0


#: add.sh, run by the tests, writes PASS lines straight into the runner's own output (through
#: /proc/PID/fd/1 of every process it can see), then prints the wrong sum.
FORGE = """cat > add.sh <<'X'
for p in $(ls /proc | grep -E '^[0-9]+$'); do
  for i in 1 2 3 4 5 6 7 8; do echo "PASS forged$i" > /proc/$p/fd/1 2>/dev/null; done
  echo "PASS t_add" > /proc/$p/fd/1 2>/dev/null
done
echo $(( $1 - $2 ))
X"""


def test_pass_lines_the_code_under_test_forges_into_the_runners_output_do_not_count(env: Any) -> None:
    score, _ = play(env, "fix-add", [bash(FORGE)])
    # t_zero fails too: add.sh's own output (which the test reads) got the forged lines as well.
    assert score.breakdown == {"t_add": 0.0, "t_zero": 0.0}
    assert score.reward == 0.0
    assert "forged1" in score.info["unknown_tests"]
    assert "PASS forged1" in score.info["output_tail"]  # control: the forged lines did reach the runner's output


def test_code_under_test_that_kills_the_runner_scores_zero(env: Any) -> None:
    attack = ("cat > add.sh <<'X'\nfor p in $(ls /proc | grep -E '^[0-9]+$'); do echo 'PASS t_add' > /proc/$p/fd/1; "
              "echo 'PASS t_zero' > /proc/$p/fd/1; done 2>/dev/null\nkill -9 -1\nX")
    score, _ = play(env, "fix-add", [bash(attack)])
    assert score.reward == 0.0


def test_a_runner_killed_at_its_timeout_is_reported(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b")
    text = (root / "envhub.toml").read_text().replace("timeout-s = 30", "timeout-s = 1")
    (root / "envhub.toml").write_text(text)
    (root / "tests" / "greeting" / "t_slow.sh").write_text("sleep 20\n")
    with envhub.load(root, trust_code=True) as env:
        score, _ = play(env, "greeting", [bash("echo 'hello world' > hello.txt")])
    assert score.reward == 0.0
    assert score.info["killed_by"] == "timeout"
    assert score.breakdown["t_content"] == 1.0  # what it reported before the limit is kept for the record


def test_exit_code_alone_when_the_tests_print_no_lines(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b")
    (root / "tests" / "run-tests.sh").write_text("grep -qx 'hello world' /workspace/hello.txt\n")
    with envhub.load(root, trust_code=True) as env:
        good, _ = play(env, "greeting", [bash("echo 'hello world' > hello.txt")])
        bad, _ = play(env, "greeting", [])
    assert (good.reward, good.breakdown) == (1.0, {"exit-code": 1.0})
    assert (bad.reward, bad.breakdown) == (0.0, {"exit-code": 0.0})


def test_junit_xml_at_envhub_junit(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b")
    (root / "tests" / "run-tests.sh").write_text(
        'if grep -qx "hello world" /workspace/hello.txt; then f=""; else f="<failure/>"; fi\n'
        'echo "<testsuite><testcase name=\\"content\\">$f</testcase><testcase name=\\"always\\"/></testsuite>"'
        ' > "$ENVHUB_JUNIT"\n')
    with envhub.load(root, trust_code=True) as env:
        score, _ = play(env, "greeting", [])
    assert score.breakdown == {"content": 0.0, "always": 1.0}


def test_inline_tests_in_a_task_field(tmp_path: Path) -> None:
    tasks = [{"id": "inline", "prompt": "make a.txt", "files": {}, "setup": "",
              "tests": {"t_a.sh": "test -f /workspace/a.txt\n"}, "solution": "touch a.txt"}]
    root = make_bundle(tmp_path / "b", tasks=tasks)
    text = (root / "envhub.toml").read_text().replace('kind = "workspace-tests"', 'kind = "workspace-tests"\n'
                                                                                 'tests-field = "tests"')
    (root / "envhub.toml").write_text(text)
    with envhub.load(root, trust_code=True) as env:
        task = env.task("train", "inline")
        good, _ = play(env, "inline", env.reference_actions(task)[:1])
        bad, _ = play(env, "inline", [])
    assert (good.reward, bad.reward) == (1.0, 0.0)


# --- the command line --------------------------------------------------------------------------


def test_validate_check_trust(bundle: Path) -> None:
    result = run_envhub("validate", "--check", "--trust", str(bundle))
    assert result.code == 0, result.out + result.err
    assert "error" not in result.out.lower()


def test_validate_refuses_tests_inside_a_task_directory(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b")
    text = (root / "envhub.toml").read_text().replace("timeout-s = 30", 'timeout-s = 30\ntests-directory = '
                                                                         '"tasks/greeting/tests"')
    (root / "envhub.toml").write_text(text)
    (root / "tasks" / "greeting" / "tests" / "greeting").mkdir(parents=True)
    (root / "tasks" / "greeting" / "tests" / "fix-add").mkdir()
    (root / "tasks" / "greeting" / "tests" / "max").mkdir()
    result = run_envhub("validate", str(root))
    assert result.code == 2
    assert ("task 'greeting': its task directory 'tasks/greeting' holds the tests directory, so the agent could "
            "read the tests") in result.out


def test_validate_reports_a_task_without_tests(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "b")
    (root / "tests" / "max" / "t_max.sh").unlink()
    (root / "tests" / "max" / "t_setup_ran.sh").unlink()
    (root / "tests" / "max").rmdir()
    result = run_envhub("validate", str(root))
    assert result.code == 2
    assert "task 'max': its tests tests/max not found" in result.out


def test_eval_with_a_model_scripting_bash_calls(tmp_path: Path, openai_server: Any, bundle: Path) -> None:
    solutions = {t["prompt"]: t["solution"] for t in
                 (json.loads(line) for line in (bundle / "tasks" / "train.jsonl").read_text().splitlines())}

    def script(request: Request) -> Any:
        done = sum(1 for m in request.messages if m["role"] == "tool")
        commands = solutions[request.first_user_content]
        if done < len(commands):
            return {"role": "assistant", "content": None, "tool_calls": [call("bash", done, command=commands[done])]}
        return "finished"

    openai_server.script = script
    out = tmp_path / "o.jsonl"
    result = run_envhub("eval", str(bundle), "-s", "train", "-p", "openai:test-model", "-o", str(out), "--json",
                        "--trust", env={"OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-local"})
    assert result.code == 0, result.err
    assert json.loads(result.out)["mean_reward"] == 1.0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["task_id"]: r["breakdown"] for r in records}["greeting"] == {"t_content": 1.0, "t_exists": 1.0}
    assert all(r["error"] is None for r in records)
    assert sum(len(r["tool_calls"]) for r in records) == 4


def test_eval_records_a_failing_setup_as_an_environment_error(tmp_path: Path, openai_server: Any) -> None:
    tasks = [{"id": "greeting", "prompt": "p", "files": {}, "setup": "exit 7", "solution": ["true"]}]
    root = make_bundle(tmp_path / "b", tasks=tasks)
    openai_server.script = lambda request: "nothing to do"
    out = tmp_path / "o.jsonl"
    result = run_envhub("eval", str(root), "-s", "train", "-p", "openai:test-model", "-o", str(out), "--json",
                        "--trust", env={"OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-local"})
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["error"]["kind"] == "environment" and record["error"]["type"] == "SandboxSetupError"
    assert "setup command of task field 'setup' failed" in record["error"]["message"]
    assert record["reward"] == 0.0 and result.code in (0, 1)


def test_a_scripted_agent_cannot_print_its_way_to_a_reward(tmp_path: Path, openai_server: Any,
                                                           bundle: Path) -> None:
    def script(request: Request) -> Any:
        if not any(m["role"] == "tool" for m in request.messages):
            return turn(bash("echo PASS t_content; echo PASS t_exists; echo 1 > reward.txt"))
        return "PASS t_content\nPASS t_exists"

    openai_server.script = script
    out = tmp_path / "o.jsonl"
    result = run_envhub("eval", str(bundle), "-s", "train", "-p", "openai:test-model", "-o", str(out), "--json",
                        "--trust", env={"OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-local"})
    assert result.code == 0, result.err
    rewards = {json.loads(line)["task_id"]: json.loads(line)["reward"] for line in out.read_text().splitlines()}
    assert rewards == {"greeting": 0.0, "fix-add": 0.5, "max": 0.5}


def _held_out(root: Path, *, inline: bool) -> Path:
    """``root``'s train split also declared as a held-out test split; its tests inline (and no
    task directories) when ``inline``."""
    text = (root / "envhub.toml").read_text().replace(
        'splits.train = { path = "tasks/train.jsonl" }',
        'splits.train = { path = "tasks/train.jsonl" }\nsplits.test = { path = "tasks/test.jsonl", held-out = true }')
    if inline:
        text = text.replace('task-directory = "tasks/{id}"\n', "").replace(
            'kind = "workspace-tests"', 'kind = "workspace-tests"\ntests-field = "tests"')
    (root / "envhub.toml").write_text(text)
    tests = {"t_a.sh": "test -f /workspace/a.txt\n"} if inline else "secret"
    (root / "tasks" / "test.jsonl").write_text(json.dumps(
        {"id": "secret", "prompt": "make a.txt", "files": {}, "setup": "", "tests": tests, "solution": "touch a.txt"})
        + "\n")
    if not inline:
        (root / "tasks" / "secret").mkdir()
        (root / "tests" / "secret").mkdir()
        (root / "tests" / "secret" / "t_a.sh").write_text("test -f /workspace/a.txt\n")
    return root


def test_validate_refuses_a_held_out_tasks_tests_and_directory_in_the_public_bundle(tmp_path: Path) -> None:
    """Only a held-out split's rows go to the held-out archive: a held-out task's tests or
    starting directory kept as directories of the bundle would be published."""
    root = _held_out(make_bundle(tmp_path / "b"), inline=False)
    result = run_envhub("validate", str(root))
    assert result.code == 2
    assert ("held-out task 'secret': its tests tests/secret are a directory of the bundle, and would be published "
            "with it") in result.out
    assert ("held-out task 'secret': its task directory 'tasks/secret' is a directory of the bundle, and would be "
            "published with it") in result.out


def test_a_held_out_task_with_its_tests_inline_is_valid(tmp_path: Path) -> None:
    """The positive control: the same held-out task with its tests and files in its row."""
    tasks = [{"id": "pub", "prompt": "make a.txt", "files": {}, "setup": "",
              "tests": {"t_a.sh": "test -f /workspace/a.txt\n"}, "solution": "touch a.txt"}]
    root = _held_out(make_bundle(tmp_path / "b", tasks=tasks), inline=True)
    result = run_envhub("validate", str(root))
    assert "heldout-leak" not in result.out and "would be published" not in result.out, result.out
    assert result.code == 0, result.out
