"""``envhub eval``: records with provenance, the summary, resume, and the runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envhub.runtime import RolloutError, RolloutRecord, pass_at_k, read_records, summarize
from tests.conftest import run_envhub
from tests.runtime_fixtures import scaffold, set_table


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize(("protocol", "state"), [
    ("single-turn", "none"), ("multi-turn", "none"), ("tool-use", "none"), ("tool-use", "sqlite"),
    ("tool-use", "files"),
], ids=["single-turn", "multi-turn", "tool-use", "tool-use-sqlite", "tool-use-files"])
def test_reference_policy_scores_one_on_every_protocol(tmp_path: Path, envhub_cli: Any, protocol: str,
                                                       state: str) -> None:
    root = scaffold(tmp_path, protocol=protocol, state=state)
    out = tmp_path / "out.jsonl"
    result = envhub_cli("eval", str(root), "--split", "train", "--policy", "reference", "-o", str(out),
                        "--trust", "--json")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert (summary["rollouts"], summary["mean_reward"], summary["errors"]) == (6, 1.0, 0)
    assert summary["pass_at_k"] == {"1": 1.0}
    written = json.loads((tmp_path / "out.summary.json").read_text())
    assert written == summary


def test_records_carry_provenance(tmp_path: Path, envhub_cli: Any) -> None:
    from envhub import __version__
    from envhub.bundle import build_bundle
    from envhub.context import make_plugin_manager

    root = scaffold(tmp_path)
    out = tmp_path / "runs" / "out.jsonl"
    result = envhub_cli("eval", str(root), "-s", "dev", "-p", "noop", "-k", "3", "--seed", "7", "-o", str(out))
    assert result.code == 0, result.err
    rows = records(out)
    assert len(rows) == 6
    digest = build_bundle(root, tmp_path / "dist", plugins=make_plugin_manager(autoload=False)).public.digest
    for row in rows:
        assert {k: row[k] for k in ("env", "version", "digest", "score_version", "envhub_version", "policy",
                                    "split")} == {
            "env": "acme/demo", "version": "0.1.0", "digest": digest, "score_version": 1,
            "envhub_version": __version__, "policy": "noop", "split": "dev"}
        assert row["reward"] == 0.0 and row["error"] is None and row["turns"] == 1
        assert row["messages"][-1] == {"role": "assistant", "content": ""}
        assert set(row["timing"]) == {"started_at", "duration_s", "policy_s"}
    assert sorted((r["task_id"], r["rollout"]) for r in rows) == [
        (f"arith-dev-00{i}", k) for i in (1, 2) for k in range(3)]
    assert len({r["seed"] for r in rows}) == 6
    assert "mean reward   0.0000" in result.out and "pass@2" in result.out


def test_resume_skips_done_rollouts_and_repairs_a_torn_line(tmp_path: Path, envhub_cli: Any) -> None:
    root = scaffold(tmp_path)
    out = tmp_path / "out.jsonl"
    assert envhub_cli("eval", str(root), "-s", "train", "-o", str(out)).code == 0
    lines = out.read_text().splitlines(keepends=True)
    # A killed run: four records written, the fifth torn mid-line.
    out.write_text("".join(lines[:4]) + lines[4][:25])
    again = envhub_cli("eval", str(root), "-s", "train", "-o", str(out))
    assert again.code == 2 and "already holds rollouts" in again.err
    resumed = envhub_cli("eval", str(root), "-s", "train", "-o", str(out), "--resume", "--json")
    assert resumed.code == 0, resumed.err
    summary = json.loads(resumed.out)
    assert (summary["ran"], summary["skipped"], summary["rollouts"]) == (2, 4, 6)
    assert sorted(r["task_id"] for r in records(out)) == [f"arith-train-00{i}" for i in range(1, 7)]


def test_resume_refuses_another_runs_file(tmp_path: Path, envhub_cli: Any) -> None:
    root = scaffold(tmp_path)
    out = tmp_path / "out.jsonl"
    assert envhub_cli("eval", str(root), "-s", "train", "-o", str(out)).code == 0
    result = envhub_cli("eval", str(root), "-s", "train", "-p", "noop", "-o", str(out), "--resume")
    assert result.code == 2
    assert result.err.splitlines()[0] == (f"envhub: error: {out} holds rollouts of another run (policy 'reference', "
                                          "this run has 'noop')")


def test_a_missing_split_is_an_error_listing_the_splits(tmp_path: Path, envhub_cli: Any) -> None:
    result = envhub_cli("eval", str(scaffold(tmp_path)), "-s", "validation", "-o", str(tmp_path / "o.jsonl"))
    assert result.code == 2
    assert result.err.splitlines()[0] == ("envhub: error: acme/demo has no split 'validation' "
                                          "(splits: train, dev, test)")
    assert not (tmp_path / "o.jsonl").exists()


def test_untrusted_environment_with_code(tmp_path: Path, envhub_cli: Any) -> None:
    result = envhub_cli("eval", str(scaffold(tmp_path, protocol="tool-use")), "-s", "train")
    assert result.code == 2
    assert result.err.splitlines()[0] == ("envhub: error: acme/demo runs its own code (demo.tools:calculate), "
                                          "and it is not trusted")
    assert "Traceback" not in result.err


def test_a_broken_verifier_is_recorded_and_the_run_goes_on(tmp_path: Path, envhub_cli: Any) -> None:
    root = scaffold(tmp_path)
    (root / "checks.py").write_text(
        "def check(task, completion):\n"
        "    if task['id'].endswith('2'):\n"
        "        raise ZeroDivisionError('division by zero')\n"
        "    return 1.0\n")
    set_table(root, "verifier", 'kind = "python"\nentry-point = "checks:check"')
    out = tmp_path / "out.jsonl"
    result = envhub_cli("eval", str(root), "-s", "train", "-o", str(out), "--trust", "--json")
    assert result.code == 0
    rows = {r["task_id"]: r for r in records(out)}
    # The record's error is typed (record version 1): what failed (the verifier, known where it
    # happened, not parsed from text), the exception's class, its message.
    assert rows["arith-train-002"]["error"] == {"kind": "verifier", "type": "ZeroDivisionError",
                                               "message": "division by zero"}
    assert rows["arith-train-002"]["reward"] == 0.0
    summary = json.loads(result.out)
    assert (summary["errors_by_kind"], summary["errors_by_type"]) == ({"verifier": 1}, {"ZeroDivisionError": 1})
    assert sum(r["reward"] for r in rows.values()) == 5.0


def test_the_episode_timeout_is_an_error_record(tmp_path: Path, envhub_cli: Any) -> None:
    root = scaffold(tmp_path, protocol="tool-use")
    tools = root / "demo" / "tools.py"
    tools.write_text(tools.read_text() + "\n\nimport time\n\n\ndef wait(seconds: float) -> str:\n"
                     '    """Wait."""\n    time.sleep(seconds)\n    return "ok"\n')
    text = (root / "envhub.toml").read_text().replace('tools = ["demo.tools:calculate"]',
                                                        'tools = ["demo.tools:calculate", "demo.tools:wait"]')
    (root / "envhub.toml").write_text(text)
    policy = tmp_path / "waiter.py"
    policy.write_text(
        "def act(messages, tools, task):\n"
        "    return {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'w', 'type': 'function',"
        " 'function': {'name': 'wait', 'arguments': '{\"seconds\": 2}'}}]}\n")
    out = tmp_path / "out.jsonl"
    result = envhub_cli("eval", str(root), "-s", "dev", "-p", f"python:{policy}:act", "--timeout", "0.3",
                        "-o", str(out), "--trust")
    assert result.code == 1  # every rollout failed
    assert [r["error"] for r in records(out)] == [
        {"kind": "timeout", "type": "TimeoutError", "message": "the episode took longer than 0.3 s"}] * 2


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (1, 1, 1, 1.0), (1, 0, 1, 0.0), (4, 2, 1, 0.5), (4, 1, 2, 0.5), (4, 3, 2, 1.0), (5, 0, 5, 0.0),
])
def test_pass_at_k(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def rollout(task_id: str, reward: float, breakdown: dict[str, float], error: RolloutError | None = None,
            rollout: int = 0) -> RolloutRecord:
    return RolloutRecord(env="acme/demo", version="0.1.0", digest="sha256:00", score_version=1, policy="reference",
                         split="dev", task_id=task_id, rollout=rollout, seed=0, reward=reward, breakdown=breakdown,
                         error=error)


def test_summary_means_and_criteria() -> None:
    rows = [
        rollout("a", 1.0, {"answer": 1.0, "style": 1.0}),
        rollout("a", 0.0, {"answer": 0.0, "style": 1.0}, rollout=1),
        rollout("b", 0.0, {}, RolloutError(kind="timeout", type="TimeoutError", message="too slow")),
        rollout("b", 0.5, {"answer": 0.5, "style": 0.0}, rollout=1),
    ]
    summary = summarize(rows)
    assert summary.mean_reward == 0.375
    assert summary.pass_at_k == {"1": 0.25, "2": 0.5}
    assert summary.criteria == {"answer": 0.5, "style": 2 / 3}
    assert (summary.errors, summary.errors_by_kind, summary.errors_by_type) == (1, {"timeout": 1},
                                                                                 {"TimeoutError": 1})
    assert summarize(rows, success_threshold=0.5).pass_at_k["1"] == 0.5
    assert summarize(iter(rows)) == summary  # one pass over any iterable


def test_read_records_rejects_a_broken_middle_line(tmp_path: Path) -> None:
    from envhub.errors import UsageError

    path = tmp_path / "o.jsonl"
    good = rollout("a", 1.0, {}).model_dump_json()
    path.write_text(f'{good}\nnot json\n{good}\n')
    with pytest.raises(UsageError, match="line 2 is not a rollout record"):
        read_records(path)


def test_installed_command_runs_an_eval(tmp_path: Path) -> None:
    root = scaffold(tmp_path, protocol="tool-use", state="sqlite")
    result = run_envhub("eval", str(root), "-s", "dev", "-o", str(tmp_path / "o.jsonl"), "--trust", "-c", "4")
    assert result.code == 0, result.err
    assert "mean reward   1.0000" in result.out
    assert result.err == ""
