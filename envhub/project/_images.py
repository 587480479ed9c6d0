"""The container images of locked environments (``images`` in ``envhub.lock``).

An environment whose ``[state] base`` is ``oci:IMAGE@sha256:...`` runs its workspaces in that
image. The image is a function of the environment's archive (its manifest names it by
digest), so ``envhub lock`` reads it from the archive it locks (the cached one, else one
fetched and verified into a temporary directory) and records it; ``envhub sync`` pulls the recorded images
through the plugin that runs ``oci:`` workspaces, and calls a lock stale when a locked
environment references an image the lock does not record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envhub.errors import EnvhubError
from envhub.lookup import PluginLookup
from envhub.project._lockfile import LockedEnv, Lockfile
from envhub.registry import VersionEntry
from envhub.settings import Settings

if TYPE_CHECKING:
    from envhub.cache import Cache

__all__ = ["ImagePull", "bundle_images", "entry_images", "pull_images", "unrecorded_images"]


def bundle_images(bundle: Path) -> tuple[str, ...]:
    """The images the manifest of the bundle directory ``bundle`` references, sorted
    (``REGISTRY/REPOSITORY[:TAG]@sha256:...``, without ``oci:``)."""
    from envhub import _toml
    from envhub.manifest import MANIFEST_FILENAME, base_image

    try:
        data = _toml.loads((bundle / MANIFEST_FILENAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, _toml.TOMLDecodeError):
        return ()  # not an environment's bundle this module can read: it references nothing
    state = data.get("state")
    base = state.get("base") if isinstance(state, dict) else None
    image = base_image(base) if isinstance(base, str) else None
    return (image,) if image else ()


def entry_images(entry: VersionEntry, settings: Settings, *, plugins: PluginLookup, offline: bool = False,
                 cache: Cache | None = None) -> tuple[str, ...] | None:
    """The images the locked version ``entry`` references, read from its archive: the one in
    the cache, else one fetched (and verified against its digest) into a temporary directory
    removed afterwards, so locking leaves the cache as it was (``envhub sync`` fills it).
    None when it is not in the cache and ``offline``: the images are unknown until it is."""
    import shutil
    import tempfile

    from envhub.cache import Cache
    from envhub.hub import fetch

    cache = cache or Cache(settings.cache)
    path = cache.cached(entry)
    if path is not None:
        return bundle_images(path)
    if offline:
        return None
    scratch = Path(tempfile.mkdtemp(prefix="envhub-lock-"))
    try:
        return bundle_images(fetch(entry, entry.registry, settings, cache=Cache(scratch), plugins=plugins).path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def unrecorded_images(lock: Lockfile, entry_of: Callable[[LockedEnv], VersionEntry], cache: Cache) -> str | None:
    """Why ``lock`` is stale for its images (None when it is not): a locked environment in
    ``cache`` whose manifest references an image its lock entry does not record.
    ``entry_of`` gives a locked environment's index entry."""
    for env in lock.environments.values():
        path = cache.cached(entry_of(env))
        if path is None:
            continue
        missing = sorted(set(bundle_images(path)) - set(env.images))
        if missing:
            return f"{env.ref} references the image {missing[0]}, which the lock does not record"
    return None


@dataclass(frozen=True)
class ImagePull:
    """What ``envhub sync`` did about one locked image."""

    image: str
    #: The locked environments (``name@version``) that reference it.
    environments: tuple[str, ...]
    pulled: bool
    #: Why it was not pulled: no plugin runs ``oci:`` workspaces, or no container engine works.
    reason: str | None = None


def pull_images(lock: Lockfile, *, plugins: PluginLookup) -> list[ImagePull]:
    """Pull every image ``lock`` records, by digest, with the plugin that runs ``oci:``
    workspaces (its backend's ``pull``). Never raises for an image it cannot pull: that is
    reported in its :class:`ImagePull`, and the others are still pulled."""
    users: dict[str, list[str]] = {}
    for env in lock.environments.values():
        for image in env.images:
            users.setdefault(image, []).append(env.ref)
    if not users:
        return []
    from envhub.manifest import OCI_SCHEME

    try:
        backend = plugins.lookup("workspace_backends", OCI_SCHEME)
    except EnvhubError as e:  # two plugins provide it
        return _not_pulled(users.items(), e.message)
    if backend is None or backend.pull is None:
        return _not_pulled(users.items(), "no installed plugin runs oci: workspaces "
                                          "(pip install envhub-containers to run them with podman or docker)")
    out = []
    for image, refs in sorted(users.items()):
        try:
            backend.pull(image)
        except EnvhubError as e:
            out.append(ImagePull(image, tuple(sorted(refs)), False, e.message))
        else:
            out.append(ImagePull(image, tuple(sorted(refs)), True))
    return out


def _not_pulled(users: Iterable[tuple[str, list[str]]], reason: str) -> list[ImagePull]:
    return [ImagePull(image, tuple(sorted(refs)), False, reason) for image, refs in sorted(users)]
