"""Environments served over HTTP by ``envhub serve``: ``envhub.load("http://host:port/ns/name")``.

A :class:`RemoteEnvironment` offers what an :class:`~envhub.runtime.Environment` offers to
``envhub eval`` and to code written against the runtime API (``tasks``, ``task``,
``episode``, ``score``, ``provenance``, ``close``), but its episodes run on the server: each
``reset`` creates an episode there, each ``step`` sends the model's turn and gets back the
observation, the reward and ``done``. The server keeps held-out answers: a held-out task
here holds only what the model sees, and its score comes back without a breakdown.

The protocol is spec/serve.md, its messages :mod:`envhub.runtime.served`. Requests that
cannot have changed anything on the server are retried (connection failures, 429, 503); a
step whose request reached the server is not, so a turn is never taken twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast, overload
from urllib.parse import quote, unquote, urlsplit

import orjson

from envhub._version import __version__
from envhub.errors import EnvhubError, EnvNotFoundError, InvalidIdError, UsageError
from envhub.manifest import Manifest, parse_manifest
from envhub.runtime._environment import reference_turns
from envhub.runtime._http import (
    ConnectError,
    ConnectTimeout,
    HttpClient,
    HttpResponse,
    Timeout,
    TransportError,
    backoff,
    jitter,
    retry_after,
)
from envhub.runtime._protocols import SplitInfo
from envhub.runtime._types import (
    Action,
    Message,
    Observation,
    Score,
    StepResult,
    Task,
    Trajectory,
    as_assistant_message,
)
from envhub.runtime.served import (
    MAX_PAGE,
    PREFIX,
    CreateEpisodeRequest,
    EnvironmentDetail,
    EpisodeCreated,
    ErrorBody,
    ProtocolError,
    ScoreRequest,
    ScoreView,
    StepRequest,
    StepView,
    TaskPage,
    TaskView,
    judge_fields,
)
from envhub.settings import Settings

if TYPE_CHECKING:
    from envhub.runtime._episode import EndedBy
    from envhub.runtime.verifiers import ScoringContext

__all__ = ["RemoteEnvironment", "RemoteEpisode", "RemoteError", "load_remote"]

#: Tasks per page (the server's maximum).
PAGE = MAX_PAGE
#: Retry statuses: the server did nothing (too many open episodes; unavailable).
_RETRY_STATUSES = frozenset({429, 503})
#: The longest Retry-After honoured; a longer one falls back to the backoff.
_MAX_RETRY_AFTER_S = 30.0
#: Shorter than the server's keep-alive (75 s), so a pooled connection is dropped by the
#: client before the server closes it under a request.
_KEEPALIVE_S = 30.0


class RemoteError(EnvhubError):
    """An ``envhub serve`` server refused a request or failed, or cannot be reached.
    ``status`` and ``code`` are those of its answer (None when there was none)."""

    def __init__(self, message: str, *, hint: str | None = None, status: int | None = None,
                 code: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.code = code


def load_remote(url: str, *, settings: Settings, token: str | None = None, max_connections: int = 256,
                max_retries: int = 4, timeout_s: float = 600.0, busy_wait_s: float = 120.0,
                http: HttpClient | None = None) -> RemoteEnvironment:
    """The environment ``NAMESPACE/NAME`` that the ``envhub serve`` at ``url``
    (``http[s]://HOST:PORT[/PREFIX]/NAMESPACE/NAME[@VERSION]``) serves.

    ``token`` (default: ``ENVHUB_SERVE_TOKEN``) is sent as a bearer token; held-out splits
    need one. A failed connection is retried ``max_retries`` times; a server at its limit
    of open episodes (429) is waited for up to ``busy_wait_s`` seconds. ``http`` shares an
    :class:`~envhub.runtime._http.HttpClient`'s connections with the run's other clients (it is
    then the caller's to close, and its ``max_connections`` applies); without one the
    environment makes its own, closed by :meth:`RemoteEnvironment.aclose`.

    Raises :class:`UsageError` for a URL that names no environment, :class:`EnvNotFoundError`
    when the server does not serve it (or not at the version asked for), and
    :class:`RemoteError` when the server cannot be reached or refuses.
    """
    base, ref = _parse_url(url)
    server = _Http(base, token if token is not None else settings.serve_token, max_connections=max_connections,
                   max_retries=max_retries, timeout_s=timeout_s, busy_wait_s=busy_wait_s, client=http)
    path = f"{PREFIX}/environments/{ref.name}"
    try:
        detail = _decoded(EnvironmentDetail.from_json, server.request("GET", path), f"{base}{path}")
    except BaseException:
        server.close()
        raise
    version = detail.version
    if (ref.version is not None or ref.specifier is not None) and not ref.accepts(version):
        server.close()
        wanted = f"@{ref.version}" if ref.version is not None else str(ref.specifier)
        raise EnvNotFoundError(f"{base} serves {ref.name} {version}, not {ref.name}{wanted}",
                               hint=f"load {base}/{ref.name} (any version), "
                                    "or a server that serves the version you need")
    return RemoteEnvironment(f"{base}/{ref.name}", path, detail, server)


def _parse_url(url: str) -> tuple[str, Any]:
    from envhub.ids import parse_ref

    hint = "use http://HOST:PORT/NAMESPACE/NAME, as printed by 'envhub serve'"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{url!r} is not an http:// or https:// URL of a server", hint=hint)
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 2:
        raise UsageError(f"{url!r} names no environment", hint=hint)
    try:
        ref = parse_ref(unquote("/".join(segments[-2:])))
    except InvalidIdError as e:
        raise UsageError(f"{url!r} does not end in an environment id ({e.message})", hint=hint) from e
    prefix = "".join(f"/{s}" for s in segments[:-2])
    return f"{parts.scheme}://{parts.netloc}{prefix}", ref


class RemoteEnvironment:
    """An environment run by a server. Made by :func:`envhub.load` for an ``http(s)://`` URL."""

    def __init__(self, url: str, path: str, detail: EnvironmentDetail, http: _Http) -> None:
        self.url = url
        self._path = path
        self._http = http
        self.name: str = detail.name
        self.version: str = detail.version
        self.score_version: int = detail.score_version
        self.digest: str = detail.digest
        self.max_turns: int = detail.max_turns
        self.tool_specs: list[dict[str, Any]] = list(detail.tools)
        self.server_provenance: dict[str, Any] = dict(detail.provenance)
        self.source = url
        #: None: the bundle's files stay on the server (golden trajectories cannot be replayed here).
        self.root: Path | None = None
        self.manifest: Manifest = _manifest(detail.manifest, url)
        self._splits = {s.name: SplitInfo(s.name, s.held_out, s.available, s.rows, s.generated)
                        for s in detail.splits}
        self._background: set[asyncio.Task[Any]] = set()

    # -- tasks --------------------------------------------------------------------------

    @property
    def splits(self) -> dict[str, SplitInfo]:
        """Every split the server knows, held-out ones marked (``available``: the server has them)."""
        return dict(self._splits)

    def tasks(self, split: str, *, seed: int | None = None, limit: int | None = None) -> Sequence[Task]:
        """The split's tasks as the server orders them (file order, or shuffled by ``seed``),
        at most ``limit``; fetched a page at a time as they are used. A held-out task holds
        only what the model sees (id, prompt, difficulty)."""
        self._split(split)
        if limit is not None and limit < 0:
            raise UsageError(f"limit must be >= 0, got {limit}")
        return _RemoteTasks(self, split, seed, limit)

    def task(self, split: str, task_id: str) -> Task:
        """One task by id; :class:`EnvNotFoundError` if there is none."""
        self._split(split)
        path = f"{self._path}/splits/{quote(split, safe='')}/tasks/{quote(task_id, safe='')}"
        data = self._http.request("GET", path)
        return self._task(_decoded(TaskView.from_json, data.get("task"), self.url))

    def _split(self, split: str) -> SplitInfo:
        info = self._splits.get(split)
        if info is None:
            known = ", ".join(self._splits)
            raise EnvNotFoundError(f"{self.name} has no split {split!r} (splits: {known})",
                                   hint=f"pass one of: {known}")
        return info

    def _page(self, split: str, seed: int | None, limit: int | None, offset: int) -> TaskPage:
        params: dict[str, Any] = {"offset": offset, "size": PAGE}
        if seed is not None:
            params["seed"] = seed
        if limit is not None:
            params["limit"] = limit
        data = self._http.request("GET", f"{self._path}/splits/{quote(split, safe='')}/tasks", params=params)
        return _decoded(TaskPage.from_json, data, self.url)

    def _task(self, view: TaskView) -> Task:
        spec = self.manifest.tasks  # a held-out task's row: what the model sees, under the manifest's names
        return view.to_task(id_field=spec.id_field, prompt_field=spec.prompt_field,
                            difficulty_field=spec.difficulty_field)

    # -- episodes and scores ------------------------------------------------------------

    def episode(self, task: Task, *, seed: int | None = None, scoring: ScoringContext | None = None
                ) -> RemoteEpisode:
        """A new episode of ``task``, run on the server; ``reset()`` starts it there, sending
        ``scoring``'s policy model (an llm-judge there refuses to grade its own model)."""
        return RemoteEpisode(self, task, seed=seed, scoring=scoring)

    def score(self, task: Task, completion_or_trajectory: str | Sequence[Message] | Trajectory, *,
              state: Any = None, context: ScoringContext | None = None) -> Score:
        """The server's score of a completion or trajectory (the answer stays on the server;
        on a held-out split the score has no breakdown), for ``context``'s policy model.
        Raises :class:`UsageError` when the server refuses ``context`` (a self-judging llm-judge)."""
        body = self._score_body(task, completion_or_trajectory, context)
        data = self._http.request("POST", f"{self._path}/score", body)
        return _decoded(ScoreView.from_json, data, self.url).to_score()

    async def ascore(self, task: Task, completion_or_trajectory: str | Sequence[Message] | Trajectory, *,
                     state: Any = None, context: ScoringContext | None = None) -> Score:
        body = self._score_body(task, completion_or_trajectory, context)
        data = await self._http.arequest("POST", f"{self._path}/score", body)
        return _decoded(ScoreView.from_json, data, self.url).to_score()

    def _score_body(self, task: Task, value: str | Sequence[Message] | Trajectory,
                    context: ScoringContext | None) -> dict[str, Any]:
        if isinstance(value, str):
            return ScoreRequest.model_construct(split=task.split, task_id=task.id, completion=value,
                                                **judge_fields(context)).to_json()
        return ScoreRequest.model_construct(split=task.split, task_id=task.id, messages=Trajectory.of(value).messages,
                                            **judge_fields(context)).to_json()

    def check_scoring(self, context: ScoringContext) -> None:
        """Nothing here: the verifier is on the server, which checks each request's context
        (an episode or a score for a self-judging llm-judge is refused there, as a UsageError)."""

    def reference_actions(self, task: Task) -> list[Message]:
        """The reference turns of a task of a public split, as :meth:`Environment.reference_actions`
        computes them from its row. Raises :class:`UsageError` for a held-out split: the
        server never sends its references or answers."""
        info = self._splits.get(task.split)
        if info is None or info.held_out:
            raise UsageError(
                f"the reference policy cannot play held-out split {task.split!r} of {self.name} served by "
                f"{self.url}: the server never sends held-out references or answers",
                hint="use --policy reference on a public split, or check the held-out references where they are "
                     "('envhub validate --check' on the server's copy of the bundle)")
        # The rule reads only the manifest's verifier and the task's row, both of which are here
        # (the verifier itself is on the server: a plugin's kind has no reference here).
        return reference_turns(self.manifest, task, None)

    # -- provenance ---------------------------------------------------------------------

    def provenance(self) -> dict[str, Any]:
        """What every rollout record carries: the server's name, version, digest and
        score-version of the environment, and this URL as its source."""
        out: dict[str, Any] = {"env": self.name, "version": self.version, "digest": self.digest,
                               "score_version": self.score_version, "source": self.source,
                               "envhub_version": __version__}
        if self.server_provenance.get("locator"):
            out["locator"] = self.server_provenance["locator"]
        return out

    def task_provenance(self, task: Task) -> None:
        """None: every task is the served environment's own (``envhub serve`` serves no
        composite environments)."""
        return None

    def close(self) -> None:
        """Close the connections. Episodes still open on the server are left to its idle timeout."""
        self._http.close()

    async def aclose(self) -> None:
        """:meth:`close`, from the event loop that ran the episodes: its connections too."""
        await self._http.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RemoteEnvironment {self.name}@{self.version} at {self.url}>"


class _RemoteTasks(Sequence[Task]):
    """The tasks of a split on the server, fetched a page at a time; the first page now, so
    that a missing token or split is an error at once rather than at the first task."""

    def __init__(self, env: RemoteEnvironment, split: str, seed: int | None, limit: int | None) -> None:
        self._env = env
        self._split = split
        self._seed = seed
        self._limit = limit
        first = env._page(split, seed, limit, 0)
        self._total = first.total
        self._pages: dict[int, list[Task]] = {0: [env._task(v) for v in first.tasks]}

    def __len__(self) -> int:
        return self._total

    def _page(self, number: int) -> list[Task]:
        page = self._pages.get(number)
        if page is None:
            data = self._env._page(self._split, self._seed, self._limit, number * PAGE)
            page = self._pages[number] = [self._env._task(v) for v in data.tasks]
        return page

    @overload
    def __getitem__(self, index: int) -> Task: ...
    @overload
    def __getitem__(self, index: slice) -> list[Task]: ...
    def __getitem__(self, index: int | slice) -> Task | list[Task]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._total))]
        if index < 0:
            index += self._total
        if not 0 <= index < self._total:
            raise IndexError(f"task index {index} out of range ({self._total} tasks)")
        return self._page(index // PAGE)[index % PAGE]

    def __iter__(self) -> Iterator[Task]:
        for number in range(-(-self._total // PAGE)):
            yield from self._page(number)


class RemoteEpisode:
    """An episode run on the server: the same calls as :class:`~envhub.runtime.Episode`
    (``reset``/``step``, ``areset``/``astep``, ``with``/``async with``, ``close``)."""

    def __init__(self, env: RemoteEnvironment, task: Task, *, seed: int | None = None,
                 scoring: ScoringContext | None = None) -> None:
        self.env = env
        self.task = task
        self.seed = seed
        self.scoring = scoring
        self.id: str | None = None
        self.messages: list[Message] = []
        self.turns = 0
        self.done = False
        self.truncated = False
        self.score: Score | None = None
        self.tool_errors = 0
        #: This episode's turn limit (its task's own, as the server says).
        self.max_turns = env.max_turns
        #: The environment's reward for each turn; on a held-out split, known when the episode ends.
        self.turn_rewards: list[float | None] = []
        self.ended_by: EndedBy | None = None
        self.outcome: str | None = None
        self._observation = Observation([], env.tool_specs)

    # -- the sync API -------------------------------------------------------------------

    def reset(self) -> Observation:
        """Start (or restart) the episode: a new episode on the server; its first observation."""
        self._drop_sync()
        return self._started(self.env._http.request("POST", f"{self.env._path}/episodes", self._create_body()))

    def step(self, action: Action) -> StepResult:
        """Send the model's turn. Raises :class:`UsageError` before :meth:`reset` or after the
        episode is done, :class:`TypeError` for an action that is not a string or an
        assistant message, and :class:`RemoteError` when the server refuses or fails."""
        path = self._step_path()
        return self._stepped(self.env._http.request("POST", path, _step_body(action), idempotent=False))

    # -- the async API ------------------------------------------------------------------

    async def areset(self) -> Observation:
        await self._adrop()
        return self._started(await self.env._http.arequest("POST", f"{self.env._path}/episodes", self._create_body()))

    async def astep(self, action: Action) -> StepResult:
        path = self._step_path()
        return self._stepped(await self.env._http.arequest("POST", path, _step_body(action), idempotent=False))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._adrop()

    # -- shared -------------------------------------------------------------------------

    @property
    def state(self) -> None:
        """Always None: the state lives on the server."""
        return None

    @property
    def trajectory(self) -> Trajectory:
        return Trajectory(self.messages)

    @property
    def reward(self) -> float | None:
        return self.score.reward if self.score is not None else None

    def observation(self) -> Observation:
        """What the model sees now (the last observation the server sent)."""
        return self._observation

    def close(self) -> None:
        """Close the episode on the server, if it is open there; safe to call more than once.
        Inside an event loop the request is sent in the background; a failure to send it is
        ignored (the server's idle timeout frees the episode)."""
        episode_id, self.id = self.id, None
        if episode_id is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.env._http.close_episode(episode_id)
            return
        task = loop.create_task(self.env._http.aclose_episode(episode_id))
        self.env._background.add(task)
        task.add_done_callback(self.env._background.discard)

    async def aclose(self) -> None:
        """:meth:`close` for an event loop, as the local episode has it: the request is sent in
        the background, so a rollout's record is not held up by it."""
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------

    def _create_body(self) -> dict[str, Any]:
        task = self.task
        info = self.env._splits.get(task.split)
        # A generated task is found by index at once; by id, the server would generate the split to find it.
        if info is not None and info.generated:
            body = CreateEpisodeRequest.model_construct(split=task.split, index=task.index, seed=self.seed,
                                                        **judge_fields(self.scoring))
        else:
            body = CreateEpisodeRequest.model_construct(split=task.split, task_id=task.id, seed=self.seed,
                                                        **judge_fields(self.scoring))
        return body.to_json()

    def _started(self, data: Mapping[str, Any]) -> Observation:
        created = _decoded(EpisodeCreated.from_json, data, self.env.url)
        self.id = created.episode_id
        self._observation = created.observation
        self.messages = [dict(m) for m in self._observation.messages]
        self.turns = 0
        self.done = False
        self.truncated = False
        self.score = None
        self.tool_errors = 0
        self.max_turns = created.max_turns
        self.turn_rewards = []
        self.ended_by = None
        self.outcome = None
        return self._observation

    def _step_path(self) -> str:
        if self.done:
            raise UsageError("the episode is done; reset() it or start a new one")
        if self.id is None:
            raise UsageError("call reset() before step()")
        return f"{PREFIX}/episodes/{self.id}/step"

    def _stepped(self, data: Mapping[str, Any]) -> StepResult:
        step = _decoded(StepView.from_json, data, self.env.url)
        self._observation = step.observation
        self.messages.extend(step.new_messages)
        self.turns = step.turns
        self.truncated = step.truncated
        self.tool_errors += len(step.info.get("tool_errors") or [])
        self.turn_rewards.append(step.turn_reward)
        if step.done:
            self.done = True
            self.id = None  # the server closes an episode when it ends
            self.score = step.score()
            # The server's account of the turns (a held-out split's come only now).
            self.turn_rewards = list(step.turn_rewards) if step.turn_rewards is not None else \
                [None] * len(self.turn_rewards)
            self.ended_by, self.outcome = cast("EndedBy | None", step.ended_by), step.outcome
        return StepResult(self._observation, step.reward, step.done, step.info, step.turn_reward)

    def _drop_sync(self) -> None:
        if self.id is not None:
            episode_id, self.id = self.id, None
            self.env._http.close_episode(episode_id)

    async def _adrop(self) -> None:
        if self.id is not None:
            episode_id, self.id = self.id, None
            await self.env._http.aclose_episode(episode_id)


_T = TypeVar("_T")


def _decoded(decode: Callable[[Any], _T], data: Any, url: str) -> _T:
    """``decode(data)``, a :class:`ProtocolError` naming the server's ``url`` if it is not
    the message the protocol says."""
    try:
        return decode(data)
    except ProtocolError as e:
        raise ProtocolError(f"{url}: the server's answer is not what this envhub expects: {e.message}",
                            hint=e.hint) from None


def _step_body(action: Action) -> dict[str, Any]:
    """The step request for ``action``; :class:`TypeError` for one that is not the assistant's."""
    return StepRequest.model_construct(action=as_assistant_message(action)).to_json()


def _manifest(text: Any, url: str) -> Manifest:
    manifest, problems = parse_manifest(text if isinstance(text, str) else "", file=f"{url} (envhub.toml)")
    if manifest is None:
        detail = "; ".join(p.render() for p in problems[:3])
        raise RemoteError(f"{url}: the server sent a manifest this envhub cannot read: {detail}",
                          hint="use the same envhub version on the client as on the server")
    return manifest


# --- HTTP ---------------------------------------------------------------------------------------


class _Http:
    """The serve protocol's requests to one server, sync (``request``) and async
    (``arequest``), through an :class:`HttpClient`: JSON bodies, the bearer token, retries of
    what is safe to retry, and the server's refusals as envhub errors."""

    def __init__(self, base_url: str, token: str | None, *, max_connections: int, max_retries: int,
                 timeout_s: float, busy_wait_s: float, client: HttpClient | None = None) -> None:
        self.base_url = base_url
        self.max_retries = max_retries
        self.busy_wait_s = busy_wait_s
        self._headers = {"Accept": "application/json", "Content-Type": "application/json",
                         "User-Agent": f"envhub/{__version__}"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout_s = timeout_s
        self._own_client = client is None
        self._client = client if client is not None else HttpClient(
            max_connections=max_connections, timeout_s=timeout_s, connect_timeout_s=min(10.0, timeout_s),
            keepalive_s=_KEEPALIVE_S)

    def __repr__(self) -> str:  # never the token
        return f"_Http({self.base_url!r})"

    # -- requests -----------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, *, params: Mapping[str, Any] | None = None,
                idempotent: bool | None = None) -> dict[str, Any]:
        content = orjson.dumps(body) if body is not None else None
        url = self.base_url + path
        attempt = 0
        started = time.monotonic()
        while True:
            attempt += 1
            try:
                response = self._client.request_sync(method, url, content=content, params=params,
                                                     headers=self._headers, timeout_s=self._timeout_s)
            except TransportError as e:
                delay = self._retry(e, attempt, started, method, idempotent)
                if delay is None:
                    raise self._unreachable(method, url, e) from None
                time.sleep(delay)
                continue
            if response.status < 400:
                return _json(response, method, url)
            delay = self._retry(response, attempt, started, method, idempotent)
            if delay is None:
                raise _error(response, method, url)
            time.sleep(delay)

    async def arequest(self, method: str, path: str, body: Any = None, *, params: Mapping[str, Any] | None = None,
                       idempotent: bool | None = None) -> dict[str, Any]:
        content = orjson.dumps(body) if body is not None else None
        url = self.base_url + path
        attempt = 0
        started = time.monotonic()
        while True:
            attempt += 1
            try:
                response = await self._client.request(method, url, content=content, params=params,
                                                      headers=self._headers, timeout_s=self._timeout_s)
            except TransportError as e:
                delay = self._retry(e, attempt, started, method, idempotent)
                if delay is None:
                    raise self._unreachable(method, url, e) from None
                await asyncio.sleep(delay)
                continue
            if response.status < 400:
                return _json(response, method, url)
            delay = self._retry(response, attempt, started, method, idempotent)
            if delay is None:
                raise _error(response, method, url)
            await asyncio.sleep(delay)

    def close_episode(self, episode_id: str) -> None:
        """Best effort: the server frees an episode nobody closes after its idle timeout."""
        with contextlib.suppress(EnvhubError):
            self.request("DELETE", f"{PREFIX}/episodes/{episode_id}")

    async def aclose_episode(self, episode_id: str) -> None:
        with contextlib.suppress(EnvhubError):
            await self.arequest("DELETE", f"{PREFIX}/episodes/{episode_id}")

    def _retry(self, failure: HttpResponse | TransportError, attempt: int, started: float, method: str,
               idempotent: bool | None) -> float | None:
        """Seconds before the next attempt, or None when there is none to make.

        429 (the server has as many episodes open as it allows) is retried, as the server's
        Retry-After says, for up to ``busy_wait_s``: a slot frees when another episode ends.
        A failed connection and 503 are retried ``max_retries`` times with backoff; another
        transport failure only for an idempotent request, since a step may have reached the
        server."""
        if isinstance(failure, HttpResponse):
            if failure.status not in _RETRY_STATUSES:
                return None
            asked = retry_after(failure.headers, limit=_MAX_RETRY_AFTER_S)
            delay = jitter(asked) if asked else backoff(attempt, 0.1, 5.0)
            if failure.status == 429:
                return delay if time.monotonic() + delay - started <= self.busy_wait_s else None
        else:
            if idempotent is None:
                idempotent = method in ("GET", "DELETE")
            if not (idempotent or isinstance(failure, (ConnectError, ConnectTimeout))):
                return None
            delay = backoff(attempt, 0.1, 5.0)
        if attempt > self.max_retries:
            return None
        return delay

    def _unreachable(self, method: str, url: str, e: TransportError) -> RemoteError:
        kind = "timed out" if isinstance(e, Timeout) else "failed"
        return RemoteError(f"{method} {url} {kind}: {type(e).__name__}: {e or 'no detail'}",
                           hint=f"check that 'envhub serve' is running at {self.base_url} and reachable from here")

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()

    def close(self) -> None:
        if self._own_client:
            self._client.close_sync()


def _json(response: HttpResponse, method: str, url: str) -> dict[str, Any]:
    try:
        data = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise RemoteError(f"{method} {url} answered {response.status} but not with a JSON object: "
                          f"{response.text[:200]!r}",
                          hint="check that the URL points at an 'envhub serve' server", status=response.status)
    return data


def _error(response: HttpResponse, method: str, url: str) -> EnvhubError:
    """The envhub error for a refusal: 404 not found, 400 and 413 bad input, others RemoteError."""
    status = response.status
    try:
        error = ErrorBody.from_json(orjson.loads(response.content), status)
    except orjson.JSONDecodeError:
        error = None
    if error is None:
        return RemoteError(f"{method} {url} answered {status}: {response.text[:200]!r}",
                           hint="check that the URL points at an 'envhub serve' server", status=status)
    message, hint, code = error.message, error.hint, error.code or None
    if status == 404 and code != "no-such-route":
        return EnvNotFoundError(message, hint=hint)
    if status in (400, 413):
        return UsageError(message, hint=hint)
    return RemoteError(message, hint=hint, status=status, code=code)
