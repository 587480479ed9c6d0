"""Golden trajectories: recorded episodes with the rewards they got, kept in a bundle so that
``envhub validate --check`` and ``envhub validate --against`` can tell when the verifier
started scoring differently (``spec/manifest.md``, "Golden trajectories").

The file is the one ``[environment] golden`` names: JSONL, one object a line, with

- ``split`` and ``task_id``: a task of a public split of this bundle;
- ``messages`` (the episode's messages, as in a rollout record) or ``completion`` (one
  assistant answer);
- ``reward``: the reward the episode got, in [0, 1].

Any other key is ignored, so the records ``envhub eval -o`` writes are golden lines as they
stand; a record with a non-null ``error`` (a timeout, a policy failure) is refused, since
its messages are not a finished episode. Reading never imports environment code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envhub.manifest import Manifest
from envhub.problems import Problem

__all__ = ["GoldenLine", "golden_problems", "read_golden"]


@dataclass(frozen=True)
class GoldenLine:
    """One golden trajectory: where it is (``file``, 1-based ``line``), its task, the
    assistant turns to replay, and the reward it got."""

    file: str
    line: int
    split: str
    task_id: str
    actions: tuple[Mapping[str, Any], ...]
    reward: float

    @property
    def where(self) -> str:
        """``split/task_id``, as the other checks name a task."""
        return f"{self.split}/{self.task_id}"


def read_golden(path: Path, manifest: Manifest, *, shown: str) -> tuple[list[GoldenLine], list[Problem]]:
    """The golden lines of the file at ``path`` (shown to people as ``shown``), and a problem
    for each line that is not one: unparsable, missing a field, an unknown or held-out split.
    A missing or unreadable file is a single problem."""
    import orjson

    try:
        data = path.read_bytes()
    except OSError as e:
        why = "not found" if isinstance(e, FileNotFoundError) else f"cannot be read ({e.strerror or e})"
        return [], [Problem("error", "bad-path", f"{shown!r} {why}", file=shown, field="environment.golden",
                            hint="create it (one golden trajectory a line; see docs/validate-in-ci.md), "
                                 "or fix the path (relative to envhub.toml)")]
    lines: list[GoldenLine] = []
    problems: list[Problem] = []
    splits = manifest.tasks.splits

    def bad(number: int, message: str, hint: str) -> None:
        problems.append(Problem("error", "bad-golden", message, file=shown, line=number, field="environment.golden",
                                hint=hint))

    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            bad(number, f"not JSON ({e})", "write one JSON object a line")
            continue
        if not isinstance(row, dict):
            bad(number, f"a golden line is a JSON object, not {type(row).__name__}",
                'write {"split": ..., "task_id": ..., "completion": ..., "reward": ...}')
            continue
        split, task_id, reward = row.get("split"), row.get("task_id"), row.get("reward")
        if not isinstance(split, str) or not isinstance(task_id, str):
            bad(number, "'split' and 'task_id' must be strings", "name the task the trajectory was recorded on")
            continue
        if split not in splits:
            bad(number, f"split {split!r} is not declared (splits: {', '.join(splits) or 'none'})",
                "record golden trajectories on this bundle's public splits")
            continue
        if splits[split].held_out:
            bad(number, f"split {split!r} is held out: golden trajectories are published, and would publish "
                        "its tasks", "record golden trajectories on a public split (dev, train)")
            continue
        if isinstance(reward, bool) or not isinstance(reward, (int, float)) or math.isnan(reward) \
                or not 0 <= reward <= 1:
            bad(number, f"'reward' must be a number in [0, 1], got {reward!r}",
                "write the reward the episode got (envhub eval -o records carry it)")
            continue
        if (error := row.get("error")) is not None:
            # A record's error is {kind, type, message} (rollout record version 1), or text before it.
            shown_error = f"{error.get('type')}: {error.get('message')}" if isinstance(error, dict) else error
            bad(number, f"the episode failed ({shown_error}), so its messages are not a finished episode",
                "drop records whose 'error' is set")
            continue
        actions = _actions(row)
        if actions is None:
            bad(number, "give 'completion' (a string) or 'messages' (a list of {role, content} objects)",
                "envhub eval -o records carry 'messages'")
            continue
        lines.append(GoldenLine(shown, number, split, task_id, actions, float(reward)))
    return lines, problems


def _actions(row: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...] | None:
    """The assistant turns of a golden line, or None when it has none in a usable form."""
    completion, messages = row.get("completion"), row.get("messages")
    if isinstance(completion, str) and messages is None:
        return ({"role": "assistant", "content": completion},)
    if isinstance(messages, list) and completion is None and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return tuple(m for m in messages if m["role"] == "assistant")
    return None


def golden_problems(root: Path, manifest: Manifest, shown, at) -> list[Problem]:  # type: ignore[no-untyped-def]
    """What ``envhub validate`` reports about the golden file: a bad path (at its manifest
    field), and every line that is not a golden line."""
    from envhub.bundle._paths import resolve_inside

    rel = manifest.environment.golden
    if rel is None:
        return []
    target, why = resolve_inside(root, rel)
    if why is None and not target.is_file():
        why = "not found" if not target.exists() else "is not a file"
    if why is not None:
        hint = "create it, or fix the path (relative to envhub.toml)" if why == "not found" else None
        return [Problem("error", "bad-path", f"{rel!r} {why}", hint=hint, **at("environment.golden",
                                                                             "environment", "golden"))]
    return read_golden(target, manifest, shown=shown(rel))[1]
