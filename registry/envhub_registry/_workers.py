"""Several worker processes behind one port: ``envhub serve --workers N``.

The parent process loads the environments, binds the port and forks ``N`` workers that
share the listening socket (the kernel hands each new connection to one of them). An
episode lives in the memory of the worker that created it (its state may be an open file,
a SQLite database, a subprocess), so every id a worker mints names it: an episode id, an
ORS session id and an MCP session id start with ``{index}.{epoch}.``, where ``epoch`` is
random for each worker process. A request that names another worker's episode (in its
path, its ``X-Session-ID`` or ``Mcp-Session-Id`` header, an OpenEnv ``episode_id``) is
forwarded to that worker over its private unix socket, as framed ASGI messages (one
connection between two workers carries any number of requests at once): one local hop, and
none for the requests that land where their episode is. OpenEnv's WebSocket
sessions live on the connection, so they never move.

A worker that dies loses its episodes: the parent starts another in its place (a new
epoch), and a request for a lost episode is answered 410 ``episode-lost`` in its
protocol's shape, by whichever worker it reaches. The counts of open episodes are kept in
memory the workers share, so ``max-episodes`` holds for the server as a whole and
``/v1/health`` reports every worker's counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import logging
import marshal
import multiprocessing
import os
import re
import secrets
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import orjson

from envhub.errors import UsageError

__all__ = ["TOO_LARGE", "Counters", "Router", "Worker", "owner_of", "supervise"]

log = logging.getLogger("envhub_registry")

#: ``{index}.{epoch}.`` at the start of every id a worker mints.
_TAG = re.compile(r"(\d{1,2})\.([0-9a-f]{6})\.")
#: Set in the ASGI scope of a request whose body is over the limit: the app answers it 413 at once.
TOO_LARGE = "envhub.body_too_large"
_FIELDS = ("pid", "open", "opened", "expired", "refused")
_STOP_S = 15.0  # how long the workers get to close their episodes before they are killed


def owner_of(ident: str) -> tuple[int, str] | None:
    """The worker index and epoch an id was minted by, or ``None`` for an untagged id."""
    match = _TAG.match(ident)
    return (int(match.group(1)), match.group(2)) if match else None


class Counters:
    """Per-worker counts in memory the parent shares with its forked workers: each worker
    writes only its own slots; a reader sums them."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._values = multiprocessing.get_context("fork").RawArray(ctypes.c_longlong, workers * len(_FIELDS))

    def _at(self, index: int, name: str) -> int:
        return index * len(_FIELDS) + _FIELDS.index(name)

    def get(self, index: int, name: str) -> int:
        return int(self._values[self._at(index, name)])

    def add(self, index: int, name: str, delta: int = 1) -> None:
        self._values[self._at(index, name)] += delta

    def set(self, index: int, name: str, value: int) -> None:
        self._values[self._at(index, name)] = value

    def total(self, name: str) -> int:
        return sum(self.get(i, name) for i in range(self.workers))

    def reserve(self, index: int, limit: int) -> bool:
        """Count one more open episode on worker ``index`` if the server's total stays
        within ``limit``. The slot is raised before the total is read, so two workers that
        race for the last place may both be refused, but the total never passes the limit."""
        self.add(index, "open")
        if self.total("open") > limit:
            self.add(index, "open", -1)
            return False
        return True

    def table(self) -> list[dict[str, int]]:
        return [{"index": i, **{name: self.get(i, name) for name in _FIELDS}} for i in range(self.workers)]


@dataclass(frozen=True)
class Worker:
    """One worker process of a server with ``count`` of them."""

    index: int
    count: int
    epoch: str
    run_dir: Path
    counters: Counters

    def tag(self, token: str) -> str:
        """``token`` as an id that names this worker process."""
        return f"{self.index}.{self.epoch}.{token}"

    def lost(self, ident: str) -> int | None:
        """The index of the worker process that minted ``ident`` if it is not this one
        (so its episode is not here and, since forwarding did not reach it, lost)."""
        owner = owner_of(ident)
        if owner is None or owner == (self.index, self.epoch):
            return None
        return owner[0]

    def socket_path(self, index: int) -> Path:
        return self.run_dir / f"worker-{index}.sock"


# --- routing -------------------------------------------------------------------------------


class _Replay:
    """An ASGI ``receive`` that hands over an already read body, then defers to the real one."""

    def __init__(self, body: bytes, receive: Any, *, more: bool = False) -> None:
        self.body: bytes | None = body
        self.receive = receive
        self.more = more

    async def __call__(self) -> Any:
        if self.body is not None:
            body, self.body = self.body, None
            return {"type": "http.request", "body": body, "more_body": self.more}
        return await self.receive()


class Router:
    """ASGI middleware of one worker: a request naming another worker's episode goes there
    (:meth:`serve_hops` answers those that come here); ``Mcp-Session-Id`` values are tagged
    on the way out and untagged on the way in."""

    def __init__(self, app: Any, worker: Worker, max_body_bytes: int) -> None:
        self.app = app
        self.worker = worker
        self.max_body_bytes = max_body_bytes
        self._hops: dict[int, _Hop] = {}
        self._prefix = f"{worker.index}.{worker.epoch}.".encode()
        self._server: asyncio.AbstractServer | None = None
        self._served: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan, and WebSockets: sessions that live on their connection
            await self.app(scope, receive, send)
            return
        session_header: str | None = None
        mcp_session: bytes | None = None
        for name, value in scope["headers"]:
            if name == b"x-session-id":
                session_header = value.decode("latin-1").strip()
            elif name == b"mcp-session-id":
                mcp_session = value
        raw_receive = receive
        # Where each protocol names its episode (a path that names one wins over a header).
        path: str = scope["path"]
        ident: str | None = None
        body: bytes | None = None
        parts = path.split("/")
        if path.startswith("/v1/"):
            if path.startswith("/v1/episodes/") and len(parts) >= 4:
                ident = parts[3]
        elif path.startswith("/mcp/"):
            if len(parts) >= 6 and parts[4] == "episodes":
                ident = parts[5]
            elif mcp_session is not None:
                ident = mcp_session.decode("latin-1").strip()
        elif path.startswith("/openenv/"):
            if scope["method"] == "GET" and b"episode_id=" in scope["query_string"]:
                ids = parse_qs(scope["query_string"].decode("latin-1")).get("episode_id")
                ident = ids[0] if ids else None
            elif scope["method"] == "POST" and path.endswith("/step"):
                body, complete = await self._read(receive)
                receive = _Replay(body, receive, more=not complete)
                if not complete:
                    await self._too_large(scope, receive, send)
                    return
                ident = _episode_id(body)
        else:  # the Open Reward Standard's routes, under /ors or at the root
            ident = session_header
        owner = owner_of(ident) if ident else None
        if owner is not None and owner[0] != self.worker.index and owner[0] < self.worker.count:
            if body is None:
                body, complete = await self._read(receive)
                receive = _Replay(body, receive, more=not complete)
                if not complete:
                    await self._too_large(scope, receive, send)
                    return
            if await self._forward(owner[0], scope, body, send, raw_receive):
                return
            # The owner is gone: this worker answers, and the id it does not know is lost.
        await self.local(scope, receive, send)

    async def local(self, scope: Any, receive: Any, send: Any) -> None:
        """Answer the request here (it is this worker's, or was forwarded here)."""
        if not scope["path"].startswith("/mcp/"):
            await self.app(scope, receive, send)
            return
        prefix = self._prefix
        headers = scope["headers"]
        if any(n == b"mcp-session-id" and v.startswith(prefix) for n, v in headers):
            scope = dict(scope)
            scope["headers"] = [(n, v[len(prefix):] if n == b"mcp-session-id" else v) for n, v in headers]

        async def tagging_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers") or []
                if any(n.lower() == b"mcp-session-id" for n, _ in headers):
                    message = {**message, "headers": [(n, prefix + v if n.lower() == b"mcp-session-id" else v)
                                                      for n, v in headers]}
            await send(message)

        await self.app(scope, receive, tagging_send)

    async def _too_large(self, scope: Any, receive: Any, send: Any) -> None:
        """Answer 413 here, before any handler looks for the episode (which is elsewhere)."""
        await self.app({**scope, TOO_LARGE: True}, receive, send)

    async def _read(self, receive: Any) -> tuple[bytes, bool]:
        """The request body, and whether it is complete: reading stops past the limit (the
        app's own check then answers the request, given what was read and the rest)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks), True
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if size > self.max_body_bytes:
                return b"".join(chunks), False
            if not message.get("more_body", False):
                return b"".join(chunks), True

    # -- the hop between workers ---------------------------------------------------------

    async def _forward(self, index: int, scope: Any, body: bytes, send: Any, disconnected: Any) -> bool:
        """Have worker ``index`` answer the request; ``False`` if it cannot be reached
        (nothing has been sent then). ``disconnected`` is the request's ``receive``, its body
        read: it returns when the client goes away, and the request is then dropped there
        too (a stream of events may never end)."""
        hop = self._hops.get(index)
        if hop is None or hop.closed:
            try:
                reader, writer = await asyncio.open_unix_connection(str(self.worker.socket_path(index)),
                                                                    limit=_FRAME_LIMIT)
            except OSError as e:
                log.debug("worker %d cannot be reached: %s", index, e)
                return False
            hop = self._hops[index] = _Hop(reader, writer)
        return await hop.request(scope, body, send, disconnected)

    async def serve_hops(self, sock: socket.socket) -> None:
        """Answer the requests other workers forward here, on the unix socket ``sock``."""
        self._server = await asyncio.start_unix_server(self._hop_connection, sock=sock, limit=_FRAME_LIMIT)

    async def _hop_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        gone: dict[int, asyncio.Event] = {}
        try:
            while True:
                frame = await _read_frame(reader)
                if frame is None:
                    break
                if frame[0] == "c":  # the client of request frame[1] went away
                    event = gone.get(frame[1])
                    if event is not None:
                        event.set()
                    continue
                _, rid, method, path, raw_path, query, headers, body = frame
                gone[rid] = asyncio.Event()
                task = asyncio.ensure_future(self._answer_hop(writer, rid, method, path, raw_path, query, headers,
                                                              body, gone[rid]))
                self._served.add(task)

                def done(task: asyncio.Task[None], rid: int = rid) -> None:
                    self._served.discard(task)
                    gone.pop(rid, None)

                task.add_done_callback(done)
        except (OSError, ValueError, EOFError) as e:
            log.debug("a connection from another worker failed: %s", e)
        except asyncio.CancelledError:
            pass  # the worker is stopping (asyncio would log a cancelled connection handler)
        finally:
            for event in gone.values():
                event.set()
            writer.close()

    async def _answer_hop(self, writer: asyncio.StreamWriter, rid: int, method: str, path: str, raw_path: bytes,
                          query: bytes, headers: list[tuple[bytes, bytes]], body: bytes, gone: asyncio.Event) -> None:
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
                 "method": method, "scheme": "http", "path": path, "raw_path": raw_path, "query_string": query,
                 "root_path": "", "headers": headers, "client": None, "server": None, "state": {}}
        replay = _Replay(body, None)

        async def receive() -> Any:
            if replay.body is not None:
                return await replay()
            await gone.wait()
            return {"type": "http.disconnect"}

        started = False

        async def send(message: Any) -> None:
            nonlocal started
            if gone.is_set() or writer.is_closing():
                return
            if message["type"] == "http.response.start":
                started = True
                _write_frame(writer, ("s", rid, int(message["status"]),
                                      [(bytes(n), bytes(v)) for n, v in message.get("headers") or []]))
            elif message["type"] == "http.response.body":
                more = bool(message.get("more_body", False))
                _write_frame(writer, ("b", rid, bytes(message.get("body", b"")), more))
                if more:
                    await writer.drain()

        try:
            await self.local(scope, receive, send)
        except Exception:
            log.exception("%s %s (forwarded from another worker) failed", method, path)
            if not started:
                await send({"type": "http.response.start", "status": 500, "headers": [
                    (b"content-type", b"application/json")]})
            await send({"type": "http.response.body",
                        "body": b'{"error": {"status": 500, "code": "internal-error", "message": "the server failed '
                                b'to answer", "hint": "see the server\'s log"}}' if not started else b""})

    async def aclose(self) -> None:
        for hop in self._hops.values():
            hop.close()
        self._hops.clear()
        if self._server is not None:
            self._server.close()
        for task in list(self._served):
            task.cancel()


#: Largest frame between workers: a request body within max-body-bytes, or a piece of an answer.
_FRAME_LIMIT = 64 * 1024 * 1024
_LENGTH = struct.Struct(">I")


def _write_frame(writer: asyncio.StreamWriter, frame: tuple[Any, ...]) -> None:
    # marshal: the fastest encoding of these tuples of bytes and ints, both ends being the same
    # Python. Only this server's processes reach the socket (its directory is the user's alone,
    # mode 0700), and marshal, unlike pickle, never runs code on loading.
    data = marshal.dumps(frame)
    writer.write(_LENGTH.pack(len(data)) + data)


async def _read_frame(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    try:
        head = await reader.readexactly(_LENGTH.size)
    except asyncio.IncompleteReadError:
        return None
    (size,) = _LENGTH.unpack(head)
    if size > _FRAME_LIMIT:
        raise ValueError(f"a frame of {size} bytes from another worker")
    frame = marshal.loads(await reader.readexactly(size))
    if not isinstance(frame, tuple) or not frame:
        raise ValueError("a frame from another worker that is not a tuple")
    return frame


class _Hop:
    """One connection to another worker, carrying any number of requests at once: each
    request frame has an id, and the answer's frames (start, body pieces) name it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.closed = False
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Queue[tuple[Any, ...] | None]] = {}
        self._task = asyncio.ensure_future(self._dispatch())

    async def _dispatch(self) -> None:
        try:
            while True:
                frame = await _read_frame(self.reader)
                if frame is None:
                    break
                queue = self._waiting.get(frame[1])
                if queue is not None:
                    queue.put_nowait(frame)
        except (OSError, ValueError, EOFError) as e:
            log.debug("the connection to another worker failed: %s", e)
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for queue in self._waiting.values():
            queue.put_nowait(None)
        self.writer.close()
        self._task.cancel()

    async def request(self, scope: Any, body: bytes, send: Any, disconnected: Any) -> bool:
        rid = next(self._ids)
        queue: asyncio.Queue[tuple[Any, ...] | None] = asyncio.Queue()
        self._waiting[rid] = queue
        headers = [(n, v) for n, v in scope["headers"]]
        try:
            _write_frame(self.writer, ("r", rid, scope["method"], scope["path"],
                                       scope.get("raw_path") or scope["path"].encode(), scope["query_string"],
                                       headers, body))
        except (OSError, RuntimeError):
            self._waiting.pop(rid, None)
            self.close()
            return False

        async def watch() -> None:
            while (await disconnected())["type"] != "http.disconnect":
                pass
            with contextlib.suppress(OSError, RuntimeError):
                _write_frame(self.writer, ("c", rid))
            queue.put_nowait(None)

        watcher = asyncio.ensure_future(watch())
        started = False
        try:
            while True:
                frame = await queue.get()
                if frame is None:  # the owner stopped, or the client went away
                    if not started:
                        return watcher.done()  # gone before the answer: nothing more to send
                    break
                if frame[0] == "s":
                    started = True
                    await send({"type": "http.response.start", "status": frame[2], "headers": frame[3]})
                elif frame[0] == "b":
                    await send({"type": "http.response.body", "body": frame[2], "more_body": frame[3]})
                    if not frame[3]:
                        return True
            if not watcher.done():
                log.warning("a worker stopped in the middle of an answer")
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return True
        finally:
            watcher.cancel()
            self._waiting.pop(rid, None)


def _episode_id(body: bytes) -> str | None:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    value = data.get("episode_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


# --- the parent process --------------------------------------------------------------------


def _die_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent dies (a killed parent must
    not leave workers holding the port)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def supervise(count: int, sock: socket.socket, run_worker: Callable[[Worker, Callable[[], None]], None], *,
              on_ready: Callable[[], None] | None = None) -> None:
    """Run ``count`` workers (each ``run_worker(worker, ready)``, in a forked process, on
    the inherited ``sock``) until SIGINT or SIGTERM; start another in place of one that
    dies. Calls ``on_ready`` once every worker has called its ``ready``.

    Raises :class:`UsageError` when a worker fails before it is ready."""
    counters = Counters(count)
    run_dir = Path(tempfile.mkdtemp(prefix="envhub-serve-"))
    ready_r, ready_w = os.pipe()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    stopping: list[int] = []
    pids: dict[int, int] = {}  # pid -> worker index
    started: dict[int, float] = {}

    def on_signal(signum: int, frame: Any) -> None:
        stopping.append(signum)
        with contextlib.suppress(OSError):
            os.write(wake_w, b"!")

    def spawn(index: int) -> None:
        worker = Worker(index, count, secrets.token_hex(3), run_dir, counters)
        for name in ("open", "pid"):
            counters.set(index, name, 0)
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                os.close(ready_r)
                os.close(wake_r)
                os.close(wake_w)
                # uvicorn stops on these, then raises the signal again for the handler it found:
                # this one lets the worker clean up (its socket) and exit 0, not die of it.
                stop_signals: list[int] = []
                for s in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(s, lambda signum, frame: stop_signals.append(signum))
                _die_with_parent()
                counters.set(index, "pid", os.getpid())

                def ready() -> None:
                    os.write(ready_w, bytes([index]))

                run_worker(worker, ready)
                code = 0
            except BaseException:
                log.exception("worker %d failed", index)
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        pids[pid] = index
        started[index] = time.monotonic()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    ready_seen: set[int] = set()
    announced = False
    try:
        for index in range(count):
            spawn(index)
        while not stopping:
            readable, _, _ = select.select([ready_r, wake_r], [], [], 0.25)
            if ready_r in readable:
                ready_seen.update(os.read(ready_r, 256))
                if not announced and len(ready_seen) >= count:
                    announced = True
                    if on_ready is not None:
                        on_ready()
            while pids:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                index = pids.pop(pid, -1)
                if index < 0 or stopping:
                    continue
                how = (f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
                       else f"exited with status {os.waitstatus_to_exitcode(status)}")
                if not announced:
                    raise UsageError(f"worker process {index} of envhub serve {how} while starting",
                                     hint="see the messages above")
                lost = counters.get(index, "open")
                log.warning("worker %d (pid %d) %s; its %d open episode(s) are lost; starting another",
                            index, pid, how, lost)
                if time.monotonic() - started.get(index, 0.0) < 1.0:
                    time.sleep(1.0)  # a worker that dies at once should not be restarted in a tight loop
                spawn(index)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _stop(pids)
        for fd in (ready_r, ready_w, wake_r, wake_w):
            os.close(fd)
        shutil.rmtree(run_dir, ignore_errors=True)


def _stop(pids: dict[int, int]) -> None:
    """SIGTERM each worker (it closes its episodes), and SIGKILL those still running after
    :data:`_STOP_S`."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_S
    while pids and time.monotonic() < deadline:
        for pid in list(pids):
            with contextlib.suppress(ChildProcessError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done == 0:
                    continue
            pids.pop(pid)
        time.sleep(0.05)
    for pid in list(pids):
        log.warning("worker %d (pid %d) did not stop in %g s; killing it", pids[pid], pid, _STOP_S)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    pids.clear()
