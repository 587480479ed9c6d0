"""Tools from specs (``[[harness.spec-tools]]``): a JSON-Schema spec bound to a handler, read
from a real bundle in ``tmp_path``. Attacks: arguments that break the schema (wrong types,
extra properties, missing ones, huge nesting), specs that are not tools, handlers that do not
fit; each with a control that the valid form works."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.errors import BundleError
from envhub.manifest import SpecTool as SpecToolEntry
from envhub.runtime._code import CodeSpace
from envhub.runtime._spec_tools import MAX_DEPTH, load_spec_tools, make_spec_tool

ORDER = {"type": "function", "function": {
    "name": "place_order", "description": "Order items for a customer.",
    "parameters": {
        "type": "object",
        "properties": {
            "customer": {"type": "string", "minLength": 1},
            "items": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
                "required": ["sku", "qty"], "additionalProperties": False}},
            "note": {"type": "string"},
        },
        "required": ["customer", "items"],
        "additionalProperties": False,
    }}}

HANDLERS = '''
import sqlite3
from collections.abc import Mapping
from typing import Any

from envhub.runtime import State
from envhub.runtime._tools import Params


def place_order(customer, items, note="", *, db: State[sqlite3.Connection], config: Params[Mapping[str, Any]]):
    total = 0
    for item in items:
        price = db.execute("SELECT price FROM prices WHERE sku = ?", (item["sku"],)).fetchone()
        if price is None:
            raise LookupError(f"no sku {item['sku']!r}")
        total += price[0] * item["qty"]
    return {"customer": customer, "total": total, "currency": config["currency"], "note": note}


async def echo(**kwargs):
    return kwargs


def lookup(term):
    return term.upper()


def missing_customer(items, note=""):
    return None


def needs_more(customer, items, note="", *, extra):
    return None


NOT_A_FUNCTION = 3
'''


def bundle(tmp_path: Path, specs: dict[str, Any]) -> Path:
    root = tmp_path / "shop"
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "__init__.py").write_text("", encoding="utf-8")
    (root / "shop" / "handlers.py").write_text(HANDLERS, encoding="utf-8")
    (root / "tools").mkdir()
    for name, spec in specs.items():
        text = spec if isinstance(spec, str) else json.dumps(spec, indent=2)
        (root / "tools" / name).write_text(text, encoding="utf-8")
    return root


def load(root: Path, *entries: tuple[str, str], params: dict[str, Any] | None = None) -> list[Any]:
    specs = [SpecToolEntry(spec=f"tools/{spec}", handler=f"shop.handlers:{handler}") for spec, handler in entries]
    return load_spec_tools(specs, root, CodeSpace(root, "acme/shop", trusted=True, trust_hint="").load,
                           params=params)


def call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


@pytest.fixture
def db() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:", check_same_thread=False)  # as envhub's sqlite state: tools run in threads
    connection.executescript("CREATE TABLE prices (sku TEXT, price INTEGER); INSERT INTO prices VALUES ('A1', 5);")
    return connection


@pytest.fixture
def order(tmp_path: Path) -> Any:
    root = bundle(tmp_path, {"order.json": ORDER})
    [tool] = load(root, ("order.json", "place_order"), params={"currency": "EUR"})
    return tool


# --- the tool the model sees, and a good call ---------------------------------------------------------------------


def test_the_spec_is_offered_as_written_and_a_valid_call_reaches_the_handler(order: Any, db: Any) -> None:
    assert order.name == "place_order"
    assert order.spec == ORDER  # State and Params parameters are not in it: the spec is the author's
    assert order.takes_state
    result = order.call(call("place_order", {"customer": "ada", "items": [{"sku": "A1", "qty": 2}]}), db)
    assert result.error is None
    assert json.loads(result.message["content"]) == {"customer": "ada", "total": 10, "currency": "EUR", "note": ""}
    assert result.message["tool_call_id"] == "c1" and result.message["name"] == "place_order"


def test_acall_runs_sync_handlers_and_awaits_async_ones(tmp_path: Path, order: Any, db: Any) -> None:
    result = asyncio.run(order.acall(call("place_order", {"customer": "b", "items": [{"sku": "A1", "qty": 1}]}), db))
    assert json.loads(result.message["content"])["total"] == 5
    root = bundle(tmp_path / "echo", {"echo.json": {"name": "echo", "parameters": {"type": "object"}}})
    [echo] = load(root, ("echo.json", "echo"))
    assert not echo.takes_state
    assert json.loads(asyncio.run(echo.acall(call("echo", {"anything": [1]}))).message["content"]) == {"anything": [1]}
    assert json.loads(echo.call(call("echo", {"x": 1})).message["content"]) == {"x": 1}


def test_a_bare_function_object_and_no_parameters(tmp_path: Path) -> None:
    root = bundle(tmp_path, {"lookup.json": {"name": "lookup", "description": "Look up a term.", "parameters": {
        "type": "object", "properties": {"term": {"type": "string"}}, "required": ["term"]}}})
    [tool] = load(root, ("lookup.json", "lookup"))
    assert tool.spec["type"] == "function" and tool.spec["function"]["description"] == "Look up a term."
    assert tool.call(call("lookup", {"term": "tea"})).message["content"] == "TEA"


# --- the model's mistakes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("arguments", "error"), [
    ({"customer": "ada", "items": [{"sku": "A1", "qty": "2"}]},
     "Error: invalid arguments for place_order: at $.items[0].qty: '2' is not of type 'integer'"),
    ({"customer": "ada", "items": [{"sku": "A1", "qty": 0}]},
     "Error: invalid arguments for place_order: at $.items[0].qty: 0 is less than the minimum of 1"),
    ({"customer": "ada"},
     "Error: invalid arguments for place_order: at $: 'items' is a required property"),
    ({"customer": "ada", "items": [{"sku": "A1", "qty": 1}], "discount": 50},
     "Error: invalid arguments for place_order: at $: Additional properties are not allowed "
     "('discount' was unexpected)"),
    ({"customer": "ada", "items": [{"sku": "A1", "qty": 1, "price": 0}]},
     "Error: invalid arguments for place_order: at $.items[0]: Additional properties are not allowed "
     "('price' was unexpected)"),
    ({"customer": "", "items": [], "note": 3},
     "Error: invalid arguments for place_order: at $.customer: '' should be non-empty; "
     "at $.items: [] should be non-empty; at $.note: 3 is not of type 'string'"),
    ({"customer": "ada", "items": [{"sku": "A1", "qty": 1}], "db": "x"},
     "Error: invalid arguments for place_order: at $: Additional properties are not allowed ('db' was unexpected)"),
    ("[1, 2]", "Error: the arguments of place_order must be a JSON object, got list"),
    ("{not json", "Error: the arguments of place_order are not valid JSON (Expecting property name enclosed in "
                  "double quotes at position 1)"),
], ids=["wrong-type-nested", "below-minimum", "missing-required", "extra-property", "extra-nested-property",
        "every-error-named", "state-parameter-name-is-not-an-argument", "not-an-object", "not-json"])
def test_arguments_that_break_the_schema_are_the_models_fault(order: Any, db: Any, arguments: Any,
                                                              error: str) -> None:
    result = order.call(call("place_order", arguments), db)
    assert (result.error, result.fault) == (error, "model")
    assert result.message["content"] == error


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 10_000, 200_000], ids=["just-too-deep", "deep", "very-deep"])
def test_hugely_nested_arguments_are_refused_without_exhausting_the_stack(tmp_path: Path, depth: int) -> None:
    recursive = {"name": "tree", "parameters": {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                                                "type": "object", "properties": {"tree": {"$ref": "#/$defs/node"}}}}
    root = bundle(tmp_path, {"tree.json": recursive})
    [tool] = load(root, ("tree.json", "echo"))
    raw = '{"tree": ' + "[" * depth + "]" * depth + "}"
    result = tool.call(call("tree", raw))
    assert result.fault == "model"
    assert result.error in (f"Error: the arguments of tree nest deeper than {MAX_DEPTH} levels",
                            f"Error: the arguments of tree nest too deeply (at most {MAX_DEPTH} levels)")
    # Control: nesting within the limit is validated and passed on.
    ok = '{"tree": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    assert tool.call(call("tree", ok)).error is None


def test_a_long_offending_value_is_cut_in_the_error(order: Any, db: Any) -> None:
    result = order.call(call("place_order", {"customer": "ada", "items": "x" * 10_000}), db)
    assert result.fault == "model" and len(result.error or "") < 400


def test_extra_arguments_a_permissive_schema_allows_but_the_handler_cannot_take(tmp_path: Path) -> None:
    root = bundle(tmp_path, {"lookup.json": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"term": {"type": "string"}}, "required": ["term"]}}})
    [tool] = load(root, ("lookup.json", "lookup"))
    result = tool.call(call("lookup", {"term": "tea", "limit": 3}))
    assert (result.error, result.fault) == ("Error: invalid arguments for lookup: unexpected 'limit'; it takes term",
                                            "model")


# --- the environment's faults ---------------------------------------------------------------------------------------


def test_a_handler_that_raises_is_the_environments_fault(order: Any, db: Any) -> None:
    result = order.call(call("place_order", {"customer": "ada", "items": [{"sku": "ZZ", "qty": 1}]}), db)
    assert (result.error, result.fault) == ("Error: LookupError: no sku 'ZZ'", "environment")


# --- load errors: the file and the field named -------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "handler", "message"), [
    ("{", "lookup", "tools/bad.json:1:2: error: harness.spec-tools[0].spec: not JSON: Expecting property name "
                    "enclosed in double quotes"),
    ({"name": "lookup", "parameters": {"type": "object", "properties": {"term": {"type": "strang"}}}}, "lookup",
     "tools/bad.json: error: harness.spec-tools[0].spec: spec tool tools/bad.json: 'parameters' is not a valid JSON "
     "Schema (Draft 2020-12) at properties/term/type: 'strang' is not valid under any of the given schemas"),
    ({"name": "lookup", "parameters": {"type": "array"}}, "lookup",
     "tools/bad.json: error: harness.spec-tools[0].spec: spec tool tools/bad.json: 'parameters' must describe an "
     "object (type: object), got type 'array'"),
    ({"name": "look up!", "parameters": {"type": "object"}}, "lookup",
     "tools/bad.json: error: harness.spec-tools[0].spec: spec tool tools/bad.json: 'name' must be 1 to 64 letters, "
     "digits, '_' or '-', got 'look up!'"),
    ({"type": "function", "function": "lookup"}, "lookup",
     "tools/bad.json: error: harness.spec-tools[0].spec: spec tool tools/bad.json: 'function' must be an object with "
     "name, description and parameters"),
    (ORDER, "missing_customer",
     "tools/bad.json: error: harness.spec-tools[0].handler: spec tool tools/bad.json: its handler for 'place_order' "
     "takes no parameter for the schema's 'customer' (and no **kwargs) (shop.handlers:missing_customer)"),
    (ORDER, "needs_more",
     "tools/bad.json: error: harness.spec-tools[0].handler: spec tool tools/bad.json: its handler for 'place_order' "
     "requires 'extra', which the schema does not list as required (give it a default, or add it to 'required') "
     "(shop.handlers:needs_more)"),
    ({"name": "lookup"}, "NOT_A_FUNCTION",
     "tools/bad.json: error: harness.spec-tools[0].handler: handler 'shop.handlers:NOT_A_FUNCTION' is a int, "
     "not a function"),
], ids=["not-json", "invalid-schema", "not-an-object-schema", "bad-name", "function-not-an-object",
        "handler-misses-a-property", "handler-needs-more", "handler-not-callable"])
def test_a_spec_that_cannot_make_a_tool_is_a_load_error_naming_file_and_field(tmp_path: Path, spec: Any,
                                                                              handler: str, message: str) -> None:
    root = bundle(tmp_path, {"bad.json": spec})
    with pytest.raises(BundleError) as e:
        load(root, ("bad.json", handler))
    assert e.value.message == "1 of the harness's spec-tools cannot be used"
    assert len(e.value.problems) == 1
    assert e.value.problems[0].render().splitlines()[0] == message


def test_every_broken_spec_is_reported_at_once(tmp_path: Path) -> None:
    root = bundle(tmp_path, {"order.json": ORDER, "bad.json": "[", "lookup.json": {"name": "place_order"}})
    with pytest.raises(BundleError) as e:
        load(root, ("order.json", "place_order"), ("bad.json", "lookup"), ("lookup.json", "echo"),
             ("missing.json", "lookup"))
    assert [(p.field, p.file) for p in e.value.problems] == [
        ("harness.spec-tools[1].spec", "tools/bad.json"),
        ("harness.spec-tools[2].spec", "tools/lookup.json"),
        ("harness.spec-tools[3].spec", "tools/missing.json")]
    assert "tool 'place_order' is declared twice (also by harness.spec-tools[0])" in e.value.problems[1].message


def test_make_spec_tool_refuses_a_schema_that_is_not_valid() -> None:
    with pytest.raises(ValueError, match=r"^spec tool x.json: 'parameters' is not a valid JSON Schema \(Draft "
                                         r"2020-12\) at required: 3 is not of type 'array'$"):
        make_spec_tool({"name": "f", "parameters": {"type": "object", "required": 3}}, lambda: None, source="x.json")


# --- in a loaded environment ------------------------------------------------------------------------------------


def test_a_loaded_environment_offers_and_runs_its_spec_tools(tmp_path: Path) -> None:
    root = bundle(tmp_path, {"order.json": ORDER})
    (root / "tasks").mkdir()
    (root / "tasks" / "dev.jsonl").write_text(json.dumps({"id": "t1", "prompt": "Order 2 A1 for ada.",
                                                          "answer": "10"}) + "\n", encoding="utf-8")
    (root / "prices.db").unlink(missing_ok=True)
    connection = sqlite3.connect(root / "prices.db")
    connection.executescript("CREATE TABLE prices (sku TEXT, price INTEGER); INSERT INTO prices VALUES ('A1', 5);")
    connection.commit()
    connection.close()
    (root / "envhub.toml").write_text("""\
[environment]
name = "acme/shop"
version = "0.1.0"
description = "Spec tools."
license = "MIT"

[tasks]
format = "jsonl"
splits.dev = { path = "tasks/dev.jsonl" }

[harness]
protocol = "tool-use"
max-turns = 4

[[harness.spec-tools]]
spec = "tools/order.json"
handler = "shop.handlers:place_order"

[verifier]
kind = "numeric"
field = "answer"

[state]
kind = "sqlite"
snapshot = "prices.db"

[config.params]
currency = "EUR"
""", encoding="utf-8")
    with envhub.load(root, trust_code=True) as env:
        assert env.tool_specs == [ORDER]
        with env.episode(env.tasks("dev")[0]) as episode:
            episode.reset()
            stepped = episode.step({"role": "assistant", "content": None, "tool_calls": [
                call("place_order", {"customer": "ada", "items": [{"sku": "A1", "qty": 2}]}, "a"),
                call("place_order", {"customer": "ada", "items": [{"sku": "A1", "qty": "2"}]}, "b")]})
            good, bad = stepped.observation.messages[-2:]
            assert json.loads(good["content"])["total"] == 10
            assert bad["content"] == ("Error: invalid arguments for place_order: at $.items[0].qty: '2' is not of "
                                      "type 'integer'")
            assert episode.step("10").done and episode.score is not None and episode.score.reward == 1.0
