"""example_envs/shop-db: the read-only SQL tools, fresh state per episode, the rubric's
criteria, the generator's reproducibility, and a push/pull/eval round trip.

Every test plays real episodes on the real bundle (its tools, its database, its verifier);
that the reference scores 1.0 on every task is checked for all examples elsewhere
(validate --check over example_envs)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.runtime import Environment, Task
from tests.conftest import Result

SHOP = Path(__file__).resolve().parents[1] / "example_envs" / "shop-db"


@pytest.fixture(scope="module")
def env() -> Iterator[Environment]:
    with envhub.load(SHOP, trust_code=True) as loaded:
        yield loaded


@pytest.fixture(scope="module")
def task(env: Environment) -> Task:
    """A dev task with a two-table question: 'How many orders has <customer> placed ...'."""
    return next(t for t in env.tasks("dev") if t["template"] == "customer-orders")


def sql(query: str, call_id: str = "c1") -> dict[str, Any]:
    """An assistant turn calling run_sql."""
    call = {"id": call_id, "type": "function",
            "function": {"name": "run_sql", "arguments": json.dumps({"query": query})}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def dump(connection: sqlite3.Connection) -> str:
    return "\n".join(connection.iterdump())


def snapshot_dump() -> str:
    connection = sqlite3.connect(f"file:{SHOP / 'state' / 'shop.sqlite'}?mode=ro", uri=True)
    try:
        return dump(connection)
    finally:
        connection.close()


# --- the tools ---------------------------------------------------------------------------------


def test_the_model_sees_three_tools_and_never_the_state(env: Environment) -> None:
    functions = {spec["function"]["name"]: spec["function"] for spec in env.tool_specs}
    assert list(functions) == ["list_tables", "describe_table", "run_sql"]
    assert functions["list_tables"]["parameters"]["properties"] == {}
    assert functions["describe_table"]["parameters"]["required"] == ["table"]
    assert list(functions["run_sql"]["parameters"]["properties"]) == ["query"]
    assert functions["run_sql"]["description"].startswith("Run one read-only SQL query (SELECT, or WITH ... SELECT)")


def test_list_and_describe_tables(env: Environment, task: Task) -> None:
    with env.episode(task) as episode:
        episode.reset()
        result = episode.step({"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "list_tables", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "describe_table", "arguments": '{"table": "ORDERS"}'}},
            {"id": "c", "type": "function", "function": {"name": "describe_table", "arguments": '{"table": "staff"}'}},
        ]})
    tables, orders, missing = result.info["tool_results"]
    assert tables == ("customers (40 rows)\norder_items (528 rows)\norders (260 rows)\nproducts (30 rows)\n"
                      "reviews (133 rows)")
    assert orders.startswith("CREATE TABLE orders (\n")
    assert "ordered_on  TEXT NOT NULL,  -- 'YYYY-MM-DD'" in orders  # the schema's comments document it
    assert orders.endswith("First rows:\nid\tcustomer_id\tordered_on\tstatus\n1\t27\t2024-01-08\tcancelled\n"
                           "2\t14\t2024-01-08\tdelivered\n3\t12\t2024-01-09\tdelivered")
    assert missing == "Error: LookupError: there is no table 'staff'; list_tables shows the tables there are"


@pytest.mark.parametrize(("query", "refused"), [
    ("DELETE FROM orders", "DELETE"),
    ("UPDATE products SET stock = 0", "UPDATE"),
    ("INSERT INTO customers (name, city, joined_on) VALUES ('Eve', 'Oslo', '2024-01-01')", "INSERT"),
    ("DROP TABLE reviews", "CREATE or DROP"),
    ("CREATE TEMP TABLE scratch AS SELECT * FROM orders", "CREATE or DROP"),
    ("ALTER TABLE orders ADD COLUMN note TEXT", "ALTER TABLE"),
    ("WITH gone AS (SELECT id FROM orders) DELETE FROM orders WHERE id IN gone", "DELETE"),
    ("ATTACH DATABASE '{tmp}/copy.db' AS copy", "ATTACH (or VACUUM INTO)"),
    ("VACUUM INTO '{tmp}/copy.db'", "ATTACH (or VACUUM INTO)"),
], ids=["delete", "update", "insert", "drop", "create-temp", "alter", "cte-delete", "attach", "vacuum-into"])
def test_writes_are_refused_and_the_database_is_unchanged(env: Environment, task: Task, tmp_path: Path,
                                                          query: str, refused: str) -> None:
    with env.episode(task) as episode:
        episode.reset()
        before = dump(episode.state)
        result = episode.step(sql(query.format(tmp=tmp_path)))
        assert result.info["tool_errors"] == [
            f"Error: PermissionError: run_sql is read-only: {refused} is not allowed. The shop's data cannot be "
            "changed; ask with SELECT (or WITH ... SELECT) instead"]
        assert dump(episode.state) == before and episode.state.total_changes == 0
        assert not result.done  # a refusal is an observation; the model can go on
    assert not (tmp_path / "copy.db").exists()  # nothing was written outside the database


@pytest.mark.parametrize(("query", "error"), [
    ("SELECT nme FROM customers", "Error: OperationalError: no such column: nme"),
    ("SELECT * FROM staff", "Error: OperationalError: no such table: staff"),
    ("SELECT 1; SELECT 2", "Error: ProgrammingError: You can only execute one statement at a time."),
    ("PRAGMA table_info(orders)", "Error: PermissionError: run_sql runs queries only; PRAGMA is not available "
                                  "(describe_table shows a table's columns)"),
    ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n",
     "Error: TimeoutError: the query was stopped after 5,000,000 steps; filter earlier, join on keys, or "
     "aggregate in smaller parts"),
], ids=["bad-column", "bad-table", "two-statements", "pragma", "endless-cte"])
def test_sql_errors_are_reported_to_the_model(env: Environment, task: Task, query: str, error: str) -> None:
    with env.episode(task) as episode:
        episode.reset()
        result = episode.step(sql(query))
        assert result.info["tool_errors"] == [error]
        # The same episode goes on: the next query works (the guards were removed after the error).
        result = episode.step(sql("SELECT COUNT(*) AS n FROM orders", "c2"))
        assert result.info["tool_results"] == ["n\n260"]


def test_results_show_at_most_50_rows(env: Environment, task: Task) -> None:
    with env.episode(task) as episode:
        episode.reset()
        [text] = episode.step(sql("SELECT id, status FROM orders ORDER BY id")).info["tool_results"]
    lines = text.splitlines()
    assert lines[:2] == ["id\tstatus", "1\tcancelled"] and len(lines) == 1 + 50 + 1
    assert lines[-1] == "(only the first 50 rows are shown: aggregate, or add LIMIT)"


# --- state: a fresh copy per episode ---------------------------------------------------------------


def test_each_episode_gets_a_fresh_copy_of_the_database(env: Environment, task: Task) -> None:
    on_disk = hashlib.sha256((SHOP / "state" / "shop.sqlite").read_bytes()).hexdigest()
    with env.episode(task) as first:
        first.reset()
        first.state.execute("DELETE FROM orders")  # what a tool with a bug could do
        first.state.commit()
        assert first.state.execute("SELECT COUNT(*) FROM orders").fetchone() == (0,)
        with env.episode(task) as second:  # even while the first is still open
            second.reset()
            assert second.state is not first.state
            assert dump(second.state) == snapshot_dump()
    assert hashlib.sha256((SHOP / "state" / "shop.sqlite").read_bytes()).hexdigest() == on_disk


# --- the rubric ----------------------------------------------------------------------------------------


def play(env: Environment, task: Task, turns: list[dict[str, Any] | str]) -> Any:
    """Play ``turns`` as the assistant until the episode ends; its final StepResult."""
    with env.episode(task) as episode:
        episode.reset()
        for turn in turns:
            result = episode.step(turn)
            if result.done:
                return result
    raise AssertionError("the episode did not end")


def test_the_reference_scores_1_and_looks_the_answer_up(env: Environment, task: Task) -> None:
    reference = env.reference_actions(task)
    assert [[c["function"]["name"] for c in turn.get("tool_calls") or []] for turn in reference] == [
        ["list_tables"], ["describe_table", "describe_table"], ["run_sql"], []]
    result = play(env, task, reference)
    assert (result.reward, result.info["breakdown"]) == (1.0, {"answer": 1.0, "queried": 1.0, "read-only": 1.0})


def test_a_wrong_answer_fails_the_answer_gate(env: Environment, task: Task) -> None:
    wrong = int(task["answer"]) + 1
    result = play(env, task, [sql(task["sql"]), f"I count {wrong}.\n\n\\boxed{{{wrong}}}"])
    assert result.reward == 0.0
    assert result.info["breakdown"] == {"answer": 0.0, "queried": 1.0, "read-only": 1.0}
    # The right number, but not in \boxed{}: the system prompt asks for the box, and the
    # criterion reads only the box.
    result = play(env, task, [sql(task["sql"]), f"The answer is {task['answer']}."])
    assert result.reward == 0.0 and result.info["breakdown"]["answer"] == 0.0


def test_a_right_answer_without_a_query_scores_less(env: Environment, task: Task) -> None:
    result = play(env, task, [f"\\boxed{{{task['answer']}}}"])
    assert result.reward == pytest.approx(0.8)
    assert result.info["breakdown"] == {"answer": 1.0, "queried": 0.0, "read-only": 1.0}
    # A query that failed is not a lookup either.
    result = play(env, task, [sql("SELECT nme FROM customers"), f"\\boxed{{{task['answer']}}}"])
    assert result.info["breakdown"]["queried"] == 0.0


def test_trying_to_write_closes_the_read_only_gate(env: Environment, task: Task) -> None:
    turns = [sql("DELETE FROM orders WHERE status = 'cancelled'"), sql(task["sql"], "c2"),
             f"\\boxed{{{task['answer']}}}"]
    with env.episode(task) as episode:
        episode.reset()
        for turn in turns:
            episode.step(turn)
        assert episode.score is not None
    assert episode.score.reward == 0.0
    assert episode.score.breakdown == {"answer": 1.0, "queried": 1.0, "read-only": 0.0}
    assert episode.score.info["failed_required"] == ["read-only"]
    assert episode.score.info["read-only"] == {"write_attempts": ["DELETE FROM orders WHERE status = 'cancelled'"],
                                               "rows_changed": 0}


def test_money_answers_allow_half_a_cent(env: Environment) -> None:
    task = next(t for t in env.tasks("train") if t["template"] == "average-order")
    exact = float(task["answer"])
    assert env.score(task, f"\\boxed{{{exact + 0.004}}}").breakdown["answer"] == 1.0
    assert env.score(task, f"\\boxed{{{exact + 0.01}}}").breakdown["answer"] == 0.0
    assert env.score(task, f"\\boxed{{{task['answer']}}}").reward == pytest.approx(0.8)


# --- the data -----------------------------------------------------------------------------------------


def test_generate_reproduces_the_committed_files(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(SHOP / "generate.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    for split in ("train", "dev", "test"):
        assert (tmp_path / "tasks" / f"{split}.jsonl").read_bytes() == (SHOP / "tasks" / f"{split}.jsonl").read_bytes()
    # The database's content is compared, not its bytes: the file header records the SQLite
    # version that wrote it, so another SQLite writes the same rows into other bytes.
    rebuilt = sqlite3.connect(tmp_path / "state" / "shop.sqlite")
    try:
        assert dump(rebuilt) == snapshot_dump()
    finally:
        rebuilt.close()


def test_every_answer_is_what_the_task_sql_returns(env: Environment) -> None:
    connection = sqlite3.connect(f"file:{SHOP / 'state' / 'shop.sqlite'}?mode=ro", uri=True)
    try:
        for split in ("train", "dev", "test"):
            for task in env.tasks(split):
                value = connection.execute(task["sql"]).fetchone()[0]
                assert abs(float(task["answer"]) - value) <= 0.005, (task.id, task["answer"], value)
    finally:
        connection.close()
    ids = [t.id for split in ("train", "dev", "test") for t in env.tasks(split)]
    prompts = {t.prompt for split in ("train", "dev", "test") for t in env.tasks(split)}
    assert len(ids) == len(prompts) == 69  # no question is in two splits


# --- published and run by id ---------------------------------------------------------------------------


def test_push_pull_and_eval_the_reference(envhub_cli: Callable[..., Result], tmp_path: Path) -> None:
    assert envhub_cli("push", str(SHOP)).code == 0
    assert envhub_cli("pull", "envhub-examples/shop-db").code == 0
    out = tmp_path / "dev.jsonl"
    result = envhub_cli("eval", "envhub-examples/shop-db", "--split", "dev", "--policy", "reference", "--trust",
                        "-o", str(out), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["mean_reward"] == 1.0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 12 and {r["reward"] for r in records} == {1.0}
