"""example_envs/customer-service: the retail desk's tools on a per-episode SQLite copy, the
simulated customer (scripted, and an LLM on the local OpenAI-compatible server), the
final-database rubric, transfer_to_human ending the episode, and validate --check.

The agent in the eval runs is a model on tests/openai_server.py that answers with each task's
reference turns (tool calls included), so what is tested is the environment, through the
installed ``envhub eval`` as a user runs it."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.runtime import Environment
from tests.conftest import run_envhub

CS = Path(__file__).resolve().parents[1] / "example_envs" / "customer-service"


@pytest.fixture(scope="module")
def env() -> Iterator[Environment]:
    with envhub.load(CS, trust_code=True) as loaded:
        assert isinstance(loaded, Environment)  # a local bundle: the attributes of capability 1 are on it
        yield loaded


def dev_tasks() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (CS / "tasks" / "dev.jsonl").read_text().splitlines()]
    return {row["id"]: row for row in rows}


def as_sent(turn: dict[str, Any]) -> dict[str, Any]:
    """A reference turn as a model sends it: arguments as a JSON string."""
    message = {"role": "assistant", "content": turn.get("content")}
    if turn.get("tool_calls"):
        message["tool_calls"] = [{**c, "function": {"name": c["function"]["name"],
                                                    "arguments": json.dumps(c["function"]["arguments"])}}
                                 for c in turn["tool_calls"]]
    return message


def agent(turns_by_prompt: dict[str, list[dict[str, Any]]]) -> Callable[[Any], dict[str, Any]]:
    """The agent's script: turn k of the conversation that starts with a prompt is its k-th turn."""

    def answer(request: Any) -> dict[str, Any]:
        turns = turns_by_prompt[request.first_user_content]
        k = sum(1 for m in request.messages if m.get("role") == "assistant")
        return as_sent(turns[k]) if k < len(turns) else {"role": "assistant", "content": "Anything else?"}

    return answer


def eval_records(path: Path, base_url: str, tmp_path: Path, *extra: str) -> tuple[list[dict[str, Any]], str]:
    out = tmp_path / "records.jsonl"
    result = run_envhub("eval", str(path), "-s", "dev", "-p", "openai:agent", "--base-url", base_url, "--trust",
                        "-o", str(out), *extra)
    assert result.code == 0, result.err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return sorted(records, key=lambda r: r["task_id"]), result.out


# --- the tools ---------------------------------------------------------------------------------


def test_eleven_tools_and_the_address_state_is_the_models(env: Environment) -> None:
    functions = {spec["function"]["name"]: spec["function"] for spec in env.tool_specs}
    assert len(functions) == 11 and "transfer_to_human" in functions
    # The database is injected by its State[...] annotation (parameter "db"), never by name:
    # "state", the US state of an address, is a parameter the model fills in.
    address = functions["modify_order_address"]["parameters"]
    assert list(address["properties"]) == ["order_id", "address1", "city", "state", "zip"]
    assert all("db" not in f["parameters"]["properties"] for f in functions.values())


TOOL_NAMES = {"find_customer_by_email", "find_customer_by_name_zip", "get_customer", "get_order", "get_item",
              "list_product_variants", "cancel_order", "return_items", "exchange_items", "modify_order_address",
              "transfer_to_human"}
SPEC_TOOLS = ("list_product_variants", "transfer_to_human")


def tool_call(name: str, arguments: Any) -> dict[str, Any]:
    """One assistant turn calling ``name``; ``arguments`` as sent (a string is sent as is)."""
    sent = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": "x", "type": "function", "function": {"name": name, "arguments": sent}}]}


def test_the_tool_set_is_nine_from_signatures_and_two_from_spec_files(env: Environment) -> None:
    names = [spec["function"]["name"] for spec in env.tool_specs]
    assert set(names) == TOOL_NAMES and len(names) == 11
    # The spec tools are offered exactly as their JSON files are written, in the OpenAI form.
    offered = {spec["function"]["name"]: spec for spec in env.tool_specs}
    for name in SPEC_TOOLS:
        assert offered[name] == json.loads((CS / "tools" / f"{name}.json").read_text(encoding="utf-8"))
    # Their handlers' State[...] parameter (db) is injected, not in the schema.
    assert list(offered["list_product_variants"]["function"]["parameters"]["properties"]) == ["product"]


@pytest.mark.parametrize(("arguments", "error"), [
    ({"product": ""}, "at $.product: '' should be non-empty"),
    ({"product": 3}, "at $.product: 3 is not of type 'string'"),
    ({}, "at $: 'product' is a required property"),
    ({"product": "T-shirt", "size": "M"}, "at $: Additional properties are not allowed ('size' was unexpected)"),
], ids=["empty-string", "wrong-type", "missing", "extra-property"])
def test_a_call_the_spec_refuses_is_the_models_mistake(env: Environment, arguments: dict[str, Any],
                                                       error: str) -> None:
    with env.episode(env.tasks("train")[0]) as episode:
        episode.reset()
        result = episode.step(tool_call("list_product_variants", arguments))
        assert result.info["tool_errors"] == [f"Error: invalid arguments for list_product_variants: {error}"]
        assert not result.done and episode.environment_faults == 0  # the model's, not the environment's


def test_a_call_the_spec_accepts_reaches_the_handler_with_the_database(env: Environment) -> None:
    """Positive control: the same tool with valid arguments runs its handler on the episode's
    database (injected through State[sqlite3.Connection]); a handler that refuses the request
    (ToolError) answers the model's mistake, as a tool declared by its signature does."""
    with env.episode(env.tasks("train")[0]) as episode:
        episode.reset()
        result = episode.step(tool_call("list_product_variants", {"product": "t-shirt"}))
        variants = json.loads(result.info["tool_results"][0])
        assert {v["product"] for v in variants} == {"T-shirt"} and len(variants) > 1
        assert episode.environment_faults == 0
        result = episode.step(tool_call("list_product_variants", {"product": "Sofa"}))
        assert result.info["tool_errors"][0].startswith("Error: no product 'Sofa'; the products are: ")
        assert episode.environment_faults == 0  # refused with ToolError: the model's mistake


def test_a_transfer_with_an_empty_summary_is_refused_and_ends_nothing(env: Environment) -> None:
    with env.episode(env.tasks("dev")[2]) as episode:
        episode.reset()
        result = episode.step(tool_call("transfer_to_human", {"summary": ""}))
        assert result.info["tool_errors"] == [
            "Error: invalid arguments for transfer_to_human: at $.summary: '' should be non-empty"]
        assert not result.done and episode.ended_by is None


def test_the_address_state_reaches_the_database_and_rules_are_enforced(env: Environment) -> None:
    task = env.tasks("train")[4]  # cs-train-05: re-address #W1004
    with env.episode(task) as episode:
        episode.reset()
        result = episode.step({"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "modify_order_address", "arguments": json.dumps(
                {"order_id": "W1004", "address1": "1 Main St", "city": "Reno", "state": "nv", "zip": "89501"})}},
            {"id": "b", "type": "function", "function": {"name": "cancel_order", "arguments": json.dumps(
                {"order_id": "#W1002", "reason": "no longer needed"})}},
        ]})
        assert result.info["tool_results"] == [
            "The shipping address of #W1004 is now 1 Main St, Reno, NV 89501.",
            "Error: order #W1002 is delivered; only pending orders can be cancelled"]
        assert episode.state.execute("SELECT state, zip FROM orders WHERE id = '#W1004'").fetchone() == ("NV", "89501")
    with env.episode(task) as fresh:  # the next episode starts from the snapshot again
        fresh.reset()
        assert fresh.state.execute("SELECT state FROM orders WHERE id = '#W1004'").fetchone() == ("CA",)


@pytest.mark.parametrize(("tool", "arguments", "error"), [
    ("cancel_order", {"order_id": "#W1001", "reason": "too expensive"},
     "reason must be one of 'no longer needed', 'ordered by mistake'"),
    ("return_items", {"order_id": "#W1001", "item_ids": ["1001"], "payment_method_id": "card_1101"},
     "order #W1001 is pending; only delivered orders' items can be returned"),
    ("return_items", {"order_id": "#W1002", "item_ids": ["3001"], "payment_method_id": "card_2201"},
     "the customer has no payment method 'card_2201'"),
    ("return_items", {"order_id": "#W1002", "item_ids": ["3001", "3001"], "payment_method_id": "card_1101"},
     "order #W1002 has no item '3001' that can still be returned or exchanged"),
    ("exchange_items", {"order_id": "#W1002", "item_ids": ["3001"], "new_item_ids": ["4001"],
                        "payment_method_id": "card_1101"},
     "item 4001 is a Headphones, not a Desk lamp: an exchange keeps the product"),
    ("exchange_items", {"order_id": "#W1003", "item_ids": ["2002"], "new_item_ids": ["2003"],
                        "payment_method_id": "card_2201"},
     "item 2003 is not available"),
    ("modify_order_address", {"order_id": "#W1001", "address1": "1 A St", "city": "X", "state": "New York",
                              "zip": "10002"},
     "state must be a two-letter US state code, got 'New York'"),
    ("find_customer_by_email", {"email": "nobody@example.com"}, "no customer has the email "
                                                                 "'nobody@example.com'"),
], ids=["cancel-reason", "return-pending", "refund-to-another-customers-card", "return-one-item-twice",
        "exchange-another-product", "exchange-unavailable", "state-not-a-code", "unknown-email"])
def test_the_tools_enforce_the_shops_rules(env: Environment, tool: str, arguments: dict[str, Any],
                                           error: str) -> None:
    with env.episode(env.tasks("train")[0]) as episode:
        episode.reset()
        before = episode.state.total_changes
        result = episode.step({"role": "assistant", "content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}]})
        assert result.info["tool_errors"] == [f"Error: {error}"] and not result.done
        assert episode.state.total_changes == before  # a refused action changed nothing


def test_transfer_ends_the_episode_and_later_calls_are_not_run(env: Environment) -> None:
    task = env.tasks("dev")[2]  # cs-dev-03: the customer insists on a refund to a bank account
    transfer = {"id": "t", "type": "function",
                "function": {"name": "transfer_to_human", "arguments": '{"summary": "x"}'}}
    cancel = {"id": "c", "type": "function", "function": {"name": "cancel_order", "arguments": json.dumps(
        {"order_id": "#W1011", "reason": "no longer needed"})}}
    with env.episode(task) as episode:
        episode.reset()
        result = episode.step({"role": "assistant", "content": None, "tool_calls": [transfer, cancel]})
        assert result.done and (episode.ended_by, episode.outcome) == ("environment", "transfer")
        assert result.info["tool_results"] == ["Transferred to a human agent.", "Not run: the episode ended."]
        assert result.info["breakdown"] == {"database": 1.0, "informed": 1.0, "handoff": 1.0}
        # Transferring a customer whose request the tools can handle fails the handoff criterion.
    other = env.tasks("dev")[0]
    with env.episode(other) as episode:
        episode.reset()
        result = episode.step({"role": "assistant", "content": None, "tool_calls": [transfer]})
        assert result.done and result.reward == 0.0 and result.info["breakdown"]["handoff"] == 0.0


def test_the_scripted_customer_answers_then_hangs_up(env: Environment) -> None:
    task = env.tasks("train")[3]  # cs-train-04: one scripted line
    with env.episode(task) as episode:
        episode.reset()
        first = episode.step("Sorry, order #W1010 was processed and cannot be cancelled.")
        assert not first.done and episode.messages[-1] == {"role": "user", "content": "Oh well, I understand. Thanks."}
        last = episode.step("You're welcome.")
        assert last.done and (episode.ended_by, episode.outcome, episode.turns) == ("environment", "hangup", 2)
        assert last.reward == 1.0  # told the customer "processed", changed nothing


# --- eval against the local OpenAI-compatible server --------------------------------------------------------


def test_eval_with_the_scripted_customer(openai_server: Any, tmp_path: Path) -> None:
    tasks = dev_tasks()
    openai_server.script = agent({t["prompt"]: t["reference"] for t in tasks.values()})
    records, summary = eval_records(CS, openai_server.base_url, tmp_path)
    assert [(r["task_id"], r["reward"], r["turns"], r["ended_by"], r["outcome"]) for r in records] == [
        ("cs-dev-01", 1.0, 7, "environment", "hangup"),
        ("cs-dev-02", 1.0, 6, "environment", "hangup"),
        ("cs-dev-03", 1.0, 4, "environment", "transfer"),
        ("cs-dev-04", 1.0, 6, "environment", "hangup"),
    ]
    # The customer's scripted lines are in the conversation, after the agent's questions.
    dev1 = next(r for r in records if r["task_id"] == "cs-dev-01")
    users = [m["content"] for m in dev1["messages"] if m["role"] == "user"]
    assert users == [tasks["cs-dev-01"]["prompt"], *tasks["cs-dev-01"]["user"]["script"]]
    assert "outcomes hangup 3, transfer 1" in summary


def test_cancelling_the_wrong_order_scores_0(openai_server: Any, tmp_path: Path) -> None:
    task = dev_tasks()["cs-dev-01"]  # two pending orders: #W1008 is the one to cancel
    wrong = json.loads(json.dumps(task["reference"]).replace("#W1008", "#W1007"))
    openai_server.script = agent({task["prompt"]: wrong})
    [record], _ = eval_records(CS, openai_server.base_url, tmp_path, "-n", "1")
    assert (record["reward"], record["outcome"]) == (0.0, "hangup")
    assert record["breakdown"]["database"] == 0.0
    differences = record["score_info"]["database"]["differences"]
    assert differences["orders"]["missing"][0][:3] == ["#W1007", "C04", "pending"]


def test_eval_with_an_llm_customer(openai_server: Any, tmp_path: Path) -> None:
    task = dev_tasks()["cs-dev-01"]
    bundle = tmp_path / "customer-service"
    shutil.copytree(CS, bundle, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = bundle / "envhub.toml"
    manifest.write_text(manifest.read_text().replace(
        'params = { user = "scripted" }',
        f'params = {{ user = "llm", user-base-url = "{openai_server.base_url}", user-model = "customer" }}'))
    lines = ["It's the one with the red T-shirt and the bottle; I ordered it by mistake.", "Yes please.",
             "Perfect, thank you!\n###STOP###"]
    serve_agent = agent({task["prompt"]: task["reference"]})

    def script(request: Any) -> Any:
        if request.model == "customer":  # the LLM customer: one line per agent message it has seen
            return lines[sum(1 for m in request.messages if m["role"] == "user") - 1]
        return serve_agent(request)

    openai_server.script = script
    [record], _ = eval_records(bundle, openai_server.base_url, tmp_path, "-n", "1")
    assert (record["reward"], record["turns"], record["ended_by"], record["outcome"]) == (1.0, 7, "environment",
                                                                                          "hangup")
    users = [m["content"] for m in record["messages"] if m["role"] == "user"]
    # The last line is said, without the stop token, and ends the episode (the agent does not answer it).
    assert users == [task["prompt"], lines[0], lines[1], "Perfect, thank you!"]
    assert record["messages"][-1] == {"role": "user", "content": "Perfect, thank you!"}
    customer = [r for r in openai_server.requests if r.model == "customer"]
    assert len(customer) == 3
    # The customer sees the scenario as its system prompt, the conversation from its side, no tools.
    first = customer[0].messages
    assert first[0]["role"] == "system" and task["user"]["instructions"] in first[0]["content"]
    assert [m["role"] for m in first[1:]] == ["assistant", "user"]
    assert first[1]["content"] == task["prompt"] and customer[0].tools is None


def test_validate_check() -> None:
    result = run_envhub("validate", "--strict", "--check", "--trust", str(CS))
    assert result.code == 0, result.err
    assert "--check played 36 episode(s) on 12 task(s), 12 with a reference" in result.out + result.err


# --- the floor, bad configuration, the data -----------------------------------------------------------------


def test_an_agent_that_does_nothing_scores_0_on_every_task(env: Environment) -> None:
    for task in [*env.tasks("train"), *env.tasks("dev")]:
        with env.episode(task) as episode:
            episode.reset()
            while not episode.done:
                result = episode.step("")
        # The scripted customer answered each empty message, then hung up; nothing was done.
        assert (result.reward, episode.outcome) == (0.0, "hangup"), task.id
        assert episode.turns == len(task["user"]["script"]) + 1


def with_params(tmp_path: Path, params: str) -> Path:
    bundle = tmp_path / "customer-service"
    shutil.copytree(CS, bundle, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = bundle / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('params = { user = "scripted" }', f"params = {params}"))
    return bundle


@pytest.mark.parametrize(("params", "message"), [
    ('{ user = "llm" }', "the LLM customer needs an endpoint: set [config.params] user-base-url and user-model, "
                         "or CUSTOMER_SERVICE_USER_BASE_URL and CUSTOMER_SERVICE_USER_MODEL"),
    ('{ user = "robot" }', "[config.params] user must be 'scripted' or 'llm', got 'robot'"),
], ids=["llm-without-endpoint", "unknown-user"])
def test_a_misconfigured_customer_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   params: str, message: str) -> None:
    monkeypatch.delenv("CUSTOMER_SERVICE_USER_BASE_URL", raising=False)
    monkeypatch.delenv("CUSTOMER_SERVICE_USER_MODEL", raising=False)
    with envhub.load(with_params(tmp_path, params), trust_code=True) as loaded:
        task = loaded.tasks("dev")[0]
        with loaded.episode(task) as episode:
            episode.reset()
            with pytest.raises(ValueError) as raised:
                episode.step("Which order?")
    assert str(raised.value) == message
    assert "raised by the responder customer_service.user:respond" in raised.value.__notes__


def test_the_llm_customer_reads_its_endpoint_from_the_environment(tmp_path: Path, openai_server: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUSTOMER_SERVICE_USER_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("CUSTOMER_SERVICE_USER_MODEL", "customer-from-env")
    monkeypatch.setenv("CUSTOMER_SERVICE_USER_API_KEY", "sk-customer")
    openai_server.script = lambda request: "It's #W1008."
    with envhub.load(with_params(tmp_path, '{ user = "llm" }'), trust_code=True) as loaded, \
            loaded.episode(loaded.tasks("dev")[0]) as episode:
        episode.reset()
        result = episode.step("Which order?")
    assert not result.done and episode.messages[-1] == {"role": "user", "content": "It's #W1008."}
    [request] = openai_server.requests
    assert (request.model, request.authorization) == ("customer-from-env", "Bearer sk-customer")


def test_generate_reproduces_the_committed_files(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(CS / "generate.py"), "--out", str(tmp_path)], check=True, capture_output=True)
    for split in ("train", "dev", "test"):
        assert (tmp_path / "tasks" / f"{split}.jsonl").read_bytes() == (CS / "tasks" / f"{split}.jsonl").read_bytes()
    rebuilt = sqlite3.connect(tmp_path / "state" / "retail.sqlite")
    committed = sqlite3.connect(f"file:{CS / 'state' / 'retail.sqlite'}?mode=ro", uri=True)
    try:
        assert list(rebuilt.iterdump()) == list(committed.iterdump())
    finally:
        rebuilt.close()
        committed.close()
