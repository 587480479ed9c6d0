"""``envhub build``: deterministic archives, a correct RECORD, exclusions, and held-out
splits that never reach the public archive."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tomllib
from pathlib import Path

import pytest

from envhub.bundle import RECORD, build_bundle, parse_record
from tests.registry_fixtures import PLUGINS, SECRET, member_bytes, members, sha256, tree, write_env


def test_same_input_same_bytes(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b")
    first = build_bundle(root, tmp_path / "one", plugins=PLUGINS)
    second = build_bundle(root, tmp_path / "two", plugins=PLUGINS)
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
    a = build_bundle(one, tmp_path / "out-a", plugins=PLUGINS)
    b = build_bundle(two, tmp_path / "out-b", plugins=PLUGINS)
    assert a.public.path.read_bytes() == b.public.path.read_bytes()
    assert a.public.digest == b.public.digest
    assert a.heldout is not None and b.heldout is not None
    assert a.heldout.digest == b.heldout.digest


def test_owner_execute_bit_is_kept(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b", files={"bin/run.sh": "#!/bin/sh\n"})
    (root / "bin/run.sh").chmod(0o700)
    built = build_bundle(root, tmp_path / "out", plugins=PLUGINS)
    with tarfile.open(built.public.path) as tar:
        modes = {m.name: m.mode for m in tar.getmembers()}
    assert modes["bin/run.sh"] == 0o755
    assert modes["tasks/train.jsonl"] == 0o644


def test_archive_headers_and_record(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b", files={"README.md": "# Arith\n", "data/Zeta.txt": "z\n", "data/alpha.txt": "a\n"})
    built = build_bundle(root, tmp_path / "out", plugins=PLUGINS)
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
    built = build_bundle(root, root / "dist", plugins=PLUGINS)  # the default place: inside the bundle
    assert members(built.public.path) == [
        "docs/dist/kept.txt", "envhub.toml", "keep.log", "pkg/__init__.py", "pkg/top-only.txt",
        "tasks/train.jsonl", RECORD,
    ]
    again = build_bundle(root, root / "dist", plugins=PLUGINS)  # the first build's archives are not picked up
    assert again.public.digest == built.public.digest


def test_heldout_files_only_in_heldout_archive(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b")
    built = build_bundle(root, tmp_path / "out", plugins=PLUGINS)
    assert "tasks/test.jsonl" not in members(built.public.path)
    assert SECRET.encode() not in built.public.path.read_bytes()  # not in the clear anywhere
    assert built.heldout is not None
    assert members(built.heldout.path) == ["tasks/test.jsonl", RECORD]
    assert member_bytes(built.heldout.path, "tasks/test.jsonl") == (root / "tasks/test.jsonl").read_bytes()
    assert built.heldout.digest == sha256(built.heldout.path.read_bytes())


def test_public_manifest_records_heldout_count_and_digest(tmp_path: Path) -> None:
    root = write_env(tmp_path / "b")
    built = build_bundle(root, tmp_path / "out", plugins=PLUGINS)
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


# --- held-out generator splits drawn from a secret -----------------------------------------------

_GEN = '''
def make(seed, difficulty):
    return {"id": f"g-{seed}", "prompt": f"Say {seed} twice, at level {difficulty}.", "answer": f"{seed} {seed}"}
'''


def _secret_bundle(root: Path, key: str = "5e" * 32) -> Path:
    root.mkdir(parents=True)
    (root / "gen.py").write_text(_GEN)
    (root / "secrets").mkdir()
    (root / "secrets" / "test.key").write_text(key + "\n")
    (root / "envhub.toml").write_text('''[environment]
name = "acme/gen"
version = "1.0.0"
description = "Say it twice."
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[tasks]
format = "generator"
generator = "gen:make"
difficulty-levels = [1, 2, 3]
splits.train = { seeds = [0, 1000] }
splits.test = { held-out = true, rows = 6, seed-space = [1000000, 2000000], secret = "secrets/test.key" }

[verifier]
kind = "exact-match"
''')
    return root


def test_a_secret_split_publishes_neither_key_nor_seeds(tmp_path: Path) -> None:
    import envhub
    from envhub.tasks import heldout_seeds

    key = "5e" * 32
    root = _secret_bundle(tmp_path / "b", key)
    seeds = heldout_seeds(bytes.fromhex(key), "test", 6, [1_000_000, 2_000_000])
    with envhub.load(root, trust_code=True) as source:
        tasks = source.tasks("test")
        assert [(t.id, t.seed, t.difficulty) for t in tasks] == [(f"test-{i}", s, [1, 2, 3][i % 3])
                                                                 for i, s in enumerate(seeds)]
        assert tasks[0]["id"] == "test-0" and tasks[0]["answer"] == f"{seeds[0]} {seeds[0]}"

    built = build_bundle(root, tmp_path / "out", plugins=PLUGINS)
    public = built.public.path.read_bytes()
    assert sorted(members(built.public.path)) == [".envhub/RECORD", "envhub.toml", "gen.py"]
    assert key.encode() not in public and not any(str(s).encode() in public for s in seeds)
    sealed = (f'{{"split": "test", "rows": 6, "seed-space": [1000000, 2000000], "key": "{key}"}}\n').encode()
    assert built.heldout is not None
    assert sorted(members(built.heldout.path)) == [".envhub/RECORD", "heldout-seeds/test.json"]
    assert member_bytes(built.heldout.path, "heldout-seeds/test.json") == sealed
    manifest = tomllib.loads(member_bytes(built.public.path, "envhub.toml").decode())
    assert manifest["tasks"]["splits"]["test"] == {"held-out": True, "rows": 6, "seed-space": [1000000, 2000000],
                                                   "sha256": hashlib.sha256(sealed).hexdigest()}
    # Control: the same archive scan finds the key and the seeds in the held-out archive.
    private = built.heldout.path.read_bytes()
    assert key.encode() in private and b"1000000" in private


def _pushed_secret_bundle(tmp_path: Path, envhub_cli) -> tuple[Path, list[tuple[str, int]]]:  # type: ignore[no-untyped-def]
    import envhub

    root = _secret_bundle(tmp_path / "b")
    with envhub.load(root, trust_code=True) as source:
        expected = [(t.id, t.seed) for t in source.tasks("test")]
    assert envhub_cli("push", str(root)).code == 0
    return root, expected


def test_the_runtime_reads_the_key_from_the_held_out_store(tmp_path: Path, envhub_cli) -> None:
    import envhub
    from envhub.errors import EnvNotFoundError

    _, expected = _pushed_secret_bundle(tmp_path, envhub_cli)
    public = envhub.load("acme/gen", trust_code=True)
    assert public.splits["test"].available is False and public.splits["test"].rows == 6
    with pytest.raises(EnvNotFoundError, match="split 'test' is held out, and its seeds are not in this copy"):
        public.tasks("test")
    full = envhub.load("acme/gen", trust_code=True, with_heldout=True)
    assert [(t.id, t.seed) for t in full.tasks("test")] == expected
    assert [t.id for t in full.tasks_by_level("test")[2]] == ["test-1", "test-4"]


def test_the_runtime_refuses_a_held_out_seeds_file_of_another_digest(tmp_path: Path, envhub_cli) -> None:
    import envhub
    from envhub.errors import BundleError

    _pushed_secret_bundle(tmp_path, envhub_cli)
    full = envhub.load("acme/gen", trust_code=True, with_heldout=True)
    assert len(full.tasks("test")) == 6  # control: the file as pulled is read
    sealed = next(p for p in Path(os.environ["ENVHUB_CACHE"]).rglob("heldout-seeds/test.json"))
    sealed.chmod(0o600)
    # Another key in the same shape: the digest no longer matches, and the tasks are refused.
    sealed.write_text(sealed.read_text().replace('"key": "5e', '"key": "6e'))
    forged = envhub.load("acme/gen", trust_code=True, with_heldout=True, offline=True)
    with pytest.raises(BundleError, match="the held-out seeds file does not match the digest the manifest records"):
        forged.tasks("test")


def test_doctests_of_the_held_out_seed_modules() -> None:
    import doctest

    import envhub.tasks._heldout
    import envhub.tasks._leaks

    for module in (envhub.tasks._heldout, envhub.tasks._leaks):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
