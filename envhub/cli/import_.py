"""``envhub import``: bundles made from task collections in other formats."""

from __future__ import annotations

from pathlib import Path

import click

from envhub.cli._common import json_option


@click.group(name="import")
def import_() -> None:
    """Make a bundle from tasks in another format (docs/importers.md)."""


@import_.command(name="terminal-bench")
@click.argument("source", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--name", help="The bundle's NAMESPACE/NAME [default: imported/<SOURCE's name>].")
@click.option("--split", default="test", show_default=True, help="The split the tasks go into.")
@click.option("--network", is_flag=True, help="Share the host's network with every episode (off by default).")
@json_option
def terminal_bench(source: Path, out: Path, name: str | None, split: str, network: bool, as_json: bool) -> None:
    """Import Terminal-Bench or Harbor task directories from SOURCE into a new bundle OUT.

    SOURCE is one task directory (with task.yaml or task.toml) or a directory of them; each
    task becomes a row of one split, its tests go to OUT/tests/<id>/, its solution script
    becomes the reference solution. What cannot carry over (a Dockerfile's packages, other
    services, resource settings) is listed per task in OUT/IMPORT-REPORT.md and printed.
    OUT must be new or empty; nothing is written if anything fails.
    """
    from envhub.importers import import_terminal_bench

    report = import_terminal_bench(source, out, name=name, split=split, network=network)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json({
            "name": report.name, "out": str(report.out), "split": report.split, "notes": report.notes,
            "tasks": [{"id": t.id, "source": str(t.source), "layout": t.layout, "kept": t.kept, "dropped": t.dropped}
                      for t in report.tasks],
        })
    else:
        click.echo(report.to_markdown(), nl=False)
    click.echo(f"Imported {len(report.tasks)} task(s) into {report.out} ({report.name}); {report.dropped} thing(s) "
               f"dropped, listed in {report.out / 'IMPORT-REPORT.md'}.", err=True)
    click.echo(f"Next: envhub validate {report.out}, then envhub validate --check --trust {report.out}.", err=True)
