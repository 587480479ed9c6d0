"""Tool parameters that receive the episode's state: ``State[T]`` (``Annotated[T, EpisodeState]``)
under any name; a plain ``state`` argument (a US state in an address) stays the model's."""

from __future__ import annotations

import json
import sqlite3
import warnings
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest

import envhub
from envhub.runtime import EpisodeState, State, make_tool
from tests.runtime_fixtures import scaffold, set_table, write_rows


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _properties(tool: Any) -> list[str]:
    return sorted(tool.spec["function"]["parameters"]["properties"])


class UsState(Enum):
    CA = "CA"
    NY = "NY"


def address_str(city: str, state: str) -> str:
    return f"{city}, {state}"


def address_literal(city: str, state: Literal["CA", "NY"]) -> str:
    return f"{city}, {state}"


def address_enum(city: str, state: UsState) -> str:
    return f"{city}, {state.value}"


def address_default(city: str, state: str = "CA") -> str:
    return f"{city}, {state}"


@pytest.mark.parametrize("fn", [address_str, address_literal, address_enum, address_default],
                         ids=["str", "Literal", "Enum", "str-with-default"])
def test_a_typed_state_argument_is_the_models(fn: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation warning either: this is not the old form
        tool = make_tool(fn)
    assert not tool.takes_state
    assert _properties(tool) == ["city", "state"]
    result = tool.call(_call(fn.__name__, city="Sacramento", state="CA"), state=sqlite3.connect(":memory:"))
    assert result.error is None
    assert result.message["content"] == "Sacramento, CA"  # the model's value, not the episode's state


def ship(city: str, state: str, *, db: State[sqlite3.Connection]) -> str:
    """Ship to an address.

    Args:
        city: the city.
        state: the US state, two letters.
    """
    (zone,) = db.execute("SELECT zone FROM zones WHERE state = ?", (state,)).fetchone()
    return f"{city}, {state}: zone {zone}"


def ship_annotated(state: str, *, store: Annotated[sqlite3.Connection, EpisodeState]) -> str:
    (zone,) = store.execute("SELECT zone FROM zones WHERE state = ?", (state,)).fetchone()
    return f"{state}: zone {zone}"


def ship_marker_instance(state: str, *, store: Annotated[sqlite3.Connection, EpisodeState()]) -> str:
    return ship_annotated(state, store=store)


def _zones() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE zones (state TEXT, zone INTEGER)")
    db.executemany("INSERT INTO zones VALUES (?, ?)", [("CA", 8), ("NY", 2)])
    return db


@pytest.mark.parametrize("fn", [ship, ship_annotated, ship_marker_instance],
                         ids=["State[T]", "Annotated-class", "Annotated-instance"])
def test_state_by_type_is_hidden_and_injected_beside_a_state_argument(fn: Any) -> None:
    tool = make_tool(fn)
    assert tool.takes_state
    assert "state" in _properties(tool) and "db" not in _properties(tool) and "store" not in _properties(tool)
    result = tool.call(_call(fn.__name__, city="Albany", state="NY"), state=_zones()) if fn is ship else \
        tool.call(_call(fn.__name__, state="NY"), state=_zones())
    assert result.error is None, result.message
    assert "NY" in result.message["content"] and "zone 2" in result.message["content"]


def test_ship_describes_state_to_the_model() -> None:
    parameters = make_tool(ship).spec["function"]["parameters"]
    assert parameters["properties"]["state"] == {"type": "string", "description": "the US state, two letters."}
    assert parameters["required"] == ["city", "state"]


def test_the_model_cannot_send_the_injected_parameter() -> None:
    result = make_tool(ship).call(_call("ship", city="x", state="CA", db="evil"), state=_zones())
    assert result.error is not None and "db" in result.error


def two_states(a: State[Path], b: State[Path]) -> str:
    return ""


def test_two_state_parameters_are_refused() -> None:
    with pytest.raises(TypeError, match=r"both 'a' and 'b' ask for the episode's state; keep one"):
        make_tool(two_states)


# --- the old form: a parameter named ``state`` that no model could fill in -----------------


def old_sqlite(query: str, *, state: sqlite3.Connection) -> str:
    return str(state.execute(query).fetchone()[0])


def old_path(*, state: Path) -> str:
    return state.name


def old_optional(*, state: Path | None = None) -> str:
    return "none" if state is None else state.name


def old_untyped(*, state) -> str:  # type: ignore[no-untyped-def]
    return type(state).__name__


class Browser:
    """A python state object (no JSON schema)."""


def old_object(*, state: Browser) -> str:
    return type(state).__name__


@pytest.mark.parametrize(("fn", "arguments", "state", "expected"), [
    (old_sqlite, {"query": "SELECT 7"}, _zones(), "7"),
    (old_path, {}, Path("/tmp/ws"), "ws"),
    (old_optional, {}, Path("/tmp/ws"), "ws"),
    (old_untyped, {}, Browser(), "Browser"),
    (old_object, {}, Browser(), "Browser"),
], ids=["sqlite3.Connection", "Path", "Path-or-None", "untyped", "python-object"])
def test_the_old_state_parameter_still_receives_the_state_with_a_warning(fn: Any, arguments: dict[str, Any],
                                                                         state: Any, expected: str) -> None:
    with pytest.warns(DeprecationWarning, match=r"annotate it State\[\.\.\.\] \(from envhub.runtime import State\)"):
        tool = make_tool(fn)
    assert "state" not in _properties(tool)
    result = tool.call(_call(fn.__name__, **arguments), state=state)
    assert result.message["content"] == expected


# --- through a loaded bundle --------------------------------------------------------------

TOOLS = '''
import sqlite3
from envhub.runtime import State


def ship(city: str, state: str, *, db: State[sqlite3.Connection]) -> str:
    """Ship to an address.

    Args:
        city: the city.
        state: the US state, two letters.
    """
    (zone,) = db.execute("SELECT zone FROM zones WHERE state = ?", (state,)).fetchone()
    return f"{city}, {state}: zone {zone}"
'''


def test_a_bundle_tool_with_a_state_argument_sees_the_models_value(tmp_path: Path) -> None:
    root = scaffold(tmp_path, protocol="tool-use")
    (root / "demo" / "shipping.py").write_text(TOOLS, encoding="utf-8")
    text = (root / "envhub.toml").read_text().replace('tools = ["demo.tools:calculate"]',
                                                      'tools = ["demo.shipping:ship"]')
    (root / "envhub.toml").write_text(text)
    db = root / "state" / "zones.db"
    db.parent.mkdir(exist_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE zones (state TEXT, zone INTEGER)")
        conn.executemany("INSERT INTO zones VALUES (?, ?)", [("CA", 8), ("NY", 2)])
    conn.close()
    set_table(root, "state", 'kind = "sqlite"\nsnapshot = "state/zones.db"')
    write_rows(root, "train", [{"id": "a", "prompt": "p", "answer": "1"}])
    with envhub.load(root, trust_code=True) as env:
        (spec,) = env.tool_specs
        assert sorted(spec["function"]["parameters"]["properties"]) == ["city", "state"]
        (task,) = env.tasks("train")
        with env.episode(task) as episode:
            episode.reset()
            call = _call("ship", city="Sacramento", state="CA")
            result = episode.step({"role": "assistant", "content": None, "tool_calls": [call]})
    assert result.observation.messages[-1]["content"] == "Sacramento, CA: zone 8"
