"""State kind ``sandbox``: a shell workspace per episode, inside envhub's sandbox.

Each episode's workspace is built from what the manifest's ``[state]`` declares, in this
order: the ``snapshot`` directory, then the task's ``task-directory`` (``{id}`` replaced by
the task's id) over it, then the files of the task's ``files-field`` (a table
``{"relative/path": "text"}``) over those. The tree seeds a
:class:`envhub.sandbox.ShellWorkspace`; ``setup``, then the task's ``setup-field``, run in it
before the agent's first turn. A setup command that fails is the environment's error
(:class:`SandboxSetupError`), never a reward.

The workspace is bound to the event loop it was started on. The async path
(:meth:`SandboxStateFactory.anew`, which ``Episode.areset`` uses) starts it on the caller's
loop; the sync path (:meth:`SandboxStateFactory.new`) starts it on a private loop in a thread
of its own, which the handle names (:attr:`StateHandle.loop`) so the episode runs tools and
scoring there.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from envhub.errors import EnvhubError
from envhub.runtime._state import StateFactory, StateHandle
from envhub.runtime._types import Task

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup
    from envhub.manifest import StateSection
    from envhub.sandbox import ShellLimits, ShellWorkspace

__all__ = ["SandboxSetupError", "SandboxStateFactory", "sandbox_state", "shell_limits", "write_files"]

T = TypeVar("T")


class SandboxSetupError(EnvhubError):
    """The workspace of a sandbox episode could not be made: a setup command failed, or the
    task's files or directory are not what the manifest says. A bug of the environment."""


def shell_limits(spec: StateSection, *, command_timeout_s: float | None = None, output_bytes: int | None = None,
                 cpu_s: int | None = None) -> ShellLimits:
    """The :class:`~envhub.sandbox.ShellLimits` of ``[state.limits]`` (and ``network``),
    with the limits given here instead of the manifest's."""
    from envhub.sandbox import ShellLimits

    limits = spec.sandbox_limits
    return ShellLimits(command_timeout_s=command_timeout_s or limits.command_timeout_s, cpu_s=cpu_s or limits.cpu_s,
                       memory_mb=limits.memory_mb, processes=limits.processes, disk_mb=limits.disk_mb,
                       output_bytes=output_bytes or limits.output_kb * 1024, network=bool(spec.network))


def _relative(path: str, what: str) -> PurePosixPath:
    """``path`` as a plain relative path, or :class:`SandboxSetupError`."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or any(part in ("..", "") for part in path.split("/")) or "\0" in path:
        raise SandboxSetupError(f"{what} {path!r} is not a relative path inside the workspace",
                                hint="write paths like 'src/main.py', without '..' or a leading '/'")
    return pure


def write_files(directory: Path, files: Any, what: str) -> None:
    """Write a table ``{"relative/path": "text"}`` under ``directory`` (parents made)."""
    if not isinstance(files, Mapping):
        raise SandboxSetupError(f"{what} is {type(files).__name__}, not a table of path to text",
                                hint='write it as {"relative/path": "text", ...}')
    for name, text in files.items():
        relative = _relative(str(name), f"{what}: the path")
        if not isinstance(text, str):
            raise SandboxSetupError(f"{what}: the content of {name!r} is {type(text).__name__}, not text")
        target = directory / relative
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise SandboxSetupError(f"{what}: {name!r} would replace a directory or a link of the workspace")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


class _LoopThread:
    """An event loop running in a daemon thread, for a workspace made by sync code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="envhub-sandbox-state", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()


class SandboxStateFactory(StateFactory):
    """Makes the workspace of each episode of one environment (see the module)."""

    kind = "sandbox"

    def __init__(self, spec: StateSection, root: Path, *, plugins: PluginLookup | None = None) -> None:
        from envhub.manifest import HOST_SCHEME, split_base

        self.spec = spec
        self.root = root
        self.plugins = plugins
        self.snapshot = root / spec.snapshot if spec.snapshot else None
        if self.snapshot is not None and not self.snapshot.is_dir():
            raise FileNotFoundError(f"state snapshot {spec.snapshot} is not a directory in {root}")
        #: The backend's scheme, and the base as the backend takes it (see ``WorkspaceBackend``).
        self.scheme, self.reference = HOST_SCHEME, ""
        self.base: Path | None = None
        parts = split_base(spec.base) if spec.base else None
        if parts is not None:
            self.scheme, self.reference = parts
        elif spec.base not in (None, "host"):
            assert spec.base is not None
            self.base = root / spec.base
            if not self.base.is_file():
                raise FileNotFoundError(f"state base {spec.base} is not a file in {root}")
            self.reference = str(self.base.resolve())
        self.backend = self._backend()
        self.limits = shell_limits(spec)

    def seed(self, task: Task, directory: Path) -> None:
        """Build ``task``'s starting tree in ``directory`` (which exists and is empty)."""
        spec = self.spec
        if self.snapshot is not None:
            shutil.copytree(self.snapshot, directory, dirs_exist_ok=True, symlinks=True)
        if spec.task_directory is not None:
            name = spec.task_directory.replace("{id}", task.id)
            _relative(task.id, f"task {task.id!r}: its id, in task-directory,")
            source = self.root / name
            if not source.is_dir():
                raise SandboxSetupError(f"task {task.id!r}: its task directory {name} is not a directory of the "
                                        "bundle", hint="create it, or remove task-directory from [state]")
            shutil.copytree(source, directory, dirs_exist_ok=True, symlinks=True)
        if spec.files_field is not None:
            if spec.files_field not in task:
                raise SandboxSetupError(f"task {task.id!r} has no field {spec.files_field!r} (state.files-field)")
            write_files(directory, task[spec.files_field], f"task {task.id!r} field {spec.files_field!r}")

    def setup_commands(self, task: Task) -> list[tuple[str, str]]:
        """(where it comes from, command) of each setup command, in the order they run."""
        commands = []
        if self.spec.setup:
            commands.append(("state.setup", self.spec.setup))
        field = self.spec.setup_field
        if field is not None:
            value = task.get(field)
            if value is not None and not isinstance(value, str):
                raise SandboxSetupError(f"task {task.id!r} field {field!r} (state.setup-field) is "
                                        f"{type(value).__name__}, not a command")
            if value:
                commands.append((f"task field {field!r}", value))
        return commands

    def _backend(self) -> Any:
        """The :class:`~envhub.hookspecs.WorkspaceBackend` of this base's scheme, from the
        plugins; None means envhub's own sandbox, used directly (no plugins were given)."""
        from envhub.errors import PluginError

        if self.plugins is None:
            if self.scheme != "host":
                raise PluginError(f"state base {self.spec.base!r} needs the plugin that runs workspaces of scheme "
                                  f"{self.scheme!r}, and no plugins were given",
                                  hint="load the environment with its context's plugins (envhub.load does)")
            return None
        backend = self.plugins.lookup("workspace_backends", self.scheme)
        if backend is None:
            hint = ("install envhub-containers (pip install envhub-containers), which runs them with podman or docker"
                    if self.scheme == "oci" else "install the plugin that provides it ('envhub plugins' lists them)")
            raise PluginError(f"no installed plugin runs workspaces of base scheme {self.scheme!r} "
                              f"(state base {self.spec.base!r})", hint=hint)
        return backend

    async def start(self, seed: Path, *, limits: ShellLimits | None = None,
                    mounts: Mapping[str, Path] | None = None) -> ShellWorkspace:
        """A new workspace seeded with ``seed``, with this environment's limits and base, on
        the backend of the base's scheme."""
        limits = limits or self.limits
        if self.backend is not None:
            workspace: ShellWorkspace = await self.backend.start(seed=seed, limits=limits, mounts=dict(mounts or {}),
                                                                 base=self.reference)
            return workspace
        from envhub.sandbox import ShellWorkspace

        options: dict[str, Any] = {}
        if self.base is not None:
            options["base"] = self.base
        if mounts:
            options["mounts"] = dict(mounts)
        return await ShellWorkspace.start(seed=seed, limits=limits, **options)

    async def anew(self, task: Task) -> StateHandle:
        directory = Path(tempfile.mkdtemp(prefix="envhub-seed-"))
        try:
            self.seed(task, directory)
            workspace = await self.start(directory)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        try:
            for source, command in self.setup_commands(task):
                result = await workspace.run(command)
                if result.exit_code != 0 or result.timed_out or result.killed_by:
                    raise SandboxSetupError(f"task {task.id!r}: the setup command of {source} failed: "
                                            f"{_last_line(result.observation())}\n{result.output[-2000:]}",
                                            hint="run the command in a copy of the workspace to see why")
        except BaseException:
            await workspace.close()
            raise
        return StateHandle(workspace, _release=_closer(workspace), _arelease=workspace.close)

    def new(self, task: Task) -> StateHandle:
        thread = _LoopThread()
        try:
            handle = thread.run(self.anew(task))
        except BaseException:
            thread.stop()
            raise
        workspace = handle.value

        def release() -> None:
            try:
                thread.run(workspace.close())
            finally:
                thread.stop()

        return StateHandle(workspace, _release=release, loop=thread.loop)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _closer(workspace: ShellWorkspace) -> Any:
    """A sync release for a workspace on the caller's loop: closes it there when the loop
    runs (an episode closed without ``await``), else on a loop of its own."""

    def release() -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            with contextlib.suppress(Exception):
                asyncio.run(workspace.close())
            return
        task = loop.create_task(workspace.close())
        _PENDING.add(task)
        task.add_done_callback(_PENDING.discard)

    return release


#: Closing tasks scheduled by a sync release, kept referenced until they finish.
_PENDING: set[asyncio.Task[Any]] = set()


def sandbox_state(spec: StateSection, root: Path, *, plugins: PluginLookup | None = None) -> StateFactory:
    """``sandbox``: a shell workspace in a sandbox per episode, on the workspace backend
    ``plugins`` provides for the scheme of ``[state] base`` (without ``plugins``: envhub's own
    sandbox, which runs the host's system and bundle archives only)."""
    return SandboxStateFactory(spec, root, plugins=plugins)
