"""The code-tests verifier and its sandbox, with real subprocesses."""

from __future__ import annotations

import asyncio
import socket
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from envhub.manifest._models import CodeTests
from envhub.runtime._types import Score, Task, Trajectory
from envhub.runtime.verifiers import (
    CodeTestsVerifier,
    SandboxLimits,
    VerifierContext,
    VerifierError,
    build_verifier,
    extract_code,
    run_python_tests,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the sandbox's limits are POSIX")
LINUX = sys.platform.startswith("linux")


def ctx() -> VerifierContext:
    def refuse(entry_point: str) -> Any:
        raise AssertionError("code-tests loads no bundle code")

    return VerifierContext(root=Path("."), load_entry_point=refuse)


# Runs meant to finish get a generous wall-clock limit: on a loaded 2-core CI machine starting
# a sandboxed interpreter has taken over 2 s. Tests of the limit itself pass their own.
def verifier(timeout_s: float = 10.0, memory_mb: int = 256, *, isolate: bool = True) -> CodeTestsVerifier:
    spec = CodeTests(kind="code-tests", timeout_s=timeout_s, memory_mb=memory_mb)
    return build_verifier(spec, ctx()) if isolate else CodeTestsVerifier(spec, isolate=False)  # type: ignore[return-value]


def run(candidate: str, tests: str, *, isolate: bool = True, **limits: Any) -> Score:
    t = Task(id="t1", split="dev", data={"id": "t1", "tests": textwrap.dedent(tests)})
    return verifier(isolate=isolate, **limits).score(t, Trajectory.of(textwrap.dedent(candidate)))


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
     "def test_small():\n    assert add(1, 2) == 3\n\ndef test_wrong():\n    assert add(2, 2) == 5\n\ndef helper():\n    raise RuntimeError\n",
     0.5, [("test_small()", True), ("test_wrong()", False)]),
    ("setup-then-asserts", ADD, "x = add(2, 3)\nassert x == 5\nassert x > 9\n", 0.5,
     [("line 2: assert x == 5", True), ("line 3: assert x > 9", False)]),
    ("setup-failure-fails-the-rest", ADD, "assert add(1, 1) == 2\nx = add(None, 1)\nassert x == 1\n", 0.5,
     [("line 1: assert add(1, 1) == 2", True), ("line 3: assert x == 1", False)]),
    ("whole-file-check-style", ADD, "def check(f):\n    assert f(1, 2) == 3\n\ncheck(add)\n", 1.0, [("tests.py", True)]),
    ("whole-file-check-fails", ADD, "def check(f):\n    assert f(1, 2) == 4\n\ncheck(add)\n", 0.0, [("tests.py", False)]),
    ("import-solution", ADD, "from solution import add as plus\nassert plus(2, 2) == 4\n", 1.0,
     [("line 2: assert plus(2, 2) == 4", True)]),
    ("main-block-skipped", ADD + "if __name__ == '__main__':\n    raise SystemExit(3)\n", "assert add(1, 1) == 2\n", 1.0,
     [("line 1: assert add(1, 1) == 2", True)]),
    ("system-exit-in-test-fails-it", ADD, "assert add(1, 1) == 2\nassert exit(0)\n", 0.5,
     [("line 1: assert add(1, 1) == 2", True), ("line 2: assert exit(0)", False)]),
    ("decorated-test-function", ADD,
     "import functools\n\n@functools.lru_cache\ndef test_cached():\n    assert add(1, 1) == 2\n", 1.0, [("test_cached()", True)]),
    ("one-line-statements", ADD, "x = add(1, 1); assert x == 2\nassert (x ==\n        2)\n", 1.0,
     [("line 1: assert x == 2", True), ("line 2: assert (x == 2)", True)]),
    ("async-test-function", ADD, "import asyncio\nasync def test_a():\n    await asyncio.sleep(0)\n    assert add(1, 1) == 2\n",
     1.0, [("test_a()", True)]),
]


@pytest.mark.parametrize(("candidate", "tests", "reward", "outcomes"), [c[1:] for c in SCORES], ids=[c[0] for c in SCORES])
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
    ("syntax-error", "def add(a, b) return a", "the candidate code does not compile: SyntaxError: expected ':' (solution.py, line 1)"),
    ("raises-on-import", "raise ValueError('nope')", "the candidate code raised ValueError: nope"),
    ("exits-before-reporting", "import os\nos._exit(0)", "the test runner exited (status 0) before reporting every test"),
]


@pytest.mark.parametrize(("candidate", "reason"), [c[1:] for c in CANDIDATE_FAILURES], ids=[c[0] for c in CANDIDATE_FAILURES])
def test_candidate_failures_score_zero(candidate: str, reason: str) -> None:
    result = run(candidate, "assert True\n")
    assert (result.reward, result.error, result.info["reason"]) == (0.0, None, reason)


TEST_ERRORS = [
    ("does-not-compile", "assert add(1,\n",
     "task 't1' field 'tests': the tests do not compile: '(' was never closed (tests.py, line 1)"),
    ("empty", "\n# nothing\n", "task 't1' field 'tests' holds no tests"),
    ("not-text", 3, "task 't1' field 'tests' must be Python test code, got int"),
]


@pytest.mark.parametrize(("tests", "message"), [c[1:] for c in TEST_ERRORS], ids=[c[0] for c in TEST_ERRORS])
def test_broken_tests_are_verifier_errors(tests: Any, message: str) -> None:
    t = Task(id="t1", split="dev", data={"id": "t1", "tests": tests})
    with pytest.raises(VerifierError) as e:
        verifier().score(t, Trajectory.of(ADD))
    assert e.value.message == message


# --- limits ------------------------------------------------------------------------------


def test_infinite_loop_is_killed_at_the_timeout() -> None:
    start = time.perf_counter()
    result = run("while True:\n    pass\n", "assert True\n", timeout_s=1.0)
    elapsed = time.perf_counter() - start
    assert (result.reward, result.info["timed_out"], result.info["killed_by"]) == (0.0, True, "timeout")
    assert result.info["reason"] == "the run exceeded its time limit"
    assert 1.0 <= elapsed < 3.0


def test_sleeping_grandchild_does_not_outlive_the_timeout() -> None:
    # The whole process group is killed: a thread or a blocked call cannot hold the run open.
    start = time.perf_counter()
    result = run("import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\ntime.sleep(60)\n",
                 "assert True\n", timeout_s=1.0)
    assert result.info["killed_by"] == "timeout"
    assert time.perf_counter() - start < 3.0


def test_unbounded_allocation_is_stopped_by_the_memory_limit() -> None:
    result = run("blocks = []\nwhile True:\n    blocks.append(bytearray(10**7))\n", "assert True\n", timeout_s=5.0, memory_mb=200)
    assert (result.reward, result.info["killed_by"], result.info["timed_out"]) == (0.0, "memory", False)
    assert result.info["reason"] == "the run exceeded its memory limit"


def test_memory_blowup_inside_a_test_scores_zero() -> None:
    result = run(ADD, "assert add(1, 1) == 2\nx = 'a' * (10**10)\nassert True\n", memory_mb=200)
    assert (result.reward, result.info["killed_by"]) == (0.0, "memory")


@pytest.mark.parametrize("isolate", [True, False], ids=["os-layers", "audit-hook-only"])
def test_write_outside_the_work_dir_is_refused(tmp_path: Path, isolate: bool) -> None:
    outside = tmp_path / "escaped.txt"
    candidate = f"""
        import os, shutil
        results = {{}}
        for name, attempt in [
            ("open", lambda: open({str(outside)!r}, "w").write("x")),
            ("os.open", lambda: os.open({str(outside)!r}, os.O_WRONLY | os.O_CREAT)),
            ("relative", lambda: open("../../" + os.path.basename(os.path.dirname({str(outside)!r})) + "/escaped.txt", "w")),
            ("mkdir", lambda: os.mkdir({str(tmp_path / 'dir')!r})),
            ("rename-out", lambda: (open("inside.txt", "w").close(), os.rename("inside.txt", {str(outside)!r}))),
            ("symlink-then-write", lambda: (os.symlink({str(outside)!r}, "link"), open("link", "w"))),
            ("rmtree", lambda: shutil.rmtree({str(tmp_path)!r})),
        ]:
            try:
                attempt()
                results[name] = "allowed"
            except PermissionError as e:
                results[name] = "refused"
            except OSError as e:
                results[name] = "refused"
    """
    result = run(candidate, "assert all(v == 'refused' for v in results.values()), results\n", isolate=isolate)
    assert result.reward == 1.0, result.info
    assert not outside.exists()
    assert not (tmp_path / "dir").exists()
    assert tmp_path.exists()


def test_writes_inside_the_work_dir_work_and_are_removed() -> None:
    candidate = """
        import os, tempfile, shutil
        os.makedirs("a/b")
        with open("a/b/f.txt", "w") as f:
            f.write("hello")
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("tmp")
        shutil.rmtree("a/b")
        os.chmod(".", 0o500)  # a read-only directory must not stop the clean-up
        WORK = os.getcwd()
        print(WORK)
    """
    result = run(candidate, "import os\nassert os.environ['HOME'] == WORK == os.environ['TMPDIR']\n")
    assert result.reward == 1.0, result.info
    workdir = Path(result.info["stdout_tail"].strip())
    assert workdir.name == "work" and not workdir.parent.exists()


@pytest.mark.parametrize("isolate", [True, False], ids=["os-layers", "audit-hook-only"])
def test_network_connection_is_refused(isolate: bool) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.3)
        port = server.getsockname()[1]
        candidate = f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=1).sendall(b"leak")
                OUTCOME = "connected"
            except OSError as e:
                OUTCOME = type(e).__name__
        """
        result = run(candidate, "assert OUTCOME != 'connected', OUTCOME\n", isolate=isolate)
        with pytest.raises(TimeoutError):
            server.accept()
    assert result.reward == 1.0, result.info


@pytest.mark.skipif(not LINUX, reason="network namespaces are Linux only")
def test_network_namespace_blocks_below_the_audit_hook() -> None:
    result = run(ADD, "assert True\n")
    isolation = result.info["isolation"]
    assert isolation[-2:] == ["rlimits", "audit-hook"]
    if "network-namespace" not in isolation:
        pytest.skip("this kernel refuses unprivileged network namespaces")
    # In the namespace, the interfaces are gone: only a down loopback is left.
    result = run("import socket\nNAMES = [n for _, n in socket.if_nameindex()]\n", "assert NAMES == ['lo'], NAMES\n")
    assert result.reward == 1.0, result.info


def test_secrets_in_the_environment_are_not_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    candidate = "import os\nENV = dict(os.environ)\n"
    tests = "assert not {'OPENAI_API_KEY', 'HF_TOKEN', 'AWS_SECRET_ACCESS_KEY'} & set(ENV), sorted(ENV)\n" \
            "assert 'secret' not in repr(ENV)\n"
    assert run(candidate, tests).reward == 1.0


REFUSED = [
    ("subprocess", "import subprocess\nsubprocess.run(['true'])"),
    ("os-system", "import os\nos.system('true')"),
    ("fork", "import os\nos.fork()"),
    ("ctypes", "import ctypes\nctypes.CDLL(None).getpid()"),
    ("raise-own-limit", "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))"),
    ("kill-parent", "import os, signal\nos.kill(os.getppid(), signal.SIGTERM)"),
]


@pytest.mark.parametrize("attempt", [c[1] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_escapes_are_refused(attempt: str) -> None:
    tests = f"try:\n" + textwrap.indent(attempt, "    ") + "\n    OK = False\nexcept (PermissionError, OSError, ValueError):\n    OK = True\nassert OK\n"
    assert run(ADD, tests).reward == 1.0


def test_forged_reports_are_ignored() -> None:
    candidate = """
        import os
        forged = b'{"event": "test", "name": "forged", "passed": true}\\n{"event": "done"}\\n'
        for fd in range(3, 20):
            try:
                os.write(fd, forged)
            except OSError:
                pass
    """
    result = run(candidate, "assert False\n")
    assert result.reward == 0.0
    assert [t["name"] for t in result.info["tests"]] == ["line 1: assert False"]


def test_output_tails_are_kept() -> None:
    result = run("import sys\nprint('x' * 5000 + 'END')\nprint('oops', file=sys.stderr)\n", "assert True\n")
    assert result.info["stdout_tail"].endswith("END\n") and len(result.info["stdout_tail"]) == 2000
    assert result.info["stderr_tail"] == "oops\n"


def test_ascore_matches_score_and_runs_concurrently() -> None:
    v = verifier(timeout_s=5.0)
    t = Task(id="t1", split="dev", data={"id": "t1", "tests": "import time\ntime.sleep(0.5)\nassert add(1, 2) == 3\n"})

    async def many() -> list[Score]:
        return list(await asyncio.gather(*(v.ascore(t, Trajectory.of(ADD)) for _ in range(4))))

    start = time.perf_counter()
    scores = asyncio.run(many())
    assert time.perf_counter() - start < 1.8  # four 0.5 s runs side by side, not in a row
    assert [s.reward for s in scores] == [1.0] * 4


def test_ascore_timeout() -> None:
    t = Task(id="t1", split="dev", data={"id": "t1", "tests": "assert True\n"})
    result = asyncio.run(verifier(timeout_s=1.0).ascore(t, Trajectory.of("while True: pass")))
    # The CPU limit (1 s, from the timeout) and the wall clock (1 s) race: either stops it.
    assert (result.reward, result.info["killed_by"] in ("timeout", "cpu")) == (0.0, True)


def test_sandbox_limits_cpu_follows_timeout() -> None:
    assert [SandboxLimits(timeout_s=t).cpu_s for t in (0.2, 1.0, 2.5)] == [1, 1, 3]
    plain = run_python_tests(ADD, "assert add(2, 2) == 4\n", SandboxLimits(timeout_s=5))
    assert plain.completed and plain.tests[0].passed and plain.returncode == 0
