"""An MCP test server (the SDK's own MCPServer): a counter, and tools that fail in each way.

Run: ``python counter_server.py`` (stdio) or ``python counter_server.py --http PORT`` (streamable HTTP on 127.0.0.1).
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ImageContent, TextContent

server = MCPServer("counter", log_level="WARNING")
_count = 0


@server.tool()
def bump(by: int = 1) -> int:
    """Add ``by`` to the counter and return its new value."""
    global _count
    _count += by
    return _count


@server.tool()
def peek() -> int:
    """The counter's value."""
    return _count


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def greeting() -> str:
    """The value of the GREETING environment variable, and the working directory's name."""
    return f"{os.environ.get('GREETING', '')} from {os.path.basename(os.getcwd())}"


@server.tool()
def boom() -> str:
    """Always raises."""
    raise ValueError("kaboom")


@server.tool()
def nap(seconds: float) -> str:
    """Sleep, blocking the server."""
    time.sleep(seconds)
    return "awake"


@server.tool()
def die() -> str:
    """The server process exits at once."""
    os._exit(3)


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A text block and an image block."""
    return [TextContent(type="text", text="a red dot"),
            ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")]


if __name__ == "__main__":
    if os.environ.get("COUNTER_FAIL_AT_START"):
        print("refusing to start: COUNTER_FAIL_AT_START is set", file=sys.stderr)
        sys.exit(2)
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
