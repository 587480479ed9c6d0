"""example_envs/word-guess: the responder's feedback is what the README says, a player that
follows it wins while players that ignore it lose, and the score depends on the guesses used.

The generic checks (validate --check, the pytest plugin) run over every example elsewhere.
"""

from __future__ import annotations

import random
import re
import string
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.runtime import Environment

BUNDLE = Path(__file__).resolve().parent.parent / "example_envs" / "word-guess"
FEEDBACK = re.compile(r"^([A-Z]{5}): ([GY-](?: [GY-]){4}) \((\d) guess(?:es)? left\)$")


@pytest.fixture
def env() -> Environment:
    return envhub.load(BUNDLE, trust_code=True)


def task_with_secret(env: Environment, secret: str) -> Any:
    return next(t for split in ("train", "dev") for t in env.tasks(split) if t["answer"] == secret)


def marks(guess: str, secret: str) -> str:
    """The marks the README describes, written independently of the bundle's rules.py."""
    result = ["G" if g == s else "-" for g, s in zip(guess, secret, strict=True)]
    left = Counter(s for g, s in zip(guess, secret, strict=True) if g != s)
    for i, g in enumerate(guess):
        if result[i] == "-" and left[g]:
            result[i], left[g] = "Y", left[g] - 1
    return " ".join(result)


def play(env: Environment, task: Any, player: Any) -> Any:
    """Play one game; ``player(replies_so_far)`` returns the next turn."""
    with env.episode(task) as episode:
        episode.reset()
        replies: list[str] = []
        while True:
            result = episode.step(player(replies))
            if result.done:
                return result
            replies.append(result.observation.messages[-1]["content"])


def test_generate_reproduces_the_task_files(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(BUNDLE / "generate.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for split in ("train", "dev", "test"):
        assert (tmp_path / f"{split}.jsonl").read_bytes() == (BUNDLE / "tasks" / f"{split}.jsonl").read_bytes(), split


@pytest.mark.parametrize(("secret", "guess", "expected"), [
    ("stake", "arise", "Y - - Y G"),    # the README's example
    ("error", "rarer", "Y - G Y G"),    # the G's first, then one Y per unmatched r
    ("title", "otter", "- Y G Y -"),
    ("alarm", "llama", "- G G Y Y"),    # alarm has one l, matched exactly: the first l is absent
    ("still", "lolls", "Y - - G Y"),
], ids=["readme", "repeated-r", "repeated-t", "exact-match-first", "two-of-three-ls"])
def test_the_responder_marks_each_letter(env: Environment, secret: str, guess: str, expected: str) -> None:
    task = task_with_secret(env, secret)
    assert marks(guess, secret) == expected  # the independent reading of the rules agrees
    with env.episode(task) as episode:
        episode.reset()
        result = episode.step(f"Let me try {guess.upper()}.")
    assert result.observation.messages[-1] == {"role": "user",
                                               "content": f"{guess.upper()}: {expected} (5 guesses left)"}


@pytest.mark.parametrize(("reply", "answer"), [
    ("", "That is not a guess: end your reply with one 5-letter word, letters a-z only (5 guesses left)."),
    ("I give up", "That is not a guess: end your reply with one 5-letter word, letters a-z only (5 guesses left)."),
    ("CRANE, I think", "THINK: - - - - - (5 guesses left)"),    # the last word is the guess
    ("**crane?**", "CRANE: - Y G - - (5 guesses left)"),
], ids=["empty", "no-guess", "last-word-counts", "punctuation"])
def test_what_counts_as_a_guess(env: Environment, reply: str, answer: str) -> None:
    task = task_with_secret(env, "alarm")
    with env.episode(task) as episode:
        episode.reset()
        assert episode.step(reply).observation.messages[-1]["content"] == answer


def test_the_countdown_matches_max_turns_and_the_last_guess_still_counts(env: Environment) -> None:
    task = task_with_secret(env, "alarm")
    wrong = ["crane", "hello", "I give up", "title", "stake"]
    replies: list[str] = []

    def player(so_far: list[str]) -> str:
        replies[:] = so_far
        return wrong[len(so_far)] if len(so_far) < len(wrong) else "ALARM"

    result = play(env, task, player)
    left = [int(re.search(r"\((\d) guess", reply).group(1)) for reply in replies]  # type: ignore[union-attr]
    assert env.max_turns == 6 and left == [5, 4, 3, 2, 1]
    # Found on the sixth and last guess: envhub ends the episode (truncated) without asking
    # the responder, and the verifier still sees the right guess.
    assert (result.reward, result.info["truncated"]) == (0.8, True)
    assert result.info["breakdown"] == {"solved": 1.0, "speed": 0.8}


def feedback_follower(pool: list[str]):  # type: ignore[no-untyped-def]
    """A player that guesses the first word of ``pool`` consistent with every answer so far."""
    def player(replies: list[str]) -> str:
        candidates = pool
        for reply in replies:
            match = FEEDBACK.match(reply)
            assert match, reply
            guess = match.group(1).lower()
            candidates = [w for w in candidates if marks(guess, w) == match.group(2)]
        return candidates[0].upper()
    return player


def test_a_player_that_follows_the_feedback_wins_every_dev_game(env: Environment) -> None:
    pool = sorted({t["answer"] for split in ("train", "dev") for t in env.tasks(split)})
    rewards = [play(env, task, feedback_follower(pool)).reward for task in env.tasks("dev")]
    assert min(rewards) >= 0.8 and sum(r == 1.0 for r in rewards) >= 10, rewards


def test_players_that_ignore_the_feedback_lose(env: Environment) -> None:
    rng = random.Random(7)
    for task in env.tasks("dev"):
        constant = play(env, task, lambda replies: "CRANE")
        noise = play(env, task, lambda replies: "".join(rng.choice(string.ascii_uppercase) for _ in range(5)))
        assert (constant.reward, noise.reward) == (0.0, 0.0)
        assert constant.info == {"breakdown": {"solved": 0.0, "speed": 0.0}, "truncated": True}


@pytest.mark.parametrize(("turns", "reward"), [
    (["ALARM"], 1.0),
    (["crane", "hello", "", "ALARM"], 1.0),                       # within four, a non-guess included
    (["crane", "hello", "", "title", "alarm"], 0.9),
    (["crane", "hello", "", "title", "stake", "alarm"], 0.8),
    (["crane", "hello", "", "title", "stake", "other"], 0.0),
], ids=["first", "fourth", "fifth", "sixth", "never"])
def test_the_score_comes_from_the_transcript(env: Environment, turns: list[str], reward: float) -> None:
    task = task_with_secret(env, "alarm")
    messages: list[dict[str, Any]] = [{"role": "user", "content": task.prompt}]
    for turn in turns:
        messages += [{"role": "assistant", "content": turn}, {"role": "user", "content": "(feedback)"}]
    score = env.score(task, messages[:-1])
    assert score.reward == reward
    assert score.info["not_a_guess"] == turns.count("")
