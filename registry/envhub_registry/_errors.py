"""Errors as the protocol sends them: a status, a stable ``code``, a message and a hint.

Every error response has the body ``{"error": {"status", "code", "message", "hint"}}``
(spec/serve.md). Errors envhub raises are mapped once, here; anything else is a 500 whose
body says only that the server failed (the traceback goes to the server's log, never to the
client: an exception's text can quote a held-out answer).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from envhub.errors import EnvhubError, EnvNotFoundError, TrustError
from envhub.runtime.served import ErrorBody

__all__ = ["ApiError", "JSONResponse", "error_response", "from_envhub_error"]


class JSONResponse(Response):
    """JSON through orjson: several times faster than the standard library's encoder, which
    matters on the step path (every observation carries the whole conversation)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class ApiError(Exception):
    """An error to answer with ``status`` and a JSON body."""

    def __init__(self, status: int, code: str, message: str, *, hint: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        return error_response(self.status, self.code, self.message, hint=self.hint, headers=self.headers)


def error_response(status: int, code: str, message: str, *, hint: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(ErrorBody(status, code, message, hint).to_json(), status_code=status, headers=headers)


def from_envhub_error(e: EnvhubError) -> ApiError:
    """The API error for an error envhub raised while serving a request."""
    if isinstance(e, EnvNotFoundError):
        return ApiError(404, "not-found", e.message, hint=e.hint or _NOT_FOUND_HINT)
    if isinstance(e, TrustError):
        return ApiError(403, "not-trusted", e.message,
                        hint="start the server with --trust to run the environment's code")
    return ApiError(400, "bad-request", e.message, hint=e.hint or "see spec/serve.md for what each request takes")


_NOT_FOUND_HINT = ("GET /v1/environments lists the environments and their splits; "
                   "GET /v1/environments/NAMESPACE/NAME/splits/SPLIT/tasks lists a split's task ids")
