"""The ``envhub-validate`` pre-commit hook (.pre-commit-hooks.yaml) and ``envhub validate
--files``, which it runs on the files pre-commit passes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.runtime_fixtures import scaffold

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_the_hook_runs_validate_on_the_files_of_bundles() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["envhub-validate", "envhub-score-version"]
    hook = hooks[0]
    assert hook["entry"] == "envhub validate --files"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is True and hook["require_serial"] is True
    assert hook["types"] == ["file"] and "files" not in hook  # any file may be a bundle's


def bundles(tmp_path: Path) -> Path:
    """envs/a (valid), envs/b (a malformed task file), and notes/ outside every bundle."""
    scaffold(tmp_path / "envs", "acme/a", directory="a")
    broken = scaffold(tmp_path / "envs", "acme/b", directory="b")
    with (broken / "tasks" / "dev.jsonl").open("a") as f:
        f.write("not json\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("nothing\n")
    return tmp_path


@pytest.fixture
def in_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(bundles(tmp_path))
    return tmp_path


def test_files_validates_each_bundle_holding_one_once(in_dir: Path, envhub_cli) -> None:  # type: ignore[no-untyped-def]
    result = envhub_cli("validate", "--files", "envs/a/tasks/train.jsonl", "envs/a/envhub.toml",
                        "envs/a/prompts/system.md", "notes/todo.txt")
    assert result.code == 0, result.out
    assert result.out == "valid: acme/a 0.1.0 (envs/a): 3 split(s), 10 task(s)\n"


def test_files_reports_the_problems_of_a_broken_bundle(in_dir: Path, envhub_cli) -> None:  # type: ignore[no-untyped-def]
    result = envhub_cli("validate", "--files", "envs/b/README.md", "envs/a/tasks/dev.jsonl")
    assert result.code == 2
    assert result.out == (
        "envs/b/tasks/dev.jsonl:3: error: not valid JSON: invalid literal, expected 'null'\n"
        "  hint: each line must be one complete JSON object\n"
        "invalid: acme/b 0.1.0 (envs/b): 1 error(s), 0 warning(s)\n"
        "valid: acme/a 0.1.0 (envs/a): 3 split(s), 10 task(s)\n")


def test_files_outside_every_bundle_validate_nothing(in_dir: Path, envhub_cli) -> None:  # type: ignore[no-untyped-def]
    for args in (("notes/todo.txt",), ()):
        result = envhub_cli("validate", "--files", *args)
        assert (result.code, result.out) == (0, "")
    # Without --files, the same path is a bundle directory that is not one.
    assert envhub_cli("validate", "notes").code == 2


def test_files_in_a_bundle_at_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, envhub_cli) -> None:  # type: ignore[no-untyped-def]
    root = scaffold(tmp_path, "acme/root")
    monkeypatch.chdir(root)
    result = envhub_cli("validate", "--files", "--format", "github", "tasks/train.jsonl", "envhub.toml")
    assert (result.code, result.out) == (0, "")
    (root / "tasks" / "train.jsonl").write_text("{}\n")
    result = envhub_cli("validate", "--files", "--format", "github", "tasks/train.jsonl")
    assert result.code == 2
    assert result.out.startswith("::error file=tasks/train.jsonl,line=1,")


# -- pre-commit itself ------------------------------------------------------------------------


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=envhub tests", "-c", "user.email=tests@envhub.invalid",
                    "-c", "commit.gpgsign=false", *args], cwd=cwd, check=True, capture_output=True)


def hook_repository(dest: Path) -> Path:
    """This repository's working tree as a hook repository: what pre-commit installs from
    (the distribution's files and .pre-commit-hooks.yaml), committed."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "envhub", dest / "envhub", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git(dest, "init", "-q", ".")
    git(dest, "add", ".")
    git(dest, "commit", "-q", "-m", "hook repository")
    return dest


@pytest.mark.slow
def test_pre_commit_try_repo_installs_the_hook_and_gates_bundles(tmp_path: Path) -> None:
    """``pre-commit try-repo`` installs this repository with ``language: python`` (pip, from
    PyPI for the dependencies: about 15 s here) and runs the hook on a repository with a
    valid and a broken bundle."""
    pre_commit = BIN / "pre-commit"
    if not pre_commit.exists():
        pytest.skip("pre-commit is not installed (it is in the dev extra: python3 dev.py setup)")
    hooks = hook_repository(tmp_path / "hooks")
    work = bundles(tmp_path / "work")
    git(work, "init", "-q", ".")
    git(work, "add", ".")
    # Not the test's virtual environment: the hook's own, which pre-commit makes.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), NO_COLOR="1",
               PATH=os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != BIN))

    def try_repo(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(pre_commit), "try-repo", str(hooks), "envhub-validate", "--color", "never", *args],
                              cwd=work, capture_output=True, text=True, env=env, timeout=600)

    result = try_repo("--all-files")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "envhub validate" in out and "Failed" in out
    assert "- exit code: 2" in out
    assert ("envs/b/tasks/dev.jsonl:3: error: not valid JSON: invalid literal, expected 'null'\n"
            "  hint: each line must be one complete JSON object\n"
            "invalid: acme/b 0.1.0 (envs/b): 1 error(s), 0 warning(s)\n") in out
    assert "valid: acme/a 0.1.0 (envs/a): 3 split(s), 10 task(s)" in out
