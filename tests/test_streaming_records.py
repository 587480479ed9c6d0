"""Records stream: they reach the file as rollouts finish, also under a policy that never
waits, and the summary is accumulated as they are written, not read back."""

from __future__ import annotations

import json
from pathlib import Path

import envhub
from envhub.runtime import SummaryTally, read_records, summarize
from envhub.runtime.policies import PythonPolicy
from tests.runtime_fixtures import scaffold, write_rows


def _bundle(tmp_path: Path, n: int) -> Path:
    root = scaffold(tmp_path)
    write_rows(root, "train", [{"id": f"t{i}", "prompt": f"say {i}", "answer": str(i)} for i in range(n)])
    return root


def test_records_reach_the_file_while_a_policy_that_never_waits_runs(tmp_path: Path) -> None:
    out = tmp_path / "runs.jsonl"
    seen: list[int] = []

    def answer(messages: list[dict[str, str]], task: envhub.runtime.Task) -> str:
        # A plain function: the rollout never waits on anything.
        seen.append(len(out.read_bytes().splitlines()) if out.exists() else 0)
        return str(task["answer"])

    with envhub.load(_bundle(tmp_path, 200), trust_code=True) as env:
        result = envhub.evaluate(env, PythonPolicy(answer, name="eager"), split="train", concurrency=8,
                                 output=out)
    assert result.summary.rollouts == 200 and result.summary.mean_reward == 1.0
    # Written as they finish: the later rollouts start with most earlier records on disk (had
    # they all been written at the end, every rollout would have seen an empty file).
    assert seen[-1] >= 150, seen[-10:]
    assert len(read_records(out)) == 200


def test_a_run_to_a_file_keeps_no_records_and_its_summary_is_the_files(tmp_path: Path) -> None:
    out = tmp_path / "runs.jsonl"
    with envhub.load(_bundle(tmp_path, 50), trust_code=True) as env:
        result = envhub.evaluate(env, "reference", split="train", output=out, k=2)
        assert result.kept is None  # nothing held in memory: the records are read from the file when asked
        assert len(result.records) == 100
        assert result.summary == summarize(read_records(out))
        # A resumed run's summary counts the earlier part too, still without keeping records.
        extra = envhub.evaluate(env, "reference", split="train", output=out, k=3, resume=True)
    assert (extra.ran, extra.skipped, extra.summary.rollouts) == (50, 100, 150)
    assert extra.summary == summarize(read_records(out))
    saved = json.loads(out.with_name("runs.summary.json").read_text())
    assert saved["rollouts"] == 150


def test_the_tally_is_summarize_record_by_record(tmp_path: Path) -> None:
    with envhub.load(_bundle(tmp_path, 10), trust_code=True) as env:
        records = envhub.evaluate(env, "reference", split="train", k=3).records
    tally = SummaryTally()
    for record in records:
        tally.add(record)
    assert tally.summary() == summarize(records) and tally.count == 30
