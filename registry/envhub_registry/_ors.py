"""The Open Reward Standard endpoint: episodes played over ORS's HTTP API, under ``/ors``.

The routes, bodies and errors are those of the OpenReward SDK's environment server
(``openreward.environments.server``, SDK 0.1.x; its client, ``openreward.api``, sends
them): ``/list_environments``, ``/{env}/tools``, ``/{env}/splits``, ``/{env}/tasks``,
``/{env}/num_tasks``, ``/{env}/task``, ``/{env}/task_range``; a session is a sid minted by
``/create_session`` (server-sent events), given a task by ``/create`` (a ``task_spec`` or
a split and index) and named by the ``X-Session-ID`` header after that; ``/{env}/prompt``,
``/{env}/messages``, ``/{env}/task_tools``, ``/{env}/call`` (server-sent events, ending
with the tool's ``{"ok": true, "output": {blocks, metadata, reward, finished}}``), ``/ping``
and ``/delete``. An environment's name is its envhub name (``acme/calc``), two path
segments. Each ``/{env}/...`` route is also served bare (``/tools``, ``/call``): the SDK sends
that for ``client.environments.get("acme/calc")``, naming the environment in ``X-Deployment``
(the session routes need no name: the sid names the episode). Errors are
``{"detail": ...}`` with an HTTP status, as FastAPI answers; a body that does not validate
is a 422 whose ``detail`` lists each problem as FastAPI does.

A session is a ``/v1`` episode (:class:`envhub_registry._sessions.Sessions`): the same
``max-episodes``, idle and wall-clock limits, the same tokens (``Authorization: Bearer``,
or the SDK's ``X-API-Key``) and held-out rules. A tool-use episode ends on the model's
final text turn: ORS calls that the *terminal tool*; it is listed as ``submit`` (argument
``answer``) and a call to it is the ``/v1`` step with that text.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Match, Mount, Route

from envhub import __version__ as envhub_version
from envhub.errors import EnvhubError, UsageError
from envhub.runtime.served import CreateEpisodeRequest
from envhub_registry._errors import ApiError, from_envhub_error
from envhub_registry._sessions import lost_error

if TYPE_CHECKING:
    from envhub_registry._app import _Api
    from envhub_registry._served import Served
    from envhub_registry._sessions import Session

__all__ = ["ORS_PREFIX", "ORS_VERSIONS", "OrsEndpoint"]

ORS_PREFIX = "/ors"
#: The ORS wire versions served: the OpenReward SDK's minor versions whose routes and
#: bodies this endpoint speaks. A client names its version in ``User-Agent``
#: (``openreward-sdk/0.1.167``) or ``X-ORS-Version``.
ORS_VERSIONS = ("0.1",)
SUBMIT = "submit"
_AGENT = re.compile(r"openreward-sdk/(\d+)\.(\d+)")
_VERSION = re.compile(r"(\d+)\.(\d+)")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Split(_Body):
    split: str


class _TaskAt(_Body):
    split: str
    index: int


class _TaskRange(_Body):
    split: str
    start: int | None = None
    stop: int | None = None


class _Create(_Body):
    env_name: str | None = None
    task_spec: dict[str, Any] | None = None
    split: str | None = None
    index: int | None = None
    toolset_name: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> _Create:
        if (self.split is None) != (self.index is None):  # the more specific problem first
            raise ValueError("split and index must both be provided together")
        if (self.task_spec is not None) == (self.split is not None):
            raise ValueError("Provide either task_spec or both split and index, not both/neither")
        return self


class _ToolCall(_Body):
    name: str
    input: dict[str, Any]
    task_id: str | None = None


class _OrsError(Exception):
    def __init__(self, status: int, detail: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(str(detail))
        self.status, self.detail, self.headers = status, detail, headers


def _of_api(e: ApiError) -> _OrsError:
    """A ``/v1`` error in ORS's shape: the status, and the message and hint as ``detail``."""
    detail = e.message if not e.hint else f"{e.message} ({e.hint})"
    return _OrsError(e.status, detail, dict(e.headers or {}) or None)


async def _body(request: Request, model: type[Any]) -> Any:
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"")
    except ValidationError as e:
        # FastAPI's 422: each problem with its location in the body.
        problems = [{"type": err["type"], "loc": ["body", *err["loc"]],
                     "msg": str(err["msg"]).removeprefix("Value error, ")}
                    for err in e.errors(include_url=False, include_input=False)]
        raise _OrsError(422, problems) from None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content, "detail": None}]
    if isinstance(content, list):
        return [{"type": "text", "text": str(part.get("text", "")), "detail": None}
                for part in content if isinstance(part, dict) and part.get("type", "text") == "text"]
    return [] if content is None else [{"type": "text", "text": str(content), "detail": None}]


def _split_type(name: str) -> str:
    return name if name in ("train", "validation", "test") else "validation"


class OrsEndpoint:
    """The ORS routes of one server, playing ``api``'s environments and episodes."""

    def __init__(self, api: _Api) -> None:
        self.api = api
        self.sids: dict[str, str | None] = {}  # sid -> /v1 episode id (None until /create)
        self.finished: set[str] = set()

    def _routes(self, names: list[str] | None) -> list[Route]:
        """The ORS routes: with ``names``, one route per served environment and path (for
        the root, where a pattern would also take paths that are envhub's)."""
        h = self._handle
        fixed = [
            Route("/health", h(self.health), methods=["GET"]),
            Route("/version", h(self.version), methods=["GET"]),
            Route("/list_environments", h(self.list_environments), methods=["GET"]),
            Route("/create_session", h(self.create_session), methods=["POST"]),
            Route("/delete_session", h(self.delete_session), methods=["POST"]),
            Route("/create", h(self.create), methods=["POST"]),
            Route("/delete", h(self.delete), methods=["POST"]),
            Route("/ping", h(self.ping), methods=["POST"]),
        ]
        per_env: list[tuple[str, Callable[[Request], Awaitable[Response]], str]] = [
            ("/tools", self.tools, "GET"), ("/splits", self.splits, "GET"), ("/tasks", self.tasks, "POST"),
            ("/num_tasks", self.num_tasks, "POST"), ("/task", self.task, "POST"),
            ("/task_range", self.task_range, "POST"), ("/prompt", self.prompt, "GET"),
            ("/messages", self.messages, "GET"), ("/task_tools", self.task_tools, "GET"),
            ("/call", self.call, "POST"),
        ]
        # The SDK's own paths: an environment got without a variant sends the bare path and
        # names the environment in X-Deployment (the session routes need no name at all).
        in_session = {"/prompt", "/messages", "/task_tools", "/call"}  # the sid names the episode
        bare = [Route(suffix, h(handler if suffix in in_session else self._deployed(handler)), methods=[method])
                for suffix, handler, method in per_env]
        if names is None:
            return fixed + bare + [Route("/{namespace}/{name}" + suffix, h(handler), methods=[method])
                                   for suffix, handler, method in per_env]
        return fixed + bare + [Route(f"/{name}{suffix}", h(_named(handler, name)), methods=[method])
                               for name in names for suffix, handler, method in per_env]

    def _deployed(self, handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` on a bare path (``/tools``): the environment is the one ``X-Deployment``
        names, or the only one served when the header is absent."""
        async def deployed(request: Request) -> Response:
            namespace, _, name = self._deployment(request).partition("/")
            request.scope["path_params"] = {**request.path_params, "namespace": namespace, "name": name}
            return await handler(request)
        return deployed

    def _deployment(self, request: Request) -> str:
        named = request.headers.get("x-deployment", "").strip()
        if named:
            return named
        if len(self.api.served) == 1:
            return next(iter(self.api.served))
        raise _OrsError(400, f"X-Deployment header is required on {request.url.path}: this server serves "
                             f"{', '.join(sorted(self.api.served))}; name one in it, as the OpenReward SDK does "
                             "with the name given to client.environments.get)")

    def routes(self) -> list[Mount]:
        """The ORS routes under :data:`ORS_PREFIX`."""
        app = Starlette(routes=self._routes(None),
                        exception_handlers={HTTPException: _http_error, Exception: _internal_error})
        return [Mount(ORS_PREFIX, app=app)]

    def root_routes(self) -> list[Route]:
        """The ORS routes at the root (``envhub serve --ors-at-root``), where the OpenReward
        SDK resolves them; they go after envhub's own, and :meth:`check_root` refuses a clash."""
        return self._routes(sorted(self.api.served))

    @staticmethod
    def check_root(root: Sequence[Route], envhub_routes: Sequence[BaseRoute]) -> None:
        """Raise :class:`UsageError` naming every ORS route at the root whose path an envhub
        route also matches (an environment whose namespace is ``v1``, ``mcp``, ``openenv`` or
        ``ors``, say), with any method: one of the two would be unreachable."""
        clashes = []
        for route in root:
            for other in envhub_routes:
                scope = {"type": "http", "path": route.path, "root_path": "", "method": "GET"}
                if other.matches(scope)[0] != Match.NONE:
                    clashes.append(f"{route.path} (ORS) is also {getattr(other, 'path', '?')} (envhub)")
        if clashes:
            raise UsageError("--ors-at-root cannot serve the Open Reward Standard's routes at the root: "
                             + "; ".join(sorted(set(clashes))),
                             hint="serve without --ors-at-root (ORS stays at /ors), or rename the environment "
                                  "whose namespace is one of envhub's prefixes (v1, mcp, openenv, ors)")

    # -- every handler: version check, errors in ORS's shape --------------------------

    def _handle(self, handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            try:
                _check_version(request)
                return await handler(request)
            except _OrsError as e:
                return JSONResponse({"detail": e.detail}, status_code=e.status, headers=e.headers)
            except ApiError as e:
                o = _of_api(e)
                return JSONResponse({"detail": o.detail}, status_code=o.status, headers=o.headers)
            except EnvhubError as e:
                o = _of_api(from_envhub_error(e))
                return JSONResponse({"detail": o.detail}, status_code=o.status)
        return handle

    def _auth(self, request: Request, *, held_out: bool, what: str) -> None:
        self.api.auth.check(_with_key(request), held_out=held_out, what=what)

    def _served(self, request: Request) -> Served:
        try:
            return self.api._served(request)
        except ApiError as e:
            known = ", ".join(sorted(self.api.served)) or "none"
            # Named where the request came: under /ors, or at the root (--ors-at-root).
            prefix = ORS_PREFIX if request.url.path.startswith(ORS_PREFIX + "/") else ""
            raise _OrsError(404, f"unknown environment {request.path_params['namespace']}/"
                                 f"{request.path_params['name']!s} (this server serves: {known}; "
                                 f"GET {prefix}/list_environments lists them)") from e

    def _split(self, served: Served, request: Request, split: str) -> bool:
        if split not in served.env.splits:
            raise _OrsError(400, f"Invalid split {split!r} of {served.name} (its splits: "
                                 f"{', '.join(served.env.splits)})")
        held_out = served.held_out(split)
        self._auth(request, held_out=held_out, what=f"split {split!r} of {served.name}")
        return held_out

    def _spec(self, served: Served, split: str, index: int, held_out: bool) -> dict[str, Any]:
        tasks = served.tasks(split, seed=None, limit=None)
        if not -len(tasks) <= index < len(tasks):
            raise _OrsError(400, f"Invalid index {index}: split {split!r} of {served.name} has {len(tasks)} tasks")
        return served.task_view(tasks[index], held_out=held_out).to_json()

    @staticmethod
    def _sid(request: Request) -> str:
        sid = request.headers.get("x-session-id", "").strip()
        if not sid:
            raise _OrsError(400, "X-Session-ID header is required (POST /ors/create_session mints one)")
        return sid

    def _session(self, request: Request) -> tuple[str, Session]:
        sid = self._sid(request)
        episode_id = self.sids.get(sid)
        if episode_id is None:
            self._check_lost(sid)
            raise _OrsError(404, f"Active environment not found: session {sid!r} has no episode "
                                 f"(POST {ORS_PREFIX}/create gives it one)")
        return sid, self.api._session(_with_episode(request, episode_id))

    def _check_lost(self, sid: str) -> None:
        """Raise the 410 for a session minted by another worker process, which stopped
        (with several workers, a request for a live one's session is forwarded there)."""
        lost = self.api.worker.lost(sid) if self.api.worker is not None else None
        if lost is not None:
            raise _of_api(lost_error(sid, lost))

    # -- environments ------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": ORS_VERSIONS[-1], "build_sha": None, "versions": list(ORS_VERSIONS),
                             "server": f"envhub {envhub_version}"})

    async def list_environments(self, request: Request) -> Response:
        self._auth(request, held_out=False, what="listing environments")
        return JSONResponse(sorted(self.api.served))

    async def tools(self, request: Request) -> Response:
        served = self._served(request)
        self._auth(request, held_out=False, what=served.name)
        return JSONResponse(_tool_list(served.env.tool_specs))

    async def splits(self, request: Request) -> Response:
        served = self._served(request)
        self._auth(request, held_out=False, what=served.name)
        return JSONResponse([{"name": name, "type": _split_type(name)}
                             for name, info in served.env.splits.items() if info.available])

    async def tasks(self, request: Request) -> Response:
        served = self._served(request)
        body = await _body(request, _Split)
        held_out = self._split(served, request, body.split)
        tasks = served.tasks(body.split, seed=None, limit=None)
        return JSONResponse({"tasks": [served.task_view(t, held_out=held_out).to_json() for t in tasks],
                             "env_name": served.name})

    async def num_tasks(self, request: Request) -> Response:
        served = self._served(request)
        body = await _body(request, _Split)
        self._split(served, request, body.split)
        return JSONResponse({"num_tasks": len(served.tasks(body.split, seed=None, limit=None))})

    async def task(self, request: Request) -> Response:
        served = self._served(request)
        body = await _body(request, _TaskAt)
        held_out = self._split(served, request, body.split)
        return JSONResponse({"task": self._spec(served, body.split, body.index, held_out), "env_name": served.name})

    async def task_range(self, request: Request) -> Response:
        served = self._served(request)
        body = await _body(request, _TaskRange)
        held_out = self._split(served, request, body.split)
        tasks = served.tasks(body.split, seed=None, limit=None)[body.start:body.stop]
        return JSONResponse({"tasks": [served.task_view(t, held_out=held_out).to_json() for t in tasks],
                             "env_name": served.name})

    # -- sessions ----------------------------------------------------------------------

    async def create_session(self, request: Request) -> Response:
        sid = str(uuid.uuid4())
        if self.api.worker is not None:
            sid = self.api.worker.tag(sid)  # names the worker process that holds its episode
        self.sids[sid] = None
        return _events([("task_id", sid), ("end", "")])

    async def delete_session(self, request: Request) -> Response:
        sid = self._sid(request)
        if self.sids.get(sid) is None:
            self.sids.pop(sid, None)
        return JSONResponse({"sid": sid})

    async def create(self, request: Request) -> Response:
        sid = self._sid(request)
        body = await _body(request, _Create)
        if sid not in self.sids:
            self._check_lost(sid)
        if self.sids.get(sid) is not None:
            raise _OrsError(400, f"Session already exists: {sid!r} has an episode (POST {ORS_PREFIX}/delete ends it)")
        if body.toolset_name is not None:
            raise _OrsError(400, f"unknown toolset {body.toolset_name!r}; this server has no built-in toolsets "
                                 "(an environment's tools come with it)")
        if body.env_name is None and not request.headers.get("x-deployment", "").strip() \
                and len(self.api.served) != 1:
            raise _OrsError(400, f"env_name (or the X-Deployment header) is required: this server serves "
                                 f"{', '.join(sorted(self.api.served))}")
        namespace, _, name = (body.env_name or self._deployment(request)).partition("/")
        served = self._served(_with_env(request, namespace, name))
        if body.task_spec is not None:
            split, task_id = body.task_spec.get("split"), body.task_spec.get("id")
            if not isinstance(split, str) or not isinstance(task_id, str):
                raise _OrsError(422, [{"type": "value_error", "loc": ["body", "task_spec"],
                                       "msg": "an envhub task_spec has its split and id (as /tasks and /task "
                                              "list them)"}])
            held_out = self._split(served, request, split)
            create = CreateEpisodeRequest(split=split, task_id=task_id)
        else:
            assert body.split is not None and body.index is not None
            held_out = self._split(served, request, body.split)
            count = len(served.tasks(body.split, seed=None, limit=None))
            if not 0 <= body.index < count:
                raise _OrsError(400, f"Invalid index {body.index}: split {body.split!r} of {served.name} has "
                                     f"{count} tasks")
            create = CreateEpisodeRequest(split=body.split, index=body.index)
        created = await self.api.start_episode(served, create, held_out=held_out)
        self.sids[sid] = created.episode_id
        self.finished.discard(sid)
        return JSONResponse({"sid": sid})

    async def delete(self, request: Request) -> Response:
        sid = self._sid(request)
        episode_id = self.sids.pop(sid, None)
        self.finished.discard(sid)
        if episode_id is not None:
            try:
                session = self.api._session(_with_episode(request, episode_id))
            except ApiError as e:
                if e.status not in (409, 410):  # already closed: deleting again is not an error
                    raise
            else:
                self.api.sessions.close(session, "closed", "its client closed it")
        return JSONResponse({"sid": sid})

    async def ping(self, request: Request) -> Response:
        sid = self._sid(request)
        if sid not in self.sids:
            self._check_lost(sid)
        if self.sids.get(sid) is None:
            raise _OrsError(404, "Active environment not found")
        self._session(request)  # refreshes its idle clock, or answers why it is gone
        return JSONResponse({"status": "ok"})

    async def prompt(self, request: Request) -> Response:
        _, session = self._session(request)
        messages = session.episode.observation().messages
        return JSONResponse([b for m in messages for b in _blocks(m.get("content"))])

    async def messages(self, request: Request) -> Response:
        _, session = self._session(request)
        return JSONResponse([{"role": m.get("role"), "blocks": _blocks(m.get("content")), "detail": None}
                             for m in session.episode.observation().messages
                             if m.get("role") in ("system", "user", "assistant")])

    async def task_tools(self, request: Request) -> Response:
        _, session = self._session(request)
        return JSONResponse(_tool_list(session.episode.observation().tools))

    async def call(self, request: Request) -> Response:
        sid = self._sid(request)
        body = await _body(request, _ToolCall)
        if sid in self.finished:
            return _result({"ok": False, "error": "the episode has finished; no more tool calls",
                            "reason": "episode_finished"})
        sid, session = self._session(request)
        known = [spec["function"]["name"] for spec in session.episode.observation().tools]
        if body.name == SUBMIT and SUBMIT not in known:
            answer = body.input.get("answer")
            if not isinstance(answer, str) or set(body.input) != {"answer"}:
                return _result({"ok": False, "reason": "input_validation",
                                "error": f"Tool input validation error: {SUBMIT} takes one argument, answer "
                                         f"(a string); got {sorted(body.input) or 'none'}"})
            action: dict[str, Any] = {"role": "assistant", "content": answer}
        elif body.name in known:
            action = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"ors-{uuid.uuid4().hex[:12]}", "type": "function",
                 "function": {"name": body.name, "arguments": json.dumps(body.input)}}]}
        else:
            return _result({"ok": False, "reason": "not_found",
                            "error": f"{body.name!r} is not a valid tool (tools: {', '.join([*known, SUBMIT])})"})
        view = await self.api.take_step(session, action)
        record = view.to_json()
        error = (view.info or {}).get("environment_error")
        if error:
            return _events([("task_id", uuid.uuid4().hex), ("error", str(error))])
        if view.done:
            self.finished.add(sid)
        replies = [m for m in record.get("new_messages", [])[1:] if m.get("role") != "assistant"]
        blocks = [b for m in replies for b in _blocks(m.get("content"))]
        metadata = {k: v for k, v in record.items() if k not in ("observation", "new_messages", "reward", "done")}
        return _result({"ok": True, "output": {"blocks": blocks, "metadata": metadata,
                                               "reward": record.get("reward") if view.done else view.turn_reward,
                                               "finished": view.done}})


def _tool_list(specs: list[dict[str, Any]]) -> dict[str, Any]:
    names = {spec["function"]["name"] for spec in specs}
    tools = [{"name": spec["function"]["name"], "description": spec["function"].get("description") or "",
              "input_schema": spec["function"].get("parameters")} for spec in specs]
    terminal = None if SUBMIT in names else {
        "name": SUBMIT, "arg": "answer",
        "description": "The model's final answer (its text turn); it ends a tool-use episode and scores it."}
    return {"tools": tools, "terminal_tool": terminal, "supports_score_group": False,
            "message_block_types": ["text"]}


def _check_version(request: Request) -> None:
    asked = request.headers.get("x-ors-version")
    match = _VERSION.fullmatch(asked.strip()) if asked else _AGENT.search(request.headers.get("user-agent", ""))
    if asked and match is None:
        raise _OrsError(400, f"X-ORS-Version {asked!r} is not a version; this server speaks ORS "
                             f"{', '.join(ORS_VERSIONS)} (the OpenReward SDK's 0.1.x wire format)")
    if match is not None and f"{match.group(1)}.{match.group(2)}" not in ORS_VERSIONS:
        version = f"{match.group(1)}.{match.group(2)}"
        raise _OrsError(400, f"ORS version {version} is not served; this server speaks ORS "
                             f"{', '.join(ORS_VERSIONS)} (the OpenReward SDK's 0.1.x wire format)")


def _named(handler: Callable[[Request], Awaitable[Response]], name: str) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` on a route whose path names environment ``name`` literally."""
    namespace, _, rest = name.partition("/")

    async def named(request: Request) -> Response:
        request.scope["path_params"] = {**request.path_params, "namespace": namespace, "name": rest}
        return await handler(request)
    return named


def _with_key(request: Request) -> Request:
    """``request`` with the SDK's ``X-API-Key`` as the bearer token the server checks."""
    key = request.headers.get("x-api-key")
    if not key or "authorization" in request.headers:
        return request
    scope = dict(request.scope)
    scope["headers"] = [*request.scope["headers"], (b"authorization", f"Bearer {key}".encode())]
    return Request(scope)


def _with_episode(request: Request, episode_id: str) -> Request:
    scope = dict(_with_key(request).scope)
    scope["path_params"] = {**request.path_params, "episode_id": episode_id}
    return Request(scope)


def _with_env(request: Request, namespace: str, name: str) -> Request:
    scope = dict(request.scope)
    scope["path_params"] = {**request.path_params, "namespace": namespace, "name": name}
    return Request(scope)


def _events(events: list[tuple[str, str]]) -> Response:
    """Server-sent events, as the SDK's ``resumable_sse`` reads them."""
    async def stream() -> AsyncIterator[bytes]:
        for event, data in events:
            lines = "".join(f"data: {line}\r\n" for line in (data.split("\n") if data else [""]))
            yield f"event: {event}\r\n{lines}\r\n".encode()
    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _result(output: dict[str, Any]) -> Response:
    return _events([("task_id", uuid.uuid4().hex), ("end", json.dumps(output))])


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        detail = f"Not Found: no route {request.method} {request.url.path} (ORS routes live under {ORS_PREFIX}/)"
    elif exc.status_code == 413:
        detail = "the request body is larger than this server's limit (max-body-bytes)"
    else:
        detail = str(exc.detail)
    return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=dict(exc.headers or {}) or None)


async def _internal_error(request: Request, exc: Exception) -> Response:
    import logging
    logging.getLogger("envhub_registry").error("%s %s failed", request.method, request.url.path, exc_info=exc)
    # No exception text: it could quote a held-out answer.
    return JSONResponse({"detail": "Internal Server Error (see the server's log)"}, status_code=500)

