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
import re
import stat
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub.errors import IntegrityError

if TYPE_CHECKING:
    from envhub.manifest import Manifest

__all__ = ["VERSION_FILE", "ArchiveTree", "card", "check_rel_path", "read_tree", "rebuild_archive"]

VERSION_FILE = ".envhub/version.json"
README = "README.md"
FORMAT = 1
#: Split names ``datasets`` accepts; other splits are left out of the card's configs.
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")


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


def card(manifest: Manifest, body: bytes | None) -> tuple[bytes, int]:
    """The repo's README.md: a YAML header (the ``envhub`` tag, the environment's tags, and
    ``configs`` naming the public splits so ``datasets.load_dataset`` works), then the
    bundle's own README (``body``) or a short generated one. Returns the bytes and the
    length of what precedes ``body`` (0 if ``body`` is None)."""
    import yaml

    env = manifest.environment
    tasks = manifest.tasks
    data_files = [{"split": name, "path": split.path} for name, split in tasks.splits.items()
                  if split.path is not None and not split.held_out and _SPLIT_NAME.match(name)]
    header: dict[str, Any] = {"pretty_name": env.name, "tags": ["envhub", *[t for t in env.tags if t != "envhub"]]}
    if data_files and tasks.format in ("jsonl", "parquet"):
        header["configs"] = [{"config_name": "default", "data_files": data_files}]
    prefix = ("---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n").encode()
    if body is not None:
        return prefix + body, len(prefix)
    generated = (f"\n# {env.name} {env.version}\n\n{env.description}\n\n"
                 "An [envhub](https://github.com/envhub/envhub) environment. Pull it with\n\n"
                 f"    envhub pull {env.name}@{env.version} --registry hf://\n")
    return prefix + generated.encode(), 0


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
