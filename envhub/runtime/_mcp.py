"""Tools from MCP servers: the ``[[harness.mcp-servers]]`` of one environment, through the ``mcp`` SDK.

An :class:`McpToolset` knows an environment's MCP servers. :meth:`McpToolset.tools` starts
each server once, lists its tools, keeps only the allowlisted ones (``tools``), prepends the
server's ``prefix`` and refuses two tools with the same name. :meth:`McpToolset.aopen` gives
one episode an :class:`McpSession`: a fresh server for each ``scope = "episode"`` server, the
one shared server for each ``scope = "environment"`` server.

The SDK's client contexts (``stdio_client``, ``ClientSession``) are anyio task groups: they
must be entered and left by the same task. Episodes are not so tidy: an episode may open its
session in one asyncio task, call tools from another, close from a third, or use the sync
API with no event loop at all. So every server's client lives in a task of its own on one
event loop in a background thread (one per toolset), and the episode's calls cross to that
loop with :func:`asyncio.run_coroutine_threadsafe` (``bench/mcp_tools.py`` measures the
cost).

A call never raises for what goes wrong in it; the model gets an ``Error: ...`` tool
message, and :attr:`ToolCallResult.fault` says whose it was: the model's for arguments that
are not a JSON object or that the tool's input schema refuses, the environment's for a tool
that fails on arguments its schema accepts, a server that died, or a call that timed out.

A ``command`` server is the bundle's own code: it runs only if the bundle is trusted
(:class:`~envhub.errors.TrustError` otherwise). A ``url`` server is not the bundle's code
and needs no trust.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import math
import os
import sys
import tempfile
import threading
import weakref
from collections.abc import Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from envhub.errors import EnvhubError, ManifestError, TrustError, UsageError
from envhub.problems import Problem
from envhub.runtime._tools import ToolCallResult, _error, _strip_titles

if TYPE_CHECKING:
    from envhub.manifest import McpServer

__all__ = ["BoundMcpTool", "McpServerError", "McpSession", "McpTool", "McpToolset"]

_T = TypeVar("_T")

#: How long past a call's own timeout envhub waits before it gives up on the SDK itself.
_GRACE_S = 5.0
#: How long stopping one server may take (the SDK closes stdin, waits 2 s, then kills).
_STOP_S = 10.0
#: How much of a stdio server's stderr an error message quotes.
_STDERR_TAIL = 2000
_STDERR_LINES = 5


class McpServerError(EnvhubError, RuntimeError):
    """An MCP server cannot be started or listed (a command that fails, a URL that does not answer)."""


@dataclass(slots=True)
class McpTool:
    """One tool an MCP server offers the model: its ``name`` as the model sees it (prefixed),
    ``spec`` (an OpenAI tool entry), the ``server`` that serves it and its name there
    (``remote_name``), and its input schema (``schema``, for telling bad arguments apart)."""

    name: str
    spec: dict[str, Any]
    server: str
    remote_name: str
    schema: dict[str, Any]
    #: Where the tool comes from, for messages: ``mcp:SERVER/NAME``.
    source: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.source = f"mcp:{self.server}/{self.remote_name}"

    def call(self, call: Mapping[str, Any], state: Any = None) -> ToolCallResult:
        """The answer to a call made outside an episode's session (:meth:`McpSession.tool`
        gives the tool that runs calls): an environment-fault error, never a call."""
        call_id = str(call.get("id") or "")
        return _error(call_id, self.name, f"Error: {self.name} failed: no MCP session is open for this episode",
                      fault="environment")

    async def acall(self, call: Mapping[str, Any], state: Any = None) -> ToolCallResult:
        """:meth:`call` for the event loop."""
        return self.call(call, state)


class BoundMcpTool:
    """An MCP tool bound to one episode's :class:`McpSession`: the interface of
    :class:`~envhub.runtime.Tool` (``name``, ``spec``, ``call(call, state)``,
    ``acall(call, state)``; the state is not used: the server keeps its own)."""

    __slots__ = ("_session", "name", "source", "spec")

    def __init__(self, session: McpSession, tool: McpTool) -> None:
        self._session = session
        self.name: str = tool.name
        self.spec: dict[str, Any] = tool.spec
        self.source: str = tool.source

    def call(self, call: Mapping[str, Any], state: Any = None) -> ToolCallResult:
        return self._session.call(self.name, call)

    async def acall(self, call: Mapping[str, Any], state: Any = None) -> ToolCallResult:
        return await self._session.acall(self.name, call)


def _spec(name: str, tool: Any) -> dict[str, Any]:
    parameters = _strip_titles(dict(tool.input_schema or {}))
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    return {"type": "function",
            "function": {"name": name, "description": tool.description or "", "parameters": parameters}}


def _content_text(result: Any) -> str:
    """One tool message from a ``CallToolResult``: text blocks joined; other blocks as a short
    placeholder naming their type; structured content as JSON when no block says anything."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", type(block).__name__)
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[resource: {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {block.uri}]")
        else:
            parts.append(f"[{kind}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return "\n".join(parts)


def _arguments_fit(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> bool:
    """Whether ``arguments`` fit the tool's input schema (a schema that is itself invalid fits anything)."""
    import jsonschema  # type: ignore[import-untyped]

    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
    except jsonschema.SchemaError:
        return True
    return bool(validator_class(schema).is_valid(arguments))


class _LoopThread:
    """An event loop running in a daemon thread: the home of every MCP client of one toolset."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="envhub-mcp", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("an MCP toolset cannot be called from its own event loop thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        """Run ``coro`` on the loop and wait for it, from a thread that is not the loop's."""
        return self.submit(coro).result(timeout)

    async def arun(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the loop and await it from another event loop (cancelling the caller cancels it)."""
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(_STOP_S)
        if not self.thread.is_alive():
            self.loop.close()


class _Connection:
    """One running MCP server; its client is entered and left by one task on the loop thread."""

    def __init__(self, server: McpServer, root: Path) -> None:
        self.server = server
        self.root = root
        self.client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._stderr: IO[bytes] | None = None

    def describe(self) -> str:
        where = self.server.url if self.server.url else " ".join(self.server.command or [])
        return f"MCP server {self.server.name!r} ({where})"

    def stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            size = self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, size - _STDERR_TAIL))
            lines = self._stderr.read().decode("utf-8", "replace").splitlines()
        except (OSError, ValueError):
            return ""
        text = " | ".join(" ".join(line.split()) for line in lines[-_STDERR_LINES:] if line.strip())
        return f"; its stderr ends: {text}" if text else ""

    def _transport(self) -> Any:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        if self.server.url:
            return self.server.url
        command = list(self.server.command or [])
        if command[0] == "python":
            command[0] = sys.executable
        params = StdioServerParameters(command=command[0], args=command[1:], env=dict(self.server.env) or None,
                                       cwd=self.root)
        # A real file: the child writes to it directly, and an error quotes its end.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        return stdio_client(params, errlog=self._stderr)  # type: ignore[arg-type]

    async def start(self) -> None:
        """Start the server and shake hands within ``timeout-s``; raises :class:`McpServerError`."""
        try:
            from mcp import Client
        except ImportError as e:
            raise McpServerError(f"{self.describe()}: the mcp package is not installed",
                                 hint="pip install 'envhub-rl[mcp]'") from e
        self._stop = asyncio.Event()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        transport = self._transport()
        self._task = asyncio.create_task(self._own(Client(transport, read_timeout_seconds=self.server.timeout_s),
                                                   ready))
        try:
            await ready
        except BaseException:
            await self.stop()
            raise

    async def _own(self, client: Any, ready: asyncio.Future[None]) -> None:
        """The task that owns the client from start to stop (anyio wants one task for both)."""
        import anyio

        assert self._stop is not None
        try:
            with anyio.CancelScope() as scope:
                scope.deadline = anyio.current_time() + self.server.timeout_s  # the start-up limit
                async with client:
                    scope.deadline = math.inf
                    self.client = client
                    ready.set_result(None)
                    await self._stop.wait()
            if scope.cancelled_caught and not ready.done():
                ready.set_exception(McpServerError(
                    f"{self.describe()} did not start within {self.server.timeout_s:g} s{self.stderr_tail()}",
                    hint="check that the server starts on its own, or raise timeout-s in [[harness.mcp-servers]]"))
        except Exception as e:
            if not ready.done():
                ready.set_exception(McpServerError(
                    f"{self.describe()} cannot be started: {type(e).__name__}: {_describe(e)}{self.stderr_tail()}",
                    hint="run the command in the bundle directory (or open the URL) to see why"))
        finally:
            self.client = None
            if not ready.done():
                ready.set_exception(McpServerError(f"{self.describe()} stopped while starting{self.stderr_tail()}"))

    async def stop(self) -> None:
        """Stop the server (the SDK closes stdin, then terminates the process tree); idempotent."""
        task, self._task = self._task, None
        if task is not None:
            assert self._stop is not None
            self._stop.set()
            try:
                await asyncio.wait_for(asyncio.shield(task), _STOP_S)
            except (TimeoutError, asyncio.CancelledError, Exception):
                task.cancel()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def list_tools(self) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        while True:
            page = await self.client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call(self, tool: McpTool, call_id: str, arguments: dict[str, Any]) -> ToolCallResult:
        """One tool call; every failure becomes an error answer with its fault."""
        from mcp import MCPError

        # The model sees these messages: they never quote the server's stderr (its logs are
        # the environment's business, and could hold what the model should not read).
        timeout = self.server.timeout_s
        if self.client is None:
            return _error(call_id, tool.name, f"Error: {tool.name} failed: the {self.describe()} is not running",
                          fault="environment")
        try:
            result = await asyncio.wait_for(
                self.client.call_tool(tool.remote_name, arguments, read_timeout_seconds=timeout), timeout + _GRACE_S)
        except TimeoutError:
            return _error(call_id, tool.name, f"Error: {tool.name} timed out after {timeout:g} s",
                          fault="environment")
        except MCPError as e:
            from mcp.types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

            if e.code == REQUEST_TIMEOUT or "timed out" in e.error.message:
                return _error(call_id, tool.name, f"Error: {tool.name} timed out after {timeout:g} s",
                              fault="environment")
            if e.code == INVALID_PARAMS and not _arguments_fit(tool.schema, arguments):
                return _error(call_id, tool.name, f"Error: invalid arguments for {tool.name}: {e.error.message}")
            if e.code == CONNECTION_CLOSED:
                return _error(call_id, tool.name, f"Error: {tool.name} failed: the {self.describe()} stopped "
                                                  "answering", fault="environment")
            return _error(call_id, tool.name, f"Error: {tool.name} failed: {e.error.message}", fault="environment")
        except Exception as e:
            return _error(call_id, tool.name, f"Error: {tool.name} failed: {type(e).__name__}: {_describe(e)}",
                          fault="environment")
        text = _content_text(result)
        if result.is_error:
            # MCP's isError does not say whose error it is; the tool's schema does: arguments it
            # refuses are the model's mistake, a failure on arguments it accepts the environment's.
            if _arguments_fit(tool.schema, arguments):
                return _error(call_id, tool.name, f"Error: {text}", fault="environment")
            return _error(call_id, tool.name, f"Error: invalid arguments for {tool.name}: {text}")
        return ToolCallResult({"role": "tool", "tool_call_id": call_id, "name": tool.name, "content": text})


def _describe(e: BaseException) -> str:
    """The text of an exception, looking inside the exception groups anyio raises."""
    if isinstance(e, BaseExceptionGroup) and e.exceptions:
        return "; ".join(_describe(inner) for inner in e.exceptions)
    return str(e) or type(e).__name__


class McpSession:
    """One episode's MCP tools: its own episode-scoped servers and the toolset's shared ones.

    Use :meth:`acall`/:meth:`aclose` from any event loop (or task) and :meth:`call`/:meth:`close`
    from plain threads; closing stops the episode's servers (and reaps their processes).
    """

    def __init__(self, toolset: McpToolset, tools: Mapping[str, tuple[McpTool, _Connection]],
                 owned: Sequence[_Connection]) -> None:
        self._toolset = toolset
        self._tools = dict(tools)
        self._owned = list(owned)
        self.closed = False
        toolset._live.update(self._owned)
        # A session dropped without close() still stops its servers (in the background).
        weakref.finalize(self, _abandon, toolset._box, toolset._live, self._owned)

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools this session serves, as the model sees them."""
        return list(self._tools)

    def tool(self, name: str) -> BoundMcpTool:
        """The tool ``name`` bound to this session, to call like any other tool; raises
        :class:`KeyError` for a name the session does not serve."""
        return BoundMcpTool(self, self._tools[name][0])

    def tools(self) -> dict[str, BoundMcpTool]:
        """Every tool of the session, bound to it, by name."""
        return {name: BoundMcpTool(self, tool) for name, (tool, _) in self._tools.items()}

    def _prepare(self, tool_name: str, call: Mapping[str, Any]
                 ) -> tuple[str, ToolCallResult | tuple[McpTool, _Connection, dict[str, Any]]]:
        """(call id, (tool, connection, arguments)), or (call id, the error answer)."""
        call_id = str(call.get("id") or "")
        entry = self._tools.get(tool_name)
        if entry is None:
            available = ", ".join(self._tools) or "none"
            return call_id, _error(call_id, tool_name, f"Error: unknown tool {tool_name!r}; available tools: "
                                                       f"{available}")
        if self.closed:
            return call_id, _error(call_id, tool_name, f"Error: {tool_name} failed: the episode's MCP session "
                                                       "is closed", fault="environment")
        raw = (call.get("function") or {}).get("arguments")
        if raw is None or raw == "":
            arguments: Any = {}
        elif isinstance(raw, str):
            try:
                arguments = json.loads(raw)
            except json.JSONDecodeError as e:
                return call_id, _error(call_id, tool_name, f"Error: the arguments of {tool_name} are not valid "
                                                           f"JSON ({e.msg} at position {e.pos})")
        else:
            arguments = raw
        if not isinstance(arguments, dict):
            return call_id, _error(call_id, tool_name, f"Error: the arguments of {tool_name} must be a JSON object, "
                                                       f"got {type(arguments).__name__}")
        tool, connection = entry
        return call_id, (tool, connection, arguments)

    async def acall(self, tool_name: str, call: Mapping[str, Any]) -> ToolCallResult:
        """Run one OpenAI tool call (JSON-string arguments) of the MCP tool ``tool_name``; never
        raises for the model's mistakes, the tool's errors, a dead server or a timeout."""
        call_id, prepared = self._prepare(tool_name, call)
        if isinstance(prepared, ToolCallResult):
            return prepared
        tool, connection, arguments = prepared
        return await self._toolset._runner().arun(connection.call(tool, call_id, arguments))

    def call(self, tool_name: str, call: Mapping[str, Any]) -> ToolCallResult:
        """:meth:`acall` for callers without an event loop (or that may block theirs)."""
        call_id, prepared = self._prepare(tool_name, call)
        if isinstance(prepared, ToolCallResult):
            return prepared
        tool, connection, arguments = prepared
        return self._toolset._runner().run(connection.call(tool, call_id, arguments))

    async def _stop(self) -> None:
        owned = list(self._owned)
        self._owned.clear()
        self._toolset._live.difference_update(owned)
        await asyncio.gather(*(c.stop() for c in owned))

    async def aclose(self) -> None:
        """Stop the episode's own servers; idempotent."""
        if self.closed:
            return
        self.closed = True
        self._toolset._sessions.discard(self)
        if self._owned:
            await self._toolset._runner().arun(self._stop())

    def close(self) -> None:
        """:meth:`aclose` for sync callers."""
        if self.closed:
            return
        self.closed = True
        self._toolset._sessions.discard(self)
        if self._owned:
            self._toolset._runner().run(self._stop())

    def __enter__(self) -> McpSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> McpSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _abandon(runner_box: list[_LoopThread], live: set[_Connection], owned: list[_Connection]) -> None:
    """Stop the servers of a session nobody closed, without waiting (it may run in any thread)."""
    connections = list(owned)
    owned.clear()
    live.difference_update(connections)
    if connections and runner_box and not runner_box[0].loop.is_closed():
        for connection in connections:
            with contextlib.suppress(RuntimeError):  # the loop is stopping: _shutdown stops them
                asyncio.run_coroutine_threadsafe(connection.stop(), runner_box[0].loop)


def _shutdown(runner_box: list[_LoopThread], live: set[_Connection],
              sessions: weakref.WeakSet[McpSession]) -> None:
    """Stop every server and the loop thread (``McpToolset.close``, and at exit for a toolset
    nobody closed, so no server process outlives the program)."""
    for session in list(sessions):
        session.closed = True
    if not runner_box:
        return
    runner = runner_box.pop()
    owned = list(live)
    live.clear()
    if runner.loop.is_closed():
        return

    async def stop_all(*, then_stop_loop: bool = False) -> None:
        await asyncio.gather(*(c.stop() for c in owned))
        if then_stop_loop:
            runner.loop.stop()

    if threading.current_thread() is runner.thread:
        # Collected on the loop thread itself (a coroutine there dropped the last reference):
        # it cannot wait for itself, so the stopping is scheduled, and the loop stops after it.
        runner.loop.create_task(stop_all(then_stop_loop=True))
        return
    # Best effort: the loop is stopped below either way.
    with contextlib.suppress(Exception):
        runner.run(stop_all(), _STOP_S * 2)
    runner.stop()


class McpToolset:
    """The MCP servers of one environment (``[[harness.mcp-servers]]`` of its manifest).

    ``root`` is the bundle directory (a stdio server runs there); ``trusted`` says whether the
    bundle may run its own code: a ``command`` server in an untrusted bundle raises
    :class:`~envhub.errors.TrustError` here (``trust_hint`` says how to trust it).
    ``reserved`` names the harness's other tools, which an MCP tool may not shadow.
    """

    def __init__(self, servers: Sequence[McpServer], *, root: Path, trusted: bool,
                 trust_hint: str | None = None, env_name: str = "the environment",
                 reserved: Collection[str] = ()) -> None:
        self.servers = list(servers)
        #: The names of the harness's other tools (Python, built-in, spec): an MCP tool may not take one.
        self.reserved = frozenset(reserved)
        self.root = Path(root)
        self.env_name = env_name
        commands = [s.name for s in self.servers if s.command]
        if commands and not trusted:
            raise TrustError(f"{env_name} runs MCP servers from its own code ({', '.join(commands)}), "
                             "and it is not trusted", hint=trust_hint or "trust the bundle to run its MCP servers")
        self._tools: list[McpTool] | None = None
        self._shared: dict[str, _Connection] = {}
        self._box: list[_LoopThread] = []
        #: Every running server: the shared ones and those of the sessions still open.
        self._live: set[_Connection] = set()
        self._sessions: weakref.WeakSet[McpSession] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._listing: asyncio.Lock | None = None
        self.closed = False
        self._finalizer = weakref.finalize(self, _shutdown, self._box, self._live, self._sessions)

    def _runner(self) -> _LoopThread:
        with self._lock:
            if self.closed:
                raise UsageError(f"the MCP toolset of {self.env_name} is closed")
            if not self._box:
                self._box.append(_LoopThread())
            return self._box[0]

    # -- listing ---------------------------------------------------------------------------

    async def _list(self) -> list[McpTool]:
        """On the loop thread: start each server once, list and check its tools."""
        if self._listing is None:
            self._listing = asyncio.Lock()
        async with self._listing:
            if self._tools is not None:
                return self._tools
            connections = [_Connection(s, self.root) for s in self.servers]
            try:
                await _start_all(connections)
                listed = await asyncio.gather(*(c.list_tools() for c in connections))
            except BaseException:
                await asyncio.gather(*(c.stop() for c in connections))
                raise
            try:
                tools = self._check(listed)
            finally:
                for connection in connections:
                    if connection.server.scope != "environment":
                        await connection.stop()
            for connection in connections:
                if connection.server.scope == "environment":
                    self._shared[connection.server.name] = connection
                    self._live.add(connection)
            self._tools = tools
            return tools

    def _check(self, listed: Sequence[Sequence[Any]]) -> list[McpTool]:
        """The offered tools, or a :class:`ManifestError` listing every clash and missing tool."""
        problems: list[Problem] = []
        tools: list[McpTool] = []
        owner: dict[str, str] = {}
        for i, (server, remote) in enumerate(zip(self.servers, listed, strict=True)):
            key = f"harness.mcp-servers[{i}]"
            by_name = {t.name: t for t in remote}
            if server.tools is not None:
                for name in server.tools:
                    if name not in by_name:
                        problems.append(Problem(
                            "error", "mcp-tool-missing",
                            f"MCP server {server.name!r} has no tool {name!r} (it has: "
                            f"{', '.join(sorted(by_name)) or 'none'})", file="envhub.toml", field=f"{key}.tools",
                            hint="remove it from tools, or fix its spelling"))
                chosen = [by_name[n] for n in server.tools if n in by_name]
            else:
                chosen = list(remote)
            for tool in chosen:
                name = f"{server.prefix}{tool.name}"
                if name in self.reserved:
                    problems.append(Problem(
                        "error", "mcp-tool-clash", f"the MCP tool name {name!r} of server {server.name!r} is the "
                        "name of another tool of the harness", file="envhub.toml", field=f"{key}.prefix",
                        hint=f"set a prefix on the server (prefix = \"{server.name}_\"), or leave the tool out with "
                             "tools = [...]"))
                    continue
                if name in owner:
                    other = owner[name]
                    where = f"servers {other!r} and {server.name!r}" if other != server.name \
                        else f"server {server.name!r} (twice)"
                    problems.append(Problem(
                        "error", "mcp-tool-clash", f"the MCP tool name {name!r} is given by {where}",
                        file="envhub.toml", field=f"{key}.prefix",
                        hint=f"set a prefix on one of them (prefix = \"{server.name}_\"), or leave the tool out "
                             "with tools = [...]"))
                    continue
                owner[name] = server.name
                tools.append(McpTool(name=name, spec=_spec(name, tool), server=server.name, remote_name=tool.name,
                                     schema=dict(tool.input_schema or {})))
        if problems:
            raise ManifestError(f"{self.env_name}: the tools of its MCP servers do not fit together", problems)
        return tools

    def tools(self) -> list[McpTool]:
        """The servers' tools, as offered to the model (starting each server once, the first time).
        Raises :class:`McpServerError` if a server cannot start, :class:`ManifestError` on a
        name clash or an allowlisted tool the server lacks."""
        if not self.servers:
            return []
        if self._tools is not None:
            return list(self._tools)
        return list(self._runner().run(self._list()))

    async def atools(self) -> list[McpTool]:
        """:meth:`tools` for the event loop."""
        if not self.servers:
            return []
        if self._tools is not None:
            return list(self._tools)
        return list(await self._runner().arun(self._list()))

    # -- episodes --------------------------------------------------------------------------

    async def _open(self) -> McpSession:
        tools = await self._list()
        owned = [_Connection(s, self.root) for s in self.servers if s.scope != "environment"]
        await _start_all(owned)
        by_server = {c.server.name: c for c in owned} | self._shared
        session = McpSession(self, {t.name: (t, by_server[t.server]) for t in tools}, owned)
        self._sessions.add(session)
        return session

    async def aopen(self) -> McpSession:
        """One episode's session: fresh episode-scoped servers, the shared environment-scoped ones.
        Raises :class:`McpServerError` if a server cannot start."""
        return await self._runner().arun(self._open())

    def open(self) -> McpSession:
        """:meth:`aopen` for sync callers."""
        return self._runner().run(self._open())

    def close(self) -> None:
        """Stop the shared servers, the servers of every session still open, and the loop thread."""
        with self._lock:
            self.closed = True
        self._finalizer()

    async def aclose(self) -> None:
        """:meth:`close` for the event loop (the stopping runs in a worker thread)."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> McpToolset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _start_all(connections: Sequence[_Connection]) -> None:
    """Start every connection at once; if one fails, stop the others and raise its error."""
    results = await asyncio.gather(*(c.start() for c in connections), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        await asyncio.gather(*(c.stop() for c in connections))
        raise failures[0]


if TYPE_CHECKING:  # both have the interface of every tool an episode calls
    from envhub.runtime._tools import ToolLike

    _unbound: type[ToolLike] = McpTool
    _bound: type[ToolLike] = BoundMcpTool
