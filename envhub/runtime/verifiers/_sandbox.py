"""Run Python tests against candidate code in a sandboxed subprocess.

Each run gets a fresh temporary directory (removed afterwards) holding the candidate's
working directory and the files its stdout, stderr and report go to; a separate interpreter,
``sys.executable -I -B`` running :mod:`._sandbox_runner`, in its own session so the whole
process group can be killed; a minimal environment (no inherited variables, so no API keys
or tokens; ``HOME`` and ``TMPDIR`` point at the working directory); and a wall-clock timeout.
The runner applies the OS limits itself, before any candidate code runs, rather than through
``preexec_fn``, which the subprocess documentation warns is unsafe in threaded programs.

Output goes to files rather than pipes so that a candidate printing without end costs the
parent nothing: the file-size limit stops it, and only the tails are read back.
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envhub.runtime.verifiers._sandbox_runner import EXIT_MEMORY

__all__ = ["SandboxLimits", "SandboxResult", "TestOutcome", "arun_python_tests", "plan_tests", "run_python_tests"]

_RUNNER = Path(__file__).with_name("_sandbox_runner.py")
_TAIL_CHARS = 2000
_REPORT_LIMIT = 4 * 1024 * 1024  # the runner's report is small; read no more than this


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run."""

    #: Wall-clock limit of the whole run (interpreter start-up included), in seconds.
    timeout_s: float = 10.0
    #: Address-space limit (RLIMIT_AS), in MiB: virtual memory, which exceeds resident memory.
    memory_mb: int = 512
    #: Largest file the run may write, stdout and stderr included, in MiB.
    file_size_mb: int = 64
    #: Most file descriptors open at once.
    open_files: int = 64

    @property
    def cpu_s(self) -> int:
        """The CPU-time limit: the timeout rounded up, so only a multi-threaded candidate can
        reach it before the wall clock does."""
        return max(1, math.ceil(self.timeout_s))


@dataclass(frozen=True)
class TestOutcome:
    """One test: its name (``line 3: assert f(1) == 2`` or ``test_edge()``) and result."""

    __test__ = False  # not a pytest test class, despite the name

    name: str
    passed: bool
    error: str | None = None


@dataclass(frozen=True)
class SandboxResult:
    """What one sandboxed run did. ``completed`` is true only when the runner reported the
    end of the tests; a run that was killed or died reports the tests it finished."""

    tests: tuple[TestOutcome, ...]
    completed: bool
    candidate_error: str | None = None
    timed_out: bool = False
    #: Why the run was stopped: ``"timeout"``, ``"memory"``, ``"cpu"``, ``"file-size"``,
    #: ``"signal SIGSEGV"``...; None when it ended by itself.
    killed_by: str | None = None
    returncode: int | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    duration_s: float = 0.0
    #: The isolation layers the runner applied, e.g. ``["network-namespace",
    #: "landlock-abi-7", "rlimits", "audit-hook"]``.
    isolation: tuple[str, ...] = field(default_factory=tuple)


def plan_tests(source: str) -> list[list[str]]:
    """The steps the runner takes for a test file, in order.

    Top-level ``assert`` statements are tests (``["test", name, source]``), named after their
    line and text; other top-level statements are setup (``["setup", source]``) run in order
    between them; top-level functions named ``test*`` are tests called with no arguments
    after the module body (``["call", "test_x()", "test_x"]``). A file with neither is one
    test, ``tests.py``, that passes when the whole file runs without an exception. Each
    step's source is padded with newlines so tracebacks keep the file's line numbers.

    Raises :class:`SyntaxError` (or :class:`ValueError` for null bytes) when it does not parse.
    """
    module = ast.parse(source, "tests.py")
    lines = source.splitlines(keepends=True)
    steps: list[list[str]] = []
    functions: list[str] = []
    for node in module.body:
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            # A node's position starts at "def", after its decorators; a top-level decorated
            # definition spans whole lines, from the first "@".
            first = decorators[0].lineno
            segment = "".join(lines[first - 1 : node.end_lineno])
        else:
            first = node.lineno
            segment = ast.get_source_segment(source, node) or ""
        padded = "\n" * (first - 1) + segment
        if isinstance(node, ast.Assert):
            steps.append(["test", f"line {node.lineno}: {' '.join(segment.split())[:100]}", padded])
        else:
            steps.append(["setup", padded])
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                functions.append(node.name)
    if not functions and all(step[0] == "setup" for step in steps):
        return [["test", "tests.py", source]]
    return steps + [["call", f"{name}()", name] for name in functions]


class _Run:
    """The files and arguments of one run, and turning what it left into a result."""

    def __init__(self, candidate: str, tests: str, limits: SandboxLimits, isolate: bool) -> None:
        self.limits = limits
        self.root = Path(tempfile.mkdtemp(prefix="envhub-sandbox-"))
        self.workdir = self.root / "work"
        self.workdir.mkdir()
        self.token = secrets.token_hex(16)
        self.stdout = open(self.root / "stdout", "wb")  # noqa: SIM115 - closed in cleanup()
        self.stderr = open(self.root / "stderr", "wb")  # noqa: SIM115
        self.report = open(self.root / "report", "w+b")  # noqa: SIM115
        self.argv = [sys.executable, "-I", "-B", str(_RUNNER)]
        self.env = {
            "PATH": os.defpath,
            "HOME": str(self.workdir),
            "TMPDIR": str(self.workdir),
            "TMP": str(self.workdir),
            "TEMP": str(self.workdir),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
        }
        job = {
            "candidate": candidate,
            "plan": plan_tests(tests),
            "token": self.token,
            "workdir": str(self.workdir),
            "result_fd": self.report.fileno(),
            "isolate": isolate,
            "memory_bytes": limits.memory_mb * 1024 * 1024,
            "cpu_s": limits.cpu_s,
            "file_size_bytes": limits.file_size_mb * 1024 * 1024,
            "open_files": limits.open_files,
        }
        self.stdin = json.dumps(job).encode("utf-8", "surrogatepass")
        self.popen_kwargs: dict[str, Any] = {
            "stdout": self.stdout,
            "stderr": self.stderr,
            "cwd": self.workdir,
            "env": self.env,
            "pass_fds": (self.report.fileno(),),
            "start_new_session": os.name == "posix",
        }
        self.started = time.perf_counter()

    def kill(self, pid: int) -> None:
        """Kill the run's whole process group (or the process, off POSIX)."""
        try:
            if os.name == "posix":
                os.killpg(pid, signal.SIGKILL)
            else:  # pragma: no cover - exercised on Windows only
                os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass  # already gone

    def result(self, returncode: int | None, timed_out: bool) -> SandboxResult:
        duration = time.perf_counter() - self.started
        self.report.seek(0)
        events = []
        for raw in self.report.read(_REPORT_LIMIT).splitlines():
            try:
                event = json.loads(raw)
            except ValueError:
                continue  # a stray write of the candidate to the descriptor
            if isinstance(event, dict) and event.get("token") == self.token:
                events.append(event)
        tests = tuple(
            TestOutcome(str(e.get("name")), bool(e.get("passed")), e.get("error"))
            for e in events
            if e.get("event") == "test"
        )
        kinds = {e.get("event") for e in events}
        candidate_error = next((e.get("error") for e in events if e.get("event") == "candidate_error"), None)
        isolation = next((tuple(e.get("layers", ())) for e in events if e.get("event") == "isolation"), ())
        stderr_tail = _tail(self.root / "stderr")
        return SandboxResult(
            tests=tests,
            completed="done" in kinds,
            candidate_error=candidate_error,
            timed_out=timed_out,
            killed_by=_killed_by(returncode, timed_out, "memory" in kinds, stderr_tail),
            returncode=returncode,
            stdout_tail=_tail(self.root / "stdout"),
            stderr_tail=stderr_tail,
            duration_s=round(duration, 4),
            isolation=isolation,
        )

    def cleanup(self) -> None:
        for f in (self.stdout, self.stderr, self.report):
            f.close()
        _remove_tree(self.root)


def _killed_by(returncode: int | None, timed_out: bool, memory: bool, stderr_tail: str) -> str | None:
    if timed_out:
        return "timeout"
    if memory or returncode == EXIT_MEMORY or (returncode == 1 and stderr_tail.rstrip().endswith("MemoryError")):
        return "memory"
    if returncode is not None and returncode < 0:
        signum = -returncode
        named = {getattr(signal, "SIGXCPU", None): "cpu", getattr(signal, "SIGXFSZ", None): "file-size"}
        if signum in named:
            return named[signum]
        try:
            return f"signal {signal.Signals(signum).name}"
        except ValueError:
            return f"signal {signum}"
    return None


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 4 * _TAIL_CHARS))
        text = f.read().decode("utf-8", "replace")
    return text[-_TAIL_CHARS:]


def _remove_tree(root: Path) -> None:
    """Remove ``root`` even when the candidate made parts of it read-only."""

    def make_writable_and_retry(func: Any, path: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, stat.S_IRWXU)
            func(path)
        except OSError:
            pass

    shutil.rmtree(root, onerror=make_writable_and_retry)


def run_python_tests(candidate: str, tests: str, limits: SandboxLimits, *, isolate: bool = True) -> SandboxResult:
    """Run ``tests`` against ``candidate`` in a sandboxed subprocess and wait for it.

    ``isolate=False`` skips the OS layers (network namespace, Landlock) so the audit hook's
    own refusals can be tested; keep the default otherwise. Raises :class:`OSError` only when
    the interpreter cannot be started; whatever the candidate does is in the result.
    """
    run = _Run(candidate, tests, limits, isolate)
    try:
        proc = subprocess.Popen(run.argv, stdin=subprocess.PIPE, **run.popen_kwargs)
        timed_out = False
        try:
            proc.communicate(run.stdin, timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # Also reaps anything the candidate left behind in its process group.
            run.kill(proc.pid)
            proc.wait()
        return run.result(proc.returncode, timed_out)
    finally:
        run.cleanup()


async def arun_python_tests(
    candidate: str, tests: str, limits: SandboxLimits, *, isolate: bool = True
) -> SandboxResult:
    """The same as :func:`run_python_tests`, awaiting the subprocess on the event loop."""
    run = _Run(candidate, tests, limits, isolate)
    try:
        proc = await asyncio.create_subprocess_exec(*run.argv, stdin=asyncio.subprocess.PIPE, **run.popen_kwargs)
        timed_out = False
        try:
            await asyncio.wait_for(proc.communicate(run.stdin), timeout=limits.timeout_s)
        except asyncio.TimeoutError:
            timed_out = True
        finally:
            run.kill(proc.pid)
            await proc.wait()
        return run.result(proc.returncode, timed_out)
    finally:
        run.cleanup()
