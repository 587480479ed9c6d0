"""Paths inside a bundle: resolving them without ever leaving the bundle directory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

#: The file listing (gitignore syntax) what a bundle directory holds but its archives leave out.
IGNORE_FILE = ".envhubignore"
_ALWAYS_IGNORED = ["*.pyc", ".DS_Store", IGNORE_FILE, "/dist/"]

#: Directories that are never part of a bundle.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".mypy_cache",
                          ".pytest_cache", ".ruff_cache", "node_modules", ".envhub"})


def resolve_inside(root: Path, relative: str) -> tuple[Path, str | None]:
    """Resolve ``relative`` under ``root``, following symlinks.

    Returns the resolved path and, if it is unusable, why: it does not exist, or a
    symlink on the way leads outside the bundle.
    """
    root = root.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        return target, f"symlink leaves the bundle (it resolves to {target})"
    if not target.exists():
        return target, "not found"
    return target, None


def escaping_symlinks(root: Path) -> Iterator[tuple[str, Path]]:
    """Every symlink under ``root`` whose target lies outside it (or dangles outside)."""
    real_root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS]
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(real_root):
                    yield path.relative_to(root).as_posix(), target


def heldout_seeds_bytes(split: str, seeds: list[int]) -> bytes:
    """The exact bytes of ``heldout-seeds/<split>.json`` (:func:`envhub.tasks.sealed_seeds_path`)
    for a split written in the old form, a public seed range: its digest is fixed by the split
    and the range."""
    start, stop = seeds
    return f'{{"split": "{split}", "seeds": [{start}, {stop}]}}\n'.encode()


def bundle_files(root: Path) -> list[str]:
    """The files of a bundle, relative POSIX paths, sorted: everything under ``root`` but
    version-control and cache directories, ``dist/``, and what ``.envhubignore`` names
    (gitignore syntax)."""
    import pathspec

    lines = list(_ALWAYS_IGNORED)
    ignore = root / IGNORE_FILE
    if ignore.is_file():
        lines.extend(ignore.read_text(encoding="utf-8").splitlines())
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and not spec.match_file(prefix + d + "/"))
        for name in filenames:
            rel = prefix + name
            if not spec.match_file(rel):
                out.append(rel)
    return sorted(out)
