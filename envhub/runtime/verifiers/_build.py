"""Building a verifier from its manifest spec, through the verifier kinds plugins register.

The kinds come from the plugin manager's ``envhub_verifier_kinds`` hook, where envhub's own
kinds are registered too (``envhub._builtins``). A table of ``kind -> factory`` can also
be passed directly (``factories=``), to build with kinds of one's own without a plugin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from envhub.runtime.verifiers._base import Verifier, VerifierContext, VerifierError

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup

__all__ = ["Factory", "build_verifier", "default_factories", "plugin_factories"]

#: Makes the verifier of one spec: ``factory(spec, ctx, factories)``. ``factories`` is the
#: table the factory was found in, so a rubric builds its criteria with the same kinds.
Factory = Callable[[Any, VerifierContext, Mapping[str, "Factory"]], Verifier]


class _Kind(Protocol):
    """A verifier kind as a plugin registers it (``envhub.hookspecs.VerifierKind``, from a
    layer above this one)."""

    @property
    def name(self) -> str: ...

    @property
    def factory(self) -> Factory: ...

    def options_model(self) -> Any: ...


def default_factories(plugins: PluginLookup) -> dict[str, Factory]:
    """A new table of the built-in verifier kinds, as the built-in plugin registered on
    ``plugins`` provides them (a fresh dict: callers may add to it)."""
    return {name: plugins.lookup("verifier_kinds", name).factory for name in plugins.builtin_names("verifier_kinds")}


class _PluginFactories(Mapping[str, Factory]):
    """``kind -> factory`` for every kind a plugin manager knows. A plugin kind's factory
    is given the kind's options (validated with the plugin's options model), not the
    manifest's table; looking up a kind two plugins provide raises PluginConflictError."""

    def __init__(self, plugins: PluginLookup) -> None:
        self._plugins = plugins

    def __getitem__(self, kind: str) -> Factory:
        found = self._plugins.lookup("verifier_kinds", kind) if isinstance(kind, str) else None
        if found is None:
            raise KeyError(kind)
        return found.factory if _is_builtin_spec(kind) else _with_options(found)

    def __iter__(self) -> Iterator[str]:
        return iter(self._plugins.names("verifier_kinds"))

    def __len__(self) -> int:
        return len(self._plugins.names("verifier_kinds"))


def _is_builtin_spec(kind: str) -> bool:
    from envhub.manifest import VERIFIER_KINDS

    return kind in VERIFIER_KINDS


def _with_options(kind: _Kind) -> Factory:
    def factory(spec: Any, ctx: VerifierContext, factories: Mapping[str, Factory]) -> Verifier:
        return kind.factory(plugin_options(kind, spec), ctx, factories)

    return factory


def plugin_options(kind: Any, spec: Any) -> Any:
    """The options a plugin kind's factory is given: its options model validated from the
    manifest table's options, or those options as a dict. Raises VerifierError when they
    do not validate (the manifest was not validated with this plugin installed)."""
    options = spec.options if hasattr(spec, "options") else dict(spec)
    model = kind.options_model()
    if model is None:
        return dict(options)
    from pydantic import ValidationError

    try:
        return model.model_validate(options)
    except ValidationError as e:
        raise VerifierError(f"invalid options for verifier kind {kind.name!r}: {e}",
                            hint="run 'envhub validate' on the bundle") from e


def plugin_factories(plugins: PluginLookup) -> Mapping[str, Factory]:
    """The factories of every verifier kind ``plugins`` provides, built-in ones included."""
    return _PluginFactories(plugins)


def build_verifier(spec: Any, ctx: VerifierContext, *, factories: Mapping[str, Factory] | None = None,
                   plugins: PluginLookup | None = None) -> Verifier:
    """The verifier for ``spec`` (a ``[verifier]`` model or a rubric criterion model), made
    by the factory of its kind in ``factories``, else in ``plugins`` (one of the two is
    needed: without either it raises TypeError).

    Raises :class:`VerifierError` for a kind with no factory,
    :class:`envhub.errors.PluginConflictError` for a kind two plugins provide,
    :class:`envhub.errors.TrustError` (from ``ctx.load_entry_point``) when the kind needs
    untrusted bundle code, and :class:`VerifierError` when the spec cannot make a working
    verifier.
    """
    if factories is not None:
        table = factories
    elif plugins is not None:
        table = plugin_factories(plugins)
    else:
        raise TypeError("build_verifier() needs factories or plugins")
    kind = getattr(spec, "kind", None)
    try:
        factory = table[kind]  # type: ignore[index]
    except KeyError:
        known = ", ".join(sorted(table))
        raise VerifierError(f"unknown verifier kind {kind!r}; known kinds: {known}",
                            hint="install the plugin that provides it ('envhub plugins' lists what is installed)"
                            ) from None
    return factory(spec, ctx, table)
