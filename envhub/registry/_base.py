"""The registry interface: publish, list versions, fetch, search, yank."""

from __future__ import annotations

import abc
import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import IO, TYPE_CHECKING, Any, Protocol

from packaging.version import Version

from envhub.errors import EnvNotFoundError, IntegrityError, RegistryError, VersionConflictError
from envhub.ids import EnvRef

if TYPE_CHECKING:
    from envhub.bundle import BuiltBundle

__all__ = ["HeldoutStoreLike", "PublishResult", "Registry", "VersionEntry", "is_backend_error", "select_version",
           "unreachable", "version_key"]

ENTRY_FORMAT = 1
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def version_key(version: str) -> str:
    """The key a version is stored under: '1.0' and '1.0.0' are one PEP 440 version."""
    # Imported here: packaging.utils pulls in packaging.tags, too slow for a warm pull.
    from packaging.utils import canonicalize_version

    return canonicalize_version(version, strip_trailing_zero=True)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class VersionEntry:
    """One published version, as the registry's index records it."""

    name: str
    version: str
    digest: str
    size: int
    published_at: str
    score_version: int = 1
    description: str = ""
    tags: tuple[str, ...] = ()
    heldout_digest: str | None = None
    yanked: bool = False
    yank_reason: str | None = None
    #: An immutable locator of the published bytes (a blob path; a Hub commit id).
    locator: str | None = None
    #: ``[dependencies]``: other environments and PEP 440 specifiers, sorted by name, so
    #: a resolver needs only the index, not the archives.
    dependencies: tuple[tuple[str, str], ...] = ()
    #: ``[environment] python-dependencies``: PEP 508 requirements.
    python_dependencies: tuple[str, ...] = ()
    #: The registry URL the entry came from (not stored in the index).
    registry: str = field(default="", compare=False)

    @property
    def parsed_version(self) -> Version:
        return Version(self.version)

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def to_json(self) -> dict[str, Any]:
        data = {k.replace("_", "-"): v for k, v in asdict(self).items()}
        data["tags"] = list(self.tags)
        data["dependencies"] = dict(self.dependencies)
        data["python-dependencies"] = list(self.python_dependencies)
        return data

    @classmethod
    def from_json(cls, data: Any, *, registry: str = "", where: str | None = None, name: str | None = None,
                  key: str | None = None) -> VersionEntry:
        """The entry ``data`` (an index entry's JSON) describes. Keys it does not know are
        ignored; a malformed entry raises :class:`IntegrityError` naming ``registry``,
        ``where`` (the entry: a file, a key of an index) and every bad field. ``name`` and
        ``key`` (a canonical version), if given, are where the entry was found: an entry
        that names another environment or version there is malformed too."""
        problems = _entry_problems(data, name, key)
        if problems:
            shown = f"index entry {where or '(unnamed)'}"
            if registry:
                shown = f"{registry}: {shown}"
            raise IntegrityError(f"{shown} is malformed: " + "; ".join(problems),
                                 hint="the index was damaged or edited by hand; ask the registry's owner to restore "
                                      "the entry (or to move it aside and push that version again)")
        known = {f.replace("_", "-"): f for f in cls.__dataclass_fields__}
        kwargs = {known[k]: v for k, v in data.items() if k in known}
        kwargs["tags"] = tuple(kwargs.get("tags", ()))
        kwargs["dependencies"] = tuple(sorted(dict(kwargs.get("dependencies") or {}).items()))
        kwargs["python_dependencies"] = tuple(kwargs.get("python_dependencies") or ())
        kwargs["registry"] = registry
        return cls(**kwargs)

    @classmethod
    def for_bundle(cls, bundle: BuiltBundle, *, locator: str | None = None) -> VersionEntry:
        env = bundle.manifest.environment
        return cls(
            name=env.name,
            version=env.version,
            digest=bundle.public.digest,
            size=bundle.public.size,
            published_at=utc_now(),
            score_version=env.score_version,
            description=env.description,
            tags=tuple(env.tags),
            heldout_digest=bundle.heldout.digest if bundle.heldout else None,
            locator=locator,
            # "*" (any version) is written as the empty specifier, which PEP 440 tools read.
            dependencies=tuple(sorted((n, "" if s.strip() in ("", "*") else s)
                                      for n, s in bundle.manifest.dependency_specifiers().items())),
            python_dependencies=tuple(env.python_dependencies),
        )


@dataclass(frozen=True)
class PublishResult:
    entry: VersionEntry
    #: False when the same digest was already published under this version (a no-op).
    created: bool


class HeldoutStoreLike(Protocol):
    """Where held-out archives are kept: never the public registry."""

    @property
    def url(self) -> str:
        """The store's URL, for messages."""

    def where(self, name: str) -> str:
        """Where ``name``'s held-out splits are kept, for messages."""

    def put(self, bundle: BuiltBundle) -> None:
        """Store ``bundle``'s held-out archive (the same digest again is a no-op), before
        the public entry is published."""

    def record(self, entry: VersionEntry) -> None:
        """Once ``entry`` is published (or found published with the same content), note in
        the store that its held-out splits are ``entry.heldout_digest``, replacing a note a
        failed push left. A store whose :meth:`put` already binds the version (the Hub's
        tags) has nothing to do."""

    def open(self, entry: VersionEntry) -> IO[bytes]:
        """A readable stream of ``entry``'s held-out archive; the caller verifies the digest.
        Raises EnvNotFoundError, saying what access is needed, if it cannot be read."""


class Registry(abc.ABC):
    """A place environments are published to and pulled from, chosen by URL."""

    url: str

    @abc.abstractmethod
    def publish(self, bundle: BuiltBundle) -> PublishResult:
        """Publish ``bundle``'s public archive. The same digest again is a no-op
        (``created=False``); other content under an existing version raises
        :class:`envhub.errors.VersionConflictError`. Atomic: a failed publish leaves no
        visible version."""

    @abc.abstractmethod
    def versions(self, name: str) -> list[VersionEntry]:
        """Every published version of ``name``, yanked ones included, oldest first.
        Raises :class:`EnvNotFoundError` if there is none."""

    @abc.abstractmethod
    def open_archive(self, entry: VersionEntry) -> IO[bytes]:
        """A readable stream of the public archive. The caller verifies the digest."""

    def local_archive(self, entry: VersionEntry) -> str | None:
        """A local file holding the archive, if the registry is on this machine (so a
        pull can verify and extract it without copying it first)."""
        return None

    def heldout_store(self) -> HeldoutStoreLike | None:
        """The registry's own place for held-out splits (the Hub's private companion
        repos), or None to use the configured held-out store (``ENVHUB_HELDOUT_STORE``)."""
        return None

    @abc.abstractmethod
    def search(self, query: str, *, tag: str | None = None) -> list[VersionEntry]:
        """The newest non-yanked version of each environment whose name, description or
        tags contain ``query`` (case-insensitive), restricted to ``tag`` if given."""

    @abc.abstractmethod
    def yank(self, name: str, version: str, reason: str) -> VersionEntry:
        """Hide a version from resolution; it stays fetchable by exact pin."""

    @contextmanager
    def _wrap_errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except PermissionError as e:
            raise RegistryError(f"{self.url}: cannot {action}: permission denied ({e.filename or e})",
                                hint="check that you may write to this registry, "
                                     "or choose another with --registry") from e
        except OSError as e:
            if isinstance(e, FileNotFoundError):
                raise
            raise RegistryError(f"{self.url}: cannot {action}: {e}") from e
        except Exception as e:
            if not is_backend_error(e):
                raise
            raise unreachable(self.url, action, e) from e


# Storage clients raise their own exception types for network failures (botocore's are
# not OSErrors): recognised by module, so a bug of ours is still reported as one.
_BACKEND_MODULES = ("botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "adlfs", "requests", "urllib3", "httpx")


def is_backend_error(e: BaseException) -> bool:
    return type(e).__module__.split(".")[0] in _BACKEND_MODULES


def unreachable(url: str, action: str, e: BaseException) -> RegistryError:
    return RegistryError(f"{url}: cannot {action}: {type(e).__name__}: {e}",
                         hint="check the registry URL, your network and your credentials, or use --offline")


def _is_digest(value: object) -> bool:
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_version(value: object) -> bool:
    from packaging.version import InvalidVersion

    try:
        Version(value)  # type: ignore[arg-type]
    except (InvalidVersion, TypeError):
        return False
    return True


def _is_name(value: object) -> bool:
    from envhub.errors import InvalidIdError
    from envhub.ids import parse_name

    try:
        return isinstance(value, str) and str(parse_name(value)) == value
    except InvalidIdError:
        return False


_DIGEST_TEXT = "a string 'sha256:' and 64 lowercase hex digits"
#: key -> (required, check, what it must be). Optional keys may also be null where the
#: check accepts None.
_ENTRY_FIELDS: dict[str, tuple[bool, Callable[[object], bool], str]] = {
    "name": (True, _is_name, "an environment id 'namespace/name'"),
    "version": (True, _is_version, "a PEP 440 version string"),
    "digest": (True, _is_digest, _DIGEST_TEXT),
    "size": (True, _is_count, "a non-negative integer"),
    "published-at": (True, lambda v: isinstance(v, str), "a string"),
    "score-version": (False, lambda v: _is_count(v) and v >= 1, "a positive integer"),  # type: ignore[operator]
    "description": (False, lambda v: isinstance(v, str), "a string"),
    "tags": (False, _is_str_list, "an array of strings"),
    "heldout-digest": (False, lambda v: v is None or _is_digest(v), f"null or {_DIGEST_TEXT}"),
    "yanked": (False, lambda v: isinstance(v, bool), "true or false"),
    "yank-reason": (False, lambda v: v is None or isinstance(v, str), "null or a string"),
    "locator": (False, lambda v: v is None or isinstance(v, str), "null or a string"),
    "dependencies": (False, lambda v: v is None or (isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(s, str) for k, s in v.items())),
        "an object of environment ids to specifiers"),
    "python-dependencies": (False, lambda v: v is None or _is_str_list(v), "an array of strings"),
}


def _shown(value: object) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _entry_problems(data: object, name: str | None, key: str | None) -> list[str]:
    """Every way ``data`` is not an index entry (section 3.1 of spec/registry.md)."""
    if not isinstance(data, dict):
        return [f"expected a JSON object, got {_shown(data)}"]
    problems = []
    for field_name, (required, check, what) in _ENTRY_FIELDS.items():
        if field_name not in data:
            if required:
                problems.append(f"{field_name!r} is missing (expected {what})")
        elif not check(data[field_name]):
            problems.append(f"{field_name!r} must be {what}, not {_shown(data[field_name])}")
    if name is not None and "name" in data and data["name"] != name and _is_name(data["name"]):
        problems.append(f"'name' is {data['name']!r}, but the entry is in the index of {name}")
    if key is not None and _is_version(data.get("version")) and version_key(data["version"]) != key:
        problems.append(f"'version' is {data['version']!r}, but the entry is stored as version {key}")
    return problems


def select_version(entries: list[VersionEntry], ref: EnvRef) -> tuple[VersionEntry, str | None]:
    """The entry ``ref`` resolves to, and a warning if it is yanked.

    The highest non-yanked version that matches; an exact pin also matches a yanked
    version (with a warning). Pre-releases only when the reference names one.
    Raises :class:`EnvNotFoundError` listing the versions that exist.
    """
    pinned = ref.pinned
    if pinned is not None:
        for entry in entries:
            if entry.parsed_version == pinned:
                warning = None
                if entry.yanked:
                    warning = (f"{entry.ref} is yanked" + (f": {entry.yank_reason}" if entry.yank_reason else "")
                               + "; using it because it was pinned exactly")
                return entry, warning
    else:
        specs = list(ref.specifier or ())
        wants_pre = any(Version(s.version).is_prerelease for s in specs if not s.version.endswith("*"))
        candidates = [e for e in entries if not e.yanked and ref.accepts(e.parsed_version, prereleases=wants_pre)]
        if candidates:
            return max(candidates, key=lambda e: e.parsed_version), None
    existing = ", ".join(e.version + (" (yanked)" if e.yanked else "") for e in entries) or "none"
    raise EnvNotFoundError(f"no version of {ref.name} matches {str(ref)!r}; versions: {existing}",
                           hint=f"pin one that exists, e.g. '{ref.name}@{entries[-1].version}'" if entries else None)


def same_or_conflict(existing: VersionEntry, bundle: BuiltBundle, url: str) -> PublishResult:
    """A push of a version that already exists in ``url``: a no-op for the same digest,
    else :class:`VersionConflictError` (versions are immutable)."""
    if existing.digest == bundle.public.digest:
        return PublishResult(existing, created=False)
    raise VersionConflictError(
        f"{existing.ref} is already published in {url} with different content "
        f"({existing.digest[:19]}..., yours is {bundle.public.digest[:19]}...)",
        hint=f"versions are immutable: bump [environment] version (e.g. to "
             f"{_next_version(existing.version)}) and push again",
    )


def _next_version(version: str) -> str:
    v = Version(version)
    release = list(v.release) + [0] * (3 - len(v.release))
    return f"{release[0]}.{release[1]}.{release[2] + 1}"
