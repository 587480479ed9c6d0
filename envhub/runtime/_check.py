"""``envhub validate --check``: the dynamic self-test of an environment.

For every task of every split whose tasks are present:

- **reference**: a task with a reference (see :meth:`Environment.reference_actions`)
  scores 1.0 when the reference is played;
- **noop**: an empty answer scores below 1.0 (a floor against verifiers that reward
  nothing, the easiest reward hack), or, for a task whose ``expect-noop-field`` is true
  (doing nothing is its correct outcome), exactly 1.0;
- **deterministic**: playing the reference again gives the same reward;
- **raised**: an episode that raises (the responder, the state's setup, a task field that
  is not what ``[harness.task-fields]`` says) is that task's problem (``check-responder``,
  ``check-task-data``, ``check-raised``), and the other tasks are still checked;
- **reset**: for per-episode state, what one episode writes is gone in the next (for state
  kind sandbox, a file written with the built-in bash tool).

Failures are problems naming the split and task id; nothing stops at the first one.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub.errors import TaskDataError
from envhub.problems import Problem
from envhub.runtime._episode import RESPONDER_NOTE
from envhub.runtime._types import Message, Task

if TYPE_CHECKING:
    from envhub.runtime._protocols import EnvironmentProtocol

__all__ = ["CheckResult", "self_test"]

_PROBE = "envhub_reset_probe"


@dataclass
class CheckResult:
    problems: list[Problem] = field(default_factory=list)
    tasks: int = 0
    with_reference: int = 0
    episodes: int = 0


def _play(env: EnvironmentProtocol, task: Task, actions: list[Message]) -> tuple[float, str | None]:
    """Replay ``actions`` (then empty turns) until the episode ends; (reward, error)."""
    with env.episode(task) as episode:
        episode.reset()
        turn = 0
        while True:
            action: Message | str = actions[turn] if turn < len(actions) else ""
            result = episode.step(action)
            turn += 1
            if result.done:
                assert episode.score is not None
                return episode.score.reward, episode.score.error


def _fingerprint(state: Any) -> str | None:
    if isinstance(state, Path):
        digest = hashlib.sha256()
        for path in sorted(state.rglob("*")):
            digest.update(path.relative_to(state).as_posix().encode() + b"\0")
            if path.is_file():
                digest.update(path.read_bytes())
        return digest.hexdigest()
    if isinstance(state, sqlite3.Connection):
        return hashlib.sha256("\n".join(state.iterdump()).encode()).hexdigest()
    return None


def _write_probe(state: Any) -> bool:
    """Write something into the state; False if this kind of state cannot be probed."""
    if isinstance(state, Path):
        (state / f"{_PROBE}.txt").write_text("written by the previous episode\n", encoding="utf-8")
        return True
    if isinstance(state, sqlite3.Connection):
        state.execute(f"CREATE TABLE IF NOT EXISTS {_PROBE} (x)")
        state.commit()
        return True
    return False


def _shell(episode: Any, command: str) -> str:
    """Run ``command`` with the built-in bash tool in ``episode``; what it printed."""
    arguments = json.dumps({"command": command})
    call = {"id": "probe", "type": "function", "function": {"name": "bash", "arguments": arguments}}
    result = episode.step({"role": "assistant", "content": None, "tool_calls": [call]})
    return str((result.info.get("tool_results") or [""])[0])


def _check_sandbox_reset(env: EnvironmentProtocol, task: Task) -> bool:
    """Whether a file one sandbox episode writes is gone in the next (probed with bash)."""
    with env.episode(task) as first:
        first.reset()
        _shell(first, f"echo written by the previous episode > {_PROBE}.txt")
    with env.episode(task) as second:
        second.reset()
        return _shell(second, f"test -e {_PROBE}.txt && echo present || echo absent").startswith("absent")


def _check_reset(env: EnvironmentProtocol, task: Task, manifest_file: str) -> list[Problem]:
    if env.manifest.state.kind == "none" or env.manifest.state.reset != "per-episode":
        return []
    if env.manifest.state.kind == "sandbox":
        if "bash" not in env.manifest.harness.builtin_tools or _check_sandbox_reset(env, task):
            return []
        return [Problem("error", "check-reset",
                        f"{task.split}/{task.id}: an episode's writes reached the next episode's workspace",
                        file=manifest_file, field="state", hint="this is a bug of the sandbox state kind")]
    with env.episode(task) as first:
        first.reset()
        before = _fingerprint(first.state)
        probed = _write_probe(first.state)
    with env.episode(task) as second:
        second.reset()
        after = _fingerprint(second.state)
    if probed and before != after:
        return [Problem("error", "check-reset",
                        f"{task.split}/{task.id}: an episode's writes reached the next episode's state",
                        file=manifest_file, field="state",
                        hint="state must be copied fresh for every episode (reset = \"per-episode\")")]
    return []


#: Tasks checked per generator split when no limit is given (the first ones of its range).
GENERATED_CHECK_LIMIT = 200


def self_test(env: EnvironmentProtocol, *, splits: Iterable[str] | None = None, limit: int | None = None,
              manifest_file: str = "envhub.toml") -> CheckResult:
    """Run the self-test on ``splits`` (default: every split whose tasks are present),
    at most ``limit`` tasks per split (a generator split: at most
    :data:`GENERATED_CHECK_LIMIT` when ``limit`` is None)."""
    result = CheckResult()
    names = list(splits) if splits is not None else [n for n, s in env.splits.items() if s.available]
    reset_checked = False

    def problem(code: str, message: str, hint: str) -> None:
        result.problems.append(Problem("error", code, message, file=manifest_file, field="verifier", hint=hint))

    # (reward, error with the task's id blanked) -> (task, error) of each task whose reference
    # failed so: one cause (a judge with no endpoint, a missing key) is reported once, with
    # its count, not once per task.
    failed: dict[tuple[float, str], list[tuple[str, str]]] = {}

    for name in names:
        # A generator split may hold a billion seeds: check a sample of its first tasks.
        cap = limit if limit is not None or not env.splits[name].generated else GENERATED_CHECK_LIMIT
        for task in env.tasks(name, limit=cap):
            result.tasks += 1
            where = f"{name}/{task.id}"
            try:
                _check_task(env, task, where, result, problem, failed)
            except Exception as e:  # the bundle's code raised: this task's problem, the others go on
                result.problems.append(_raised(e, where, manifest_file))
                continue
            if not reset_checked:
                result.problems.extend(_check_reset(env, task, manifest_file))
                reset_checked = True
    _report_failed(failed, problem)
    if result.tasks and not result.with_reference:
        result.problems.append(Problem(
            "warning", "check-no-reference", "no task has a reference answer, so the verifier was not checked "
            "against a correct one", file=manifest_file, field="tasks",
            hint="give tasks the verifier's answer field, a 'solution' (code tests) or a 'reference'"))
    return result


def _check_task(env: EnvironmentProtocol, task: Task, where: str, result: CheckResult,
                problem: Callable[[str, str, str], None],
                failed: dict[tuple[float, str], list[tuple[str, str]]]) -> None:
    """The reference, determinism and noop checks of one task."""
    try:
        reference = env.reference_actions(task)
    except Exception as e:  # a verifier kind's reference(task) (a plugin's) raised: this task's problem
        problem("check-reference", f"{where}: the reference could not be made: {type(e).__name__}: {e}",
                "fix the verifier kind's reference(task), or give the task a 'reference' field")
        reference = []
    if reference:
        result.with_reference += 1
        reward, error = _play(env, task, reference)
        again, _ = _play(env, task, reference)
        result.episodes += 2
        if reward != 1.0 and error:
            failed.setdefault((reward, error.replace(task.id, "\0")), []).append((where, error))
        elif reward != 1.0:
            problem("check-reference", f"{where}: the reference scores {reward:g}, not 1.0",
                    "fix the task's reference answer or the verifier")
        if again != reward:
            problem("check-deterministic",
                    f"{where}: scoring the same answer twice gave {reward:g} then {again:g}",
                    "make the verifier deterministic (seed any randomness)")
    noop, _ = _play(env, task, [])
    result.episodes += 1
    noop_field = env.manifest.tasks.expect_noop_field
    if noop_field is not None and task.data.get(noop_field) is True:
        # Doing nothing is this task's correct outcome (a request to refuse, a trap not to touch).
        if noop < 1.0:
            problem("check-noop", f"{where}: the task expects doing nothing ({noop_field} = true), but an empty "
                                  f"answer scores {noop:g}", "fix the verifier, or the task's " + noop_field)
    elif noop >= 1.0:
        problem("check-noop", f"{where}: an empty answer scores {noop:g}",
                "the verifier rewards doing nothing: check its field and normalisation"
                + ("" if noop_field is None else f"; if doing nothing is correct here, set {noop_field} = true"))


def _report_failed(failed: dict[tuple[float, str], list[tuple[str, str]]],
                   problem: Callable[[str, str, str], None]) -> None:
    for (reward, _), failures in failed.items():
        failed_at = [w for w, _ in failures]
        tasks = failed_at[0] if len(failed_at) == 1 else f"{len(failed_at)} tasks ({_first_few(failed_at)})"
        problem("check-reference", f"{tasks}: the reference scores {reward:g}, not 1.0 ({failures[0][1]})",
                "fix the task's reference answer or the verifier")


def _raised(e: Exception, where: str, manifest_file: str) -> Problem:
    """The problem of a task whose episode raised (the responder, the state's setup, ...)."""
    notes = [n for n in getattr(e, "__notes__", ()) if n.startswith(RESPONDER_NOTE)]
    what = f"{type(e).__name__}: {e}"
    if isinstance(e, TaskDataError):
        return Problem("error", "check-task-data", f"{where}: {e.message}", file=manifest_file,
                       field="harness.task-fields",
                       hint=e.hint or "fix the task's row, or the field the manifest names")
    if notes:
        entry = notes[0][len(RESPONDER_NOTE):].strip() or "the responder"
        return Problem("error", "check-responder", f"{where}: the responder {entry} raised {what}",
                       file=manifest_file, field="harness.responder",
                       hint="fix the responder: for every turn it must return the next user message (a "
                            "string or a Reply) or None to end the episode, and not raise")
    return Problem("error", "check-raised", f"{where}: playing the task raised {what}", file=manifest_file,
                   hint="fix the environment's code for this task (its state's setup, its tools or its verifier)")


def _first_few(names: list[str], shown: int = 3) -> str:
    """``a, b, c and 4 more``: which tasks, without a line as long as the split."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
