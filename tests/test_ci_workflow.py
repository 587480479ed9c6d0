"""The GitHub Actions workflow for environment authors (docs/examples/github-workflow.yml):
its ``run:`` steps, run as GitHub runs them (bash -eo pipefail) with the installed ``envhub``
and ``pytest``, in repositories of good and broken bundles."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.runtime_fixtures import scaffold, set_table, write_rows

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "examples" / "github-workflow.yml"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def steps(workflow: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (job,) = workflow["jobs"].values()
    return {s["id"]: s for s in job["steps"] if "id" in s}


def test_the_workflow_runs_on_pushes_and_pull_requests(workflow: dict[str, Any]) -> None:
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"push", "pull_request"}
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["defaults"]["run"]["shell"] == "bash"
    (job,) = workflow["jobs"].values()
    uses = [s["uses"].split("@")[0] for s in job["steps"] if "uses" in s]
    assert uses == ["actions/checkout", "actions/setup-python"]
    assert list(steps(workflow)) == ["install", "validate", "conformance", "score-version"]


def test_it_installs_envhub_rl_and_pytest(workflow: dict[str, Any]) -> None:
    from packaging.requirements import Requirement

    command = shlex.split(steps(workflow)["install"]["run"])
    assert command[:4] == ["python", "-m", "pip", "install"]
    envhub, pytest_ = (Requirement(r) for r in command[4:])
    # Never the unrelated "envhub" on PyPI; from the repository until envhub-rl is on an index.
    assert (envhub.name, envhub.url) == ("envhub-rl", "git+https://github.com/envhub/envhub@main")
    assert str(pytest_) == "pytest>=8"


def test_it_validates_strictly_with_annotations_then_runs_pytest(workflow: dict[str, Any]) -> None:
    s = steps(workflow)
    assert "envhub validate --strict --format github" in s["validate"]["run"]
    assert s["conformance"]["run"].startswith("pytest --envhub-trust")


def run_step(workflow: dict[str, Any], step: str, repo: Path, home: Path,
             variables: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """One ``run:`` step as a GitHub runner runs it with ``shell: bash``, with the job's
    environment, the step's (``${{ vars.NAME }}`` read from ``variables``), and this
    checkout's envhub and pytest first on PATH."""
    (job,) = workflow["jobs"].values()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(job.get("env", {}))
    for key, value in steps(workflow)[step].get("env", {}).items():
        expression = re.fullmatch(r"\$\{\{ vars\.(\w+) \}\}", value)
        env[key] = (variables or {}).get(expression.group(1), "") if expression else value
    env.update(CI="true", GITHUB_ACTIONS="true", ENVHUB_HOME=str(home / "home"), ENVHUB_CACHE=str(home / "cache"),
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", COLUMNS="200")
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", steps(workflow)[step]["run"]],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=300)


def checkout(repo: Path) -> Path:
    """``repo`` as actions/checkout leaves it: a git repository with the files tracked."""
    subprocess.run(["git", "init", "-q", "."], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    return repo


def test_a_repository_of_good_bundles_passes(workflow: dict[str, Any], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    scaffold(repo / "envs", "acme/arith", directory="arith")
    scaffold(repo / "envs", "acme/shop", protocol="tool-use", state="sqlite", directory="shop")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_mine.py").write_text("def test_mine():\n    pass\n")
    checkout(repo)
    validate = run_step(workflow, "validate", repo, tmp_path)
    assert (validate.returncode, validate.stdout) == (0, ""), validate.stderr
    conformance = run_step(workflow, "conformance", repo, tmp_path)
    assert conformance.returncode == 0, conformance.stdout
    for name, directory in (("acme/arith", "arith"), ("acme/shop", "shop")):
        assert f"envs/{directory}/envhub.toml::{name}::reference-scores-1 PASSED" in conformance.stdout
    assert "envs/shop/envhub.toml::acme/shop::resets-isolate PASSED" in conformance.stdout
    assert "tests/test_mine.py::test_mine PASSED" in conformance.stdout


def test_a_malformed_task_file_fails_validation_with_an_annotation(workflow: dict[str, Any], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    bundle = scaffold(repo, "acme/arith", directory=".")
    with (bundle / "tasks" / "dev.jsonl").open("a") as f:
        f.write("not json\n")
    validate = run_step(workflow, "validate", checkout(repo), tmp_path)
    assert validate.returncode == 2
    assert validate.stdout == ("::error file=tasks/dev.jsonl,line=3,title=envhub invalid-json::not valid JSON: invalid "
                               "literal, expected 'null'%0Ahint: each line must be one complete JSON object\n")


def test_a_verifier_that_rewards_nothing_fails_the_conformance_step(workflow: dict[str, Any], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    bundle = scaffold(repo, "acme/arith", directory="arith")
    shutil.copy(ROOT / "tests" / "data" / "pytest_plugin" / "rewards_all.py", bundle / "checks.py")
    set_table(bundle, "verifier", 'kind = "python"\nentry-point = "checks:check"')
    write_rows(bundle, "train", [{"id": "t1", "prompt": "Say 1.", "answer": "1"}])
    checkout(repo)
    assert run_step(workflow, "validate", repo, tmp_path).returncode == 0  # statically valid
    conformance = run_step(workflow, "conformance", repo, tmp_path)
    assert conformance.returncode == 1
    assert "arith/envhub.toml::acme/arith::noop-scores-below-1 FAILED" in conformance.stdout
    assert ("arith/envhub.toml: error: verifier: train/t1: an empty answer scores 1\n"
            "  hint: the verifier rewards doing nothing: check its field and normalisation") in conformance.stdout


def test_a_verifier_changed_without_a_score_version_bump_fails_the_score_version_step(
        workflow: dict[str, Any], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    bundle = scaffold(repo / "envs", "acme/arith", directory="arith")
    set_table(bundle, "verifier", 'kind = "exact-match"\nfield = "answer"')
    write_rows(bundle, "dev", [{"id": "d1", "prompt": "Say yes.", "answer": "Yes"}])
    (bundle / "golden.jsonl").write_text('{"split": "dev", "task_id": "d1", "completion": "yes", "reward": 0}\n')
    manifest = bundle / "envhub.toml"
    manifest.write_text(manifest.read_text().replace("[environment]\n", '[environment]\ngolden = "golden.jsonl"\n', 1))
    registry = str(tmp_path / "registry")
    subprocess.run([str(BIN / "envhub"), "push", str(bundle), "--registry", registry], check=True,
                   capture_output=True, env={**os.environ, "ENVHUB_HOME": str(tmp_path / "home")})
    checkout(repo)
    unchanged = run_step(workflow, "score-version", repo, tmp_path, {"ENVHUB_REGISTRY": registry})
    assert (unchanged.returncode, unchanged.stdout) == (0, ""), unchanged.stderr

    set_table(bundle, "verifier", 'kind = "exact-match"\nfield = "answer"\nnormalize = ["strip", "lower"]')
    changed = run_step(workflow, "score-version", repo, tmp_path, {"ENVHUB_REGISTRY": registry})
    assert changed.returncode == 1
    assert changed.stdout == (
        "::error file=envs/arith/golden.jsonl,line=1,title=envhub score-version-unchanged::environment.score-version: "
        "dev/d1: reward 0 under acme/arith 0.1.0, 1 now, but score-version is still 1%0Ahint: bump [environment] "
        "score-version to 2 if the change is intended (rewards are no longer comparable with acme/arith 0.1.0), "
        "else make the verifier score as before\n")
    never_published = run_step(workflow, "score-version", repo, tmp_path)  # the variable unset: nothing to compare
    assert (never_published.returncode, never_published.stdout) == (0, ""), never_published.stderr
