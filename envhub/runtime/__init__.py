"""The runtime: load an environment, run episodes, score them, and roll out policies.

Names are imported on first use, so ``import envhub.runtime`` costs nothing until a name
is needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envhub.runtime._chat import ChatClient
    from envhub.runtime._check import GENERATED_CHECK_LIMIT, CheckResult, self_test
    from envhub.runtime._code import CodeSpace, code_entry_points, trusted_namespaces
    from envhub.runtime._composite import CompositeEnvironment
    from envhub.runtime._curriculum import Curriculum, Draw, LevelChange
    from envhub.runtime._environment import Environment
    from envhub.runtime._episode import EndedBy, Episode
    from envhub.runtime._eval import (
        CurriculumRun,
        CurriculumSummary,
        EvalResult,
        EvalRun,
        EvalSummary,
        Evaluation,
        SummaryEnvironment,
        SummaryTally,
        new_records_file,
        pass_at_k,
        plan_jobs,
        summarize,
    )
    from envhub.runtime._golden import check_recorded, compare
    from envhub.runtime._harness import (
        Harness,
        HarnessSetup,
        MultiTurnHarness,
        ProtocolHarness,
        SingleTurnHarness,
        TaskHarness,
        ToolUseHarness,
    )
    from envhub.runtime._processes import ProcessExecutor, WorkerError
    from envhub.runtime._protocols import EnvironmentProtocol, EpisodeProtocol, SplitInfo
    from envhub.runtime._records import (
        RECORD_VERSION,
        CurriculumInfo,
        ErrorKind,
        RolloutError,
        RolloutRecord,
        RolloutSampling,
        RolloutTiming,
        RolloutUsage,
        TaskOrigin,
        TurnTokens,
        dump_record,
        read_records,
        rollout_record_json_schema,
    )
    from envhub.runtime._remote import RemoteEnvironment, RemoteError, load_remote
    from envhub.runtime._runner import (
        Executor,
        LocalExecutor,
        RolloutJob,
        RolloutPlan,
        RolloutSource,
        make_executor,
        run_rollout,
    )
    from envhub.runtime._shadow import refuse_shadowing, shadowing_files
    from envhub.runtime._shell_tools import builtin_tools
    from envhub.runtime._spec_tools import SpecTool, load_spec_tools, make_spec_tool
    from envhub.runtime._state import StateFactory, StateHandle, files_state, python_state, sqlite_state
    from envhub.runtime._tasks import read_jsonl
    from envhub.runtime._tools import (
        EnvParams,
        EpisodeState,
        Params,
        State,
        ToolError,
        ToolLike,
        make_tool,
        unknown_tool,
    )
    from envhub.runtime._types import Observation, Reply, Score, StepResult, Task, Trajectory, as_assistant_message
    from envhub.runtime._workspace_state import SandboxSetupError, SandboxStateFactory, sandbox_state

_WHERE = {
    "Curriculum": "_curriculum", "Draw": "_curriculum", "LevelChange": "_curriculum",
    "Environment": "_environment", "Episode": "_episode", "EndedBy": "_episode",
    "Harness": "_harness", "HarnessSetup": "_harness", "TaskHarness": "_harness", "SingleTurnHarness": "_harness",
    "MultiTurnHarness": "_harness", "ToolUseHarness": "_harness", "ProtocolHarness": "_harness",
    "EnvironmentProtocol": "_protocols", "EpisodeProtocol": "_protocols", "SplitInfo": "_protocols",
    "CodeSpace": "_code", "code_entry_points": "_code", "trusted_namespaces": "_code",
    "Observation": "_types", "Reply": "_types", "Score": "_types", "StepResult": "_types", "Task": "_types",
    "Trajectory": "_types",
    # What plugins implement (docs/plugins.md): state kinds and rollout executors.
    "StateFactory": "_state", "StateHandle": "_state",
    "Executor": "_runner", "RolloutJob": "_runner", "RolloutPlan": "_runner", "run_rollout": "_runner",
    "LocalExecutor": "_runner", "make_executor": "_runner",
    "ProcessExecutor": "_processes", "RolloutSource": "_runner", "WorkerError": "_processes",
    "files_state": "_state", "python_state": "_state", "sqlite_state": "_state",
    "ChatClient": "_chat", "HttpClient": "_http",
    "CheckResult": "_check", "GENERATED_CHECK_LIMIT": "_check", "self_test": "_check",
    "CompositeEnvironment": "_composite",
    "CurriculumRun": "_eval", "CurriculumSummary": "_eval", "EvalResult": "_eval", "EvalRun": "_eval",
    "EvalSummary": "_eval", "Evaluation": "_eval", "SummaryEnvironment": "_eval", "SummaryTally": "_eval",
    "new_records_file": "_eval",
    "pass_at_k": "_eval", "plan_jobs": "_eval", "summarize": "_eval",
    "RECORD_VERSION": "_records", "CurriculumInfo": "_records", "ErrorKind": "_records", "RolloutError": "_records",
    "RolloutRecord": "_records", "RolloutTiming": "_records", "RolloutUsage": "_records", "TaskOrigin": "_records",
    "RolloutSampling": "_records", "TurnTokens": "_records",
    "dump_record": "_records", "read_records": "_records", "rollout_record_json_schema": "_records",
    "check_recorded": "_golden", "compare": "_golden",
    "RemoteEnvironment": "_remote", "RemoteError": "_remote", "load_remote": "_remote",
    "refuse_shadowing": "_shadow", "shadowing_files": "_shadow",
    "read_jsonl": "_tasks",
    "make_tool": "_tools", "unknown_tool": "_tools", "EpisodeState": "_tools", "State": "_tools",
    "EnvParams": "_tools", "Params": "_tools", "ToolError": "_tools", "ToolLike": "_tools",
    "SpecTool": "_spec_tools", "load_spec_tools": "_spec_tools", "make_spec_tool": "_spec_tools",
    "as_assistant_message": "_types",
    "SandboxSetupError": "_workspace_state", "SandboxStateFactory": "_workspace_state",
    "sandbox_state": "_workspace_state", "builtin_tools": "_shell_tools",
}
# Written out (not computed from _WHERE) so type checkers see the re-exports;
# tests/test_architecture.py checks that the two agree.
__all__ = [
    "ChatClient", "CheckResult", "CodeSpace", "CompositeEnvironment", "Curriculum", "CurriculumInfo",
    "CurriculumRun", "CurriculumSummary", "Draw", "EndedBy", "Environment", "EnvironmentProtocol", "Episode",
    "EpisodeProtocol",
    "EnvParams", "ErrorKind", "EvalResult",
    "EpisodeState", "EvalRun", "EvalSummary", "Evaluation", "Executor", "GENERATED_CHECK_LIMIT", "Harness",
    "HarnessSetup", "HttpClient", "LevelChange", "MultiTurnHarness", "ProtocolHarness", "SingleTurnHarness",
    "TaskHarness",
    "ToolUseHarness",
    "LocalExecutor", "ProcessExecutor", "RolloutSource", "WorkerError",
    "Observation", "RECORD_VERSION", "RemoteEnvironment", "RemoteError", "RolloutError", "RolloutJob",
    "Reply", "RolloutPlan", "RolloutRecord", "RolloutSampling", "RolloutTiming", "RolloutUsage", "SandboxSetupError",
    "TurnTokens",
    "SandboxStateFactory",
    "Params", "Score", "SpecTool", "SplitInfo", "State", "StateFactory", "ToolError", "ToolLike",
    "StateHandle", "StepResult", "SummaryEnvironment", "SummaryTally", "Task", "TaskOrigin", "Trajectory",
    "as_assistant_message", "builtin_tools", "check_recorded", "code_entry_points", "compare", "dump_record",
    "files_state", "load_remote", "load_spec_tools", "make_spec_tool", "make_executor", "make_tool",
    "new_records_file", "pass_at_k", "plan_jobs",
    "python_state", "read_jsonl", "read_records", "refuse_shadowing", "rollout_record_json_schema", "run_rollout",
    "sandbox_state", "self_test",
    "shadowing_files", "sqlite_state", "summarize", "trusted_namespaces", "unknown_tool"
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'envhub.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(f"envhub.runtime.{_WHERE[name]}"), name)
