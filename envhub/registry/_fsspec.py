"""Registries on any fsspec filesystem: local directories, ``memory://``, ``s3://``, ...

Layout (spec/registry.md)::

    envhub-registry.json                      {"layout": 1}
    blobs/sha256/<hh>/<hex>                   archives, content-addressed
    index/<namespace>/<name>/<version>.json   one entry per version, created exclusively
    index/<namespace>/<name>/<version>.yanked.json   a yank marker, never deleted

A version's entry is created only after its blob is complete, and by an exclusive create,
so a killed push leaves no visible version and two concurrent pushes of one version have
exactly one winner.
"""

from __future__ import annotations

import json
import os
import posixpath
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from typing import IO, TYPE_CHECKING, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from envhub.errors import EnvNotFoundError, IntegrityError, RegistryError
from envhub.ids import parse_name
from envhub.registry._base import PublishResult, Registry, VersionEntry, same_or_conflict, utc_now, version_key

if TYPE_CHECKING:
    from envhub.bundle import BuiltBundle

__all__ = ["BlobStore", "FsspecRegistry", "HeldoutStore"]

LAYOUT = 1
_CHUNK = 8 * 1024 * 1024
_MEMORY_LOCK = threading.Lock()  # memory:// is one process; its exclusive create needs no more


class BlobStore:
    """Content-addressed blobs plus exclusive-create JSON documents on one filesystem."""

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url.rstrip("/")
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url, **(storage_options or {}))
        except (ValueError, ImportError) as e:
            raise RegistryError(f"cannot open registry {url!r}: {e}",
                                hint="use a directory path, file://, memory://, s3:// (pip install s3fs) "
                                     "or hf://") from e
        self.root = self.root.rstrip("/")
        self.local = isinstance(self.fs, LocalFileSystem)

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def blob_path(self, digest: str) -> str:
        algorithm, _, hexdigest = digest.partition(":")
        if algorithm != "sha256" or len(hexdigest) != 64:
            raise IntegrityError(f"unsupported digest {digest!r}")
        return self.path("blobs", "sha256", hexdigest[:2], hexdigest)

    def put_blob(self, digest: str, source: str | os.PathLike[str], size: int) -> str:
        """Store a file under its digest (a no-op if it is there already)."""
        final = self.blob_path(digest)
        try:
            if self.fs.exists(final) and self.fs.size(final) == size:
                return final
        except FileNotFoundError:
            pass
        tmp = self.path("tmp", f"{uuid.uuid4().hex}.partial")
        self.fs.makedirs(posixpath.dirname(tmp), exist_ok=True)
        self.fs.makedirs(posixpath.dirname(final), exist_ok=True)
        try:
            self.fs.put_file(os.fspath(source), tmp)
            self.fs.mv(tmp, final)  # rename locally; an atomic object PUT on object stores
        except BaseException:
            with suppress(FileNotFoundError, OSError):
                self.fs.rm_file(tmp)
            raise
        return final

    def open_blob(self, digest: str) -> IO[bytes]:
        path = self.blob_path(digest)
        try:
            return self.fs.open(path, "rb", block_size=_CHUNK)  # type: ignore[no-any-return]
        except FileNotFoundError:
            raise IntegrityError(f"{self.url}: blob {digest} is missing",
                                 hint="the registry is damaged: republish this version elsewhere") from None

    def create_json(self, path: str, data: dict[str, Any]) -> bool:
        """Create ``path`` with ``data`` unless it exists; False if it already existed."""
        payload = (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        if self.local:
            # Write a temporary file, then link it into place: link() fails if the name
            # exists, and readers never see a partly written entry.
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        if "memory" in protocols:
            with _MEMORY_LOCK:
                if self.fs.exists(path):
                    return False
                self.fs.pipe_file(path, payload)
                return True
        try:
            # An exclusive PUT (If-None-Match: *) on object stores that support it.
            self.fs.pipe_file(path, payload, mode="create")
            return True
        except FileExistsError:
            return False
        except OSError as e:
            if "PreconditionFailed" in str(e) or "412" in str(e):
                return False
            raise

    def replace_json(self, path: str, data: dict[str, Any]) -> None:
        """Write ``path`` whole, replacing it if it exists: readers see the old document or
        the new one (a rename locally; a single PUT on object stores)."""
        payload = (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        if not self.local:
            self.fs.pipe_file(path, payload)
            return
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def listdir(self, path: str) -> list[str]:
        """The names in directory ``path``, listed afresh. Raises FileNotFoundError."""
        # Filesystems that cache listings (s3fs) would otherwise hide what other writers
        # published since: new versions, yank markers.
        self.fs.invalidate_cache(path)
        return [posixpath.basename(p.rstrip("/")) for p in self.fs.ls(path, detail=False)]

    def read_json(self, path: str) -> dict[str, Any]:
        self.fs.invalidate_cache(path)  # a cached listing of the directory may predate the file
        try:
            with self.fs.open(path, "rb") as f:
                data = json.loads(f.read())
        except FileNotFoundError:
            raise
        except ValueError as e:
            raise IntegrityError(f"{self.url}: index file {path!r} is corrupted ({e})",
                                 hint="the registry is damaged; ask its owner to restore the file") from e
        if not isinstance(data, dict):
            raise IntegrityError(f"{self.url}: index file {path!r} is corrupted (not a JSON object)")
        return data


class FsspecRegistry(Registry):
    """A registry on any fsspec URL; the embedded default is a local directory."""

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None) -> None:
        self.store = BlobStore(url, storage_options=storage_options)
        self.url = self.store.url

    def _env_dir(self, name: str) -> str:
        env = parse_name(name)
        return self.store.path("index", env.namespace, env.name)

    def _entry_path(self, name: str, version: str) -> str:
        return posixpath.join(self._env_dir(name), f"{version_key(version)}.json")

    def _ensure_layout(self) -> None:
        marker = self.store.path("envhub-registry.json")
        if not self.store.fs.exists(marker):
            self.store.create_json(marker, {"layout": LAYOUT})

    def publish(self, bundle: BuiltBundle) -> PublishResult:
        with self._wrap_errors("publish"):
            self._ensure_layout()
            entry_path = self._entry_path(bundle.name, bundle.version)
            existing = self._existing(entry_path)
            if existing is not None:
                return same_or_conflict(existing, bundle, self.url)
            locator = self.store.put_blob(bundle.public.digest, bundle.public.path, bundle.public.size)
            entry = VersionEntry.for_bundle(bundle, locator=posixpath.relpath(locator, self.store.root))
            data = entry.to_json()
            for transient in ("registry", "yanked", "yank-reason"):
                data.pop(transient)
            if self.store.create_json(entry_path, data):
                return PublishResult(VersionEntry.from_json(data, registry=self.url), created=True)
            # Another push won the race for this version.
            return same_or_conflict(self._existing(entry_path), bundle, self.url)  # type: ignore[arg-type]

    def _existing(self, entry_path: str) -> VersionEntry | None:
        try:
            return self._read_entry(entry_path)
        except FileNotFoundError:
            return None

    def _read_entry(self, entry_path: str) -> VersionEntry:
        """The entry at ``entry_path`` (``index/<namespace>/<name>/<key>.json``), checked to
        name that environment and version. Raises FileNotFoundError, IntegrityError."""
        parts = entry_path.split("/")
        name, key = f"{parts[-3]}/{parts[-2]}", parts[-1][: -len(".json")]
        return VersionEntry.from_json(self.store.read_json(entry_path), registry=self.url, where=f"'{entry_path}'",
                                      name=name, key=key)

    def versions(self, name: str) -> list[VersionEntry]:
        env_dir = self._env_dir(name)
        with self._wrap_errors("read the index"):
            try:
                files = self.store.listdir(env_dir)
            except FileNotFoundError:
                files = []
            yanks = {f[: -len(".yanked.json")] for f in files if f.endswith(".yanked.json")}
            entries = []
            for f in sorted(files):
                if not f.endswith(".json") or f.endswith(".yanked.json") or f.endswith(".tmp"):
                    continue
                key = f[: -len(".json")]
                entry = self._read_entry(posixpath.join(env_dir, f))
                if key in yanks:
                    marker = posixpath.join(env_dir, f"{key}.yanked.json")
                    reason = self.store.read_json(marker).get("reason")
                    if reason is not None and not isinstance(reason, str):
                        raise IntegrityError(
                            f"{self.url}: yank marker '{marker}' is malformed: 'reason' must be a string, "
                            f"not {json.dumps(reason)[:60]}",
                            hint="the index was damaged or edited by hand; ask the registry's owner to restore it")
                    entry = replace(entry, yanked=True, yank_reason=reason)
                entries.append(entry)
        if not entries:
            raise EnvNotFoundError(f"{name} is not in {self.url}", hint=self._suggest(name))
        return sorted(entries, key=lambda e: e.parsed_version)

    def _suggest(self, name: str) -> str | None:
        import difflib

        known = self._names()
        close = difflib.get_close_matches(name, known, n=1)
        if close:
            return f"did you mean {close[0]!r}?"
        return "publish it with 'envhub push', or search with 'envhub search'"

    def _names(self) -> list[str]:
        index = self.store.path("index")
        names: list[str] = []
        try:
            for namespace in self.store.listdir(index):
                names.extend(f"{namespace}/{name}" for name in self.store.listdir(posixpath.join(index, namespace)))
        except FileNotFoundError:
            return []
        return sorted(names)

    def open_archive(self, entry: VersionEntry) -> IO[bytes]:
        with self._wrap_errors("read a blob"):
            return self.store.open_blob(entry.digest)

    def local_archive(self, entry: VersionEntry) -> str | None:
        if not self.store.local:
            return None
        path = self.store.blob_path(entry.digest)
        return path if os.path.isfile(path) else None  # if missing, open_archive says so

    def search(self, query: str, *, tag: str | None = None) -> list[VersionEntry]:
        query = query.lower()
        hits = []
        for name in self._names():
            try:
                entries = [e for e in self.versions(name) if not e.yanked]
            except EnvNotFoundError:
                continue
            if not entries:
                continue
            latest = entries[-1]
            text = " ".join([latest.name, latest.description, *latest.tags]).lower()
            if query in text and (tag is None or tag in latest.tags):
                hits.append(latest)
        return hits

    def yank(self, name: str, version: str, reason: str) -> VersionEntry:
        entries = self.versions(name)
        match = next((e for e in entries if version_key(e.version) == version_key(version)), None)
        if match is None:
            existing = ", ".join(e.version for e in entries)
            raise EnvNotFoundError(f"{name}@{version} is not in {self.url}; versions: {existing}")
        marker = posixpath.join(self._env_dir(name), f"{version_key(version)}.yanked.json")
        with self._wrap_errors("yank"):
            self.store.create_json(marker, {"reason": reason, "yanked-at": utc_now()})
        return replace(match, yanked=True, yank_reason=match.yank_reason or reason)


class HeldoutStore:
    """Where held-out archives go: never the public registry. Same blob layout, plus
    ``index/<namespace>/<name>/<version>.json`` naming each version's held-out archive."""

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None) -> None:
        self.store = BlobStore(url, storage_options=storage_options)
        self.url = self.store.url

    def where(self, name: str) -> str:
        return self.url

    def put(self, bundle: BuiltBundle) -> None:
        """Store the held-out archive's blob. Nothing names a version yet: :meth:`record`
        does, once the public entry exists, so a failed publish leaves only a blob."""
        assert bundle.heldout is not None
        with self._errors("nothing was published; fix ENVHUB_HELDOUT_STORE and push again"):
            if self.store.local:
                # Readable by the owner only: held-out answers must not leak to other users.
                os.makedirs(self.store.root, mode=0o700, exist_ok=True)
                os.chmod(self.store.root, 0o700)
            self.store.put_blob(bundle.heldout.digest, bundle.heldout.path, bundle.heldout.size)

    def record(self, entry: VersionEntry) -> None:
        """Make ``index/<namespace>/<name>/<version>.json`` name the held-out archive of
        ``entry``, the version as the public registry publishes it. The public entry is the
        truth: a note that a failed push left (naming other held-out splits) is replaced,
        atomically, so readers see the old note or the new one."""
        if entry.heldout_digest is None:
            return
        env = parse_name(entry.name)
        path = self.store.path("index", env.namespace, env.name, f"{version_key(entry.version)}.json")
        with self._errors(f"the version is published; push it again to record its held-out splits in {self.url}"):
            try:
                if self.store.read_json(path).get("digest") == entry.heldout_digest:
                    return
            except (FileNotFoundError, IntegrityError):
                pass  # none yet, or damaged: written afresh
            size = self.store.fs.size(self.store.blob_path(entry.heldout_digest))
            self.store.replace_json(path, {"digest": entry.heldout_digest, "size": size})

    @contextmanager
    def _errors(self, hint: str) -> Iterator[None]:
        try:
            yield
        except PermissionError as e:
            raise RegistryError(f"{self.url}: cannot store held-out splits: permission denied") from e
        except OSError as e:  # a full disk, a store that is a file, a network error
            raise RegistryError(f"{self.url}: cannot store held-out splits: {e}", hint=hint) from e

    def open(self, entry: VersionEntry) -> IO[bytes]:
        if entry.heldout_digest is None:
            raise EnvNotFoundError(f"{entry.ref} has no held-out splits")
        try:
            return self.store.open_blob(entry.heldout_digest)
        except IntegrityError:
            raise EnvNotFoundError(
                f"the held-out splits of {entry.ref} are not in {self.url}",
                hint="held-out splits stay with whoever published them; ask for access, "
                     "or point ENVHUB_HELDOUT_STORE at the store that has them",
            ) from None
