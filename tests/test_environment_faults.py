"""Environment faults are counted apart from the model's mistakes (issue 17): a tool whose
own code raises is the environment's fault; an unknown tool or arguments that are not JSON
are the model's. The record keeps both, the summary and ``envhub eval`` report them apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.openai_server import Request
from tests.runtime_fixtures import scaffold

BROKEN_TOOL = '''

def lookup(key: str) -> str:
    """Look a key up in the shop's catalogue.

    Args:
        key: the product key.
    """
    import envhub_no_such_module_for_tests  # noqa: F401  (a dependency the bundle forgot)
    return key
'''


def faulty_bundle(tmp_path: Path) -> Path:
    root = scaffold(tmp_path, protocol="tool-use")
    with (root / "demo" / "tools.py").open("a", encoding="utf-8") as f:
        f.write(BROKEN_TOOL)
    manifest = root / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('tools = ["demo.tools:calculate"]',
                                                     'tools = ["demo.tools:calculate", "demo.tools:lookup"]'))
    return root


def call(name: str, arguments: str, call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def three_failed_calls_then_answer(answers: dict[str, str]) -> Any:
    """First turn: the broken tool (the environment's fault), an unknown tool and arguments
    that are not JSON (the model's); second turn: the right answer."""

    def script(request: Request) -> Any:
        if any(m["role"] == "tool" for m in request.messages):
            return answers[request.first_user_content]
        return {"role": "assistant", "content": None, "tool_calls": [
            call("lookup", json.dumps({"key": "x"}), "c1"), call("no_such_tool", "{}", "c2"),
            call("calculate", "{not json", "c3")]}

    return script


def answer_table(root: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in (root / "tasks" / "train.jsonl").read_text().splitlines()]
    return {row["prompt"]: f"\\boxed{{{row['answer']}}}" for row in rows}


def run_eval(envhub_cli: Any, root: Path, server: Any, out: Path, *extra: str) -> Any:
    return envhub_cli("eval", str(root), "-s", "train", "-p", "openai:test-model", "--base-url", server.base_url,
                      "-o", str(out), "--trust", "-n", "2", *extra)


def test_eval_counts_environment_faults_apart_from_the_models_tool_errors(
        tmp_path: Path, envhub_cli: Any, openai_server: Any) -> None:
    root = faulty_bundle(tmp_path)
    openai_server.script = three_failed_calls_then_answer(answer_table(root))
    out = tmp_path / "o.jsonl"
    result = run_eval(envhub_cli, root, openai_server, out, "--json")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    # 2 rollouts, each: 1 fault of the environment, 2 mistakes of the model; no rollout failed.
    assert (summary["errors"], summary["tool_errors"], summary["environment_faults"],
            summary["environment_fault_rollouts"], summary["mean_reward"]) == (0, 4, 2, 2, 1.0)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["tool_errors"], r["environment_faults"]) for r in rows] == [(3, 1), (3, 1)]
    tool_messages = [m["content"] for m in rows[0]["messages"] if m["role"] == "tool"]
    assert tool_messages[0].startswith("Error: ModuleNotFoundError: No module named 'envhub_no_such_module_for_tests'")
    assert tool_messages[1].startswith("Error: unknown tool 'no_such_tool'")
    assert tool_messages[2].startswith("Error: the arguments of calculate are not valid JSON")
    assert json.loads((tmp_path / "o.summary.json").read_text())["environment_faults"] == 2
    assert result.err.startswith("envhub: warning: 2 tool call(s) in 2 rollout(s) failed")


def test_the_printed_summary_shows_environment_faults(tmp_path: Path, envhub_cli: Any, openai_server: Any) -> None:
    root = faulty_bundle(tmp_path)
    openai_server.script = three_failed_calls_then_answer(answer_table(root))
    result = run_eval(envhub_cli, root, openai_server, tmp_path / "o.jsonl")
    assert result.code == 0, result.err
    lines = [line.strip() for line in result.out.splitlines()]
    assert "errors        0" in lines
    assert "tool errors   4 (the model's mistakes)" in lines
    assert "environment faults  2 (in 2 rollout(s))" in lines
    assert result.err.startswith("envhub: warning: 2 tool call(s) in 2 rollout(s) failed because the environment's "
                                 "code raised")


def test_positive_control_a_working_tool_is_no_fault(tmp_path: Path, envhub_cli: Any, openai_server: Any) -> None:
    root = faulty_bundle(tmp_path)
    answers = answer_table(root)

    def script(request: Request) -> Any:
        if any(m["role"] == "tool" for m in request.messages):
            return answers[request.first_user_content]
        return {"role": "assistant", "content": None, "tool_calls": [
            call("calculate", json.dumps({"expression": "2 * 3"}), "c1"), call("no_such_tool", "{}", "c2")]}

    openai_server.script = script
    result = run_eval(envhub_cli, root, openai_server, tmp_path / "o.jsonl")
    assert result.code == 0, result.err
    lines = [line.strip() for line in result.out.splitlines()]
    assert "tool errors   2 (the model's mistakes)" in lines
    assert "environment faults  0" in lines
    assert "warning" not in result.err


@pytest.mark.parametrize(("name", "arguments", "fault"), [
    ("lookup", '{"key": "x"}', "environment"),
    ("no_such_tool", "{}", "model"),
    ("", "{}", "model"),
    ("calculate", "{not json", "model"),
    ("calculate", "[1]", "model"),
    ("calculate", '{"expression": 3, "extra": 1}', "model"),
    ("calculate", '{"expression": "2 * 3"}', None),
], ids=["tool-raises", "unknown-tool", "no-name", "not-json", "not-an-object", "wrong-arguments", "ok"])
def test_an_episode_says_whose_fault_each_tool_error_is(tmp_path: Path, name: str, arguments: str,
                                                        fault: str | None) -> None:
    import envhub

    env = envhub.load(faulty_bundle(tmp_path), trust_code=True)
    task = env.tasks("train")[0]
    with env.episode(task) as episode:
        episode.reset()
        result = episode.step({"role": "assistant", "content": None, "tool_calls": [call(name, arguments, "c")]})
        assert not result.done
        assert (episode.tool_errors, episode.environment_faults) == (
            (0, 0) if fault is None else (1, 1 if fault == "environment" else 0))
        content = episode.messages[-1]["content"]
        assert content.startswith("Error:") == (fault is not None)


def test_a_record_from_before_the_field_reads_with_no_faults(tmp_path: Path) -> None:
    from envhub.runtime import read_records, summarize

    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps({"env": "acme/demo", "version": "0.1.0", "digest": None, "score_version": 1,
                                "policy": "noop", "split": "train", "task_id": "t", "rollout": 0, "seed": 1,
                                "reward": 0.0, "tool_errors": 3}) + "\n")
    [record] = read_records(path)
    assert record.environment_faults == 0
    summary = summarize([record])
    assert (summary.tool_errors, summary.environment_faults, summary.environment_fault_rollouts) == (3, 0, 0)
