"""Everything a plugin author needs, in one import: ``from envhub.plugin import ...``.

A plugin is a module with functions marked :data:`hookimpl`, each named after a hook
(``envhub_verifier_kinds``, ``envhub_harness_protocols``, ``envhub_state_kinds``,
``envhub_task_formats``, ``envhub_task_generators``, ``envhub_registry_backends``,
``envhub_policies``, ``envhub_executors``, ``envhub_workspace_backends``, ``envhub_importers``,
``envhub_environments``)
and returning a list of registrations, the dataclasses below; its distribution declares it as
an entry point in the group ``envhub`` and depends on ``envhub-rl``. docs/plugins.md shows each hook::

    from envhub.plugin import OptionsModel, Score, Verifier, VerifierKind, hookimpl, task_value

    class Options(OptionsModel):
        field: str = "answer"

    class Shouted(Verifier):
        kind = "shouted"

        def __init__(self, options: Options) -> None:
            self.options = options

        def score(self, task, trajectory, *, state=None):
            expected = str(task_value(task, self.options.field, self.kind))
            return Score(1.0 if trajectory.completion == expected.upper() else 0.0)

    @hookimpl
    def envhub_verifier_kinds() -> list[VerifierKind]:
        return [VerifierKind("shouted", lambda options, ctx, factories: Shouted(options), options=Options)]

What a plugin implements or receives:

- **registrations** (what hooks return): :class:`VerifierKind`, :class:`HarnessProtocol`,
  :class:`StateKind`, :class:`TaskFormat`, :class:`TaskGenerator`, :class:`RegistryBackend`,
  :class:`PolicyKind`, :class:`ExecutorKind`, :class:`WorkspaceBackend`, :class:`ImporterKind`,
  :class:`EnvironmentPackage`;
- **verifiers**: subclass :class:`Verifier` (``score``, and ``ascore`` if it waits on I/O,
  and ``reference`` returning a :class:`Reference` so the ``reference`` policy and
  ``validate --check`` can play what solves a task),
  built by a :data:`VerifierFactory` from its options (an :class:`OptionsModel`), a
  :class:`VerifierContext` and the other kinds' factories; read a task's fields with
  :func:`task_value`; raise :class:`VerifierError` when it cannot score;
- **episodes**: :class:`Task`, :class:`Trajectory` (chat messages: dicts, as OpenAI's API
  has them), :class:`Observation`, :class:`Score`, :class:`StepResult`, :class:`Reply`;
- **harness protocols**: a :class:`Harness` subclass, built from a :class:`HarnessSetup`,
  whose ``start`` gives a :class:`TaskHarness`;
- **state kinds**: :class:`StateFactory` and the :class:`StateHandle` its ``new`` returns;
- **workspace backends** (where state kind ``sandbox`` runs, by the scheme of its ``base``): a
  :class:`WorkspaceBackend` whose ``start`` takes :class:`ShellLimits` and returns an object with
  :class:`ShellWorkspace`'s API, whose ``run`` returns :class:`CommandResult` s and whose file
  tools raise :class:`WorkspaceError`;
- **executors**: :class:`Executor`, running :class:`RolloutJob` s of a :class:`RolloutPlan`
  with :func:`run_rollout`;
- **registries**: :class:`Registry` (and :class:`FsspecRegistry` to build on),
  :class:`VersionEntry`, :class:`PublishResult`, opened with the :class:`Settings`;
- **policies**: :class:`Policy`, made with the run's :class:`PolicyOptions`;
- **errors**: :class:`EnvhubError` and the subclasses a plugin raises.

Names are imported on first use: importing this module costs what importing
:mod:`envhub.hookspecs` costs, so ``envhub plugins`` stays fast when it imports a plugin that
imports from here at module level.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from envhub.hookspecs import (
    EnvironmentPackage,
    ExecutorKind,
    HarnessProtocol,
    ImporterKind,
    ImportOutcome,
    PolicyKind,
    RegistryBackend,
    StateKind,
    TaskFormat,
    TaskGenerator,
    VerifierKind,
    WorkspaceBackend,
    hookimpl,
)

if TYPE_CHECKING:
    from envhub.errors import (
        EnvhubError,
        EnvNotFoundError,
        IntegrityError,
        PluginError,
        PolicyError,
        RegistryError,
        UsageError,
        VersionConflictError,
    )
    from envhub.manifest import OptionsModel
    from envhub.registry import (
        FsspecRegistry,
        PublishResult,
        Registry,
        VersionEntry,
    )
    from envhub.runtime import (
        Executor,
        Harness,
        HarnessSetup,
        Observation,
        Reply,
        RolloutJob,
        RolloutPlan,
        Score,
        StateFactory,
        StateHandle,
        StepResult,
        Task,
        TaskHarness,
        Trajectory,
        run_rollout,
    )
    from envhub.runtime.policies import Policy, PolicyOptions
    from envhub.runtime.verifiers import (
        Factory as VerifierFactory,
    )
    from envhub.runtime.verifiers import (
        MissingFieldError,
        Reference,
        Verifier,
        VerifierContext,
        VerifierError,
        task_value,
    )
    from envhub.sandbox import CommandResult, ShellLimits, ShellWorkspace, WorkspaceError
    from envhub.settings import Settings

#: name -> (module, attribute there), for the names imported on first use.
_WHERE: dict[str, tuple[str, str]] = {
    **{name: ("envhub.errors", name) for name in (
        "EnvhubError", "EnvNotFoundError", "IntegrityError", "PluginError", "PolicyError", "RegistryError",
        "UsageError", "VersionConflictError")},
    "OptionsModel": ("envhub.manifest", "OptionsModel"),
    **{name: ("envhub.registry", name) for name in ("FsspecRegistry", "PublishResult", "Registry", "VersionEntry")},
    **{name: ("envhub.runtime", name) for name in (
        "Executor", "Harness", "HarnessSetup", "Observation", "Reply", "RolloutJob", "RolloutPlan", "Score",
        "StateFactory", "StateHandle", "StepResult", "Task", "TaskHarness", "Trajectory", "run_rollout")},
    "Policy": ("envhub.runtime.policies", "Policy"),
    "PolicyOptions": ("envhub.runtime.policies", "PolicyOptions"),
    "VerifierFactory": ("envhub.runtime.verifiers", "Factory"),
    **{name: ("envhub.runtime.verifiers", name) for name in (
        "MissingFieldError", "Reference", "Verifier", "VerifierContext", "VerifierError", "task_value")},
    "Settings": ("envhub.settings", "Settings"),
    **{name: ("envhub.sandbox", name) for name in ("CommandResult", "ShellLimits", "ShellWorkspace",
                                                   "WorkspaceError")},
}

__all__ = [
    "CommandResult",
    "EnvNotFoundError",
    "EnvhubError",
    "EnvironmentPackage",
    "Executor",
    "ExecutorKind",
    "FsspecRegistry",
    "Harness",
    "HarnessProtocol",
    "HarnessSetup",
    "ImportOutcome",
    "ImporterKind",
    "IntegrityError",
    "MissingFieldError",
    "Observation",
    "OptionsModel",
    "PluginError",
    "Policy",
    "PolicyError",
    "PolicyKind",
    "PolicyOptions",
    "PublishResult",
    "Reference",
    "Registry",
    "RegistryBackend",
    "RegistryError",
    "Reply",
    "RolloutJob",
    "RolloutPlan",
    "Score",
    "Settings",
    "ShellLimits",
    "ShellWorkspace",
    "StateFactory",
    "StateHandle",
    "StateKind",
    "StepResult",
    "Task",
    "TaskHarness",
    "TaskFormat",
    "TaskGenerator",
    "Trajectory",
    "UsageError",
    "Verifier",
    "VerifierContext",
    "VerifierError",
    "VerifierFactory",
    "VerifierKind",
    "VersionConflictError",
    "VersionEntry",
    "WorkspaceBackend",
    "WorkspaceError",
    "hookimpl",
    "run_rollout",
    "task_value",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'envhub.plugin' has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value  # once is enough
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
