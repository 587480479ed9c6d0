"""The requirements of ``envhub-examples/writing`` that a program can check.

Each task states its requirements at the end of its prompt ("Between 50 and 80 words.",
'Use the phrase "induction".', ...) and carries them as fields:

| field | requirement |
|---|---|
| ``min_words``, ``max_words`` | the length, in words (:func:`count_words`) |
| ``include`` | phrases that must appear (any case, on word boundaries) |
| ``avoid`` | words or characters that must not appear (``"!"``: no exclamation marks) |
| ``start`` | text the reply must begin with, such as ``"Subject:"`` |
| ``bullets`` | the exact number of bullet lines (starting with ``-``, ``*`` or ``•``) |

:func:`requirement_lines` words them as the prompts do, and :func:`requirements` is the
rubric's gate. Counting words and spotting phrases is what code does reliably and judges
do not, so the judge is told that these are checked elsewhere and grades the rest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["count_words", "requirement_lines", "requirements", "unmet"]

# A word: letters or digits, with inner apostrophes, hyphens or dots ("don't", "two-year",
# "1.2"). Bullet marks, dashes and lone symbols ("$", "%") are not words.
_WORD = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*")
_BULLET = re.compile(r"^[ \t]*[-*•][ \t]+\S", re.MULTILINE)


def count_words(text: str) -> int:
    """The number of words in ``text``, as the length requirements count them."""
    return len(_WORD.findall(text))


def _phrase(phrase: str) -> re.Pattern[str]:
    """``phrase`` anywhere, in any case and spacing, not inside a longer word."""
    body = r"\s+".join(re.escape(part) for part in phrase.split())
    left = r"(?<!\w)" if phrase[:1].isalnum() else ""
    right = r"(?!\w)" if phrase[-1:].isalnum() else ""
    return re.compile(left + body + right, re.IGNORECASE)


def _quoted(items: Sequence[str], last: str) -> str:
    quoted = [f'"{item}"' for item in items]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} {last} {quoted[-1]}"


def requirement_lines(task: Mapping[str, Any]) -> list[str]:
    """The task's requirements, one sentence each, as its prompt states them."""
    lines = [f"Between {task['min_words']} and {task['max_words']} words."]
    include = list(task.get("include") or [])
    if include:
        lines.append(f"Use the phrase{'s' if len(include) > 1 else ''} {_quoted(include, 'and')}.")
    words = [item for item in task.get("avoid") or [] if item != "!"]
    if words:
        lines.append(f"Do not use the word{'s' if len(words) > 1 else ''} {_quoted(words, 'or')}.")
    if "!" in (task.get("avoid") or []):
        lines.append("Do not use exclamation marks.")
    if task.get("start"):
        lines.append(f'Begin with a line that starts "{task["start"]}".')
    if task.get("bullets"):
        lines.append(f'Include exactly {task["bullets"]} bullet points (lines starting with "- ").')
    return lines


def unmet(task: Mapping[str, Any], text: str) -> tuple[list[str], int]:
    """(the requirements ``text`` does not meet, each saying how; the number checked)."""
    failed: list[str] = []
    checked = 1
    words = count_words(text)
    low, high = task["min_words"], task["max_words"]
    if not low <= words <= high:
        failed.append(f"{words} words, not between {low} and {high}")
    for phrase in task.get("include") or []:
        checked += 1
        if not _phrase(phrase).search(text):
            failed.append(f'does not use "{phrase}"')
    for item in task.get("avoid") or []:
        checked += 1
        found = _phrase(item).findall(text)
        if found:
            failed.append(f'uses "{item}" ({len(found)}x)')
    if task.get("start"):
        checked += 1
        if not text.lstrip().startswith(task["start"]):
            failed.append(f'does not begin with "{task["start"]}"')
    if task.get("bullets"):
        checked += 1
        bullets = len(_BULLET.findall(text))
        if bullets != task["bullets"]:
            failed.append(f"{bullets} bullet points, not {task['bullets']}")
    return failed, checked


def requirements(task: Mapping[str, Any], completion: str) -> dict[str, Any]:
    """The share of the task's stated requirements the completion meets, in [0, 1].

    The rubric makes this criterion required, so anything short of all of them scores 0;
    the share still shows in the breakdown how close a reply came, and ``info["unmet"]``
    says which requirements failed.
    """
    failed, checked = unmet(task, completion)
    return {"reward": (checked - len(failed)) / checked,
            "info": {"words": count_words(completion), "unmet": failed}}
