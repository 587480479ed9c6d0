"""The manifest, ``envhub.toml``: models, reading, writing and the JSON Schema."""

from __future__ import annotations

from typing import Any

from envhub.manifest._base import HOST_SCHEME, OCI_SCHEME, base_image, image_problem, split_base
from envhub.manifest._limits import MAX_BYTES, MAX_DEPTH, MAX_ELEMENTS, MAX_KEYS, MAX_STRING
from envhub.manifest._load import (
    MANIFEST_FILENAME,
    dump_manifest,
    load_manifest,
    parse_manifest,
    validate_manifest_data,
)
from envhub.manifest._local import LocalDependency, local_dependencies, local_dependency_problems
from envhub.manifest._locate import locate
from envhub.manifest._models import (
    BUILTIN_TOOLS,
    HARNESS_PROTOCOLS,
    MANIFEST_VERSION,
    STATE_KINDS,
    TASK_FORMATS,
    VERIFIER_KINDS,
    CodeTests,
    CodeTestsCriterion,
    ConfigSection,
    Curriculum,
    EnvironmentSection,
    ExactMatch,
    ExactMatchCriterion,
    HarnessSection,
    JsonMatch,
    JudgeVerdict,
    LlmJudge,
    LlmJudgeCriterion,
    Manifest,
    McpServer,
    Numeric,
    NumericCriterion,
    PythonCriterion,
    PythonVerifier,
    RegexCriterion,
    RegexMatch,
    Rubric,
    Sampling,
    SandboxLimits,
    SpecTool,
    Split,
    StateSection,
    TaskHarnessFields,
    TasksSection,
    WorkspaceTests,
    WorkspaceTestsCriterion,
)
from envhub.manifest._plugins import OptionsModel
from envhub.manifest._types import CANARY_PREFIX

__all__ = [
    "BUILTIN_TOOLS",
    "CANARY_PREFIX",
    "HARNESS_PROTOCOLS",
    "HOST_SCHEME",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "MAX_KEYS",
    "MAX_STRING",
    "OCI_SCHEME",
    "STATE_KINDS",
    "TASK_FORMATS",
    "CodeTests",
    "CodeTestsCriterion",
    "Curriculum",
    "ExactMatch",
    "ExactMatchCriterion",
    "JsonMatch",
    "JudgeVerdict",
    "LlmJudge",
    "LlmJudgeCriterion",
    "LocalDependency",
    "Numeric",
    "NumericCriterion",
    "PythonCriterion",
    "PythonVerifier",
    "RegexCriterion",
    "RegexMatch",
    "Rubric",
    "Sampling",
    "SandboxLimits",
    "WorkspaceTests",
    "WorkspaceTestsCriterion",
    "base_image",
    "image_problem",
    "local_dependencies",
    "local_dependency_problems",
    "locate",
    "MANIFEST_FILENAME",
    "MANIFEST_VERSION",
    "VERIFIER_KINDS",
    "ConfigSection",
    "EnvironmentSection",
    "HarnessSection",
    "Manifest",
    "McpServer",
    "OptionsModel",
    "Split",
    "SpecTool",
    "StateSection",
    "TaskHarnessFields",
    "TasksSection",
    "dump_manifest",
    "load_manifest",
    "manifest_json_schema",
    "parse_manifest",
    "split_base",
    "validate_manifest_data",
]


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of manifest v1, as checked in at spec/schema/manifest-v1.schema.json."""
    schema = Manifest.model_json_schema(by_alias=True, mode="validation")
    _close_pattern_objects(schema)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://envhub.dev/spec/schema/manifest-v1.schema.json",
        **schema,
    }


def _close_pattern_objects(node: Any) -> None:
    # pydantic renders dict[ConstrainedKey, V] as patternProperties but leaves other keys
    # open; the models refuse them, so the schema should too.
    if isinstance(node, dict):
        if "patternProperties" in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close_pattern_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_pattern_objects(value)
