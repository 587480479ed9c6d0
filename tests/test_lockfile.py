"""envhub.lock: the reader and spec/schema/lock-v1.schema.json agree, the writer's output is
valid and stable, and a newer lock-version is refused."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from envhub.project import LockedEnv, LockError, Lockfile, dumps, loads, read_lock, write_lock

SCHEMA = json.loads((Path(__file__).parent.parent / "spec" / "schema" / "lock-v1.schema.json").read_text())
DIGEST = "sha256:" + "ab" * 32


def sample() -> Lockfile:
    env = LockedEnv(name="acme/b", version="1.0.0", digest=DIGEST, size=10, source="default",
                    locator="blobs/sha256/ab/" + "ab" * 32, dependencies=("acme/a>=1,<2",),
                    python_dependencies=("sqlglot>=25",))
    other = LockedEnv(name="acme/a", version="1.2.0", digest=DIGEST, size=3, source="hf://acme", locator="c" * 40,
                      heldout_digest=DIGEST, score_version=2)
    return Lockfile(["acme/b>=1"], {"acme/b": env, "acme/a": other})


def as_data(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)


def test_written_lock_is_sorted_valid_and_reads_back() -> None:
    text = dumps(sample())
    jsonschema.validate(as_data(text), SCHEMA)
    assert text.index('name = "acme/a"') < text.index('name = "acme/b"')
    assert text.startswith("# envhub.lock")
    back = loads(text)
    assert back.environments == sample().environments and back.requires == ["acme/b>=1"]
    assert dumps(back) == text


def test_write_lock_is_atomic_and_skips_identical_content(tmp_path: Path) -> None:
    path = tmp_path / "envhub.lock"
    assert write_lock(path, sample()) is True
    stamp = path.stat().st_mtime_ns
    assert write_lock(path, sample()) is False and path.stat().st_mtime_ns == stamp
    assert read_lock(tmp_path / "missing.lock") is None
    assert [p.name for p in tmp_path.iterdir()] == ["envhub.lock"]  # no temporary files left


BAD = [
    ("lock-version", lambda d: d.update({"lock-version": "1"})),
    ("lock-version", lambda d: d.pop("lock-version")),
    ("extra", lambda d: d.update({"extra": 1})),
    ("requires", lambda d: d.update({"requires": "acme/a"})),
    ("prereleases", lambda d: d.update({"prereleases": "yes"})),
    ("environment[0].digest", lambda d: d["environment"][0].update({"digest": "md5:00"})),
    ("environment[0].heldout-digest", lambda d: d["environment"][0].update({"heldout-digest": "x"})),
    ("environment[0].size", lambda d: d["environment"][0].update({"size": -1})),
    ("environment[0].size", lambda d: d["environment"][0].update({"size": "10"})),
    ("environment[0].source", lambda d: d["environment"][0].pop("source")),
    ("environment[0].name", lambda d: d["environment"][0].pop("name")),
    ("environment[0].unknown", lambda d: d["environment"][0].update({"unknown": 1})),
    ("environment[0].dependencies", lambda d: d["environment"][0].update({"dependencies": [1]})),
    ("environment[0].score-version", lambda d: d["environment"][0].update({"score-version": 0})),
]


@pytest.mark.parametrize("where, edit", BAD, ids=[f"{w}-{i}" for i, (w, _) in enumerate(BAD)])
def test_reader_and_schema_reject_the_same_locks(where, edit) -> None:  # type: ignore[no-untyped-def]
    import tomli_w

    data = as_data(dumps(sample()))
    edit(data)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)
    with pytest.raises(LockError) as e:
        loads(tomli_w.dumps(data), path="proj/envhub.lock")
    assert e.value.message.startswith("proj/envhub.lock: ")
    assert where.split(".")[0].split("[")[0] in e.value.message
    assert "envhub lock" in (e.value.hint or "")


def test_newer_lock_version_is_refused_with_an_upgrade_hint() -> None:
    text = dumps(sample()).replace("lock-version = 1", "lock-version = 2")
    with pytest.raises(LockError, match=r"lock-version 2 is newer than this envhub understands \(1\)") as e:
        loads(text)
    assert "upgrade envhub" in (e.value.hint or "")
