"""``envhub pull``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from envhub.cli._common import json_option, offline_option, registry_option

if TYPE_CHECKING:
    from envhub.context import Context
    from envhub.hub import PullResult

__all__ = ["pull", "with_current_yank"]


@click.command()
@click.argument("ref")
@registry_option
@click.option("--with-heldout", is_flag=True,
              help="Also fetch the held-out splits (needs access to the held-out store).")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path),
              help="Also copy the bundle into this new directory.")
@offline_option
@json_option
def pull(ref: str, registry: str | None, with_heldout: bool, out_dir: Path | None, offline: bool,
         as_json: bool) -> None:
    """Fetch REF (acme/env, acme/env@1.2.0, 'acme/env>=1.2,<2') into the cache.

    Picks the highest version that matches and is not yanked (an exact pin of a yanked
    version works, with a warning), verifies every byte against its digest, and extracts
    it into the content-addressed cache. Prints the bundle's directory.
    """
    from envhub.cli._common import app_context
    from envhub.hub import materialize
    from envhub.hub import pull as do_pull

    ctx = app_context()
    url = ctx.registry_url(registry)
    offline = offline or ctx.settings.offline
    result = do_pull(ref, url, ctx.settings, with_heldout=with_heldout, heldout_url=ctx.registry_config.heldout_url(),
                     offline=offline, plugins=ctx.plugins)
    if result.cached and not offline:  # a cached exact pin was served without reading the index
        result = with_current_yank(result, ref, url, ctx)
    if result.warning:
        click.echo(f"envhub: warning: {result.warning}", err=True)
    where = materialize(result, out_dir) if out_dir else result.path
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({**result.entry.to_json(), "registry": result.entry.registry or url, "path": str(where),
                   "cached": result.cached, "heldout-path": str(result.heldout_path) if result.heldout_path else None})
        return
    if not result.cached:
        click.echo(f"Pulled {result.entry.ref} ({result.entry.digest})", err=True)
    click.echo(str(where))


def with_current_yank(result: PullResult, ref: str, url: str, ctx: Context) -> PullResult:
    """``result`` of a warm pull, with the yank status the registry gives its version now.

    A cached exact pin is served without reading the index; a yank made since (here or on
    another machine) must still reach the cache and the user. An unreachable registry is
    no error here: the bytes in the cache are verified, so they are served as they are."""
    from envhub.cache import Cache
    from envhub.errors import EnvNotFoundError, RegistryError
    from envhub.ids import parse_ref
    from envhub.registry import select_version

    parsed = parse_ref(ref)
    if parsed.pinned is None:  # a range was resolved against the index just now
        return result
    try:
        current = ctx.open_registry(url).versions(result.entry.name)
    except (RegistryError, EnvNotFoundError):
        return result
    entry = Cache(ctx.settings.cache).learn_yank(result.entry, current)
    return replace(result, entry=entry, warning=select_version([entry], parsed)[1])
