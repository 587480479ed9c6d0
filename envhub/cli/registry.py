"""``envhub versions``, ``envhub search`` and ``envhub yank``."""

from __future__ import annotations

import click

from envhub.cli._common import app_context, json_option, registry_option
from envhub.cli._output import echo


@click.command()
@click.argument("name")
@registry_option
@json_option
def versions(name: str, registry: str | None, as_json: bool) -> None:
    """List every published version of NAME, yanked ones marked."""
    from envhub.ids import parse_name

    ctx = app_context()
    url = ctx.registry_url(registry)
    entries = ctx.open_registry(url).versions(str(parse_name(name)))
    if as_json:
        from envhub.cli._output import emit_json

        emit_json([e.to_json() for e in entries])
        return
    for e in entries:
        yanked = f"  yanked: {e.yank_reason or 'no reason given'}" if e.yanked else ""
        echo(f"{e.version:<12} {e.published_at}  {e.digest[:19]}...{yanked}")


@click.command()
@click.argument("query", default="")
@click.option("--tag", help="Only environments with this tag.")
@registry_option
@json_option
def search(query: str, tag: str | None, registry: str | None, as_json: bool) -> None:
    """Find environments whose name, description or tags contain QUERY."""

    ctx = app_context()
    url = ctx.registry_url(registry)
    hits = ctx.open_registry(url).search(query, tag=tag)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json([e.to_json() for e in hits])
        return
    if not hits:
        echo(f"no environment in {url} matches {query!r}" + (f" with tag {tag!r}" if tag else ""), err=True)
    for e in hits:
        tags = f"  [{', '.join(e.tags)}]" if e.tags else ""
        echo(f"{e.name:<32} {e.version:<10} {e.description}{tags}")


@click.command()
@click.argument("ref")
@click.option("--reason", required=True, help="Why: shown to everyone who pins this version.")
@registry_option
@json_option
def yank(ref: str, reason: str, registry: str | None, as_json: bool) -> None:
    """Hide REF (NAME@VERSION) from resolution. It is never deleted: exact pins still
    fetch it, with a warning."""
    from envhub.errors import UsageError
    from envhub.ids import parse_ref

    parsed = parse_ref(ref)
    if parsed.pinned is None:
        raise UsageError(f"yank needs one version, e.g. '{parsed.name}@1.0.0', not {ref!r}")
    ctx = app_context()
    url = ctx.registry_url(registry)
    entry = ctx.open_registry(url).yank(str(parsed.name), str(parsed.pinned), reason)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json(entry.to_json())
        return
    echo(f"Yanked {entry.ref} in {url}: {entry.yank_reason}", err=True)
