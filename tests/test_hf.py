"""The ``hf://`` registry: the real ``huggingface_hub`` client against an HF-compatible test
server on 127.0.0.1 (tests/hf_server.py). The registry contract tests of test_registry.py
run here too, on an hf:// registry; then what is particular to the Hub: repo layout, tags,
held-out companion repos, locked pulls by commit, offline, and every error mapped."""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envhub.errors import IntegrityError, RegistryError
from tests.conftest import RegistryTarget
from tests.hf_server import HubServer
from tests.registry_fixtures import NAME, PLUGINS, SECRET, built_env, sha256, write_env

# The registry contract, run here on an hf:// registry (this module's registry_target).
from tests.test_registry import (  # noqa: F401 - collected here with the fixture below
    test_empty_registry,
    test_equal_pep440_versions_are_one_version,
    test_other_content_under_a_published_version_is_refused,
    test_same_digest_again_is_a_noop,
    test_search_by_query_and_tag,
    test_sees_what_another_client_published,
    test_versions_in_pep440_order,
    test_yank_hides_from_ranges_but_not_from_exact_pins,
    test_yank_unknown_version_lists_versions,
)

ALICE, BOB = "hf_alice_token", "hf_bob_token"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubServer]:
    """A fresh test Hub: alice may write to acme/ and other/; bob only to bob/. The client
    is logged in as alice through HF_TOKEN; no stored login of the machine is used."""
    import huggingface_hub.constants as hf_constants

    for key in ("HF_ENDPOINT", "HF_HUB_OFFLINE", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_TOKEN", ALICE)
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(tmp_path / "no-hf-login" / "token"))
    monkeypatch.setattr(hf_constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-hf-login" / "stored_tokens"))
    orgs = {"acme": {"alice"}, "other": {"alice"}, "envhub-examples": {"alice"}}
    with HubServer(tokens={ALICE: "alice", BOB: "bob"}, orgs=orgs) as server:
        yield server


@pytest.fixture
def url(hub: HubServer) -> str:
    return f"hf://?endpoint={hub.endpoint}"


class HfTarget(RegistryTarget):
    def open(self, *, other_client: bool = False):  # type: ignore[no-untyped-def]
        from envhub.registry import open_registry
        from envhub.settings import load_settings

        return open_registry(self.url, load_settings(), plugins=PLUGINS)


@pytest.fixture
def registry_target(url: str) -> RegistryTarget:
    """Overrides conftest's: the contract tests imported above run on hf://."""
    return HfTarget("hf", url, {})


def _registry(url: str):  # type: ignore[no-untyped-def]
    from envhub.registry import open_registry
    from envhub.settings import load_settings

    return open_registry(url, load_settings(), plugins=PLUGINS)


def _push(url: str, root: Path):  # type: ignore[no-untyped-def]
    from envhub.hub import push

    return push(root, _registry(url), heldout_url=None, plugins=PLUGINS)


def _pull(url: str, ref: str, **kw):  # type: ignore[no-untyped-def]
    from envhub.hub import pull
    from envhub.settings import load_settings

    return pull(ref, url, load_settings(), plugins=PLUGINS, **kw)


# --- layout on the Hub ----------------------------------------------------------------------------

def test_push_layout_tags_and_card(hub: HubServer, url: str, tmp_path: Path) -> None:
    from huggingface_hub import HfApi

    result = _push(url, write_env(tmp_path / "b", tags=("math", "easy")))
    entry = result.publish.entry
    repo = hub.repo(NAME)
    assert (repo.private, repo.tags) == (False, {"v1.0.0": entry.locator})  # the tag is the commit the upload returned
    assert repo.branches["main"] == entry.locator
    api = HfApi(endpoint=hub.endpoint, token=False)  # what anyone sees
    public = api.list_repo_files(NAME, repo_type="dataset", revision="v1.0.0")
    assert sorted(public) == [".envhub/RECORD", ".envhub/index.json", ".envhub/version.json", ".gitattributes",
                              "README.md", "envhub.toml", "environment.yaml", "tasks/train.jsonl"]
    assert not any(SECRET.encode() in data for data in hub.files(NAME, "v1.0.0").values())
    readme = hub.files(NAME)["README.md"].decode()
    assert readme.startswith("---\npretty_name: acme/arith\ntags:\n- envhub\n- math\n- easy\nconfigs:\n"
                             "- config_name: default\n  data_files:\n  - split: train\n"
                             "    path: tasks/train.jsonl\n---\n")
    assert [d.id for d in api.list_datasets(filter="envhub")] == [NAME]  # the companion is private
    companion = hub.repo(f"{NAME}-heldout")
    assert companion.private is True
    assert sorted(hub.files(f"{NAME}-heldout", "v1.0.0")) == [".envhub/RECORD", ".envhub/version.json",
                                                              ".gitattributes", "tasks/test.jsonl"]
    assert result.heldout_store == f"the private repo acme/arith-heldout on {hub.endpoint}"
    version = json.loads(hub.files(NAME)[".envhub/version.json"])
    assert version["archive"] == {"digest": entry.digest, "size": entry.size, "executables": []}


def test_second_version_replaces_the_tree_and_keeps_the_first_tag(hub: HubServer, url: str, tmp_path: Path) -> None:
    first = _push(url, write_env(tmp_path / "a", files={"extra/old.txt": "old"})).publish.entry
    second = _push(url, write_env(tmp_path / "b", version="1.1.0")).publish.entry
    assert "extra/old.txt" in hub.files(NAME, "v1.0.0")
    assert "extra/old.txt" not in hub.files(NAME, "main")  # main shows the newest push only
    assert hub.repo(NAME).tags == {"v1.0.0": first.locator, "v1.1.0": second.locator}
    assert _pull(url, f"{NAME}@1.0.0").path.joinpath("extra/old.txt").read_text() == "old"


def test_bundle_readme_and_executables_round_trip(url: str, hub: HubServer, tmp_path: Path) -> None:
    root = write_env(tmp_path / "b", files={"README.md": "# Arith\n\nMy own words.\n", "bin/run.sh": "#!/bin/sh\n"})
    (root / "bin/run.sh").chmod(0o755)
    entry = _push(url, root).publish.entry
    readme = hub.files(NAME)["README.md"].decode()
    assert readme.startswith("---\n") and readme.endswith("---\n# Arith\n\nMy own words.\n")
    pulled = _pull(url, f"{NAME}@1.0.0")  # rebuilt archive has the published digest
    assert pulled.entry.digest == entry.digest
    assert (pulled.path / "README.md").read_text() == "# Arith\n\nMy own words.\n"
    assert (pulled.path / "bin/run.sh").stat().st_mode & 0o111


# --- the CLI end to end ---------------------------------------------------------------------------

def test_cli_round_trip(url: str, hub: HubServer, tmp_path: Path, envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_env(tmp_path / "b", tags=("math", "easy"))
    digest = sha256(built_env(tmp_path / "again", "1.0.0", tags=("math", "easy")).public.path.read_bytes())
    first = envhub_cli("push", str(root), "--registry", url)
    assert (first.code, first.err) == (0, f"Published acme/arith@1.0.0 to {url} ({digest})\n"
                                          f"Held-out splits are in the private repo acme/arith-heldout on "
                                          f"{hub.endpoint}, not in the registry\n")
    again = envhub_cli("push", str(root), "--registry", url)
    assert again.err.splitlines()[0] == (f"acme/arith@1.0.0 is already published in {url} with the same content; "
                                         "nothing to do")
    listed = json.loads(envhub_cli("versions", NAME, "--registry", url, "--json").out)
    commit = hub.repo(NAME).tags["v1.0.0"]
    assert [(e["version"], e["digest"], e["locator"]) for e in listed] == [("1.0.0", digest, commit)]
    found = envhub_cli("search", "--tag", "easy", "--registry", url)
    assert found.out == "acme/arith                       1.0.0      Arithmetic drills.  [math, easy]\n"
    out = tmp_path / "full"
    pulled = envhub_cli("pull", NAME, "--registry", url, "--with-heldout", "-o", str(out), "--json")
    assert pulled.code == 0, pulled.err
    data = json.loads(pulled.out)
    assert (data["digest"], data["locator"], data["registry"]) == (digest, commit, url)
    assert (out / "tasks/test.jsonl").read_bytes() == (root / "tasks/test.jsonl").read_bytes()
    assert envhub_cli("validate", str(out)).code == 0
    yanked = envhub_cli("yank", f"{NAME}@1.0", "--reason", "typo in answers", "--registry", url)
    assert (yanked.code, yanked.err) == (0, f"Yanked acme/arith@1.0.0 in {url}: typo in answers\n")
    assert hub.repo(NAME).tags == {"v1.0.0": commit}  # a yank never moves or deletes the tag
    monkeypatch.setenv("ENVHUB_CACHE", str(tmp_path / "fresh-cache"))
    assert envhub_cli("pull", NAME, "--registry", url).code == 2  # the only version is yanked
    pinned = envhub_cli("pull", f"{NAME}@1.0.0", "--registry", url)
    assert pinned.err == ("envhub: warning: acme/arith@1.0.0 is yanked: typo in answers; "
                          f"using it because it was pinned exactly\nPulled acme/arith@1.0.0 ({digest})\n")


def test_named_registry_with_endpoint(url: str, tmp_path: Path, envhub_cli) -> None:
    config = Path(os.environ["ENVHUB_HOME"]) / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[registries]\nhub = "{url}"\n')
    assert envhub_cli("push", str(write_env(tmp_path / "b")), "--registry", "hub").code == 0
    assert json.loads(envhub_cli("versions", NAME, "--registry", "hub", "--json").out)[0]["version"] == "1.0.0"


def test_hf_endpoint_variable(hub: HubServer, tmp_path: Path, envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)  # read by envhub, passed to every client call
    assert envhub_cli("push", str(write_env(tmp_path / "b")), "--registry", "hf://").code == 0
    assert hub.repo(NAME).tags.keys() == {"v1.0.0"}


# --- held-out companion repos -------------------------------------------------------------------------

def test_public_companion_repo_is_refused(hub: HubServer, url: str, tmp_path: Path) -> None:
    hub.create_repo(f"{NAME}-heldout", private=False)
    with pytest.raises(RegistryError) as exc:
        _push(url, write_env(tmp_path / "b"))
    assert str(exc.value) == (
        f"{url}: refusing to push held-out splits: acme/arith-heldout exists and is public\n"
        f"  hint: make acme/arith-heldout private on {hub.endpoint} (its settings), or delete it; "
        "held-out splits never go to a public repo")
    assert (NAME not in {r for _, r in hub.repos}) and hub.files(f"{NAME}-heldout") == {
        ".gitattributes": hub.files(f"{NAME}-heldout")[".gitattributes"]}


@pytest.mark.parametrize(("token", "who"), [(BOB, "your token"), (None, "an anonymous client (you are not logged in)")],
                         ids=["other-user", "anonymous"])
def test_pull_heldout_without_access(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, envhub_cli,
                                     hub: HubServer, token: str | None, who: str) -> None:
    _push(url, write_env(tmp_path / "b"))
    if token is None:
        monkeypatch.delenv("HF_TOKEN")
    else:
        monkeypatch.setenv("HF_TOKEN", token)
    out = tmp_path / "out"
    result = envhub_cli("pull", NAME, "--registry", url, "--with-heldout", "-o", str(out))
    assert result.code == 2
    assert result.err == (
        f"envhub: error: the held-out splits of acme/arith@1.0.0 are in the private repo acme/arith-heldout on "
        f"{hub.endpoint}, which {who} cannot read\n"
        "  hint: ask the owners of acme for read access to acme/arith-heldout, then log in with 'hf auth login' "
        "or set HF_TOKEN with that account\n")
    assert not out.exists()
    assert envhub_cli("pull", NAME, "--registry", url).code == 0  # the public part is public


def test_heldout_same_again_is_a_noop_and_other_content_refused(url: str, hub: HubServer, tmp_path: Path) -> None:
    from envhub.errors import VersionConflictError

    _push(url, write_env(tmp_path / "b"))
    commits = len(hub.repo(f"{NAME}-heldout").commits)
    _push(url, write_env(tmp_path / "b"))
    assert len(hub.repo(f"{NAME}-heldout").commits) == commits
    changed = write_env(tmp_path / "c", files={"tasks/test.jsonl": '{"id": "t", "prompt": "p", "answer": "other"}\n'})
    with pytest.raises(VersionConflictError) as exc:
        _push(url, changed)
    assert exc.value.message.startswith("acme/arith@1.0.0 already has other held-out splits in acme/arith-heldout (")


# --- guarantees: concurrency, integrity, locked pulls, offline ----------------------------------------

def test_concurrent_commit_is_detected_and_retried(url: str, hub: HubServer, tmp_path: Path) -> None:
    _push(url, write_env(tmp_path / "a"))
    repo = hub.repo(NAME)

    def someone_else_commits(repo):  # type: ignore[no-untyped-def]
        head = repo.commits[repo.branches["main"]]
        hub.commit(repo, {**head.tree, "notes.txt": b"a concurrent commit"}, "someone else")

    hub.before_commit = someone_else_commits
    before = hub.requests["POST commit"]
    entry = _push(url, write_env(tmp_path / "b", version="1.1.0", heldout=False)).publish.entry
    assert hub.requests["POST commit"] - before == 2  # refused once (parentCommit is stale), then retried on top
    assert repo.commits[entry.locator].parent is not None
    assert repo.commits[repo.commits[entry.locator].parent].title == "someone else"
    assert [e.version for e in _registry(url).versions(NAME)] == ["1.0.0", "1.1.0"]


def test_tampered_file_is_refused(url: str, hub: HubServer, tmp_path: Path) -> None:
    entry = _push(url, write_env(tmp_path / "b")).publish.entry
    hub.repo(NAME).commits[entry.locator].tree["tasks/train.jsonl"] += b'{"id": "x"}\n'
    with pytest.raises(IntegrityError) as exc:
        _pull(url, f"{NAME}@1.0.0")
    assert exc.value.message.startswith(f"acme/arith@1.0.0 from {url}: tasks/train.jsonl does not match the RECORD (")
    assert exc.value.hint == "the repo's copy is damaged or was tampered with; nothing was cached"
    assert not (Path(os.environ["ENVHUB_CACHE"]) / "bundles").exists()


def test_moved_tag_is_refused_and_a_locked_pull_fetches_by_commit(url: str, hub: HubServer, tmp_path: Path) -> None:
    entry = _push(url, write_env(tmp_path / "a")).publish.entry
    repo = hub.repo(NAME)
    # Someone moves the tag to a commit with other files (envhub never does).
    head = repo.commits[repo.branches["main"]]
    moved = hub.commit(repo, {**head.tree, "tasks/train.jsonl": b'{"id": "evil"}\n'}, "rewrite")
    repo.tags["v1.0.0"] = moved.oid
    with pytest.raises(IntegrityError) as exc:
        _pull(url, f"{NAME}@1.0.0")
    assert exc.value.message.startswith(f"acme/arith@1.0.0 from {url}: tasks/train.jsonl does not match the RECORD")
    locked = _pull(url, f"{NAME}@1.0.0", locator=entry.locator)  # the commit a lockfile recorded
    assert locked.entry.digest == entry.digest
    assert (locked.path / "tasks/train.jsonl").read_bytes() == (tmp_path / "a/tasks/train.jsonl").read_bytes()


def test_offline_from_the_cache(url: str, hub: HubServer, tmp_path: Path, envhub_cli,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    _push(url, write_env(tmp_path / "a"))
    _push(url, write_env(tmp_path / "b", version="1.1.0"))
    assert envhub_cli("pull", f"{NAME}@1.0.0", "--registry", url).code == 0
    hub.stop()  # no Hub at all from here on
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ok = envhub_cli("pull", NAME, "--registry", url, "--json")
    assert ok.code == 0, ok.err
    assert json.loads(ok.out)["version"] == "1.0.0"  # the newest the cache knows
    missing = envhub_cli("pull", f"{NAME}@1.1.0", "--registry", url)
    assert missing.err == ("envhub: error: acme/arith@1.1.0 is not in the cache (offline); cached versions: 1.0.0\n"
                           "  hint: pull it once online: envhub pull acme/arith@1.1.0\n")


# --- errors, each mapped to a message and a hint --------------------------------------------------------

def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_endpoint(envhub_cli) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    result = envhub_cli("versions", NAME, "--registry", f"hf://?endpoint={endpoint}")
    assert result.code == 2
    assert result.err.startswith(f"envhub: error: hf://?endpoint={endpoint}: cannot read the index: "
                                 f"cannot reach {endpoint} (ConnectError: ")
    assert result.err.endswith("  hint: check your network and HF_ENDPOINT, or use --offline\n")


def test_unknown_environment(url: str, envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    result = envhub_cli("versions", "acme/nothing", "--registry", url)
    assert (result.code, result.err) == (2, f"envhub: error: acme/nothing is not in {url}\n  hint: publish it with "
                                            "'envhub push', or search with 'envhub search'\n")
    monkeypatch.delenv("HF_TOKEN")
    result = envhub_cli("pull", "acme/nothing", "--registry", url)
    assert result.err == (f"envhub: error: acme/nothing is not in {url}\n  hint: publish it with 'envhub push', "
                          "or search with 'envhub search'; if its repo is private, log in with 'hf auth login' "
                          "or set HF_TOKEN\n")


def test_push_errors(url: str, hub: HubServer, tmp_path: Path, envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_env(tmp_path / "b", heldout=False)
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_token")
    bad = envhub_cli("push", str(root), "--registry", url)
    assert bad.err == (f"envhub: error: {url}: cannot publish: the Hub at {hub.endpoint} rejected your token\n"
                       "  hint: log in with 'hf auth login' or set HF_TOKEN with a valid token\n")
    monkeypatch.setenv("HF_TOKEN", BOB)
    denied = envhub_cli("push", str(root), "--registry", url)
    assert denied.err == (f"envhub: error: {url}: cannot publish: permission denied on acme/arith\n"
                          "  hint: use a token with write access to acme "
                          "(log in with 'hf auth login' or set HF_TOKEN)\n")
    monkeypatch.delenv("HF_TOKEN")
    anonymous = envhub_cli("push", str(root), "--registry", url)
    assert anonymous.err == (f"envhub: error: {url}: cannot publish: you are not logged in to {hub.endpoint}\n"
                             "  hint: log in with 'hf auth login' or set HF_TOKEN\n")
    assert hub.repos == {}


def test_gated_repo(url: str, hub: HubServer, tmp_path: Path, envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _push(url, write_env(tmp_path / "b", heldout=False))
    hub.repo(NAME).gated = True
    monkeypatch.setenv("HF_TOKEN", BOB)
    result = envhub_cli("pull", NAME, "--registry", url)
    assert result.code == 2
    assert result.err == (f"envhub: error: {url}: cannot read the index: acme/arith is gated and your "
                          "account has not been granted access\n"
                          f"  hint: request access at {hub.endpoint}/datasets/acme/arith, then use a token of that "
                          "account (log in with 'hf auth login' or set HF_TOKEN)\n")
    hub.repo(NAME).granted.add("bob")
    assert envhub_cli("pull", NAME, "--registry", url).code == 0


@pytest.mark.parametrize(("registry_url", "message"), [
    ("hf://acme", "unsupported hf:// registry URL 'hf://acme'"),
    ("hf://?endpoint=ftp://x", "hf:// registry URL 'hf://?endpoint=ftp://x': endpoint 'ftp://x' is not an http(s) URL"),
], ids=["path", "endpoint-scheme"])
def test_bad_hf_url(envhub_cli, registry_url: str, message: str) -> None:
    result = envhub_cli("search", "--registry", registry_url)
    assert (result.code, result.err.splitlines()[0]) == (2, f"envhub: error: {message}")


# --- opt-in: the real Hub ---------------------------------------------------------------------------

def _real_hub_reachable() -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
        return True
    except OSError:
        return False


@pytest.mark.slow
def test_real_hub_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opt-in: the real Hub, with ENVHUB_TEST_REAL_HUB=1, HF_TOKEN and a network. Pushes to
    the token's own namespace and deletes the repos it made."""
    token = os.environ.get("HF_TOKEN")
    if not (os.environ.get("ENVHUB_TEST_REAL_HUB") == "1" and token and _real_hub_reachable()):
        pytest.skip("needs ENVHUB_TEST_REAL_HUB=1, HF_TOKEN and a network")
    from huggingface_hub import HfApi

    api = HfApi(endpoint="https://huggingface.co", token=token)
    name = f"{api.whoami()['name']}/envhub-test-{uuid.uuid4().hex[:8]}".lower()
    try:
        pushed = _push("hf://", write_env(tmp_path / "b", name=name)).publish.entry
        pulled = _pull("hf://", f"{name}@1.0.0", with_heldout=True)
        assert (pulled.entry.digest, pulled.entry.locator) == (pushed.digest, pushed.locator)
        assert api.repo_info(f"{name}-heldout", repo_type="dataset").private is True
    finally:
        for repo in (name, f"{name}-heldout"):
            api.delete_repo(repo, repo_type="dataset", missing_ok=True)


def test_a_project_locks_the_commit_and_loads_by_it(url: str, hub: HubServer, tmp_path: Path, envhub_cli,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    import envhub

    entry = _push(url, write_env(tmp_path / "a")).publish.entry
    project = tmp_path / "trainer"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        f'[tool.envhub]\nenvironments = ["{NAME}"]\ndefault-registry = "hub"\n\n'
        f'[tool.envhub.registries]\nhub = "{url}"\n')
    monkeypatch.chdir(project)
    assert envhub_cli("lock").code == 0
    locked = tomllib.loads((project / "envhub.lock").read_text())["environment"][0]
    assert locked["source"] == url and locked["locator"] == entry.locator and len(entry.locator) == 40
    # The tag is moved to other files: the lock still gets the locked commit's bytes.
    repo = hub.repo(NAME)
    head = repo.commits[repo.branches["main"]]
    repo.tags["v1.0.0"] = hub.commit(repo, {**head.tree, "tasks/train.jsonl": b'{"id": "evil"}\n'}, "rewrite").oid
    for cache in ("cache-1", "cache-2"):  # fetched from the Hub, by commit, each time
        monkeypatch.setenv("ENVHUB_CACHE", str(tmp_path / cache))
        env = envhub.load(NAME)
        assert env.digest == locked["digest"] and env.tasks("train")[0].id == "train-0"
    # (A pull by the moved tag is refused: test_moved_tag_is_refused_and_a_locked_pull_fetches_by_commit.)
