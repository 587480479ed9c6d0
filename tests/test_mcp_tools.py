"""Tools from MCP servers (envhub/runtime/_mcp.py) against real servers written with the SDK's
MCPServer (tests/data/mcp/), over stdio and streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from envhub.errors import ManifestError, TrustError, UsageError
from envhub.manifest import McpServer
from envhub.runtime._mcp import McpServerError, McpSession, McpToolset

DATA = Path(__file__).parent / "data" / "mcp"


def server(name: str = "counter", script: str = "counter_server.py", **fields: Any) -> McpServer:
    return McpServer.model_validate({"name": name, "command": ["python", script], **fields})


def call(name: str, arguments: Any = None, *, raw: str | None = None) -> dict[str, Any]:
    text = raw if raw is not None else json.dumps(arguments or {})
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": text}}


def content(session: McpSession, name: str, arguments: Any = None) -> str:
    result = session.call(name, call(name, arguments))
    assert result.error is None, result.error
    return str(result.message["content"])


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process at all (a zombie is one: a reaped process is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def toolset_of() -> Iterator[Any]:
    made: list[McpToolset] = []

    def make(*servers: McpServer, trusted: bool = True) -> McpToolset:
        toolset = McpToolset(servers, root=DATA, trusted=trusted, env_name="acme/counter")
        made.append(toolset)
        return toolset

    yield make
    for toolset in made:
        toolset.close()


# --- scopes ------------------------------------------------------------------------------------

def test_episode_scope_gives_each_episode_a_fresh_server(toolset_of: Any) -> None:
    toolset = toolset_of(server())
    names = [t.name for t in toolset.tools()]
    assert names == ["bump", "peek", "pid", "greeting", "boom", "nap", "die", "picture"]
    bump = toolset.tools()[0]
    assert bump.server == "counter"
    assert bump.spec == {"type": "function", "function": {
        "name": "bump", "description": "Add ``by`` to the counter and return its new value.",
        "parameters": {"type": "object", "properties": {"by": {"default": 1, "type": "integer"}}}}}
    first, second = toolset.open(), toolset.open()
    assert content(first, "bump", {"by": 2}) == "2"
    assert content(first, "bump") == "3"
    assert content(second, "bump") == "1"  # episode 2 starts at 0
    assert content(first, "pid") != content(second, "pid")
    first.close()
    second.close()


def test_environment_scope_shares_one_server(toolset_of: Any) -> None:
    toolset = toolset_of(server(scope="environment"))
    toolset.tools()
    first, second = toolset.open(), toolset.open()
    assert content(first, "bump") == "1"
    assert content(second, "bump") == "2"
    assert content(first, "pid") == content(second, "pid")
    pid = int(content(first, "pid"))
    first.close()  # a session does not stop the shared server
    assert content(second, "peek") == "2"
    second.close()
    assert alive(pid)
    toolset.close()
    assert not alive(pid)


def test_stdio_server_runs_in_the_bundle_directory_with_its_env(toolset_of: Any) -> None:
    toolset = toolset_of(server(env={"GREETING": "hello"}))
    with toolset.open() as session:
        assert content(session, "greeting") == "hello from mcp"


@pytest.fixture
def http_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(DATA / "counter_server.py"), "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the streamable-HTTP test server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_streamable_http_server_needs_no_trust(toolset_of: Any, http_server: str) -> None:
    remote = McpServer.model_validate({"name": "remote", "url": http_server, "prefix": "r_"})
    toolset = toolset_of(remote, trusted=False)
    assert "r_bump" in [t.name for t in toolset.tools()]
    with toolset.open() as first, toolset.open() as second:
        # one server process behind the URL: its state is the server's, whatever the scope
        assert content(first, "r_bump", {"by": 5}) == "5"
        assert content(second, "r_bump") == "6"
        result = first.call("r_boom", call("r_boom"))
        assert (result.fault, result.error) == ("environment", "Error: Error executing tool boom")


def test_url_that_does_not_answer(toolset_of: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = McpServer.model_validate({"name": "remote", "url": f"http://127.0.0.1:{port}/mcp", "timeout-s": 5})
    with pytest.raises(McpServerError, match=r"^MCP server 'remote' \(http://127\.0\.0\.1:\d+/mcp\) cannot be started"):
        toolset_of(dead).tools()


# --- names: prefixes, clashes, allowlists ------------------------------------------------------

def test_same_tool_name_from_two_servers_is_refused(toolset_of: Any) -> None:
    toolset = toolset_of(server(), server("other", "other_server.py"))
    with pytest.raises(ManifestError) as e:
        toolset.tools()
    assert str(e.value) == (
        "acme/counter: the tools of its MCP servers do not fit together\n"
        + e.value.problems[0].render())
    [problem] = e.value.problems
    assert problem.message == "the MCP tool name 'bump' is given by servers 'counter' and 'other'"
    assert problem.field == "harness.mcp-servers[1].prefix"
    assert problem.hint == ('set a prefix on one of them (prefix = "other_"), or leave the tool out with '
                            'tools = [...]')


def test_an_mcp_tool_may_not_take_the_name_of_a_python_tool() -> None:
    toolset = McpToolset([server(tools=["bump", "peek"])], root=DATA, trusted=True, env_name="acme/counter",
                         reserved={"peek", "run_sql"})
    try:
        with pytest.raises(ManifestError) as e:
            toolset.tools()
    finally:
        toolset.close()
    [problem] = e.value.problems
    assert problem.message == "the MCP tool name 'peek' of server 'counter' is the name of another tool of the harness"
    assert problem.hint == 'set a prefix on the server (prefix = "counter_"), or leave the tool out with tools = [...]'


def test_a_prefix_resolves_the_clash(toolset_of: Any) -> None:
    toolset = toolset_of(server(), server("other", "other_server.py", prefix="other_"))
    names = [t.name for t in toolset.tools()]
    assert names[-2:] == ["other_bump", "other_echo"]
    with toolset.open() as session:
        assert content(session, "bump") == "1"
        assert content(session, "other_bump", {"by": 4}) == "other got 4"
        result = session.call("other_bump", call("other_bump", {"by": 4}))
        assert result.message == {"role": "tool", "tool_call_id": "call_1", "name": "other_bump",
                                  "content": "other got 4"}


def test_allowlist_offers_only_the_listed_tools(toolset_of: Any) -> None:
    toolset = toolset_of(server(tools=["peek", "bump"]))
    assert [t.name for t in toolset.tools()] == ["peek", "bump"]
    with toolset.open() as session:
        assert content(session, "bump") == "1"
        refused = session.call("boom", call("boom"))
        assert (refused.fault, refused.error) == ("model", "Error: unknown tool 'boom'; available tools: peek, bump")


def test_allowlisted_tool_the_server_lacks(toolset_of: Any) -> None:
    with pytest.raises(ManifestError) as e:
        toolset_of(server(tools=["bump", "bumpp"])).tools()
    [problem] = e.value.problems
    assert problem.message == ("MCP server 'counter' has no tool 'bumpp' (it has: boom, bump, die, greeting, nap, "
                               "peek, picture, pid)")
    assert problem.field == "harness.mcp-servers[0].tools"


# --- calls: results and faults -----------------------------------------------------------------

@pytest.fixture(scope="module")
def shared_session() -> Iterator[McpSession]:
    toolset = McpToolset([server(scope="environment", **{"timeout-s": 3})], root=DATA, trusted=True)
    with toolset.open() as session:
        yield session
    toolset.close()


@pytest.mark.parametrize(("name", "raw", "fault", "error"), [
    ("peek", '{"by": ', "model",
     "Error: the arguments of peek are not valid JSON (Expecting value at position 7)"),
    ("peek", "[1, 2]", "model", "Error: the arguments of peek must be a JSON object, got list"),
    ("bump", '{"by": "many"}', "model",
     "Error: invalid arguments for bump: Error executing tool bump: 1 validation error for bumpArguments"),
    ("nap", "{}", "model",
     "Error: invalid arguments for nap: Error executing tool nap: 1 validation error for napArguments"),
    ("boom", "{}", "environment", "Error: Error executing tool boom"),
    ("nope", "{}", "model", "Error: unknown tool 'nope'; available tools: bump, peek, pid, greeting, boom, "
                            "nap, die, picture"),
], ids=["not-json", "not-an-object", "schema-refuses", "missing-argument", "tool-raises", "unknown-tool"])
def test_a_failed_call_is_an_answer_with_its_fault(shared_session: McpSession, name: str, raw: str, fault: str,
                                                   error: str) -> None:
    result = shared_session.call(name, call(name, raw=raw))
    assert result.fault == fault
    assert result.error is not None and result.error.startswith(error)
    assert result.message["content"] == result.error
    assert result.message["tool_call_id"] == "call_1"


def test_content_blocks_are_converted(shared_session: McpSession) -> None:
    assert content(shared_session, "picture") == "a red dot\n[image: image/png]"
    assert content(shared_session, "bump", {"by": "3"}) != ""  # the server's lax "3" is its business, not an error


def test_a_call_that_outlasts_timeout_s_is_the_environments_fault(shared_session: McpSession) -> None:
    start = time.monotonic()
    result = shared_session.call("nap", call("nap", {"seconds": 6}))
    assert time.monotonic() - start < 5
    assert (result.fault, result.error) == ("environment", "Error: nap timed out after 3 s")


def test_a_server_that_crashes_mid_episode(toolset_of: Any) -> None:
    toolset = toolset_of(server(**{"timeout-s": 5}))
    session = toolset.open()
    pid = int(content(session, "pid"))
    start = time.monotonic()
    died = session.call("die", call("die"))
    after = session.call("bump", call("bump"))
    assert time.monotonic() - start < 4  # an answer, not a hang
    for result, name in ((died, "die"), (after, "bump")):
        assert result.fault == "environment"
        assert result.error is not None
        assert result.error == (f"Error: {name} failed: the MCP server 'counter' (python counter_server.py) "
                                "stopped answering")  # no stderr: the model reads this
    session.close()
    assert not alive(pid)
    with toolset.open() as fresh:  # the next episode gets a working server
        assert content(fresh, "bump") == "1"


def test_a_server_killed_with_sigkill(toolset_of: Any) -> None:
    toolset = toolset_of(server(**{"timeout-s": 5}))
    session = toolset.open()
    pid = int(content(session, "pid"))
    os.kill(pid, signal.SIGKILL)
    result = session.call("bump", call("bump"))
    assert result.fault == "environment"
    assert "stopped answering" in str(result.error)
    session.close()
    assert not alive(pid)


def test_closing_a_session_reaps_its_servers(toolset_of: Any) -> None:
    toolset = toolset_of(server())
    session = toolset.open()
    pid = int(content(session, "pid"))
    assert alive(pid)  # positive control
    session.close()
    assert not alive(pid)
    session.close()  # idempotent
    closed = session.call("bump", call("bump"))
    assert (closed.fault, closed.error) == ("environment", "Error: bump failed: the episode's MCP session is closed")


def test_closing_the_toolset_reaps_sessions_left_open(toolset_of: Any) -> None:
    toolset = toolset_of(server())
    sessions = [toolset.open() for _ in range(2)]
    pids = [int(content(session, "pid")) for session in sessions]
    assert all(alive(pid) for pid in pids)
    toolset.close()
    assert all(session.closed for session in sessions)
    sessions[0].close()  # closing after the toolset is a no-op
    assert not any(alive(pid) for pid in pids)
    with pytest.raises(UsageError, match="the MCP toolset of acme/counter is closed"):
        toolset.open()


# --- start-up and trust ------------------------------------------------------------------------

def test_untrusted_bundle_may_not_run_a_stdio_server() -> None:
    with pytest.raises(TrustError) as e:
        McpToolset([server(), server("other", "other_server.py")], root=DATA, trusted=False, env_name="acme/counter",
                   trust_hint="envhub trust acme")
    assert str(e.value) == ("acme/counter runs MCP servers from its own code (counter, other), and it is not "
                            "trusted\n  hint: envhub trust acme")


def test_a_server_that_fails_to_start(toolset_of: Any) -> None:
    with pytest.raises(McpServerError) as e:
        toolset_of(server(env={"COUNTER_FAIL_AT_START": "1"})).tools()
    assert str(e.value).startswith("MCP server 'counter' (python counter_server.py) cannot be started: ")
    assert str(e.value).endswith("its stderr ends: refusing to start: COUNTER_FAIL_AT_START is set\n"
                                 "  hint: run the command in the bundle directory (or open the URL) to see why")


def test_a_server_that_never_answers_the_handshake(toolset_of: Any) -> None:
    silent = McpServer.model_validate({"name": "silent", "command": ["python", "-c", "import time; time.sleep(60)"],
                                       "timeout-s": 1})
    start = time.monotonic()
    with pytest.raises(McpServerError, match=r"^MCP server 'silent' \(python -c .*\) did not start within 1 s"):
        toolset_of(silent).tools()
    assert time.monotonic() - start < 8


# --- event loops: sync, async, across tasks and across asyncio.run ------------------------------

def test_async_api_across_tasks(toolset_of: Any) -> None:
    toolset = toolset_of(server())

    async def main() -> None:
        assert [t.name for t in await toolset.atools()][:2] == ["bump", "peek"]
        session = await asyncio.create_task(toolset.aopen())  # opened in one task
        answers = await asyncio.gather(*(asyncio.create_task(session.acall("bump", call("bump")))
                                         for _ in range(5)))  # called from five others at once
        assert sorted(int(a.message["content"]) for a in answers) == [1, 2, 3, 4, 5]
        pid = int((await session.acall("pid", call("pid"))).message["content"])
        await asyncio.create_task(session.aclose())  # closed from a third
        assert not alive(pid)

    asyncio.run(main())


def test_a_session_lives_across_two_asyncio_runs(toolset_of: Any) -> None:
    toolset = toolset_of(server(), server("other", "other_server.py", prefix="o_", scope="environment"))
    session = asyncio.run(toolset.aopen())
    assert asyncio.run(session.acall("bump", call("bump"))).message["content"] == "1"
    assert asyncio.run(session.acall("o_echo", call("o_echo", {"text": "hi"}))).message["content"] == "hi"
    assert session.call("bump", call("bump")).message["content"] == "2"  # and from sync code
    asyncio.run(session.aclose())


def test_a_session_dropped_without_close_stops_its_server(toolset_of: Any) -> None:
    import gc

    toolset = toolset_of(server())
    session = toolset.open()
    pid = int(content(session, "pid"))
    del session
    gc.collect()
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


# --- the example environment: its MCP server, its references ----------------------------------

def test_example_mcp_toolset_references_agree_with_its_server() -> None:
    """Each task's reference calls the example's real MCP server; the tool's results, summed and
    rounded, are the task's answer (so the reference is an honest solution, not a copied answer)."""
    import re
    from decimal import Decimal

    from envhub.manifest import load_manifest

    bundle = Path(__file__).parent.parent / "example_envs" / "mcp-toolset"
    manifest = load_manifest(bundle)
    tasks = [json.loads(line) for split in ("train", "dev", "test")
             for line in (bundle / "tasks" / f"{split}.jsonl").read_text().splitlines()]
    assert len(tasks) == 24
    with McpToolset(manifest.harness.mcp_servers, root=bundle, trusted=True) as toolset:
        assert [t.name for t in toolset.tools()] == ["list_units", "convert"]
        with toolset.open() as session:
            for task in tasks:
                [calls, final] = task["reference"]
                total = Decimal(0)
                for tool_call in calls["tool_calls"]:
                    raw = dict(tool_call, function=dict(tool_call["function"],
                                                        arguments=json.dumps(tool_call["function"]["arguments"])))
                    number, _unit = session.call("convert", raw).message["content"].split()
                    total += Decimal(number)
                assert f"{total:.2f}" == task["answer"], task["id"]
                assert final == f"\\boxed{{{task['answer']}}}"
            mistake = session.call("convert", call("convert", {"value": 1, "from_unit": "mile", "to_unit": "km"}))
            assert mistake.error is None  # the server answers a bad unit in plain text, for the model to read
            assert re.match(r"error: unknown unit 'mile'; the units are: m, km, ", mistake.message["content"])


def test_tools_bound_to_a_session_call_like_python_tools(toolset_of: Any) -> None:
    """What an episode puts in its tool table: the harness's McpTool (no session: an
    environment-fault answer) swapped for the session's bound tool."""
    toolset = toolset_of(server(tools=["bump"]))
    [unbound] = toolset.tools()
    assert unbound.source == "mcp:counter/bump"
    lost = unbound.call(call("bump"), None)
    assert (lost.fault, lost.error) == ("environment", "Error: bump failed: no MCP session is open for this episode")
    with toolset.open() as session:
        bound = session.tools()["bump"]
        assert (bound.name, bound.spec) == (unbound.name, unbound.spec)
        assert bound.call(call("bump"), None).message["content"] == "1"
        assert asyncio.run(session.tool("bump").acall(call("bump"), None)).message["content"] == "2"


def test_eval_the_example_with_a_model_on_the_local_openai_server(openai_server: Any, tmp_path: Path) -> None:
    """``envhub eval`` of the example, as a user runs it: the model (tests/openai_server.py)
    plays each dev task's reference, and its tool calls reach the example's MCP server."""
    import envhub
    from tests.conftest import run_envhub

    bundle = Path(__file__).parent.parent / "example_envs" / "mcp-toolset"
    env = envhub.load(bundle, trust_code=True)
    try:
        offered = [spec["function"]["name"] for spec in env.tool_specs]
    finally:
        env.close()
    if "convert" not in offered:
        pytest.skip("the Environment does not offer the tools of [[harness.mcp-servers]] yet")
    tasks = {row["prompt"]: row for row in map(json.loads, (bundle / "tasks" / "dev.jsonl").read_text().splitlines())}

    def model(request: Any) -> dict[str, Any]:
        row = tasks[request.first_user_content]
        k = sum(1 for m in request.messages if m.get("role") == "assistant")
        if k == 0 and row["id"] == "units-dev-001":  # a model's mistake first: a unit the converter lacks
            return {"role": "assistant", "content": None, "tool_calls": [{"id": "oops", "type": "function",
                    "function": {"name": "convert", "arguments": '{"value": 1, "from_unit": "furlong", '
                                                                 '"to_unit": "m"}'}}]}
        turns = row["reference"][k - 1 if row["id"] == "units-dev-001" else k:]
        turn = turns[0] if turns else "\\boxed{0}"
        if isinstance(turn, str):
            return {"role": "assistant", "content": turn}
        calls = [{**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"])}}
                 for c in turn["tool_calls"]]
        return {"role": "assistant", "content": None, "tool_calls": calls}

    openai_server.script = model
    out = tmp_path / "records.jsonl"
    result = run_envhub("eval", str(bundle), "-s", "dev", "-p", "openai:agent", "--base-url", openai_server.base_url,
                        "--trust", "-o", str(out))
    assert result.code == 0, result.err
    records = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["task_id"])
    assert [r["reward"] for r in records] == [1.0] * 6
    tool_messages = [m["content"] for r in records for m in r["messages"] if m["role"] == "tool"]
    assert tool_messages[0].startswith("error: unknown unit 'furlong'; the units are: m, km, ")
    first = records[0]
    [row] = [t for t in tasks.values() if t["id"] == first["task_id"]]
    args = row["reference"][0]["tool_calls"][0]["function"]["arguments"]
    assert tool_messages[1].endswith(f" {args['to_unit']}")  # the server's answer: "153.8888889 degC"
