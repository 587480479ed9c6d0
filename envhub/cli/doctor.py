"""``envhub doctor``: what this machine gives envhub, starting with the sandbox."""

from __future__ import annotations

import sys

import click

from envhub.cli._common import json_option


@click.command()
@json_option
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Say what the sandbox can do on this machine, and what it cannot.

    Starts one sandbox that runs nothing and reports the isolation layers it had
    (namespaces, private filesystem, capabilities dropped, Landlock, limits) and the
    guarantees this kernel could not give. Exits 1 when any is missing, so CI can require
    the full sandbox.
    """
    from envhub.errors import ExitCode
    from envhub.sandbox import probe

    if not sys.platform.startswith("linux"):
        found_layers: tuple[str, ...] = ()
        missing: tuple[str, ...] = ("sandbox (Linux only)",)
        error = None
        details: dict[str, object] = {}
    else:
        found = probe()
        found_layers, missing, error, details = found.layers, found.missing, found.error, found.details
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({"platform": sys.platform, "sandbox": {"layers": list(found_layers), "missing": list(missing),
                                                         "error": error, **details}})
    else:
        click.echo(f"sandbox layers:  {', '.join(found_layers) or 'none'}")
        click.echo(f"sandbox missing: {', '.join(missing) or 'nothing'}")
        if details:
            click.echo(f"interpreter:     {details.get('interpreter')}")
            click.echo(f"readable:        {', '.join(map(str, details.get('readable', [])))}")
        if error:
            click.echo(f"error:           {error}", err=True)
    if missing or error:
        ctx.exit(ExitCode.CHECK_FAILED)
