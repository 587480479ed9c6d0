"""Registries: where environments are published and pulled, chosen by URL scheme."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envhub.errors import RegistryError
from envhub.registry._base import PublishResult, Registry, VersionEntry, select_version, version_key
from envhub.registry._config import RegistryConfig, load_registry_config

if TYPE_CHECKING:
    from envhub.registry._base import HeldoutStoreLike
    from envhub.settings import Settings

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


def open_registry(url: str, settings: Settings | None = None) -> Registry:
    """The registry at ``url``: ``hf://`` (the Hugging Face Hub), any fsspec URL, or a plain
    directory path. ``settings`` (default: read from the environment) gives the Hub's token
    and endpoint. Raises RegistryError for an unknown scheme or a malformed URL."""
    scheme = _scheme(url)
    if scheme == "hf":
        from envhub.registry._hf import HfRegistry
        from envhub.settings import load_settings

        return HfRegistry(url, settings or load_settings())
    import fsspec

    if scheme not in fsspec.available_protocols():
        raise RegistryError(f"unknown registry scheme {scheme!r} in {url!r}",
                            hint="use a directory path, file://, memory://, s3:// or another fsspec URL")
    from envhub.registry._fsspec import FsspecRegistry

    return FsspecRegistry(url)


def open_heldout_store(url: str) -> HeldoutStoreLike:
    """The held-out store at ``url`` (an fsspec URL or a directory)."""
    from envhub.registry._fsspec import HeldoutStore

    return HeldoutStore(url)
