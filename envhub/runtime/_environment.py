"""An environment: a loaded bundle that hands out tasks, runs episodes and scores them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from envhub._version import __version__
from envhub.errors import PluginError
from envhub.manifest import Manifest
from envhub.runtime._code import CodeSpace
from envhub.runtime._episode import Episode
from envhub.runtime._harness import Harness, HarnessSetup
from envhub.runtime._mcp import McpToolset
from envhub.runtime._protocols import SplitInfo
from envhub.runtime._spec_tools import load_spec_tools
from envhub.runtime._state import StateFactory, StateHandle, make_state_factory
from envhub.runtime._tasks import TaskSource
from envhub.runtime._tools import ToolLike, make_tool
from envhub.runtime._types import Message, Score, Task, Trajectory
from envhub.runtime.verifiers import ascore_with, score_with

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup
    from envhub.runtime.verifiers import ScoringContext, Verifier
    from envhub.settings import Settings

__all__ = ["Environment", "SplitInfo"]

class Environment:
    """A loaded environment. Make one with :func:`envhub.load`.

    ``tasks`` gives a split's tasks; ``episode`` runs one; ``score`` scores a completion or
    trajectory directly. Close it (or use ``with``) to free shared state.

    Its harness protocol, state kind, task format or generator and verifier kind are those
    ``plugins`` provides, built-in ones included.
    """

    def __init__(self, manifest: Manifest, root: Path, *, code: CodeSpace, heldout_root: Path | None = None,
                 digest: str | None = None, source: str | None = None, locator: str | None = None,
                 settings: Settings, plugins: PluginLookup) -> None:
        self._plugins = plugins
        self._settings = settings
        self.manifest = manifest
        self.root = root
        self.heldout_root = heldout_root
        self.source = source or str(root)
        self.locator = locator
        self._digest = digest
        self._code = code
        env = manifest.environment
        self.name: str = env.name
        self.version: str = env.version
        self.score_version: int = env.score_version
        self._state_spec = manifest.state
        self._tool_error_rate = manifest.config.noise.tool_error_rate if manifest.config.noise else 0.0
        self._tasks = TaskSource(manifest.tasks, root, heldout_root, self.name, code.load, plugins=plugins,
                                 params=manifest.config.params)
        section = manifest.harness
        params = manifest.config.params
        tools: list[ToolLike] = _builtin_tools(section.builtin_tools)
        builtin = {tool.name for tool in tools}
        for ep in section.tools:
            tool = make_tool(code.load(ep), source=ep, params=params)
            if tool.name in builtin:
                raise TypeError(f"tool {ep} is named {tool.name!r}, like the built-in tool it would hide; "
                                "rename the function, or remove the built-in tool from builtin-tools")
            tools.append(tool)
        if section.spec_tools:
            tools.extend(load_spec_tools(section.spec_tools, root, code.load, params=params))
        _refuse_clashes(tools)
        #: The MCP servers of [[harness.mcp-servers]]; their tools join the harness's (spec 10.2).
        self.mcp: McpToolset | None = None
        if section.mcp_servers:
            self.mcp = McpToolset(section.mcp_servers, root=root, trusted=code.trusted, trust_hint=code.trust_hint,
                                  env_name=self.name, reserved=[tool.name for tool in tools])
            try:
                tools.extend(self.mcp.tools())  # starts each server once, to list its tools
            except BaseException:
                self.mcp.close()
                raise
        setup = HarnessSetup(section=section, root=root, prompt_field=manifest.tasks.prompt_field, tools=tools,
                             responder=code.load(section.responder) if section.responder else None,
                             params=manifest.config.params, owner=self)
        #: The harness: what the model sees and what answers its turns (:class:`~envhub.runtime.Harness`).
        self.harness: Harness = _harness(plugins, section.protocol, setup)
        self._state_factory: StateFactory = make_state_factory(self._state_spec, root, code.load, plugins=plugins,
                                                               params=params)
        self._shared_states: dict[Any, StateHandle] = {}
        self._verifier = self._build_verifier()

    # -- tasks --------------------------------------------------------------------------

    @property
    def splits(self) -> dict[str, SplitInfo]:
        """Every split, with whether its tasks are here (held-out ones may not be)."""
        generated = self.manifest.tasks.format == "generator"
        return {name: SplitInfo(name, s.held_out, self._tasks.available(name), s.rows if s.seeds is None
                                else s.seeds[1] - s.seeds[0], generated)
                for name, s in self.manifest.tasks.splits.items()}

    def tasks(self, split: str, *, seed: int | None = None, limit: int | None = None) -> Sequence[Task]:
        """The tasks of ``split``, in file order or shuffled by ``seed``, at most ``limit``.

        Raises :class:`envhub.errors.EnvNotFoundError` for a split that does not exist
        (listing those that do) or a held-out split whose tasks are not in this copy.
        """
        return self._tasks.tasks(split, seed=seed, limit=limit)

    def task(self, split: str, task_id: str) -> Task:
        """One task by id; :class:`envhub.errors.EnvNotFoundError` if there is none."""
        return self._tasks.task(split, task_id)

    def tasks_by_level(self, split: str) -> dict[Any, Sequence[Task]]:
        """The tasks of ``split`` grouped by difficulty level, easiest first (what a
        curriculum draws from). A generator with ``difficulty-levels`` gives lazy views, so
        an unbounded seed range costs nothing until drawn from.

        Raises :class:`envhub.errors.UsageError` when tasks have no difficulty."""
        return self._tasks.by_level(split)

    # -- episodes and scores ------------------------------------------------------------

    def episode(self, task: Task, *, seed: int | None = None, scoring: ScoringContext | None = None) -> Episode:
        """A new episode of ``task``; call its ``reset()`` to start it. ``scoring`` is what
        its verifier is told about the run (the policy's model)."""
        return Episode(self, task, seed=seed, scoring=scoring)

    @property
    def max_turns(self) -> int:
        """The harness's turn limit (a task may set its own: :attr:`Episode.max_turns`)."""
        return self.harness.max_turns

    @property
    def tools(self) -> list[ToolLike]:
        """Every tool the harness offers (a task may narrow them)."""
        return self.harness.tools

    @property
    def tool_specs(self) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` entries of :attr:`tools`."""
        return self.harness.tool_specs

    def score(self, task: Task, completion_or_trajectory: str | Sequence[Message] | Trajectory, *,
              state: Any = None, context: ScoringContext | None = None) -> Score:
        """Score a completion (one assistant turn) or a whole trajectory, for the run
        ``context`` describes. Never raises for a broken verifier: its error is in
        :attr:`Score.error` and the reward is 0."""
        trajectory = Trajectory.of(completion_or_trajectory)
        try:
            if context is None:  # nothing to pass on (the common case, kept short)
                return self._verifier.score(task, trajectory, state=state)
            return score_with(self._verifier, task, trajectory, state=state, context=context)
        except Exception as e:
            return Score.failed(f"{type(e).__name__}: {e}")

    async def ascore(self, task: Task, completion_or_trajectory: str | Sequence[Message] | Trajectory, *,
                     state: Any = None, context: ScoringContext | None = None) -> Score:
        """:meth:`score` for an event loop."""
        trajectory = Trajectory.of(completion_or_trajectory)
        try:
            return await ascore_with(self._verifier, task, trajectory, state=state, context=context)
        except Exception as e:
            return Score.failed(f"{type(e).__name__}: {e}")

    def check_scoring(self, context: ScoringContext) -> None:
        """Raise :class:`envhub.errors.UsageError` when every score for ``context`` would be
        refused (an llm-judge asked to grade its own model's work), so a run stops before it
        starts."""
        self._verifier.check_context(context)

    def _build_verifier(self) -> Verifier:
        from envhub.runtime.verifiers import VerifierContext, build_verifier

        ctx = VerifierContext(root=self.root, load_entry_point=self._code.load, settings=self._settings,
                              state=self._state_spec, plugins=self._plugins, params=self.manifest.config.params)
        return build_verifier(self.manifest.verifier, ctx, plugins=self._plugins)

    # -- references ---------------------------------------------------------------------

    def reference_actions(self, task: Task) -> list[Message]:
        """The assistant turns that solve ``task``, for the ``reference`` policy: the task's
        ``reference`` field (an answer, or a list of assistant turns, tool calls included);
        else, when the harness has a ``bash`` tool, the task's ``solution`` commands as bash
        calls; else what the verifier says solves it (:meth:`Verifier.reference
        <envhub.runtime.verifiers.Verifier.reference>`, a plugin kind's too). Empty when
        there is no reference."""
        return reference_turns(self.manifest, task, self._verifier)

    # -- provenance ---------------------------------------------------------------------

    @property
    def digest(self) -> str:
        """The public archive's digest: the registry's for a pulled environment; for a
        directory, the digest ``envhub push`` would publish (computed once, by building)."""
        if self._digest is None:
            self._digest = bundle_digest(self.root, self._plugins)
        return self._digest

    def provenance(self) -> dict[str, Any]:
        """What every rollout record carries about where its environment came from."""
        return provenance(self)

    def task_provenance(self, task: Task) -> dict[str, Any] | None:
        """Where ``task`` comes from, when not this environment (composites); else None."""
        return None

    # -- internals used by Episode ------------------------------------------------------

    async def _aacquire_state(self, task: Task) -> StateHandle:
        """:meth:`_acquire_state` for an event loop: states that live on a loop start on this one."""
        reset = self._state_spec.reset
        if reset == "per-episode":
            return await self._state_factory.anew(task)
        key = (task.split, task.id) if reset == "per-task" else None
        handle = self._shared_states.get(key)
        if handle is None:
            made = await self._state_factory.anew(task)
            handle = self._shared_states.get(key)
            if handle is None:
                handle = self._shared_states[key] = made
            else:  # another episode made it while this one awaited: keep the first
                await made.arelease()
        return handle

    def _acquire_state(self, task: Task) -> StateHandle:
        reset = self._state_spec.reset
        if reset == "per-episode":
            return self._state_factory.new(task)
        key = (task.split, task.id) if reset == "per-task" else None
        handle = self._shared_states.get(key)
        if handle is None:
            handle = self._shared_states[key] = self._state_factory.new(task)
        return handle

    def close(self) -> None:
        """Release state shared between episodes (``reset = "per-task"`` or ``"never"``)."""
        states, self._shared_states = self._shared_states, {}
        for handle in states.values():
            handle.release()
        if self.mcp is not None:
            self.mcp.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Environment {self.name}@{self.version} from {self.source}>"


def _harness(plugins: PluginLookup, name: str, setup: HarnessSetup) -> Harness:
    """The harness of protocol ``name`` (built in or a plugin's), built from ``setup``."""
    found = plugins.lookup("harness_protocols", name)
    if found is None:
        raise PluginError(f"unknown harness protocol {name!r}; known protocols: "
                          f"{', '.join(plugins.names('harness_protocols'))}",
                          hint="install the plugin that provides it ('envhub plugins' lists what is installed)")
    return found.build(setup)  # type: ignore[no-any-return]


def reference_turns(manifest: Manifest, task: Task, verifier: Verifier | None) -> list[Message]:
    """The rule of :meth:`Environment.reference_actions`: the task's ``reference`` field;
    else, when the harness has a ``bash`` tool, the task's ``solution`` commands as bash
    calls; else what ``verifier`` says solves it, or, without a verifier (a served
    environment's is on the server), what the manifest's built-in verifier kind says."""
    from envhub.runtime.verifiers import reference_messages, spec_reference

    reference = task.data.get("reference")
    if isinstance(reference, (str, list)):
        return reference_messages(reference)
    if "bash" in manifest.harness.builtin_tools and "solution" in task.data:
        return _shell_reference(task.data["solution"])
    found = verifier.reference(task) if verifier is not None else spec_reference(manifest.verifier, task)
    return reference_messages(found) if found is not None else []


def bundle_digest(root: Path, plugins: PluginLookup) -> str:
    """The digest ``envhub push`` would publish for the bundle at ``root`` (by building it)."""
    import tempfile

    from envhub.bundle import build_bundle

    with tempfile.TemporaryDirectory(prefix="envhub-digest-") as out:
        return build_bundle(root, out, plugins=plugins).public.digest


def provenance(env: Any) -> dict[str, Any]:
    """The provenance fields of a loaded environment (or composite): name, version,
    digest, score-version, source, envhub version, and its locator if it has one."""
    out: dict[str, Any] = {"env": env.name, "version": env.version, "digest": env.digest,
                           "score_version": env.score_version, "source": env.source,
                           "envhub_version": __version__}
    if env.locator:
        out["locator"] = env.locator
    return out


def _refuse_clashes(tools: Sequence[ToolLike]) -> None:
    """Raise :class:`TypeError` when two tools have one name (the model could call only one)."""
    seen: dict[str, ToolLike] = {}
    for tool in tools:
        if tool.name in seen:
            raise TypeError(f"tools {seen[tool.name].source} and {tool.source} are both named {tool.name!r}; "
                            "rename one: the model calls a tool by its name")
        seen[tool.name] = tool


def _builtin_tools(names: Sequence[str]) -> list[ToolLike]:
    if not names:
        return []
    from envhub.runtime._shell_tools import builtin_tools

    return list(builtin_tools(names))


def _shell_reference(solution: Any) -> list[Message]:
    """A sandbox task's ``solution`` (a command, or a list of them) as one turn of ``bash``
    calls, run in order, then a final message."""
    commands = [solution] if isinstance(solution, str) else solution
    if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands) or not commands:
        return []
    calls = [{"id": f"ref-0-{i}", "type": "function",
              "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
             for i, command in enumerate(commands)]
    return [{"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "assistant", "content": "Done."}]
