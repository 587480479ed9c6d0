"""The code-tests verifier: tests as data and as code, its verdicts, and attacks on them.

Every attack here is made as a policy would make it, in the candidate's code, against the real
sandbox; each has a positive control showing the attack is real (it works without the
boundary, or its effect is visible where it should be) so that a passing test means the
boundary held, not that the attack did nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from envhub.context import make_plugin_manager
from envhub.manifest import CodeTests
from envhub.runtime import Score, Task, Trajectory
from envhub.runtime.verifiers import (
    CodeTestsVerifier,
    VerifierContext,
    VerifierError,
    build_verifier,
    extract_code,
)
from envhub.sandbox import Limits, Sandbox, probe
from envhub.settings import load_settings

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux's")
NAMESPACES = "user-namespace" in probe().layers
#: envhub's built-in verifier kinds, nothing installed.
PLUGINS = make_plugin_manager(autoload=False)


def ctx() -> VerifierContext:
    def refuse(entry_point: str) -> Any:
        raise AssertionError("code-tests loads no bundle code")

    return VerifierContext(root=Path("."), load_entry_point=refuse, settings=load_settings())


# Runs meant to finish get a generous wall-clock limit: on a loaded 2-core CI machine starting
# a sandboxed interpreter has taken over 2 s. Tests of the limit itself pass their own.
def verifier(timeout_s: float = 10.0, memory_mb: int = 256) -> CodeTestsVerifier:
    spec = CodeTests(kind="code-tests", timeout_s=timeout_s, memory_mb=memory_mb)
    return build_verifier(spec, ctx(), plugins=PLUGINS)  # type: ignore[return-value]


def run(candidate: str, tests: Any, **limits: Any) -> Score:
    tests = textwrap.dedent(tests) if isinstance(tests, str) else tests
    t = Task(id="t1", split="dev", data={"id": "t1", "tests": tests})
    return verifier(**limits).score(t, Trajectory.of(textwrap.dedent(candidate)))


ADD = "def add(a, b):\n    return a + b\n"

# --- which code, which tests -------------------------------------------------------------

EXTRACT = [
    ("python-fence", "Here:\n```python\nx = 1\n```\nthanks", "x = 1\n"),
    ("last-python-fence", "```python\nx = 1\n```\n```python\nx = 2\n```", "x = 2\n"),
    ("python-over-later-untagged", "```py\nx = 1\n```\n```\noutput\n```", "x = 1\n"),
    ("untagged", "```\nx = 3\n```", "x = 3\n"),
    ("other-language-ignored", "```bash\nls\n```\nx = 4", "```bash\nls\n```\nx = 4"),
    ("no-fence", "x = 5", "x = 5"),
    ("unclosed", "```python\nx = 6\n", "x = 6\n"),
    ("fence-inside-string", '```python\ns = "``` no"\n```', 's = "``` no"\n'),
]


@pytest.mark.parametrize(("completion", "code"), [c[1:] for c in EXTRACT], ids=[c[0] for c in EXTRACT])
def test_extract_code(completion: str, code: str) -> None:
    assert extract_code(completion) == code


SCORES = [
    ("all-pass", ADD, "assert add(1, 2) == 3\nassert add(0, 0) == 0\n", 1.0,
     [("line 1: assert add(1, 2) == 3", True), ("line 2: assert add(0, 0) == 0", True)]),
    ("partial", ADD, "assert add(1, 2) == 3\nassert add(1, 1) == 3\n", 0.5,
     [("line 1: assert add(1, 2) == 3", True), ("line 2: assert add(1, 1) == 3", False)]),
    ("test-functions", ADD,
     "def test_small():\n    assert add(1, 2) == 3\n\ndef test_wrong():\n    assert add(2, 2) == 5\n\n"
     "def helper():\n    raise RuntimeError\n",
     0.5, [("test_small()", True), ("test_wrong()", False)]),
    ("setup-then-asserts", ADD, "x = add(2, 3)\nassert x == 5\nassert x > 9\n", 0.5,
     [("line 2: assert x == 5", True), ("line 3: assert x > 9", False)]),
    ("setup-failure-fails-the-rest", ADD, "assert add(1, 1) == 2\nx = add(None, 1)\nassert x == 1\n", 0.5,
     [("line 1: assert add(1, 1) == 2", True), ("line 3: assert x == 1", False)]),
    ("whole-file-check-style", ADD, "def check(f):\n    assert f(1, 2) == 3\n\ncheck(add)\n", 1.0,
     [("tests.py", True)]),
    ("whole-file-check-fails", ADD, "def check(f):\n    assert f(1, 2) == 4\n\ncheck(add)\n", 0.0,
     [("tests.py", False)]),
    ("import-solution", ADD, "from solution import add as plus\nassert plus(2, 2) == 4\n", 1.0,
     [("line 2: assert plus(2, 2) == 4", True)]),
    ("main-block-skipped", ADD + "if __name__ == '__main__':\n    raise SystemExit(3)\n", "assert add(1, 1) == 2\n",
     1.0, [("line 1: assert add(1, 1) == 2", True)]),
    ("system-exit-in-test-fails-it", ADD, "assert add(1, 1) == 2\nassert exit(0)\n", 0.5,
     [("line 1: assert add(1, 1) == 2", True), ("line 2: assert exit(0)", False)]),
    ("decorated-test-function", ADD,
     "import functools\n\n@functools.lru_cache\ndef test_cached():\n    assert add(1, 1) == 2\n", 1.0,
     [("test_cached()", True)]),
    ("one-line-statements", ADD, "x = add(1, 1); assert x == 2\nassert (x ==\n        2)\n", 1.0,
     [("line 1: assert x == 2", True), ("line 2: assert (x == 2)", True)]),
    ("async-test-function", ADD,
     "import asyncio\nasync def test_a():\n    await asyncio.sleep(0)\n    assert add(1, 1) == 2\n",
     1.0, [("test_a()", True)]),
]


@pytest.mark.parametrize(("candidate", "tests", "reward", "outcomes"), [c[1:] for c in SCORES],
                         ids=[c[0] for c in SCORES])
def test_scores(candidate: str, tests: str, reward: float, outcomes: list[tuple[str, bool]]) -> None:
    result = run(candidate, tests)
    assert result.reward == reward, result.info
    assert dict(result.breakdown) == {"tests_passed": reward}
    assert [(t["name"], t["passed"]) for t in result.info["tests"]] == outcomes
    assert result.info["timed_out"] is False and result.info["killed_by"] is None


def test_tracebacks_keep_line_numbers() -> None:
    result = run(ADD, "\n\n\ndef test_line():\n    raise ValueError(__import__('sys')._getframe().f_lineno)\n")
    assert result.info["tests"][0]["error"] == "ValueError: 5"


def test_failed_test_reports_its_error() -> None:
    result = run(ADD, "def test_type():\n    add('a', 1)\n")
    assert result.info["tests"] == [
        {"name": "test_type()", "passed": False, "error": 'TypeError: can only concatenate str (not "int") to str'}
    ]


CANDIDATE_FAILURES = [
    ("syntax-error", "def add(a, b) return a",
     "the candidate code does not compile: SyntaxError: expected ':' (solution.py, line 1)"),
    ("raises-on-import", "raise ValueError('nope')", "the candidate code raised ValueError: nope"),
    ("exits-before-reporting", "import os\nos._exit(0)",
     "the test runner exited (status 0) before reporting every test"),
]


@pytest.mark.parametrize(("candidate", "reason"), [c[1:] for c in CANDIDATE_FAILURES],
                         ids=[c[0] for c in CANDIDATE_FAILURES])
def test_candidate_failures_score_zero(candidate: str, reason: str) -> None:
    result = run(candidate, "assert True\n")
    assert (result.reward, result.error, result.info["reason"]) == (0.0, None, reason)


TEST_ERRORS = [
    ("does-not-compile", "assert add(1,\n",
     "task 't1' field 'tests': the tests do not compile: '(' was never closed (tests.py, line 1)"),
    ("empty", "\n# nothing\n", "task 't1' field 'tests' holds no tests"),
    ("not-text", 3, "task 't1' field 'tests' must be Python test code, {\"calls\": [...]} or {\"io\": [...]}, got int"),
    ("unknown-table", {"cases": []},
     "task 't1' field 'tests' must be Python test code, {\"calls\": [...]} or {\"io\": [...]}, "
     "got dict with keys ['cases']"),
    ("empty-calls", {"calls": []}, "task 't1' field 'tests': calls must be a non-empty list of tables"),
    ("call-without-expected", {"calls": [{"call": "add", "args": [1, 2]}]},
     "task 't1' field 'tests': calls[0] has no expected value"),
    ("call-of-an-expression", {"calls": [{"call": "os.system", "args": ["ls"], "expected": 0}]},
     "task 't1' field 'tests': calls[0].call must name a function of the candidate, got 'os.system'"),
    ("call-unknown-key", {"calls": [{"call": "add", "expect": 3}]},
     "task 't1' field 'tests': calls[0] has unknown keys ['expect']; known: call, args, kwargs, expected, name"),
    ("io-not-text", {"io": [{"stdin": 3, "stdout": "3"}]},
     "task 't1' field 'tests': io[0]: stdin and stdout must be strings"),
    ("bad-tag", {"calls": [{"call": "add", "args": [], "expected": {"$set": 3}}]},
     "task 't1' field 'tests': calls[0]: malformed $set: expected a list, got a int"),
]


@pytest.mark.parametrize(("tests", "message"), [c[1:] for c in TEST_ERRORS], ids=[c[0] for c in TEST_ERRORS])
def test_broken_tests_are_verifier_errors(tests: Any, message: str) -> None:
    t = Task(id="t1", split="dev", data={"id": "t1", "tests": tests})
    with pytest.raises(VerifierError) as e:
        verifier().score(t, Trajectory.of(ADD))
    assert e.value.message == message




# --- tests as data -------------------------------------------------------------------------

STACK = """
class Stack:
    def __init__(self):
        self.items = []
    def push(self, x):
        self.items.append(x)
    def pop(self):
        return self.items.pop()
    def __len__(self):
        return len(self.items)
    def __iter__(self):
        return iter(self.items)

def pairs(n):
    return {(i, i * i) for i in range(n)}

def gen(n):
    yield from range(n)
"""

CALLS = [
    ("equal", ADD, [{"call": "add", "args": [1, 2], "expected": 3}], 1.0, [("add(1, 2)", True, None)]),
    ("wrong", ADD, [{"call": "add", "args": [1, 1], "expected": 3}], 0.0,
     [("add(1, 1)", False, "returned 2, expected 3")]),
    ("kwargs-and-name", ADD, [{"call": "add", "kwargs": {"a": "x", "b": "y"}, "expected": "xy", "name": "strings"}],
     1.0, [("strings", True, None)]),
    ("tuple-equals-list", "def f():\n    return (1, [2, (3,)])\n", [{"call": "f", "expected": [1, [2, [3]]]}], 1.0,
     [("f()", True, None)]),
    ("float-tolerance", "def f():\n    return 0.1 + 0.2\n", [{"call": "f", "expected": 0.3}], 1.0,
     [("f()", True, None)]),
    ("bool-is-not-int", "def f():\n    return True\n", [{"call": "f", "expected": 1}], 0.0,
     [("f()", False, "returned True, expected 1")]),
    ("tagged-set", STACK, [{"call": "pairs", "args": [3], "expected": {"$set": [{"$tuple": [0, 0]}, {"$tuple": [1, 1]},
                                                                                   {"$tuple": [2, 4]}]}}], 1.0,
     [("pairs(3)", True, None)]),
    ("raises", ADD, [{"call": "add", "args": [None, 1], "expected": 1}], 0.0,
     [("add(None, 1)", False, "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'")]),
    ("missing-function", ADD, [{"call": "sub", "args": [1, 1], "expected": 0}], 0.0,
     [("sub(1, 1)", False, "AttributeError: module 'solution' has no attribute 'sub'")]),
    ("object-is-not-data", STACK, [{"call": "Stack", "expected": []}], 0.0,
     [("Stack()", False, "the result is not data: a Stack is not data")]),
    ("generator-is-not-data", STACK, [{"call": "gen", "args": [2], "expected": [0, 1]}], 0.0,
     [("gen(2)", False, "the result is not data: a generator is not data")]),
]


@pytest.mark.parametrize(("candidate", "calls", "reward", "outcomes"), [c[1:] for c in CALLS],
                         ids=[c[0] for c in CALLS])
def test_call_cases(candidate: str, calls: list[dict[str, Any]], reward: float,
                    outcomes: list[tuple[str, bool, str | None]]) -> None:
    result = run(candidate, {"calls": calls})
    assert result.reward == reward, result.info
    assert [(t["name"], t["passed"], t.get("error")) for t in result.info["tests"]] == outcomes


def test_io_cases() -> None:
    program = "a, b = map(int, input().split())\nprint(a + b)   \nprint()\n"
    cases = [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "2 2\n", "stdout": "5"}, {"stdin": "x\n", "stdout": "0"}]
    result = run(program, {"io": cases})
    assert result.reward == pytest.approx(1 / 3)
    assert [(t["name"], t["passed"], t.get("error")) for t in result.info["tests"]] == [
        ("case 1", True, None),
        ("case 2", False, "printed '4\\n\\n', expected '5'"),
        ("case 3", False, "ValueError: invalid literal for int() with base 10: 'x'"),
    ]


def test_objects_of_the_candidate_are_used_through_references() -> None:
    tests = """
        s = Stack()
        s.push(1); s.push(2)
        assert len(s) == 2
        assert list(s) == [1, 2]
        assert s.pop() == 2
        assert s.items == [1]
        assert sorted(pairs(2)) == [(0, 0), (1, 1)]
        assert list(gen(3)) == [0, 1, 2]
        def test_pop_empty():
            t = Stack()
            try:
                t.pop()
            except IndexError:
                return
            raise AssertionError("no IndexError")
        def test_no_functions_across():
            try:
                s.push(lambda: 0)
            except TypeError as e:
                assert "only data can be passed" in str(e)
            else:
                raise AssertionError("a function crossed")
    """
    result = run(STACK, tests)
    assert result.reward == 1.0, result.info["tests"]
    assert len(result.info["tests"]) == 8
    assert "tests_sandbox" in result.info


# --- limits ------------------------------------------------------------------------------


def test_infinite_loop_is_killed_at_the_timeout() -> None:
    start = time.perf_counter()
    result = run("while True:\n    pass\n", "assert True\n", timeout_s=1.0)
    elapsed = time.perf_counter() - start
    assert (result.reward, result.info["killed_by"] in ("timeout", "cpu")) == (0.0, True), result.info
    assert 1.0 <= elapsed < 4.0


def test_a_call_that_never_returns_is_stopped() -> None:
    result = run("def f():\n    while True:\n        pass\n", {"calls": [{"call": "f", "expected": 1}]}, timeout_s=1.0)
    assert (result.reward, result.info["killed_by"] in ("timeout", "cpu")) == (0.0, True), result.info


def test_sleeping_threads_do_not_hold_the_run_open() -> None:
    start = time.perf_counter()
    result = run("import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\ntime.sleep(60)\n",
                 "assert True\n", timeout_s=1.0)
    assert result.info["killed_by"] == "timeout"
    assert time.perf_counter() - start < 4.0


def test_unbounded_allocation_is_stopped_by_the_memory_limit() -> None:
    result = run("blocks = []\nwhile True:\n    blocks.append(bytearray(10**7))\n", "assert True\n", timeout_s=5.0,
                 memory_mb=200)
    assert (result.reward, result.info["killed_by"], result.info["timed_out"]) == (0.0, "memory", False)
    assert result.info["reason"] == "the run exceeded its memory limit"


def test_memory_blowup_inside_a_call_scores_zero() -> None:
    result = run("def f():\n    return 'a' * (10**10)\n", {"calls": [{"call": "f", "expected": ""}]}, memory_mb=200)
    assert (result.reward, result.info["killed_by"]) == (0.0, "memory"), result.info


def test_a_fork_bomb_is_held_by_the_process_limit() -> None:
    candidate = """
        import os
        children = 0
        try:
            for _ in range(10_000):
                if os.fork() == 0:
                    import time
                    time.sleep(30)
                    os._exit(0)
                children += 1
        except OSError as e:
            STOPPED = type(e).__name__
        FORKED = children
    """
    result = run(candidate, "assert STOPPED == 'BlockingIOError'\nassert FORKED < 100\n", timeout_s=10)
    assert result.reward == 1.0, result.info


def test_writes_inside_the_workspace_and_tmp_work() -> None:
    candidate = """
        import os, tempfile, shutil
        os.makedirs("a/b")
        with open("a/b/f.txt", "w") as f:
            f.write("hello")
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("tmp")
        shutil.rmtree("a/b")
        os.chmod(".", 0o500)  # a read-only directory must not stop the clean-up
        WORK, HOME, TMP = os.getcwd(), os.environ["HOME"], os.environ["TMPDIR"]
    """
    result = run(candidate, "assert (WORK, HOME, TMP) == ('/workspace', '/workspace', '/tmp'), (WORK, HOME, TMP)\n")
    assert result.reward == 1.0, result.info


def test_secrets_in_the_environment_are_not_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    candidate = "import os\nENV = dict(os.environ)\n"
    tests = "assert not {'OPENAI_API_KEY', 'HF_TOKEN', 'AWS_SECRET_ACCESS_KEY'} & set(ENV), sorted(ENV)\n" \
            "assert 'secret' not in repr(ENV)\n"
    assert run(candidate, tests).reward == 1.0


def test_output_tails_are_kept() -> None:
    result = run("import sys\nprint('x' * 5000 + 'END')\nprint('oops', file=sys.stderr)\n", "assert True\n")
    assert result.info["stdout_tail"].endswith("END\n") and len(result.info["stdout_tail"]) == 2000
    assert result.info["stderr_tail"] == "oops\n"


def test_ascore_matches_score_and_runs_concurrently() -> None:
    v = verifier(timeout_s=10.0)
    t = Task(id="t1", split="dev", data={"id": "t1", "tests": "import time\ntime.sleep(1)\nassert add(1, 2) == 3\n"})

    async def many() -> list[Score]:
        return list(await asyncio.gather(*(v.ascore(t, Trajectory.of(ADD)) for _ in range(4))))

    start = time.perf_counter()
    scores = asyncio.run(many())
    assert time.perf_counter() - start < 3.5  # four 1 s runs side by side, not in a row
    assert [s.reward for s in scores] == [1.0] * 4
    assert v.score(t, Trajectory.of(ADD)).reward == 1.0


def test_limits_cpu_follows_timeout() -> None:
    assert [Limits(timeout_s=t).cpu_s for t in (0.2, 1.0, 2.5)] == [1, 1, 3]


# --- attacks on the verdict --------------------------------------------------------------------
# What a policy tried, each reproduced against the earlier design where the candidate and the
# test runner shared one process.

ALWAYS_EQUAL = """
class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__

def add(a, b):
    return Anything()
"""


def test_an_always_equal_object_does_not_pass() -> None:
    # Positive control: in one process, as before, the object passes the very same tests.
    namespace: dict[str, Any] = {}
    exec(ALWAYS_EQUAL + "assert add(1, 2) == 5\n", namespace)
    assert run(ALWAYS_EQUAL, "assert add(1, 2) == 5\nassert add(1, 2) == 3\n").reward == 0.0
    result = run(ALWAYS_EQUAL, {"calls": [{"call": "add", "args": [1, 2], "expected": 3}]})
    assert result.reward == 0.0
    assert result.info["tests"][0]["error"] == "the result is not data: a Anything is not data"


FORGER = """
import gc, os, sys
WROTE = 0
lines = (b'{"event": "test", "name": "forged", "passed": true}\\n'
         b'{"event": "result", "i": 0, "value": 999}\\n{"event": "result", "i": 1, "value": 999}\\n'
         b'{"event": "done"}\\n')
for fd in range(3, 64):
    try:
        os.write(fd, lines)
        WROTE += 1
    except OSError:
        pass
# The reporter, wherever it is in this process: patch it to say everything passed.
PATCHED = 0
for obj in gc.get_objects():
    if type(obj).__name__ == "_Channel":
        original = obj.report
        obj.report = lambda **fields: original(**{**fields, "passed": True})
        PATCHED += 1
for frame in (sys._getframe(i) for i in range(1, 4)):
    if "CHANNEL" in frame.f_globals:
        frame.f_globals["CHANNEL"].report(event="test", name="from a frame", passed=True)
        PATCHED += 1
        break

def add(a, b):
    return a - b
"""


def test_forged_and_patched_reports_do_not_pass() -> None:
    tests = "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert WROTE > 0 and PATCHED > 0, (WROTE, PATCHED)\n"
    result = run(FORGER, tests)
    outcomes = [(t["name"], t["passed"]) for t in result.info["tests"]]
    # Positive control: the forging ran and reached a report channel (its own), and patched
    # the reporter of its own process; the verdict came from the tests' sandbox all the same.
    assert outcomes == [("line 1: assert add(1, 2) == 3", False), ("line 2: assert add(2, 2) == 4", False),
                        ("line 3: assert WROTE > 0 and PATCHED > 0, (WROTE, PATCHED)", True)]
    assert result.reward == pytest.approx(1 / 3)
    calls = run(FORGER, {"calls": [{"call": "add", "args": [1, 2], "expected": 3},
                                   {"call": "add", "args": [2, 2], "expected": 4}]})
    # The forged results came first (999) and were taken as the answers: still not 3 or 4.
    assert [t["error"] for t in calls.info["tests"]] == ["returned 999, expected 3", "returned 999, expected 4"]
    assert calls.reward == 0.0


def test_the_candidate_cannot_find_the_tests_or_expected_values() -> None:
    marker = f"hidden-{uuid.uuid4().hex}"
    candidate = f"""
        import os
        FOUND = []
        def search(top):
            for root, dirs, files in os.walk(top):
                dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
                for name in files:
                    path = os.path.join(root, name)
                    try:
                        with open(path, "rb") as f:
                            if b"{marker}" in f.read(1 << 20):
                                FOUND.append(path)
                    except OSError:
                        pass
        for top in ("/workspace", "/tmp", "/proc"):
            search(top) if top != "/proc" else None
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                for name in ("cmdline", "environ"):
                    try:
                        if b"{marker}" in open(f"/proc/{{pid}}/{{name}}", "rb").read():
                            FOUND.append(f"/proc/{{pid}}/{{name}}")
                    except OSError:
                        pass
        PIDS = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        def add(a, b):
            return a + b
    """
    tests = f"assert add(1, 1) == 2  # {marker}\nassert FOUND == [], FOUND\n"
    result = run(candidate, tests)
    assert result.reward == 1.0, result.info["tests"]
    calls = run(candidate, {"calls": [{"call": "add", "args": [1, 1], "expected": f"{marker}"}]})
    assert calls.info["tests"][0]["error"] == f"returned 2, expected '{marker}'"
    # Positive control: the same search finds the marker in a file of the workspace.
    workspace_check = candidate.replace('"/workspace", "/tmp", "/proc"', '"/workspace",')
    sandbox = Sandbox(Limits(timeout_s=10))

    async def seeded(tmp: Path) -> list[Any]:
        (tmp / "notes.txt").write_text(marker)
        guest = textwrap.dedent(workspace_check) + "\nCHANNEL.report(found=FOUND)\n"
        messages, _ = await sandbox.run(guest, None, workspace=tmp)
        return messages

    import tempfile

    with tempfile.TemporaryDirectory() as d:
        assert asyncio.run(seeded(Path(d))) == [{"found": ["/workspace/notes.txt"]}]


def _secrets(tmp_path: Path) -> dict[str, Path]:
    """Files a policy would want: a user's key, envhub's held-out store, a verifier's code."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    heldout = tmp_path / "envhub-home" / "heldout" / "acme" / "env"
    heldout.mkdir(parents=True)
    (heldout / "test.jsonl").write_text('{"answer": "the held-out answer"}\n')
    return {"ssh": home / ".ssh" / "id_ed25519", "heldout": heldout / "test.jsonl",
            "verifier": Path(__file__).parents[1] / "envhub" / "runtime" / "verifiers" / "_code_tests.py",
            "site-packages": Path(pytest.__file__)}


READER = """
import os
READ = {}
for name, path in PATHS.items():
    for attempt in (path, "/proc/1/root" + path, "/proc/self/root" + path, "/proc/1/cwd/../.." + path):
        try:
            with open(attempt, "rb") as f:
                READ[name] = attempt
                break
        except OSError:
            pass
IMPORTED = []
for module in ("pytest", "envhub", "numpy"):
    try:
        __import__(module)
        IMPORTED.append(module)
    except ImportError:
        pass
"""


def test_files_outside_the_sandbox_cannot_be_read(tmp_path: Path) -> None:
    paths = {name: str(p) for name, p in _secrets(tmp_path).items()}
    candidate = f"PATHS = {paths!r}\n" + READER
    result = run(candidate, "assert READ == {}, READ\nassert IMPORTED == [], IMPORTED\n")
    assert result.reward == 1.0, result.info["tests"]
    # Positive control: the same code, run as a plain process, reads every one of them.
    plain = subprocess.run([sys.executable, "-c", candidate + "\nimport json; print(json.dumps(READ))"],
                           capture_output=True, text=True, check=True)
    assert sorted(json.loads(plain.stdout)) == sorted(paths)


def _survivors(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                pass
    return found


def test_a_setsid_child_does_not_outlive_the_run() -> None:
    marker = f"envhub-escape-{uuid.uuid4().hex}"
    escape = f"""
        import os, subprocess
        subprocess.Popen(["/bin/sh", "-c", "sleep 30; : {marker}"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if os.fork() == 0:
            os.setsid()
            os.execv("/bin/sh", ["/bin/sh", "-c", "sleep 30; : {marker}"])
    """
    escape = textwrap.dedent(escape)
    result = run(escape + "\nimport time\ntime.sleep(60)\n", "assert True\n", timeout_s=1.0)
    assert result.info["killed_by"] == "timeout", result.info
    time.sleep(0.3)  # the kernel tears the PID namespace down as its first process dies
    assert _survivors(marker) == []
    # Positive control: killing the process group of a plain process leaves them running.
    proc = subprocess.Popen([sys.executable, "-c", escape + "\nimport time\ntime.sleep(60)\n"],
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(_survivors(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(proc.pid, 9)
        proc.wait()
        time.sleep(0.2)
        survivors = _survivors(marker)
        assert len(survivors) == 2
    finally:
        for pid in _survivors(marker):
            os.kill(pid, 9)


def test_host_sockets_are_out_of_reach(tmp_path: Path) -> None:
    path = tmp_path / "host.sock"
    abstract = f"\0envhub-test-{uuid.uuid4().hex}"
    servers = []
    for address in (str(path), abstract):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(address)
        server.listen(4)
        server.settimeout(0.3)
        servers.append(server)
    tcp = socket.create_server(("127.0.0.1", 0))
    tcp.settimeout(0.3)
    candidate = f"""
        import socket
        CONNECTED = []
        for family, address in ((socket.AF_UNIX, {str(path)!r}), (socket.AF_UNIX, {abstract!r}),
                                (socket.AF_INET, ("127.0.0.1", {tcp.getsockname()[1]}))):
            try:
                s = socket.socket(family, socket.SOCK_STREAM)
                s.settimeout(1)
                s.connect(address)
                CONNECTED.append(repr(address))
            except OSError:
                pass
        NAMES = [n for _, n in socket.if_nameindex()]
    """
    try:
        result = run(candidate, "assert CONNECTED == [], CONNECTED\nassert NAMES == ['lo'], NAMES\n")
        assert result.reward == 1.0, result.info["tests"]
        for server in (*servers, tcp):
            with pytest.raises(TimeoutError):
                server.accept()
        # Positive control: a plain process connects to all three.
        plain = subprocess.run([sys.executable, "-c", textwrap.dedent(candidate) + "\nprint(len(CONNECTED))"],
                               capture_output=True, text=True, check=True)
        assert plain.stdout.strip() == "3"
    finally:
        for server in (*servers, tcp):
            server.close()


def test_privileges_are_gone() -> None:
    candidate = """
        import ctypes, os
        STATUS = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status"))
                  if k.startswith(("Cap", "NoNewPrivs"))}
        libc = ctypes.CDLL(None, use_errno=True)
        ATTEMPTS = {
            "remount-usr-rw": libc.mount(None, b"/usr", None, 32 | 4096, None),  # MS_REMOUNT | MS_BIND
            "unshare-user": libc.unshare(0x10000000),
            "mount-tmpfs": libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None),
            "setuid-0": libc.setuid(0),
        }
        UID = os.getuid()
    """
    tests = """
        assert all(v == -1 for v in ATTEMPTS.values()), ATTEMPTS
        assert STATUS['CapEff'] == STATUS['CapPrm'] == STATUS['CapBnd'] == '0000000000000000', STATUS
        assert STATUS['NoNewPrivs'] == '1'
        assert UID == 1000
    """
    if not NAMESPACES:
        pytest.skip("this kernel does not give the sandbox its namespaces")
    result = run(candidate, tests)
    assert result.reward == 1.0, result.info["tests"]


def test_the_record_says_what_isolation_the_run_had() -> None:
    result = run(ADD, "assert add(1, 1) == 2\n")
    if NAMESPACES:
        assert result.info["isolation"][:7] == ["user-namespace", "pid-namespace", "mount-namespace",
                                                "private-filesystem", "ipc-namespace", "no-capabilities",
                                                "network-namespace"]
        assert result.info["missing"] == [] or all(m.startswith(("landlock", "rlimit")) for m in result.info["missing"])
    else:
        assert "pid-namespace" in result.info["missing"]


def test_without_namespaces_the_run_says_what_is_missing(tmp_path: Path) -> None:
    # The layers that remain (Landlock limits reads and writes) still hold the files.
    paths = {name: str(p) for name, p in _secrets(tmp_path).items()}
    sandbox = Sandbox(Limits(timeout_s=10), namespaces=False)
    verifier_ = CodeTestsVerifier(CodeTests(kind="code-tests"), sandbox=sandbox)
    t = Task(id="t1", split="dev", data={"id": "t1", "tests": "assert READ == {}, READ\n"})
    result = verifier_.score(t, Trajectory.of(f"PATHS = {paths!r}\n" + READER))
    assert set(result.info["missing"]) >= {"user-namespace", "pid-namespace", "private-filesystem"}
    if "landlock-read-limits" in result.info["isolation"]:
        assert result.reward == 1.0, result.info["tests"]


def test_doctor_says_what_the_sandbox_has() -> None:
    from tests.conftest import run_envhub

    result = run_envhub("doctor", "--json")
    report = json.loads(result.out)["sandbox"]
    assert report["layers"] == list(probe().layers)
    assert result.code == (1 if report["missing"] else 0)
    text = run_envhub("doctor")
    assert text.out.splitlines()[0] == f"sandbox layers:  {', '.join(report['layers'])}"


def test_runs_go_on_when_the_zygote_dies() -> None:
    from envhub.sandbox import _sandbox

    assert run(ADD, {"calls": [{"call": "add", "args": [1, 1], "expected": 2}]}).reward == 1.0
    zygote = _sandbox._ZYGOTE._proc
    assert zygote is not None and zygote.poll() is None
    zygote.kill()
    zygote.wait()
    time.sleep(0.1)  # its reader thread sees the socket close
    assert run(ADD, {"calls": [{"call": "add", "args": [1, 1], "expected": 2}]}).reward == 1.0
    assert _sandbox._ZYGOTE._proc is not zygote


def test_a_forked_process_gets_its_own_zygote() -> None:
    assert run(ADD, {"calls": [{"call": "add", "args": [1, 1], "expected": 2}]}).reward == 1.0
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            reward = run(ADD, {"calls": [{"call": "add", "args": [2, 2], "expected": 4}]}).reward
            os.write(write, str(reward).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        assert f.read() == "1.0"
    os.waitpid(pid, 0)


def _in_memory(pid: int, marker: bytes) -> int:
    """How many times ``marker`` is in the memory of process ``pid``."""
    found = 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            try:
                mem.seek(start)
                found += mem.read(end - start).count(marker)
            except (OSError, ValueError, OverflowError):
                pass  # [vvar], [vsyscall]
    return found


def test_the_zygote_never_holds_what_a_run_was_given() -> None:
    # Runs are forked from one zygote: what a run was given (its tests, a candidate) must never
    # be in the zygote's memory, which every later run inherits.
    from envhub.sandbox import _sandbox

    secret = f"marker-{uuid.uuid4().hex}"
    assert run(ADD, f"assert add(1, 1) == 2, {secret!r}\n").reward == 1.0
    run(ADD + f"# {secret}\n", {"calls": [{"call": "add", "args": [1, 1], "expected": secret}]})
    zygote = _sandbox._ZYGOTE._proc
    assert zygote is not None
    assert _in_memory(zygote.pid, secret.encode()) == 0
    # Positive control: what the zygote is given (a guest's own source) is found there.
    shown = f"marker-{uuid.uuid4().hex}"
    asyncio.run(Sandbox(Limits(timeout_s=10)).run(f"CHANNEL.report(seen={shown!r})", None))
    assert _in_memory(zygote.pid, shown.encode()) > 0


def test_a_module_level_value_too_big_to_send_is_a_reference() -> None:
    candidate = "PRIMES = list(range(2_000_000))\ndef count():\n    return len(PRIMES)\n"
    tests = "assert count() == 2_000_000\nassert len(PRIMES) == 2_000_000\nassert PRIMES[5] == 5\n"
    result = run(candidate, tests)
    assert result.reward == 1.0, result.info
