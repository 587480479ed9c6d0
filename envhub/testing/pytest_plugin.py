"""envhub's pytest plugin (entry point ``pytest11``, name ``envhub``).

Conformance tests
    Every ``envhub.toml`` that pytest collects becomes one test per check of
    :data:`envhub.testing.CHECKS`, with ids such as
    ``envhub.toml::acme/sql-shop::reference-scores-1``. Bundles outside the collected paths
    are added with ``--envhub PATH`` (repeatable) or the ini option ``envhub_bundles``.
    A project that keeps bundles among its tests' data turns automatic collection off with
    ``envhub_collect = false``; bundles named by ``--envhub``/``envhub_bundles`` are
    still checked.

Trust
    Checks that play episodes (and ``tasks-parse`` of generated splits) load the bundle's
    code only with ``--envhub-trust`` or ``envhub_trust = true`` (or a namespace trusted
    in envhub's config). Without trust they fail, with the message saying how to trust:
    a CI job that forgot the option must not pass on checks that never ran.

    A bundle named by ``--envhub``/``envhub_bundles`` (or by its ``envhub.toml`` as a test
    path) is collected by :class:`EnvhubBundleDirectory`, not as a test directory: pytest
    imports none of its files (no ``conftest.py``, no package ``__init__.py``, no test
    modules), and a pytest configuration file inside it is refused. A directory named as a
    test path is pytest's as always: its tests and ``conftest.py`` run.

Fixtures
    ``envhub_env`` (the environment under test, loaded from ``envhub_bundle_path``) and
    ``envhub_registry`` (a temporary directory registry, :class:`envhub.testing.TemporaryRegistry`,
    with ``ENVHUB_REGISTRY`` pointing at it for the test).

Nothing from envhub beyond this module is imported until a bundle is collected or a
fixture is used, so the plugin costs other projects' test runs next to nothing.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from envhub.context import Context
    from envhub.runtime import EnvironmentProtocol
    from envhub.testing import Conformance, TemporaryRegistry

__all__ = ["EnvhubBundleDirectory", "EnvhubCheckItem", "EnvhubManifestFile", "EnvhubWarning"]

MANIFEST = "envhub.toml"


class EnvhubWarning(UserWarning):
    """A warning of ``envhub validate`` about a bundle under test (``-W error::envhub.testing.
    pytest_plugin.EnvhubWarning`` turns them into failures, as ``--strict`` does)."""


@dataclass(frozen=True)
class _Options:
    manifests: tuple[Path, ...]  # resolved envhub.toml of --envhub and envhub_bundles
    #: Of those, the ones outside every directory named as a test path: pytest collects
    #: them with EnvhubBundleDirectory and imports none of their files.
    closed: frozenset[Path]
    collect: bool
    trust: bool
    limit: int | None


_OPTIONS = pytest.StashKey[_Options]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("envhub", "envhub environments (conformance tests and fixtures)")
    group.addoption("--envhub", action="append", dest="envhub_paths", default=[], metavar="PATH",
                    help="Run the conformance tests of the bundle at PATH (a directory with an envhub.toml, "
                         "or the file); repeatable. Adds to what pytest collects otherwise.")
    group.addoption("--envhub-trust", action="store_true", default=False, dest="envhub_trust",
                    help="Let the bundles' own code run (python verifiers, tools, generators): the "
                         "self-test checks need it. Ini: envhub_trust.")
    group.addoption("--envhub-check-limit", dest="envhub_check_limit", default=None, metavar="N",
                    help="Play at most N tasks per split in the self-test checks (default: all). "
                         "Ini: envhub_check_limit.")
    parser.addini("envhub_collect", type="bool", default=True,
                  help="Turn every collected envhub.toml into conformance tests (default: true).")
    parser.addini("envhub_bundles", type="paths", default=[],
                  help="Bundle directories (relative to the configuration file) to check, as with --envhub.")
    parser.addini("envhub_trust", type="bool", default=False, help="As --envhub-trust.")
    parser.addini("envhub_check_limit", type="string", default="", help="As --envhub-check-limit.")


def _limit(value: str | None, source: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        limit = int(str(value))
    except ValueError:
        limit = 0
    if limit < 1:
        raise pytest.UsageError(f"{source}: {value!r} is not a positive whole number (how many tasks per split "
                                "the self-test plays)")
    return limit


def _manifest_of(path: Path, source: str) -> Path:
    manifest = path if path.name == MANIFEST and path.is_file() else path / MANIFEST
    if not manifest.is_file():
        what = "no such directory" if not path.exists() else f"no {MANIFEST} in this directory"
        raise pytest.UsageError(f"{source} {path}: {what}\n  hint: name a bundle directory (one with an "
                                f"{MANIFEST}); 'envhub init NAMESPACE/NAME DIR' creates one")
    return manifest.resolve()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "envhub: a conformance test of an envhub bundle (generated)")
    invocation = config.invocation_params.dir
    manifests = [_manifest_of(invocation / p, "--envhub") for p in config.getoption("envhub_paths") or []]
    manifests += [_manifest_of(Path(p), "envhub_bundles") for p in config.getini("envhub_bundles")]
    # An envhub.toml named as a test path is checked even with envhub_collect = false, also
    # when a directory also named holds it (pytest 9 then collects it from the directory).
    named = [(invocation / str(arg).split("::")[0]) for arg in config.args]
    manifests += [path.resolve() for path in named if path.name == MANIFEST and path.is_file()]
    cli_limit = config.getoption("envhub_check_limit")
    limit = (_limit(cli_limit, "--envhub-check-limit") if cli_limit is not None
             else _limit(config.getini("envhub_check_limit"), "envhub_check_limit"))
    manifests = list(dict.fromkeys(manifests))
    # Directories the user named as test paths (not pytest's default ones: testpaths or the
    # working directory) are collected as pytest does, conftest.py and all.
    named_dirs = [path.resolve() for path in named if path.is_dir()] \
        if config.args_source == pytest.Config.ArgsSource.ARGS else []
    # Nor is a bundle pytest runs inside of.
    inside = [m for m in manifests if invocation.resolve().is_relative_to(m.parent)]
    closed = frozenset(m for m in manifests if m not in inside and not any(m.is_relative_to(d) for d in named_dirs))
    options = _Options(tuple(manifests), closed, bool(config.getini("envhub_collect")),
                       bool(config.getoption("envhub_trust") or config.getini("envhub_trust")), limit)
    config.stash[_OPTIONS] = options
    _add_collection_args(config, options.manifests)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Refuse what would make pytest run a bundle's files before the plugin can stop it:
    a pytest configuration file inside a bundle to check, and (without trust) the
    ``conftest.py`` beside an ``envhub.toml`` named as a test path. A bundle that pytest is
    run inside of is pytest's to run, as always.

    pytest picks its configuration from the test paths before it knows plugin options: in
    ``--envhub PATH`` it takes PATH for a test path, and may read PATH's pytest.ini,
    pyproject.toml, tox.ini or setup.cfg, whose settings (``addopts``, ...) would then apply.
    And it imports the ``conftest.py`` files of the test paths right after this hook.
    """
    invocation = early_config.invocation_params.dir.resolve()
    namespace = early_config.known_args_namespace
    named = [(f"--envhub {p}", p) for p in getattr(namespace, "envhub_paths", None) or []]
    named += [(str(a), str(a).split("::")[0]) for a in namespace.file_or_dir or []
              if Path(str(a).split("::")[0]).name == MANIFEST]
    trusted = bool(getattr(namespace, "envhub_trust", False) or early_config.getini("envhub_trust"))
    inipath = early_config.inipath
    for source, given in named:
        path = invocation / given
        bundle = (path.parent if path.name == MANIFEST and path.is_file() else path).resolve()
        if invocation.is_relative_to(bundle):
            continue
        hint = f"name the bundle with --envhub={_display_path(bundle, invocation)} (with '=')"
        if inipath is not None and inipath.resolve().is_relative_to(bundle):
            raise pytest.UsageError(
                f"{source}: pytest took its configuration from {_display_path(inipath, invocation)}, a file of the "
                f"bundle to check, so the bundle's settings would apply\n  hint: {hint}, or give pytest your own "
                "configuration with -c FILE")
        conftest = bundle / "conftest.py"
        if path.name == MANIFEST and conftest.is_file() and not trusted:
            raise pytest.UsageError(
                f"{source}: pytest would import {_display_path(conftest, invocation)}, the bundle's code, and it is "
                f"not trusted (pytest imports the conftest.py beside every test path)\n  hint: {hint}: then no "
                "file of the bundle is imported; or pass --envhub-trust if you trust the bundle's code")


def _display_path(path: Path, start: Path) -> str:
    try:
        return Path(os.path.relpath(path, start)).as_posix()
    except ValueError:  # another drive
        return str(path)


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A bundle to check, outside the directories named as test paths, is collected as an
    :class:`EnvhubBundleDirectory`: pytest's own collectors would import its conftest.py
    and, for a package, its ``__init__.py``."""
    if (path / MANIFEST).resolve() not in parent.config.stash[_OPTIONS].closed:
        return None
    rootpath = parent.config.rootpath
    if path.is_relative_to(rootpath):
        return EnvhubBundleDirectory.from_parent(parent, path=path)
    nodeid = os.path.relpath(path, rootpath).replace(os.sep, "/")
    return EnvhubBundleDirectory.from_parent(parent, path=path, nodeid=nodeid)


def _add_collection_args(config: pytest.Config, manifests: tuple[Path, ...]) -> None:
    """Make pytest collect each bundle's envhub.toml, unless a directory it already collects
    holds it (then ``pytest_collect_file`` finds it there)."""
    invocation = config.invocation_params.dir
    collected = [(invocation / str(arg).split("::")[0]).resolve() for arg in config.args]
    for manifest in manifests:
        if not any(manifest == path or (path.is_dir() and manifest.is_relative_to(path)) for path in collected):
            config.args.append(str(manifest))
            collected.append(manifest)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name != MANIFEST:
        return None
    options = parent.config.stash[_OPTIONS]
    if not (options.collect or parent.session.isinitpath(file_path) or file_path.resolve() in options.manifests):
        return None
    rootpath = parent.config.rootpath
    if file_path.is_relative_to(rootpath):
        return EnvhubManifestFile.from_parent(parent, path=file_path)
    # A bundle outside the rootdir (--envhub ../envs/a): its id is its path from the rootdir,
    # where pytest would give an empty one.
    nodeid = os.path.relpath(file_path, rootpath).replace(os.sep, "/")
    return EnvhubManifestFile.from_parent(parent, path=file_path, nodeid=nodeid)


def _display(path: Path, config: pytest.Config) -> str:
    """A bundle directory as the user knows it: relative to where pytest was run."""
    try:
        return Path(os.path.relpath(path.resolve(), config.invocation_params.dir.resolve())).as_posix()
    except ValueError:  # another drive
        return str(path)


def _trust_hint(name: str | None, context: Context) -> str:
    namespace = (name or "NAMESPACE/NAME").split("/")[0]
    return (f"run pytest with --envhub-trust, or set envhub_trust = true in the pytest configuration, or add "
            f"\"{namespace}\" to trusted-namespaces in {context.settings.config_file}; only trust code you have "
            "read or whose author you trust")


def _context() -> Context:
    """A context for one bundle's checks or one fixture, read from the environment as the
    test sees it (a test may point ENVHUB_* elsewhere)."""
    from envhub.context import Context

    return Context.create()


def _conformance(root: Path, config: pytest.Config) -> Conformance:
    from envhub.testing import Conformance

    options = config.stash[_OPTIONS]
    context = _context()
    conformance = Conformance(root, display=_display(root, config), trust=options.trust, limit=options.limit,
                              context=context)
    conformance.trust_hint = _trust_hint(conformance.name, context)
    return conformance


class _BundleHooks:
    """Hooks of a closed bundle's nodes come from the ``conftest.py`` files above the bundle:
    pytest asks the node's own directory, whose conftest.py is never imported."""

    path: Path
    session: pytest.Session
    config: pytest.Config

    @property
    def ihook(self) -> Any:
        bundle = self.path if self.path.is_dir() else self.path.parent
        if (bundle / MANIFEST).resolve() in self.config.stash[_OPTIONS].closed:
            return self.session.gethookproxy(bundle.parent)
        return self.session.gethookproxy(self.path)


class EnvhubBundleDirectory(_BundleHooks, pytest.File):
    """A bundle's directory, holding nothing for pytest but its ``envhub.toml``.

    Not a :class:`pytest.Directory` on purpose: pytest imports the ``conftest.py`` of every
    Directory it collects (and a Package's ``__init__.py``), and a bundle being checked must
    not run. (:class:`pytest.File` gives it a node id from its path; it is a directory.)
    """

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        yield from self.ihook.pytest_collect_file(file_path=self.path / MANIFEST, parent=self)


class EnvhubManifestFile(_BundleHooks, pytest.File):
    """An ``envhub.toml``: it holds one bundle, named by its environment."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        conformance = _conformance(self.path.parent, self.config)
        yield EnvhubBundle.from_parent(self, name=conformance.name or self.path.parent.name,
                                       conformance=conformance)


class EnvhubBundle(_BundleHooks, pytest.Collector):
    """One bundle: its conformance tests, run in :data:`envhub.testing.CHECKS` order and
    sharing what they compute (validation, the self-test, the build)."""

    def __init__(self, *, conformance: Conformance, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.conformance = conformance

    def collect(self) -> Iterator[pytest.Item]:
        from envhub.testing import CHECKS

        for check in CHECKS:
            item = EnvhubCheckItem.from_parent(self, name=check)
            item.add_marker("envhub")
            yield item

    def teardown(self) -> None:
        self.conformance.close()


class EnvhubCheckItem(_BundleHooks, pytest.Item):
    """One conformance check of one bundle."""

    parent: EnvhubBundle

    def runtest(self) -> None:
        outcome = self.parent.conformance.run(self.name)
        for problem in outcome.warnings:
            strict = None
            try:
                warnings.warn_explicit(EnvhubWarning(problem.render()), EnvhubWarning,
                                       filename=problem.file or MANIFEST, lineno=problem.line or 0)
            except EnvhubWarning as e:  # -W error::...EnvhubWarning: strict, as validate --strict
                strict = str(e)
            if strict is not None:
                pytest.fail(strict, pytrace=False)
        if outcome.status == "skipped":
            pytest.skip(outcome.reason)
        if outcome.status == "failed":
            # The problems as `envhub validate --check` prints them, not a traceback of envhub.
            pytest.fail(outcome.render(), pytrace=False)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.parent.name}::{self.name}"


# -- fixtures for authors' own tests ------------------------------------------------------------


def _nearest_bundle(start: Path, stop: Path) -> Path | None:
    for directory in [start, *start.parents]:
        if (directory / MANIFEST).is_file():
            return directory
        if directory == stop:
            break
    return None


@pytest.fixture
def envhub_bundle_path(request: pytest.FixtureRequest) -> Path:
    """The bundle directory that ``envhub_env`` loads: the nearest directory with an
    ``envhub.toml`` at or above the test's file (not above pytest's rootdir), else the one
    bundle given with ``--envhub`` or ``envhub_bundles``. Override this fixture (in a
    conftest.py, a module or a class) to choose another."""
    test_file = Path(str(request.path)).resolve()
    rootdir = request.config.rootpath.resolve()
    stop = rootdir if test_file.is_relative_to(rootdir) else Path(test_file.anchor)
    found = _nearest_bundle(test_file.parent, stop)
    if found is not None:
        return found
    manifests = request.config.stash[_OPTIONS].manifests
    if len(manifests) == 1:
        return manifests[0].parent
    given = ", ".join(str(m.parent) for m in manifests) if manifests else "none"
    pytest.fail(f"envhub_env: no {MANIFEST} at or above {test_file.parent} (up to {stop}), and --envhub/"
                f"envhub_bundles name {len(manifests)} bundles ({given}), not one\n  hint: keep the test inside "
                "the bundle directory, pass --envhub PATH, or override the envhub_bundle_path fixture",
                pytrace=False)


@pytest.fixture
def envhub_env(envhub_bundle_path: Path,
               request: pytest.FixtureRequest) -> Iterator[EnvironmentProtocol]:
    """The environment under test (:func:`envhub.load` of ``envhub_bundle_path``), closed
    after the test. Its code runs only when trusted, as for the conformance tests."""
    from envhub._load import load
    from envhub.errors import EnvhubError, TrustError

    trust = request.config.stash[_OPTIONS].trust
    context = _context()
    try:
        env = load(envhub_bundle_path, context=context, trust_code=trust)
    except TrustError as e:
        name = _conformance(envhub_bundle_path, request.config).name
        pytest.fail(f"envhub_env: cannot load {envhub_bundle_path}: {e.message}\n  hint: {_trust_hint(name, context)}",
                    pytrace=False)
    except EnvhubError as e:
        pytest.fail(f"envhub_env: cannot load {envhub_bundle_path}: {e}", pytrace=False)
    with env:
        yield env


@pytest.fixture
def envhub_registry(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> TemporaryRegistry:
    """A temporary directory registry (:class:`envhub.testing.TemporaryRegistry`) with
    ``push(path)``, ``url`` and ``open()``. For the test's duration ``ENVHUB_REGISTRY``
    points at it, and ``ENVHUB_HELDOUT_STORE`` and ``ENVHUB_CACHE`` at its own directories,
    so ``envhub.load("namespace/name@1.0.0")`` and the ``envhub`` command use it."""
    from envhub.testing import TemporaryRegistry

    registry = TemporaryRegistry(tmp_path_factory.mktemp("envhub-registry"))
    for name, value in registry.variables().items():
        monkeypatch.setenv(name, value)
    return registry
