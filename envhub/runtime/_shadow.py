"""Refusing an untrusted bundle whose files Python would import in place of other modules.

envhub never puts a bundle directory on ``sys.path``, but Python may: the working directory
is ``sys.path[0]`` for ``python -c``, ``python -m`` and the interactive interpreter, and pytest
inserts a test file's directory. Then ``import json``, anywhere in the process, runs the
bundle's ``json.py``. :func:`refuse_shadowing` finds such files before :func:`envhub.load`
imports anything else, so this module imports only what Python has loaded at startup
(``os``, ``sys``, and ``importlib``'s own submodules, which ``sys.path`` cannot replace).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys

__all__ = ["refuse_shadowing", "shadowing_files"]

_METADATA = (".dist-info", ".egg-info")


def _inside(directory: str, root: str) -> bool:
    return directory == root or directory.startswith(root.rstrip(os.sep) + os.sep)


def _module_name(entry: os.DirEntry[str]) -> str | None:
    """The top-level name under which ``import`` (or plugin discovery) finds ``entry``."""
    if entry.is_dir():
        if entry.name.endswith(_METADATA):
            return entry.name  # package metadata: its entry points are how plugins are found
        inits = [f"__init__{suffix}" for suffix in importlib.machinery.all_suffixes()]
        return entry.name if any(os.path.isfile(os.path.join(entry.path, i)) for i in inits) else None
    for suffix in importlib.machinery.all_suffixes():
        if entry.name.endswith(suffix):
            name = entry.name[: -len(suffix)]
            return name if name.isidentifier() else None
    return None


def _shadows(name: str, elsewhere: list[str]) -> bool:
    """Whether a later ``import name`` means another module without the bundle: a standard
    or built-in module, or one found on the other ``sys.path`` entries."""
    if name.endswith(_METADATA):
        return True
    if name in sys.modules:  # imported already: an import statement returns that module
        return False
    return (name in sys.stdlib_module_names or name in sys.builtin_module_names
            or importlib.machinery.PathFinder.find_spec(name, elsewhere) is not None)


def _entries_inside(root: str) -> list[str]:
    return [e for e in sys.path if isinstance(e, str) and _inside(os.path.realpath(e or os.curdir), root)]


def shadowing_files(root: str | os.PathLike[str]) -> list[str]:
    """Paths (relative to ``root``) of the bundle's files that an ``import`` in this process
    would run in place of the module of the same name, because a ``sys.path`` entry lies
    inside the bundle at ``root`` (``""`` and relative entries are the working directory).
    Package metadata (``*.dist-info``, ``*.egg-info``) there is listed too: plugins are
    found through it.

    Not listed: a module already imported (an import statement returns it), and a file
    whose name no other module has (only the bundle's own code would import it).

    >>> shadowing_files("/nonexistent/bundle")
    []
    """
    bundle = os.path.realpath(root)
    inside = _entries_inside(bundle)
    if not inside:
        return []
    elsewhere = [e for e in sys.path if isinstance(e, str) and e not in inside]
    found: dict[str, str] = {}
    for entry in inside:
        try:
            children = sorted(os.scandir(entry or os.curdir), key=lambda c: c.name)
        except OSError:
            continue
        for child in children:
            name = _module_name(child)
            if name is not None and name not in found and _shadows(name, elsewhere):
                found[name] = os.path.relpath(os.path.realpath(child.path), bundle).replace(os.sep, "/")
    return list(found.values())


def refuse_shadowing(root: str | os.PathLike[str]) -> None:
    """Raise :class:`envhub.errors.TrustError` if :func:`shadowing_files` lists any file of
    the bundle at ``root``: the files of a bundle that is not trusted must not run because
    its directory is on ``sys.path``."""
    found = shadowing_files(root)
    if not found:
        return
    bundle = os.path.realpath(root)
    saved = list(sys.path)
    sys.path[:] = [e for e in saved if e not in _entries_inside(bundle)]
    try:  # envhub.errors imports modules the bundle shadows: import it without the bundle
        from envhub.errors import TrustError
    finally:
        sys.path[:] = saved
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise TrustError(f"the bundle at {bundle} is on sys.path, so its files {shown} would be imported in place of the "
                     "modules (or installed packages) of the same names, and it is not trusted",
                     hint="start Python from another directory, or with python -P (PYTHONSAFEPATH=1): python -c, "
                          "python -m and the interactive interpreter put the working directory on sys.path; pass "
                          "trust_code=True only if you trust every file of the bundle")
