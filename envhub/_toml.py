"""TOML reading, with the standard library's tomllib.

:func:`loads` refuses, as a :class:`TOMLDecodeError` with a position, two documents the
parser itself cannot take: arrays and inline tables nested more than :data:`MAX_NESTING`
deep (the parser is recursive and would exhaust the interpreter's stack), and integers too
long for the interpreter to convert (TOML integers are 64-bit anyway).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["MAX_NESTING", "TOMLDecodeError", "find_pyproject", "load_file", "loads"]

TOMLDecodeError = tomllib.TOMLDecodeError

#: How deep arrays and inline tables may nest inside one another.
MAX_NESTING = 32

# Everything that can hide a bracket or a digit from the scan: strings of the four kinds
# and comments; then the brackets themselves and runs of digits. Anything else is skipped.
_TOKEN = re.compile(
    r'"""(?:[^"\\]|\\[\s\S]|"{1,2}(?!"))*"""{0,2}'
    r"|'''[\s\S]*?'''(?:'{1,2}(?!'))?"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'[^'\n]*'"
    r"|#[^\n]*"
    r"|(?P<open>[\[{])"
    r"|(?P<close>[\]}])"
    r"|(?P<digits>[0-9][0-9_]*)"
)


class _Refused(TOMLDecodeError):
    """A document this reader refuses, with the position of the offending token."""

    def __init__(self, msg: str, doc: str, pos: int) -> None:
        lineno = doc.count("\n", 0, pos) + 1
        colno = pos - doc.rfind("\n", 0, pos)
        ValueError.__init__(self, f"{msg} (at line {lineno}, column {colno})")
        self.msg, self.doc, self.pos, self.lineno, self.colno = msg, doc, pos, lineno, colno


def loads(text: str) -> dict[str, Any]:
    """Parse a TOML document. Raises :class:`TOMLDecodeError` for anything that is not
    TOML, and for nesting beyond :data:`MAX_NESTING` or integers of thousands of digits."""
    _check_nesting(text)
    try:
        return tomllib.loads(text)
    except TOMLDecodeError:
        raise
    except ValueError as e:
        # The interpreter's limit on converting long digit strings (sys.get_int_max_str_digits).
        limit = sys.get_int_max_str_digits()
        for match in _TOKEN.finditer(text):
            digits = match.group("digits")
            if digits and len(digits.replace("_", "")) > limit:
                raise _Refused(
                    f"an integer of {len(digits.replace('_', '')):,} digits; TOML integers are 64-bit",
                    text, match.start()) from e
        raise _Refused("a number too long to read; TOML integers are 64-bit", text, 0) from e


def _check_nesting(text: str) -> None:
    depth = 0
    for match in _TOKEN.finditer(text):
        if match.group("open"):
            depth += 1
            if depth > MAX_NESTING:
                raise _Refused(f"arrays and inline tables nested more than {MAX_NESTING} levels deep",
                               text, match.start())
        elif match.group("close"):
            depth = max(depth - 1, 0)


def load_file(path: Path) -> dict[str, Any]:
    """The TOML file at ``path`` as a table, or ``{}`` when there is no such file.
    :class:`envhub.errors.UsageError` naming the file if it is not TOML or not UTF-8."""
    from envhub.errors import UsageError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        return loads(text)
    except (TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: invalid TOML: {e}", hint="fix the file's syntax") from e


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` in ``start`` or a directory above it, or None."""
    for directory in [start, *start.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None
