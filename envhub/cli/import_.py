"""``envhub import KIND SOURCE OUT``: a bundle made from something written for another tool.

The kinds are importers registered through the ``envhub_importers`` plugin hook (envhub's
own ``terminal-bench`` and ``openenv`` too), looked up by name in the invocation's plugins.
"""

from __future__ import annotations

from pathlib import Path

import click

from envhub.cli._common import app_context, json_option


@click.command(name="import")
@click.argument("kind")
@click.argument("source", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--name", help="The bundle's NAMESPACE/NAME [default: imported/<SOURCE's name>].")
@click.option("--split", help="The split the tasks go into [default: test].")
@click.option("--option", "-o", "options", multiple=True, metavar="KEY=VALUE",
              help="An option of the importer (repeatable); an unknown key is refused with the kind's options.")
@click.option("--network", is_flag=True, help="terminal-bench: share the host's network with every episode "
              "(the same as -o network=true).")
@json_option
def import_(kind: str, source: Path, out: Path, name: str | None, split: str | None, options: tuple[str, ...],
            network: bool, as_json: bool) -> None:
    """Import SOURCE, written for another tool, into a new bundle OUT, with the importer KIND.

    Built in: terminal-bench (Terminal-Bench or Harbor task directories) and openenv (an
    OpenEnv environment package); installed plugins add more ('envhub plugins' lists them).
    What cannot carry over is listed in OUT/IMPORT-REPORT.md and printed. OUT must be new or
    empty; nothing is written if anything fails. docs/importers.md describes each kind.
    """
    from envhub.errors import UsageError
    from envhub.hookspecs import ImporterKind

    plugins = app_context().plugins
    importer: ImporterKind | None = plugins.lookup("importers", kind)
    if importer is None:
        raise UsageError(f"unknown importer {kind!r}; installed importers: {', '.join(plugins.names('importers'))}",
                         hint="install the plugin that provides it ('envhub plugins' lists what is installed)")
    given: dict[str, str] = {}
    for text in options:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"option {text!r} is not KEY=VALUE", hint="for example -o seeds=20")
        given[key.strip()] = value.strip()
    shorthands: dict[str, str | None] = {"name": name, "split": split, "network": "true" if network else None}
    given.update({key: value for key, value in shorthands.items() if value is not None})
    unknown = sorted(set(given) - set(importer.options))
    if unknown:
        known = "; ".join(f"{k}: {text}" for k, text in importer.options.items()) or "none"
        raise UsageError(f"importer {kind!r} takes no option {', '.join(unknown)}; its options: {known}",
                         hint="leave it out, or use an option the importer takes")
    report = importer.runner()(source, out, given)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json(report.to_dict())
    else:
        click.echo(report.to_markdown(), nl=False)
    click.echo(f"Imported {report.summary()} into {report.out} ({report.name}); {report.dropped} thing(s) not "
               f"carried over, listed in {report.out / 'IMPORT-REPORT.md'}.", err=True)
    click.echo(f"Next: envhub validate {report.out}, then envhub validate --check --trust {report.out}.", err=True)
