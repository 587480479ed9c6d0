"""``envhub add | remove | lock | sync | tree | outdated``: environments as a project's
dependencies, locked in ``envhub.lock`` (docs/projects.md). Each command reads its flags,
calls the matching function of :mod:`envhub.project` and prints what it returns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from envhub.cli._common import json_option, offline_option, registry_option

if TYPE_CHECKING:
    from rich.tree import Tree

    from envhub.context import Context
    from envhub.project import Lockfile, LockResult, Project, PythonReport, TreeNode

_PRERELEASE = click.option("--prerelease/--no-prerelease", "prereleases", default=None,
                           help="Allow pre-release versions (default: as the lock says; off for a new lock).")


def _context(offline: bool = False) -> tuple[Context, Project, bool]:
    """The invocation's context, its project (the error naming the directory outside
    one), and whether to stay offline (``--offline`` or ``ENVHUB_OFFLINE``)."""
    from envhub.cli._common import app_context
    from envhub.project import require_project

    ctx = app_context()
    project = ctx.project if ctx.project is not None else require_project(ctx.cwd)  # raises: no project
    return ctx, project, offline or ctx.settings.offline


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
    from envhub.project import add_environment, parse_requirement, sync_project

    ctx, project, offline = _context(offline)
    name = parse_requirement(ref).name
    edit = add_environment(project, ref, ctx.settings, plugins=ctx.plugins, registry=registry, offline=offline,
                           prereleases=prereleases)
    synced = None if no_sync else sync_project(project, ctx.settings, plugins=ctx.plugins, frozen=True,
                                               offline=offline)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({"added": edit.entry, "locked": _lock_json(edit.locked.lock), "changes": edit.locked.changes(),
                   "fetched": [e.ref for e in synced.fetched] if synced else []})
        return
    _say(f"Added {edit.entry} to {project.pyproject}; locked {edit.locked.lock.environments[name].ref}")
    for line in _changes(edit.locked):
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
    from envhub.project import remove_environment

    ctx, project, offline = _context(offline)
    edit = remove_environment(project, name, ctx.settings, plugins=ctx.plugins, registry=registry, offline=offline)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({"removed": name, "locked": _lock_json(edit.locked.lock), "changes": edit.locked.changes()})
        return
    _say(f"Removed {name} from {project.pyproject}")
    for line in _changes(edit.locked):
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
    from envhub.project import lock_project

    if upgrade and upgrade_packages:
        raise click.UsageError("use --upgrade or --upgrade-package, not both")
    ctx, project, offline = _context(offline)
    result = lock_project(project, ctx.settings, plugins=ctx.plugins, upgrade=upgrade,
                          upgrade_packages=upgrade_packages, registry=registry, offline=offline,
                          prereleases=prereleases)
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
    from envhub.project import sync_project

    if locked and frozen:
        raise click.UsageError("use --locked or --frozen, not both")
    ctx, project, offline = _context(offline)
    result = sync_project(project, ctx.settings, plugins=ctx.plugins, locked=locked, frozen=frozen, offline=offline,
                          registry=registry, with_heldout=with_heldout,
                          on_fetch=None if as_json else lambda env: _say(f"Fetching {env.ref}"))
    installed: list[str] = []
    if install_python_deps and result.python.missing:
        installed = _install(result.python.missing)
    if as_json:
        from envhub.cli._output import emit_json

        missing = {} if installed else result.python.missing
        emit_json({"lock": str(project.lock_path), "relocked": result.relocked is not None,
                   "environments": _lock_json(result.lock), "fetched": [e.ref for e in result.fetched],
                   "python": {"required": result.python.required, "missing": missing, "installed": installed},
                   "images": [{"image": i.image, "environments": list(i.environments), "pulled": i.pulled,
                               "reason": i.reason} for i in result.images]})
        return
    if result.relocked is not None:
        _say(f"Locked {project.lock_path}")
        for line in _changes(result.relocked):
            _say(line)
    total = len(result.lock.environments)
    _say(f"Synced {total} environment{'s' if total != 1 else ''} ({len(result.fetched)} fetched)")
    for pull in result.images:
        used_by = ", ".join(pull.environments)
        _say(f"Pulled {pull.image} ({used_by})" if pull.pulled
             else f"Did not pull {pull.image} ({used_by}): {pull.reason}")
    if not installed:
        _report_python(result.python, install=install_python_deps)


def _report_python(python: PythonReport, *, install: bool) -> None:
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
    from envhub.project import read_project_lock
    from envhub.project import tree as project_tree

    _, project, _ = _context()
    shown = project_tree(project, read_project_lock(project))
    if shown.stale:
        _say(f"envhub: warning: {shown.lock_path} is out of date ({shown.stale}); run 'envhub lock'")
    if as_json:
        from envhub.cli._output import emit_json

        emit_json(shown.to_json())
        return
    from rich.console import Console
    from rich.tree import Tree

    top = Tree(shown.title)
    seen: set[str] = set()
    for node in shown.environments:
        _branch(top, node, seen)
    Console(highlight=False, soft_wrap=True).print(top)


def _branch(parent: Tree, node: TreeNode, seen: set[str]) -> None:
    """Add ``node`` under ``parent``; an environment already shown with its dependencies
    is shown again as ``(*)``, without them."""
    wanted = f"  ({node.requirement})" if node.requirement else ""
    label = f"{node.name} {node.version}{wanted}" if node.version is not None else f"{node.name} (not locked){wanted}"
    # dependencies None with a version: a cycle, whose dependencies are shown above
    if node.version is not None and node.name in seen and node.dependencies != ():
        parent.add(f"{label} (*)")
        return
    branch = parent.add(label)
    seen.add(node.name)
    for child in node.dependencies or ():
        _branch(branch, child, seen)


@click.command()
@registry_option
@offline_option
@json_option
def outdated(registry: str | None, offline: bool, as_json: bool) -> None:
    """List locked environments with newer versions: the newest that fits every
    requirement on it (what 'envhub lock --upgrade' would pick) and the newest published."""
    from envhub.project import outdated as find_outdated
    from envhub.project import read_project_lock

    ctx, project, offline = _context(offline)
    lock = read_project_lock(project)
    rows = find_outdated(project, lock, ctx.settings, plugins=ctx.plugins, registry=registry, offline=offline)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json([r.to_json() for r in rows])
        return
    if not rows:
        _say(f"All {len(lock.environments)} locked environments are up to date")
        return
    width = max(len(r.name) for r in rows)
    click.echo(f"{'environment':<{width}}  locked      compatible  latest")
    for r in rows:
        click.echo(f"{r.name:<{width}}  {r.locked:<10}  {r.compatible or '-':<10}  {r.latest or '-'}")
