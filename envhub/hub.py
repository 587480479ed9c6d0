"""Push and pull: the registry operations behind ``envhub push`` and ``envhub pull``."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from envhub.cache import ORIGIN, Cache
from envhub.errors import EnvNotFoundError, UsageError, VersionConflictError
from envhub.ids import EnvRef, parse_ref
from envhub.registry import PublishResult, Registry, VersionEntry, select_version
from envhub.settings import Settings

if TYPE_CHECKING:
    from envhub.bundle import BuiltBundle
    from envhub.lookup import PluginLookup

__all__ = ["PullResult", "PushResult", "fetch", "materialize", "pull", "push"]


@dataclass(frozen=True)
class PushResult:
    publish: PublishResult
    heldout_store: str | None


def push(path: Path, registry: Registry, *, heldout_url: str | None, plugins: PluginLookup) -> PushResult:
    """Build the bundle at ``path`` and publish it; held-out archives go to the registry's
    own held-out store if it has one (the Hub's private companion repos), else to
    ``heldout_url``, never to the registry."""
    from envhub.bundle import build_bundle
    from envhub.registry import open_heldout_store

    with tempfile.TemporaryDirectory(prefix="envhub-push-") as out:
        bundle = build_bundle(path, out, plugins=plugins)
        _check_path_dependencies(bundle, registry, out, plugins)
        store = None
        if bundle.heldout is not None:
            store = registry.heldout_store()
            if store is None:
                if heldout_url is None:
                    raise UsageError(f"{bundle.name} has held-out splits but no held-out store is configured",
                                     hint="set ENVHUB_HELDOUT_STORE")
                store = open_heldout_store(heldout_url)
            # Held-out first: a public version never points at held-out bytes that are missing.
            store.put(bundle)
        result = registry.publish(bundle)
        if store is not None:  # then the store's note, from the public entry (a re-push repairs it)
            store.record(result.entry)
    return PushResult(result, store.where(bundle.name) if store is not None else None)


def _check_path_dependencies(bundle: BuiltBundle, registry: Registry, out: str, plugins: PluginLookup) -> None:
    """The public manifest pins each path dependency to its directory's version, so that
    version must be in ``registry`` already, with the directory's content (else the bundle
    was checked with something nobody can pull). Raises EnvNotFoundError or
    VersionConflictError saying which to push first."""
    from packaging.version import Version

    from envhub.bundle import build_bundle

    for name, dependency in sorted(bundle.path_dependencies.items()):
        try:
            published = [e for e in registry.versions(name) if e.parsed_version == Version(dependency.version)]
        except EnvNotFoundError:
            published = []
        if not published:
            raise EnvNotFoundError(f"{bundle.name} {bundle.version} depends on {name}=={dependency.version} "
                                   f"(path {dependency.path!r}), which is not in {registry.url}",
                                   hint=f"push it to this registry first: envhub push {dependency.root}")
        local = build_bundle(dependency.root, Path(out) / "path-dependencies" / name, plugins=plugins).public.digest
        if local != published[0].digest:
            raise VersionConflictError(
                f"{bundle.name} {bundle.version} was checked with {name} {dependency.version} from "
                f"{dependency.root}, whose content differs from {name} {dependency.version} in {registry.url}",
                hint=f"bump the version in {dependency.root / 'envhub.toml'} and push it, or restore the content "
                     "published under that version")


@dataclass(frozen=True)
class PullResult:
    entry: VersionEntry
    path: Path
    cached: bool
    heldout_path: Path | None = None
    warning: str | None = None


def resolve(ref: EnvRef, registry_url: str, cache: Cache, *, offline: bool, settings: Settings,
            plugins: PluginLookup) -> tuple[VersionEntry, str | None, Registry | None]:
    """Resolve ``ref`` to a version entry. An exact pin already in the cache needs no
    registry (versions are immutable); ``offline`` uses only what the cache remembers."""
    pinned = ref.pinned
    remembered = cache.remembered(registry_url, str(ref.name))
    if pinned is not None:
        for entry in remembered:
            if entry.parsed_version == pinned and cache.has(entry.digest):
                return (*select_version([entry], ref), None)
    if offline:
        if not remembered:
            raise EnvNotFoundError(f"{ref.name} is not in the cache (offline)",
                                   hint=f"pull it once online: envhub pull {ref}")
        try:
            entry, warning = select_version(remembered, ref)
        except EnvNotFoundError:
            cached = ", ".join(e.version for e in remembered)
            raise EnvNotFoundError(f"{ref} is not in the cache (offline); cached versions: {cached}",
                                   hint=f"pull it once online: envhub pull {ref}") from None
        if not cache.has(entry.digest):
            raise EnvNotFoundError(f"{entry.ref} is not in the cache (offline)",
                                   hint=f"pull it once online: envhub pull {entry.ref}")
        return entry, warning, None
    from envhub.registry import open_registry

    registry = open_registry(registry_url, settings, plugins=plugins)
    entry, warning = select_version(registry.versions(str(ref.name)), ref)
    return entry, warning, registry


def pull(ref_text: str, registry_url: str, settings: Settings, *, with_heldout: bool | Literal["if-any"] = False,
         heldout_url: str | None = None, offline: bool = False, locator: str | None = None,
         plugins: PluginLookup) -> PullResult:
    """Resolve, fetch, verify and extract into the cache; return where it is.

    ``locator`` (from a lockfile) is the immutable place of the version's bytes (a Hub
    commit id): the fetch uses it instead of what the registry's index says today; the
    digest is checked all the same."""
    ref = parse_ref(ref_text)
    cache = Cache(settings.cache)
    entry, warning, registry = resolve(ref, registry_url, cache, offline=offline, settings=settings, plugins=plugins)
    if locator is not None:
        entry = replace(entry, locator=locator)
    result = fetch(entry, registry_url, settings, registry=registry, with_heldout=with_heldout,
                   heldout_url=heldout_url, offline=offline, cache=cache, plugins=plugins)
    return replace(result, warning=warning)


def fetch(entry: VersionEntry, registry_url: str, settings: Settings, *, registry: Registry | None = None,
          with_heldout: bool | Literal["if-any"] = False, heldout_url: str | None = None, offline: bool = False,
          cache: Cache | None = None, plugins: PluginLookup) -> PullResult:
    """Make sure ``entry`` (already resolved: from an index, or a lockfile) is in the
    cache, verified against its digest; fetch it from ``registry_url`` if it is not.

    ``with_heldout`` fetches its held-out archive too: True raises
    :class:`EnvNotFoundError` when it has none, ``"if-any"`` fetches it when there is one
    (a composite has none of its own: its children's come with them)."""
    from envhub.registry import open_heldout_store, open_registry

    cache = cache or Cache(settings.cache)
    cached_path = cache.cached(entry)
    cached = cached_path is not None
    if cached_path is None:
        from envhub.registry import is_backend_error, unreachable

        if offline:
            raise EnvNotFoundError(f"{entry.ref} is not in the cache (offline)",
                                   hint=f"fetch it once online: envhub pull {entry.ref}")
        registry = source = registry or open_registry(registry_url, settings, plugins=plugins)
        try:
            path, cached = cache.install(entry, entry.digest, kind="bundles", max_bytes=settings.max_bundle_bytes,
                                         local=source.local_archive(entry), opener=lambda: source.open_archive(entry))
        except Exception as e:
            if not is_backend_error(e):
                raise
            raise unreachable(registry_url, f"download {entry.ref}", e) from e
    else:
        path = cached_path
    if registry is not None:
        cache.remember(entry)
    heldout_path = None
    if with_heldout == "if-any" and entry.heldout_digest is None:
        pass
    elif with_heldout:
        if entry.heldout_digest is None:
            raise EnvNotFoundError(f"{entry.ref} has no held-out splits")
        heldout_path = cache.cached_heldout(entry)  # checked to be entry's, like a fresh pull
        if heldout_path is not None:
            pass
        elif offline:
            raise EnvNotFoundError(f"the held-out splits of {entry.ref} are not in the cache (offline)")
        else:
            registry = registry or open_registry(registry_url, settings, plugins=plugins)
            store = registry.heldout_store() or open_heldout_store(heldout_url or settings.default_heldout_store)
            heldout_path, _ = cache.install(entry, entry.heldout_digest, kind="heldout",
                                            max_bytes=settings.max_bundle_bytes,
                                            local=None, opener=lambda: store.open(entry))
    return PullResult(entry, path, cached, heldout_path)


def materialize(result: PullResult, dest: Path) -> Path:
    """Copy a pulled bundle (and its held-out files) into ``dest``, which must not exist
    or be empty. Written beside ``dest`` first and renamed into place."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(f"{dest} already exists and is not empty", hint="choose a new directory with -o")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        shutil.copytree(result.path, staging, dirs_exist_ok=True)
        if result.heldout_path is not None:
            shutil.copytree(result.heldout_path, staging, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("RECORD", "ORIGIN.json"))
        (staging / ORIGIN).unlink(missing_ok=True)
        if dest.exists():
            dest.rmdir()
        staging.rename(dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest
