"""``envhub serve`` and ``envhub.load("http://...")``: a real server process on 127.0.0.1,
driven by envhub's client, by raw HTTP (httpx2), and by the installed ``envhub eval``."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

import envhub
from envhub.context import Context, make_plugin_manager
from envhub.errors import EnvNotFoundError, UsageError
from envhub.runtime import RemoteError, load_remote
from tests.conftest import run_envhub
from tests.serve_fixtures import (
    BIG_SPLIT,
    HELD_OUT,
    NAMES,
    OTHER_TOKEN,
    SECRETS,
    TOKEN,
    Recorder,
    Server,
    leaks,
    make_bundles,
    start_server,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_bundles(tmp_path_factory.mktemp("serve-bundles"))


@pytest.fixture(scope="module")
def server(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """All three bundles; held-out splits for two tokens; public splits open."""
    s = start_server([*(str(p) for p in bundles.values()), "--trust"], tmp_path_factory.mktemp("serve-main"),
                     env={"ENVHUB_SERVE_TOKENS": f"{TOKEN}, {OTHER_TOKEN}"})
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.stderr()  # uvicorn shuts down, then re-raises the signal
    assert "Application shutdown complete." in s.stderr()


@pytest.fixture(scope="module")
def limited(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Tight limits, configured by a file, and a token required for every call."""
    work = tmp_path_factory.mktemp("serve-limited")
    config = work / "serve.toml"
    config.write_text(f'''
environments = ["{bundles["tool-use"].as_posix()}"]
trust = true

[access]
tokens = ["{TOKEN}"]
require-token = true

[limits]
max-episodes = 3
idle-timeout-s = 1.0
episode-timeout-s = 1.5
max-body-bytes = 4096
''')
    s = start_server(["--config", str(config)], work)
    yield s
    s.stop()


@pytest.fixture
def raw(server: Server):  # type: ignore[no-untyped-def]
    recorder = Recorder(server.base_url)
    yield recorder
    recorder.close()


def _auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call-1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


# --- listing -------------------------------------------------------------------------------------


def test_lists_environments_with_splits_and_metadata(server: Server, raw: Recorder, bundles: dict[str, Path]) -> None:
    body = raw("GET", "/v1/environments").json()
    assert [e["name"] for e in body["environments"]] == sorted(NAMES.values())
    local = envhub.load(bundles["tool-use"], trust_code=True)
    detail = raw("GET", "/v1/environments/acme/calc").json()
    assert detail["version"] == "0.1.0"
    assert detail["digest"] == local.digest
    assert detail["protocol"] == "tool-use"
    assert detail["max_turns"] == 6
    assert [t["function"]["name"] for t in detail["tools"]] == ["calculate", "wait"]
    assert detail["provenance"]["digest"] == local.digest and "source" not in detail["provenance"]
    assert {s["name"]: (s["held_out"], s["available"], s["rows"]) for s in detail["splits"]} == {
        "train": (False, True, 6), "dev": (False, True, 2), "test": (True, True, 2)}
    assert server.urls == [server.url(NAMES[p]) for p in ("single-turn", "multi-turn", "tool-use")]
    health = raw("GET", "/v1/health").json()
    assert health["status"] == "ok" and health["auth"] == {"require_token": False, "heldout_enabled": True}


def test_public_tasks_are_rows_and_heldout_tasks_only_what_the_model_sees(server: Server, raw: Recorder) -> None:
    public = raw("GET", "/v1/environments/acme/arith/splits/dev/tasks").json()
    assert public["held_out"] is False and public["total"] == 2
    assert public["tasks"][0]["data"]["answer"]  # a public row is the row
    held = raw("GET", "/v1/environments/acme/arith/splits/test/tasks", headers=_auth()).json()
    assert held["held_out"] is True
    assert held["tasks"] == [
        {"id": "st-test-001", "split": "test", "index": 0, "prompt": "How many marbles are in the first jar?",
         "difficulty": 3},
        {"id": "st-test-002", "split": "test", "index": 1, "prompt": "How many marbles are in the second jar?",
         "difficulty": 5},
    ]
    one = raw("GET", "/v1/environments/acme/calc/splits/test/tasks/tu-test-002", headers=_auth()).json()
    assert set(one["task"]) == {"id", "split", "index", "prompt", "difficulty"}


def test_client_pages_through_a_large_split(server: Server, bundles: dict[str, Path]) -> None:
    env = envhub.load(server.url("acme/arith"))
    local = envhub.load(bundles["single-turn"])
    tasks = env.tasks("big")
    assert len(tasks) == BIG_SPLIT
    assert tasks[1500].id == "big-01500" and tasks[-1].id == f"big-{BIG_SPLIT - 1:05d}"
    assert [t.id for t in tasks] == [t.id for t in local.tasks("big")]
    shuffled = env.tasks("big", seed=7, limit=1200)
    assert [t.id for t in shuffled] == [t.id for t in local.tasks("big", seed=7, limit=1200)]
    assert env.task("big", "big-00042")["answer"] == "43"
    env.close()


# --- episodes, each protocol --------------------------------------------------------------------

_SCRIPTS: dict[str, Any] = {
    # protocol -> (split, task index, actions), a full episode that ends with reward 1
    "single-turn": ("dev", 0, lambda task: [f"\\boxed{{{task['answer']}}}"]),
    "multi-turn": ("dev", 1, lambda task: ["1", "1000", str(task["answer"])]),
    "tool-use": ("dev", 0, lambda task: [_tool_call("calculate", expression="6 * 7"),
                                         _tool_call("nope"), f"\\boxed{{{task['answer']}}}"]),
}


@pytest.mark.parametrize("protocol", list(_SCRIPTS))
def test_episode_flow_matches_the_environment_in_process(protocol: str, server: Server,
                                                         bundles: dict[str, Path]) -> None:
    split, index, script = _SCRIPTS[protocol]
    local = envhub.load(bundles[protocol], trust_code=True)
    remote = envhub.load(server.url(NAMES[protocol]))
    task = remote.tasks(split)[index]
    assert task == local.tasks(split)[index]

    def play(env: Any) -> tuple[list[Any], Any]:
        steps = []
        with env.episode(task) as episode:
            observation = episode.reset()
            assert observation.tools == local.tool_specs
            for action in script(task):
                result = episode.step(action)
                steps.append((result.observation.messages, result.reward, result.done, result.info))
                if result.done:
                    break
            score = episode.score
            return steps, (episode.messages, episode.turns, episode.truncated, episode.tool_errors, score.reward,
                           dict(score.breakdown), score.error)

    assert play(remote) == play(local)
    steps, (messages, turns, _, tool_errors, reward, _, _) = play(remote)
    assert steps[-1][2] is True and reward == 1.0
    assert turns == len(script(task))
    if protocol == "tool-use":
        assert tool_errors == 1 and "Error: unknown tool 'nope'" in steps[1][0][-1]["content"]
    remote.close()


@pytest.mark.parametrize("protocol", list(_SCRIPTS))
def test_async_episode_flow(protocol: str, server: Server) -> None:
    split, index, script = _SCRIPTS[protocol]
    env = envhub.load(server.url(NAMES[protocol]))
    task = env.tasks(split)[index]

    async def play() -> float | None:
        try:
            async with env.episode(task) as episode:
                await episode.areset()
                for action in script(task):
                    result = await episode.astep(action)
                    if result.done:
                        return result.reward
            return None
        finally:
            await env.aclose()

    assert asyncio.run(play()) == 1.0
    assert asyncio.run(play()) == 1.0  # a new event loop: new connections


def test_step_before_reset_and_after_done_are_refused(server: Server) -> None:
    env = envhub.load(server.url("acme/arith"))
    episode = env.episode(env.tasks("dev")[0])
    with pytest.raises(UsageError, match=r"^call reset\(\) before step\(\)$"):
        episode.step("x")
    episode.reset()
    with pytest.raises(TypeError, match="an action must be a string or an assistant message dict, got int"):
        episode.step(5)  # type: ignore[arg-type]
    assert episode.step("no idea").done
    with pytest.raises(UsageError, match=r"^the episode is done; reset\(\) it or start a new one$"):
        episode.step("x")
    episode.reset()  # a new episode on the server
    assert episode.step(f"\\boxed{{{episode.task['answer']}}}").reward == 1.0
    env.close()


def test_raw_episode_lifecycle_and_errors(server: Server, raw: Recorder) -> None:
    created = raw("POST", "/v1/environments/acme/guess/episodes", {"split": "dev", "index": 0})
    assert created.status_code == 201
    episode = created.json()
    eid = episode["episode_id"]
    assert episode["task"]["id"] == "guess-dev-001" and episode["max_turns"] == 8
    assert [m["role"] for m in episode["observation"]["messages"]] == ["system", "user"]
    step = raw("POST", f"/v1/episodes/{eid}/step", {"action": "1"}).json()
    assert (step["done"], step["reward"], step["turns"]) == (False, None, 1)
    assert step["new_messages"] == [{"role": "assistant", "content": "1"}, {"role": "user", "content": "higher"}]
    status = raw("GET", f"/v1/episodes/{eid}").json()
    assert (status["turns"], status["done"], status["busy"]) == (1, False, False)
    answer = episode["task"]["data"]["answer"]
    final = raw("POST", f"/v1/episodes/{eid}/step", {"action": {"role": "assistant", "content": answer}}).json()
    assert (final["done"], final["reward"]) == (True, 1.0)
    assert final["info"]["breakdown"] == {}
    again = raw("POST", f"/v1/episodes/{eid}/step", {"action": "2"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "episode-done"
    assert raw("DELETE", f"/v1/episodes/{eid}").json() == {"episode_id": eid, "closed": True}  # already closed: fine
    unknown = raw("DELETE", "/v1/episodes/nope")
    assert unknown.status_code == 404
    assert unknown.json() == {"error": {"status": 404, "code": "episode-not-found",
                                        "message": "no episode 'nope' on this server",
                                        "hint": "create one with POST /v1/environments/NAMESPACE/NAME/episodes"}}
    closed = raw("POST", "/v1/environments/acme/guess/episodes", {"split": "dev", "task_id": "guess-dev-002"}).json()
    assert raw("DELETE", f"/v1/episodes/{closed['episode_id']}").status_code == 200
    gone = raw("POST", f"/v1/episodes/{closed['episode_id']}/step", {"action": "1"})
    assert gone.status_code == 410 and gone.json()["error"]["message"].endswith("was closed: its client closed it")


@pytest.mark.parametrize(("path", "body", "status", "code", "message"), [
    ("/v1/environments/acme/nope/episodes", {"split": "dev", "index": 0}, 404, "environment-not-found",
     "this server does not serve acme/nope (it serves: acme/arith, acme/calc, acme/guess)"),
    ("/v1/environments/acme/arith/episodes", {"split": "nope", "index": 0}, 404, "not-found",
     "acme/arith has no split 'nope' (splits: train, big, dev, test)"),
    ("/v1/environments/acme/arith/episodes", {"split": "dev", "task_id": "nope"}, 404, "not-found",
     "acme/arith: no task 'nope' in split 'dev'"),
    ("/v1/environments/acme/arith/episodes", {"split": "dev", "index": 9}, 404, "not-found",
     "acme/arith: split 'dev' has 2 tasks; there is no index 9"),
    ("/v1/environments/acme/arith/episodes", {"split": "dev"}, 400, "invalid-body",
     "invalid request body: body: give exactly one of task_id and index"),
    ("/v1/environments/acme/arith/episodes", {"split": "dev", "index": -1, "colour": "red"}, 400, "invalid-body",
     "invalid request body: index: Input should be greater than or equal to 0; colour: Extra inputs are not permitted"),
    ("/v1/environments/acme/arith/episodes", b'{"split": "dev", ', 400, "invalid-json",
     "the request body is not valid JSON: Invalid JSON: EOF while parsing a value at line 1 column 17"),
    ("/v1/environments/acme/arith/episodes", b"", 400, "invalid-body",
     "POST /v1/environments/acme/arith/episodes needs a JSON body"),
    ("/v1/environments/acme/arith/score", {"split": "dev", "task_id": "arith-dev-001"}, 400, "invalid-body",
     "invalid request body: body: give exactly one of completion (the assistant's text) and messages (a trajectory)"),
], ids=["unknown-env", "unknown-split", "unknown-task", "index-out-of-range", "no-task", "bad-fields",
        "malformed-json", "empty-body", "score-without-answer"])
def test_bad_requests_get_json_errors(raw: Recorder, path: str, body: Any, status: int, code: str,
                                      message: str) -> None:
    response = raw("POST", path, body)
    assert response.status_code == status
    error = response.json()["error"]
    assert (error["status"], error["code"], error["message"]) == (status, code, message)
    assert error["hint"]


def test_invalid_action_route_and_query(raw: Recorder) -> None:
    eid = raw("POST", "/v1/environments/acme/arith/episodes", {"split": "dev", "index": 0}).json()["episode_id"]
    bad = raw("POST", f"/v1/episodes/{eid}/step", {"action": {"role": "user", "content": "hi"}})
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == "an action must be an assistant message, got role 'user'"
    wrong_type = raw("POST", f"/v1/episodes/{eid}/step", {"action": 5})
    assert wrong_type.status_code == 400 and wrong_type.json()["error"]["code"] == "invalid-body"
    assert raw("DELETE", f"/v1/episodes/{eid}").status_code == 200
    route = raw("GET", "/v2/nothing")
    assert route.status_code == 404 and route.json()["error"]["code"] == "no-such-route"
    method = raw("PUT", "/v1/environments")
    assert method.status_code == 405 and method.json()["error"]["code"] == "method-not-allowed"
    query = raw("GET", "/v1/environments/acme/arith/splits/dev/tasks?size=5000")
    assert query.status_code == 400
    assert query.json()["error"]["message"] == "query parameter size=5000 is out of range: it must be from 1 to 1000"


def test_environment_code_failure_in_a_step_is_a_recorded_error(raw: Recorder) -> None:
    eid = raw("POST", "/v1/environments/acme/guess/episodes", {"split": "dev", "index": 0}).json()["episode_id"]
    failed = raw("POST", f"/v1/episodes/{eid}/step", {"action": "boom"})
    assert failed.status_code == 200
    body = failed.json()
    assert (body["done"], body["reward"], body["turns"]) == (True, None, 1)
    assert body["info"] == {"environment_error": True, "error": (
        "acme/guess: the environment's code failed in this step: RuntimeError: kaboom: the answer was 64; "
        "the episode is closed")}
    assert "Traceback" not in failed.text
    gone = raw("GET", f"/v1/episodes/{eid}")
    assert gone.status_code == 409
    assert gone.json()["error"]["message"] == f"episode {eid!r} is done (the environment failed in a step)"
    held = raw("POST", "/v1/environments/acme/guess/episodes", {"split": "test", "index": 0}, headers=_auth())
    failed = raw("POST", f"/v1/episodes/{held.json()['episode_id']}/step", {"action": "boom"}, headers=_auth())
    assert failed.status_code == 200
    assert failed.json()["info"]["error"] == (
        "acme/guess: the environment's code failed in this step: RuntimeError (details are withheld on held-out "
        "splits; see the server's log); the episode is closed")
    assert not leaks([failed.text])


def test_client_records_a_failed_step_as_the_rollout_error(server: Server, tmp_path: Path) -> None:
    import envhub

    env = envhub.load(server.url("acme/guess"))
    episode = env.episode(env.task("dev", "guess-dev-001"))
    episode.reset()
    result = episode.step("boom")
    assert (result.done, result.reward, episode.score.reward) == (True, None, 0.0)
    assert episode.score.error == ("acme/guess: the environment's code failed in this step: RuntimeError: kaboom: "
                                   "the answer was 64; the episode is closed")
    env.close()


_TASKS = "/v1/environments/acme/arith/splits/dev/tasks"
_RANGE = "from 0 to 9223372036854775807"


@pytest.mark.parametrize(("query", "message"), [
    ("offset=-1", f"query parameter offset=-1 is out of range: it must be {_RANGE}"),
    ("offset=abc", "query parameter offset='abc' is not an integer"),
    ("offset=1e3", "query parameter offset='1e3' is not an integer"),
    ("offset=1.5", "query parameter offset='1.5' is not an integer"),
    ("offset=%00", "query parameter offset='\\x00' is not an integer"),
    ("offset=9223372036854775808", f"query parameter offset=9223372036854775808 is out of range: it must be {_RANGE}"),
    ("offset=99999999999999999999999",
     f"query parameter offset='99999999999999999999999' is out of range: it must be {_RANGE}"),
    ("offset=" + "9" * 5000, f"query parameter offset='{'9' * 40}'... is out of range: it must be {_RANGE}"),
    ("limit=-5", f"query parameter limit=-5 is out of range: it must be {_RANGE}"),
    ("limit=" + "1" * 30, f"query parameter limit='{'1' * 30}' is out of range: it must be {_RANGE}"),
    ("size=0", "query parameter size=0 is out of range: it must be from 1 to 1000"),
    ("seed=x", "query parameter seed='x' is not an integer"),
    ("seed=-9223372036854775809", "query parameter seed=-9223372036854775809 is out of range: it must be from "
                                  "-9223372036854775808 to 9223372036854775807"),
], ids=["negative", "word", "exponent", "fraction", "nul", "past-64-bit", "huge", "5000-digits", "negative-limit",
        "huge-limit", "zero-size", "word-seed", "seed-below-64-bit"])
def test_bad_query_values_are_a_400(raw: Recorder, query: str, message: str) -> None:
    response = raw("GET", f"{_TASKS}?{query}")
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["message"]) == ("invalid-query", message)
    assert error["hint"].startswith("pass a whole number from ")


@pytest.mark.parametrize(("query", "total", "ids"), [
    ("offset=999", 2, []),
    ("offset=9223372036854775807", 2, []),
    ("offset=999&seed=3", 2, []),
    ("offset=1&limit=9223372036854775807", 2, ["arith-dev-002"]),
    ("limit=0", 0, []),
    ("seed=-9223372036854775808&limit=1&offset=1", 1, []),
], ids=["past-the-end", "largest", "shuffled-past-the-end", "largest-limit", "limit-zero", "smallest-seed"])
def test_pages_past_the_end_are_empty(raw: Recorder, query: str, total: int, ids: list[str]) -> None:
    response = raw("GET", f"{_TASKS}?{query}")
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["total"], [t["id"] for t in body["tasks"]]) == (total, ids)


_EPISODES = "/v1/environments/acme/arith/episodes"


@pytest.mark.parametrize(("body", "message"), [
    ({"split": "dev", "index": 10**30}, "index: Input should be less than or equal to 9223372036854775807"),
    ({"split": "dev", "index": 0, "seed": 10**30}, "seed: Input should be less than or equal to 9223372036854775807"),
    ({"split": "dev", "index": True}, "index: Input should be a valid integer"),
    ({"split": "dev", "index": "0"}, "index: Input should be a valid integer"),
    ({"split": "dev", "index": 1.5}, "index: Input should be a valid integer"),
    ([1], "body: Input should be an object"),
    ("null", "body: Input should be an object"),
    ({"split": "dev", "task_id": 5}, "task_id: Input should be a valid string"),
    ({"split": "", "index": 0}, "split: String should have at least 1 character"),
], ids=["huge-index", "huge-seed", "boolean-index", "string-index", "fractional-index", "array", "null",
        "numeric-task-id", "empty-split"])
def test_bad_episode_bodies_are_a_400(raw: Recorder, body: Any, message: str) -> None:
    response = raw("POST", _EPISODES, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["message"]) == ("invalid-body", f"invalid request body: {message}")


def test_a_body_that_is_not_utf8_is_a_400(server: Server) -> None:
    import httpx2

    response = httpx2.post(f"{server.base_url}{_EPISODES}", content=b'{"split": "\xff", "index": 0}')
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid-json"


# --- scoring ------------------------------------------------------------------------------------


def test_score_public_and_heldout(server: Server, raw: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    public = raw("POST", "/v1/environments/acme/arith/score",
                 {"split": "dev", "task_id": "arith-dev-001", "completion": "\\boxed{0}"}).json()
    assert public == {"environment": "acme/arith", "split": "dev", "task_id": "arith-dev-001", "reward": 0.0,
                      "breakdown": {}, "error": None}
    right = raw("POST", "/v1/environments/acme/arith/score", headers=_auth(),
                body={"split": "test", "task_id": "st-test-001", "completion": "\\boxed{918273645}"})
    assert right.json() == {"environment": "acme/arith", "split": "test", "task_id": "st-test-001", "reward": 1.0,
                            "breakdown": None, "error": None}
    assert "918273645" not in right.text  # the answer sent is not echoed
    monkeypatch.setenv("ENVHUB_SERVE_TOKEN", TOKEN)
    env = envhub.load(server.url("acme/calc"))
    task = env.task("test", "tu-test-001")
    assert dict(task) == {"id": "tu-test-001", "prompt": HELD_OUT["tool-use"][0]["prompt"]}
    assert env.score(task, "\\boxed{83810205}").reward == 1.0
    assert asyncio.run(env.ascore(task, [{"role": "assistant", "content": "\\boxed{1}"}])).reward == 0.0
    env.close()


# --- held out: never an answer ------------------------------------------------------------------


def test_heldout_session_never_returns_an_answer(server: Server, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Every response of a whole session on the held-out splits (listings, tasks, episodes
    of each protocol played wrong and right, scores, errors), then an eval's records: none
    holds an answer or any other held-out field."""
    raw = Recorder(server.base_url, TOKEN)
    try:
        raw("GET", "/v1/environments")
        for protocol, name in NAMES.items():
            raw("GET", f"/v1/environments/{name}")
            raw("GET", f"/v1/environments/{name}/splits/test/tasks")
            raw("GET", f"/v1/environments/{name}/splits/test/tasks?seed=3&limit=1")
            for row in HELD_OUT[protocol]:
                raw("GET", f"/v1/environments/{name}/splits/test/tasks/{row['id']}")
                for action in ("", "boom", _tool_call("calculate", expression="2 + 2"), "12",
                               f"\\boxed{{{row['answer']}}}"):
                    created = raw("POST", f"/v1/environments/{name}/episodes", {"split": "test", "task_id": row["id"]})
                    eid = created.json()["episode_id"]
                    raw("GET", f"/v1/episodes/{eid}")
                    for _ in range(2):
                        raw("POST", f"/v1/episodes/{eid}/step", {"action": action})
                    raw("DELETE", f"/v1/episodes/{eid}")
                raw("POST", f"/v1/environments/{name}/episodes", {"split": "test", "index": 1})
                raw("POST", f"/v1/environments/{name}/score", {"split": "test", "task_id": row["id"],
                                                               "completion": f"\\boxed{{{row['answer']}}}"})
                raw("POST", f"/v1/environments/{name}/score", {"split": "test", "task_id": row["id"],
                                                               "messages": [{"role": "assistant", "content": "7"}]})
            raw("POST", f"/v1/environments/{name}/episodes", {"split": "test", "task_id": "missing"})
            raw("POST", f"/v1/environments/{name}/episodes", {"split": "test"})
        statuses = {(json.loads(b).get("error") or {}).get("status", 200) for b in raw.bodies}
        assert statuses >= {200, 400, 404, 409}, statuses
        # the environment's code failed in a step ("boom"), and that recorded error was scanned too
        assert any(b'"environment_error":true' in b for b in raw.bodies)
        assert len(raw.bodies) > 100
        assert raw.leaks() == []
        # the right answers were sent, and did score: the scan is not vacuous
        assert leaks([b.decode() for b in raw.bodies])
        assert sum('"reward":1.0' in b.decode() for b in raw.bodies) >= 6
    finally:
        raw.close()

    out = tmp_path / "records.jsonl"
    policy = tmp_path / "policy.py"
    policy.write_text("def act(messages):\n    return '\\\\boxed{7}' if len(messages) < 4 else 'done'\n")
    result = run_envhub("eval", server.url("acme/arith"), "--split", "test", "--policy", f"python:{policy}:act",
                        "-o", str(out), "--json", env={"ENVHUB_SERVE_TOKEN": TOKEN})
    assert result.code == 0, result.err
    assert json.loads(result.out)["rollouts"] == 2
    assert leaks([out.read_text(), result.out, result.err]) == []
    monkeypatch.setenv("ENVHUB_SERVE_TOKEN", OTHER_TOKEN)  # the second configured token works as well
    env = envhub.load(server.url("acme/guess"))
    tasks = list(env.tasks("test"))
    assert leaks([repr([dict(t) for t in tasks])]) == []
    with pytest.raises(UsageError, match="the reference policy cannot play held-out split 'test' of acme/guess"):
        env.reference_actions(tasks[0])
    env.close()
    assert len(SECRETS) == 14


# --- access ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("headers", "status", "code"), [
    ({}, 401, "token-required"),
    ({"Authorization": "Bearer wrong-token-0123456789"}, 401, "token-invalid"),
    ({"Authorization": f"Basic {TOKEN}"}, 401, "token-invalid"),
    ({"Authorization": f"Bearer {TOKEN}"}, 200, None),
], ids=["missing", "wrong", "not-bearer", "right"])
def test_heldout_needs_a_valid_token(raw: Recorder, headers: dict[str, str], status: int, code: str | None) -> None:
    for method, path, body in [("GET", "/v1/environments/acme/calc/splits/test/tasks", None),
                               ("POST", "/v1/environments/acme/calc/score",
                                {"split": "test", "task_id": "tu-test-001", "completion": "1"})]:
        response = raw(method, path, body, headers=headers)
        assert response.status_code == status, response.text
        if code is not None:
            assert response.json()["error"]["code"] == code
            assert response.headers["www-authenticate"] == 'Bearer realm="envhub"'
    assert raw("GET", "/v1/environments/acme/calc/splits/dev/tasks").status_code == 200  # public: open


def test_heldout_episode_needs_the_token_on_every_call(raw: Recorder) -> None:
    eid = raw("POST", "/v1/environments/acme/arith/episodes", {"split": "test", "index": 0},
              headers=_auth()).json()["episode_id"]
    for method, path, body in [("GET", f"/v1/episodes/{eid}", None),
                               ("POST", f"/v1/episodes/{eid}/step", {"action": "1"}),
                               ("DELETE", f"/v1/episodes/{eid}", None)]:
        assert raw(method, path, body).status_code == 401
    assert raw("DELETE", f"/v1/episodes/{eid}", headers=_auth()).status_code == 200


def test_client_without_token_is_told_how_to_send_one(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENVHUB_SERVE_TOKEN", raising=False)
    env = envhub.load(server.url("acme/calc"))
    with pytest.raises(RemoteError) as e:
        env.tasks("test")
    assert e.value.status == 401
    assert str(e.value) == ("split 'test' of acme/calc is held out: a bearer token is required\n"
                            "  hint: send the header 'Authorization: Bearer TOKEN' with a token the server's "
                            "operator gave you (envhub's client sends ENVHUB_SERVE_TOKEN)")
    env.close()


def test_require_token_protects_everything_but_health(limited: Server) -> None:
    assert httpx2.get(f"{limited.base_url}/v1/health").status_code == 200
    response = httpx2.get(f"{limited.base_url}/v1/environments")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "this server requires a bearer token for listing environments"
    assert httpx2.get(f"{limited.base_url}/v1/environments", headers=_auth()).status_code == 200
    assert httpx2.get(f"{limited.base_url}/v1/environments", headers=_auth(OTHER_TOKEN)).status_code == 401


def test_server_without_tokens_refuses_heldout_to_everyone(bundles: dict[str, Path], tmp_path: Path) -> None:
    s = start_server([str(bundles["single-turn"])], tmp_path)
    try:
        response = httpx2.get(f"{s.base_url}/v1/environments/acme/arith/splits/test/tasks", headers=_auth())
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "heldout-disabled"
        assert httpx2.get(f"{s.base_url}/v1/environments/acme/arith/splits/dev/tasks").status_code == 200
    finally:
        s.stop()
    assert "acme/arith: held-out split(s) test are refused to every request: no token is configured" in s.stderr()


# --- limits ------------------------------------------------------------------------------------


def _open(limited: Server, **body: Any) -> httpx2.Response:
    return httpx2.post(f"{limited.base_url}/v1/environments/acme/calc/episodes", headers=_auth(),
                       json={"split": "dev", "index": 0, **body})


def _close(limited: Server, eid: str) -> None:
    httpx2.delete(f"{limited.base_url}/v1/episodes/{eid}", headers=_auth())


def test_concurrency_limit_is_a_429_and_frees_on_close(limited: Server) -> None:
    ids = [_open(limited).json()["episode_id"] for _ in range(3)]

    def touch() -> None:  # restart the idle clocks (idle-timeout-s = 1.0), so none expires meanwhile
        for eid in ids:
            assert httpx2.get(f"{limited.base_url}/v1/episodes/{eid}", headers=_auth()).status_code == 200

    refused = _open(limited)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["message"] == "the server already has 3 open episodes, its limit (max-episodes)"
    _close(limited, ids.pop())
    ids.append(_open(limited).json()["episode_id"])
    # the client waits for a free slot (429 + Retry-After) up to busy_wait_s, then gives up
    env = load_remote(limited.url("acme/calc"), settings=Context.create(autoload=False, environ={}).settings,
                      token=TOKEN, busy_wait_s=0.3)
    task = env.tasks("dev")[0]
    touch()
    with pytest.raises(RemoteError) as e:
        env.episode(task).reset()
    assert e.value.status == 429
    threading.Timer(0.3, _close, (limited, ids.pop())).start()
    env._http.busy_wait_s = 10.0
    episode = env.episode(task)
    episode.reset()
    episode.close()
    for eid in ids:
        _close(limited, eid)
    health = httpx2.get(f"{limited.base_url}/v1/health").json()
    assert health["episodes"]["open"] == 0 and health["episodes"]["refused"] >= 2
    env.close()


def test_idle_episodes_expire_and_free_their_slot(limited: Server) -> None:
    before = httpx2.get(f"{limited.base_url}/v1/health").json()["episodes"]["expired"]
    ids = [_open(limited).json()["episode_id"] for _ in range(3)]
    time.sleep(2.0)  # idle-timeout-s = 1.0; the reaper runs every 0.25 s
    health = httpx2.get(f"{limited.base_url}/v1/health").json()["episodes"]
    assert health["open"] == 0 and health["expired"] == before + 3
    gone = httpx2.get(f"{limited.base_url}/v1/episodes/{ids[0]}", headers=_auth())
    assert gone.status_code == 410
    assert gone.json()["error"] == {
        "status": 410, "code": "episode-expired",
        "message": f"episode {ids[0]!r} was closed: no request for 1 s (idle-timeout-s)",
        "hint": "start a new episode; keep requests within the server's idle timeout and wall-clock limit "
                "(GET /v1/health shows them)"}
    more = [_open(limited) for _ in range(3)]
    assert [r.status_code for r in more] == [201, 201, 201]
    for r in more:
        _close(limited, r.json()["episode_id"])


def test_wall_clock_limit_ends_a_busy_episode(limited: Server) -> None:
    eid = _open(limited).json()["episode_id"]
    url = f"{limited.base_url}/v1/episodes/{eid}"
    response = httpx2.post(f"{url}/step", headers=_auth(), timeout=30,
                           json={"action": _tool_call("wait", seconds=3)})  # longer than episode-timeout-s
    assert response.status_code == 410
    assert response.json()["error"]["message"] == (
        f"episode {eid!r} was closed: its wall-clock limit of 1.5 s passed during a step (episode-timeout-s)")
    # kept alive by requests, an episode still ends at its wall-clock limit
    eid = _open(limited).json()["episode_id"]
    start = time.monotonic()
    while httpx2.get(f"{limited.base_url}/v1/episodes/{eid}", headers=_auth()).status_code == 200:
        assert time.monotonic() - start < 5
        time.sleep(0.2)
    assert time.monotonic() - start >= 1.2


def test_oversized_bodies_are_a_json_413(limited: Server) -> None:
    big = {"action": "x" * 5000}
    declared = httpx2.post(f"{limited.base_url}/v1/episodes/whatever/step", headers=_auth(), json=big)
    assert declared.status_code == 413
    assert declared.json()["error"]["message"] == ("the request body is larger than this server's limit of 4096 "
                                                   "bytes (max-body-bytes)")

    def chunks() -> Any:  # no Content-Length: counted as it arrives
        for _ in range(10):
            yield b"x" * 1000

    eid = _open(limited).json()["episode_id"]
    streamed = httpx2.post(f"{limited.base_url}/v1/episodes/{eid}/step", headers=_auth(), content=chunks())
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "body-too-large"
    _close(limited, eid)


# --- the eval command against a served environment ------------------------------------------------


@pytest.mark.parametrize("protocol", list(NAMES))
def test_envhub_eval_runs_against_the_server(protocol: str, server: Server, bundles: dict[str, Path],
                                             tmp_path: Path) -> None:
    out = tmp_path / "dev.jsonl"
    result = run_envhub("eval", server.url(NAMES[protocol]), "--split", "dev", "--policy", "reference",
                        "-o", str(out), "--json", "-c", "4")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert (summary["rollouts"], summary["mean_reward"], summary["errors"]) == (2, 1.0, 0)
    local = envhub.load(bundles[protocol], trust_code=True)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["env"], r["version"], r["digest"], r["source"]) for r in records} == {
        (NAMES[protocol], "0.1.0", local.digest, server.url(NAMES[protocol]))}
    by_task = {}
    for task in local.tasks("dev"):  # the same episodes, in this process
        with local.episode(task) as episode:
            episode.reset()
            for action in local.reference_actions(task):
                if episode.step(action).done:
                    break
            by_task[task.id] = episode.messages
    assert {r["task_id"]: r["messages"] for r in records} == by_task


def test_envhub_eval_reference_on_heldout_is_refused(server: Server, tmp_path: Path) -> None:
    result = run_envhub("eval", server.url("acme/calc"), "--split", "test", "-o", str(tmp_path / "x.jsonl"),
                        env={"ENVHUB_SERVE_TOKEN": TOKEN})
    assert result.code == 2
    assert result.err.startswith("envhub: error: the reference policy cannot play held-out split 'test' of acme/calc")
    assert not (tmp_path / "x.jsonl").exists()


def test_concurrent_eval_through_the_client(server: Server, tmp_path: Path) -> None:
    out = tmp_path / "big.jsonl"
    open_before = httpx2.get(f"{server.base_url}/v1/health").json()["episodes"]["open"]
    result = run_envhub("eval", server.url("acme/arith"), "--split", "big", "-n", "160", "-c", "32",
                        "-o", str(out), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["mean_reward"] == 1.0
    assert len(out.read_text().splitlines()) == 160
    health = httpx2.get(f"{server.base_url}/v1/health").json()["episodes"]
    assert health["open"] == open_before  # every episode ended, and was closed on the server


# --- the client's URL, and the command line ---------------------------------------------------------


@pytest.mark.parametrize(("url", "message"), [
    ("http://127.0.0.1:1", "'http://127.0.0.1:1' names no environment"),
    ("http:///acme/x", "'http:///acme/x' is not an http:// or https:// URL of a server"),
    ("http://127.0.0.1:1/Acme/X!", "'http://127.0.0.1:1/Acme/X!' does not end in an environment id"),
])
def test_client_url_errors(url: str, message: str) -> None:
    with pytest.raises(UsageError) as e:
        envhub.load(url)
    assert e.value.message.startswith(message)
    assert e.value.hint == "use http://HOST:PORT/NAMESPACE/NAME, as printed by 'envhub serve'"


def test_client_version_pin_and_prefix(server: Server) -> None:
    assert envhub.load(server.url("acme/arith@0.1.0")).version == "0.1.0"
    with pytest.raises(EnvNotFoundError, match=r"serves acme/arith 0\.1\.0, not acme/arith@2\.0\n"):
        envhub.load(server.url("acme/arith@2.0"))
    with pytest.raises(RemoteError) as e:  # a prefix the server does not have: no such route
        envhub.load(f"{server.base_url}/under/acme/arith")
    assert e.value.status == 404


def test_serve_command_errors(bundles: dict[str, Path], tmp_path: Path, envhub_cli: Any) -> None:
    result = envhub_cli("serve")
    assert result.code == 2 and result.err.startswith("envhub: error: nothing to serve")
    bad = tmp_path / "serve.toml"
    bad.write_text('port = "x"\n[limits]\nmax-episodes = 0\nidle-timeout = 3\n[access]\ntokens = ["short"]\n')
    result = envhub_cli("serve", str(bundles["single-turn"]), "--config", str(bad))
    assert result.code == 2
    assert result.err.splitlines()[0] == (
        f"envhub: error: invalid serve configuration in {bad}: port: Input should be a valid integer, unable to parse "
        "string as an integer; access.tokens: token 1 is shorter than 16 characters or has surrounding spaces; "
        'make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"; limits.max-episodes: Input '
        "should be greater than or equal to 1; limits.idle-timeout: Extra inputs are not permitted")
    result = envhub_cli("serve", str(bundles["single-turn"]), "--require-token")
    assert result.code == 2 and "require-token is set but no token is configured" in result.err
    result = envhub_cli("serve", "http://127.0.0.1:1/acme/x")
    assert result.code == 2
    assert "envhub serve serves bundles and registry ids, not another server's URL" in result.err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        result = run_envhub("serve", str(bundles["single-turn"]), "--port", port)  # the installed command
    assert result.code == 2 and f"cannot listen on 127.0.0.1:{port}" in result.err
    assert "Traceback" not in result.err


def test_serve_is_listed_and_settings_hide_tokens() -> None:
    result = run_envhub("--help")
    assert "serve" in result.out
    settings = Context.create(autoload=False, environ={
        "ENVHUB_HOME": "/h", "ENVHUB_CACHE": "/c", "ENVHUB_SERVE_TOKEN": "client-secret-x",
        "ENVHUB_SERVE_TOKENS": " a-secret-token-000001 ,b-secret-token-000002,"}).settings
    assert settings.serve_token == "client-secret-x"
    assert settings.serve_tokens == ("a-secret-token-000001", "b-secret-token-000002")
    assert "secret" not in repr(settings)


def test_serve_registry_ids_with_and_without_their_heldout_store(bundles: dict[str, Path], tmp_path: Path) -> None:
    """Ids are pulled with their held-out splits where the held-out store has them; where it
    does not, the public splits are served and the log says why."""
    home = {"ENVHUB_HOME": str(tmp_path / "home"), "ENVHUB_CACHE": str(tmp_path / "cache")}
    assert run_envhub("push", str(bundles["single-turn"]), env=home).code == 0
    elsewhere = {**home, "ENVHUB_HELDOUT_STORE": (tmp_path / "other-store").as_uri()}
    assert run_envhub("push", str(bundles["tool-use"]), env=elsewhere).code == 0
    s = start_server(["acme/arith@0.1.0", "acme/calc", "--trust"], tmp_path,
                     env={"ENVHUB_SERVE_TOKENS": TOKEN})
    try:
        splits = {e["name"]: {sp["name"]: sp["available"] for sp in e["splits"]}
                  for e in httpx2.get(f"{s.base_url}/v1/environments").json()["environments"]}
        assert splits["acme/arith"]["test"] is True and splits["acme/calc"]["test"] is False
        held = httpx2.get(f"{s.base_url}/v1/environments/acme/arith/splits/test/tasks", headers=_auth()).json()
        assert [t["id"] for t in held["tasks"]] == ["st-test-001", "st-test-002"]
        missing = httpx2.get(f"{s.base_url}/v1/environments/acme/calc/splits/test/tasks", headers=_auth())
        assert missing.status_code == 404
        assert "split 'test' is held out, and its tasks are not in this copy" in missing.json()["error"]["message"]
    finally:
        s.stop()
    assert "acme/calc: the held-out splits are not served" in s.stderr()


# --- what a client without a token learns of a held-out generator split ----------------------

_GENERATOR = '''
def make(seed, difficulty):
    return {"id": f"g-{seed}", "prompt": f"Repeat the number {seed} (level {difficulty}).", "answer": str(seed)}
'''


def _generator_bundle(root: Path) -> tuple[Path, str]:
    """A generator bundle whose source manifest holds what must not be served: a held-out
    seed range (the old form) and a held-out split's secret (its key file, and a comment)."""
    from envhub.tasks import write_secret

    root.mkdir(parents=True)
    (root / "gen.py").write_text(_GENERATOR)
    key = write_secret(root / "secrets" / "test.key")
    (root / "envhub.toml").write_text('''# the old test seeds were 771000..771010, and the key is in secrets/test.key
[environment]
name = "acme/gen"
version = "1.0.0"
description = "Repeat a number."
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[tasks]
format = "generator"
generator = "gen:make"
difficulty-levels = [1, 2]
splits.train = { seeds = [0, 1000] }
splits.old = { seeds = [771000, 771010], held-out = true }
splits.test = { held-out = true, rows = 8, seed-space = [1000000, 2000000], secret = "secrets/test.key" }

[verifier]
kind = "exact-match"
''')
    return root, key


def test_served_manifest_is_the_public_one_without_held_out_seeds_or_secrets(tmp_path: Path) -> None:
    from envhub.bundle import build_bundle
    from envhub.manifest import dump_manifest

    root, key = _generator_bundle(tmp_path / "gen")
    with envhub.load(root, trust_code=True) as source:
        test_seeds = [str(t.seed) for t in source.tasks("test")]
        old_seeds = [str(t.seed) for t in source.tasks("old")]
    forbidden = ["771000", "771010", key, "secrets/test.key", *test_seeds, *old_seeds]
    # Positive control: the file on disk (what serve used to return) gives the old range and
    # names the secret; the drawn seeds are nowhere but in what is made with the key.
    on_disk = (root / "envhub.toml").read_text()
    assert sorted({f for f in forbidden if f in on_disk}) == ["771000", "771010", "secrets/test.key"]
    built = dump_manifest(build_bundle(root, tmp_path / "dist", plugins=make_plugin_manager(autoload=False)).manifest)

    s = start_server([str(root), "--trust"], tmp_path / "serve", env={"ENVHUB_SERVE_TOKENS": TOKEN})
    try:
        responses = [httpx2.get(f"{s.base_url}{path}") for path in (
            "/v1/environments", "/v1/environments/acme/gen", "/v1/environments/acme/gen/splits/train/tasks?limit=3",
            "/v1/environments/acme/gen/splits/test/tasks", "/v1/environments/acme/gen/splits/old/tasks")]
        assert [r.status_code for r in responses] == [200, 200, 200, 401, 401]
        detail = responses[1].json()
        assert detail["manifest"] == built  # exactly what a pull of the built bundle reads
        assert "seed-space" in detail["manifest"] and "sha256" in detail["manifest"]
        assert [f for f in forbidden if any(f in r.text for r in responses)] == []
        # With the token, held-out tasks are served by id and prompt: the id does not name the seed.
        held = httpx2.get(f"{s.base_url}/v1/environments/acme/gen/splits/test/tasks", headers=_auth())
        assert [t["id"] for t in held.json()["tasks"]] == [f"test-{i}" for i in range(8)]
        assert all("seed" not in t and "data" not in t for t in held.json()["tasks"])
        # Positive control: this generator puts its seed in the prompt, which a token holder sees.
        assert all(seed in held.text for seed in test_seeds)
    finally:
        s.stop()


# --- the protocol's messages (envhub.runtime.served) -------------------------------------------------


def test_every_answer_of_a_real_server_decodes_to_its_record_and_encodes_back(raw: Recorder) -> None:
    """The server and the client share one encoding: what the server sends is exactly what
    the records make, field for field."""
    from envhub.runtime.served import EnvironmentDetail, EpisodeCreated, ScoreView, StepView, TaskPage, TaskView

    detail = raw("GET", "/v1/environments/acme/calc").json()
    assert EnvironmentDetail.from_json(detail).to_json() == detail
    listed = raw("GET", "/v1/environments").json()["environments"]
    assert [EnvironmentDetail.from_json({**s, "score_version": 1, "max_turns": 1}).summary_json() for s in listed] \
        == listed
    for split, headers in (("train", {}), ("test", _auth())):
        page = raw("GET", f"/v1/environments/acme/calc/splits/{split}/tasks", headers=headers).json()
        assert TaskPage.from_json(page).to_json() == page
        held_out = TaskView.from_json(page["tasks"][0])
        assert (held_out.data is None) == (split == "test")
    created = raw("POST", "/v1/environments/acme/calc/episodes", {"split": "train", "index": 0}).json()
    assert EpisodeCreated.from_json(created).to_json() == created
    step = raw("POST", f"/v1/episodes/{created['episode_id']}/step", {"action": "no idea"}).json()
    assert StepView.from_json(step).to_json() == step
    score = raw("POST", "/v1/environments/acme/calc/score",
                {"split": "train", "task_id": created["task"]["id"], "completion": "1"}).json()
    assert ScoreView.from_json(score).to_json() == {k: score[k] for k in ("reward", "breakdown", "error")}


@pytest.mark.parametrize(("record", "body", "message"), [
    ("StepView", {"observation": {"messages": []}, "turns": 1}, "step: field 'done' is missing"),
    ("StepView", {"observation": {}, "done": "yes", "turns": 1}, "step: field 'done' has the wrong type (str)"),
    ("ScoreView", {"reward": True}, "score: field 'reward' has the wrong type (bool)"),
    ("EpisodeCreated", [], "episode: expected a JSON object, got list"),
    ("TaskPage", {"total": 1, "tasks": [{"id": "a"}]}, "task: field 'split' is missing"),
], ids=["missing", "wrong-type", "bool-is-no-number", "not-an-object", "nested"])
def test_a_message_that_is_not_the_protocols_is_a_protocol_error(record: str, body: Any, message: str) -> None:
    from envhub.runtime import served

    with pytest.raises(served.ProtocolError) as info:
        getattr(served, record).from_json(body)
    assert info.value.message == message
    assert info.value.hint == "use the same envhub version on the client as on the server"


def test_the_protocol_version_is_in_one_place() -> None:
    from envhub.runtime.served import PREFIX, PROTOCOL_VERSION

    assert (PROTOCOL_VERSION, PREFIX) == (1, "/v1")


def test_client_request_bodies_leave_out_defaults_as_the_server_reads_them() -> None:
    from envhub.runtime.served import CreateEpisodeRequest, ScoreRequest

    body = CreateEpisodeRequest.model_construct(split="test", index=0, seed=None, policy_model=None,
                                                force_self_judge=False).to_json()
    assert body == {"split": "test", "index": 0}
    assert CreateEpisodeRequest.model_validate(body).index == 0
    score = ScoreRequest.model_construct(split="dev", task_id="t", completion="4", policy_model="m",
                                         force_self_judge=True).to_json()
    assert score == {"split": "dev", "task_id": "t", "completion": "4", "policy_model": "m", "force_self_judge": True}


def test_serve_without_envhub_registry_says_how_to_install_it_from_a_checkout(tmp_path: Path) -> None:
    import subprocess
    import sys

    # envhub-registry is installed here: the child interpreter is told it is not.
    code = ("import sys; sys.modules['envhub_registry'] = None; sys.argv = ['envhub', 'serve', 'x']\n"
            "import runpy; runpy.run_module('envhub', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "envhub serve needs the envhub-registry distribution, which is not installed" in proc.stderr
    assert "pip install ./registry" in proc.stderr
    assert "pip install envhub-registry" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_serve_refuses_a_composite_environment_with_a_clear_error(tmp_path: Path) -> None:
    from envhub_registry import load_environments

    composite = Path(__file__).resolve().parent.parent / "example_envs" / "math-and-shop"
    context = Context.create(autoload=False, environ={"ENVHUB_HOME": str(tmp_path / "home"),
                                                      "ENVHUB_CACHE": str(tmp_path / "cache")})
    with pytest.raises(UsageError) as info:
        load_environments([str(composite)], context=context, trust=True, registry=None, offline=True)
    assert info.value.message == (f"{composite}: envhub serve does not serve composite environments "
                                  "(envhub-examples/math-and-shop mixes other environments' splits)")
    assert info.value.hint == "serve the bundles of the environments it mixes"
