"""Building a verifier from its manifest spec, through one table of kinds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from envhub.runtime.verifiers._base import Verifier, VerifierContext, VerifierError

__all__ = ["Factory", "build_verifier", "default_factories"]

#: Makes the verifier of one spec: ``factory(spec, ctx, factories)``. ``factories`` is the
#: table the factory was found in, so a rubric builds its criteria with the same kinds.
Factory = Callable[[Any, VerifierContext, Mapping[str, "Factory"]], Verifier]


def _exact_match(spec: Any, ctx: VerifierContext, factories: Mapping[str, Factory]) -> Verifier:
    from envhub.runtime.verifiers._exact import ExactMatchVerifier

    return ExactMatchVerifier(spec)


def _numeric(spec: Any, ctx: VerifierContext, factories: Mapping[str, Factory]) -> Verifier:
    from envhub.runtime.verifiers._numeric import NumericVerifier

    return NumericVerifier(spec)


def _regex(spec: Any, ctx: VerifierContext, factories: Mapping[str, Factory]) -> Verifier:
    from envhub.runtime.verifiers._regex import RegexVerifier

    return RegexVerifier(spec)


def _json_match(spec: Any, ctx: VerifierContext, factories: Mapping[str, Factory]) -> Verifier:
    from envhub.runtime.verifiers._json import JsonMatchVerifier

    return JsonMatchVerifier(spec)


def _python(spec: Any, ctx: VerifierContext, factories: Mapping[str, Factory]) -> Verifier:
    from envhub.runtime.verifiers._python import PythonEntryPointVerifier

    return PythonEntryPointVerifier(spec, ctx)


def _code_tests(spec: Any, ctx: VerifierContext, factories: Mapping[str, Factory]) -> Verifier:
    from envhub.runtime.verifiers._code_tests import CodeTestsVerifier

    return CodeTestsVerifier(spec)


def _llm_judge(spec: Any, ctx: VerifierContext, factories: Mapping[str, Factory]) -> Verifier:
    # Imported here: the judge's HTTP client is only paid for by environments that use it.
    from envhub.runtime.verifiers._llm_judge import LlmJudgeVerifier

    return LlmJudgeVerifier(spec, ctx)


def _rubric(spec: Any, ctx: VerifierContext, factories: Mapping[str, Factory]) -> Verifier:
    from envhub.runtime.verifiers._rubric import RubricVerifier

    return RubricVerifier(spec, lambda criterion: build_verifier(criterion, ctx, factories=factories))


def default_factories() -> dict[str, Factory]:
    """A new table of the built-in verifier kinds (a fresh dict: callers may add to it)."""
    return {
        "exact-match": _exact_match,
        "numeric": _numeric,
        "regex": _regex,
        "json-match": _json_match,
        "python": _python,
        "code-tests": _code_tests,
        "rubric": _rubric,
        "llm-judge": _llm_judge,
    }


def build_verifier(spec: Any, ctx: VerifierContext, *, factories: Mapping[str, Factory] | None = None) -> Verifier:
    """The verifier for ``spec`` (a ``[verifier]`` model or a rubric criterion model).

    Raises :class:`VerifierError` for a kind with no factory, :class:`envhub.errors.TrustError`
    (from ``ctx.load_entry_point``) when the kind needs untrusted bundle code, and
    :class:`VerifierError` when the spec cannot make a working verifier.
    """
    table = default_factories() if factories is None else factories
    kind = getattr(spec, "kind", None)
    try:
        factory = table[kind]  # type: ignore[index]
    except KeyError:
        known = ", ".join(sorted(table))
        raise VerifierError(f"unknown verifier kind {kind!r}; known kinds: {known}") from None
    return factory(spec, ctx, table)
