"""Registries: where environments are published and pulled, chosen by URL scheme."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envhub.errors import RegistryError
from envhub.registry._base import (
    PublishResult,
    Registry,
    VersionEntry,
    is_backend_error,
    select_version,
    unreachable,
    version_key,
)
from envhub.registry._config import RegistryConfig, load_registry_config

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup
    from envhub.registry._base import HeldoutStoreLike
    from envhub.registry._fsspec import BlobStore, FsspecRegistry
    from envhub.registry._hf import HfRegistry
    from envhub.settings import Settings

__all__ = [
    "BlobStore",
    "FsspecRegistry",
    "HfRegistry",
    "PublishResult",
    "Registry",
    "RegistryConfig",
    "VersionEntry",
    "is_backend_error",
    "load_registry_config",
    "open_heldout_store",
    "open_registry",
    "select_version",
    "unreachable",
    "version_key",
]


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else "file"


def open_registry(url: str, settings: Settings, *, plugins: PluginLookup) -> Registry:
    """The registry at ``url``: ``hf://`` (the Hugging Face Hub), any fsspec URL, a plain
    directory path, or a scheme a plugin registered on ``plugins`` provides (the built-in
    plugin provides the first ones). ``settings`` gives the Hub's token and endpoint.
    Raises RegistryError for an unknown scheme or a malformed URL, and PluginConflictError
    for a scheme two plugins provide."""
    scheme = _scheme(url)
    backend = plugins.lookup("registry_backends", scheme)
    if backend is not None:
        return backend.open(url, settings)  # type: ignore[no-any-return]
    # Any other fsspec protocol (gcs://, az://, ...) is a directory registry too.
    import fsspec

    if scheme not in fsspec.available_protocols():
        raise RegistryError(f"unknown registry scheme {scheme!r} in {url!r}",
                            hint="use a directory path, file://, memory://, s3:// or another fsspec URL"
                                 + _plugin_schemes(plugins))
    from envhub.registry._fsspec import FsspecRegistry

    return FsspecRegistry(url)


def _plugin_schemes(plugins: PluginLookup) -> str:
    builtin = set(plugins.builtin_names("registry_backends"))
    extra = [f"{name}://" for name in plugins.names("registry_backends") if name not in builtin]
    return f" (installed plugins add: {', '.join(extra)})" if extra else ""


def open_heldout_store(url: str) -> HeldoutStoreLike:
    """The held-out store at ``url`` (an fsspec URL or a directory)."""
    from envhub.registry._fsspec import HeldoutStore

    return HeldoutStore(url)


# The backends' classes, imported on first use: fsspec and huggingface_hub are heavy.
_LAZY = {"BlobStore": "_fsspec", "FsspecRegistry": "_fsspec", "HfRegistry": "_hf"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'envhub.registry' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"envhub.registry.{_LAZY[name]}"), name)
