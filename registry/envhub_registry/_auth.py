"""Bearer tokens: who may see held-out splits, and (if configured) anything at all."""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import Request

from envhub_registry._config import Access
from envhub_registry._errors import ApiError

__all__ = ["Auth"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="envhub"'}
_CLIENT_HINT = ("send the header 'Authorization: Bearer TOKEN' with a token the server's operator gave you "
                "(envhub's client sends ENVHUB_SERVE_TOKEN)")


class Auth:
    """Checks the ``Authorization: Bearer`` header against the configured tokens."""

    def __init__(self, access: Access) -> None:
        # Compared as SHA-256 digests: equal lengths, so compare_digest's time does not depend
        # on how much of a guess is right, nor on the length of the real token.
        self._digests = [hashlib.sha256(t.encode()).digest() for t in access.tokens]
        self.require_token = access.require_token

    @property
    def has_tokens(self) -> bool:
        return bool(self._digests)

    def check(self, request: Request, *, held_out: bool, what: str) -> None:
        """Allow the request to ``what`` (e.g. "split 'test' of acme/x"), or raise
        :class:`ApiError`: 401 without a valid token where one is needed or with a token
        that is not valid; 403 for a held-out split on a server that has no tokens."""
        token = _bearer(request)
        if token is not None and self._digests and not self._valid(token):
            raise ApiError(401, "token-invalid", "the bearer token is not one this server accepts",
                           hint="check the token (ENVHUB_SERVE_TOKEN for envhub's client)", headers=_CHALLENGE)
        if held_out:
            if not self._digests:
                raise ApiError(403, "heldout-disabled",
                               f"{what} is held out, and this server has no tokens configured, so it serves "
                               "held-out splits to no one",
                               hint="the server's operator can set ENVHUB_SERVE_TOKENS or [access] tokens in the "
                                    "--config file")
            if token is None:
                raise ApiError(401, "token-required", f"{what} is held out: a bearer token is required",
                               hint=_CLIENT_HINT, headers=_CHALLENGE)
        elif self.require_token and token is None:
            raise ApiError(401, "token-required", f"this server requires a bearer token for {what}",
                           hint=_CLIENT_HINT, headers=_CHALLENGE)

    def _valid(self, token: str) -> bool:
        digest = hashlib.sha256(token.encode()).digest()
        ok = False
        for known in self._digests:  # every one, without stopping early
            ok |= hmac.compare_digest(digest, known)
        return ok


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise ApiError(401, "token-invalid", "the Authorization header is not 'Bearer TOKEN'",
                       hint=_CLIENT_HINT, headers=_CHALLENGE)
    return value.strip()
