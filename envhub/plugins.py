"""The plugin manager: envhub's hooks, its built-in plugin, and the plugins installed
through the entry-point group ``envhub``.

A :class:`PluginManager` is an instance, passed to whatever needs one
(``build_verifier(..., plugins=pm)``, ``envhub.load(..., context=ctx)``, ...); nothing
here keeps one per process. The composition root makes it: :func:`envhub.context.make_plugin_manager`
(or :meth:`envhub.context.Context.create`) registers envhub's built-in plugin
(``envhub._builtins``) with :meth:`PluginManager.register_builtins`, so built-in kinds go
through the same hooks as everyone else's. (This module sits below the runtime and the
registries, so it cannot import the built-in kinds itself.) Nothing here is imported by
``envhub --help`` or ``envhub --version``. Installed plugins are imported only
when they are needed: when a name that is not built in is looked up, or when they are
listed (``envhub plugins``). Built-in names are reserved, so answering them without
loading plugins gives the same answer as loading them first.

Failures stay with the plugin that has them: a plugin that cannot be imported, whose hook
implementation has a bad signature or is not marked ``@hookimpl``, or whose hook raises or
returns something else, is recorded in :attr:`PluginManager.broken` with its distribution
and the error, and contributes nothing; every other plugin works. Two plugins providing
one name make that name (and only that name) an error, raised when it is used.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pluggy

from envhub import hookspecs
from envhub._version import __version__
from envhub.errors import PluginConflictError, PluginError

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "ENVIRONMENTS_GROUP",
    "HOOKS",
    "BrokenPlugin",
    "Conflict",
    "Hook",
    "Origin",
    "PluginManager",
    "Provided",
    "options_model",
]

#: Entry-point group of plugins (modules with ``@hookimpl`` functions).
ENTRY_POINT_GROUP = hookspecs.PROJECT
#: Entry-point group of environment packages: ``"namespace/name" = "package:bundle/dir"``.
ENVIRONMENTS_GROUP = "envhub.environments"
#: Name of the built-in plugin, and of the distribution it comes with.
BUILTIN = "envhub-rl"

_NAME = re.compile(r"[a-z0-9](?:[a-z0-9._/-]*[a-z0-9])?")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
#: Hooks whose names are URL-like schemes.
_SCHEMES = ("registry_backends", "workspace_backends")


@dataclass(frozen=True)
class Hook:
    """One registration hook: ``envhub_<key>()`` returns a list of ``type``."""

    key: str
    label: str
    type: type[Any]
    #: Built-in names cannot be provided by a plugin (the built-in one is always used).
    reserved: bool = True

    @property
    def name(self) -> str:
        return f"envhub_{self.key}"


HOOKS: dict[str, Hook] = {hook.key: hook for hook in (
    Hook("verifier_kinds", "verifier kind", hookspecs.VerifierKind),
    Hook("harness_protocols", "harness protocol", hookspecs.HarnessProtocol),
    Hook("state_kinds", "state kind", hookspecs.StateKind),
    Hook("task_formats", "task format", hookspecs.TaskFormat),
    Hook("task_generators", "task generator", hookspecs.TaskGenerator),
    Hook("registry_backends", "registry scheme", hookspecs.RegistryBackend),
    Hook("policies", "policy", hookspecs.PolicyKind),
    Hook("executors", "executor", hookspecs.ExecutorKind),
    Hook("workspace_backends", "workspace base scheme", hookspecs.WorkspaceBackend),
    Hook("importers", "importer", hookspecs.ImporterKind),
    # Installed environments come from other distributions through the built-in plugin;
    # none of them is envhub's own, so none is reserved.
    Hook("environments", "environment", hookspecs.EnvironmentPackage, reserved=False),
)}


@dataclass(frozen=True)
class Origin:
    """Where a plugin (or something it registers) comes from."""

    plugin: str
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None
    builtin: bool = False

    def __str__(self) -> str:
        if self.builtin:
            return f"{self.distribution} {self.version} (built in)"
        if self.distribution is None:
            return f"plugin {self.plugin!r}"
        return f"{self.distribution} {self.version}"


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin, or an installed environment entry, that cannot be used, and why."""

    name: str
    distribution: str | None
    version: str | None
    error: str
    entry_point: str | None = None
    #: "plugin" or "environment".
    what: str = "plugin"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.what, "distribution": self.distribution, "version": self.version,
                "entry_point": self.entry_point, "error": self.error}


@dataclass(frozen=True)
class Provided:
    """One registration: the ``item`` a hook returned, the plugin that returned it, and
    the distribution it comes from (for installed environments, the environment's own)."""

    item: Any
    plugin: str
    origin: Origin


@dataclass(frozen=True)
class Conflict:
    """Several plugins provide one name of one hook."""

    hook: str
    name: str
    providers: tuple[Origin, ...]

    @property
    def builtin_wins(self) -> bool:
        """A plugin tried to provide a built-in name: the built-in one is used."""
        return any(o.builtin for o in self.providers) and HOOKS[self.hook].reserved

    def message(self) -> str:
        label = HOOKS[self.hook].label
        if self.builtin_wins:
            others = " and ".join(str(o) for o in self.providers if not o.builtin)
            return f"{label} {self.name!r} is built into envhub; {others} also provides it, and is ignored for it"
        named = " and ".join(str(o) for o in self.providers)
        return f"{label} {self.name!r} is provided by {len(self.providers)} plugins: {named}"

    def hint(self) -> str:
        if self.builtin_wins:
            return "rename it in the plugin, or uninstall the plugin"
        dists = [o.distribution for o in self.providers if o.distribution]
        return f"uninstall all but one of them (pip uninstall {dists[-1]})" if dists else "unregister one of them"

    def to_dict(self) -> dict[str, Any]:
        return {"hook": self.hook, "name": self.name, "builtin_wins": self.builtin_wins,
                "distributions": [o.distribution for o in self.providers], "message": self.message()}


class _EntryPointTable(Protocol):
    """What ``importlib.metadata.entry_points()`` returns: ``SelectableGroups`` on Python 3.11,
    ``EntryPoints`` from 3.12."""

    def select(self, *, group: str) -> importlib.metadata.EntryPoints: ...


class PluginManager(pluggy.PluginManager):
    """envhub's pluggy plugin manager. The built-in plugin is registered by whoever makes
    the manager (:meth:`register_builtins`; :func:`envhub.context.make_plugin_manager` does).

    ``autoload`` (default True) loads the entry-point group ``envhub`` the first time a
    name that is not built in is looked up; with False, only plugins registered by hand
    (:meth:`register`) are used, which is what tests and embedding applications want.
    """

    def __init__(self, *, autoload: bool = True) -> None:
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)
        self._lock = threading.RLock()
        self._autoload = autoload
        self._loaded = False
        self._entry_points: _EntryPointTable | None = None
        self._origins: dict[str, Origin] = {}
        self._load_failures: list[BrokenPlugin] = []
        self._hook_failures: list[BrokenPlugin] = []
        self._tables: dict[str, dict[str, list[Provided]]] | None = None
        self._builtin_tables: dict[str, dict[str, list[Provided]]] | None = None
        self._broken_environments: list[BrokenPlugin] = []

    def register_builtins(self, plugin: Any) -> None:
        """Register ``plugin`` as envhub's built-in plugin: its names are reserved (a plugin
        that provides one too is ignored for it) and it is listed first."""
        with self._lock:
            self._origins[BUILTIN] = Origin(BUILTIN, BUILTIN, __version__, builtin=True)
            self.register(plugin, name=BUILTIN)

    # -- registration ----------------------------------------------------------------------

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        """Register ``plugin`` (pluggy's ``register``), refusing hook implementations that
        pluggy would let through silently: a function named like a hook but not marked
        ``@hookimpl``, and an ``@hookimpl`` for a hook that does not exist (a typo).
        Raises :class:`pluggy.PluginValidationError` for those and for bad signatures."""
        with self._lock:
            registered = super().register(plugin, name)
            if registered is None:
                return None
            problem = self._hook_problem(plugin)
            if problem is not None:
                super().unregister(plugin)
                raise pluggy.PluginValidationError(plugin, problem)
            self._origins.setdefault(registered, Origin(registered))
            self._tables = None
            return registered

    def unregister(self, plugin: Any | None = None, name: str | None = None) -> Any | None:
        with self._lock:
            name = name or (self.get_name(plugin) if plugin is not None else None)
            removed = super().unregister(plugin, name)
            if name is not None and name != BUILTIN:
                self._origins.pop(name, None)
            self._tables = None
            return removed

    def _hook_problem(self, plugin: Any) -> str | None:
        known = {hook.name for hook in HOOKS.values()}
        callers = self.get_hookcallers(plugin) or []
        for caller in callers:
            if not caller.has_spec():
                close = difflib.get_close_matches(caller.name, sorted(known), n=1)
                also = f"; did you mean {close[0]!r}?" if close else ""
                return f"{caller.name} is not an envhub hook{also}"
        implemented = {caller.name for caller in callers}
        for attr in sorted(known - implemented):
            if callable(getattr(plugin, attr, None)):
                return f"{attr} is not marked @hookimpl (from envhub import hookimpl)"
        return None

    def load_entrypoints(self) -> None:
        """Import and register every plugin of the entry-point group ``envhub``, once.

        This is a loop of its own rather than pluggy's ``load_setuptools_entrypoints``,
        which stops at the first plugin that fails: here each plugin is imported and
        registered in its own ``try``, a failure is recorded in :attr:`broken` with the
        distribution's name and the error, and the remaining plugins still load."""
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            found = sorted(self.entry_points(ENTRY_POINT_GROUP),
                           key=lambda ep: (_dist_name(ep) or "", ep.name))
            for ep in found:
                dist = getattr(ep, "dist", None)
                origin = Origin(ep.name, _dist_name(ep), dist.version if dist is not None else None,
                                f"{ep.name} = {ep.value}")

                if self.has_plugin(ep.name):
                    self._broken(origin, f"another plugin is already registered as {ep.name!r} "
                           f"({self._origins.get(ep.name) or 'blocked'})")
                    continue
                try:
                    plugin = ep.load()
                except (Exception, SystemExit) as e:  # SystemExit: a plugin must not end envhub
                    self._broken(origin, f"cannot import {ep.value}: {_error_text(e)}")
                    continue
                try:
                    self.register(plugin, name=ep.name)
                except (pluggy.PluginValidationError, ValueError) as e:
                    self._broken(origin, f"invalid plugin: {_error_text(e)}")
                    continue
                self._origins[ep.name] = origin
            self._tables = None

    def _broken(self, origin: Origin, error: str) -> None:
        self._load_failures.append(BrokenPlugin(origin.plugin, origin.distribution, origin.version, error,
                                                origin.entry_point))

    @property
    def loaded(self) -> bool:
        """Whether the entry-point group ``envhub`` has been loaded (it is, lazily, when a
        name that is not built in is looked up, or plugins are listed)."""
        return self._loaded

    def entry_points(self, group: str) -> importlib.metadata.EntryPoints:
        """The installed entry points of ``group``. Every distribution's metadata is read
        once per manager, for all groups together."""
        with self._lock:
            if self._entry_points is None:
                self._entry_points = importlib.metadata.entry_points()
            return self._entry_points.select(group=group)

    # -- what plugins provide --------------------------------------------------------------

    def lookup(self, hook: str, name: str) -> Any | None:
        """What is registered as ``name`` for ``hook`` (a key of :data:`HOOKS`, e.g.
        ``"verifier_kinds"``), or None when nothing is.

        A built-in name is answered without loading plugins. Raises
        :class:`PluginConflictError` naming the distributions when two plugins provide
        ``name``, and :class:`PluginError` for an installed environment whose entry is broken.
        """
        spec = HOOKS[hook]
        if spec.reserved:
            builtin = self._builtins()[hook].get(name)
            if builtin:
                return builtin[0].item
        providers = self.providers(hook).get(name)
        if not providers:
            for broken in self._broken_environments if hook == "environments" else ():
                if broken.name == name:
                    raise PluginError(f"the installed environment {name} ({broken.distribution} "
                                      f"{broken.version}) cannot be used: {broken.error}",
                                      hint=f"fix or reinstall {broken.distribution}; 'envhub plugins' lists "
                                           "installed environments")
            return None
        if len(providers) > 1:
            conflict = Conflict(hook, name, tuple(p.origin for p in providers))
            raise PluginConflictError(conflict.message(), hint=conflict.hint())
        return providers[0].item

    def providers(self, hook: str) -> Mapping[str, list[Provided]]:
        """Every name registered for ``hook`` and who provides it (loads plugins first)."""
        return self._all()[hook]

    def names(self, hook: str) -> list[str]:
        """Every usable name of ``hook``, sorted: built-in ones and those exactly one
        plugin provides."""
        builtin = set(self._builtins()[hook]) if HOOKS[hook].reserved else set()
        return sorted(n for n, p in self.providers(hook).items() if n in builtin or len(p) == 1)

    def builtin_names(self, hook: str) -> list[str]:
        """The names the built-in plugin registers for ``hook``, in its order (no plugin is
        loaded to answer)."""
        return list(self._builtins()[hook])

    def conflicts(self) -> list[Conflict]:
        """Every name provided more than once, hook by hook."""
        out = []
        for key, table in self._all().items():
            for name, providers in sorted(table.items()):
                if len(providers) > 1:
                    out.append(Conflict(key, name, tuple(p.origin for p in providers)))
        return out

    @property
    def broken(self) -> list[BrokenPlugin]:
        """Plugins that failed to import, register or answer a hook, and installed
        environments whose entry cannot be used (loads plugins first)."""
        self._all()
        return [*self._load_failures, *self._hook_failures, *self._broken_environments]

    def origin(self, plugin_name: str) -> Origin:
        return self._origins.get(plugin_name) or Origin(plugin_name)

    def plugin_names(self) -> list[str]:
        """The registered plugins, the built-in one first (loads plugins first)."""
        self._all()
        names = [name for name, plugin in self.list_name_plugin() if plugin is not None]
        return sorted(names, key=lambda n: (n != BUILTIN, self.origin(n).distribution or "", n))

    def registered_by(self, plugin_name: str) -> dict[str, list[str]]:
        """What one plugin registers: hook key -> names (hooks it answered with nothing left out)."""
        out: dict[str, list[str]] = {}
        for key, table in self._all().items():
            names = sorted(name for name, providers in table.items()
                           if any(p.plugin == plugin_name for p in providers))
            if names:
                out[key] = names
        return out

    def environments(self) -> list[Provided]:
        """Installed environments that can be used, by name."""
        return [p for _, providers in sorted(self.providers("environments").items()) for p in providers]

    # -- internals -------------------------------------------------------------------------

    def _builtins(self) -> dict[str, dict[str, list[Provided]]]:
        with self._lock:
            if self._builtin_tables is None:
                self._builtin_tables, failures, _ = self._collect({BUILTIN}, skip={"environments"})
                if failures:  # a bug in envhub itself, not a plugin's
                    raise RuntimeError(f"envhub's built-in plugin failed: {failures[0].error}")
            return self._builtin_tables

    def _all(self) -> dict[str, dict[str, list[Provided]]]:
        with self._lock:
            if self._autoload and not self._loaded:
                self.load_entrypoints()
            if self._tables is None:
                tables, failures, broken_envs = self._collect(None)
                for failure in failures:
                    super().unregister(name=failure.name)
                    self._origins.pop(failure.name, None)
                self._hook_failures.extend(failures)
                self._broken_environments = broken_envs
                self._tables = tables
            return self._tables

    def _collect(self, only: set[str] | None, skip: Iterable[str] = ()
                 ) -> tuple[dict[str, dict[str, list[Provided]]], list[BrokenPlugin], list[BrokenPlugin]]:
        answers: dict[str, list[tuple[str, Any]]] = {}
        failed: dict[str, str] = {}
        for key, hook in HOOKS.items():
            if key in skip:
                continue
            for impl in getattr(self.hook, hook.name).get_hookimpls():
                name = impl.plugin_name
                if (only is not None and name not in only) or name in failed:
                    continue
                # Each plugin's implementation is called on its own rather than through the
                # hook: envhub must know which distribution provides each name (to name both
                # sides of a conflict), and one plugin whose hook raises must not hide the
                # others' answers.
                try:
                    items = _checked(hook, impl.function())
                except Exception as e:
                    failed[name] = f"{hook.name}() failed: {_error_text(e)}"
                    continue
                answers.setdefault(name, []).extend((key, item) for item in items)
        tables: dict[str, dict[str, list[Provided]]] = {key: {} for key in HOOKS}
        broken_envs = []
        for plugin_name, items in answers.items():
            if plugin_name in failed:
                continue
            origin = self.origin(plugin_name)
            for key, item in items:
                item_origin = origin
                if key == "environments" and item.distribution is not None:
                    item_origin = Origin(plugin_name, item.distribution, item.distribution_version)
                if key == "environments" and item.error is not None:
                    broken_envs.append(BrokenPlugin(item.name, item_origin.distribution, item_origin.version,
                                                    item.error, what="environment"))
                    continue
                tables[key].setdefault(item.name, []).append(Provided(item, plugin_name, item_origin))
        for table in tables.values():
            for providers in table.values():
                providers.sort(key=lambda p: (not p.origin.builtin, p.origin.distribution or "", p.plugin))
        failures = [BrokenPlugin(name, self.origin(name).distribution, self.origin(name).version, error,
                                 self.origin(name).entry_point) for name, error in failed.items()]
        return tables, failures, broken_envs


def options_model(kind: hookspecs.VerifierKind) -> type | None:
    """The pydantic model of a verifier kind's options (:meth:`VerifierKind.options_model`)."""
    return kind.options_model()


def _checked(hook: Hook, answer: Any) -> list[Any]:
    """A hook's answer as a list of ``hook.type``; raises TypeError/ValueError saying what
    is wrong with it."""
    if answer is None:
        return []
    if isinstance(answer, (str, bytes, Mapping)) or not isinstance(answer, Iterable):
        raise TypeError(f"returned {type(answer).__name__}, not a list of {hook.type.__name__}")
    items = list(answer)
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, hook.type):
            raise TypeError(f"returned a {type(item).__name__} in its list, not a {hook.type.__name__}")
        name = item.name
        if hook.key == "environments":
            if item.error is None:
                from envhub.ids import parse_name

                parse_name(name)  # InvalidIdError is a ValueError, with the grammar's message
        elif not isinstance(name, str) or not (_SCHEME if hook.key in _SCHEMES else _NAME).fullmatch(name):
            raise ValueError(f"invalid {hook.label} name {name!r}: use lowercase letters, digits and '-', '_', '.'")
        # The built-in plugin answers for every installed environment package, so one name
        # twice there is two distributions in conflict, not a broken plugin.
        if name in seen and hook.key != "environments":
            raise ValueError(f"returned {hook.label} {name!r} twice")
        seen.add(name)
    return items


def _dist_name(ep: importlib.metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return dist.metadata["Name"] if dist is not None else None


def _error_text(e: BaseException) -> str:
    text = " ".join(str(e).split())  # pluggy's messages span lines
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
