"""A training project: ``[tool.envhub]`` in ``pyproject.toml``, and its ``envhub.lock``.

``environments = ["acme/sql-shop>=1.2,<2", ...]`` says what the project needs; ``envhub
lock`` resolves it against every configured registry into ``envhub.lock``; ``envhub sync``
makes sure every locked environment is in the cache, verified, and reports the Python
dependencies they need. Inside a project, ``envhub.load`` and ``envhub eval`` use the
locked versions (:meth:`Lockfile.locked_for`).

Everything that may contact a registry takes ``settings`` and ``plugins`` (the plugin
manager that knows the registry schemes) from its caller; nothing here reads the
environment or makes a plugin manager of its own.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from envhub.errors import EnvhubError, ExitCode, IntegrityError, UsageError
from envhub.lookup import PluginLookup
from envhub.project._lockfile import (
    DEFAULT_SOURCE,
    LOCK_FILENAME,
    LockedEnv,
    LockError,
    Lockfile,
    read_lock,
    write_lock,
)
from envhub.registry import VersionEntry
from envhub.settings import Settings

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from envhub.project._images import ImagePull
    from envhub.project._resolver import Requirement, Resolution
    from envhub.registry import Registry

__all__ = ["PYPROJECT", "LockResult", "Project", "PythonReport", "RegistryIndex", "StaleLockError", "SyncResult",
           "find_project", "install_command", "install_python", "lock_project", "locked_entry", "locked_for",
           "python_report", "read_project_lock", "registry_urls", "require_project", "resolve_project", "source_of",
           "source_url", "stale_reason", "sync_project", "unsatisfied_requirements"]

PYPROJECT = "pyproject.toml"
_FIELD = "tool.envhub.environments"


class StaleLockError(LockError):
    """``envhub sync --locked``: the lock would change."""

    exit_code = ExitCode.CHECK_FAILED


@dataclass
class Project:
    """A training project: the directory of a ``pyproject.toml`` and what its
    ``[tool.envhub]`` table asks for. Found with :func:`find_project`; the entries of
    ``environments`` are checked when :meth:`specs` or :meth:`requirements` is called."""

    root: Path
    pyproject: Path
    #: ``[tool.envhub] environments``, as written.
    environments: list[str]
    #: The whole ``[tool.envhub]`` table.
    table: dict[str, object] = field(default_factory=dict)

    @property
    def lock_path(self) -> Path:
        """Where the project's lock is (or would be): ``envhub.lock`` beside ``pyproject.toml``."""
        return self.root / LOCK_FILENAME

    def specs(self) -> list[tuple[str, SpecifierSet]]:
        """Each environment's name and specifier; :class:`UsageError` naming the entry
        and the fix. (No resolver import: a warm ``envhub sync`` needs only this.)"""
        from envhub.errors import InvalidIdError

        out: list[tuple[str, SpecifierSet]] = []
        seen: dict[str, int] = {}
        for i, text in enumerate(self.environments):
            try:
                name, specifier = name_and_specifier(text)
            except InvalidIdError as e:
                raise UsageError(f"{self.pyproject}: {_FIELD}[{i}]: {e.message}",
                                 hint='write "namespace/name", optionally with a version specifier: '
                                      '"acme/sql-shop>=1.2,<2"') from None
            if name in seen:
                raise UsageError(f"{self.pyproject}: {_FIELD}[{i}]: {name} is already listed "
                                 f"({_FIELD}[{seen[name]}])",
                                 hint="list each environment once, with one specifier (e.g. \">=1.2,<2\")")
            seen[name] = i
            out.append((name, specifier))
        return out

    def requirements(self) -> list[Requirement]:
        """:meth:`specs` as resolver requirements, in the order written; the same errors."""
        from envhub.project._resolver import Requirement

        return [Requirement(name, specifier) for name, specifier in self.specs()]

    def normalized(self) -> list[str]:
        """The requirements as the lock's ``requires`` records them: normalized, sorted."""
        return sorted(f"{name}{specifier}" for name, specifier in self.specs())


def name_and_specifier(text: str) -> tuple[str, SpecifierSet]:
    """``acme/a``, ``acme/a>=1,<2`` or ``acme/a@1.2.0`` (``==1.2.0``), as a name and a
    specifier set. Raises :class:`envhub.errors.InvalidIdError`."""
    from packaging.specifiers import SpecifierSet

    from envhub.ids import parse_ref

    ref = parse_ref(text)
    if ref.version is not None:
        return str(ref.name), SpecifierSet(f"=={ref.version}")
    return str(ref.name), ref.specifier or SpecifierSet()


def find_project(cwd: Path | None = None) -> Project | None:
    """The project around ``cwd`` (default: the current directory): the nearest
    ``pyproject.toml`` from there up; None if there is none. Raises
    :class:`envhub.errors.UsageError` naming the file when ``[tool.envhub]`` is not a table
    or ``environments`` is not a list of strings."""
    from envhub._toml import find_pyproject, load_file

    path = find_pyproject((cwd or Path.cwd()).resolve())
    if path is None:
        return None
    table = load_file(path).get("tool", {}).get("envhub", {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.envhub] must be a table", hint="write [tool.envhub] with environments = [...]")
    environments = table.get("environments", [])
    if not isinstance(environments, list) or not all(isinstance(e, str) for e in environments):
        raise UsageError(f"{path}: {_FIELD} must be a list of strings",
                         hint='e.g. environments = ["acme/sql-shop>=1.2,<2"]')
    return Project(path.parent, path, list(environments), table)


def require_project(cwd: Path | None = None) -> Project:
    """:func:`find_project`, and :class:`envhub.errors.UsageError` (naming the directory
    and the fix) where there is no project."""
    project = find_project(cwd)
    if project is None:
        raise UsageError(f"no {PYPROJECT} in {(cwd or Path.cwd()).resolve()} or any parent directory",
                         hint=f"run this inside a project, or create {PYPROJECT} with a [tool.envhub] table")
    return project


# --- where candidates come from ---------------------------------------------------------


def registry_urls(project: Project | None, settings: Settings, choice: str | None = None) -> list[str]:
    """The URLs candidates are looked up in (``spec/lockfile.md`` section 2): the
    registry ``choice`` names (a configured name or a URL) alone if given; otherwise the
    default registry, then every named registry, the project's and the user's, without
    repeats. Raises :class:`envhub.errors.UsageError` for a malformed configuration or an
    unknown name."""
    from envhub.registry import load_registry_config

    config = load_registry_config(settings, cwd=project.root if project else None)
    urls = [config.url(choice)]
    if choice is None:
        urls.extend(config.url(name) for name in config.named)
    return list(dict.fromkeys(urls))


class RegistryIndex:
    """The versions of a name across registries (an :class:`Index` for :func:`resolve`);
    the first registry that has a version wins it. Offline, what the cache remembers of
    each registry. Registries are opened on first use, with ``plugins`` knowing their
    URL schemes."""

    def __init__(self, urls: Sequence[str], settings: Settings, *, plugins: PluginLookup,
                 offline: bool = False) -> None:
        from envhub.cache import Cache

        self.urls = list(urls)
        self.settings = settings
        self.plugins = plugins
        self.offline = offline
        self.cache = Cache(settings.cache)
        self._registries: dict[str, Registry] = {}

    def versions(self, name: str) -> list[VersionEntry]:
        """Every version of ``name`` the registries have, yanked ones included, oldest
        first; empty for a name none of them has. Raises
        :class:`envhub.errors.RegistryError` for a registry that cannot be reached."""
        from envhub.errors import EnvNotFoundError
        from envhub.registry import version_key

        found: dict[str, VersionEntry] = {}
        for url in self.urls:
            if self.offline:
                entries = self.cache.remembered(url, name)
            else:
                registry = self.registry(url)
                try:
                    entries = registry.versions(name)
                except EnvNotFoundError:
                    entries = []
            for entry in entries:
                found.setdefault(version_key(entry.version), entry)
        return sorted(found.values(), key=lambda e: e.parsed_version)

    def registry(self, url: str) -> Registry:
        """The registry at ``url``, opened once per index."""
        from envhub.registry import open_registry

        if url not in self._registries:
            self._registries[url] = open_registry(url, self.settings, plugins=self.plugins)
        return self._registries[url]

    def describe(self) -> str:
        """Where names are looked up, for messages."""
        where = " or ".join(_display(u, self.settings) for u in self.urls)
        return f"{where}{' (offline: what the cache remembers)' if self.offline else ''}"


def _display(url: str, settings: Settings) -> str:
    return "the embedded registry" if url == settings.default_registry else url


def source_of(url: str, settings: Settings) -> str:
    """What the lock records for a registry: "default" for the embedded one (its place is
    per machine), else the URL."""
    return DEFAULT_SOURCE if url == settings.default_registry else url


def source_url(env: LockedEnv, settings: Settings) -> str:
    """The URL of the registry a locked environment came from (the inverse of :func:`source_of`)."""
    return settings.default_registry if env.source == DEFAULT_SOURCE else env.source


def locked_entry(env: LockedEnv, settings: Settings) -> VersionEntry:
    """The index entry a lock records: enough to fetch and verify, no index needed."""
    return VersionEntry(name=env.name, version=env.version, digest=env.digest, size=env.size, published_at="",
                        score_version=env.score_version, heldout_digest=env.heldout_digest, locator=env.locator,
                        registry=source_url(env, settings))


# --- lock -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LockResult:
    """What :func:`lock_project` (or an edit of the project's environments) did."""

    #: The lock now in ``envhub.lock``.
    lock: Lockfile
    #: The lock before, if there was one.
    previous: Lockfile | None
    #: False if ``envhub.lock`` already held exactly these bytes.
    written: bool
    resolution: Resolution

    def changes(self) -> list[tuple[str, str | None, str | None]]:
        """(name, old version, new version) for every environment added, removed or moved."""
        before = {n: e.version for n, e in (self.previous.environments if self.previous else {}).items()}
        after = {n: e.version for n, e in self.lock.environments.items()}
        return [(n, before.get(n), after.get(n)) for n in sorted({*before, *after}) if before.get(n) != after.get(n)]


def resolve_project(project: Project, settings: Settings, *, plugins: PluginLookup, upgrade: bool = False,
                    upgrade_packages: Sequence[str] = (), registry: str | None = None, offline: bool = False,
                    prereleases: bool | None = None, previous: Lockfile | None = None) -> tuple[Lockfile, Resolution]:
    """Resolve the project's requirements into a lock (not written), against
    :func:`registry_urls` ``(project, settings, registry)``; offline, against what the
    cache remembers. Versions ``previous`` has are kept while they fit, unless
    ``upgrade`` (all) or ``upgrade_packages`` (those names) says otherwise;
    ``prereleases`` None keeps the previous lock's choice.

    Raises :class:`envhub.errors.UsageError` for a malformed project or an upgrade of a
    name it does not have, :class:`ResolutionError` when nothing fits (saying why),
    :class:`envhub.errors.IntegrityError` when a registry has other bytes under a locked
    version, and :class:`envhub.errors.RegistryError` for a registry out of reach."""
    from envhub.project._resolver import resolve

    requirements = project.requirements()
    for name in upgrade_packages:
        if name not in (previous.environments if previous else {}) and name not in {r.name for r in requirements}:
            raise UsageError(f"--upgrade-package {name}: not in the project or its lock",
                             hint="name an environment listed by 'envhub tree'")
    preferred = {} if upgrade or previous is None else {
        n: e.version for n, e in previous.environments.items() if n not in upgrade_packages}
    pre = (previous.prereleases if previous else False) if prereleases is None else prereleases
    index = RegistryIndex(registry_urls(project, settings, registry), settings, plugins=plugins, offline=offline)
    resolution = resolve(requirements, index, prereleases=pre, preferred=preferred)
    environments = {}
    for name, entry in resolution.pins.items():
        old = previous.get(name) if previous else None
        if old is not None and old.version == entry.version and old.digest != entry.digest:
            raise IntegrityError(
                f"{entry.ref}: {entry.registry or 'the registry'} now has different bytes ({entry.digest[:19]}...) "
                f"than {project.lock_path} recorded ({old.digest[:19]}...)",
                hint="a published version never changes: the registry was damaged or replaced; find out why "
                     "before relocking (delete the lock entry to accept the new bytes)")
        environments[name] = LockedEnv(
            name=name, version=entry.version, digest=entry.digest, size=entry.size,
            source=source_of(entry.registry, settings), locator=entry.locator, score_version=entry.score_version,
            heldout_digest=entry.heldout_digest,
            dependencies=tuple(sorted(f"{n}{s}" for n, s in entry.dependencies)),
            python_dependencies=tuple(sorted(entry.python_dependencies)))
    from envhub.project._images import entry_images

    for name, entry in resolution.pins.items():
        # The images a version references are in its archive (fetched, verified, once);
        # offline and not cached, they stay unknown, and sync's check finds them.
        images = entry_images(entry, settings, plugins=plugins, offline=offline)
        if images:
            environments[name] = replace(environments[name], images=images)
    lock = Lockfile(sorted(str(r) for r in requirements), environments, pre)
    return lock, resolution


def lock_project(project: Project, settings: Settings, *, plugins: PluginLookup, upgrade: bool = False,
                 upgrade_packages: Sequence[str] = (), registry: str | None = None, offline: bool = False,
                 prereleases: bool | None = None) -> LockResult:
    """``envhub lock``: :func:`resolve_project` against the existing lock, then write
    ``envhub.lock`` (only if its bytes change). The same errors, and :class:`LockError`
    for a malformed existing lock."""
    previous = read_lock(project.lock_path)
    lock, resolution = resolve_project(project, settings, plugins=plugins, upgrade=upgrade,
                                       upgrade_packages=upgrade_packages, registry=registry, offline=offline,
                                       prereleases=prereleases, previous=previous)
    written = write_lock(project.lock_path, lock)
    return LockResult(lock, previous, written, resolution)


def stale_reason(project: Project, lock: Lockfile) -> str | None:
    """Why ``lock`` no longer fits the project (None if it does). Checked without a
    registry: the same requirements, every one satisfied, every dependency locked."""
    wanted = project.normalized()
    if sorted(lock.requires) != wanted:
        added = sorted(set(wanted) - set(lock.requires))
        removed = sorted(set(lock.requires) - set(wanted))
        parts = [f"added {', '.join(added)}"] if added else []
        parts += [f"removed {', '.join(removed)}"] if removed else []
        return f"{project.pyproject.name} changed since the lock was made ({'; '.join(parts)})"
    needed = project.specs()
    for env in lock.environments.values():
        needed.extend(name_and_specifier(d) for d in env.dependencies)
    for name, specifier in needed:
        have = lock.get(name)
        if have is None:
            return f"{name} is needed but not locked"
        if not specifier.contains(have.version, prereleases=True):
            return f"{name}{specifier} is needed but {have.ref} is locked"
    return None


# --- sync -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyncResult:
    """What :func:`sync_project` did."""

    #: The lock synced.
    lock: Lockfile
    relocked: LockResult | None
    #: Environments fetched now, and those already in the cache.
    fetched: list[LockedEnv]
    cached: list[LockedEnv]
    #: The Python dependencies the locked environments need, and which are missing here.
    python: PythonReport
    #: The container images the locked environments reference: pulled, or why not.
    images: list[ImagePull] = field(default_factory=list)


def read_project_lock(project: Project) -> Lockfile:
    """The project's ``envhub.lock``; :class:`LockError` if there is none (with the fix)
    or it is malformed."""
    lock = read_lock(project.lock_path)
    if lock is None:
        raise LockError(f"{project.lock_path} does not exist", hint="create it with 'envhub lock'")
    return lock


def sync_project(project: Project, settings: Settings, *, plugins: PluginLookup, locked: bool = False,
                 frozen: bool = False, offline: bool = False, registry: str | None = None,
                 with_heldout: bool = False, on_fetch: Callable[[LockedEnv], None] | None = None) -> SyncResult:
    """``envhub sync``: bring the lock up to date (unless ``frozen``; ``locked`` raises
    :class:`StaleLockError` instead when it would change), then make sure every locked
    environment is in the cache, verified against its locked digest, fetching it from
    the registry it was locked from (``on_fetch`` is called before each fetch).

    Raises what :func:`lock_project` raises when relocking, :class:`LockError` for a
    missing (``frozen``) or malformed lock, :class:`envhub.errors.IntegrityError` for
    bytes that do not match the lock, and :class:`envhub.errors.EnvNotFoundError` for an
    environment not in the cache when ``offline``."""
    relocked = None

    def relock(reason: str) -> LockResult:
        """The lock made anew because of ``reason``, or StaleLockError with ``locked``."""
        if locked:
            raise StaleLockError(f"{project.lock_path} is out of date: {reason}",
                                 hint="run 'envhub lock' and commit the new envhub.lock")
        return lock_project(project, settings, plugins=plugins, registry=registry, offline=offline)

    memo = _Memo(settings, project)
    known = memo.read()
    if frozen or known is not None:
        # A lock found up to date before, with these very bytes of both files, still is.
        lock = read_project_lock(project)
    else:
        lock = read_lock(project.lock_path)  # type: ignore[assignment]
        reason = "there is no lock yet" if lock is None else stale_reason(project, lock)
        if reason is not None:
            relocked = relock(reason)
            lock = relocked.lock
    from envhub.cache import Cache
    from envhub.hub import fetch

    cache = Cache(settings.cache)
    fetched, cached = [], []
    for env in lock.environments.values():
        entry = locked_entry(env, settings)
        have = cache.cached(entry) is not None and (not with_heldout or env.heldout_digest is None
                                                    or cache.has(env.heldout_digest, "heldout"))
        if have:
            cached.append(env)
            continue
        if on_fetch:
            on_fetch(env)
        fetch(entry, entry.registry, settings, with_heldout=with_heldout and env.heldout_digest is not None,
              heldout_url=settings.heldout_store, offline=offline, cache=cache, plugins=plugins)
        fetched.append(env)
    if not frozen and known is None:
        from envhub.project._images import unrecorded_images

        reason = unrecorded_images(lock, lambda env: locked_entry(env, settings), cache)
        if reason is not None:
            relocked = relock(reason)
            lock = relocked.lock
    from envhub.project._images import pull_images

    images = pull_images(lock, plugins=plugins)
    if known is not None:
        return SyncResult(lock, relocked, fetched, cached, known, images)
    report = python_report(lock)
    if not frozen:
        _Memo(settings, project).write(report)
    return SyncResult(lock, relocked, fetched, cached, report, images)


class _Memo:
    """What a sync found, keyed by the bytes of pyproject.toml and envhub.lock, this
    interpreter and the state of its site-packages: while none of them changed, a sync
    need not check the lock again nor ask importlib.metadata about every Python
    dependency (those checks cost more than the rest of a warm sync). Installing or
    removing a distribution changes its directory's mtime, hence the key."""

    def __init__(self, settings: Settings, project: Project) -> None:
        import hashlib
        import os

        digest = hashlib.sha256(sys.executable.encode())
        for path in (project.pyproject, project.lock_path):
            try:
                digest.update(b"\0" + path.read_bytes())
            except FileNotFoundError:
                digest.update(b"\0missing")
        for entry in sys.path:
            try:
                digest.update(f"\0{entry}:{os.stat(entry or '.').st_mtime_ns}".encode())
            except OSError:
                continue
        self.path = settings.cache / "sync" / f"{digest.hexdigest()}.json"

    def read(self) -> PythonReport | None:
        import json

        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return PythonReport(dict(data["required"]), dict(data["missing"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, report: PythonReport) -> None:
        import json
        import os

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"required": report.required, "missing": report.missing}), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            pass  # only a missed shortcut


# --- Python dependencies ----------------------------------------------------------------


@dataclass(frozen=True)
class PythonReport:
    """The Python dependencies of a lock's environments, checked against this interpreter."""

    #: The union of the locked environments' python-dependencies, and who needs each.
    required: dict[str, list[str]]
    #: requirement -> why it is not satisfied by this interpreter ("not installed", "2.0 installed").
    missing: dict[str, str]


def python_report(lock: Lockfile) -> PythonReport:
    """Which of ``lock``'s Python dependencies this interpreter lacks (markers honoured)."""
    required: dict[str, list[str]] = {}
    for env in lock.environments.values():
        for requirement in env.python_dependencies:
            required.setdefault(requirement, []).append(env.name)
    return PythonReport(required, unsatisfied_requirements(required))


def unsatisfied_requirements(requirements: Iterable[str]) -> dict[str, str]:
    """The PEP 508 ``requirements`` this interpreter does not satisfy, each with why
    (``"not installed"``, ``"2.0 is installed"``, ``"invalid requirement: ..."``), in the
    order given; a requirement whose marker excludes this platform is satisfied.

    >>> unsatisfied_requirements(["packaging>=20", "envhub-no-such-distribution>=1"])
    {'envhub-no-such-distribution>=1': 'not installed'}
    """
    return {r: why for r in requirements if (why := _unsatisfied(r)) is not None}


def _unsatisfied(text: str) -> str | None:
    """Why this interpreter does not satisfy a PEP 508 requirement, or None if it does."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as PyRequirement

    try:
        requirement = PyRequirement(text)
    except InvalidRequirement as e:
        return f"invalid requirement: {e}"
    if requirement.marker is not None and not requirement.marker.evaluate():
        return None  # not for this platform
    try:
        installed = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return "not installed"
    if requirement.specifier and not requirement.specifier.contains(installed, prereleases=True):
        return f"{installed} is installed"
    return None


def install_command(requirements: Sequence[str]) -> list[str]:
    """The command that installs ``requirements`` into this interpreter: uv if it is beside
    the interpreter (a virtual environment's own, as ``dev.py`` installs it; such a venv may
    have no pip) or on PATH (much faster), else pip."""
    import shutil

    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--python", sys.executable, *requirements]
    return [sys.executable, "-m", "pip", "install", *requirements]


def install_python(requirements: Sequence[str]) -> None:
    """Run :func:`install_command`; :class:`EnvhubError` if it fails."""
    command = install_command(requirements)
    code = subprocess.call(command)
    if code != 0:
        raise EnvhubError(f"installing the Python dependencies failed (exit code {code}): {' '.join(command)}",
                          hint="read the installer's output above; fix the environment, then run envhub sync again")


# --- the lock, honoured by load -----------------------------------------------------------


def locked_for(ref_text: str, cwd: Path | None = None) -> tuple[LockedEnv, Path] | None:
    """The locked environment ``ref_text`` means inside the project around ``cwd``
    (default: the current directory), and the lock's path: what
    :meth:`Lockfile.locked_for` says of the project's ``envhub.lock``, read afresh on every
    call (a caller that holds the lock already calls the method). None outside a project,
    without a lock, or for a name the lock does not have. Raises :class:`LockError` for a
    version the lock does not satisfy, or a malformed lock."""
    from envhub._toml import find_pyproject

    pyproject = find_pyproject((cwd or Path.cwd()).resolve())
    if pyproject is None:
        return None
    lock_path = pyproject.parent / LOCK_FILENAME
    lock = read_lock(lock_path)
    if lock is None:
        return None
    env = lock.locked_for(ref_text, path=lock_path)
    return None if env is None else (env, lock_path)
