"""The hooks through which plugins extend envhub, and what each hook returns.

A plugin is a module (or any object) with functions marked ``@hookimpl`` and named after
the hooks below; a distribution makes it discoverable with an entry point in the group
``envhub``::

    # pyproject.toml
    [project.entry-points.envhub]
    levenshtein = "envhub_levenshtein"

    # envhub_levenshtein.py
    from envhub import hookimpl
    from envhub.hookspecs import VerifierKind

    @hookimpl
    def envhub_verifier_kinds():
        return [VerifierKind("levenshtein", make_verifier, options="envhub_levenshtein:Options")]

Every hook is a *registration* hook: it takes no arguments and returns a list of named
things (verifier kinds, protocols, ...). envhub calls each plugin's implementation on its
own, so it knows which distribution provides which name: two plugins providing one name
is an error naming both, raised when the name is used, and a plugin whose hook raises or
returns something else is reported as broken while the others keep working. None of the
hooks is ``firstresult``: "the first plugin that answers wins" would hide exactly those
conflicts, and whichever plugin pluggy happened to call first would decide a reward.

envhub's own kinds register through these same hooks (``envhub._builtins``), and their
names are reserved: a plugin cannot replace a built-in kind, so installing a plugin never
changes how an existing environment is scored.

docs/plugins.md describes each hook with an example. Importing this module is cheap (no
pydantic, no runtime): plugins import it when ``envhub plugins`` lists them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    from envhub.registry import Registry
    from envhub.runtime import Executor, Harness, HarnessSetup, StateFactory
    from envhub.runtime.policies import Policy, PolicyOptions
    from envhub.runtime.verifiers import Verifier, VerifierContext
    from envhub.settings import Settings

__all__ = [
    "PROJECT",
    "EnvironmentPackage",
    "ExecutorKind",
    "HarnessProtocol",
    "ImportOutcome",
    "ImporterKind",
    "PolicyKind",
    "RegistryBackend",
    "StateKind",
    "TaskFormat",
    "TaskGenerator",
    "VerifierKind",
    "WorkspaceBackend",
    "hookimpl",
    "hookspec",
]

#: The pluggy project name, and the entry-point group plugins are found in.
PROJECT = "envhub"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Marks a plugin's hook implementations: ``from envhub import hookimpl``.
hookimpl = pluggy.HookimplMarker(PROJECT)


# --- what the hooks return ----------------------------------------------------------------


@dataclass(frozen=True)
class VerifierKind:
    """A ``[verifier]`` kind (also usable as a rubric criterion).

    ``factory(spec, ctx, factories)`` builds the verifier of one manifest table. For a
    plugin kind, ``spec`` is an instance of ``options`` validated from the table's keys
    other than ``kind`` (and, in a rubric, ``name``, ``weight`` and ``required``), or a
    plain dict of those keys when ``options`` is None. ``ctx`` is the
    :class:`~envhub.runtime.verifiers.VerifierContext`; ``factories`` maps every kind to
    its factory (to build nested verifiers). It returns a
    :class:`~envhub.runtime.verifiers.Verifier`.

    ``options`` is a pydantic model class, or ``"module:Class"`` naming one, imported only
    when a manifest uses the kind (so listing plugins does not import pydantic).
    ``envhub validate`` reports its validation errors with the manifest's line numbers.
    """

    name: str
    factory: Callable[[Any, VerifierContext, Mapping[str, Any]], Verifier]
    options: type | str | None = None
    description: str = ""

    def options_model(self) -> type | None:
        """The pydantic model of the kind's options, importing it if ``options`` names it
        as ``"module:Class"``. Raises what the import raises, and TypeError when the name
        is not a class."""
        if not isinstance(self.options, str):
            return self.options
        import importlib

        module, _, attr = self.options.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
        if not isinstance(obj, type):
            raise TypeError(f"{self.options} is a {type(obj).__name__}, not a model class")
        return obj


@dataclass(frozen=True)
class HarnessProtocol:
    """A ``[harness] protocol``: what the model sees and what answers its turns.

    ``harness`` is a subclass of :class:`envhub.runtime.Harness` (what envhub's own
    ``single-turn``, ``multi-turn`` and ``tool-use`` are): it may set ``runs_tools`` and
    ``fixed_turns`` and override ``start``, ``respond`` and ``observe``. It is built once
    per environment with the manifest's ``[harness]`` table and the bundle's tools and
    responder (:class:`envhub.runtime.HarnessSetup`).

    The older form, without ``harness``, still works:

    - ``runs_tools``: the assistant's tool calls are run and their results answered as tool
      messages, and ``harness.tools`` is allowed; the episode goes on after such a turn.
    - ``respond(env, task, messages, state)``: after a turn without tool calls, the
      environment's next user message (a string, or a :class:`envhub.runtime.Reply`), or
      None to end the episode. Without ``respond`` such a turn ends the episode.
    - ``max_turns``: a fixed number of model turns (``single-turn`` is 1); None means the
      manifest's ``max-turns`` (default 10).

    An episode always ends after its last allowed turn.
    """

    name: str
    runs_tools: bool = False
    respond: Callable[[Any, Any, list[dict[str, Any]], Any], Any | Awaitable[Any]] | None = None
    max_turns: int | None = None
    description: str = ""
    harness: type[Harness] | None = None

    def __post_init__(self) -> None:
        if self.harness is not None:  # the class says whether it runs tools (the manifest rules read this)
            object.__setattr__(self, "runs_tools", bool(self.harness.runs_tools))

    def build(self, setup: HarnessSetup) -> Harness:
        """The protocol's harness for one environment."""
        if self.harness is not None:
            return self.harness(setup)
        from envhub.runtime import ProtocolHarness

        return ProtocolHarness.of(runs_tools=self.runs_tools, respond=self.respond, max_turns=self.max_turns)(setup)


@dataclass(frozen=True)
class StateKind:
    """A ``[state] kind``. ``factory(spec, root, load_entry_point)`` returns a
    :class:`~envhub.runtime.StateFactory` for the manifest's ``[state]`` table ``spec`` of
    the bundle at ``root``; its ``new(task)`` makes one fresh
    :class:`~envhub.runtime.StateHandle` (the value tools and verifiers receive, and how to
    release it). ``load_entry_point`` resolves the bundle's own ``module:attr`` strings
    (and refuses if the bundle is not trusted)."""

    name: str
    factory: Callable[[Any, Path, Callable[[str], Any]], StateFactory]
    description: str = ""


@dataclass(frozen=True)
class TaskFormat:
    """A ``[tasks] format`` for task files: ``read(path)`` returns the file's rows, each a
    mapping of task fields, in order. ``envhub validate`` reads files through it too, to
    count rows and check ids and fields.

    ``read`` is None only for envhub's structural formats (``generator``, ``mixture``),
    whose tasks do not come from a file."""

    name: str
    read: Callable[[Path], Iterable[Mapping[str, Any]]] | None
    description: str = ""


@dataclass(frozen=True)
class TaskGenerator:
    """A named task generator for ``format = "generator"`` manifests that say
    ``generator = "NAME"`` (a name, not ``module:function``):
    ``generate(seed=..., split=..., difficulty=..., params=...)`` returns one task (a
    mapping). It is installed code, so it needs no ``--trust``. ``split``, ``difficulty``
    (with ``difficulty-levels``) and ``params`` (``[config.params]``) are passed only if the
    function accepts them (docs/curriculum.md)."""

    name: str
    generate: Callable[..., Mapping[str, Any]]
    description: str = ""


@dataclass(frozen=True)
class RegistryBackend:
    """A registry backend for URLs of scheme ``name`` (``"foo"`` serves ``foo://...``):
    ``open(url, settings)`` returns a :class:`~envhub.registry.Registry`."""

    name: str
    open: Callable[[str, Settings], Registry]
    description: str = ""


@dataclass(frozen=True)
class PolicyKind:
    """A policy for ``--policy NAME`` or ``--policy NAME:ARGUMENT``:
    ``make(argument, options)`` returns a :class:`~envhub.runtime.policies.Policy`;
    ``argument`` is the text after the first ``:`` ("" when there is none) and ``options``
    the :class:`~envhub.runtime.policies.PolicyOptions` of the run (endpoint, sampling,
    settings, ...). ``takes_argument`` says whether the argument is required (True) or
    refused (False). ``forms`` show the policy in error messages and help
    (``("openai:MODEL",)``); the default is the name itself."""

    name: str
    make: Callable[[str, PolicyOptions], Policy]
    takes_argument: bool = False
    forms: Sequence[str] = ()
    description: str = ""


@dataclass(frozen=True)
class ExecutorKind:
    """A rollout executor for ``envhub eval --executor NAME``: ``make(**options)`` returns an
    `envhub.runtime.Executor` that runs a plan's rollouts and yields their records.

    ``options`` names the executor options ``make`` takes as keyword arguments (today
    ``address``, from ``eval --address``: the cluster to join); an option the kind does not
    name is refused before ``make`` is called."""

    name: str
    make: Callable[..., Executor]
    description: str = ""
    options: tuple[str, ...] = ()


class ImportOutcome(Protocol):
    """What an importer's ``run`` returns: the bundle it wrote and what did not carry over.

    ``name`` is the bundle's ``namespace/name`` and ``out`` its directory; ``dropped``
    counts what could not be carried over. ``to_markdown()`` is the report a person reads
    (``envhub import`` prints it and the importer writes it to ``OUT/IMPORT-REPORT.md``);
    ``to_dict()`` is its JSON form (``envhub import --json``); ``summary()`` says what was
    imported in a few words (``"3 task(s)"``)."""

    @property
    def name(self) -> str: ...

    @property
    def out(self) -> Path: ...

    @property
    def dropped(self) -> int: ...

    def summary(self) -> str: ...

    def to_markdown(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ImporterKind:
    """An importer for ``envhub import NAME SOURCE OUT``: a bundle from something written
    for another tool.

    ``run(source, out, options)`` (a function, or ``"module:function"`` naming one, imported
    only when the importer is used) reads ``source`` (a path), writes a bundle to ``out`` (a
    new or empty directory; nothing is written when it fails) and returns an
    :class:`ImportOutcome` saying what was carried over and what was not. ``options`` maps
    each option the user gave (``--name``, ``--split``, ``--option KEY=VALUE``) to its text;
    ``options`` of the kind names the keys it takes, each with a one-line help, and
    ``envhub import`` refuses any other. ``run`` raises :class:`envhub.errors.EnvhubError`
    subclasses for bad input (a source that is not of its kind, a non-empty ``out``, a bad
    option value): the command prints them and exits 2."""

    name: str
    run: Callable[[Path, Path, Mapping[str, str]], ImportOutcome] | str
    description: str = ""
    options: Mapping[str, str] = field(default_factory=dict)

    def runner(self) -> Callable[[Path, Path, Mapping[str, str]], ImportOutcome]:
        """``run``, importing it if it is given as ``"module:function"`` (so listing the
        importers imports none of them). Raises what the import raises, and TypeError when
        the name is not callable."""
        if not isinstance(self.run, str):
            return self.run
        import importlib

        module, _, attr = self.run.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
        if not callable(obj):
            raise TypeError(f"{self.run} is a {type(obj).__name__}, not a function")
        run: Callable[[Path, Path, Mapping[str, str]], ImportOutcome] = obj
        return run


@dataclass(frozen=True)
class EnvironmentPackage:
    """An installed environment: the bundle directory ``path`` (with its ``envhub.toml``)
    of the environment ``name`` (``namespace/name``).

    Environment packages usually need no code of their own: an entry point in the group
    ``envhub.environments`` (see docs/plugins.md) is read by envhub's built-in
    implementation of :func:`envhub_environments` without importing the package.
    ``distribution`` and ``version`` say where it comes from (the distribution's name and
    version); ``error`` marks an entry that cannot be used, and why."""

    name: str
    path: Path | None
    distribution: str | None = None
    distribution_version: str | None = None
    version: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class WorkspaceBackend:
    """Where the workspaces of state kind ``sandbox`` run, for a ``[state] base`` of scheme
    ``scheme`` (``"oci"`` serves ``base = "oci:docker.io/library/python@sha256:..."``).
    envhub's own sandbox is the backend of scheme ``host``: ``base = "host"`` (or no base) and
    a root filesystem archive of the bundle.

    ``start(seed=, limits=, mounts=, base=)`` is a coroutine function returning a started
    workspace with the API of :class:`envhub.sandbox.ShellWorkspace`: ``run``, ``read_file``,
    ``write_file``, ``edit_file``, ``list_files``, ``export``, ``close``. ``seed`` is a host
    directory copied in (never written), ``limits`` an :class:`envhub.sandbox.ShellLimits`,
    ``mounts`` maps a path in the workspace's system (``/tests``) to a host directory that
    must appear there read-only, and ``base`` is the manifest's base with ``scheme:``
    removed (for ``host``: the archive's absolute path, or ``""`` for the host's system).

    ``pull(reference)``, if given, makes ``reference`` (a base without its scheme, as a lock
    records it) available on this machine ahead of the first episode (``envhub sync``); it
    raises :class:`envhub.errors.EnvhubError` saying why it cannot.
    """

    scheme: str
    start: Callable[..., Awaitable[Any]]
    pull: Callable[[str], None] | None = None
    description: str = ""

    @property
    def name(self) -> str:
        """The scheme: what a conflict or a listing names it by."""
        return self.scheme


# --- the hooks ------------------------------------------------------------------------------
# Specifications: pluggy reads their names and signatures and never runs their bodies.


@hookspec
def envhub_verifier_kinds() -> Sequence[VerifierKind]:
    """Verifier kinds this plugin provides, for ``[verifier] kind`` and rubric criteria."""
    raise NotImplementedError


@hookspec
def envhub_harness_protocols() -> Sequence[HarnessProtocol]:
    """Harness protocols this plugin provides, for ``[harness] protocol``."""
    raise NotImplementedError


@hookspec
def envhub_state_kinds() -> Sequence[StateKind]:
    """State kinds this plugin provides, for ``[state] kind``."""
    raise NotImplementedError


@hookspec
def envhub_task_formats() -> Sequence[TaskFormat]:
    """Task file formats this plugin provides, for ``[tasks] format``."""
    raise NotImplementedError


@hookspec
def envhub_task_generators() -> Sequence[TaskGenerator]:
    """Named task generators this plugin provides, for ``[tasks] generator = "NAME"``."""
    raise NotImplementedError


@hookspec
def envhub_registry_backends() -> Sequence[RegistryBackend]:
    """Registry backends this plugin provides, one per URL scheme."""
    raise NotImplementedError


@hookspec
def envhub_policies() -> Sequence[PolicyKind]:
    """Policies this plugin provides, by the name before the first ``:`` of a policy spec."""
    raise NotImplementedError


@hookspec
def envhub_executors() -> Sequence[ExecutorKind]:
    """Rollout executors this plugin provides, for ``envhub eval --executor``."""
    raise NotImplementedError


@hookspec
def envhub_importers() -> Sequence[ImporterKind]:
    """Importers this plugin provides, for ``envhub import NAME SOURCE OUT``."""
    raise NotImplementedError


@hookspec
def envhub_workspace_backends() -> Sequence[WorkspaceBackend]:
    """Workspace backends this plugin provides, one per ``[state] base`` scheme."""
    raise NotImplementedError


@hookspec
def envhub_environments() -> Sequence[EnvironmentPackage]:
    """Environments this plugin makes loadable by name (``envhub.load("ns/name")``)."""
    raise NotImplementedError
