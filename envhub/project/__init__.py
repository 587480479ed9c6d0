"""Training projects: environments declared in ``pyproject.toml``, resolved, locked in
``envhub.lock`` and synced into the cache (``spec/lockfile.md``, ``docs/projects.md``).

This is the whole public surface of the package; the CLI's ``add``, ``remove``, ``lock``,
``sync``, ``tree`` and ``outdated`` are thin wrappers over it. Names are imported on first
use, so a warm ``envhub sync`` does not import the resolver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envhub.project._edit import with_environment, without_environment, write_environments
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
    )
    from envhub.project._resolver import Index, Requirement, Resolution, ResolutionError, parse_requirement, resolve

_WHERE = {
    **dict.fromkeys(["with_environment", "without_environment", "write_environments"], "_edit"),
    **dict.fromkeys(["DEFAULT_SOURCE", "LOCK_FILENAME", "LOCK_VERSION", "LockedEnv", "LockError", "Lockfile",
                     "dumps", "loads", "read_lock", "write_lock"], "_lockfile"),
    **dict.fromkeys(["PYPROJECT", "LockResult", "Project", "PythonReport", "RegistryIndex", "StaleLockError",
                     "SyncResult", "find_project", "install_command", "install_python",
                     "lock_project", "locked_entry", "locked_for", "python_report", "read_project_lock",
                     "registry_urls", "require_project", "resolve_project", "source_of", "source_url",
                     "stale_reason", "sync_project"], "_project"),
    **dict.fromkeys(["Index", "Requirement", "Resolution", "ResolutionError", "parse_requirement", "resolve"],
                    "_resolver"),
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'envhub.project' has no attribute {name!r}")
    return getattr(importlib.import_module(f"envhub.project.{_WHERE[name]}"), name)
