"""Shared output helpers: data to stdout, messages to stderr, colour only on a terminal."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from envhub.errors import EnvhubError


def color_enabled(stream: Any) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("CI"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def error_text(e: Exception) -> str:
    """``envhub: error: <message>`` plus problems and hint lines, for stderr."""
    color = color_enabled(sys.stderr)
    label = click.style("error", fg="red", bold=True) if color else "error"
    if isinstance(e, EnvhubError):
        lines = [f"envhub: {label}: {e.message}"]
        lines.extend(p.render() for p in getattr(e, "problems", []))
        if e.hint:
            lines.append(f"  hint: {e.hint}")
        return "\n".join(lines)
    return f"envhub: {label}: {e}"


def message(text: str) -> None:
    """A message for the user (stderr)."""
    click.echo(text, err=True)


def emit_json(data: Any) -> None:
    """Data for programs (stdout)."""
    click.echo(json.dumps(data, indent=2, sort_keys=False))
