"""Path dependencies: a composite reads its children from directories beside it while it is
developed (validate --check, eval DIR, envhub.load(DIR), info DIR) with no registry, and
envhub build / push publish it with each child pinned to the version it was checked with,
refusing a push whose children are not published (or differ from what is)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

import envhub
from envhub.bundle import build_bundle
from envhub.errors import BundleError
from envhub.manifest import parse_manifest
from tests.conftest import run_envhub
from tests.registry_fixtures import PLUGINS, write_env

ARITH, ALGEBRA = "acme/arith", "acme/algebra"

COMPOSITE = """\
[environment]
name = "acme/mix"
version = "1.0.0"
description = "Arithmetic and algebra, two to one."
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[dependencies]
"acme/arith" = {arith}
"acme/algebra" = {algebra}

[tasks]
format = "mixture"

[tasks.splits.train]
mixture = [
  {{ env = "acme/arith", split = "train", weight = 2 }},
  {{ env = "acme/algebra", split = "train", weight = 1 }},
]

[tasks.splits.test]
held-out = true
mixture = [
  {{ env = "acme/arith", split = "test", weight = 1 }},
  {{ env = "acme/algebra", split = "test", weight = 1 }},
]
"""
BY_PATH = {"arith": '{ version = ">=1.0,<2", path = "../arith" }', "algebra": '{ path = "../algebra" }'}


def _workspace(tmp: Path, *, arith: str = BY_PATH["arith"], algebra: str = BY_PATH["algebra"],
               arith_version: str = "1.2.0") -> Path:
    """A folder of environments: arith and algebra, and mix depending on them; returns mix."""
    write_env(tmp / "envs" / "arith", ARITH, arith_version, salt="arith")
    write_env(tmp / "envs" / "algebra", ALGEBRA, "1.0.0", salt="algebra")
    mix = tmp / "envs" / "mix"
    mix.mkdir(parents=True)
    (mix / "envhub.toml").write_text(COMPOSITE.format(arith=arith, algebra=algebra))
    return mix


def _published_manifest(archive: Path) -> str:
    with tarfile.open(archive) as tar:
        member = tar.extractfile("envhub.toml")
        assert member is not None
        return member.read().decode()


def test_the_manifest_reads_a_path_dependency_and_old_specifiers_alike() -> None:
    manifest, problems = parse_manifest(COMPOSITE.format(arith='">=1.0"', algebra=BY_PATH["algebra"]))
    assert manifest is not None and problems == []
    assert manifest.dependency_specifiers() == {ARITH: ">=1.0", ALGEBRA: "*"}
    assert manifest.dependency_paths() == {ALGEBRA: "../algebra"}


@pytest.mark.parametrize(("value", "expected"), [
    ("3", 'envhub.toml:9:1: error: dependencies."acme/algebra": expected a string, got integer 3'),
    ('{ version = ">=1" }', 'envhub.toml:9:1: error: dependencies."acme/algebra".path: missing required key '
                            "'path'"),
    ('{ path = "" }', 'envhub.toml:9:20: error: dependencies."acme/algebra".path: must not be empty'),
    ('{ path = "../algebra", version = "one" }',
     "envhub.toml:9:41: error: dependencies.\"acme/algebra\".version: invalid version specifier 'one': "
     "expected PEP 440 clauses such as '>=1.2,<2' or '==1.4.*'"),
    ('{ path = "../algebra", branch = "main" }',
     "envhub.toml:9:41: error: dependencies.\"acme/algebra\".branch: unknown key 'branch'"),
], ids=["number", "table-without-path", "empty-path", "bad-specifier", "unknown-key"])
def test_a_malformed_dependency_is_refused_at_its_field(tmp_path: Path, value: str, expected: str) -> None:
    mix = _workspace(tmp_path, algebra=value)
    result = run_envhub("validate", ".", cwd=mix)
    assert result.code == 2
    assert expected in result.out.splitlines()


def test_a_composite_is_checked_evaluated_and_loaded_from_its_childrens_directories(tmp_path: Path) -> None:
    mix = _workspace(tmp_path)
    # Nothing is published: the registry is empty.
    result = run_envhub("validate", "--strict", "--check", str(mix))
    assert result.code == 0, result.out + result.err

    with envhub.load(mix) as env:
        tasks = env.tasks("train")
        # 3 + 3 tasks at weights 2:1: 4 fit without repeating one, 3 of arith.
        assert [t.id for t in tasks] == [f"{ARITH}:train:train-0", f"{ARITH}:train:train-1", f"{ALGEBRA}:train:train-0",
                                         f"{ARITH}:train:train-2"]
        child = env.children[ARITH]
        arith = (tmp_path / "envs" / "arith").resolve()
        assert (child.version, child.root, child.source) == ("1.2.0", arith, f"{ARITH} 1.2.0 at {arith}")
        assert env.score(tasks[2], "1").reward == 1.0 and env.score(tasks[2], "2").reward == 0.0
        built = build_bundle(tmp_path / "envs" / "algebra", tmp_path / "dist", plugins=PLUGINS)
        assert env.task_provenance(tasks[2])["digest"] == built.public.digest

    out = tmp_path / "runs.jsonl"
    result = run_envhub("eval", str(mix), "--split", "train", "--policy", "reference", "-o", str(out), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["mean_reward"] == 1.0
    assert [json.loads(line)["child"]["version"] for line in out.read_text().splitlines()] == [
        "1.2.0", "1.2.0", "1.0.0", "1.2.0"]

    info = run_envhub("info", str(mix), "--json")
    assert info.code == 0, info.err
    assert json.loads(info.out)["dependencies"] == {ARITH: {"path": "../arith", "version": ">=1.0,<2"},
                                                    ALGEBRA: {"path": "../algebra", "version": "*"}}
    text = run_envhub("info", str(mix))
    assert "  depends on: acme/arith>=1.0,<2 (path ../arith), acme/algebra* (path ../algebra)" in text.out


@pytest.mark.parametrize(("arith", "arith_version", "expected"), [
    ('{ path = "../nowhere" }', "1.2.0",
     ["envhub.toml: error: dependencies.\"acme/arith\".path: path '../nowhere': no such directory",
      "  hint: point path at acme/arith's bundle directory, relative to ."]),
    ('{ path = "../algebra" }', "1.2.0",
     ["envhub.toml: error: dependencies.\"acme/arith\".path: path '../algebra' holds acme/algebra, not acme/arith",
      "  hint: point path at acme/arith's bundle directory, or name the dependency \"acme/algebra\""]),
    ('{ version = ">=2", path = "../arith" }', "1.2.0",
     ["envhub.toml: error: dependencies.\"acme/arith\".version: path '../arith' holds acme/arith 1.2.0, which is "
      "not >=2",
      "  hint: widen the version specifier, or change the version in ../arith/envhub.toml"]),
    ('{ version = ">=1.0", path = "../arith" }', "1.3.0.dev1", []),  # a child under development
], ids=["missing-directory", "another-environment", "version-outside-specifier", "pre-release-accepted"])
def test_validate_checks_each_path_dependency(tmp_path: Path, arith: str, arith_version: str,
                                              expected: list[str]) -> None:
    mix = _workspace(tmp_path, arith=arith, arith_version=arith_version)
    result = run_envhub("validate", ".", cwd=mix)
    assert result.code == (2 if expected else 0), result.out + result.err
    lines = result.out.splitlines()
    for line in expected:
        assert line in lines
    if expected:  # and loading says the same, without a traceback
        loaded = run_envhub("eval", ".", "--split", "train", "--policy", "reference", "-o", "x.jsonl", cwd=mix)
        assert loaded.code == 2 and "Traceback" not in loaded.err
        assert f"{mix.resolve()}/{expected[0]}" in loaded.err.splitlines()


def test_an_invalid_childs_manifest_is_reported_with_its_own_problems(tmp_path: Path) -> None:
    mix = _workspace(tmp_path)
    (tmp_path / "envs" / "algebra" / "envhub.toml").write_text('[environment]\nname = "acme/algebra"\n')
    result = run_envhub("validate", ".", cwd=mix)
    assert result.code == 2
    lines = result.out.splitlines()
    assert "../algebra/envhub.toml:1:2: error: environment.version: missing required key 'version'" in lines
    assert ("envhub.toml: error: dependencies.\"acme/algebra\".path: path '../algebra': its envhub.toml is invalid"
            in lines)


def test_a_path_dependency_cycle_is_refused(tmp_path: Path) -> None:
    mix = _workspace(tmp_path)
    # algebra becomes a composite that mixes acme/mix back, by path.
    (tmp_path / "envs" / "algebra" / "envhub.toml").write_text(
        '[environment]\nname = "acme/algebra"\nversion = "1.0.0"\n\n[dependencies]\n'
        '"acme/mix" = { path = "../mix" }\n\n[tasks]\nformat = "mixture"\n\n[tasks.splits.train]\n'
        'mixture = [{ env = "acme/mix", split = "train", weight = 1 }]\n\n[tasks.splits.test]\nheld-out = true\n'
        'mixture = [{ env = "acme/mix", split = "test", weight = 1 }]\n')
    with pytest.raises(BundleError) as caught:
        envhub.load(mix)
    root = mix.resolve()
    assert caught.value.message == (f"acme/algebra: path dependency cycle: {root} -> "
                                    f"{(tmp_path / 'envs' / 'algebra').resolve()} -> {root}")


def test_build_pins_each_path_dependency_to_its_version_and_drops_the_path(tmp_path: Path) -> None:
    mix = _workspace(tmp_path)
    built = build_bundle(mix, tmp_path / "dist", plugins=PLUGINS)
    assert built.manifest.dependencies == {ARITH: "==1.2.0", ALGEBRA: "==1.0.0"}
    published = _published_manifest(built.public.path)
    assert '"acme/arith" = "==1.2.0"' in published and "path" not in published
    assert sorted(built.path_dependencies) == [ALGEBRA, ARITH]

    # A manifest without paths is published byte for byte as before.
    plain = _workspace(tmp_path / "plain", arith='">=1.0"', algebra='"*"')
    built_plain = build_bundle(plain, tmp_path / "dist-plain", plugins=PLUGINS)
    assert built_plain.manifest.dependencies == {ARITH: ">=1.0", ALGEBRA: "*"}


def test_push_refuses_until_the_children_are_published_with_the_same_content(tmp_path: Path) -> None:
    mix = _workspace(tmp_path)
    arith, algebra = tmp_path / "envs" / "arith", tmp_path / "envs" / "algebra"
    result = run_envhub("push", str(mix))
    assert result.code == 2
    assert result.err.splitlines()[-2:] == [
        f"envhub: error: acme/mix 1.0.0 depends on acme/algebra==1.0.0 (path '../algebra'), which is not in "
        f"{_registry_url()}",
        f"  hint: push it to this registry first: envhub push {algebra.resolve()}"]
    for child in (arith, algebra):
        assert run_envhub("push", str(child)).code == 0

    # The child changed since it was pushed, under the same version: refused.
    (arith / "tasks" / "train.jsonl").write_text((arith / "tasks" / "train.jsonl").read_text().replace("1+1", "1+2"))
    changed = run_envhub("push", str(mix))
    assert changed.code == 2
    assert changed.err.splitlines()[-2:] == [
        f"envhub: error: acme/mix 1.0.0 was checked with acme/arith 1.2.0 from {arith.resolve()}, whose content "
        f"differs from acme/arith 1.2.0 in {_registry_url()}",
        f"  hint: bump the version in {arith.resolve() / 'envhub.toml'} and push it, or restore the content "
        "published under that version"]
    write_env(arith, ARITH, "1.2.0", salt="arith")  # restored
    result = run_envhub("push", str(mix), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["dependencies"] == {ARITH: "==1.2.0", ALGEBRA: "==1.0.0"}


def test_the_published_composite_loads_its_pinned_children_and_a_project_lock_records_no_path(tmp_path: Path) -> None:
    mix = _workspace(tmp_path)
    for child in ("arith", "algebra"):
        assert run_envhub("push", str(tmp_path / "envs" / child)).code == 0
    assert run_envhub("push", str(mix)).code == 0
    # A newer arith 1.3.0 is published: the composite still gets the 1.2.0 it was checked with.
    write_env(tmp_path / "newer", ARITH, "1.3.0", salt="newer")
    assert run_envhub("push", str(tmp_path / "newer")).code == 0
    with envhub.load("acme/mix") as env:
        assert env.children[ARITH].version == "1.2.0"
        assert env.children[ARITH].source.startswith("acme/arith@1.2.0 from ")

    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "trainer"\nversion = "0.1.0"\n')
    result = run_envhub("add", "acme/mix", cwd=project)
    assert result.code == 0, result.err
    lock = (project / "envhub.lock").read_text()
    assert 'dependencies = [\n    "acme/algebra==1.0.0",\n    "acme/arith==1.2.0",\n]' in lock
    assert "path" not in lock and "../" not in lock


def _registry_url() -> str:
    import os

    return (Path(os.environ["ENVHUB_HOME"]) / "registry").as_uri()
