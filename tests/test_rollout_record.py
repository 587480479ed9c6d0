"""Rollout records (spec/rollout-record.md): the typed model, its committed JSON Schema,
versions, records of the old shape, and files that are not records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envhub.errors import UsageError
from envhub.runtime import (
    RECORD_VERSION,
    RolloutError,
    RolloutRecord,
    dump_record,
    read_records,
    rollout_record_json_schema,
)
from tests.conftest import run_envhub
from tests.runtime_fixtures import scaffold

SCHEMA_FILE = Path(__file__).parent.parent / "spec" / "schema" / "rollout-record-v1.schema.json"


def old_shape(**changes: Any) -> dict[str, Any]:
    """A record as envhub wrote it before records had a version: no ``record_version``, the
    error as text, optional fields absent."""
    record: dict[str, Any] = {
        "env": "acme/demo", "version": "0.1.0", "digest": "sha256:" + "0" * 64, "score_version": 1,
        "source": "/bundles/acme-demo", "envhub_version": "0.1.0", "policy": "reference", "split": "dev",
        "task_id": "arith-dev-001", "rollout": 0, "seed": 2739114, "difficulty": None, "reward": 0.0,
        "breakdown": {}, "error": "ZeroDivisionError: division by zero", "turns": 1, "truncated": False,
        "tool_calls": [], "tool_errors": 0,
        "messages": [{"role": "user", "content": "1 + 1 = ?"}, {"role": "assistant", "content": "2"}],
        "usage": {"requests": 0, "attempts": 0, "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0},
        "timing": {"started_at": "2026-11-21T10:02:03.123+00:00", "duration_s": 0.01, "policy_s": 0.0},
    }
    record.update(changes)
    return record


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_the_committed_schema_is_the_generated_one() -> None:
    committed = SCHEMA_FILE.read_text()
    generated = json.dumps(rollout_record_json_schema(), indent=2, sort_keys=True) + "\n"
    assert committed == generated, (
        "spec/schema/rollout-record-v1.schema.json differs from the models in envhub/runtime/_records.py; "
        "regenerate it (spec/README.md)")


def test_a_written_record_validates_against_the_schema_and_reads_back_equal(tmp_path: Path) -> None:
    import jsonschema

    record = RolloutRecord.model_validate(old_shape())
    line = dump_record(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    data = json.loads(line)
    assert data["record_version"] == RECORD_VERSION == 1
    assert list(data)[0] == "record_version"
    jsonschema.validate(data, json.loads(SCHEMA_FILE.read_text()))
    path = tmp_path / "o.jsonl"
    path.write_bytes(line)
    assert read_records(path) == [record]


def test_a_record_of_the_old_shape_is_read_as_version_1(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "o.jsonl", json.dumps(old_shape()))
    [record] = read_records(path)
    assert record.record_version == 1
    assert record.error == RolloutError(kind="exception", type="ZeroDivisionError", message="division by zero")
    assert (record.curriculum, record.child, record.locator, record.score_info) == (None, None, None, None)
    assert record.usage.requests == 0 and record.timing is not None


def test_fields_a_newer_writer_added_to_version_1_are_kept() -> None:
    record = RolloutRecord.model_validate(old_shape(record_version=1, judge_model="judge-1"))
    assert json.loads(dump_record(record))["judge_model"] == "judge-1"


@pytest.mark.parametrize(("text", "kind", "type_", "message"), [
    ("timeout: the episode took longer than 5 s", "timeout", "TimeoutError", "the episode took longer than 5 s"),
    ("PolicyError: 401 Incorrect API key", "policy", "PolicyError", "401 Incorrect API key"),
    ("SandboxError: the sandbox died", "environment", "SandboxError", "the sandbox died"),
    ("KeyError: 'answer'", "exception", "KeyError", "'answer'"),
    ("something odd happened", "exception", "Exception", "something odd happened"),
], ids=["timeout", "policy", "environment", "exception", "no-type"])
def test_an_error_written_as_text_gets_its_kind(text: str, kind: str, type_: str, message: str) -> None:
    error = RolloutError.from_text(text)
    assert (error.kind, error.type, error.message) == (kind, type_, message)


def test_an_error_reads_as_it_did_as_text() -> None:
    assert str(RolloutError(kind="timeout", type="TimeoutError", message="too slow")) == "timeout: too slow"
    assert str(RolloutError(kind="policy", type="PolicyError", message="no key")) == "PolicyError: no key"


def test_a_record_of_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "o.jsonl", json.dumps(old_shape()), json.dumps(old_shape(record_version=2)))
    with pytest.raises(UsageError) as e:
        read_records(path)
    assert e.value.message == f"{path}: line 2 is a version 2 rollout record; this envhub reads version 1"
    assert e.value.hint == "upgrade envhub to read this file"


@pytest.mark.parametrize(("line", "detail"), [
    ("not json", "(not JSON: invalid literal, expected 'null': line 1 column 1 (char 0))"),
    ("[1, 2]", "(not a JSON object)"),
    (json.dumps(old_shape(reward="high")),
     "(reward: Input should be a valid number, unable to parse string as a number)"),
    (json.dumps({k: v for k, v in old_shape().items() if k not in ("task_id", "seed")}),
     "(task_id: Field required; seed: Field required)"),
    (json.dumps(old_shape(record_version="one")), None),
], ids=["not-json", "not-an-object", "bad-field", "missing-fields", "bad-version"])
def test_a_line_that_is_not_a_record_names_the_file_and_line(tmp_path: Path, line: str, detail: str | None) -> None:
    path = write_lines(tmp_path / "o.jsonl", json.dumps(old_shape()), line)
    with pytest.raises(UsageError) as e:
        read_records(path)
    if detail is None:
        assert e.value.message == f"{path}: line 2 has record_version 'one'; versions are whole numbers from 1"
    else:
        assert e.value.message == f"{path}: line 2 is not a rollout record {detail}"
    assert e.value.hint == "pass a new -o file, or remove the broken line"


def test_resuming_a_file_with_a_broken_line_is_an_error_without_a_traceback(tmp_path: Path) -> None:
    root = scaffold(tmp_path)
    out = write_lines(tmp_path / "o.jsonl", json.dumps(old_shape()), '{"task_id": ')
    out.write_text(out.read_text() + json.dumps(old_shape(rollout=1)) + "\n")
    result = run_envhub("eval", str(root), "-s", "dev", "-o", str(out), "--resume")
    assert result.code == 2
    assert result.err.splitlines()[0].startswith(f"envhub: error: {out}: line 2 is not a rollout record (")
    assert "hint: pass a new -o file, or remove the broken line" in result.err
    assert "Traceback" not in result.err


def test_resuming_a_file_of_a_newer_version_is_refused(tmp_path: Path, envhub_cli: Any) -> None:
    root = scaffold(tmp_path)
    out = write_lines(tmp_path / "o.jsonl", json.dumps(old_shape(record_version=3)))
    result = envhub_cli("eval", str(root), "-s", "dev", "-o", str(out), "--resume")
    assert result.code == 2
    assert result.err.splitlines()[0] == (f"envhub: error: {out}: line 1 is a version 3 rollout record; "
                                          "this envhub reads version 1")
