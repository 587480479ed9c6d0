"""``envhub.evaluate``: evaluation in code, with typed results, records files that follow the
committed schema, and resume (also from a file of the old record shape)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import envhub
from envhub.context import Context
from envhub.errors import EnvNotFoundError, UsageError
from envhub.runtime import RolloutRecord, read_records
from tests.runtime_fixtures import scaffold

SCHEMA = json.loads((Path(__file__).parent.parent / "spec" / "schema" / "rollout-record-v1.schema.json").read_text())


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context.create(autoload=False, cwd=tmp_path)


def test_evaluate_a_bundle_directory_with_the_reference_policy(tmp_path: Path, context: Context) -> None:
    import jsonschema

    root = scaffold(tmp_path, protocol="tool-use", state="sqlite")
    out = tmp_path / "runs" / "dev.jsonl"
    seen: list[RolloutRecord] = []
    result = envhub.evaluate(root, "reference", split="dev", k=2, seed=3, output=out, context=context,
                             trust_code=True, on_record=seen.append)

    assert isinstance(result, envhub.EvalResult) and isinstance(result.summary, envhub.EvalSummary)
    assert (result.ran, result.skipped, result.failed, result.first_error) == (4, 0, 0, None)
    summary = result.summary
    assert (summary.rollouts, summary.tasks, summary.mean_reward, summary.errors) == (4, 2, 1.0, 0)
    assert summary.pass_at_k == {"1": 1.0, "2": 1.0}
    assert (summary.split, summary.policy) == ("dev", "reference")
    assert summary.environment is not None and summary.environment.env == "acme/demo"
    assert result.output == out and result.summary_path == tmp_path / "runs" / "dev.summary.json"
    assert json.loads(result.summary_path.read_text()) == result.as_json()

    def order(r: RolloutRecord) -> tuple[str, int]:
        return r.task_id, r.rollout

    assert sorted(seen, key=order) == sorted(result.records, key=order)
    assert read_records(out) == seen  # the file, in the order the rollouts finished
    lines = out.read_text().splitlines()
    assert len(lines) == 4
    for line in lines:
        jsonschema.validate(json.loads(line), SCHEMA)
    assert all(isinstance(r, envhub.RolloutRecord) and r.record_version == 1 and r.reward == 1.0 for r in seen)


def test_evaluate_a_loaded_environment_in_memory(tmp_path: Path, context: Context) -> None:
    from envhub.runtime.policies import make_policy

    env = envhub.load(scaffold(tmp_path), context=context)
    policy = make_policy("noop", settings=context.settings, plugins=context.plugins)
    result = envhub.evaluate(env, policy, split="train", n=3, context=context)
    assert (result.output, result.summary_path, result.ran) == (None, None, 3)
    assert [r.task_id for r in sorted(result.records, key=lambda r: r.task_id)] == [
        "arith-train-001", "arith-train-002", "arith-train-003"]
    assert result.summary.mean_reward == 0.0
    assert [p for p in tmp_path.glob("**/*.json*") if p.parent.name != "tasks"] == []  # nothing written
    # The environment is the caller's: still open for another run.
    assert envhub.evaluate(env, "reference", split="dev", context=context).summary.mean_reward == 1.0
    env.close()


def test_evaluate_writes_a_new_file_under_output_dir(tmp_path: Path, context: Context) -> None:
    result = envhub.evaluate(scaffold(tmp_path), "reference", split="dev", output_dir=tmp_path / "runs",
                             context=context)
    assert result.output is not None and result.output.parent == tmp_path / "runs" / "acme--demo-0.1.0"
    assert result.output.name.startswith("dev.reference.") and len(read_records(result.output)) == 2


def test_resume_runs_only_what_the_file_lacks(tmp_path: Path, context: Context) -> None:
    root = scaffold(tmp_path)
    out = tmp_path / "o.jsonl"
    first = envhub.evaluate(root, "reference", split="train", n=2, output=out, context=context)
    assert (first.ran, first.skipped) == (2, 0)
    with pytest.raises(UsageError, match="already holds rollouts"):
        envhub.evaluate(root, "reference", split="train", output=out, context=context)
    again = envhub.evaluate(root, "reference", split="train", output=out, resume=True, context=context)
    assert (again.ran, again.skipped, again.summary.rollouts, len(again.records)) == (4, 2, 6, 6)
    assert sorted(r.task_id for r in read_records(out)) == [f"arith-train-00{i}" for i in range(1, 7)]


def test_resume_a_file_written_before_records_had_a_version(tmp_path: Path, context: Context) -> None:
    root = scaffold(tmp_path)
    out = tmp_path / "o.jsonl"
    envhub.evaluate(root, "reference", split="train", n=3, output=out, context=context)
    # Rewrite it as envhub wrote records before: no record_version, the error as text (or
    # null), and no optional field that had no value.
    old = []
    for line in out.read_text().splitlines():
        record = json.loads(line)
        del record["record_version"]
        for key in ("locator", "child", "curriculum", "score_info"):
            if record[key] is None:
                del record[key]
        old.append(json.dumps(record))
    old[1] = old[1].replace('"error": null', '"error": "timeout: the episode took longer than 5 s"')
    out.write_text("".join(line + "\n" for line in old))

    result = envhub.evaluate(root, "reference", split="train", output=out, resume=True, context=context)
    assert (result.ran, result.skipped, result.summary.rollouts) == (3, 3, 6)
    assert (result.summary.errors_by_kind, result.summary.errors_by_type) == ({"timeout": 1}, {"TimeoutError": 1})
    lines = out.read_text().splitlines()
    assert ["record_version" in json.loads(line) for line in lines] == [False] * 3 + [True] * 3


def test_resume_needs_an_output_file(tmp_path: Path, context: Context) -> None:
    with pytest.raises(UsageError) as e:
        envhub.evaluate(scaffold(tmp_path), "reference", split="dev", resume=True, context=context)
    assert (e.value.message, e.value.hint) == ("resuming needs the records file of the run to resume",
                                               "pass output=PATH (envhub eval -o PATH)")


def test_an_unknown_policy_or_split_is_refused(tmp_path: Path, context: Context) -> None:
    root = scaffold(tmp_path)
    with pytest.raises(UsageError, match="^unknown policy 'gpt'"):
        envhub.evaluate(root, "gpt", split="dev", context=context)
    with pytest.raises(EnvNotFoundError) as e:
        envhub.evaluate(root, "reference", split="validation", output=tmp_path / "o.jsonl", context=context)
    assert e.value.message == "acme/demo has no split 'validation' (splits: train, dev, test)"
    assert not (tmp_path / "o.jsonl").exists()
