"""example_envs/grid-game: a game that gives shaped per-step rewards and ends itself.

Episodes run through the Python API on the real bundle (its generator, its python state,
its move tool, its verifier): the per-step turn_reward, the win that ends the episode (and
a second call in the same turn that is not run), the losses (a trap, the lamp running out),
and ``envhub eval`` runs whose records and summary carry the returns: of the reference, and
of a model on the local OpenAI-compatible server that plays from the boards it is shown."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.runtime import Environment, Task
from tests.conftest import run_envhub
from tests.openai_server import OpenAIServer, Request

GRID = Path(__file__).resolve().parents[1] / "example_envs" / "grid-game"


@pytest.fixture(scope="module")
def env() -> Iterator[Environment]:
    with envhub.load(GRID, trust_code=True) as loaded:
        assert isinstance(loaded, Environment)  # a local bundle: the attributes of capability 1 are on it
        yield loaded


@pytest.fixture(scope="module")
def task(env: Environment) -> Task:
    """The first dev board: start bottom left, a trap two squares east, the treasure beyond."""
    task = env.tasks("dev")[0]
    assert task["board"] == ["..#..", ".....", ".....", "....#", "S.^.$"] and task["energy"] == 12
    return task


def moves(*directions: str) -> dict[str, Any]:
    """One assistant turn calling move once per direction."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"m{i}", "type": "function", "function": {"name": "move", "arguments": json.dumps({"direction": d})}}
        for i, d in enumerate(directions)]}


def test_the_shortest_path_wins_with_shaped_rewards(env: Environment, task: Task) -> None:
    path = ["north", "east", "east", "east", "south", "east"]
    assert [json.loads(t["tool_calls"][0]["function"]["arguments"])["direction"]
            for t in env.reference_actions(task)] == path
    with env.episode(task) as episode:
        episode.reset()
        steps = [episode.step(moves(d)) for d in path]
        # Each step towards the treasure: -0.01 for the step, +0.1 for one square closer; the
        # last also +1.0 for the win. The verifier's reward is 1.0, apart from those.
        assert [s.turn_reward for s in steps] == [0.09] * 5 + [1.09]
        assert [s.done for s in steps] == [False] * 5 + [True]
        assert steps[-1].reward == 1.0 and steps[-1].info["outcome"] == "win"
        assert (episode.ended_by, episode.outcome, episode.turn_rewards) == ("environment", "win", [0.09] * 5 + [1.09])
        assert steps[0].info["tool_results"][0] == ("You move north. Oil left: 11 moves.\n\n"
                                                    "..#..\n.....\n.....\n@...#\n..^.$")


def test_calls_after_the_winning_move_are_not_run(env: Environment, task: Task) -> None:
    with env.episode(task) as episode:
        episode.reset()
        episode.step(moves("north", "east", "east", "east", "south"))  # several moves in one turn run in order
        assert episode.turn_rewards == [pytest.approx(0.45)]
        result = episode.step(moves("east", "west", "west"))
        assert result.done and result.reward == 1.0
        assert result.info["tool_results"] == ["You move east. You found the treasure in 6 moves. You win!",
                                               "Not run: the episode ended.", "Not run: the episode ended."]
        assert episode.score is not None  # the verifier saw the game as the winning move left it:
        assert episode.score.info == {"outcome": "win", "moves": 6, "energy_left": 6}  # the later calls never ran


def test_a_trap_is_a_loss(env: Environment, task: Task) -> None:
    with env.episode(task) as episode:
        episode.reset()
        first = episode.step(moves("east"))
        second = episode.step(moves("east"))
    assert first.turn_reward == pytest.approx(0.09) and not first.done
    # Onto the trap: the step cost, the shaping of a trap (counted as 25 squares away: 5 -> 25),
    # and the loss.
    assert second.turn_reward == pytest.approx(-0.01 + 0.1 * (5 - 25) - 1.0)
    assert second.done and second.reward == 0.0 and second.info["outcome"] == "loss"
    assert second.info["tool_results"] == ["You move east. You stepped on a trap. Game over."]


def test_walls_cost_a_step_and_the_lamp_running_out_is_a_loss(env: Environment, task: Task) -> None:
    with env.episode(task) as episode:
        episode.reset()
        bumps = [episode.step(moves("west")) for _ in range(task["energy"])]
    assert [b.turn_reward for b in bumps[:-1]] == [-0.01] * 11
    assert bumps[0].info["tool_results"][0].startswith("You bump into a wall to the west; you stay where you are. "
                                                       "Oil left: 11 moves.")
    assert bumps[-1].done and bumps[-1].reward == 0.0 and bumps[-1].info["outcome"] == "loss"
    assert bumps[-1].turn_reward == pytest.approx(-1.01)
    assert "Your lamp goes out" in bumps[-1].info["tool_results"][0]


def test_stopping_without_a_win_scores_0(env: Environment, task: Task) -> None:
    with env.episode(task) as episode:
        episode.reset()
        episode.step(moves("north"))
        result = episode.step("I give up.")
    assert result.done and result.reward == 0.0 and episode.ended_by == "policy" and episode.outcome is None
    assert result.turn_reward is None  # a turn without a move gets no turn reward


def test_a_bad_direction_is_an_error_the_model_reads(env: Environment, task: Task) -> None:
    with env.episode(task) as episode:
        episode.reset()
        result = episode.step(moves("up"))
    assert result.info["tool_errors"] == ["Error: ValueError: unknown direction 'up'; use north, south, east or west"]
    assert not result.done and result.turn_reward is None


def test_boards_are_made_from_their_seed_and_solvable(env: Environment) -> None:
    dev = env.tasks("dev")
    assert [t["difficulty"] for t in dev] == [1, 2, 3] * 4
    assert [len(t["board"]) for t in dev[:3]] == [5, 7, 9]
    again = envhub.load(GRID, trust_code=True)
    try:
        assert [t["board"] for t in again.tasks("dev")] == [t["board"] for t in dev]
    finally:
        again.close()
    for t in dev:
        assert len(t["reference"]) == t["shortest"] <= t["energy"] < t["max_turns"]


def test_eval_of_the_reference_records_turn_rewards_and_the_mean_return(tmp_path: Path) -> None:
    out = tmp_path / "grid.jsonl"
    result = run_envhub("eval", str(GRID), "-s", "dev", "--policy", "reference", "--trust", "-o", str(out))
    assert result.code == 0, result.err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 12 and {r["reward"] for r in records} == {1.0}
    assert {(r["ended_by"], r["outcome"]) for r in records} == {("environment", "win")}
    for r in records:  # a shortest path of L moves returns 0.09 * L + 1.0
        assert r["turns"] == len(r["turn_rewards"])
        assert sum(r["turn_rewards"]) == pytest.approx(0.09 * r["turns"] + 1.0)
    mean_return = sum(sum(r["turn_rewards"]) for r in records) / 12
    assert f"mean return   {mean_return:.4f} (turn rewards, 12 rollout(s))" in result.out
    summary = json.loads((tmp_path / "grid.summary.json").read_text())
    assert summary["mean_return"] == pytest.approx(mean_return) and summary["outcomes"] == {"win": 12}


def test_validate_check() -> None:
    result = run_envhub("validate", "--strict", "--check", "--trust", str(GRID))
    assert result.code == 0, result.err


# --- a model on the local OpenAI-compatible server ---------------------------------------------

STEPS = {"north": (-1, 0), "south": (1, 0), "east": (0, 1), "west": (0, -1)}


def shortest_first_move(board: list[str]) -> str:
    """The first move of a shortest path from '@' to '$' that steps on no wall or trap."""
    cells = {(r, c): ch for r, line in enumerate(board) for c, ch in enumerate(line)}
    start = next(p for p, ch in cells.items() if ch == "@")
    first: dict[tuple[int, int], str | None] = {start: None}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        if cells[here] == "$":
            move = first[here]
            assert move is not None
            return move
        for name, (dr, dc) in STEPS.items():
            there = (here[0] + dr, here[1] + dc)
            if cells.get(there, "#") not in "#^" and there not in first:
                first[there] = first[here] or name
                queue.append(there)
    raise AssertionError(f"no path on {board}")


def board_shown(request: Request) -> list[str]:
    """The board in the newest message that shows one (the prompt, then each move's result)."""
    for message in reversed(request.messages):
        lines = [line for line in str(message.get("content") or "").splitlines()
                 if line and set(line) <= set(".#^$@")]
        if lines:
            return lines
    raise AssertionError("no board in the conversation")


def player(request: Request) -> dict[str, Any]:
    """A model that reads the board it was last shown and moves one square along a shortest path."""
    assert [t["function"]["name"] for t in request.tools or []] == ["move"]
    turn = sum(1 for m in request.messages if m["role"] == "assistant")
    direction = shortest_first_move(board_shown(request))
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{turn}", "type": "function",
         "function": {"name": "move", "arguments": json.dumps({"direction": direction})}}]}


def test_eval_of_a_model_that_plays_from_the_boards_it_is_shown(openai_server: OpenAIServer, env: Environment,
                                                                tmp_path: Path) -> None:
    openai_server.script = player
    out = tmp_path / "grid.jsonl"
    result = run_envhub("eval", str(GRID), "-s", "dev", "--policy", "openai:m", "--base-url",
                        openai_server.base_url, "--trust", "-n", "3", "-o", str(out))
    assert result.code == 0, result.err
    records = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["task_id"])
    tasks = {t.id: t for t in env.tasks("dev")[:3]}
    assert [r["task_id"] for r in records] == sorted(tasks)
    for r in records:
        task = tasks[r["task_id"]]
        assert (r["reward"], r["ended_by"], r["outcome"]) == (1.0, "environment", "win")
        # One move a turn along a shortest path: 0.09 each (a step closer, less the step's cost),
        # and the win on the last.
        assert r["turns"] == task["shortest"] == len(r["turn_rewards"])
        assert r["turn_rewards"] == pytest.approx([0.09] * (task["shortest"] - 1) + [1.09])
    # The model was asked once per move, and each request came after the board of its last move.
    assert len(openai_server.requests) == sum(t["shortest"] for t in tasks.values())
    assert {r.model for r in openai_server.requests} == {"m"}
    summary = json.loads((tmp_path / "grid.summary.json").read_text())
    assert summary["outcomes"] == {"win": 3}
    assert summary["mean_return"] == pytest.approx(sum(sum(r["turn_rewards"]) for r in records) / 3)
