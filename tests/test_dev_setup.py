"""dev.py's checks, the locks in requirements/ against the pyproject.toml files, and the fast
lane's table of slow tests (docs/development.md)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import conftest

ROOT = Path(__file__).resolve().parent.parent
LOCAL = {"envhub-rl", "envhub-registry", "envhub-reasoning-gym", "envhub-ray"}


@pytest.fixture(scope="module")
def dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("envhub_dev_script", ROOT / "dev.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("version", "ok"), [
    ((3, 11, 0), True),
    ((3, 13, 1), True),
    ((4, 0, 0), True),
    ((3, 10, 14), False),
    ((2, 7, 18), False),
], ids=["3.11", "3.13", "4.0", "3.10", "2.7"])
def test_python_version_check(dev: ModuleType, version: tuple[int, int, int], ok: bool) -> None:
    assert (dev.check_python(version) is None) is ok


def test_python_version_message_names_found_and_needed(dev: ModuleType) -> None:
    assert dev.check_python((3, 10, 14)) == (
        "dev.py: this is Python 3.10.14; envhub needs Python 3.11 or newer.\n"
        "Run it with a newer interpreter, e.g. `python3.11 dev.py demo`, or install Python 3.11 "
        "(your package manager, pyenv or python.org) and try again.")


def test_required_python_is_the_declared_one(dev: ModuleType) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert declared == ">=" + ".".join(map(str, dev.REQUIRED_PYTHON))


def _fake_venv(path: Path, cfg: str) -> Path:
    path.mkdir()
    (path / "pyvenv.cfg").write_text(cfg)
    return path


def test_venv_made_by_another_python_is_stale(dev: ModuleType, tmp_path: Path) -> None:
    venv = _fake_venv(tmp_path / ".venv", "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.12.4\n")
    assert dev.venv_python(venv) == (3, 12)
    assert dev.stale_venv(venv, (3, 11, 7)) == f"{venv} was made by Python 3.12, this is Python 3.11"


def test_venv_made_by_this_python_stays(dev: ModuleType, tmp_path: Path) -> None:
    venv = _fake_venv(tmp_path / ".venv", "home = /usr/bin\nversion_info = 3.11.7.final.0\n")
    assert dev.stale_venv(venv, (3, 11, 2)) is None
    assert dev.stale_venv(tmp_path / "absent", (3, 11, 2)) is None


def test_unreadable_venv_is_stale(dev: ModuleType, tmp_path: Path) -> None:
    venv = _fake_venv(tmp_path / ".venv", "home = /usr/bin\n")
    assert dev.stale_venv(venv, (3, 11, 7)) == (
        f"{venv} is not a virtual environment this script can read (no version in pyvenv.cfg)")


# --- the locks -------------------------------------------------------------------------------

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def _pins(lock: str) -> dict[str, set[str]]:
    text = (ROOT / "requirements" / lock).read_text()
    pins: dict[str, set[str]] = {}
    for name, version in _PIN.findall(text):
        pins.setdefault(canonicalize_name(name), set()).add(version)
    return pins


def _requirements(pyproject: Path, extras: tuple[str, ...] = ()) -> set[str]:
    """The names ``pyproject`` asks for on Linux with CPython 3.11, with ``extras`` (followed
    through self-references such as ``envhub-rl[s3]``), without this repository's own."""
    project = tomllib.loads(pyproject.read_text())["project"]
    names: set[str] = set()
    todo = list(project.get("dependencies", []))
    for extra in extras:
        todo += project["optional-dependencies"][extra]
    while todo:
        requirement = Requirement(todo.pop())
        if requirement.marker and not requirement.marker.evaluate(
                {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux",
                 "platform_python_implementation": "CPython", "extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name == project["name"]:
            todo += [d for extra in requirement.extras for d in project["optional-dependencies"][extra]]
        elif name not in LOCAL:
            names.add(name)
    return names


_PYPROJECTS = [ROOT / "pyproject.toml", ROOT / "registry" / "pyproject.toml",
               ROOT / "plugins" / "envhub-reasoning-gym" / "pyproject.toml"]
#: In the dev set only: the Ray executor plugin (the demo does not install it).
_DEV_ONLY = [ROOT / "plugins" / "envhub-ray" / "pyproject.toml"]


@pytest.mark.parametrize(("lock", "extras"), [("demo.txt", ()), ("dev.txt", ("dev",))], ids=["demo", "dev"])
def test_lock_pins_every_dependency(lock: str, extras: tuple[str, ...]) -> None:
    """Every dependency of the three distributions (and of the dev extra and the dev-only
    plugins, for the dev lock) is pinned to an exact version, with hashes, and none of this
    repository's own is."""
    pins = _pins(lock)
    pyprojects = _PYPROJECTS + (_DEV_ONLY if extras else [])
    wanted = set().union(*(_requirements(p, extras if p == _PYPROJECTS[0] else ()) for p in pyprojects))
    assert sorted(wanted - pins.keys()) == []
    assert sorted(LOCAL & pins.keys()) == []
    text = (ROOT / "requirements" / lock).read_text()
    for block in re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2]):
        assert "--hash=sha256:" in block, block.splitlines()[0]


def test_demo_lock_agrees_with_dev_lock() -> None:
    """The demo's set is the dev set's subset, at the same versions."""
    demo, dev_pins = _pins("demo.txt"), _pins("dev.txt")
    assert {name: versions for name, versions in demo.items() if dev_pins.get(name) != versions} == {}


def test_uv_lock_pins_dev_py_uv(dev: ModuleType) -> None:
    assert _pins("uv.txt") == {"uv": {dev.UV_VERSION}}


# --- the fast lane ---------------------------------------------------------------------------


_DEF = re.compile(r"^(?:async )?def (test_\w+)", re.MULTILINE)


def test_slow_table_names_existing_tests() -> None:
    """Every entry of the fast lane's table names a test module that exists and, when it names
    a test, a test function defined in that module; no entry is there twice."""
    tests = ROOT / "tests"
    defined: dict[str, set[str]] = {}
    missing = []
    for entry in conftest.SLOW:
        module, _, test = entry.partition("::")
        if module not in defined:
            path = tests / module
            defined[module] = set(_DEF.findall(path.read_text())) if path.is_file() else set()
        if not defined[module] or (test and test.split("[")[0] not in defined[module]):
            missing.append(entry)
    assert missing == []
    assert len(set(conftest.SLOW)) == len(conftest.SLOW)


@pytest.mark.parametrize(("nodeid", "slow"), [
    ("tests/test_cache.py::test_concurrent_pulls_share_one_bundle", True),
    ("tests/test_pytest_plugin.py::test_each_bundle_passes_or_fails_each_check[acme/good]", True),
    ("tests/test_cache.py::test_concurrent_pulls_share_one_bundle_not", False),
    ("tests/test_dev_setup.py::test_slow_table_names_existing_tests", False),
], ids=["test", "parametrized-case", "longer-name", "not-listed"])
def test_slow_entries_match_tests_and_their_cases(nodeid: str, slow: bool) -> None:
    assert conftest._is_slow(nodeid) is slow
