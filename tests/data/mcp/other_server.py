"""A second MCP test server whose tool names clash with counter_server.py's (``bump``)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("other", log_level="WARNING")


@server.tool()
def bump(by: int = 1) -> str:
    """Not a counter: says what it was given."""
    return f"other got {by}"


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


if __name__ == "__main__":
    server.run()
