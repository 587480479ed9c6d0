"""The server's configuration: a TOML file (``envhub serve --config FILE``), environment
variables read through :mod:`envhub.settings`, and command-line flags, in rising precedence.

```toml
environments = ["acme/sql-shop@1.2.0", "./my-env"]   # served besides those on the command line
host = "127.0.0.1"
port = 8000
trust = false
workers = 1              # worker processes; an episode stays in the one that created it
ors-at-root = false      # also serve the Open Reward Standard's routes at / (they are always at /ors)

[access]
tokens = ["..."]         # bearer tokens; held-out splits are served only to a request bearing one
require-token = false    # true: every call but /v1/health needs a token

[limits]
max-episodes = 1024      # episodes open at once; past it, creating one is answered 429
idle-timeout-s = 600     # an episode with no request for this long is closed and freed
episode-timeout-s = 3600 # wall-clock limit of one episode, from its creation
max-body-bytes = 1048576 # larger request bodies are answered 413
```
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from envhub.errors import UsageError
from envhub.settings import Settings

__all__ = ["DEFAULT_PORT", "Access", "Limits", "ServeConfig", "load_config", "MIN_TOKEN_CHARS"]

DEFAULT_PORT = 8000
#: Shorter tokens are refused: a bearer token is a password that never expires.
MIN_TOKEN_CHARS = 16
_TOKEN_HINT = 'make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True,
                              alias_generator=lambda name: name.replace("_", "-"))


class Access(_Model):
    #: Bearer tokens the server accepts. Held-out splits are refused to requests without one.
    tokens: tuple[str, ...] = ()
    #: Whether calls on public splits (listing included) need a token too.
    require_token: bool = False

    @field_validator("tokens")
    @classmethod
    def _long_enough(cls, tokens: tuple[str, ...]) -> tuple[str, ...]:
        for i, token in enumerate(tokens):
            if len(token) < MIN_TOKEN_CHARS or token != token.strip():
                raise ValueError(f"token {i + 1} is shorter than {MIN_TOKEN_CHARS} characters or has "
                                 f"surrounding spaces; {_TOKEN_HINT}")
        return tokens


class Limits(_Model):
    max_episodes: int = Field(1024, ge=1)
    idle_timeout_s: float = Field(600.0, gt=0)
    episode_timeout_s: float = Field(3600.0, gt=0)
    max_body_bytes: int = Field(1024 * 1024, ge=256)


class ServeConfig(_Model):
    """Everything ``envhub serve`` needs besides the environments themselves."""

    environments: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    trust: bool = False
    #: Worker processes sharing the port (docs/serve.md, "Worker processes").
    workers: int = Field(1, ge=1, le=64)
    #: Whether the ORS routes are also served at the root, where the OpenReward SDK looks.
    ors_at_root: bool = False
    access: Access = Access()
    limits: Limits = Limits()

    def check(self) -> None:
        """Raise :class:`UsageError` for settings that cannot work together."""
        if self.access.require_token and not self.access.tokens:
            raise UsageError("require-token is set but no token is configured, so every request would be refused",
                             hint="set ENVHUB_SERVE_TOKENS or [access] tokens in the --config file; " + _TOKEN_HINT)

    def with_overrides(self, **values: Any) -> ServeConfig:
        """A copy with the values given (``None`` means "not given"), checked again.
        Keys are ``host``, ``port``, ``trust``, ``workers``, ``ors_at_root``,
        ``require_token``, ``tokens`` and the :class:`Limits` field names."""
        values = {k: v for k, v in values.items() if v is not None}
        data = self.model_dump()
        for key in ("host", "port", "trust", "workers", "ors_at_root"):
            if key in values:
                data[key] = values.pop(key)
        if "require_token" in values:
            data["access"]["require_token"] = values.pop("require_token")
        if "tokens" in values:
            data["access"]["tokens"] = tuple(dict.fromkeys([*data["access"]["tokens"], *values.pop("tokens")]))
        data["limits"].update(values)
        return _validate(data, "the command line")


def load_config(path: Path | None, settings: Settings) -> ServeConfig:
    """The configuration in ``path`` (none: the defaults), plus the tokens of
    ``ENVHUB_SERVE_TOKENS``. Raises :class:`UsageError` naming every invalid key."""
    data: dict[str, Any] = {}
    where = "the defaults"
    if path is not None:
        where = str(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UsageError(f"{path}: no such configuration file",
                             hint="pass the path of a TOML file (see docs/serve.md), or leave --config out") from None
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"{path}: cannot read the configuration: {e}") from None
        except tomllib.TOMLDecodeError as e:
            raise UsageError(f"{path}: not valid TOML: {e}", hint="fix the file; see docs/serve.md") from None
        except RecursionError:  # the parser is recursive: arrays nested thousands deep
            raise UsageError(f"{path}: not valid TOML: arrays or tables nested too deep",
                             hint="fix the file; see docs/serve.md") from None
    config = _validate(data, where)
    if settings.serve_tokens:
        config = config.with_overrides(tokens=settings.serve_tokens)
    return config


def _validate(data: Mapping[str, Any], where: str) -> ServeConfig:
    try:
        return ServeConfig.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{_loc(err['loc'])}: {_msg(err)}" for err in e.errors())
        raise UsageError(f"invalid serve configuration in {where}: {problems}",
                         hint="see the keys and their types in docs/serve.md") from None


def _loc(loc: Sequence[Any]) -> str:
    parts: list[str] = []
    for part in loc:
        parts.append(f"[{part}]" if isinstance(part, int) else ("." if parts else "") + str(part))
    return "".join(parts) or "(top level)"


def _msg(err: Mapping[str, Any]) -> str:
    message = str(err["msg"])
    # pydantic's wording for our own validators starts "Value error, "
    return message.removeprefix("Value error, ")
