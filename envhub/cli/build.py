"""``envhub build``."""

from __future__ import annotations

from pathlib import Path

import click

from envhub.cli._common import json_option


@click.command()
@click.argument("path", default=".", type=click.Path(path_type=Path))
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), default=Path("dist"),
              help="Directory for the archives.")
@json_option
def build(path: Path, out_dir: Path, as_json: bool) -> None:
    """Build the bundle at PATH into deterministic archives.

    Writes NAME-VERSION.tar (public) and, if the environment has held-out splits,
    NAME-VERSION.heldout.tar. The same input gives byte-identical archives. The public
    manifest records each held-out split's row count and digest, never its file.
    """
    from envhub.bundle import build_bundle
    from envhub.cli._common import app_context

    built = build_bundle(path, out_dir, plugins=app_context().plugins)
    data = {
        "name": built.name,
        "version": built.version,
        "archive": str(built.public.path),
        "digest": built.public.digest,
        "size": built.public.size,
        "heldout-archive": str(built.heldout.path) if built.heldout else None,
        "heldout-digest": built.heldout.digest if built.heldout else None,
    }
    if as_json:
        from envhub.cli._output import emit_json

        emit_json(data)
        return
    click.echo(f"{built.public.path}  {built.public.digest}")
    if built.heldout:
        click.echo(f"{built.heldout.path}  {built.heldout.digest}")
