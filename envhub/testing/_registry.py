"""A real directory registry for tests: push bundles into it, pull them back by id."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envhub.context import Context
    from envhub.registry import Registry, VersionEntry

__all__ = ["TemporaryRegistry"]


class TemporaryRegistry:
    """A directory registry under ``directory``, with its own held-out store and cache.

    :meth:`variables` are the ``ENVHUB_*`` settings that make ``envhub`` (the command and
    :func:`envhub.load`) use it; the ``envhub_registry`` fixture sets them for one test.
    """

    def __init__(self, directory: str | os.PathLike[str], *, context: Context | None = None) -> None:
        directory = Path(directory)
        #: Gives the plugins that open the registry (default: a context made on first use).
        self._context = context
        #: The registry itself: a plain directory, as ``envhub push --registry DIR`` makes.
        self.path = directory / "registry"
        #: Where held-out archives of pushed bundles go (never into the registry).
        self.heldout_path = directory / "heldout"
        #: The cache that pulls from this registry fill, so none reach the user's cache.
        self.cache_path = directory / "cache"
        self.path.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        """The registry's URL (its directory), as ``ENVHUB_REGISTRY`` or ``--registry`` takes it."""
        return str(self.path)

    def variables(self) -> dict[str, str]:
        """``ENVHUB_REGISTRY``, ``ENVHUB_HELDOUT_STORE`` and ``ENVHUB_CACHE`` for this registry."""
        return {"ENVHUB_REGISTRY": self.url, "ENVHUB_HELDOUT_STORE": str(self.heldout_path),
                "ENVHUB_CACHE": str(self.cache_path)}

    def open(self) -> Registry:
        """The registry, to list, read or yank what was pushed."""
        return self.context.open_registry(self.url)

    @property
    def context(self) -> Context:
        """The context the registry is opened and pushed to with."""
        if self._context is None:
            from envhub.context import Context

            self._context = Context.create()
        return self._context

    def push(self, bundle: str | os.PathLike[str]) -> VersionEntry:
        """Build the bundle directory ``bundle`` and publish it here, as ``envhub push`` does
        (held-out splits go to :attr:`heldout_path`). Pushing the same content again is a
        no-op; returns the published version's entry (``entry.ref`` is ``name@version``).

        Raises :class:`envhub.errors.BundleError` for an invalid bundle and
        :class:`envhub.errors.VersionConflictError` for different content under a
        version already pushed.
        """
        from envhub.hub import push

        return push(Path(bundle), self.open(), heldout_url=str(self.heldout_path),
                    plugins=self.context.plugins).publish.entry

    def __repr__(self) -> str:
        return f"TemporaryRegistry({self.url!r})"
