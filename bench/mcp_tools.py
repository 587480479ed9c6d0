"""What does a tool served by an MCP server cost, against the same tool as a Python function?

    .venv/bin/python bench/mcp_tools.py [--calls 2000] [--episodes 10] [--repeat 5]

The tool is the same code on both sides (``add(a, b)``), called with the same OpenAI tool call:

1. Per call, an episode's session already open. Baseline: ``make_tool(add).acall(call)`` (a
   direct Python tool: JSON parse, pydantic validation, the call in a worker thread).
   envhub: ``session.acall("add", call)`` to an episode-scoped stdio server (the hop to the
   toolset's loop thread, the MCP round trip over the pipes, the result's conversion). Two
   more rows split the MCP figure: the SDK's own ``client.call_tool`` awaited on its loop
   (the round trip, no envhub), and ``session.call`` from sync code.
2. Per episode, the start-up of an episode-scoped stdio server: ``await toolset.aopen()``
   then ``aclose()`` (start the interpreter, import the SDK, shake hands; stop and reap).

Prints medians over ``--repeat`` rounds (the sides take turns), in microseconds per call and
milliseconds per episode, and the ratio to the direct call. A measurement, not a test: it
exits 0 whatever the timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from envhub.manifest import McpServer
from envhub.runtime import make_tool
from envhub.runtime._mcp import McpToolset

SERVER = '''\
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    server.run()
'''


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def tool_call(i: int) -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": i, "b": 1})}}


async def direct_calls(n: int) -> float:
    tool = make_tool(add)
    start = time.perf_counter()
    for i in range(n):
        result = await tool.acall(tool_call(i))
        assert result.message["content"] == str(i + 1)
    return (time.perf_counter() - start) / n


async def mcp_calls(session: Any, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        result = await session.acall("add", tool_call(i))
        assert result.message["content"] == str(i + 1), result
    return (time.perf_counter() - start) / n


def mcp_sync_calls(session: Any, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        result = session.call("add", tool_call(i))
        assert result.message["content"] == str(i + 1), result
    return (time.perf_counter() - start) / n


def sdk_calls(session: Any, toolset: McpToolset, n: int) -> float:
    """The SDK's call_tool awaited on the loop that owns the client: the MCP round trip alone."""
    _, connection = session._tools["add"]

    async def run() -> float:
        start = time.perf_counter()
        for i in range(n):
            result = await connection.client.call_tool("add", {"a": i, "b": 1})
            assert result.content[0].text == str(i + 1)
        return (time.perf_counter() - start) / n

    return toolset._runner().run(run())


async def episode_starts(toolset: McpToolset, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        session = await toolset.aopen()
        await session.aclose()
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "server.py").write_text(SERVER)
        server = McpServer.model_validate({"name": "bench", "command": ["python", "server.py"]})
        with McpToolset([server], root=root, trusted=True, env_name="bench/mcp") as toolset:
            assert [t.name for t in toolset.tools()] == ["add"]
            session = toolset.open()
            # warm-up: the thread pool, the pydantic model, the pipes
            asyncio.run(direct_calls(100))
            asyncio.run(mcp_calls(session, 100))
            rows: dict[str, list[float]] = {"direct": [], "mcp": [], "mcp-sync": [], "sdk": [], "episode": []}
            for _ in range(args.repeat):
                rows["direct"].append(asyncio.run(direct_calls(args.calls)))
                rows["mcp"].append(asyncio.run(mcp_calls(session, args.calls)))
                rows["mcp-sync"].append(mcp_sync_calls(session, args.calls))
                rows["sdk"].append(sdk_calls(session, toolset, args.calls))
                rows["episode"].append(asyncio.run(episode_starts(toolset, max(1, args.episodes // args.repeat))))
            session.close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    direct = med["direct"]
    print(f"per call, session open, median of {args.repeat} rounds x {args.calls} calls "
          f"(python {sys.version.split()[0]})")
    print(f"  direct Python tool  make_tool(add).acall   {direct * 1e6:8.1f} us   1.00x")
    for key, label in (("mcp", "MCP stdio  session.acall"), ("mcp-sync", "MCP stdio  session.call "),
                       ("sdk", "SDK only   client.call_tool")):
        print(f"  {label:<40} {med[key] * 1e6:8.1f} us  {med[key] / direct:5.2f}x")
    print(f"  envhub's bridge (session.acall - client.call_tool): {(med['mcp'] - med['sdk']) * 1e6:.1f} us per call")
    print(f"  MCP overhead per call (session.acall - direct):     {(med['mcp'] - direct) * 1e6:.1f} us per call")
    print(f"per episode: start and stop an episode-scoped stdio server (aopen + aclose): "
          f"{med['episode'] * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
