"""``envhub cache list|verify|prune``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from envhub.cli._common import json_option

if TYPE_CHECKING:
    from envhub.cache import Cache


def _cache() -> Cache:
    from envhub.cache import Cache
    from envhub.cli._common import app_context

    return Cache(app_context().settings.cache)


@click.group()
def cache() -> None:
    """Inspect and clean the cache of pulled bundles (ENVHUB_CACHE)."""


@cache.command("list")
@json_option
def list_(as_json: bool) -> None:
    """List cached bundles."""
    entries = _cache().entries()
    if as_json:
        from envhub.cli._output import emit_json

        emit_json([{"name": e.name, "version": e.version, "kind": e.kind, "digest": e.digest,
                    "size": e.size, "path": str(e.path)} for e in entries])
        return
    if not entries:
        from envhub.cli._output import message

        message(f"envhub: the cache ({_cache().root}) holds no bundles; 'envhub pull REF' fetches one")
        return
    for e in entries:
        label = f"{e.name}@{e.version}" if e.name else "?"
        click.echo(f"{label:<40} {e.kind:<8} {e.size:>12}  {e.digest[:19]}...  {e.path}")


@cache.command()
@json_option
@click.pass_context
def verify(ctx: click.Context, as_json: bool) -> None:
    """Check every cached file against its bundle's RECORD (exit 1 if any differs)."""
    from envhub.errors import ExitCode

    c = _cache()
    report = {str(e.path): c.verify(e) for e in c.entries()}
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({"ok": not any(report.values()), "bundles": report})
    else:
        for path, problems in report.items():
            click.echo(f"{'ok' if not problems else 'damaged'}: {path}")
            for p in problems:
                click.echo(f"  {p}")
    if any(report.values()):
        click.echo("envhub: some cached bundles are damaged; 'envhub cache prune' removes them", err=True)
        ctx.exit(ExitCode.CHECK_FAILED)


@cache.command()
@click.option("--all", "everything", is_flag=True, help="Remove every cached bundle, not only damaged ones.")
@json_option
def prune(everything: bool, as_json: bool) -> None:
    """Remove damaged bundles and what interrupted pulls left (with --all: everything)."""
    c = _cache()
    removed = []
    for e in c.entries():
        if everything or c.verify(e):
            c.remove(e)
            removed.append(str(e.path))
    leftovers = c.prune_leftovers()
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({"removed": removed, "leftovers": leftovers})
        return
    click.echo(f"removed {len(removed)} bundle(s) and {leftovers} leftover(s)", err=True)
