"""``envhub serve``'s Open Reward Standard endpoint (/ors), against a real server process.

The OpenReward SDK (``openreward``) cannot be installed beside envhub (it pins
sse-starlette==2.3.6; the mcp 2.x SDK envhub uses needs a later one), so these tests send
the client's own requests, as recorded in tests/data/ors/wire.json from the SDK's code
(openreward 0.1.167, each entry naming its file), over plain HTTP.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.serve_fixtures import TOKEN, Server, leaks, make_bundles, start_server

WIRE = json.loads((Path(__file__).parent / "data" / "ors" / "wire.json").read_text())
GRID = Path(__file__).resolve().parent.parent / "example_envs" / "grid-game"
CALC = "acme/calc"
AGENT = {"User-Agent": WIRE["headers"]["user_agent"]}


#: Where each server under test serves ORS, by base URL: /ors, or the root (--ors-at-root).
_PREFIX: dict[str, str] = {}


@pytest.fixture(scope="module", params=["/ors", ""], ids=["at-ors", "at-root"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with ORS at /ors, and one with ORS at the root as well: every test runs against
    both, the SDK's requests being the same but for the base URL."""
    bundles = make_bundles(tmp_path_factory.mktemp("ors-bundles"))
    at_root = ["--ors-at-root"] if request.param == "" else []
    s = start_server([str(bundles["tool-use"]), str(GRID), "--trust", *at_root], tmp_path_factory.mktemp("ors-serve"),
                     env={"ENVHUB_SERVE_TOKENS": TOKEN})
    _PREFIX[s.base_url] = request.param
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.stderr()
    assert "Traceback" not in s.stderr()


class Ors:
    """The SDK's requests, as its code sends them (headers from wire.json)."""

    def __init__(self, server: Server, token: str | None = None) -> None:
        self.http = httpx2.Client(base_url=server.base_url + _PREFIX[server.base_url], timeout=30)
        self.headers = {**AGENT, **({WIRE["headers"]["token"]: token} if token else {})}
        self.sid: str | None = None
        self.texts: list[str] = []

    def request(self, method: str, path: str, body: Any = None, **headers: str) -> httpx2.Response:
        h = {**self.headers, **({WIRE["headers"]["session"]: self.sid} if self.sid else {}), **headers}
        r = self.http.request(method, path, json=body, headers=h)
        self.texts.append(r.text)
        return r

    def events(self, path: str, body: Any = None) -> list[tuple[str, str]]:
        r = self.request("POST", path, body, Accept="text/event-stream")
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/event-stream")
        out: list[tuple[str, str]] = []
        event: str | None = None
        data: list[str] = []
        for line in r.text.splitlines():
            if not line:
                if event:
                    out.append((event, "\n".join(data)))
                event, data = None, []
            elif line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                data.append(line.split(":", 1)[1].lstrip())
        return out

    def open(self, **create: Any) -> dict[str, Any]:
        events = self.events("/create_session")
        assert [e for e, _ in events] == WIRE["create_session"]["events"]
        self.sid = events[0][1]
        r = self.request("POST", "/create", create)
        assert r.status_code == 200, r.text
        created: dict[str, Any] = r.json()
        assert created == {"sid": self.sid}
        return created

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        events = self.events(f"/{CALC if name != 'move' else 'envhub-examples/grid-game'}/call",
                             {"name": name, "input": arguments})
        assert [e for e, _ in events] == WIRE["call"]["events"], events
        result: dict[str, Any] = json.loads(events[-1][1])
        return result


def test_environments_splits_tools_and_tasks(server: Server) -> None:
    c = Ors(server)
    assert c.request("GET", "/list_environments").json() == [CALC, "envhub-examples/grid-game"]
    splits = c.request("GET", f"/{CALC}/splits").json()
    assert {"name": "train", "type": "train"} in splits and all(set(s) == set(WIRE["splits"]["keys"]) for s in splits)
    tools = c.request("GET", f"/{CALC}/tools").json()
    assert set(tools) == set(WIRE["tools"]["keys"])
    assert [t["name"] for t in tools["tools"]] == ["calculate", "wait"]
    assert set(tools["terminal_tool"]) == set(WIRE["tools"]["terminal_keys"])
    assert tools["terminal_tool"]["name"] == "submit" and tools["terminal_tool"]["arg"] == "answer"
    listed = c.request("POST", f"/{CALC}/tasks", {"split": "train"}).json()
    assert set(listed) == set(WIRE["tasks"]["keys"]) and listed["env_name"] == CALC
    count = c.request("POST", f"/{CALC}/num_tasks", {"split": "train"}).json()["num_tasks"]
    assert count == len(listed["tasks"]) > 0
    one = c.request("POST", f"/{CALC}/task", {"split": "train", "index": 0}).json()
    assert one["task"] == listed["tasks"][0]
    # Positive control for the held-out tests: a public task carries its answer.
    assert "answer" in one["task"]["data"]
    ranged = c.request("POST", f"/{CALC}/task_range", {"split": "train", "start": -1}).json()
    assert ranged["tasks"] == listed["tasks"][-1:]


def test_a_full_tool_use_session(server: Server) -> None:
    c = Ors(server)
    task = c.request("POST", f"/{CALC}/task", {"split": "train", "index": 0}).json()
    c.open(task_spec=task["task"], env_name=CALC)
    prompt = c.request("GET", f"/{CALC}/prompt").json()
    assert any(task["task"]["prompt"] in b["text"] for b in prompt if b["type"] == "text")
    assert [t["name"] for t in c.request("GET", f"/{CALC}/task_tools").json()["tools"]] == ["calculate", "wait"]
    step = c.call("calculate", {"expression": "6 * 7"})
    assert set(step) == set(WIRE["call"]["success_keys"]) and step["ok"] is True
    assert set(step["output"]) == set(WIRE["call"]["output_keys"])
    assert step["output"]["finished"] is False and "42" in step["output"]["blocks"][0]["text"]
    last = c.call("submit", {"answer": str(task["task"]["data"]["answer"])})
    assert last["output"]["finished"] is True and last["output"]["reward"] == 1.0
    after = c.call("calculate", {"expression": "1"})
    assert after == {"ok": False, "error": after["error"], "reason": "episode_finished"}
    assert c.request("POST", "/delete").json() == {"sid": c.sid}


def test_a_session_from_split_and_index_and_tool_errors(server: Server) -> None:
    c = Ors(server)
    c.open(split="train", index=1, env_name=CALC)
    missing = c.call("nope", {})
    assert set(missing) == set(WIRE["call"]["error_keys"]) and missing["reason"] == "not_found"
    assert "calculate" in missing["error"]
    bad = c.call("submit", {"text": "1"})
    assert bad["reason"] == "input_validation" and "answer" in bad["error"]
    c.request("POST", "/delete")
    # Deleted: the session is gone, as the SDK expects (404, detail).
    gone = c.request("GET", f"/{CALC}/prompt")
    assert gone.status_code == 404 and "Active environment not found" in gone.json()["detail"]


def test_grid_game_per_step_rewards_and_finished(server: Server) -> None:
    c = Ors(server)
    c.open(split="dev", index=0, env_name="envhub-examples/grid-game")
    outputs = []
    for i in range(60):
        out = c.call("move", {"direction": ["north", "east", "south", "west"][i % 4]})["output"]
        outputs.append(out)
        if out["finished"]:
            break
    assert outputs[-1]["finished"] is True and outputs[-1]["metadata"]["ended_by"] == "environment"
    assert all(isinstance(o["reward"], float) for o in outputs)
    assert len(outputs[-1]["metadata"]["turn_rewards"]) == len(outputs)


def test_held_out_without_a_token_is_refused_in_ors_shape(server: Server) -> None:
    c = Ors(server)
    for method, path, body in [("POST", f"/{CALC}/tasks", {"split": "test"}),
                               ("POST", f"/{CALC}/task", {"split": "test", "index": 0})]:
        r = c.request(method, path, body)
        assert r.status_code == 401 and "token" in r.json()["detail"], r.text
    c.sid = c.events("/create_session")[0][1]
    r = c.request("POST", "/create", {"split": "test", "index": 0, "env_name": CALC})
    assert r.status_code == 401 and set(r.json()) == {WIRE["error"]["key"]}


def test_held_out_with_a_token_withholds_answers(server: Server) -> None:
    c = Ors(server, TOKEN)
    listed = c.request("POST", f"/{CALC}/tasks", {"split": "test"}).json()
    assert listed["tasks"] and all("data" not in t for t in listed["tasks"])
    c.open(task_spec=listed["tasks"][0], env_name=CALC)
    c.call("calculate", {"expression": "2 + 2"})
    last = c.call("submit", {"answer": "1"})
    assert last["output"]["finished"] is True
    assert leaks(c.texts) == []


@pytest.mark.parametrize(("path", "body", "status", "message"), [
    ("/create", {"env_name": CALC}, 422, WIRE["create_neither"]["detail_msg"]),
    ("/create", {"split": "train", "env_name": CALC}, 422, "split and index must both be provided together"),
    ("/create", {"split": "nope", "index": 0, "env_name": CALC}, 400, "Invalid split 'nope'"),
    ("/create", {"split": "train", "index": 99999, "env_name": CALC}, 400, "Invalid index 99999"),
    ("/create", {"split": "train", "index": 0, "env_name": "acme/nothing"}, 404, "unknown environment acme/nothing"),
    (f"/{CALC}/task", {"split": "train", "index": "first"}, 422, "Input should be a valid integer"),
    (f"/{CALC}/tasks", None, 422, "Invalid JSON"),
    (f"/{CALC}/tasks", {"split": "train", "extra": 1}, 422, "Extra inputs are not permitted"),
])
def test_malformed_requests_get_ors_errors(server: Server, path: str, body: Any, status: int, message: str) -> None:
    c = Ors(server)
    c.sid = c.events("/create_session")[0][1]
    r = c.request("POST", path, body)
    assert r.status_code == status, r.text
    detail = r.json()[WIRE["error"]["key"]]
    text = detail if isinstance(detail, str) else " ".join(d["msg"] for d in detail)
    assert message in text, detail


def test_an_unknown_environment_names_the_listing_where_the_request_came(server: Server) -> None:
    c = Ors(server)
    # The SDK's bare path, the environment named in its deployment header.
    r = c.request("GET", "/tools", **{WIRE["headers"]["deployment"]: "acme/nothing"})
    assert r.status_code == 404, r.text
    # Under /ors the listing is /ors/list_environments; at the root (--ors-at-root), /list_environments.
    assert r.json()["detail"].endswith(f"GET {_PREFIX[server.base_url]}/list_environments lists them)"), r.text


def test_missing_session_header_and_unknown_route(server: Server) -> None:
    c = Ors(server)
    r = c.request("GET", f"/{CALC}/prompt")
    assert r.status_code == 400 and "X-Session-ID header is required" in r.json()["detail"]
    r = c.request("GET", "/nowhere")
    # At the root, a path that is no route of either API is answered as envhub answers it.
    detail = r.json()["detail"] if _PREFIX[server.base_url] else r.json()["error"]["message"]
    assert r.status_code == 404 and "no route" in detail


def test_an_unsupported_version_is_told_which_are_served(server: Server) -> None:
    c = Ors(server)
    r = c.request("GET", "/list_environments", **{"User-Agent": "openreward-sdk/0.9.1"})
    assert r.status_code == 400 and "ORS version 0.9 is not served" in r.json()["detail"]
    assert "speaks ORS 0.1" in r.json()["detail"]
    r = c.request("GET", "/list_environments", **{"X-ORS-Version": "2.0"})
    assert r.status_code == 400 and "speaks ORS 0.1" in r.json()["detail"]
    assert c.request("GET", "/version").json()["versions"] == ["0.1"]
