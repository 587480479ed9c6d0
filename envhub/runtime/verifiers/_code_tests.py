"""``code-tests``: the task's tests run against the completion's code, in a sandbox.

The verdict is made here, never in a process that runs candidate code. The candidate runs in
a sandbox (:mod:`envhub.sandbox`) and answers with data; it never sees a test or an expected
value. A task's tests are one of:

- **calls** (``{"calls": [{"call": "add", "args": [1, 2], "expected": 3}, ...]}``): the
  sandbox calls each function and returns the value as data; this process compares it with
  the expected value (:func:`envhub.sandbox.codec.same`);
- **io** (``{"io": [{"stdin": "1 2\\n", "stdout": "3\\n"}, ...]}``): the candidate runs as a
  program once per case; this process compares what it printed, line by line, ignoring
  trailing whitespace;
- **Python test code** (a string): the tests run in a second sandbox that holds no candidate
  code; each use of the candidate there is relayed to the candidate's sandbox, and answered
  with data or a reference to an object kept there. The tests' own sandbox reports the
  outcomes: the candidate cannot reach its reporter, its frames or its files.

The reward is the fraction of tests that pass. Partial credit, rather than all-or-nothing,
gives a learning signal on problems where most candidates pass some tests; an evaluator that
wants pass/fail gets it from a rubric criterion with ``required = true``, or by thresholding
``breakdown["tests_passed"]``. A run that times out, exceeds its memory, dies, or whose code
does not compile or raises on import scores 0: a partial report from a killed run depends on
timing, and scoring the same input twice must give the same reward.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import re
import sys
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from envhub.runtime._types import Score, Task, Trajectory
from envhub.runtime.verifiers._base import ScoringContext, Verifier, VerifierError, task_value
from envhub.runtime.verifiers._reference import Reference, code_reference
from envhub.sandbox import Limits, Outcome, Sandbox, Session, codec

__all__ = ["CallCase", "CodeTestsVerifier", "IoCase", "TestOutcome", "TestsResult", "extract_code", "parse_tests",
           "plan_tests", "run_tests", "to_score"]

# A fence, its language tag, and its body up to the closing fence (or the end of a
# completion cut off mid-block).
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```|\Z)", re.DOTALL | re.MULTILINE)
_PYTHON_TAGS = frozenset({"python", "py", "python3"})
_HERE = Path(__file__).parent
_T = TypeVar("_T")


def _guest(filename: str) -> tuple[str, str]:
    path = _HERE / filename
    return (filename, path.read_text(encoding="utf-8"))


_CODEC = ("codec.py", (Path(codec.__file__)).read_text(encoding="utf-8"))
_CANDIDATE_GUEST = [_CODEC, _guest("_guest_candidate.py")]
_TESTS_GUEST = [_CODEC, _guest("_guest_tests.py")]


def extract_code(completion: str) -> str:
    """The candidate program in a completion: the last fenced block tagged ``python`` (or
    ``py``, ``python3``); else the last untagged fenced block; else the whole completion.
    Blocks tagged with another language (```bash) are never taken for the program."""
    blocks: list[tuple[str, str]] = [(tag.lower(), body) for tag, body in _FENCE.findall(completion)]
    for wanted in (_PYTHON_TAGS, frozenset({""})):
        for tag, body in reversed(blocks):
            if tag in wanted:
                return body
    return completion


@dataclass(frozen=True)
class CallCase:
    """A call of the candidate's function and the value it must return."""

    name: str
    function: str
    args: Any  # encoded data (envhub.sandbox.codec), a list
    kwargs: Any  # encoded data, a dict
    expected: Any  # decoded


@dataclass(frozen=True)
class IoCase:
    """A run of the candidate as a program: its stdin and the stdout it must print."""

    name: str
    stdin: str
    stdout: str


@dataclass(frozen=True)
class TestOutcome:
    """One test: its name (``line 3: assert f(1) == 2``, ``add(1, 2)``) and result."""

    __test__ = False  # not a pytest test class, despite the name

    name: str
    passed: bool
    error: str | None = None


@dataclass(frozen=True)
class TestsResult:
    """What a code-tests run found: every test's outcome, whether the run reported them all,
    why the candidate failed before any test (``candidate_error``), and how the sandboxes
    ended (the candidate's, and for test code the tests' own)."""

    __test__ = False

    tests: tuple[TestOutcome, ...]
    completed: bool
    candidate: Outcome
    candidate_error: str | None = None
    tests_sandbox: Outcome | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def plan_tests(source: str) -> list[list[str]]:
    """The steps the tests' sandbox takes for a test file, in order.

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


def parse_tests(value: Any, task: Task, field_name: str) -> str | list[CallCase] | list[IoCase]:
    """The tests in a task's field: Python test code (a string), or call or io cases.

    Raises :class:`VerifierError` naming the task, the field and what is wrong: tests that do
    not compile or are empty, cases that are malformed. Broken tests are the environment's
    bug, not the candidate's."""
    where = f"task {task.id!r} field {field_name!r}"
    if isinstance(value, str):
        try:
            module = ast.parse(value, "tests.py")
            compile(module, "tests.py", "exec")
        except (SyntaxError, ValueError) as e:
            raise VerifierError(f"{where}: the tests do not compile: {e}") from e
        if not module.body:
            raise VerifierError(f"{where} holds no tests")
        return value
    if isinstance(value, dict) and set(value) == {"calls"}:
        return _call_cases(value["calls"], where)
    if isinstance(value, dict) and set(value) == {"io"}:
        return _io_cases(value["io"], where)
    raise VerifierError(f"{where} must be Python test code, {{\"calls\": [...]}} or {{\"io\": [...]}}, "
                        f"got {type(value).__name__}"
                        + (f" with keys {sorted(value)}" if isinstance(value, dict) else ""))


def _cases(items: Any, where: str, what: str) -> list[dict[str, Any]]:
    if not isinstance(items, list) or not items:
        raise VerifierError(f"{where}: {what} must be a non-empty list of tables")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise VerifierError(f"{where}: {what}[{i}] must be a table, got {type(item).__name__}")
    return items


def _call_cases(items: Any, where: str) -> list[CallCase]:
    cases = []
    for i, item in enumerate(_cases(items, where, "calls")):
        at = f"{where}: calls[{i}]"
        unknown = set(item) - {"call", "args", "kwargs", "expected", "name"}
        if unknown:
            raise VerifierError(f"{at} has unknown keys {sorted(unknown)}; known: call, args, kwargs, expected, name")
        function = item.get("call")
        if not isinstance(function, str) or not function.isidentifier():
            raise VerifierError(f"{at}.call must name a function of the candidate, got {function!r}")
        if "expected" not in item:
            raise VerifierError(f"{at} has no expected value")
        args, kwargs = item.get("args", []), item.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise VerifierError(f"{at}: args must be a list and kwargs a table")
        try:
            expected = codec.decode(item["expected"])
            shown = ", ".join([*(repr(a) for a in codec.decode(args)),
                               *(f"{k}={v!r}" for k, v in codec.decode(kwargs).items())])
        except codec.NotData as e:
            raise VerifierError(f"{at}: {e}") from e
        name = item.get("name") or f"{function}({shown})"
        cases.append(CallCase(str(name)[:200], function, args, kwargs, expected))
    return cases


def _io_cases(items: Any, where: str) -> list[IoCase]:
    cases = []
    for i, item in enumerate(_cases(items, where, "io")):
        at = f"{where}: io[{i}]"
        unknown = set(item) - {"stdin", "stdout", "name"}
        if unknown:
            raise VerifierError(f"{at} has unknown keys {sorted(unknown)}; known: stdin, stdout, name")
        stdin, stdout = item.get("stdin", ""), item.get("stdout")
        if not isinstance(stdin, str) or not isinstance(stdout, str):
            raise VerifierError(f"{at}: stdin and stdout must be strings")
        cases.append(IoCase(str(item.get("name") or f"case {i + 1}")[:200], stdin, stdout))
    return cases


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


async def run_tests(sandbox: Sandbox, candidate: str, tests: str | list[CallCase] | list[IoCase]) -> TestsResult:
    """Run ``tests`` (from :func:`parse_tests`) against ``candidate`` in ``sandbox``."""
    if isinstance(tests, str):
        return await _run_test_code(sandbox, candidate, tests)
    if tests and isinstance(tests[0], CallCase):
        calls = [c for c in tests if isinstance(c, CallCase)]
        job: dict[str, Any] = {"mode": "calls", "candidate": candidate,
                               "calls": [[c.function, c.args, c.kwargs] for c in calls]}
    else:
        ios = [c for c in tests if isinstance(c, IoCase)]
        job = {"mode": "io", "candidate": candidate, "stdin": [c.stdin for c in ios]}
    messages, outcome = await sandbox.run(_CANDIDATE_GUEST, job)
    results: dict[int, dict[str, Any]] = {}
    completed = False
    candidate_error = None
    for m in messages:
        if not isinstance(m, dict):
            continue
        event = m.get("event")
        if event == "result" and isinstance(m.get("i"), int):
            results.setdefault(m["i"], m)  # the first answer counts
        elif event == "candidate_error" and candidate_error is None:
            candidate_error = str(m.get("error"))
        elif event == "done":
            completed = True
    outcomes = []
    cases: Sequence[CallCase | IoCase] = tests
    for i, case in enumerate(cases):
        got = results.get(i)
        if got is None:
            outcomes.append(TestOutcome(case.name, False, "no result"))
            completed = False
        elif isinstance(case, CallCase):
            outcomes.append(_compare_call(case, got))
        else:
            outcomes.append(_compare_io(case, got))
    return TestsResult(tuple(outcomes), completed, outcome, candidate_error)


def _compare_call(case: CallCase, got: dict[str, Any]) -> TestOutcome:
    if "error" in got:
        return TestOutcome(case.name, False, str(got["error"])[:500])
    try:
        value = codec.decode(got.get("value"))
    except (codec.NotData, RecursionError) as e:
        return TestOutcome(case.name, False, f"the result is not data: {e}")
    if codec.same(value, case.expected):
        return TestOutcome(case.name, True)
    return TestOutcome(case.name, False, f"returned {_short(value)}, expected {_short(case.expected)}")


def _compare_io(case: IoCase, got: dict[str, Any]) -> TestOutcome:
    printed = got.get("stdout")
    if not isinstance(printed, str):
        return TestOutcome(case.name, False, "no output")
    if _lines(printed) == _lines(case.stdout):
        return TestOutcome(case.name, True)
    error = str(got["error"]) if "error" in got else f"printed {_short(printed)}, expected {_short(case.stdout)}"
    return TestOutcome(case.name, False, error[:500])


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


async def _run_test_code(sandbox: Sandbox, candidate: str, tests: str) -> TestsResult:
    plan = plan_tests(tests)
    async with contextlib.AsyncExitStack() as stack:
        side = await stack.enter_async_context(sandbox.session(_CANDIDATE_GUEST, {"mode": "serve",
                                                                               "candidate": candidate}))
        judge = await stack.enter_async_context(sandbox.session(_TESTS_GUEST, {"plan": plan}))
        outcomes, completed, candidate_error, notes = await _relay(side, judge)
    assert side.outcome is not None and judge.outcome is not None
    return TestsResult(tuple(outcomes), completed, side.outcome, candidate_error, judge.outcome, tuple(notes))


async def _relay(side: Session, judge: Session) -> tuple[list[TestOutcome], bool, str | None, list[str]]:
    """Carry the tests' requests to the candidate and its answers back, as data, until the
    tests are done; collect the outcomes the tests' sandbox reports."""
    outcomes: list[TestOutcome] = []
    ready = await side.receive()
    while isinstance(ready, dict) and ready.get("event") not in ("ready", "candidate_error"):
        ready = await side.receive()  # lines the candidate wrote itself: not the guest's
    if not isinstance(ready, dict) or ready.get("event") != "ready":
        judge.close_input()  # the tests' sandbox waits for names that will not come
        error = ready.get("error") if isinstance(ready, dict) and ready.get("event") == "candidate_error" else None
        return outcomes, False, str(error) if error else None, ["the candidate's run ended before it was ready"]
    judge.send({"names": ready.get("names") if isinstance(ready.get("names"), dict) else {}})
    notes: list[str] = []
    while (message := await judge.receive()) is not None:
        if not isinstance(message, dict):
            continue
        event = message.get("event")
        if event == "call":
            side.send({k: message.get(k) for k in ("id", "op", "target", "args", "kwargs", "name", "key", "item")})
            reply = await side.receive()
            while reply is not None and not (isinstance(reply, dict) and reply.get("event") == "reply"
                                             and reply.get("id") == message.get("id")):
                reply = await side.receive()  # lines the candidate wrote itself
            if reply is None:
                judge.send({"error": {"type": "candidate-ended", "message": "the candidate's sandbox ended"}})
            else:
                judge.send({k: reply[k] for k in ("id", "value", "error") if k in reply})
        elif event == "test":
            error = message.get("error")
            outcomes.append(TestOutcome(str(message.get("name")), message.get("passed") is True,
                                        str(error) if error is not None else None))
        elif event == "done":
            side.close_input()
            async for _ in side:  # let the candidate's side finish by itself
                pass
            return outcomes, True, None, notes
    return outcomes, False, None, notes


def _blocking(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to its end from synchronous code, also when this thread runs an event loop
    (then in a thread of its own: a loop cannot be re-entered)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: list[Any] = []

    def target() -> None:
        try:
            box.append((True, asyncio.run(coro)))
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box.append((False, e))

    thread = threading.Thread(target=target, name="envhub-code-tests")
    thread.start()
    thread.join()
    ok, value = box[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


class CodeTestsVerifier(Verifier):
    """Runs the task's tests (``task[tests-field]``, see :func:`parse_tests`) against the
    completion's code (see :func:`extract_code`) in a sandbox, and compares here.

    ``score`` raises :class:`MissingFieldError` or :class:`VerifierError` (tests that are
    malformed, a sandbox that cannot start); everything the candidate does, including hanging
    or crashing, is a score. ``sandbox`` replaces the one built from the spec's limits."""

    kind = "code-tests"

    def __init__(self, spec: Any, *, sandbox: Sandbox | None = None) -> None:
        if spec.language != "python":
            raise VerifierError(f"code-tests supports language 'python' only, not {spec.language!r}")
        self.tests_field: str = spec.tests_field
        self.sandbox = sandbox or Sandbox(Limits(timeout_s=spec.timeout_s, memory_mb=spec.memory_mb))

    def reference(self, task: Task) -> Reference | None:
        """The task's ``solution`` (source code) in a fenced Python block; None without one."""
        return code_reference(task)

    def _inputs(self, task: Task, trajectory: Trajectory) -> tuple[str, str | list[CallCase] | list[IoCase]]:
        tests = parse_tests(task_value(task, self.tests_field, self.kind), task, self.tests_field)
        return extract_code(trajectory.completion), tests

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None,
              context: ScoringContext | None = None) -> Score:
        return _blocking(self.ascore(task, trajectory, state=state))

    async def ascore(self, task: Task, trajectory: Trajectory, *, state: Any = None,
                     context: ScoringContext | None = None) -> Score:
        candidate, tests = self._inputs(task, trajectory)
        return to_score(await run_tests(self.sandbox, candidate, tests))


_REASONS = {
    "timeout": "the run exceeded its time limit",
    "memory": "the run exceeded its memory limit",
    "cpu": "the run exceeded its CPU-time limit",
    "file-size": "the run wrote a file larger than its limit",
    "report-size": "the run reported more than the sandbox accepts",
}


def to_score(result: TestsResult) -> Score:
    """The reward of a run: the fraction of tests passed, or 0 with ``info["reason"]``."""
    total = len(result.tests)
    passed = sum(t.passed for t in result.tests)
    side = result.candidate
    info: dict[str, Any] = {
        "tests": [{"name": t.name, "passed": t.passed, **({"error": t.error} if t.error else {})}
                  for t in result.tests],
        "timed_out": side.timed_out,
        "killed_by": side.killed_by,
        "returncode": side.returncode,
        "stdout_tail": side.stdout_tail,
        "stderr_tail": side.stderr_tail,
        "duration_s": side.duration_s,
        "isolation": list(side.layers),
        "missing": list(side.missing),
        "platform": sys.platform,
    }
    judge = result.tests_sandbox
    for outcome in (side, judge):
        if outcome is not None and outcome.killed_by == "sandbox-setup":
            raise VerifierError(f"the code-tests sandbox could not start: {outcome.stderr_tail.strip()}",
                                hint="run 'envhub doctor' to see what this machine's sandbox can do")
    if judge is not None:
        info["tests_sandbox"] = {"killed_by": judge.killed_by, "returncode": judge.returncode,
                                 "stderr_tail": judge.stderr_tail, "duration_s": judge.duration_s}
    reason = None
    if result.candidate_error:
        reason = result.candidate_error
    elif side.killed_by:
        reason = _REASONS.get(side.killed_by, f"the run was killed by {side.killed_by}")
    elif judge is not None and judge.killed_by:
        reason = "the tests' run: " + _REASONS.get(judge.killed_by, f"killed by {judge.killed_by}")
    elif not result.completed:
        early = judge is None or "the candidate's run ended before it was ready" in result.notes
        status = side.returncode if early or judge is None else judge.returncode
        reason = f"the test runner exited (status {status}) before reporting every test"
    if reason:
        info["reason"] = reason
        return Score(0.0, {"tests_passed": 0.0}, info=info)
    fraction = passed / total if total else 0.0
    return Score(fraction, {"tests_passed": fraction}, info=info)
