"""``envhub build``: a bundle directory into a public archive and a held-out archive."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from envhub.bundle._archive import ArchiveInfo, write_archive
from envhub.bundle._paths import IGNORE_FILE, bundle_files, heldout_seeds_bytes
from envhub.bundle._validate import validate_bundle
from envhub.errors import BundleError
from envhub.manifest import MANIFEST_FILENAME, LocalDependency, Manifest, dump_manifest, local_dependencies
from envhub.problems import Problem
from envhub.tasks import SecretError, read_secret, sealed_seeds_bytes, sealed_seeds_path

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup

__all__ = ["IGNORE_FILE", "BuiltBundle", "archive_stem", "build_bundle", "bundle_files", "public_manifest"]


@dataclass(frozen=True)
class BuiltBundle:
    """A built bundle: the public manifest (held-out splits recorded by count and digest)
    and its archives."""

    manifest: Manifest
    public: ArchiveInfo
    heldout: ArchiveInfo | None
    #: The path dependencies the public manifest pins (``==`` their directory's version), by
    #: name: they must be published before this bundle is (``envhub push`` checks it).
    path_dependencies: Mapping[str, LocalDependency] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.manifest.environment.name

    @property
    def version(self) -> str:
        return self.manifest.environment.version


def archive_stem(name: str, version: str) -> str:
    """``acme/sql-shop`` 1.2.0 -> ``acme--sql-shop-1.2.0`` ('--' never occurs in a name)."""
    return f"{name.replace('/', '--')}-{version}"


def public_manifest(manifest: Manifest, root: Path,
                    facts: Mapping[str, tuple[int | None, str | None]] | None = None, *,
                    plugins: PluginLookup | None = None) -> tuple[Manifest, list[tuple[str, bytes]]]:
    """The manifest as a built bundle publishes it, and the files only its held-out archive holds.

    ``facts`` gives the row count and sha256 of split files (as validation found them), which
    the public manifest records. A held-out generator split loses what would let anyone make
    its tasks: drawn from a secret (``seed-space``), it keeps ``rows`` and ``seed-space``,
    drops ``secret``, and records the sha256 of ``heldout-seeds/<split>.json`` (which holds
    the key); with a public range (``seeds``, the old form), the range moves to that file.
    A path dependency loses its path and is pinned to its directory's version,
    ``"acme/x" = "==1.0.1"``: the version the bundle was checked with, and a specifier that
    every envhub reads. Raises :class:`BundleError` for a missing or malformed secret file,
    or an unsound path dependency.
    """
    splits = {}
    sealed: list[tuple[str, bytes]] = []
    for name, split in manifest.tasks.splits.items():
        update: dict[str, object] = {}
        if split.path is not None and facts is not None and name in facts:
            update = {"rows": facts[name][0], "sha256": facts[name][1]}
        elif split.held_out and split.seed_space is not None and split.secret is not None and split.rows is not None:
            try:
                key = read_secret(root / split.secret)
            except SecretError as e:
                field = f"tasks.splits.{name}.secret"
                raise BundleError(f"{root / split.secret}: the secret of split {name!r} {e}",
                                  [Problem("error", "bad-secret", str(e), file=str(root / split.secret), field=field)],
                                  hint=f"run 'envhub validate {root}'") from None
            data = sealed_seeds_bytes(name, split.rows, split.seed_space, key)
            sealed.append((sealed_seeds_path(name), data))
            kept = {k: v for k, v in split.model_dump(exclude_unset=True).items() if k != "secret"}
            split = type(split)(**{**kept, "sha256": hashlib.sha256(data).hexdigest()})
        elif split.held_out and split.seeds is not None:
            # The old form: whoever knows the seed range can make the tasks, so the range
            # goes to the held-out archive (validate warns: its digest is guessable).
            data = heldout_seeds_bytes(name, split.seeds)
            sealed.append((sealed_seeds_path(name), data))
            kept = {k: v for k, v in split.model_dump(exclude_unset=True).items() if k != "seeds"}
            split = type(split)(**kept, rows=split.seeds[1] - split.seeds[0], sha256=hashlib.sha256(data).hexdigest())
        splits[name] = split.model_copy(update=update)
    tasks = manifest.tasks.model_copy(update={"splits": splits})
    changes: dict[str, object] = {"tasks": tasks}
    if manifest.dependency_paths():  # else the manifest is written as it was, byte for byte
        local = local_dependencies(manifest, root, plugins=plugins)
        pins = {name: f"=={dependency.version}" for name, dependency in local.items()}
        changes["dependencies"] = {**manifest.dependencies, **pins}
    return manifest.model_copy(update=changes), sealed


def build_bundle(root: str | Path, out_dir: str | Path, *, plugins: PluginLookup) -> BuiltBundle:
    """Validate the bundle at ``root`` and write its archives into ``out_dir``.

    Held-out split files go only into the held-out archive, and so do the keys of held-out
    generator splits (:func:`public_manifest`); secret files go into neither. The public
    manifest records every split's row count and sha256 instead. Raises
    :class:`BundleError` if the bundle is invalid (nothing is written then). ``plugins``
    validates the names that are not built in, as for :func:`validate_bundle`.
    """
    root = Path(root)
    check = validate_bundle(root, plugins=plugins)
    errors = [p for p in check.problems if p.severity == "error"]
    if errors or check.manifest is None:
        raise BundleError(f"{root}: cannot build an invalid bundle", errors,
                          hint=f"run 'envhub validate {root}' and fix every error")
    manifest = check.manifest
    facts = {s.name: (s.rows, s.sha256) for s in check.splits}
    published, sealed = public_manifest(manifest, root, facts, plugins=plugins)
    splits = manifest.tasks.splits.values()
    heldout_paths = {s.path for s in splits if s.held_out and s.path is not None}
    secrets = {s.secret for s in splits if s.secret is not None}

    files = [rel for rel in bundle_files(root) if rel != MANIFEST_FILENAME and rel not in secrets]
    public_files: list[tuple[str, Path | bytes]] = [(rel, root / rel) for rel in files if rel not in heldout_paths]
    public_files.append((MANIFEST_FILENAME, dump_manifest(published).encode()))
    heldout_files: list[tuple[str, Path | bytes]] = [
        (rel, root / rel) for rel in sorted(heldout_paths) if (root / rel).is_file()
    ]
    heldout_files.extend(sealed)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = archive_stem(manifest.environment.name, manifest.environment.version)
    public = write_archive(out / f"{stem}.tar", public_files)
    heldout = write_archive(out / f"{stem}.heldout.tar", heldout_files) if heldout_files else None
    pinned = local_dependencies(manifest, root, plugins=plugins) if manifest.dependency_paths() else {}
    return BuiltBundle(published, public, heldout, pinned)
