"""The game of ``envhub-examples/grid-game``: the state, the ``move`` tool and the verifier.

The state is a :class:`Game` (``[state] kind = "python"``): envhub makes one per episode
with ``params=`` the manifest's ``[config.params]`` and calls :meth:`Game.reset` with the
task. ``move`` receives it through its ``State[Game]`` parameter, hidden from the model.

Each move returns a :class:`~envhub.runtime.Reply`: the map as text (what the model reads),
a shaped per-step reward, and ``done`` with the outcome ``"win"`` or ``"loss"`` when the game
is over. The shaped reward is potential-based (Ng, Harada and Russell, 1999):

    reward = -step_cost + shaping * (d(before) - d(after))     (+ win-reward or loss-reward)

where ``d`` is the square's distance to the treasure in safe moves, so a step towards the
treasure earns ``shaping - step_cost``, a step away or into a wall costs more, and the
shaping terms of any path add up to ``shaping * d(start)``, the same for every winning path:
shaping changes how fast a learner finds the treasure, not which paths are best.

The final reward is the verifier's (:func:`won`): 1.0 for a win, 0.0 otherwise. It does not
read the shaped rewards; they are recorded per turn, for credit assignment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envhub.runtime import Reply, State, Task

from .layouts import DIRECTIONS, distances, find, render

__all__ = ["Game", "move", "won"]


class Game:
    """One game: the board, where the player is, the oil left, and how it ended."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.step_cost = float(params.get("step-cost", 0.01))
        self.shaping = float(params.get("shaping", 0.1))
        self.win_reward = float(params.get("win-reward", 1.0))
        self.loss_reward = float(params.get("loss-reward", -1.0))
        self.board: list[str] = []
        self.at = (0, 0)
        self.energy = 0
        self.moves = 0
        self.outcome: str | None = None
        self._distance: dict[tuple[int, int], int] = {}

    def reset(self, task: Task) -> None:
        self.board = list(task["board"])
        self.at = find(self.board, "S")
        self.energy = int(task["energy"])
        self.moves = 0
        self.outcome = None
        self._distance = distances(self.board)

    def distance(self, cell: tuple[int, int]) -> int:
        """``cell``'s distance to the treasure in safe moves (a trap, or a cut-off square:
        the board's area, farther than any reachable square)."""
        return self._distance.get(cell, len(self.board) * len(self.board[0]))

    def move(self, direction: str) -> Reply:
        if self.outcome is not None:
            raise RuntimeError(f"the game is over ({self.outcome}); no more moves")
        if direction not in DIRECTIONS:
            raise ValueError(f"unknown direction {direction!r}; use north, south, east or west")
        dr, dc = DIRECTIONS[direction]
        r, c = self.at[0] + dr, self.at[1] + dc
        before = self.at
        if 0 <= r < len(self.board) and 0 <= c < len(self.board[0]) and self.board[r][c] != "#":
            self.at, what = (r, c), f"You move {direction}."
        else:
            what = f"You bump into a wall to the {direction}; you stay where you are."
        self.energy -= 1
        self.moves += 1
        reward = -self.step_cost + self.shaping * (self.distance(before) - self.distance(self.at))
        square = self.board[self.at[0]][self.at[1]]
        if square == "$":
            self.outcome = "win"
            return Reply(f"{what} You found the treasure in {self.moves} moves. You win!",
                         reward=round(reward + self.win_reward, 6), done=True, outcome="win")
        if square == "^":
            self.outcome = "loss"
            return Reply(f"{what} You stepped on a trap. Game over.",
                         reward=round(reward + self.loss_reward, 6), done=True, outcome="loss")
        if self.energy <= 0:
            self.outcome = "loss"
            return Reply(f"{what} Your lamp goes out before you find the treasure. Game over.\n\n"
                         f"{render(self.board, self.at)}", reward=round(reward + self.loss_reward, 6),
                         done=True, outcome="loss")
        return Reply(f"{what} Oil left: {self.energy} moves.\n\n{render(self.board, self.at)}",
                     reward=round(reward, 6))


def move(direction: str, *, game: State[Game]) -> Reply:
    """Move one square: north (up), south (down), east (right) or west (left).

    Args:
        direction: "north", "south", "east" or "west".
    """
    return game.move(direction)


def won(state: Game | None = None) -> dict[str, Any]:
    """1.0 when the game was won, 0.0 otherwise (lost, or still going when the model stopped)."""
    if state is None:  # a completion scored without an episode: there was no game
        return {"reward": 0.0, "info": {"outcome": None}}
    return {"reward": 1.0 if state.outcome == "win" else 0.0,
            "info": {"outcome": state.outcome, "moves": state.moves, "energy_left": state.energy}}
