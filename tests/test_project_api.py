"""envhub.project as a library: tree, outdated, add/remove, lock and sync called directly,
with the settings and plugins of a :class:`~envhub.context.Context` passed in; and the CLI
printing what those functions return. Real directories and a real registry (the embedded
one, in the test's ENVHUB_HOME)."""

from __future__ import annotations

import doctest
import json
import sys
from pathlib import Path

import pytest

import envhub.project
from envhub.context import Context
from envhub.errors import RegistryError, UsageError
from envhub.project import (
    LockedEnv,
    LockError,
    Lockfile,
    OutdatedEntry,
    Project,
    ResolutionError,
    TreeNode,
    add_environment,
    find_project,
    lock_project,
    outdated,
    read_project_lock,
    remove_environment,
    sync_project,
    tree,
    write_lock,
)
from tests.test_project import project as write_project
from tests.test_project import publish, run_in_process

DIGEST = "sha256:" + "0" * 64


@pytest.fixture
def ctx() -> Context:
    return Context.create(autoload=False)


def make_project(tmp: Path, environments: list[str]) -> Project:
    found = find_project(write_project(tmp, environments))
    assert found is not None
    return found


def locked(name: str, version: str, *dependencies: str) -> LockedEnv:
    return LockedEnv(name, version, DIGEST, 1, "default", None, dependencies=tuple(sorted(dependencies)))


def lock_of(requires: list[str], *envs: LockedEnv) -> Lockfile:
    return Lockfile(sorted(requires), {e.name: e for e in envs})


# --- the public surface ---------------------------------------------------------------------


def test_every_exported_name_resolves_and_is_documented() -> None:
    assert envhub.project.__all__ == sorted(envhub.project._WHERE)  # the written-out list matches the table
    for name in envhub.project.__all__:
        value = getattr(envhub.project, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), f"envhub.project.{name} has no docstring"
        if isinstance(value, type):
            for attribute, member in vars(value).items():
                if not attribute.startswith("_") and callable(member):
                    assert (member.__doc__ or "").strip(), f"envhub.project.{name}.{attribute} has no docstring"
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        envhub.project.nope  # noqa: B018


def test_doctests_of_the_lockfile_module() -> None:
    import envhub.project._lockfile

    result = doctest.testmod(envhub.project._lockfile)
    assert result.attempted > 0 and result.failed == 0


# --- Lockfile.locked_for: the lock already read -----------------------------------------------


@pytest.mark.parametrize("ref, expected", [
    ("acme/a", "acme/a@1.2.0"),
    ("acme/a>=1,<2", "acme/a@1.2.0"),
    ("acme/a@1.2.0", "acme/a@1.2.0"),
    ("acme/b", None),
], ids=["bare", "fits", "exact", "not-locked"])
def test_locked_for_answers_from_a_lock_in_hand(ref: str, expected: str | None) -> None:
    env = lock_of(["acme/a"], locked("acme/a", "1.2.0")).locked_for(ref, path="/p/envhub.lock")
    assert (env.ref if env else None) == expected


def test_locked_for_refuses_another_version_naming_the_lock() -> None:
    lock = lock_of(["acme/a"], locked("acme/a", "1.2.0"))
    with pytest.raises(LockError) as e:
        lock.locked_for("acme/a>=2", path="/p/envhub.lock")
    assert e.value.message == "acme/a>=2 asks for another version than /p/envhub.lock locks (acme/a@1.2.0)"
    assert e.value.hint == "ask for acme/a to use the locked version, or change pyproject.toml and run 'envhub lock'"


def test_the_old_locked_for_reads_the_project_around_cwd(tmp_path: Path) -> None:
    project = make_project(tmp_path, ["acme/a"])
    assert envhub.project.locked_for("acme/a", project.root) is None  # no lock yet
    write_lock(project.lock_path, lock_of(["acme/a"], locked("acme/a", "1.2.0")))
    found = envhub.project.locked_for("acme/a", project.root / "sub")
    assert found is not None and found[0].ref == "acme/a@1.2.0" and found[1] == project.lock_path
    assert envhub.project.locked_for("acme/a", tmp_path) is None  # outside the project


# --- tree -----------------------------------------------------------------------------------------


def shop_lock() -> Lockfile:
    return lock_of(["acme/other", "acme/shop>=1"],
                   locked("acme/shop", "1.2.0", "acme/basics>=1,<2"),
                   locked("acme/other", "2.0.0", "acme/basics>=1"),
                   locked("acme/basics", "1.0.0", "acme/util"),
                   locked("acme/util", "1.0.0"))


def test_tree_is_the_lock_seen_from_the_project(tmp_path: Path) -> None:
    project = make_project(tmp_path, ["acme/shop>=1", "acme/other"])
    shown = tree(project, shop_lock())
    util = TreeNode("acme/util", "", "1.0.0", ())
    assert shown.environments == (
        TreeNode("acme/shop", ">=1", "1.2.0", (TreeNode("acme/basics", ">=1,<2", "1.0.0", (util,)),)),
        TreeNode("acme/other", "", "2.0.0", (TreeNode("acme/basics", ">=1", "1.0.0", (util,)),)),
    )
    assert shown.stale is None and shown.title == "trainer (pyproject.toml)"
    assert shown.to_json()["environments"][1] == {
        "name": "acme/other", "requirement": "", "version": "2.0.0", "dependencies": [
            {"name": "acme/basics", "requirement": ">=1", "version": "1.0.0", "dependencies": [
                {"name": "acme/util", "requirement": "", "version": "1.0.0", "dependencies": []}]}]}


def test_tree_cli_prints_the_function_and_marks_repeats(tmp_path: Path) -> None:
    project = make_project(tmp_path, ["acme/shop>=1", "acme/other"])
    write_lock(project.lock_path, shop_lock())
    result = run_in_process("tree", cwd=project.root)
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "trainer (pyproject.toml)",
        "├── acme/shop 1.2.0  (>=1)",
        "│   └── acme/basics 1.0.0  (>=1,<2)",
        "│       └── acme/util 1.0.0",
        "└── acme/other 2.0.0",
        "    └── acme/basics 1.0.0  (>=1) (*)",
    ]
    as_json = run_in_process("tree", "--json", cwd=project.root)
    assert json.loads(as_json.out) == tree(project, read_project_lock(project)).to_json()


def test_tree_stops_at_a_cycle_and_shows_what_is_not_locked(tmp_path: Path) -> None:
    project = make_project(tmp_path, ["acme/a", "acme/new"])
    lock = lock_of(["acme/a"], locked("acme/a", "1.0.0", "acme/b"), locked("acme/b", "1.0.0", "acme/a"))
    shown = tree(project, lock)
    assert shown.environments == (
        TreeNode("acme/a", "", "1.0.0", (TreeNode("acme/b", "", "1.0.0", (TreeNode("acme/a", "", "1.0.0", None),)),)),
        TreeNode("acme/new", "", None, None),
    )
    assert shown.stale == "pyproject.toml changed since the lock was made (added acme/new)"
    write_lock(project.lock_path, lock)
    result = run_in_process("tree", cwd=project.root)
    assert result.code == 0
    assert result.out.splitlines()[1:] == ["├── acme/a 1.0.0", "│   └── acme/b 1.0.0", "│       └── acme/a 1.0.0 (*)",
                                           "└── acme/new (not locked)"]
    assert result.err == (f"envhub: warning: {project.lock_path} is out of date (pyproject.toml changed since the "
                          "lock was made (added acme/new)); run 'envhub lock'\n")


# --- outdated, add, remove, lock and sync, against a real registry ------------------------------


def test_outdated_lists_newer_compatible_and_latest(tmp_path: Path, ctx: Context) -> None:
    publish(tmp_path, "acme/basics", "1.0.0")
    publish(tmp_path, "acme/shop", "1.0.0", deps={"acme/basics": ">=1,<2"})
    project = make_project(tmp_path, ["acme/shop>=1"])
    lock = lock_project(project, ctx.settings, plugins=ctx.plugins).lock
    assert outdated(project, lock, ctx.settings, plugins=ctx.plugins) == []
    assert run_in_process("outdated", cwd=project.root).err == "All 2 locked environments are up to date\n"

    publish(tmp_path, "acme/basics", "1.1.0")
    publish(tmp_path, "acme/basics", "2.0.0")
    publish(tmp_path, "acme/basics", "2.1.0rc1")  # a pre-release: not for a lock without prereleases
    publish(tmp_path, "acme/shop", "1.1.0", deps={"acme/basics": ">=1,<2"})
    entries = outdated(project, lock, ctx.settings, plugins=ctx.plugins)
    assert entries == [OutdatedEntry("acme/basics", "1.0.0", "1.1.0", "2.0.0", "default"),
                       OutdatedEntry("acme/shop", "1.0.0", "1.1.0", "1.1.0", "default")]

    printed = run_in_process("outdated", cwd=project.root)
    assert printed.out.splitlines() == ["environment  locked      compatible  latest",
                                        "acme/basics  1.0.0       1.1.0       2.0.0",
                                        "acme/shop    1.0.0       1.1.0       1.1.0"]
    as_json = run_in_process("outdated", "--json", cwd=project.root)
    assert json.loads(as_json.out) == [e.to_json() for e in entries]


def test_add_and_remove_write_only_what_resolves(tmp_path: Path, ctx: Context) -> None:
    publish(tmp_path, "acme/a", "1.0.0")
    project = make_project(tmp_path, [])
    added = add_environment(project, "acme/a", ctx.settings, plugins=ctx.plugins)
    assert added.entry == "acme/a>=1.0.0" and added.environments == ["acme/a>=1.0.0"]
    assert added.locked.changes() == [("acme/a", None, "1.0.0")] and added.locked.written
    assert '"acme/a>=1.0.0"' in project.pyproject.read_text()
    assert read_project_lock(project).requires == ["acme/a>=1.0.0"]
    assert added.project == find_project(project.root) and project.environments == []  # the old one: unchanged
    project = added.project
    assert not lock_project(project, ctx.settings, plugins=ctx.plugins).written  # the edit left nothing to relock

    before = project.pyproject.read_bytes(), project.lock_path.read_bytes()
    with pytest.raises(ResolutionError, match="acme/nope is not in the embedded registry"):
        add_environment(project, "acme/nope", ctx.settings, plugins=ctx.plugins)
    assert (project.pyproject.read_bytes(), project.lock_path.read_bytes()) == before

    with pytest.raises(UsageError, match=r"acme/b is not in \[tool.envhub\] environments of .* \(listed: acme/a\)"):
        remove_environment(project, "acme/b", ctx.settings, plugins=ctx.plugins)
    removed = remove_environment(project, "acme/a", ctx.settings, plugins=ctx.plugins)
    assert removed.entry == "acme/a" and removed.environments == [] and removed.project.environments == []
    assert removed.locked.changes() == [("acme/a", "1.0.0", None)] and read_project_lock(project).environments == {}


class _Shelf:
    """A plugin serving ``shelf://`` from a directory registry."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    from envhub.hookspecs import hookimpl

    @hookimpl
    def envhub_registry_backends(self):  # type: ignore[no-untyped-def]
        from envhub.hookspecs import RegistryBackend
        from envhub.registry import FsspecRegistry

        return [RegistryBackend("shelf", lambda url, settings: FsspecRegistry(str(self.directory)))]


def test_registries_are_opened_with_the_plugins_passed_in(tmp_path: Path, ctx: Context) -> None:
    shelf = tmp_path / "shelf"
    publish(tmp_path, "acme/only-here", "1.0.0", registry=str(shelf))
    project = make_project(tmp_path, ["acme/only-here"])
    with open(project.pyproject, "a") as f:
        f.write('\n[tool.envhub.registries]\nteam = "shelf://team"\n')
    project = find_project(project.root)
    assert project is not None
    with pytest.raises(RegistryError, match="shelf"):  # these plugins know no shelf://
        lock_project(project, ctx.settings, plugins=ctx.plugins)

    ctx.plugins.register(_Shelf(shelf), name="shelf")
    result = lock_project(project, ctx.settings, plugins=ctx.plugins)
    assert result.lock.environments["acme/only-here"].version == "1.0.0"
    synced = sync_project(project, ctx.settings, plugins=ctx.plugins)
    assert [e.ref for e in synced.fetched] == ["acme/only-here@1.0.0"], synced
    assert sync_project(project, ctx.settings, plugins=ctx.plugins, offline=True).fetched == []


def test_install_command_prefers_the_uv_beside_the_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A venv set up by dev.py has uv and no pip: installs go through its uv, even when the
    venv's bin directory is not on PATH; without one, pip of the interpreter."""
    from envhub.project import install_command

    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert install_command(["acme-tools==1.0"]) == [str(python), "-m", "pip", "install", "acme-tools==1.0"]
    uv = bin_dir / "uv"
    uv.write_text("#!/bin/sh\n")
    uv.chmod(0o755)
    assert install_command(["acme-tools==1.0"]) == [str(uv), "pip", "install", "--python", str(python),
                                                    "acme-tools==1.0"]
