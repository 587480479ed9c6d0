"""Training projects: environments declared in ``pyproject.toml``, resolved, locked in
``envhub.lock`` and synced into the cache (``spec/lockfile.md``, ``docs/projects.md``).

This is the whole public surface of the package; the CLI's ``add``, ``remove``, ``lock``,
``sync``, ``tree`` and ``outdated`` are thin wrappers over :func:`add_environment`,
:func:`remove_environment`, :func:`lock_project`, :func:`sync_project`, :func:`tree` and
:func:`outdated`. What may contact a registry takes ``settings`` and ``plugins`` from its
caller. Names are imported on first use, so a warm ``envhub sync`` does not import the
resolver.

>>> from envhub.project import find_project, read_project_lock, tree     # doctest: +SKIP
>>> project = find_project()                                             # doctest: +SKIP
>>> for node in tree(project, read_project_lock(project)).environments:  # doctest: +SKIP
...     print(node.name, node.version)
acme/sql-shop 1.3.0
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envhub.project._edit import (
        EditResult,
        add_environment,
        remove_environment,
        with_environment,
        without_environment,
        write_environments,
    )
    from envhub.project._images import ImagePull, bundle_images, pull_images
    from envhub.project._lockfile import (
        DEFAULT_SOURCE,
        LOCK_FILENAME,
        LOCK_VERSION,
        LockedEnv,
        LockError,
        Lockfile,
        dumps,
        loads,
        read_lock,
        write_lock,
    )
    from envhub.project._outdated import OutdatedEntry, outdated
    from envhub.project._project import (
        PYPROJECT,
        LockResult,
        Project,
        PythonReport,
        RegistryIndex,
        StaleLockError,
        SyncResult,
        find_project,
        install_command,
        install_python,
        lock_project,
        locked_entry,
        locked_for,
        python_report,
        read_project_lock,
        registry_urls,
        require_project,
        resolve_project,
        source_of,
        source_url,
        stale_reason,
        sync_project,
        unsatisfied_requirements,
    )
    from envhub.project._resolver import Index, Requirement, Resolution, ResolutionError, parse_requirement, resolve
    from envhub.project._tree import ProjectTree, TreeNode, tree

_WHERE = {
    **dict.fromkeys(["EditResult", "add_environment", "remove_environment", "with_environment",
                     "without_environment", "write_environments"], "_edit"),
    **dict.fromkeys(["ImagePull", "bundle_images", "pull_images"], "_images"),
    **dict.fromkeys(["DEFAULT_SOURCE", "LOCK_FILENAME", "LOCK_VERSION", "LockedEnv", "LockError", "Lockfile",
                     "dumps", "loads", "read_lock", "write_lock"], "_lockfile"),
    **dict.fromkeys(["OutdatedEntry", "outdated"], "_outdated"),
    **dict.fromkeys(["PYPROJECT", "LockResult", "Project", "PythonReport", "RegistryIndex", "StaleLockError",
                     "SyncResult", "find_project", "install_command", "install_python",
                     "lock_project", "locked_entry", "locked_for", "python_report", "read_project_lock",
                     "registry_urls", "require_project", "resolve_project", "source_of", "source_url",
                     "stale_reason", "sync_project", "unsatisfied_requirements"], "_project"),
    **dict.fromkeys(["Index", "Requirement", "Resolution", "ResolutionError", "parse_requirement", "resolve"],
                    "_resolver"),
    **dict.fromkeys(["ProjectTree", "TreeNode", "tree"], "_tree"),
}
# Written out (not sorted(_WHERE)) so that type checkers see the re-exports;
# tests/test_project_api.py keeps the two in agreement.
__all__ = ["DEFAULT_SOURCE", "EditResult", "ImagePull", "Index", "LOCK_FILENAME", "LOCK_VERSION", "LockError",
           "LockResult", "LockedEnv", "Lockfile", "OutdatedEntry", "PYPROJECT", "Project", "ProjectTree",
           "PythonReport", "RegistryIndex", "Requirement", "Resolution", "ResolutionError", "StaleLockError",
           "SyncResult", "TreeNode", "add_environment", "bundle_images", "dumps", "find_project", "install_command",
           "install_python", "loads", "lock_project", "locked_entry", "locked_for", "outdated", "parse_requirement",
           "pull_images", "python_report", "read_lock", "read_project_lock", "registry_urls", "remove_environment",
           "require_project", "resolve", "resolve_project", "source_of", "source_url", "stale_reason", "sync_project",
           "tree", "unsatisfied_requirements", "with_environment", "without_environment", "write_environments",
           "write_lock"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'envhub.project' has no attribute {name!r}")
    return getattr(importlib.import_module(f"envhub.project.{_WHERE[name]}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
