"""``envhub.EnvironmentProtocol``: the local, composite and served environments satisfy one
protocol, checked by mypy on code written against it, and ``envhub.load`` returns it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import envhub
from envhub.context import Context, make_plugin_manager
from envhub.runtime import EnvironmentProtocol, EpisodeProtocol, RemoteEnvironment, SplitInfo
from envhub.scaffold import create_bundle
from tests.serve_fixtures import start_server

pytestmark = pytest.mark.timeout(300)

# Code a user (or envhub's own callers) writes against the protocol: each implementation is
# assigned to it, and the loaded environment is used through it alone, under --strict.
_SATISFIES = '''\
from __future__ import annotations

from envhub import EnvironmentProtocol, EpisodeProtocol, Score, Task, load
from envhub.runtime import CompositeEnvironment, Environment, Episode, RemoteEnvironment


def implementations(local: Environment, composite: CompositeEnvironment, remote: RemoteEnvironment,
                    episode: Episode, task: Task) -> list[EnvironmentProtocol]:
    served: EpisodeProtocol = remote.episode(task)
    mixed: EpisodeProtocol = composite.episode(task)
    own: EpisodeProtocol = episode
    return [local, composite, remote]


class Subclassed(Environment):
    """A subclass is still the protocol (``with`` gives the subclass)."""


def subclassed(env: Subclassed) -> EnvironmentProtocol:
    with env as same:
        kept: Subclassed = same
    return env


def first_reward(path: str) -> float:
    with load(path) as env:
        reveal_type(env)
        task = env.task("train", env.tasks("train")[0].id)
        with env.episode(task, seed=1) as episode:
            episode.reset()
            while not episode.step("x").done:
                pass
            score: Score | None = episode.score
        origin: dict[str, object] | None = env.task_provenance(task)
        return score.reward if score is not None else 0.0
'''

# Positive controls: the check notices a missing member and a signature that differs.
_FAILS = '''\
from __future__ import annotations

from collections.abc import Sequence

from envhub import EnvironmentProtocol, Task
from envhub.runtime import Environment


class NoTaskProvenance(Environment):
    task_provenance = None  # type: ignore[assignment]


class NarrowTasks(Environment):
    def tasks(self, split: str) -> Sequence[Task]:  # type: ignore[override]
        return []


def use(a: NoTaskProvenance, b: NarrowTasks) -> None:
    missing: EnvironmentProtocol = a
    narrow: EnvironmentProtocol = b
'''


def _mypy(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "satisfies.py").write_text(_SATISFIES, encoding="utf-8")
    (tmp_path / "fails.py").write_text(_FAILS, encoding="utf-8")
    mypy = Path(sys.executable).with_name("mypy")
    return subprocess.run([str(mypy), "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"),
                           "--hide-error-context", "--no-pretty", "satisfies.py", "fails.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=280)


def test_the_three_environments_and_both_episodes_satisfy_the_protocol_for_mypy(tmp_path: Path) -> None:
    proc = _mypy(tmp_path)
    out = proc.stdout + proc.stderr
    satisfies = [line for line in out.splitlines() if line.startswith("satisfies.py")]
    # Only the reveal_type note: no error, and load's type is the protocol, not a union.
    assert [re.sub(r"^satisfies\.py:\d+: ", "", line) for line in satisfies] == [
        'note: Revealed type is "envhub.runtime._protocols.EnvironmentProtocol"'], out
    fails = [re.sub(r"^fails\.py:\d+: ", "", line) for line in out.splitlines() if line.startswith("fails.py")]
    # Each control fails for its own member only (a subclass is still the protocol otherwise).
    assert fails == [
        'error: Incompatible types in assignment (expression has type "NoTaskProvenance", variable has type '
        '"EnvironmentProtocol")  [assignment]',
        'note: Following member(s) of "NoTaskProvenance" have conflicts:',
        'note:     task_provenance: expected "Callable[[Task], dict[str, Any] | None]", got "None"',
        'error: Incompatible types in assignment (expression has type "NarrowTasks", variable has type '
        '"EnvironmentProtocol")  [assignment]',
        'note: Following member(s) of "NarrowTasks" have conflicts:',
        "note:     Expected:",
        "note:         def tasks(self, split: str, *, seed: int | None = ..., limit: int | None = ...) "
        "-> Sequence[Task]",
        "note:     Got:",
        "note:         def tasks(self, split: str) -> Sequence[Task]",
    ], out
    assert "Found 2 errors in 1 file (checked 2 source files)" in out, out


def _bundle(tmp_path: Path) -> Path:
    return create_bundle("acme/arith", tmp_path / "arith", protocol="single-turn")


def test_a_local_environment_names_its_bundle_and_owns_its_tasks(tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    ctx = Context.create(plugins=make_plugin_manager(autoload=False))
    with envhub.load(root, context=ctx) as env:
        task = env.tasks("train")[0]
        assert env.root == root.resolve()
        assert env.task_provenance(task) is None
        assert isinstance(env.splits["train"], SplitInfo)
        episode: EpisodeProtocol = env.episode(task)
        with episode:
            episode.reset()
            assert episode.step(env.reference_actions(task)[0]).done
            assert episode.score is not None and episode.score.reward == 1.0


def test_a_served_environment_has_no_root_and_its_tasks_are_its_own(tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    server = start_server([str(root), "--trust"], tmp_path / "serve")
    try:
        env: EnvironmentProtocol = envhub.load(server.url("acme/arith"))
        with env:
            assert isinstance(env, RemoteEnvironment)
            task = env.tasks("train")[0]
            assert env.root is None
            assert env.task_provenance(task) is None
            assert env.provenance()["source"] == server.url("acme/arith")
            # The runner asks every environment for its task's provenance (no getattr): a
            # served run's records have no child.
            result = envhub.evaluate(env, "reference", split="train", n=2)
            assert [r.child for r in result.records] == [None, None]
            assert [r.reward for r in result.records] == [1.0, 1.0]
    finally:
        server.stop()
