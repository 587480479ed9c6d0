"""``envhub push``."""

from __future__ import annotations

from pathlib import Path

import click

from envhub.cli._common import app_context, json_option, registry_option


@click.command()
@click.argument("path", default=".", type=click.Path(path_type=Path))
@registry_option
@json_option
def push(path: Path, registry: str | None, as_json: bool) -> None:
    """Build the bundle at PATH and publish it to a registry.

    Versions are immutable: pushing the same content again does nothing; different
    content under a published version is refused. Held-out splits go to the held-out
    store (ENVHUB_HELDOUT_STORE, default under ENVHUB_HOME), never to the registry; on
    hf:// they go to a private companion repo <namespace>/<name>-heldout.
    """
    from envhub.hub import push as do_push
    ctx = app_context()
    url = ctx.registry_url(registry)
    result = do_push(path, ctx.open_registry(url), heldout_url=ctx.registry_config.heldout_url(), plugins=ctx.plugins)
    entry = result.publish.entry
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({**entry.to_json(), "registry": url, "created": result.publish.created,
                   "heldout-store": result.heldout_store})
        return
    if result.publish.created:
        click.echo(f"Published {entry.ref} to {url} ({entry.digest})", err=True)
    else:
        click.echo(f"{entry.ref} is already published in {url} with the same content; nothing to do", err=True)
    if result.heldout_store:
        click.echo(f"Held-out splits are in {result.heldout_store}, not in the registry", err=True)
