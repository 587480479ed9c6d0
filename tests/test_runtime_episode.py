"""Episodes of each harness protocol, state kinds and their isolation, through envhub.load."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

import envhub
from envhub.errors import EnvNotFoundError, UsageError
from tests.runtime_fixtures import boxed_answer, scaffold, set_table, write_rows


def tool_call(name: str, arguments: object, call_id: str = "c1") -> dict[str, object]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]}


# --- single-turn ---------------------------------------------------------------------


def test_single_turn_episode(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path))
    tasks = env.tasks("train")
    assert [t.id for t in tasks] == [f"arith-train-{i:03d}" for i in range(1, 7)]
    task = tasks[0]
    episode = env.episode(task)
    observation = episode.reset()
    assert [m["role"] for m in observation.messages] == ["system", "user"]
    assert observation.messages[1]["content"] == task.prompt
    assert observation.tools == []
    result = episode.step(boxed_answer(task))
    assert (result.done, result.reward, result.info["breakdown"]) == (True, 1.0, {})
    with pytest.raises(UsageError, match="the episode is done"):
        episode.step("again")
    wrong = env.episode(task)
    wrong.reset()
    assert wrong.step("\\boxed{-1}").reward == 0.0


def test_step_before_reset(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path))
    with pytest.raises(UsageError, match=r"call reset\(\) before step\(\)"):
        env.episode(env.tasks("train")[0]).step("1")


def test_a_missing_split_lists_the_splits_and_never_falls_back(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path))
    with pytest.raises(EnvNotFoundError) as e:
        env.tasks("validation")
    assert e.value.message == "acme/demo has no split 'validation' (splits: train, dev, test)"


def test_tasks_seed_and_limit(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path))
    ids = [t.id for t in env.tasks("train")]
    shuffled = [t.id for t in env.tasks("train", seed=3)]
    assert sorted(shuffled) == sorted(ids) and shuffled != ids
    assert [t.id for t in env.tasks("train", seed=3)] == shuffled
    assert [t.id for t in env.tasks("train", seed=3, limit=2)] == shuffled[:2]
    assert env.task("dev", "arith-dev-001").split == "dev"
    with pytest.raises(EnvNotFoundError, match="no task 'nope' in split 'dev'"):
        env.task("dev", "nope")


def test_score_takes_a_completion_or_a_trajectory(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path))
    task = env.tasks("dev")[0]
    assert env.score(task, boxed_answer(task)).reward == 1.0
    trajectory = [{"role": "user", "content": "q"}, {"role": "assistant", "content": boxed_answer(task)}]
    assert env.score(task, trajectory).reward == 1.0
    assert asyncio.run(env.ascore(task, "no number here")).reward == 0.0


def test_a_verifier_that_raises_scores_zero_with_the_error(tmp_path: Path) -> None:
    root = scaffold(tmp_path)
    (root / "checks.py").write_text("def check(task, completion):\n    raise RuntimeError('grader crashed')\n")
    set_table(root, "verifier", 'kind = "python"\nentry-point = "checks:check"')
    env = envhub.load(root, trust_code=True)
    episode = env.episode(env.tasks("train")[0])
    episode.reset()
    result = episode.step("anything")
    assert (result.done, result.reward) == (True, 0.0)
    assert result.info["error"] == "RuntimeError: grader crashed"
    assert episode.score is not None and episode.score.error == "RuntimeError: grader crashed"


# --- multi-turn ----------------------------------------------------------------------


def test_multi_turn_episode_bisects_to_the_answer(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path, protocol="multi-turn"), trust_code=True)
    task = env.tasks("train")[0]
    episode = env.episode(task)
    episode.reset()
    low, high = 1, 100
    for _ in range(8):
        guess = (low + high) // 2
        result = episode.step(str(guess))
        if result.done:
            break
        feedback = result.observation.messages[-1]
        assert feedback["role"] == "user" and feedback["content"] in ("higher", "lower")
        low, high = (guess + 1, high) if feedback["content"] == "higher" else (low, guess - 1)
    assert (result.done, result.reward) == (True, 1.0)
    assert episode.turns <= 7 and not episode.truncated


def test_multi_turn_max_turns_is_enforced(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path, protocol="multi-turn"), trust_code=True)
    task = next(t for t in env.tasks("train") if t["answer"] != "1")
    episode = env.episode(task)
    episode.reset()
    results = [episode.step("1") for _ in range(8)]
    assert [r.done for r in results] == [False] * 7 + [True]
    assert results[-1].reward == 0.0 and results[-1].info["truncated"] is True
    assert episode.turns == env.max_turns == 8


def test_recent_turns_context_keeps_the_prompt_and_the_last_turns(tmp_path: Path) -> None:
    root = scaffold(tmp_path, protocol="multi-turn")
    text = (root / "envhub.toml").read_text().replace(
        "max-turns = 8", "max-turns = 8\ncontext = \"recent-turns\"\nkeep-turns = 2")
    (root / "envhub.toml").write_text(text)
    env = envhub.load(root, trust_code=True)
    episode = env.episode(next(t for t in env.tasks("train") if t["answer"] not in ("1", "2", "3")))
    episode.reset()
    for guess in ("1", "2", "3"):
        observation = episode.step(guess).observation
    assert [m["content"] for m in observation.messages[2:]] == ["higher", "2", "higher", "3", "higher"]
    assert [m["role"] for m in observation.messages[:2]] == ["system", "user"]
    assert len(episode.messages) == 8


# --- tool-use ------------------------------------------------------------------------


def test_tool_use_episode_calls_tools_and_answers(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path, protocol="tool-use"), trust_code=True)
    task = env.tasks("train")[0]
    episode = env.episode(task)
    observation = episode.reset()
    assert [t["function"]["name"] for t in observation.tools] == ["calculate"]
    a, b = [int(w) for w in task.prompt.replace("?", "").split() if w.isdigit()]
    result = episode.step(tool_call("calculate", {"expression": f"{a} * {b}"}))
    assert not result.done and result.reward is None
    assert result.observation.messages[-1] == {"role": "tool", "tool_call_id": "c1", "name": "calculate",
                                               "content": str(a * b)}
    result = episode.step(f"\\boxed{{{a * b}}}")
    assert (result.done, result.reward) == (True, 1.0)


@pytest.mark.parametrize(("action", "reply"), [
    (tool_call("calculate", "{oops"), "Error: the arguments of calculate are not valid JSON (Expecting property "
                                      "name enclosed in double quotes at position 1)"),
    (tool_call("rm", {"path": "/"}), "Error: unknown tool 'rm'; available tools: calculate"),
    (tool_call("calculate", {"expression": "__import__('os')"}), "Error: ValueError: only numbers and + - * / are "
                                                                "allowed"),
    (tool_call("calculate", {}), "Error: invalid arguments for calculate: expression: Field required"),
], ids=["unparseable", "unknown-tool", "tool-raises", "missing-argument"])
def test_bad_tool_calls_become_observations(tmp_path: Path, action: dict[str, object], reply: str) -> None:
    env = envhub.load(scaffold(tmp_path, protocol="tool-use"), trust_code=True)
    episode = env.episode(env.tasks("train")[0])
    episode.reset()
    result = episode.step(action)
    assert not result.done
    assert result.observation.messages[-1]["content"] == reply
    assert result.info["tool_errors"] == [reply] and episode.tool_errors == 1


def test_tool_use_max_turns_is_enforced(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path, protocol="tool-use"), trust_code=True)
    episode = env.episode(env.tasks("train")[0])
    episode.reset()
    results = [episode.step(tool_call("calculate", {"expression": "1+1"})) for _ in range(6)]
    assert [r.done for r in results] == [False] * 5 + [True]
    assert results[-1].info["truncated"] is True and results[-1].reward == 0.0


def test_async_episode(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path, protocol="tool-use", state="sqlite"), trust_code=True)
    task = next(t for t in env.tasks("train") if "out of stock" in t.prompt)

    async def main() -> float | None:
        async with env.episode(task) as episode:
            await episode.areset()
            step = await episode.astep(tool_call("run_sql", {"query": "SELECT count(*) FROM products WHERE stock = 0"}))
            assert step.observation.messages[-1]["content"] == task["answer"]
            return (await episode.astep(f"\\boxed{{{task['answer']}}}")).reward

    assert asyncio.run(main()) == 1.0


# --- state ---------------------------------------------------------------------------


def test_sqlite_writes_never_reach_the_next_episode(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path, protocol="tool-use", state="sqlite"), trust_code=True)
    task = env.tasks("train")[0]
    first = env.episode(task)
    first.reset()
    assert isinstance(first.state, sqlite3.Connection)
    first.state.execute("DELETE FROM products")
    first.state.execute("CREATE TABLE scratch (x)")
    first.state.commit()
    second = env.episode(task)
    second.reset()
    assert second.state.execute("SELECT count(*) FROM products").fetchone() == (8,)
    assert second.state.execute("SELECT count(*) FROM sqlite_master WHERE name = 'scratch'").fetchone() == (0,)
    assert (tmp_path / "acme-demo" / "state" / "shop.sqlite").stat().st_size > 0  # the snapshot itself untouched
    first.close()
    second.close()


def test_files_workspace_is_fresh_per_episode_and_removed_after(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path, protocol="tool-use", state="files"), trust_code=True)
    task = env.tasks("train")[0]
    with env.episode(task) as first:
        first.reset()
        workspace = first.state
        (workspace / "inventory.csv").write_text("item,quantity\n")
        (workspace / "new.txt").write_text("x")
    assert not workspace.exists()
    with env.episode(task) as second:
        second.reset()
        assert not (second.state / "new.txt").exists()
        assert (second.state / "inventory.csv").read_text().startswith("item,quantity\nbolts,120")
        assert second.state != workspace
    snapshot = tmp_path / "acme-demo" / "state" / "workspace"
    assert sorted(p.name for p in snapshot.iterdir()) == ["inventory.csv", "notes"]


def test_state_is_released_when_the_episode_ends(tmp_path: Path) -> None:
    env = envhub.load(scaffold(tmp_path, protocol="tool-use", state="files"), trust_code=True)
    task = env.tasks("train")[0]
    episode = env.episode(task)
    episode.reset()
    workspace = episode.state
    episode.step(f"\\boxed{{{task['answer']}}}")
    assert episode.state is None and not workspace.exists()


COUNTER = '''
class Counter:
    """State whose reset records the task, and that counts tool calls."""

    instances = 0

    def __init__(self):
        Counter.instances += 1
        self.calls = 0
        self.task_id = None

    def reset(self, task):
        self.task_id = task.id

    def close(self):
        self.closed = True


def bump(*, state) -> str:
    """Count a call."""
    state.calls += 1
    return f"{state.task_id}:{state.calls}"
'''


@pytest.mark.parametrize(("reset", "expected"), [
    ("per-episode", ["a:1", "a:1", "b:1"]),
    ("per-task", ["a:1", "a:2", "b:1"]),
    ("never", ["a:1", "a:2", "a:3"]),
], ids=["per-episode", "per-task", "never"])
def test_python_state_and_reset_scopes(tmp_path: Path, reset: str, expected: list[str]) -> None:
    root = scaffold(tmp_path, protocol="tool-use")
    (root / "demo" / "counter.py").write_text(COUNTER)
    text = (root / "envhub.toml").read_text().replace('tools = ["demo.tools:calculate"]',
                                                      'tools = ["demo.counter:bump"]')
    (root / "envhub.toml").write_text(text)
    set_table(root, "state", f'kind = "python"\nentry-point = "demo.counter:Counter"\nreset = "{reset}"')
    write_rows(root, "train", [{"id": "a", "prompt": "p", "answer": "1"}, {"id": "b", "prompt": "p", "answer": "1"}])
    seen = []
    with envhub.load(root, trust_code=True) as env:
        a, b = env.tasks("train")
        for task in (a, a, b):
            with env.episode(task) as episode:
                episode.reset()
                seen.append(episode.step(tool_call("bump", {})).observation.messages[-1]["content"])
    assert seen == expected


# --- loading and code ----------------------------------------------------------------


def test_untrusted_code_is_refused_with_how_to_trust_it(tmp_path: Path) -> None:
    with pytest.raises(envhub.TrustError) as e:
        envhub.load(scaffold(tmp_path, protocol="tool-use"))
    assert e.value.message == "acme/demo runs its own code (demo.tools:calculate), and it is not trusted"
    assert e.value.hint is not None and e.value.hint.startswith(
        "pass --trust (envhub eval, validate --check) or trust_code=True (envhub.load), or add \"acme\" to "
        "trusted-namespaces in ")


def test_a_trusted_namespace_in_config_needs_no_flag(tmp_path: Path) -> None:
    from envhub.settings import load_settings

    settings = load_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.config_file.write_text('trusted-namespaces = ["acme"]\n')
    env = envhub.load(scaffold(tmp_path, protocol="tool-use"))
    assert [t.name for t in env.tools] == ["calculate"]
    settings.config_file.write_text('trusted-namespaces = "acme"\n')
    with pytest.raises(UsageError, match="trusted-namespaces must be an array of namespaces"):
        envhub.load(scaffold(tmp_path, "acme/other", protocol="tool-use"))


def test_declarative_environments_need_no_trust(tmp_path: Path) -> None:
    assert envhub.load(scaffold(tmp_path)).name == "acme/demo"


def test_modules_of_the_same_name_in_two_bundles_do_not_clobber(tmp_path: Path) -> None:
    one = scaffold(tmp_path, "acme/calc", protocol="tool-use")
    two = scaffold(tmp_path, "other/calc", protocol="tool-use")
    tools = two / "calc" / "tools.py"
    tools.write_text(tools.read_text().replace("return str(int(value))", "return 'two:' + str(int(value))"))
    env_one = envhub.load(one, trust_code=True)
    env_two = envhub.load(two, trust_code=True)
    call = {"id": "c", "function": {"name": "calculate", "arguments": '{"expression": "2*3"}'}}
    assert env_one.tools[0].call(call).message["content"] == "6"
    assert env_two.tools[0].call(call).message["content"] == "two:6"
    assert env_one.tools[0].fn.__module__ != env_two.tools[0].fn.__module__
    import sys

    assert "calc" not in sys.modules and str(one) not in sys.path


def test_broken_bundle_code_is_a_bundle_error(tmp_path: Path) -> None:
    root = scaffold(tmp_path, protocol="tool-use")
    (root / "demo" / "tools.py").write_text("import not_a_module_anywhere\n")
    with pytest.raises(envhub.BundleError) as e:
        envhub.load(root, trust_code=True)
    assert e.value.message.startswith("acme/demo: cannot load the environment: acme/demo: importing demo.tools "
                                      "failed: No module named 'not_a_module_anywhere'")


def test_load_errors(tmp_path: Path) -> None:
    # A word with no "/" is a path (an id always has a namespace); one with a "/" that is no
    # valid id is neither.
    with pytest.raises(UsageError) as e:
        envhub.load("Not An Id")
    assert e.value.message == "Not An Id: no such bundle directory"
    with pytest.raises(UsageError, match=r"'acme/Not An Id' is neither a bundle directory nor an environment id"):
        envhub.load("acme/Not An Id")
    with pytest.raises(UsageError, match="no such bundle directory"):
        envhub.load(tmp_path / "missing")
    with pytest.raises(EnvNotFoundError):
        envhub.load("acme/never-published")


# --- from a registry -------------------------------------------------------------------


def test_load_by_id_from_the_registry_keeps_held_out_splits_apart(tmp_path: Path, envhub_cli) -> None:  # type: ignore[no-untyped-def]
    root = scaffold(tmp_path)
    pushed = envhub_cli("push", str(root), "--json")
    assert pushed.code == 0, pushed.err
    digest = json.loads(pushed.out)["digest"]
    env = envhub.load("acme/demo@0.1.0")
    assert (env.digest, env.provenance()["digest"]) == (digest, digest)
    assert env.splits["test"].held_out and not env.splits["test"].available
    assert env.splits["dev"].available
    with pytest.raises(EnvNotFoundError) as e:
        env.tasks("test")
    assert e.value.message == ("acme/demo: split 'test' is held out, and its tasks are not in this copy of the bundle")
    full = envhub.load("acme/demo", with_heldout=True)
    assert [t.id for t in full.tasks("test")] == ["arith-test-001", "arith-test-002"]
    task = full.tasks("test")[0]
    assert full.score(task, f"\\boxed{{{task['answer']}}}").reward == 1.0
    local = envhub.load(root)
    assert local.digest == digest  # a directory's digest is the one push publishes


def test_noise_fails_tool_calls_at_the_configured_rate_seeded_per_episode(tmp_path: Path) -> None:
    root = scaffold(tmp_path, protocol="tool-use")
    set_table(root, "config", "timeout-s = 60\nnoise = { tool-error-rate = 0.5 }")
    env = envhub.load(root, trust_code=True)
    task = env.tasks("train")[0]

    def outcomes(seed: int) -> list[bool]:
        episode = env.episode(task, seed=seed)
        episode.reset()
        out = []
        for _ in range(5):
            content = episode.step(tool_call("calculate", {"expression": "1+1"})).observation.messages[-1]["content"]
            assert content in ("2", "Error: the tool is temporarily unavailable; try again")
            out.append(content == "2")
        return out

    assert outcomes(1) == outcomes(1)  # the same seed, the same failures
    runs = [outcomes(seed) for seed in range(20)]
    failures = sum(not ok for run in runs for ok in run)
    assert 25 <= failures <= 75  # about half of 100 calls
