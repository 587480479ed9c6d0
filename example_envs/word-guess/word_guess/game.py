"""The environment's side of the game: after each model turn, mark the guess."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .rules import MAX_GUESSES, WORD_LENGTH, assistant_replies, feedback, parse_guess


def _left(used: int) -> str:
    left = MAX_GUESSES - used
    return f"{left} guess left" if left == 1 else f"{left} guesses left"


def respond(task: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The reply to the model's latest turn, or None when it has guessed the word.

    A guess is answered with the guess and one mark per letter, e.g.
    ``CRANE: G Y - - Y (5 guesses left)``. A reply that does not end with a
    five-letter word is told so; it still uses up a guess. envhub ends the episode after
    the last guess without asking the responder, so this never has to.
    """
    replies = assistant_replies(messages)
    guess = parse_guess(replies[-1])
    if guess is None:
        return (f"That is not a guess: end your reply with one {WORD_LENGTH}-letter word, "
                f"letters a-z only ({_left(len(replies))}).")
    secret = str(task["answer"])
    if guess == secret:
        return None
    return f"{guess.upper()}: {feedback(guess, secret)} ({_left(len(replies))})"
