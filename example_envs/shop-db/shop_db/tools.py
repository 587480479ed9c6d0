"""The tools of ``envhub-examples/shop-db``: look at the shop's database and query it.

Each tool is a plain function; envhub builds its JSON schema from the signature and the
docstring. The parameter annotated ``State[...]`` is hidden from the model: it receives the
episode's private copy of the database, a :class:`sqlite3.Connection`.

Whatever a tool raises reaches the model as a tool message starting ``Error:`` (the
exception's type and message), and the episode goes on, so the errors below are written
for the model to read and act on.

``run_sql`` must not let the model change the database or reach anything outside it. The
episode's copy is private (a write could not leak into the next episode), but a verifier
should be able to trust that the data the model looked at is the data the task was made
from, and SQLite can do more than read tables: ``ATTACH`` and ``VACUUM INTO`` open and write
files. So every statement goes through SQLite's authorizer, which is asked about each
table, column, function and operation *while the statement is compiled*: only reading is
allowed, and anything else is refused before it runs. A progress handler stops queries
that run too long (an accidental cross join, an endless recursive CTE).
"""

from __future__ import annotations

import sqlite3
import sys

from envhub.runtime import State

__all__ = ["MAX_ROWS", "MAX_STEPS", "READ_ONLY_REFUSAL", "describe_table", "list_tables", "run_sql"]

#: How a refused write starts; ``verify.read_only`` looks for it in the run_sql results.
READ_ONLY_REFUSAL = "run_sql is read-only"
#: The most rows one result shows; the model should aggregate or add LIMIT, not page.
MAX_ROWS = 50
#: The most SQLite virtual-machine steps one query may take: a fifth of a second or so.
#: The reference queries need under 10,000, a join that forgets its key a few million.
#: Counted in steps rather than seconds, so whether a query is stopped does not depend on
#: how busy the machine is.
MAX_STEPS = 5_000_000
_STEPS_PER_CHECK = 10_000
_MAX_CELL = 200

# What SQLite asks the authorizer about (the codes of sqlite3_set_authorizer).
_READING = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_NOT_WRITES = {sqlite3.SQLITE_PRAGMA: "PRAGMA", sqlite3.SQLITE_TRANSACTION: "a transaction statement",
               sqlite3.SQLITE_SAVEPOINT: "SAVEPOINT"}
_ROW_WRITES = {sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE}
_WRITES = {
    sqlite3.SQLITE_INSERT: "INSERT", sqlite3.SQLITE_UPDATE: "UPDATE", sqlite3.SQLITE_DELETE: "DELETE",
    sqlite3.SQLITE_CREATE_TABLE: "CREATE TABLE", sqlite3.SQLITE_CREATE_TEMP_TABLE: "CREATE TEMP TABLE",
    sqlite3.SQLITE_CREATE_INDEX: "CREATE INDEX", sqlite3.SQLITE_CREATE_TEMP_INDEX: "CREATE INDEX",
    sqlite3.SQLITE_CREATE_VIEW: "CREATE VIEW", sqlite3.SQLITE_CREATE_TEMP_VIEW: "CREATE VIEW",
    sqlite3.SQLITE_CREATE_TRIGGER: "CREATE TRIGGER", sqlite3.SQLITE_CREATE_TEMP_TRIGGER: "CREATE TRIGGER",
    sqlite3.SQLITE_CREATE_VTABLE: "CREATE VIRTUAL TABLE", sqlite3.SQLITE_DROP_TABLE: "DROP TABLE",
    sqlite3.SQLITE_DROP_TEMP_TABLE: "DROP TABLE", sqlite3.SQLITE_DROP_INDEX: "DROP INDEX",
    sqlite3.SQLITE_DROP_TEMP_INDEX: "DROP INDEX", sqlite3.SQLITE_DROP_VIEW: "DROP VIEW",
    sqlite3.SQLITE_DROP_TEMP_VIEW: "DROP VIEW", sqlite3.SQLITE_DROP_TRIGGER: "DROP TRIGGER",
    sqlite3.SQLITE_DROP_TEMP_TRIGGER: "DROP TRIGGER", sqlite3.SQLITE_DROP_VTABLE: "DROP VIRTUAL TABLE",
    sqlite3.SQLITE_ALTER_TABLE: "ALTER TABLE", sqlite3.SQLITE_REINDEX: "REINDEX", sqlite3.SQLITE_ANALYZE: "ANALYZE",
    sqlite3.SQLITE_ATTACH: "ATTACH (or VACUUM INTO)", sqlite3.SQLITE_DETACH: "DETACH",
}


def list_tables(*, state: State[sqlite3.Connection]) -> str:
    """List the tables of the shop's database, with how many rows each has."""
    names = [row[0] for row in state.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    return "\n".join(f"{name} ({_count(state, name)} rows)" for name in names)


def describe_table(table: str, *, state: State[sqlite3.Connection]) -> str:
    """Show a table's definition, with comments saying what its columns mean, and its first 3 rows.

    Args:
        table: the table's name, as list_tables gives it, e.g. "orders".
    """
    found = state.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE "
                          "AND name NOT LIKE 'sqlite_%'", (table,)).fetchone()
    if found is None:
        raise LookupError(f"there is no table {table!r}; list_tables shows the tables there are")
    name, sql = found
    cursor = state.execute(f"SELECT * FROM {_quote(name)} LIMIT 3")
    return f"{sql}\n\nFirst rows:\n{_table(cursor, 3)}"


def run_sql(query: str, *, state: State[sqlite3.Connection]) -> str:
    """Run one read-only SQL query (SELECT, or WITH ... SELECT) on the shop's SQLite database.

    The result is a line of column names, then one line per row with the values separated
    by tabs: at most 50 rows, so aggregate (COUNT, SUM, AVG, GROUP BY) rather than list.

    Args:
        query: one SQLite statement, e.g. "SELECT COUNT(*) FROM orders WHERE status = 'cancelled'".
    """
    refused: list[PermissionError] = []
    steps = 0

    def authorize(action: int, arg1: str | None, arg2: str | None, database: str | None,
                  trigger: str | None) -> int:
        if action in _READING:
            return sqlite3.SQLITE_OK
        refused.append(_refusal(action, arg1))
        return sqlite3.SQLITE_DENY  # compiling stops here: the statement never runs

    def progress() -> int:
        nonlocal steps
        steps += _STEPS_PER_CHECK
        return 1 if steps > MAX_STEPS else 0  # non-zero interrupts the query

    state.set_authorizer(authorize)
    state.set_progress_handler(progress, _STEPS_PER_CHECK)
    try:
        cursor = state.execute(query)
        if cursor.description is None:
            raise ValueError("the statement returned no result; send one SELECT query")
        # Rows are computed as they are fetched, so fetching stays under both guards.
        return _table(cursor, MAX_ROWS)
    except sqlite3.DatabaseError:
        if refused:
            raise refused[0] from None
        if steps > MAX_STEPS:
            raise TimeoutError(f"the query was stopped after {MAX_STEPS:,} steps; filter earlier, join on keys, "
                               "or aggregate in smaller parts") from None
        raise
    finally:
        # The other tools (and the verifier) use the connection unguarded. None removes an
        # authorizer from Python 3.11 on; on 3.10, one that allows everything does the same.
        state.set_authorizer(None if sys.version_info >= (3, 11) else _allow_all)
        state.set_progress_handler(None, 0)


def _refusal(action: int, target: str | None) -> PermissionError:
    """The error the model reads for an operation the authorizer refused."""
    if action in _NOT_WRITES:
        hint = " (describe_table shows a table's columns)" if action == sqlite3.SQLITE_PRAGMA else ""
        return PermissionError(f"run_sql runs queries only; {_NOT_WRITES[action]} is not available{hint}")
    if action in _ROW_WRITES and (target or "").startswith("sqlite_"):
        # CREATE and DROP are first seen as a write to the schema table, not as themselves.
        what = "CREATE or DROP"
    else:
        what = _WRITES.get(action, f"operation {action}")
    return PermissionError(f"{READ_ONLY_REFUSAL}: {what} is not allowed. The shop's data cannot be changed; "
                           "ask with SELECT (or WITH ... SELECT) instead")


def _allow_all(*args: object) -> int:
    return sqlite3.SQLITE_OK


def _table(cursor: sqlite3.Cursor, limit: int) -> str:
    """A result as text: a header line, then at most ``limit`` tab-separated rows."""
    header = "\t".join(column[0] for column in cursor.description)
    rows = cursor.fetchmany(limit + 1)
    lines = [header] + ["\t".join(_cell(value) for value in row) for row in rows[:limit]]
    if not rows:
        lines.append("(no rows)")
    elif len(rows) > limit:
        lines.append(f"(only the first {limit} rows are shown: aggregate, or add LIMIT)")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    text = str(value).replace("\t", " ").replace("\n", " ")
    return text if len(text) <= _MAX_CELL else text[:_MAX_CELL] + "..."


def _count(state: sqlite3.Connection, table: str) -> int:
    return int(state.execute(f"SELECT COUNT(*) FROM {_quote(table)}").fetchone()[0])


def _quote(name: str) -> str:
    """``name`` as an SQL identifier: double-quoted, inner quotes doubled."""
    return '"' + name.replace('"', '""') + '"'
