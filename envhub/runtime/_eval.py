"""An evaluation run: which rollouts to play, the JSONL file they go to, and the summary.

The output file is append-only, one record per line, flushed as each rollout finishes.
``resume`` reads what is already there, skips those rollouts, and drops a torn last line
left by a killed run; it refuses a file that holds another environment's, version's,
split's or policy's rollouts, so two runs never mix in one file.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from envhub.errors import UsageError
from envhub.runtime._runner import Executor, RolloutJob, RolloutPlan, make_executor, rollout_seed
from envhub.runtime._types import Task

__all__ = ["EvalRun", "pass_at_k", "plan_jobs", "read_records", "summarize"]

#: Record fields that must agree between a file and the run resuming it.
_IDENTITY = ("env", "version", "digest", "split", "policy")


def plan_jobs(tasks: Sequence[Task], rollouts_per_task: int, run_seed: int | None) -> list[RolloutJob]:
    """Every (task, rollout) pair, task by task."""
    return [RolloutJob(task, k, rollout_seed(run_seed, task.id, k)) for task in tasks for k in range(rollouts_per_task)]


def read_records(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """The records of a JSONL output file. A torn last line (no newline: the writer was
    killed mid-line) is dropped, and with ``repair`` cut from the file. Raises
    :class:`UsageError` for a line in the middle that is not a JSON object."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    end = len(data) if data.endswith(b"\n") or not data else data.rfind(b"\n") + 1
    if repair and end != len(data):
        with path.open("r+b") as f:
            f.truncate(end)
    records = []
    for number, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise UsageError(f"{path}: line {number} is not a rollout record ({e})",
                             hint="pass a new -o file, or remove the broken line") from None
        if not isinstance(record, dict):
            raise UsageError(f"{path}: line {number} is not a rollout record (not a JSON object)",
                             hint="pass a new -o file")
        records.append(record)
    return records


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` rollouts of which ``c`` succeeded:
    1 - C(n-c, k) / C(n, k) (Chen et al., 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} rollouts per task, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def summarize(records: Iterable[dict[str, Any]], *, success_threshold: float = 1.0) -> dict[str, Any]:
    """Mean reward, pass@k (k = 1, 2, 4, ... up to the rollouts per task), per-criterion
    means, and the errors, over ``records``."""
    records = list(records)
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    criteria: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    for r in records:
        by_task[r["task_id"]].append(r)
        for name, value in (r.get("breakdown") or {}).items():
            criteria[name].append(float(value))
        if r.get("error"):
            errors[str(r["error"]).split(":", 1)[0]] += 1
    rewards = [float(r["reward"]) for r in records]
    summary: dict[str, Any] = {
        "rollouts": len(records),
        "tasks": len(by_task),
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "success_threshold": success_threshold,
        "success_rate": (sum(x >= success_threshold for x in rewards) / len(rewards)) if rewards else None,
        "pass_at_k": {},
        "criteria": {name: sum(v) / len(v) for name, v in sorted(criteria.items())},
        "errors": sum(errors.values()),
        "errors_by_kind": dict(sorted(errors.items())),
    }
    if by_task:
        n_min = min(len(v) for v in by_task.values())
        k = 1
        while k <= n_min:
            scores = [pass_at_k(len(v), sum(float(r["reward"]) >= success_threshold for r in v), k)
                      for v in by_task.values()]
            summary["pass_at_k"][str(k)] = sum(scores) / len(scores)
            k *= 2
        if n_min > 1 and str(n_min) not in summary["pass_at_k"]:
            scores = [pass_at_k(len(v), sum(float(r["reward"]) >= success_threshold for r in v), n_min)
                      for v in by_task.values()]
            summary["pass_at_k"][str(n_min)] = sum(scores) / len(scores)
    if records:
        first = records[0]
        summary["environment"] = {key: first.get(key) for key in ("env", "version", "digest", "score_version")}
        summary["split"] = first.get("split")
        summary["policy"] = first.get("policy")
    return summary


@dataclass
class EvalRun:
    """One ``envhub eval``: plays ``jobs`` not already in ``out`` and appends their records."""

    plan: RolloutPlan
    jobs: list[RolloutJob]
    out: Path
    resume: bool = False
    executor: Executor | None = None

    def prepare(self) -> list[RolloutJob]:
        """The jobs still to run. Raises :class:`UsageError` if ``out`` exists and is not
        being resumed, or holds another run's rollouts."""
        if self.out.exists() and self.out.stat().st_size and not self.resume:
            raise UsageError(f"{self.out} already holds rollouts",
                             hint="pass --resume to continue that run, or choose another file with -o")
        if not self.resume:
            return self.jobs
        done = set()
        for record in read_records(self.out, repair=True):
            for key in _IDENTITY:
                if record.get(key) != self.plan.provenance.get(key):
                    raise UsageError(
                        f"{self.out} holds rollouts of another run ({key} {record.get(key)!r}, "
                        f"this run has {self.plan.provenance.get(key)!r})",
                        hint="resume with the same environment, version, split and policy, or choose another -o")
            done.add((record.get("task_id"), record.get("rollout")))
        return [job for job in self.jobs if (job.task.id, job.rollout) not in done]

    async def run(self, todo: list[RolloutJob], on_record: Callable[[dict[str, Any]], None] | None = None) -> int:
        """Run ``todo``, appending each record to ``out`` as it finishes; returns how many ran."""
        executor = self.executor or make_executor("local")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        count = 0
        # O_APPEND: a record is written with one write() call, so lines never interleave.
        fd = os.open(self.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            async for record in executor.run(self.plan, todo):
                os.write(fd, orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE, default=str))
                count += 1
                if on_record is not None:
                    on_record(record)
        finally:
            os.close(fd)
        return count
