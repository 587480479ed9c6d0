"""Archives and index entries placed in a registry by someone else: every attack refused with a
clear message (exit 2), nothing left in the cache, and beside each attack a positive control
showing that the test would notice if it succeeded."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envhub.bundle import RECORD
from envhub.cache import Cache
from envhub.errors import IntegrityError
from envhub.registry import VersionEntry
from tests.conftest import run_envhub
from tests.hf_server import HubServer
from tests.registry_fixtures import NAME, SECRET, craft, plant, regular, rows, sha256, write_env
from tests.test_hf import hub, url  # noqa: F401 - the test Hub on 127.0.0.1, for hf:// index entries

MANIFEST = (b'[environment]\nname = "acme/arith"\nversion = "1.0.0"\n'
            b'canary = "envhub-canary:0123456789abcdef0123456789abcdef"\n\n'
            b'[tasks]\nsplits.train = { path = "tasks/train.jsonl" }\n\n[verifier]\nkind = "exact-match"\n')
TRAIN = rows("train", 3).encode()
NOT_OURS = "the archive was not made by 'envhub build'; do not use it"
TAMPERED = "the registry's index was tampered with or damaged; nothing was cached"


@pytest.fixture(autouse=True)
def _umask() -> Iterator[None]:
    """A usual umask, so that public files are world-readable and private ones must be made so."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    return tmp_path / "registry"


@pytest.fixture
def cache_dir() -> Path:
    return Path(os.environ["ENVHUB_CACHE"])


@pytest.fixture
def heldout_store() -> Path:
    return Path(os.environ["ENVHUB_HOME"]) / "heldout"


def record(files: dict[str, bytes]) -> bytes:
    return "".join(f"{name},{sha256(data)},{len(data)}\n" for name, data in files.items()).encode()


def archive(files: dict[str, bytes], *, listed: dict[str, bytes] | None = None) -> bytes:
    """An archive of ``files`` in order, then a RECORD of ``listed`` (default: the files)."""
    return craft([*(regular(name, data) for name, data in files.items()),
                  regular(RECORD, record(files if listed is None else listed))])


def push(registry: Path, root: Path) -> dict[str, object]:
    result = run_envhub("push", str(root), "--registry", str(registry), "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)  # type: ignore[no-any-return]


def snapshot(cache_dir: Path) -> dict[str, int]:
    """Every path in the cache but lock files (and tmp/ itself), with its mode: what a refused
    pull must not change."""
    if not cache_dir.exists():
        return {}
    return {p.relative_to(cache_dir).as_posix(): p.lstat().st_mode for p in sorted(cache_dir.rglob("*"))
            if p.relative_to(cache_dir).parts[0] != "locks" and p != cache_dir / "tmp"}


def refused(registry: Path, cache_dir: Path, *args: str, ref: str = f"{NAME}@1.0.0") -> str:
    """Pull with the installed command; assert exit 2, no traceback, nothing on stdout and the
    cache unchanged. Returns stderr."""
    before = snapshot(cache_dir)
    result = run_envhub("pull", ref, "--registry", str(registry), *args)
    assert result.code == 2, result.err
    assert "Traceback" not in result.err and result.out == ""
    assert snapshot(cache_dir) == before
    return result.err


def extraction_error(digest: str, *problems: tuple[str, str]) -> str:
    shown = f"acme/arith@1.0.0 ({digest[:19]}...)"
    return f"envhub: error: {shown}: cannot extract the bundle\n" + "".join(
        f"{shown}: error: {message}\n  hint: {hint}\n" for message, hint in problems)


# --- RECORD checked file by file ----------------------------------------------------------------

def test_record_digest_that_does_not_match_a_file(registry: Path, cache_dir: Path) -> None:
    forged = TRAIN.replace(b"2+1?", b"2+9?")  # the same size: only the digest tells
    digest = plant(registry, archive({"envhub.toml": MANIFEST, "tasks/train.jsonl": forged},
                                     listed={"envhub.toml": MANIFEST, "tasks/train.jsonl": TRAIN}))
    err = refused(registry, cache_dir)
    assert err == extraction_error(digest, (f"tasks/train.jsonl does not match {RECORD}: "
                                            f"its sha256 is {sha256(forged)}, the RECORD says {sha256(TRAIN)}",
                                            "the archive was altered after it was built; do not use it"))
    assert not (cache_dir / "bundles").exists() or list((cache_dir / "bundles").iterdir()) == []
    # Positive control: the same hand-made archive with an honest RECORD is pulled.
    plant(registry, archive({"envhub.toml": MANIFEST, "tasks/train.jsonl": forged}))
    pulled = run_envhub("pull", f"{NAME}@1.0.0", "--registry", str(registry))
    assert pulled.code == 0, pulled.err
    assert (Path(pulled.out.strip()) / "tasks/train.jsonl").read_bytes() == forged


def test_every_mismatch_is_reported(registry: Path, cache_dir: Path) -> None:
    digest = plant(registry, archive({"a.txt": b"A", "b.txt": b"B", "envhub.toml": MANIFEST},
                                     listed={"a.txt": b"X", "b.txt": b"Y", "envhub.toml": MANIFEST}))
    hint = "the archive was altered after it was built; do not use it"
    assert refused(registry, cache_dir) == extraction_error(
        digest, (f"a.txt does not match {RECORD}: its sha256 is {sha256(b'A')}, the RECORD says {sha256(b'X')}", hint),
        (f"b.txt does not match {RECORD}: its sha256 is {sha256(b'B')}, the RECORD says {sha256(b'Y')}", hint))


@pytest.mark.parametrize(("text", "problem"), [
    ("envhub.toml,sha256:abc,3\n", "line 1: 'sha256:abc' is not 'sha256:' and 64 lowercase hex digits"),
    (f"envhub.toml,{sha256(MANIFEST)},-1\n", "line 1: size '-1' is not a non-negative integer"),
    (f"./envhub.toml,{sha256(MANIFEST)},{len(MANIFEST)}\n",
     "line 1: path './envhub.toml' is not normalised (it would be 'envhub.toml')"),
    (f"envhub.toml,{sha256(MANIFEST)},{len(MANIFEST)}\n" * 2, "line 2: 'envhub.toml' is listed twice"),
    ("no commas here\n", "line 1: expected 'path,sha256:<hex>,size', got 'no commas here'"),
], ids=["short-digest", "negative-size", "dot-path", "listed-twice", "no-commas"])
def test_malformed_record(registry: Path, cache_dir: Path, text: str, problem: str) -> None:
    digest = plant(registry, craft([regular("envhub.toml", MANIFEST), regular(RECORD, text.encode())]))
    assert refused(registry, cache_dir) == extraction_error(digest, (f"{RECORD} is unreadable ({problem})", NOT_OURS))


# --- one spelling per path ----------------------------------------------------------------------

SPELLINGS = [
    ("dot-slash", "./envhub.toml", "envhub.toml"),
    ("double-slash", "tasks//train.jsonl", "tasks/train.jsonl"),
    ("dot-segment", "tasks/./train.jsonl", "tasks/train.jsonl"),
]


@pytest.mark.parametrize(("other", "canonical"), [s[1:] for s in SPELLINGS], ids=[s[0] for s in SPELLINGS])
def test_two_spellings_of_one_path(registry: Path, cache_dir: Path, tmp_path: Path, other: str, canonical: str) -> None:
    evil = b"evil"
    entries = {"envhub.toml": MANIFEST, "tasks/train.jsonl": TRAIN}
    data = craft([*(regular(n, d) for n, d in entries.items()), regular(other, evil),
                  regular(RECORD, record({**entries, other: evil}))])
    digest = plant(registry, data)
    assert refused(registry, cache_dir) == extraction_error(
        digest, (f"entry {other!r} is not normalised (it would be {canonical!r})", NOT_OURS))
    # Positive control: an extractor that does not normalise lets the second spelling
    # overwrite the file the RECORD vouches for.
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(tmp_path / "naive", filter="data")
    assert (tmp_path / "naive" / canonical).read_bytes() == evil


# --- sparse and oversize members ----------------------------------------------------------------

GIB = 1 << 30


def sparse_archive() -> bytes:
    """10 KiB that a tar reader expands to a 1 GiB file (GNU sparse format 0.1 in pax headers)."""
    info = tarfile.TarInfo("tasks/train.jsonl")
    info.size = 10
    info.pax_headers = {"GNU.sparse.map": "0,10", "GNU.sparse.size": str(GIB)}
    entries = [regular("envhub.toml", MANIFEST), (info, b"0123456789")]
    listed = f"envhub.toml,{sha256(MANIFEST)},{len(MANIFEST)}\ntasks/train.jsonl,{sha256(b'')},{GIB}\n"
    return craft([*entries, regular(RECORD, listed.encode())])


def test_sparse_member(registry: Path, cache_dir: Path, tmp_path: Path) -> None:
    data = sparse_archive()
    assert len(data) <= 10 * 1024
    digest = plant(registry, data)
    assert refused(registry, cache_dir) == extraction_error(
        digest, ("entry 'tasks/train.jsonl' is a sparse file; bundles hold only regular files", NOT_OURS))
    # Positive control: Python's own extraction turns these 10 KiB into 1 GiB (a sparse file).
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(tmp_path / "naive", filter="data")
    assert (tmp_path / "naive/tasks/train.jsonl").stat().st_size == GIB


def test_member_claiming_more_than_the_archive_holds(registry: Path, cache_dir: Path) -> None:
    data = bytearray(archive({"envhub.toml": MANIFEST, "tasks/train.jsonl": TRAIN}))
    with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
        member = tar.getmember("tasks/train.jsonl")
    # Rewrite the header's size field (octal, 12 bytes at 124) and its checksum.
    header = member.offset
    data[header + 124:header + 136] = b"%011o\0" % GIB
    data[header + 148:header + 156] = b" " * 8
    data[header + 148:header + 156] = b"%06o\0 " % sum(data[header:header + 512])
    digest = plant(registry, bytes(data))
    assert refused(registry, cache_dir) == extraction_error(
        digest, ("the archive is corrupted or truncated (unexpected end of data)", "pull it again"))


def test_member_larger_than_its_record_line(registry: Path, cache_dir: Path) -> None:
    digest = plant(registry, archive({"envhub.toml": MANIFEST, "tasks/train.jsonl": TRAIN * 100},
                                     listed={"envhub.toml": MANIFEST, "tasks/train.jsonl": TRAIN}))
    assert refused(registry, cache_dir) == extraction_error(
        digest, (f"the entries do not match {RECORD}: the archive ends early or was altered", "pull it again"))


def test_stream_longer_than_the_index_declares(tmp_path: Path, cache_dir: Path) -> None:
    data = archive({"envhub.toml": MANIFEST, "tasks/train.jsonl": TRAIN})
    digest = sha256(data)
    cache = Cache(cache_dir)
    entry = VersionEntry(name=NAME, version="1.0.0", digest=digest, size=len(data) - 1, published_at="",
                         registry="memory://elsewhere")
    with pytest.raises(IntegrityError) as exc:
        cache.install(entry, digest, kind="bundles", max_bytes=GIB, local=None, opener=lambda: io.BytesIO(data * 1000))
    assert str(exc.value) == (f"acme/arith@1.0.0 from memory://elsewhere: the archive {digest[:19]}... is larger "
                              f"than the {len(data) - 1} bytes the index declares\n"
                              "  hint: the registry's copy is damaged or was tampered with; nothing was cached")
    assert snapshot(cache_dir).get("bundles") is None and list((cache_dir / "tmp").iterdir()) == []
    # Positive control: the declared size is enough.
    entry = VersionEntry(name=NAME, version="1.0.0", digest=digest, size=len(data), published_at="")
    path, cached = cache.install(entry, digest, kind="bundles", max_bytes=GIB, local=None,
                                 opener=lambda: io.BytesIO(data))
    assert (path / "tasks/train.jsonl").read_bytes() == TRAIN and cached is False


# --- held-out archives bound to their environment and version -----------------------------------

def _entry_path(registry: Path, version: str = "1") -> Path:
    return registry / "index/acme/arith" / f"{version}.json"


def _point_heldout_at(registry: Path, digest: str, version: str = "1") -> None:
    path = _entry_path(registry, version)
    data = json.loads(path.read_text())
    data["heldout-digest"] = digest
    path.write_text(json.dumps(data))


def _heldout_error(registry: Path, digest: str, problem: str) -> str:
    return (f"envhub: error: acme/arith@1.0.0 from {registry}: the held-out archive {digest[:19]}... does not hold "
            f"the held-out splits of acme/arith@1.0.0: {problem}\n  hint: {TAMPERED}\n")


@pytest.fixture
def two_envs(registry: Path, tmp_path: Path) -> dict[str, dict[str, object]]:
    """acme/arith 1.0.0 and 1.1.0 and acme/other 1.0.0, each with its own held-out rows."""
    pushed = {}
    for name, version in (("acme/arith", "1.0.0"), ("acme/arith", "1.1.0"), ("acme/other", "1.0.0")):
        tag = f"{name}@{version}"
        root = write_env(tmp_path / "src" / tag.replace("/", "-"), name, version,
                         files={"tasks/test.jsonl": rows("test", 2, answer=f"{SECRET}-{tag}")})
        pushed[tag] = push(registry, root)
    return pushed


@pytest.mark.parametrize("other", ["acme/other@1.0.0", "acme/arith@1.1.0"], ids=["other-environment", "other-version"])
def test_heldout_archive_of_another_environment_or_version(registry: Path, cache_dir: Path, two_envs,
                                                          other: str) -> None:
    theirs = str(two_envs[other]["heldout-digest"])
    # Positive control: it is a genuine held-out archive, pulled fine as what it is.
    assert run_envhub("pull", other, "--registry", str(registry), "--with-heldout").code == 0
    assert (cache_dir / "heldout" / theirs[7:]).is_dir()
    assert two_envs["acme/arith@1.0.0"]["heldout-digest"] != theirs
    _point_heldout_at(registry, theirs)
    assert run_envhub("pull", f"{NAME}@1.0.0", "--registry", str(registry)).code == 0  # the public part is sound
    err = refused(registry, cache_dir, "--with-heldout")  # the cached copy is checked too (a warm pull)
    test_sha = hashlib.sha256(rows("test", 2, answer=f"{SECRET}-acme/arith@1.0.0").encode()).hexdigest()
    assert err == _heldout_error(registry, theirs,
                                 f"tasks/test.jsonl is not the file the manifest records (sha256 {test_sha[:12]}...)")
    # Cold: with the cache emptied, the same refusal, and nothing left behind.
    shutil.rmtree(cache_dir)
    assert run_envhub("pull", f"{NAME}@1.0.0", "--registry", str(registry)).code == 0
    assert refused(registry, cache_dir, "--with-heldout") == err
    assert not (cache_dir / "heldout").exists()


def test_heldout_index_pointing_at_a_public_archive(registry: Path, cache_dir: Path, heldout_store: Path,
                                                    tmp_path: Path) -> None:
    entry = push(registry, write_env(tmp_path / "b"))
    public = str(entry["digest"])
    blob = heldout_store / "blobs/sha256" / public[7:9] / public[7:]
    blob.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(registry / str(entry["locator"]), blob)
    _point_heldout_at(registry, public)
    assert run_envhub("pull", f"{NAME}@1.0.0", "--registry", str(registry)).code == 0
    err = refused(registry, cache_dir, "--with-heldout")
    test_sha = hashlib.sha256(rows("test", 2, answer=SECRET).encode()).hexdigest()
    assert err == _heldout_error(registry, public, "envhub.toml is not the file of a held-out split; "
                                                   "tasks/train.jsonl is not the file of a held-out split; "
                                                   f"tasks/test.jsonl is missing (the manifest records sha256 "
                                                   f"{test_sha[:12]}...)")
    assert not (cache_dir / "heldout").exists()
    # Positive control: the public bundle itself was pulled, and is what the index names.
    assert (cache_dir / "bundles" / public[7:] / "envhub.toml").is_file()


def test_heldout_archive_with_a_traversal(registry: Path, cache_dir: Path, heldout_store: Path, tmp_path: Path) -> None:
    push(registry, write_env(tmp_path / "b"))
    evil = craft([regular("../../escaped.txt", b"x"), regular(RECORD, record({"../../escaped.txt": b"x"}))])
    digest = sha256(evil)
    blob = heldout_store / "blobs/sha256" / digest[7:9] / digest[7:]
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(evil)
    _point_heldout_at(registry, digest)
    assert run_envhub("pull", f"{NAME}@1.0.0", "--registry", str(registry)).code == 0
    err = refused(registry, cache_dir, "--with-heldout")
    assert err == extraction_error(digest, ("entry '../../escaped.txt' leaves the extraction directory", NOT_OURS))
    assert not (cache_dir / "heldout").exists() and list((cache_dir / "tmp").iterdir()) == []
    assert not (cache_dir / "escaped.txt").exists() and not (cache_dir.parent / "escaped.txt").exists()


def test_heldout_archive_holding_only_some_heldout_splits(registry: Path, cache_dir: Path, heldout_store: Path,
                                                         tmp_path: Path) -> None:
    root = write_env(tmp_path / "b", files={"tasks/test2.jsonl": rows("t2", 2, answer="SECOND")})
    manifest = (root / "envhub.toml").read_text()
    (root / "envhub.toml").write_text(manifest.replace(
        "[verifier]", 'splits.test2 = { path = "tasks/test2.jsonl", held-out = true }\n[verifier]'))
    genuine = str(push(registry, root)["heldout-digest"])
    test = rows("test", 2, answer=SECRET).encode()
    partial = archive({"tasks/test.jsonl": test})  # each file genuine, one split left out
    digest = sha256(partial)
    blob = heldout_store / "blobs/sha256" / digest[7:9] / digest[7:]
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(partial)
    _point_heldout_at(registry, digest)
    assert run_envhub("pull", f"{NAME}@1.0.0", "--registry", str(registry)).code == 0
    test2_sha = hashlib.sha256(rows("t2", 2, answer="SECOND").encode()).hexdigest()
    assert refused(registry, cache_dir, "--with-heldout") == _heldout_error(
        registry, digest, f"tasks/test2.jsonl is missing (the manifest records sha256 {test2_sha[:12]}...)")
    assert not (cache_dir / "heldout").exists()
    # Positive control: the genuine archive, holding both splits, is pulled (into a fresh cache:
    # the cache remembers what the index said).
    _point_heldout_at(registry, genuine)
    shutil.rmtree(cache_dir)
    pulled = run_envhub("pull", f"{NAME}@1.0.0", "--registry", str(registry), "--with-heldout", "--json")
    assert pulled.code == 0, pulled.err
    held = Path(json.loads(pulled.out)["heldout-path"])
    assert "SECOND" in (held / "tasks/test2.jsonl").read_text() and SECRET in (held / "tasks/test.jsonl").read_text()


def test_record_far_longer_than_its_entries(registry: Path, cache_dir: Path) -> None:
    honest = record({"envhub.toml": MANIFEST})
    padded = honest + b"\n" * (4 << 20)  # blank lines: parsing them once cost ~9 bytes of memory per byte
    digest = plant(registry, craft([regular("envhub.toml", MANIFEST), regular(RECORD, padded)]))
    assert refused(registry, cache_dir) == extraction_error(
        digest, (f"{RECORD} is {len(padded)} bytes, far more than the lines of 1 entries need", NOT_OURS))
    # Positive control: the same archive with the honest RECORD is pulled.
    plant(registry, craft([regular("envhub.toml", MANIFEST), regular(RECORD, honest)]))
    assert run_envhub("pull", f"{NAME}@1.0.0", "--registry", str(registry)).code == 0


def test_local_archive_larger_than_the_index_declares(registry: Path, cache_dir: Path) -> None:
    data = archive({"envhub.toml": MANIFEST, "tasks/train.jsonl": TRAIN * 1000})
    digest = plant(registry, data)  # a directory registry: the blob is read in place, not streamed
    path = _entry_path(registry)
    entry = json.loads(path.read_text())
    entry["size"] = 1024
    path.write_text(json.dumps(entry))
    assert refused(registry, cache_dir) == (
        f"envhub: error: acme/arith@1.0.0 from {registry}: the archive {digest[:19]}... is larger than the 1024 bytes "
        "the index declares\n  hint: the registry's copy is damaged or was tampered with; nothing was cached\n")
    # Positive control: the true size is accepted.
    entry["size"] = len(data)
    path.write_text(json.dumps(entry))
    assert run_envhub("pull", f"{NAME}@1.0.0", "--registry", str(registry)).code == 0


# --- held-out splits in the cache are private ---------------------------------------------------

def _modes(root: Path) -> set[tuple[str, int]]:
    return {("dir" if p.is_dir() else "file", stat.S_IMODE(p.stat().st_mode)) for p in [root, *root.rglob("*")]}


def test_heldout_cache_entries_are_private(registry: Path, cache_dir: Path, tmp_path: Path) -> None:
    push(registry, write_env(tmp_path / "b"))
    pulled = run_envhub("pull", NAME, "--registry", str(registry), "--with-heldout", "--json")
    assert pulled.code == 0, pulled.err
    data = json.loads(pulled.out)
    heldout = Path(data["heldout-path"])
    assert _modes(heldout) == {("dir", 0o700), ("file", 0o600)}
    assert stat.S_IMODE((cache_dir / "heldout").stat().st_mode) == 0o700
    assert SECRET in (heldout / "tasks/test.jsonl").read_text()
    # Positive control: the public bundle is readable by everyone, as public files are.
    assert _modes(Path(data["path"])) == {("dir", 0o755), ("file", 0o644)}
    # An entry an earlier envhub left world-readable is made private at the next pull.
    for p in [heldout, *heldout.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    (cache_dir / "heldout").chmod(0o755)
    assert run_envhub("pull", NAME, "--registry", str(registry), "--with-heldout").code == 0
    assert _modes(heldout) == {("dir", 0o700), ("file", 0o600)}
    assert stat.S_IMODE((cache_dir / "heldout").stat().st_mode) == 0o700


# --- index entries that are not what the spec says -----------------------------------------------

def _valid_entry(digest: str) -> dict[str, object]:
    return {"name": NAME, "version": "1.0.0", "digest": digest, "size": 10240, "published-at": "2024-01-01T00:00:00Z"}


BAD_ENTRIES: list[tuple[str, Callable[[dict[str, object]], None], str]] = [
    ("integer-digest", lambda e: e.update(digest=1),
     "'digest' must be a string 'sha256:' and 64 lowercase hex digits, not 1"),
    ("integer-version", lambda e: e.update(version=1), "'version' must be a PEP 440 version string, not 1"),
    ("missing-keys", lambda e: [e.pop("digest"), e.pop("size")],
     "'digest' is missing (expected a string 'sha256:' and 64 lowercase hex digits); "
     "'size' is missing (expected a non-negative integer)"),
    ("string-size", lambda e: e.update(size="10240"), "'size' must be a non-negative integer, not '10240'"),
    ("boolean-size", lambda e: e.update(size=True), "'size' must be a non-negative integer, not true"),
    ("tags-not-a-list", lambda e: e.update(tags="math"), "'tags' must be an array of strings, not 'math'"),
    ("bad-heldout-digest", lambda e: e.update({"heldout-digest": "md5:00"}),
     "'heldout-digest' must be null or a string 'sha256:' and 64 lowercase hex digits, not 'md5:00'"),
    ("dependencies-not-an-object", lambda e: e.update(dependencies=["acme/x"]),
     "'dependencies' must be an object of environment ids to specifiers, not [\"acme/x\"]"),
    ("another-environment", lambda e: e.update(name="acme/other"),
     "'name' is 'acme/other', but the entry is in the index of acme/arith"),
    ("another-version", lambda e: e.update(version="2.0.0"),
     "'version' is '2.0.0', but the entry is stored as version 1"),
]


@pytest.mark.parametrize(("damage", "problem"), [c[1:] for c in BAD_ENTRIES], ids=[c[0] for c in BAD_ENTRIES])
def test_malformed_index_entry(registry: Path, cache_dir: Path, envhub_cli, damage: Callable[[dict[str, object]], None],
                               problem: str) -> None:
    digest = plant(registry, archive({"envhub.toml": MANIFEST, "tasks/train.jsonl": TRAIN}))
    path = _entry_path(registry)
    entry = _valid_entry(digest)
    path.write_text(json.dumps(entry))
    assert envhub_cli("pull", f"{NAME}@1.0.0", "--registry", str(registry)).code == 0  # positive control
    shutil.rmtree(cache_dir)
    damage(entry)
    path.write_text(json.dumps(entry))
    expected = (f"envhub: error: {registry}: index entry '{path}' is malformed: {problem}\n"
                "  hint: the index was damaged or edited by hand; ask the registry's owner to restore the entry "
                "(or to move it aside and push that version again)\n")
    for command in (["pull", NAME], ["versions", NAME], ["info", NAME]):
        result = envhub_cli(*command, "--registry", str(registry))
        assert (result.code, result.err) == (2, expected), command
    assert not cache_dir.exists() or snapshot(cache_dir).get("bundles") is None


def test_malformed_index_entry_with_the_installed_command(registry: Path, cache_dir: Path) -> None:
    digest = plant(registry, archive({"envhub.toml": MANIFEST, "tasks/train.jsonl": TRAIN}))
    path = _entry_path(registry)
    path.write_text(json.dumps({**_valid_entry(digest), "digest": 7, "version": 1}))
    err = refused(registry, cache_dir, ref=NAME)
    assert err == (f"envhub: error: {registry}: index entry '{path}' is malformed: "
                   "'version' must be a PEP 440 version string, not 1; "
                   "'digest' must be a string 'sha256:' and 64 lowercase hex digits, not 7\n"
                   "  hint: the index was damaged or edited by hand; ask the registry's owner to restore the entry "
                   "(or to move it aside and push that version again)\n")


def test_malformed_yank_marker(registry: Path, envhub_cli, tmp_path: Path) -> None:
    push(registry, write_env(tmp_path / "b"))
    marker = registry / "index/acme/arith/1.yanked.json"
    marker.write_text(json.dumps({"reason": 5}))
    result = envhub_cli("versions", NAME, "--registry", str(registry))
    assert (result.code, result.err) == (2, f"envhub: error: {registry}: yank marker '{marker}' is malformed: "
                                            "'reason' must be a string, not 5\n  hint: the index was damaged or "
                                            "edited by hand; ask the registry's owner to restore it\n")
    marker.write_text(json.dumps({"reason": "broken"}))  # positive control
    assert envhub_cli("versions", NAME, "--registry", str(registry)).code == 0


def test_malformed_hub_index_entry(hub: HubServer, url: str, envhub_cli, tmp_path: Path) -> None:  # noqa: F811
    assert envhub_cli("push", str(write_env(tmp_path / "b")), "--registry", url).code == 0
    assert envhub_cli("versions", NAME, "--registry", url).code == 0  # positive control
    repo = hub.repo(NAME)
    tree = hub.files(NAME)
    index = json.loads(tree[".envhub/index.json"])
    index["versions"]["1"]["digest"] = 1
    hub.commit(repo, {**tree, ".envhub/index.json": json.dumps(index).encode()}, "hand edit")
    for command in (["versions", NAME], ["pull", NAME]):
        result = envhub_cli(*command, "--registry", url)
        assert (result.code, result.err) == (
            2, f"envhub: error: {url}: index entry '1' of acme/arith/.envhub/index.json is malformed: "
               "'digest' must be a string 'sha256:' and 64 lowercase hex digits, not 1\n"
               "  hint: the index was damaged or edited by hand; ask the registry's owner to restore the entry "
               "(or to move it aside and push that version again)\n"), command
    index["versions"] = ["not", "an", "object"]
    hub.commit(repo, {**tree, ".envhub/index.json": json.dumps(index).encode()}, "hand edit")
    result = envhub_cli("versions", NAME, "--registry", url)
    assert result.code == 2 and result.err.startswith(
        f"envhub: error: {url}: acme/arith/.envhub/index.json at ") and result.err.endswith(
        " is malformed: 'versions' must be an object of versions to objects\n"
        "  hint: the repo was edited by hand or damaged; ask its owners to restore the file\n")


# --- publishing held-out splits consistently ----------------------------------------------------

def _heldout_note(heldout_store: Path) -> str:
    return str(json.loads((heldout_store / "index/acme/arith/1.json").read_text())["digest"])


def test_repush_after_a_failed_publish_repairs_the_heldout_store(registry: Path, heldout_store: Path, tmp_path: Path,
                                                                 envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from envhub.registry import BlobStore, FsspecRegistry

    real_publish = FsspecRegistry.publish

    def failing(self, bundle):  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device")

    first = write_env(tmp_path / "first", files={"tasks/test.jsonl": rows("test", 2, answer="FIRST")})
    monkeypatch.setattr(FsspecRegistry, "publish", failing)
    assert envhub_cli("push", str(first), "--registry", str(registry)).code != 0
    monkeypatch.setattr(FsspecRegistry, "publish", real_publish)
    assert not (heldout_store / "index").exists()  # the failed push named no version in the store

    second = write_env(tmp_path / "second", files={"tasks/test.jsonl": rows("test", 2, answer="SECOND")})
    # The state an earlier envhub left after such a failure: a note naming the first archive.
    stale = "sha256:" + "e" * 64
    note = heldout_store / "index/acme/arith/1.json"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text(json.dumps({"digest": stale, "size": 1}))
    entry = json.loads(envhub_cli("push", str(second), "--registry", str(registry), "--json").out)
    assert _heldout_note(heldout_store) == entry["heldout-digest"] != stale

    # A failure after the public entry: the note is missing; pushing the same again repairs it.
    note.unlink()
    real_replace = BlobStore.replace_json

    def broken(self, path, data):  # type: ignore[no-untyped-def]
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(BlobStore, "replace_json", broken)
    failed = envhub_cli("push", str(second), "--registry", str(registry))
    assert (failed.code, failed.err) == (2, f"envhub: error: {heldout_store.as_uri()}: cannot store held-out splits: "
                                            "[Errno 5] Input/output error\n  hint: the version is published; push it "
                                            f"again to record its held-out splits in {heldout_store.as_uri()}\n")
    assert not note.exists()  # positive control: the failure did leave the store behind
    monkeypatch.setattr(BlobStore, "replace_json", real_replace)
    again = envhub_cli("push", str(second), "--registry", str(registry), "--json")
    assert again.code == 0 and json.loads(again.out)["created"] is False
    assert _heldout_note(heldout_store) == entry["heldout-digest"]
    pulled = envhub_cli("pull", NAME, "--registry", str(registry), "--with-heldout", "--json")
    assert "SECOND" in (Path(json.loads(pulled.out)["heldout-path"]) / "tasks/test.jsonl").read_text()
