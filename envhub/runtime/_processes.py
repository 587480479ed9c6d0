"""The ``processes`` executor: one run's rollouts sharded over worker processes.

Each worker is a fresh Python interpreter (started, not forked: nothing is forked from a
process with a running event loop or threads; and unlike multiprocessing's ``spawn`` it does
not re-run the caller's ``__main__``, so a script needs no ``if __name__ == "__main__"``
guard) with its own event loop. It rebuilds the
environment and the policy itself from the plan's :class:`RolloutSource` (a directory, an
id pulled through the registry and cache, or a served URL; a policy spec), so no
environment, policy or bundle code is pickled, plays its share of the jobs with a
:class:`~envhub.runtime.LocalExecutor`, and sends each record back over a pipe as it
finishes. The driver yields records as they arrive, so they reach the records file (and
the summary) one by one, as with the local executor.

A worker that dies ends the run with a :class:`WorkerError` naming it; the records already
yielded stay written, and ``--resume`` plays only the missing rollouts. Cancelling the run
(Ctrl-C) stops every worker before :meth:`ProcessExecutor.run` returns; a worker whose
driver was killed exits on its own within a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub.errors import EnvhubError, UsageError
from envhub.runtime._runner import Executor, LocalExecutor, RolloutJob, RolloutPlan, RolloutSource

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from envhub.runtime._records import RolloutRecord

__all__ = ["ProcessExecutor", "WorkerError"]


class WorkerError(EnvhubError):
    """A worker process of the ``processes`` executor died or failed."""


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[bytes]
    conn: Connection
    done: bool = False

    def describe(self) -> str:
        return f"worker {self.index} (pid {self.process.pid})"


class ProcessExecutor(Executor):
    """Rollouts sharded over ``workers`` processes (default: the plan's ``workers``, else
    the number of CPUs), each running its share with ``plan.concurrency / workers``
    episodes at once. Needs the plan's :attr:`~RolloutPlan.source`."""

    needs_source = True
    uses_workers = True

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    async def run(self, plan: RolloutPlan, jobs: Sequence[RolloutJob]) -> AsyncIterator[RolloutRecord]:
        if not jobs:
            return
        if plan.source is None:
            raise UsageError("the processes executor needs the environment and the policy named (a reference and "
                             "a policy spec) so that each worker process can load them",
                             hint="pass the environment's id, directory or URL and a policy spec such as "
                                  "'python:MODULE:FUNC', or use --executor local for a policy object")
        count = max(1, min(self.workers or plan.workers or os.cpu_count() or 1, len(jobs)))
        share = max(1, math.ceil(plan.concurrency / count))
        settings = _WorkerPlan(timeout_s=plan.timeout_s, concurrency=share, provenance=plan.provenance,
                               scoring=plan.scoring)
        workers: list[_Worker] = []
        try:
            for index in range(count):
                ours, theirs = multiprocessing.Pipe(duplex=True)
                try:
                    process = subprocess.Popen([sys.executable, "-c", _BOOT, str(theirs.fileno()), str(os.getpid())],
                                               pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
                finally:
                    theirs.close()  # the worker holds the only other end: its exit reads as end of file
                workers.append(_Worker(index, process, ours))
            for worker in workers:  # sent once all are starting: they boot side by side
                try:  # sys.path first, so that what follows unpickles as it would here
                    worker.conn.send(sys.path)
                    worker.conn.send((plan.source, settings, list(jobs[worker.index::count])))
                except OSError:  # it died while starting
                    raise _died(worker) from None
            live = {w.conn: w for w in workers}
            while live:
                ready = await asyncio.to_thread(_wait, list(live))
                for conn in ready:
                    worker = live[conn]
                    while True:  # drain what this worker has sent, without a round trip per record
                        try:
                            message = conn.recv()
                        except (EOFError, OSError, pickle.UnpicklingError):
                            del live[conn]
                            if not worker.done:
                                raise _died(worker) from None
                            break
                        if message[0] == "record":
                            yield message[1]
                        elif message[0] == "done":
                            worker.done = True
                        else:  # ("error", message, hint)
                            raise WorkerError(f"{worker.describe()} failed: {message[1]}", hint=message[2])
                        if not conn.poll():
                            break
        finally:
            _stop(workers)


@dataclass(frozen=True)
class _WorkerPlan:
    """The parts of a :class:`RolloutPlan` a worker is sent (the rest it loads itself)."""

    timeout_s: float | None
    concurrency: int
    provenance: dict[str, Any]
    scoring: Any


def _wait(conns: list[Connection]) -> list[Any]:
    from multiprocessing.connection import wait

    return wait(conns, timeout=1.0)


def _died(worker: _Worker) -> WorkerError:
    """Why ``worker`` is gone: the error it sent before it exited, if one is still in its pipe
    (a worker that fails to load sends it and exits, and its pipe may break under a send
    before the driver reads it), else how it ended."""
    try:
        while worker.conn.poll():
            message = worker.conn.recv()
            if message[0] == "error":
                return WorkerError(f"{worker.describe()} failed: {message[1]}", hint=message[2])
    except (EOFError, OSError, pickle.UnpicklingError):
        pass
    try:
        code: int | None = worker.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        code = None
    how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
    return WorkerError(f"{worker.describe()} {how} before its rollouts finished",
                       hint="the rollouts that finished are in the records file; run again with --resume to play "
                            "the missing ones")


def _stop(workers: list[_Worker]) -> None:
    """Stop every worker still running (SIGTERM, then SIGKILL after 5 s) and reap it."""
    for worker in workers:
        if worker.process.poll() is None:
            worker.process.terminate()
    deadline = time.monotonic() + 5
    for worker in workers:
        try:
            worker.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()
        worker.conn.close()


#: A worker's first lines: Ctrl-C reaches the whole process group, and the driver stops the
#: workers itself, so a worker ignores SIGINT from its first instruction on.
_BOOT = ("import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
         "from envhub.runtime._processes import _worker_main; _worker_main(int(sys.argv[1]), int(sys.argv[2]))")


def _worker_main(fd: int, parent: int) -> None:
    """A worker process, talking to its driver over the connection ``fd``: receive
    ``sys.path``, then the source, the plan and the jobs; load; play the jobs, sending each
    record, then ``("done",)``; or ``("error", message, hint)``."""
    from multiprocessing.connection import Connection

    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    conn = Connection(fd)
    sys.path[:] = conn.recv()
    try:
        source, settings, jobs = conn.recv()
        asyncio.run(_play(source, settings, jobs, conn))
    except BaseException as e:  # reported to the driver, which names this worker
        message, hint = (e.message, e.hint) if isinstance(e, EnvhubError) else (f"{type(e).__name__}: {e}", None)
        with contextlib.suppress(OSError):
            conn.send(("error", message, hint))
        return
    conn.send(("done",))


async def _play(source: RolloutSource, settings: _WorkerPlan, jobs: list[RolloutJob], conn: Connection) -> None:
    env, policy = source.load(source, settings.concurrency)
    try:
        if source.digest is not None and not Path(source.env).is_dir() and env.digest != source.digest:
            raise WorkerError(f"{source.env} loaded as digest {env.digest} in a worker, but the run has "
                              f"{source.digest}", hint="pin the version (NAME@VERSION) while the run lasts")
        plan = RolloutPlan(env, policy, timeout_s=settings.timeout_s, concurrency=settings.concurrency,
                           provenance=settings.provenance, scoring=settings.scoring)
        async for record in LocalExecutor().run(plan, jobs):
            conn.send(("record", record))
    finally:
        await policy.aclose()
        env.close()


def _watch_parent(parent: int) -> None:
    """Exit when the driver is gone (killed without stopping its workers): no orphans."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(1)

