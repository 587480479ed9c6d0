"""``envhub outdated``: locked environments that have newer versions.

For each locked environment, the newest version that fits every requirement on it (the
project's and the other locked environments' ``dependencies``: what ``envhub lock
--upgrade`` can reach without changing a requirement) and the newest published. Yanked
versions never count; pre-releases only if the lock allows them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup
    from envhub.project._lockfile import Lockfile
    from envhub.project._project import Project
    from envhub.project._resolver import Requirement
    from envhub.registry import VersionEntry
    from envhub.settings import Settings

__all__ = ["OutdatedEntry", "outdated"]


@dataclass(frozen=True)
class OutdatedEntry:
    """A locked environment with a newer version than the one locked."""

    name: str
    #: The version in the lock.
    locked: str
    #: The newest version that fits every requirement on it; None if none does.
    compatible: str | None
    #: The newest version published; None if the registries have none.
    latest: str | None
    #: Where the locked version came from, as the lock says (a URL, or "default").
    source: str

    def to_json(self) -> dict[str, Any]:
        """A row of ``envhub outdated --json``: ``{"name", "locked", "compatible", "latest"}``."""
        return {"name": self.name, "locked": self.locked, "compatible": self.compatible, "latest": self.latest}


def outdated(project: Project, lock: Lockfile, settings: Settings, *, plugins: PluginLookup,
             registry: str | None = None, offline: bool = False) -> list[OutdatedEntry]:
    """The environments in ``lock`` for which a version other than the locked one is
    the newest compatible or the newest published, sorted by name. Versions are looked
    up as :func:`lock_project` looks them up (``registry`` alone if given, else every
    configured registry); offline, in what the cache remembers.

    Raises :class:`envhub.errors.UsageError` for a malformed project or registry
    configuration, and :class:`envhub.errors.RegistryError` for a registry out of reach."""
    from envhub.project._project import RegistryIndex, registry_urls
    from envhub.project._resolver import parse_requirement

    index = RegistryIndex(registry_urls(project, settings, registry), settings, plugins=plugins, offline=offline)
    constraints: dict[str, list[Requirement]] = {}
    for requirement in project.requirements():
        constraints.setdefault(requirement.name, []).append(requirement)
    for env in lock.environments.values():
        for dep in env.dependencies:
            requirement = parse_requirement(dep)
            constraints.setdefault(requirement.name, []).append(requirement)
    entries = []
    for env in sorted(lock.environments.values(), key=lambda e: e.name):
        versions = [e for e in index.versions(env.name)
                    if not e.yanked and (lock.prereleases or not e.parsed_version.is_prerelease)]
        fitting = [e for e in versions if all(r.specifier.contains(e.parsed_version, prereleases=True)
                                              for r in constraints.get(env.name, []))]
        compatible, latest = _newest(fitting), _newest(versions)
        if any(v is not None and v != env.version for v in (compatible, latest)):
            entries.append(OutdatedEntry(env.name, env.version, compatible, latest, env.source))
    return entries


def _newest(entries: list[VersionEntry]) -> str | None:
    best = max(entries, key=lambda e: e.parsed_version, default=None)
    return best.version if best is not None else None
