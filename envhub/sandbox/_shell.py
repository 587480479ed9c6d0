"""A shell workspace: a long-lived sandbox holding a workspace, a shell and file tools.

:meth:`ShellWorkspace.start` starts one sandbox session (:class:`Sandbox`) whose workspace is
a tmpfs of ``disk_mb`` inside it, seeded from a host directory before the lock-in, and whose
guest is the shell server (:mod:`._shell_server`). Commands and file operations go to it one
at a time; :meth:`ShellWorkspace.export` copies the final tree out; :meth:`ShellWorkspace.close`
ends every process and removes everything. ``docs/sandbox.md`` lists what is contained, how,
and what is not.

Each process keeps its workspaces' host-side files in one directory of the system's temporary
directory, ``envhub-shell-<pid>-<start time>``; :func:`remove_stale_workspaces` (run by every
:meth:`ShellWorkspace.start`) removes those of processes that are gone, however they ended.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import os
import re
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envhub.errors import EnvhubError
from envhub.sandbox._rootfs import BaseArchiveError, prepare_base
from envhub.sandbox._sandbox import Limits, Sandbox, Session, _Kernel, _remove_tree, aprobe

__all__ = ["CommandResult", "ShellLimits", "ShellWorkspace", "WorkspaceError", "remove_stale_workspaces"]

_SERVER = Path(__file__).with_name("_shell_server.py")
#: The longest a workspace may live, in seconds (its session's timeout).
_LIFETIME_S = 7 * 24 * 3600.0
#: How long past a command's own timeout the host waits for the server before giving it up.
_GRACE_S = 15.0
_PREFIX = "envhub-shell-"
#: Paths inside the sandbox a mount may not take (or lie beneath).
_RESERVED = ("/workspace", "/proc", "/dev", "/tmp", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class WorkspaceError(EnvhubError):
    """A shell workspace could not do what was asked: a missing file, an ambiguous edit, a
    workspace that ended or could not start."""


@dataclass(frozen=True)
class ShellLimits:
    """The limits of a shell workspace; every command gets them afresh."""

    #: Wall-clock limit of one command, in seconds (a command may ask for another).
    command_timeout_s: float = 30.0
    #: CPU time of each process a command starts, in seconds (RLIMIT_CPU).
    cpu_s: int = 60
    #: Address space of each process a command starts, in MiB (RLIMIT_AS).
    memory_mb: int = 1024
    #: Processes the sandbox may have at once (RLIMIT_NPROC, counted in its user namespace).
    processes: int = 128
    #: Size of the workspace (a tmpfs), and of the sandbox's /tmp, each, in MiB.
    disk_mb: int = 256
    #: Output of one command kept for the agent, in bytes: the head and the tail.
    output_bytes: int = 16_384
    #: Share the host's network (True), or have none but a down loopback (False).
    network: bool = False

    def __post_init__(self) -> None:
        problems = [f"{name} must be positive, not {getattr(self, name)!r}"
                    for name in ("command_timeout_s", "cpu_s", "memory_mb", "processes", "disk_mb", "output_bytes")
                    if not getattr(self, name) > 0]
        if problems:
            raise WorkspaceError(f"invalid shell limits: {'; '.join(problems)}")


@dataclass(frozen=True)
class CommandResult:
    """How one command ended, and what it printed."""

    #: The shell's exit status (128 + N after signal N); None when it was killed by a limit.
    exit_code: int | None
    #: stdout and stderr as the command wrote them, its middle elided beyond ``output_bytes``.
    output: str
    truncated: bool
    timed_out: bool
    #: Why it was stopped or failed: ``"timeout"``, ``"output"``, ``"memory"``, ``"processes"``,
    #: ``"cpu"``, ``"disk-full"``; None when no limit was met.
    killed_by: str | None
    duration_s: float
    #: Processes the command left behind, ended with it.
    ended_processes: int = 0
    #: The limit that ``killed_by`` names, in words (for :meth:`observation`).
    limit: str = ""

    def observation(self) -> str:
        """What an agent sees: the output, then what happened, e.g. ``[exit code 2]``."""
        lines = [self.output.rstrip("\n")] if self.output else []
        reasons = {
            "timeout": f"[killed: took longer than {self.limit}]",
            "output": f"[killed: printed far more than the {self.limit} kept]",
            "memory": f"[out of memory: the limit is {self.limit} per process]",
            "cpu": f"[killed: used more than {self.limit} of CPU time]",
            "processes": f"[too many processes: the limit is {self.limit}; every process the command left was ended]",
            "disk-full": f"[the disk is full: the workspace and /tmp hold {self.limit} each]",
        }
        if self.killed_by:
            lines.append(reasons.get(self.killed_by, f"[killed: {self.killed_by}]"))
        if self.ended_processes and self.killed_by not in ("processes", "timeout", "output"):
            lines.append(f"[{self.ended_processes} background process(es) ended with the command]")
        if self.exit_code is not None:
            lines.append(f"[exit code {self.exit_code}]")
        return "\n".join(lines)


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot), None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _process_dir_name(pid: int) -> str:
    return f"{_PREFIX}{pid}-{_start_time(pid)}"


def remove_stale_workspaces(temp_dir: Path | None = None) -> list[Path]:
    """Remove the host-side files of workspaces whose process is gone (killed, crashed); the
    directories removed. Those of live processes, this one's included, are left alone."""
    root = Path(temp_dir or tempfile.gettempdir())
    removed = []
    pattern = re.compile(re.escape(_PREFIX) + r"(\d+)-(\d+|None)$")
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            match = pattern.match(entry.name)
            if not match or not entry.is_dir(follow_symlinks=False):
                continue
            pid = int(match.group(1))
            if _start_time(pid) is not None and _process_dir_name(pid) == entry.name:
                continue  # its process lives
            _remove_tree(Path(entry.path))
            removed.append(Path(entry.path))
    return removed


def _process_dir(temp_dir: Path | None) -> Path:
    """This process's directory for workspaces' host-side files (made on first use)."""
    path = Path(temp_dir or tempfile.gettempdir()) / _process_dir_name(os.getpid())
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _check_mounts(mounts: Mapping[str, Path]) -> dict[str, Path]:
    checked = {}
    for target, source in mounts.items():
        where = f"mounts[{target!r}]"
        normal = os.path.normpath(target) if isinstance(target, str) else ""
        if not isinstance(target, str) or not target.startswith("/") or normal != target or target == "/":
            raise WorkspaceError(f"{where}: a mount's path inside must be absolute and normal, like '/tests'")
        if any(target == r or target.startswith(r + "/") or r.startswith(target + "/") for r in _RESERVED):
            raise WorkspaceError(f"{where}: {target} is taken by the sandbox itself; choose another path, "
                                 f"like '/tests'")
        if not Path(source).is_dir():
            raise WorkspaceError(f"{where}: {source} is not a directory")
        checked[target] = Path(source)
    return checked


def _tree_size(root: Path) -> int:
    total = 0
    for top, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(top, name))
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
    return total


class ShellWorkspace:
    """A workspace inside a sandbox, with a shell: see the module's docstring.

    Use ``async with await ShellWorkspace.start(...) as workspace``, or call :meth:`close`.
    A workspace belongs to the event loop that started it: use it there; :meth:`close` from
    another loop kills it at once."""

    def __init__(self, session: Session, limits: ShellLimits, sandbox: Sandbox) -> None:
        self._session = session
        self.limits = limits
        self._sandbox = sandbox
        self._lock = asyncio.Lock()
        self._closed = False
        self._dead: str | None = None

    @classmethod
    async def start(cls, seed: Path | None = None, limits: ShellLimits | None = None, *,
                    mounts: Mapping[str, Path] | None = None, base: Path | None = None,
                    base_cache: Path | None = None, temp_dir: Path | None = None) -> ShellWorkspace:
        """A new workspace: ``seed`` (a host directory, never written) copied in; each of
        ``mounts`` (a path inside, like ``/tests``, to a host directory) copied in read-only.
        ``base`` is a root filesystem as a tar archive (tar, tar.gz, tar.bz2, tar.xz) to use
        instead of the host's read-only system, extracted once per digest into ``base_cache``
        (``envhub-rootfs`` in the system's temporary directory by default).
        ``temp_dir`` holds the per-process directory of host-side files (the system's
        temporary directory by default). Raises :class:`WorkspaceError` when it cannot start."""
        limits = limits or ShellLimits()
        root = None
        if base is not None:
            if not Path(base).is_file():
                raise WorkspaceError(f"base {base}: no such file", hint="base is a tar archive of a root filesystem")
            try:
                root = await asyncio.to_thread(prepare_base, Path(base),
                                               Path(base_cache or Path(tempfile.gettempdir()) / "envhub-rootfs"))
            except BaseArchiveError as e:
                raise WorkspaceError(f"base {e}", hint="build the archive from a root filesystem, without "
                                     "absolute paths, '..' or links out of it") from e
            except OSError as e:
                raise WorkspaceError(f"base {base}: could not extract it: {e}") from e
        checked = _check_mounts(mounts or {})
        if seed is not None:
            if not Path(seed).is_dir():
                raise WorkspaceError(f"seed {seed}: not a directory")
            size = _tree_size(Path(seed))
            if size > limits.disk_mb * 2**20:
                raise WorkspaceError(f"seed {seed}: {size} bytes do not fit in the workspace's "
                                     f"{limits.disk_mb} MB (disk_mb)", hint="raise disk_mb")
        remove_stale_workspaces(temp_dir)
        if root is not None and _Kernel.namespaces is None:
            # Learn whether this machine builds namespaces on a plain sandbox first: a base that
            # fails to mount must not be taken for a kernel without them (which lasts the process).
            await aprobe()
        sandbox = Sandbox(
            Limits(timeout_s=_LIFETIME_S, memory_mb=max(limits.memory_mb, 512) + 64,
                   file_size_mb=limits.disk_mb + 1, open_files=1024, processes=limits.processes,
                   tmp_mb=limits.disk_mb),
            network=limits.network, workspace_mb=limits.disk_mb, mounts=checked,
            temp_dir=_process_dir(temp_dir), report_limit=None, base=root)
        config = {"limits": {"memory_mb": limits.memory_mb, "cpu_s": limits.cpu_s, "processes": limits.processes,
                             "output_bytes": limits.output_bytes}}
        guest = [("shell_server.py", _SERVER.read_text()), ("start.py", "serve(CHANNEL, WORKSPACE, INPUT)\n")]
        session = sandbox.session(guest, config, workspace=Path(seed) if seed is not None else None)
        try:
            await session.__aenter__()
        except OSError as e:
            raise WorkspaceError(f"the workspace's sandbox could not start: {e}") from e
        workspace = cls(session, limits, sandbox)
        try:
            first = await asyncio.wait_for(session.receive(), 60)
        except TimeoutError:
            first = None
        missing = {"pid-namespace", "private-filesystem"} - set(session.layers)
        if not (isinstance(first, dict) and first.get("event") == "ready") or missing:
            await workspace._end()
            outcome = session.outcome
            why = first.get("message") if isinstance(first, dict) else None
            detail = why or (outcome.stderr_tail.strip() if outcome else "") or "no reason given"
            if missing and not why and session.layers:
                detail = (f"this machine gives no {', '.join(sorted(missing))} "
                          f"({'; '.join(session.missing) or 'refused'})")
            raise WorkspaceError(f"the workspace's sandbox could not start: {detail}",
                                 hint="shell workspaces need Linux user, PID and mount namespaces")
        return workspace

    async def __aenter__(self) -> ShellWorkspace:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- requests ------------------------------------------------------------------------------

    async def _request(self, request: dict[str, Any], wait_s: float) -> dict[str, Any]:
        """Send one request; its answer (``error`` answers raise :class:`WorkspaceError`)."""
        if self._closed:
            raise WorkspaceError("the workspace is closed")
        if self._dead:
            raise WorkspaceError(f"the workspace's sandbox ended: {self._dead}")
        proc = self._session._proc
        if proc is not None and proc.loop is not asyncio.get_running_loop():
            raise WorkspaceError("the workspace was used from another event loop than the one that started it",
                                 hint="use a workspace on the loop that started it")
        self._session.send(request)
        answer = await self._receive(wait_s)
        if answer.get("event") == "error":
            raise WorkspaceError(str(answer.get("message")))
        return answer

    async def _receive(self, wait_s: float) -> dict[str, Any]:
        try:
            answer = await asyncio.wait_for(self._session.receive(), wait_s)
        except TimeoutError:
            answer = None
            self._dead = f"it did not answer within {wait_s:.0f} s"
        if not isinstance(answer, dict):
            self._dead = self._dead or "it stopped answering"
            await self._end()
            outcome = self._session.outcome
            if outcome is not None and outcome.killed_by:
                self._dead += f" ({outcome.killed_by})"
            raise WorkspaceError(f"the workspace's sandbox ended: {self._dead}")
        return answer

    async def run(self, command: str, timeout_s: float | None = None) -> CommandResult:
        """Run ``command`` with ``bash -c`` in the workspace (see the module's docstring)."""
        timeout = self.limits.command_timeout_s if timeout_s is None else float(timeout_s)
        if not timeout > 0:
            raise WorkspaceError(f"timeout_s must be positive, not {timeout_s!r}")
        async with self._lock:
            answer = await self._request({"op": "run", "command": command, "timeout_s": timeout},
                                         timeout + _GRACE_S)
        killed_by = answer.get("killed_by")
        limit = {"timeout": f"{_seconds(timeout)}", "output": f"{self.limits.output_bytes} bytes",
                 "memory": f"{self.limits.memory_mb} MB", "cpu": f"{self.limits.cpu_s} s",
                 "processes": f"{self.limits.processes}", "disk-full": f"{self.limits.disk_mb} MB"}
        return CommandResult(exit_code=answer.get("exit_code"), output=str(answer.get("output", "")),
                             truncated=bool(answer.get("truncated")), timed_out=bool(answer.get("timed_out")),
                             killed_by=killed_by, duration_s=float(answer.get("duration_s", 0.0)),
                             ended_processes=int(answer.get("ended", 0)), limit=limit.get(killed_by or "", ""))

    async def read_file(self, path: str, *, max_bytes: int = 256 * 1024) -> str:
        """The text of ``path`` (relative to the workspace). Raises :class:`WorkspaceError` when
        it is missing, outside the workspace, not a regular file, binary, or over ``max_bytes``."""
        async with self._lock:
            answer = await self._request({"op": "read", "path": path, "max_bytes": max_bytes}, 60)
        return str(answer["text"])

    async def write_file(self, path: str, content: str) -> None:
        """Write ``content`` to ``path`` (relative to the workspace), creating its parents."""
        async with self._lock:
            await self._request({"op": "write", "path": path, "content": content}, 60)

    async def edit_file(self, path: str, old: str, new: str, *, max_bytes: int = 1024 * 1024) -> None:
        """Replace the one exact occurrence of ``old`` in ``path`` with ``new``; raises
        :class:`WorkspaceError` when ``old`` occurs there never or more than once."""
        async with self._lock:
            await self._request({"op": "edit", "path": path, "old": old, "new": new, "max_bytes": max_bytes}, 60)

    async def list_files(self, path: str = ".", depth: int = 2, *, max_entries: int = 1000) -> list[str]:
        """The entries beneath ``path`` down to ``depth`` levels, sorted, as paths relative to
        the workspace, directories ending in ``/``; beyond ``max_entries`` a last entry says
        how many more there are (``... (N more)``)."""
        async with self._lock:
            answer = await self._request({"op": "list", "path": path, "depth": max(1, depth),
                                          "max_entries": max_entries}, 60)
        return [str(e) for e in answer["entries"]]

    async def export(self, dest: Path) -> Path:
        """Copy the workspace's tree out to ``dest``, a new directory (or an empty one):
        directories, regular files and symbolic links (as links), with their modes, set-id bits
        dropped. Nothing is written outside ``dest``. Returns ``dest``."""
        dest = Path(dest)
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            raise WorkspaceError(f"export to {dest}: not a new or empty directory")
        dest.mkdir(parents=True, exist_ok=True)
        budget = 2 * self.limits.disk_mb * 2**20 + 2**20  # the workspace and /tmp could not hold more
        async with self._lock:
            answer = await self._request({"op": "export"}, 120)
            writer = _TreeWriter(dest, budget)
            try:
                while answer.get("event") != "done":
                    writer.take(answer)
                    answer = await self._receive(120)
                    if answer.get("event") == "error":
                        raise WorkspaceError(str(answer.get("message")))
            finally:
                writer.finish()
        return dest

    async def close(self) -> None:
        """End every process of the workspace and remove everything it had; idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._end()

    async def _end(self) -> None:
        proc = self._session._proc
        if proc is not None and self._session.outcome is None and proc.loop is not asyncio.get_running_loop():
            # Closed from another event loop than the one that started it (whose pipes these
            # are, and which may be closed): kill the sandbox and remove its files from here.
            proc.kill()
            _remove_tree(self._session._root)
            return
        with contextlib.suppress(Exception):
            self._session.close_input()
        if self._session.outcome is None:
            with contextlib.suppress(Exception):
                await self._session.__aexit__(None, None, None)


class _TreeWriter:
    """Writes an exported tree beneath ``dest``, refusing every path that would leave it."""

    def __init__(self, dest: Path, budget: int) -> None:
        self.root = os.path.realpath(dest)
        self.budget = budget
        self.written = 0
        self.fd: int | None = None
        self.dirs: list[tuple[str, int]] = []

    def take(self, message: dict[str, Any]) -> None:
        event = message.get("event")
        if event == "data":
            if self.fd is None:
                raise WorkspaceError("export: data outside a file")
            data = base64.b64decode(str(message["b64"]))
            self.written += len(data)
            if self.written > self.budget:
                raise WorkspaceError(f"export: more than {self.budget} bytes")
            while data:
                data = data[os.write(self.fd, data):]
            return
        if event != "entry":
            raise WorkspaceError(f"export: an unexpected message {event!r}")
        self._close_file()
        rel = str(message["p"])
        parts = rel.split("/")
        if rel.startswith("/") or "\0" in rel or any(p in ("", ".", "..") for p in parts):
            raise WorkspaceError(f"export: a path outside the workspace: {rel!r}")
        path = os.path.join(self.root, rel)
        if os.path.realpath(os.path.dirname(path)) != os.path.dirname(path):
            raise WorkspaceError(f"export: a path through a link: {rel!r}")
        mode = int(message.get("m", 0o644)) & 0o777
        kind = message.get("t")
        if kind == "d":
            os.mkdir(path, 0o700)
            self.dirs.append((path, mode | stat.S_IRWXU))
        elif kind == "l":
            os.symlink(str(message["l"]), path)
        elif kind == "f":
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            os.fchmod(self.fd, mode)
        else:
            raise WorkspaceError(f"export: an entry of unknown type: {rel!r}")

    def _close_file(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def finish(self) -> None:
        self._close_file()
        for path, mode in reversed(self.dirs):
            with contextlib.suppress(OSError):
                os.chmod(path, mode)


def _seconds(value: float) -> str:
    return f"{int(value)} s" if value == math.floor(value) else f"{value:g} s"
