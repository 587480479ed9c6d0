"""``envhub add`` and ``envhub remove``: edit ``[tool.envhub] environments`` in place.

tomlkit keeps the rest of ``pyproject.toml`` (comments, order, layout) byte for byte;
tomli-w would rewrite the whole file. Nothing is written unless the new list resolves.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from envhub.errors import UsageError

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup
    from envhub.project._project import LockResult, Project
    from envhub.settings import Settings

__all__ = ["EditResult", "add_environment", "remove_environment", "with_environment", "without_environment",
           "write_environments"]


@dataclass(frozen=True)
class EditResult:
    """What :func:`add_environment` or :func:`remove_environment` wrote."""

    #: The project as now written: use it from here on (the one passed in still holds
    #: the old list of environments).
    project: Project
    #: ``[tool.envhub] environments`` as now written.
    environments: list[str]
    #: The entry added, as written (``acme/shop>=1.2.0``), or the name removed.
    entry: str
    #: The new lock, and what changed in it.
    locked: LockResult


def add_environment(project: Project, ref_text: str, settings: Settings, *, plugins: PluginLookup,
                    registry: str | None = None, offline: bool = False,
                    prereleases: bool | None = None) -> EditResult:
    """``envhub add``: add ``ref_text`` (``acme/env`` or ``acme/env>=1.2,<2``) to the
    project's environments, replacing the entry for that name if there is one; resolve;
    and only if that succeeds write ``pyproject.toml`` and then ``envhub.lock``. A bare
    name is written as ``>=`` the version it resolves to. Nothing is fetched.

    Raises :class:`envhub.errors.InvalidIdError` for a malformed ``ref_text``, and what
    :func:`resolve_project` raises (then neither file is touched)."""
    from envhub.project._resolver import parse_requirement

    requirement = parse_requirement(ref_text)
    bare = requirement.name if not str(requirement.specifier) else None
    text = requirement.name if bare else str(requirement)
    environments, locked = _relock_and_write(project, with_environment(project.environments, text, requirement.name),
                                             settings, plugins=plugins, registry=registry, offline=offline,
                                             prereleases=prereleases, bare=bare)
    added = next(e for e in environments if parse_requirement(e).name == requirement.name)
    return EditResult(_written(project, environments), environments, added, locked)


def remove_environment(project: Project, name: str, settings: Settings, *, plugins: PluginLookup,
                       registry: str | None = None, offline: bool = False) -> EditResult:
    """``envhub remove``: drop ``name`` from the project's environments and relock; only
    if that succeeds write ``pyproject.toml`` and then ``envhub.lock``. The cache keeps
    its copy. Raises :class:`envhub.errors.UsageError` for a name the project does not
    list (listing those it does), and what :func:`resolve_project` raises."""
    environments = without_environment(project.environments, name, project.pyproject)
    environments, locked = _relock_and_write(project, environments, settings, plugins=plugins, registry=registry,
                                             offline=offline, prereleases=None)
    return EditResult(_written(project, environments), environments, name, locked)


def _written(project: Project, environments: list[str]) -> Project:
    """``project`` as it reads once ``environments`` is written to its pyproject.toml."""
    return replace(project, environments=environments, table={**project.table, "environments": environments})


def _relock_and_write(project: Project, environments: list[str], settings: Settings, *, plugins: PluginLookup,
                      registry: str | None, offline: bool, prereleases: bool | None,
                      bare: str | None = None) -> tuple[list[str], LockResult]:
    """Resolve ``environments`` as the project's new list; only if that succeeds, write
    pyproject.toml and then envhub.lock. ``bare`` names a requirement added without a
    specifier: it is written as ``>=`` the version resolved."""
    from envhub.project._lockfile import read_lock, write_lock
    from envhub.project._project import LockResult, resolve_project

    previous = read_lock(project.lock_path)
    candidate = replace(project, environments=environments)
    lock, resolution = resolve_project(candidate, settings, plugins=plugins, registry=registry, offline=offline,
                                       prereleases=prereleases, previous=previous)
    if bare is not None:
        environments = with_environment(environments, f"{bare}>={resolution.pins[bare].version}", bare)
        lock.requires = replace(project, environments=environments).normalized()
    write_environments(project.pyproject, environments)
    written = write_lock(project.lock_path, lock)
    return environments, LockResult(lock, previous, written, resolution)


def with_environment(current: list[str], requirement: str, name: str) -> list[str]:
    """``current`` with ``requirement`` added, or replacing the entry for ``name``."""
    from envhub.project._resolver import parse_requirement

    out, replaced = [], False
    for text in current:
        if parse_requirement(text).name == name:
            if not replaced:
                out.append(requirement)
            replaced = True
        else:
            out.append(text)
    if not replaced:
        out.append(requirement)
    return out


def without_environment(current: list[str], name: str, pyproject: Path) -> list[str]:
    """``current`` without the entry for ``name``; :class:`envhub.errors.UsageError`
    (naming ``pyproject`` and the names listed) if there is none."""
    from envhub.project._resolver import parse_requirement

    out = [text for text in current if parse_requirement(text).name != name]
    if len(out) == len(current):
        listed = ", ".join(parse_requirement(t).name for t in current) or "none"
        raise UsageError(f"{name} is not in [tool.envhub] environments of {pyproject} (listed: {listed})",
                         hint="name an environment as 'envhub tree' shows it")
    return out


def write_environments(pyproject: Path, environments: list[str]) -> None:
    """Set ``[tool.envhub] environments`` in ``pyproject``, keeping everything else as it
    is; written to a temporary file and renamed into place."""
    import tomlkit

    text = pyproject.read_text(encoding="utf-8")
    doc = tomlkit.parse(text)
    tool = doc.get("tool")
    if tool is None:
        tool = tomlkit.table(is_super_table=True)
        doc.append("tool", tool)
    envhub = tool.get("envhub")
    if envhub is None:
        envhub = tomlkit.table()
        tool.append("envhub", envhub)
    array = tomlkit.array()
    array.extend(environments)
    if len(environments) > 1:
        array.multiline(True)
    envhub["environments"] = array
    from envhub._atomic import write_text_atomic

    write_text_atomic(pyproject, tomlkit.dumps(doc))
