"""Bundle archives as browsable trees of files in a Hub repo, and back.

A version's commit holds the archive's files (``.envhub/RECORD`` included) plus
``.envhub/version.json``, which says how to rebuild the exact archive: its digest, size, which
files are executable, and how many bytes of card the Hub's ``README.md`` carries in front of
the bundle's own README. A pull downloads the files, checks each against the RECORD,
rebuilds the archive (archives are deterministic) and checks its digest: the same bytes as
any other registry, verified the same way.
"""

from __future__ import annotations

import json
import stat
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envhub.errors import IntegrityError

__all__ = ["VERSION_FILE", "ArchiveTree", "check_rel_path", "read_tree", "rebuild_archive"]

VERSION_FILE = ".envhub/version.json"
README = "README.md"
FORMAT = 1


@dataclass(frozen=True)
class ArchiveTree:
    """An archive's files, extracted (path in repo -> local file), and what rebuilds it."""

    files: dict[str, Path]
    executables: tuple[str, ...]
    digest: str
    size: int

    def archive_info(self, readme_prefix: int = 0) -> dict[str, Any]:
        info: dict[str, Any] = {"digest": self.digest, "size": self.size, "executables": list(self.executables)}
        if readme_prefix:
            info["readme-prefix"] = readme_prefix
        return info


def read_tree(archive: Path, digest: str, size: int, dest: Path, *, max_bytes: int) -> ArchiveTree:
    """Extract an archive that envhub built into ``dest`` (which must not exist)."""
    from envhub.bundle import extract_archive

    extract_archive(archive, dest, max_bytes=max_bytes)
    files: dict[str, Path] = {}
    executables = []
    with tarfile.open(archive, mode="r:") as tar:
        for member in tar:
            if member.isreg():
                files[member.name] = dest / member.name
                if member.mode & stat.S_IXUSR:
                    executables.append(member.name)
    return ArchiveTree(files, tuple(sorted(executables)), digest, size)


def version_document(entry: dict[str, Any], archive: dict[str, Any]) -> bytes:
    document = {"format": FORMAT, "entry": entry, "archive": archive}
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def check_rel_path(rel: str, where: str) -> str:
    """``rel`` if it is a plain, normalised relative path inside a bundle; else IntegrityError
    (the RECORD is not trusted before the rebuilt archive's digest is checked)."""
    from envhub.bundle import path_problem

    if not rel or path_problem(rel):
        raise IntegrityError(f"{where}: the RECORD names an unsafe path {rel!r}",
                             hint="the repo was not written by envhub or was tampered with; nothing was cached")
    return rel


def rebuild_archive(dest: Path, files: Iterable[tuple[str, Path]], executables: Iterable[str]) -> tuple[str, int]:
    """Write the archive that ``files`` (verified downloads) make, and return its digest
    and size. Executable files get the mode the archive records for them."""
    from envhub.bundle import RECORD, write_archive

    sources = []
    execs = set(executables)
    for rel, path in files:
        if rel == RECORD:
            continue  # write_archive writes the RECORD from the files themselves
        path.chmod(0o755 if rel in execs else 0o644)
        sources.append((rel, path))
    info = write_archive(dest, sources)
    return info.digest, info.size
