"""example_envs/math-and-shop: a composite of arith-word-problems and shop-db, read from their
directories beside it (path dependencies) or, once published, from a real (temporary)
registry at the versions it pins. The splits follow their weights, each task runs with its
own environment's harness, verifier and state, records carry the child's provenance, the
held-out split stays held out where it is not held, and the bundle validates and passes the
pytest plugin with nothing published, and round-trips through push, pull and eval once its
children are published."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import envhub
from envhub.errors import EnvNotFoundError
from envhub.runtime import CompositeEnvironment
from tests.conftest import Result

EXAMPLES = Path(__file__).resolve().parents[1] / "example_envs"
MIX = EXAMPLES / "math-and-shop"
ARITH, SHOP = "envhub-examples/arith-word-problems", "envhub-examples/shop-db"

Cli = Callable[..., Result]


@pytest.fixture
def children(envhub_cli: Cli) -> dict[str, str]:
    """Both children pushed to this test's embedded registry; {name: digest}."""
    digests = {}
    for name, directory in ((ARITH, "arith-word-problems"), (SHOP, "shop-db")):
        result = envhub_cli("push", str(EXAMPLES / directory), "--json")
        assert result.code == 0, result.err
        digests[name] = json.loads(result.out)["digest"]
    return digests


def source(task_id: str) -> str:
    """The environment a composite task id names: '<env>:<split>:<task id>'."""
    return task_id.split(":")[0]


def test_dev_alternates_the_children_and_each_task_runs_in_its_own_environment(children: dict[str, str]) -> None:
    with envhub.load(MIX, trust_code=True) as env:
        assert isinstance(env, CompositeEnvironment)
        tasks = env.tasks("dev")
        assert [source(t.id) for t in tasks] == [ARITH, SHOP] * 12
        assert tasks[0].id == f"{ARITH}:dev:arith-dev-00001" and tasks[1].id == f"{SHOP}:dev:shop-dev-001"

        arith, shop = tasks[0], tasks[1]
        assert env.task_provenance(shop) == {
            "env": SHOP, "version": "1.0.2", "digest": children[SHOP], "score_version": 1,
            "source": f"{SHOP} 1.0.2 at {EXAMPLES / 'shop-db'}", "split": "dev", "task_id": "shop-dev-001"}
        # Read from its directory, the same content as published: the same digest.
        assert env.task_provenance(arith)["digest"] == children[ARITH]

        # arith: one turn, no tools, the numeric verifier.
        with env.episode(arith) as episode:
            assert episode.reset().tools == []
            result = episode.step(env.reference_actions(arith)[0])
        assert (result.done, result.reward, result.info["breakdown"]) == (True, 1.0, {})

        # shop-db: its tools, its database, its rubric.
        with env.episode(shop) as episode:
            observation = episode.reset()
            assert [t["function"]["name"] for t in observation.tools] == ["list_tables", "describe_table", "run_sql"]
            for action in env.reference_actions(shop):
                result = episode.step(action)
        assert result.reward == 1.0 and result.info["breakdown"] == {"answer": 1.0, "queried": 1.0, "read-only": 1.0}

        # A wrong answer fails by the child's own verifier.
        assert env.score(arith, "\\boxed{-1}").reward == 0.0
        assert env.score(shop, "\\boxed{-1}").breakdown["answer"] == 0.0


def test_train_mixes_two_arithmetic_problems_to_each_database_question(children: dict[str, str]) -> None:
    with envhub.load(MIX, trust_code=True) as env:
        tasks = env.tasks("train")
        # shop-db's 45 questions set the size: 45 x 3 / 1 = 135, of which 90 arith.
        assert Counter(source(t.id) for t in tasks) == {ARITH: 90, SHOP: 45}
        assert [source(t.id) for t in tasks[:6]] == [ARITH, SHOP, ARITH] * 2  # every prefix keeps 2:1
        assert Counter(source(t.id) for t in env.tasks("train", limit=30)) == {ARITH: 20, SHOP: 10}
        shuffled = env.tasks("train", seed=3)
        assert [t.id for t in shuffled] != [t.id for t in tasks]
        assert [source(t.id) for t in shuffled] == [source(t.id) for t in tasks]  # the same interleaving


def test_the_test_split_is_held_out_and_built_from_the_childrens_held_out_splits(children: dict[str, str],
                                                                                 envhub_cli: Cli) -> None:
    # From the children's directories, their held-out files are at hand (as in any bundle directory).
    with envhub.load(MIX, trust_code=True) as env:
        assert env.splits["test"].held_out and env.splits["test"].available
        assert [source(t.id) for t in env.tasks("test")] == [ARITH, SHOP] * 12
    # Published, the children's held-out splits stay in the held-out store unless asked for.
    assert envhub_cli("push", str(MIX)).code == 0
    with envhub.load("envhub-examples/math-and-shop", trust_code=True) as env:
        assert env.splits["test"].held_out and not env.splits["test"].available
        with pytest.raises(EnvNotFoundError, match="held out"):
            env.tasks("test")
    with envhub.load("envhub-examples/math-and-shop", trust_code=True, with_heldout=True) as env:
        tasks = env.tasks("test")
        assert [source(t.id) for t in tasks] == [ARITH, SHOP] * 12
        assert {t.id.split(":")[1] for t in tasks} == {"test"}
        shop = tasks[1]
        with env.episode(shop) as episode:
            episode.reset()
            for action in env.reference_actions(shop):
                result = episode.step(action)
        assert result.reward == 1.0


def test_validate_check_needs_nothing_published_and_push_needs_the_children_first(envhub_cli: Cli) -> None:
    result = envhub_cli("validate", "--strict", "--check", "--trust", str(MIX))
    assert result.code == 0, result.out + result.err
    pushed = envhub_cli("push", str(MIX))
    assert pushed.code == 2
    version = envhub.load(EXAMPLES / "arith-word-problems", trust_code=True).version
    assert pushed.err.splitlines()[-2:] == [
        f"envhub: error: envhub-examples/math-and-shop 1.1.1 depends on {ARITH}=={version} "
        "(path '../arith-word-problems'), "
        f"which is not in {(Path(os.environ['ENVHUB_HOME']) / 'registry').as_uri()}",
        f"  hint: push it to this registry first: envhub push {EXAMPLES / 'arith-word-problems'}"]


def test_validate_check_the_pytest_plugin_and_a_push_pull_eval_round_trip(children: dict[str, str], envhub_cli: Cli,
                                                                          tmp_path: Path) -> None:
    result = envhub_cli("validate", "--strict", "--check", "--trust", str(MIX))
    assert result.code == 0, result.out + result.err

    # The conformance tests, in a fresh process using this test's registry (ENVHUB_HOME).
    proc = subprocess.run([sys.executable, "-m", "pytest", f"--envhub={MIX}", "--envhub-trust", "-q",
                           "-p", "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "7 passed, 1 skipped" in proc.stdout  # resets-isolate: the composite has no state of its own

    assert envhub_cli("push", str(MIX)).code == 0
    assert envhub_cli("pull", "envhub-examples/math-and-shop").code == 0
    out = tmp_path / "dev.jsonl"
    result = envhub_cli("eval", "envhub-examples/math-and-shop", "--split", "dev", "--policy", "reference",
                        "--trust", "-o", str(out), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["mean_reward"] == 1.0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["env"] for r in records} == {"envhub-examples/math-and-shop"}
    assert Counter(r["child"]["env"] for r in records) == {ARITH: 12, SHOP: 12}
    for record in records:
        child = record["child"]
        assert record["task_id"] == f"{child['env']}:{child['split']}:{child['task_id']}"
        assert child["digest"] == children[child["env"]] and child["split"] == "dev"


def test_the_pulled_composite_evaluates_its_held_out_split_with_the_childrens_held_out_stores(
        children: dict[str, str], envhub_cli: Cli, tmp_path: Path) -> None:
    assert envhub_cli("push", str(MIX)).code == 0
    out = tmp_path / "test.jsonl"
    result = envhub_cli("eval", "envhub-examples/math-and-shop", "--split", "test", "--with-heldout",
                        "--policy", "reference", "--trust", "-o", str(out), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["mean_reward"] == 1.0 and json.loads(result.out)["rollouts"] == 24
    without = envhub_cli("eval", "envhub-examples/math-and-shop", "--split", "test", "--trust",
                         "-o", str(tmp_path / "again.jsonl"))
    assert without.code == 2 and "held out" in without.err
