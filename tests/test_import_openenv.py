"""``envhub import openenv``: an OpenEnv environment package (made here by OpenEnv's own
``openenv init``, and a hand-written one with seeds and an end) becomes a bundle that
validates and evaluates, running the environment's class in each episode, with the
environment's own rewards in the records. Bad sources are refused naming what is missing,
exit 2, and nothing is written. And the importer hook: unknown kinds and options are refused
listing what is installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from envhub.context import make_plugin_manager
from envhub.importers import ImportSourceError, import_openenv
from tests.conftest import run_envhub

OPENENV = Path(sys.executable).parent / "openenv"

pytest.importorskip("openenv")

POLICY = '''\
import json

MESSAGES = [None, "hello", "hi"]


def act(messages):
    """Look first (step without an action), then echo two messages, then stop."""
    calls = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
    if calls >= len(MESSAGES):
        return "done"
    message = MESSAGES[calls]
    arguments = {} if message is None else {"action": {"message": message}}
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{calls}", "type": "function", "function": {"name": "step", "arguments": json.dumps(arguments)}}]}
'''


@pytest.fixture(scope="module")
def echo_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An environment written by OpenEnv's own CLI: ``openenv init echo_env``."""
    root = tmp_path_factory.mktemp("openenv")
    proc = subprocess.run([str(OPENENV), "init", "echo_env"], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    source = root / "echo_env"
    env_file = source / "server" / "echo_env_environment.py"
    assert "class EchoEnvironment(Environment)" in env_file.read_text()  # what the template writes
    assert (source / "models.py").is_file() and (source / "server" / "Dockerfile").is_file()
    return source


def env_rewards(source: Path, messages: list[str]) -> list[float]:
    """The rewards the OpenEnv class itself gives for ``messages``, run directly (not through
    envhub) in a child process, as OpenEnv's server would run it."""
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(source.parent)!r})
        from echo_env.models import EchoAction
        from echo_env.server.echo_env_environment import EchoEnvironment
        env = EchoEnvironment()
        env.reset()
        print(json.dumps([env.step(EchoAction(message=m)).reward for m in {messages!r}]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rewards: list[float] = json.loads(proc.stdout)
    return rewards


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_an_openenv_init_environment_imports_validates_and_evaluates(echo_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    result = run_envhub("import", "openenv", str(echo_source), str(out), "--name", "acme/echo", "-o", "seeds=3")
    assert result.code == 0, result.err
    assert result.out == (out / "IMPORT-REPORT.md").read_text()
    assert f"Imported EchoEnvironment, 3 task(s) into {out} (acme/echo);" in result.err
    report = result.out
    for dropped in ("server/Dockerfile: the Docker image is not built",
                    "server/app.py: the FastAPI server (create_app with env_name, max_concurrent_envs) is copied but "
                    "not run", "openenv.yaml: its deployment settings", "EchoEnvironment.reset() takes no seed"):
        assert dropped in report.split("## Not carried over")[1], dropped
    assert (out / "echo_env" / "server" / "echo_env_environment.py").read_bytes() == (
        echo_source / "server" / "echo_env_environment.py").read_bytes()
    assert not (out / "echo_env" / "server" / "Dockerfile").exists()
    spec = json.loads((out / "tools" / "step.json").read_text())
    action = spec["function"]["parameters"]["properties"]["action"]
    assert action["required"] == ["message"] and action["properties"]["message"]["type"] == "string"

    assert run_envhub("validate", str(out)).code == 0

    (tmp_path / "policy.py").write_text(POLICY)
    result = run_envhub("eval", str(out), "-s", "test", "--policy", "python:policy.py:act", "--trust",
                        "-o", str(tmp_path / "records.jsonl"), cwd=tmp_path)
    assert result.code == 0, result.err
    rows = records(tmp_path / "records.jsonl")
    hello, hi = env_rewards(echo_source, ["hello", "hi"])
    assert (hello, hi) == (0.5, 0.2)
    assert sorted(r["task_id"] for r in rows) == ["seed-0", "seed-1", "seed-2"]
    for row in rows:
        assert row["error"] is None and row["tool_errors"] == 0 and row["environment_faults"] == 0
        assert row["turn_rewards"] == [None, hello, hi, None]  # looking earns nothing; "done" is no step
        assert row["reward"] == pytest.approx(hello + hi)
        assert row["score_info"] == {"total_reward": pytest.approx(hello + hi), "last_reward": hi, "steps": 2,
                                     "done": False}
        tools = [json.loads(m["content"]) for m in row["messages"] if m["role"] == "tool"]
        assert tools[0]["echoed_message"] == "Echo Env environment ready!"  # the observation reset gave
        assert [t["echoed_message"] for t in tools[1:]] == ["hello", "hi"]
        assert tools[1]["metadata"] == {"original_message": "hello", "step": 1}  # a fresh env per episode


GAME = {
    "__init__.py": "",
    "models.py": '''\
        from openenv.core.env_server.types import Action, Observation
        from pydantic import Field


        class GuessAction(Action):
            guess: int = Field(..., ge=0, le=3, description="a number from 0 to 3")


        class GuessObservation(Observation):
            hint: str = ""
    ''',
    "server/__init__.py": "",
    "server/game.py": '''\
        import random

        from openenv.core.env_server.interfaces import Environment
        from openenv.core.env_server.types import State

        from ..models import GuessAction, GuessObservation


        class GuessEnvironment(Environment):
            """Guess a number from 0 to 3; the seed picks it."""

            def __init__(self):
                self._state = State(step_count=0)
                self.secret = 0

            def reset(self, seed=None, episode_id=None, **kwargs):
                self.secret = random.Random(seed).randrange(4)
                self._state = State(step_count=0)
                return GuessObservation(hint="guess 0 to 3", reward=None, done=False)

            def step(self, action: GuessAction, timeout_s=None, **kwargs):
                self._state.step_count += 1
                if action.guess == self.secret:
                    return GuessObservation(hint="right", reward=2.0, done=True)
                return GuessObservation(hint="wrong", reward=-0.5, done=False)

            @property
            def state(self):
                return self._state
    ''',
}

SWEEP = '''\
import json


def act(messages):
    """Try an action the tool's schema refuses and one only the type refuses, then guess 0, 1,
    2, 3 until the environment says done."""
    calls = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
    tool = [m for m in messages if m.get("role") == "tool"]
    if tool and '"done":true' in tool[-1]["content"]:
        return "finished"
    action = [{"guess": "three"}, {"guess": 9}][calls] if calls < 2 else {"guess": calls - 2}
    return {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{calls}", "type": "function",
            "function": {"name": "step", "arguments": json.dumps({"action": action})}}]}
'''


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def test_seeds_reach_reset_and_the_environment_ends_the_episode(tmp_path: Path) -> None:
    source = write(tmp_path / "guess_game", GAME)
    out = tmp_path / "bundle"
    result = run_envhub("import", "openenv", str(source), str(out), "-o", "seeds=4", "-o", "reward=last")
    assert result.code == 0, result.err
    assert "reset(seed=...): each task resets with its own seed" in result.out
    spec = json.loads((out / "tools" / "step.json").read_text())["function"]["parameters"]["properties"]["action"]
    assert spec["properties"]["guess"] == {"type": "integer", "description": "a number from 0 to 3"}
    assert [json.loads(line)["reset"] for line in (out / "tasks" / "test.jsonl").read_text().splitlines()] == [
        {"seed": 0}, {"seed": 1}, {"seed": 2}, {"seed": 3}]
    assert run_envhub("validate", str(out)).code == 0
    (tmp_path / "sweep.py").write_text(SWEEP)
    result = run_envhub("eval", str(out), "-s", "test", "--policy", "python:sweep.py:act", "--trust",
                        "-o", str(tmp_path / "r.jsonl"), cwd=tmp_path)
    assert result.code == 0, result.err
    import random

    for row in records(tmp_path / "r.jsonl"):
        secret = random.Random(int(row["task_id"].removeprefix("seed-"))).randrange(4)
        assert row["tool_errors"] == 2 and row["environment_faults"] == 0  # the model's mistakes, not steps
        refused = [m["content"] for m in row["messages"] if m["role"] == "tool"][:2]
        assert refused[0] == "Error: invalid arguments for step: at $.action.guess: 'three' is not of type 'integer'"
        assert refused[1].startswith("Error: invalid action: 1 validation error for GuessAction\nguess\n"
                                     "  Input should be less than or equal to 3")
        assert row["turn_rewards"] == [None, None, *[-0.5] * secret, 2.0]  # the environment's rewards
        assert row["ended_by"] == "environment"
        assert row["reward"] == 1.0  # reward=last: 2.0, clamped to [0, 1]
        assert row["score_info"]["last_reward"] == 2.0 and row["score_info"]["done"] is True


@pytest.mark.parametrize(("files", "message"), [
    ({"app.py": "def main():\n    pass\n"},
     "{src}: error: not an OpenEnv environment: no class in its Python files derives from OpenEnv's Environment "
     "(openenv.core.env_server.interfaces.Environment)\n"
     "  hint: give the directory `openenv init NAME` makes (its server/NAME_environment.py defines the class)"),
    ({"env.py": "from openenv.core.env_server.interfaces import Environment\n\n"
                "class Half(Environment):\n    def reset(self):\n        pass\n"},
     "{src}/env.py: error: Half has no step()\n"
     "  hint: an OpenEnv Environment defines reset(), step(action) and state: add step\n"
     "{src}/env.py: error: Half has no state()\n"
     "  hint: an OpenEnv Environment defines reset(), step(action) and state: add state"),
    ({"env.py": "from openenv.core.env_server.interfaces import Environment\n\n"
                "class Needy(Environment):\n    def __init__(self, size):\n        pass\n"
                "    def reset(self):\n        pass\n    def step(self, action):\n        pass\n"
                "    def state(self):\n        pass\n"},
     "{src}/env.py: error: Needy.__init__ requires size; envhub makes the environment with no arguments\n"
     "  hint: give those parameters defaults\n"
     "{src}/env.py: error: Needy.step has no annotated action parameter\n"
     "  hint: annotate it with the action type: def step(self, action: MyAction)"),
], ids=["no-environment-class", "missing-methods", "needs-arguments-and-untyped-action"])
def test_a_source_that_is_not_an_openenv_environment_is_refused(tmp_path: Path, files: dict[str, str],
                                                                 message: str) -> None:
    source = write(tmp_path / "src", files)
    out = tmp_path / "parent" / "out"
    result = run_envhub("import", "openenv", str(source), str(out))
    assert result.code == 2 and "Traceback" not in result.err
    assert result.err.splitlines()[1:] == message.format(src=source).splitlines()
    assert result.err.startswith(f"envhub: error: cannot import {source}: ")
    assert not out.exists() and (not out.parent.exists() or not any(out.parent.iterdir()))  # nothing written
    with pytest.raises(ImportSourceError):
        import_openenv(source, tmp_path / "api-out")
    assert not (tmp_path / "api-out").exists()


def test_the_positive_control_of_the_refusals(tmp_path: Path) -> None:
    """The smallest source the refusals above are one change away from imports."""
    source = write(tmp_path / "src", {"env.py": "from openenv.core.env_server.interfaces import Environment\n\n"
                                                "class Fine(Environment):\n    def __init__(self, size=3):\n"
                                                "        pass\n    def reset(self):\n        pass\n"
                                                "    def step(self, action: dict):\n        pass\n"
                                                "    def state(self):\n        pass\n"})
    report = import_openenv(source, tmp_path / "out", seeds=2)
    assert report.environment == "src.env:Fine" and report.tasks == 2
    assert "the action type dict is not defined in the source" in report.to_markdown()


def test_unknown_kinds_options_and_a_used_destination_are_refused(tmp_path: Path) -> None:
    echo_source = write(tmp_path / "guess_game", GAME)
    result = run_envhub("import", "gym", str(echo_source), str(tmp_path / "a"))
    assert result.code == 2 and result.err == (
        "envhub: error: unknown importer 'gym'; installed importers: inspect, openenv, terminal-bench, verifiers\n"
        "  hint: install the plugin that provides it ('envhub plugins' lists what is installed)\n")
    result = run_envhub("import", "openenv", str(echo_source), str(tmp_path / "a"), "-o", "network=true")
    assert result.code == 2 and result.err.startswith(
        "envhub: error: importer 'openenv' takes no option network; its options: name: ")
    result = run_envhub("import", "openenv", str(echo_source), str(tmp_path / "a"), "-o", "seeds=many")
    assert result.code == 2 and result.err.startswith(
        "envhub: error: option seeds='many' is not a whole number from 1 to 1000000\n")
    result = run_envhub("import", "openenv", str(echo_source), str(tmp_path / "a"), "-o", "seeds")
    assert result.code == 2 and "option 'seeds' is not KEY=VALUE" in result.err
    assert not (tmp_path / "a").exists()
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("mine")
    result = run_envhub("import", "openenv", str(echo_source), str(tmp_path / "used"))
    assert result.code == 2 and "already exists and is not empty" in result.err
    assert [p.name for p in (tmp_path / "used").iterdir()] == ["keep.txt"]


def test_importers_are_registered_through_the_hook_and_plugins_add_kinds(tmp_path: Path) -> None:
    from envhub.hookspecs import ImporterKind, hookimpl

    pm = make_plugin_manager(autoload=False)
    assert pm.registered_by("envhub-rl")["importers"] == ["inspect", "openenv", "terminal-bench", "verifiers"]
    assert pm.lookup("importers", "openenv").runner().__name__ == "run_openenv"

    calls: list[tuple[Path, Path, dict[str, str]]] = []

    class Plugin:
        @hookimpl
        def envhub_importers(self) -> list[ImporterKind]:
            return [ImporterKind("lines", lambda s, o, opts: calls.append((s, o, dict(opts))), options={"x": "x"})]

    pm.register(Plugin(), name="lines-plugin")
    assert pm.names("importers") == ["inspect", "lines", "openenv", "terminal-bench", "verifiers"]
    pm.lookup("importers", "lines").runner()(tmp_path, tmp_path / "o", {"x": "1"})
    assert calls == [(tmp_path, tmp_path / "o", {"x": "1"})]
