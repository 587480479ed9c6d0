"""The verifier: replay the game from the transcript and score how it ended."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .rules import PAR, assistant_replies, parse_guess


def score(task: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """1.0 for finding the word within ``PAR`` guesses, 0.1 less for each guess beyond,
    0 for not finding it.

    Every model turn counts as a guess, including replies that were not one: the
    responder told the model so and counted it down. The score is computed from the
    transcript alone (not from anything the responder remembered), so
    ``env.score(task, messages)`` scores a game recorded elsewhere the same way.
    """
    secret = str(task["answer"])
    guesses = [parse_guess(reply) for reply in assistant_replies(messages)]
    solved_at = next((n for n, guess in enumerate(guesses, 1) if guess == secret), None)
    speed = 0.0 if solved_at is None else min(1.0, 1.0 - 0.1 * (solved_at - PAR))
    return {
        "reward": round(speed, 10),  # 1 - 0.1 * 2 is 0.7999999999999999 in floating point
        "breakdown": {"solved": float(solved_at is not None), "speed": round(speed, 10)},
        "info": {"guesses": guesses, "solved_at": solved_at, "not_a_guess": guesses.count(None)},
    }
