"""The board generator of ``envhub-examples/grid-game``.

envhub calls :func:`make_task` with a seed, the split's name, a difficulty level (one of the
manifest's ``difficulty-levels``) and ``[config.params]``, and gets one task back: a board,
how much oil the lamp holds, and a reference solution (a shortest safe path, one ``move``
call per turn). A ``random.Random`` seeded from the seed makes every choice, so the same
seed gives the same board in any process.

====  =======  =====  ===========================================
level size     traps  oil
====  =======  =====  ===========================================
1     5 x 5    1      twice the shortest path
2     7 x 7    3      the shortest path plus 4
3     9 x 9    6      the shortest path plus 2
====  =======  =====  ===========================================
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

__all__ = ["DIRECTIONS", "make_task", "render", "shortest_path"]

#: How each direction moves: (row change, column change).
DIRECTIONS = {"north": (-1, 0), "south": (1, 0), "east": (0, 1), "west": (0, -1)}

_LEVELS = {1: (5, 1, 0.10), 2: (7, 3, 0.18), 3: (9, 6, 0.22)}  # size, traps, share of walls

Cell = tuple[int, int]


def make_task(seed: int, difficulty: int, split: str, params: dict[str, Any]) -> dict[str, Any]:
    """The board for ``seed`` at ``difficulty`` (1 to 3)."""
    rng = random.Random(f"grid-game:{seed}")  # a string seed: stable across Python versions
    size, traps, walls = _LEVELS[difficulty]
    while True:  # draw until the treasure can be reached without a trap, a few squares away
        board = _draw(rng, size, traps, walls)
        path = shortest_path(board)
        if path is not None and len(path) >= size - 1:
            break
    slack = {1: len(path), 2: 4, 3: 2}[difficulty]
    energy = len(path) + slack
    return {
        "id": f"grid-{split}-{seed}",
        "prompt": f"Find the treasure. Your lamp has oil for {energy} moves.\n\n{render(board)}",
        "board": board,
        "energy": energy,
        "difficulty": difficulty,
        "shortest": len(path),
        "max_turns": energy + 1,
        "reference": [_move(i, direction) for i, direction in enumerate(path, 1)],
    }


def _draw(rng: random.Random, size: int, traps: int, walls: float) -> list[str]:
    cells = [(r, c) for r in range(size) for c in range(size)]
    grid = [["." for _ in range(size)] for _ in range(size)]
    start, goal, *rest = rng.sample(cells, len(cells))
    grid[start[0]][start[1]], grid[goal[0]][goal[1]] = "S", "$"
    for r, c in rest[:traps]:
        grid[r][c] = "^"
    for r, c in rest[traps:traps + int(walls * size * size)]:
        grid[r][c] = "#"
    return ["".join(row) for row in grid]


def find(board: list[str], symbol: str) -> Cell:
    """Where ``symbol`` is on ``board``."""
    for r, row in enumerate(board):
        if symbol in row:
            return r, row.index(symbol)
    raise ValueError(f"no {symbol!r} on the board")


def neighbours(board: list[str], cell: Cell) -> list[tuple[str, Cell]]:
    """The squares one move from ``cell`` that are inside the board and not walls."""
    out = []
    for direction, (dr, dc) in DIRECTIONS.items():
        r, c = cell[0] + dr, cell[1] + dc
        if 0 <= r < len(board) and 0 <= c < len(board[r]) and board[r][c] != "#":
            out.append((direction, (r, c)))
    return out


def distances(board: list[str]) -> dict[Cell, int]:
    """Every safe square's distance to the treasure, in moves that avoid walls and traps."""
    goal = find(board, "$")
    seen = {goal: 0}
    queue = deque([goal])
    while queue:
        cell = queue.popleft()
        for _, nxt in neighbours(board, cell):
            if nxt not in seen and board[nxt[0]][nxt[1]] != "^":
                seen[nxt] = seen[cell] + 1
                queue.append(nxt)
    return seen


def shortest_path(board: list[str]) -> list[str] | None:
    """The directions of a shortest safe path from the start to the treasure; None if none."""
    dist = distances(board)
    cell = find(board, "S")
    if cell not in dist:
        return None
    path = []
    while dist[cell]:
        direction, cell = next((d, n) for d, n in neighbours(board, cell) if dist.get(n) == dist[cell] - 1)
        path.append(direction)
    return path


def render(board: list[str], at: Cell | None = None) -> str:
    """The board as the model sees it: ``@`` where the player is (the start when ``at`` is None)."""
    at = at or find(board, "S")
    rows = [list(row.replace("S", ".")) for row in board]
    rows[at[0]][at[1]] = "@"
    return "\n".join("".join(row) for row in rows)


def _move(index: int, direction: str) -> dict[str, Any]:
    call = {"id": f"call_{index}", "type": "function",
            "function": {"name": "move", "arguments": {"direction": direction}}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}
