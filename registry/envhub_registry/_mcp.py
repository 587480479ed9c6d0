"""The MCP endpoint: episodes played over the Model Context Protocol (streamable HTTP).

Two kinds of MCP endpoint, both served by one low-level :class:`mcp.server.lowlevel.Server`
and one :class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager`:

- ``/mcp/{ns}/{name}``, an environment: one tool, ``start_episode`` (split and index or
  task id), whose result is the episode's prompt and the URL of its own endpoint;
- ``/mcp/{ns}/{name}/episodes/{episode_id}``, an episode: the environment's tools (each
  call is one turn of the episode, as a ``/v1`` step with that tool call), ``submit`` (the
  model's final text turn, which a tool-use episode scores) and ``end_episode``.

An episode has its own URL rather than living in the MCP session, because a 2026-era MCP
client has no session (each request stands alone) and a handshake-era one may open several.
The episodes are the ``/v1`` server's own (:class:`envhub_registry._sessions.Sessions`):
the same ``max-episodes``, idle and wall-clock limits, the same tokens and held-out rules
(a step's structured result is the ``/v1`` step's record, withheld fields and all).
Errors are JSON-RPC errors whose ``data`` carries the ``/v1`` error's ``status``, ``code``
and ``hint`` (spec/serve.md, section 6).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError
from starlette.requests import Request
from starlette.routing import Route

from envhub import __version__ as envhub_version
from envhub.errors import EnvhubError
from envhub.runtime.served import CreateEpisodeRequest, StepView
from envhub_registry._errors import ApiError, from_envhub_error

if TYPE_CHECKING:
    from envhub_registry._app import _Api
    from envhub_registry._served import Served
    from envhub_registry._sessions import Session

__all__ = ["MCP_PREFIX", "McpEndpoint"]

MCP_PREFIX = "/mcp"

START = "start_episode"
SUBMIT = "submit"
END = "end_episode"

_START_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "split": {"type": "string", "description": "the split to draw the task from"},
        "index": {"type": "integer", "minimum": 0, "description": "the task's position in the split (default 0)"},
        "task_id": {"type": "string", "description": "the task's id (instead of index)"},
        "seed": {"type": "integer", "description": "the episode's seed"},
    },
    "required": ["split"],
    "additionalProperties": False,
}
_SUBMIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "description": "the model's final answer (its text turn)"}},
    "required": ["answer"],
    "additionalProperties": False,
}
_END_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _mcp_error(e: ApiError) -> MCPError:
    """The JSON-RPC error for a ``/v1`` error: the client's mistakes are invalid params
    (bad arguments, unknown split, task or episode), refusals invalid requests, the rest
    internal errors; ``data`` keeps the ``/v1`` status, code and hint."""
    if e.status >= 500:
        code = types.INTERNAL_ERROR
    elif e.status in (400, 404):
        code = types.INVALID_PARAMS
    else:
        code = types.INVALID_REQUEST
    return MCPError(code, e.message, {"status": e.status, "code": e.code, "hint": e.hint})


class McpEndpoint:
    """The MCP routes of one server, playing ``api``'s environments and episodes."""

    def __init__(self, api: _Api, host: str) -> None:
        self.api = api
        self.server: Server[Any] = Server("envhub", version=envhub_version,
                                          on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        security = None
        if host in ("127.0.0.1", "localhost", "::1"):
            # As the SDK's own app does for a loopback server: refuse requests whose Host or
            # Origin is not the loopback (DNS rebinding from a browser).
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])
        limits = api.config.limits
        self.manager = StreamableHTTPSessionManager(
            self.server, json_response=True, security_settings=security,
            max_request_body_size=limits.max_body_bytes, session_idle_timeout=limits.idle_timeout_s,
            # An MCP session is a connection, not an episode: a client may hold one on the
            # environment's endpoint and one on each of its episodes'.
            max_sessions=2 * limits.max_episodes)
        self._call_ids = itertools.count(1)

    def routes(self) -> list[Route]:
        app = StreamableHTTPASGIApp(self.manager)
        env_path = MCP_PREFIX + "/{namespace}/{name}"
        return [Route(env_path, app), Route(env_path + "/episodes/{episode_id}", app)]

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    # -- what a request is about ---------------------------------------------------------

    @staticmethod
    def _request(ctx: Any) -> Request:
        request = ctx.request
        if not isinstance(request, Request):  # only the HTTP transport is mounted
            raise MCPError(types.INTERNAL_ERROR, "envhub's MCP endpoint serves streamable HTTP only")
        return request

    def _served(self, request: Request) -> Served:
        try:
            return self.api._served(request)
        except ApiError as e:
            raise _mcp_error(e) from None

    def _session(self, request: Request, served: Served) -> Session | None:
        """The episode of an episode URL (None on an environment's URL), access checked."""
        episode_id = request.path_params.get("episode_id")
        if episode_id is None:
            return None
        try:
            session = self.api._session(request)
        except ApiError as e:
            raise _mcp_error(e) from None
        if session.served is not served:
            raise MCPError(types.INVALID_PARAMS, f"episode {episode_id!r} is not an episode of {served.name}",
                           {"status": 404, "code": "episode-not-found",
                            "hint": f"use the URL {START} answered with"})
        return session

    def _check(self, request: Request, *, held_out: bool, what: str) -> None:
        try:
            self.api.auth.check(request, held_out=held_out, what=what)
        except ApiError as e:
            raise _mcp_error(e) from None

    # -- tools/list ----------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        request = self._request(ctx)
        served = self._served(request)
        if "episode_id" not in request.path_params:
            self._check(request, held_out=False, what=served.name)
            return types.ListToolsResult(tools=[self._start_tool(served)])
        try:
            session = self._session(request, served)
        except MCPError as e:
            if not (isinstance(e.data, dict) and e.data.get("status") in (409, 410)):
                raise
            # An episode that has ended still lists its environment's tools (they are public):
            # a client that checks a last step's result against the listing can, and every
            # call on the episode is answered with why it is gone.
            self._check(request, held_out=False, what=served.name)
            specs = served.env.tool_specs
        else:
            assert session is not None
            specs = session.episode.observation().tools
        tools = [types.Tool(name=spec["function"]["name"], description=spec["function"].get("description"),
                            input_schema=spec["function"].get("parameters") or {"type": "object"})
                 for spec in specs]
        tools.append(types.Tool(
            name=SUBMIT, input_schema=_SUBMIT_SCHEMA,
            description="Send the model's final answer (its text turn). In a tool-use episode this ends the "
                        "episode and scores it; in a multi-turn one the environment replies. The result carries "
                        "reward and done."))
        tools.append(types.Tool(name=END, input_schema=_END_SCHEMA,
                                description="End the episode now and free its state (unscored)."))
        return types.ListToolsResult(tools=tools)

    @staticmethod
    def _start_tool(served: Served) -> types.Tool:
        splits = ", ".join(f"{name} (held out: needs a token)" if info.held_out else name
                           for name, info in served.env.splits.items() if info.available)
        return types.Tool(
            name=START, input_schema=_START_SCHEMA,
            description=f"Start an episode of {served.name} on one task (split, and index or task_id). The result "
                        f"is the task's prompt and, in structured content, the episode's MCP URL, whose tools are "
                        f"the environment's tools, {SUBMIT} and {END}. Splits: {splits}.")

    # -- tools/call ----------------------------------------------------------------------

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        request = self._request(ctx)
        served = self._served(request)
        session = self._session(request, served)
        arguments = dict(params.arguments or {})
        try:
            if session is None:
                if params.name != START:
                    raise MCPError(types.INVALID_PARAMS,
                                   f"unknown tool {params.name!r} on the endpoint of {served.name} (its tool: {START})",
                                   {"status": 404, "code": "no-such-tool",
                                    "hint": f"call {START}, then the environment's tools on the episode's URL"})
                return await self._start(request, served, arguments)
            return await self._in_episode(session, params.name, arguments)
        except ApiError as e:
            raise _mcp_error(e) from None
        except EnvhubError as e:
            raise _mcp_error(from_envhub_error(e)) from None

    async def _start(self, request: Request, served: Served, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            body = CreateEpisodeRequest.model_validate({"index": 0, **arguments} if "task_id" not in arguments
                                                       else arguments)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: "
                                 f"{str(err['msg']).removeprefix('Value error, ')}"
                                 for err in e.errors(include_url=False, include_input=False))
            raise MCPError(types.INVALID_PARAMS, f"invalid arguments to {START}: {problems}",
                           {"status": 400, "code": "invalid-body",
                            "hint": "pass split, and index (a whole number) or task_id"}) from None
        held_out = served.held_out(body.split)
        self._check(request, held_out=held_out, what=f"split {body.split!r} of {served.name}")
        created = await self.api.start_episode(served, body, held_out=held_out)
        url = f"{MCP_PREFIX}/{served.name}/episodes/{created.episode_id}"
        data = {**created.to_json(), "url": url}
        text = "\n\n".join(f"[{m.get('role')}] {_text(m.get('content'))}" for m in created.observation.messages)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data)

    async def _in_episode(self, session: Session, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if name == END:
            self.api.sessions.close(session, "closed", "its client closed it")
            return types.CallToolResult(content=[types.TextContent(text="the episode is closed")],
                                        structured_content={"episode_id": session.id, "closed": True})
        if name == SUBMIT:
            answer = arguments.get("answer")
            if not isinstance(answer, str) or set(arguments) != {"answer"}:
                raise MCPError(types.INVALID_PARAMS, f"{SUBMIT} takes one argument, answer (a string); got "
                                                     f"{sorted(arguments) or 'none'}",
                               {"status": 400, "code": "invalid-action", "hint": 'call submit with {"answer": "..."}'})
            action: dict[str, Any] = {"role": "assistant", "content": answer}
        else:
            known = [spec["function"]["name"] for spec in session.episode.observation().tools]
            if name not in known:
                raise MCPError(types.INVALID_PARAMS,
                               f"unknown tool {name!r} in this episode of {session.served.name} (its tools: "
                               f"{', '.join([*known, SUBMIT, END])})",
                               {"status": 404, "code": "no-such-tool", "hint": "tools/list lists them"})
            call_id = f"mcp-{next(self._call_ids)}"
            action = {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}
        view = await self.api.take_step(session, action)
        return _step_result(view)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


_OMIT: Callable[[str], bool] = {"observation", "new_messages"}.__contains__


def _step_result(view: StepView) -> types.CallToolResult:
    """A step as a tool result: the messages the environment added (tool results, its
    reply) as text, and the ``/v1`` step record (reward, turn_reward, done, info, ...) as
    structured content, less the observation and messages."""
    record = view.to_json()
    replies = [m for m in record.get("new_messages", [])[1:] if m.get("role") != "assistant"]
    content: list[types.ContentBlock] = [types.TextContent(text=_text(m.get("content"))) for m in replies]
    if not content:
        content = [types.TextContent(text="the episode is done" if view.done else "")]
    structured = {k: v for k, v in record.items() if not _OMIT(k)}
    structured["messages"] = replies
    error = (view.info or {}).get("environment_error")
    return types.CallToolResult(content=content, structured_content=structured, is_error=bool(error))
