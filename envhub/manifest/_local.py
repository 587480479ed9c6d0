"""Path dependencies: dependencies read from directories beside the bundle, for local development.

``[dependencies] "acme/x" = { version = ">=1.0,<2", path = "../x" }`` names a directory
(relative to the bundle) holding ``acme/x``. A bundle loaded from its directory (``envhub
validate --check``, ``envhub eval DIR``, ``envhub.load(DIR)``, the pytest plugin) takes that
dependency from the directory, so a composite can be checked before its children are
published. ``envhub build`` publishes it as ``"acme/x" = "==<the directory's version>"``.

The directory must hold a valid manifest whose name is the key and whose version satisfies
``version`` (pre-releases included: a child under development is often one). Nothing here
imports environment code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from envhub.errors import BundleError
from envhub.ids import parse_specifier
from envhub.manifest._load import MANIFEST_FILENAME, parse_manifest
from envhub.manifest._models import Manifest
from envhub.problems import Problem

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup

__all__ = ["LocalDependency", "local_dependencies", "local_dependency_problems"]


@dataclass(frozen=True)
class LocalDependency:
    """A path dependency found where its manifest says: its name, the path as written,
    its directory and its manifest."""

    name: str
    path: str
    root: Path
    manifest: Manifest

    @property
    def version(self) -> str:
        return self.manifest.environment.version


def local_dependency_problems(manifest: Manifest, root: Path, *, file: str | None = None,
                              plugins: PluginLookup | None = None) -> tuple[dict[str, LocalDependency], list[Problem]]:
    """The path dependencies of ``manifest`` (the bundle at ``root``) that are sound, and a
    problem for each that is not: a directory without a manifest, an invalid manifest
    (its own problems too), another environment's name, or a version outside ``version``.
    ``file`` is the manifest as the user knows it, for the problems."""
    file = file or str(root / MANIFEST_FILENAME)
    found: dict[str, LocalDependency] = {}
    problems: list[Problem] = []
    for name, written in manifest.dependency_paths().items():
        field = f'dependencies."{name}"'
        directory = root / written
        child_file = directory / MANIFEST_FILENAME
        try:
            source = child_file.read_bytes()
        except (OSError, ValueError) as e:
            why = "no such directory" if not directory.is_dir() else f"no {MANIFEST_FILENAME} in it" \
                if not child_file.exists() else f"cannot read its {MANIFEST_FILENAME} ({type(e).__name__})"
            problems.append(Problem("error", "path-dependency", f"path {written!r}: {why}", file=file,
                                    field=f"{field}.path",
                                    hint=f"point path at {name}'s bundle directory, relative to {root}"))
            continue
        child, child_problems = parse_manifest(source, file=str(child_file), plugins=plugins)
        if child is None:
            problems.extend(p for p in child_problems if p.severity == "error")
            problems.append(Problem("error", "path-dependency", f"path {written!r}: its {MANIFEST_FILENAME} is invalid",
                                    file=file, field=f"{field}.path",
                                    hint=f"fix it: run 'envhub validate {directory}'"))
            continue
        env = child.environment
        if env.name != name:
            problems.append(Problem("error", "path-dependency", f"path {written!r} holds {env.name}, not {name}",
                                    file=file, field=f"{field}.path",
                                    hint=f"point path at {name}'s bundle directory, "
                                         f'or name the dependency "{env.name}"'))
            continue
        specifier = manifest.dependency_specifiers()[name]
        if not parse_specifier(specifier).contains(Version(env.version), prereleases=True):
            problems.append(Problem("error", "path-dependency",
                                    f"path {written!r} holds {name} {env.version}, which is not {specifier}",
                                    file=file, field=f"{field}.version",
                                    hint=f"widen the version specifier, or change the version in {child_file}"))
            continue
        found[name] = LocalDependency(name, written, directory.resolve(), child)
    return found, problems


def local_dependencies(manifest: Manifest, root: Path, *,
                       plugins: PluginLookup | None = None) -> dict[str, LocalDependency]:
    """The path dependencies of the bundle at ``root``, by name. Raises
    :class:`BundleError` with every problem if any is unsound."""
    found, problems = local_dependency_problems(manifest, root, plugins=plugins)
    if problems:
        raise BundleError(f"{root}: cannot read {manifest.environment.name}'s path dependencies", problems,
                          hint=f"run 'envhub validate {root}'")
    return found
