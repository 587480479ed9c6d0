"""The envhub error hierarchy.

Every error envhub raises on purpose derives from :class:`EnvhubError`. Subclasses also
inherit the matching built-in where natural, so ``except LookupError`` keeps working.
Each class carries the CLI exit code it maps to; the CLI's single error boundary
(:mod:`envhub.cli`) prints the message and exits with that code.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envhub.problems import Problem

__all__ = [
    "BundleError",
    "CheckFailedError",
    "IntegrityError",
    "RegistryError",
    "VersionConflictError",
    "EnvNotFoundError",
    "EnvhubError",
    "ExitCode",
    "InvalidIdError",
    "ManifestError",
    "PluginConflictError",
    "PluginError",
    "TaskDataError",
    "PolicyError",
    "TrustError",
    "UsageError",
]


class ExitCode(IntEnum):
    """Process exit codes of the ``envhub`` command."""

    OK = 0
    #: A check ran and failed (``validate --strict`` warnings, conformance checks).
    CHECK_FAILED = 1
    #: The command line or an input (manifest, bundle, id, file) is invalid.
    USAGE_ERROR = 2
    #: A bug in envhub or an unexpected failure; set ``ENVHUB_DEBUG=1`` for a traceback.
    INTERNAL_ERROR = 3
    INTERRUPTED = 130


class EnvhubError(Exception):
    """Base class of every error envhub raises on purpose.

    ``message`` says what is wrong and where; ``hint`` says what to do next.
    """

    exit_code: ExitCode = ExitCode.USAGE_ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class UsageError(EnvhubError, ValueError):
    """A command or API was called with arguments that cannot work together."""


class InvalidIdError(EnvhubError, ValueError):
    """An environment id, version or specifier does not follow the id grammar."""


class EnvNotFoundError(EnvhubError, LookupError):
    """No environment (or no version of one) matches what was asked for."""


class _ProblemsError(EnvhubError):
    """An error that carries every problem found, not only the first."""

    def __init__(self, message: str, problems: Sequence[Problem], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems: list[Problem] = list(problems)

    def __str__(self) -> str:
        lines = [self.message]
        lines.extend(problem.render() for problem in self.problems)
        return "\n".join(lines)


class ManifestError(_ProblemsError, ValueError):
    """``envhub.toml`` cannot be read or does not follow the manifest spec."""


class BundleError(_ProblemsError, ValueError):
    """A bundle's files do not match its manifest (missing, unreadable or malformed files)."""


class TaskDataError(EnvhubError, ValueError):
    """A task's row does not hold what the manifest says a field of it holds (a turn limit
    that is not a number, a tool set naming tools the harness lacks). Found when the task's
    episode starts; ``envhub validate --check`` finds it for every task."""


class CheckFailedError(_ProblemsError):
    """A check ran and failed; the input itself was readable."""

    exit_code = ExitCode.CHECK_FAILED


class RegistryError(EnvhubError):
    """A registry cannot be opened, read or written."""


class VersionConflictError(RegistryError):
    """A version already exists with different content: versions are immutable."""


class IntegrityError(EnvhubError, ValueError):
    """Bytes do not match the digest they were published with."""


class TrustError(EnvhubError, PermissionError):
    """An environment needs to run its own code, and the user has not trusted it."""


class PolicyError(EnvhubError):
    """A policy cannot be built, or its endpoint failed after every retry."""


class PluginError(EnvhubError):
    """A plugin (or an installed environment package) cannot be used: it is broken, or it
    names something no plugin provides."""


class PluginConflictError(PluginError):
    """Two installed plugins provide the same name (a verifier kind, a URL scheme, ...)."""
