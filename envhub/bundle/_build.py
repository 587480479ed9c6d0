"""``envhub build``: a bundle directory into a public archive and a held-out archive."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from envhub.bundle._archive import ArchiveInfo, write_archive
from envhub.bundle._paths import SKIPPED_DIRS, heldout_seeds_bytes, heldout_seeds_path
from envhub.bundle._validate import validate_bundle
from envhub.errors import BundleError
from envhub.manifest import MANIFEST_FILENAME, Manifest, dump_manifest

__all__ = ["IGNORE_FILE", "BuiltBundle", "archive_stem", "build_bundle", "bundle_files"]

IGNORE_FILE = ".envhubignore"
_ALWAYS_IGNORED = ["*.pyc", ".DS_Store", IGNORE_FILE, "/dist/"]


@dataclass(frozen=True)
class BuiltBundle:
    """A built bundle: the public manifest (held-out splits recorded by count and digest)
    and its archives."""

    manifest: Manifest
    public: ArchiveInfo
    heldout: ArchiveInfo | None

    @property
    def name(self) -> str:
        return self.manifest.environment.name

    @property
    def version(self) -> str:
        return self.manifest.environment.version


def archive_stem(name: str, version: str) -> str:
    """``acme/sql-shop`` 1.2.0 -> ``acme--sql-shop-1.2.0`` ('--' never occurs in a name)."""
    return f"{name.replace('/', '--')}-{version}"


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


def build_bundle(root: str | Path, out_dir: str | Path) -> BuiltBundle:
    """Validate the bundle at ``root`` and write its archives into ``out_dir``.

    Held-out split files go only into the held-out archive; the public manifest records
    every split's row count and sha256 instead. Raises :class:`BundleError` if the bundle
    is invalid (nothing is written then).
    """
    root = Path(root)
    check = validate_bundle(root)
    errors = [p for p in check.problems if p.severity == "error"]
    if errors or check.manifest is None:
        raise BundleError(f"{root}: cannot build an invalid bundle", errors,
                          hint=f"run 'envhub validate {root}' and fix every error")
    manifest = check.manifest
    facts = {s.name: s for s in check.splits}
    splits = {}
    heldout_paths = set()
    sealed_seeds: list[tuple[str, Path | bytes]] = []
    for name, split in manifest.tasks.splits.items():
        update = {}
        if split.path is not None:
            update = {"rows": facts[name].rows, "sha256": facts[name].sha256}
            if split.held_out:
                heldout_paths.add(split.path)
        elif split.held_out and split.seeds is not None:
            # A held-out generator split: whoever knows its seed range can make its tasks,
            # so the range goes to the held-out archive and the public manifest keeps only
            # the count and the digest of that file.
            data = heldout_seeds_bytes(name, split.seeds)
            sealed_seeds.append((heldout_seeds_path(name), data))
            kept = {k: v for k, v in split.model_dump(exclude_unset=True).items() if k != "seeds"}
            split = type(split)(**kept, rows=split.seeds[1] - split.seeds[0], sha256=hashlib.sha256(data).hexdigest())
        splits[name] = split.model_copy(update=update)
    public_manifest = manifest.model_copy(update={"tasks": manifest.tasks.model_copy(update={"splits": splits})})

    files = [rel for rel in bundle_files(root) if rel != MANIFEST_FILENAME]
    public_files: list[tuple[str, Path | bytes]] = [(rel, root / rel) for rel in files if rel not in heldout_paths]
    public_files.append((MANIFEST_FILENAME, dump_manifest(public_manifest).encode()))
    heldout_files: list[tuple[str, Path | bytes]] = [(rel, root / rel) for rel in sorted(heldout_paths) if (root / rel).is_file()]
    heldout_files.extend(sealed_seeds)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = archive_stem(manifest.environment.name, manifest.environment.version)
    public = write_archive(out / f"{stem}.tar", public_files)
    heldout = write_archive(out / f"{stem}.heldout.tar", heldout_files) if heldout_files else None
    return BuiltBundle(public_manifest, public, heldout)
