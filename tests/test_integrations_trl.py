"""envhub.integrations.trl, driven the way TRL's GRPOTrainer drives it.

TRL is not installed here, so ``TrlLoop`` below replays what ``trl/trainer/grpo_trainer.py``
(huggingface/trl at f2cd577) does with an environment factory, a dataset and reward
functions, call for call: ``GRPOTrainer.__init__`` probes one instance with
``inspect.getmembers(instance, inspect.ismethod)`` (``reset`` required, ``get_reward`` a
reward source, other public methods tools); ``_generate_and_score_completions`` repeats each
row ``num_generations`` times, draws instances from a pool, calls ``reset(**row)`` and builds
``{tool.__name__: tool}``; ``_tool_call_loop`` calls ``tool(**arguments)`` (arguments parsed
to a dict), appends ``{"role": "tool", "name", "content": str(result)}`` or ``{"error": ...}``
and generates again; ``_calculate_rewards`` calls each reward function with ``prompts``,
``completions``, ``completion_ids``, every other column as a list, ``trainer_state``,
``log_extra``, ``log_metric`` and ``environments``. The model is scripted: it reads the
board it was last shown and walks a shortest path (or, as the loser, into the trap).

The environments are real: example_envs/arith-word-problems (single-turn, scored by the
reward function) and example_envs/grid-game (tools, per-step rewards, games that end
themselves), loaded locally and served by a real ``envhub serve`` process.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.errors import EnvNotFoundError, UsageError
from envhub.integrations import trl as envhub_trl
from envhub.runtime import Environment
from tests.serve_fixtures import Server, start_server
from tests.test_example_grid_game import STEPS, shortest_first_move

EXAMPLES = Path(__file__).resolve().parents[1] / "example_envs"
GRID, ARITH = EXAMPLES / "grid-game", EXAMPLES / "arith-word-problems"
G = 4  # num_generations: each prompt is repeated G times, as RepeatSampler does

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def grid() -> Iterator[Environment]:
    with envhub.load(GRID, trust_code=True) as env:
        assert isinstance(env, Environment)
        yield env


@pytest.fixture(scope="module")
def arith() -> Iterator[Environment]:
    with envhub.load(ARITH, trust_code=True) as env:
        assert isinstance(env, Environment)
        yield env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server([str(GRID), str(ARITH), "--trust"], tmp_path_factory.mktemp("serve-trl"))
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.stderr()


# --- what TRL does ---------------------------------------------------------------------------


class TrainerState:
    """Stands in for transformers.TrainerState: reward functions only pass it along."""

    global_step = 0


class TrlLoop:
    """GRPOTrainer's environment and reward handling (see the module docstring), with a
    scripted model in place of generation."""

    def __init__(self, factory: Callable[[], Any], reward_funcs: list[Callable[..., list[float | None]]],
                 max_tool_calling_iterations: int = 50) -> None:
        self.factory = factory
        self.reward_funcs = list(reward_funcs)
        self.reward_names = [f.__name__ for f in reward_funcs]
        self.max_iterations = max_tool_calling_iterations
        probe = factory()  # GRPOTrainer.__init__
        members = dict(inspect.getmembers(probe, predicate=inspect.ismethod))
        assert "reset" in members, "Each environment instance returned by `environment_factory` must define reset"
        self.tools = [m for name, m in members.items() if name not in ("reset", "get_reward") and
                      not name.startswith("_")]
        if "get_reward" in members:
            def get_reward(environments: list[Any], **kwargs: Any) -> list[float | None]:
                return [e.get_reward() for e in environments]
            self.reward_funcs.append(get_reward)
            self.reward_names.append(type(probe).__name__)
        self.pool = [probe]
        self.metrics: dict[str, list[float]] = {}
        self.extra: dict[str, list[Any]] = {}
        self.tool_failures = 0

    def step(self, rows: list[dict[str, Any]], model: Callable[[list[dict[str, Any]]], dict[str, Any]]
             ) -> tuple[list[list[dict[str, Any]]], list[list[float | None]], list[Any]]:
        inputs = [dict(row) for row in rows for _ in range(G)]
        while len(self.pool) < len(inputs):  # _generate_and_score_completions: the pool grows as needed
            self.pool.append(self.factory())
        environments = self.pool[:len(inputs)]
        tool_dicts = [{m.__name__: m for name, m in inspect.getmembers(e, predicate=inspect.ismethod)
                       if name not in ("reset", "get_reward") and not name.startswith("_")} for e in environments]
        prompts = [list(x.get("prompt", [{"role": "user", "content": ""}])) for x in inputs]
        for i, (environment, x) in enumerate(zip(environments, inputs, strict=True)):
            observation = environment.reset(**x)
            if observation is not None:
                prompts[i] = prompts[i][:-1] + [{**prompts[i][-1], "content": prompts[i][-1]["content"] + observation}]
        completions = [[_parsed(model(p))] for p in prompts]  # _generate: parse_response
        original_prompts = [list(p) for p in prompts]
        for i in range(len(inputs)):  # _tool_call_loop
            iterations = 0
            while completions[i][-1].get("tool_calls") and iterations < self.max_iterations:
                prompts[i].append(completions[i][-1])
                for call in completions[i][-1]["tool_calls"]:
                    name = call["function"]["name"]
                    try:
                        if name not in tool_dicts[i]:
                            raise ValueError(f"Tool {name} not found.")
                        result = tool_dicts[i][name](**call["function"]["arguments"])
                    except Exception as e:
                        self.tool_failures += 1
                        result = {"error": str(e)}
                    message = {"role": "tool", "name": name, "content": result if isinstance(result, list)
                               else str(result)}
                    prompts[i].append(message)
                    completions[i].append(message)
                completions[i].append(_parsed(model(prompts[i])))
                iterations += 1
        # _calculate_rewards
        keys = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]
        kwargs: dict[str, Any] = {k: [x[k] for x in inputs] for k in keys}
        kwargs["trainer_state"] = TrainerState()
        kwargs["log_extra"] = lambda column, values: self.extra.setdefault(column, []).extend(values)
        kwargs["log_metric"] = lambda name, value: self.metrics.setdefault(name, []).append(value)
        kwargs["environments"] = environments
        completion_ids = [[len(json.dumps(m)) for m in c] for c in completions]  # token ids: unused by envhub
        rewards = [f(prompts=original_prompts, completions=completions, completion_ids=completion_ids, **kwargs)
                   for f in self.reward_funcs]
        return completions, rewards, environments


def _parsed(message: dict[str, Any]) -> dict[str, Any]:
    """A message as transformers' parse_response gives it: tool-call arguments as a dict."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    return {**message, "tool_calls": [{"type": "function", "function": {
        "name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}} for c in calls]}


def _board(messages: list[dict[str, Any]]) -> list[str]:
    for message in reversed(messages):
        lines = [line for line in str(message.get("content") or "").splitlines() if line and set(line) <= set(".#^$@")]
        if lines:
            return lines
    raise AssertionError("no board in the conversation")


def _move(direction: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "x", "type": "function",
         "function": {"name": "move", "arguments": json.dumps({"direction": direction})}}]}


def winner(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Walks a shortest path; once a tool says the game is over, answers in text."""
    last = messages[-1]
    if last["role"] == "tool" and ("You win" in str(last["content"]) or "Game over" in str(last["content"])):
        return {"role": "assistant", "content": "Done."}
    return _move(shortest_first_move(_board(messages)))


def into_the_trap(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Walks towards the nearest trap; then keeps calling move (the game is over: errors)."""
    board = _board(messages)
    calls = sum(1 for m in messages if m["role"] == "assistant")
    if calls >= 8:
        return {"role": "assistant", "content": "I give up."}
    cells = {(r, c): ch for r, line in enumerate(board) for c, ch in enumerate(line)}
    me = next(p for p, ch in cells.items() if ch == "@")
    trap = min((p for p, ch in cells.items() if ch == "^"), key=lambda p: abs(p[0] - me[0]) + abs(p[1] - me[1]))
    for name, (dr, dc) in STEPS.items():
        there = (me[0] + dr, me[1] + dc)
        if abs(there[0] - trap[0]) + abs(there[1] - trap[1]) < abs(me[0] - trap[0]) + abs(me[1] - trap[1]) \
                and cells.get(there, "#") != "#":
            return _move(name)
    return _move("north")


def replay(env: Any, task: Any, completion: list[dict[str, Any]]) -> tuple[float | None, list[float | None]]:
    """The same moves in a plain envhub episode (one call per turn): its reward and turn rewards."""
    with env.episode(task) as episode:
        episode.reset()
        for message in completion:
            if message["role"] == "assistant" and not episode.done:
                for call in message.get("tool_calls") or []:
                    if not episode.done:
                        episode.step(_move(call["function"]["arguments"]["direction"]))
                if not message.get("tool_calls") and not episode.done:
                    episode.step({"role": "assistant", "content": message["content"]})
        return episode.reward, list(episode.turn_rewards)


# --- the dataset ---------------------------------------------------------------------------


def test_the_dataset_has_the_harness_prompt_and_the_task(arith: Environment) -> None:
    dataset = envhub_trl.train_dataset(arith, "dev", limit=5)
    assert dataset.column_names == ["prompt", "task_id", "split"]
    tasks = arith.tasks("dev", limit=5)
    assert dataset["task_id"] == [t.id for t in tasks] and dataset["split"] == ["dev"] * 5
    for row, task in zip(dataset, tasks, strict=True):
        assert row["prompt"] == arith.harness.start(task).messages  # system prompt, then the rendered task prompt
        assert row["prompt"][0]["role"] == "system" and row["prompt"][-1]["role"] == "user"
    shuffled = envhub_trl.train_dataset(arith, "dev", seed=3, limit=5)
    assert shuffled["task_id"] == [t.id for t in arith.tasks("dev", seed=3, limit=5)] != dataset["task_id"]


def test_a_generated_split_needs_a_limit_and_held_out_splits_are_refused(grid: Environment) -> None:
    with pytest.raises(UsageError, match=r"^split 'train' of envhub-examples/grid-game has 1,000,000,000 tasks; "
                                         r"pass limit= \(a generator's tasks are made when drawn\)$"):
        envhub_trl.train_dataset(grid, "train")
    assert len(envhub_trl.train_dataset(grid, "train", limit=3)) == 3  # the control
    with pytest.raises(UsageError, match=r"^split 'test' of envhub-examples/grid-game is held out: training on it "
                                         r"spoils it as a test; train on another split, or pass allow_held_out=True"):
        envhub_trl.train_dataset(grid, "test")
    assert len(envhub_trl.train_dataset(grid, "test", allow_held_out=True)) == 30
    with pytest.raises(EnvNotFoundError):
        envhub_trl.train_dataset(grid, "nope")


def test_a_served_environment_gives_the_same_dataset(server: Server, arith: Environment) -> None:
    with envhub.load(server.url("envhub-examples/arith-word-problems")) as remote:
        assert not isinstance(remote, Environment)
        served = envhub_trl.train_dataset(remote, "dev", limit=4)
    assert served.to_list() == envhub_trl.train_dataset(arith, "dev", limit=4).to_list()


# --- reward functions, single-turn ---------------------------------------------------------


def _reward_kwargs(rows: list[dict[str, Any]], completions: list[Any]) -> dict[str, Any]:
    """What _calculate_rewards passes when there is no environment_factory."""
    inputs = [row for row in rows for _ in range(G)]
    metrics: dict[str, list[float]] = {}
    return {"prompts": [x["prompt"] for x in inputs], "completions": completions,
            "completion_ids": [[1, 2, 3] for _ in completions],
            **{k: [x[k] for x in inputs] for k in inputs[0] if k != "prompt"},
            "trainer_state": TrainerState(), "log_extra": lambda column, values: None,
            "log_metric": lambda name, value: metrics.setdefault(name, []).append(value), "_metrics": metrics}


def test_the_reward_function_scores_each_completion_with_the_verifier(arith: Environment) -> None:
    rows = envhub_trl.train_dataset(arith, "dev", limit=3).to_list()
    tasks = [arith.task(r["split"], r["task_id"]) for r in rows]
    texts = []
    for task in tasks:  # per group: right, wrong, unformatted, right again
        answer = task["answer"]
        texts += [f"So it is \\boxed{{{answer}}}", f"\\boxed{{{int(answer) + 1}}}", str(answer), f"\\boxed{{{answer}}}"]
    conversational = [[{"role": "assistant", "content": t}] for t in texts]
    (reward,) = envhub_trl.reward_funcs(arith)
    assert reward.__name__ == "envhub_reward"
    kwargs = _reward_kwargs(rows, conversational)
    metrics = kwargs.pop("_metrics")
    got = reward(**kwargs)
    assert got == [1.0, 0.0, 0.0, 1.0] * 3
    # the same as the verifier gives, completion by completion
    assert got == [arith.score(tasks[i // G], t).reward for i, t in enumerate(texts)]
    assert metrics == {"envhub/verifier_errors": [0.0]}
    # TRL's standard (text) format: prompts and completions are strings
    text_rows = [{**r, "prompt": "ignored"} for r in rows]
    kwargs = _reward_kwargs(text_rows, texts)
    kwargs.pop("_metrics")
    assert reward(**kwargs) == got


def test_the_reward_function_needs_the_task_columns(arith: Environment) -> None:
    rows = [{"prompt": [{"role": "user", "content": "2+2?"}]}]
    kwargs = _reward_kwargs(rows, [[{"role": "assistant", "content": "4"}]] * G)
    kwargs.pop("_metrics")
    (reward,) = envhub_trl.reward_funcs(arith)
    with pytest.raises(UsageError, match=r"^envhub_reward needs the dataset's 'task_id' and 'split' columns to find "
                                         r"each completion's task; build the dataset with "
                                         r"envhub.integrations.trl.train_dataset\(env, split\), and keep "
                                         r"GRPOConfig\(remove_unused_columns=False\), the default$"):
        reward(**kwargs)
    rows = [{**rows[0], "task_id": "arith-dev-99999", "split": "dev"}]
    kwargs = _reward_kwargs(rows, [[{"role": "assistant", "content": "4"}]] * G)
    kwargs.pop("_metrics")
    with pytest.raises(EnvNotFoundError, match="arith-dev-99999"):
        reward(**kwargs)


def test_a_responder_environment_has_no_tool_loop(tmp_path: Path) -> None:
    from envhub.scaffold import create_bundle

    path = create_bundle("acme/guess", tmp_path / "guess", protocol="multi-turn")
    with envhub.load(path, trust_code=True) as env:
        with pytest.raises(UsageError, match=r"^acme/guess answers the model with user turns \(a responder; harness "
                                             r"'multi-turn'\), which TRL's tool loop does not run"):
            envhub_trl.environment_factory(env)
        assert len(envhub_trl.train_dataset(env, "dev")) > 0  # its dataset and reward function still work


# --- the environment factory ---------------------------------------------------------------


def test_the_environment_exposes_the_tools_as_trl_reads_them(grid: Environment) -> None:
    factory = envhub_trl.environment_factory(grid)
    instance = factory()
    members = dict(inspect.getmembers(instance, predicate=inspect.ismethod))
    public = sorted(name for name in members if not name.startswith("_"))
    assert public == ["move", "reset"]  # reset is TRL's; no get_reward: the reward function finishes episodes
    move = members["move"]
    # what transformers' get_json_schema reads: name, signature without self, type hints, docstring
    assert move.__name__ == "move"
    assert str(inspect.signature(move)) == "(*, direction: str) -> str"
    assert inspect.getdoc(move) == ('Move one square: north (up), south (down), east (right) or west (left).\n\n'
                                    'Args:\n    direction: "north", "south", "east" or "west".')
    assert factory.__name__ == "GridGameEnvironment"


@pytest.mark.parametrize("where", ["local", "served"])
def test_grpo_rollouts_with_the_environment_factory(where: str, grid: Environment, server: Server) -> None:
    env = grid if where == "local" else envhub.load(server.url("envhub-examples/grid-game"))
    rows = envhub_trl.train_dataset(env, "dev", limit=2).to_list()
    loop = TrlLoop(envhub_trl.environment_factory(env), envhub_trl.reward_funcs(env, turn_return=True))
    assert loop.reward_names == ["envhub_reward", "envhub_turn_return"]
    completions, (final, returns), environments = loop.step(rows, winner)
    assert len(completions) == len(final) == len(returns) == 2 * G
    assert final == [1.0] * (2 * G)  # every rollout found the treasure
    for i, completion in enumerate(completions):
        task = grid.task("dev", rows[i // G]["task_id"])
        assert completion[-1] == {"role": "assistant", "content": "Done."}
        tool_messages = [m for m in completion if m["role"] == "tool"]
        assert len(tool_messages) == task["shortest"] and "You win!" in tool_messages[-1]["content"]
        episode = environments[i]._episode
        assert (episode.ended_by, episode.outcome) == ("environment", "win")
        reward, turn_rewards = replay(grid, task, completion)
        assert (final[i], episode.turn_rewards) == (reward, turn_rewards)
        assert returns[i] == pytest.approx(sum(turn_rewards))
    assert loop.tool_failures == 0
    # the pool is reused: the next step resets the same instances onto new episodes
    _, (final2, _), environments2 = loop.step(rows[:1], into_the_trap)
    assert environments2 == environments[:G]
    assert final2 == [0.0] * G
    episode = environments2[0]._episode
    assert (episode.ended_by, episode.outcome) == ("environment", "loss")
    assert loop.tool_failures > 0  # moves after the game ended: errors the model sees
    if where == "served":
        env.close()


def test_moves_after_the_end_are_errors_the_model_sees(grid: Environment) -> None:
    rows = envhub_trl.train_dataset(grid, "dev", limit=1).to_list()
    loop = TrlLoop(envhub_trl.environment_factory(grid), envhub_trl.reward_funcs(grid))
    completions, (final,), _ = loop.step(rows, into_the_trap)
    errors = [m["content"] for m in completions[0] if m["role"] == "tool" and m["content"].startswith("{")]
    assert errors and errors[0] == str({"error": "the episode is over (loss): no more tool calls; "
                                                 "give your final answer"})
    assert final == [0.0] * G


def test_a_model_that_stops_early_is_scored_as_it_stopped(grid: Environment) -> None:
    rows = envhub_trl.train_dataset(grid, "dev", limit=1).to_list()
    loop = TrlLoop(envhub_trl.environment_factory(grid), envhub_trl.reward_funcs(grid, turn_return=True))
    quitter = lambda messages: {"role": "assistant", "content": "No."}  # noqa: E731
    _, (final, returns), environments = loop.step(rows, quitter)
    assert final == [0.0] * G and returns == [None] * G  # no move: no turn reward
    assert environments[0]._episode.ended_by == "policy"
    # cut off in a tool call (TRL's iteration limit): the calls are not run, the episode ends there
    loop = TrlLoop(envhub_trl.environment_factory(grid), envhub_trl.reward_funcs(grid), max_tool_calling_iterations=2)
    completions, (final,), environments = loop.step(rows, winner)
    assert completions[0][-1].get("tool_calls") and final == [0.0] * G
    assert environments[0]._episode.turns == 3 and environments[0]._episode.ended_by == "policy"


def test_a_dataset_from_another_version_is_refused(grid: Environment) -> None:
    row = envhub_trl.train_dataset(grid, "dev", limit=1).to_list()[0]
    instance = envhub_trl.environment_factory(grid)()
    assert instance.reset(**row) is None  # the control: TRL keeps the row's prompt
    stale = {**row, "prompt": [*row["prompt"][:-1], {"role": "user", "content": "Find the treasure (v0)."}]}
    with pytest.raises(UsageError, match=r"^the dataset's prompt for task '\S+' \(dev\) is not what its episode starts "
                                         r"with in envhub-examples/grid-game 1.0.0; rebuild the dataset"):
        instance.reset(**stale)
    assert envhub_trl.environment_factory(grid, check_prompt=False)().reset(**stale) is None


def test_without_a_dataset_the_environment_draws_its_tasks(grid: Environment) -> None:
    instance = envhub_trl.environment_factory(grid)()
    with pytest.raises(UsageError, match=r"^the dataset row has no 'task_id' column: give the trainer "):
        instance.reset()
    drawing = envhub_trl.environment_factory(grid, split="dev", seed=1)
    loop = TrlLoop(drawing, envhub_trl.reward_funcs(grid))
    completions, (final,), environments = loop.step([{}], winner)  # TRL's rows carry no prompt then
    assert final == [1.0] * G
    prompt_text = environments[0].reset()
    assert prompt_text is not None and prompt_text.startswith("You are exploring a small dungeon")
    assert "Find the treasure." in prompt_text


def test_tools_that_cannot_be_methods_are_refused(tmp_path: Path) -> None:
    from envhub.scaffold import create_bundle

    path = create_bundle("acme/calc", tmp_path / "calc", protocol="tool-use")
    tools = path / "calc" / "tools.py"
    tools.write_text(tools.read_text() + '\n\ndef reset(x: int) -> str:\n    """Reset.\n\n    Args:\n'
                                         '        x: what.\n    """\n    return "ok"\n')
    manifest = path / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('tools = ["calc.tools:calculate"]',
                                                     'tools = ["calc.tools:calculate", "calc.tools:reset"]'))
    with envhub.load(path, trust_code=True) as env, \
            pytest.raises(UsageError, match=r"^tool 'reset' of acme/calc: TRL exposes tools as public methods, so a "
                                            r"tool cannot be named 'reset'"):
        envhub_trl.environment_factory(env)


_CONVERT = '''

def convert(value: float, unit: Literal["cm", "inch"], digits: int = 2, notes: list[str] | None = None) -> str:
    """Convert a length
    between units.

    Args:
        value: the length in the other unit.
        unit: the unit to convert to.
        digits: how many digits
            to round to.
        notes: anything to say.
    """
    return str(round(value * (2.54 if unit == "cm" else 1 / 2.54), digits))
'''


@pytest.fixture(scope="module")
def calc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """The scaffold's tool-use bundle with a tool of an enum, defaults and an optional list."""
    from envhub.scaffold import create_bundle

    path = create_bundle("acme/calc", tmp_path_factory.mktemp("calc") / "calc", protocol="tool-use")
    tools = path / "calc" / "tools.py"
    source = tools.read_text().replace("import ast\n", "import ast\nfrom typing import Literal\n", 1)
    tools.write_text(source + _CONVERT)
    manifest = path / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('tools = ["calc.tools:calculate"]',
                                                     'tools = ["calc.tools:calculate", "calc.tools:convert"]'))
    with envhub.load(path, trust_code=True) as env:
        assert isinstance(env, Environment)
        yield env


def test_tool_parameters_keep_their_types_enums_and_defaults(calc: Environment) -> None:
    instance = envhub_trl.environment_factory(calc)()
    assert str(inspect.signature(instance.convert)) == ("(*, value: float, unit: str, digits: int = 2, "
                                                        "notes: list[str] | None = None) -> str")
    assert inspect.getdoc(instance.convert) == (
        'Convert a length between units.\n\nArgs:\n    value: the length in the other unit.\n'
        '    unit: the unit to convert to. (choices: ["cm", "inch"])\n    digits: how many digits to round to.\n'
        '    notes: anything to say.')
    row = envhub_trl.train_dataset(calc, "dev", limit=1).to_list()[0]
    assert instance.reset(**row) is None
    assert instance.convert(value=2, unit="cm") == "5.08"  # the tool's own default for digits
    assert instance.convert(value=2, unit="cm", digits=1) == "5.1"
    error = instance.convert(value=2, unit="mile")  # a bad argument is the tool's error message, as in envhub
    assert error == "Error: invalid arguments for convert: unit: Input should be 'cm' or 'inch'"
    assert instance._episode.tool_errors == 1
    assert instance._episode.turns == 3


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
def test_transformers_rebuilds_each_tools_schema(calc: Environment, grid: Environment) -> None:  # pragma: no cover
    from transformers.utils.chat_template_utils import get_json_schema

    for env in (calc, grid):
        instance = envhub_trl.environment_factory(env)()
        for spec in env.tool_specs:
            function = spec["function"]
            got = get_json_schema(getattr(instance, function["name"]))["function"]
            assert got["name"] == function["name"]
            assert got["description"] == " ".join(function["description"].split())
            want = function["parameters"]
            assert got["parameters"].get("required", []) == want.get("required", [])
            for name, schema in want["properties"].items():
                rebuilt = got["parameters"]["properties"][name]
                assert rebuilt.get("enum") == schema.get("enum")
                assert rebuilt["description"] == " ".join(schema["description"].split())


# --- the example script in docs/integrations.md ---------------------------------------------


def _example() -> Any:
    path = Path(__file__).resolve().parents[1] / "docs" / "examples" / "trl_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_grpo_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_gives_the_trainer_what_it_needs(grid: Environment, arith: Environment) -> None:
    example = _example()
    tools = example.trainer_kwargs(grid, "dev", limit=2, turn_return=True)
    assert sorted(tools) == ["environment_factory", "reward_funcs", "train_dataset"]
    loop = TrlLoop(tools["environment_factory"], tools["reward_funcs"])
    _, (final, returns), _ = loop.step(tools["train_dataset"].to_list(), winner)
    assert final == [1.0] * (2 * G) and all(r is not None and r > 1.0 for r in returns)
    single = example.trainer_kwargs(arith, "dev", limit=2)
    assert sorted(single) == ["reward_funcs", "train_dataset"]  # no tools: no environment factory
    rows = single["train_dataset"].to_list()
    answers = [[{"role": "assistant", "content": f"\\boxed{{{arith.task('dev', r['task_id'])['answer']}}}"}]
               for r in rows for _ in range(G)]
    kwargs = _reward_kwargs(rows, answers)
    kwargs.pop("_metrics")
    assert single["reward_funcs"][0](**kwargs) == [1.0] * (2 * G)


def test_the_example_script_runs_without_trl_for_help() -> None:
    result = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "docs" / "examples" /
                                                 "trl_grpo.py"), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: trl_grpo.py [-h] [--trust]") and "--turn-weight" in result.stdout


# --- opt-in: two GRPO steps with TRL itself ------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("trl") is None or importlib.util.find_spec("torch") is None,
                    reason="needs trl and torch (pip install trl torch)")
def test_two_grpo_steps_on_a_tiny_random_model(arith: Environment, tmp_path: Path) -> None:  # pragma: no cover
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained("trl-internal-testing/tiny-Qwen2ForCausalLM-2.5")
    config = AutoConfig.from_pretrained("trl-internal-testing/tiny-Qwen2ForCausalLM-2.5")
    model = AutoModelForCausalLM.from_config(config)  # randomly initialised
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=16, report_to="none", logging_steps=1)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=args,
                          train_dataset=envhub_trl.train_dataset(arith, "train", limit=8),
                          reward_funcs=envhub_trl.reward_funcs(arith))
    trainer.train()
    assert trainer.state.global_step == 2
    assert any("rewards/envhub_reward/mean" in entry for entry in trainer.state.log_history)


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("trl", "torch", "jmespath")),
                    reason="needs trl, torch and jmespath (pip install trl torch jmespath)")
def test_two_grpo_steps_with_the_environment_factory(grid: Environment, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # pragma: no cover
    # As TRL's own tests/test_grpo_trainer.py::test_train_with_environment_factory: a tiny random model whose
    # generate() is scripted, here to call move once and then answer.
    from unittest.mock import patch

    import torch
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model_id = "trl-internal-testing/tiny-Qwen3MoeForCausalLM"
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    call = '<tool_call>\n{"name": "move", "arguments": {"direction": "north"}}\n</tool_call><|im_end|>'
    texts = {"call": tokenizer.encode(call, add_special_tokens=False),
             "done": tokenizer.encode("Done!<|im_end|>", add_special_tokens=False)}
    calls = []

    def fake_generate(input_ids: Any, **kwargs: Any) -> Any:
        ids = texts["call"] if len(calls) % 2 == 0 else texts["done"]  # each step: a move, then the answer
        calls.append(input_ids.shape[0])
        completion = torch.tensor([ids] * input_ids.shape[0], device=input_ids.device)
        return torch.cat([input_ids, completion], dim=-1)

    args = GRPOConfig(output_dir=str(tmp_path), learning_rate=0.1, per_device_train_batch_size=2, num_generations=2,
                      max_steps=2, max_completion_length=64, report_to="none", logging_steps=1)
    trainer = GRPOTrainer(model=model_id, args=args, processing_class=tokenizer,
                          train_dataset=envhub_trl.train_dataset(grid, "dev", limit=2),
                          reward_funcs=envhub_trl.reward_funcs(grid, turn_return=True),
                          environment_factory=envhub_trl.environment_factory(grid))
    with patch.object(trainer.model, "generate", side_effect=fake_generate):
        trainer.train()
    assert trainer.state.global_step == 2 and calls == [2, 2, 2, 2]
    last = trainer.state.log_history[-1]
    assert last["tools/call_frequency"] == pytest.approx(1.0) and last["tools/failure_frequency"] == 0
    assert "rewards/envhub_reward/mean" in last and "rewards/envhub_turn_return/mean" in last
    for environment in trainer.environments:
        episode = environment._episode
        assert episode.turns == 2 and episode.ended_by == "policy" and len(episode.turn_rewards) == 2


# --- rollout_output: token-faithful records as TRL's rollout_func returns them -----------------


def _render(messages: list[dict[str, Any]]) -> list[int]:
    """A chat template as vLLM applies it, one id per character: each message as <role>text|,
    then the generation prompt; an assistant message renders as the model sampled it."""
    return [ord(c) for c in "".join(f"<{m['role']}>{_text(m)}|" for m in messages) + "<assistant>"]


def _text(message: dict[str, Any]) -> str:
    calls = message.get("tool_calls")
    if calls:
        return "".join(f"call:{c['function']['name']}{c['function']['arguments']}" for c in calls)
    return str(message.get("content") or "")


def _vllm_script(sent: dict[tuple[str, int], dict[str, Any]]) -> Callable[[Any], Any]:
    """Answer the calculator task as vLLM does with logprobs and return_token_ids: the prompt's
    ids, the sampled ids (the turn's text and its end token), one log-prob per sampled id."""
    from tests.openai_server import Reply
    from tests.test_token_records import multiply_with_the_tool

    def script(request: Any) -> Any:
        message = multiply_with_the_tool(request)
        turn = sum(1 for m in request.messages if m["role"] == "assistant")
        prompt_ids = _render(request.messages)
        completion_ids = [ord(c) for c in _text(message) + "|"]
        logprobs = [-0.01 * (1 + (i + 7 * turn) % 50) for i in range(len(completion_ids))]
        sent[(request.first_user_content, turn)] = {"prompt": prompt_ids, "ids": completion_ids, "logprobs": logprobs}
        content = [{"token": chr(t), "logprob": lp, "bytes": [t], "top_logprobs": []}
                   for t, lp in zip(completion_ids, logprobs, strict=True)]
        return Reply(200, {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1764160000, "model": request.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "reasoning": None, **message},
                         "logprobs": {"content": content},
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                         "stop_reason": None, "token_ids": completion_ids}],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(completion_ids),
                      "total_tokens": len(prompt_ids) + len(completion_ids)},
            "prompt_logprobs": None, "prompt_token_ids": prompt_ids})

    return script


def _token_records(tmp_path: Path, openai_server: Any, *, record_tokens: bool = True) -> tuple[Path, list[Any]]:
    from tests.runtime_fixtures import scaffold

    out = tmp_path / "records.jsonl"
    result = envhub.evaluate(scaffold(tmp_path, protocol="tool-use"), "openai:m", split="train", n=3, concurrency=2,
                             base_url=openai_server.base_url, record_tokens=record_tokens, output=out,
                             trust_code=True)
    assert (result.summary.mean_reward, result.failed) == (1.0, 0)
    return out, envhub.runtime.read_records(out)


def test_rollout_output_lays_out_each_episode_as_trl_rollout_func_returns_it(tmp_path: Path,
                                                                             openai_server: Any) -> None:
    sent: dict[tuple[str, int], dict[str, Any]] = {}
    openai_server.script = _vllm_script(sent)
    path, records = _token_records(tmp_path, openai_server)
    output = envhub_trl.rollout_output(records)
    assert set(output) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "task_id", "split",
                           "envhub_reward"}
    assert all(len(values) == 3 for values in output.values())
    for i, record in enumerate(records):
        user = next(m["content"] for m in record.messages if m["role"] == "user")
        first, second = sent[(user, 0)], sent[(user, 1)]
        ids, mask, logprobs = output["completion_ids"][i], output["env_mask"][i], output["logprobs"][i]
        assert output["prompt_ids"][i] == first["prompt"]
        # The model's call, the tool's result as the template renders it, the model's answer.
        text = "".join(map(chr, ids))
        call, answer = "".join(map(chr, first["ids"])), "".join(map(chr, second["ids"]))
        result = next(m["content"] for m in record.messages if m["role"] == "tool")
        assert text == f"{call}<tool>{result}|<assistant>{answer}"
        assert len(ids) == len(mask) == len(logprobs)
        model = [t for t, m in zip(ids, mask, strict=True) if m == 1]
        assert model == first["ids"] + second["ids"]
        assert "".join(chr(t) for t, m in zip(ids, mask, strict=True) if m == 0) == f"<tool>{result}|<assistant>"
        assert [lp for lp, m in zip(logprobs, mask, strict=True) if m == 1] == first["logprobs"] + second["logprobs"]
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if m == 0)
        # The whole sequence is what the server saw last, then its final answer.
        assert output["prompt_ids"][i] + ids == second["prompt"] + second["ids"]
        assert (output["task_id"][i], output["split"][i], output["envhub_reward"][i]) == \
            (record.task_id, "train", 1.0)
    assert envhub_trl.rollout_output(path) == output  # a records file reads the same
    assert envhub_trl.rollout_output(str(path)) == output


def test_rollout_output_refuses_records_without_tokens_naming_the_fix(tmp_path: Path, openai_server: Any) -> None:
    sent: dict[tuple[str, int], dict[str, Any]] = {}
    openai_server.script = _vllm_script(sent)
    path, records = _token_records(tmp_path, openai_server, record_tokens=False)
    assert records and all(r.turns_tokens is None for r in records)
    with pytest.raises(UsageError, match=r"records\.jsonl, record 1 \(task .*\) has no token data.*--record-tokens"):
        envhub_trl.rollout_output(path)
    with pytest.raises(UsageError, match="no rollout records"):
        envhub_trl.rollout_output(tmp_path / "missing.jsonl")


def test_rollout_output_refuses_what_is_not_one_token_sequence(tmp_path: Path, openai_server: Any) -> None:
    sent: dict[tuple[str, int], dict[str, Any]] = {}
    openai_server.script = _vllm_script(sent)
    _, records = _token_records(tmp_path, openai_server)
    record = records[0]
    first, second = record.turns_tokens

    def with_turns(*turns: Any) -> Any:
        return record.model_copy(update={"turns_tokens": list(turns)})

    envhub_trl.rollout_output([with_turns(first, second)])  # the control: as recorded, it converts
    error = envhub.runtime.RolloutError(kind="policy", type="PolicyError", message="503 from the endpoint")
    failed = record.model_copy(update={"turns_tokens": [], "error": error})
    with pytest.raises(UsageError, match=r"failed before the policy sampled a turn \(PolicyError: 503"):
        envhub_trl.rollout_output([failed])
    # The template re-rendered the history: the second prompt no longer starts with the first turn.
    rerendered = second.model_copy(update={"prompt_token_ids": [9, *second.prompt_token_ids]})
    with pytest.raises(UsageError, match="turn 2: its prompt does not start with the previous turn's prompt"):
        envhub_trl.rollout_output([with_turns(first, rerendered)])
    short = first.model_copy(update={"logprobs": first.logprobs[:-1]})
    with pytest.raises(UsageError, match=r"turn 1: \d+ completion token ids but \d+ log-probs"):
        envhub_trl.rollout_output([with_turns(short, second)])
    no_logprobs = second.model_copy(update={"logprobs": None})
    with pytest.raises(UsageError, match="turn 2: the server sent no logprobs; run with --record-tokens"):
        envhub_trl.rollout_output([with_turns(first, no_logprobs)])
