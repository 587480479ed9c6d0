"""``workspace-tests``: the task's tests, run against a sandbox episode's final workspace.

After the episode, the workspace's final tree is exported and seeds a *fresh* sandbox that
the agent never had. The task's tests, from the bundle, are put read-only at ``/tests`` of
that sandbox only; they are never in the agent's workspace. ``command`` runs there, in
``/workspace``, and this process reads its result:

- lines ``PASS name`` / ``FAIL name`` (also ``PASS: name``, ``FAILED name``, ``ok name``,
  ``not ok name``) on the command's output: one test each; a name reported failing anywhere
  fails, however often it is also reported passing;
- else a JUnit XML file the command wrote at ``$ENVHUB_JUNIT``;
- else the exit code alone: 0 passes.

The tests a task has are the names its tests report when run, the same way, on the task's
*starting* workspace (built as an episode's is, setup included; learnt once per task). The
reward is the fraction of those that pass; the breakdown has each, 1 or 0. A name the run
does not report fails; a name the starting workspace's run did not report is not counted (the
code under test can write to the runner's output, so it could otherwise add passing tests of
its own); a run ended by a limit or a signal scores 0. When the tests report no names, the
exit code decides. Nothing the agent leaves in the workspace (a ``reward.txt``, edited copies
of tests it saw, lines it printed during the episode) is read.

The tests of a task are the regular files at the top of ``tests-directory`` (shared by every
task: a runner script), overlaid with the task's own: the directory
``tests-directory/NAME`` (NAME is the task's ``tests-field``, or its id without one), or the
files the ``tests-field`` holds inline, ``{"relative/path": "text"}``.
"""

from __future__ import annotations

import asyncio
import math
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from envhub.runtime._types import Score, Task, Trajectory
from envhub.runtime.verifiers._base import ScoringContext, Verifier, VerifierContext, VerifierError, task_value

__all__ = ["JUNIT_PATH", "TestReport", "WorkspaceTestsVerifier", "parse_junit", "parse_test_output"]

#: Where the test command may write JUnit XML (``$ENVHUB_JUNIT``): the fresh sandbox's private /tmp.
JUNIT_PATH = "/tmp/envhub-junit.xml"
#: Output of the test run read by the verifier (the agent's limit is far lower).
_OUTPUT_BYTES = 4 * 1024 * 1024
# A test's name starts with a letter, digit, "_", ".", "/", "[" or "(": a stray line such as
# "ok = check()" on the runner's stderr is not a test.
_LINE = re.compile(r"^\s*(PASS(?:ED)?|FAIL(?:ED)?|ok|not ok)\b[:\s-]*\s*(?:\d+\s+-\s+)?([\w./\[(].*?)\s*$")


class TestReport:
    """The tests one run reported, in order: name -> passed."""

    __test__ = False  # not a pytest class

    def __init__(self) -> None:
        self.results: dict[str, bool] = {}

    def add(self, name: str, passed: bool) -> None:
        name = name or f"test-{len(self.results) + 1}"
        # A test reported failing anywhere fails: a line printed by the code under test
        # cannot turn a failure into a pass.
        self.results[name] = self.results.get(name, True) and passed


def parse_test_output(output: str) -> TestReport:
    """The ``PASS name`` / ``FAIL name`` lines of ``output``.

    >>> parse_test_output("PASS a\\nFAIL: b\\nnoise\\nok 3 - c\\nPASS b").results
    {'a': True, 'b': False, 'c': True}
    """
    report = TestReport()
    for line in output.splitlines():
        match = _LINE.match(line)
        if match:
            word = match.group(1)
            report.add(match.group(2), word.startswith("PASS") or word == "ok")
    return report


def parse_junit(text: str) -> TestReport:
    """The test cases of a JUnit XML document (a testcase with a failure, error or skipped
    child fails)."""
    report = TestReport()
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return report
    for case in root.iter("testcase"):
        name = ".".join(p for p in (case.get("classname"), case.get("name")) if p)
        report.add(name, not any(child.tag in ("failure", "error", "skipped") for child in case))
    return report


class WorkspaceTestsVerifier(Verifier):
    """See the module."""

    kind = "workspace-tests"

    def __init__(self, spec: Any, ctx: VerifierContext) -> None:
        self.spec = spec
        self.root = ctx.root
        self.state_spec = ctx.state
        self.plugins = ctx.plugins
        if self.state_spec is None or getattr(self.state_spec, "kind", None) != "sandbox":
            raise VerifierError("verifier kind 'workspace-tests' needs state kind 'sandbox'",
                                hint="set [state] kind = 'sandbox'")
        #: The names of each task's tests, learnt from its starting workspace (:meth:`_expected`).
        self._names: dict[tuple[str, str], frozenset[str]] = {}
        self.tests_root = ctx.root / spec.tests_directory
        if not self.tests_root.is_dir():
            raise VerifierError(f"the tests directory {spec.tests_directory} is not a directory of the bundle",
                                hint="create it, or set tests-directory in [verifier]")

    def tests_for(self, task: Task, directory: Path) -> None:
        """Put ``task``'s tests in ``directory``: the shared files, then the task's own."""
        from envhub.runtime._workspace_state import SandboxSetupError, write_files

        for path in sorted(self.tests_root.iterdir()):
            if path.is_file() and not path.is_symlink():
                shutil.copy2(path, directory / path.name)
        field = self.spec.tests_field
        value: Any = task.id if field is None else task_value(task, field, self.kind)
        if isinstance(value, str):
            if not value or "/" in value or value in (".", "..") or "\0" in value:
                raise VerifierError(f"task {task.id!r}: {value!r} does not name a directory of "
                                    f"{self.spec.tests_directory}")
            source = self.tests_root / value
            if not source.is_dir():
                raise VerifierError(f"task {task.id!r}: its tests {self.spec.tests_directory}/{value} are not a "
                                    "directory of the bundle",
                                    hint="create it, or give the task its tests inline in its tests-field")
            shutil.copytree(source, directory, dirs_exist_ok=True, symlinks=False)
            return
        try:
            write_files(directory, value, f"task {task.id!r} field {field!r}")
        except SandboxSetupError as e:
            raise VerifierError(e.message, hint=e.hint) from None

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None,
              context: ScoringContext | None = None) -> Score:
        return asyncio.run(self.ascore(task, trajectory, state=state))

    async def ascore(self, task: Task, trajectory: Trajectory, *, state: Any = None,
                     context: ScoringContext | None = None) -> Score:
        if state is None or not hasattr(state, "export"):
            raise VerifierError("the workspace-tests verifier scores the workspace of a sandbox episode, and got "
                                f"{type(state).__name__}", hint="score an episode of the environment, with its state")
        with tempfile.TemporaryDirectory(prefix="envhub-tests-") as scratch:
            tests, final = Path(scratch) / "tests", Path(scratch) / "final"
            tests.mkdir()
            self.tests_for(task, tests)
            await state.export(final)
            result, report = await self._run(final, tests)
            expected = await self._expected(task, tests, Path(scratch) / "start") if report.results else set()
        info: dict[str, Any] = {"exit_code": result.exit_code, "duration_s": round(result.duration_s, 3)}
        if result.killed_by:
            info["killed_by"] = result.killed_by
        if result.truncated:
            info["output_truncated"] = True
        info["output_tail"] = result.output[-2000:]
        # A run that a limit or a signal ended may not have reported every test, and the code
        # under test may have ended it after printing lines of its own: it scores 0.
        ended = bool(result.killed_by) or result.timed_out or result.exit_code is None or result.exit_code > 128
        results = {name: ok for name, ok in report.results.items() if name in expected}
        unknown = sorted(set(report.results) - expected)
        if unknown:
            info["unknown_tests"] = unknown[:20]
        if expected:
            # The tests a task has are those its tests report on the task's starting workspace;
            # one the run does not report fails.
            breakdown = {name: 1.0 if results.get(name, False) else 0.0 for name in sorted(expected)}
            passed = int(sum(breakdown.values()))
            info.update(tests=len(breakdown), passed=passed)
            return Score(0.0 if ended else passed / len(breakdown), breakdown, info=info)
        ok = result.exit_code == 0 and not ended
        return Score(1.0 if ok else 0.0, {"exit-code": 1.0 if ok else 0.0}, info=info)

    async def _run(self, tree: Path, tests: Path) -> tuple[Any, TestReport]:
        """Run the tests against ``tree`` in a fresh sandbox: (the command's result, its report)."""
        from envhub.runtime._workspace_state import SandboxStateFactory, shell_limits

        spec = self.spec
        limits = shell_limits(self.state_spec, command_timeout_s=spec.timeout_s, output_bytes=_OUTPUT_BYTES,
                              cpu_s=max(self.state_spec.sandbox_limits.cpu_s, math.ceil(spec.timeout_s)))
        factory = SandboxStateFactory(self.state_spec, self.root, plugins=self.plugins)
        workspace = await factory.start(tree, limits=limits, mounts={"/tests": tests})
        try:
            result = await workspace.run(f"export ENVHUB_JUNIT={JUNIT_PATH}\ncd /workspace\n{spec.command}")
            report = parse_test_output(result.output)
            if not report.results:
                junit = await workspace.run(f"cat {JUNIT_PATH} 2>/dev/null")
                if junit.exit_code == 0 and junit.output.strip():
                    report = parse_junit(junit.output)
        finally:
            await workspace.close()
        return result, report

    async def _expected(self, task: Task, tests: Path, scratch: Path) -> set[str]:
        """The names of ``task``'s tests: those they report on its starting workspace (made as
        an episode's is, setup included), where nothing of the agent's can print. Kept per task."""
        from envhub.runtime._workspace_state import SandboxStateFactory

        key = (task.split, task.id)
        names = self._names.get(key)
        if names is None:
            handle = await SandboxStateFactory(self.state_spec, self.root, plugins=self.plugins).anew(task)
            try:
                await handle.value.export(scratch)
            finally:
                await handle.arelease()
            _, report = await self._run(scratch, tests)
            names = self._names[key] = frozenset(report.results)
        return set(names)
