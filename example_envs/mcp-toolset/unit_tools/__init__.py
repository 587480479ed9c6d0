"""The unit converter of envhub-examples/mcp-toolset: a table of units (units.py, standard
library only) served as MCP tools by server.py."""
