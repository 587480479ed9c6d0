"""The task generator of ``envhub-examples/number-sequences``: "what number comes next?"

envhub calls :func:`make_task` with a seed, the split's name, a difficulty level (one of the
manifest's ``difficulty-levels``) and ``[config.params]``, and gets one task back. Nothing
here keeps state or reads the clock: a ``random.Random(seed)`` makes every choice, so the
same arguments give the same task in any process, on any machine, and a seed range is a
split of fixed tasks (``dev``, the held-out ``test``) or an unbounded supply (``train``).

Each level has its own family of rules; the solver has to find the rule from the terms shown:

====  ===========================================  ==============================
level rule                                         e.g.
====  ===========================================  ==============================
1     add a constant                               4, 11, 18, 25, 32 -> 39
2     multiply by a constant, or alternate two     3, 6, 12, 24, 48 -> 96
      steps (+a, -b, +a, ...)
3     the differences grow by a constant, or each  2, 5, 11, 20, 32 -> 47
      term is the sum of the two before it
4     two sequences interleaved, or multiply and   1, 40, 4, 35, 7, 30 -> 10
      add (x * m + c)
====  ===========================================  ==============================
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

Rule = dict[str, Any]


def make_task(seed: int, difficulty: int, split: str, params: dict[str, Any]) -> dict[str, Any]:
    """The task for ``seed`` at ``difficulty`` (1 to 4). ``params["terms"]`` is the number of
    terms shown at levels 1 and 2; levels 3 and 4 show one and two more, since their rules
    take more terms to pin down."""
    rng = random.Random(f"number-sequences:{seed}")  # a string seed: stable across Python versions
    shown = int(params.get("terms", 5)) + max(0, difficulty - 2)
    family = rng.choice(FAMILIES[difficulty])
    rule, terms = family(rng, shown + 1)
    *visible, answer = terms
    sequence = ", ".join(str(t) for t in visible)
    return {
        "id": f"seq-{split}-{seed}",
        "prompt": f"What number comes next in this sequence?\n\n{sequence}, ...",
        "answer": str(answer),
        "difficulty": difficulty,
        "rule": rule,
        "solution": f"{describe(rule)} So the next number is {answer}.",
    }


# --- the families of rules, one function each: (rng, number of terms) -> (rule, terms) -----


def arithmetic(rng: random.Random, n: int) -> tuple[Rule, list[int]]:
    start, step = rng.randint(1, 60), rng.choice([-1, 1]) * rng.randint(2, 13)
    if step < 0:
        start += -step * n  # stay positive: a falling sequence starts high enough
    return {"kind": "arithmetic", "start": start, "step": step}, [start + step * i for i in range(n)]


def geometric(rng: random.Random, n: int) -> tuple[Rule, list[int]]:
    start, ratio = rng.randint(1, 9), rng.randint(2, 4)
    return {"kind": "geometric", "start": start, "ratio": ratio}, [start * ratio**i for i in range(n)]


def alternating(rng: random.Random, n: int) -> tuple[Rule, list[int]]:
    start, up, down = rng.randint(10, 50), rng.randint(3, 15), rng.randint(1, 9)
    while up == down:
        down = rng.randint(1, 9)
    terms = [start]
    for i in range(1, n):
        terms.append(terms[-1] + (up if i % 2 else -down))
    return {"kind": "alternating", "start": start, "up": up, "down": down}, terms


def growing_steps(rng: random.Random, n: int) -> tuple[Rule, list[int]]:
    start, first_step, growth = rng.randint(1, 30), rng.randint(1, 8), rng.randint(1, 5)
    terms = [start]
    for i in range(1, n):
        terms.append(terms[-1] + first_step + growth * (i - 1))
    return {"kind": "growing-steps", "start": start, "first_step": first_step, "growth": growth}, terms


def two_before(rng: random.Random, n: int) -> tuple[Rule, list[int]]:
    a, b = rng.randint(1, 9), rng.randint(1, 12)
    terms = [a, b]
    while len(terms) < n:
        terms.append(terms[-1] + terms[-2])
    return {"kind": "sum-of-two-before", "first": a, "second": b}, terms[:n]


def interleaved(rng: random.Random, n: int) -> tuple[Rule, list[int]]:
    _, odd = arithmetic(rng, (n + 1) // 2)
    _, even = arithmetic(rng, n // 2)
    terms = [odd[i // 2] if i % 2 == 0 else even[i // 2] for i in range(n)]
    return {"kind": "interleaved", "odd_positions": odd[:2], "even_positions": even[:2]}, terms


def multiply_add(rng: random.Random, n: int) -> tuple[Rule, list[int]]:
    start, factor, add = rng.randint(1, 6), rng.randint(2, 3), rng.choice([-3, -2, -1, 1, 2, 3, 4, 5])
    terms = [start]
    while len(terms) < n:
        terms.append(terms[-1] * factor + add)
    return {"kind": "multiply-add", "start": start, "factor": factor, "add": add}, terms


FAMILIES: dict[int, list[Callable[[random.Random, int], tuple[Rule, list[int]]]]] = {
    1: [arithmetic],
    2: [geometric, alternating],
    3: [growing_steps, two_before],
    4: [interleaved, multiply_add],
}


def describe(rule: Rule) -> str:
    """The rule in words: the reference explanation of a task."""
    kind = rule["kind"]
    if kind == "arithmetic":
        return f"Each term is the one before {_signed(rule['step'])}."
    if kind == "geometric":
        return f"Each term is the one before times {rule['ratio']}."
    if kind == "alternating":
        return f"The steps alternate: add {rule['up']}, then subtract {rule['down']}."
    if kind == "growing-steps":
        return (f"The differences are {rule['first_step']}, {rule['first_step'] + rule['growth']}, ...: "
                f"each step is {rule['growth']} more than the one before.")
    if kind == "sum-of-two-before":
        return "Each term is the sum of the two before it."
    if kind == "interleaved":
        return "Two sequences alternate: the odd positions and the even positions each add a constant."
    return f"Each term is the one before times {rule['factor']}, {_signed(rule['add'])}."


def _signed(n: int) -> str:
    return f"plus {n}" if n >= 0 else f"minus {-n}"
