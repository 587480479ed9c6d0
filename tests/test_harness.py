"""The harness as an object: tools and responders that give per-turn rewards and end
episodes (Reply), a simulated user in tool-use, a task's own harness (task-fields), a
plugin protocol written as a Harness subclass, and records and summaries that carry it all."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.errors import TaskDataError
from envhub.runtime import Harness, HarnessSetup, Reply, summarize
from envhub.runtime.policies import PythonPolicy
from tests.runtime_fixtures import scaffold, set_table, write_rows

TOOLS = '''
from envhub.runtime import Reply


def move(direction: str) -> Reply:
    """Move one step.

    Args:
        direction: "left" or "right".
    """
    if direction == "right":
        return Reply("you reached the goal", reward=1.0, done=True, outcome="win")
    if direction == "pit":
        return Reply("you fell", reward=-1.0, done=True, outcome="loss")
    return Reply("nothing here", reward=-0.1)


def look() -> str:
    """Look around."""
    return "a corridor"
'''

USER = '''
from envhub.runtime import Reply


def respond(task, messages, *, params):
    said = (messages[-1].get("content") or "").lower()
    if "bye" in said:
        return Reply("thanks, bye", reward=0.5, done=True, outcome="hangup")
    if "silent" in said:
        return None
    return f"{params['greeting']}: please move right"
'''


def _bundle(tmp_path: Path, *, responder: bool = False, fields: str = "", rows: list[dict[str, Any]] | None = None,
            harness_extra: str = "") -> Path:
    root = scaffold(tmp_path, protocol="tool-use")
    (root / "demo" / "tools.py").write_text(TOOLS, encoding="utf-8")
    (root / "demo" / "user.py").write_text(USER, encoding="utf-8")
    body = ('protocol = "tool-use"\nsystem-prompt = "prompts/system.md"\nmax-turns = 4\n'
            'tools = ["demo.tools:move", "demo.tools:look"]\n')
    if responder:
        body += 'responder = "demo.user:respond"\n'
    body += harness_extra
    if fields:
        body += f"task-fields = {{ {fields} }}\n"
    set_table(root, "harness", body)
    set_table(root, "config", 'timeout-s = 60\nparams = { greeting = "hello" }')
    set_table(root, "verifier", 'kind = "regex"\npattern = "done"')
    write_rows(root, "train", rows or [{"id": "t1", "prompt": "find the goal", "answer": "1"}])
    return root


def call(name: str, i: int = 0, **arguments: Any) -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def turn(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def test_a_tool_gives_per_turn_rewards_and_ends_the_episode(tmp_path: Path) -> None:
    with envhub.load(_bundle(tmp_path), trust_code=True) as env, env.episode(env.task("train", "t1")) as ep:
        ep.reset()
        first = ep.step(turn(call("move", 0, direction="left"), call("look", 1)))
        assert (first.done, first.turn_reward) == (False, pytest.approx(-0.1))
        last = ep.step(turn(call("move", 0, direction="right"), call("move", 1, direction="left")))
        assert last.done and last.turn_reward == 1.0 and last.info["outcome"] == "win"
        # The call after the one that ended the episode is answered, not run (its reward is not counted).
        assert last.info["tool_results"] == ["you reached the goal", "Not run: the episode ended."]
        assert ep.turn_rewards == [pytest.approx(-0.1), 1.0]
        assert (ep.ended_by, ep.outcome, ep.truncated, ep.turns) == ("environment", "win", False, 2)
        assert last.reward == 0.0  # the final reward is the verifier's, apart from the turn rewards


def test_without_an_end_a_plain_turn_ends_it_as_before(tmp_path: Path) -> None:
    with envhub.load(_bundle(tmp_path), trust_code=True) as env, env.episode(env.task("train", "t1")) as ep:
        ep.reset()
        result = ep.step("done")
        assert (result.done, result.reward, result.turn_reward) == (True, 1.0, None)
        assert (ep.ended_by, ep.outcome, ep.turn_rewards) == ("policy", None, [None])


def test_the_turn_limit_ends_it_truncated(tmp_path: Path) -> None:
    with envhub.load(_bundle(tmp_path), trust_code=True) as env, env.episode(env.task("train", "t1")) as ep:
        ep.reset()
        for _ in range(4):
            result = ep.step(turn(call("look")))
        assert result.done and result.info["truncated"] and ep.ended_by == "turn-limit"


def test_a_simulated_user_answers_plain_turns_in_tool_use_and_can_hang_up(tmp_path: Path) -> None:
    with envhub.load(_bundle(tmp_path, responder=True), trust_code=True) as env, \
            env.episode(env.task("train", "t1")) as ep:
        ep.reset()
        asked = ep.step("how can I help?")
        assert not asked.done and asked.observation.messages[-1] == {"role": "user",
                                                                    "content": "hello: please move right"}
        moved = ep.step(turn(call("move", direction="left")))
        assert not moved.done
        bye = ep.step("done, bye")
        assert bye.done and bye.info["outcome"] == "hangup" and bye.reward == 1.0
        assert ep.messages[-1] == {"role": "user", "content": "thanks, bye"}
        assert ep.turn_rewards == [None, pytest.approx(-0.1), 0.5]
        assert ep.ended_by == "environment"


def test_a_user_that_returns_none_ends_it(tmp_path: Path) -> None:
    with envhub.load(_bundle(tmp_path, responder=True), trust_code=True) as env, \
            env.episode(env.task("train", "t1")) as ep:
        ep.reset()
        result = ep.step("silent")
        assert result.done and ep.ended_by == "environment" and ep.outcome is None


def test_the_async_path_agrees(tmp_path: Path) -> None:
    async def play() -> tuple[list[float | None], str | None]:
        env = envhub.load(_bundle(tmp_path, responder=True), trust_code=True)
        with env:
            async with env.episode(env.task("train", "t1")) as ep:
                await ep.areset()
                await ep.astep("hi")
                await ep.astep(turn(call("move", direction="left")))
                result = await ep.astep(turn(call("move", direction="right")))
                assert result.done
                return ep.turn_rewards, ep.outcome

    assert asyncio.run(play()) == ([None, pytest.approx(-0.1), 1.0], "win")


def test_a_task_narrows_the_tools_sets_its_prompt_and_turn_limit(tmp_path: Path) -> None:
    rows = [{"id": "narrow", "prompt": "p", "answer": "1", "tools": ["look"], "sys": "Be brief.", "turns": 1},
            {"id": "chat", "prompt": "unused", "answer": "1",
             "chat": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                      {"role": "user", "content": "move"}]},
            {"id": "plain", "prompt": "p", "answer": "1"}]
    root = _bundle(tmp_path, rows=rows,
                   fields='tools = "tools", system-prompt = "sys", messages = "chat", max-turns = "turns"')
    with envhub.load(root, trust_code=True) as env:
        with env.episode(env.task("train", "narrow")) as ep:
            obs = ep.reset()
            assert [t["function"]["name"] for t in obs.tools] == ["look"]
            assert obs.messages[0] == {"role": "system", "content": "Be brief."}
            # A tool outside the task's set is unknown to it, though the harness has it.
            result = ep.step(turn(call("move", direction="right")))
            assert "unknown tool 'move'; available tools: look" in result.info["tool_results"][0]
            assert result.done and ep.ended_by == "turn-limit" and ep.max_turns == 1
        with env.episode(env.task("train", "chat")) as ep:
            obs = ep.reset()
            assert [m["content"] for m in obs.messages[1:]] == ["hi", "hello", "move"]
            assert obs.messages[0]["role"] == "system" and len(obs.tools) == 2 and ep.max_turns == 4
        with env.episode(env.task("train", "plain")) as ep:
            obs = ep.reset()
            assert obs.messages[-1] == {"role": "user", "content": "p"} and len(obs.tools) == 2


@pytest.mark.parametrize(("row", "message"), [
    ({"tools": ["fly"]}, "names tools the harness does not have: 'fly'"),
    ({"tools": "look"}, "must be a list of tool names"),
    ({"turns": 0}, "must be an integer >= 1, got 0"),
    ({"turns": True}, "must be an integer >= 1, got True"),
    ({"sys": 3}, "holds a int, not the system prompt's text"),
    ({"chat": []}, "must be a non-empty list of chat messages"),
])
def test_a_task_field_that_is_not_what_the_spec_says_names_the_task_and_field(
        tmp_path: Path, row: dict[str, Any], message: str) -> None:
    root = _bundle(tmp_path, rows=[{"id": "bad", "prompt": "p", "answer": "1", **row}],
                   fields='tools = "tools", system-prompt = "sys", messages = "chat", max-turns = "turns"')
    with envhub.load(root, trust_code=True) as env, env.episode(env.task("train", "bad")) as ep, \
            pytest.raises(TaskDataError, match="task 'bad'") as caught:
        ep.reset()
    assert message in str(caught.value)


def test_records_and_the_summary_carry_turn_rewards_and_outcomes(tmp_path: Path) -> None:
    rows = [{"id": "win", "prompt": "p", "answer": "1"}, {"id": "lose", "prompt": "p", "answer": "1"},
            {"id": "plain", "prompt": "p", "answer": "1"}]
    scripts = {"win": [turn(call("move", direction="left")), turn(call("move", direction="right"))],
               "lose": [turn(call("move", direction="pit"))],
               "plain": ["done"]}
    policy = PythonPolicy(lambda messages, task: scripts[task.id][sum(m["role"] == "assistant" for m in messages)],
                          name="scripted")
    with envhub.load(_bundle(tmp_path, rows=rows), trust_code=True) as env:
        result = envhub.evaluate(env, policy, split="train")
    by_id = {r.task_id: r for r in result.records}
    assert by_id["win"].turn_rewards == [pytest.approx(-0.1), 1.0] and by_id["win"].outcome == "win"
    assert by_id["lose"].turn_rewards == [-1.0] and by_id["lose"].ended_by == "environment"
    assert by_id["plain"].turn_rewards is None and by_id["plain"].ended_by == "policy"
    summary = summarize(result.records)
    assert summary.rewarded_rollouts == 2 and summary.mean_return == pytest.approx((0.9 - 1.0) / 2)
    assert summary.ended_by == {"environment": 2, "policy": 1}
    assert summary.outcomes == {"loss": 1, "win": 1}
    assert summary.mean_reward == pytest.approx(1 / 3)  # only "plain" answered "done"


class EchoHarness(Harness):
    """A plugin's protocol: every plain turn is answered "Continue." until the model says stop."""

    def respond(self, task: Any, messages: list[dict[str, Any]], state: Any) -> Any:
        if "stop" in (messages[-1].get("content") or ""):
            return Reply(None, done=True, outcome="stopped")
        return Reply("Continue.", reward=0.25)

    @property
    def responds(self) -> bool:
        return True


def test_a_plugin_protocol_is_a_harness_subclass(tmp_path: Path) -> None:
    from envhub import hookimpl
    from envhub.context import Context, make_plugin_manager
    from envhub.plugin import HarnessProtocol

    class Plugin:
        @hookimpl
        def envhub_harness_protocols(self) -> list[HarnessProtocol]:
            return [HarnessProtocol("echo", harness=EchoHarness, description="continue until stop")]

    plugins = make_plugin_manager(autoload=False)
    plugins.register(Plugin(), name="echo-plugin")
    root = scaffold(tmp_path, protocol="single-turn")
    set_table(root, "harness", 'protocol = "echo"\nmax-turns = 5')
    set_table(root, "verifier", 'kind = "regex"\npattern = "stop"')
    context = Context.create(plugins=plugins)
    with envhub.load(root, context=context) as env:
        assert isinstance(env.harness, EchoHarness) and env.max_turns == 5
        with env.episode(next(iter(env.tasks("train")))) as ep:
            ep.reset()
            assert ep.step("thinking").observation.messages[-1]["content"] == "Continue."
            result = ep.step("stop")
            assert result.done and result.reward == 1.0 and ep.outcome == "stopped"
            assert ep.turn_rewards == [0.25, None]


def test_a_legacy_protocol_still_works(tmp_path: Path) -> None:
    from envhub import hookimpl
    from envhub.context import Context, make_plugin_manager
    from envhub.plugin import HarnessProtocol

    seen: list[Any] = []

    def respond(env: Any, task: Any, messages: list[dict[str, Any]], state: Any) -> str | None:
        seen.append(env)
        return None if len(messages) > 3 else "again"

    class Plugin:
        @hookimpl
        def envhub_harness_protocols(self) -> list[HarnessProtocol]:
            return [HarnessProtocol("again", respond=respond, max_turns=3)]

    plugins = make_plugin_manager(autoload=False)
    plugins.register(Plugin(), name="again-plugin")
    root = scaffold(tmp_path, protocol="single-turn")
    set_table(root, "harness", 'protocol = "again"')
    with envhub.load(root, context=Context.create(plugins=plugins)) as env, \
            env.episode(next(iter(env.tasks("train")))) as ep:
        ep.reset()
        assert not ep.step("1").done
        assert ep.step("2").done and ep.ended_by == "environment"
        assert seen == [env, env] and env.max_turns == 3


def test_reply_refuses_what_is_not_a_reward() -> None:
    with pytest.raises(ValueError, match="finite"):
        Reply("x", reward=float("nan"))
    with pytest.raises(TypeError, match="must be a number"):
        Reply("x", reward="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a number"):
        Reply("x", reward=True)
    assert Reply("x", reward=-7.5).reward == -7.5  # any finite float: shaping is not clamped


def test_harness_setup_is_what_a_plugin_harness_is_built_from(tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    with envhub.load(root, trust_code=True) as env:
        setup = env.harness.setup
        assert isinstance(setup, HarnessSetup) and setup.params == {"greeting": "hello"}
        assert [t.name for t in setup.tools] == ["move", "look"]


def test_validate_check_reports_bad_task_fields_and_honours_expect_noop(tmp_path: Path) -> None:
    from tests.conftest import run_envhub

    rows = [{"id": "ok", "prompt": "p", "answer": "1", "reference": "done"},
            {"id": "bad-turns", "prompt": "p", "answer": "1", "turns": "many", "reference": "done"},
            {"id": "refuse", "prompt": "p", "answer": "1", "noop": True},
            {"id": "wrongly-noop", "prompt": "p", "answer": "1", "noop": True, "reference": "done"}]
    root = _bundle(tmp_path, rows=rows, fields='max-turns = "turns"')
    manifest = root / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('prompt-field = "prompt"',
                                                     'prompt-field = "prompt"\nexpect-noop-field = "noop"'))
    # "refuse": the verifier passes an empty answer here (its pattern matches nothing only for
    # tasks whose field says so), so the noop floor must not fire.
    set_table(root, "verifier", 'kind = "python"\nentry-point = "demo.verify:score"')
    (root / "demo" / "verify.py").write_text(
        'def score(task, trajectory):\n'
        '    if task["id"] == "refuse":\n'
        '        return 1.0 if not trajectory.completion else 0.0\n'
        '    return 1.0 if "done" in trajectory.completion else 0.0\n', encoding="utf-8")
    for split in ("dev", "test"):
        (root / "tasks" / f"{split}.jsonl").unlink(missing_ok=True)
    set_table(root, "tasks", 'format = "jsonl"\nprompt-field = "prompt"\nexpect-noop-field = "noop"\n'
                             'splits.train = { path = "tasks/train.jsonl" }')
    done = run_envhub("validate", "--check", "--trust", str(root))
    out = done.out + done.err
    assert done.code != 0, out
    assert "train/bad-turns" in out and "must be an integer >= 1, got 'many'" in out, out
    assert "check-task-data" in out or "harness.task-fields" in out, out
    assert "train/wrongly-noop: the task expects doing nothing (noop = true), but an empty answer scores 0" in out
    # The positive control: the task that expects doing nothing and gets 1 for it is not reported.
    assert "train/refuse" not in out, out


def _sqlite_bundle(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    import sqlite3

    root = scaffold(tmp_path, protocol="tool-use")
    (root / "demo" / "tools.py").write_text(
        "import sqlite3\nfrom envhub.runtime import State\n\n\n"
        "def name(db: State[sqlite3.Connection]) -> str:\n"
        "    \"\"\"The shop's name.\"\"\"\n"
        "    return db.execute('select name from shop').fetchone()[0]\n", encoding="utf-8")
    for path, shop in [("state/default.db", "default"), ("state/tasks/a.db", "shop a"), ("state/tasks/b.db", "shop b"),
                       ("../outside.db", "outside")]:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(target) as db:
            db.execute("create table shop (name text)")
            db.execute("insert into shop values (?)", (shop,))
        db.close()
    set_table(root, "harness", 'protocol = "tool-use"\nmax-turns = 2\ntools = ["demo.tools:name"]')
    set_table(root, "state", 'kind = "sqlite"\nsnapshot = "state/default.db"\nsnapshot-field = "db"')
    set_table(root, "verifier", 'kind = "regex"\npattern = "x"')
    write_rows(root, "train", rows)
    return root


def _shop_name(env: Any, task_id: str) -> str:
    with env.episode(env.task("train", task_id)) as ep:
        ep.reset()
        return str(ep.step(turn(call("name"))).info["tool_results"][0])


def test_a_task_picks_its_own_snapshot(tmp_path: Path) -> None:
    rows = [{"id": "a", "prompt": "p", "db": "state/tasks/a.db"}, {"id": "b", "prompt": "p", "db": "state/tasks/b.db"},
            {"id": "none", "prompt": "p"}]
    with envhub.load(_sqlite_bundle(tmp_path, rows), trust_code=True) as env:
        assert [_shop_name(env, t) for t in ("a", "b", "none", "a")] == ["shop a", "shop b", "default", "shop a"]


@pytest.mark.parametrize(("path", "message"), [
    ("../outside.db", "which leaves the bundle"),
    ("state/../../outside.db", "which leaves the bundle"),
    ("/etc/passwd", "must be a relative path in the bundle"),
    ("state/tasks/missing.db", "is not a file"),
    (7, "must be a relative path in the bundle"),
])
def test_a_task_snapshot_cannot_leave_the_bundle(tmp_path: Path, path: Any, message: str) -> None:
    root = _sqlite_bundle(tmp_path, [{"id": "x", "prompt": "p", "db": path}])
    # The positive control: the file outside the bundle exists and is a database a plain
    # path join would open.
    assert (root / "../outside.db").resolve().is_file()
    with envhub.load(root, trust_code=True) as env, env.episode(env.task("train", "x")) as ep, \
            pytest.raises(TaskDataError, match="task 'x': field 'db' \\(state.snapshot-field\\)") as caught:
        ep.reset()
    assert message in str(caught.value)


def test_a_served_environment_carries_turn_rewards_and_withholds_them_mid_episode_on_held_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over real HTTP: the train split's steps carry each turn's reward as it comes; a held-out
    split's come only with the last step (a client that saw them as they came could search a
    held-out task's actions by their rewards), and records of both carry them all."""
    import httpx2

    from tests.serve_fixtures import TOKEN, start_server

    rows = [{"id": "t1", "prompt": "find the goal", "answer": "1"}]
    root = _bundle(tmp_path / "b", rows=rows)
    write_rows(root, "test", [{"id": "h1", "prompt": "find the hidden goal", "answer": "1"}])
    server = start_server([str(root), "--trust"], tmp_path / "serve", env={"ENVHUB_SERVE_TOKENS": TOKEN})
    try:
        base = f"{server.base_url}/v1/environments/acme/demo"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for split, mid_reward in (("train", -0.1), ("test", None)):
            created = httpx2.post(f"{base}/episodes", json={"split": split, "index": 0}, headers=auth).json()
            step = f"{server.base_url}/v1/episodes/{created['episode_id']}/step"
            first = httpx2.post(step, json={"action": turn(call("move", direction="left"))}, headers=auth).json()
            assert first["done"] is False and first["turn_reward"] == mid_reward, first
            assert "turn_rewards" not in first  # only the last step says how the episode went
            last = httpx2.post(step, json={"action": turn(call("move", direction="right"))}, headers=auth).json()
            assert last["done"] and last["turn_reward"] == 1.0
            assert (last["turn_rewards"], last["ended_by"], last["outcome"]) == ([-0.1, 1.0], "environment", "win")

        # The client: RemoteEpisode exposes them, and eval records them.
        scripts = [turn(call("move", direction="left")), turn(call("move", direction="right"))]
        policy = PythonPolicy(lambda messages: scripts[sum(m["role"] == "assistant" for m in messages)],
                              name="scripted")
        monkeypatch.setenv("ENVHUB_SERVE_TOKEN", TOKEN)
        with envhub.load(server.url("acme/demo")) as env:
            for split in ("train", "test"):
                (record,) = envhub.evaluate(env, policy, split=split).records
                assert record.turn_rewards == [pytest.approx(-0.1), 1.0], split
                assert (record.ended_by, record.outcome) == ("environment", "win")
    finally:
        server.stop()


ASYNC_STATE = '''
import asyncio
import pathlib
import threading

from envhub.runtime import State


def note(*event):
    with open(pathlib.Path(__file__).parent / "events.txt", "a") as f:  # the bundle's copy, under tmp_path
        f.write(" ".join(map(str, event)) + "\\n")


class Counter:
    async def reset(self, task):
        await asyncio.sleep(0)  # a real await: a coroutine never awaited does not get here
        self.count = 0
        note("reset")

    async def close(self):
        await asyncio.sleep(0)
        note("close")


def bump(counter: State[Counter]) -> str:
    """Count one."""
    counter.count += 1
    return str(counter.count)


def respond(task, messages, *, state):
    return None


def verify(task, trajectory, state):
    # A sync verifier runs in a worker thread under asyncio, not on the loop's.
    try:
        asyncio.get_running_loop()
        on_loop = True
    except RuntimeError:
        on_loop = False
    note("verify", on_loop, threading.current_thread() is threading.main_thread())
    return 1.0 if state.count == 2 else 0.0
'''


@pytest.mark.parametrize("reset", ["per-episode", "per-task"])
def test_async_state_hooks_and_a_sync_verifier_off_the_loop(tmp_path: Path, reset: str) -> None:
    root = scaffold(tmp_path, protocol="tool-use")
    (root / "demo" / "game.py").write_text(ASYNC_STATE, encoding="utf-8")
    set_table(root, "harness", 'protocol = "tool-use"\nmax-turns = 4\ntools = ["demo.game:bump"]')
    set_table(root, "state", f'kind = "python"\nentry-point = "demo.game:Counter"\nreset = "{reset}"')
    set_table(root, "verifier", 'kind = "python"\nentry-point = "demo.game:verify"')

    async def play(env: Any) -> float | None:
        async with env.episode(next(iter(env.tasks("train")))) as ep:
            await ep.areset()
            await ep.astep(turn(call("bump")))
            await ep.astep(turn(call("bump")))
            return (await ep.astep("done")).reward

    env = envhub.load(root, trust_code=True)
    with env:
        assert asyncio.run(play(env)) == 1.0
        # The sync API runs the async hooks to completion too.
        with env.episode(next(iter(env.tasks("train")))) as ep:
            ep.reset()
            ep.step(turn(call("bump")))
    events = (root / "demo" / "events.txt").read_text().splitlines()
    made = 2 if reset == "per-episode" else 1  # per-task: the second episode shares the first's
    assert events.count("reset") == made and events.count("close") == made
    verify = [e for e in events if e.startswith("verify")]
    assert verify == ["verify False False"]  # a worker thread, with no loop: the loop was not blocked


def test_a_tool_refuses_the_models_request_with_tool_error(tmp_path: Path) -> None:
    """ToolError is the model's mistake; any other exception the environment's fault (the
    positive control: the same refusal raised as a ValueError is counted as a fault)."""
    root = _bundle(tmp_path)
    (root / "demo" / "tools.py").write_text(
        "from envhub.runtime import ToolError\n\n\n"
        "def move(direction: str) -> str:\n"
        "    \"\"\"Move.\"\"\"\n"
        "    raise ToolError(f'you cannot go {direction}')\n\n\n"
        "def look() -> str:\n"
        "    \"\"\"Look.\"\"\"\n"
        "    raise ValueError('you cannot look')\n", encoding="utf-8")
    with envhub.load(root, trust_code=True) as env, env.episode(env.task("train", "t1")) as ep:
        ep.reset()
        result = ep.step(turn(call("move", 0, direction="up"), call("look", 1)))
        assert result.info["tool_results"] == ["Error: you cannot go up", "Error: ValueError: you cannot look"]
        assert (ep.tool_errors, ep.environment_faults) == (2, 1)
