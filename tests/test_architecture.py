"""The package's structure, checked: layers point one way (the import-linter contract in
``.importlinter``), no module imports a private module of another package, nothing but the
composition root makes settings or a plugin manager, and no import cycles (imports inside
functions and under ``TYPE_CHECKING`` included). Each check has a positive control that
shows it notices a violation."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "envhub"
OTHER_DISTRIBUTIONS = [ROOT / "registry" / "envhub_registry", *sorted((ROOT / "plugins").glob("*/envhub_*"))]


def _module_name(path: Path, root: Path) -> str:
    name = ".".join(path.relative_to(root).with_suffix("").parts)
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _imports(source: str, module: str, is_package: bool) -> Iterator[tuple[str, list[str], int]]:
    """(imported module, names, line) of every import in ``source``, relative ones resolved."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = ((package[: len(package) - node.level + 1] if node.level else [])
                    + ([node.module] if node.module else []))
            yield ".".join(base), [a.name for a in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno


def _private_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """Imports of a private module of another envhub package (``envhub.runtime._eval``
    from outside ``envhub.runtime``). The root's own private modules (``envhub._toml``...)
    are shared internals of the envhub distribution, so other distributions may not use
    them either."""
    found = []
    for target, _, line in _imports(source, module, is_package):
        parts = target.split(".")
        if parts[0] != "envhub":
            continue
        private = [i for i, part in enumerate(parts) if part.startswith("_") and i >= 1]
        if not private:
            continue
        owner = ".".join(parts[: private[0]])
        if not (module == owner or module.startswith(owner + ".")):
            found.append(f"{module}:{line} imports {target}")
    return found


def _sources() -> Iterator[tuple[Path, str, bool]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, _module_name(path, ROOT), path.name == "__init__.py"
    for root in OTHER_DISTRIBUTIONS:
        for path in sorted(root.rglob("*.py")):
            yield path, _module_name(path, root.parent), path.name == "__init__.py"


def test_no_module_imports_a_private_module_of_another_package() -> None:
    found = [f for path, module, is_package in _sources()
             for f in _private_imports(path.read_text(encoding="utf-8"), module, is_package)]
    assert found == []


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("envhub.cli.eval", "from envhub.runtime._eval import summarize",
     ["envhub.cli.eval:1 imports envhub.runtime._eval"]),
    ("envhub.runtime._eval", "from envhub.runtime._records import RolloutRecord", []),
    ("envhub.runtime._eval", "from envhub.runtime import summarize", []),
    ("envhub.hub", "from envhub._toml import loads", []),
    ("envhub_registry._app", "from envhub._toml import loads", ["envhub_registry._app:1 imports envhub._toml"]),
    ("envhub.cli.info", "def f():\n    from envhub.bundle._golden import read_golden\n",
     ["envhub.cli.info:2 imports envhub.bundle._golden"]),
], ids=["other-package", "own-package", "public-name", "root-internal", "root-internal-from-outside", "in-function"])
def test_the_private_import_check_notices_a_violation(module: str, source: str, expected: list[str]) -> None:
    assert _private_imports(source, module) == expected


def test_only_the_composition_root_makes_settings_or_a_plugin_manager() -> None:
    """``load_settings()`` and ``make_plugin_manager()`` are called by envhub.context only;
    everything below takes them as arguments (the CLI's one context comes from there too)."""
    makers = {"load_settings", "make_plugin_manager", "plugin_manager"}
    callers = []
    for path, module, _ in _sources():
        if module == "envhub.context":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if name in makers:
                    callers.append(f"{module}:{node.lineno} calls {name}()")
    assert callers == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    # Raised for the walk only: a higher limit left behind lets later tests in this process
    # compile regular expressions nested deeper than envhub would see in production.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _graph(files: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the modules of ``files`` it imports (anywhere in the file), the CLI and the
    package root left out (the CLI is the top; the root only re-exports)."""
    def skip(m: str) -> bool:
        return m.startswith("envhub.cli") or m in ("envhub", "envhub.__main__")

    graph: dict[str, set[str]] = {m: set() for m in files if not skip(m)}
    for module in graph:
        source, is_package = files[module]
        for target, names, _ in _imports(source, module, is_package):
            for candidate in (target, *(f"{target}.{n}" for n in names)):
                if candidate in graph and candidate != module:
                    graph[module].add(candidate)
    return graph


def test_there_are_no_import_cycles() -> None:
    files = {_module_name(p, ROOT): (p.read_text(encoding="utf-8"), p.name == "__init__.py")
             for p in PACKAGE.rglob("*.py")}
    assert _cycles(_graph(files)) == []


def test_the_cycle_check_notices_a_cycle_through_a_type_checking_import() -> None:
    files = {
        "envhub.a": ("from envhub.b import f\n", False),
        "envhub.b": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from envhub.c import C\n", False),
        "envhub.c": ("def g():\n    from envhub import a\n", False),
        "envhub.d": ("from envhub.a import x\n", False),
    }
    assert _cycles(_graph(files)) == [["envhub.a", "envhub.b", "envhub.c"]]


def _lint_imports() -> Path:
    found = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("lint-imports (import-linter) is not installed in this environment; "
                    "python3 dev.py setup installs it")
    return Path(found)


def test_the_layers_contract_is_kept() -> None:
    result = subprocess.run([str(_lint_imports()), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 kept, 0 broken" in result.stdout


def test_the_layers_contract_notices_an_import_that_points_up(tmp_path: Path) -> None:
    """A copy of the package where the runtime imports the project (a layer above it)."""
    shutil.copytree(PACKAGE, tmp_path / "envhub", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    runner = tmp_path / "envhub" / "runtime" / "_runner.py"
    up = "\n\ndef _up():\n    from envhub.project import find_project\n"
    runner.write_text(runner.read_text(encoding="utf-8") + up, encoding="utf-8")
    result = subprocess.run([str(_lint_imports()), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert "envhub.runtime is not allowed to import envhub.project" in result.stdout
    assert "envhub.runtime._runner -> envhub.project" in result.stdout


def _packages() -> list[str]:
    return sorted(_module_name(p, ROOT) for p in PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize("package", _packages())
def test_every_public_name_of_a_package_resolves_and_its_lazy_table_agrees(package: str) -> None:
    """``__all__`` is written out, so type checkers see the re-exports; the lazy table that
    answers them at run time names the same set, and every name resolves."""
    import importlib

    module = importlib.import_module(package)
    public = getattr(module, "__all__", None)
    if public is None:
        pytest.skip(f"{package} has no public names of its own")
    assert isinstance(public, list) and len(public) == len(set(public))
    lazy = getattr(module, "_WHERE", None)
    if isinstance(lazy, dict):
        assert set(lazy) <= set(public), sorted(set(lazy) - set(public))
    for name in public:
        assert getattr(module, name) is not None or name.isupper(), f"{package}.{name}"
