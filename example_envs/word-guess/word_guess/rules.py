"""The rules of the game, shared by the responder (``game.py``) and the verifier (``verify.py``).

Both read the model's replies with :func:`parse_guess` and mark guesses with
:func:`feedback`, so what the model is told during the game and how it is scored
afterwards can never disagree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

WORD_LENGTH = 5
#: Guesses per game. envhub ends the episode after ``[harness] max-turns`` model turns, so
#: the manifest's max-turns must be this number; the responder counts down from it.
MAX_GUESSES = 6
#: A game solved within this many guesses scores 1.0; each guess beyond it costs 0.1.
PAR = 4

GREEN = "G"   # the right letter in the right place
YELLOW = "Y"  # in the word, but not in this place
ABSENT = "-"  # not in the word (or not as many times as the guess has it)

_WORD = re.compile(r"[A-Za-z]+")


def parse_guess(reply: str | None) -> str | None:
    """The guess in a reply: its last word, lower-cased, if that word is ``WORD_LENGTH``
    letters a-z; else None. So "I will try CRANE." guesses crane, and a reply may think
    aloud as long as it ends with the guess."""
    words = _WORD.findall(reply or "")
    if not words or len(words[-1]) != WORD_LENGTH:
        return None
    return words[-1].lower()


def feedback(guess: str, secret: str) -> str:
    """One mark per letter of ``guess``: ``GREEN``, ``YELLOW`` or ``ABSENT``.

    Repeated letters are marked as in the well-known game: exact matches first, then
    letters in the wrong place from left to right, only as many times as the secret still
    has that letter unmatched. Guessing "sheet" for "spear" gives ``G - G - -``: the first
    e is in the right place, and the second has no e left to point to.
    """
    marks = [GREEN if g == s else ABSENT for g, s in zip(guess, secret)]
    unmatched = [s for g, s in zip(guess, secret) if g != s]  # the secret's letters still to point to
    for i, g in enumerate(guess):
        if marks[i] == ABSENT and g in unmatched:
            marks[i] = YELLOW
            unmatched.remove(g)
    return " ".join(marks)


def assistant_replies(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The text of each assistant turn, in order ("" for a turn without text)."""
    return [m.get("content") or "" for m in messages if m.get("role") == "assistant"]
