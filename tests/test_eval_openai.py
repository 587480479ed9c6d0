"""``envhub eval`` with an ``openai:MODEL`` policy against a local OpenAI-compatible server:
each protocol end to end over real HTTP, retries, failures and malformed tool calls."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import run_envhub
from tests.openai_server import Request, answer_table, fail_then
from tests.runtime_fixtures import scaffold


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def eval_json(envhub_cli: Any, root: Path, server: Any, out: Path, *extra: str) -> dict[str, Any]:
    result = envhub_cli("eval", str(root), "-s", "train", "-p", "openai:test-model", "--base-url", server.base_url,
                        "-o", str(out), "--trust", "--json", "-c", "4", *extra)
    assert result.code == 0, result.err
    return json.loads(result.out)


def answers(root: Path, fmt: str = "\\boxed{{{}}}") -> dict[str, str]:
    rows = [json.loads(line) for line in (root / "tasks" / "train.jsonl").read_text().splitlines()]
    return {row["prompt"]: fmt.format(row["answer"]) for row in rows}


def test_single_turn(tmp_path: Path, envhub_cli: Any, openai_server: Any) -> None:
    root = scaffold(tmp_path)
    openai_server.script = answer_table(answers(root))
    summary = eval_json(envhub_cli, root, openai_server, tmp_path / "o.jsonl")
    assert (summary["rollouts"], summary["mean_reward"], summary["errors"]) == (6, 1.0, 0)
    request = openai_server.requests[0]
    assert request.model == "test-model"
    assert [m["role"] for m in request.messages] == ["system", "user"]
    assert request.tools is None  # no tools are sent to a single-turn environment
    rows = records(tmp_path / "o.jsonl")
    assert all(r["policy"] == "openai:test-model" for r in rows)
    assert all((r["usage"]["requests"], r["usage"]["attempts"]) == (1, 1) for r in rows)


def bisect(request: Request) -> str:
    """Guess the number, narrowing down on each 'higher' / 'lower'."""
    low, high = 1, 100
    guess = None
    for message in request.messages:
        if message["role"] == "assistant":
            guess = int(message["content"])
        elif message["role"] == "user" and guess is not None:
            low, high = (guess + 1, high) if message["content"] == "higher" else (low, guess - 1)
    return str((low + high) // 2)


def test_multi_turn(tmp_path: Path, envhub_cli: Any, openai_server: Any) -> None:
    root = scaffold(tmp_path, protocol="multi-turn")
    openai_server.script = bisect
    out = tmp_path / "o.jsonl"
    summary = eval_json(envhub_cli, root, openai_server, out)
    assert (summary["mean_reward"], summary["errors"]) == (1.0, 0)
    assert max(r["turns"] for r in records(out)) > 1
    assert len(openai_server.requests) == sum(r["turns"] for r in records(out))


def multiply_with_the_tool(request: Request) -> Any:
    results = [m for m in request.messages if m["role"] == "tool"]
    if results:
        return f"\\boxed{{{results[-1]['content']}}}"
    a, b = re.findall(r"\d+", request.first_user_content)[:2]
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "calculate",
                                                          "arguments": json.dumps({"expression": f"{a} * {b}"})}}]}


def test_tool_use(tmp_path: Path, envhub_cli: Any, openai_server: Any) -> None:
    root = scaffold(tmp_path, protocol="tool-use")
    openai_server.script = multiply_with_the_tool
    out = tmp_path / "o.jsonl"
    summary = eval_json(envhub_cli, root, openai_server, out)
    assert (summary["mean_reward"], summary["errors"]) == (1.0, 0)
    first = openai_server.requests[0]
    assert [t["function"]["name"] for t in first.tools] == ["calculate"]
    assert first.tools[0]["function"]["parameters"]["required"] == ["expression"]
    rows = records(out)
    assert all(r["turns"] == 2 and len(r["tool_calls"]) == 1 for r in rows)
    assert rows[0]["messages"][3]["role"] == "tool"


def test_tool_use_with_sqlite_state(tmp_path: Path, envhub_cli: Any, openai_server: Any) -> None:
    root = scaffold(tmp_path, protocol="tool-use", state="sqlite")
    table = answers(root)

    def script(request: Request) -> Any:
        if any(m["role"] == "tool" for m in request.messages):
            return table[request.first_user_content]
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "list_tables", "arguments": "{}"}}]}

    openai_server.script = script
    out = tmp_path / "o.jsonl"
    assert eval_json(envhub_cli, root, openai_server, out)["mean_reward"] == 1.0
    assert records(out)[0]["messages"][3]["content"] == "products(name, category, price, stock)"


def test_malformed_tool_calls_are_answered_and_the_episode_ends_at_max_turns(tmp_path: Path, envhub_cli: Any,
                                                                            openai_server: Any) -> None:
    root = scaffold(tmp_path, protocol="tool-use")
    openai_server.script = lambda request: {"role": "assistant", "content": None, "tool_calls": [
        {"id": "bad", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "1'}}]}
    out = tmp_path / "o.jsonl"
    summary = eval_json(envhub_cli, root, openai_server, out, "-n", "1")
    assert (summary["mean_reward"], summary["errors"]) == (0.0, 0)
    (row,) = records(out)
    assert (row["turns"], row["truncated"], row["tool_errors"]) == (6, True, 6)
    assert row["messages"][3]["content"].startswith("Error: the arguments of calculate are not valid JSON")


def test_rate_limits_are_retried(tmp_path: Path, envhub_cli: Any, openai_server: Any) -> None:
    root = scaffold(tmp_path)
    openai_server.script = fail_then(answer_table(answers(root)), times=3, status=429, retry_after=0.01)
    summary = eval_json(envhub_cli, root, openai_server, tmp_path / "o.jsonl", "-c", "1")
    assert (summary["mean_reward"], summary["errors"]) == (1.0, 0)
    assert openai_server.attempts == 6 + 3
    assert sum(r["usage"]["attempts"] for r in records(tmp_path / "o.jsonl")) == 9


def test_an_endpoint_that_always_fails_fails_the_run(tmp_path: Path, envhub_cli: Any, openai_server: Any) -> None:
    from tests.openai_server import error

    root = scaffold(tmp_path)
    openai_server.script = lambda request: error(401, "Incorrect API key provided")
    out = tmp_path / "o.jsonl"
    result = envhub_cli("eval", str(root), "-s", "dev", "-p", "openai:test-model", "--base-url",
                        openai_server.base_url, "-o", str(out))
    assert result.code == 1
    assert "every rollout of this run failed" in result.err
    assert all(r["error"]["kind"] == "policy" and r["error"]["type"] == "PolicyError" and r["reward"] == 0.0
               for r in records(out))


def test_installed_command_against_the_server(tmp_path: Path, openai_server: Any) -> None:
    root = scaffold(tmp_path)
    openai_server.script = answer_table(answers(root))
    out = tmp_path / "o.jsonl"
    result = run_envhub("eval", str(root), "-s", "train", "-p", "openai:test-model", "-o", str(out), "-k", "2",
                        env={"OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-local"})
    assert result.code == 0, result.err
    assert "mean reward   1.0000" in result.out and "pass@2" in result.out
    assert openai_server.requests[0].authorization == "Bearer sk-local"
    assert len(records(out)) == 12


def test_llm_judge_refuses_to_grade_its_own_model_unless_forced(tmp_path: Path, envhub_cli: Any,
                                                                  openai_server: Any) -> None:
    from tests.runtime_fixtures import set_table

    root = scaffold(tmp_path)
    set_table(root, "verifier", f'kind = "llm-judge"\nmodel = "judge-1"\nbase-url = "{openai_server.base_url}"')

    def script(request: Request) -> str:
        if request.model == "judge-1" and "grade" in json.dumps(request.messages).lower():
            return '{"score": 10, "reasoning": "correct"}' if "42" in json.dumps(request.messages) else '{"score": 0}'
        return "42"

    openai_server.script = script
    out = tmp_path / "o.jsonl"
    refused = envhub_cli("eval", str(root), "-s", "dev", "-p", "openai:judge-1", "--base-url", openai_server.base_url,
                         "-o", str(out))
    assert refused.code == 2
    assert refused.err.splitlines()[0] == (
        "envhub: error: the llm-judge verifier would grade model 'judge-1' with itself")
    assert not out.exists() and openai_server.requests == []
    forced = envhub_cli("eval", str(root), "-s", "dev", "-p", "openai:judge-1", "--base-url", openai_server.base_url,
                        "-o", str(out), "--force-self-judge", "--json")
    assert forced.code == 0, forced.err
    assert json.loads(forced.out)["mean_reward"] == 1.0
    judged = [r for r in openai_server.requests if "42" in json.dumps(r.messages)]
    assert judged and all(r.model == "judge-1" for r in judged)
