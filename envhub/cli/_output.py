"""Shared output helpers: data to stdout, messages to stderr, colour only on a terminal.

Text printed for a person passes through :func:`printable` first: a manifest, a registry
entry or a request path may carry terminal escape sequences (a window title, a clipboard
write), bidirectional overrides that make text read other than it is, or a carriage return
that prints over what came before. JSON output needs none of this: JSON escapes every
control character itself.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from envhub.errors import EnvhubError

__all__ = ["color_enabled", "echo", "emit_json", "error_text", "message", "printable"]


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: Characters a terminal acts on instead of showing: C0 controls but newline and tab, DEL,
#: C1 controls (0x9b is a one-byte CSI), bidirectional embeddings, overrides, isolates and
#: marks, and the Unicode line and paragraph separators. Each becomes its visible escape.
_UNPRINTABLE = {code: _escape(code) for code in (
    *(c for c in range(0x20) if c not in (0x09, 0x0A)), 0x7F, *range(0x80, 0xA0),
    0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)}


def printable(text: str) -> str:
    r"""``text`` with every character a terminal would act on shown as an escape instead.

    Newlines and tabs stay; so do colours this process adds afterwards.

    >>> print(printable("title\x1b]0;pwned\x07 \u202egnp.exe\rok"))
    title\x1b]0;pwned\x07 \u202egnp.exe\x0dok
    >>> print(printable("two\nlines"))
    two
    lines
    """
    return text.translate(_UNPRINTABLE)


def echo(text: str, *, err: bool = False) -> None:
    """Print a line for a person: stdout, or stderr with ``err``; :func:`printable` first."""
    click.echo(printable(text), err=err)


def color_enabled(stream: Any) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("CI"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def error_text(e: Exception) -> str:
    """``envhub: error: <message>`` plus problems and hint lines, for stderr."""
    color = color_enabled(sys.stderr)
    label = click.style("error", fg="red", bold=True) if color else "error"
    if isinstance(e, EnvhubError):
        lines = [f"envhub: {label}: {printable(e.message)}"]
        lines.extend(printable(p.render()) for p in getattr(e, "problems", []))
        if e.hint:
            lines.append(f"  hint: {printable(e.hint)}")
        return "\n".join(lines)
    return f"envhub: {label}: {printable(str(e))}"


def message(text: str) -> None:
    """A message for the user (stderr), :func:`printable`."""
    click.echo(printable(text), err=True)


def emit_json(data: Any) -> None:
    """Data for programs (stdout)."""
    click.echo(json.dumps(data, indent=2, sort_keys=False))
