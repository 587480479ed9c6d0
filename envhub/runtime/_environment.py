"""An environment: a loaded bundle that hands out tasks, runs episodes and scores them."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from envhub._version import __version__
from envhub.errors import PluginError
from envhub.manifest import Manifest
from envhub.runtime._code import CodeSpace
from envhub.runtime._episode import Episode
from envhub.runtime._protocols import SplitInfo
from envhub.runtime._state import StateFactory, StateHandle, make_state_factory
from envhub.runtime._tasks import TaskSource
from envhub.runtime._tools import Tool, make_tool
from envhub.runtime._types import Message, Score, Task, Trajectory

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup
    from envhub.runtime.verifiers import Verifier
    from envhub.settings import Settings

__all__ = ["DEFAULT_MAX_TURNS", "Environment", "SplitInfo"]

#: ``max-turns`` of multi-turn and tool-use episodes when the manifest leaves it out.
DEFAULT_MAX_TURNS = 10


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
        self._harness = manifest.harness
        self._state_spec = manifest.state
        self._tool_error_rate = manifest.config.noise.tool_error_rate if manifest.config.noise else 0.0
        self._protocol: Any = _protocol(plugins, self._harness.protocol)
        self.max_turns: int = self._protocol.max_turns or self._harness.max_turns or DEFAULT_MAX_TURNS
        self._tasks = TaskSource(manifest.tasks, root, heldout_root, self.name, code.load, plugins=plugins,
                                 params=manifest.config.params)
        self.tools: list[Tool] = _builtin_tools(self._harness.builtin_tools)
        builtin = {tool.name for tool in self.tools}
        for ep in self._harness.tools:
            tool = make_tool(code.load(ep), source=ep)
            if tool.name in builtin:
                raise TypeError(f"tool {ep} is named {tool.name!r}, like the built-in tool it would hide; "
                                "rename the function, or remove the built-in tool from builtin-tools")
            self.tools.append(tool)
        self._tools_by_name = {tool.name: tool for tool in self.tools}
        self.tool_specs: list[dict[str, Any]] = [tool.spec for tool in self.tools]
        self._responder: Callable[..., Any] | None = None
        self._responder_takes_state = False
        if self._harness.responder:
            self._responder = code.load(self._harness.responder)
            self._responder_takes_state = "state" in inspect.signature(self._responder).parameters
        self._system: Message | None = None
        if self._harness.system_prompt:
            text = (root / self._harness.system_prompt).read_text(encoding="utf-8")
            self._system = {"role": "system", "content": text}
        self._state_factory: StateFactory = make_state_factory(self._state_spec, root, code.load, plugins=plugins)
        self._shared_states: dict[Any, StateHandle] = {}
        self.policy_model: str | None = None
        self._verifier = self._build_verifier(None, False)

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

    def episode(self, task: Task, *, seed: int | None = None) -> Episode:
        """A new episode of ``task``; call its ``reset()`` to start it."""
        return Episode(self, task, seed=seed)

    def score(self, task: Task, completion_or_trajectory: str | Sequence[Message] | Trajectory, *,
              state: Any = None) -> Score:
        """Score a completion (one assistant turn) or a whole trajectory. Never raises for
        a broken verifier: its error is in :attr:`Score.error` and the reward is 0."""
        trajectory = Trajectory.of(completion_or_trajectory)
        try:
            return self._verifier.score(task, trajectory, state=state)
        except Exception as e:
            return Score.failed(f"{type(e).__name__}: {e}")

    async def ascore(self, task: Task, completion_or_trajectory: str | Sequence[Message] | Trajectory, *,
                     state: Any = None) -> Score:
        """:meth:`score` for an event loop."""
        trajectory = Trajectory.of(completion_or_trajectory)
        try:
            return await self._verifier.ascore(task, trajectory, state=state)
        except Exception as e:
            return Score.failed(f"{type(e).__name__}: {e}")

    def use_policy_model(self, model: str | None, *, force_self_judge: bool = False) -> None:
        """Tell the verifier which model the policy is, so an LLM judge can refuse to
        grade its own model's work (:class:`envhub.errors.UsageError`) unless forced."""
        self._verifier = self._build_verifier(model, force_self_judge)
        self.policy_model = model

    def _build_verifier(self, policy_model: str | None, force_self_judge: bool) -> Verifier:
        from envhub.runtime.verifiers import VerifierContext, build_verifier

        ctx = VerifierContext(root=self.root, load_entry_point=self._code.load, settings=self._settings,
                              policy_model=policy_model, state=self._state_spec, plugins=self._plugins,
                              force_self_judge=force_self_judge)
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

    def _initial_messages(self, task: Task) -> list[Message]:
        prompt = task.data.get(self.manifest.tasks.prompt_field, task.prompt)
        messages: list[Message] = [self._system] if self._system is not None else []
        if isinstance(prompt, list):  # a chat-format prompt
            messages.extend(dict(m) for m in prompt)
        else:
            messages.append({"role": "user", "content": prompt if isinstance(prompt, str) else str(prompt)})
        return messages

    async def _aacquire_state(self, task: Task) -> StateHandle:
        """:meth:`_acquire_state` for an event loop: states that live on a loop start on this one."""
        if self._state_spec.reset == "per-episode":
            return await self._state_factory.anew(task)
        return self._acquire_state(task)

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Environment {self.name}@{self.version} from {self.source}>"


def _protocol(plugins: PluginLookup, name: str) -> Any:
    found = plugins.lookup("harness_protocols", name)
    if found is None:
        raise PluginError(f"unknown harness protocol {name!r}; known protocols: "
                          f"{', '.join(plugins.names('harness_protocols'))}",
                          hint="install the plugin that provides it ('envhub plugins' lists what is installed)")
    return found


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


def _builtin_tools(names: Sequence[str]) -> list[Tool]:
    if not names:
        return []
    from envhub.runtime._shell_tools import builtin_tools

    return builtin_tools(names)


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
