"""``envhub schema``."""

from __future__ import annotations

import json

import click


@click.command()
def schema() -> None:
    """Print the JSON Schema of the manifest (spec/schema/manifest-v1.schema.json)."""
    from envhub.manifest import manifest_json_schema

    click.echo(json.dumps(manifest_json_schema(), indent=2, sort_keys=True))
