"""A shell workspace in a container: the API of :class:`envhub.plugin.ShellWorkspace`.

The container is made from the image (pulled by digest and verified first), with the limits
mapped to the engine's flags (:func:`envhub_containers._commands.create_command`). The seed
goes in, and the final tree comes out, as tar streams through ``exec`` (the workspace is a
tmpfs, which ``cp`` does not see). Each ``run`` is one ``exec`` of the shell with the
previous command's directory and exported variables restored; when it ends, every other
process of the container is ended (background processes, fork bombs). A command past its
timeout has its ``exec`` killed and then everything it started. ``close`` removes the
container.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import posixpath
import tarfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from envhub.plugin import CommandResult, ShellLimits, WorkspaceError
from envhub_containers._commands import (
    WORKSPACE,
    ContainerLimits,
    create_command,
    exec_command,
    kill_others_command,
    remove_command,
    shell_script,
    tar_in_command,
    tar_out_command,
)
from envhub_containers._engine import Engine, find_engine, pull

__all__ = ["ContainerWorkspace", "container_limits", "start_workspace"]

#: A command printing this many times its output limit is killed.
_FLOOD_FACTOR = 64


def container_limits(limits: ShellLimits) -> ContainerLimits:
    """The limits the container enforces, from the workspace's."""
    return ContainerLimits(memory_mb=limits.memory_mb, processes=limits.processes, cpu_s=limits.cpu_s,
                           disk_mb=limits.disk_mb, network=limits.network)


async def start_workspace(*, seed: Path, limits: ShellLimits, mounts: Mapping[str, Path] | None = None,
                          base: str, engine: Engine | None = None) -> ContainerWorkspace:
    """The ``start`` of the ``oci`` workspace backend: ``base`` is the image reference."""
    if engine is None:
        engine = await asyncio.to_thread(find_engine)
    await asyncio.to_thread(pull, engine, base)
    workspace = ContainerWorkspace(engine, f"envhub-ws-{uuid.uuid4().hex[:16]}", limits)
    labels = {"envhub.workspace": "1", "envhub.owner": f"{os.uname().nodename}:{os.getpid()}"}
    done = await workspace._call(create_command(engine.command, base, workspace.name, container_limits(limits),
                                                mounts=mounts, labels=labels), timeout_s=120)
    if done[0] != 0:
        await workspace.close()
        reason = done[1][-500:].decode(errors="replace").strip()
        raise WorkspaceError(f"{engine.command} cannot start a container of {base}: {reason}")
    try:
        await workspace._copy_in(seed)
    except BaseException:
        await workspace.close()
        raise
    return workspace


class ContainerWorkspace:
    """One container holding one episode's workspace (made by :func:`start_workspace`)."""

    def __init__(self, engine: Engine, name: str, limits: ShellLimits) -> None:
        self.engine = engine
        self.name = name
        self.limits = limits
        self._lock = asyncio.Lock()
        self._closed = False
        self._shell: str | None = None

    async def __aenter__(self) -> ContainerWorkspace:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- processes ---------------------------------------------------------------------------

    async def _call(self, argv: list[str], *, stdin: bytes | None = None, timeout_s: float = 60.0
                    ) -> tuple[int, bytes]:
        """Run ``argv`` to its end: (exit code, stdout + stderr)."""
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            out, _ = await asyncio.wait_for(process.communicate(stdin), timeout_s)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise WorkspaceError(f"{argv[0]} {argv[1]} took longer than {timeout_s:g} s") from None
        return process.returncode or 0, out

    async def _shell_path(self) -> str:
        if self._shell is None:
            code, _ = await self._call(exec_command(self.engine.command, self.name, ["/bin/sh", "-c",
                                                                                     "command -v bash"]))
            self._shell = "bash" if code == 0 else "sh"
        return self._shell

    def _check_open(self) -> None:
        if self._closed:
            raise WorkspaceError("the workspace is closed")

    # -- the shell ---------------------------------------------------------------------------

    async def run(self, command: str, timeout_s: float | None = None) -> CommandResult:
        """Run ``command`` in the workspace's shell (cwd and exported variables carried over)."""
        timeout = self.limits.command_timeout_s if timeout_s is None else float(timeout_s)
        if not timeout > 0:
            raise WorkspaceError(f"timeout_s must be positive, not {timeout_s!r}")
        self._check_open()
        async with self._lock:
            shell = await self._shell_path()
            argv = exec_command(self.engine.command, self.name, [shell, "-c", shell_script(command, shell)])
            started = time.monotonic()
            process = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                           stdout=asyncio.subprocess.PIPE,
                                                           stderr=asyncio.subprocess.STDOUT)
            output = _Capped(self.limits.output_bytes)
            killed_by: str | None = None
            assert process.stdout is not None
            try:
                async with asyncio.timeout(timeout):
                    while chunk := await process.stdout.read(65536):
                        output.add(chunk)
                        if output.total > _FLOOD_FACTOR * self.limits.output_bytes:
                            killed_by = "output"
                            break
            except TimeoutError:
                killed_by = "timeout"
            if killed_by is not None:
                process.kill()
            code = await process.wait()
            await self._call(kill_others_command(self.engine.command, self.name))
            limits = {"timeout": f"{timeout:g} s", "output": f"{self.limits.output_bytes} bytes"}
            limit = limits.get(killed_by or "", "")
            return CommandResult(exit_code=None if killed_by else code, output=output.text(),
                                 truncated=output.truncated, timed_out=killed_by == "timeout", killed_by=killed_by,
                                 duration_s=time.monotonic() - started, limit=limit)

    # -- files -------------------------------------------------------------------------------

    async def _exec(self, script: str, *args: str, stdin: bytes | None = None) -> tuple[int, bytes]:
        argv = exec_command(self.engine.command, self.name, ["/bin/sh", "-c", script, "sh", *args],
                            stdin=stdin is not None)
        return await self._call(argv, stdin=stdin)

    async def read_file(self, path: str, *, max_bytes: int = 256 * 1024) -> str:
        """The text of ``path`` (relative to the workspace)."""
        self._check_open()
        target = _inside(path)
        async with self._lock:
            code, out = await self._exec('[ -f "$1" ] || { echo "not a regular file" >&2; exit 3; }; '
                                         'head -c "$2" "$1"', target, str(max_bytes + 1))
        if code != 0:
            raise WorkspaceError(f"cannot read {path}: {out.decode(errors='replace').strip() or 'no such file'}")
        if len(out) > max_bytes:
            raise WorkspaceError(f"{path} is larger than {max_bytes} bytes")
        try:
            return out.decode("utf-8")
        except UnicodeDecodeError:
            raise WorkspaceError(f"{path} is not text (UTF-8)") from None

    async def write_file(self, path: str, content: str) -> None:
        """Write ``content`` to ``path`` (relative to the workspace), creating its parents."""
        self._check_open()
        target = _inside(path)
        async with self._lock:
            code, out = await self._exec('mkdir -p "$(dirname "$1")" && cat > "$1"', target,
                                         stdin=content.encode("utf-8"))
        if code != 0:
            raise WorkspaceError(f"cannot write {path}: {out.decode(errors='replace').strip()}")

    async def edit_file(self, path: str, old: str, new: str, *, max_bytes: int = 1024 * 1024) -> None:
        """Replace the one exact occurrence of ``old`` in ``path`` with ``new``."""
        text = await self.read_file(path, max_bytes=max_bytes)
        count = text.count(old) if old else 0
        if count != 1:
            raise WorkspaceError(f"{path}: the text to replace occurs {count} times; it must occur exactly once")
        await self.write_file(path, text.replace(old, new, 1))

    async def list_files(self, path: str = ".", depth: int = 2, *, max_entries: int = 1000) -> list[str]:
        """The entries beneath ``path`` down to ``depth`` levels, relative to the workspace,
        directories ending in ``/``."""
        self._check_open()
        target = _inside(path)
        async with self._lock:
            code, out = await self._exec('cd "$1" || exit 3; find . -mindepth 1 -maxdepth "$2" -type d | sed "s|$|/|";'
                                         ' find . -mindepth 1 -maxdepth "$2" ! -type d', target, str(max(1, depth)))
        if code != 0:
            raise WorkspaceError(f"cannot list {path}: not a directory of the workspace")
        prefix = posixpath.relpath(target, WORKSPACE)
        entries = sorted(posixpath.normpath(posixpath.join(prefix, line[2:])) + ("/" if line.endswith("/") else "")
                         for line in out.decode(errors="replace").splitlines() if line.startswith("./"))
        if len(entries) > max_entries:
            entries = [*entries[:max_entries], f"... ({len(entries) - max_entries} more)"]
        return entries

    # -- the tree ----------------------------------------------------------------------------

    async def _copy_in(self, seed: Path) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for child in sorted(Path(seed).iterdir()):
                tar.add(child, arcname=child.name)
        code, out = await self._call(tar_in_command(self.engine.command, self.name), stdin=buffer.getvalue(),
                                     timeout_s=300)
        if code != 0:
            raise WorkspaceError(f"cannot copy the seed into the container: {out.decode(errors='replace')[-500:]}")

    async def export(self, dest: Path) -> Path:
        """Copy the workspace's tree out to ``dest``, a new or empty directory: directories,
        regular files and symbolic links, nothing outside ``dest`` (tarfile's ``data`` filter)."""
        self._check_open()
        dest = Path(dest)
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            raise WorkspaceError(f"export to {dest}: not a new or empty directory")
        async with self._lock:
            argv = tar_out_command(self.engine.command, self.name)
            process = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                           stdout=asyncio.subprocess.PIPE,
                                                           stderr=asyncio.subprocess.DEVNULL)
            out, _ = await process.communicate()
        limit = (self.limits.disk_mb + 16) * 1024 * 1024
        if process.returncode != 0 or len(out) > limit:
            raise WorkspaceError(f"cannot export the workspace (exit {process.returncode}, {len(out)} bytes)")
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(out), mode="r:") as tar:
            await asyncio.to_thread(tar.extractall, dest, filter="data")
        return dest

    async def close(self) -> None:
        """Remove the container and everything in it; idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError, WorkspaceError):
            await self._call(remove_command(self.engine.command, self.name), timeout_s=120)


def _inside(path: str) -> str:
    """``path`` (relative to the workspace) as an absolute path inside it, or WorkspaceError."""
    if not isinstance(path, str) or "\0" in path:
        raise WorkspaceError(f"invalid path {path!r}")
    full = posixpath.normpath(posixpath.join(WORKSPACE, path))
    if full != WORKSPACE and not full.startswith(WORKSPACE + "/"):
        raise WorkspaceError(f"{path}: outside the workspace")
    return full


class _Capped:
    """Output kept up to a limit: its head and tail, the middle elided with a marker."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        del self.tail[:max(0, len(self.tail) - (self.limit - self.limit // 2))]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        elided = self.total - len(self.head) - len(self.tail)
        return (bytes(self.head).decode("utf-8", errors="replace") + f"\n[... {elided} bytes elided ...]\n"
                + bytes(self.tail).decode("utf-8", errors="replace"))
