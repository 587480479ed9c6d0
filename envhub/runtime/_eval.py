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
from envhub.runtime._curriculum import Curriculum, Draw
from envhub.runtime._runner import Executor, RolloutJob, RolloutPlan, make_executor, rollout_seed
from envhub.runtime._types import Task

__all__ = ["CurriculumRun", "EvalRun", "pass_at_k", "plan_jobs", "read_records", "summarize"]

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
    steps = sorted((r["curriculum"] for r in records if isinstance(r.get("curriculum"), dict)),
                   key=lambda c: c.get("step", 0))
    if steps:
        per_level: dict[str, int] = defaultdict(int)
        for info in steps:
            per_level[str(info.get("level"))] += 1
        summary["curriculum"] = {"strategy": steps[-1].get("strategy"), "draws": len(steps),
                                 "last_level": steps[-1].get("level"),
                                 "highest_level": max(steps, key=lambda c: c.get("level_index", -1)).get("level"),
                                 "draws_per_level": dict(per_level)}
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
        done = {(r.get("task_id"), r.get("rollout")) for r in _previous_records(self.plan, self.out, self.resume)}
        return [job for job in self.jobs if (job.task.id, job.rollout) not in done]

    async def run(self, todo: list[RolloutJob], on_record: Callable[[dict[str, Any]], None] | None = None) -> int:
        """Run ``todo``, appending each record to ``out`` as it finishes; returns how many ran."""
        return await _append_records(self.plan, todo, self.out, self.executor, on_record)


@dataclass
class CurriculumRun:
    """An ``envhub eval --curriculum`` run: ``total`` draws of ``curriculum``, played a batch of
    ``plan.concurrency`` at a time. Each batch is drawn at the curriculum's current level, and
    its outcomes are counted in draw order once the whole batch is back, so a run's draws
    depend on its seed and batch size, not on which rollout finished first, and a resumed
    run replays the file to the same place."""

    plan: RolloutPlan
    curriculum: Curriculum
    total: int
    out: Path
    resume: bool = False
    executor: Executor | None = None
    run_seed: int | None = None

    def __post_init__(self) -> None:
        self._next_step = 0
        #: A batch a killed run left half done: its draws, and the rewards already recorded.
        self._carry: tuple[list[Draw], dict[int, float]] | None = None

    @property
    def batch(self) -> int:
        return max(1, self.plan.concurrency)

    def prepare(self) -> int:
        """Replay a resumed run's records into the curriculum; returns how many draws are
        still to run. Raises :class:`UsageError` if ``out`` holds another run's rollouts, or
        rollouts this curriculum would not have drawn (another seed or batch size)."""
        by_step: dict[int, dict[str, Any]] = {}
        for record in _previous_records(self.plan, self.out, self.resume):
            info = record.get("curriculum")
            if not isinstance(info, dict) or info.get("batch") != self.batch:
                raise UsageError(f"{self.out} holds rollouts of another run (not a curriculum run with batches of "
                                 f"{self.batch})", hint="resume with the same --concurrency, or choose another -o")
            by_step[int(info["step"])] = record
        while self._next_step < self.total and by_step:
            draws = self._draw()
            for draw in draws:
                record = by_step.get(draw.step)
                if record is not None and record.get("task_id") != draw.task.id:
                    raise UsageError(f"{self.out}: draw {draw.step} was task {record.get('task_id')!r}, but this "
                                     f"curriculum draws {draw.task.id!r} there",
                                     hint="resume with the same --seed and --concurrency, or choose another -o")
            known = {d.step: float(by_step.pop(d.step)["reward"]) for d in draws if d.step in by_step}
            if len(known) < len(draws):
                self._carry = (draws, known)
                break
            self._update(draws, known)
        return self.total - self._next_step + (len(self._carry[0]) - len(self._carry[1]) if self._carry else 0)

    async def run(self, on_record: Callable[[dict[str, Any]], None] | None = None) -> int:
        """Play the remaining draws, appending each record to ``out``; returns how many ran."""
        count = 0
        while self._carry is not None or self._next_step < self.total:
            draws, rewards = self._carry or (self._draw(), {})
            self._carry = None
            jobs = [self._job(d) for d in draws if d.step not in rewards]

            def collect(record: dict[str, Any]) -> None:
                rewards[int(record["curriculum"]["step"])] = float(record["reward"])
                if on_record is not None:
                    on_record(record)

            count += await _append_records(self.plan, jobs, self.out, self.executor, collect)
            self._update(draws, rewards)
        return count

    def _draw(self) -> list[Draw]:
        size = min(self.batch, self.total - self._next_step)
        self._next_step += size
        return [self.curriculum.next() for _ in range(size)]

    def _update(self, draws: list[Draw], rewards: dict[int, float]) -> None:
        for draw in draws:
            self.curriculum.update(draw, rewards[draw.step])

    def _job(self, draw: Draw) -> RolloutJob:
        info = {**draw.as_record(self.curriculum), "batch": self.batch}
        return RolloutJob(draw.task, draw.step, rollout_seed(self.run_seed, draw.task.id, draw.step), info)


def _previous_records(plan: RolloutPlan, out: Path, resume: bool) -> list[dict[str, Any]]:
    """The records already in ``out`` when resuming (a torn last line cut off). Raises
    :class:`UsageError` if ``out`` holds rollouts and this is not a resume, or they are
    another run's."""
    if out.exists() and out.stat().st_size and not resume:
        raise UsageError(f"{out} already holds rollouts",
                         hint="pass --resume to continue that run, or choose another file with -o")
    if not resume:
        return []
    records = read_records(out, repair=True)
    for record in records:
        for key in _IDENTITY:
            if record.get(key) != plan.provenance.get(key):
                raise UsageError(
                    f"{out} holds rollouts of another run ({key} {record.get(key)!r}, "
                    f"this run has {plan.provenance.get(key)!r})",
                    hint="resume with the same environment, version, split and policy, or choose another -o")
    return records


async def _append_records(plan: RolloutPlan, jobs: list[RolloutJob], out: Path, executor: Executor | None,
                          on_record: Callable[[dict[str, Any]], None] | None) -> int:
    executor = executor or make_executor("local")
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    # O_APPEND: a record is written with one write() call, so lines never interleave.
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        async for record in executor.run(plan, jobs):
            os.write(fd, orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE, default=str))
            count += 1
            if on_record is not None:
                on_record(record)
    finally:
        os.close(fd)
    return count
