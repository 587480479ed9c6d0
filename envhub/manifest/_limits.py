"""Size limits of a manifest (``spec/manifest.md``, section 2.1).

A manifest is a few kilobytes of settings; data belongs in the bundle's files. These
limits lie far above any real manifest and far below what would make reading one slow,
so a reader refuses an absurd manifest at once, before validating its fields.

>>> [p.message for p in limit_problems({"tags": ["x"] * 10_001}, file="envhub.toml")]
['the array has 10,001 elements; the limit is 10,000']
"""

from __future__ import annotations

from typing import Any

from envhub._toml import MAX_NESTING
from envhub.manifest._locate import locate
from envhub.manifest._problems import format_field
from envhub.problems import Problem

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "MAX_KEYS",
    "MAX_STRING",
    "limit_problems",
    "size_problem",
]

#: The manifest file, in bytes (1 MiB).
MAX_BYTES = 1_048_576
#: Tables and arrays nested in one another, counting from the top-level tables.
MAX_DEPTH = MAX_NESTING
#: Keys in all tables together (inline tables and tables in arrays included).
MAX_KEYS = 10_000
#: Elements of one array.
MAX_ELEMENTS = 10_000
#: Characters of one string, key or value.
MAX_STRING = 65_536
#: TOML integers are 64-bit signed.
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_HINT = "keep long text and data in files of the bundle (prompts, task files) and name them in the manifest"


def size_problem(size: int, *, file: str) -> Problem | None:
    """The problem with a manifest of ``size`` bytes, if it is over :data:`MAX_BYTES`."""
    if size <= MAX_BYTES:
        return None
    return Problem("error", "too-large", f"the manifest is {size:,} bytes; the limit is {MAX_BYTES:,} (1 MiB)",
                   file=file, hint=_HINT)


def limit_problems(data: dict[str, Any], *, file: str, text: str = "") -> list[Problem]:
    """Every place where parsed manifest ``data`` goes past a limit, in the order of the file.

    The walk is iterative, so data nested past any limit cannot exhaust the stack."""
    found: list[tuple[list[str | int], str, str]] = []  # (location, code, message)
    keys = 0
    stack: list[tuple[list[str | int], Any]] = [([], data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, (dict, list)) and len(loc) > MAX_DEPTH:
            found.append((loc, "too-deep", f"tables and arrays nested more than {MAX_DEPTH} levels deep"))
            continue
        if isinstance(value, dict):
            if keys <= MAX_KEYS and keys + len(value) > MAX_KEYS:
                found.append((loc, "too-many-keys", f"the manifest has more than {MAX_KEYS:,} keys"))
            keys += len(value)
            for key in value:
                if len(key) > MAX_STRING:
                    found.append((loc, "too-long", f"a key is {len(key):,} characters long; "
                                                   f"the limit is {MAX_STRING:,}"))
            stack.extend(([*loc, key], item) for key, item in reversed(value.items()) if len(key) <= MAX_STRING)
        elif isinstance(value, list):
            if len(value) > MAX_ELEMENTS:
                found.append((loc, "too-long", f"the array has {len(value):,} elements; "
                                               f"the limit is {MAX_ELEMENTS:,}"))
                continue
            stack.extend(([*loc, i], item) for i, item in reversed(list(enumerate(value))))
        elif isinstance(value, str) and len(value) > MAX_STRING:
            found.append((loc, "too-long", f"the string is {len(value):,} characters long; "
                                           f"the limit is {MAX_STRING:,}"))
        elif type(value) is int and not _INT_MIN <= value <= _INT_MAX:
            digits = len(str(abs(value)))
            shown = f"the integer {value}" if digits <= 40 else f"an integer of {digits:,} digits"
            found.append((loc, "out-of-range", f"{shown} is out of range: TOML integers are 64-bit, "
                                               "from -2**63 to 2**63 - 1"))
    problems = []
    for loc, code, message in found:
        position = locate(text, loc) if text else None
        problems.append(Problem("error", code, message, file=file, field=format_field(loc) or None,
                                line=position[0] if position else None,
                                column=position[1] if position else None,
                                hint=None if code == "out-of-range" else _HINT))
    problems.sort(key=lambda p: (p.line or 0, p.column or 0))
    return problems
