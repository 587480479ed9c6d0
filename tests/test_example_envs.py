"""Every environment in ``example_envs/``: what each must have, and the same gates an author's
CI runs: ``envhub validate --strict --check`` and the pytest plugin, with the installed
``envhub`` in subprocesses. (Each example's own behaviour is tested in
``tests/test_example_<name>.py``.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envhub import _toml
from tests.conftest import run_envhub

EXAMPLES = Path(__file__).resolve().parents[1] / "example_envs"
BUNDLES = sorted(p for p in EXAMPLES.iterdir() if (p / "envhub.toml").is_file())
MANIFESTS = {b.name: _toml.loads((b / "envhub.toml").read_text(encoding="utf-8")) for b in BUNDLES}


def judged(name: str) -> bool:
    """Scored by an LLM judge: checked against a local judge in that example's own tests."""
    verifier = MANIFESTS[name].get("verifier", {})
    return any(v.get("kind") == "llm-judge" for v in [verifier, *verifier.get("criteria", [])])


def composite(name: str) -> bool:
    return MANIFESTS[name]["tasks"].get("format") == "mixture"


def test_there_are_the_examples_the_docs_promise() -> None:
    protocols = {m.get("harness", {}).get("protocol", "single-turn") for m in MANIFESTS.values()}
    states = {m.get("state", {}).get("kind", "none") for m in MANIFESTS.values()}
    formats = {m["tasks"].get("format", "jsonl") for m in MANIFESTS.values()}
    assert len(BUNDLES) >= 8
    assert {"single-turn", "multi-turn", "tool-use"} <= protocols
    assert {"none", "files", "sqlite"} <= states
    assert {"jsonl", "generator", "mixture"} <= formats
    assert any(judged(name) for name in MANIFESTS)


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_each_example_is_complete(bundle: Path) -> None:
    manifest = MANIFESTS[bundle.name]
    env = manifest["environment"]
    assert env["name"] == f"envhub-examples/{bundle.name}"
    assert env["license"] == "Apache-2.0" and env["description"] and env["canary"].startswith("envhub-canary:")
    splits = manifest["tasks"]["splits"]
    assert {"train", "dev", "test"} <= set(splits)
    assert splits["test"].get("held-out") is True
    assert not splits["train"].get("held-out") and not splits["dev"].get("held-out")
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    assert readme.startswith(f"# {env['name']}")
    canaries = {MANIFESTS[b.name]["environment"]["canary"] for b in BUNDLES}
    assert len(canaries) == len(BUNDLES)


def test_validate_strict_check_passes_on_every_example(tmp_path: Path) -> None:
    # A composite's children come from the registry: push them first.
    for bundle in BUNDLES:
        if not composite(bundle.name):
            assert run_envhub("push", str(bundle)).code == 0
    checked = [str(b) for b in BUNDLES if not judged(b.name)]
    result = run_envhub("validate", "--strict", "--check", "--check-limit", "3", "--trust", *checked)
    assert result.code == 0, result.out + result.err
    assert result.out.count("valid: envhub-examples/") == len(checked)


def test_the_pytest_plugin_passes_on_every_example(tmp_path: Path) -> None:
    for bundle in BUNDLES:
        if not composite(bundle.name):
            assert run_envhub("push", str(bundle)).code == 0
    args = [f"--envhub={b}" for b in BUNDLES if not judged(b.name)]
    # From a directory of its own: envhub's pyproject turns the plugin's collection off.
    # (the plugin is installed: envhub-rl's pytest11 entry point loads it)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    result = subprocess.run([sys.executable, "-m", "pytest", *args, "--envhub-trust", "--envhub-check-limit", "3",
                             "-q", "-p", "no:cacheprovider"],
                            cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " failed" not in result.stdout and " passed" in result.stdout
