"""The MCP server of envhub-examples/mcp-toolset: two tools over units.py, on stdio.

envhub starts it once per episode (``python -m unit_tools.server`` in the bundle directory).
A unit the table lacks is the model's mistake, not a failure of the server: the tools answer
it in plain text, so the model can read the list of units and try again.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from unit_tools.units import QUANTITIES, UnitError, convert

server = MCPServer("units", log_level="WARNING")


@server.tool()
def list_units(quantity: str = "") -> str:
    """The units the converter knows, one per line as 'symbol: name (quantity)'.

    Args:
        quantity: length, mass, volume, time or temperature; empty for all.
    """
    if quantity and quantity not in QUANTITIES:
        return f"unknown quantity {quantity!r}; the quantities are: {', '.join(QUANTITIES)}"
    lines = [f"{symbol}: {name} ({q})" for q, units in QUANTITIES.items() if not quantity or q == quantity
             for symbol, (name, _) in units.items()]
    return "\n".join(lines)


@server.tool(name="convert")
def convert_units(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a value between two units of the same quantity; gives the result to 10 significant digits.

    Args:
        value: The number to convert.
        from_unit: The unit symbol of the value (see list_units), e.g. 'mi'.
        to_unit: The unit symbol to convert to, e.g. 'km'.
    """
    try:
        result = convert(value, from_unit, to_unit)
    except UnitError as e:
        return f"error: {e}"
    return f"{float(result):.10g} {to_unit}"


if __name__ == "__main__":
    server.run()
