"""Policies: reference, noop, openai:MODEL over real HTTP, python:module:func, make_policy."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from envhub.context import make_plugin_manager
from envhub.errors import PolicyError, UsageError
from envhub.runtime import Observation, Task
from envhub.runtime.policies import (
    NoopPolicy,
    OpenAIPolicy,
    Policy,
    PythonPolicy,
    ReferencePolicy,
    make_policy,
    track_usage,
)
from envhub.settings import load_settings
from tests.openai_server import answer_table, fail_then, tool_then_answer

TASK = Task(id="t1", split="dev", data={"question": "2+2?", "answer": "4"}, prompt="2+2?")
TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}]


def observation(*assistant_turns: dict[str, Any], tools: list[dict[str, Any]] | None = None) -> Observation:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    for turn in assistant_turns:
        messages.append(turn)
        messages.append({"role": "user", "content": "go on"})
    return Observation(messages, list(tools or []))


def act(policy: Policy, obs: Observation, env: Any = None) -> Any:
    async def run() -> Any:
        try:
            return await policy.act(obs, TASK, env=env)
        finally:
            await policy.aclose()

    return asyncio.run(run())


PLUGINS = make_plugin_manager(autoload=False)


def settings(**environ: str):  # type: ignore[no-untyped-def]
    return load_settings({"ENVHUB_HOME": "/nonexistent/home", "ENVHUB_CACHE": "/nonexistent/cache", **environ})


# --- reference and noop ----------------------------------------------------------------------------


class ReferenceEnv:
    """Stands in for Environment: only ``reference_actions`` is used by the policy."""

    def __init__(self, actions: list[dict[str, Any]]) -> None:
        self.actions = actions

    def reference_actions(self, task: Task) -> list[dict[str, Any]]:
        assert task is TASK
        return self.actions


CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}]}
ANSWER = {"role": "assistant", "content": "4"}


@pytest.mark.parametrize(("turns_played", "expected"), [
    ((), CALL),
    ((CALL,), ANSWER),
    ((CALL, ANSWER), ""),  # past the end: an empty message
], ids=["first-turn", "second-turn", "past-the-end"])
def test_reference_replays_turn_by_turn(turns_played: tuple[dict[str, Any], ...], expected: Any) -> None:
    env = ReferenceEnv([CALL, ANSWER])
    action = act(ReferencePolicy(), observation(*turns_played), env)
    assert action == expected
    if isinstance(action, dict):
        assert action is not CALL and action is not ANSWER  # a copy: the episode may change it


def test_reference_and_noop_names() -> None:
    for spec in ("reference", "noop"):
        policy = make_policy(spec, settings=settings(), plugins=PLUGINS)
        assert (policy.name, policy.model) == (spec, None)
    assert act(NoopPolicy(), observation()) == ""


# --- openai:MODEL --------------------------------------------------------------------------------------


def test_openai_sends_conversation_tools_sampling_and_key(openai_server) -> None:
    openai_server.script = answer_table({"2+2?": "4"})
    policy = make_policy("openai:gpt-test", base_url=openai_server.base_url, api_key="sk-1",
                         sampling={"temperature": 0.5, "top_p": 0.9, "max_tokens": 64,
                                   "stop": ["\n\n"]}, settings=settings(), plugins=PLUGINS)
    assert (policy.name, policy.model) == ("openai:gpt-test", "gpt-test")
    obs = observation(tools=TOOLS)
    assert act(policy, obs) == {"role": "assistant", "content": "4"}
    [request] = openai_server.requests
    assert request.json == {"model": "gpt-test", "messages": obs.messages, "tools": TOOLS, "temperature": 0.5,
                            "top_p": 0.9, "max_tokens": 64, "stop": ["\n\n"]}
    assert request.authorization == "Bearer sk-1"


def test_openai_omits_empty_tools_and_unset_sampling(openai_server) -> None:
    from envhub.manifest import Sampling

    policy = make_policy("openai:m", base_url=openai_server.base_url, sampling=Sampling(temperature=0.0),
                         settings=settings(), plugins=PLUGINS)
    act(policy, observation())
    assert set(openai_server.requests[0].json) == {"model", "messages", "temperature"}


def test_openai_returns_tool_calls_then_the_answer(openai_server) -> None:
    openai_server.script = tool_then_answer("add", {"a": 2, "b": 2}, lambda result: f"it is {result}")
    policy = make_policy("openai:m", base_url=openai_server.base_url, settings=settings(), plugins=PLUGINS)
    first = act(policy, observation(tools=TOOLS))
    assert first["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}]
    obs = observation(tools=TOOLS)
    obs.messages += [first, {"role": "tool", "tool_call_id": "call_1", "content": "4"}]
    assert act(make_policy("openai:m", base_url=openai_server.base_url, settings=settings(), plugins=PLUGINS), obs) == {
        "role": "assistant", "content": "it is 4"}


def test_openai_base_url_and_key_from_settings(openai_server) -> None:
    policy = make_policy("openai:m", settings=settings(OPENAI_BASE_URL=openai_server.base_url,
                                                       OPENAI_API_KEY="sk-env"), plugins=PLUGINS)
    act(policy, observation())
    assert openai_server.requests[0].authorization == "Bearer sk-env"
    # an argument wins over the environment
    policy = make_policy("openai:m", api_key="sk-arg",
                         settings=settings(OPENAI_BASE_URL=openai_server.base_url,
                                           OPENAI_API_KEY="sk-env"), plugins=PLUGINS)
    act(policy, observation())
    assert openai_server.requests[1].authorization == "Bearer sk-arg"


def test_openai_without_a_key_for_openai_is_refused() -> None:
    with pytest.raises(PolicyError) as exc:
        make_policy("openai:gpt-4o-mini", settings=settings(), plugins=PLUGINS)
    assert str(exc.value) == (
        "policy 'openai:gpt-4o-mini' needs an API key for https://api.openai.com/v1\n"
        "  hint: set OPENAI_API_KEY, or pass --base-url for a local server that needs no key")


def test_openai_model_names_may_contain_colons(openai_server) -> None:
    policy = make_policy("openai:ft:gpt-4o:acme:v1", base_url=openai_server.base_url, settings=settings(),
                         plugins=PLUGINS)
    act(policy, observation())
    assert openai_server.requests[0].model == "ft:gpt-4o:acme:v1"


def test_openai_retries_and_records_usage_per_task(openai_server) -> None:
    openai_server.script = fail_then(lambda request: "four", times=2, status=503)
    policy = make_policy("openai:m", base_url=openai_server.base_url, max_retries=3, settings=settings(),
                         plugins=PLUGINS)
    assert isinstance(policy, OpenAIPolicy)
    policy.client.backoff_base_s = 0.001

    async def episode() -> dict[str, Any]:
        with track_usage() as usage:
            await policy.act(observation(), TASK, env=None)
        return usage.as_dict()

    async def run() -> list[dict[str, Any]]:
        try:
            first = await asyncio.create_task(episode())
            # concurrent episodes each see only their own calls
            return [first, *await asyncio.gather(episode(), episode())]
        finally:
            await policy.aclose()

    usages = asyncio.run(run())
    assert [(u["requests"], u["attempts"]) for u in usages] == [(1, 3), (1, 1), (1, 1)]
    assert usages[1]["prompt_tokens"] == 3 and usages[1]["completion_tokens"] == 1


def test_openai_failure_is_a_policy_error(openai_server) -> None:
    from tests.openai_server import error

    openai_server.script = lambda request: error(401, "Incorrect API key provided")
    with pytest.raises(PolicyError) as exc:
        act(make_policy("openai:m", base_url=openai_server.base_url, api_key="bad", settings=settings(),
                        plugins=PLUGINS), observation())
    assert exc.value.message == (
        f"POST {openai_server.base_url}/chat/completions failed with 401 Unauthorized: Incorrect API key provided")


# --- python:module:func -----------------------------------------------------------------------------


@pytest.fixture
def policy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module ``my_policies`` in a directory on sys.path, and that directory as cwd."""
    name = f"my_policies_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent("""
        import asyncio

        def messages_only(messages):
            return "saw " + messages[-1]["content"]

        def with_everything(messages, *, tools, task, env, observation):
            return {"role": "assistant", "content": f"{len(tools)} tools, task {task.id}, env {env}"}

        def with_kwargs(messages, **kwargs):
            return ",".join(sorted(kwargs))

        async def async_policy(messages, tools=None):
            await asyncio.sleep(0)
            return {"content": "async " + str(len(tools))}

        def bad_return(messages):
            return 42

        def model_backed(messages):
            return "x"
        model_backed.model = "gpt-test"

        NOT_CALLABLE = 3
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


@pytest.mark.parametrize(("func", "expected"), [
    ("messages_only", "saw 2+2?"),
    ("with_everything", {"role": "assistant", "content": "1 tools, task t1, env ENV"}),
    ("with_kwargs", "env,observation,task,tools"),
    ("async_policy", {"content": "async 1"}),
], ids=["messages-only", "named-arguments", "kwargs", "async"])
def test_python_policy_calling_convention(policy_module: str, func: str, expected: Any) -> None:
    policy = make_policy(f"python:{policy_module}:{func}", settings=settings(), plugins=PLUGINS)
    assert isinstance(policy, PythonPolicy)
    assert policy.name == f"python:{policy_module}:{func}"
    assert act(policy, observation(tools=TOOLS), env="ENV") == expected


def test_python_policy_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.py"
    path.write_text("def act(messages):\n    return 'from file'\n")
    policy = make_policy(f"python:{path}:act", settings=settings(), plugins=PLUGINS)
    assert act(policy, observation()) == "from file"


def test_python_policy_declares_its_model(policy_module: str) -> None:
    assert make_policy(f"python:{policy_module}:model_backed", settings=settings(), plugins=PLUGINS).model == "gpt-test"


def test_python_policy_found_in_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # as with the `envhub` command, whose sys.path lacks the working directory
    (tmp_path / "cwd_policy_mod.py").write_text("def act(messages):\n    return 'cwd'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        assert act(make_policy("python:cwd_policy_mod:act", settings=settings(), plugins=PLUGINS),
                   observation()) == "cwd"
    finally:
        sys.modules.pop("cwd_policy_mod", None)
    assert str(tmp_path) not in sys.path


def test_python_policy_bad_return_value(policy_module: str) -> None:
    with pytest.raises(PolicyError) as exc:
        act(make_policy(f"python:{policy_module}:bad_return", settings=settings(), plugins=PLUGINS), observation())
    assert exc.value.message == (f"policy python:{policy_module}:bad_return returned int; a policy returns the "
                                 "assistant's text (str) or an assistant message (dict)")


@pytest.mark.parametrize(("target", "message"), [
    ("no_such_policy_module:act",
     "python policy module 'no_such_policy_module' cannot be imported: ModuleNotFoundError: "
     "No module named 'no_such_policy_module'"),
    ("{mod}:missing", "python policy '{mod}:missing': module '{mod}' has no attribute 'missing'"),
    ("{mod}:NOT_CALLABLE", "python policy '{mod}:NOT_CALLABLE': 'NOT_CALLABLE' is a int, not a function"),
    ("missing_file.py:act", "python policy file '{cwd}/missing_file.py' does not exist"),
], ids=["no-module", "no-attribute", "not-callable", "no-file"])
def test_python_policy_import_errors(policy_module: str, tmp_path: Path, target: str, message: str) -> None:
    with pytest.raises(PolicyError) as exc:
        make_policy("python:" + target.format(mod=policy_module), settings=settings(), plugins=PLUGINS)
    assert exc.value.message == message.format(mod=policy_module, cwd=tmp_path.resolve())


def test_python_policy_module_that_raises_on_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_policy_mod.py").write_text("import json\nraise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PolicyError) as exc:
        make_policy("python:broken_policy_mod:act", settings=settings(), plugins=PLUGINS)
    assert exc.value.message == ("python policy module 'broken_policy_mod' cannot be imported: "
                                 "RuntimeError: boom at import")
    assert isinstance(exc.value.__cause__, RuntimeError)


# --- make_policy -------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "python:", "python:nocolon", "random", ""],
                         ids=["bare-model", "openai-no-model", "python-empty", "python-no-func", "unknown", "empty"])
def test_unknown_policy_specs(spec: str) -> None:
    with pytest.raises(UsageError) as exc:
        make_policy(spec, settings=settings(), plugins=PLUGINS)
    if spec == "python:nocolon":
        assert exc.value.message == "python policy 'nocolon' is not module:func or path/to/file.py:func"
    else:
        assert exc.value.message == (
            f"unknown policy {spec!r}; a policy is one of: reference, noop, openai:MODEL, python:module:func, "
            "python:path/to/file.py:func")
