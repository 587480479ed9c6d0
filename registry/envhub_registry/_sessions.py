"""Open episodes on the server, and the limits on them.

:class:`Sessions` holds every open episode by its id. It refuses a new one past
``max-episodes`` (429), closes an episode (releasing its state) when it ends, when its
client closes it, when it has had no request for ``idle-timeout-s``, or when it has run for
``episode-timeout-s``; a background task (:meth:`Sessions.reap_forever`) does the last two.

A closed episode's id is remembered for a while, with why it was closed, so a late request
is told "expired after 600 s idle" (410) or "done" (409) rather than "no such episode" (404).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envhub_registry._config import Limits
from envhub_registry._errors import ApiError

if TYPE_CHECKING:
    from envhub.runtime import Episode
    from envhub_registry._served import Served
    from envhub_registry._workers import Worker

__all__ = ["Session", "Sessions", "lost_error"]

log = logging.getLogger("envhub_registry")

#: Ids of closed episodes remembered (with the reason) for better errors; about 100 bytes each.
_TOMBSTONES = 20_000


@dataclass(eq=False)
class Session:
    """One open episode: the environment it runs in, whether its split is held out, and
    its clocks (``time.monotonic()`` seconds)."""

    id: str
    served: Served
    episode: Episode
    held_out: bool
    created: float
    deadline: float
    last_seen: float
    #: The step running now, if any: one step at a time per episode.
    step_task: asyncio.Task[Any] | None = field(default=None, repr=False)

    @property
    def busy(self) -> bool:
        return self.step_task is not None and not self.step_task.done()


class Sessions:
    """The open episodes of one server, under ``limits``. With ``worker`` (one of several
    worker processes, :mod:`envhub_registry._workers`), the episodes of this process: its
    ids name it, and ``max-episodes`` counts the episodes of every worker."""

    def __init__(self, limits: Limits, worker: Worker | None = None) -> None:
        self.limits = limits
        self.worker = worker
        self._open: dict[str, Session] = {}
        self._closed: OrderedDict[str, tuple[str, str]] = OrderedDict()
        #: Counters for /v1/health and the logs (this process's).
        self.opened = 0
        self.expired = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._open)

    def _count(self, name: str) -> None:
        if self.worker is not None:
            self.worker.counters.add(self.worker.index, name)

    def open(self, served: Served, episode: Episode, *, held_out: bool) -> Session:
        """Register a new episode. Raises :class:`ApiError` 429 when ``max-episodes`` are open."""
        worker = self.worker
        if (len(self._open) >= self.limits.max_episodes if worker is None
                else not worker.counters.reserve(worker.index, self.limits.max_episodes)):
            self.refused += 1
            self._count("refused")
            total = len(self._open) if worker is None else worker.counters.total("open")
            raise ApiError(
                429, "too-many-episodes",
                f"the server already has {total} open episodes, its limit (max-episodes)",
                hint="close finished episodes (DELETE /v1/episodes/ID), lower the client's concurrency, "
                     "or retry after a pause; the server's operator can raise --max-episodes",
                headers={"Retry-After": "1"})
        now = time.monotonic()
        episode_id = secrets.token_urlsafe(16)  # unguessable: an id is a capability for its episode
        if worker is not None:
            episode_id = worker.tag(episode_id)
        session = Session(episode_id, served, episode, held_out, now, now + self.limits.episode_timeout_s, now)
        self._open[episode_id] = session
        self.opened += 1
        self._count("opened")
        return session

    def get(self, episode_id: str) -> Session:
        """The open episode ``episode_id``, its idle clock restarted. Raises :class:`ApiError`:
        404 for an id never seen, 409 for an episode that is done, 410 for one closed or
        expired; an episode past its wall-clock limit is closed now and answered 410."""
        session = self._open.get(episode_id)
        if session is None:
            raise self.gone(episode_id)
        now = time.monotonic()
        if now >= session.deadline and not session.busy:
            self.close(session, "expired", self._deadline_reason())
            raise self.gone(episode_id)
        session.last_seen = now
        return session

    def gone(self, episode_id: str) -> ApiError:
        """The error for an episode that is not open."""
        closed = self._closed.get(episode_id)
        lost = self.worker.lost(episode_id) if self.worker is not None else None
        if closed is None and lost is not None:
            return lost_error(episode_id, lost)
        if closed is None:
            return ApiError(404, "episode-not-found", f"no episode {episode_id!r} on this server",
                            hint="create one with POST /v1/environments/NAMESPACE/NAME/episodes")
        kind, reason = closed
        if kind == "done":
            return ApiError(409, "episode-done", f"episode {episode_id!r} is done ({reason})",
                            hint="start a new episode to play the task again")
        code = "episode-expired" if kind == "expired" else "episode-closed"
        return ApiError(410, code, f"episode {episode_id!r} was closed: {reason}",
                        hint="start a new episode; keep requests within the server's idle timeout "
                             "and wall-clock limit (GET /v1/health shows them)")

    def close(self, session: Session, kind: str, reason: str) -> None:
        """Close ``session`` and free its state (after its running step, if one is running).
        ``kind`` is ``done``, ``closed`` or ``expired``."""
        if self._open.pop(session.id, None) is None:
            return
        if self.worker is not None:
            self.worker.counters.add(self.worker.index, "open", -1)
        self._closed[session.id] = (kind, reason)
        while len(self._closed) > _TOMBSTONES:
            self._closed.popitem(last=False)
        if kind == "expired":
            self.expired += 1
            self._count("expired")
            log.info("episode %s of %s closed: %s", session.id, session.served.name, reason)
        task = session.step_task
        if task is not None and not task.done():
            # A tool or verifier still runs in a worker thread on this state; it cannot be
            # stopped from here, so the state is freed when it returns.
            task.add_done_callback(lambda done: _after_step(done, session))
        else:
            _release(session)

    def close_all(self, reason: str) -> None:
        for session in list(self._open.values()):
            self.close(session, "closed", reason)

    def reap(self, now: float | None = None) -> int:
        """Close the episodes idle longer than ``idle-timeout-s`` or past their wall-clock
        limit; return how many were closed."""
        now = time.monotonic() if now is None else now
        idle = self.limits.idle_timeout_s
        closed = 0
        for session in list(self._open.values()):
            if session.busy:
                continue  # a running step keeps its episode; its own deadline bounds it
            if now >= session.deadline:
                self.close(session, "expired", self._deadline_reason())
            elif now - session.last_seen >= idle:
                self.close(session, "expired", f"no request for {idle:g} s (idle-timeout-s)")
            else:
                continue
            closed += 1
        return closed

    async def reap_forever(self) -> None:
        """Run :meth:`reap` every quarter of the shorter limit (between 50 ms and 5 s)."""
        interval = min(5.0, max(0.05, min(self.limits.idle_timeout_s, self.limits.episode_timeout_s) / 4))
        while True:
            await asyncio.sleep(interval)
            try:
                self.reap()
            except Exception:  # never let the reaper die: abandoned episodes would pile up
                log.exception("closing idle episodes failed")

    def _deadline_reason(self) -> str:
        return f"its wall-clock limit of {self.limits.episode_timeout_s:g} s passed (episode-timeout-s)"


def lost_error(ident: str, index: int) -> ApiError:
    """The 410 for an episode (or session) held by worker process ``index``, which stopped."""
    return ApiError(410, "episode-lost", f"episode {ident!r} was held by worker process {index} of this server, "
                                         "which stopped; its state is lost",
                    hint="start a new episode; the server's other episodes are not affected")


def _after_step(task: asyncio.Task[Any], session: Session) -> None:
    if not task.cancelled() and task.exception() is not None:  # retrieved, or asyncio logs it as lost
        log.info("the step of closed episode %s raised %s", session.id, type(task.exception()).__name__)
    _release(session)


def _release(session: Session) -> None:
    try:
        session.episode.close()
    except Exception:
        log.exception("releasing the state of episode %s of %s failed", session.id, session.served.name)
