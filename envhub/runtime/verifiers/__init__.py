"""The built-in verifiers: from a manifest's ``[verifier]`` table to a :class:`Verifier`.

``build_verifier(manifest.verifier, ctx)`` builds the verifier of an environment once;
``verifier.score(task, trajectory)`` (or ``await verifier.ascore(...)``) scores an episode.
docs/verifiers.md says exactly how each kind scores.
"""

from typing import TYPE_CHECKING, Any

from envhub.runtime.verifiers._base import (
    MissingFieldError,
    ScoringContext,
    Verifier,
    VerifierContext,
    VerifierError,
    ascore_with,
    score_with,
    task_value,
)
from envhub.runtime.verifiers._build import Factory, build_verifier, default_factories, plugin_factories
from envhub.runtime.verifiers._code_tests import (
    CallCase,
    CodeTestsVerifier,
    IoCase,
    TestOutcome,
    TestsResult,
    extract_code,
    parse_tests,
    plan_tests,
    run_tests,
)
from envhub.runtime.verifiers._exact import ExactMatchVerifier, normalize
from envhub.runtime.verifiers._json import JsonMatchVerifier, parse_json_answer
from envhub.runtime.verifiers._numeric import NumericVerifier, extract_number
from envhub.runtime.verifiers._python import PythonEntryPointVerifier
from envhub.runtime.verifiers._reference import Reference, reference_messages, spec_reference
from envhub.runtime.verifiers._regex import RegexVerifier
from envhub.runtime.verifiers._rubric import Criterion, RubricVerifier
from envhub.runtime.verifiers._workspace_tests import (
    JUNIT_PATH,
    TestReport,
    WorkspaceTestsVerifier,
    parse_junit,
    parse_test_output,
)

if TYPE_CHECKING:
    from envhub.runtime.verifiers._llm_judge import DEFAULT_RUBRIC, LlmJudgeVerifier, parse_verdict

__all__ = [
    "DEFAULT_RUBRIC",
    "JUNIT_PATH",
    "TestReport",
    "WorkspaceTestsVerifier",
    "parse_junit",
    "parse_test_output",
    "LlmJudgeVerifier",
    "parse_verdict",
    "CallCase",
    "CodeTestsVerifier",
    "Criterion",
    "ExactMatchVerifier",
    "IoCase",
    "Factory",
    "JsonMatchVerifier",
    "MissingFieldError",
    "NumericVerifier",
    "PythonEntryPointVerifier",
    "Reference",
    "RegexVerifier",
    "RubricVerifier",
    "ScoringContext",
    "ascore_with",
    "score_with",
    "TestOutcome",
    "TestsResult",
    "Verifier",
    "VerifierContext",
    "VerifierError",
    "build_verifier",
    "default_factories",
    "extract_code",
    "extract_number",
    "normalize",
    "parse_json_answer",
    "plugin_factories",
    "reference_messages",
    "spec_reference",
    "parse_tests",
    "plan_tests",
    "run_tests",
    "task_value",
]


# The llm-judge imports the HTTP client: on first use only.
_LAZY = {"DEFAULT_RUBRIC", "LlmJudgeVerifier", "parse_verdict"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'envhub.runtime.verifiers' has no attribute {name!r}")
    from envhub.runtime.verifiers import _llm_judge

    return getattr(_llm_judge, name)
