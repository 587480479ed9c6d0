"""The rubric criteria of ``envhub-examples/customer-service``; all three are required, so
the reward is 1.0 when every one is met and 0.0 otherwise (tau-bench's all-or-nothing).

- :func:`database`: the database as the episode left it equals the expected one: the
  snapshot with the task's reference tool calls applied (replayed here on a fresh copy).
  Only the outcome counts: a lookup more or less changes nothing, but cancelling the wrong
  order, refunding to the wrong card or any change the customer did not ask for does.
- :func:`informed`: every one of the task's ``facts`` (a refund amount, a status) appears
  in one of the agent's messages to the customer.
- :func:`handoff`: the agent transferred the customer to a human exactly when the task
  expects it (``expect_transfer``).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from pathlib import Path
from typing import Any

from envhub.runtime import Task

from .tools import TOOLS

__all__ = ["SNAPSHOT", "TABLES", "database", "expected_rows", "handoff", "informed", "table_rows"]

#: The database every episode starts from (``[state] snapshot``).
SNAPSHOT = Path(__file__).resolve().parents[1] / "state" / "retail.sqlite"
#: The tables compared, every row and column.
TABLES = ("customers", "payment_methods", "items", "orders", "order_items", "refunds")


def database(task: Task, state: sqlite3.Connection | None = None) -> dict[str, Any]:
    """1.0 when every table equals the expected database's, else 0.0 with the differences."""
    if state is None:  # scored without an episode: nothing was done
        return {"reward": 0.0, "info": {"error": "no database (scored without an episode)"}}
    expected = expected_rows(task["id"], json.dumps(task["reference"], sort_keys=True))
    actual = table_rows(state)
    diff = {table: {"missing": sorted(set(expected[table]) - set(actual[table]))[:5],
                    "unexpected": sorted(set(actual[table]) - set(expected[table]))[:5]}
            for table in TABLES if expected[table] != actual[table]}
    return {"reward": 0.0 if diff else 1.0, "info": {"differences": diff}}


def informed(task: Task, trajectory: Any) -> dict[str, Any]:
    """1.0 when each of the task's ``facts`` is in some message the agent wrote to the customer."""
    said = "\n".join(str(m.get("content") or "") for m in trajectory.messages if m.get("role") == "assistant")
    missing = [fact for fact in task.get("facts", []) if fact.lower() not in said.lower()]
    return {"reward": 0.0 if missing else 1.0, "info": {"missing": missing}}


def handoff(task: Task, trajectory: Any) -> dict[str, Any]:
    """1.0 when the agent called ``transfer_to_human`` if and only if the task expects it."""
    transferred = any((call.get("function") or {}).get("name") == "transfer_to_human"
                      for call in trajectory.tool_calls)
    expected = bool(task.get("expect_transfer", False))
    return {"reward": 1.0 if transferred == expected else 0.0,
            "info": {"transferred": transferred, "expected": expected}}


def table_rows(db: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every compared table, sorted."""
    return {table: sorted(db.execute(f"SELECT * FROM {table}").fetchall(), key=repr) for table in TABLES}


@functools.lru_cache(maxsize=64)
def expected_rows(task_id: str, reference: str) -> dict[str, list[tuple[Any, ...]]]:
    """The tables after the reference's tool calls run on a fresh in-memory copy of the
    snapshot (cached per task and reference)."""
    source = sqlite3.connect(f"file:{SNAPSHOT}?mode=ro", uri=True)
    db = sqlite3.connect(":memory:")
    try:
        source.backup(db)
        for turn in json.loads(reference):
            for call in turn.get("tool_calls") or []:
                function = call["function"]
                arguments = function["arguments"]
                if isinstance(arguments, str):
                    arguments = json.loads(arguments)
                tool = TOOLS[function["name"]]
                if function["name"] == "transfer_to_human":
                    tool(**arguments)
                else:
                    tool(**arguments, db=db)
        return table_rows(db)
    finally:
        source.close()
        db.close()
