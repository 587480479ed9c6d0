"""What the layers below the plugin manager need of it: looking names up.

The runtime, the registries, the bundle tools and the manifest find the kinds a manifest
names (verifier kinds, state kinds, task formats, registry schemes, ...) through an object
of this protocol, passed in by the caller. :class:`envhub.plugins.PluginManager` is the
implementation; it sits above those layers, because the hooks it serves name their types
(a verifier kind's factory makes a :class:`envhub.runtime.verifiers.Verifier`). This
protocol is how the lower layers depend on the plugin system without importing it.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["PluginLookup"]


class PluginLookup(Protocol):
    """Answers which item a hook has under a name. ``hook`` is a key of
    :data:`envhub.plugins.HOOKS` (``"verifier_kinds"``, ``"state_kinds"``, ...)."""

    def lookup(self, hook: str, name: str) -> Any:
        """The item registered as ``name`` for ``hook``, or None; raises
        :class:`envhub.errors.PluginConflictError` when two plugins provide it."""
        ...

    def names(self, hook: str) -> list[str]:
        """Every usable name of ``hook``, sorted."""
        ...

    def builtin_names(self, hook: str) -> list[str]:
        """The names envhub's built-in plugin registers for ``hook``, in its order."""
        ...
