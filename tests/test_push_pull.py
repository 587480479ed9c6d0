"""``envhub push`` and ``envhub pull``: resolution, the cache, held-out splits, every bad
input refused with a clear message (exit 2, nothing half-written, nothing lost), killed
and concurrent pushes, and the installed command end to end."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from envhub.bundle import RECORD
from tests.conftest import RegistryTarget, run_envhub
from tests.registry_fixtures import (
    NAME,
    PLUGINS,
    SECRET,
    built_env,
    craft,
    link,
    member_bytes,
    plant,
    push_worker,
    regular,
    sha256,
    special,
    tree,
    write_env,
)


@pytest.fixture
def home() -> Path:
    return Path(os.environ["ENVHUB_HOME"])


@pytest.fixture
def cache_dir() -> Path:
    return Path(os.environ["ENVHUB_CACHE"])


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    """A directory registry, which every command here is pointed at."""
    return tmp_path / "registry"


def push(envhub_cli, registry: Path, root: Path) -> dict[str, object]:
    result = envhub_cli("push", str(root), "--registry", str(registry), "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)  # type: ignore[no-any-return]


def push_version(envhub_cli, registry: Path, tmp_path: Path, version: str, **kw: object) -> dict[str, object]:
    root = write_env(tmp_path / "src" / f"{version}-{kw.get('salt', '')}", version=version, **kw)  # type: ignore[arg-type]
    return push(envhub_cli, registry, root)


def bundles(cache_dir: Path) -> list[str]:
    return sorted(p.name for p in (cache_dir / "bundles").iterdir()) if (cache_dir / "bundles").is_dir() else []


def leftovers(cache_dir: Path) -> list[str]:
    return sorted(p.name for p in (cache_dir / "tmp").iterdir()) if (cache_dir / "tmp").is_dir() else []


# --- push and pull on every kind of registry, through the CLI ------------------------------------

def test_cli_round_trip(registry_target: RegistryTarget, tmp_path: Path, envhub_cli, request: pytest.FixtureRequest,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    if registry_target.kind == "s3":
        request.getfixturevalue("s3_cli")  # the CLI gets only a URL: fsspec's config points s3 at moto
    url = registry_target.url
    root = write_env(tmp_path / "b", tags=("math", "easy"))
    first = envhub_cli("push", str(root), "--registry", url)
    assert first.code == 0, first.err
    digest = sha256(built_env(tmp_path / "again", "1.0.0", tags=("math", "easy")).public.path.read_bytes())
    assert first.err == (f"Published acme/arith@1.0.0 to {url} ({digest})\n"
                         f"Held-out splits are in {(Path(os.environ['ENVHUB_HOME']) / 'heldout').as_uri()}, "
                         "not in the registry\n")
    again = envhub_cli("push", str(root), "--registry", url)
    assert again.code == 0
    assert again.err.splitlines()[0] == (f"acme/arith@1.0.0 is already published in {url} with the same content; "
                                         "nothing to do")
    train = root / "tasks/train.jsonl"
    train.write_text(train.read_text() + '{"id": "x", "prompt": "p", "answer": "a"}\n')
    changed = envhub_cli("push", str(root), "--registry", url)
    assert changed.code == 2
    assert changed.err.startswith(f"envhub: error: acme/arith@1.0.0 is already published in {url} "
                                  "with different content (")
    assert changed.err.endswith("  hint: versions are immutable: bump [environment] version (e.g. to 1.0.1) "
                                "and push again\n")

    listed = json.loads(envhub_cli("versions", NAME, "--registry", url, "--json").out)
    assert [(e["version"], e["digest"], e["yanked"]) for e in listed] == [("1.0.0", digest, False)]
    found = envhub_cli("search", "--tag", "easy", "--registry", url)
    assert found.out == "acme/arith                       1.0.0      Arithmetic drills.  [math, easy]\n"

    pulled = envhub_cli("pull", NAME, "--registry", url, "--json")
    assert pulled.code == 0, pulled.err
    data = json.loads(pulled.out)
    assert (data["version"], data["digest"], data["cached"], data["registry"]) == ("1.0.0", digest, False, url)
    assert Path(data["path"]) == Path(os.environ["ENVHUB_CACHE"]) / "bundles" / digest[7:]
    shown = envhub_cli("info", NAME, "--registry", url, "--json")
    assert shown.code == 0, shown.err
    info = json.loads(shown.out)
    assert (info["name"], info["digest"], info["registry"]) == (NAME, digest, url)
    assert [(s["name"], s["rows"], s["held_out"]) for s in info["splits"]] == [("train", 3, False), ("test", 2, True)]

    yanked = envhub_cli("yank", f"{NAME}@1.0", "--reason", "typo in answers", "--registry", url)
    assert (yanked.code, yanked.err) == (0, f"Yanked acme/arith@1.0.0 in {url}: typo in answers\n")
    assert envhub_cli("pull", NAME, "--registry", url).code == 2  # the only version is yanked
    # A cached exact pin is served from the cache, and the registry, reachable, tells it of the yank.
    assert envhub_cli("pull", f"{NAME}@1.0.0", "--registry", url).err == (
        "envhub: warning: acme/arith@1.0.0 is yanked: typo in answers; using it because it was pinned exactly\n")
    monkeypatch.setenv("ENVHUB_CACHE", str(tmp_path / "fresh-cache"))
    pinned = envhub_cli("pull", f"{NAME}@1.0.0", "--registry", url)
    assert pinned.code == 0
    assert pinned.err == ("envhub: warning: acme/arith@1.0.0 is yanked: typo in answers; "
                          f"using it because it was pinned exactly\nPulled acme/arith@1.0.0 ({digest})\n")


# --- which version a pull picks -------------------------------------------------------------------

@pytest.fixture
def many_versions(envhub_cli, registry: Path, tmp_path: Path) -> Path:
    for version in ("0.9.0", "1.0.0", "1.1.0", "1.2.0", "2.0.0", "2.1.0rc1"):
        push_version(envhub_cli, registry, tmp_path, version)
    assert envhub_cli("yank", f"{NAME}@1.2.0", "--reason", "leaks answers", "--registry", str(registry)).code == 0
    return registry


YANKED_WARNING = "envhub: warning: acme/arith@1.2.0 is yanked: leaks answers; using it because it was pinned exactly\n"


def _no_match(shown: str) -> str:
    return (f"envhub: error: no version of acme/arith matches {shown!r}; versions: "
            "0.9.0, 1.0.0, 1.1.0, 1.2.0 (yanked), 2.0.0, 2.1.0rc1\n"
            "  hint: pin one that exists, e.g. 'acme/arith@2.1.0rc1'\n")


# (id, reference, version pulled (None: refused), stderr)
PICKS = [
    ("newest", "acme/arith", "2.0.0", ""),
    ("range", "acme/arith>=1,<2", "1.1.0", ""),
    ("range-over-yanked", "acme/arith>=1.2,<2", None, _no_match("acme/arith<2,>=1.2")),
    ("pin", "acme/arith@0.9", "0.9.0", ""),
    ("pin-yanked", "acme/arith@1.2.0", "1.2.0", YANKED_WARNING),
    ("pre-release-asked", "acme/arith>=2.1.0rc1", "2.1.0rc1", ""),
    ("pre-release-pinned", "acme/arith==2.1.0rc1", "2.1.0rc1", ""),
    ("pre-release-not-asked", "acme/arith>2.0", None, _no_match("acme/arith>2.0")),
]


@pytest.mark.parametrize(("ref", "version", "err"), [c[1:] for c in PICKS], ids=[c[0] for c in PICKS])
def test_pull_picks_highest_matching_non_yanked(many_versions: Path, envhub_cli, ref: str, version: str | None,
                                                err: str) -> None:
    result = envhub_cli("pull", ref, "--registry", str(many_versions), "--json")
    if version is None:
        assert (result.code, result.out) == (2, "")
        error = json.loads(result.err)["error"]  # with --json, the error is JSON too
        assert (error["kind"], error["exit_code"]) == ("EnvNotFoundError", 2)
        assert f"envhub: error: {error['message']}\n  hint: {error['hint']}\n" == err
    else:
        assert result.err == err
        assert result.code == 0
        assert json.loads(result.out)["version"] == version


def test_unknown_environment(registry: Path, envhub_cli, tmp_path: Path) -> None:
    push_version(envhub_cli, registry, tmp_path, "1.0.0")
    result = envhub_cli("pull", "acme/arithm", "--registry", str(registry))
    assert result.code == 2
    assert result.err == (f"envhub: error: acme/arithm is not in {registry}\n"
                          "  hint: did you mean 'acme/arith'?\n")


# --- the cache: warm pulls, --offline -----------------------------------------------------------

def test_warm_pull_needs_no_registry_and_extracts_nothing(registry: Path, envhub_cli, tmp_path: Path, cache_dir: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    push_version(envhub_cli, registry, tmp_path, "1.0.0")
    cold = envhub_cli("pull", f"{NAME}@1.0.0", "--registry", str(registry))
    assert cold.code == 0
    path = Path(cold.out.strip())
    before = tree(cache_dir / "bundles")
    directory = path.stat()
    # The registry is gone: the pull must not need it (it only asks it, if it answers, of a yank).
    registry.rename(tmp_path / "gone")
    for ref in (f"{NAME}@1.0.0", f"{NAME}@1.0", f"{NAME}==1.0.0"):
        warm = envhub_cli("pull", ref, "--registry", str(registry), "--json")
        assert warm.code == 0, warm.err
        assert (json.loads(warm.out)["path"], json.loads(warm.out)["cached"], warm.err) == (str(path), True, "")
    assert tree(cache_dir / "bundles") == before  # same inodes and mtimes: nothing extracted again
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (directory.st_ino, directory.st_mtime_ns)
    assert leftovers(cache_dir) == []


def test_offline_uses_the_cache_only(registry: Path, envhub_cli, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for version in ("1.0.0", "1.1.0"):
        push_version(envhub_cli, registry, tmp_path, version)
    assert envhub_cli("pull", f"{NAME}@1.0.0", "--registry", str(registry)).code == 0
    registry.rename(tmp_path / "unreachable")  # as if the network were down
    r = str(registry)
    ok = envhub_cli("pull", NAME, "--offline", "--registry", r, "--json")
    assert ok.code == 0, ok.err
    assert json.loads(ok.out)["version"] == "1.0.0"  # the newest the cache knows, not 1.1.0
    assert envhub_cli("pull", f"{NAME}>=1,<2", "--offline", "--registry", r).code == 0
    monkeypatch.setenv("ENVHUB_OFFLINE", "1")
    assert envhub_cli("info", NAME, "--registry", r).code == 0
    monkeypatch.delenv("ENVHUB_OFFLINE")
    cases = [
        (f"{NAME}@1.1.0", "acme/arith@1.1.0 is not in the cache (offline); cached versions: 1.0.0",
         "pull it once online: envhub pull acme/arith@1.1.0"),
        (f"{NAME}>=1.1", "acme/arith>=1.1 is not in the cache (offline); cached versions: 1.0.0",
         "pull it once online: envhub pull acme/arith>=1.1"),
        ("acme/other", "acme/other is not in the cache (offline)", "pull it once online: envhub pull acme/other"),
    ]
    for ref, message, hint in cases:
        result = envhub_cli("pull", ref, "--offline", "--registry", r)
        assert result.code == 2
        assert result.err == f"envhub: error: {message}\n  hint: {hint}\n"
    held = envhub_cli("pull", NAME, "--offline", "--with-heldout", "--registry", r)
    assert held.code == 2
    assert held.err == "envhub: error: the held-out splits of acme/arith@1.0.0 are not in the cache (offline)\n"


# --- -o DIR and held-out splits -------------------------------------------------------------------

def test_pull_into_a_directory(registry: Path, envhub_cli, tmp_path: Path) -> None:
    root = write_env(tmp_path / "b")
    push(envhub_cli, registry, root)
    out = tmp_path / "work" / "arith"
    result = envhub_cli("pull", NAME, "--registry", str(registry), "-o", str(out))
    assert result.code == 0, result.err
    assert result.out == f"{out}\n"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        RECORD, "envhub.toml", "tasks/train.jsonl"]
    assert (out / "tasks/train.jsonl").read_bytes() == (root / "tasks/train.jsonl").read_bytes()
    assert envhub_cli("validate", str(out)).code == 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["arith"]  # no staging directory left
    again = envhub_cli("pull", NAME, "--registry", str(registry), "-o", str(out))
    assert again.code == 2
    assert again.err == (f"envhub: error: {out} already exists and is not empty\n"
                         "  hint: choose a new directory with -o\n")


def test_pull_with_heldout(registry: Path, envhub_cli, tmp_path: Path, cache_dir: Path) -> None:
    root = write_env(tmp_path / "b")
    push(envhub_cli, registry, root)
    out = tmp_path / "full"
    result = envhub_cli("pull", NAME, "--registry", str(registry), "--with-heldout", "-o", str(out), "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["path"] == str(out)
    assert Path(data["heldout-path"]) == cache_dir / "heldout" / str(data["heldout-digest"])[7:]
    assert (out / "tasks/test.jsonl").read_bytes() == (root / "tasks/test.jsonl").read_bytes()
    checked = envhub_cli("validate", str(out))
    assert (checked.code, checked.out) == (0, f"valid: acme/arith 1.0.0 ({out}): 2 split(s), 5 task(s)\n")
    # The public bundle in the cache still has no held-out rows.
    public = cache_dir / "bundles" / str(data["digest"])[7:]
    assert not (public / "tasks/test.jsonl").exists()
    assert not any(SECRET in p.read_text() for p in public.rglob("*") if p.is_file())


def test_pull_without_access_to_heldout(registry: Path, envhub_cli, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    push(envhub_cli, registry, write_env(tmp_path / "b"))
    elsewhere = tmp_path / "someone-elses-store"
    monkeypatch.setenv("ENVHUB_HELDOUT_STORE", str(elsewhere))
    out = tmp_path / "out"
    result = envhub_cli("pull", NAME, "--registry", str(registry), "--with-heldout", "-o", str(out))
    assert result.code == 2
    assert result.err == (f"envhub: error: the held-out splits of acme/arith@1.0.0 are not in {elsewhere}\n"
                          "  hint: held-out splits stay with whoever published them; ask for access, "
                          "or point ENVHUB_HELDOUT_STORE at the store that has them\n")
    assert not out.exists()


def test_pull_heldout_of_environment_without_any(registry: Path, envhub_cli, tmp_path: Path) -> None:
    push(envhub_cli, registry, write_env(tmp_path / "b", heldout=False))
    result = envhub_cli("pull", NAME, "--registry", str(registry), "--with-heldout")
    assert (result.code, result.err) == (2, "envhub: error: acme/arith@1.0.0 has no held-out splits\n")


def test_push_with_heldout_needs_a_store(tmp_path: Path) -> None:
    from envhub.errors import UsageError
    from envhub.hub import push as do_push
    from envhub.registry import open_registry
    from envhub.settings import load_settings

    registry = tmp_path / "registry"
    with pytest.raises(UsageError) as exc:
        do_push(write_env(tmp_path / "b"), open_registry(str(registry), load_settings(), plugins=PLUGINS),
                heldout_url=None, plugins=PLUGINS)
    assert str(exc.value) == ("acme/arith has held-out splits but no held-out store is configured\n"
                              "  hint: set ENVHUB_HELDOUT_STORE")
    assert not (registry / "index").exists()


# --- bad input: a clear error, exit 2, nothing half-written, nothing lost -----------------------------

def _good_archive(tmp_path: Path) -> bytes:
    return built_env(tmp_path / "good", "1.0.0", heldout=False).public.path.read_bytes()


def _cut_after_first_entry(tmp_path: Path) -> bytes:
    data = _good_archive(tmp_path)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        first = tar.next()
        assert first is not None
        end = first.offset_data + -(-first.size // 512) * 512
    return data[:end]


def _record_lists_more(tmp_path: Path) -> bytes:
    record = f"envhub.toml,{sha256(b'x')},1\nlost.txt,{sha256(b'')},0\n".encode()
    return craft([regular("envhub.toml", b"x"), regular(RECORD, record)])


ENTRY_HINT = "the archive was not made by 'envhub build'; do not use it"
AGAIN = "pull it again"

# (id, archive bytes, problem message, hint). Each archive is planted with its own digest in
# the index, as a registry would serve it: the digest matches, extraction must refuse it.
BAD_ARCHIVES: list[tuple[str, Callable[[Path], bytes], str, str]] = [
    ("not-a-tar", lambda t: b"definitely not a tar file\n" * 40,
     "the archive is corrupted or truncated (invalid header)", AGAIN),
    ("truncated-mid-entry", lambda t: _good_archive(t)[:700],
     "the archive is corrupted or truncated (unexpected end of data)", AGAIN),
    ("truncated-at-entry-boundary", _cut_after_first_entry,
     "the archive has no .envhub/RECORD: it ends early or was not made by 'envhub build'", AGAIN),
    ("record-mismatch", _record_lists_more,
     "the entries do not match .envhub/RECORD: the archive ends early or was altered", AGAIN),
    ("dot-dot", lambda t: craft([regular("../escaped.txt")]),
     "entry '../escaped.txt' leaves the extraction directory", ENTRY_HINT),
    ("dot-dot-inside", lambda t: craft([regular("tasks/../../escaped.txt")]),
     "entry 'tasks/../../escaped.txt' leaves the extraction directory", ENTRY_HINT),
    ("backslash", lambda t: craft([regular("..\\escaped.txt")]),
     "entry '..\\\\escaped.txt' leaves the extraction directory", ENTRY_HINT),
    ("absolute", lambda t: craft([regular("/tmp/escaped.txt")]),
     "entry '/tmp/escaped.txt' has an absolute path", ENTRY_HINT),
    ("windows-absolute", lambda t: craft([regular("C:/escaped.txt")]),
     "entry 'C:/escaped.txt' has an absolute path", ENTRY_HINT),
    ("symlink", lambda t: craft([regular("envhub.toml"), link("tasks/train.jsonl", "/etc/passwd")]),
     "entry 'tasks/train.jsonl' is a link; bundles hold only regular files", ENTRY_HINT),
    ("hardlink", lambda t: craft([regular("envhub.toml"), link("copy", "/etc/passwd", tarfile.LNKTYPE)]),
     "entry 'copy' is a link; bundles hold only regular files", ENTRY_HINT),
    ("fifo", lambda t: craft([special("pipe", tarfile.FIFOTYPE)]),
     "entry 'pipe' is a special file; bundles hold only regular files", ENTRY_HINT),
    ("device", lambda t: craft([special("dev", tarfile.CHRTYPE)]),
     "entry 'dev' is a special file; bundles hold only regular files", ENTRY_HINT),
    ("duplicate", lambda t: craft([regular("a.txt", b"first"), regular("a.txt", b"second")]),
     "entry 'a.txt' appears twice", ENTRY_HINT),
]


class Intact:
    """Another environment, pulled before the bad input, and snapshots of the registry and
    the cache: :meth:`check` asserts nothing was lost and nothing half-written."""

    def __init__(self, registry: Path, cache_dir: Path, envhub_cli) -> None:  # type: ignore[no-untyped-def]
        self.registry, self.cache_dir, self.envhub_cli = registry, cache_dir, envhub_cli
        self.before: tuple[object, object] | None = None

    def take(self) -> None:
        self.before = (tree(self.registry), tree(self.cache_dir / "bundles"))

    def check(self) -> None:
        assert (tree(self.registry), tree(self.cache_dir / "bundles")) == self.before
        assert leftovers(self.cache_dir) == []
        assert self.envhub_cli("cache", "verify").code == 0


@pytest.fixture
def intact(registry: Path, envhub_cli, tmp_path: Path, cache_dir: Path) -> Intact:
    push(envhub_cli, registry, write_env(tmp_path / "other", "acme/other"))
    assert envhub_cli("pull", "acme/other", "--registry", str(registry)).code == 0
    return Intact(registry, cache_dir, envhub_cli)


def _refused(envhub_cli, registry: Path, *args: str):  # type: ignore[no-untyped-def]
    result = envhub_cli("pull", f"{NAME}@1.0.0", "--registry", str(registry), *args)
    assert result.code == 2, result.err
    assert "Traceback" not in result.err and result.out == ""
    return result


@pytest.mark.parametrize(("make", "message", "hint"), [c[1:] for c in BAD_ARCHIVES], ids=[c[0] for c in BAD_ARCHIVES])
def test_bad_archive_refused(registry: Path, envhub_cli, tmp_path: Path, intact: Intact, make: Callable[[Path], bytes],
                             message: str, hint: str) -> None:
    digest = plant(registry, make(tmp_path))
    intact.take()
    shown = f"acme/arith@1.0.0 ({digest[:19]}...)"
    result = _refused(envhub_cli, registry)
    assert result.err == (f"envhub: error: {shown}: cannot extract the bundle\n"
                          f"{shown}: error: {message}\n  hint: {hint}\n")
    intact.check()
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/escaped.txt").exists()


def test_archive_over_the_size_limit(registry: Path, envhub_cli, tmp_path: Path, intact: Intact,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    digest = plant(registry, _good_archive(tmp_path))
    intact.take()
    monkeypatch.setenv("ENVHUB_MAX_BUNDLE_BYTES", "100")
    shown = f"acme/arith@1.0.0 ({digest[:19]}...)"
    result = _refused(envhub_cli, registry)
    assert result.err == (f"envhub: error: {shown}: cannot extract the bundle\n"
                          f"{shown}: error: the archive expands past the limit of 100 bytes\n"
                          "  hint: raise ENVHUB_MAX_BUNDLE_BYTES if you trust this bundle\n")
    intact.check()
    monkeypatch.setenv("ENVHUB_MAX_BUNDLE_BYTES", "a lot")
    result = _refused(envhub_cli, registry)
    assert result.err == ("envhub: error: ENVHUB_MAX_BUNDLE_BYTES='a lot' is not an integer\n"
                          "  hint: set it to a number of bytes, e.g. 21474836480\n")
    monkeypatch.delenv("ENVHUB_MAX_BUNDLE_BYTES")
    assert envhub_cli("pull", f"{NAME}@1.0.0", "--registry", str(registry)).code == 0


def _blob(registry: Path, digest: str) -> Path:
    return registry / "blobs" / "sha256" / digest[7:9] / digest[7:]


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[600] ^= 0x01  # inside the first file's content: still a readable tar
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("tamper", [_flip_byte, lambda p: p.write_bytes(p.read_bytes()[:1536])],
                         ids=["changed-byte", "truncated"])
def test_tampered_blob_is_not_cached(registry: Path, envhub_cli, tmp_path: Path, intact: Intact,
                                     tamper: Callable[[Path], None]) -> None:
    digest = str(push(envhub_cli, registry, write_env(tmp_path / "b"))["digest"])
    tamper(_blob(registry, digest))
    intact.take()
    actual = sha256(_blob(registry, digest).read_bytes())
    result = _refused(envhub_cli, registry)
    assert result.err == (f"envhub: error: acme/arith@1.0.0 from {registry}: the archive's digest is {actual}, "
                          f"but the index says {digest}\n"
                          "  hint: the registry's copy is damaged or was tampered with; nothing was cached\n")
    intact.check()  # the cache is not poisoned: no directory under this digest, none under the other


def test_tampered_heldout_blob_is_not_cached(registry: Path, envhub_cli, tmp_path: Path, home: Path,
                                             cache_dir: Path) -> None:
    entry = push(envhub_cli, registry, write_env(tmp_path / "b"))
    heldout = str(entry["heldout-digest"])
    _flip_byte(_blob(home / "heldout", heldout))
    result = envhub_cli("pull", NAME, "--registry", str(registry), "--with-heldout")
    assert result.code == 2
    assert result.err.startswith(f"envhub: error: acme/arith@1.0.0 from {registry}: the archive's digest is sha256:")
    assert result.err.endswith(f", but the index says {heldout}\n"
                               "  hint: the registry's copy is damaged or was tampered with; nothing was cached\n")
    assert not (cache_dir / "heldout").is_dir() or list((cache_dir / "heldout").iterdir()) == []
    assert leftovers(cache_dir) == []


def test_tampered_index(registry: Path, envhub_cli, tmp_path: Path, intact: Intact) -> None:
    push(envhub_cli, registry, write_env(tmp_path / "b"))
    entry = registry / "index/acme/arith/1.json"
    good = entry.read_text()

    entry.write_text(good[: len(good) // 2])  # cut short: not JSON
    intact.take()
    result = _refused(envhub_cli, registry)
    assert result.err.startswith(f"envhub: error: {registry}: index file '{entry}' is corrupted (")
    assert result.err.endswith(")\n  hint: the registry is damaged; ask its owner to restore the file\n")
    assert envhub_cli("versions", NAME, "--registry", str(registry)).code == 2
    intact.check()

    entry.write_text("[1, 2]")
    result = _refused(envhub_cli, registry)
    assert result.err == f"envhub: error: {registry}: index file '{entry}' is corrupted (not a JSON object)\n"

    other = "sha256:" + "0" * 64  # a digest with no blob
    entry.write_text(good.replace(json.loads(good)["digest"], other))
    intact.take()
    result = _refused(envhub_cli, registry)
    assert result.err == (f"envhub: error: {registry}: blob {other} is missing\n"
                          "  hint: the registry is damaged: republish this version elsewhere\n")
    intact.check()


def test_unknown_version_lists_those_that_exist(registry: Path, envhub_cli, tmp_path: Path) -> None:
    for version in ("1.0.0", "1.1.0"):
        push_version(envhub_cli, registry, tmp_path, version)
    result = envhub_cli("pull", f"{NAME}@3.0", "--registry", str(registry))
    assert result.code == 2
    assert result.err == ("envhub: error: no version of acme/arith matches 'acme/arith@3.0'; versions: 1.0.0, 1.1.0\n"
                          "  hint: pin one that exists, e.g. 'acme/arith@1.1.0'\n")


def test_push_to_a_registry_that_is_a_file(tmp_path: Path, envhub_cli) -> None:
    target = tmp_path / "not-a-directory"
    target.write_text("x")
    result = envhub_cli("push", str(write_env(tmp_path / "b")), "--registry", str(target))
    assert result.code == 2
    assert result.err == f"envhub: error: {target}: cannot publish: [Errno 17] File exists: '{target}'\n"
    assert target.read_text() == "x"


def test_push_to_a_read_only_registry(tmp_path: Path, envhub_cli) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    registry.chmod(0o555)
    try:
        if os.access(registry, os.W_OK):
            pytest.skip("running as root: permissions are not enforced (the registry-is-a-file test covers this)")
        result = envhub_cli("push", str(write_env(tmp_path / "b")), "--registry", str(registry))
        assert result.code == 2
        assert result.err.startswith(f"envhub: error: {registry}: cannot publish: permission denied (")
        assert result.err.endswith("  hint: check that you may write to this registry, "
                                   "or choose another with --registry\n")
        assert list(registry.iterdir()) == []
    finally:
        registry.chmod(0o755)


# --- interrupted and concurrent pushes --------------------------------------------------------------

def _visible(registry: Path) -> list[str]:
    index = registry / "index"
    return sorted(p.relative_to(index).as_posix() for p in index.rglob("*") if p.is_file()) if index.is_dir() else []


def test_push_failing_in_the_upload_leaves_nothing(registry: Path, envhub_cli, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from fsspec.implementations.local import LocalFileSystem

    real_put = LocalFileSystem.put_file

    def half_then_fail(self, lpath, rpath, **kwargs):  # type: ignore[no-untyped-def]
        if not rpath.startswith(str(registry)):  # the held-out store
            return real_put(self, lpath, rpath, **kwargs)
        Path(rpath).write_bytes(Path(lpath).read_bytes()[:1000])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(LocalFileSystem, "put_file", half_then_fail)
    root = write_env(tmp_path / "b")
    result = envhub_cli("push", str(root), "--registry", str(registry))
    assert result.code == 2
    assert result.err == f"envhub: error: {registry}: cannot publish: [Errno 28] No space left on device\n"
    assert _visible(registry) == []
    assert not (registry / "blobs").exists() or [p for p in (registry / "blobs").rglob("*") if p.is_file()] == []
    assert list((registry / "tmp").iterdir()) == []
    monkeypatch.setattr(LocalFileSystem, "put_file", real_put)
    assert push(envhub_cli, registry, root)["created"] is True


def test_push_to_a_broken_heldout_store_publishes_nothing(registry: Path, envhub_cli, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "heldout-store-is-a-file"
    store.write_text("x")
    monkeypatch.setenv("ENVHUB_HELDOUT_STORE", str(store))
    result = envhub_cli("push", str(write_env(tmp_path / "b")), "--registry", str(registry))
    assert result.code == 2
    assert result.err == (f"envhub: error: {store}: cannot store held-out splits: [Errno 17] File exists: '{store}'\n"
                          "  hint: nothing was published; fix ENVHUB_HELDOUT_STORE and push again\n")
    assert _visible(registry) == []


def test_push_interrupted_before_the_index_entry_leaves_no_version(registry: Path, envhub_cli, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from envhub.registry import BlobStore

    real_create = BlobStore.create_json

    def interrupted(self, path, data):  # type: ignore[no-untyped-def]
        if "/index/" in path and str(registry) in path:
            raise KeyboardInterrupt
        return real_create(self, path, data)

    monkeypatch.setattr(BlobStore, "create_json", interrupted)
    root = write_env(tmp_path / "b")
    result = envhub_cli("push", str(root), "--registry", str(registry))
    assert (result.code, result.err) == (130, "\nAborted.\n")
    assert _visible(registry) == []
    assert envhub_cli("versions", NAME, "--registry", str(registry)).code == 2
    monkeypatch.setattr(BlobStore, "create_json", real_create)
    assert push(envhub_cli, registry, root)["created"] is True  # the orphan blob is reused
    assert _visible(registry) == ["acme/arith/1.json"]


_KILL_PUSH = """
import os, signal, sys
from pathlib import Path
from envhub.registry._fsspec import BlobStore
from fsspec.implementations.local import LocalFileSystem

where = sys.argv[1]
if where == "upload":
    def put_file(self, lpath, rpath, **kwargs):
        Path(rpath).write_bytes(Path(lpath).read_bytes()[:1000])
        os.kill(os.getpid(), signal.SIGKILL)
    LocalFileSystem.put_file = put_file
else:
    real = BlobStore.create_json
    def create_json(self, path, data):
        if "/index/" in path and "/heldout/" not in path:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, path, data)
    BlobStore.create_json = create_json
from envhub.cli import main
main(["push", sys.argv[2], "--registry", sys.argv[3]])
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
@pytest.mark.parametrize("where", ["upload", "index"], ids=["killed-mid-upload", "killed-before-index-entry"])
def test_push_killed_leaves_no_visible_version(registry: Path, envhub_cli, tmp_path: Path, where: str) -> None:
    root = write_env(tmp_path / "b")
    proc = subprocess.run([sys.executable, "-c", _KILL_PUSH, where, str(root), str(registry)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    assert _visible(registry) == []
    assert envhub_cli("versions", NAME, "--registry", str(registry)).code == 2
    assert envhub_cli("pull", NAME, "--registry", str(registry)).code == 2
    entry = push(envhub_cli, registry, root)
    assert entry["created"] is True
    pulled = envhub_cli("pull", NAME, "--registry", str(registry), "--json")
    assert json.loads(pulled.out)["digest"] == entry["digest"]


def test_concurrent_pushes_of_one_version_have_one_winner(tmp_path: Path) -> None:
    """Two processes push the same versions with different content, starting each round
    together: every round has exactly one winner, and the loser is told why."""
    from envhub.registry import open_registry
    from envhub.settings import load_settings

    rounds = 10
    registry = tmp_path / "registry"
    versions = [f"1.0.{i}" for i in range(rounds)]
    work = [[built_env(tmp_path / f"w{w}", v, salt=f"writer-{w}", heldout=False) for v in versions] for w in range(2)]
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    workers = [ctx.Process(target=push_worker, args=(str(registry), bundles, barrier, results)) for bundles in work]
    for p in workers:
        p.start()
    outcomes = [results.get(timeout=60) for _ in range(2 * rounds)]
    for p in workers:
        p.join(timeout=60)
        assert p.exitcode == 0
    reader = open_registry(str(registry), load_settings(), plugins=PLUGINS)
    published = {e.version: e.digest for e in reader.versions(NAME)}
    assert sorted(published) == sorted(versions)
    for version in versions:
        got = sorted((o for o in outcomes if o[0] == version), key=lambda o: o[1])
        assert [o[1] for o in got] == ["conflict", "created"], got
        winner = got[1][2]
        assert published[version] == winner
        loser = next(b for w in work for b in w if b.version == version and b.public.digest != winner)
        assert got[0][2] == (
            f"acme/arith@{version} is already published in {registry} with different content "
            f"({winner[:19]}..., yours is {loser.public.digest[:19]}...)\n"
            f"  hint: versions are immutable: bump [environment] version (e.g. to 1.0.{int(version[4:]) + 1}) "
            "and push again")
    assert list((registry / "tmp").iterdir()) == []
    assert [p.name for p in (registry / "index/acme/arith").iterdir() if p.name.endswith(".tmp")] == []


# --- the installed command, as a user runs it -----------------------------------------------------

def test_installed_command_push_pull_info(tmp_path: Path) -> None:
    assert run_envhub("init", "acme/e2e", "env", cwd=tmp_path).code == 0
    pushed = run_envhub("push", "env", "--json", cwd=tmp_path)
    assert pushed.code == 0, pushed.err
    entry = json.loads(pushed.out)
    assert (entry["name"], entry["version"], entry["created"]) == ("acme/e2e", "0.1.0", True)
    pulled = run_envhub("pull", "acme/e2e@0.1.0", cwd=tmp_path)
    assert pulled.code == 0, pulled.err
    assert pulled.out == f"{Path(os.environ['ENVHUB_CACHE']) / 'bundles' / entry['digest'][7:]}\n"
    assert pulled.err == f"Pulled acme/e2e@0.1.0 ({entry['digest']})\n"
    shown = run_envhub("info", "acme/e2e", cwd=tmp_path)
    assert shown.code == 0, shown.err
    assert shown.out.splitlines()[0] == "acme/e2e 0.1.0  (score-version 1)"
    assert f"  digest:    {entry['digest']}  (published {entry['published-at']})" in shown.out.splitlines()
    assert "    test              2 tasks  held-out" in shown.out
    out = tmp_path / "copy"
    full = run_envhub("pull", "acme/e2e", "--with-heldout", "-o", str(out), cwd=tmp_path)
    assert full.code == 0, full.err
    checked = run_envhub("validate", str(out))
    assert (checked.code, checked.out) == (0, f"valid: acme/e2e 0.1.0 ({out}): 3 split(s), 10 task(s)\n")
    assert member_bytes(Path(os.environ["ENVHUB_HOME"]) / "registry" / entry["locator"], "envhub.toml")


def test_installed_command_on_s3_configured_from_the_environment(tmp_path: Path, s3_cli: dict[str, str]) -> None:
    """``FSSPEC_S3_*`` variables configure s3:// for the installed command: no option needed."""
    import uuid

    url = f"s3://envhub-test/{uuid.uuid4().hex}"
    root = write_env(tmp_path / "b")
    pushed = run_envhub("push", str(root), "--registry", url, "--json", env=s3_cli)
    assert pushed.code == 0, pushed.err
    digest = json.loads(pushed.out)["digest"]
    pulled = run_envhub("pull", f"{NAME}@1.0.0", "--registry", url, "--json", env=s3_cli)
    assert pulled.code == 0, pulled.err
    assert (json.loads(pulled.out)["digest"], json.loads(pulled.out)["cached"]) == (digest, False)


def test_index_pointing_at_another_genuine_blob(registry: Path, envhub_cli, tmp_path: Path, intact: Intact) -> None:
    """A tampered index that names another real bundle's digest must not hand that bundle out."""
    push(envhub_cli, registry, write_env(tmp_path / "b"))
    other = json.loads((registry / "index/acme/other/1.json").read_text())["digest"]
    entry = registry / "index/acme/arith/1.json"
    entry.write_text(entry.read_text().replace(json.loads(entry.read_text())["digest"], other))
    intact.take()
    result = _refused(envhub_cli, registry)
    assert result.err == (f"envhub: error: {NAME}@1.0.0 from {registry}: the archive holds acme/other 1.0.0, "
                          f"not {NAME} 1.0.0\n"
                          "  hint: the registry's index was tampered with or damaged; nothing was cached\n")
    intact.check()


def test_unreachable_s3_endpoint_is_a_clear_error(envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Network failures from the storage client (not OSErrors) become registry errors, exit 2."""
    pytest.importorskip("s3fs")
    import socket

    import fsspec.config

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_MAX_ATTEMPTS": "1", "AWS_RETRY_MODE": "standard"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": f"http://127.0.0.1:{port}", "key": "x",
                                                   "secret": "x"})
    result = envhub_cli("versions", NAME, "--registry", "s3://bucket/envs")
    assert result.code == 2, result.err
    assert result.err.startswith("envhub: error: s3://bucket/envs: cannot read the index: ")
    assert result.err.endswith("  hint: check the registry URL, your network and your credentials, or use --offline\n")
    assert "Traceback" not in result.err
