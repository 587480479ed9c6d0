"""What the Hugging Face Hub's errors mean for an envhub user, and what to do next.

``huggingface_hub`` raises its own classes (``RepositoryNotFoundError``, ``GatedRepoError``,
``HfHubHTTPError`` with a status, ``OfflineModeIsEnabled``) and ``httpx2`` raises transport
errors once the client's retries are spent. :func:`hub_error` turns each into the envhub
error a user can act on; anything else is left alone (a bug of ours stays a bug).
"""

from __future__ import annotations

from dataclasses import dataclass

from envhub.errors import EnvhubError, EnvNotFoundError, RegistryError

__all__ = ["HubContext", "hub_error", "status_of"]

LOGIN_HINT = "log in with 'hf auth login' or set HF_TOKEN"


@dataclass(frozen=True)
class HubContext:
    """Where an error happened: the registry URL, the Hub endpoint, the repo, the action,
    and whether a token was sent (the hints differ)."""

    url: str
    endpoint: str
    repo_id: str
    action: str
    logged_in: bool

    @property
    def where(self) -> str:
        return f"{self.url}: cannot {self.action}"

    @property
    def namespace(self) -> str:
        return self.repo_id.split("/")[0]


def status_of(e: BaseException) -> int | None:
    """The HTTP status of a Hub error, if it carries a response."""
    response = getattr(e, "response", None)
    return getattr(response, "status_code", None)


def hub_error(e: BaseException, ctx: HubContext) -> EnvhubError | None:
    """The envhub error for ``e``, or None if ``e`` is not a Hub or network error."""
    import httpx2
    from huggingface_hub import errors as hf

    if isinstance(e, hf.OfflineModeIsEnabled):
        return RegistryError(f"{ctx.where}: offline mode is on (HF_HUB_OFFLINE)",
                             hint="unset HF_HUB_OFFLINE, or pull an exact version that is already in the cache")
    if isinstance(e, hf.GatedRepoError):
        return RegistryError(f"{ctx.where}: {ctx.repo_id} is gated and your account has not been granted access",
                             hint=f"request access at {ctx.endpoint}/datasets/{ctx.repo_id}, then use a token of "
                                  f"that account ({LOGIN_HINT})")
    if isinstance(e, hf.RepositoryNotFoundError):
        hint = (f"check the name; if it is private, {LOGIN_HINT}" if not ctx.logged_in
                else f"check the name; if it is private, ask the owners of {ctx.namespace} for read access")
        return EnvNotFoundError(f"{ctx.where}: {ctx.repo_id} does not exist on {ctx.endpoint}, or is private",
                                hint=hint)
    if isinstance(e, hf.RevisionNotFoundError):
        return EnvNotFoundError(f"{ctx.where}: {ctx.repo_id} has no such revision",
                                hint="the tag or commit was removed from the Hub; pull another version")
    if isinstance(e, hf.HfHubHTTPError):
        status = status_of(e)
        if status == 401:
            if not ctx.logged_in:
                return RegistryError(f"{ctx.where}: you are not logged in to {ctx.endpoint}", hint=LOGIN_HINT)
            return RegistryError(f"{ctx.where}: the Hub at {ctx.endpoint} rejected your token",
                                 hint=f"{LOGIN_HINT} with a valid token")
        if status == 403:
            return RegistryError(f"{ctx.where}: permission denied on {ctx.repo_id}",
                                 hint=f"use a token with write access to {ctx.namespace} ({LOGIN_HINT})"
                                 if ctx.logged_in else LOGIN_HINT)
        if status == 409:
            return RegistryError(f"{ctx.where}: the Hub reported a conflict on {ctx.repo_id}",
                                 hint="someone else is pushing to it; try again")
        return RegistryError(f"{ctx.where}: the Hub at {ctx.endpoint} answered {status}",
                             hint="try again later; if it persists, check the Hub's status page")
    if isinstance(e, httpx2.TransportError):
        return RegistryError(f"{ctx.where}: cannot reach {ctx.endpoint} ({type(e).__name__}: {e})",
                             hint="check your network and HF_ENDPOINT, or use --offline")
    return None
