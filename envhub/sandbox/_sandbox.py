"""Run untrusted code in a sandboxed process: the one way envhub does it.

A :class:`Sandbox` is a configuration (limits, network, extra readable paths); each
:meth:`Sandbox.session` starts a new interpreter that locks itself in (namespaces, a private
filesystem view, no capabilities, Landlock, resource limits; :mod:`._launcher` says how) and
then runs a *guest* program, Python source the caller supplies, which talks to the caller in
JSON lines: ``session.send(obj)`` writes to the guest's stdin, ``await session.receive()``
reads what the guest reports on its own descriptor. Values cross as data, never as objects.
The session ends when the guest ends, on timeout, or when the caller leaves the ``async with``;
then the whole sandbox is killed and its temporary workspace removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import math
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envhub.errors import EnvhubError
from envhub.sandbox._launcher import EXIT_MEMORY, EXIT_SETUP, EXIT_TREE, TREE_MAGIC

__all__ = ["WORKSPACE", "Guest", "Limits", "Outcome", "Probe", "Sandbox", "SandboxUnavailableError", "Session",
           "aprobe", "probe"]

_LAUNCHER = Path(__file__).with_name("_launcher.py")
_TAIL_CHARS = 2000
#: The most a guest may report in one run, in bytes; a guest that sends more is killed.
REPORT_LIMIT = 16 * 1024 * 1024
_NOBODY = 65534
#: A guest: Python source, or ``(filename, source)`` modules run in order in one namespace.
Guest = str | Sequence[tuple[str, str]]
#: Where the workspace is inside the private filesystem view.
WORKSPACE = "/workspace"


@dataclass(frozen=True)
class Limits:
    """Limits of one sandboxed run."""

    #: Wall-clock limit of the whole run (interpreter start-up included), in seconds.
    timeout_s: float = 10.0
    #: Address-space limit (RLIMIT_AS), in MiB: virtual memory, which exceeds resident memory.
    memory_mb: int = 512
    #: Largest file the run may write, stdout and stderr included, in MiB.
    file_size_mb: int = 64
    #: Most file descriptors open at once.
    open_files: int = 64
    #: Most processes (RLIMIT_NPROC) the sandbox's user may have.
    processes: int = 64
    #: Size of the sandbox's private /tmp, in MiB.
    tmp_mb: int = 64

    @property
    def cpu_s(self) -> int:
        """The CPU-time limit: the timeout rounded up, so only multi-threaded code can reach it
        before the wall clock does."""
        return max(1, math.ceil(self.timeout_s))


@dataclass(frozen=True)
class Outcome:
    """How a sandboxed run ended."""

    returncode: int | None
    timed_out: bool
    #: Why the run was stopped: ``"timeout"``, ``"memory"``, ``"cpu"``, ``"file-size"``,
    #: ``"report-size"``, ``"signal SIGSEGV"``...; None when it ended by itself.
    killed_by: str | None
    stdout_tail: str = ""
    stderr_tail: str = ""
    duration_s: float = 0.0
    #: The isolation layers applied, e.g. ``("user-namespace", "pid-namespace", ...)``.
    layers: tuple[str, ...] = ()
    #: Guarantees this machine could not give (a kernel without Landlock, no user namespaces).
    missing: tuple[str, ...] = ()


def _interpreter() -> str:
    """The base interpreter (not a virtual environment's wrapper), for ``-I -S`` runs."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def _stdlib() -> str:
    prefix = os.path.realpath(sys.base_prefix)
    return os.path.realpath(sysconfig.get_path("stdlib", vars={"installed_base": prefix, "base": prefix}))


def _readable() -> tuple[list[str], list[str]]:
    """The paths a sandboxed interpreter needs to read, and the directories hidden beneath
    them: ``/usr`` and, wherever the interpreter lives, only its binary, its shared library
    and its standard library, with every site-packages directory hidden."""
    exe = _interpreter()
    prefix = os.path.realpath(sys.base_prefix)
    stdlib = os.path.realpath(sysconfig.get_path("stdlib", vars={"installed_base": prefix, "base": prefix}))
    readable = ["/usr", exe, stdlib]
    libdir = os.path.join(prefix, "lib")
    if os.path.isdir(libdir):
        readable += sorted(str(p) for p in Path(libdir).glob("libpython*"))
    for link in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.isdir(link) and not os.path.islink(link):
            readable.append(link)
    # Where installed packages live, never what a sandboxed run should see or import.
    patterns = [f"{stdlib}/site-packages", f"{stdlib}/dist-packages", "/usr/lib/python3*/site-packages",
                "/usr/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                "/usr/local/lib/python3*/dist-packages"]
    hidden = {os.path.realpath(p) for pattern in patterns for p in glob.glob(pattern) if os.path.isdir(p)}
    return readable, sorted(hidden)


_PATHS: tuple[list[str], list[str]] | None = None


def _paths() -> tuple[list[str], list[str]]:
    global _PATHS  # a cache of facts about this machine's interpreter, not state
    if _PATHS is None:
        _PATHS = _readable()
    return _PATHS


class SandboxUnavailableError(EnvhubError, OSError):
    """This system has no sandbox for envhub to run untrusted code in (only Linux does)."""


class _Kernel:
    """What this process learnt of the kernel: whether it builds the sandbox's namespaces
    (None until the first run tells). A kernel that lets a process unshare but not build the
    view (a restricted user namespace) is tried once; later runs go without namespaces and
    say so in ``missing``, instead of paying a failed start-up each time."""

    namespaces: bool | None = None
    refused: str | None = None


class _Process:
    """A launcher the zygote forked: its pid, a pipe to its stdin, and its end."""

    def __init__(self, zygote: _Zygote, loop: asyncio.AbstractEventLoop, pid: int, stdin: asyncio.WriteTransport,
                 ended: asyncio.Future[int]) -> None:
        self.zygote = zygote
        self.loop = loop
        self.pid = pid
        self.stdin = stdin
        self._ended = ended
        self.returncode: int | None = None

    async def wait(self) -> int:
        self.returncode = await asyncio.shield(self._ended)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the launcher's whole process group; PID 1 of the sandbox dies with it."""
        if self._ended.done():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)


class _Zygote:
    """The caller's side of :class:`._launcher._Zygote`: one per process, started on first use
    and again if it dies. A thread reads its answers and hands them to the event loop that
    asked, so it serves every loop (each ``asyncio.run`` of a synchronous score is a new one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._spawned: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[int]]] = {}
        self._ended: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[int]]] = {}
        self._early: dict[int, int] = {}
        self._ids = 0

    def _ensure(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        if self._proc is not None:
            self._proc.poll()  # reap the one that died
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [_interpreter(), "-I", "-S", "-B", str(_LAUNCHER), "zygote", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                env={"PATH": os.defpath, "LANG": "C.UTF-8"}, start_new_session=True)
        finally:
            theirs.close()
        self._sock = ours
        threading.Thread(target=self._read, args=(ours,), name="envhub-sandbox-zygote", daemon=True).start()
        return ours

    def _read(self, sock: socket.socket) -> None:
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            with self._lock:
                if "id" in message:
                    waiter = self._spawned.pop(message["id"], None)
                    value = message["pid"]
                else:
                    waiter = self._ended.pop(message["pid"], None)
                    value = message["status"]
                    if waiter is None:
                        self._early[message["pid"]] = value
            if waiter is not None:
                _resolve(waiter, value)
        with self._lock:  # the zygote died: every run it had is over
            if self._sock is sock:
                self._sock = None
            waiters = [*self._spawned.values(), *self._ended.values()]
            self._spawned.clear()
            self._ended.clear()
        for waiter in waiters:
            _resolve(waiter, None)
        sock.close()

    async def spawn(self, job: bytes, fds: tuple[int, int, int, int], stdin_w: int) -> _Process:
        loop = asyncio.get_running_loop()
        spawned: asyncio.Future[int] = loop.create_future()
        with self._lock:
            sock = self._ensure()
            self._ids += 1
            rid = self._ids
            self._spawned[rid] = (loop, spawned)
            socket.send_fds(sock, [b'{"id": %d, "job": ' % rid + job + b"}"], list(fds))
        pid = await spawned
        if pid is None:
            raise OSError("the sandbox's zygote process died")
        ended: asyncio.Future[int] = loop.create_future()
        with self._lock:
            if pid in self._early:
                ended.set_result(self._early.pop(pid))
            else:
                self._ended[pid] = (loop, ended)
        transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(stdin_w, "wb", buffering=0))
        return _Process(self, loop, pid, transport, ended)


def _resolve(waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]], value: Any) -> None:
    loop, future = waiter

    def settle() -> None:
        if not future.done():
            if value is None:
                future.set_exception(OSError("the sandbox's zygote process died"))
            else:
                future.set_result(value)

    with contextlib.suppress(RuntimeError):  # a loop closed meanwhile: no one is waiting
        loop.call_soon_threadsafe(settle)


# A process's one helper process, as multiprocessing's forkserver is; a forked child of this
# process starts its own (the socket and the reading thread are the parent's).
_ZYGOTE = _Zygote()
os.register_at_fork(after_in_child=lambda: _ZYGOTE.__init__())  # type: ignore[misc]


class Sandbox:
    """Runs guests in sandboxed processes (see the module's docstring).

    ``network=True`` shares the host's network (off by default); ``readable`` adds paths the
    sandbox may read (read-only, at the same path); ``namespaces=False`` skips the namespaces
    (Landlock and resource limits only: for tests of those layers).

    ``workspace_mb`` puts the workspace on a tmpfs of that size inside the sandbox, the seed
    copied into it before the lock-in, instead of a host directory bound in: nothing the run
    writes reaches the host's disk. ``mounts`` maps absolute paths inside to host directories
    copied in read-only (each on its own read-only tmpfs; both need the namespaces).
    ``base`` is a root filesystem (a directory, see :mod:`._rootfs`) to use instead of the
    host's system (namespaces only). ``temp_dir`` is where each run's host-side files go (the
    system's temporary directory by default); ``report_limit`` the most a run may report in
    all, in bytes (None: no limit but the 16 MiB of one message)."""

    def __init__(self, limits: Limits | None = None, *, network: bool = False, readable: Sequence[str] = (),
                 namespaces: bool = True, workspace_mb: int | None = None, mounts: Mapping[str, Path] | None = None,
                 temp_dir: Path | None = None, report_limit: int | None = REPORT_LIMIT,
                 base: Path | None = None) -> None:
        self.limits = limits or Limits()
        self.network = network
        self.readable = tuple(str(p) for p in readable)
        self.namespaces = namespaces
        self.workspace_mb = workspace_mb
        self.mounts = dict(mounts or {})
        self.temp_dir = temp_dir
        self.report_limit = report_limit
        self.base = base

    def session(self, guest: Guest, guest_input: Any, *, workspace: Path | None = None) -> Session:
        """A run of ``guest`` with ``guest_input``, to use as ``async with sandbox.session(...)
        as s``. ``guest`` is Python source (stdlib only), or a sequence of ``(filename,
        source)`` modules run in order in one namespace. The guest sees ``INPUT``, ``CHANNEL``
        (``CHANNEL.report(**fields)``, ``CHANNEL.receive()``) and ``WORKSPACE``. ``workspace``
        (copied in) seeds the workspace; the copy is removed afterwards."""
        if not sys.platform.startswith("linux"):
            raise SandboxUnavailableError(
                f"envhub's sandbox needs Linux (namespaces, Landlock); this is {sys.platform}",
                hint="score untrusted code on Linux, or run envhub inside a Linux container or VM")
        modules = [("guest.py", guest)] if isinstance(guest, str) else [(str(n), str(src)) for n, src in guest]
        return Session(self, modules, guest_input, workspace)

    async def run(self, guest: Guest, guest_input: Any, *,
                  workspace: Path | None = None) -> tuple[list[Any], Outcome]:
        """Run ``guest`` to its end; every message it reported, and how it ended."""
        async with self.session(guest, guest_input, workspace=workspace) as s:
            messages = [m async for m in s]
        assert s.outcome is not None
        return messages, s.outcome


class Session:
    """One sandboxed run in progress (see :meth:`Sandbox.session`)."""

    def __init__(self, sandbox: Sandbox, guest: list[tuple[str, str]], guest_input: Any,
                 workspace: Path | None) -> None:
        self.sandbox = sandbox
        self.limits = sandbox.limits
        self._guest = guest
        self._input = guest_input
        self._seed = workspace
        self.outcome: Outcome | None = None
        self.layers: tuple[str, ...] = ()
        self.missing: tuple[str, ...] = ()
        self._proc: _Process | None = None
        self._reader: asyncio.StreamReader | None = None
        self._received = 0
        self._killed_by: str | None = None
        self._memory = False

    async def __aenter__(self) -> Session:
        self._root = Path(tempfile.mkdtemp(prefix="envhub-sandbox-", dir=self.sandbox.temp_dir))
        try:
            self._workdir = self._root / "work"
            self._trees: list[dict[str, Any]] = []
            if self._seed is not None and self.sandbox.workspace_mb:
                self._workdir.mkdir()
                self._trees.append(self._archive(self._seed, WORKSPACE, readonly=False))
            elif self._seed is not None:
                shutil.copytree(self._seed, self._workdir, symlinks=True)
            else:
                self._workdir.mkdir()
            for target, source in self.sandbox.mounts.items():
                self._trees.append(self._archive(source, target, readonly=True))
            (self._root / "root").mkdir()
            if os.geteuid() == 0:
                # Root's sandbox user is nobody outside (see _launcher._map_ids): give it the workspace.
                for path in (self._workdir, *self._workdir.rglob("*")):
                    os.lchown(path, _NOBODY, _NOBODY)
            self._started = time.perf_counter()
            self._deadline = time.monotonic() + self.limits.timeout_s
            await self._start(self.sandbox.namespaces and _Kernel.namespaces is not False)
            return self
        except BaseException:
            _remove_tree(self._root)
            raise

    def _archive(self, source: Path, target: str, *, readonly: bool) -> dict[str, Any]:
        archive = self._root / f"tree-{len(self._trees)}"
        size = write_tree(source, archive)
        return {"archive": str(archive), "target": target, "readonly": readonly, "bytes": size + 2**20}

    def _job(self, namespaces: bool) -> bytes:
        """The job the zygote forks a launcher for: how to lock in and the guest's code, never
        the guest's input (see :meth:`_start`)."""
        readable, hidden = _paths()
        limits = self.limits
        job: dict[str, Any] = {
            "namespaces": namespaces,
            "network": self.sandbox.network,
            "root_dir": str(self._root / "root"),
            "workdir": str(self._workdir),
            "workspace": WORKSPACE if namespaces else str(self._workdir),
            "readable": readable + list(self.sandbox.readable),
            "hidden": hidden,
            "report_fd": 3,  # where the zygote's fork puts the report descriptor
            "limits": {
                "memory_bytes": limits.memory_mb * 2**20, "cpu_s": limits.cpu_s,
                "file_size_bytes": limits.file_size_mb * 2**20, "open_files": limits.open_files,
                "processes": limits.processes, "tmp_bytes": limits.tmp_mb * 2**20,
            },
            "env": {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORKSPACE if namespaces else str(self._workdir),
                    "TMPDIR": "/tmp" if namespaces else str(self._workdir), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
            "guest": self._guest,
        }
        if self.sandbox.workspace_mb:
            job["workspace_bytes"] = self.sandbox.workspace_mb * 2**20
        if self._trees:
            job["trees"] = self._trees
        if self.sandbox.base is not None:
            job["base"] = os.path.realpath(self.sandbox.base)
            job["stdlib"] = _stdlib()
            # A base may have no C.UTF-8 locale: its programs' own default, rather than a warning each.
            for name in ("LANG", "LC_ALL"):
                job["env"].pop(name, None)
        return json.dumps(job).encode("utf-8", "surrogatepass")

    async def _start(self, namespaces: bool) -> None:
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        stdin_r, stdin_w = os.pipe()
        self._stdout = open(self._root / "stdout", "wb")  # noqa: SIM115 - closed in _finish
        self._stderr = open(self._root / "stderr", "w+b")  # noqa: SIM115
        try:
            self._proc = await _ZYGOTE.spawn(self._job(namespaces),
                                             (stdin_r, self._stdout.fileno(), self._stderr.fileno(), write_fd), stdin_w)
        except BaseException:
            os.close(stdin_w)
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
            os.close(stdin_r)
        # The input goes to the run alone, on its stdin, not through the zygote (whose memory
        # later runs inherit): the first line the locked-in guest reads.
        self._proc.stdin.write(json.dumps(self._input).encode("utf-8", "surrogatepass") + b"\n")
        self._reader = asyncio.StreamReader(limit=REPORT_LIMIT)
        protocol = asyncio.StreamReaderProtocol(self._reader)
        self._transport, _ = await loop.connect_read_pipe(lambda: protocol, os.fdopen(read_fd, "rb", buffering=0))
        self._isolation_seen = False
        if namespaces and _Kernel.namespaces is None:
            # The first run in this process: learn whether the namespaces work here.
            first = await self._next()
            if first is None:
                await self._proc.wait()
                if self._proc.returncode == EXIT_SETUP:
                    _Kernel.namespaces = False
                    _Kernel.refused = _tail(self._root / "stderr").strip()
                    self._proc.stdin.close()
                    self._transport.close()
                    self._stdout.close()
                    self._stderr.close()
                    await self._start(False)
                return
            self._isolation(first)
            _Kernel.namespaces = "user-namespace" in self.layers

    def _isolation(self, message: Any) -> bool:
        """Take the launcher's first message, the layers applied; whether it was that."""
        self._isolation_seen = True
        if not (isinstance(message, dict) and message.get("event") == "isolation"):
            return False
        self.layers = tuple(str(x) for x in message.get("layers", ()))
        missing = [str(x) for x in message.get("missing", ())]
        if _Kernel.refused and "user-namespace" in missing:
            missing.append(f"namespaces refused: {_Kernel.refused}")
        self.missing = tuple(missing)
        return True

    async def _next(self) -> Any:
        assert self._reader is not None
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            self._killed_by = self._killed_by or "timeout"
            return None
        try:
            line = await asyncio.wait_for(self._reader.readline(), remaining)
        except TimeoutError:
            self._killed_by = self._killed_by or "timeout"
            return None
        except (ValueError, asyncio.LimitOverrunError):
            self._killed_by = "report-size"
            return None
        if not line:
            return None
        self._received += len(line)
        if self.sandbox.report_limit is not None and self._received > self.sandbox.report_limit:
            self._killed_by = "report-size"
            return None
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return {"event": "garbage"}
        if isinstance(message, dict) and message.get("event") == "memory":
            self._memory = True
        return message

    async def receive(self) -> Any:
        """The guest's next message (decoded JSON), or None when it has ended or was stopped."""
        if self._killed_by:
            return None
        message = await self._next()
        if not self._isolation_seen and self._isolation(message):
            message = await self._next()
        return message

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[Any]:
        while (message := await self.receive()) is not None:
            yield message

    def send(self, message: Any) -> None:
        """Write ``message`` as one JSON line to the guest's stdin (dropped once it ended)."""
        assert self._proc is not None
        if self._proc.stdin.is_closing():
            return
        self._proc.stdin.write(json.dumps(message).encode("utf-8", "surrogatepass") + b"\n")

    def close_input(self) -> None:
        """Close the guest's stdin: a guest serving requests sees its end and finishes."""
        assert self._proc is not None
        if not self._proc.stdin.is_closing():
            self._proc.stdin.close()

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._finish()
        finally:
            _remove_tree(self._root)

    async def _finish(self) -> None:
        proc = self._proc
        assert proc is not None
        if self._killed_by is None:
            # Give a guest that has reported everything a moment to exit by itself.
            remaining = max(0.0, min(self._deadline - time.monotonic(), 1.0))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), remaining)
            if proc.returncode is None and time.monotonic() >= self._deadline:
                self._killed_by = "timeout"
        # The launcher's whole group; PID 1 of the sandbox dies with it, and with PID 1 every
        # process left in the sandbox's PID namespace.
        proc.kill()
        await proc.wait()
        proc.stdin.close()
        self._transport.close()
        self._stdout.close()
        self._stderr.close()
        stderr_tail = _tail(self._root / "stderr")
        self.outcome = Outcome(
            returncode=proc.returncode,
            timed_out=self._killed_by == "timeout",
            killed_by=_killed_by(proc.returncode, self._killed_by, self._memory, stderr_tail),
            stdout_tail=_tail(self._root / "stdout"),
            stderr_tail=stderr_tail,
            duration_s=round(time.perf_counter() - self._started, 4),
            layers=self.layers,
            missing=self.missing,
        )


def _killed_by(returncode: int | None, stopped: str | None, memory: bool, stderr_tail: str) -> str | None:
    if stopped:
        return stopped
    if returncode in (EXIT_SETUP, EXIT_TREE):
        return "sandbox-setup"
    if memory or returncode == EXIT_MEMORY or (returncode == 1 and stderr_tail.rstrip().endswith("MemoryError")):
        return "memory"
    if returncode is not None and returncode < 0:
        signum = -returncode
        named = {getattr(signal, "SIGXCPU", None): "cpu", getattr(signal, "SIGXFSZ", None): "file-size"}
        if signum in named:
            return named[signum]
        try:
            return f"signal {signal.Signals(signum).name}"
        except ValueError:
            return f"signal {signum}"
    return None


def write_tree(source: Path, archive: Path) -> int:
    """Write the tree at ``source`` (directories, regular files, symbolic links as links, and
    their modes; other kinds of file skipped) to ``archive`` in the launcher's tree format
    (:func:`._launcher._extract_tree`); the bytes of file content written."""
    source = Path(source)
    if not source.is_dir():
        raise NotADirectoryError(f"{source}: not a directory")
    total = 0
    with open(archive, "wb") as out:
        out.write(TREE_MAGIC)
        for top, dirs, files in os.walk(source):
            dirs.sort()
            rel_top = os.path.relpath(top, source)
            for name in [*dirs, *sorted(files)]:
                path = os.path.join(top, name)
                rel = name if rel_top == "." else f"{rel_top}/{name}"
                st = os.lstat(path)
                entry: dict[str, Any]
                if stat.S_ISLNK(st.st_mode):
                    entry = {"p": rel, "t": "l", "l": os.readlink(path)}
                elif stat.S_ISDIR(st.st_mode):
                    entry = {"p": rel, "t": "d", "m": stat.S_IMODE(st.st_mode)}
                elif stat.S_ISREG(st.st_mode):
                    entry = {"p": rel, "t": "f", "m": stat.S_IMODE(st.st_mode), "s": st.st_size}
                else:
                    continue  # a socket, a FIFO, a device: nothing a workspace is seeded with
                out.write(json.dumps(entry, ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n")
                if entry["t"] == "f":
                    with open(path, "rb") as f:  # exactly the size announced, should the file change meanwhile
                        remaining = st.st_size
                        while remaining > 0 and (data := f.read(min(remaining, 1 << 20))):
                            out.write(data)
                            remaining -= len(data)
                        out.write(b"\0" * remaining)
                    total += st.st_size
            # os.walk lists links to directories among dirs: written as links above, never entered.
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    return total


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 4 * _TAIL_CHARS))
        text = f.read().decode("utf-8", "replace")
    return text[-_TAIL_CHARS:]


def _remove_tree(root: Path) -> None:
    """Remove ``root`` even when the sandboxed code made parts of it read-only."""

    def make_writable_and_retry(func: Any, path: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, stat.S_IRWXU)
            func(path)
        except OSError:
            pass

    shutil.rmtree(root, onerror=make_writable_and_retry)


_PROBE_GUEST = "CHANNEL.report(event='ok')\n"


@dataclass(frozen=True)
class Probe:
    """What the sandbox gives on this machine: the layers applied and the guarantees missing."""

    layers: tuple[str, ...]
    missing: tuple[str, ...]
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


async def aprobe(sandbox: Sandbox | None = None) -> Probe:
    """Start a sandbox with a guest that does nothing and report what it had."""
    sandbox = sandbox or Sandbox(Limits(timeout_s=20))
    messages, outcome = await sandbox.run([("probe.py", _PROBE_GUEST)], None)
    ok = any(isinstance(m, dict) and m.get("event") == "ok" for m in messages)
    error = None if ok else f"the sandbox did not start (status {outcome.returncode}): {outcome.stderr_tail.strip()}"
    return Probe(outcome.layers, outcome.missing, error, {"interpreter": _interpreter(), "readable": _paths()[0],
                                                            "hidden": _paths()[1], "duration_s": outcome.duration_s})


def probe(sandbox: Sandbox | None = None) -> Probe:
    """:func:`aprobe`, for callers without an event loop."""
    return asyncio.run(aprobe(sandbox))
