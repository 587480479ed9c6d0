"""``envhub build``: deterministic archives, a correct RECORD, exclusions, and held-out
splits that never reach the public archive."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from envhub.bundle import RECORD, build_bundle, parse_record
from tests.registry_fixtures import SECRET, member_bytes, members, sha256, tree, write_env

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_same_input_same_bytes(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b")
    first = build_bundle(root, tmp_path / "one")
    second = build_bundle(root, tmp_path / "two")
    assert first.public.path.read_bytes() == second.public.path.read_bytes()
    assert first.public.digest == second.public.digest == sha256(first.public.path.read_bytes())
    assert first.heldout is not None and second.heldout is not None
    assert first.heldout.path.read_bytes() == second.heldout.path.read_bytes()
    assert first.public.size == first.public.path.stat().st_size
    assert first.public.path.name == "acme--arith-1.0.0.tar"
    assert first.heldout.path.name == "acme--arith-1.0.0.heldout.tar"


def test_same_bytes_from_another_directory_with_other_mtimes_and_modes(tmp_path: Path) -> None:
    one = write_env(tmp_path / "one", files={"prompts/system.md": "Be brief.\n", "z/a.txt": "a", "a/z.txt": "z"})
    two = tmp_path / "elsewhere" / "deeper" / "two"
    two.parent.mkdir(parents=True)
    # Created in another order, with other times and permission bits (the owner's x bit aside).
    for rel in sorted((p.relative_to(one) for p in one.rglob("*") if p.is_file()), reverse=True):
        (two / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(one / rel, two / rel)
    for i, path in enumerate(p for p in two.rglob("*") if p.is_file()):
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
        path.chmod(0o600 if i % 2 else 0o664)
    for path in (p for p in one.rglob("*") if p.is_file()):
        path.chmod(0o644)
    assert tree(one) != tree(two)
    a = build_bundle(one, tmp_path / "out-a")
    b = build_bundle(two, tmp_path / "out-b")
    assert a.public.path.read_bytes() == b.public.path.read_bytes()
    assert a.public.digest == b.public.digest
    assert a.heldout is not None and b.heldout is not None
    assert a.heldout.digest == b.heldout.digest


def test_owner_execute_bit_is_kept(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b", files={"bin/run.sh": "#!/bin/sh\n"})
    (root / "bin/run.sh").chmod(0o700)
    built = build_bundle(root, tmp_path / "out")
    with tarfile.open(built.public.path) as tar:
        modes = {m.name: m.mode for m in tar.getmembers()}
    assert modes["bin/run.sh"] == 0o755
    assert modes["tasks/train.jsonl"] == 0o644


def test_archive_headers_and_record(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b", files={"README.md": "# Arith\n", "data/Zeta.txt": "z\n", "data/alpha.txt": "a\n"})
    built = build_bundle(root, tmp_path / "out")
    with tarfile.open(built.public.path) as tar:
        infos = tar.getmembers()
        contents = {m.name: tar.extractfile(m).read() for m in infos}  # type: ignore[union-attr]
    names = [m.name for m in infos]
    assert names == ["README.md", "data/Zeta.txt", "data/alpha.txt", "envhub.toml", "tasks/train.jsonl", RECORD]
    assert all(m.isreg() for m in infos)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in infos} == {(315532800, 0, 0, "", "", 0o644)}
    record_text = contents[RECORD].decode()
    assert record_text.endswith("\n")
    assert record_text.splitlines() == [f"{name},{sha256(contents[name])},{len(contents[name])}" for name in names[:-1]]
    assert parse_record(record_text)["README.md"] == (sha256(b"# Arith\n"), 8)
    assert built.public.files == 5  # files besides the RECORD
    heldout_record = member_bytes(built.heldout.path, RECORD).decode()  # type: ignore[union-attr]
    test_rows = (root / "tasks/test.jsonl").read_bytes()
    assert heldout_record == f"tasks/test.jsonl,{sha256(test_rows)},{len(test_rows)}\n"


def test_excluded_files(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b", files={
        ".git/config": "[core]\n",
        ".git/objects/ab/cdef": "blob",
        "__pycache__/x.cpython-311.pyc": b"\0",
        "pkg/__init__.py": "",
        "pkg/__pycache__/mod.cpython-311.pyc": b"\0",
        "pkg/stale.pyc": b"\0",
        "dist/acme--arith-0.9.0.tar": b"old archive",
        "docs/dist/kept.txt": "only the top-level dist/ is skipped",
        ".venv/bin/python": "",
        ".envhub/RECORD": "stale",
        ".DS_Store": b"\0",
        ".envhubignore": "# local notes\nscratch/\n*.log\n!keep.log\n/top-only.txt\n",
        "scratch/notes.md": "private",
        "debug.log": "log",
        "pkg/deep.log": "log",
        "keep.log": "kept: negated",
        "top-only.txt": "ignored at the root",
        "pkg/top-only.txt": "kept below the root",
    })
    built = build_bundle(root, root / "dist")  # the default place: inside the bundle
    assert members(built.public.path) == [
        "docs/dist/kept.txt", "envhub.toml", "keep.log", "pkg/__init__.py", "pkg/top-only.txt",
        "tasks/train.jsonl", RECORD,
    ]
    again = build_bundle(root, root / "dist")  # the first build's archives are not picked up
    assert again.public.digest == built.public.digest


def test_heldout_files_only_in_heldout_archive(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b")
    built = build_bundle(root, tmp_path / "out")
    assert "tasks/test.jsonl" not in members(built.public.path)
    assert SECRET.encode() not in built.public.path.read_bytes()  # not in the clear anywhere
    assert built.heldout is not None
    assert members(built.heldout.path) == ["tasks/test.jsonl", RECORD]
    assert member_bytes(built.heldout.path, "tasks/test.jsonl") == (root / "tasks/test.jsonl").read_bytes()
    assert built.heldout.digest == sha256(built.heldout.path.read_bytes())


def test_public_manifest_records_heldout_count_and_digest(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b")
    built = build_bundle(root, tmp_path / "out")
    manifest = tomllib.loads(member_bytes(built.public.path, "envhub.toml").decode())
    splits = manifest["tasks"]["splits"]
    test_hex = hashlib.sha256((root / "tasks/test.jsonl").read_bytes()).hexdigest()
    train_hex = hashlib.sha256((root / "tasks/train.jsonl").read_bytes()).hexdigest()
    assert splits["test"] == {"path": "tasks/test.jsonl", "held-out": True, "rows": 2, "sha256": test_hex}
    assert splits["train"] == {"path": "tasks/train.jsonl", "rows": 3, "sha256": train_hex}
    assert built.manifest.tasks.splits["test"].rows == 2


def test_no_heldout_split_no_heldout_archive(tmp_path: Path, envhub_cli) -> None:
    root = write_env(tmp_path / "b", heldout=False)
    result = envhub_cli("build", str(root), "-o", str(tmp_path / "out"), "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert (data["heldout-archive"], data["heldout-digest"]) == (None, None)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["acme--arith-1.0.0.tar"]


def test_cli_build_prints_archives_and_digests(tmp_path: Path, envhub_cli) -> None:
    root = write_env(tmp_path / "b")
    out = tmp_path / "out"
    result = envhub_cli("build", str(root), "-o", str(out))
    assert result.code == 0, result.err
    public, heldout = out / "acme--arith-1.0.0.tar", out / "acme--arith-1.0.0.heldout.tar"
    assert result.out == (f"{public}  {sha256(public.read_bytes())}\n"
                          f"{heldout}  {sha256(heldout.read_bytes())}\n")
    assert sorted(p.name for p in out.iterdir()) == [heldout.name, public.name]  # no temporary files left


def test_invalid_bundle_is_not_built(tmp_path: Path, envhub_cli) -> None:
    root = write_env(tmp_path / "b", files={"tasks/train.jsonl": '{"id": "a", "prompt": "p"}\n'})
    before = tree(tmp_path)
    result = envhub_cli("build", str(root), "-o", str(tmp_path / "out"))
    assert result.code == 2
    assert result.out == ""
    assert result.err == (f"envhub: error: {root}: cannot build an invalid bundle\n"
                          f"{root}/tasks/train.jsonl:1: error: row has no 'answer' field\n"
                          "  hint: every task needs 'id', 'prompt', 'answer'\n"
                          f"  hint: run 'envhub validate {root}' and fix every error\n")
    assert tree(tmp_path) == before  # no out/ directory, nothing else touched


@pytest.mark.parametrize("missing", ["envhub.toml", "tasks/test.jsonl"], ids=["no-manifest", "no-heldout-file"])
def test_broken_bundle_writes_nothing(tmp_path: Path, envhub_cli, missing: str) -> None:
    root = write_env(tmp_path / "b")
    (root / missing).unlink()
    result = envhub_cli("build", str(root), "-o", str(tmp_path / "out"))
    assert result.code == 2
    assert result.err.startswith(f"envhub: error: {root}: cannot build an invalid bundle\n")
    assert not (tmp_path / "out").exists()
