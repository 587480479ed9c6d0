"""``envhub serve --workers N``: worker processes behind one port, against real server processes.

Each test finds connections that landed on a given worker by asking ``GET /v1/health``
(``workers.this``) on a client that holds a single keep-alive connection, so "created on one
worker, played through the other" is what happens, not what probably happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.serve_fixtures import TOKEN, Server, leaks, make_bundles, start_server

ARITH = "/v1/environments/acme/arith"
CALC = "/v1/environments/acme/calc"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WIRE = json.loads((Path(__file__).parent / "data" / "ors" / "wire.json").read_text())


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_bundles(tmp_path_factory.mktemp("workers-bundles"))


def _start(bundles: dict[str, Path], workdir: Path, *extra: str) -> Server:
    return start_server([str(bundles["single-turn"]), str(bundles["tool-use"]), "--trust", "--workers", "2",
                         *extra], workdir, env={"ENVHUB_SERVE_TOKENS": TOKEN})


@pytest.fixture(scope="module")
def server(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = _start(bundles, tmp_path_factory.mktemp("workers-serve"), "--ors-at-root")
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.stderr()
    assert "Traceback" not in s.stderr()


def on_worker(server: Server, index: int, **kwargs: Any) -> httpx2.Client:
    """A client whose one keep-alive connection landed on worker ``index``."""
    for _ in range(200):
        client = httpx2.Client(base_url=server.base_url, timeout=30, limits=httpx2.Limits(max_connections=1),
                               **kwargs)
        if client.get("/v1/health").json()["workers"]["this"] == index:
            return client
        client.close()
    raise AssertionError(f"no connection landed on worker {index} in 200 tries")


def health(server: Server) -> dict[str, Any]:
    result: dict[str, Any] = httpx2.get(server.base_url + "/v1/health", timeout=10).json()
    return result


def play_arith(client: httpx2.Client, index: int) -> float:
    created = client.post(ARITH + "/episodes", json={"split": "dev", "index": index})
    assert created.status_code == 201, created.text
    episode = created.json()
    step = client.post(f"/v1/episodes/{episode['episode_id']}/step",
                       json={"action": str(episode["task"]["data"]["answer"])})
    assert step.status_code == 200, step.text
    assert step.json()["done"] is True
    reward: float = step.json()["reward"]
    return reward


def test_the_default_is_one_process_and_health_says_nothing_of_workers(bundles: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    s = start_server([str(bundles["single-turn"])], tmp_path)
    try:
        body = health(s)
        assert "workers" not in body and body["episodes"]["open"] == 0
        children = Path(f"/proc/{s.proc.pid}/task/{s.proc.pid}/children").read_text().split()
        assert children == []
    finally:
        assert s.stop() in (0, -signal.SIGTERM)


def test_many_clients_play_full_episodes_on_both_workers(server: Server) -> None:
    before = health(server)["workers"]["each"]

    def client_run(n: int) -> list[float]:
        # Each client its own connection; each plays five episodes on it.
        with httpx2.Client(base_url=server.base_url, timeout=30) as client:
            return [play_arith(client, (n + i) % 2) for i in range(5)]

    with ThreadPoolExecutor(24) as pool:
        rewards = [r for rs in pool.map(client_run, range(48)) for r in rs]
    assert rewards == [1.0] * 240
    after = health(server)
    opened = [a["opened"] - b["opened"] for a, b in zip(after["workers"]["each"], before, strict=True)]
    assert sum(opened) == 240 and all(n > 0 for n in opened), opened
    assert after["episodes"]["open"] == 0 and all(w["open"] == 0 for w in after["workers"]["each"])
    assert len({w["pid"] for w in after["workers"]["each"]} | {server.proc.pid}) == 3


def test_an_episode_made_on_one_worker_is_played_through_the_other(server: Server) -> None:
    a, b = on_worker(server, 0), on_worker(server, 1)
    for maker, player in ((a, b), (b, a)):
        episode = maker.post(CALC + "/episodes", json={"split": "train", "index": 0}).json()
        eid = episode["episode_id"]
        assert eid.startswith(f"{maker.get('/v1/health').json()['workers']['this']}.")
        step = player.post(f"/v1/episodes/{eid}/step", json={"action": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "calculate",
                                                              "arguments": '{"expression": "6 * 7"}'}}]}})
        assert step.status_code == 200, step.text
        assert "42" in json.dumps(step.json()["new_messages"])
        status = player.get(f"/v1/episodes/{eid}").json()
        assert (status["turns"], status["done"]) == (1, False)
        final = player.post(f"/v1/episodes/{eid}/step", json={"action": str(episode["task"]["data"]["answer"])})
        assert (final.json()["done"], final.json()["reward"]) == (True, 1.0)
        again = player.post(f"/v1/episodes/{eid}/step", json={"action": "1"})
        assert again.status_code == 409 and again.json()["error"]["code"] == "episode-done"
    # An id no worker made is unknown; one that names a worker process not running is lost.
    unknown = b.get("/v1/episodes/nope")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "episode-not-found"
    stale = b.get("/v1/episodes/0.abcdef.nope")
    assert stale.status_code == 410 and stale.json()["error"]["code"] == "episode-lost"


def test_bodies_over_the_limit_and_stray_headers_through_the_other_worker(server: Server) -> None:
    a, b = on_worker(server, 0), on_worker(server, 1)
    eid = a.post(ARITH + "/episodes", json={"split": "dev", "index": 0}).json()["episode_id"]
    big = json.dumps({"action": "x" * (1024 * 1024 + 10)})
    for path in (f"/v1/episodes/{eid}/step", "/openenv/acme/arith/step"):
        # A declared length over the limit, and a chunked body (no length) that grows past it.
        for content in (big, iter([big[:600_000].encode(), big[600_000:].encode()])):
            r = b.post(path, content=content, headers={"Content-Type": "application/json"})
            assert r.status_code == 413, (path, r.text)
            assert r.json()["error"]["code"] == "body-too-large"
    # An ORS session header on a /v1 request does not take it elsewhere: the path names the episode.
    step = b.post(f"/v1/episodes/{eid}/step", json={"action": "nope"}, headers={"X-Session-ID": "1.abcdef.x"})
    assert step.status_code == 200 and step.json()["reward"] == 0.0


def test_held_out_episodes_across_workers_need_the_token_and_leak_nothing(server: Server) -> None:
    a, b = on_worker(server, 0), on_worker(server, 1)
    # Attack: no token, and a forged hop header, through the worker that does not hold it.
    assert a.post(ARITH + "/episodes", json={"split": "test", "index": 0}).status_code == 401
    created = a.post(ARITH + "/episodes", json={"split": "test", "index": 0}, headers=AUTH)
    assert created.status_code == 201
    eid = created.json()["episode_id"]
    texts = [created.text]
    for headers in ({}, {"X-Envhub-Hop": "0" * 32}, {"Authorization": "Bearer wrong-token-0123456789"}):
        refused = b.post(f"/v1/episodes/{eid}/step", json={"action": "1"}, headers=headers)
        assert refused.status_code == 401, refused.text
        texts.append(refused.text)
        assert b.get(f"/v1/episodes/{eid}", headers=headers).status_code == 401
    # Control: with the token, through the other worker, it plays and scores; no answer is sent.
    step = b.post(f"/v1/episodes/{eid}/step", json={"action": "918273645"}, headers=AUTH)
    assert step.status_code == 200 and step.json()["reward"] == 1.0 and step.json()["done"] is True
    texts.append(step.text)
    assert leaks([t.replace("918273645", "") for t in texts]) == []


def test_ors_sessions_at_the_root_cross_workers(server: Server) -> None:
    agent = {"User-Agent": WIRE["headers"]["user_agent"]}
    a, b = on_worker(server, 0, headers=agent), on_worker(server, 1, headers=agent)
    r = a.post("/create_session", headers={"Accept": "text/event-stream"})
    sid = [line.split(":", 1)[1].strip() for line in r.text.splitlines() if line.startswith("data:")][0]
    assert sid.startswith("0.")
    session = {WIRE["headers"]["session"]: sid}
    assert b.post("/create", json={"split": "train", "index": 0, "env_name": "acme/calc"},
                  headers=session).json() == {"sid": sid}
    prompt = a.get("/acme/calc/prompt", headers=session).json()
    assert prompt and prompt[0]["type"] == "text"
    called = b.post("/acme/calc/call", json={"name": "calculate", "input": {"expression": "6 * 7"}},
                    headers={**session, "Accept": "text/event-stream"})
    end = [line for line in called.text.splitlines() if line.startswith("data:")][-1]
    output = json.loads(end.split(":", 1)[1])
    assert output["ok"] is True and "42" in output["output"]["blocks"][0]["text"]
    assert b.post("/delete", headers=session).json() == {"sid": sid}
    assert a.get("/acme/calc/prompt", headers=session).status_code == 404


def test_openenv_http_episodes_cross_workers(server: Server) -> None:
    a, b = on_worker(server, 0), on_worker(server, 1)
    url = "/openenv/acme/calc"
    started = b.post(url + "/reset", json={"split": "train", "index": 0}).json()
    episode_id = started["observation"]["episode_id"]
    assert episode_id.startswith("1.")
    call = {"tool_calls": [{"name": "calculate", "arguments": {"expression": "2 + 2"}}]}
    step = a.post(url + "/step", json={"action": call, "episode_id": episode_id})
    assert step.status_code == 200, step.text
    assert step.json()["observation"]["step_count"] == 1
    state = a.get(url + "/state", params={"episode_id": episode_id}).json()
    assert state["episode_id"] == episode_id and state["step_count"] == 1


def test_openenv_websocket_sessions_stay_on_their_connection(server: Server) -> None:
    from openenv.core import GenericEnvClient

    def play(_: int) -> tuple[str, float]:
        with GenericEnvClient(base_url=server.base_url + "/openenv/acme/calc").sync() as env:
            started = env.reset(split="train", index=0)
            env.step({"tool_calls": [{"name": "calculate", "arguments": {"expression": "1234 * 5678"}}]})
            final = env.step({"content": str(started.observation["task"]["data"]["answer"])})
            assert final.done is True
            return started.observation["episode_id"], float(final.reward or 0.0)

    with ThreadPoolExecutor(8) as pool:
        played = list(pool.map(play, range(8)))
    assert [reward for _, reward in played] == [1.0] * 8
    assert {episode_id.split(".")[0] for episode_id, _ in played} == {"0", "1"}


def test_mcp_sessions_cross_workers(server: Server) -> None:
    a, b = on_worker(server, 0), on_worker(server, 1)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    r = a.post("/mcp/acme/calc", json=init, headers=accept)
    assert r.status_code == 200, r.text
    session = r.headers["mcp-session-id"]
    assert session.startswith("0.")
    headers = {**accept, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    assert b.post("/mcp/acme/calc", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers=headers).status_code == 202
    listed = b.post("/mcp/acme/calc", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers)
    assert listed.status_code == 200, listed.text
    assert [t["name"] for t in listed.json()["result"]["tools"]] == ["start_episode"]

    async def full_episode() -> float:
        # The SDK's own client, many times: its requests land on either worker.
        async with httpx2.AsyncClient(timeout=30) as http, \
                Client(streamable_http_client(server.base_url + "/mcp/acme/calc", http_client=http)) as env:
            started = await env.call_tool("start_episode", {"split": "train", "index": 0})
        data = started.structured_content
        assert data is not None
        async with httpx2.AsyncClient(timeout=30) as http, \
                Client(streamable_http_client(server.base_url + data["url"], http_client=http)) as episode:
            final = await episode.call_tool("submit", {"answer": str(data["task"]["data"]["answer"])})
        assert final.structured_content is not None
        reward: float = final.structured_content["reward"]
        return reward

    async def many() -> list[float]:
        results: list[float] = []

        async def one() -> None:
            results.append(await full_episode())
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(one)
        return results

    assert anyio.run(many) == [1.0] * 8


def test_a_forwarded_event_stream_ends_when_its_client_goes(server: Server) -> None:
    a = on_worker(server, 0)
    accept = {"Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    session = a.post("/mcp/acme/calc", json=init, headers=accept).headers["mcp-session-id"]
    headers = {"Accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    # The session's one stream of server events, opened through worker 1, which forwards it.
    b = on_worker(server, 1)
    with b.stream("GET", "/mcp/acme/calc", headers=headers) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        # While it is open, the MCP SDK refuses a second one (positive control).
        second = on_worker(server, 1)
        with second.stream("GET", "/mcp/acme/calc", headers=headers) as other:
            assert other.status_code == 409
    b.close()  # the client goes: worker 1 drops its forwarded request, worker 0 ends the stream
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with on_worker(server, 1).stream("GET", "/mcp/acme/calc", headers=headers) as again:
            if again.status_code == 200:
                break
        time.sleep(0.1)
    assert again.status_code == 200


def test_max_episodes_holds_for_the_server_as_a_whole(bundles: dict[str, Path], tmp_path: Path) -> None:
    s = _start(bundles, tmp_path, "--max-episodes", "3")
    try:
        a, b = on_worker(s, 0), on_worker(s, 1)
        ids = [c.post(ARITH + "/episodes", json={"split": "dev", "index": 0}).json()["episode_id"] for c in (a, b, a)]
        for c in (a, b):
            refused = c.post(ARITH + "/episodes", json={"split": "dev", "index": 0})
            assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["message"] == ("the server already has 3 open episodes, its limit "
                                                          "(max-episodes)")
        assert b.delete(f"/v1/episodes/{ids[0]}").status_code == 200  # worker 0's, closed through worker 1
        assert b.post(ARITH + "/episodes", json={"split": "dev", "index": 0}).status_code == 201
        body = health(s)
        assert body["episodes"]["open"] == 3 and body["episodes"]["refused"] == 2
        assert [w["open"] for w in body["workers"]["each"]] == [1, 2]
    finally:
        assert s.stop() in (0, -signal.SIGTERM), s.stderr()


def test_idle_expiry_is_the_owners_and_is_told_through_the_other_worker(bundles: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    s = _start(bundles, tmp_path, "--idle-timeout", "0.5")
    try:
        a, b = on_worker(s, 0), on_worker(s, 1)
        eid = a.post(ARITH + "/episodes", json={"split": "dev", "index": 0}).json()["episode_id"]
        kept = a.post(ARITH + "/episodes", json={"split": "dev", "index": 0}).json()["episode_id"]
        for _ in range(6):  # requests through worker 1 keep worker 0's episode alive
            time.sleep(0.2)
            assert b.get(f"/v1/episodes/{kept}").status_code == 200
        late = b.post(f"/v1/episodes/{eid}/step", json={"action": "1"})
        assert late.status_code == 410 and late.json()["error"]["code"] == "episode-expired"
        assert late.json()["error"]["message"] == f"episode {eid!r} was closed: no request for 0.5 s (idle-timeout-s)"
        assert health(s)["episodes"]["expired"] >= 1
    finally:
        assert s.stop() in (0, -signal.SIGTERM), s.stderr()


def _run_dir(pid: int) -> Path:
    """The directory of worker ``pid``'s private socket (found through /proc/net/unix)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[6] in inodes and "envhub-serve-" in fields[7]:
            return Path(fields[7]).parent
    raise AssertionError(f"worker {pid} has no private socket")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not running; only its parent has yet to reap it.
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def test_a_killed_worker_loses_its_episodes_and_nothing_else(bundles: dict[str, Path], tmp_path: Path) -> None:
    s = _start(bundles, tmp_path)
    try:
        a, b = on_worker(s, 0), on_worker(s, 1)
        lost = a.post(CALC + "/episodes", json={"split": "train", "index": 0}).json()["episode_id"]
        kept = b.post(CALC + "/episodes", json={"split": "train", "index": 0}).json()
        a_sid_client = on_worker(s, 0)
        r = a_sid_client.post("/ors/create_session", headers={"Accept": "text/event-stream"})
        sid = [line.split(":", 1)[1].strip() for line in r.text.splitlines() if line.startswith("data:")][0]
        openenv = a.post("/openenv/acme/calc/reset", json={"split": "train", "index": 0}).json()
        openenv_id = openenv["observation"]["episode_id"]
        dead = health(s)["workers"]["each"][0]["pid"]
        os.kill(dead, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(dead) and time.monotonic() < deadline:
            time.sleep(0.05)
        # Through the living worker: a clear 410, at once.
        started = time.monotonic()
        gone = b.post(f"/v1/episodes/{lost}/step", json={"action": "1"})
        assert time.monotonic() - started < 5
        assert gone.status_code == 410, gone.text
        assert gone.json()["error"] == {
            "status": 410, "code": "episode-lost",
            "message": f"episode {lost!r} was held by worker process 0 of this server, which stopped; its state is "
                       "lost",
            "hint": "start a new episode; the server's other episodes are not affected"}
        ors = b.get("/ors/acme/calc/prompt", headers={"X-Session-ID": sid})
        assert ors.status_code == 410 and "held by worker process 0" in ors.json()["detail"]
        step = b.post("/openenv/acme/calc/step", json={"action": {"content": "1"}, "episode_id": openenv_id})
        assert step.status_code == 410 and "held by worker process 0" in step.json()["detail"]
        # The other worker's episode plays on.
        final = b.post(f"/v1/episodes/{kept['episode_id']}/step", json={"action": str(kept["task"]["data"]["answer"])})
        assert final.status_code == 200 and final.json()["reward"] == 1.0
        # Another worker takes the dead one's place; the lost episode stays lost there too.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            each = health(s)["workers"]["each"]
            if each[0]["pid"] not in (0, dead):
                break
            time.sleep(0.1)
        assert each[0]["pid"] not in (0, dead)
        fresh = on_worker(s, 0)
        again = fresh.post(f"/v1/episodes/{lost}/step", json={"action": "1"})
        assert again.status_code == 410 and again.json()["error"]["code"] == "episode-lost"
        assert play_arith(fresh, 0) == 1.0
        assert "worker 0 (pid" in s.stderr() and "was killed by signal 9" in s.stderr()
        workers = [w["pid"] for w in health(s)["workers"]["each"]]
        run_dir = _run_dir(workers[0])
        assert sorted(p.name for p in run_dir.iterdir()) == ["worker-0.sock", "worker-1.sock"]
    finally:
        code = s.stop()
    # Stopping leaves no process behind, and no socket.
    assert code in (0, -signal.SIGTERM), s.stderr()
    assert not any(_alive(pid) for pid in workers)
    assert not run_dir.exists()
    assert "Traceback" not in s.stderr()


def test_a_killed_parent_takes_its_workers_with_it(bundles: dict[str, Path], tmp_path: Path) -> None:
    s = _start(bundles, tmp_path)
    workers = [w["pid"] for w in health(s)["workers"]["each"]]
    assert all(_alive(pid) for pid in workers)
    run_dir = _run_dir(workers[1])
    s.proc.kill()
    s.proc.wait()
    deadline = time.monotonic() + 20
    while (any(_alive(pid) for pid in workers) or run_dir.exists()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers)
    assert not run_dir.exists()  # the last worker out removed it


def test_each_worker_loads_its_own_copy_of_environments_with_mcp_servers(tmp_path: Path) -> None:
    """An environment-scoped MCP toolset runs its client on an event-loop thread and its
    server as a child process: neither survives a fork. Each worker loads the environments
    itself, so both workers' episodes call real, live servers (this hung before)."""
    from tests.conftest import run_envhub

    example = Path(__file__).resolve().parent.parent / "example_envs" / "mcp-toolset"
    server = start_server([str(example), "--trust", "--workers", "2"], tmp_path / "serve")
    try:
        url = server.urls[0]
        for round_ in range(2):
            out = tmp_path / f"run{round_}.jsonl"
            result = run_envhub("eval", url, "-s", "dev", "--policy", "reference", "-c", "8", "-o", str(out),
                                env={"ENVHUB_HOME": str(tmp_path / "home")})
            assert result.code == 0, result.err
            records = [json.loads(line) for line in out.read_text().splitlines()]
            assert records and all(r["reward"] == 1.0 and r["error"] is None for r in records), records[0]
            assert any(m["role"] == "tool" for r in records for m in r["messages"])  # the MCP tools were called
        opened = [w["opened"] for w in health(server)["workers"]["each"]]
        assert all(n > 0 for n in opened), opened  # both workers played episodes
    finally:
        assert server.stop() in (0, -signal.SIGTERM), server.stderr()
    assert "Traceback" not in server.stderr()
