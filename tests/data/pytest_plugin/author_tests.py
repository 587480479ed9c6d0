"""An environment author's own tests, using envhub's pytest fixtures."""

import os
import subprocess

import envhub


def test_the_first_task_scores_its_answer(envhub_env):
    task = envhub_env.tasks("train")[0]
    assert envhub_env.name == "acme/demo"
    assert envhub_env.score(task, f"The answer is \\boxed{{{task['answer']}}}").reward == 1.0
    assert envhub_env.score(task, "no idea").reward == 0.0


def test_push_then_load_by_id(envhub_registry, envhub_env):
    entry = envhub_registry.push(envhub_env.root)
    assert entry.ref == "acme/demo@0.1.0"
    assert os.environ["ENVHUB_REGISTRY"] == envhub_registry.url
    assert [e.version for e in envhub_registry.open().versions("acme/demo")] == ["0.1.0"]
    with envhub.load("acme/demo@0.1.0") as pulled:
        assert pulled.digest == entry.digest
        assert not pulled.splits["test"].available  # held out: it went to the held-out store
    # The command sees the same registry.
    info = subprocess.run(["envhub", "info", "acme/demo", "--json"], capture_output=True, text=True)
    assert info.returncode == 0, info.stderr
    assert '"0.1.0"' in info.stdout


def test_the_registry_is_gone_after_its_test():
    assert "ENVHUB_REGISTRY" not in os.environ
