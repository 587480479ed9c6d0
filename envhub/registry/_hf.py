"""Registries on the Hugging Face Hub: ``hf://``, through the real ``huggingface_hub`` client.

Layout (spec/registry.md, "hf://")::

    dataset repo <namespace>/<name>            public; tagged ``envhub`` in its card
      README.md                                card: tags, ``configs`` of the public splits
      environment.yaml                         the environment descriptor (``hf-env-0.1``)
      <the bundle's files>, .envhub/RECORD     one commit per version, browsable
      .envhub/version.json                     how to rebuild the exact archive
      .envhub/index.json                       every version's entry, and yank markers
      tag v<version> -> the version's commit   the version is visible once tagged
    dataset repo <namespace>/<name>-heldout    private companion: the held-out files, same tags

A version is visible only once its tag exists, and the tag points at the commit id the
upload returned, so a killed push leaves no visible version. Commits name their parent
(``parent_commit``): of two concurrent pushes, the second is refused by the Hub and retried
on top of the first. Tags are never moved or deleted by envhub; a yank is a commit that
records the yank in ``.envhub/index.json``.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from packaging.version import InvalidVersion, Version

from envhub.errors import EnvNotFoundError, IntegrityError, RegistryError, VersionConflictError
from envhub.ids import parse_name
from envhub.registry._base import PublishResult, Registry, VersionEntry, same_or_conflict, utc_now, version_key
from envhub.registry._hf_dataset import DESCRIPTOR, card, check_no_clash, descriptor
from envhub.registry._hf_errors import LOGIN_HINT, HubContext, hub_error, status_of
from envhub.registry._hf_tree import (
    VERSION_FILE,
    ArchiveTree,
    check_rel_path,
    read_tree,
    rebuild_archive,
    version_document,
)

if TYPE_CHECKING:
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import GitRefs

    from envhub.bundle import BuiltBundle
    from envhub.settings import Settings

__all__ = ["HfHeldoutStore", "HfRegistry", "parse_hf_url"]

INDEX = ".envhub/index.json"
HELDOUT_SUFFIX = "-heldout"
REPO_TYPE = "dataset"
#: Files of the repo that a version's commit keeps (the Hub creates them).
_KEEP = frozenset({".gitattributes"})
_ATTEMPTS = 5
_DOWNLOAD_THREADS = 8
_CHUNK = 1024 * 1024


def parse_hf_url(url: str, default_endpoint: str) -> str:
    """The Hub endpoint of an ``hf://`` registry URL: ``hf://`` (``HF_ENDPOINT`` or
    huggingface.co) or ``hf://?endpoint=https://hub.example.com``. Raises RegistryError."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    unknown = sorted(set(query) - {"endpoint"})
    if parts.netloc or parts.path.strip("/") or unknown:
        raise RegistryError(f"unsupported hf:// registry URL {url!r}",
                            hint="use hf:// (each environment namespace/name is the dataset repo namespace/name), "
                                 "or hf://?endpoint=https://your-hub to name another Hub")
    endpoint = query.get("endpoint", [default_endpoint])[0].rstrip("/")
    if not endpoint.startswith(("http://", "https://")):
        raise RegistryError(f"hf:// registry URL {url!r}: endpoint {endpoint!r} is not an http(s) URL",
                            hint="e.g. hf://?endpoint=https://huggingface.co")
    return endpoint


def tag_name(version: str) -> str:
    return f"v{version}"


class _HubRepos:
    """What the registry and its held-out store share: the client, reads of small JSON
    files and of whole versions, and the error boundary."""

    def __init__(self, url: str, endpoint: str, token: str | None) -> None:
        from huggingface_hub import HfApi

        from envhub._version import __version__

        self.url = url
        self.endpoint = endpoint
        self.token = token
        # endpoint= on every call: huggingface_hub reads HF_ENDPOINT once, at import.
        self.api: HfApi = HfApi(endpoint=endpoint, token=token, library_name="envhub", library_version=__version__)

    @property
    def logged_in(self) -> bool:
        if self.token:
            return True
        from huggingface_hub import get_token

        return get_token() is not None

    @contextmanager
    def errors(self, action: str, repo_id: str) -> Iterator[None]:
        """Map Hub and network errors raised inside to envhub's (see _hf_errors)."""
        try:
            yield
        except Exception as e:
            mapped = hub_error(e, HubContext(self.url, self.endpoint, repo_id, action, self.logged_in))
            if mapped is None:
                raise
            raise mapped from e

    def refs(self, repo_id: str) -> GitRefs | None:
        """The repo's branches and tags; None if the repo does not exist (or is hidden)."""
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

        try:
            return self.api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
        except GatedRepoError:
            raise
        except RepositoryNotFoundError:
            return None

    def _url(self, repo_id: str, path: str, revision: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(repo_id, path, repo_type=REPO_TYPE, revision=revision, endpoint=self.endpoint)

    def _headers(self) -> dict[str, str]:
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]  # exported lazily: its __all__ is computed

        from envhub._version import __version__

        # The client's headers: the token (or the login's), the user agent.
        return build_hf_headers(token=self.token, library_name="envhub", library_version=__version__)

    def read_json(self, repo_id: str, path: str, revision: str) -> dict[str, Any] | None:
        """A JSON document of the repo at ``revision``; None if there is no such file."""
        from huggingface_hub import get_session, hf_raise_for_status
        from huggingface_hub.errors import RemoteEntryNotFoundError

        response = get_session().get(self._url(repo_id, path, revision), headers=self._headers())
        try:
            hf_raise_for_status(response)
        except RemoteEntryNotFoundError:
            return None
        try:
            data = json.loads(response.content)
        except ValueError as e:
            raise IntegrityError(f"{self.url}: {repo_id}/{path} at {revision[:12]} is corrupted ({e})",
                                 hint="the repo was edited by hand or damaged; ask its owners to repair it") from e
        if not isinstance(data, dict):
            raise IntegrityError(f"{self.url}: {repo_id}/{path} at {revision[:12]} is corrupted (not a JSON object)")
        return data

    def download(self, repo_id: str, path: str, revision: str, dest: Path, *, skip: int = 0,
                 limit: int | None = None) -> str:
        """Stream one file to ``dest`` (dropping its first ``skip`` bytes); its sha256.
        Stops, returning the digest of what came, once more than ``limit`` bytes came."""
        import hashlib

        from huggingface_hub import hf_raise_for_status
        from huggingface_hub.utils import http_stream_backoff  # type: ignore[attr-defined]  # exported lazily: its __all__ is computed

        dest.parent.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256()
        with http_stream_backoff("GET", self._url(repo_id, path, revision), headers=self._headers()) as response:
            hf_raise_for_status(response)
            with open(dest, "wb") as out:
                for block in response.iter_bytes(_CHUNK):
                    if skip:
                        dropped = min(skip, len(block))
                        block, skip = block[dropped:], skip - dropped
                    h.update(block)
                    out.write(block)
                    if limit is not None and out.tell() > limit:
                        break  # more than the RECORD says: the caller refuses it
        return "sha256:" + h.hexdigest()

    def fetch_archive(self, repo_id: str, revision: str, digest: str, display: str, *, max_bytes: int) -> IO[bytes]:
        """Download a version's tree at ``revision``, verify every file against its RECORD,
        rebuild the archive and check it has ``digest``. Returns the open archive (its file
        is already unlinked). Raises IntegrityError, or the Hub's errors."""
        from envhub.bundle import RECORD, parse_record

        where = f"{display} from {self.url}"
        tmp = Path(tempfile.mkdtemp(prefix="envhub-hf-"))
        try:
            doc = self.read_json(repo_id, VERSION_FILE, revision)
            if doc is None or not isinstance(doc.get("archive"), dict):
                raise IntegrityError(f"{where}: {repo_id} has no {VERSION_FILE} at {revision[:12]}",
                                     hint="the repo was not written by envhub; nothing was cached")
            archive = doc["archive"]
            files = tmp / "files"
            self.download(repo_id, RECORD, revision, files / RECORD)
            try:
                record = parse_record((files / RECORD).read_text(encoding="utf-8"))
            except ValueError as e:
                raise IntegrityError(f"{where}: {RECORD} is unreadable ({e})",
                                     hint="the repo was tampered with or damaged; nothing was cached") from e
            for rel in record:
                check_rel_path(rel, where)
            if sum(size for _, size in record.values()) > max_bytes:
                raise IntegrityError(f"{where}: the RECORD lists more than the limit of {max_bytes} bytes",
                                     hint="raise ENVHUB_MAX_BUNDLE_BYTES if you trust this bundle")
            prefix = archive.get("readme-prefix", 0)
            executables = archive.get("executables", [])
            if not (isinstance(prefix, int) and not isinstance(prefix, bool) and prefix >= 0) or not (
                    isinstance(executables, list) and all(isinstance(e, str) for e in executables)):
                raise IntegrityError(f"{where}: {VERSION_FILE} at {revision[:12]} is malformed: 'archive' needs "
                                     "'readme-prefix' (a non-negative integer) and 'executables' (an array of paths)",
                                     hint="the repo was tampered with or damaged; nothing was cached")

            def fetch(rel: str) -> None:
                expected, size = record[rel]
                skip = prefix if rel == "README.md" else 0
                actual = self.download(repo_id, rel, revision, files / rel, skip=skip, limit=size)
                if actual != expected or (files / rel).stat().st_size != size:
                    raise IntegrityError(f"{where}: {rel} does not match the RECORD ({actual[:19]}..., "
                                         f"expected {expected[:19]}...)",
                                         hint="the repo's copy is damaged or was tampered with; nothing was cached")

            with ThreadPoolExecutor(max_workers=_DOWNLOAD_THREADS) as pool:
                for future in [pool.submit(fetch, rel) for rel in sorted(record)]:
                    future.result()
            out = tmp / "archive.tar"
            actual, _ = rebuild_archive(out, [(rel, files / rel) for rel in sorted(record)], executables)
            if actual != digest:
                raise IntegrityError(f"{where}: the files rebuild an archive with digest {actual}, "
                                     f"but the index says {digest}",
                                     hint="the repo's copy is damaged or was tampered with; nothing was cached")
            stream = open(out, "rb")  # noqa: SIM115 - handed to the caller
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # the open archive survives its unlinking (POSIX)
        return stream

    def commit_tree(self, repo_id: str, files: dict[str, Path | bytes], *, head: str, message: str,
                    existing: list[str]) -> str | None:
        """Make the repo's tree exactly ``files`` (plus what the Hub keeps) in one commit on
        main whose parent must be ``head``. Returns the new commit id, or None if another
        commit got there first (the caller re-reads and tries again)."""
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete
        from huggingface_hub.errors import HfHubHTTPError

        operations: list[Any] = [CommitOperationDelete(path) for path in existing
                                 if path not in files and path not in _KEEP]
        operations += [CommitOperationAdd(path_in_repo=path, path_or_fileobj=source if isinstance(source, bytes)
                                          else str(source)) for path, source in sorted(files.items())]
        try:
            info = self.api.create_commit(repo_id, operations, commit_message=message, repo_type=REPO_TYPE,
                                          parent_commit=head)
        except HfHubHTTPError as e:
            if status_of(e) in (409, 412):
                return None
            raise
        return info.oid

    def tree_paths(self, repo_id: str, revision: str) -> list[str]:
        from huggingface_hub.hf_api import RepoFile

        return [f.path for f in self.api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=revision,
                                                         recursive=True) if isinstance(f, RepoFile)]

    def tag(self, repo_id: str, version: str, commit: str, message: str) -> bool:
        """Tag ``commit``; False if the tag exists already (another push made it)."""
        from huggingface_hub.errors import HfHubHTTPError

        try:
            self.api.create_tag(repo_id, tag=tag_name(version), revision=commit, tag_message=message,
                                repo_type=REPO_TYPE)
        except HfHubHTTPError as e:
            if status_of(e) == 409:
                return False
            raise
        return True


def _tagged(refs: GitRefs, version: str) -> tuple[str, str] | None:
    """(tag, commit) of the tag naming ``version`` (any PEP 440 spelling), if any."""
    wanted = Version(version)
    for ref in refs.tags:
        if ref.name.startswith("v"):
            try:
                if Version(ref.name[1:]) == wanted:
                    return ref.name, ref.target_commit
            except InvalidVersion:
                continue
    return None


def _main(refs: GitRefs) -> str | None:
    return next((b.target_commit for b in refs.branches if b.name == "main"), None)


class HfRegistry(Registry):
    """Environments as dataset repos on a Hugging Face Hub (see the module docstring)."""

    def __init__(self, url: str, settings: Settings) -> None:
        self.url = url
        self.hub = _HubRepos(url, parse_hf_url(url, settings.hf_endpoint), settings.hf_token)
        self.max_bundle_bytes = settings.max_bundle_bytes

    # --- reading -------------------------------------------------------------------------

    def _index(self, repo_id: str, head: str | None) -> dict[str, Any]:
        data = self.hub.read_json(repo_id, INDEX, head) if head else None
        data = data or {}
        index = {"versions": data.get("versions") or {}, "yanked": data.get("yanked") or {}}
        for part, value in index.items():
            if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                raise IntegrityError(f"{self.url}: {repo_id}/{INDEX} at {str(head)[:12]} is malformed: {part!r} must "
                                     "be an object of versions to objects",
                                     hint="the repo was edited by hand or damaged; ask its owners to restore the file")
        return {"versions": dict(index["versions"]), "yanked": dict(index["yanked"])}

    def _entries(self, repo_id: str, refs: GitRefs) -> list[VersionEntry]:
        index = self._index(repo_id, _main(refs))
        entries = []
        for ref in refs.tags:
            try:
                version = Version(ref.name[1:]) if ref.name.startswith("v") else None
            except InvalidVersion:
                version = None
            if version is None:
                continue  # not a tag envhub made
            key = version_key(str(version))
            data = index["versions"].get(key)
            where = f"{key!r} of {repo_id}/{INDEX}"
            if data is None:  # the index lost it: the version's own commit says what it is
                doc = self.hub.read_json(repo_id, VERSION_FILE, ref.target_commit)
                data = doc.get("entry") if doc else None
                where = f"of {repo_id}/{VERSION_FILE} at {ref.target_commit[:12]}"
                if not isinstance(data, dict):
                    continue
            entry = VersionEntry.from_json(data, registry=self.url, where=where, name=repo_id, key=key)
            yank = index["yanked"].get(key)
            if yank is not None and not isinstance(yank.get("reason"), (str, type(None))):
                raise IntegrityError(f"{self.url}: the yank of {key!r} in {repo_id}/{INDEX} is malformed: 'reason' "
                                     "must be a string", hint="the repo was edited by hand or damaged; ask its "
                                                              "owners to restore the file")
            entry = replace(entry, locator=ref.target_commit, yanked=yank is not None,
                            yank_reason=(yank or {}).get("reason"))
            entries.append(entry)
        return sorted(entries, key=lambda e: e.parsed_version)

    def versions(self, name: str) -> list[VersionEntry]:
        repo_id = str(parse_name(name))
        with self.hub.errors("read the index", repo_id):
            refs = self.hub.refs(repo_id)
            entries = self._entries(repo_id, refs) if refs is not None else []
        if not entries:
            hint = "publish it with 'envhub push', or search with 'envhub search'"
            if refs is None and not self.hub.logged_in:
                hint += f"; if its repo is private, {LOGIN_HINT}"
            raise EnvNotFoundError(f"{name} is not in {self.url}", hint=hint)
        return entries

    def open_archive(self, entry: VersionEntry) -> IO[bytes]:
        """The archive of ``entry``, rebuilt from the files of its commit (``entry.locator``,
        else its tag) and verified against ``entry.digest``."""
        repo_id = str(parse_name(entry.name))
        revision = entry.locator or tag_name(entry.version)
        with self.hub.errors(f"download {entry.ref}", repo_id):
            return self.hub.fetch_archive(repo_id, revision, entry.digest, entry.ref, max_bytes=self.max_bundle_bytes)

    def search(self, query: str, *, tag: str | None = None) -> list[VersionEntry]:
        query = query.lower()
        hits = []
        with self.hub.errors("search", "envhub"):
            names = sorted(d.id for d in self.hub.api.list_datasets(filter="envhub")
                           if not d.id.endswith(HELDOUT_SUFFIX))
        for name in names:
            with self.hub.errors("read the index", name):
                refs = self.hub.refs(name)
                entries = [e for e in self._entries(name, refs) if not e.yanked] if refs else []
            if not entries:
                continue
            latest = entries[-1]
            text = " ".join([latest.name, latest.description, *latest.tags]).lower()
            if query in text and (tag is None or tag in latest.tags):
                hits.append(latest)
        return hits

    # --- writing -------------------------------------------------------------------------

    def heldout_store(self) -> HfHeldoutStore:
        return HfHeldoutStore(self)

    def publish(self, bundle: BuiltBundle) -> PublishResult:
        repo_id = bundle.name
        with self.hub.errors("publish", repo_id), tempfile.TemporaryDirectory(prefix="envhub-hf-push-") as tmp:
            tree = read_tree(bundle.public.path, bundle.public.digest, bundle.public.size, Path(tmp) / "tree",
                             max_bytes=self.max_bundle_bytes)
            check_no_clash(tree.files, bundle.name, bundle.version, self.url)
            for _ in range(_ATTEMPTS):
                refs = self.hub.refs(repo_id)
                if refs is None:
                    self.hub.api.create_repo(repo_id, repo_type=REPO_TYPE, private=False, exist_ok=True)
                    refs = self.hub.refs(repo_id)
                    if refs is None:
                        raise EnvNotFoundError(f"{self.url}: cannot publish: {repo_id} exists "
                                               "but your token cannot read it",
                                               hint=f"ask the owners of {bundle.name.split('/')[0]} for write access")
                tagged = _tagged(refs, bundle.version)
                if tagged is not None:
                    existing = next((e for e in self._entries(repo_id, refs) if e.locator == tagged[1]
                                     and e.parsed_version == Version(bundle.version)), None)
                    if existing is None:
                        raise IntegrityError(f"{self.url}: {repo_id} has tag {tagged[0]} but no envhub entry for it",
                                             hint="the repo was edited by hand; ask its owners to repair it")
                    return same_or_conflict(existing, bundle, self.url)
                head = _main(refs)
                assert head is not None, "a Hub repo always has a main branch"
                entry, commit = self._commit_version(repo_id, bundle, tree, head)
                if commit is None:
                    continue  # another push moved main: read again, then retry on top of it
                if not self.hub.tag(repo_id, bundle.version, commit, f"envhub: {bundle.name} {bundle.version}"):
                    continue  # another push tagged this version first: compare with it
                return PublishResult(replace(entry, locator=commit, registry=self.url), created=True)
        raise RegistryError(f"{self.url}: cannot publish {bundle.name}@{bundle.version}: {repo_id} kept changing "
                            f"while pushing ({_ATTEMPTS} attempts)", hint="others are pushing to it; try again")

    def _commit_version(self, repo_id: str, bundle: BuiltBundle, tree: ArchiveTree,
                        head: str) -> tuple[VersionEntry, str | None]:
        """Commit ``bundle``'s tree on top of ``head``: its entry, and the commit id (None if
        main moved meanwhile)."""
        index = self._index(repo_id, head)
        key = version_key(bundle.version)
        entry = VersionEntry.for_bundle(bundle)
        earlier = index["versions"].get(key)
        if earlier is not None and earlier.get("digest") == bundle.public.digest:
            # A push killed between its commit and its tag: keep its publication time.
            entry = replace(entry, published_at=earlier.get("published-at", entry.published_at))
        data = _stored(entry)
        index["versions"][key] = data
        index["yanked"].pop(key, None)  # a yank of an invisible (untagged) version means nothing
        files: dict[str, Path | bytes] = dict(tree.files)
        own_readme = tree.files.get("README.md")
        readme, prefix = card(bundle.manifest, own_readme.read_bytes() if own_readme else None)
        files["README.md"] = readme
        files[DESCRIPTOR] = descriptor(bundle.manifest)
        files[VERSION_FILE] = version_document(data, tree.archive_info(prefix))
        files[INDEX] = _index_document(index)
        commit = self.hub.commit_tree(repo_id, files, head=head, existing=self.hub.tree_paths(repo_id, head),
                                      message=f"envhub: publish {bundle.name} {bundle.version}")
        return entry, commit

    def yank(self, name: str, version: str, reason: str) -> VersionEntry:
        repo_id = str(parse_name(name))
        for _ in range(_ATTEMPTS):
            entries = self.versions(name)
            match = next((e for e in entries if version_key(e.version) == version_key(version)), None)
            if match is None:
                existing = ", ".join(e.version for e in entries)
                raise EnvNotFoundError(f"{name}@{version} is not in {self.url}; versions: {existing}")
            if match.yanked:
                return match  # the first reason stays
            with self.hub.errors("yank", repo_id):
                refs = self.hub.refs(repo_id)
                head = _main(refs) if refs else None
                assert head is not None
                index = self._index(repo_id, head)
                index["yanked"][version_key(match.version)] = {"reason": reason, "yanked-at": utc_now()}
                if self._commit_index(repo_id, index, head, f"envhub: yank {match.ref}: {reason}"):
                    return replace(match, yanked=True, yank_reason=reason)
        raise RegistryError(f"{self.url}: cannot yank {name}@{version}: {repo_id} kept changing ({_ATTEMPTS} attempts)",
                            hint="others are pushing to it; try again")

    def _commit_index(self, repo_id: str, index: dict[str, Any], head: str, message: str) -> bool:
        from huggingface_hub import CommitOperationAdd
        from huggingface_hub.errors import HfHubHTTPError

        try:
            self.hub.api.create_commit(repo_id, [CommitOperationAdd(INDEX, _index_document(index))],
                                       commit_message=message, repo_type=REPO_TYPE, parent_commit=head)
        except HfHubHTTPError as e:
            if status_of(e) in (409, 412):
                return False
            raise
        return True


def _stored(entry: VersionEntry) -> dict[str, Any]:
    data = entry.to_json()
    for transient in ("registry", "yanked", "yank-reason", "locator"):
        data.pop(transient)
    return data


def _index_document(index: dict[str, Any]) -> bytes:
    return (json.dumps({"format": 1, **index}, indent=2, sort_keys=True) + "\n").encode()


class HfHeldoutStore:
    """Held-out splits in a private companion repo ``<namespace>/<name>-heldout``, one
    commit and tag per version, like the public repo. Never public: a push refuses a
    companion repo that exists and is public."""

    def __init__(self, registry: HfRegistry) -> None:
        self.registry = registry
        self.hub = registry.hub

    @property
    def url(self) -> str:
        return f"{self.registry.url} (private repos <namespace>/<name>{HELDOUT_SUFFIX})"

    @staticmethod
    def repo_id(name: str) -> str:
        return f"{name}{HELDOUT_SUFFIX}"

    def where(self, name: str) -> str:
        return f"the private repo {self.repo_id(name)} on {self.hub.endpoint}"

    def put(self, bundle: BuiltBundle) -> None:
        """Upload the held-out archive's files to the companion repo (created private).
        The same digest already tagged is a no-op; another digest is a VersionConflictError."""
        assert bundle.heldout is not None
        with tarfile.open(bundle.public.path, mode="r:") as public:  # refused before anything is uploaded
            check_no_clash(dict.fromkeys(public.getnames()), bundle.name, bundle.version, self.registry.url)
        repo_id = self.repo_id(bundle.name)
        with self.hub.errors("store held-out splits", repo_id), \
                tempfile.TemporaryDirectory(prefix="envhub-hf-heldout-") as tmp:
            self._ensure_private(repo_id)
            tree = read_tree(bundle.heldout.path, bundle.heldout.digest, bundle.heldout.size, Path(tmp) / "tree",
                             max_bytes=self.registry.max_bundle_bytes)
            for _ in range(_ATTEMPTS):
                refs = self.hub.refs(repo_id)
                assert refs is not None
                tagged = _tagged(refs, bundle.version)
                if tagged is not None:
                    doc = self.hub.read_json(repo_id, VERSION_FILE, tagged[1]) or {}
                    digest = (doc.get("archive") or {}).get("digest")
                    if digest == bundle.heldout.digest:
                        return
                    raise VersionConflictError(
                        f"{bundle.name}@{bundle.version} already has other held-out splits in {repo_id} "
                        f"({str(digest)[:19]}..., yours are {bundle.heldout.digest[:19]}...)",
                        hint="versions are immutable: bump [environment] version and push again")
                head = _main(refs)
                assert head is not None
                files: dict[str, Path | bytes] = dict(tree.files)
                files[VERSION_FILE] = version_document({"name": bundle.name, "version": bundle.version},
                                                       tree.archive_info())
                commit = self.hub.commit_tree(repo_id, files, head=head, existing=self.hub.tree_paths(repo_id, head),
                                              message=f"envhub: held-out splits of {bundle.name} {bundle.version}")
                if commit is not None and self.hub.tag(repo_id, bundle.version, commit,
                                                       f"envhub: held-out {bundle.name} {bundle.version}"):
                    return
        raise RegistryError(f"{self.registry.url}: cannot store held-out splits: {repo_id} kept changing "
                            f"({_ATTEMPTS} attempts)", hint="others are pushing to it; try again")

    def record(self, entry: VersionEntry) -> None:
        """Nothing to do: :meth:`put` tagged the companion repo's commit ``v<version>``, and a
        tag, once made, is never moved."""

    def _ensure_private(self, repo_id: str) -> None:
        from huggingface_hub.errors import RepositoryNotFoundError

        try:
            info = self.hub.api.repo_info(repo_id, repo_type=REPO_TYPE)
        except RepositoryNotFoundError:
            self.hub.api.create_repo(repo_id, repo_type=REPO_TYPE, private=True, exist_ok=True)
            info = self.hub.api.repo_info(repo_id, repo_type=REPO_TYPE)
        if not info.private:
            raise RegistryError(
                f"{self.registry.url}: refusing to push held-out splits: {repo_id} exists and is public",
                hint=f"make {repo_id} private on {self.hub.endpoint} (its settings), or delete it; "
                     "held-out splits never go to a public repo")

    def open(self, entry: VersionEntry) -> IO[bytes]:
        """The held-out archive of ``entry``, from the companion repo's tag, verified against
        ``entry.heldout_digest``. Raises EnvNotFoundError saying what access is needed."""
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

        if entry.heldout_digest is None:
            raise EnvNotFoundError(f"{entry.ref} has no held-out splits")
        repo_id = self.repo_id(entry.name)
        with self.hub.errors(f"download the held-out splits of {entry.ref}", repo_id):
            try:
                return self.hub.fetch_archive(repo_id, tag_name(entry.version), entry.heldout_digest,
                                              f"the held-out splits of {entry.ref}",
                                              max_bytes=self.registry.max_bundle_bytes)
            except RevisionNotFoundError as e:
                raise EnvNotFoundError(f"the held-out splits of {entry.ref} are not in {self.where(entry.name)}",
                                       hint="the push that published them did not finish; ask the publisher to "
                                            "push this version again") from e
            except RepositoryNotFoundError as e:
                if isinstance(e, GatedRepoError):
                    raise
                raise _no_access(self, entry) from e

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"HfHeldoutStore({self.registry.url!r})"


def _no_access(store: HfHeldoutStore, entry: VersionEntry) -> EnvNotFoundError:
    who = "your token" if store.hub.logged_in else "an anonymous client (you are not logged in)"
    return EnvNotFoundError(
        f"the held-out splits of {entry.ref} are in {store.where(entry.name)}, which {who} cannot read",
        hint=f"ask the owners of {entry.name.split('/')[0]} for read access to {store.repo_id(entry.name)}, "
             f"then {LOGIN_HINT} with that account")

