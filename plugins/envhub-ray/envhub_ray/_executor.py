"""The ``ray`` executor: one run's rollouts played by long-lived Ray actors.

The driver (the ``envhub eval`` process) joins a Ray cluster (``address``, else Ray's own
``RAY_ADDRESS``, else a local cluster it starts and stops) and starts the actors: by default
one per alive node that has a CPU, pinned to it; with ``actors`` (``-j N``) N of them,
spread. Each actor is an async actor that loads the environment and the policy itself from
the plan's :class:`~envhub.runtime.RolloutSource` (the same bundle directory, the same id
through the registry and the cache, refusing another digest than the driver's, or the same
served URL), so no environment, policy or bundle code is pickled; and runs its episodes on
its own event loop, ``ceil(concurrency / actors)`` at once.

The driver deals the jobs in chunks (two in flight per actor, so an actor never idles
between chunks) and reads each chunk's records back as a stream (a Ray streaming generator)
as they finish, yielding them to the run, which writes them to its one records file. Each
job has an index; a record is yielded only for a job that has none yet.

An actor that dies (its process or its node killed) loses the episodes it had not sent
back: the driver puts those jobs back in the queue and the other actors play them, so
every job gets exactly one record. Only when every actor is gone does the run end, with a
:class:`~envhub.runtime.WorkerError`; the records already written stay, and ``--resume``
plays the missing ones. An actor whose code raises (an environment that does not load, a
digest that differs) ends the run at once with the actor's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import sys
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub.errors import EnvhubError, UsageError
from envhub.runtime import Executor, RolloutJob, RolloutPlan, RolloutSource, WorkerError, run_rollout

if TYPE_CHECKING:
    from envhub.runtime import RolloutRecord

__all__ = ["RayExecutor"]

#: Variables of the driver's environment the actors get too (settings, an endpoint's key).
FORWARDED_PREFIXES = ("ENVHUB_", "OPENAI_")
#: How long an actor may take to be placed and to load the environment, seconds.
LOAD_TIMEOUT_S = 300.0


def import_ray() -> Any:
    """Ray, or a :class:`UsageError` saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise UsageError(f"the ray executor needs Ray, which is not installed here ({e})",
                         hint="pip install envhub-ray (it installs ray>=2.40), or pip install 'ray>=2.40'") from None
    return ray


class RayExecutor(Executor):
    """Rollouts played by Ray actors on a Ray cluster's nodes.

    ``address`` is the cluster to join (``"127.0.0.1:6379"``, ``"ray://..."``); None reads
    ``RAY_ADDRESS`` and, without it, starts a local cluster for the run. A driver that has
    already called ``ray.init`` (a trainer) keeps its connection: the executor neither joins
    another cluster nor shuts Ray down. ``actors`` is how many actors to start (default: the
    plan's ``workers``, ``-j``, else one per alive node with a CPU); each reserves
    ``cpus_per_actor`` CPUs. Needs the plan's :attr:`~envhub.runtime.RolloutPlan.source`.
    """

    needs_source = True
    uses_workers = True

    def __init__(self, address: str | None = None, actors: int | None = None, cpus_per_actor: float = 1.0) -> None:
        self.address = address
        self.actors = actors
        self.cpus_per_actor = cpus_per_actor

    async def run(self, plan: RolloutPlan, jobs: Sequence[RolloutJob]) -> AsyncIterator[RolloutRecord]:
        if not jobs:
            return
        if plan.source is None:
            raise UsageError("the ray executor needs the environment and the policy named (a reference and a policy "
                             "spec) so that each actor can load them",
                             hint="pass the environment's id, directory or URL and a policy spec such as "
                                  "'python:MODULE:FUNC', or use --executor local for a policy object")
        ray = import_ray()
        started = self._connect(ray)
        run = _Run(ray, plan, plan.source, list(jobs))
        try:
            await run.start(self._placements(ray, plan, len(jobs)))
            async for record in run.records():
                yield record
        finally:
            await run.stop()
            if started:
                ray.shutdown()

    def _connect(self, ray: Any) -> bool:
        """Join the cluster (or start a local one); True when this call connected (and the
        run then disconnects)."""
        if ray.is_initialized():
            return False
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        if address is not None:
            _check_reachable(address)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="warning",
                     configure_logging=True)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
            raise UsageError(f"cannot connect to {where}: {e}",
                             hint="start it with 'ray start --head' (and 'ray start --address HEAD:PORT' on the "
                                  "other machines), and pass HEAD:PORT with --address (or in RAY_ADDRESS)") from None
        return True

    def _placements(self, ray: Any, plan: RolloutPlan, n_jobs: int) -> list[dict[str, Any]]:
        """The Ray options of each actor to start: pinned one per node with a CPU, or N spread."""
        base: dict[str, Any] = {"num_cpus": self.cpus_per_actor, "max_restarts": 0, "max_concurrency": 10_000}
        count = self.actors or plan.workers
        if count:
            return [{**base, "scheduling_strategy": "SPREAD"} for _ in range(min(count, n_jobs))]
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= max(
            self.cpus_per_actor, 1e-9)]
        if not nodes:
            raise UsageError("the Ray cluster has no alive node with a CPU to run an actor on",
                             hint="start worker nodes with 'ray start --address HEAD:PORT --num-cpus N'")
        return [{**base, "scheduling_strategy": NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)}
                for n in nodes[:n_jobs]]


def _check_reachable(address: str) -> None:
    """Refuse a ``HOST:PORT`` address nothing listens on, within seconds: ``ray.init`` keeps
    retrying such an address for minutes without a word."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return  # "auto", "local", a ray:// client address: Ray's own errors are clear enough
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=5).close()
    except OSError as e:
        raise UsageError(f"cannot connect to the Ray cluster at {address}: {e.strerror or e}",
                         hint="start it with 'ray start --head --port PORT' (and 'ray start --address HEAD:PORT' on "
                              "the other machines), and pass HEAD:PORT with --address (or in RAY_ADDRESS)") from None


@dataclass(frozen=True)
class _ActorPlan:
    """The parts of a :class:`RolloutPlan` an actor is sent (the rest it loads itself)."""

    timeout_s: float | None
    concurrency: int
    provenance: dict[str, Any]
    scoring: Any


@dataclass
class _Actor:
    index: int
    handle: Any
    pid: int | None = None
    node: str | None = None
    alive: bool = True

    def describe(self) -> str:
        where = f" on node {self.node}" if self.node else ""
        return f"actor {self.index} (pid {self.pid}{where})"


class _Run:
    """One run on the cluster: the actors, the job queue, and who has which job."""

    #: Chunks in flight per actor: the next is there when one ends.
    DEPTH = 2

    def __init__(self, ray: Any, plan: RolloutPlan, source: RolloutSource, jobs: list[RolloutJob]) -> None:
        self.ray = ray
        self.plan = plan
        self.source = source
        self.jobs = jobs
        self.pending: deque[int] = deque(range(len(jobs)))
        self.done = [False] * len(jobs)
        self.remaining = len(jobs)
        self.actors: list[_Actor] = []
        self.out: asyncio.Queue[tuple[RolloutRecord, ...] | BaseException] = asyncio.Queue()
        self.changed = asyncio.Condition()
        self.tasks: list[asyncio.Task[None]] = []
        self.chunk = 1

    async def start(self, placements: list[dict[str, Any]]) -> None:
        """Start the actors side by side and wait until each has loaded the environment."""
        share = max(1, math.ceil(self.plan.concurrency / len(placements)))
        self.chunk = share
        settings = _ActorPlan(timeout_s=self.plan.timeout_s, concurrency=share, provenance=self.plan.provenance,
                              scoring=self.plan.scoring)
        cls = self.ray.remote(EnvironmentActor)
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIXES)}
        for index, options in enumerate(placements):
            self.actors.append(_Actor(index, cls.options(**options).remote(self.source, settings, list(sys.path),
                                                                           env)))
        try:
            infos = await asyncio.wait_for(asyncio.gather(*(a.handle.load.remote() for a in self.actors)),
                                           LOAD_TIMEOUT_S)
        except TimeoutError:
            raise WorkerError(f"the Ray actors were not placed and loaded within {LOAD_TIMEOUT_S:g} s",
                              hint="check that the cluster has the CPUs they ask for ('ray status'), or pass fewer "
                                   "with -j") from None
        except self.ray.exceptions.RayTaskError as e:
            raise _actor_failed(self.ray, None, e) from None
        except self.ray.exceptions.RayError as e:  # its process or node gone before it could load
            raise WorkerError(f"a Ray actor died while loading the environment: {e}",
                              hint="'ray status' shows the cluster's nodes; run again when they are up") from None
        for actor, info in zip(self.actors, infos, strict=True):
            actor.pid, actor.node = info["pid"], info["node"]
        self.tasks = [asyncio.create_task(self._drive(a)) for a in self.actors]

    async def records(self) -> AsyncIterator[RolloutRecord]:
        """The records as they arrive, each job's once; raises what ends the run."""
        yielded = 0
        while yielded < len(self.jobs):
            item = await self.out.get()
            if isinstance(item, BaseException):
                raise item
            for record in item:
                yielded += 1
                yield record

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        closing = [a.handle.close.remote() for a in self.actors if a.alive]
        with contextlib.suppress(Exception):  # a policy that will not close does not hold up the run's end
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), 10)
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor.handle)

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def _drive(self, actor: _Actor) -> None:
        """Keep ``actor`` fed with chunks until every job has a record or it dies."""
        inflight: dict[asyncio.Task[None], list[int]] = {}
        try:
            while self.remaining:
                while len(inflight) < self.DEPTH and self.pending:
                    chunk = [self.pending.popleft() for _ in range(min(self.chunk, len(self.pending)))]
                    inflight[asyncio.create_task(self._stream(actor, chunk))] = chunk
                if not inflight:
                    async with self.changed:
                        await self.changed.wait_for(lambda: bool(self.pending) or not self.remaining)
                    continue
                finished, _ = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    task.result()  # raises before the chunk leaves inflight: a lost chunk is requeued below
                    del inflight[task]
        except _ActorLost:
            actor.alive = False
            for task in inflight:
                task.cancel()
            await asyncio.gather(*inflight, return_exceptions=True)
            lost = [i for chunk in inflight.values() for i in chunk]
            self._requeue(lost)
            with contextlib.suppress(Exception):
                self.ray.kill(actor.handle)
            if not any(a.alive for a in self.actors):
                self.out.put_nowait(WorkerError(
                    f"every Ray actor died before the run's rollouts finished (the last: {actor.describe()})",
                    hint="the rollouts that finished are in the records file; run again with --resume to play "
                         "the missing ones"))
            await self._notify()
        except asyncio.CancelledError:
            for task in inflight:
                task.cancel()
            raise
        except BaseException as e:
            for task in inflight:
                task.cancel()
            self.out.put_nowait(e)

    def _requeue(self, indices: list[int]) -> None:
        """Put back the jobs of ``indices`` that have no record yet, first in line."""
        self.pending.extendleft(reversed([i for i in indices if not self.done[i]]))

    async def _stream(self, actor: _Actor, chunk: list[int]) -> None:
        """Play ``chunk`` on ``actor``, passing each new record on as it arrives. Raises
        :class:`_ActorLost` if the actor (or its node) is gone, and what the actor raised
        otherwise (a :class:`WorkerError` naming it)."""
        ray = self.ray
        stream = actor.handle.play.options(num_returns="streaming").remote([(i, self.jobs[i]) for i in chunk])
        try:
            async for ref in stream:
                batch = await ref
                fresh = tuple(record for i, record in batch if self._claim(i))
                if fresh:
                    self.out.put_nowait(fresh)
        except ray.exceptions.RayTaskError as e:
            raise _actor_failed(ray, actor, e) from None
        except ray.exceptions.RayError as e:  # the actor's process or node is gone, or a result it held
            raise _ActorLost(str(e)) from None
        if not all(self.done[i] for i in chunk):  # a stream that ended short: its jobs are not lost
            raise _ActorLost(f"{actor.describe()} ended a chunk without all of its records")
        if not self.remaining:
            await self._notify()

    def _claim(self, index: int) -> bool:
        """Mark job ``index`` done; False if it already was (its record is not written again)."""
        if self.done[index]:
            return False
        self.done[index] = True
        self.remaining -= 1
        return True


class _ActorLost(Exception):
    """An actor is gone (killed, its node lost): its unfinished jobs go to the others."""


def _actor_failed(ray: Any, actor: _Actor | None, error: Any) -> WorkerError:
    """The error an actor's own code raised, as a :class:`WorkerError` naming the actor."""
    cause = getattr(error, "cause", None)
    who = actor.describe() if actor is not None else "a Ray actor"
    if isinstance(cause, EnvhubError):
        return WorkerError(f"{who} failed: {cause.message}", hint=cause.hint)
    if cause is not None:
        return WorkerError(f"{who} failed: {type(cause).__name__}: {cause}")
    return WorkerError(f"{who} failed: {error}")


class EnvironmentActor:
    """A Ray actor holding one environment and policy, playing many episodes at once on its
    event loop. Made a Ray actor class by the driver (``ray.remote``), so this module does
    not import Ray."""

    def __init__(self, source: RolloutSource, settings: _ActorPlan, path: list[str], env: dict[str, str]) -> None:
        # Set here rather than as a Ray runtime_env: an actor then takes one of the worker
        # processes Ray has already started, instead of waiting for a new one.
        os.environ.update(env)
        # The driver's sys.path first (what exists of it on this node), so a python: policy
        # and the bundle's code import as they do there.
        sys.path[:0] = [p for p in path if p not in sys.path and (not p or Path(p).exists())]
        self.source = source
        self.settings = settings
        self.plan: RolloutPlan | None = None
        self.limit = asyncio.Semaphore(settings.concurrency)

    async def load(self) -> dict[str, Any]:
        """Load the environment and the policy; what the driver names this actor by."""
        import ray

        source = self.source
        env, policy = await asyncio.to_thread(source.load, source, self.settings.concurrency)
        if source.digest is not None and not Path(source.env).is_dir() and env.digest != source.digest:
            env.close()
            await policy.aclose()
            raise WorkerError(f"{source.env} loaded as digest {env.digest} on this node, but the run has "
                              f"{source.digest}", hint="pin the version (NAME@VERSION) while the run lasts")
        self.plan = RolloutPlan(env, policy, timeout_s=self.settings.timeout_s, concurrency=self.settings.concurrency,
                                provenance=self.settings.provenance, scoring=self.settings.scoring)
        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()[:12]}

    async def play(self, chunk: list[tuple[int, RolloutJob]]) -> AsyncIterator[list[tuple[int, RolloutRecord]]]:
        """Play ``chunk``'s jobs (at most the actor's concurrency at once, over all chunks),
        yielding the ``(index, record)`` pairs finished since the last yield."""
        plan = self.plan
        assert plan is not None, "load() first"
        finished: asyncio.Queue[tuple[int, RolloutRecord] | BaseException] = asyncio.Queue()

        async def one(index: int, job: RolloutJob) -> None:
            try:
                async with self.limit:
                    finished.put_nowait((index, await run_rollout(plan, job)))
            except BaseException as e:  # a bug in run_rollout itself, or cancellation
                finished.put_nowait(e)
                raise

        tasks = [asyncio.create_task(one(index, job)) for index, job in chunk]
        try:
            left = len(tasks)
            while left:
                batch = [await finished.get()]
                while not finished.empty():
                    batch.append(finished.get_nowait())
                errors = [item for item in batch if isinstance(item, BaseException)]
                if errors:
                    raise errors[0]
                left -= len(batch)
                yield batch  # type: ignore[misc]  # the errors are raised above
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        if self.plan is not None:
            plan, self.plan = self.plan, None
            try:
                await plan.policy.aclose()
            finally:
                plan.env.close()
