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
    from envhub.runtime import Environment
    from envhub.testing import Conformance, TemporaryRegistry

__all__ = ["EnvhubCheckItem", "EnvhubManifestFile", "EnvhubWarning"]

MANIFEST = "envhub.toml"


class EnvhubWarning(UserWarning):
    """A warning of ``envhub validate`` about a bundle under test (``-W error::envhub.testing.
    pytest_plugin.EnvhubWarning`` turns them into failures, as ``--strict`` does)."""


@dataclass(frozen=True)
class _Options:
    manifests: tuple[Path, ...]  # resolved envhub.toml of --envhub and envhub_bundles
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
    options = _Options(tuple(dict.fromkeys(manifests)), bool(config.getini("envhub_collect")),
                       bool(config.getoption("envhub_trust") or config.getini("envhub_trust")), limit)
    config.stash[_OPTIONS] = options
    _add_collection_args(config, options.manifests)


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


def _trust_hint(name: str | None) -> str:
    from envhub.settings import load_settings

    namespace = (name or "NAMESPACE/NAME").split("/")[0]
    return (f"run pytest with --envhub-trust, or set envhub_trust = true in the pytest configuration, or add "
            f"\"{namespace}\" to trusted-namespaces in {load_settings().config_file}; only trust code you have "
            "read or whose author you trust")


def _conformance(root: Path, config: pytest.Config) -> Conformance:
    from envhub.testing import Conformance

    options = config.stash[_OPTIONS]
    conformance = Conformance(root, display=_display(root, config), trust=options.trust, limit=options.limit)
    conformance.trust_hint = _trust_hint(conformance.name)
    return conformance


class EnvhubManifestFile(pytest.File):
    """An ``envhub.toml``: it holds one bundle, named by its environment."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        conformance = _conformance(self.path.parent, self.config)
        yield EnvhubBundle.from_parent(self, name=conformance.name or self.path.parent.name,
                                       conformance=conformance)


class EnvhubBundle(pytest.Collector):
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


class EnvhubCheckItem(pytest.Item):
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
def envhub_env(envhub_bundle_path: Path, request: pytest.FixtureRequest) -> Iterator[Environment]:
    """The environment under test (:func:`envhub.load` of ``envhub_bundle_path``), closed
    after the test. Its code runs only when trusted, as for the conformance tests."""
    from envhub.errors import EnvhubError, TrustError
    from envhub.runtime import load

    trust = request.config.stash[_OPTIONS].trust
    try:
        env = load(envhub_bundle_path, trust_code=trust)
    except TrustError as e:
        name = _conformance(envhub_bundle_path, request.config).name
        pytest.fail(f"envhub_env: cannot load {envhub_bundle_path}: {e.message}\n  hint: {_trust_hint(name)}",
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
