"""``envhub tree``: the project's environments and what each depends on, as locked.

:func:`tree` builds the whole tree as a typed record, read from ``pyproject.toml`` and
``envhub.lock`` only (no registry, no cache); the CLI prints it, or its
:meth:`ProjectTree.to_json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envhub.project._lockfile import Lockfile
    from envhub.project._project import Project

__all__ = ["ProjectTree", "TreeNode", "tree"]


@dataclass(frozen=True)
class TreeNode:
    """One environment in the tree: asked for by its parent (or the project) with
    ``requirement``, locked at ``version``."""

    name: str
    #: The specifier it was asked for with (``>=1.0,<2``; ``""`` for any version).
    requirement: str
    #: The locked version; None if the lock does not have it.
    version: str | None
    #: What it depends on, as locked. None when it is not locked, or when it is one of
    #: its own ancestors (a cycle: its dependencies are shown above).
    dependencies: tuple[TreeNode, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"name", "requirement", "version"}``, and ``"dependencies"`` unless it is None."""
        node: dict[str, Any] = {"name": self.name, "requirement": self.requirement, "version": self.version}
        if self.dependencies is not None:
            node["dependencies"] = [d.to_json() for d in self.dependencies]
        return node


@dataclass(frozen=True)
class ProjectTree:
    """The project's environments, in the order ``[tool.envhub] environments`` lists
    them, each with its locked dependencies, transitively."""

    pyproject: Path
    lock_path: Path
    environments: tuple[TreeNode, ...]
    #: Why the lock no longer fits ``pyproject.toml`` (see :func:`stale_reason`); None if it does.
    stale: str | None = None

    @property
    def title(self) -> str:
        """The tree's root as shown: the project's directory and file (``trainer (pyproject.toml)``)."""
        return f"{self.pyproject.parent.name} ({self.pyproject.name})"

    def to_json(self) -> dict[str, Any]:
        """What ``envhub tree --json`` prints: ``{"project", "lock", "environments"}``."""
        return {"project": str(self.pyproject), "lock": str(self.lock_path),
                "environments": [n.to_json() for n in self.environments]}


def tree(project: Project, lock: Lockfile) -> ProjectTree:
    """The project's environments and their dependencies as ``lock`` has them. An
    environment the lock lacks is a leaf with version None; a lock that no longer fits
    the project is used as it is, and :attr:`ProjectTree.stale` says why.

    Raises :class:`envhub.errors.UsageError` for a malformed ``[tool.envhub] environments``."""
    from envhub.project._project import stale_reason

    roots = tuple(_node(lock, r.name, str(r.specifier), frozenset()) for r in project.requirements())
    return ProjectTree(project.pyproject, project.lock_path, roots, stale_reason(project, lock))


def _node(lock: Lockfile, name: str, requirement: str, ancestors: frozenset[str]) -> TreeNode:
    from envhub.project._resolver import parse_requirement

    env = lock.get(name)
    if env is None:
        return TreeNode(name, requirement, None)
    if name in ancestors:
        return TreeNode(name, requirement, env.version)
    children = []
    for dep in env.dependencies:
        dep_name = parse_requirement(dep).name
        children.append(_node(lock, dep_name, dep[len(dep_name):], ancestors | {name}))
    return TreeNode(name, requirement, env.version, tuple(children))
