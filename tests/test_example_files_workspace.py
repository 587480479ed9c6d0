"""example_envs/files-workspace: the tools keep to the workspace and report mistakes to the
model, and the verifier scores the files left behind: the job done, and nothing else touched.

The generic checks (validate --check, the pytest plugin) run over every example elsewhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.runtime import Environment

BUNDLE = Path(__file__).resolve().parent.parent / "example_envs" / "files-workspace"


@pytest.fixture
def env() -> Environment:
    return envhub.load(BUNDLE, trust_code=True)


def find(env: Environment, prompt_start: str) -> Any:
    return next(t for split in ("train", "dev") for t in env.tasks(split) if t.prompt.startswith(prompt_start))


def calls(*tool_calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant turn making these tool calls."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        for i, (name, arguments) in enumerate(tool_calls)]}


def play(env: Environment, task: Any, turns: list[Any]) -> Any:
    """Play ``turns`` (then a closing summary) in a fresh episode; the last StepResult."""
    with env.episode(task) as episode:
        episode.reset()
        for turn in [*turns, "Done."]:
            result = episode.step(turn)
            if result.done:
                return result
    raise AssertionError("the episode did not end")


def test_generate_reproduces_the_task_files(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(BUNDLE / "generate.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for split in ("train", "dev", "test"):
        assert (tmp_path / f"{split}.jsonl").read_bytes() == (BUNDLE / "tasks" / f"{split}.jsonl").read_bytes(), split


@pytest.mark.parametrize(("name", "arguments", "error"), [
    ("read_file", {"path": "notes/todos.txt"},
     "Error: FileNotFoundError: there is no file 'notes/todos.txt'; list_files shows the files there are"),
    ("read_file", {"path": "../../etc/passwd"},
     "Error: PermissionError: '../../etc/passwd' is outside the workspace; paths are relative to the workspace"),
    ("read_file", {"path": "/etc/passwd"},
     "Error: PermissionError: '/etc/passwd' is an absolute path; paths are relative to the workspace, "
     "e.g. notes/todo.txt"),
    ("write_file", {"path": "../escaped.txt", "content": "x"},
     "Error: PermissionError: '../escaped.txt' is outside the workspace; paths are relative to the workspace"),
    ("read_file", {"path": "notes"},
     "Error: IsADirectoryError: 'notes' is a directory; list_files shows the files in it"),
    ("move_file", {"source": "notes/todo.txt", "destination": "notes/done.txt"},
     "Error: FileExistsError: 'notes/done.txt' already exists; delete it first if it should be replaced"),
    ("delete_file", {"path": "notes/missing.txt"},
     "Error: FileNotFoundError: there is no file 'notes/missing.txt'; list_files shows the files there are"),
    ("list_files", {"directory": "archive"},
     "Error: NotADirectoryError: there is no directory 'archive'; list_files() lists the whole workspace"),
    ("read_file", {"file": "notes/todo.txt"},
     "Error: invalid arguments for read_file: path: Field required; file: Extra inputs are not permitted"),
], ids=["missing", "parent", "absolute", "write-outside", "directory", "no-overwrite", "delete-missing",
        "no-directory", "bad-arguments"])
def test_tool_mistakes_are_told_to_the_model_and_change_nothing(env: Environment, name: str,
                                                                arguments: dict[str, Any], error: str) -> None:
    task = find(env, "In config/app.ini, change")
    with env.episode(task) as episode:
        episode.reset()
        workspace = episode.state
        before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
        result = episode.step(calls((name, arguments)))
        assert not result.done
        assert result.info["tool_errors"] == [error]
        assert result.observation.messages[-1] == {"role": "tool", "tool_call_id": "c0", "name": name, "content": error}
        assert {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()} == before
        assert not (workspace.parent / "escaped.txt").exists()
        # The episode goes on: the next call works.
        step = episode.step(calls(("read_file", {"path": "notes/todo.txt"})))
        assert step.info["tool_results"][0].startswith("order")


def test_a_symbolic_link_out_of_the_workspace_is_refused(env: Environment, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the model\n")
    task = find(env, "In config/app.ini, change")
    with env.episode(task) as episode:
        episode.reset()
        (episode.state / "notes" / "link.txt").symlink_to(secret)
        result = episode.step(calls(("read_file", {"path": "notes/link.txt"})))
    assert result.info["tool_errors"] == [
        "Error: PermissionError: 'notes/link.txt' is outside the workspace; paths are relative to the workspace"]


def test_list_files_shows_paths_relative_to_the_workspace(env: Environment) -> None:
    task = find(env, "In config/app.ini, change")
    with env.episode(task) as episode:
        episode.reset()
        result = episode.step(calls(("list_files", {"directory": "config"}), ("list_files", {})))
    listing, everything = result.info["tool_results"]
    assert listing == "config/app.ini\nconfig/settings.json"
    assert everything.splitlines()[:3] == ["README.md", "config/app.ini", "config/settings.json"]
    assert len(everything.splitlines()) == 12


def test_the_job_done_plus_another_edit_scores_zero(env: Environment) -> None:
    task = find(env, "In config/app.ini, change `port`")
    right = env.reference_actions(task)[:-1]
    assert play(env, task, right).reward == 1.0
    result = play(env, task, [*right, calls(("write_file", {"path": "notes/todo.txt", "content": "nothing\n"}))])
    assert result.reward == 0.0
    assert result.info["breakdown"] == {"expected": 1.0, "untouched": 0.0}


def test_editing_the_wrong_file_is_rejected_with_the_reason(env: Environment) -> None:
    task = find(env, "In config/app.ini, change `port`")
    settings = json.loads((BUNDLE / "state/workspace/config/settings.json").read_text())
    wrong = calls(("write_file", {"path": "config/settings.json", "content": json.dumps({**settings, "port": 8081})}))
    with env.episode(task) as episode:
        episode.reset()
        episode.step(wrong)
        episode.step("Done.")
        assert episode.score is not None
        info = episode.score.info
    assert episode.score.reward == 0.0
    assert info["wrong"] == {"config/app.ini": "line 5 is 'port = 8080', expected 'port = 8081'"}
    assert (info["changed"], info["created"], info["deleted"]) == (["config/settings.json"], [], [])


def test_a_leftover_file_costs_the_reward(env: Environment) -> None:
    task = find(env, "Write reports/restock.txt")
    scratch = calls(("write_file", {"path": "reports/draft.txt", "content": "thinking...\n"}))
    result = play(env, task, [*env.reference_actions(task)[:-1], scratch])
    assert result.reward == 0.0
    assert result.info["breakdown"] == {"expected": 1.0, "untouched": 0.0}


def test_half_a_merge_gets_partial_credit(env: Environment) -> None:
    task = find(env, "Merge the two meeting notes")
    expect = task["expect"]
    merged = expect["notes/meetings-2024-05.md"]["text"]
    result = play(env, task, [calls(("write_file", {"path": "notes/meetings-2024-05.md", "content": merged}),
                                    ("delete_file", {"path": "notes/2024-05-02-meeting.md"}))])
    assert result.reward == pytest.approx(2 / 3)
    assert result.info["breakdown"] == {"expected": pytest.approx(2 / 3), "untouched": 1.0}


def test_formatting_that_does_not_matter_is_accepted(env: Environment) -> None:
    json_task = find(env, "In config/settings.json, set `notifications.sms`")
    compact = json.dumps(json_task["expect"]["config/settings.json"]["json"], separators=(",", ":"))
    write = calls(("write_file", {"path": "config/settings.json", "content": compact}))
    assert play(env, json_task, [write]).reward == 1.0
    text_task = find(env, "Write reports/restock.txt")
    [(path, spec)] = text_task["expect"].items()
    no_newline_crlf = spec["text"].rstrip("\n").replace("\n", "  \r\n")  # trailing spaces, CRLF, no final newline
    assert play(env, text_task, [calls(("write_file", {"path": path, "content": no_newline_crlf}))]).reward == 1.0
    out_of_order = "\n".join(reversed(spec["text"].splitlines()))
    assert play(env, text_task, [calls(("write_file", {"path": path, "content": out_of_order}))]).reward == 0.0


def test_a_text_answer_without_an_episode_scores_zero(env: Environment) -> None:
    score = env.score(find(env, "In config/app.ini, change"), "I changed the port.")
    assert score.reward == 0.0
    assert score.info["reason"] == "no workspace: this environment scores the files an episode leaves, not text"
