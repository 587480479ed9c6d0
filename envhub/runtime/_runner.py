"""Rollouts: run a policy on an environment's tasks and record every episode.

:func:`run_rollout` plays one episode with a policy and returns its typed record
(:class:`~envhub.runtime.RolloutRecord`, ``spec/rollout-record.md``). An
:class:`Executor` runs many; :class:`LocalExecutor` does so in this process's event loop
with a concurrency limit. A distributed executor implements the same interface (a plan
and jobs in, records out), so ``envhub eval`` does not change when rollouts leave the
machine.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub.errors import EnvhubError, PolicyError
from envhub.runtime._records import (
    CurriculumInfo,
    RolloutError,
    RolloutRecord,
    RolloutSampling,
    RolloutTiming,
    RolloutUsage,
    TaskOrigin,
    TurnTokens,
)
from envhub.runtime._types import Task

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup
    from envhub.runtime._protocols import EnvironmentProtocol
    from envhub.runtime.policies import Policy
    from envhub.runtime.verifiers import ScoringContext
    from envhub.settings import Settings

__all__ = [
    "Executor", "LocalExecutor", "RolloutJob", "RolloutPlan", "RolloutSource", "make_executor", "rollout_seed",
    "run_rollout",
]


@dataclass(frozen=True, slots=True)
class RolloutJob:
    """One rollout to run: a task, which of its rollouts this is, and its seed."""

    task: Task
    rollout: int
    seed: int
    #: Where a curriculum stood when it drew the task (the record's ``curriculum`` field).
    curriculum: dict[str, Any] | None = None


@dataclass(frozen=True)
class RolloutSource:
    """How a worker process rebuilds a run's environment and policy: what ``envhub eval``
    was given (the environment's reference and the policy's spec) and the options it loaded
    them with. ``load`` is a module-level function (pickled by its name) that returns the
    environment and the policy, for ``concurrency`` episodes at once."""

    #: A bundle directory (absolute), an environment id, or a served environment's URL.
    env: str
    #: A policy spec (``reference``, ``openai:MODEL``, ``python:MODULE:FUNC``, ...).
    policy: str
    load: Callable[[RolloutSource, int], tuple[EnvironmentProtocol, Policy]]
    settings: Settings | None = None
    cwd: Path | None = None
    trust_code: bool = False
    registry: str | None = None
    with_heldout: bool = False
    offline: bool | None = None
    base_url: str | None = None
    record_tokens: bool = False
    #: The digest the driver's environment has: a worker that loads another refuses to run.
    digest: str | None = None


@dataclass
class RolloutPlan:
    """What every rollout of a run shares."""

    env: EnvironmentProtocol
    policy: Policy
    #: Wall-clock limit per episode (policy calls included), seconds; None for none.
    timeout_s: float | None = None
    concurrency: int = 8
    #: Provenance fields added to every record, computed once per run.
    provenance: dict[str, Any] = field(default_factory=dict)
    #: What the verifier is told about the run (the policy's model); None: nothing.
    scoring: ScoringContext | None = None
    #: How a worker process rebuilds the environment and the policy (executors that run
    #: rollouts in other processes need it); None when they were given as objects.
    source: RolloutSource | None = None
    #: How many worker processes an executor that uses them starts (None: its default).
    workers: int | None = None


def rollout_seed(run_seed: int | None, task_id: str, rollout: int) -> int:
    """A rollout's seed, fixed by the run's seed, the task and the rollout index, so a
    resumed run gives each rollout the seed it would have had."""
    digest = hashlib.blake2b(f"{run_seed}:{task_id}:{rollout}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


async def run_rollout(plan: RolloutPlan, job: RolloutJob) -> RolloutRecord:
    """Play one episode and return its record. Never raises for the policy's, the
    environment's or the verifier's failures: they go into the record's ``error``, typed
    by what failed, with reward 0."""
    from envhub.runtime.policies import track_usage

    env, policy, task = plan.env, plan.policy, job.task
    episode = env.episode(task, seed=job.seed, scoring=plan.scoring)
    started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
    start = time.perf_counter()
    policy_s = 0.0
    error: RolloutError | None = None
    reward = 0.0
    breakdown: dict[str, float] = {}
    score_info: dict[str, Any] = {}
    try:
        with track_usage() as usage:
            async with asyncio.timeout(plan.timeout_s):
                observation = await episode.areset()
                while True:
                    t = time.perf_counter()
                    action = await policy.act(observation, task, env=env)
                    policy_s += time.perf_counter() - t
                    result = await episode.astep(action)
                    if result.done:
                        break
                    observation = result.observation
        assert episode.score is not None
        reward = episode.score.reward
        breakdown = dict(episode.score.breakdown)
        score_info = dict(episode.score.info)
        if episode.score.error is not None:  # the verifier raised while scoring (Environment.score)
            error = _verifier_error(episode.score.error)
    except TimeoutError:
        error = RolloutError(kind="timeout", type="TimeoutError",
                             message=f"the episode took longer than {plan.timeout_s:g} s")
    except PolicyError as e:
        error = RolloutError(kind="policy", type=type(e).__name__, message=e.message)
    except EnvhubError as e:
        error = RolloutError(kind="environment", type=type(e).__name__, message=e.message)
    except Exception as e:
        error = RolloutError(kind="exception", type=type(e).__name__, message=str(e))
    finally:
        await episode.aclose()
    messages = episode.messages
    origin = env.task_provenance(task)
    # Built without validation: every field comes from envhub's own typed values (the
    # reward is in [0, 1] by Score's contract), and validating each record cost more than
    # the rest of a trivial rollout. Records from other executors are validated
    # (RolloutRecord.from_runner).
    return RolloutRecord.model_construct(**{**plan.provenance, **dict(
        child=TaskOrigin(**origin) if origin is not None else None,
        split=task.split,
        task_id=task.id,
        rollout=job.rollout,
        seed=job.seed,
        difficulty=task.difficulty,
        curriculum=CurriculumInfo(**job.curriculum) if job.curriculum is not None else None,
        reward=reward,
        breakdown=breakdown,
        score_info=score_info or None,
        error=error,
        turns=episode.turns,
        truncated=episode.truncated,
        turn_rewards=_turn_rewards(episode),
        ended_by=getattr(episode, "ended_by", None) if error is None else None,
        outcome=getattr(episode, "outcome", None),
        tool_calls=[call for m in messages if m.get("role") == "assistant" for call in (m.get("tool_calls") or [])],
        tool_errors=episode.tool_errors,
        # A served environment's episode does not say which of its tool errors were faults.
        environment_faults=getattr(episode, "environment_faults", 0),
        messages=messages,
        usage=RolloutUsage(**usage.as_dict()),
        timing=RolloutTiming(started_at=started_at, duration_s=round(time.perf_counter() - start, 6),
                             policy_s=round(policy_s, 6)),
        # Only a policy that records tokens fills these (OpenAIPolicy(record_tokens=True)).
        turns_tokens=[TurnTokens.model_construct(**turn) for turn in usage.turns_tokens]
        if usage.turns_tokens is not None else None,
        sampling=RolloutSampling.model_construct(**usage.sampling) if usage.sampling is not None else None,
    )})


def _turn_rewards(episode: Any) -> list[float | None] | None:
    """The episode's per-turn rewards, or None when the environment gave none."""
    rewards = getattr(episode, "turn_rewards", None)
    if not rewards or all(r is None for r in rewards):
        return None
    return list(rewards)


def _verifier_error(text: str) -> RolloutError:
    """The error of a score whose verifier raised: :meth:`Score.failed` holds it as
    ``"<Type>: message"``, the kind is known here."""
    head, sep, rest = text.partition(": ")
    if sep and head.isidentifier():
        return RolloutError(kind="verifier", type=head, message=rest)
    return RolloutError(kind="verifier", type="VerifierError", message=text)


class Executor(ABC):
    """Runs the rollouts of a plan and yields their records as they finish (in any order)."""

    #: The executor loads the environment and the policy elsewhere, from the plan's
    #: :attr:`RolloutPlan.source`: a run needs them named, not given as objects.
    needs_source: bool = False
    #: The executor starts worker processes (``envhub eval -j N``, :attr:`RolloutPlan.workers`).
    uses_workers: bool = False

    @abstractmethod
    def run(self, plan: RolloutPlan, jobs: Sequence[RolloutJob]) -> AsyncIterator[RolloutRecord]:
        ...


class LocalExecutor(Executor):
    """Rollouts as asyncio tasks in this process, at most ``plan.concurrency`` at once.

    A fixed pool of workers pulls jobs, so 100,000 queued rollouts cost 100,000 small job
    objects, not 100,000 pending tasks.
    """

    async def run(self, plan: RolloutPlan, jobs: Sequence[RolloutJob]) -> AsyncIterator[RolloutRecord]:
        if not jobs:
            return
        # Bounded: a worker whose rollouts never wait (a reference policy) blocks here once the
        # queue is full, so records reach the caller (and the file) as they finish, not all at
        # the end, and finished records never pile up in memory.
        width = max(1, min(plan.concurrency, len(jobs)))
        queue: asyncio.Queue[RolloutRecord | BaseException] = asyncio.Queue(maxsize=width)
        pending = iter(jobs)

        async def worker() -> None:
            for job in pending:  # a shared iterator: each job is taken by exactly one worker
                try:
                    await queue.put(await run_rollout(plan, job))
                except BaseException as e:  # cancellation, or a bug in run_rollout itself
                    await queue.put(e)
                    return

        workers = [asyncio.create_task(worker()) for _ in range(width)]
        try:
            for _ in range(len(jobs)):
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)


def make_executor(name: str = "local", *, plugins: PluginLookup,
                  options: Mapping[str, str] | None = None) -> Executor:
    """The executor registered as ``name`` (``local``, or one an installed plugin provides)
    in ``plugins``, made with ``options`` (``{"address": ...}`` from ``eval --address``).

    Raises :class:`envhub.errors.UsageError` for a name nothing provides, or an option the
    executor does not take, and :class:`envhub.errors.PluginConflictError` for one two
    plugins provide."""
    from envhub.errors import UsageError

    kind = plugins.lookup("executors", name)
    if kind is None:
        raise UsageError(f"unknown executor {name!r}; executors: {', '.join(plugins.names('executors'))}",
                         hint="install the plugin that provides it ('envhub plugins' lists what is installed)")
    options = dict(options or {})
    for option in options:
        if option not in kind.options:
            takers = [n for n in plugins.names("executors")
                      if option in getattr(plugins.lookup("executors", n), "options", ())]
            raise UsageError(f"executor {name!r} takes no --{option}",
                             hint=f"--{option} is for --executor {' or '.join(takers)}" if takers else
                             f"no installed executor takes --{option}; leave it out")
    executor = kind.make(**options)
    if not isinstance(executor, Executor):
        raise UsageError(f"executor {name!r} made a {type(executor).__name__}, not an envhub Executor",
                         hint="this is a bug of the plugin that provides it")
    return executor
