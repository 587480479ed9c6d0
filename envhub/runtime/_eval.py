"""An evaluation run: which rollouts to play, where their records go, and the summary.

:class:`Evaluation` is a whole ``envhub eval`` given a loaded environment, a policy and an
executor: :meth:`Evaluation.prepare` plans the jobs (each task ``k`` times, or the draws of
the manifest's curriculum) and reads a resumed file, :meth:`Evaluation.run` plays them and
returns an :class:`EvalResult`. Resolving ids and policy names is the caller's part
(``envhub.evaluate``).

The records file is append-only, one :class:`RolloutRecord` per line, flushed as each
rollout finishes. ``resume`` reads what is already there, skips those rollouts, and drops a
torn last line left by a killed run; it refuses a file that holds another environment's,
version's, split's or policy's rollouts, so two runs never mix in one file.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from envhub.errors import UsageError
from envhub.runtime._curriculum import Curriculum, Draw
from envhub.runtime._records import RolloutError, RolloutRecord, dump_record, read_records
from envhub.runtime._runner import Executor, RolloutJob, RolloutPlan, RolloutSource, rollout_seed
from envhub.runtime._types import Task
from envhub.runtime.verifiers import ScoringContext

if TYPE_CHECKING:
    from envhub.runtime._protocols import EnvironmentProtocol
    from envhub.runtime.policies import Policy

__all__ = [
    "CurriculumRun", "CurriculumSummary", "EvalResult", "EvalRun", "EvalSummary", "Evaluation", "SummaryEnvironment",
    "new_records_file", "pass_at_k", "plan_jobs", "summarize",
]

#: Record fields that must agree between a file and the run resuming it.
_IDENTITY = ("env", "version", "digest", "split", "policy")

OnRecord = Callable[[RolloutRecord], None]


def plan_jobs(tasks: Sequence[Task], rollouts_per_task: int, run_seed: int | None) -> list[RolloutJob]:
    """Every (task, rollout) pair, task by task."""
    return [RolloutJob(task, k, rollout_seed(run_seed, task.id, k)) for task in tasks for k in range(rollouts_per_task)]


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` rollouts of which ``c`` succeeded:
    1 - C(n-c, k) / C(n, k) (Chen et al., 2021).

    >>> pass_at_k(4, 1, 2)
    0.5
    """
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} rollouts per task, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


class _Summary(BaseModel):
    model_config = ConfigDict(frozen=True)


class SummaryEnvironment(_Summary):
    """The environment the summarized rollouts ran on."""

    env: str
    version: str
    digest: str | None
    score_version: int


class CurriculumSummary(_Summary):
    """How a curriculum run went: its draws, per level, and where it ended."""

    strategy: str
    draws: int
    last_level: Any
    highest_level: Any
    draws_per_level: dict[str, int]


class EvalSummary(_Summary):
    """The figures of a set of rollout records (:func:`summarize`)."""

    rollouts: int
    tasks: int
    mean_reward: float | None
    success_threshold: float
    #: The share of rollouts whose reward reached ``success_threshold``.
    success_rate: float | None
    #: k ("1", "2", "4", ... up to the rollouts per task) -> the mean over tasks of pass@k.
    pass_at_k: dict[str, float]
    #: Per-criterion mean of the verifiers' breakdowns.
    criteria: dict[str, float]
    errors: int
    errors_by_kind: dict[str, int]
    #: The failed rollouts by exception class name (``TimeoutError`` for timeouts).
    errors_by_type: dict[str, int]
    #: The model's mistakes in tool calls (an unknown tool, arguments that are not JSON or do
    #: not fit): tool calls answered with an error that was not the environment's fault.
    tool_errors: int = 0
    #: Tool calls that failed because the environment's code raised (a bug in the
    #: environment, a missing dependency): not the model's doing, though the model saw them.
    environment_faults: int = 0
    #: The rollouts with at least one environment fault.
    environment_fault_rollouts: int = 0
    #: The mean over rollouts with per-turn rewards of their sum (the return); None when no
    #: rollout had any. Apart from ``mean_reward``, the verifier's final reward.
    mean_return: float | None = None
    #: The rollouts with per-turn rewards.
    rewarded_rollouts: int = 0
    #: How episodes ended: ``policy``, ``environment``, ``turn-limit`` -> rollouts.
    ended_by: dict[str, int] = {}
    #: The outcomes environments gave when they ended episodes ("win", "hangup") -> rollouts.
    outcomes: dict[str, int] = {}
    environment: SummaryEnvironment | None = None
    split: str | None = None
    policy: str | None = None
    curriculum: CurriculumSummary | None = None


def summarize(records: Iterable[RolloutRecord], *, success_threshold: float = 1.0) -> EvalSummary:
    """Mean reward, pass@k (k = 1, 2, 4, ... up to the rollouts per task), per-criterion
    means, and the errors, over ``records`` (read once, in one pass)."""
    tally = SummaryTally(success_threshold)
    for record in records:
        tally.add(record)
    return tally.summary()


class SummaryTally:
    """A summary accumulated record by record, so a run's summary needs no record kept:
    :meth:`add` each record as it is written, :meth:`summary` at the end (what
    :func:`summarize` does over a list). Holds a few counters, plus two small integers per
    task (for pass@k) and the curriculum's draws."""

    def __init__(self, success_threshold: float = 1.0) -> None:
        self.success_threshold = success_threshold
        self.count = 0
        self._total = 0.0
        self._successes = 0
        self._per_task: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # task -> [rollouts, successes]
        self._criteria: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # name -> [sum, count]
        self._kinds: Counter[str] = Counter()
        self._types: Counter[str] = Counter()
        self._draws: list[Any] = []
        self._tool_errors = self._faults = self._fault_rollouts = 0
        self._returns = 0.0
        self._rewarded = 0
        self._ended_by: Counter[str] = Counter()
        self._outcomes: Counter[str] = Counter()
        self._first: RolloutRecord | None = None

    def add(self, r: RolloutRecord) -> None:
        if self._first is None:
            self._first = r
        self.count += 1
        self._total += r.reward
        success = r.reward >= self.success_threshold
        self._successes += success
        tally = self._per_task[r.task_id]
        tally[0] += 1
        tally[1] += success
        for name, value in r.breakdown.items():
            sums = self._criteria[name]
            sums[0] += value
            sums[1] += 1
        if r.error is not None:
            self._kinds[r.error.kind] += 1
            self._types[r.error.type] += 1
        if r.curriculum is not None:
            self._draws.append(r.curriculum)
        self._tool_errors += r.tool_errors - r.environment_faults
        if r.environment_faults:
            self._faults += r.environment_faults
            self._fault_rollouts += 1
        turn_return = r.turn_return
        if turn_return is not None:
            self._returns += turn_return
            self._rewarded += 1
        if r.ended_by is not None:
            self._ended_by[r.ended_by] += 1
        if r.outcome is not None:
            self._outcomes[r.outcome] += 1

    def summary(self) -> EvalSummary:
        count, first, kinds = self.count, self._first, self._kinds
        return EvalSummary(
            rollouts=count, tasks=len(self._per_task), mean_reward=self._total / count if count else None,
            success_threshold=self.success_threshold, success_rate=self._successes / count if count else None,
            pass_at_k=_pass_at_ks(list(self._per_task.values())),
            criteria={name: s / n for name, (s, n) in sorted(self._criteria.items())},
            errors=sum(kinds.values()), errors_by_kind=dict(sorted(kinds.items())),
            errors_by_type=dict(sorted(self._types.items())), tool_errors=self._tool_errors,
            environment_faults=self._faults, environment_fault_rollouts=self._fault_rollouts,
            mean_return=self._returns / self._rewarded if self._rewarded else None, rewarded_rollouts=self._rewarded,
            ended_by=dict(sorted(self._ended_by.items())), outcomes=dict(sorted(self._outcomes.items())),
            environment=SummaryEnvironment(env=first.env, version=first.version, digest=first.digest,
                                           score_version=first.score_version) if first else None,
            split=first.split if first else None, policy=first.policy if first else None,
            curriculum=_curriculum_summary(self._draws))


def _pass_at_ks(tallies: list[list[int]]) -> dict[str, float]:
    if not tallies:
        return {}
    n_min = min(n for n, _ in tallies)
    ks = list(itertools.takewhile(lambda k: k <= n_min, (2 ** i for i in itertools.count())))
    if n_min > 1 and n_min not in ks:
        ks.append(n_min)
    return {str(k): sum(pass_at_k(n, c, k) for n, c in tallies) / len(tallies) for k in ks}


def _curriculum_summary(draws: list[Any]) -> CurriculumSummary | None:
    if not draws:
        return None
    steps = sorted(draws, key=lambda c: c.step)
    per_level: dict[str, int] = defaultdict(int)
    for info in steps:
        per_level[str(info.level)] += 1
    return CurriculumSummary(strategy=steps[-1].strategy, draws=len(steps), last_level=steps[-1].level,
                             highest_level=max(steps, key=lambda c: c.level_index).level,
                             draws_per_level=dict(per_level))


@dataclass(frozen=True)
class EvalResult:
    """What an evaluation did: the summary of every record in its file (those of a resumed
    run's earlier part included), where the records and the summary were written (None
    without an output file), the records, and how many rollouts this run played, skipped
    (already in the file) and saw fail."""

    summary: EvalSummary
    output: Path | None
    summary_path: Path | None
    #: The records, when the run kept them in memory (it had no output file); else None, and
    #: :attr:`records` reads them from the file. Not in the repr: asyncio formats a finished
    #: task's result on the way out of asyncio.run, and the repr of 100,000 records costs seconds.
    kept: list[RolloutRecord] | None = field(repr=False)
    ran: int = 0
    skipped: int = 0
    failed: int = 0
    #: The error of the first rollout of this run to fail, in the order they finished.
    first_error: RolloutError | None = None

    @property
    def records(self) -> list[RolloutRecord]:
        """Every record of the run's file (those of a resumed run's earlier part included),
        read from the file when asked: a run writing to a file keeps none in memory."""
        if self.kept is not None:
            return self.kept
        assert self.output is not None
        return read_records(self.output)

    def as_json(self) -> dict[str, Any]:
        """The summary, with ``output``, ``ran`` and ``skipped``, as ``envhub eval --json``
        prints it and ``OUT.summary.json`` holds it."""
        return {**self.summary.model_dump(mode="json"), "output": str(self.output) if self.output else None,
                "ran": self.ran, "skipped": self.skipped}


class _Sink:
    """Where a run's records go: appended to the file ``out`` (if any; else kept in
    ``kept``), added to the run's ``tally``, and passed to ``on_record``. A run writing to a
    file keeps no record, so its memory stays flat however many it writes."""

    def __init__(self, out: Path | None, tally: SummaryTally, on_record: OnRecord | None) -> None:
        self.tally = tally
        self.on_record = on_record
        self.kept: list[RolloutRecord] | None = [] if out is None else None
        self.fd: int | None = None
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            # O_APPEND: a record is written with one write() call, so lines never interleave.
            self.fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, record: RolloutRecord) -> None:
        if self.fd is not None:
            os.write(self.fd, dump_record(record))
        else:
            assert self.kept is not None
            self.kept.append(record)
        self.tally.add(record)
        if self.on_record is not None:
            self.on_record(record)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


async def _play(plan: RolloutPlan, jobs: list[RolloutJob], executor: Executor, sink: _Sink) -> int:
    count = 0
    async for raw in executor.run(plan, jobs):
        sink.write(raw if isinstance(raw, RolloutRecord) else RolloutRecord.from_runner(raw))
        count += 1
    return count


@dataclass
class EvalRun:
    """Plays ``jobs`` not already in ``out`` and appends their records (to memory only when
    ``out`` is None)."""

    plan: RolloutPlan
    jobs: list[RolloutJob]
    out: Path | None
    executor: Executor
    resume: bool = False
    #: The records already in ``out``, and the jobs still to run (set by :meth:`prepare`).
    previous: list[RolloutRecord] = field(default_factory=list)
    todo: list[RolloutJob] = field(default_factory=list)

    def prepare(self) -> list[RolloutJob]:
        """The jobs still to run. Raises :class:`UsageError` if ``out`` exists and is not
        being resumed, or holds another run's rollouts."""
        self.previous = _previous_records(self.plan, self.out, self.resume)
        done = {(r.task_id, r.rollout) for r in self.previous}
        self.todo = [job for job in self.jobs if (job.task.id, job.rollout) not in done]
        return self.todo

    async def run(self, sink: _Sink) -> int:
        """Run the jobs still to run, writing each record to ``sink`` as it finishes;
        returns how many ran."""
        return await _play(self.plan, self.todo, self.executor, sink)


@dataclass
class CurriculumRun:
    """``total`` draws of ``curriculum``, played a batch of ``plan.concurrency`` at a time.
    Each batch is drawn at the curriculum's current level, and its outcomes are counted in
    draw order once the whole batch is back, so a run's draws depend on its seed and batch
    size, not on which rollout finished first, and a resumed run replays the file to the
    same place."""

    plan: RolloutPlan
    curriculum: Curriculum
    total: int
    out: Path | None
    executor: Executor
    resume: bool = False
    run_seed: int | None = None
    previous: list[RolloutRecord] = field(default_factory=list)

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
        self.previous = _previous_records(self.plan, self.out, self.resume)
        by_step: dict[int, RolloutRecord] = {}
        for record in self.previous:
            info = record.curriculum
            if info is None or info.batch != self.batch:
                raise UsageError(f"{self.out} holds rollouts of another run (not a curriculum run with batches of "
                                 f"{self.batch})", hint="resume with the same --concurrency, or choose another -o")
            by_step[info.step] = record
        while self._next_step < self.total and by_step:
            draws = self._draw()
            for draw in draws:
                known_record = by_step.get(draw.step)
                if known_record is not None and known_record.task_id != draw.task.id:
                    raise UsageError(f"{self.out}: draw {draw.step} was task {known_record.task_id!r}, but this "
                                     f"curriculum draws {draw.task.id!r} there",
                                     hint="resume with the same --seed and --concurrency, or choose another -o")
            known = {d.step: by_step.pop(d.step).reward for d in draws if d.step in by_step}
            if len(known) < len(draws):
                self._carry = (draws, known)
                break
            self._update(draws, known)
        return self.total - self._next_step + (len(self._carry[0]) - len(self._carry[1]) if self._carry else 0)

    async def run(self, sink: _Sink) -> int:
        """Play the remaining draws, writing each record to ``sink``; returns how many ran."""
        count = 0
        outer = sink.on_record
        while self._carry is not None or self._next_step < self.total:
            draws, rewards = self._carry or (self._draw(), {})
            self._carry = None
            jobs = [self._job(d) for d in draws if d.step not in rewards]

            def collect(record: RolloutRecord, rewards: dict[int, float] = rewards) -> None:
                assert record.curriculum is not None
                rewards[record.curriculum.step] = record.reward
                if outer is not None:
                    outer(record)

            sink.on_record = collect
            try:
                count += await _play(self.plan, jobs, self.executor, sink)
            finally:
                sink.on_record = outer
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


def _previous_records(plan: RolloutPlan, out: Path | None, resume: bool) -> list[RolloutRecord]:
    """The records already in ``out`` when resuming (a torn last line cut off). Raises
    :class:`UsageError` if ``out`` holds rollouts and this is not a resume, or they are
    another run's."""
    if out is None:
        if resume:
            raise UsageError("resuming needs the records file of the run to resume",
                             hint="pass output=PATH (envhub eval -o PATH)")
        return []
    if out.exists() and out.stat().st_size and not resume:
        raise UsageError(f"{out} already holds rollouts",
                         hint="pass --resume to continue that run, or choose another file with -o")
    if not resume:
        return []
    records = read_records(out, repair=True)
    for record in records:
        for key in _IDENTITY:
            if getattr(record, key) != plan.provenance.get(key):
                raise UsageError(
                    f"{out} holds rollouts of another run ({key} {getattr(record, key)!r}, "
                    f"this run has {plan.provenance.get(key)!r})",
                    hint="resume with the same environment, version, split and policy, or choose another -o")
    return records


def new_records_file(directory: Path, name: str, version: str, split: str, policy: str) -> Path:
    """A new, empty records file under ``directory``, created here so that no other run
    (another one started in the same second) can take its name: the first free one of
    ``NAMESPACE--NAME-VERSION/SPLIT.POLICY.STAMP.jsonl``, ``...STAMP-2.jsonl``, ... An
    existing file is never reused."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", policy)
    folder = directory / f"{name.replace('/', '--')}-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        path = folder / f"{split}.{safe}.{stamp}{f'-{n}' if n > 1 else ''}.jsonl"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")  # itertools.count never ends


@dataclass
class Evaluation:
    """A planned evaluation of ``policy`` on one split of a loaded environment: made by
    :meth:`prepare`, played by :meth:`run`. ``remaining`` rollouts are to run, ``skipped``
    are already in the output file (a resumed run)."""

    rollouts: EvalRun | CurriculumRun
    policy: Policy
    output: Path | None
    remaining: int
    skipped: int
    success_threshold: float = 1.0
    #: Close the policy when the run ends, and the environment on :meth:`close` (they
    #: were made for this evaluation).
    close_policy: bool = False
    close_env: bool = False

    @classmethod
    def prepare(cls, env: EnvironmentProtocol, policy: Policy, *, split: str, limit: int | None = None,
                rollouts_per_task: int = 1, concurrency: int = 16, seed: int | None = None, output: Path | None = None,
                output_dir: Path | None = None, resume: bool = False, curriculum: bool = False,
                timeout_s: float | None = None, success_threshold: float = 1.0, executor: Executor,
                force_self_judge: bool = False, close_policy: bool = False, close_env: bool = False,
                source: RolloutSource | None = None, workers: int | None = None) -> Evaluation:
        """Plan the rollouts of ``policy`` on ``split`` of ``env``: the first ``limit``
        tasks (all by default; shuffled by ``seed``) ``rollouts_per_task`` times each, or
        with ``curriculum`` ``limit`` draws of the manifest's curriculum. Records go to
        ``output``, else to a new file under ``output_dir``, else only into the result.

        Raises :class:`UsageError` for a split the environment does not have, a
        curriculum the manifest does not declare, an ``output`` that already holds
        rollouts (unless ``resume``) or holds another run's, and the reference policy on
        tasks without references. ``source`` and ``workers`` go into the plan, for executors
        that run rollouts in worker processes (:attr:`RolloutPlan.source`)."""
        if curriculum and rollouts_per_task != 1:
            raise UsageError("--curriculum draws each rollout's task itself; it takes no -k",
                             hint="pass -n N for the number of draws")
        drawer = _curriculum(env, split, seed, limit, success_threshold) if curriculum else None
        tasks = env.tasks(split, seed=seed, limit=1 if drawer is not None else limit)
        scoring = ScoringContext(policy.model, force_self_judge)
        env.check_scoring(scoring)  # a judge asked to grade its own model: refused before the run
        if policy.name == "reference" and len(tasks):
            # Refused before the run, not once per rollout: a served held-out split has no references here.
            env.reference_actions(tasks[0])
        provenance = {**env.provenance(), "policy": policy.name, "split": split}
        if output is None and output_dir is not None:
            output = new_records_file(output_dir, env.name, env.version, split, policy.name)
        plan = RolloutPlan(env, policy, timeout_s=timeout_s or env.manifest.config.timeout_s,
                           concurrency=concurrency, provenance=provenance, scoring=scoring, source=source,
                           workers=workers)
        run: EvalRun | CurriculumRun
        if drawer is not None:
            assert drawer.total is not None
            run = CurriculumRun(plan, drawer, drawer.total, output, executor, resume=resume, run_seed=seed)
            remaining = run.prepare()
            skipped = drawer.total - remaining
        else:
            run = EvalRun(plan, plan_jobs(tasks, rollouts_per_task, seed), output, executor, resume=resume)
            todo = run.prepare()
            remaining, skipped = len(todo), len(run.jobs) - len(todo)
        return cls(run, policy, output, remaining, skipped, success_threshold, close_policy, close_env)

    async def run(self, on_record: OnRecord | None = None) -> EvalResult:
        """Play the remaining rollouts, calling ``on_record`` with each record as it
        finishes; write the summary beside the records file (``OUT.summary.json``)."""
        failed = 0
        first_error: RolloutError | None = None

        def note(record: RolloutRecord) -> None:
            nonlocal failed, first_error
            if record.error is not None:
                failed += 1
                first_error = first_error or record.error
            if on_record is not None:
                on_record(record)

        tally = SummaryTally(self.success_threshold)
        for record in self.rollouts.previous:
            tally.add(record)
        self.rollouts.previous = []  # counted: the summary needs them no more
        sink = _Sink(self.output, tally, note)
        try:
            ran = await self.rollouts.run(sink)
        finally:
            sink.close()
            if self.close_policy:
                await self.policy.aclose()
        summary_path = self.output.with_name(self.output.name.removesuffix(".jsonl") + ".summary.json") \
            if self.output is not None else None
        result = EvalResult(tally.summary(), self.output, summary_path, sink.kept, ran, self.skipped, failed,
                            first_error)
        if summary_path is not None:
            summary_path.write_text(json.dumps(result.as_json(), indent=2) + "\n", encoding="utf-8")
        return result

    def close(self) -> None:
        """Close the environment if it was loaded for this evaluation."""
        if self.close_env:
            self.rollouts.plan.env.close()


def _curriculum(env: EnvironmentProtocol, split: str, seed: int | None, limit: int | None,
                success_threshold: float) -> Curriculum:
    """The curriculum of ``env``'s manifest over ``split``, for ``limit`` draws (default: the
    split's size). Raises UsageError when the manifest declares none."""
    manifest = getattr(env, "manifest", None)
    spec = manifest.config.curriculum if manifest is not None else None
    if spec is None or spec.strategy == "none":
        raise UsageError(f"{env.name} declares no curriculum", hint="add [config.curriculum] to its manifest, "
                         "e.g. curriculum = { strategy = \"success-window\", window = 32, promote-at = 0.8 }")
    if limit is None and env.splits[split].generated:
        raise UsageError(f"--curriculum on the generated split {split!r} needs the number of draws", hint="pass -n N")
    total = limit if limit is not None else len(env.tasks(split))
    return Curriculum(env, split, spec, seed=seed, total=total, success_threshold=success_threshold)
