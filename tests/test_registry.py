"""Registries: the contract every backend keeps (a directory, memory://, s3:// on a real
server), version selection, and which registry a command uses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envhub.errors import EnvNotFoundError, VersionConflictError
from envhub.ids import parse_ref
from envhub.registry import VersionEntry, select_version
from tests.conftest import RegistryTarget
from tests.registry_fixtures import NAME, PLUGINS, SECRET, built_env, sha256, write_env

# --- the contract, on every backend ----------------------------------------------------------


def test_publish_then_versions(registry_target: RegistryTarget, tmp_path: Path) -> None:
    registry = registry_target.open()
    bundle = built_env(tmp_path, "1.0.0", tags=("math", "easy"))
    result = registry.publish(bundle)
    assert result.created is True
    entry = result.entry
    assert (entry.name, entry.version, entry.digest, entry.size) == (
        NAME, "1.0.0", bundle.public.digest, bundle.public.size)
    assert (entry.tags, entry.description, entry.yanked) == (("math", "easy"), "Arithmetic drills.", False)
    assert entry.heldout_digest == bundle.heldout.digest  # type: ignore[union-attr]
    assert entry.locator == f"blobs/sha256/{bundle.public.digest[7:9]}/{bundle.public.digest[7:]}"
    assert registry.versions(NAME) == [entry]
    assert registry.versions(NAME)[0].registry == registry.url
    with registry.open_archive(entry) as f:
        assert sha256(f.read()) == bundle.public.digest


def test_same_digest_again_is_a_noop(registry_target: RegistryTarget, tmp_path: Path) -> None:
    registry = registry_target.open()
    first = registry.publish(built_env(tmp_path, "1.0.0"))
    again = registry.publish(built_env(tmp_path / "rebuilt", "1.0.0"))  # built again: the same bytes
    assert again.created is False
    assert again.entry == first.entry  # the first publication, untouched (same published-at)
    assert len(registry.versions(NAME)) == 1


def test_other_content_under_a_published_version_is_refused(registry_target: RegistryTarget, tmp_path: Path) -> None:
    registry = registry_target.open()
    first = registry.publish(built_env(tmp_path, "1.0.0")).entry
    other = built_env(tmp_path, "1.0.0", salt="changed")
    with pytest.raises(VersionConflictError) as exc:
        registry.publish(other)
    assert str(exc.value) == (
        f"acme/arith@1.0.0 is already published in {registry.url} with different content "
        f"({first.digest[:19]}..., yours is {other.public.digest[:19]}...)\n"
        "  hint: versions are immutable: bump [environment] version (e.g. to 1.0.1) and push again")
    assert registry.versions(NAME) == [first]


@pytest.mark.parametrize(("published", "pushed", "bump"), [("1.0", "1.0.0", "1.0.1"), ("1.0.0", "1.0", "1.0.1"),
                                                           ("2", "2.0.0", "2.0.1")],
                         ids=["short-then-long", "long-then-short", "major-only"])
def test_equal_pep440_versions_are_one_version(registry_target: RegistryTarget, tmp_path: Path,
                                               published: str, pushed: str, bump: str) -> None:
    registry = registry_target.open()
    registry.publish(built_env(tmp_path, published))
    with pytest.raises(VersionConflictError) as exc:
        registry.publish(built_env(tmp_path, pushed))  # the manifest differs, so the digest does
    assert exc.value.message.startswith(
        f"acme/arith@{published} is already published in {registry.url} with different content")
    assert exc.value.hint == f"versions are immutable: bump [environment] version (e.g. to {bump}) and push again"
    assert [e.version for e in registry.versions(NAME)] == [published]
    entry, warning = select_version(registry.versions(NAME), parse_ref(f"{NAME}@{pushed}"))
    assert (entry.version, warning) == (published, None)


def test_yank_hides_from_ranges_but_not_from_exact_pins(registry_target: RegistryTarget, tmp_path: Path) -> None:
    registry = registry_target.open()
    for version in ("1.0.0", "1.1.0"):
        registry.publish(built_env(tmp_path, version))
    yanked = registry.yank(NAME, "1.1", "wrong answers in train")  # any spelling of the version
    assert (yanked.version, yanked.yanked, yanked.yank_reason) == ("1.1.0", True, "wrong answers in train")
    entries = registry.versions(NAME)
    assert [(e.version, e.yanked, e.yank_reason) for e in entries] == [
        ("1.0.0", False, None), ("1.1.0", True, "wrong answers in train")]
    assert select_version(entries, parse_ref(NAME))[0].version == "1.0.0"
    assert select_version(entries, parse_ref(f"{NAME}>=1.0"))[0].version == "1.0.0"
    entry, warning = select_version(entries, parse_ref(f"{NAME}@1.1.0"))
    assert entry.version == "1.1.0"
    assert warning == "acme/arith@1.1.0 is yanked: wrong answers in train; using it because it was pinned exactly"
    # A second yank keeps the first reason; nothing is ever deleted.
    assert registry.yank(NAME, "1.1.0", "another reason").yank_reason == "wrong answers in train"
    assert [e.yank_reason for e in registry.versions(NAME)] == [None, "wrong answers in train"]
    assert registry.search("arith")[0].version == "1.0.0"


def test_yank_unknown_version_lists_versions(registry_target: RegistryTarget, tmp_path: Path) -> None:
    registry = registry_target.open()
    registry.publish(built_env(tmp_path, "1.0.0"))
    with pytest.raises(EnvNotFoundError) as exc:
        registry.yank(NAME, "9.9", "x")
    assert str(exc.value) == f"acme/arith@9.9 is not in {registry.url}; versions: 1.0.0"


def test_search_by_query_and_tag(registry_target: RegistryTarget, tmp_path: Path) -> None:
    registry = registry_target.open()
    registry.publish(built_env(tmp_path, "1.0.0", tags=("math",)))
    registry.publish(built_env(tmp_path, "1.1.0", tags=("math", "easy")))
    registry.publish(built_env(tmp_path, "0.1.0", name="acme/sql-shop", description="Query a shop's SQLite database.",
                               tags=("tool-use", "sql")))
    registry.publish(built_env(tmp_path, "2.0.0", name="other/chess", description="Chess puzzles.", tags=("games",)))

    def found(query: str, tag: str | None = None) -> list[str]:
        return [e.ref for e in registry.search(query, tag=tag)]

    assert found("") == ["acme/arith@1.1.0", "acme/sql-shop@0.1.0", "other/chess@2.0.0"]
    assert found("acme/") == ["acme/arith@1.1.0", "acme/sql-shop@0.1.0"]
    assert found("SQLITE") == ["acme/sql-shop@0.1.0"]  # description, any case
    assert found("games") == ["other/chess@2.0.0"]  # tags are searched too
    assert found("", tag="easy") == ["acme/arith@1.1.0"]  # the newest version's tags
    assert found("shop", tag="math") == []
    assert found("nothing like it") == []


@pytest.mark.parametrize(("asked", "message", "hint"), [
    ("acme/arth", "acme/arth is not in {url}", "did you mean 'acme/arith'?"),
    ("zzz/unrelated", "zzz/unrelated is not in {url}", "publish it with 'envhub push', or search with 'envhub search'"),
], ids=["close-name", "unrelated-name"])
def test_unknown_environment_suggests(registry_target: RegistryTarget, tmp_path: Path, asked: str, message: str,
                                      hint: str) -> None:
    registry = registry_target.open()
    registry.publish(built_env(tmp_path, "1.0.0"))
    with pytest.raises(EnvNotFoundError) as exc:
        registry.versions(asked)
    assert (exc.value.message, exc.value.hint) == (message.format(url=registry.url), hint)


def test_empty_registry(registry_target: RegistryTarget) -> None:
    registry = registry_target.open()
    assert registry.search("") == []
    with pytest.raises(EnvNotFoundError):
        registry.versions(NAME)


def test_versions_in_pep440_order(registry_target: RegistryTarget, tmp_path: Path) -> None:
    registry = registry_target.open()
    for version in ("1.10.0", "1.9.0", "2.0.0rc1", "1.9.1.post1", "2.0.0"):
        registry.publish(built_env(tmp_path, version))
    assert [e.version for e in registry.versions(NAME)] == ["1.9.0", "1.9.1.post1", "1.10.0", "2.0.0rc1", "2.0.0"]


def test_sees_what_another_client_published(registry_target: RegistryTarget, tmp_path: Path) -> None:
    """A client that listed the index before sees later versions, yanks and conflicts:
    no listing cached by the filesystem (s3fs keeps one per instance) hides them."""
    reader, writer = registry_target.open(), registry_target.open(other_client=True)
    writer.publish(built_env(tmp_path, "1.0.0"))
    assert [e.version for e in reader.versions(NAME)] == ["1.0.0"]
    assert [e.name for e in reader.search("")] == [NAME]
    writer.publish(built_env(tmp_path, "1.1.0"))
    writer.yank(NAME, "1.0.0", "superseded")
    writer.publish(built_env(tmp_path, "1.0.0", name="acme/other"))
    assert [(e.version, e.yanked) for e in reader.versions(NAME)] == [("1.0.0", True), ("1.1.0", False)]
    assert [e.name for e in reader.search("")] == [NAME, "acme/other"]
    with pytest.raises(VersionConflictError):
        reader.publish(built_env(tmp_path, "1.1.0", salt="mine"))


def test_heldout_splits_never_reach_the_registry(registry_target: RegistryTarget, tmp_path: Path) -> None:
    from envhub.hub import push
    registry = registry_target.open()
    heldout_store = tmp_path / "private"
    result = push(write_env(tmp_path / "b"), registry, heldout_url=str(heldout_store), plugins=PLUGINS)
    entry = result.publish.entry
    fs, root = registry.store.fs, registry.store.root
    stored = {path: fs.cat_file(path) for path in fs.find(root)}
    assert sorted(p[len(root):] for p in stored) == [
        f"/blobs/sha256/{entry.digest[7:9]}/{entry.digest[7:]}", "/envhub-registry.json",
        "/index/acme/arith/1.json"]
    assert not any(SECRET.encode() in data for data in stored.values())
    assert entry.heldout_digest is not None
    held = heldout_store / "blobs" / "sha256" / entry.heldout_digest[7:9] / entry.heldout_digest[7:]
    assert SECRET.encode() in held.read_bytes()
    assert (heldout_store.stat().st_mode & 0o777) == 0o700
    assert json.loads((heldout_store / "index/acme/arith/1.json").read_text()) == {
        "digest": entry.heldout_digest, "size": held.stat().st_size}


def test_index_entry_layout(tmp_path: Path) -> None:
    """The spec's index entry: exactly these keys, nothing transient."""
    from envhub.registry import open_registry
    from envhub.settings import load_settings

    registry = open_registry(str(tmp_path / "r"), load_settings(), plugins=PLUGINS)
    bundle = built_env(tmp_path, "1.2.0")
    registry.publish(bundle)
    data = json.loads((tmp_path / "r/index/acme/arith/1.2.json").read_text())
    assert sorted(data) == ["dependencies", "description", "digest", "heldout-digest", "locator", "name",
                            "published-at", "python-dependencies", "score-version", "size", "tags", "version"]
    assert json.loads((tmp_path / "r/envhub-registry.json").read_text()) == {"layout": 1}
    assert list((tmp_path / "r/tmp").iterdir()) == []  # the upload's temporary file is gone


# --- select_version ----------------------------------------------------------------------------

def _entry(version: str, yanked: str | None = None) -> VersionEntry:
    return VersionEntry(name=NAME, version=version, digest="sha256:" + "0" * 64, size=1, published_at="",
                        yanked=yanked is not None, yank_reason=yanked)


ENTRIES = [_entry("0.9.0"), _entry("1.0.0"), _entry("1.1.0"), _entry("1.2.0", yanked="bad rows"),
           _entry("2.0.0rc1")]
ALL = "0.9.0, 1.0.0, 1.1.0, 1.2.0 (yanked), 2.0.0rc1"
YANKED = "acme/arith@1.2.0 is yanked: bad rows; using it because it was pinned exactly"

# (id, reference, expected version, expected warning)
SELECT = [
    ("any", "acme/arith", "1.1.0", None),
    ("range", "acme/arith>=1,<2", "1.1.0", None),
    ("upper-bound", "acme/arith<1.1", "1.0.0", None),
    ("wildcard", "acme/arith==1.*", "1.1.0", None),
    ("compatible", "acme/arith~=1.0", "1.1.0", None),
    ("pin", "acme/arith@1.0.0", "1.0.0", None),
    ("pin-short", "acme/arith@1", "1.0.0", None),
    ("pin-yanked", "acme/arith@1.2.0", "1.2.0", YANKED),
    ("double-equals-yanked", "acme/arith==1.2.0", "1.2.0", YANKED),
    ("pre-release-asked", "acme/arith>=2.0.0rc1", "2.0.0rc1", None),
    ("pre-release-pinned", "acme/arith@2.0.0rc1", "2.0.0rc1", None),
]


@pytest.mark.parametrize(("ref", "version", "warning"), [c[1:] for c in SELECT], ids=[c[0] for c in SELECT])
def test_select_version(ref: str, version: str, warning: str | None) -> None:
    entry, got_warning = select_version(ENTRIES, parse_ref(ref))
    assert (entry.version, got_warning) == (version, warning)


# (id, reference, message)
NO_MATCH = [
    ("only-yanked-or-pre", "acme/arith>1.1", "no version of acme/arith matches 'acme/arith>1.1'; versions: " + ALL),
    ("unknown-pin", "acme/arith@3.0.0", "no version of acme/arith matches 'acme/arith@3.0.0'; versions: " + ALL),
    ("pre-release-not-asked", "acme/arith>=2", "no version of acme/arith matches 'acme/arith>=2'; versions: " + ALL),
]


@pytest.mark.parametrize(("ref", "message"), [c[1:] for c in NO_MATCH], ids=[c[0] for c in NO_MATCH])
def test_select_version_no_match(ref: str, message: str) -> None:
    with pytest.raises(EnvNotFoundError) as exc:
        select_version(ENTRIES, parse_ref(ref))
    assert (exc.value.message, exc.value.hint) == (message, "pin one that exists, e.g. 'acme/arith@2.0.0rc1'")


# --- which registry a command uses ---------------------------------------------------------------

@pytest.fixture
def two_registries(tmp_path: Path) -> tuple[Path, Path]:
    """Two directory registries told apart by what they hold: acme/alpha and acme/beta."""
    from envhub.registry import open_registry
    from envhub.settings import load_settings

    alpha, beta = tmp_path / "alpha-registry", tmp_path / "beta-registry"
    settings = load_settings()
    open_registry(str(alpha), settings, plugins=PLUGINS).publish(built_env(tmp_path, name="acme/alpha"))
    open_registry(str(beta), settings, plugins=PLUGINS).publish(built_env(tmp_path, name="acme/beta"))
    return alpha, beta


def _searched(envhub_cli, *args: str) -> list[str]:
    result = envhub_cli("search", "--json", *args)
    assert result.code == 0, result.err
    return [e["name"] for e in json.loads(result.out)]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_registry_option_and_environment_variable(two_registries, envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    alpha, beta = two_registries
    assert _searched(envhub_cli, "--registry", str(alpha)) == ["acme/alpha"]
    assert _searched(envhub_cli, "--registry", alpha.as_uri()) == ["acme/alpha"]
    monkeypatch.setenv("ENVHUB_REGISTRY", str(beta))
    assert _searched(envhub_cli) == ["acme/beta"]
    assert _searched(envhub_cli, "--registry", str(alpha)) == ["acme/alpha"]  # the option wins


def test_default_is_the_embedded_registry(tmp_path: Path, envhub_cli) -> None:
    assert envhub_cli("push", str(write_env(tmp_path / "b"))).code == 0
    home = Path(os.environ["ENVHUB_HOME"])
    assert (home / "registry/index/acme/arith/1.json").is_file()
    assert _searched(envhub_cli) == [NAME]


def test_named_registries_from_user_config(two_registries, envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    alpha, beta = two_registries
    config = Path(os.environ["ENVHUB_HOME"]) / "config.toml"
    _write(config, f'default-registry = "team"\n\n[registries]\nteam = "{alpha.as_uri()}"\nlab = "{beta}"\n')
    assert _searched(envhub_cli, "--registry", "lab") == ["acme/beta"]
    assert _searched(envhub_cli) == ["acme/alpha"]  # default-registry
    monkeypatch.setenv("ENVHUB_REGISTRY", "lab")  # a name works in the variable too
    assert _searched(envhub_cli) == ["acme/beta"]


def test_named_registries_from_project(two_registries, tmp_path: Path, envhub_cli,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    alpha, beta = two_registries
    config = Path(os.environ["ENVHUB_HOME"]) / "config.toml"
    _write(config, f'[registries]\nteam = "{alpha}"\n')
    project = tmp_path / "project"
    _write(project / "pyproject.toml", f'[project]\nname = "trainer"\n\n[tool.envhub.registries]\nteam = "{beta}"\n'
                                       f'shared = "{alpha}"\n')
    (project / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(project / "src" / "deep")  # found from a subdirectory
    assert _searched(envhub_cli, "--registry", "team") == ["acme/beta"]  # the project's name wins
    assert _searched(envhub_cli, "--registry", "shared") == ["acme/alpha"]


def test_unknown_registry_name(two_registries, envhub_cli) -> None:
    alpha, _ = two_registries
    config = Path(os.environ["ENVHUB_HOME"]) / "config.toml"
    result = envhub_cli("search", "--registry", "nope")
    assert result.code == 2
    assert result.err == ("envhub: error: no registry named 'nope' (named registries: none)\n"
                          "  hint: name a URL (s3://..., file://...) or a directory (./dir), or add the name under "
                          f"[registries] in {config}\n")
    _write(config, f'[registries]\nteam = "{alpha}"\nlab = "{alpha}"\n')
    result = envhub_cli("versions", NAME, "--registry", "tema")
    assert result.code == 2
    assert result.err.startswith("envhub: error: no registry named 'tema' (named registries: lab, team)\n")


@pytest.mark.parametrize(("text", "message"), [
    ("[registries\n", "invalid TOML: Expected ']' at the end of a table declaration (at line 1, column 12)"),
    ('[registries]\nteam = 3\n', "[registries] must map names to URLs"),
], ids=["bad-toml", "not-a-url"])
def test_bad_user_config(envhub_cli, text: str, message: str) -> None:
    config = Path(os.environ["ENVHUB_HOME"]) / "config.toml"
    _write(config, text)
    result = envhub_cli("search")
    assert result.code == 2
    assert result.err.splitlines()[0] == f"envhub: error: {config}: {message}"


@pytest.mark.parametrize("command",
                         [("search",), ("versions", NAME), ("pull", NAME), ("yank", f"{NAME}@1", "--reason", "x")],
                         ids=["search", "versions", "pull", "yank"])
def test_unknown_registry_scheme(envhub_cli, command: tuple[str, ...]) -> None:
    result = envhub_cli(*command, "--registry", "nope://bucket/envs")
    assert result.code == 2
    assert result.err == ("envhub: error: unknown registry scheme 'nope' in 'nope://bucket/envs'\n"
                          "  hint: use a directory path, file://, memory://, s3:// or another fsspec URL\n")
