"""The python criteria of ``envhub-examples/shop-db``'s rubric (the answer itself is
checked by the built-in ``numeric`` criterion; see envhub.toml).

A python criterion is called with the keyword arguments its signature names: here the
``trajectory`` (every message of the episode, tool calls and results included) and the
``state`` (the episode's database as the model left it; None when a completion is scored
without an episode). It returns a reward in [0, 1], or a dict with ``reward`` and ``info``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

from .tools import READ_ONLY_REFUSAL

__all__ = ["queried_database", "read_only"]


def queried_database(trajectory: Any) -> dict[str, Any]:
    """1.0 when at least one ``run_sql`` query returned a result (not an error), else 0.0.

    A right answer given without looking at the data was guessed or remembered; this
    criterion is what makes it worth less than one that was looked up.
    """
    answered = [query for query, result in _sql_calls(trajectory) if not result.startswith("Error:")]
    return {"reward": 1.0 if answered else 0.0, "info": {"queries_answered": len(answered)}}


def read_only(trajectory: Any, state: sqlite3.Connection | None = None) -> dict[str, Any]:
    """1.0 unless the model tried to change the database; the rubric makes this a gate.

    ``run_sql`` refuses every write, so a try shows up as its refusal in the conversation.
    The database itself is checked too (``total_changes`` counts the rows changed since the
    episode's copy was opened), so a write that got past the tools would not go unnoticed.
    """
    attempts = [query for query, result in _sql_calls(trajectory) if READ_ONLY_REFUSAL in result]
    changed = state.total_changes if state is not None else 0
    info: dict[str, Any] = {"write_attempts": attempts, "rows_changed": changed}
    return {"reward": 0.0 if attempts or changed else 1.0, "info": info}


def _sql_calls(trajectory: Any) -> Iterator[tuple[str, str]]:
    """(query, result text) for every run_sql call that got a result, in order."""
    results = {m.get("tool_call_id"): str(m.get("content") or "") for m in trajectory.messages
               if m.get("role") == "tool"}
    for call in trajectory.tool_calls:
        function = call.get("function") or {}
        if function.get("name") != "run_sql" or call.get("id") not in results:
            continue
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {}
        query = arguments.get("query", "") if isinstance(arguments, dict) else ""
        yield str(query), results[call.get("id")]
