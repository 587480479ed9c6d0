"""The OpenEnv endpoint of ``envhub serve`` (spec/serve.md, "OpenEnv endpoint"), driven by
openenv-core's own clients (``GenericEnvClient``, its ``SyncEnvClient``) over the WebSocket,
and by OpenEnv's own request and response models over plain HTTP, against a real server
process: the scaffold's calculator bundle (with a held-out split whose answers appear nowhere
else) and the grid game (a reward on every move, episodes the environment ends)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from openenv.core import GenericEnvClient
from openenv.core.env_server.types import (
    EnvironmentMetadata,
    HealthResponse,
    ResetResponse,
    SchemaResponse,
    State,
    StepResponse,
)
from websockets.sync.client import connect as ws_connect

from tests.serve_fixtures import OTHER_TOKEN, TOKEN, Server, leaks, make_bundles, start_server

GRID = Path(__file__).resolve().parent.parent / "example_envs" / "grid-game"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_bundles(tmp_path_factory.mktemp("openenv-bundles"))


@pytest.fixture(scope="module")
def server(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server([str(bundles["tool-use"]), str(GRID), "--trust"], tmp_path_factory.mktemp("serve-openenv"),
                     env={"ENVHUB_SERVE_TOKENS": TOKEN})
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.stderr()


def calc(server: Server, token: str | None = None) -> str:
    """The calculator's OpenEnv URL; a token goes in as the URL's password, which OpenEnv's
    client (it sets no headers) sends as HTTP Basic credentials."""
    base = server.base_url
    if token is not None:
        base = base.replace("http://", f"http://envhub:{token}@")
    return f"{base}/openenv/acme/calc"


def call(expression: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "calculate", "arguments": {"expression": expression}}]}


def test_a_calculator_episode_over_the_websocket_with_the_sync_client(server: Server) -> None:
    with GenericEnvClient(base_url=calc(server)).sync() as env:
        started = env.reset(split="train", index=0)
        obs = started.observation
        assert started.reward is None and started.done is False
        assert obs["split"] == "train" and obs["step_count"] == 0 and not obs["held_out"]
        assert obs["messages"][-1] == {"role": "user",
                                       "content": "What is 1234 multiplied by 5678? Use the calculator tool."}
        assert [t["function"]["name"] for t in obs["tools"]] == ["calculate", "wait"]
        answer = obs["task"]["data"]["answer"]  # a public task carries its row
        assert answer == "7006652"
        tool = env.step(call("1234 * 5678"))
        assert tool.done is False and tool.reward is None
        assert tool.observation["new_messages"][1]["role"] == "tool"
        assert tool.observation["new_messages"][1]["content"] == "7006652"
        state = env.state()
        assert state["episode_id"] == obs["episode_id"] and state["step_count"] == 1
        assert State.model_validate(state).step_count == 1  # OpenEnv's own State model reads it
        final = env.step({"content": f"\\boxed{{{answer}}}"})
        assert final.done is True and final.reward == 1.0  # the episode's reward, on the last step
        assert final.observation["ended_by"] == "policy" and "breakdown" in final.observation["info"]
        with pytest.raises(RuntimeError, match=r"is done \(it has ended\)"):
            env.step({"content": "again"})
        # A reset on the same socket starts the next episode: the split's next task in turn.
        again = env.reset(split="train")
        assert again.observation["episode_id"] != obs["episode_id"]


def test_the_default_task_is_the_first_public_split_in_turn(server: Server) -> None:
    with GenericEnvClient(base_url=calc(server)).sync() as env:
        first = env.reset().observation
        second = env.reset().observation
    assert first["split"] == second["split"] == "train"
    assert first["task"]["id"] != second["task"]["id"]


def test_a_calculator_episode_over_plain_http_with_openenvs_models(server: Server) -> None:
    url = calc(server)
    health = httpx2.get(url + "/health")
    assert HealthResponse.model_validate(health.json()).status == "healthy"
    meta = EnvironmentMetadata.model_validate(httpx2.get(url + "/metadata").json())
    assert meta.name == "acme/calc" and meta.version == "0.1.0"
    schema = SchemaResponse.model_validate(httpx2.get(url + "/schema").json())
    assert set(schema.action["properties"]) == {"content", "tool_calls", "metadata"}
    reset = httpx2.post(url + "/reset", json={"split": "train", "index": 1})
    started = ResetResponse.model_validate(reset.json())
    episode_id = started.observation["episode_id"]
    step = httpx2.post(url + "/step", json={"action": call("2 + 2"), "episode_id": episode_id})
    assert step.status_code == 200, step.text
    stepped = StepResponse.model_validate(step.json())
    assert stepped.done is False and stepped.observation["step_count"] == 1
    state = State.model_validate(httpx2.get(url + "/state", params={"episode_id": episode_id}).json())
    assert state.episode_id == episode_id and state.step_count == 1
    final = StepResponse.model_validate(httpx2.post(url + "/step", json={
        "action": {"content": "\\boxed{0}"}, "episode_id": episode_id}).json())
    assert final.done is True and final.reward == 0.0


def test_grid_game_moves_carry_turn_rewards_and_the_environment_ends_it(server: Server) -> None:
    url = f"{server.base_url}/openenv/envhub-examples/grid-game"
    with GenericEnvClient(base_url=url).sync() as env:
        env.reset(split="dev", index=0)
        steps = []
        for i in range(60):
            direction = ["north", "east", "south", "west"][i % 4]
            result = env.step(
                {"tool_calls": [{"name": "move", "arguments": {"direction": direction}}]})
            steps.append(result)
            if result.done:
                break
    assert all(isinstance(s.observation["turn_reward"], float) for s in steps)
    assert [s.reward for s in steps[:-1]] == [s.observation["turn_reward"] for s in steps[:-1]]
    last = steps[-1]
    assert last.done is True and last.observation["ended_by"] == "environment"
    assert last.reward in (0.0, 1.0) and len(last.observation["turn_rewards"]) == len(steps)


def test_sixteen_sessions_at_once_over_the_websocket(server: Server) -> None:
    """Group sampling: sixteen sessions on one task, each its own episode."""
    async def one(i: int) -> tuple[str, float | None]:
        async with GenericEnvClient(base_url=calc(server)) as env:
            started = await env.reset(split="train", index=0)
            await env.step(call(f"1234 * {5678 + i % 2}"))
            final = await env.step({"content": "\\boxed{7006652}" if i % 2 == 0 else "\\boxed{7007886}"})
            assert final.done
            return started.observation["episode_id"], final.reward

    async def group() -> list[tuple[str, float | None]]:
        return await asyncio.gather(*(one(i) for i in range(16)))

    results = asyncio.run(group())
    assert len({episode_id for episode_id, _ in results}) == 16
    assert [reward for _, reward in results] == [1.0, 0.0] * 8
    health = httpx2.get(f"{server.base_url}/v1/health").json()
    assert health["episodes"]["open"] == 0  # every episode closed with its socket or its end


def test_a_held_out_split_without_a_token_is_refused_in_openenvs_error_shape(server: Server) -> None:
    with GenericEnvClient(base_url=calc(server)).sync() as env, \
            pytest.raises(RuntimeError) as e:
        env.reset(split="test", index=0)
    assert str(e.value) == ("Server error: split 'test' of acme/calc is held out: a bearer token is required "
                            "(code: SESSION_ERROR)")
    refused = httpx2.post(calc(server) + "/reset", json={"split": "test"})
    assert refused.status_code == 401
    assert refused.json()["detail"] == "split 'test' of acme/calc is held out: a bearer token is required"
    wrong = httpx2.post(calc(server) + "/reset", json={"split": "test"},
                        headers={"Authorization": f"Bearer {OTHER_TOKEN}"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "token-invalid"


def test_a_held_out_episode_with_a_token_withholds_answers_and_details(server: Server) -> None:
    seen: list[str] = []
    with GenericEnvClient(base_url=calc(server, TOKEN)).sync() as env:
        started = env.reset(split="test", index=0)
        seen.append(json.dumps(started.observation))
        assert started.observation["held_out"] is True
        assert "data" not in started.observation["task"]  # the public split's task carries it (above)
        seen.append(json.dumps(env.step(call("12345 * 6788")).observation))
        final = env.step({"content": "\\boxed{1}"})
        seen.append(json.dumps(final.observation))
    assert final.done is True and final.reward == 0.0
    assert "breakdown" not in final.observation["info"]  # the public split's last step carries it
    assert leaks(seen) == []
    # The same over HTTP, with a bearer header.
    headers = {"Authorization": f"Bearer {TOKEN}"}
    reset = httpx2.post(calc(server) + "/reset", json={"split": "test", "index": 1}, headers=headers)
    assert reset.status_code == 200 and leaks([reset.text]) == []
    episode_id = reset.json()["observation"]["episode_id"]
    # An episode's id alone does not open a held-out episode to a client without a token.
    stolen = httpx2.get(calc(server) + "/state", params={"episode_id": episode_id})
    assert stolen.status_code == 401


@pytest.mark.parametrize(("action", "message"), [
    ({"bogus": 1}, "invalid action: bogus: Extra inputs are not permitted"),
    ({}, "invalid action: data: an action needs content (the model's text) or tool_calls, e.g. "
         '{"content": "42"} or {"tool_calls": [{"name": "calculate", "arguments": {"expression": "6*7"}}]}'),
    ({"tool_calls": [{"arguments": {}}]}, "invalid action: tool_calls.0.name: Field required"),
    ({"content": 7}, "invalid action: content: Input should be a valid string"),
], ids=["unknown-field", "empty", "call-without-name", "content-not-text"])
def test_a_malformed_action_is_an_openenv_validation_error(server: Server, action: dict[str, Any],
                                                           message: str) -> None:
    with GenericEnvClient(base_url=calc(server)).sync() as env:
        env.reset(split="train", index=0)
        with pytest.raises(RuntimeError) as e:
            env.step(action)
        assert str(e.value) == f"Server error: {message} (code: VALIDATION_ERROR)"
        assert env.step({"content": "\\boxed{7006652}"}).reward == 1.0  # the episode goes on
    reset = httpx2.post(calc(server) + "/reset", json={"split": "train"}).json()
    bad = httpx2.post(calc(server) + "/step", json={"action": action, "episode_id": reset["observation"]["episode_id"]})
    assert bad.status_code == 422 and bad.json()["detail"] == message


def raw_ws(server: Server, messages: list[str]) -> list[dict[str, Any]]:
    url = calc(server).replace("http://", "ws://") + "/ws"
    with ws_connect(url) as ws:
        answers = []
        for message in messages:
            ws.send(message)
            answers.append(json.loads(ws.recv(timeout=30)))
        return answers


@pytest.mark.parametrize(("messages", "code", "message"), [
    (["{not json"], "INVALID_JSON", "Invalid JSON: "),
    (['{"type": "step", "data": {"content": "1"}}'], "EXECUTION_ERROR",
     "step before reset: this session has no episode"),
    (['{"type": "reset", "data": {"split": "nope"}}'], "VALIDATION_ERROR", "acme/calc has no split 'nope'"),
    (['{"type": "reset", "data": {"index": -1}}'], "VALIDATION_ERROR",
     "invalid reset arguments: index: Input should be greater than or equal to 0"),
    (['{"type": "reset", "data": {"temperature": 1}}'], "VALIDATION_ERROR",
     "invalid reset arguments: temperature: Extra inputs are not permitted"),
    (['{"type": "step"}'], "VALIDATION_ERROR", "Invalid message: data: Field required"),
    (['{"type": "state", "extra": 1}'], "VALIDATION_ERROR", "Invalid message: extra: Extra inputs are not permitted"),
], ids=["invalid-json", "step-before-reset", "unknown-split", "negative-index", "unknown-reset-argument",
        "step-without-data", "extra-field"])
def test_malformed_messages_are_openenv_errors_never_500(server: Server, messages: list[str], code: str,
                                                         message: str) -> None:
    answer = raw_ws(server, messages)[-1]
    assert answer["type"] == "error" and answer["data"]["code"] == code
    assert answer["data"]["message"].startswith(message), answer
    assert answer["data"]["status"] < 500


def test_a_client_of_another_protocol_version_is_told_which_is_served(server: Server) -> None:
    # openenv-core's production mode sends MCP messages over the socket, and POST /mcp.
    answer = raw_ws(server, ['{"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list", "id": 1}}'])[0]
    assert answer["type"] == "error" and answer["data"]["code"] == "UNKNOWN_TYPE"
    assert answer["data"]["message"] == (
        "Unknown message type: 'mcp'; envhub serves OpenEnv simulation mode as openenv-core 0.3 speaks it, whose "
        "message types are reset, step, state, close")
    mcp = httpx2.post(calc(server) + "/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "id": 1})
    assert mcp.status_code == 404
    assert "envhub serves OpenEnv simulation mode as openenv-core 0.3" in mcp.json()["detail"]
    # An OpenEnv server before sessions took a step without naming an episode.
    stateless = httpx2.post(calc(server) + "/step", json={"action": {"content": "1"}})
    assert stateless.status_code == 422
    assert "envhub serves OpenEnv simulation mode as openenv-core 0.3 speaks it" in stateless.json()["detail"]


def test_unknown_environment(server: Server) -> None:
    with GenericEnvClient(base_url=f"{server.base_url}/openenv/acme/nothing").sync() as env, \
            pytest.raises(RuntimeError, match=r"this server does not serve acme/nothing"):
        env.reset()
    assert httpx2.get(f"{server.base_url}/openenv/acme/nothing/schema").status_code == 404


# --- the limits: max-episodes, idle expiry, a required token --------------------------------------


@pytest.fixture(scope="module")
def limited(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("serve-openenv-limited")
    config = work / "serve.toml"
    config.write_text(f'''
environments = ["{bundles["tool-use"].as_posix()}"]
trust = true

[access]
tokens = ["{TOKEN}"]
require-token = true

[limits]
max-episodes = 2
idle-timeout-s = 1.0
''')
    s = start_server(["--config", str(config)], work)
    yield s
    s.stop()


def test_a_required_token_is_required_and_taken_from_the_url(limited: Server) -> None:
    with GenericEnvClient(base_url=calc(limited)).sync() as env, \
            pytest.raises(RuntimeError, match=r"this server requires a bearer token for acme/calc"):
        env.reset()
    with GenericEnvClient(base_url=calc(limited, OTHER_TOKEN)).sync() as env, \
            pytest.raises(RuntimeError, match=r"the bearer token is not one this server accepts"):
        env.reset()
    with GenericEnvClient(base_url=calc(limited, TOKEN)).sync() as env:
        assert env.reset().observation["split"] == "train"


def test_max_episodes_and_idle_expiry(limited: Server) -> None:
    async def go() -> tuple[str, str]:
        clients = [GenericEnvClient(base_url=calc(limited, TOKEN)) for _ in range(3)]
        try:
            await clients[0].reset()
            await clients[1].reset()
            with pytest.raises(RuntimeError) as full:
                await clients[2].reset()
            await asyncio.sleep(2.0)  # idle-timeout-s = 1.0: both episodes expire and free their slots
            with pytest.raises(RuntimeError) as expired:
                await clients[0].step({"content": "1"})
            await clients[2].reset()  # a slot is free again
            return str(full.value), str(expired.value)
        finally:
            for c in clients:
                await c.close()

    start = time.monotonic()
    full, expired = asyncio.run(go())
    assert full == ("Server error: the server already has 2 open episodes, its limit (max-episodes) "
                    "(code: CAPACITY_REACHED)")
    assert "was closed: no request for 1 s (idle-timeout-s)" in expired and "EXECUTION_ERROR" in expired
    assert time.monotonic() - start < 15
