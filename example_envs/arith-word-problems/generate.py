#!/usr/bin/env python3
"""Generate the tasks of ``envhub-examples/arith-word-problems``.

    python generate.py                  # rewrite tasks/{train,dev,test}.jsonl
    python generate.py --seed 7 --out /tmp/tasks --train 1000

Standard library only, and deterministic: a given seed and set of sizes always writes the
same bytes, so the row counts and sha256 digests recorded in ``envhub.toml`` can be checked
by ``envhub validate`` after regenerating.

How a problem is built. Each topic (shop, train, recipe, savings, floor) tells a story about
one running quantity: the stock on a shop's shelves, a train's distance from where it left,
the amount of an ingredient a cook needs, the money in a savings jar, the floor area to be
covered. The story opens with a sentence, then adds one sentence per *step*; every step is
one line of the reference solution (one or two operations on the running quantity). The
difficulty is the number of steps, 1 to 5. The last step may instead be a *final* step that
asks a different question about the quantity (how many packs to buy, how much more money is
needed). Every step checks its own preconditions (no negative stock, fractions and
percentages that come out whole), so every answer is a non-negative integer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_SEED = 20240601
DEFAULT_SIZES = {"train": 400, "dev": 100, "test": 100}
DIFFICULTIES = (1, 2, 3, 4, 5)

NAMES = ["Maya", "Omar", "Lena", "Kofi", "Priya", "Tomas", "Aiko", "Diego", "Sara", "Ivan", "Nia", "Felix"]


@dataclass
class Story:
    """A problem being written: its sentences, solution lines and running quantity."""

    topic: str
    ctx: dict[str, object]
    value: int
    sentences: list[str]
    question: str
    lines: list[str] = field(default_factory=list)


@dataclass
class Step:
    sentence: str
    line: str
    value: int
    question: str | None = None  # a final step asks its own question


# A step looks at the story and returns the Step it would add, or None if it does not fit
# (e.g. it would sell more than is in stock, or a fraction would not come out whole).
StepFn = Callable[[random.Random, Story], "Step | None"]


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def fraction(rng: random.Random, v: int) -> tuple[int, str] | None:
    """A fraction 1/d of ``v`` that comes out whole, as (d, its name), or None."""
    options = [(d, name) for d, name in ((2, "half"), (3, "a third"), (4, "a quarter"), (5, "a fifth"))
               if v % d == 0 and v >= 2 * d]
    return rng.choice(options) if options else None


def ceil_line(total: int, size: int, unit: str, what: str, whats: str) -> tuple[str, int]:
    """The solution line for 'how many packs of ``size`` hold ``total``', and the count."""
    q, r = divmod(total, size)
    if r == 0:
        return f"{total} / {size} = {q}, so exactly {plural(q, what, whats)} {'is' if q == 1 else 'are'} needed.", q
    held = f"{plural(q, what, whats)} {'holds' if q == 1 else 'hold'} only {q * size} {unit}"
    return f"{total} / {size} = {q} remainder {r}: {held}, so {q + 1} {whats} are needed.", q + 1


# --- shop: the stock on the shelves ---------------------------------------------------------

SHOP_ITEMS = ["notebooks", "apples", "candles", "mugs", "scarves", "pencils", "lemons", "toy cars"]
TIMES = ["In the morning", "Before noon", "At lunchtime", "In the afternoon", "Later"]


def shop_start(rng: random.Random) -> Story:
    name, item = rng.choice(NAMES), rng.choice(SHOP_ITEMS)
    stock = rng.randint(20, 150)
    return Story("shop", {"name": name, "item": item}, stock,
                 [f"{name}'s shop starts the day with {stock} {item} on the shelves."],
                 f"How many {item} are on the shelves now?")


def shop_delivery(rng: random.Random, s: Story) -> Step | None:
    k, m, item = rng.randint(2, 6), rng.choice([4, 5, 6, 8, 10, 12]), s.ctx["item"]
    new = s.value + k * m
    return Step(f"A delivery brings {k} boxes with {m} {item} in each.",
                f"The delivery adds {k} * {m} = {k * m} {item}: {s.value} + {k * m} = {new}.", new)


def shop_sell(rng: random.Random, s: Story) -> Step | None:
    if s.value < 4:
        return None
    n, item = rng.randint(2, s.value * 3 // 4), s.ctx["item"]
    return Step(f"{rng.choice(TIMES)}, customers buy {n} {item}.",
                f"{s.value} - {n} = {s.value - n} {item} are left.", s.value - n)


def shop_order(rng: random.Random, s: Story) -> Step | None:
    k, m, item = rng.randint(2, 5), rng.randint(2, 10), s.ctx["item"]
    if k * m >= s.value:
        return None
    return Step(f"A school orders {k} packs of {m} {item}.",
                f"The order takes {k} * {m} = {k * m} {item}: {s.value} - {k * m} = {s.value - k * m}.",
                s.value - k * m)


def shop_branch(rng: random.Random, s: Story) -> Step | None:
    picked = fraction(rng, s.value)
    if picked is None:
        return None
    d, word = picked
    part, name, item = s.value // d, s.ctx["name"], s.ctx["item"]
    return Step(f"{name} sends {word} of the {item} on the shelves to the branch shop.",
                f"{word.capitalize()} of {s.value} is {s.value} / {d} = {part}: {s.value} - {part} = {s.value - part}.",
                s.value - part)


def shop_double(rng: random.Random, s: Story) -> Step | None:
    if s.value > 300:
        return None
    return Step(f"A second delivery brings as many {s.ctx['item']} again as are on the shelves.",
                f"The stock doubles: {s.value} * 2 = {s.value * 2}.", s.value * 2)


def shop_boxes(rng: random.Random, s: Story) -> Step | None:
    b, name, item = rng.choice([3, 4, 5, 6, 8, 10, 12]), s.ctx["name"], s.ctx["item"]
    if s.value < b:
        return None
    q, r = divmod(s.value, b)
    return Step(f"At closing time {name} packs all the {item} into boxes of {b}.",
                f"{s.value} / {b} = {q} remainder {r}, so {plural(q, 'box', 'boxes')} are completely filled.", q,
                "How many boxes are completely filled?")


def shop_takings(rng: random.Random, s: Story) -> Step | None:
    p, name, item = rng.randint(2, 15), s.ctx["name"], s.ctx["item"]
    return Step(f"{name} sells the {item} for ${p} each.",
                f"Selling all {s.value} at ${p} each brings {s.value} * {p} = {s.value * p} dollars.", s.value * p,
                f"How many dollars does the shop take if it sells every one of them?")


# --- train: distance from the departure station ---------------------------------------------

CITIES = ["Ashford", "Brookvale", "Carlow", "Dunmore", "Elmstead", "Fairhaven", "Glenrock", "Hollins"]


def train_start(rng: random.Random) -> Story:
    a, b = rng.sample(CITIES, 2)
    v, t = rng.choice(range(40, 125, 5)), rng.randint(1, 4)
    s = Story("train", {"from": a, "to": b, "speed": v}, v * t,
              [f"A train leaves {a} for {b} and runs at {v} km/h for {plural(t, 'hour')}."],
              f"How many kilometres from {a} is the train now?")
    s.lines.append(f"Distance = speed * time = {v} * {t} = {v * t} km.")
    return s


def train_leg(rng: random.Random, s: Story) -> Step | None:
    v, t, old = rng.choice(range(40, 125, 5)), rng.randint(1, 3), s.ctx["speed"]
    if v == old:
        return None
    s.ctx["speed"] = v
    verb = "speeds up" if v > old else "slows down"  # type: ignore[operator]
    new = s.value + v * t
    return Step(f"It then {verb} to {v} km/h for {plural(t, 'more hour')}.",
                f"{v} * {t} = {v * t} km more: {s.value} + {v * t} = {new} km.", new)


def train_minutes(rng: random.Random, s: Story) -> Step | None:
    minutes = rng.choice([15, 20, 30, 40, 45, 90])
    speeds = [v for v in range(40, 125, 5) if v * minutes % 60 == 0]
    v = rng.choice(speeds)
    s.ctx["speed"] = v
    d = v * minutes // 60
    return Step(f"After a short stop it runs at {v} km/h for {minutes} minutes.",
                f"{minutes} minutes is {minutes}/60 of an hour: {v} * {minutes} / 60 = {d} km, "
                f"so {s.value} + {d} = {s.value + d} km.", s.value + d)


def train_back(rng: random.Random, s: Story) -> Step | None:
    if s.value < 20:
        return None
    x = rng.randint(5, min(60, s.value - 10))
    return Step(f"A signal fault sends it back {x} km towards {s.ctx['from']}.",
                f"Going back reduces the distance: {s.value} - {x} = {s.value - x} km.", s.value - x)


def train_remaining(rng: random.Random, s: Story) -> Step | None:
    length, b = s.value + rng.randint(10, 200), s.ctx["to"]
    return Step(f"The line from {s.ctx['from']} to {b} is {length} km long.",
                f"{length} - {s.value} = {length - s.value} km are left to {b}.", length - s.value,
                f"How many kilometres does the train still have to travel to reach {b}?")


def train_arrival(rng: random.Random, s: Story) -> Step | None:
    v, h, b = rng.choice(range(40, 125, 5)), rng.randint(1, 4), s.ctx["to"]
    rest = v * h
    length = s.value + rest
    return Step(f"The line from {s.ctx['from']} to {b} is {length} km long, and the train covers the rest at {v} km/h.",
                f"{length} - {s.value} = {rest} km are left; {rest} / {v} = {h} hours.", h,
                f"How many more hours does it take to reach {b}?")


# --- recipe: the amount of one ingredient needed --------------------------------------------

DISHES = [
    ("lentil soup", "lentils", "grams", [250, 500, 1000]),
    ("pancake", "flour", "grams", [500, 1000]),
    ("lemonade", "sugar", "grams", [250, 500, 1000]),
    ("tomato sauce", "tomatoes", "grams", [500, 1000]),
    ("rice pudding", "milk", "millilitres", [500, 1000]),
    ("vegetable curry", "rice", "grams", [500, 1000]),
]


def recipe_start(rng: random.Random) -> Story:
    dish, ingredient, unit, packs = rng.choice(DISHES)
    name, serves = rng.choice(NAMES), rng.randint(2, 6)
    per = rng.choice(range(20, 155, 5))
    people = rng.choice([p for p in range(2, 25) if p != serves])
    # "guests" counts people at the table (not the freezer pot), so cancellations stay possible.
    ctx = {"name": name, "ingredient": ingredient, "unit": unit, "packs": packs, "per": per, "guests": people}
    s = Story("recipe", ctx, per * people,
              [f"A {dish} recipe for {serves} people uses {per * serves} {unit} of {ingredient}.",
               f"{name} is cooking for {people} people."],
              f"How many {unit} of {ingredient} does {name} need?")
    s.lines.append(f"Per person: {per * serves} / {serves} = {per} {unit}; "
                   f"for {people} people: {per} * {people} = {per * people} {unit}.")
    return s


def recipe_more(rng: random.Random, s: Story) -> Step | None:
    k, per = rng.randint(1, 8), s.ctx["per"]
    s.ctx["guests"] = s.ctx["guests"] + k  # type: ignore[operator]
    new = s.value + per * k  # type: ignore[operator]
    return Step(f"Then {plural(k, 'more guest')} {'says' if k == 1 else 'say'} they are coming.",
                f"{k} * {per} = {per * k} {s.ctx['unit']} more: {s.value} + {per * k} = {new}.", new)  # type: ignore[operator]


def recipe_cancel(rng: random.Random, s: Story) -> Step | None:
    guests, per = s.ctx["guests"], s.ctx["per"]
    if guests < 3:  # type: ignore[operator]
        return None
    k = rng.randint(1, guests - 2)  # type: ignore[operator]
    s.ctx["guests"] = guests - k  # type: ignore[operator]
    new = s.value - per * k  # type: ignore[operator]
    return Step(f"{plural(k, 'guest')} {'cancels' if k == 1 else 'cancel'}.",
                f"{k} * {per} = {per * k} {s.ctx['unit']} fewer: {s.value} - {per * k} = {new}.", new)  # type: ignore[operator]


def recipe_double(rng: random.Random, s: Story) -> Step | None:
    if s.ctx.get("freezer") or s.value > 2000:
        return None
    s.ctx["freezer"] = True
    return Step(f"{s.ctx['name']} decides to make a second, identical pot for the freezer.",
                f"Two pots need twice as much: {s.value} * 2 = {s.value * 2}.", s.value * 2)


def recipe_spill(rng: random.Random, s: Story) -> Step | None:
    x, unit, ingredient = rng.choice(range(10, 110, 10)), s.ctx["unit"], s.ctx["ingredient"]
    return Step(f"While cooking, {x} {unit} of {ingredient} are spilled and have to be replaced.",
                f"The spill has to be made up: {s.value} + {x} = {s.value + x}.", s.value + x)


def recipe_pantry(rng: random.Random, s: Story) -> Step | None:
    if s.value < 30:
        return None
    x, name, unit, ingredient = rng.randint(1, s.value // 10 - 1) * 10, s.ctx["name"], s.ctx["unit"], s.ctx["ingredient"]
    return Step(f"{name} already has {x} {unit} of {ingredient} at home.",
                f"{s.value} - {x} = {s.value - x} {unit} still have to be bought.", s.value - x,
                f"How many more {unit} of {ingredient} does {name} have to buy?")


def recipe_packs(rng: random.Random, s: Story) -> Step | None:
    size, unit, ingredient = rng.choice(s.ctx["packs"]), s.ctx["unit"], s.ctx["ingredient"]  # type: ignore[arg-type]
    if size >= 2 * s.value:
        return None
    line, n = ceil_line(s.value, size, unit, "pack", "packs")  # type: ignore[arg-type]
    return Step(f"The shop sells {ingredient} only in packs of {size} {unit}.", line, n,
                f"How many packs does {s.ctx['name']} have to buy?")


# --- savings: the money in the jar ----------------------------------------------------------

THINGS = ["a book", "a video game", "a pair of trainers", "concert tickets", "a board game", "a jacket"]
GOALS = ["a bicycle", "a telescope", "a guitar", "a tablet", "a tent", "a drone"]
RELATIVES = ["An aunt", "A grandmother", "An uncle", "A grandfather", "A cousin"]


def savings_start(rng: random.Random) -> Story:
    name, money = rng.choice(NAMES), rng.randint(10, 200)
    return Story("savings", {"name": name}, money, [f"{name} has ${money} in a savings jar."],
                 f"How many dollars does {name} have now?")


def savings_weekly(rng: random.Random, s: Story) -> Step | None:
    w, n, name = rng.randint(3, 25), rng.randint(2, 12), s.ctx["name"]
    new = s.value + w * n
    return Step(f"{name} saves ${w} a week for {n} weeks.",
                f"{w} * {n} = {w * n} dollars saved: {s.value} + {w * n} = {new}.", new)


def savings_lawns(rng: random.Random, s: Story) -> Step | None:
    k, c, name = rng.randint(2, 9), rng.choice([5, 8, 10, 12, 15, 20]), s.ctx["name"]
    new = s.value + k * c
    return Step(f"{name} mows {k} lawns and is paid ${c} for each.",
                f"{k} * {c} = {k * c} dollars earned: {s.value} + {k * c} = {new}.", new)


def savings_spend(rng: random.Random, s: Story) -> Step | None:
    if s.value < 10:
        return None
    x = rng.randint(5, s.value * 2 // 3)
    return Step(f"{s.ctx['name']} spends ${x} on {rng.choice(THINGS)}.",
                f"{s.value} - {x} = {s.value - x} dollars are left.", s.value - x)


def savings_gift(rng: random.Random, s: Story) -> Step | None:
    g = rng.choice(range(10, 105, 5))
    return Step(f"{rng.choice(RELATIVES)} gives {s.ctx['name']} ${g} as a birthday present.",
                f"{s.value} + {g} = {s.value + g} dollars.", s.value + g)


def savings_give(rng: random.Random, s: Story) -> Step | None:
    picked = fraction(rng, s.value)
    if picked is None:
        return None
    d, word = picked
    part = s.value // d
    return Step(f"{s.ctx['name']} gives {word} of the money in the jar to a charity.",
                f"{word.capitalize()} of {s.value} is {s.value} / {d} = {part}: {s.value} - {part} = {s.value - part}.",
                s.value - part)


def savings_bonus(rng: random.Random, s: Story) -> Step | None:
    options = [p for p in (5, 10, 20, 25, 50) if s.value * p % 100 == 0]
    if not options or s.value == 0:
        return None
    p = rng.choice(options)
    bonus = s.value * p // 100
    return Step(f"The bank adds a bonus of {p}% of the savings.",
                f"{p}% of {s.value} is {s.value} * {p} / 100 = {bonus}: {s.value} + {bonus} = {s.value + bonus}.",
                s.value + bonus)


def savings_gap(rng: random.Random, s: Story) -> Step | None:
    price, name = s.value + rng.randint(5, 150), s.ctx["name"]
    return Step(f"{name} wants {rng.choice(GOALS)} that costs ${price}.",
                f"{price} - {s.value} = {price - s.value} dollars are still missing.", price - s.value,
                f"How many more dollars does {name} need?")


def savings_weeks(rng: random.Random, s: Story) -> Step | None:
    gap, w, name = rng.randint(20, 200), rng.randint(4, 20), s.ctx["name"]
    price = s.value + gap
    line, n = ceil_line(gap, w, "dollars", "week", "weeks")
    return Step(f"{name} wants {rng.choice(GOALS)} that costs ${price}, and from now on saves ${w} a week.",
                f"{price} - {s.value} = {gap} dollars are missing. " + line, n,
                f"How many weeks does {name} have to save before buying it?")


# --- floor: the area to be covered ----------------------------------------------------------

ROOMS = ["kitchen", "hallway", "classroom", "studio", "bedroom", "workshop"]
OBSTACLES = ["a built-in cupboard", "a fireplace", "a staircase", "a fixed counter"]


def floor_start(rng: random.Random) -> Story:
    name, room = rng.choice(NAMES), rng.choice(ROOMS)
    length, width = rng.randint(3, 12), rng.randint(2, 10)
    s = Story("floor", {"name": name, "room": room, "copies": False}, length * width,
              [f"{name} is laying a new floor in a rectangular {room} that is {length} m long and {width} m wide."],
              "How many square metres of floor have to be covered?")
    s.lines.append(f"Area = length * width = {length} * {width} = {length * width} square metres.")
    return s


def floor_extension(rng: random.Random, s: Story) -> Step | None:
    a, b = rng.randint(1, 5), rng.randint(1, 4)
    new = s.value + a * b
    return Step(f"An alcove of {a} m by {b} m, which also gets the new floor, opens off the {s.ctx['room']}.",
                f"The alcove adds {a} * {b} = {a * b} square metres: {s.value} + {a * b} = {new}.", new)


def floor_obstacle(rng: random.Random, s: Story) -> Step | None:
    a, b = rng.randint(1, 3), rng.randint(1, 3)
    if a * b * 2 > s.value:
        return None
    return Step(f"A {a} m by {b} m area is taken up by {rng.choice(OBSTACLES)} and is not covered.",
                f"{a} * {b} = {a * b} square metres are left out: {s.value} - {a * b} = {s.value - a * b}.",
                s.value - a * b)


def floor_copies(rng: random.Random, s: Story) -> Step | None:
    if s.ctx["copies"] or s.value > 400:
        return None
    s.ctx["copies"] = True
    k, room = rng.randint(2, 5), s.ctx["room"]
    return Step(f"The building has {k} {room}s laid out exactly like this one, and all of them get the new floor.",
                f"{k} identical {room}s: {s.value} * {k} = {s.value * k} square metres.", s.value * k)


def floor_cost(rng: random.Random, s: Story) -> Step | None:
    c = rng.choice([8, 12, 15, 20, 25, 30, 40])
    return Step(f"The flooring costs ${c} per square metre.",
                f"{s.value} * {c} = {s.value * c} dollars.", s.value * c,
                "How many dollars does the flooring cost?")


def floor_boxes(rng: random.Random, s: Story) -> Step | None:
    c = rng.choice([2, 3, 4, 5])
    if c >= s.value:
        return None
    line, n = ceil_line(s.value, c, "square metres", "box", "boxes")
    return Step(f"One box of tiles covers {c} square metres.", line, n, "How many boxes of tiles are needed?")


# --- putting problems together --------------------------------------------------------------


@dataclass(frozen=True)
class Topic:
    start: Callable[[random.Random], Story]
    steps: tuple[StepFn, ...]
    finals: tuple[StepFn, ...]


TOPICS: dict[str, Topic] = {
    "shop": Topic(shop_start, (shop_delivery, shop_sell, shop_order, shop_branch, shop_double),
                  (shop_boxes, shop_takings)),
    "train": Topic(train_start, (train_leg, train_minutes, train_back), (train_remaining, train_arrival)),
    "recipe": Topic(recipe_start, (recipe_more, recipe_cancel, recipe_double, recipe_spill),
                    (recipe_pantry, recipe_packs)),
    "savings": Topic(savings_start, (savings_weekly, savings_lawns, savings_spend, savings_gift, savings_give,
                                     savings_bonus), (savings_gap, savings_weeks)),
    "floor": Topic(floor_start, (floor_extension, floor_obstacle, floor_copies), (floor_cost, floor_boxes)),
}


def make_problem(rng: random.Random, difficulty: int) -> tuple[str, int, str]:
    """One problem with ``difficulty`` solution steps: (prompt, answer, solution)."""
    while True:
        topic = TOPICS[rng.choice(sorted(TOPICS))]
        story = topic.start(rng)
        previous: StepFn | None = None
        while len(story.lines) < difficulty:
            last = len(story.lines) == difficulty - 1
            # A final step is only ever the last one; it stands in for the default question.
            pool = [fn for fn in topic.steps if fn is not previous]  # no step twice in a row
            if last and rng.random() < 0.5:
                pool += topic.finals
            for fn in rng.sample(pool, len(pool)):
                step = fn(rng, story)
                if step is not None:
                    previous = fn
                    break
            else:
                break  # nothing fits this story any more: start another
            story.sentences.append(step.sentence)
            story.lines.append(step.line)
            story.value = step.value
            if step.question:
                story.question = step.question
        if len(story.lines) == difficulty and story.value >= 0:
            prompt = " ".join([*story.sentences, story.question])
            solution = "\n".join(f"Step {i}: {line}" for i, line in enumerate(story.lines, 1))
            return prompt, story.value, f"{solution}\nAnswer: {story.value}"


def make_split(split: str, n: int, seed: int, seen: set[str]) -> list[dict[str, object]]:
    """``n`` rows for ``split``, difficulties balanced, prompts not already in ``seen``."""
    # One generator per split (seeded from a string, which random hashes with SHA-512, so
    # it is stable across runs and platforms): resizing train leaves dev and test alone,
    # except where a dev or test prompt would repeat a train one and is drawn again.
    rng = random.Random(f"{seed}:{split}")
    difficulties = [DIFFICULTIES[i % len(DIFFICULTIES)] for i in range(n)]
    rng.shuffle(difficulties)
    rows = []
    for i, difficulty in enumerate(difficulties, 1):
        while True:
            prompt, answer, solution = make_problem(rng, difficulty)
            if prompt not in seen:
                break
        seen.add(prompt)
        rows.append({"id": f"arith-{split}-{i:05d}", "prompt": prompt, "answer": str(answer),
                     "difficulty": difficulty, "solution": solution})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="default: %(default)s")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "tasks",
                        help="directory for the JSONL files (default: tasks/ beside this script)")
    for split, n in DEFAULT_SIZES.items():
        parser.add_argument(f"--{split}", type=int, default=n, metavar="N", help=f"rows in {split} (default: %(default)s)")
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()  # no prompt appears twice, within or across splits
    for split in DEFAULT_SIZES:
        rows = make_split(split, getattr(args, split), args.seed, seen)
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
        path = args.out / f"{split}.jsonl"
        path.write_bytes(data)
        # In the form of envhub.toml's [tasks.splits.*], to paste there if the data changed.
        print(f"{split}: {path}\n  rows = {len(rows)}\n  sha256 = \"{hashlib.sha256(data).hexdigest()}\"")


if __name__ == "__main__":
    main()
