"""Tools: JSON schemas from signatures and docstrings; calls that fail become observations."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Literal

import pytest

from envhub.runtime import make_tool, unknown_tool


def lookup(name: str, limit: int = 10, *, state: sqlite3.Connection) -> str:
    """Find products by name.

    Args:
        name: part of the product's name, e.g. "lamp".
        limit: the most rows to return;
            at most 50.

    Returns:
        One product per line.
    """
    rows = state.execute("SELECT name FROM products WHERE name LIKE ? LIMIT ?", (f"%{name}%", limit)).fetchall()
    return "\n".join(r[0] for r in rows)


def convert(amount: float, unit: Literal["cm", "in"] = "cm") -> dict[str, float]:
    """Convert a length.

    :param amount: the length to convert.
    :param unit: the unit it is in.
    """
    return {"cm": amount * 2.54 if unit == "in" else amount}


def broken(x: int) -> str:
    """Always fails."""
    raise ValueError("only SELECT queries are allowed")


async def slow_echo(text: str) -> str:
    """Echo asynchronously."""
    return text.upper()


def call(name: str, arguments: object, call_id: str = "call_1") -> dict[str, object]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def test_schema_from_signature_and_google_docstring() -> None:
    tool = make_tool(lookup)
    assert tool.takes_state
    assert tool.spec == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find products by name.",
            "parameters": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": 'part of the product\'s name, e.g. "lamp".'},
                    "limit": {"type": "integer", "default": 10, "description": "the most rows to return; at most 50."},
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        },
    }


def test_schema_from_sphinx_docstring_and_literal() -> None:
    spec = make_tool(convert).spec["function"]
    assert spec["description"] == "Convert a length."
    assert spec["parameters"]["properties"]["unit"] == {"enum": ["cm", "in"], "type": "string", "default": "cm",
                                                        "description": "the unit it is in."}
    assert spec["parameters"]["properties"]["amount"] == {"type": "number", "description": "the length to convert."}


def test_varargs_are_refused() -> None:
    def anything(*args: str) -> str:
        return ""

    with pytest.raises(TypeError, match=r"\*args parameters cannot be described to a model"):
        make_tool(anything, source="pkg.tools:anything")


@pytest.fixture
def shop() -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE products (name TEXT)")
    con.executemany("INSERT INTO products VALUES (?)", [("desk lamp",), ("lamp shade",), ("mug",)])
    return con


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"name": "lamp"}, "desk lamp\nlamp shade"),
    ({"name": "lamp", "limit": 1}, "desk lamp"),
    ({"name": "lamp", "limit": "1"}, "desk lamp"),  # lax: "1" is read as 1
    ("", "Error: invalid arguments for lookup: name: Field required"),
    ("{not json", "Error: the arguments of lookup are not valid JSON (Expecting property name enclosed in double "
                  "quotes at position 1)"),
    ("[1, 2]", "Error: the arguments of lookup must be a JSON object, got list"),
    ({"name": "lamp", "colour": "red"}, "Error: invalid arguments for lookup: colour: Extra inputs are not permitted"),
    ({"name": "lamp", "limit": "many"}, "Error: invalid arguments for lookup: limit: Input should be a valid integer, "
                                        "unable to parse string as an integer"),
], ids=["ok", "default-overridden", "lax-int", "missing", "bad-json", "not-object", "extra", "wrong-type"])
def test_calls(shop: sqlite3.Connection, arguments: object, expected: str) -> None:
    result = make_tool(lookup).call(call("lookup", arguments), shop)
    assert result.message == {"role": "tool", "tool_call_id": "call_1", "name": "lookup", "content": expected}
    assert (result.error is not None) == expected.startswith("Error:")


def test_a_tool_that_raises_answers_with_the_error() -> None:
    result = make_tool(broken).call(call("broken", {"x": 1}))
    assert result.message["content"] == "Error: ValueError: only SELECT queries are allowed"


def test_non_string_results_are_json() -> None:
    assert make_tool(convert).call(call("convert", {"amount": 2, "unit": "in"})).message["content"] == '{"cm": 5.08}'


def test_unknown_and_nameless_tools() -> None:
    tools = [make_tool(lookup), make_tool(convert)]
    assert unknown_tool(call("delete_all", {}), tools).message["content"] == (
        "Error: unknown tool 'delete_all'; available tools: lookup, convert")
    assert unknown_tool({"id": "c", "function": {}}, tools).message["content"] == (
        "Error: the tool call has no function name; available tools: lookup, convert")


def test_async_calls() -> None:
    async def main() -> None:
        assert (await make_tool(slow_echo).acall(call("slow_echo", {"text": "hi"}))).message["content"] == "HI"
        assert (await make_tool(convert).acall(call("convert", {"amount": 1}))).message["content"] == '{"cm": 1.0}'
        assert (await make_tool(broken).acall(call("broken", {"x": 1}))).error == (
            "Error: ValueError: only SELECT queries are allowed")

    asyncio.run(main())

