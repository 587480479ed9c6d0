"""The built-in verifiers: from a manifest's ``[verifier]`` table to a :class:`Verifier`.

``build_verifier(manifest.verifier, ctx)`` builds the verifier of an environment once;
``verifier.score(task, trajectory)`` (or ``await verifier.ascore(...)``) scores an episode.
docs/verifiers.md says exactly how each kind scores.
"""

from envhub.runtime.verifiers._base import MissingFieldError, Verifier, VerifierContext, VerifierError, task_value
from envhub.runtime.verifiers._build import Factory, build_verifier, default_factories, plugin_factories
from envhub.runtime.verifiers._code_tests import CodeTestsVerifier, extract_code
from envhub.runtime.verifiers._exact import ExactMatchVerifier, normalize
from envhub.runtime.verifiers._json import JsonMatchVerifier, parse_json_answer
from envhub.runtime.verifiers._numeric import NumericVerifier, extract_number
from envhub.runtime.verifiers._python import PythonEntryPointVerifier
from envhub.runtime.verifiers._regex import RegexVerifier
from envhub.runtime.verifiers._rubric import Criterion, RubricVerifier
from envhub.runtime.verifiers._sandbox import (
    SandboxLimits,
    SandboxResult,
    TestOutcome,
    arun_python_tests,
    run_python_tests,
)

__all__ = [
    "CodeTestsVerifier",
    "Criterion",
    "ExactMatchVerifier",
    "Factory",
    "JsonMatchVerifier",
    "MissingFieldError",
    "NumericVerifier",
    "PythonEntryPointVerifier",
    "RegexVerifier",
    "RubricVerifier",
    "SandboxLimits",
    "SandboxResult",
    "TestOutcome",
    "Verifier",
    "VerifierContext",
    "VerifierError",
    "arun_python_tests",
    "build_verifier",
    "default_factories",
    "extract_code",
    "extract_number",
    "normalize",
    "parse_json_answer",
    "plugin_factories",
    "run_python_tests",
    "task_value",
]
