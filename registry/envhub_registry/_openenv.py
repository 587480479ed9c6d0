"""The OpenEnv endpoint: episodes played over OpenEnv's HTTP and WebSocket API.

``/openenv/{ns}/{name}`` serves what an OpenEnv environment server in simulation mode
serves (openenv-core 0.3): ``POST /reset``, ``POST /step``, ``GET /state``, ``GET /health``,
``GET /schema``, ``GET /metadata`` and the WebSocket ``/ws``, whose messages are
``{"type": "reset" | "step" | "state" | "close", "data": ...}`` answered by
``{"type": "observation" | "state" | "error", "data": ...}``. OpenEnv's own clients
(``GenericEnvClient``, ``SyncEnvClient``) speak the WebSocket.

An OpenEnv session maps onto ``/v1`` episodes (:class:`envhub_registry._sessions.Sessions`):
a WebSocket is one session, each ``reset`` on it opens an episode (closing the one before),
and closing the socket closes the episode. Over plain HTTP, where OpenEnv keeps no state
between requests, ``reset`` answers the episode's id (``observation.episode_id``) and
``step`` and ``state`` name it (``episode_id``). Either way the ``/v1`` rules hold: the same
tokens (``Authorization: Bearer``; OpenEnv's client cannot set a header, so a token given as
the password of the URL, ``ws://envhub:TOKEN@host/...``, which it sends as HTTP Basic
credentials, counts too), held-out splits without answers or score details, ``max-episodes``,
idle expiry and the wall-clock limit.

Errors are OpenEnv's: on the WebSocket ``{"type": "error", "data": {"message", "code"}}``
with one of OpenEnv's codes (``VALIDATION_ERROR``, ``UNKNOWN_TYPE``, ``CAPACITY_REACHED``,
...), over HTTP FastAPI's ``{"detail": ...}``; both also carry the ``/v1`` error's
``status``, ``code`` (as ``envhub_code`` on the WebSocket) and ``hint`` (spec/serve.md).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.requests import Request
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from envhub.errors import EnvhubError
from envhub.runtime import as_assistant_message
from envhub.runtime.served import MAX_INT, MIN_INT, CreateEpisodeRequest, StepView
from envhub_registry._errors import ApiError, JSONResponse, from_envhub_error

if TYPE_CHECKING:
    from envhub_registry._app import _Api
    from envhub_registry._served import Served
    from envhub_registry._sessions import Session

__all__ = ["OPENENV_PREFIX", "OPENENV_PROTOCOL", "OpenEnvEndpoint"]

log = logging.getLogger("envhub_registry")

OPENENV_PREFIX = "/openenv"
#: The version of OpenEnv's protocol served, as errors name it.
OPENENV_PROTOCOL = "OpenEnv simulation mode as openenv-core 0.3 speaks it"
_MESSAGE_TYPES = ("reset", "step", "state", "close")


# --- what a client sends --------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResetData(_Strict):
    """``reset``'s keyword arguments: the task (split, and index or task_id; without them the
    next task of the split in turn, the first public split by default) and the seed."""

    split: str | None = Field(None, min_length=1, description="the split to draw the task from "
                                                               "(default: the first public split)")
    index: int | None = Field(None, ge=0, le=MAX_INT, strict=True,
                              description="the task's position in the split (default: the next task in turn)")
    task_id: str | None = Field(None, min_length=1, description="the task's id (instead of index)")
    seed: int | None = Field(None, ge=MIN_INT, le=MAX_INT, strict=True, description="the episode's seed")
    episode_id: str | None = Field(None, max_length=255,
                                   description="the client's own name for the episode, kept in its state "
                                               "(the server names the episode itself)")
    policy_model: str | None = None
    force_self_judge: bool = False

    @model_validator(mode="after")
    def _one_task(self) -> ResetData:
        if self.index is not None and self.task_id is not None:
            raise ValueError("give at most one of index and task_id")
        return self


class ToolCall(_Strict):
    """One tool call: a tool's name and its arguments (an object, or its JSON text)."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class OpenEnvAction(_Strict):
    """The model's turn: its text (``content``), its tool calls, or both."""

    content: str | None = Field(None, description="the model's text turn (a final answer, or a reply)")
    tool_calls: list[ToolCall] | None = Field(None, description="the tools the model calls this turn")
    metadata: dict[str, Any] = Field(default_factory=dict, description="ignored (OpenEnv's Action field)")

    @model_validator(mode="after")
    def _something(self) -> OpenEnvAction:
        if self.content is None and not self.tool_calls:
            raise ValueError('an action needs content (the model\'s text) or tool_calls, e.g. {"content": "42"} '
                             'or {"tool_calls": [{"name": "calculate", "arguments": {"expression": "6*7"}}]}')
        return self


class _StepBody(_Strict):
    """``POST /step`` over HTTP: OpenEnv's StepRequest, and the episode it is a step of."""

    action: dict[str, Any]
    episode_id: str = Field(min_length=1, description="observation.episode_id of the reset's answer")
    timeout_s: float | None = Field(None, gt=0)
    request_id: str | None = Field(None, max_length=255)


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["reset", "step", "state", "close"]
    data: dict[str, Any] = Field(default_factory=dict)


def action_schema() -> dict[str, Any]:
    return OpenEnvAction.model_json_schema()


_OBSERVATION_SCHEMA: dict[str, Any] = {
    "title": "EnvhubObservation", "type": "object",
    "properties": {
        "episode_id": {"type": "string", "description": "the episode's id (HTTP step and state name it)"},
        "step_count": {"type": "integer", "description": "turns taken so far"},
        "messages": {"type": "array", "items": {"type": "object"},
                     "description": "the whole conversation so far (chat messages), the prompt first"},
        "new_messages": {"type": "array", "items": {"type": "object"},
                         "description": "the messages this step added: the model's turn, tool results, replies"},
        "tools": {"type": "array", "items": {"type": "object"}, "description": "the tools (OpenAI function specs)"},
        "split": {"type": "string"}, "held_out": {"type": "boolean"},
        "task": {"type": "object", "description": "on reset: the task as a client may see it"},
        "turn_reward": {"type": ["number", "null"], "description": "this turn's own reward"},
        "truncated": {"type": "boolean"}, "info": {"type": "object"},
        "turn_rewards": {"type": ["array", "null"]}, "ended_by": {"type": ["string", "null"]},
        "outcome": {"type": ["string", "null"]},
    },
}
_STATE_SCHEMA: dict[str, Any] = {
    "title": "EnvhubState", "type": "object",
    "properties": {
        "episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer", "minimum": 0},
        "environment": {"type": "string"}, "split": {"type": "string"}, "task_id": {"type": "string"},
        "held_out": {"type": "boolean"}, "done": {"type": "boolean"}, "max_turns": {"type": "integer"},
        "client_episode_id": {"type": ["string", "null"]},
    },
}


def _problems(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'data'}: "
                     f"{str(err['msg']).removeprefix('Value error, ')}"
                     for err in e.errors(include_url=False, include_input=False))


def _as_message(action: OpenEnvAction, ids: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": action.content}
    if action.tool_calls:
        message["tool_calls"] = [
            {"id": call.id or f"openenv-{next(ids)}", "type": "function",
             "function": {"name": call.name, "arguments": call.arguments if isinstance(call.arguments, str)
                          else json.dumps(call.arguments)}}
            for call in action.tool_calls]
    return as_assistant_message(message)


# --- one OpenEnv session --------------------------------------------------------------------


@dataclass(eq=False)
class _Episode:
    session: Session
    client_episode_id: str | None
    max_turns: int


def _observation(episode: _Episode, view: StepView | None, created: dict[str, Any] | None) -> dict[str, Any]:
    session = episode.session
    obs: dict[str, Any] = {"episode_id": session.id, "step_count": session.episode.turns,
                           "split": session.episode.task.split, "held_out": session.held_out}
    if created is not None:
        obs.update(messages=created["observation"]["messages"], tools=created["observation"]["tools"],
                   new_messages=created["observation"]["messages"], task=created["task"])
        return {"observation": obs, "reward": None, "done": False}
    assert view is not None
    record = view.to_json()
    obs.update(messages=record["observation"]["messages"], tools=record["observation"]["tools"],
               new_messages=record["new_messages"], step_count=view.turns)
    for key in ("turn_reward", "truncated", "info", "turn_rewards", "ended_by", "outcome"):
        if key in record:
            obs[key] = record[key]
    # The turn's reward mid-episode; the episode's reward on the last step.
    reward = view.reward if view.done else view.turn_reward
    return {"observation": obs, "reward": reward, "done": view.done}


def _state(episode: _Episode | None) -> dict[str, Any]:
    if episode is None:
        return {"episode_id": None, "step_count": 0}
    session = episode.session
    return {"episode_id": session.id, "step_count": session.episode.turns, "environment": session.served.name,
            "split": session.episode.task.split, "task_id": session.episode.task.id, "held_out": session.held_out,
            "done": session.episode.done, "max_turns": episode.max_turns,
            "client_episode_id": episode.client_episode_id}


class _Credentials:
    """A connection's headers as :class:`envhub_registry._auth.Auth` reads them, with HTTP
    Basic credentials (OpenEnv's client sends a URL's ``user:password`` so) read as the
    bearer token ``password``."""

    def __init__(self, headers: Any) -> None:
        header = headers.get("authorization")
        self.headers: dict[str, str] = {}
        if header is None:
            return
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value.strip(), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                raise ApiError(401, "token-invalid", "the Authorization header's Basic credentials are not "
                                                     "base64 'user:TOKEN'",
                               hint="put the token in the URL as ws://envhub:TOKEN@host/... or send "
                                    "'Authorization: Bearer TOKEN'") from None
            header = "Bearer " + decoded.partition(":")[2]
        self.headers["authorization"] = header


class OpenEnvEndpoint:
    """The OpenEnv routes of one server, playing ``api``'s environments."""

    def __init__(self, api: _Api) -> None:
        self.api = api
        self._next: dict[tuple[str, str], int] = {}
        self._call_ids = itertools.count(1)

    def routes(self) -> list[BaseRoute]:
        base = OPENENV_PREFIX + "/{namespace}/{name}"
        return [
            Route(base + "/reset", self._wrap(self.reset), methods=["POST"]),
            Route(base + "/step", self._wrap(self.step), methods=["POST"]),
            Route(base + "/state", self._wrap(self.state), methods=["GET"]),
            Route(base + "/health", self._wrap(self.health), methods=["GET"]),
            Route(base + "/schema", self._wrap(self.schema), methods=["GET"]),
            Route(base + "/metadata", self._wrap(self.metadata), methods=["GET"]),
            Route(base + "/mcp", self._wrap(self.mcp), methods=["POST"]),
            WebSocketRoute(base + "/ws", self.websocket),
        ]

    # -- shared --------------------------------------------------------------------------

    def _check(self, credentials: _Credentials, *, held_out: bool, what: str) -> None:
        self.api.auth.check(credentials, held_out=held_out, what=what)  # type: ignore[arg-type]

    async def _reset(self, served: Served, credentials: _Credentials,
                     data: dict[str, Any]) -> tuple[_Episode, dict[str, Any]]:
        try:
            kwargs = ResetData.model_validate(data)
        except ValidationError as e:
            raise ApiError(422, "invalid-reset", f"invalid reset arguments: {_problems(e)}",
                           hint="reset takes split, index or task_id, seed, episode_id (see GET .../schema)") from None
        split = kwargs.split or self._default_split(served)
        held_out = served.held_out(split)
        self._check(credentials, held_out=held_out, what=f"split {split!r} of {served.name}")
        index = kwargs.index
        if index is None and kwargs.task_id is None:
            count = len(served.tasks(split, seed=None, limit=None))
            turn = self._next.get((served.name, split), 0)
            self._next[(served.name, split)] = turn + 1
            index = turn % count if count else 0
        body = CreateEpisodeRequest(split=split, index=index if kwargs.task_id is None else None,
                                    task_id=kwargs.task_id, seed=kwargs.seed, policy_model=kwargs.policy_model,
                                    force_self_judge=kwargs.force_self_judge)
        created = await self.api.start_episode(served, body, held_out=held_out)
        session = self.api.sessions.get(created.episode_id)
        episode = _Episode(session, kwargs.episode_id, created.max_turns)
        return episode, _observation(episode, None, created.to_json())

    @staticmethod
    def _default_split(served: Served) -> str:
        for name, info in served.splits.items():
            if info.available and not info.held_out:
                return name
        raise ApiError(422, "no-public-split", f"{served.name} has no public split to default to",
                       hint="pass split (and a bearer token for a held-out one)")

    async def _step(self, episode: _Episode, data: dict[str, Any]) -> dict[str, Any]:
        try:
            action = _as_message(OpenEnvAction.model_validate(data), self._call_ids)
        except ValidationError as e:
            raise ApiError(422, "invalid-action", f"invalid action: {_problems(e)}",
                           hint="GET .../schema gives the action's schema: content (text) and/or tool_calls "
                                "[{name, arguments}]") from None
        except TypeError as e:
            raise ApiError(422, "invalid-action", str(e)) from None
        session = self.api.sessions.get(episode.session.id)  # 409 when done, 410 when expired
        view = await self.api.take_step(session, action)
        return _observation(episode, view, None)

    def _close(self, episode: _Episode | None) -> None:
        if episode is not None:
            self.api.sessions.close(episode.session, "closed", "its OpenEnv client reset or closed it")

    # -- HTTP ----------------------------------------------------------------------------

    def _wrap(self, handler: Callable[[Request, Served], Awaitable[Any]],
              ) -> Callable[[Request], Awaitable[JSONResponse]]:
        async def endpoint(request: Request) -> JSONResponse:
            try:
                served = self.api._served(request)
                return JSONResponse(await handler(request, served))
            except ApiError as e:
                return _http_error(e)
            except EnvhubError as e:
                return _http_error(from_envhub_error(e))
        return endpoint

    async def _json(self, request: Request) -> dict[str, Any]:
        raw = await request.body()
        if not raw.strip():
            return {}
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise ApiError(422, "invalid-json", f"the request body is not valid JSON: {e}",
                           hint="send a JSON object") from None
        if not isinstance(data, dict):
            raise ApiError(422, "invalid-body", f"the request body must be a JSON object, got {type(data).__name__}")
        return data

    async def reset(self, request: Request, served: Served) -> dict[str, Any]:
        data = await self._json(request)
        _, answer = await self._reset(served, _Credentials(request.headers), data)
        return answer

    def _http_episode(self, request: Request, episode_id: str) -> _Episode:
        credentials = _Credentials(request.headers)
        session = self.api.sessions.get(episode_id)
        self._check(credentials, held_out=session.held_out,
                    what=f"split {session.episode.task.split!r} of {session.served.name}")
        return _Episode(session, None, session.episode.max_turns)

    async def step(self, request: Request, served: Served) -> dict[str, Any]:
        data = await self._json(request)
        if "action" in data and "episode_id" not in data:
            raise ApiError(422, "episode-id-required",
                           f"POST /step over HTTP needs episode_id (observation.episode_id of the reset's answer): "
                           f"envhub serves {OPENENV_PROTOCOL}, where HTTP keeps no session; a stateless step "
                           f"is not served",
                           hint="send {\"action\": {...}, \"episode_id\": ID}, or use the WebSocket (ws://.../ws), "
                                "as OpenEnv's clients do")
        try:
            body = _StepBody.model_validate(data)
        except ValidationError as e:
            raise ApiError(422, "invalid-body", f"invalid step request: {_problems(e)}",
                           hint='send {"action": {"content": ...}, "episode_id": ID}') from None
        episode = self._http_episode(request, body.episode_id)
        return await self._step(episode, body.action)

    async def state(self, request: Request, served: Served) -> dict[str, Any]:
        episode_id = request.query_params.get("episode_id")
        if not episode_id:
            self._check(_Credentials(request.headers), held_out=False, what=served.name)
            return _state(None)
        return _state(self._http_episode(request, episode_id))

    async def health(self, request: Request, served: Served) -> dict[str, Any]:
        return {"status": "healthy"}

    async def schema(self, request: Request, served: Served) -> dict[str, Any]:
        self._check(_Credentials(request.headers), held_out=False, what=served.name)
        return {"action": action_schema(), "observation": _OBSERVATION_SCHEMA, "state": _STATE_SCHEMA}

    async def metadata(self, request: Request, served: Served) -> dict[str, Any]:
        self._check(_Credentials(request.headers), held_out=False, what=served.name)
        env = served.env
        # Exactly OpenEnv's EnvironmentMetadata fields: its model forbids others.
        return {"name": served.name, "description": env.manifest.environment.description,
                "readme_content": None, "version": env.version, "author": None,
                "documentation_url": f"/v1/environments/{served.name}"}

    async def mcp(self, request: Request, served: Served) -> dict[str, Any]:
        raise ApiError(404, "not-served", f"OpenEnv's production mode (POST /mcp) is not served here: envhub serves "
                                          f"{OPENENV_PROTOCOL} (reset, step, state, close)",
                       hint=f"use envhub's MCP endpoint, /mcp/{served.name}, or OpenEnv's simulation mode")

    # -- WebSocket -----------------------------------------------------------------------

    async def websocket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        episode: _Episode | None = None
        refusal: ApiError | None = None
        try:
            credentials = _Credentials(websocket.headers)
            served = self.api._served(websocket)  # type: ignore[arg-type]
            self._check(credentials, held_out=False, what=served.name)
        except ApiError as e:
            # Every message is answered with the refusal, as OpenEnv's client reads an error
            # only as the answer to a message it sent.
            refusal = e
        try:
            while True:
                raw = await websocket.receive_text()
                try:
                    if refusal is not None:
                        stop = _is_close(raw)
                        reply = _ws_error(refusal)
                    else:
                        reply, episode, stop = await self._message(raw, served, credentials, episode)
                except ApiError as e:
                    reply, stop = _ws_error(e), False
                except EnvhubError as e:
                    reply, stop = _ws_error(from_envhub_error(e)), False
                except Exception:  # never leave a client waiting; the log has the traceback
                    log.exception("an OpenEnv message to %s failed", websocket.url.path)
                    reply, stop = _ws_error(ApiError(500, "internal-error", "the server failed to answer the message",
                                                     hint="see the server's log")), False
                if stop:
                    break
                await websocket.send_text(reply)
        except WebSocketDisconnect:
            pass
        finally:
            self._close(episode)
        with contextlib.suppress(RuntimeError):  # the client closed it first
            await websocket.close()

    async def _message(self, raw: str, served: Served, credentials: _Credentials,
                       episode: _Episode | None) -> tuple[str, _Episode | None, bool]:
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            return _ws_error(ApiError(400, "invalid-json", f"Invalid JSON: {e}"), "INVALID_JSON"), episode, False
        kind = data.get("type") if isinstance(data, dict) else None
        if kind not in _MESSAGE_TYPES:
            return _ws_error(ApiError(
                400, "unknown-type", f"Unknown message type: {kind!r}; envhub serves {OPENENV_PROTOCOL}, whose "
                                     f"message types are {', '.join(_MESSAGE_TYPES)}",
                hint=f"for MCP use envhub's MCP endpoint, /mcp/{served.name}"), "UNKNOWN_TYPE"), episode, False
        try:
            message = _Message.model_validate(data)
        except ValidationError as e:
            return _ws_error(ApiError(422, "invalid-message", f"Invalid message: {_problems(e)}"),
                             "VALIDATION_ERROR"), episode, False
        if message.type == "step" and "data" not in data:  # OpenEnv's WSStepMessage requires it
            return _ws_error(ApiError(422, "invalid-message", "Invalid message: data: Field required (a step's data "
                                                              "is the action)"), "VALIDATION_ERROR"), episode, False
        if message.type == "close":
            return "", episode, True
        if message.type == "reset":
            self._close(episode)
            episode = None
            episode, answer = await self._reset(served, credentials, message.data)
            return _dumps({"type": "observation", "data": answer}), episode, False
        if message.type == "state":
            return _dumps({"type": "state", "data": _state(episode)}), episode, False
        if episode is None:
            raise ApiError(409, "no-episode", "step before reset: this session has no episode",
                           hint="send a reset message first")
        answer = await self._step(episode, message.data)
        return _dumps({"type": "observation", "data": answer}), episode, False


def _is_close(raw: str) -> bool:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(data, dict) and data.get("type") == "close"


def _dumps(data: Any) -> str:
    return orjson.dumps(data).decode()


_WS_CODES = {400: "VALIDATION_ERROR", 404: "VALIDATION_ERROR", 422: "VALIDATION_ERROR", 429: "CAPACITY_REACHED",
             401: "SESSION_ERROR", 403: "SESSION_ERROR"}


def _ws_error(e: ApiError, code: str | None = None) -> str:
    """OpenEnv's WebSocket error, keeping the ``/v1`` error's status, code and hint."""
    return _dumps({"type": "error", "data": {
        "message": e.message, "code": code or _WS_CODES.get(e.status, "EXECUTION_ERROR"),
        "status": e.status, "envhub_code": e.code, "hint": e.hint}})


def _http_error(e: ApiError) -> JSONResponse:
    """OpenEnv's HTTP error (FastAPI's ``{"detail": ...}``), with the ``/v1`` error beside it."""
    return JSONResponse({"detail": e.message, "error": {"status": e.status, "code": e.code, "message": e.message,
                                                        "hint": e.hint}},
                        status_code=e.status, headers=e.headers)
