#!/usr/bin/env python3
"""Generate the tasks of ``envhub-examples/word-guess``.

    python generate.py                  # rewrite tasks/{train,dev,test}.jsonl
    python generate.py --seed 7 --out /tmp/tasks

Standard library only, and deterministic: the same seed always writes the same bytes, so
the ``rows`` and ``sha256`` recorded in ``envhub.toml`` can be checked by ``envhub validate``
after regenerating.

Each task is one game: a secret word drawn from ``WORDS`` (a list of common English words,
written for this environment), and a reference game that finds it. The reference plays a
real strategy against the real feedback (``word_guess.rules.feedback``, the function the
responder uses): each guess is the word of ``WORDS`` that leaves the fewest candidates in
the worst case (minimax), preferring words that could still be the secret, then the
alphabetically first. It finds every word of ``WORDS`` within ``PAR`` guesses (the script
checks this for the secrets it draws), so the reference scores 1.0; the number of guesses
it needs, less one, is the task's difficulty (1 to 3).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections import Counter
from functools import lru_cache
from pathlib import Path

from word_guess.rules import GREEN, MAX_GUESSES, PAR, WORD_LENGTH, feedback

DEFAULT_SEED = 20240612
DEFAULT_SIZES = {"train": 40, "dev": 12, "test": 12}

# Common English words of five letters: the secrets are drawn from these, and the reference
# guesses only these. The model may guess any five letters.
WORDS = sorted(set("""
about above actor acute adapt admit adopt adult after again agent agree ahead alarm album
alert alike alive allow alone along alter angle angry apple apply arena argue arise aside
asset avoid award aware badge baker basic beach beard beast begin being below bench berry
birth black blade blame blank blast blend bless blind block blood bloom board boast boost
booth bound brain brand brave bread break brick bride brief bring broad brown brush build
built bunch burst buyer cabin cable camel candy cargo carry catch cause chain chair chalk
charm chart chase cheap check cheek chess chest chief child chill civil claim class clean
clear clerk click cliff climb clock close cloth cloud coach coast color couch count court
cover crack craft crane crash cream crime crisp cross crowd crown crust curve cycle daily
dance delay depth diary dirty doubt dough draft drain drama dream dress drift drink drive
eager early earth eight elbow elder empty enemy enjoy enter entry equal error event every
exact exist extra faith false fancy feast fence fetch fever field fifth fight final flame
flash fleet flesh float flock flood floor flour fluid focus force forge forth frame fresh
front frost fruit fully giant given glass globe glove grace grade grain grand grant grape
grass grave great green greet grief grill grind group grown guard guess guest guide habit
happy harsh heart heavy hedge honey horse hotel house human humor hurry ideal image index
inner input issue ivory jelly jewel joint judge juice knife knock label large laser later
laugh layer learn lease least leave legal lemon level light limit linen liver local lodge
logic loose lover lower loyal lucky lunch magic major maker maple march match mayor medal
metal meter might minor mixed model money month moral motor mount mouse mouth movie music
nerve never night noble noise north novel nurse ocean offer often olive onion opera orbit
order other outer owner paint panel paper party pasta patch pause peace peach pearl penny
phase phone photo piano piece pilot pitch pizza place plain plane plant plate point polar
porch pound power press price pride prime print prize proof proud prove pupil queen quick
quiet quite radio raise ranch range rapid ratio reach ready relax reply rider ridge rifle
right rival river roast robot rocky round route royal rural salad sauce scale scarf scene
scent score scout sense serve seven shade shake shape share sharp sheep sheet shelf shell
shift shine shirt shock shore short shout sight silly since skill skirt slate sleep slice
slide slope small smart smile smoke snake solar solid solve sound south space spare spark
speak spear speed spend spice spine spoon sport spray squad stack staff stage stair stake
stamp stand start state steam steel steep stick still stone store storm story stove straw
strip study style sugar suite sunny super sweet swing sword table taste teach thank theme
thick thief thing think third thumb tiger tight timer title toast today token tooth topic
torch total touch tower track trade trail train treat trend trial tribe trick truck truly
trust truth tulip twice uncle under union unity upper upset urban usual valid value vapor
video visit vital vivid voice wagon waste watch water whale wheat wheel where while white
whole width witch woman world worry worth would wound write wrong yacht yield young youth
zebra
""".split()))
SOLVED = " ".join([GREEN] * WORD_LENGTH)
#: The first guess of every reference game: ``best_guess(tuple(WORDS))``. Computing it
#: scores every word against every word (a few seconds), so it is written down here;
#: after changing WORDS, run ``python generate.py --find-opening`` and update it.
OPENING = "arise"


@lru_cache(maxsize=None)
def mark(guess: str, secret: str) -> str:
    return feedback(guess, secret)


@lru_cache(maxsize=None)  # games whose feedback so far is the same share their next guess
def best_guess(candidates: tuple[str, ...]) -> str:
    """The minimax guess: fewest candidates left in the worst case; then a word that could
    be the secret; then alphabetical order."""
    if len(candidates) <= 2:
        return candidates[0]
    possible = set(candidates)

    def cost(guess: str) -> tuple[int, bool, str]:
        worst = max(Counter(mark(guess, secret) for secret in candidates).values())
        return worst, guess not in possible, guess

    return min(WORDS, key=cost)


def solve(secret: str, opening: str) -> list[str]:
    """The reference strategy's guesses for ``secret``, from ``opening`` to the secret."""
    candidates = tuple(WORDS)
    guesses: list[str] = []
    while True:
        guess = opening if not guesses else best_guess(candidates)
        guesses.append(guess)
        marks = mark(guess, secret)
        if marks == SOLVED:
            return guesses
        candidates = tuple(w for w in candidates if mark(guess, w) == marks)


def prompt() -> str:
    return (f"New game. I have picked a secret {WORD_LENGTH}-letter English word. You have {MAX_GUESSES} "
            "guesses to find it. What is your first guess?")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="default: %(default)s")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "tasks",
                        help="directory for the JSONL files (default: tasks/ beside this script)")
    parser.add_argument("--find-opening", action="store_true",
                        help="compute the best opening guess for WORDS, print it and exit")
    args = parser.parse_args(argv)

    bad = [w for w in WORDS if len(w) != WORD_LENGTH or not w.isalpha() or not w.islower()]
    if bad:
        raise SystemExit(f"not {WORD_LENGTH} lower-case letters: {', '.join(bad)}")
    if args.find_opening:
        print(best_guess(tuple(WORDS)))
        return
    rng = random.Random(f"{args.seed}:secrets")  # a str seed hashes the same everywhere
    secrets = rng.sample([w for w in WORDS if w != OPENING], sum(DEFAULT_SIZES.values()))
    games = {secret: solve(secret, OPENING) for secret in secrets}
    too_long = [s for s, guesses in games.items() if len(guesses) > PAR]
    if too_long:  # its reference would score below 1.0 (no word of WORDS needs more today)
        raise SystemExit(f"the reference strategy needs more than {PAR} guesses for: {', '.join(too_long)}")

    args.out.mkdir(parents=True, exist_ok=True)
    start = 0
    for split, n in DEFAULT_SIZES.items():
        rows = []
        for i, secret in enumerate(secrets[start:start + n], 1):
            reference = [g.upper() for g in games[secret]]
            rows.append({"id": f"word-{split}-{i:03d}", "prompt": prompt(), "answer": secret,
                         "difficulty": len(reference) - 1, "reference": reference})
        start += n
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
        path = args.out / f"{split}.jsonl"
        path.write_bytes(data)
        # In the form of envhub.toml's [tasks.splits.*], to paste there if the data changed.
        print(f"{split}: {path}\n  rows = {len(rows)}\n  sha256 = \"{hashlib.sha256(data).hexdigest()}\"")


if __name__ == "__main__":
    main()
