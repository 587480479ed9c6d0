"""Installed environment packages: entry points of the group ``envhub.environments``.

A distribution declares each environment it ships as

    [project.entry-points."envhub.environments"]
    "acme/sql-shop" = "acme_sql_shop:bundle"

The name is the environment's id, which must be the ``name`` in its manifest. The value is
``PACKAGE`` or ``PACKAGE:DIR``: ``PACKAGE`` is a dotted module path whose directory is
found with the import system's finders, without importing (executing) anything; ``DIR`` is
a relative POSIX path under that directory (a package's own directory, or the directory
of a single-file module), and the bundle directory (with its ``envhub.toml``) is that
path, or the package's directory itself when ``DIR`` is left out. So the bundle's files
ship inside the package, as package data.

Reading these entries reads ``envhub.toml`` files only; the package's code is never
imported by listing, validating or finding it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
from collections.abc import Iterable, Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import TYPE_CHECKING

from envhub.hookspecs import EnvironmentPackage
from envhub.ids import parse_name

if TYPE_CHECKING:
    from envhub.plugins import PluginManager

__all__ = ["bundle_dir", "find_installed", "packages_from_entry_points"]

_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_REL_DIR = re.compile(r"(?!/)(?!.*\\)(?!(.*/)?\.\.?(/|$))(?!.*//)[^:]+")
MANIFEST = "envhub.toml"


def bundle_dir(value: str) -> Path:
    """The bundle directory an ``envhub.environments`` entry-point value names.

    Raises ValueError saying what is wrong: a malformed value, a package that is not
    installed, or a directory without an ``envhub.toml``."""
    module, sep, rel = (part.strip() for part in value.partition(":"))
    if not _MODULE.fullmatch(module) or (sep and not _REL_DIR.fullmatch(rel.rstrip("/"))):
        raise ValueError(f"invalid entry point value {value!r}: expected 'package' or 'package:relative/dir'")
    top, *rest = module.split(".")
    try:
        # For a top-level name, find_spec only asks the finders: nothing is executed.
        spec = importlib.util.find_spec(top)
        for i in range(1, len(rest) + 1):
            if spec is None or spec.submodule_search_locations is None:
                break
            # PathFinder looks inside the parent's directories without importing the parent
            # (importlib.util.find_spec("a.b") would import "a").
            spec = importlib.machinery.PathFinder.find_spec(".".join([top, *rest[:i]]),
                                                            list(spec.submodule_search_locations))
    except (ImportError, ValueError) as e:
        raise ValueError(f"cannot find package {module!r}: {e}") from None
    if spec is None:
        raise ValueError(f"package {module!r} is not installed")
    if spec.submodule_search_locations:
        bases = [Path(location) for location in spec.submodule_search_locations]
    elif spec.origin and spec.has_location:
        bases = [Path(spec.origin).parent]
    else:
        raise ValueError(f"package {module!r} has no directory on disk")
    for base in bases:
        candidate = base / rel if rel else base
        if (candidate / MANIFEST).is_file():
            return candidate
    raise ValueError(f"no {MANIFEST} in {bases[0] / rel if rel else bases[0]}")


def _manifest_identity(path: Path) -> tuple[str | None, str | None]:
    """``[environment]`` name and version of the manifest in ``path``, read as plain TOML
    (full validation happens when the environment is loaded)."""
    from envhub import _toml

    try:
        data = _toml.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, _toml.TOMLDecodeError) as e:
        raise ValueError(f"cannot read {path / MANIFEST}: {e}") from None
    env = data.get("environment")
    env = env if isinstance(env, dict) else {}
    name, version = env.get("name"), env.get("version")
    return (name if isinstance(name, str) else None, version if isinstance(version, str) else None)


def packages_from_entry_points(entry_points: Iterable[EntryPoint]) -> Iterator[EnvironmentPackage]:
    """One :class:`EnvironmentPackage` per entry point, with ``error`` set when the entry
    cannot be used (its manifest missing, unreadable, or naming another environment)."""
    for ep in entry_points:
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else None
        dist_version = dist.version if dist is not None else None
        try:
            parse_name(ep.name)
            path = bundle_dir(ep.value)
            name, version = _manifest_identity(path)
        except ValueError as e:
            yield EnvironmentPackage(ep.name, None, dist_name, dist_version, error=str(e))
            continue
        if name != ep.name:
            yield EnvironmentPackage(ep.name, path, dist_name, dist_version, version,
                                     error=f"its manifest {path / MANIFEST} names {name!r}, not {ep.name!r}")
            continue
        yield EnvironmentPackage(ep.name, path, dist_name, dist_version, version)


def find_installed(text: str, plugins: PluginManager) -> EnvironmentPackage | None:
    """The installed environment package the id ``text`` names, or None: when no package
    provides that name, or the id asks for a version (``@1.2.0``, ``>=1.2``) the package's
    manifest version does not satisfy.
    Raises :class:`envhub.errors.PluginConflictError` when two distributions provide the
    name, and :class:`envhub.errors.PluginError` when its entry is broken."""
    from envhub.errors import InvalidIdError
    from envhub.ids import parse_ref

    try:
        ref = parse_ref(text)
    except InvalidIdError:
        return None  # not an id: the caller says so
    package: EnvironmentPackage | None = plugins.lookup("environments", str(ref.name))
    if package is None or package.path is None:
        return None
    if ref.version is not None or ref.specifier is not None:
        from packaging.version import InvalidVersion

        try:
            if package.version is None or not ref.accepts(package.version, prereleases=True):
                return None
        except InvalidVersion:
            return None
    return package
