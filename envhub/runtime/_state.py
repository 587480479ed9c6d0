"""State kinds: what the agent acts on, made fresh when the manifest's ``reset`` says so.

- ``none``: no state (tools and verifiers receive ``None``).
- ``files``: a temporary copy of the ``snapshot`` directory (an empty one without a
  snapshot); tools receive its :class:`~pathlib.Path`; removed when released.
- ``sqlite``: a private copy of the ``snapshot`` database; tools receive a
  :class:`sqlite3.Connection`. Snapshots up to :data:`IN_MEMORY_LIMIT` are copied with
  SQLite's own deserialize into memory (no disk I/O per episode); larger ones are copied
  to a temporary file.
- ``python``: an instance of the ``entry-point`` class (made with ``params=`` the manifest's
  ``[config.params]``, read-only, when its signature takes ``params``); ``reset(task)`` is
  called when the state starts, ``close()`` (if it has one) when it is released.
- ``sandbox``: a :class:`envhub.sandbox.ShellWorkspace` (``envhub.runtime._workspace_state``).

Nothing one state instance is given ever reaches another: each is its own copy.
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub.errors import TaskDataError
from envhub.manifest import StateSection
from envhub.runtime._types import Task

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup

__all__ = ["IN_MEMORY_LIMIT", "StateFactory", "StateHandle", "files_state", "make_state_factory", "python_state",
           "sqlite_state"]

#: Largest SQLite snapshot copied into memory per episode, in bytes.
IN_MEMORY_LIMIT = 64 * 1024 * 1024


@dataclass(slots=True)
class StateHandle:
    """One live state: ``value`` is what tools and verifiers receive."""

    value: Any
    _release: Callable[[], None] | None = None
    #: How to free the state from an event loop, for states that live on one.
    _arelease: Callable[[], Awaitable[None]] | None = None
    #: The event loop the state lives on, when the sync path of a state kind started it on a
    #: loop of its own (a sandbox workspace): episodes run tools and scoring there.
    loop: asyncio.AbstractEventLoop | None = None

    def release(self) -> None:
        """Free the state (close connections, remove temporary files); idempotent."""
        release, self._release, self._arelease = self._release, None, None
        if release is not None:
            release()

    async def arelease(self) -> None:
        """:meth:`release` for an event loop: states that live on it are closed by awaiting."""
        arelease, self._arelease = self._arelease, None
        if arelease is None:
            self.release()
            return
        self._release = None
        await arelease()


class StateFactory:
    """Makes fresh states of one kind for one environment."""

    kind = "none"

    def new(self, task: Task) -> StateHandle:
        return StateHandle(None)

    async def anew(self, task: Task) -> StateHandle:
        """:meth:`new` for an event loop; kinds whose state lives on a loop override it."""
        return self.new(task)


class _Files(StateFactory):
    kind = "files"

    def __init__(self, snapshot: Path | None) -> None:
        self.snapshot = snapshot

    def new(self, task: Task) -> StateHandle:
        workspace = Path(tempfile.mkdtemp(prefix="envhub-files-"))
        try:
            if self.snapshot is not None:
                shutil.copytree(self.snapshot, workspace, dirs_exist_ok=True, symlinks=True)
        except BaseException:
            shutil.rmtree(workspace, ignore_errors=True)
            raise
        return StateHandle(workspace, lambda: shutil.rmtree(workspace, ignore_errors=True))


class _Sqlite(StateFactory):
    kind = "sqlite"

    def __init__(self, snapshot: Path) -> None:
        self.snapshot = snapshot
        size = snapshot.stat().st_size
        # Read once; every episode deserializes its own copy of these bytes.
        self._image = snapshot.read_bytes() if size <= IN_MEMORY_LIMIT else None

    def new(self, task: Task) -> StateHandle:
        if self._image is not None:
            # check_same_thread=False: the async runner calls tools from worker threads,
            # one call at a time per episode.
            connection = sqlite3.connect(":memory:", check_same_thread=False)
            connection.deserialize(self._image)
            return StateHandle(connection, connection.close)
        directory = Path(tempfile.mkdtemp(prefix="envhub-sqlite-"))
        copy = directory / self.snapshot.name
        shutil.copyfile(self.snapshot, copy)
        connection = sqlite3.connect(copy, check_same_thread=False)

        def release() -> None:
            connection.close()
            shutil.rmtree(directory, ignore_errors=True)

        return StateHandle(connection, release)


class _Python(StateFactory):
    kind = "python"

    def __init__(self, factory: Callable[..., Any], source: str, params: Mapping[str, Any] | None = None) -> None:
        self.factory = factory
        self.source = source
        # Read once: a factory that takes ``params`` gets them on every new state.
        self._kwargs: dict[str, Any] = {"params": _read_only(params)} if _takes(factory, "params") else {}

    def new(self, task: Task) -> StateHandle:
        """A new state; an ``async def`` ``reset`` or ``close`` is run to completion (use
        :meth:`anew` in an event loop)."""
        state = self.factory(**self._kwargs)
        reset = getattr(state, "reset", None)
        replaced = reset(task) if callable(reset) else None
        if inspect.isawaitable(replaced):
            replaced = asyncio.run(_awaited(replaced))
        return self._handle(state, replaced)

    async def anew(self, task: Task) -> StateHandle:
        """:meth:`new` for an event loop: an ``async def`` ``reset`` is awaited, a plain one
        runs in a worker thread (a slow set-up does not hold up other episodes)."""
        state = self.factory(**self._kwargs)
        reset = getattr(state, "reset", None)
        replaced: Any = None
        if callable(reset):
            if inspect.iscoroutinefunction(reset):
                replaced = await reset(task)
            else:
                replaced = await asyncio.to_thread(reset, task)
                if inspect.isawaitable(replaced):
                    replaced = await replaced
        return self._handle(state, replaced)

    @staticmethod
    def _handle(state: Any, replaced: Any) -> StateHandle:
        # reset() may return the object tools should see; None means "this instance".
        value = state if replaced is None else replaced
        close = getattr(state, "close", None)
        if not callable(close):
            return StateHandle(value)
        if inspect.iscoroutinefunction(close):
            return StateHandle(value, lambda: asyncio.run(close()), close)
        return StateHandle(value, close)


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


class _TaskSnapshots(StateFactory):
    """``snapshot-field``: each task's own snapshot (a bundle path in that field), or the
    manifest's ``snapshot`` for a task without one; one factory per snapshot, made on first use."""

    def __init__(self, kind: str, root: Path, field: str, make: Callable[[Path], StateFactory],
                 default: StateFactory | None) -> None:
        self.kind = kind
        self._root = root.resolve()
        self._field = field
        self._make = make
        self._default = default
        self._made: dict[str, StateFactory] = {}

    def _factory(self, task: Task) -> StateFactory:
        relative = task.data.get(self._field)
        if relative is None:
            if self._default is None:
                raise TaskDataError(f"task {task.id!r} has no field {self._field!r} (state.snapshot-field), and the "
                                    "manifest names no snapshot for tasks without one",
                                    hint=f"give the task a {self._field!r}, or the manifest a snapshot")
            return self._default
        factory = self._made.get(relative) if isinstance(relative, str) else None
        if factory is None:
            try:
                factory = self._make(self._inside(task, relative))
            except FileNotFoundError as e:
                raise TaskDataError(f"task {task.id!r}: field {self._field!r} (state.snapshot-field): {e}",
                                    hint="name a snapshot the bundle has") from None
            self._made[relative] = factory
        return factory

    def _inside(self, task: Task, relative: Any) -> Path:
        """The snapshot's path, which must be a relative path that stays in the bundle (a
        task must not make an episode start from files outside it)."""
        where = f"task {task.id!r}: field {self._field!r} (state.snapshot-field)"
        if not isinstance(relative, str) or not relative or Path(relative).is_absolute() or "\\" in relative:
            raise TaskDataError(f"{where} must be a relative path in the bundle, got {relative!r}")
        path = (self._root / relative).resolve()
        if not path.is_relative_to(self._root):
            raise TaskDataError(f"{where} is {relative!r}, which leaves the bundle",
                                hint="name a snapshot inside the bundle directory")
        return path

    def new(self, task: Task) -> StateHandle:
        return self._factory(task).new(task)

    async def anew(self, task: Task) -> StateHandle:
        return await self._factory(task).anew(task)


def files_state(spec: StateSection, root: Path) -> StateFactory:
    """``files``: a copy of the ``snapshot`` directory (or an empty one) per state; with
    ``snapshot-field``, of the task's own snapshot."""

    def make(snapshot: Path, shown: str | None = None) -> StateFactory:
        if not snapshot.is_dir():
            raise FileNotFoundError(f"state snapshot {shown or snapshot} is not a directory in {root}")
        return _Files(snapshot)

    default = make(root / spec.snapshot, spec.snapshot) if spec.snapshot else None
    if spec.snapshot_field is not None:
        return _TaskSnapshots("files", root, spec.snapshot_field, make, default or _Files(None))
    return default if default is not None else _Files(None)


def sqlite_state(spec: StateSection, root: Path) -> StateFactory:
    """``sqlite``: a private copy of the ``snapshot`` database per state; with
    ``snapshot-field``, of the task's own database."""

    def make(snapshot: Path, shown: str | None = None) -> StateFactory:
        if not snapshot.is_file():
            raise FileNotFoundError(f"state snapshot {shown or snapshot} is not a file in {root}")
        return _Sqlite(snapshot)

    assert spec.snapshot is not None  # rule S1
    default = make(root / spec.snapshot, spec.snapshot)
    if spec.snapshot_field is not None:
        return _TaskSnapshots("sqlite", root, spec.snapshot_field, make, default)
    return default


def python_state(spec: StateSection, load_entry_point: Callable[[str], Any], *,
                 params: Mapping[str, Any] | None = None) -> StateFactory:
    """``python``: an instance of the bundle's ``entry-point`` class per state, made with
    ``params=params`` (read-only) when the class (or factory function) takes ``params``."""
    assert spec.entry_point is not None  # rule S3
    return _Python(load_entry_point(spec.entry_point), spec.entry_point, params)


def _takes(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` accepts the keyword ``name`` (by name; ``**kwargs`` does not count, so a
    factory written before ``params`` reached it is called as it always was)."""
    try:
        parameter = inspect.signature(fn).parameters.get(name)
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    return parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)


def _read_only(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    from types import MappingProxyType

    return MappingProxyType(dict(params or {}))


def make_state_factory(spec: StateSection, root: Path, load_entry_point: Callable[[str], Any], *,
                       plugins: PluginLookup, params: Mapping[str, Any] | None = None) -> StateFactory:
    """The factory for ``[state]`` of the bundle at ``root``, from the state kind
    ``plugins`` provides, built-in ones included. ``params`` (``[config.params]``) go to the
    kind's factory when it takes a ``params`` keyword (the built-in ``python`` kind passes
    them to the bundle's class).

    Raises :class:`FileNotFoundError` for a missing snapshot, whatever ``load_entry_point``
    raises (:class:`envhub.errors.TrustError`) for python state, and
    :class:`envhub.errors.PluginError` for a kind no installed plugin provides.
    """
    from envhub.errors import PluginError

    kind = plugins.lookup("state_kinds", spec.kind)
    if kind is None:
        raise PluginError(f"unknown state kind {spec.kind!r}; known kinds: {', '.join(plugins.names('state_kinds'))}",
                          hint="install the plugin that provides it ('envhub plugins' lists what is installed)")
    if _takes(kind.factory, "params"):
        return kind.factory(spec, root, load_entry_point, params=params)  # type: ignore[no-any-return]
    return kind.factory(spec, root, load_entry_point)  # type: ignore[no-any-return]
