"""``envhub serve --ors-at-root`` driven by the OpenReward SDK's own client (``openreward``).

The SDK is used as a user would: ``AsyncOpenReward(base_url=...)`` (and the sync
``OpenReward``) with ``OPENREWARD_API_URL`` / ``OPENREWARD_SESSION_URL`` pointing at a real
``envhub serve`` process, ``client.environments.get(NAME)``, sessions opened from a split and
index or from a task. Rewards are compared with ``envhub eval --policy reference`` on the same
tasks; the held-out split is checked for leaks with a positive control on the public one.
"""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

openreward = pytest.importorskip("openreward")
from openreward import AsyncOpenReward, OpenReward  # noqa: E402

# The SDK raises these two; they are not re-exported from a public module.
from openreward.api._session.http import AuthenticationError, SessionResponseError  # noqa: E402
from openreward.api.errors import SessionTerminatedError, ToolCallError  # noqa: E402

from tests.conftest import ENVHUB  # noqa: E402
from tests.serve_fixtures import Server, start_server  # noqa: E402

EXAMPLES = Path(__file__).parent.parent / "example_envs"
ARITH, GRID = "envhub-examples/arith-word-problems", "envhub-examples/grid-game"
TOKEN = "ors-sdk-token-0123456789abcdef"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server([str(EXAMPLES / "arith-word-problems"), str(EXAMPLES / "grid-game"), "--trust",
                      "--ors-at-root"], tmp_path_factory.mktemp("ors-sdk"), env={"ENVHUB_SERVE_TOKENS": TOKEN})
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.stderr()


def _reference(tmp: Path, bundle: str, limit: int) -> list[dict[str, Any]]:
    """``envhub eval --policy reference`` on the first ``limit`` dev tasks: its records."""
    out = tmp / f"{bundle}.jsonl"
    run = subprocess.run([ENVHUB, "eval", str(EXAMPLES / bundle), "-s", "dev", "-p", "reference", "-n", str(limit),
                          "--trust", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.fixture(scope="module")
def arith_records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _reference(tmp_path_factory.mktemp("eval"), "arith-word-problems", 8)


@pytest.fixture(scope="module")
def grid_records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _reference(tmp_path_factory.mktemp("eval"), "grid-game", 3)


@pytest.fixture
def sdk(server: Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """The server's URL, with the SDK's environment pointed at it (and its update check off)."""
    monkeypatch.setenv("OPENREWARD_API_URL", server.base_url)
    monkeypatch.setenv("OPENREWARD_SESSION_URL", server.base_url)
    monkeypatch.setenv("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
    monkeypatch.delenv("OPENREWARD_API_KEY", raising=False)
    return server.base_url


def _run(coro_fn: Any, url: str, api_key: str = "") -> Any:
    """Run ``coro_fn(client)`` with a fresh ``AsyncOpenReward`` and close it after."""
    async def main() -> Any:
        client = AsyncOpenReward(api_key=api_key, base_url=url)
        try:
            return await coro_fn(client)
        finally:
            await client.environments.aclose()
    return asyncio.run(main())


def _answer(record: dict[str, Any]) -> str:
    """The reference policy's final text turn."""
    return str(next(m["content"] for m in reversed(record["messages"]) if m["role"] == "assistant"))


def _moves(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(call["function"]["name"], json.loads(call["function"]["arguments"]))
            for m in record["messages"] if m["role"] == "assistant" for call in m.get("tool_calls") or []]


def _rows(split: str) -> list[dict[str, Any]]:
    path = EXAMPLES / "arith-word-problems" / "tasks" / f"{split}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _leaks(texts: list[str], rows: list[dict[str, Any]]) -> list[str]:
    """The rows' solutions (long, unique text) and ``"answer": "N"`` fields found in ``texts``."""
    found = []
    for text in texts:
        for row in rows:
            if row["solution"] in text or f'"answer": "{row["answer"]}"' in text:
                found.append(row["id"])
    return found


# -- 1. full episodes, rewards as envhub eval gives them ---------------------------------------


def test_a_single_turn_episode_scores_as_eval_reference(sdk: str, arith_records: list[dict[str, Any]]) -> None:
    assert [r["reward"] for r in arith_records] == [1.0] * 8  # the comparison below is not of zeros

    async def play(client: AsyncOpenReward) -> list[Any]:
        env = client.environments.get(ARITH)
        assert await env.list_splits() == ["train", "dev", "test"]
        assert await env.num_tasks("dev") == 100
        tasks = {t.task_spec["id"]: t for t in await env.list_tasks("dev")}
        got = []
        for i, record in enumerate(arith_records[:3]):
            # One session from a task (as listed), the others from split and index.
            session = (env.session(task=tasks[record["task_id"]]) if i == 0
                       else env.session(split="dev", index=tasks[record["task_id"]].task_spec["index"]))
            async with session as s:
                prompt = "".join(b.text for b in await s.get_prompt())
                assert tasks[record["task_id"]].task_spec["prompt"] in prompt
                assert await s.list_tools() == [] and (await s.terminal_tool()).name == "submit"
                assert await s.is_assistant_message_final()
                got.append(await s.call_terminal_tool(_answer(record)))
        # Control: a wrong answer on the same task scores 0, so the rewards above are the verifier's.
        async with env.session(split="dev", index=tasks[arith_records[0]["task_id"]].task_spec["index"]) as s:
            got.append(await s.call_terminal_tool("\\boxed{-1}"))
        return got

    outputs = _run(play, sdk)
    assert [(o.reward, o.finished) for o in outputs] == [(r["reward"], True) for r in arith_records[:3]] + [(0.0, True)]


def test_a_tool_use_episode_gets_per_step_rewards_and_ends_itself(
        sdk: str, grid_records: list[dict[str, Any]]) -> None:
    assert all(r["ended_by"] == "environment" and len(r["turn_rewards"]) > 1 for r in grid_records)

    async def play(client: AsyncOpenReward) -> list[list[Any]]:
        env = client.environments.get(GRID)
        assert [t.name for t in await env.list_tools()] == ["move"]
        tasks = {t.task_spec["id"]: t for t in await env.get_task_range("dev", 0, len(grid_records))}
        episodes = []
        for record in grid_records:
            async with env.session(split="dev", index=tasks[record["task_id"]].task_spec["index"]) as s:
                episodes.append([await s.call_tool(name, args) for name, args in _moves(record)])
                # A call after the environment ended the game: the SDK's ToolCallError.
                with pytest.raises(ToolCallError) as e:
                    await s.call_tool("move", {"direction": "north"})
                assert e.value.reason == "episode_finished"
        return episodes

    for record, outputs in zip(grid_records, _run(play, sdk), strict=True):
        assert [o.finished for o in outputs] == [False] * (len(outputs) - 1) + [True]
        # Every step's shaped reward as eval recorded it; the last call reports the episode's reward.
        assert [o.reward for o in outputs[:-1]] == record["turn_rewards"][:-1]
        assert outputs[-1].reward == record["reward"] == 1.0
        assert "You win!" in outputs[-1].blocks[0].text


def test_the_sync_client_plays_an_episode(sdk: str, arith_records: list[dict[str, Any]]) -> None:
    client = OpenReward(api_key="", base_url=sdk)
    try:
        env = client.environments.get(ARITH)
        task = env.get_task("dev", 0)
        assert task.task_spec["id"] == arith_records[0]["task_id"]
        with env.session(task=task) as s:
            out = s.call_terminal_tool(_answer(arith_records[0]))
        assert (out.reward, out.finished) == (arith_records[0]["reward"], True)
    finally:
        client.environments.close()


# -- 2. the held-out boundary -------------------------------------------------------------------


def test_a_held_out_split_needs_the_token_and_its_specs_hold_no_answer(sdk: str) -> None:
    async def refused(client: AsyncOpenReward) -> list[str]:
        env = client.environments.get(ARITH)
        messages = []
        for call in (lambda: env.list_tasks("test"), lambda: env.get_task("test", 0),
                     lambda: env.num_tasks("test")):
            with pytest.raises(AuthenticationError) as e:
                await call()
            messages.append(str(e.value))
        with pytest.raises(AuthenticationError):
            async with env.session(split="test", index=0):
                pass
        return messages

    for message in _run(refused, sdk):
        assert "split 'test' of envhub-examples/arith-word-problems is held out: a bearer token is required" in message

    async def granted(client: AsyncOpenReward) -> tuple[list[str], list[str], Any]:
        env = client.environments.get(ARITH)
        held_out = [json.dumps(t.task_spec) for t in await env.list_tasks("test")]
        held_out.append(json.dumps((await env.get_task("test", 1)).task_spec))
        public = [json.dumps(t.task_spec) for t in await env.get_task_range("dev", 0, 5)]
        row = _rows("test")[0]
        async with env.session(task=await env.get_task("test", 0)) as s:
            held_out.append(json.dumps([b.text for b in await s.get_prompt()]))
            out = await s.call_terminal_tool(f"\\boxed{{{row['answer']}}}")
        held_out.append(json.dumps({"blocks": [b.text for b in out.blocks], "metadata": out.metadata}))
        return held_out, public, out

    held_out, public, out = _run(granted, sdk, api_key=TOKEN)
    assert len(held_out) == 100 + 3
    assert _leaks(held_out, _rows("test")) == []
    # Positive control: the same scan finds the public split's answers, which the spec carries.
    assert {row["id"] for row in _rows("dev")[:5]} <= set(_leaks(public, _rows("dev")))
    # The held-out episode is scored on the server all the same.
    assert (out.reward, out.finished) == (1.0, True)


# -- 3. errors as the SDK surfaces them ---------------------------------------------------------


def test_errors_reach_the_sdk_as_its_own_types(sdk: str, server: Server) -> None:
    async def play(client: AsyncOpenReward) -> None:
        with pytest.raises(SessionResponseError) as e:
            await client.environments.get("acme/nothing").list_splits()
        assert e.value.status == 404
        assert f"unknown environment acme/nothing (this server serves: {ARITH}, {GRID}" in str(e.value)

        env = client.environments.get(GRID)
        async with env.session(split="dev", index=0) as s:
            with pytest.raises(ToolCallError) as tool:
                await s.call_tool("fly", {"direction": "up"})
            assert tool.value.reason == "not_found"
            assert "'fly' is not a valid tool (tools: move, submit)" in str(tool.value)
            with pytest.raises(ToolCallError) as bad:
                await s.call_tool("submit", {"text": "hi"})
            assert bad.value.reason == "input_validation"
            # Neither ends the session: a valid move still plays.
            assert (await s.call_tool("move", {"direction": "north"})).finished is False

            # Deleted on the server (as another holder of the sid would): the reference server's
            # answer, 404 "Active environment not found", as the SDK's SessionResponseError.
            r = httpx2.post(f"{sdk}/delete", headers={"X-Session-ID": str(s.sid)}, timeout=10)
            assert r.status_code == 200
            with pytest.raises(SessionResponseError) as deleted:
                await s.call_tool("move", {"direction": "east"})
            assert deleted.value.status == 404 and "Active environment not found" in str(deleted.value)

    _run(play, sdk)


# A dead SDK session raises before awaiting the request it was given.
@pytest.mark.filterwarnings("ignore:coroutine 'resumable_sse' was never awaited:RuntimeWarning")
def test_an_expired_session_is_the_sdks_session_terminated_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = start_server([str(EXAMPLES / "grid-game"), "--trust", "--ors-at-root", "--idle-timeout", "0.5"], tmp_path)
    try:
        for var in ("OPENREWARD_API_URL", "OPENREWARD_SESSION_URL"):
            monkeypatch.setenv(var, s.base_url)
        monkeypatch.setenv("OPENREWARD_DISABLE_UPDATE_CHECK", "1")

        async def play(client: AsyncOpenReward) -> None:
            # One environment served: the bare paths need no X-Deployment, yet the SDK's is honoured.
            async with client.environments.get(GRID).session(split="dev", index=0) as session:
                assert (await session.call_tool("move", {"direction": "north"})).finished is False
                await asyncio.sleep(1.5)  # past the idle limit; the SDK pings only every 10 s
                for _ in range(2):  # and the handle stays dead
                    with pytest.raises(SessionTerminatedError) as gone:
                        await session.call_tool("move", {"direction": "east"})
                assert "410" in str(gone.value) and "idle" in str(gone.value)

        _run(play, s.base_url)
        gc.collect()  # the warning above is raised when that coroutine is collected: here, not in a later test
    finally:
        assert s.stop() in (0, -signal.SIGTERM), s.stderr()


def test_a_bare_path_with_two_environments_served_needs_x_deployment(server: Server) -> None:
    r = httpx2.get(f"{server.base_url}/tools", timeout=10)
    assert r.status_code == 400 and r.json()["detail"] == (
        f"X-Deployment header is required on /tools: this server serves {ARITH}, {GRID}; name one in it, "
        "as the OpenReward SDK does with the name given to client.environments.get)")
    r = httpx2.get(f"{server.base_url}/tools", headers={"X-Deployment": GRID}, timeout=10)
    assert [t["name"] for t in r.json()["tools"]] == ["move"]
    # The same under /ors, where OPENREWARD_SESSION_URL=http://HOST:PORT/ors points the SDK.
    r = httpx2.get(f"{server.base_url}/ors/tools", headers={"X-Deployment": GRID}, timeout=10)
    assert [t["name"] for t in r.json()["tools"]] == ["move"]


# -- 4. sessions at once ------------------------------------------------------------------------


def test_eight_sessions_at_once(sdk: str, arith_records: list[dict[str, Any]]) -> None:
    async def play(client: AsyncOpenReward) -> list[tuple[str, Any]]:
        env = client.environments.get(ARITH)
        tasks = {t.task_spec["id"]: t for t in await env.get_task_range("dev", 0, 8)}
        opened = asyncio.Event()
        open_now = 0

        async def one(record: dict[str, Any]) -> tuple[str, Any]:
            nonlocal open_now
            async with env.session(task=tasks[record["task_id"]]) as s:
                open_now += 1
                if open_now == len(arith_records):
                    opened.set()
                await asyncio.wait_for(opened.wait(), 30)  # all eight are open before any answers
                return str(s.sid), await s.call_terminal_tool(_answer(record))

        return await asyncio.gather(*(one(r) for r in arith_records))

    results = _run(play, sdk)
    assert len({sid for sid, _ in results}) == 8
    assert [(o.reward, o.finished) for _, o in results] == [(r["reward"], True) for r in arith_records]
