"""``envhub init``: scaffold a bundle that validates as created.

The scaffold is a small but working environment for the chosen protocol and state kind:
a manifest with a fresh canary, a README, train/dev/test tasks (test held out), a system
prompt, and the code and state the protocol needs. Everything is written into a
temporary directory beside the target and renamed into place, so a failed ``init``
leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from envhub.canary import new_canary
from envhub.errors import UsageError
from envhub.ids import parse_name

__all__ = ["PROTOCOLS", "STATES", "create_bundle"]

Protocol = Literal["single-turn", "multi-turn", "tool-use"]
State = Literal["none", "files", "sqlite"]
PROTOCOLS: tuple[Protocol, ...] = ("single-turn", "multi-turn", "tool-use")
STATES: tuple[State, ...] = ("none", "files", "sqlite")

_WORKSPACE = {
    "inventory.csv": "item,quantity\nbolts,120\nnuts,0\nwashers,45\nscrews,0\nhinges,8\n",
    "notes/todo.txt": "order more nuts\norder more screws\ncheck the hinge supplier\n",
    "notes/suppliers.txt": "bolts: Northfield Hardware\nnuts: Ridge & Sons\nhinges: Ridge & Sons\n",
}
_PRODUCTS = [
    ("kettle", "kitchen", 24.50, 12), ("toaster", "kitchen", 31.00, 0), ("mug", "kitchen", 6.25, 140),
    ("desk lamp", "office", 18.90, 33), ("stapler", "office", 9.40, 0), ("notebook", "office", 3.10, 410),
    ("hammer", "tools", 14.00, 21), ("screwdriver set", "tools", 22.75, 9),
]


@dataclass
class _Bundle:
    tasks: dict[str, list[dict[str, object]]]
    verifier: str
    harness: str = ""
    state: str = ""
    files: dict[str, str] = field(default_factory=dict)
    system_prompt: str = ""
    summary: str = ""


def module_name(env_name: str) -> str:
    """The Python package name for an environment's code: ``acme/sql-shop`` -> ``sql_shop``."""
    module = re.sub(r"[^a-z0-9_]", "_", env_name.split("/")[1])
    return module if module[0].isalpha() else f"env_{module}"


def create_bundle(name: str, directory: str | Path, *, protocol: Protocol = "single-turn",
                  state: State = "none") -> Path:
    """Create a bundle for environment ``name`` in ``directory`` and return its path.

    Raises :class:`UsageError` if ``directory`` exists and is not empty, and
    :class:`envhub.errors.InvalidIdError` for a bad name; nothing is written then.
    """
    env = parse_name(name)
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r}", hint=f"use one of {', '.join(PROTOCOLS)}")
    if state not in STATES:
        raise UsageError(f"unknown state kind {state!r}", hint=f"use one of {', '.join(STATES)}")
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} already exists and is not empty",
                         hint="choose a new directory, or empty this one first")
    target.parent.mkdir(parents=True, exist_ok=True)
    module = module_name(str(env))
    bundle = _design(protocol, state, module)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        _write(staging, str(env), protocol, state, module, bundle)
        if target.exists():
            target.rmdir()
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _write(root: Path, name: str, protocol: str, state: str, module: str, b: _Bundle) -> None:
    (root / "tasks").mkdir()
    for split, rows in b.tasks.items():
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        (root / "tasks" / f"{split}.jsonl").write_text(text, encoding="utf-8")
    (root / "prompts").mkdir()
    (root / "prompts" / "system.md").write_text(b.system_prompt, encoding="utf-8")
    for rel, text in b.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if state == "files":
        for rel, text in _WORKSPACE.items():
            path = root / "state" / "workspace" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    elif state == "sqlite":
        (root / "state").mkdir()
        _write_shop_db(root / "state" / "shop.sqlite")
    (root / "envhub.toml").write_text(_manifest(name, protocol, state, b), encoding="utf-8")
    (root / "README.md").write_text(_readme(name, protocol, state, module, b), encoding="utf-8")


def _write_shop_db(path: Path) -> None:
    con = sqlite3.connect(path)
    try:
        con.execute("CREATE TABLE products (name TEXT PRIMARY KEY, category TEXT NOT NULL, "
                    "price REAL NOT NULL, stock INTEGER NOT NULL)")
        con.executemany("INSERT INTO products VALUES (?, ?, ?, ?)", _PRODUCTS)
        con.commit()
    finally:
        con.close()


def _split(rows: list[tuple[str, str]], prefix: str) -> dict[str, list[dict[str, object]]]:
    """Deal (prompt, answer) pairs into train/dev/test: every fifth to dev or test."""
    out: dict[str, list[dict[str, object]]] = {"train": [], "dev": [], "test": []}
    for i, (prompt, answer) in enumerate(rows):
        split = "dev" if i % 5 == 3 else "test" if i % 5 == 4 else "train"
        out[split].append({"id": f"{prefix}-{split}-{len(out[split]) + 1:03d}", "prompt": prompt, "answer": answer})
    return out


def _design(protocol: str, state: str, module: str) -> _Bundle:
    if protocol == "multi-turn":
        return _guessing_game(module)
    if protocol == "tool-use":
        if state == "files":
            return _workspace_tools(module)
        if state == "sqlite":
            return _shop_tools(module)
        return _calculator_tools(module)
    return _arithmetic()


def _arithmetic() -> _Bundle:
    problems = []
    for i, (a, b, c) in enumerate([(12, 7, 3), (25, 4, 9), (18, 6, 5), (40, 3, 12), (15, 8, 6),
                                   (9, 11, 4), (32, 5, 7), (21, 9, 8), (14, 13, 2), (50, 6, 15)]):
        if i % 2:
            problems.append((f"A shelf holds {a} boxes of {b} pencils each. {c} boxes are sold. "
                             "How many pencils are left on the shelf?", str((a - c) * b)))
        else:
            problems.append((f"A bakery bakes {a} trays of {b} rolls, then bakes {c} more rolls. "
                             "How many rolls did it bake in all?", str(a * b + c)))
    return _Bundle(
        tasks=_split(problems, "arith"),
        verifier='kind = "numeric"\nfield = "answer"\n',
        system_prompt="Solve the problem. Think step by step, then give the final answer as \\boxed{N}.\n",
        summary="arithmetic word problems answered in one turn, scored by the numeric verifier",
    )


def _guessing_game(module: str) -> _Bundle:
    secrets_ = [37, 82, 5, 64, 19, 91, 46, 73, 28, 55]
    rows = [("I am thinking of a whole number from 1 to 100. Guess it: reply with just the number. "
             "After each guess I will say 'higher' or 'lower'.", str(n)) for n in secrets_]
    game = '''"""The environment's side of the guessing game: it answers each guess."""

from __future__ import annotations


def respond(task: dict, messages: list[dict]) -> str | None:
    """Reply to the model's last message, or return None to end the episode.

    ``task`` is the task row; ``messages`` is the conversation so far in chat format,
    ending with the model's latest reply.
    """
    secret = int(task["answer"])
    guess = messages[-1]["content"].strip()
    if not guess.lstrip("-").isdigit():
        return "Please reply with just a whole number."
    if int(guess) == secret:
        return None
    return "higher" if int(guess) < secret else "lower"
'''
    return _Bundle(
        tasks=_split(rows, "guess"),
        verifier='kind = "exact-match"\nfield = "answer"\n',
        harness=f'responder = "{module}.game:respond"\nmax-turns = 8\n',
        files={f"{module}/__init__.py": "", f"{module}/game.py": game},
        system_prompt="You are playing a guessing game. Reply with a single whole number each turn.\n",
        summary="a number-guessing game: the environment answers each guess with 'higher' or 'lower'",
    )


_TOOLS_HEADER = '''"""Tools the model can call. Each is a plain function: its type hints and docstring
become the tool's JSON schema. The parameter annotated ``State[...]``, if there is one,
receives the episode's state and is not shown to the model."""

from __future__ import annotations
'''


def _calculator_tools(module: str) -> _Bundle:
    pairs = [(1234, 5678), (987, 654), (4321, 1234), (2468, 1357), (999, 999),
             (3141, 2718), (1111, 8888), (7654, 321), (5050, 4040), (6006, 7007)]
    rows = [(f"What is {a} multiplied by {b}? Use the calculator tool.", str(a * b)) for a, b in pairs]
    tools = _TOOLS_HEADER + '''
import ast
import operator

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.USub: operator.neg}


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / and parentheses.

    Args:
        expression: for example "12 * (3 + 4)".
    """

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError("only numbers and + - * / are allowed")

    value = ev(ast.parse(expression, mode="eval").body)
    return str(int(value)) if float(value).is_integer() else str(value)
'''
    return _Bundle(
        tasks=_split(rows, "calc"),
        verifier='kind = "numeric"\nfield = "answer"\n',
        harness=f'max-turns = 6\ntools = ["{module}.tools:calculate"]\n',
        files={f"{module}/__init__.py": "", f"{module}/tools.py": tools},
        system_prompt="Use the calculator tool for arithmetic. Give the final answer as \\boxed{N}.\n",
        summary="multiplications solved with a calculator tool",
    )


def _workspace_tools(module: str) -> _Bundle:
    inventory = [line.split(",") for line in _WORKSPACE["inventory.csv"].splitlines()[1:]]
    todo = _WORKSPACE["notes/todo.txt"].splitlines()
    ridge = [line for line in _WORKSPACE["notes/suppliers.txt"].splitlines() if "Ridge & Sons" in line]
    rows = [
        ("How many items in inventory.csv have a quantity of 0?", str(sum(q == "0" for _, q in inventory))),
        ("How many lines does notes/todo.txt have?", str(len(todo))),
        ("What is the total quantity of all items in inventory.csv?", str(sum(int(q) for _, q in inventory))),
        ("How many items does Ridge & Sons supply, according to notes/suppliers.txt?", str(len(ridge))),
        ("How many files are in the workspace, counting those in folders?", str(len(_WORKSPACE))),
        ("What is the quantity of washers in inventory.csv?", "45"),
        ("How many items in inventory.csv have a quantity above 10?", str(sum(int(q) > 10 for _, q in inventory))),
        ("How many different items are listed in inventory.csv?", str(len(inventory))),
        ("How many suppliers are named in notes/suppliers.txt?", "2"),
        ("What is the quantity of bolts in inventory.csv?", "120"),
    ]
    tools = _TOOLS_HEADER + '''
from pathlib import Path

from envhub.runtime import State


def list_files(*, state: State[Path]) -> str:
    """List every file in the workspace, one path per line."""
    return "\\n".join(sorted(p.relative_to(state).as_posix() for p in state.rglob("*") if p.is_file()))


def read_file(path: str, *, state: State[Path]) -> str:
    """Read a text file of the workspace.

    Args:
        path: the file's path relative to the workspace, e.g. "notes/todo.txt".
    """
    target = (state / path).resolve()
    if not target.is_relative_to(state.resolve()) or not target.is_file():
        raise FileNotFoundError(f"no file {path!r} in the workspace")
    return target.read_text(encoding="utf-8")
'''
    return _Bundle(
        tasks=_split(rows, "files"),
        verifier='kind = "numeric"\nfield = "answer"\n',
        harness=f'max-turns = 10\ntools = ["{module}.tools:list_files", "{module}.tools:read_file"]\n',
        state='kind = "files"\nsnapshot = "state/workspace"\nreset = "per-episode"\n',
        files={f"{module}/__init__.py": "", f"{module}/tools.py": tools},
        system_prompt="Answer questions about the files in your workspace. Use the tools to look. "
                      "Give the final answer as \\boxed{N}.\n",
        summary="questions about a small files workspace, answered with list_files and read_file",
    )


def _shop_tools(module: str) -> _Bundle:
    def count(pred) -> str:  # type: ignore[no-untyped-def]
        return str(sum(1 for p in _PRODUCTS if pred(p)))

    rows = [
        ("How many products are out of stock?", count(lambda p: p[3] == 0)),
        ("How many products are in the kitchen category?", count(lambda p: p[1] == "kitchen")),
        ("How many products cost more than 15?", count(lambda p: p[2] > 15)),
        ("How many units of notebook are in stock?", "410"),
        ("How many categories of products does the shop have?", str(len({p[1] for p in _PRODUCTS}))),
        ("How many products in the office category are in stock?", count(lambda p: p[1] == "office" and p[3] > 0)),
        ("How many units are in stock across all products?", str(sum(p[3] for p in _PRODUCTS))),
        ("How many products cost less than 10?", count(lambda p: p[2] < 10)),
        ("How many tools-category products have at least 10 units in stock?",
         count(lambda p: p[1] == "tools" and p[3] >= 10)),
        ("How many products does the shop sell in all?", str(len(_PRODUCTS))),
    ]
    tools = _TOOLS_HEADER + '''
import sqlite3

from envhub.runtime import State


def list_tables(*, state: State[sqlite3.Connection]) -> str:
    """List the database's tables with their columns."""
    out = []
    for (table,) in state.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        columns = [row[1] for row in state.execute(f"PRAGMA table_info({table})")]
        out.append(f"{table}({', '.join(columns)})")
    return "\\n".join(out)


def run_sql(query: str, *, state: State[sqlite3.Connection]) -> str:
    """Run one read-only SQL query and return up to 50 rows as tab-separated lines.

    Args:
        query: a SELECT statement, e.g. "SELECT name FROM products WHERE stock = 0".
    """
    if not query.lstrip().lower().startswith(("select", "with")):
        raise ValueError("only SELECT queries are allowed")
    rows = state.execute(query).fetchmany(50)
    return "\\n".join("\\t".join(str(v) for v in row) for row in rows) or "(no rows)"
'''
    return _Bundle(
        tasks=_split(rows, "shop"),
        verifier='kind = "numeric"\nfield = "answer"\n',
        harness=f'max-turns = 10\ntools = ["{module}.tools:list_tables", "{module}.tools:run_sql"]\n',
        state='kind = "sqlite"\nsnapshot = "state/shop.sqlite"\nreset = "per-episode"\n',
        files={f"{module}/__init__.py": "", f"{module}/tools.py": tools},
        system_prompt="Answer questions about the shop by querying its SQLite database with the tools. "
                      "Give the final answer as \\boxed{N}.\n",
        summary="questions about a shop's SQLite database, answered with list_tables and run_sql",
    )


def _manifest(name: str, protocol: str, state: str, b: _Bundle) -> str:
    state_table = b.state
    if not state_table and state == "files":
        state_table = 'kind = "files"\nsnapshot = "state/workspace"\nreset = "per-episode"\n'
    elif not state_table and state == "sqlite":
        state_table = 'kind = "sqlite"\nsnapshot = "state/shop.sqlite"\nreset = "per-episode"\n'
    elif not state_table:
        state_table = 'kind = "none"\n'
    description = b.summary[0].upper() + b.summary[1:] + "."
    return f'''# envhub manifest: see spec/manifest.md in the envhub repository for every field.
[environment]
name = "{name}"
version = "0.1.0"
score-version = 1  # bump when rewards stop being comparable with earlier versions
description = {json.dumps(description)}
license = "Apache-2.0"
authors = []
tags = ["{protocol}"]
canary = "{new_canary()}"  # do not change: it marks this environment's tasks

[tasks]
format = "jsonl"
id-field = "id"
prompt-field = "prompt"
splits.train = {{ path = "tasks/train.jsonl" }}
splits.dev = {{ path = "tasks/dev.jsonl" }}
splits.test = {{ path = "tasks/test.jsonl", held-out = true }}  # never published in the clear

[harness]
protocol = "{protocol}"
system-prompt = "prompts/system.md"
{b.harness}
[verifier]
{b.verifier}
[state]
{state_table}
[config]
timeout-s = 60
'''


def _readme(name: str, protocol: str, state: str, module: str, b: _Bundle) -> str:
    code = (f"- `{module}/`: the environment's code, named in `envhub.toml`; it runs only when "
            "the user trusts the bundle.\n") if b.files else ""
    snapshot = {"files": "- `state/workspace/`: the files each episode starts from (copied per episode).\n",
                "sqlite": "- `state/shop.sqlite`: the database each episode starts from (copied per episode).\n",
                }.get(state, "")
    return f"""# {name}

{b.summary[0].upper() + b.summary[1:]}.

- protocol: `{protocol}`; state: `{state}`
- `envhub.toml`: the manifest (tasks, harness, verifier, state, config).
- `tasks/train.jsonl`, `tasks/dev.jsonl`: public splits.
- `tasks/test.jsonl`: the held-out split. It is published only to the held-out store,
  never in the public bundle.
- `prompts/system.md`: the system prompt.
{code}{snapshot}
Each task row has an `id` (unique across splits), a `prompt` and the reference `answer`.

## Working on it

```
envhub validate .          # check the manifest and every task file
envhub validate --strict . # and fail on warnings too
```

Replace the example tasks with your own, keep ids unique, and bump `version` before
publishing a change. Keep the `canary` line: it lets people detect your tasks in training data.
"""
