"""The ASGI application: the routes of spec/serve.md on Starlette.

Every handler answers JSON; every error is ``{"error": {status, code, message, hint}}``
(:mod:`envhub_registry._errors`). Request bodies are parsed by pydantic models, so a bad
body is answered 400 with every problem in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from envhub import __version__ as envhub_version
from envhub.errors import EnvhubError, UsageError
from envhub.runtime import Environment, as_assistant_message
from envhub.runtime.served import (
    MAX_INT,
    MAX_PAGE,
    MIN_INT,
    PREFIX,
    CreateEpisodeRequest,
    EpisodeCreated,
    EpisodeStatus,
    ScoreRequest,
    ScoreView,
    StepRequest,
    StepView,
    TaskPage,
)
from envhub_registry._auth import Auth
from envhub_registry._config import ServeConfig
from envhub_registry._errors import ApiError, JSONResponse, error_response, from_envhub_error
from envhub_registry._served import Served
from envhub_registry._sessions import Session, Sessions

if TYPE_CHECKING:
    from envhub_registry._mcp import McpEndpoint
    from envhub_registry._workers import Worker

__all__ = ["create_app"]

log = logging.getLogger("envhub_registry")


_B = TypeVar("_B", bound=BaseModel)


async def _parse(request: Request, model: type[_B]) -> _B:
    body = await request.body()
    if not body.strip():
        raise ApiError(400, "invalid-body", f"{request.method} {request.url.path} needs a JSON body",
                       hint="see spec/serve.md for the request body")
    try:
        return model.model_validate_json(body)
    except ValidationError as e:
        errors = e.errors(include_url=False, include_input=False)
        if any(err["type"] == "json_invalid" for err in errors):
            raise ApiError(400, "invalid-json", f"the request body is not valid JSON: {errors[0]['msg']}",
                           hint="send a JSON object with Content-Type: application/json") from None
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'body'}: "
                             f"{str(err['msg']).removeprefix('Value error, ')}" for err in errors)
        raise ApiError(400, "invalid-body", f"invalid request body: {problems}",
                       hint="see spec/serve.md for the request body") from None


def _query_int(request: Request, name: str, default: int | None, *, minimum: int = 0,
               maximum: int = MAX_INT) -> int | None:
    """Query parameter ``name`` as an integer from ``minimum`` to ``maximum``, or ``default``
    when absent. Raises :class:`ApiError` 400 ``invalid-query`` otherwise."""
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    bound = f"from {minimum} to {maximum}"
    digits = text.strip().lstrip("+-")
    if not digits.isascii() or not digits.isdigit():
        raise ApiError(400, "invalid-query", f"query parameter {name}={_shown(text)} is not an integer",
                       hint=f"pass a whole number {bound}")
    if len(digits.lstrip("0")) > 19:  # past any 64-bit integer; int() would refuse past 4,300 digits
        raise ApiError(400, "invalid-query",
                       f"query parameter {name}={_shown(text)} is out of range: it must be {bound}",
                       hint=f"pass a whole number {bound}")
    value = int(text)
    if value < minimum or value > maximum:
        raise ApiError(400, "invalid-query", f"query parameter {name}={value} is out of range: it must be {bound}",
                       hint=f"pass a whole number {bound}")
    return value


def _shown(text: str) -> str:
    """A query value as an error quotes it: its repr, cut to 40 characters."""
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "..."


# --- the application ---------------------------------------------------------------------------


class _Api:
    def __init__(self, envs: Sequence[Environment], config: ServeConfig, worker: Worker | None = None) -> None:
        self.config = config
        self.worker = worker
        self.served: dict[str, Served] = {}
        for env in envs:
            if env.name in self.served:
                raise UsageError(f"{env.name} is given twice; a server serves each environment once",
                                 hint="serve one version of each environment, or run a server per version")
            self.served[env.name] = Served(env)
        self.sessions = Sessions(config.limits, worker)
        self.auth = Auth(config.access)
        self.started = time.time()
        self.mcp: McpEndpoint | None = None

    def _served(self, request: Request) -> Served:
        name = f"{request.path_params['namespace']}/{request.path_params['name']}"
        served = self.served.get(name)
        if served is None:
            known = ", ".join(sorted(self.served)) or "none"
            raise ApiError(404, "environment-not-found", f"this server does not serve {name} (it serves: {known})",
                           hint="GET /v1/environments lists what it serves")
        return served

    # -- handlers ------------------------------------------------------------------------

    async def health(self, request: Request) -> JSONResponse:
        limits = self.config.limits
        sessions, worker = self.sessions, self.worker
        episodes = {"open": len(sessions), "opened": sessions.opened, "expired": sessions.expired,
                    "refused": sessions.refused}
        workers: dict[str, Any] | None = None
        if worker is not None:
            # The counts of the whole server, whichever worker answers; each worker's beside them.
            counters = worker.counters
            episodes = {name: counters.total(name) for name in episodes}
            workers = {"count": worker.count, "this": worker.index, "pid": os.getpid(),
                       "each": counters.table()}
        return JSONResponse({
            "status": "ok", "envhub_version": envhub_version, "environments": sorted(self.served),
            "episodes": episodes,
            **({"workers": workers} if workers is not None else {}),
            "limits": {"max_episodes": limits.max_episodes, "idle_timeout_s": limits.idle_timeout_s,
                       "episode_timeout_s": limits.episode_timeout_s, "max_body_bytes": limits.max_body_bytes},
            "auth": {"require_token": self.auth.require_token, "heldout_enabled": self.auth.has_tokens},
        })

    async def environments(self, request: Request) -> JSONResponse:
        self.auth.check(request, held_out=False, what="listing environments")
        return JSONResponse({"environments": [s.detail().summary_json() for _, s in sorted(self.served.items())]})

    async def environment(self, request: Request) -> JSONResponse:
        served = self._served(request)
        self.auth.check(request, held_out=False, what=served.name)
        return JSONResponse(served.detail().to_json())

    async def tasks(self, request: Request) -> JSONResponse:
        served = self._served(request)
        split = request.path_params["split"]
        held_out = served.held_out(split)
        self.auth.check(request, held_out=held_out, what=f"split {split!r} of {served.name}")
        seed = _query_int(request, "seed", None, minimum=MIN_INT)
        limit = _query_int(request, "limit", None)
        offset = _query_int(request, "offset", 0)
        size = _query_int(request, "size", MAX_PAGE, minimum=1, maximum=MAX_PAGE)
        assert offset is not None and size is not None
        tasks = served.tasks(split, seed=seed, limit=limit)
        page = tasks[offset:offset + size]
        return JSONResponse(TaskPage(served.name, split, held_out, len(tasks), offset,
                                     [served.task_view(t, held_out=held_out) for t in page],
                                     served.env.tool_specs).to_json())

    async def task(self, request: Request) -> JSONResponse:
        served = self._served(request)
        split = request.path_params["split"]
        held_out = served.held_out(split)
        self.auth.check(request, held_out=held_out, what=f"split {split!r} of {served.name}")
        task = served.env.task(split, request.path_params["task_id"])
        return JSONResponse({"environment": served.name, "task": served.task_view(task, held_out=held_out).to_json(),
                             "tools": served.env.tool_specs})

    async def create_episode(self, request: Request) -> JSONResponse:
        served = self._served(request)
        body = await _parse(request, CreateEpisodeRequest)
        held_out = served.held_out(body.split)
        self.auth.check(request, held_out=held_out, what=f"split {body.split!r} of {served.name}")
        created = await self.start_episode(served, body, held_out=held_out)
        return JSONResponse(created.to_json(), status_code=201)

    async def start_episode(self, served: Served, body: CreateEpisodeRequest, *, held_out: bool) -> EpisodeCreated:
        """Open and reset an episode of ``served`` as ``body`` asks (the caller has checked
        access). Raises :class:`ApiError` (429 past max-episodes, 500 if the environment
        fails to start it) and what the environment raises for an unknown split or task."""
        env = served.env
        # The policy's model comes with each request; the one environment serves every model.
        env.check_scoring(body.scoring)
        task = (env.task(body.split, body.task_id) if body.task_id is not None
                else served.task_at(body.split, body.index or 0))
        episode = env.episode(task, seed=body.seed, scoring=body.scoring)
        session = self.sessions.open(served, episode, held_out=held_out)
        try:
            observation = await episode.areset()
        except Exception as e:
            self.sessions.close(session, "closed", "the environment failed to start it")
            raise self._environment_error(served, e, held_out, "starting the episode") from None
        limits = self.config.limits
        return EpisodeCreated(
            session.id, served.name, task.split, served.task_view(task, held_out=held_out), held_out, observation,
            episode.max_turns, limits.idle_timeout_s, limits.episode_timeout_s,
        )

    def _session(self, request: Request) -> Session:
        session = self.sessions.get(request.path_params["episode_id"])
        self.auth.check(request, held_out=session.held_out,
                        what=f"split {session.episode.task.split!r} of {session.served.name}")
        return session

    async def episode(self, request: Request) -> JSONResponse:
        session = self._session(request)
        episode = session.episode
        now = time.monotonic()
        return JSONResponse(EpisodeStatus(
            session.id, session.served.name, episode.task.split, episode.task.id, session.held_out, episode.turns,
            episode.done, session.busy, episode.observation(), round(session.deadline - now, 3),
        ).to_json())

    async def step(self, request: Request) -> JSONResponse:
        session = self._session(request)
        body = await _parse(request, StepRequest)
        if session.busy:
            raise ApiError(409, "episode-busy", f"episode {session.id!r} is already taking a step",
                           hint="send one step at a time, and wait for each answer")
        try:
            action = as_assistant_message(body.action)
        except TypeError as e:
            raise ApiError(400, "invalid-action", str(e),
                           hint='send the assistant\'s text, or '
                                '{"role": "assistant", "content": ..., "tool_calls": [...]}') from None
        view = await self.take_step(session, action)
        return JSONResponse(view.to_json())

    async def take_step(self, session: Session, action: dict[str, Any]) -> StepView:
        """Take the turn ``action`` in ``session``'s episode under its wall-clock limit, and
        close the episode when it ends. Raises :class:`ApiError` 409 while another step
        runs, 410 when the limit passes during the step."""
        if session.busy:
            raise ApiError(409, "episode-busy", f"episode {session.id!r} is already taking a step",
                           hint="send one step at a time, and wait for each answer")
        episode = session.episode
        before = len(episode.messages)
        step = asyncio.ensure_future(episode.astep(action))
        session.step_task = step
        finished, _ = await asyncio.wait({step}, timeout=max(0.0, session.deadline - time.monotonic()))
        if not finished:
            limit = self.config.limits.episode_timeout_s
            self.sessions.close(session, "expired", f"its wall-clock limit of {limit:g} s "
                                                    "passed during a step (episode-timeout-s)")
            raise self.sessions.gone(session.id)
        session.step_task = None
        session.last_seen = time.monotonic()
        try:
            result = step.result()
        except Exception as e:
            # Not the client's fault, and not the server's: the episode ends here, with the
            # failure recorded as its error (as a rollout record records it), reward null.
            self.sessions.close(session, "done", "the environment failed in a step")
            failure = self._environment_error(session.served, e, session.held_out, "this step")
            return StepView.failed(episode.observation(), episode.messages[before:], failure.message,
                                   turns=episode.turns)
        view = StepView.of(result, episode.messages[before:], turns=episode.turns, truncated=episode.truncated,
                           held_out=session.held_out, episode=episode)
        if result.done:
            self.sessions.close(session, "done", "it has ended")
        return view

    async def close_episode(self, request: Request) -> JSONResponse:
        episode_id = request.path_params["episode_id"]
        try:
            session = self._session(request)
        except ApiError as e:
            if e.status in (409, 410):  # already closed: closing again is not an error
                return JSONResponse({"episode_id": episode_id, "closed": True})
            raise
        self.sessions.close(session, "closed", "its client closed it")
        return JSONResponse({"episode_id": episode_id, "closed": True})

    async def score(self, request: Request) -> JSONResponse:
        served = self._served(request)
        body = await _parse(request, ScoreRequest)
        held_out = served.held_out(body.split)
        self.auth.check(request, held_out=held_out, what=f"split {body.split!r} of {served.name}")
        env = served.env
        env.check_scoring(body.scoring)
        task = env.task(body.split, body.task_id)
        answer: Any = body.completion if body.completion is not None else body.messages
        try:
            async with asyncio.timeout(self.config.limits.episode_timeout_s):
                score = await env.ascore(task, answer, context=body.scoring)
        except TimeoutError:
            raise ApiError(504, "score-timeout", f"scoring took longer than {self.config.limits.episode_timeout_s:g} s "
                                                 "(episode-timeout-s)") from None
        return JSONResponse({"environment": served.name, "split": body.split, "task_id": task.id,
                             **ScoreView.of(score, held_out=held_out).to_json()})

    # -- errors --------------------------------------------------------------------------

    def _environment_error(self, served: Served, e: Exception, held_out: bool, where: str) -> ApiError:
        """The 500 ``environment-error`` for ``e``, raised by the environment in ``where``;
        on a held-out split only the exception's type is named (its text may quote an answer)."""
        if isinstance(e, EnvhubError) and not held_out:
            return ApiError(500, "environment-error",
                            f"{served.name}: {where} failed: {e.message}; the episode is closed", hint=e.hint)
        log.error("%s: %s failed", served.name, where, exc_info=e)
        detail = (f"{type(e).__name__} (details are withheld on held-out splits; see the server's log)" if held_out
                  else f"{type(e).__name__}: {e}")
        return ApiError(500, "environment-error", f"{served.name}: the environment's code failed in {where}: "
                                                  f"{detail}; the episode is closed",
                        hint="this is a bug in the environment; tell its author")

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        reaper = asyncio.create_task(self.sessions.reap_forever())
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.mcp is not None:
                    await stack.enter_async_context(self.mcp.run())
                yield
        finally:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
            self.sessions.close_all("the server stopped")
            for served in self.served.values():
                served.close()


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _envhub_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EnvhubError)
    return from_envhub_error(exc).response()


_HTTP_CODES = {404: "no-such-route", 405: "method-not-allowed", 413: "body-too-large"}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status == 413:
        return _too_large(request.app.state.max_body_bytes)
    if status == 404:
        return error_response(404, "no-such-route", f"no route {request.method} {request.url.path}",
                              hint=f"the API lives under {PREFIX}/ (see spec/serve.md)")
    return error_response(status, _HTTP_CODES.get(status, "http-error"),
                          f"{request.method} {request.url.path}: {exc.detail}", headers=dict(exc.headers or {}))


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    # No exception text: it could quote a held-out answer.
    return error_response(500, "internal-error", f"the server failed to answer {request.method} {request.url.path}",
                          hint="see the server's log; this is a bug in envhub-registry or the environment")


class _BodyLimit:
    """Request bodies over ``max_body_bytes`` are answered 413 with the JSON error body.

    Starlette's own ``max_body_size`` does this too, but answers in plain text whenever a
    handler responds before reading the body (an unknown episode, a missing token), and
    every error of this API is JSON. A declared Content-Length over the limit is answered at
    once; a body sent without one is counted as it is read, and the 413 raised then goes
    through the app's exception handlers."""

    def __init__(self, app: Any, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        if scope.get("envhub.body_too_large"):  # counted by the worker's router (_workers.TOO_LARGE)
            response = _too_large(limit)
            response.headers["Connection"] = "close"
            await response(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if value.isdigit() and int(value) > limit:
                    response = _too_large(limit)
                    response.headers["Connection"] = "close"  # the unread body must not be taken for a request
                    await response(scope, receive, send)
                    return
                break
        received = 0

        async def counting_receive() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413)
            return message

        await self.app(scope, counting_receive, send)


def _too_large(limit: int) -> JSONResponse:
    return error_response(413, "body-too-large", f"the request body is larger than this server's limit of "
                                                 f"{limit} bytes (max-body-bytes)",
                          hint="send a smaller body; the server's operator can raise --max-body-bytes")


def create_app(envs: Sequence[Environment], config: ServeConfig | None = None, *,
               worker: Worker | None = None) -> Starlette:
    """The ASGI application serving ``envs`` under ``config`` (default: the defaults), in
    ``worker`` when the server runs several worker processes.

    Raises :class:`UsageError` if two environments have the same name, or if
    ``ors-at-root`` is set and an ORS route at the root would take one of envhub's paths."""
    config = config or ServeConfig()
    api = _Api(envs, config, worker)
    env_path = PREFIX + "/environments/{namespace}/{name}"
    routes: list[BaseRoute] = [
        Route(PREFIX + "/health", api.health, methods=["GET"]),
        Route(PREFIX + "/environments", api.environments, methods=["GET"]),
        Route(env_path, api.environment, methods=["GET"]),
        Route(env_path + "/splits/{split}/tasks", api.tasks, methods=["GET"]),
        Route(env_path + "/splits/{split}/tasks/{task_id:path}", api.task, methods=["GET"]),
        Route(env_path + "/episodes", api.create_episode, methods=["POST"]),
        Route(env_path + "/score", api.score, methods=["POST"]),
        Route(PREFIX + "/episodes/{episode_id}", api.episode, methods=["GET"]),
        Route(PREFIX + "/episodes/{episode_id}", api.close_episode, methods=["DELETE"]),
        Route(PREFIX + "/episodes/{episode_id}/step", api.step, methods=["POST"]),
    ]
    try:
        from envhub_registry._mcp import McpEndpoint
    except ImportError as e:  # the mcp SDK is optional: without it, /mcp is not served
        log.info("the MCP endpoint (/mcp) is not served: %s (install envhub-rl[mcp])", e)
    else:
        api.mcp = McpEndpoint(api, config.host)
        routes += api.mcp.routes()
    from envhub_registry._openenv import OpenEnvEndpoint

    routes += OpenEnvEndpoint(api).routes()
    from envhub_registry._ors import OrsEndpoint  # the Open Reward Standard's API, under /ors
    ors = OrsEndpoint(api)
    if config.ors_at_root:
        # After envhub's own routes, and only where none of them matches (checked here).
        routes += ors.routes()
        at_root = ors.root_routes()
        ors.check_root(at_root, routes)
        routes += at_root
    else:
        routes += ors.routes()
    app = Starlette(routes=routes, lifespan=api.lifespan,
                    middleware=[Middleware(_BodyLimit, max_body_bytes=config.limits.max_body_bytes)],
                    exception_handlers={ApiError: _api_error, EnvhubError: _envhub_error,
                                        HTTPException: _http_error, Exception: _internal_error})
    app.state.api = api
    app.state.max_body_bytes = config.limits.max_body_bytes
    return app
