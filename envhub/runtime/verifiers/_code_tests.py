"""``code-tests``: the task's tests run against the completion's code in a sandbox.

The reward is the fraction of tests that pass. Partial credit, rather than all-or-nothing,
gives a learning signal on problems where most candidates pass some tests; an evaluator that
wants pass/fail gets it from a rubric criterion with ``required = true``, or by thresholding
``breakdown["tests_passed"]``. A run that times out, exceeds its memory, dies, or whose code
does not compile or raises on import scores 0: a partial report from a killed run depends on
timing, and scoring the same input twice must give the same reward.
"""

from __future__ import annotations

import ast
import re
import sys
from typing import Any

from envhub.runtime._types import Score, Task, Trajectory
from envhub.runtime.verifiers._base import Verifier, VerifierError, task_value
from envhub.runtime.verifiers._sandbox import SandboxLimits, SandboxResult, arun_python_tests, run_python_tests

__all__ = ["CodeTestsVerifier", "extract_code"]

# A fence, its language tag, and its body up to the closing fence (or the end of a
# completion cut off mid-block).
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```|\Z)", re.DOTALL | re.MULTILINE)
_PYTHON_TAGS = frozenset({"python", "py", "python3"})


def extract_code(completion: str) -> str:
    """The candidate program in a completion: the last fenced block tagged ``python`` (or
    ``py``, ``python3``); else the last untagged fenced block; else the whole completion.
    Blocks tagged with another language (```bash) are never taken for the program."""
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(completion)]
    for wanted in (_PYTHON_TAGS, frozenset({""})):
        for tag, body in reversed(blocks):
            if tag in wanted:
                return body
    return completion


def check_tests(source: Any, task: Task, field: str) -> str:
    """``source`` when it is Python test code with at least one statement.

    Raises :class:`VerifierError` naming the task and field when it is not a string, does
    not compile, or is empty: broken tests are the environment's bug, not the candidate's.
    """
    if not isinstance(source, str):
        raise VerifierError(f"task {task.id!r} field {field!r} must be Python test code, got {type(source).__name__}")
    try:
        module = ast.parse(source, "tests.py")
        compile(module, "tests.py", "exec")
    except (SyntaxError, ValueError) as e:
        raise VerifierError(f"task {task.id!r} field {field!r}: the tests do not compile: {e}") from e
    if not module.body:
        raise VerifierError(f"task {task.id!r} field {field!r} holds no tests")
    return source


class CodeTestsVerifier(Verifier):
    """Runs ``task[tests-field]`` against the completion's code (see :func:`extract_code`).

    ``score`` raises :class:`MissingFieldError` or :class:`VerifierError` (tests that do not
    compile); everything the candidate does, including hanging or crashing, is a score.
    """

    kind = "code-tests"

    def __init__(self, spec: Any, *, isolate: bool = True) -> None:
        if spec.language != "python":
            raise VerifierError(f"code-tests supports language 'python' only, not {spec.language!r}")
        self.tests_field: str = spec.tests_field
        self.limits = SandboxLimits(timeout_s=spec.timeout_s, memory_mb=spec.memory_mb)
        self.isolate = isolate

    def _inputs(self, task: Task, trajectory: Trajectory) -> tuple[str, str]:
        tests = check_tests(task_value(task, self.tests_field, self.kind), task, self.tests_field)
        return extract_code(trajectory.completion), tests

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:
        candidate, tests = self._inputs(task, trajectory)
        return _to_score(run_python_tests(candidate, tests, self.limits, isolate=self.isolate))

    async def ascore(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:
        candidate, tests = self._inputs(task, trajectory)
        return _to_score(await arun_python_tests(candidate, tests, self.limits, isolate=self.isolate))


def _to_score(result: SandboxResult) -> Score:
    total = len(result.tests)
    passed = sum(t.passed for t in result.tests)
    info: dict[str, Any] = {
        "tests": [{"name": t.name, "passed": t.passed, **({"error": t.error} if t.error else {})} for t in result.tests],
        "timed_out": result.timed_out,
        "killed_by": result.killed_by,
        "returncode": result.returncode,
        "stdout_tail": result.stdout_tail,
        "stderr_tail": result.stderr_tail,
        "duration_s": result.duration_s,
        "isolation": list(result.isolation),
        "platform": sys.platform,
    }
    reason = None
    if result.candidate_error:
        reason = result.candidate_error
    elif result.killed_by:
        reason = {
            "timeout": "the run exceeded its time limit",
            "memory": "the run exceeded its memory limit",
            "cpu": "the run exceeded its CPU-time limit",
            "file-size": "the run wrote a file larger than its limit",
        }.get(result.killed_by, f"the run was killed by {result.killed_by}")
    elif not result.completed:
        reason = f"the test runner exited (status {result.returncode}) before reporting every test"
    if reason:
        info["reason"] = reason
        return Score(0.0, {"tests_passed": 0.0}, info=info)
    fraction = passed / total if total else 0.0
    return Score(fraction, {"tests_passed": fraction}, info=info)
