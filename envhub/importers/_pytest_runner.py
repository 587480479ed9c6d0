"""A small stand-in for pytest, copied next to imported tests (``_envhub_pytest.py``).

Imported Terminal-Bench and Harbor tasks test with pytest, which their ``run-tests.sh`` /
``test.sh`` install from the network. A sandbox on the host's system has neither the network
nor site-packages, so ``envhub import terminal-bench`` runs their test files with this script
instead, standard library only::

    python3 _envhub_pytest.py /tests/test_outputs.py [more files...]

It prints one ``PASS name`` or ``FAIL name`` line per test (the workspace-tests verifier's
format) and runs what most such files use: ``test_*`` functions and ``Test*`` classes'
``test_*`` methods, ``assert``, ``pytest.raises``, ``pytest.approx``, ``pytest.skip`` (a
skipped test is left out), ``pytest.fail``, ``pytest.mark.parametrize``, fixtures defined with
``@pytest.fixture`` in the file or a ``conftest.py`` beside it (``yield`` fixtures included),
and the built-in fixtures ``tmp_path`` and ``monkeypatch`` (``setenv``, ``delenv``, ``chdir``,
``setattr``). A test using anything else fails, with the reason on stderr.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import math
import os
import sys
import tempfile
import traceback
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class _Skipped(Exception):
    pass


class _Failed(AssertionError):
    pass


class _Mark:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.name != "parametrize" and len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]

        def decorate(fn: Any) -> Any:
            fn.__dict__.setdefault("_envhub_marks", []).append((self.name, args, kwargs))
            return fn
        return decorate


class _Marks:
    def __getattr__(self, name: str) -> _Mark:
        return _Mark(name)


class _Approx:
    def __init__(self, expected: Any, rel: float | None = None, abs: float | None = None) -> None:  # noqa: A002
        self.expected, self.rel, self.abs = expected, rel, abs

    def _close(self, a: Any, b: Any) -> bool:
        if isinstance(b, (list, tuple)):
            return isinstance(a, (list, tuple)) and len(a) == len(b) and all(map(self._close, a, b))
        if isinstance(b, dict):
            return isinstance(a, dict) and a.keys() == b.keys() and all(self._close(a[k], b[k]) for k in b)
        rel = 1e-6 if self.rel is None else self.rel
        tolerance = max(rel * abs(b), 1e-12 if self.abs is None else self.abs)
        return bool(a == b or math.isclose(a, b, rel_tol=0.0, abs_tol=tolerance))

    def __eq__(self, other: object) -> bool:
        return self._close(other, self.expected)

    def __repr__(self) -> str:
        return f"approx({self.expected!r})"


@contextlib.contextmanager
def _raises(expected: Any, match: str | None = None) -> Iterator[Any]:
    import re

    info = types.SimpleNamespace(value=None, type=None)
    try:
        yield info
    except expected as e:
        info.value, info.type = e, type(e)
        if match is not None and not re.search(match, str(e)):
            raise _Failed(f"{e!r} does not match {match!r}") from e
        return
    raise _Failed(f"DID NOT RAISE {expected}")


def _fixture(*args: Any, **kwargs: Any) -> Any:
    def mark(fn: Any) -> Any:
        fn._envhub_fixture = True
        return fn
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return mark(args[0])
    return mark


def _skip(reason: str = "") -> None:
    raise _Skipped(reason)


def _fail(reason: str = "") -> None:
    raise _Failed(reason)


def _install_stub() -> None:
    stub = types.ModuleType("pytest")
    stub.raises = _raises  # type: ignore[attr-defined]
    stub.approx = _Approx  # type: ignore[attr-defined]
    stub.fixture = _fixture  # type: ignore[attr-defined]
    stub.mark = _Marks()  # type: ignore[attr-defined]
    stub.skip = _skip  # type: ignore[attr-defined]
    stub.fail = _fail  # type: ignore[attr-defined]
    stub.param = lambda *values, **_: values  # type: ignore[attr-defined]
    sys.modules["pytest"] = stub


class _MonkeyPatch:
    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def setenv(self, name: str, value: str) -> None:
        old = os.environ.get(name)
        os.environ[name] = value

        def undo() -> None:
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
        self._undo.append(undo)

    def delenv(self, name: str, raising: bool = True) -> None:
        if name not in os.environ:
            if raising:
                raise KeyError(name)
            return
        old = os.environ.pop(name)
        self._undo.append(lambda: os.environ.update({name: old}))

    def chdir(self, path: Any) -> None:
        old = os.getcwd()
        os.chdir(path)
        self._undo.append(lambda: os.chdir(old))

    def setattr(self, target: Any, name: str, value: Any) -> None:
        old = getattr(target, name)
        setattr(target, name, value)
        self._undo.append(lambda: setattr(target, name, old))

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


def _load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _fixtures(*modules: types.ModuleType) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for module in modules:
        for name, value in vars(module).items():
            if callable(value) and getattr(value, "_envhub_fixture", False):
                found[name] = value
    return found


def _call(fn: Callable[..., Any], fixtures: dict[str, Any], given: dict[str, Any]) -> None:
    with contextlib.ExitStack() as stack:
        values: dict[str, Any] = {}

        def resolve(name: str) -> Any:
            if name in given:
                return given[name]
            if name in values:
                return values[name]
            if name == "tmp_path":
                values[name] = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            elif name == "monkeypatch":
                patch = _MonkeyPatch()
                stack.callback(patch.undo)
                values[name] = patch
            elif name in fixtures:
                factory = fixtures[name]
                args = {p: resolve(p) for p in inspect.signature(factory).parameters}
                if inspect.isgeneratorfunction(factory):
                    generator = factory(**args)
                    values[name] = next(generator)
                    stack.callback(lambda: next(generator, None))
                else:
                    values[name] = factory(**args)
            else:
                raise _Failed(f"fixture {name!r} is not available without pytest")
            return values[name]

        parameters = [p for p in inspect.signature(fn).parameters if p != "self"]
        fn(**{p: resolve(p) for p in parameters})


def _cases(fn: Any) -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = [("", {})]
    for mark, args, _ in reversed(getattr(fn, "_envhub_marks", [])):
        if mark != "parametrize":
            continue
        names = [n.strip() for n in args[0].split(",")] if isinstance(args[0], str) else list(args[0])
        expanded = []
        for suffix, given in cases:
            for value in args[1]:
                values = tuple(value) if len(names) > 1 else (value,)
                label = "-".join(str(v) for v in values)
                bound = dict(zip(names, values, strict=True))
                expanded.append((f"{suffix}-{label}" if suffix else label, {**given, **bound}))
        cases = expanded
    return cases


def _explain(text: str) -> None:
    """Why a test failed, on stderr, every line commented out so that no line of a traceback
    (``    ok = check()``) reads as a test result where stdout and stderr are merged."""
    print("".join(f"# {line}\n" for line in text.splitlines()), end="", file=sys.stderr, flush=True)


def _report(name: str, run: Callable[[], None]) -> bool:
    try:
        run()
    except _Skipped:
        return True
    except BaseException:
        print(f"FAIL {name}", flush=True)
        _explain(f"{name}\n{traceback.format_exc()}")
        return False
    print(f"PASS {name}", flush=True)
    return True


def run_file(path: Path) -> bool:
    """Run every test of one file; True when none failed."""
    sys.path.insert(0, str(path.parent))
    conftest = path.parent / "conftest.py"
    base = [_load(conftest, "conftest")] if conftest.is_file() else []
    try:
        module = _load(path, path.stem)
    except BaseException:
        print(f"FAIL {path.stem}", flush=True)
        _explain(traceback.format_exc())
        return False
    fixtures = _fixtures(*base, module)
    ok = True
    for name, value in list(vars(module).items()):
        if name.startswith("test") and inspect.isfunction(value) and value.__module__ == module.__name__:
            for suffix, given in _cases(value):
                label = f"{path.stem}::{name}" + (f"[{suffix}]" if suffix else "")
                ok &= _report(label, lambda fn=value, g=given: _call(fn, fixtures, g))  # type: ignore[misc]
        elif name.startswith("Test") and inspect.isclass(value):
            for method_name, method in inspect.getmembers(value, inspect.isfunction):
                if not method_name.startswith("test"):
                    continue
                for suffix, given in _cases(method):
                    label = f"{path.stem}::{name}::{method_name}" + (f"[{suffix}]" if suffix else "")

                    def run(cls: Any = value, m: str = method_name, g: dict[str, Any] = given) -> None:
                        _call(getattr(cls(), m), fixtures, g)
                    ok &= _report(label, run)
    return ok


def main(argv: list[str]) -> int:
    _install_stub()
    ok = True
    for arg in argv:
        ok &= run_file(Path(arg).resolve())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
