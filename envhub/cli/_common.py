"""Options shared by the commands, and the command's :class:`~envhub.context.Context`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from envhub.context import Context

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


def app_context() -> Context:
    """The invocation's context: settings, plugins, registry configuration and project,
    made once per ``envhub`` invocation, the first time a command asks (so ``--help`` does
    not read them), and passed down from here. The one place the CLI makes one."""
    from envhub.context import Context

    obj = click.get_current_context().find_root().ensure_object(dict)
    if "context" not in obj:
        obj["context"] = Context.create()
    context: Context = obj["context"]
    return context
