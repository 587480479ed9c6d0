"""The sandbox: the one way envhub runs code it does not trust.

Candidate code that a verifier scores runs here, and so does test code that came with a task.
Each run is a new interpreter locked into its own user, PID, mount, network and IPC
namespaces, with a private read-only view of only what it needs, no capabilities, Landlock
and resource limits (``docs/verifiers.md`` lists every guarantee, and what is not covered).
Guests talk to the caller in JSON lines; values cross as data (:mod:`envhub.sandbox.codec`).
"""

from envhub.sandbox._sandbox import (
    WORKSPACE,
    Guest,
    Limits,
    Outcome,
    Probe,
    Sandbox,
    SandboxUnavailableError,
    Session,
    aprobe,
    probe,
)
from envhub.sandbox._shell import (
    CommandResult,
    ShellLimits,
    ShellWorkspace,
    WorkspaceError,
    remove_stale_workspaces,
)

__all__ = ["WORKSPACE", "CommandResult", "Guest", "Limits", "Outcome", "Probe", "Sandbox", "SandboxUnavailableError",
           "Session", "ShellLimits", "ShellWorkspace", "WorkspaceError", "aprobe", "probe", "remove_stale_workspaces"]
