"""envhub's configuration from the environment, read in this one module.

:func:`load_settings` reads the ``ENVHUB_*`` variables when a command starts; the resulting
:class:`Settings` is passed to what needs it, never read again from ``os.environ`` elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from envhub.errors import UsageError

__all__ = ["Settings", "load_settings"]

_DEFAULT_MAX_BUNDLE_BYTES = 20 * 1024**3


@dataclass(frozen=True)
class Settings:
    #: ``ENVHUB_HOME``: the embedded registry, the held-out store and the config file.
    home: Path
    #: ``ENVHUB_CACHE``: pulled bundles, content-addressed.
    cache: Path
    #: ``ENVHUB_REGISTRY``: a registry URL or name used when no ``--registry`` is given.
    registry: str | None = None
    #: ``ENVHUB_HELDOUT_STORE``: where held-out archives go (default: under ``home``).
    heldout_store: str | None = None
    #: ``ENVHUB_OFFLINE``: use the cache only.
    offline: bool = False
    #: ``ENVHUB_MAX_BUNDLE_BYTES``: largest bundle that is extracted.
    max_bundle_bytes: int = _DEFAULT_MAX_BUNDLE_BYTES
    #: ``HF_TOKEN``: the Hugging Face token for ``hf://`` registries (None: the
    #: ``huggingface_hub`` login, ``hf auth login``).
    hf_token: str | None = field(default=None, repr=False)
    #: ``HF_ENDPOINT``: the Hub's URL for ``hf://`` registries that do not name one.
    hf_endpoint: str = "https://huggingface.co"
    #: ``OPENAI_BASE_URL``: the endpoint of ``openai:MODEL`` policies when no ``--base-url`` is given.
    openai_base_url: str | None = None
    #: ``OPENAI_API_KEY``: the key of ``openai:MODEL`` policies when none is given.
    openai_api_key: str | None = field(default=None, repr=False)
    #: ``ENVHUB_SERVE_TOKEN``: the bearer token the client of ``http://`` environments sends
    #: to an ``envhub serve`` server (held-out splits need one).
    serve_token: str | None = field(default=None, repr=False)
    #: ``ENVHUB_SERVE_TOKENS``: comma-separated bearer tokens an ``envhub serve`` server accepts.
    serve_tokens: tuple[str, ...] = field(default=(), repr=False)
    #: The environment the settings were read from, for :meth:`secret` (names chosen by manifests).
    environ: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def secret(self, name: str) -> str | None:
        """The value of the environment variable ``name`` (an API key a manifest names, such
        as an llm-judge's ``api-key-env``), or None when it is unset or empty."""
        return self.environ.get(name) or None

    @property
    def default_registry(self) -> str:
        """The embedded registry: a directory under ``home`` that needs no set-up."""
        return (self.home / "registry").as_uri()

    @property
    def default_heldout_store(self) -> str:
        return (self.home / "heldout").as_uri()

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``environ`` (default: the process environment)."""
    env = os.environ if environ is None else environ
    if env.get("ENVHUB_HOME"):
        home = Path(env["ENVHUB_HOME"]).expanduser()
    else:
        import platformdirs

        home = Path(platformdirs.user_data_dir("envhub", appauthor=False))
    if env.get("ENVHUB_CACHE"):
        cache = Path(env["ENVHUB_CACHE"]).expanduser()
    else:
        import platformdirs

        cache = Path(platformdirs.user_cache_dir("envhub", appauthor=False))
    max_bytes = env.get("ENVHUB_MAX_BUNDLE_BYTES")
    try:
        max_bundle_bytes = int(max_bytes) if max_bytes else _DEFAULT_MAX_BUNDLE_BYTES
    except ValueError:
        raise UsageError(f"ENVHUB_MAX_BUNDLE_BYTES={max_bytes!r} is not an integer",
                         hint="set it to a number of bytes, e.g. 21474836480") from None
    return Settings(
        home=home,
        cache=cache,
        registry=env.get("ENVHUB_REGISTRY") or None,
        heldout_store=env.get("ENVHUB_HELDOUT_STORE") or None,
        offline=_flag(env.get("ENVHUB_OFFLINE")) or _flag(env.get("HF_HUB_OFFLINE")),
        max_bundle_bytes=max_bundle_bytes,
        hf_token=env.get("HF_TOKEN") or None,
        hf_endpoint=(env.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/"),
        openai_base_url=env.get("OPENAI_BASE_URL") or None,
        openai_api_key=env.get("OPENAI_API_KEY") or None,
        serve_token=(env.get("ENVHUB_SERVE_TOKEN") or "").strip() or None,
        serve_tokens=tuple(t.strip() for t in (env.get("ENVHUB_SERVE_TOKENS") or "").split(",") if t.strip()),
        environ=dict(env),
    )
