"""Options shared by the registry commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def registry_option(f: F) -> F:
    return click.option(
        "--registry", "registry", metavar="URL|NAME", envvar="ENVHUB_REGISTRY", show_envvar=True,
        help="Registry URL or configured name (default: the embedded local registry).",
    )(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")(f)


def offline_option(f: F) -> F:
    return click.option("--offline", is_flag=True, envvar="ENVHUB_OFFLINE", show_envvar=True,
                        help="Use the cache only; never contact a registry.")(f)


def registry_context(choice: str | None):  # type: ignore[no-untyped-def]
    """(settings, registry config, registry URL) for a command."""
    from envhub.registry import load_registry_config
    from envhub.settings import load_settings

    settings = load_settings()
    config = load_registry_config(settings)
    return settings, config, config.url(choice)
