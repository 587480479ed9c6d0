#!/usr/bin/env python3
"""Generate the tasks of ``envhub-examples/mcp-toolset``.

    python generate.py                  # rewrite tasks/{train,dev,test}.jsonl
    python generate.py --seed 7 --out /tmp/tasks

Standard library only, and deterministic: the same seed always writes the same bytes, so the
``rows`` and ``sha256`` recorded in ``envhub.toml`` can be checked by ``envhub validate`` after
regenerating. Each answer is computed with ``unit_tools.units.convert`` (exact fractions), the
function the MCP server's ``convert`` tool calls, and each task's ``reference`` makes the same
tool calls and boxes the rounded sum.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from fractions import Fraction
from pathlib import Path

from unit_tools.units import convert

DEFAULT_SEED = 20261126
DEFAULT_SIZES = {"train": 12, "dev": 6, "test": 6}

# (difficulty, question with {a} [and {b}], the parts as (value slot, from unit), target unit, value ranges)
TEMPLATES = [
    (1, "A hiking trail is {a} miles long. How long is it in kilometres?", [("a", "mi")], "km", (3, 40)),
    (1, "A parcel weighs {a} pounds. What is its mass in kilograms?", [("a", "lb")], "kg", (2, 70)),
    (1, "An aquarium holds {a} US gallons. How many litres is that?", [("a", "gal")], "L", (5, 120)),
    (1, "The oven is set to {a} degrees Fahrenheit. What is that in degrees Celsius?", [("a", "degF")],
     "degC", (300, 480)),
    (1, "A ship sailed {a} nautical miles. How far is that in statute miles?", [("a", "nmi")], "mi", (10, 300)),
    (1, "A board is {a} inches long. How long is it in centimetres?", [("a", "in")], "cm", (6, 96)),
    (2, "A recipe needs {a} US cups of milk and {b} US tablespoons of cream. How many millilitres of "
        "liquid is that in all?", [("a", "cup"), ("b", "tbsp")], "mL", (1, 6)),
    (2, "A climber weighs {a} stone, and her pack {b} pounds. What is their total mass in kilograms?",
     [("a", "st"), ("b", "lb")], "kg", (8, 16)),
    (2, "A race was {a} kilometres of running and {b} miles of cycling. How many miles in all?",
     [("a", "km"), ("b", "mi")], "mi", (5, 42)),
    (2, "A job took {a} hours and then {b} minutes more. How many days is that in all?",
     [("a", "h"), ("b", "min")], "day", (10, 90)),
]

INSTRUCTIONS = " Use the unit tools, and give the number rounded to 2 decimal places in \\boxed{}."


def make_task(rng: random.Random, split: str, index: int, template: int) -> dict[str, object]:
    difficulty, question, parts, target, (low, high) = TEMPLATES[template % len(TEMPLATES)]
    values = {slot: rng.randint(low, high) for slot, _ in parts}
    total = sum((convert(values[slot], unit, target) for slot, unit in parts), Fraction(0))
    answer = f"{float(round(total, 2)):.2f}"
    calls = [{"id": f"call_{i + 1}", "type": "function", "function": {
        "name": "convert", "arguments": {"value": values[slot], "from_unit": unit, "to_unit": target}}}
        for i, (slot, unit) in enumerate(parts)]
    return {
        "id": f"units-{split}-{index + 1:03d}",
        "prompt": question.format(**values) + INSTRUCTIONS,
        "answer": answer,
        "difficulty": difficulty,
        "reference": [{"role": "assistant", "content": None, "tool_calls": calls}, f"\\boxed{{{answer}}}"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "tasks")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for offset, (split, size) in enumerate(DEFAULT_SIZES.items()):
        rng = random.Random(args.seed + offset)
        # each split starts at a different template, so dev and test between them see every one
        rows = [make_task(rng, split, i, i + offset * 3) for i in range(size)]
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
        (args.out / f"{split}.jsonl").write_bytes(data)
        print(f"{split}: {len(rows)} rows, sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
