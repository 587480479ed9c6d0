"""The MCP endpoint of ``envhub serve`` (spec/serve.md section 6), driven by the mcp SDK's own
client against a real server process: the scaffold's calculator bundle (with a held-out split
whose answers appear nowhere else) and the grid game (a reward on every move)."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tests.serve_fixtures import TOKEN, Server, leaks, make_bundles, start_server

GRID = Path(__file__).resolve().parent.parent / "example_envs" / "grid-game"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    bundles = make_bundles(tmp_path_factory.mktemp("mcp-bundles"))
    s = start_server([str(bundles["tool-use"]), str(GRID), "--trust"], tmp_path_factory.mktemp("serve-mcp"),
                     env={"ENVHUB_SERVE_TOKENS": TOKEN})
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.stderr()


@asynccontextmanager
async def client(url: str, token: str | None = None, **kwargs: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http), **kwargs) as c:
        yield c


def run(coro: Any) -> Any:
    return anyio.run(lambda: coro)


def _calc(server: Server) -> str:
    return f"{server.base_url}/mcp/acme/calc"


async def _play_calc(server: Server, split: str, token: str | None, answer_of: Any) -> dict[str, Any]:
    """A full episode: start, one calculator call, submit; what each step answered."""
    async with client(_calc(server), token) as env_client:
        tools = await env_client.list_tools()
        assert [t.name for t in tools.tools] == ["start_episode"]
        started = await env_client.call_tool("start_episode", {"split": split, "index": 0})
    assert not started.is_error
    data = started.structured_content
    assert data is not None and data["split"] == split
    prompt = started.content[0].text  # type: ignore[union-attr]
    assert data["task"]["prompt"] in prompt
    async with client(server.base_url + data["url"], token) as episode:
        names = [t.name for t in (await episode.list_tools()).tools]
        assert names == ["calculate", "wait", "submit", "end_episode"]
        expression = data["task"]["prompt"].split("What is ")[1].split("?")[0].replace(" multiplied by ", " * ")
        step = await episode.call_tool("calculate", {"expression": expression})
        value = step.content[0].text  # type: ignore[union-attr]
        assert step.structured_content is not None
        assert step.structured_content["done"] is False and step.structured_content["turns"] == 1
        final = await episode.call_tool("submit", {"answer": answer_of(value)})
        assert final.structured_content is not None
        again = None
        with pytest.raises(MCPError) as e:
            again = await episode.call_tool("calculate", {"expression": "1 + 1"})
        assert again is None
    return {"start": data, "step": step.structured_content, "final": final.structured_content,
            "after": e.value, "texts": [prompt, value, json.dumps(step.structured_content),
                                        json.dumps(final.structured_content), json.dumps(data)]}


def test_full_episode_of_the_calculator_scores_and_carries_the_breakdown(server: Server) -> None:
    played = run(_play_calc(server, "train", None, lambda value: value))
    final = played["final"]
    assert final["done"] is True and final["reward"] == 1.0
    assert final["ended_by"] == "policy"
    assert "breakdown" in final["info"]  # the positive control of the held-out test below
    assert played["after"].error.data["code"] == "episode-done"
    assert "is done" in played["after"].message


def test_heldout_split_without_a_token_is_an_mcp_error(server: Server) -> None:
    async def go() -> MCPError:
        async with client(_calc(server)) as c:
            with pytest.raises(MCPError) as e:
                await c.call_tool("start_episode", {"split": "test", "index": 0})
            return e.value
    error = run(go())
    assert error.message == "split 'test' of acme/calc is held out: a bearer token is required"
    assert error.error.data["code"] == "token-required"


def test_heldout_episode_runs_with_the_token_and_withholds_answer_and_breakdown(server: Server) -> None:
    played = run(_play_calc(server, "test", TOKEN, lambda value: value))
    assert played["start"]["held_out"] is True and "data" not in played["start"]["task"]
    final = played["final"]
    assert final["done"] is True and final["reward"] == 1.0
    assert "breakdown" not in final["info"]
    assert played["step"]["turn_reward"] is None
    # The secrets of the held-out rows: the model computed the answer itself (the step's
    # value), so only the fields it never saw must be absent.
    assert [s for s in leaks(played["texts"]) if "LEAKCHECK" in s] == []


def test_heldout_episode_url_refuses_a_call_without_the_token(server: Server) -> None:
    async def go() -> MCPError:
        async with client(_calc(server), TOKEN) as c:
            started = await c.call_tool("start_episode", {"split": "test", "index": 1})
        assert started.structured_content is not None
        async with client(server.base_url + started.structured_content["url"]) as episode:
            with pytest.raises(MCPError) as e:
                await episode.call_tool("calculate", {"expression": "1 + 1"})
            return e.value
    assert run(go()).error.data["code"] == "token-required"


def test_grid_game_moves_carry_turn_rewards_and_the_environment_ends_it(server: Server) -> None:
    async def go() -> list[dict[str, Any]]:
        async with client(f"{server.base_url}/mcp/envhub-examples/grid-game") as c:
            started = await c.call_tool("start_episode", {"split": "dev", "index": 0})
        assert started.structured_content is not None
        steps: list[dict[str, Any]] = []
        async with client(server.base_url + started.structured_content["url"]) as episode:
            for _ in range(60):
                direction = ["north", "east", "south", "west"][len(steps) % 4]
                result = await episode.call_tool("move", {"direction": direction})
                assert result.structured_content is not None
                steps.append(result.structured_content)
                if result.structured_content["done"]:
                    break
        return steps
    steps = run(go())
    assert all(isinstance(s["turn_reward"], float) for s in steps)
    assert steps[-1]["done"] is True and steps[-1]["ended_by"] == "environment"
    assert steps[-1]["reward"] in (0.0, 1.0) and len(steps[-1]["turn_rewards"]) == len(steps)


@pytest.mark.parametrize(("url", "tool", "arguments", "message"), [
    ("/mcp/acme/calc", "start_episode", {"split": "train", "index": "first"},
     "invalid arguments to start_episode: index: Input should be a valid integer"),
    ("/mcp/acme/calc", "start_episode", {"split": "nope"}, None),
    ("/mcp/acme/calc", "calculate", {"expression": "1"},
     "unknown tool 'calculate' on the endpoint of acme/calc (its tool: start_episode)"),
    ("/mcp/acme/nothing", "start_episode", {"split": "train"},
     "this server does not serve acme/nothing (it serves: acme/calc, envhub-examples/grid-game)"),
    ("/mcp/acme/calc/episodes/no-such-episode", "submit", {"answer": "1"},
     "no episode 'no-such-episode' on this server"),
], ids=["bad-index", "unknown-split", "tool-before-episode", "unknown-environment", "unknown-episode"])
def test_malformed_calls_are_mcp_errors_with_a_message(server: Server, url: str, tool: str,
                                                       arguments: dict[str, Any], message: str | None) -> None:
    async def go() -> MCPError:
        async with client(server.base_url + url) as c:
            with pytest.raises(MCPError) as e:
                await c.call_tool(tool, arguments)
            return e.value
    error = run(go())
    if message is None:
        assert "nope" in error.message
    else:
        assert error.message.startswith(message), error.message
    assert "Traceback" not in error.message


def test_unknown_tool_in_an_episode_is_refused_without_taking_a_turn(server: Server) -> None:
    async def go() -> tuple[MCPError, dict[str, Any]]:
        async with client(_calc(server)) as c:
            started = await c.call_tool("start_episode", {"split": "train", "index": 1})
        assert started.structured_content is not None
        async with client(server.base_url + started.structured_content["url"]) as episode:
            with pytest.raises(MCPError) as e:
                await episode.call_tool("rm_rf", {})
            step = await episode.call_tool("calculate", {"expression": "2 + 2"})
            await episode.call_tool("end_episode", {})
        assert step.structured_content is not None
        return e.value, step.structured_content
    error, step = run(go())
    assert error.message == ("unknown tool 'rm_rf' in this episode of acme/calc "
                             "(its tools: calculate, wait, submit, end_episode)")
    assert step["turns"] == 1


def test_legacy_handshake_client_runs_an_episode(server: Server) -> None:
    async def go() -> dict[str, Any]:
        async with client(_calc(server), mode="legacy") as c:
            started = await c.call_tool("start_episode", {"split": "train", "index": 2})
        assert started.structured_content is not None
        async with client(server.base_url + started.structured_content["url"], mode="legacy") as episode:
            final = await episode.call_tool("submit", {"answer": "I do not know"})
        assert final.structured_content is not None
        return dict(final.structured_content)
    final = run(go())
    assert final["done"] is True and final["reward"] == 0.0


def test_unsupported_protocol_version_names_the_supported_ones(server: Server) -> None:
    """A 2026-era request (the version in a header and in the envelope) from a client of a
    version this server does not speak; the SDK answers it, naming what it serves."""
    meta = {"io.modelcontextprotocol/protocolVersion": "1999-01-01", "io.modelcontextprotocol/clientCapabilities": {}}
    response = httpx2.post(_calc(server), timeout=10, headers={
        "MCP-Protocol-Version": "1999-01-01", "Mcp-Method": "tools/list",
        "Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    assert response.status_code == 400
    supported = list(MODERN_PROTOCOL_VERSIONS)
    assert response.json()["error"] == {"code": -32022, "message": "Unsupported protocol version",
                                        "data": {"supported": supported, "requested": "1999-01-01"}}
