"""Registries: where environments are published and pulled, chosen by URL scheme."""

from __future__ import annotations

from envhub.errors import RegistryError
from envhub.registry._base import PublishResult, Registry, VersionEntry, select_version, version_key
from envhub.registry._config import RegistryConfig, load_registry_config

__all__ = [
    "PublishResult",
    "Registry",
    "RegistryConfig",
    "VersionEntry",
    "load_registry_config",
    "open_heldout_store",
    "open_registry",
    "select_version",
    "version_key",
]


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else "file"


def open_registry(url: str) -> Registry:
    """The registry at ``url``: any fsspec URL or a plain directory path."""
    import fsspec

    scheme = _scheme(url)
    if scheme not in fsspec.available_protocols():
        raise RegistryError(f"unknown registry scheme {scheme!r} in {url!r}",
                            hint="use a directory path, file://, memory://, s3:// or another fsspec URL")
    from envhub.registry._fsspec import FsspecRegistry

    return FsspecRegistry(url)


def open_heldout_store(url: str):  # type: ignore[no-untyped-def]
    from envhub.registry._fsspec import HeldoutStore

    return HeldoutStore(url)
