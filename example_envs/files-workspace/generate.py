#!/usr/bin/env python3
"""Generate the tasks of ``envhub-examples/files-workspace``.

    python generate.py                  # rewrite tasks/{train,dev,test}.jsonl
    python generate.py --seed 7 --out /tmp/tasks

Standard library only, and deterministic: the same seed and workspace always write the
same bytes, so the ``rows`` and ``sha256`` recorded in ``envhub.toml`` can be checked by
``envhub validate`` after regenerating.

Every task works on the same workspace, ``state/workspace/`` (a bookshop's shared folder,
written by hand). Each *kind* of task below is a template with a handful of variants: it
writes the prompt, computes what the changed files must hold from the workspace's actual
contents (``expect``, which the verifier checks), and writes the reference: the tool calls
that do the job, then a short summary. A seeded generator deals the tasks of each
difficulty into test, dev and train, the same number of each difficulty every time.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

DEFAULT_SEED = 20240613
#: How many tasks of each difficulty go to test and to dev; train gets the rest.
DEAL = {"test": {1: 5, 2: 5, 3: 2}, "dev": {1: 5, 2: 5, 3: 2}}
WORKSPACE = Path(__file__).parent / "state" / "workspace"


def read(path: str) -> str:
    return (WORKSPACE / path).read_text(encoding="utf-8")


def stock() -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(read("data/stock.csv"))))


@dataclass
class Task:
    """One task: what the model is asked, what the files must become, and how to do it."""

    kind: str
    difficulty: int  # 1: one edit to one file; 2: two files, or a rule to apply with care; 3: compute from data
    prompt: str
    expect: dict[str, dict[str, Any]]
    turns: list[dict[str, Any]] = field(default_factory=list)

    def call(self, *calls: tuple[str, dict[str, Any]]) -> Task:
        """Add an assistant turn making these tool calls (ids numbered through the task)."""
        first = sum(len(t.get("tool_calls", [])) for t in self.turns) + 1
        self.turns.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{first + i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(calls)]})
        return self

    def say(self, text: str) -> Task:
        """End with an assistant turn without tool calls, which ends the episode."""
        self.turns.append({"role": "assistant", "content": text})
        return self


def text(content: str) -> dict[str, Any]:
    return {"text": content}


ABSENT = {"absent": True}


def lines(items: list[str]) -> str:
    return "".join(item + "\n" for item in items)


# --- config/app.ini -------------------------------------------------------------------------


def ini_set(content: str, section: str, key: str, value: str) -> str:
    """``content`` with ``key`` of ``[section]`` set to ``value``; the rest unchanged."""
    out, current, found = [], None, False
    for line in content.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[]")
        elif current == section and stripped.split("=")[0].strip() == key:
            line, found = f"{key} = {value}\n", True
        out.append(line)
    assert found, (section, key)
    return "".join(out)


def ini_add(content: str, section: str, key: str, value: str) -> str:
    """``content`` with ``key = value`` added after the last setting of ``[section]``."""
    rows = content.splitlines(keepends=True)
    start = rows.index(f"[{section}]\n")
    end = start + 1
    while end < len(rows) and rows[end].strip() and not rows[end].startswith("["):
        end += 1
    return "".join(rows[:end] + [f"{key} = {value}\n"] + rows[end:])


def change_ini() -> Iterator[Task]:
    for section, key, value in [("server", "port", "8081"), ("server", "workers", "8"), ("server", "debug", "true"),
                                ("database", "timeout_seconds", "60"), ("database", "backup_hour", "4"),
                                ("mail", "smtp_port", "465"), ("mail", "smtp_host", "mail.lantern-books.example"),
                                ("shop", "free_shipping_over", "50"), ("shop", "opening_hours", "09:30-18:30"),
                                ("shop", "currency", "GBP")]:
        new = ini_set(read("config/app.ini"), section, key, value)
        yield (Task("change-ini", 1, f"In config/app.ini, change `{key}` in the [{section}] section to `{value}`. "
                                     "Change nothing else.", {"config/app.ini": text(new)})
               .call(("read_file", {"path": "config/app.ini"}))
               .call(("write_file", {"path": "config/app.ini", "content": new}))
               .say(f"Set {key} in [{section}] of config/app.ini to {value}."))


def add_ini_setting() -> Iterator[Task]:
    for section, key, value in [("mail", "use_tls", "true"), ("shop", "min_order", "5"),
                                ("database", "pool_size", "5"), ("server", "timeout_seconds", "20")]:
        new = ini_add(read("config/app.ini"), section, key, value)
        yield (Task("add-ini-setting", 2, f"Add the setting `{key} = {value}` to the [{section}] section of "
                                          "config/app.ini, after the section's last setting.",
                    {"config/app.ini": text(new)})
               .call(("read_file", {"path": "config/app.ini"}))
               .call(("write_file", {"path": "config/app.ini", "content": new}))
               .say(f"Added {key} = {value} to [{section}] in config/app.ini."))


# --- config/settings.json -------------------------------------------------------------------


def change_json() -> Iterator[Task]:
    for dotted, value in [("theme", "dark"), ("language", "fr"), ("font_size", 16), ("notifications.sms", True),
                          ("notifications.daily_summary", False), ("max_upload_mb", 25), ("staff_can_refund", True)]:
        settings = json.loads(read("config/settings.json"))
        *parents, last = dotted.split(".")
        target = settings
        for key in parents:
            target = target[key]
        target[last] = value
        new = json.dumps(settings, indent=2) + "\n"
        yield (Task("change-json", 1, f"In config/settings.json, set `{dotted}` to {json.dumps(value)}. "
                                      "Keep every other setting as it is.", {"config/settings.json": {"json": settings}})
               .call(("read_file", {"path": "config/settings.json"}))
               .call(("write_file", {"path": "config/settings.json", "content": new}))
               .say(f"Set {dotted} to {json.dumps(value)} in config/settings.json."))


# --- notes ----------------------------------------------------------------------------------


def append_todo() -> Iterator[Task]:
    for item in ["order bookmarks for the reading evening", "call the plumber about the back room",
                 "update the staff rota for June", "reply to the school about the book fair"]:
        new = read("notes/todo.txt") + item + "\n"
        yield (Task("append-todo", 1, f"Add this item as the last line of notes/todo.txt: {item}",
                    {"notes/todo.txt": text(new)})
               .call(("read_file", {"path": "notes/todo.txt"}))
               .call(("write_file", {"path": "notes/todo.txt", "content": new}))
               .say(f"Added '{item}' to notes/todo.txt."))


def finish_todo() -> Iterator[Task]:
    todo, done = read("notes/todo.txt"), read("notes/done.txt")
    for item in todo.splitlines():
        new_todo = lines([line for line in todo.splitlines() if line != item])
        new_done = done + item + "\n"
        yield (Task("finish-todo", 2, f"This is done: {item}. Remove it from notes/todo.txt and add it as the "
                                      "last line of notes/done.txt.",
                    {"notes/todo.txt": text(new_todo), "notes/done.txt": text(new_done)})
               .call(("read_file", {"path": "notes/todo.txt"}), ("read_file", {"path": "notes/done.txt"}))
               .call(("write_file", {"path": "notes/todo.txt", "content": new_todo}),
                     ("write_file", {"path": "notes/done.txt", "content": new_done}))
               .say(f"Moved '{item}' from notes/todo.txt to notes/done.txt."))


def move_files() -> Iterator[Task]:
    for source, destination, verb in [("notes/ideas.txt", "archive/ideas.txt", "Move"),
                                      ("notes/2024-05-02-meeting.md", "archive/2024-05-02-meeting.md", "Move"),
                                      ("drafts/newsletter.md", "published/newsletter-may.md", "Move"),
                                      ("logs/deploy.log", "logs/deploy-2024-05-10.log", "Rename"),
                                      ("notes/done.txt", "notes/done-2024.txt", "Rename")]:
        yield (Task("move-file", 1, f"{verb} {source} to {destination}.",
                    {source: ABSENT, destination: text(read(source))})
               .call(("move_file", {"source": source, "destination": destination}))
               .say(f"Moved {source} to {destination}."))


def merge_notes() -> Iterator[Task]:
    first, second = read("notes/2024-05-02-meeting.md"), read("notes/2024-05-09-meeting.md")
    merged = first.rstrip("\n") + "\n\n" + second
    yield (Task("merge-notes", 2, "Merge the two meeting notes in notes/ into one file, notes/meetings-2024-05.md: "
                                  "the notes of 2 May, one blank line, then the notes of 9 May. Then delete the "
                                  "two original files.",
                {"notes/meetings-2024-05.md": text(merged), "notes/2024-05-02-meeting.md": ABSENT,
                 "notes/2024-05-09-meeting.md": ABSENT})
           .call(("list_files", {"directory": "notes"}))
           .call(("read_file", {"path": "notes/2024-05-02-meeting.md"}),
                 ("read_file", {"path": "notes/2024-05-09-meeting.md"}))
           .call(("write_file", {"path": "notes/meetings-2024-05.md", "content": merged}))
           .call(("delete_file", {"path": "notes/2024-05-02-meeting.md"}),
                 ("delete_file", {"path": "notes/2024-05-09-meeting.md"}))
           .say("Merged both meeting notes into notes/meetings-2024-05.md and deleted the originals."))
    todo = read("notes/todo.txt") + read("notes/ideas.txt")
    yield (Task("merge-notes", 2, "Move every line of notes/ideas.txt to the end of notes/todo.txt, in the same "
                                  "order, then delete notes/ideas.txt.",
                {"notes/todo.txt": text(todo), "notes/ideas.txt": ABSENT})
           .call(("read_file", {"path": "notes/todo.txt"}), ("read_file", {"path": "notes/ideas.txt"}))
           .call(("write_file", {"path": "notes/todo.txt", "content": todo}))
           .call(("delete_file", {"path": "notes/ideas.txt"}))
           .say("Appended the ideas to notes/todo.txt and deleted notes/ideas.txt."))
    old = ["notes/2024-05-02-meeting.md", "notes/2024-05-09-meeting.md"]
    yield (Task("clean-up", 2, "Delete every file in notes/ whose name starts with 2024-05.",
                {path: ABSENT for path in old})
           .call(("list_files", {"directory": "notes"}))
           .call(*[("delete_file", {"path": path}) for path in old])
           .say(f"Deleted {old[0]} and {old[1]}."))


def replace_text() -> Iterator[Task]:
    for old, new in [("Lantern Books", "Lantern Books & Café"), ("Saturday", "Sunday"),
                     ("10:00 to 18:00", "9:30 to 18:30")]:
        content = read("drafts/newsletter.md").replace(old, new)
        count = read("drafts/newsletter.md").count(old)
        yield (Task("replace-text", 2, f"In drafts/newsletter.md, replace every occurrence of \"{old}\" with "
                                       f"\"{new}\".", {"drafts/newsletter.md": text(content)})
               .call(("read_file", {"path": "drafts/newsletter.md"}))
               .call(("write_file", {"path": "drafts/newsletter.md", "content": content}))
               .say(f"Replaced {count} occurrence{'s' if count > 1 else ''} of \"{old}\" in drafts/newsletter.md."))


# --- reports from the data ------------------------------------------------------------------


def restock_list() -> Iterator[Task]:
    for below in [3, 5, 8]:
        titles = [row["title"] for row in stock() if int(row["quantity"]) < below]
        yield (Task("report", 2, f"Write reports/restock.txt listing the title of every book in data/stock.csv "
                                 f"with a quantity below {below}: one title per line, in the order of stock.csv.",
                    {"reports/restock.txt": text(lines(titles))})
               .call(("read_file", {"path": "data/stock.csv"}))
               .call(("write_file", {"path": "reports/restock.txt", "content": lines(titles)}))
               .say(f"Wrote {len(titles)} titles to reports/restock.txt."))


def category_value() -> Iterator[Task]:
    for category in ["travel", "fiction", "nature", "children"]:
        # Decimal: 4 * 18.50 + ... must not come out as 183.23000000000002.
        total = sum(int(r["quantity"]) * Decimal(r["price"]) for r in stock() if r["category"] == category)
        value = f"{total:.2f}"
        yield (Task("report", 3, f"Write reports/{category}-value.txt holding only the total value of the "
                                 f"{category} books in data/stock.csv (quantity times price, added up), written "
                                 "with two decimals, like 123.40.",
                    {f"reports/{category}-value.txt": text(value + "\n")})
               .call(("read_file", {"path": "data/stock.csv"}))
               .call(("write_file", {"path": f"reports/{category}-value.txt", "content": value + "\n"}))
               .say(f"The {category} books are worth {value}; written to reports/{category}-value.txt."))


def stock_json() -> Iterator[Task]:
    totals: dict[str, int] = {}
    for row in stock():
        totals[row["category"]] = totals.get(row["category"], 0) + int(row["quantity"])
    content = json.dumps(totals, indent=2) + "\n"
    yield (Task("report", 3, "Write reports/stock-by-category.json: a JSON object mapping each category in "
                             "data/stock.csv to the total quantity of its books.",
                {"reports/stock-by-category.json": {"json": totals}})
           .call(("read_file", {"path": "data/stock.csv"}))
           .call(("write_file", {"path": "reports/stock-by-category.json", "content": content}))
           .say("Wrote the quantity per category to reports/stock-by-category.json."))
    sold_out = [row["title"] for row in stock() if row["quantity"] == "0"]
    yield (Task("report", 3, "Write reports/sold-out.json: a JSON list of the titles in data/stock.csv whose "
                             "quantity is 0, in the order of stock.csv.",
                {"reports/sold-out.json": {"json": sold_out}})
           .call(("read_file", {"path": "data/stock.csv"}))
           .call(("write_file", {"path": "reports/sold-out.json", "content": json.dumps(sold_out) + "\n"}))
           .say(f"{len(sold_out)} titles are sold out; listed in reports/sold-out.json."))


def log_lines() -> Iterator[Task]:
    for level, path in [("ERROR", "reports/errors.log"), ("WARN", "reports/warnings.log")]:
        found = [line for line in read("logs/deploy.log").splitlines() if f" {level} " in line]
        yield (Task("report", 2, f"Copy every line of logs/deploy.log with the level {level} into a new file, "
                                 f"{path}, in the same order.", {path: text(lines(found))})
               .call(("read_file", {"path": "logs/deploy.log"}))
               .call(("write_file", {"path": path, "content": lines(found)}))
               .say(f"Copied {len(found)} {level} lines to {path}."))


def team_emails() -> Iterator[Task]:
    contacts = list(csv.DictReader(io.StringIO(read("data/contacts.csv"))))
    for team in ["shop", "web", "accounts"]:
        emails = sorted(c["email"] for c in contacts if c["team"] == team)
        yield (Task("report", 2, f"Write reports/{team}-team.txt with the email address of everyone in the {team} "
                                 "team, from data/contacts.csv: one per line, in alphabetical order.",
                    {f"reports/{team}-team.txt": text(lines(emails))})
               .call(("read_file", {"path": "data/contacts.csv"}))
               .call(("write_file", {"path": f"reports/{team}-team.txt", "content": lines(emails)}))
               .say(f"Wrote the {len(emails)} addresses of the {team} team to reports/{team}-team.txt."))


# --- data/stock.csv -------------------------------------------------------------------------


def edit_stock() -> Iterator[Task]:
    original = read("data/stock.csv")
    rows = original.splitlines()
    for title, quantity in [("The Quiet Engine", 6), ("Moonlight Bakery", 10), ("Letters from Lisbon", 5)]:
        new = lines([f"{title},{r.split(',')[1]},{quantity},{r.split(',')[3]}" if r.startswith(title + ",") else r
                     for r in rows])
        yield (Task("edit-stock", 2, f"A delivery has come in: set the quantity of {title} in data/stock.csv "
                                     f"to {quantity}.", {"data/stock.csv": text(new)})
               .call(("read_file", {"path": "data/stock.csv"}))
               .call(("write_file", {"path": "data/stock.csv", "content": new}))
               .say(f"{title} now has quantity {quantity} in data/stock.csv."))
    for title, category, quantity, price in [("Paper Boats", "children", 6, "7.25"),
                                             ("The Long Meadow", "nature", 3, "22.50")]:
        new = original + f"{title},{category},{quantity},{price}\n"
        yield (Task("edit-stock", 2, f"Add a new book as the last row of data/stock.csv: {title}, category "
                                     f"{category}, quantity {quantity}, price {price}.", {"data/stock.csv": text(new)})
               .call(("read_file", {"path": "data/stock.csv"}))
               .call(("write_file", {"path": "data/stock.csv", "content": new}))
               .say(f"Added {title} to data/stock.csv."))
    new = lines([r for r in rows if r.split(",")[2] != "0"])
    yield (Task("edit-stock", 3, "Remove every sold-out book (quantity 0) from data/stock.csv, keeping the header "
                                 "and the other rows as they are.", {"data/stock.csv": text(new)})
           .call(("read_file", {"path": "data/stock.csv"}))
           .call(("write_file", {"path": "data/stock.csv", "content": new}))
           .say("Removed the sold-out books from data/stock.csv."))


TEMPLATES: list[Callable[[], Iterator[Task]]] = [
    change_ini, add_ini_setting, change_json, append_todo, finish_todo, move_files, merge_notes,
    replace_text, restock_list, category_value, stock_json, log_lines, team_emails, edit_stock,
]


def check(task: Task) -> None:
    """Every expected file differs from the snapshot, so doing nothing can never pass."""
    for path, spec in task.expect.items():
        source = WORKSPACE / path
        if spec.get("absent"):
            unchanged = not source.exists()
        elif not source.exists():
            unchanged = False
        elif "json" in spec:
            unchanged = json.loads(source.read_text(encoding="utf-8")) == spec["json"]
        else:
            unchanged = source.read_text(encoding="utf-8") == spec["text"]
        if unchanged:
            raise SystemExit(f"{task.kind}: {path} is already as expected: {task.prompt}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="default: %(default)s")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "tasks",
                        help="directory for the JSONL files (default: tasks/ beside this script)")
    args = parser.parse_args(argv)

    tasks = [task for template in TEMPLATES for task in template()]
    for task in tasks:
        check(task)
    prompts = [t.prompt for t in tasks]
    assert len(set(prompts)) == len(prompts), "two tasks have the same prompt"
    rng = random.Random(f"{args.seed}:deal")  # a str seed hashes the same everywhere
    splits: dict[str, list[Task]] = {"train": [], "dev": [], "test": []}
    for difficulty in (1, 2, 3):
        pool = [t for t in tasks if t.difficulty == difficulty]
        rng.shuffle(pool)
        for split in ("test", "dev"):
            n = DEAL[split][difficulty]
            splits[split] += pool[:n]
            pool = pool[n:]
        splits["train"] += pool
    for chosen in splits.values():
        rng.shuffle(chosen)  # mix the difficulties within each split
    args.out.mkdir(parents=True, exist_ok=True)
    for split, chosen in splits.items():
        rows = [{"id": f"files-{split}-{i:03d}", "prompt": t.prompt, "kind": t.kind, "difficulty": t.difficulty,
                 "expect": t.expect, "reference": t.turns} for i, t in enumerate(chosen, 1)]
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
        path = args.out / f"{split}.jsonl"
        path.write_bytes(data)
        # In the form of envhub.toml's [tasks.splits.*], to paste there if the data changed.
        print(f"{split}: {path}\n  rows = {len(rows)}\n  sha256 = \"{hashlib.sha256(data).hexdigest()}\"")


if __name__ == "__main__":
    main()
