"""``envhub add | remove | lock | sync | tree | outdated``: environments as a project's
dependencies, locked in ``envhub.lock`` (docs/projects.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from envhub.cli._common import json_option, offline_option, registry_option

if TYPE_CHECKING:
    from envhub.project import LockedEnv, Lockfile
    from envhub.project import LockResult, Project

_PRERELEASE = click.option("--prerelease/--no-prerelease", "prereleases", default=None,
                           help="Allow pre-release versions (default: as the lock says; off for a new lock).")


def _settings(offline: bool):  # type: ignore[no-untyped-def]
    from envhub.settings import load_settings

    settings = load_settings()
    return settings, offline or settings.offline


def _say(text: str) -> None:
    click.echo(text, err=True)


def _changes(result: LockResult) -> list[str]:
    lines = []
    for name, old, new in result.changes():
        if old is None:
            lines.append(f"  + {name} {new}")
        elif new is None:
            lines.append(f"  - {name} {old}")
        else:
            lines.append(f"  ~ {name} {old} -> {new}")
    return lines


def _lock_json(lock: Lockfile) -> list[dict[str, Any]]:
    return [{"name": e.name, "version": e.version, "digest": e.digest, "source": e.source, "locator": e.locator,
             "score-version": e.score_version, "dependencies": list(e.dependencies),
             "python-dependencies": list(e.python_dependencies)} for e in lock.environments.values()]


def _relock_and_write(project: Project, environments: list[str], settings: Any, *, registry: str | None,
                      offline: bool, prereleases: bool | None, bare: str | None = None) -> tuple[list[str], LockResult]:
    """Resolve ``environments`` as the project's new list; only if that succeeds, write
    pyproject.toml and then envhub.lock. ``bare`` names a requirement added without a
    specifier: it is written as ``>=`` the version resolved."""
    from dataclasses import replace

    from envhub.project import write_environments
    from envhub.project import read_lock, write_lock
    from envhub.project import LockResult, resolve_project

    previous = read_lock(project.lock_path)
    candidate = replace(project, environments=environments)
    lock, resolution = resolve_project(candidate, settings, registry=registry, offline=offline,
                                       prereleases=prereleases, previous=previous)
    if bare is not None:
        from envhub.project import with_environment

        environments = with_environment(environments, f"{bare}>={resolution.pins[bare].version}", bare)
        lock.requires = replace(project, environments=environments).normalized()
    write_environments(project.pyproject, environments)
    written = write_lock(project.lock_path, lock)
    return environments, LockResult(lock, previous, written, resolution)


@click.command()
@click.argument("ref")
@registry_option
@offline_option
@_PRERELEASE
@click.option("--no-sync", is_flag=True, help="Only edit pyproject.toml and envhub.lock; fetch nothing.")
@json_option
def add(ref: str, registry: str | None, offline: bool, prereleases: bool | None, no_sync: bool, as_json: bool) -> None:
    """Add REF (acme/env or 'acme/env>=1.2,<2') to [tool.envhub] environments, lock, and sync.

    A bare name is written as ">=" the version it resolves to. Nothing is written unless
    the new set of environments resolves.
    """
    from envhub.project import with_environment
    from envhub.project import require_project, sync_project
    from envhub.project import parse_requirement

    settings, offline = _settings(offline)
    project = require_project()
    requirement = parse_requirement(ref)
    bare = requirement.name if not str(requirement.specifier) else None
    text = requirement.name if bare else str(requirement)
    environments, result = _relock_and_write(project, with_environment(project.environments, text, requirement.name),
                                             settings, registry=registry, offline=offline, prereleases=prereleases,
                                             bare=bare)
    added = next(e for e in environments if parse_requirement(e).name == requirement.name)
    synced = None if no_sync else sync_project(project, settings, frozen=True, offline=offline)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({"added": added, "locked": _lock_json(result.lock), "changes": result.changes(),
                   "fetched": [e.ref for e in synced.fetched] if synced else []})
        return
    _say(f"Added {added} to {project.pyproject}; locked {result.lock.environments[requirement.name].ref}")
    for line in _changes(result):
        _say(line)
    if synced is not None:
        _report_python(synced.python, install=False)


@click.command()
@click.argument("name")
@registry_option
@offline_option
@json_option
def remove(name: str, registry: str | None, offline: bool, as_json: bool) -> None:
    """Remove NAME from [tool.envhub] environments and relock (the cache keeps its copy)."""
    from envhub.project import without_environment
    from envhub.project import require_project

    settings, offline = _settings(offline)
    project = require_project()
    environments = without_environment(project.environments, name, project.pyproject)
    _, result = _relock_and_write(project, environments, settings, registry=registry, offline=offline,
                                  prereleases=None)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({"removed": name, "locked": _lock_json(result.lock), "changes": result.changes()})
        return
    _say(f"Removed {name} from {project.pyproject}")
    for line in _changes(result):
        _say(line)


@click.command()
@click.option("-U", "--upgrade", is_flag=True, help="Resolve afresh: the newest versions that fit.")
@click.option("-P", "--upgrade-package", "upgrade_packages", multiple=True, metavar="NAME",
              help="Upgrade only NAME (repeatable); keep every other locked version.")
@registry_option
@offline_option
@_PRERELEASE
@json_option
def lock(upgrade: bool, upgrade_packages: tuple[str, ...], registry: str | None, offline: bool,
         prereleases: bool | None, as_json: bool) -> None:
    """Resolve [tool.envhub] environments into envhub.lock.

    Versions already locked are kept while they still fit (use --upgrade or
    --upgrade-package to move them); the file is rewritten only if it changes.
    """
    from envhub.project import lock_project, require_project

    if upgrade and upgrade_packages:
        raise click.UsageError("use --upgrade or --upgrade-package, not both")
    settings, offline = _settings(offline)
    project = require_project()
    result = lock_project(project, settings, upgrade=upgrade, upgrade_packages=upgrade_packages, registry=registry,
                          offline=offline, prereleases=prereleases)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({"lock": str(project.lock_path), "written": result.written, "locked": _lock_json(result.lock),
                   "changes": result.changes()})
        return
    count = len(result.lock.environments)
    state = "updated" if result.written else "unchanged"
    _say(f"Locked {count} environment{'s' if count != 1 else ''} in {project.lock_path} ({state})")
    for line in _changes(result):
        _say(line)


@click.command()
@click.option("--locked", is_flag=True, help="Fail (exit 1) if envhub.lock is missing or would change.")
@click.option("--frozen", is_flag=True, help="Use envhub.lock as it is, without checking it against pyproject.toml.")
@offline_option
@registry_option
@click.option("--with-heldout", is_flag=True, help="Also fetch held-out splits (needs access to the held-out store).")
@click.option("--install-python-deps", is_flag=True,
              help="Install the locked environments' missing Python dependencies (uv if on PATH, else pip).")
@json_option
def sync(locked: bool, frozen: bool, offline: bool, registry: str | None, with_heldout: bool,
         install_python_deps: bool, as_json: bool) -> None:
    """Make sure every environment in envhub.lock is in the cache, verified by digest.

    Relocks first if pyproject.toml changed (unless --locked or --frozen). Reports the
    Python dependencies the environments need and which are missing here; installs them
    only with --install-python-deps.
    """
    from envhub.project import require_project, sync_project

    if locked and frozen:
        raise click.UsageError("use --locked or --frozen, not both")
    settings, offline = _settings(offline)
    project = require_project()
    result = sync_project(project, settings, locked=locked, frozen=frozen, offline=offline, registry=registry,
                          with_heldout=with_heldout,
                          on_fetch=None if as_json else lambda env: _say(f"Fetching {env.ref}"))
    installed: list[str] = []
    if install_python_deps and result.python.missing:
        installed = _install(result.python.missing)
    if as_json:
        from envhub.cli._output import emit_json

        missing = {} if installed else result.python.missing
        emit_json({"lock": str(project.lock_path), "relocked": result.relocked is not None,
                   "environments": _lock_json(result.lock), "fetched": [e.ref for e in result.fetched],
                   "python": {"required": result.python.required, "missing": missing, "installed": installed}})
        return
    if result.relocked is not None:
        _say(f"Locked {project.lock_path}")
        for line in _changes(result.relocked):
            _say(line)
    total = len(result.lock.environments)
    _say(f"Synced {total} environment{'s' if total != 1 else ''} ({len(result.fetched)} fetched)")
    if not installed:
        _report_python(result.python, install=install_python_deps)


def _report_python(python: Any, *, install: bool) -> None:
    if not python.required:
        return
    if not python.missing:
        _say(f"Python dependencies: all {len(python.required)} satisfied")
        return
    _say("Python dependencies missing from this interpreter:")
    for requirement, why in sorted(python.missing.items()):
        _say(f"  {requirement}  ({why}; needed by {', '.join(python.required[requirement])})")
    if not install:
        _say("  install them with: envhub sync --install-python-deps")


def _install(missing: dict[str, str]) -> list[str]:
    from envhub.project import install_command, install_python

    requirements = sorted(missing)
    _say("Installing Python dependencies: " + " ".join(install_command(requirements)))
    install_python(requirements)
    return requirements


@click.command()
@json_option
def tree(as_json: bool) -> None:
    """Show the project's environments and what each depends on, as locked."""
    from envhub.project import read_project_lock, require_project, stale_reason

    project = require_project()
    lock = read_project_lock(project)
    reason = stale_reason(project, lock)
    if reason:
        _say(f"envhub: warning: {project.lock_path} is out of date ({reason}); run 'envhub lock'")
    roots = [(r.name, str(r.specifier)) for r in project.requirements()]
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({"project": str(project.pyproject), "lock": str(project.lock_path),
                   "environments": [_node_json(lock, name, spec, set()) for name, spec in roots]})
        return
    from rich.console import Console
    from rich.tree import Tree

    top = Tree(f"{project.root.name} ({project.pyproject.name})")
    shown: set[str] = set()
    for name, spec in roots:
        _node(top, lock, name, spec, shown, [])
    Console(highlight=False, soft_wrap=True).print(top)


def _label(lock: Lockfile, name: str, spec: str) -> tuple[LockedEnv | None, str]:
    env = lock.get(name)
    wanted = f"  ({spec})" if spec else ""
    return env, (f"{name} {env.version}{wanted}" if env else f"{name} (not locked){wanted}")


def _node(parent: Any, lock: Lockfile, name: str, spec: str, shown: set[str], path: list[str]) -> None:
    from envhub.project import parse_requirement

    env, label = _label(lock, name, spec)
    if env is not None and name in shown and env.dependencies:
        parent.add(f"{label} (*)")  # its dependencies are shown above
        return
    branch = parent.add(label)
    shown.add(name)
    if env is None or name in path:
        return
    for dep in env.dependencies:
        dep_name = parse_requirement(dep).name
        _node(branch, lock, dep_name, dep[len(dep_name):], shown, [*path, name])


def _node_json(lock: Lockfile, name: str, spec: str, path: set[str]) -> dict[str, Any]:
    from envhub.project import parse_requirement

    env = lock.get(name)
    node: dict[str, Any] = {"name": name, "requirement": spec, "version": env.version if env else None}
    if env is not None and name not in path:
        names = [parse_requirement(d).name for d in env.dependencies]
        node["dependencies"] = [_node_json(lock, n, d[len(n):], path | {name}) for n, d in zip(names, env.dependencies)]
    return node


@click.command()
@registry_option
@offline_option
@json_option
def outdated(registry: str | None, offline: bool, as_json: bool) -> None:
    """List locked environments with newer versions: the newest that fits every
    requirement on it (what 'envhub lock --upgrade' would pick) and the newest published."""
    from envhub.project import RegistryIndex, read_project_lock, registry_urls, require_project
    from envhub.project import parse_requirement

    settings, offline = _settings(offline)
    project = require_project()
    lock = read_project_lock(project)
    index = RegistryIndex(registry_urls(project, settings, registry), settings, offline=offline)
    constraints: dict[str, list[Any]] = {}
    for requirement in project.requirements():
        constraints.setdefault(requirement.name, []).append(requirement)
    for env in lock.environments.values():
        for dep in env.dependencies:
            requirement = parse_requirement(dep)
            constraints.setdefault(requirement.name, []).append(requirement)
    rows = []
    for env in sorted(lock.environments.values(), key=lambda e: e.name):
        versions = [e for e in index.versions(env.name) if not e.yanked
                    and (lock.prereleases or not e.parsed_version.is_prerelease)]
        latest = max(versions, key=lambda e: e.parsed_version, default=None)
        fitting = [e for e in versions if all(r.specifier.contains(e.parsed_version, prereleases=True)
                                              for r in constraints.get(env.name, []))]
        compatible = max(fitting, key=lambda e: e.parsed_version, default=None)
        row = {"name": env.name, "locked": env.version, "compatible": compatible.version if compatible else None,
               "latest": latest.version if latest else None}
        if any(v is not None and v != env.version for v in (row["compatible"], row["latest"])):
            rows.append(row)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json(rows)
        return
    if not rows:
        _say(f"All {len(lock.environments)} locked environments are up to date")
        return
    width = max(len(r["name"]) for r in rows)
    click.echo(f"{'environment':<{width}}  locked      compatible  latest")
    for r in rows:
        click.echo(f"{r['name']:<{width}}  {r['locked']:<10}  {r['compatible'] or '-':<10}  {r['latest'] or '-'}")
