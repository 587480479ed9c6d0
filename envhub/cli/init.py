"""``envhub init``."""

from __future__ import annotations

from pathlib import Path

import click

from envhub.scaffold import PROTOCOLS, STATES


@click.command()
@click.argument("name")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--protocol", type=click.Choice(PROTOCOLS), default="single-turn", help="How the model interacts.")
@click.option("--state", type=click.Choice(STATES), default="none", help="What the agent acts on.")
def init(name: str, directory: Path | None, protocol: str, state: str) -> None:
    """Create a new environment bundle NAME (namespace/name) in DIRECTORY.

    DIRECTORY defaults to the name's last part. The bundle validates as created: a
    manifest with a fresh canary, a README, train/dev/test (held-out) example tasks, and
    the code and state the protocol needs. Nothing is written if anything fails.
    """
    from envhub.ids import parse_name
    from envhub.scaffold import create_bundle

    env = parse_name(name)
    target = create_bundle(str(env), directory or Path(env.name), protocol=protocol, state=state)  # type: ignore[arg-type]
    click.echo(f"Created {env} in {target} ({protocol}, state {state}).", err=True)
    click.echo(f"Next: edit {target / 'envhub.toml'}, then run 'envhub validate {target}'.", err=True)
