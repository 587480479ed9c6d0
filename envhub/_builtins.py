"""envhub's own kinds, registered on every :class:`~envhub.plugins.PluginManager` through
the same hooks as third-party plugins, so the plugin path is always the path taken.

Each factory imports what it builds when it is called: listing the built-in kinds (or
looking one up) imports nothing but this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envhub.hookspecs import (
    EnvironmentPackage,
    ExecutorKind,
    HarnessProtocol,
    ImporterKind,
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
    from envhub.plugins import PluginManager
    from envhub.registry import Registry
    from envhub.runtime import Executor, StateFactory
    from envhub.runtime.policies import Policy, PolicyOptions
    from envhub.runtime.verifiers import Verifier, VerifierContext
    from envhub.sandbox import ShellLimits, ShellWorkspace
    from envhub.settings import Settings

__all__ = ["Builtins"]

Factories = Mapping[str, Callable[..., Any]]


# --- verifier kinds -------------------------------------------------------------------------


def _exact_match(spec: Any, ctx: VerifierContext, factories: Factories) -> Verifier:
    from envhub.runtime.verifiers import ExactMatchVerifier

    return ExactMatchVerifier(spec)


def _numeric(spec: Any, ctx: VerifierContext, factories: Factories) -> Verifier:
    from envhub.runtime.verifiers import NumericVerifier

    return NumericVerifier(spec)


def _regex(spec: Any, ctx: VerifierContext, factories: Factories) -> Verifier:
    from envhub.runtime.verifiers import RegexVerifier

    return RegexVerifier(spec)


def _json_match(spec: Any, ctx: VerifierContext, factories: Factories) -> Verifier:
    from envhub.runtime.verifiers import JsonMatchVerifier

    return JsonMatchVerifier(spec)


def _python(spec: Any, ctx: VerifierContext, factories: Factories) -> Verifier:
    from envhub.runtime.verifiers import PythonEntryPointVerifier

    return PythonEntryPointVerifier(spec, ctx)


def _code_tests(spec: Any, ctx: VerifierContext, factories: Factories) -> Verifier:
    from envhub.runtime.verifiers import CodeTestsVerifier

    return CodeTestsVerifier(spec)


def _llm_judge(spec: Any, ctx: VerifierContext, factories: Factories) -> Verifier:
    # Imported here: the judge's HTTP client is only paid for by environments that use it.
    from envhub.runtime.verifiers import LlmJudgeVerifier

    return LlmJudgeVerifier(spec, ctx)


def _rubric(spec: Any, ctx: VerifierContext, factories: Factories) -> Verifier:
    from envhub.runtime.verifiers import RubricVerifier, build_verifier

    return RubricVerifier(spec, lambda criterion: build_verifier(criterion, ctx, factories=factories))


def _workspace_tests(spec: Any, ctx: VerifierContext, factories: Factories) -> Verifier:
    from envhub.runtime.verifiers import WorkspaceTestsVerifier

    return WorkspaceTestsVerifier(spec, ctx)


VERIFIER_KINDS = (
    VerifierKind("exact-match", _exact_match, description="the completion equals a task field"),
    VerifierKind("numeric", _numeric, description="a number within tolerance of a task field"),
    VerifierKind("regex", _regex, description="the completion matches a pattern"),
    VerifierKind("json-match", _json_match, description="JSON equal to (or a superset of) a task field"),
    VerifierKind("python", _python, description="a function of the bundle's code (needs trust)"),
    VerifierKind("code-tests", _code_tests, description="the task's tests pass in a sandbox"),
    VerifierKind("rubric", _rubric, description="weighted criteria, each a verifier"),
    VerifierKind("llm-judge", _llm_judge, description="a pinned judge model grades"),
    VerifierKind("workspace-tests", _workspace_tests,
                 description="the task's tests run against a sandbox episode's final workspace"),
)


# --- harness protocols ------------------------------------------------------------------------


def _harness_protocols() -> tuple[HarnessProtocol, ...]:
    from envhub.runtime import MultiTurnHarness, SingleTurnHarness, ToolUseHarness

    return (
        HarnessProtocol("single-turn", harness=SingleTurnHarness, description="one model turn, then scoring"),
        HarnessProtocol("multi-turn", harness=MultiTurnHarness,
                        description="the bundle's responder answers each turn, or ends the episode"),
        HarnessProtocol("tool-use", harness=ToolUseHarness,
                        description="tool calls run until a turn makes none; that turn goes to the responder, "
                                    "if any"),
    )


# --- state kinds --------------------------------------------------------------------------------


def _no_state(spec: Any, root: Path, load_entry_point: Callable[[str], Any]) -> StateFactory:
    from envhub.runtime import StateFactory

    return StateFactory()


def _files_state(spec: Any, root: Path, load_entry_point: Callable[[str], Any]) -> StateFactory:
    from envhub.runtime import files_state

    return files_state(spec, root)


def _sqlite_state(spec: Any, root: Path, load_entry_point: Callable[[str], Any]) -> StateFactory:
    from envhub.runtime import sqlite_state

    return sqlite_state(spec, root)


def _python_state(spec: Any, root: Path, load_entry_point: Callable[[str], Any],
                  params: Mapping[str, Any] | None = None) -> StateFactory:
    from envhub.runtime import python_state

    return python_state(spec, load_entry_point, params=params)


def _sandbox_kind(manager: PluginManager) -> StateKind:
    """State kind ``sandbox``, whose workspaces run on the backend of ``manager`` that serves
    the scheme of ``[state] base`` (envhub's own sandbox for the host's system and archives)."""

    def factory(spec: Any, root: Path, load_entry_point: Callable[[str], Any]) -> StateFactory:
        from envhub.runtime import sandbox_state

        return sandbox_state(spec, root, plugins=manager)

    return StateKind("sandbox", factory, description="a shell workspace in a sandbox per episode")


STATE_KINDS = (
    StateKind("none", _no_state, description="no state"),
    StateKind("files", _files_state, description="a copy of a directory per reset"),
    StateKind("sqlite", _sqlite_state, description="a copy of an SQLite database per reset"),
    StateKind("python", _python_state, description="an object of the bundle's code (needs trust)"),
)


# --- task formats ---------------------------------------------------------------------------------


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    from envhub.runtime import read_jsonl

    return read_jsonl(path)


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    from envhub.tasks import read_parquet

    return read_parquet(path)


TASK_FORMATS = (
    TaskFormat("jsonl", _read_jsonl, description="one JSON object per line"),
    TaskFormat("parquet", _read_parquet, description="a Parquet table (needs envhub-rl[parquet])"),
    TaskFormat("generator", None, description="tasks made from seeds by a generator"),
    TaskFormat("mixture", None, description="a weighted mixture of dependencies' splits"),
)


# --- registry backends ------------------------------------------------------------------------------


def _fsspec_registry(url: str, settings: Settings) -> Registry:
    from envhub.registry import FsspecRegistry

    return FsspecRegistry(url)


def _hf_registry(url: str, settings: Settings) -> Registry:
    from envhub.registry import HfRegistry

    return HfRegistry(url, settings)


REGISTRY_BACKENDS = (
    RegistryBackend("file", _fsspec_registry, description="a directory (also a plain path)"),
    RegistryBackend("memory", _fsspec_registry, description="fsspec's in-memory filesystem"),
    RegistryBackend("s3", _fsspec_registry, description="S3 through s3fs (envhub-rl[s3])"),
    RegistryBackend("hf", _hf_registry, description="the Hugging Face Hub"),
)


# --- policies ---------------------------------------------------------------------------------------


def _reference(argument: str, options: PolicyOptions) -> Policy:
    from envhub.runtime.policies import ReferencePolicy

    return ReferencePolicy()


def _noop(argument: str, options: PolicyOptions) -> Policy:
    from envhub.runtime.policies import NoopPolicy

    return NoopPolicy()


def _openai(argument: str, options: PolicyOptions) -> Policy:
    from envhub.runtime.policies import openai_policy

    return openai_policy(argument, options)


def _python_policy(argument: str, options: PolicyOptions) -> Policy:
    from envhub.runtime.policies import load_python_policy

    return load_python_policy(argument)


POLICIES = (
    PolicyKind("reference", _reference, description="replays each task's reference solution"),
    PolicyKind("noop", _noop, description="always an empty answer"),
    PolicyKind("openai", _openai, takes_argument=True, forms=("openai:MODEL",),
               description="a model behind an OpenAI-compatible endpoint"),
    PolicyKind("python", _python_policy, takes_argument=True,
               forms=("python:module:func", "python:path/to/file.py:func"), description="a function of your own"),
)


# --- executors ----------------------------------------------------------------------------------------


def _local_executor() -> Executor:
    from envhub.runtime import LocalExecutor

    return LocalExecutor()


def _processes_executor() -> Executor:
    from envhub.runtime import ProcessExecutor

    return ProcessExecutor()


EXECUTORS = (ExecutorKind("local", _local_executor, description="asyncio tasks in this process"),
             ExecutorKind("processes", _processes_executor,
                          description="worker processes on this machine, each with its own event loop (-j N)"))


# --- workspace backends ------------------------------------------------------------------------------


async def _host_workspace(*, seed: Path, limits: ShellLimits, mounts: Mapping[str, Path] | None = None,
                          base: str = "") -> ShellWorkspace:
    from envhub.sandbox import ShellWorkspace

    options: dict[str, Any] = {"mounts": dict(mounts)} if mounts else {}
    if base:
        options["base"] = Path(base)
    return await ShellWorkspace.start(seed=seed, limits=limits, **options)


WORKSPACE_BACKENDS = (
    WorkspaceBackend("host", _host_workspace,
                     description="envhub's sandbox on the host's read-only system, or a root filesystem archive"),
)


# --- importers ---------------------------------------------------------------------------------------


_NAME_OPTIONS = {"name": "the bundle's NAMESPACE/NAME [default: imported/<SOURCE's name>]",
                 "split": "the split the tasks go into [default: test]"}
IMPORTERS = (
    ImporterKind("terminal-bench", "envhub.importers:run_terminal_bench",
                 description="Terminal-Bench or Harbor task directories: a sandbox bundle with workspace tests",
                 options={**_NAME_OPTIONS, "network": "true: share the host's network with every episode"}),
    ImporterKind("openenv", "envhub.importers:run_openenv",
                 description="an OpenEnv environment package: its Environment class runs in the episode",
                 options={**_NAME_OPTIONS, "seeds": "how many tasks (reset seeds 0, 1, ...) [default: 10]",
                          "reward": "the final reward: sum (of the step rewards) or last [default: sum]",
                          "max-turns": "the episode's turn limit [default: 20]"}),
    ImporterKind("inspect", "envhub.importers:run_inspect",
                 description="an inspect_ai task (file.py@task): samples as tasks, its built-in scorer as the verifier",
                 options={**_NAME_OPTIONS, "judge-model": "the pinned judge of a model-graded scorer that names none"}),
    ImporterKind("verifiers", "envhub.importers:run_verifiers",
                 description="a verifiers (v1) environment package: its tasks as rows, its rewards as the verifier",
                 options={**_NAME_OPTIONS, "limit": "import the first N tasks only [default: all]",
                          "judge-model": "the pinned model of a reference judge [default: the judge's own]"}),
)


# --- the plugin -------------------------------------------------------------------------------------


class Builtins:
    """The built-in plugin. An instance per manager: installed environments are read from
    that manager's one scan of the installed entry points."""

    def __init__(self, manager: PluginManager) -> None:
        self._manager = manager

    @hookimpl
    def envhub_verifier_kinds(self) -> list[VerifierKind]:
        return list(VERIFIER_KINDS)

    @hookimpl
    def envhub_harness_protocols(self) -> list[HarnessProtocol]:
        return list(_harness_protocols())

    @hookimpl
    def envhub_state_kinds(self) -> list[StateKind]:
        return [*STATE_KINDS, _sandbox_kind(self._manager)]

    @hookimpl
    def envhub_task_formats(self) -> list[TaskFormat]:
        return list(TASK_FORMATS)

    @hookimpl
    def envhub_task_generators(self) -> list[TaskGenerator]:
        return []  # generators are the bundle's own code, or a plugin's

    @hookimpl
    def envhub_registry_backends(self) -> list[RegistryBackend]:
        return list(REGISTRY_BACKENDS)

    @hookimpl
    def envhub_policies(self) -> list[PolicyKind]:
        return list(POLICIES)

    @hookimpl
    def envhub_executors(self) -> list[ExecutorKind]:
        return list(EXECUTORS)

    @hookimpl
    def envhub_workspace_backends(self) -> list[WorkspaceBackend]:
        return list(WORKSPACE_BACKENDS)

    @hookimpl
    def envhub_importers(self) -> list[ImporterKind]:
        return list(IMPORTERS)

    @hookimpl
    def envhub_environments(self) -> list[EnvironmentPackage]:
        from envhub._packages import packages_from_entry_points
        from envhub.plugins import ENVIRONMENTS_GROUP

        return list(_sorted(packages_from_entry_points(self._manager.entry_points(ENVIRONMENTS_GROUP))))


def _sorted(packages: Iterator[EnvironmentPackage]) -> list[EnvironmentPackage]:
    return sorted(packages, key=lambda p: (p.name, p.distribution or ""))
