"""The composition root: what a command, a test or an embedding application finds once and
passes down.

A :class:`Context` holds the settings (read from the environment once), the plugin manager
(with envhub's built-in plugin registered), and, found on first use and then kept, the
registry configuration and the training project (``pyproject.toml`` with ``[tool.envhub]``)
around its working directory, with that project's lock. The CLI makes one per invocation;
``envhub.load`` and ``envhub.evaluate`` take ``context=`` and make one for the call when
given none. Nothing below this layer makes settings or a plugin manager of its own: the
runtime, the registries and the bundle tools take ``settings`` and ``plugins`` as arguments.

>>> from envhub.context import Context
>>> ctx = Context.create(autoload=False, environ={"ENVHUB_HOME": "/tmp/envhub-doc"})
>>> ctx.settings.home.as_posix()
'/tmp/envhub-doc'
>>> ctx.plugins.lookup("verifier_kinds", "exact-match").name
'exact-match'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from envhub.plugins import PluginManager
from envhub.settings import Settings, load_settings

if TYPE_CHECKING:
    from envhub.project import Lockfile, Project
    from envhub.registry import Registry, RegistryConfig

__all__ = ["Context", "make_plugin_manager"]


def make_plugin_manager(*, autoload: bool = True) -> PluginManager:
    """A plugin manager with envhub's built-in plugin registered. ``autoload`` (default
    True) loads the installed plugins (entry-point group ``envhub``) the first time a name
    that is not built in is looked up; with False only plugins registered by hand are used,
    which is what tests and embedding applications want."""
    from envhub._builtins import Builtins

    plugins = PluginManager(autoload=autoload)
    plugins.register_builtins(Builtins(plugins))
    return plugins


@dataclass(eq=False)
class Context:
    """Settings, plugins, registry configuration and project, for one command or caller.

    Make it with :meth:`create`; the registry configuration, the project and its lock are
    read the first time they are asked for, and kept (a context is for one command or one
    run, not for a process that outlives edits to ``pyproject.toml``)."""

    settings: Settings
    plugins: PluginManager
    #: Where the project and the project's registry configuration are looked up.
    cwd: Path = field(default_factory=Path.cwd)

    @classmethod
    def create(cls, *, settings: Settings | None = None, plugins: PluginManager | None = None,
               autoload: bool = True, cwd: Path | None = None,
               environ: Mapping[str, str] | None = None) -> Context:
        """A context from ``environ`` (default: ``os.environ``) and the directory ``cwd``
        (default: the current one), or from the ``settings`` and ``plugins`` given."""
        return cls(settings if settings is not None else load_settings(environ),
                   plugins if plugins is not None else make_plugin_manager(autoload=autoload),
                   (cwd or Path.cwd()).resolve())

    @cached_property
    def registry_config(self) -> RegistryConfig:
        """The named registries and the default one, from ``$ENVHUB_HOME/config.toml`` and
        the project's ``[tool.envhub]``; :class:`envhub.errors.UsageError` if either is
        malformed."""
        from envhub.registry import load_registry_config

        return load_registry_config(self.settings, cwd=self.cwd)

    @cached_property
    def project(self) -> Project | None:
        """The training project around :attr:`cwd`, or None outside one."""
        from envhub.project import find_project

        return find_project(self.cwd)

    @cached_property
    def lock(self) -> Lockfile | None:
        """The project's ``envhub.lock``, or None outside a project or without a lock."""
        from envhub.project import read_lock

        return read_lock(self.project.lock_path) if self.project is not None else None

    def registry_url(self, choice: str | None = None) -> str:
        """The URL of the registry ``choice`` (a name from the configuration or a URL;
        default: ``ENVHUB_REGISTRY``, else the configured default, else the embedded one)."""
        return self.registry_config.url(choice)

    def open_registry(self, choice: str | None = None) -> Registry:
        """The registry ``choice`` names (see :meth:`registry_url`), opened with this
        context's settings and plugins."""
        from envhub.registry import open_registry

        return open_registry(self.registry_url(choice), self.settings, plugins=self.plugins)
