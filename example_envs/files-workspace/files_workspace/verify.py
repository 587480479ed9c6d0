"""The verifier: compare the workspace the agent left with what the task expects.

A task's ``expect`` maps each file the task should change to what it should be:

- ``{"text": "..."}``: the file holds this text;
- ``{"json": value}``: the file is JSON equal to ``value`` (formatting is free);
- ``{"absent": true}``: the file does not exist (it was moved or deleted).

Every other file must be as it was in the snapshot, and no file may be added. Text is
compared line by line, ignoring trailing spaces and trailing blank lines, so a missing
final newline is not a mistake. Directories are not compared: a move may leave an empty one.

The reward is the fraction of ``expect`` that is right, and 0 if anything else in the
workspace changed: an agent that does the job but edits the wrong file as well has not
done the job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The workspace every episode starts from: the manifest's [state] snapshot, beside this package.
SNAPSHOT = Path(__file__).resolve().parent.parent / "state" / "workspace"


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _first_difference(got: str, want: str) -> str:
    a, b = _lines(got), _lines(want)
    for n, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            return f"line {n} is {x!r}, expected {y!r}"
    return f"it has {len(a)} lines, expected {len(b)}"


def _json_difference(got: Any, want: Any, where: str = "$") -> str | None:
    """Where two JSON values first differ, e.g. ``$.notifications.sms is false, expected true``."""
    if isinstance(got, dict) and isinstance(want, dict):
        for key in [*want, *(k for k in got if k not in want)]:
            if key not in got or key not in want:
                return f"{where}.{key} is {'missing' if key not in got else 'not expected'}"
            if (difference := _json_difference(got[key], want[key], f"{where}.{key}")) is not None:
                return difference
        return None
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return next((d for i, (g, w) in enumerate(zip(got, want))
                     if (d := _json_difference(g, w, f"{where}[{i}]")) is not None), None)
    # As JSON, not Python: 1 equals 1.0, but true is not 1.
    same = type(got) is type(want) if isinstance(got, bool) or isinstance(want, bool) else True
    return None if same and got == want else f"{where} is {json.dumps(got)}, expected {json.dumps(want)}"


def _check(path: Path, expected: Mapping[str, Any]) -> str | None:
    """Why the file at ``path`` is not as ``expected``, or None if it is."""
    if expected.get("absent"):
        return "should not exist" if path.exists() else None
    if not path.is_file():
        return "is missing"
    text = path.read_text(encoding="utf-8", errors="replace")
    if "json" in expected:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            return f"is not valid JSON: {e}"
        return _json_difference(value, expected["json"])
    return None if _lines(text) == _lines(expected["text"]) else _first_difference(text, expected["text"])


def check(task: Mapping[str, Any], state: Path | None) -> dict[str, Any]:
    """Score the workspace ``state`` against ``task["expect"]`` (see the module docstring)."""
    if state is None:
        # env.score(task, "some text") outside an episode: there is no workspace to look at.
        return {"reward": 0.0, "info": {"reason": "no workspace: this environment scores the files an episode "
                                                  "leaves, not text"}}
    expect: Mapping[str, Mapping[str, Any]] = task["expect"]
    wrong = {path: why for path, spec in expect.items() if (why := _check(state / path, spec)) is not None}

    before, after = _files(SNAPSHOT), _files(state)
    others = (set(before) | set(after)) - set(expect)
    changed = sorted(p for p in others & set(before) & set(after)
                     if _lines(before[p].read_text(encoding="utf-8"))
                     != _lines(after[p].read_text(encoding="utf-8", errors="replace")))
    created = sorted(others - set(before))
    deleted = sorted(others - set(after))

    done = (len(expect) - len(wrong)) / len(expect)
    untouched = not (changed or created or deleted)
    return {
        "reward": done if untouched else 0.0,
        "breakdown": {"expected": done, "untouched": float(untouched)},
        "info": {"wrong": wrong, "changed": changed, "created": created, "deleted": deleted},
    }
