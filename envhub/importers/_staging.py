"""What every importer shares about where it writes: the checks of its arguments before it
reads anything, and writing the bundle in a staging directory beside ``out`` that becomes
``out`` only when complete, so nothing is half-written when an import fails."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from envhub.errors import UsageError

__all__ = ["check_destination", "write_staged"]

R = TypeVar("R")


def check_destination(split: str, out: Path) -> None:
    """Raise :class:`UsageError` for a ``split`` that is not a slug or an ``out`` that
    exists and is not an empty directory."""
    if not re.fullmatch(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?", split):
        raise UsageError(f"split name {split!r} is not a slug", hint="use lower-case letters, digits and '-'")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} already exists and is not empty", hint="choose a new directory, or empty this one")


def write_staged(out: Path, write: Callable[[Path], R]) -> R:
    """``write(staging)`` into a new directory beside ``out``, then that directory renamed
    to ``out`` (an empty ``out`` is replaced); on any failure the staging directory is
    removed and ``out`` is left as it was. Returns what ``write`` returns."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        result = write(staging)
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result
