"""The content-addressed cache of pulled bundles (``$ENVHUB_CACHE``).

Layout::

    bundles/<hex>/            an extracted public bundle, named by its archive's sha256
    heldout/<hex>/            an extracted held-out archive
    refs/<registry>/<namespace>/<name>/<version>.json   what a registry said a version is
    tmp/, locks/

A bundle directory appears only complete: the archive is verified against its digest,
extracted into ``tmp/`` (every file checked against its RECORD), checked to be the
environment its index entry names, and renamed into place, under a file lock, so concurrent
pulls of one bundle are safe and a killed or refused pull leaves nothing where it is looked
for. Held-out directories are 0700 and their files 0600 from the moment they are written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from envhub._digest import file_sha256 as _file_digest
from envhub.errors import IntegrityError
from envhub.registry import VersionEntry, version_key

__all__ = ["Cache", "CachedBundle"]

Kind = Literal["bundles", "heldout"]
ORIGIN = ".envhub/ORIGIN.json"
_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class CachedBundle:
    path: Path
    kind: Kind
    digest: str
    name: str | None
    version: str | None
    size: int


def _hex(digest: str) -> str:
    algorithm, _, hexdigest = digest.partition(":")
    if algorithm != "sha256" or len(hexdigest) != 64 or not all(c in "0123456789abcdef" for c in hexdigest):
        raise IntegrityError(f"unsupported digest {digest!r}")
    return hexdigest


def _registry_key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()[:16]


class Cache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, digest: str, kind: Kind = "bundles") -> Path:
        return self.root / kind / _hex(digest)

    def has(self, digest: str, kind: Kind = "bundles") -> bool:
        return self.path(digest, kind).is_dir()

    def cached(self, entry: VersionEntry) -> Path | None:
        """The cached public bundle of ``entry``, if any, checked to be that environment:
        an archive embeds its name and version, so one digest is one environment version."""
        path = self.path(entry.digest)
        try:
            origin = json.loads((path / ORIGIN).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            origin = {}
        # Every index entry of one digest comes from the same manifest, so the strings match.
        if origin.get("name") != entry.name or origin.get("version") != entry.version:
            raise IntegrityError(
                f"{entry.ref} from {entry.registry}: the archive holds {origin.get('name')} {origin.get('version')}, "
                f"not {entry.name} {entry.version}",
                hint="the registry's index was tampered with or damaged; nothing was cached",
            )
        return path

    def cached_heldout(self, entry: VersionEntry) -> Path | None:
        """The cached held-out splits of ``entry``, if any, checked to be the ones its public
        manifest describes (a digest names bytes, not an environment: an index may point at
        another environment's held-out archive). Made private (0700/0600) if an earlier
        envhub left them readable by others. Raises :class:`IntegrityError`."""
        if entry.heldout_digest is None:
            return None
        path = self.path(entry.heldout_digest, "heldout")
        if not path.is_dir():
            return None
        _check_heldout(path, self.path(entry.digest), entry)
        if path.stat().st_mode & 0o077:
            _make_private(path)
        if path.parent.stat().st_mode & 0o077:
            path.parent.chmod(0o700)
        return path

    def install(self, entry: VersionEntry, digest: str, *, kind: Kind, max_bytes: int,
                local: str | None, opener: Callable[[], IO[bytes]]) -> tuple[Path, bool]:
        """Make sure the archive with ``digest`` is extracted in the cache.

        ``local`` is a file holding the archive, if there is one on this machine;
        otherwise ``opener`` streams it (at most the size the index declares, or
        ``max_bytes`` for a held-out archive). Everything is checked in ``tmp/`` before one
        rename puts it in place: the archive's digest, every file against its RECORD, and
        that it is the environment ``entry`` names (for held-out splits: the files its
        public manifest describes, which must be cached already). Held-out splits are
        written readable by their owner only. Returns the directory and whether it was
        already cached. Raises :class:`IntegrityError` or :class:`BundleError`, leaving
        nothing behind but the lock file."""
        final = self.path(digest, kind)
        if final.is_dir():
            if kind == "heldout":
                _check_heldout(final, self.path(entry.digest), entry)
            return final, True
        from concurrent.futures import ThreadPoolExecutor

        from filelock import FileLock

        from envhub.bundle import extract_archive

        private = kind == "heldout"
        (self.root / "locks").mkdir(parents=True, exist_ok=True)
        with FileLock(self.root / "locks" / f"{_hex(digest)}.lock"):
            if final.is_dir():  # another process finished it while we waited
                if kind == "heldout":
                    _check_heldout(final, self.path(entry.digest), entry)
                return final, True
            (self.root / "tmp").mkdir(parents=True, exist_ok=True)
            tmp = self.root / "tmp" / os.urandom(16).hex()
            tmp.mkdir(mode=0o700 if private else 0o777)
            try:
                limit, source = (entry.size, "the index declares") if kind == "bundles" else \
                    (max_bytes, "ENVHUB_MAX_BUNDLE_BYTES allows")

                def too_big() -> IntegrityError:
                    return IntegrityError(
                        f"{entry.ref} from {entry.registry}: the archive {digest[:19]}... is larger than the "
                        f"{limit} bytes {source}",
                        hint="the registry's copy is damaged or was tampered with; nothing was cached")
                if local:
                    archive = Path(local)
                    if archive.stat().st_size > limit:  # a local copy is held to the same size
                        raise too_big()
                else:
                    archive = self._download(opener, tmp / "archive.tar", limit, too_big)
                # Hash on a second thread while extracting into tmp/: nothing is renamed into
                # place, and nothing is trusted, unless the digest matches.
                tree = tmp / "tree"
                with ThreadPoolExecutor(max_workers=1) as pool:
                    hashing = pool.submit(_file_digest, archive)
                    try:
                        extract_archive(archive, tree, max_bytes=max_bytes, display=f"{entry.ref} ({digest[:19]}...)",
                                        private=private)
                        extract_error = None
                    except Exception as e:  # judged after the digest: bad bytes explain it best
                        extract_error = e
                    actual = hashing.result()
                if actual != digest:
                    raise IntegrityError(
                        f"{entry.ref} from {entry.registry}: the archive's digest is {actual}, "
                        f"but the index says {digest}",
                        hint="the registry's copy is damaged or was tampered with; nothing was cached",
                    )
                if extract_error is not None:
                    raise extract_error
                if kind == "bundles":
                    _check_identity(tree, entry)
                else:
                    _check_heldout(tree, self.path(entry.digest), entry)
                origin = {"name": entry.name, "version": entry.version, "digest": digest,
                          "registry": entry.registry, "kind": kind}
                _write_new(tree / ORIGIN, json.dumps(origin, indent=2, sort_keys=True) + "\n", private=private)
                final.parent.mkdir(mode=0o700 if private else 0o777, parents=True, exist_ok=True)
                if private:
                    final.parent.chmod(0o700)  # also if an earlier envhub made it readable by others
                os.replace(tree, final)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return final, False

    @staticmethod
    def _download(opener: Callable[[], IO[bytes]], dest: Path, limit: int,
                  too_big: Callable[[], IntegrityError]) -> Path:
        """Copy the stream to ``dest``, raising ``too_big()`` past ``limit`` bytes: a
        registry that sends more than it declared does not get to fill the disk."""
        written = 0
        with opener() as source, open(dest, "wb") as out:
            while block := source.read(_CHUNK):
                written += len(block)
                if written > limit:
                    raise too_big()
                out.write(block)
        return dest

    # --- what registries said, for pins and --offline -----------------------------------

    def _ref_path(self, registry: str, name: str, version: str) -> Path:
        namespace, _, short = name.partition("/")
        return self.root / "refs" / _registry_key(registry) / namespace / short / f"{version_key(version)}.json"

    def remember(self, entry: VersionEntry) -> None:
        path = self._ref_path(entry.registry, entry.name, entry.version)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.urandom(16).hex()}.tmp")
        tmp.write_text(json.dumps(entry.to_json(), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)

    def learn_yank(self, entry: VersionEntry, current: list[VersionEntry]) -> VersionEntry:
        """``entry`` (remembered earlier) with the yank status ``current`` (what its registry's
        index lists for its name now) gives its version, remembered from now on. A cached exact
        pin is served without resolving, so this is how its yank (or an unyank) reaches the
        cache; the rest of the entry stays as it was pulled (versions are immutable)."""
        from dataclasses import replace

        for now in current:
            if now.parsed_version == entry.parsed_version:
                if (now.yanked, now.yank_reason) != (entry.yanked, entry.yank_reason):
                    entry = replace(entry, yanked=now.yanked, yank_reason=now.yank_reason)
                    self.remember(entry)
                break
        return entry

    def remembered(self, registry: str, name: str) -> list[VersionEntry]:
        namespace, _, short = name.partition("/")
        directory = self.root / "refs" / _registry_key(registry) / namespace / short
        entries = []
        for path in sorted(directory.glob("*.json")):
            try:
                entries.append(VersionEntry.from_json(json.loads(path.read_text()), registry=registry))
            except (ValueError, TypeError):
                continue  # a damaged note is only a missed shortcut
        return sorted(entries, key=lambda e: e.parsed_version)

    # --- envhub cache list | verify | prune --------------------------------------------

    def entries(self) -> list[CachedBundle]:
        out = []
        for kind in ("bundles", "heldout"):
            for path in sorted((self.root / kind).glob("*")):
                if not path.is_dir():
                    continue
                try:
                    origin = json.loads((path / ORIGIN).read_text())
                except (OSError, ValueError):
                    origin = {}
                size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
                out.append(CachedBundle(path, kind, f"sha256:{path.name}", origin.get("name"),
                                        origin.get("version"), size))
        return out

    def verify(self, bundle: CachedBundle) -> list[str]:
        """What is wrong with a cached bundle: files that differ from its RECORD."""
        from envhub.bundle import RECORD, parse_record

        try:
            record = parse_record((bundle.path / RECORD).read_text())
        except (OSError, ValueError):
            return ["RECORD is missing or unreadable"]
        problems = []
        for rel, (digest, size) in record.items():
            path = bundle.path / rel
            if not path.is_file():
                problems.append(f"{rel}: missing")
            elif path.stat().st_size != size or _file_digest(path) != digest:
                problems.append(f"{rel}: modified (expected {digest[:19]}...)")
        extra = {p.relative_to(bundle.path).as_posix() for p in bundle.path.rglob("*") if p.is_file()}
        extra -= set(record) | {RECORD, ORIGIN}
        problems.extend(f"{rel}: not in the RECORD" for rel in sorted(extra))
        return problems

    def remove(self, bundle: CachedBundle) -> None:
        doomed = bundle.path.with_name(f".{bundle.path.name}.{os.urandom(16).hex()}.removing")
        os.replace(bundle.path, doomed)  # disappear at once, then delete at leisure
        shutil.rmtree(doomed, ignore_errors=True)

    def prune_leftovers(self) -> int:
        """Remove what interrupted pulls left in ``tmp/``; returns how many."""
        count = 0
        for path in (self.root / "tmp").glob("*"):
            shutil.rmtree(path, ignore_errors=True)
            count += 1
        return count


def _write_new(path: Path, text: str, *, private: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _make_private(root: Path) -> None:
    """Directories 0700, files 0600 (0700 if executable), ``root`` included."""
    for dirpath, _, filenames in os.walk(root):
        os.chmod(dirpath, 0o700)
        for name in filenames:
            path = os.path.join(dirpath, name)
            os.chmod(path, 0o700 if os.stat(path).st_mode & stat.S_IXUSR else 0o600)


def _check_heldout(tree: Path, public: Path, entry: VersionEntry) -> None:
    """The held-out archive extracted at ``tree`` is ``entry``'s: every file it holds
    (besides ``.envhub/``) is the file of a held-out split of ``entry``'s public manifest
    (at ``public``, already verified against ``entry.digest``), with the sha256 that manifest
    records, and it holds at least one. The public manifest names the environment and its
    version, so another environment's (or version's) held-out archive, or a public archive,
    is refused."""
    from envhub import _toml
    from envhub.bundle import RECORD, parse_record
    from envhub.tasks import sealed_seeds_path

    where = f"{entry.ref} from {entry.registry}: the held-out archive {str(entry.heldout_digest)[:19]}..."
    hint = "the registry's index was tampered with or damaged; nothing was cached"
    try:
        splits = _toml.loads((public / "envhub.toml").read_text(encoding="utf-8"))["tasks"]["splits"]
        declared: dict[str, str | None] = {}
        for split_name, split in splits.items():
            if split.get("held-out") is True:
                path = split.get("path")
                declared[path if isinstance(path, str) else sealed_seeds_path(split_name)] = split.get("sha256")
    except FileNotFoundError:
        raise IntegrityError(f"{where}: the public bundle {entry.digest[:19]}... is not in the cache",
                             hint=f"pull {entry.ref} first, then its held-out splits") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise IntegrityError(f"{where}: the public manifest of {entry.ref} has no readable splits ({e})",
                             hint=hint) from e
    try:
        record = parse_record((tree / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise IntegrityError(f"{where}: its {RECORD} is missing or unreadable ({e})", hint=hint) from e
    problems = []
    for rel, (digest, _) in sorted(record.items()):
        if rel.startswith(".envhub/"):
            continue
        if rel not in declared:
            problems.append(f"{rel} is not the file of a held-out split")
        elif declared[rel] is not None and digest != f"sha256:{declared[rel]}":
            problems.append(f"{rel} is not the file the manifest records (sha256 {str(declared[rel])[:12]}...)")
    # Every held-out file the manifest vouches for must be there: an archive holding only some
    # of them would leave the others to whatever a later pull finds.
    problems.extend(f"{rel} is missing (the manifest records sha256 {str(sha)[:12]}...)"
                    for rel, sha in sorted(declared.items()) if sha is not None and rel not in record)
    if not problems and not any(rel in declared for rel in record):
        problems.append("it holds no held-out split's file")
    if problems:
        raise IntegrityError(f"{where} does not hold the held-out splits of {entry.ref}: " + "; ".join(problems),
                             hint=hint)


def _check_identity(tree: Path, entry: VersionEntry) -> None:
    """The bundle is the one the index entry names: an index edited to point at another
    genuine blob must not hand out the wrong environment."""
    from packaging.version import InvalidVersion, Version

    from envhub import _toml

    try:
        env = _toml.loads((tree / "envhub.toml").read_text(encoding="utf-8"))["environment"]
        same = env["name"] == entry.name and Version(env["version"]) == entry.parsed_version
        found = f"{env['name']} {env['version']}"
    except (OSError, ValueError, KeyError, TypeError, InvalidVersion):
        same, found = False, "no readable manifest"
    if not same:
        raise IntegrityError(f"{entry.ref} from {entry.registry}: the archive holds {found}, "
                             f"not {entry.name} {entry.version}",
                             hint="the registry's index was tampered with or damaged; nothing was cached")
