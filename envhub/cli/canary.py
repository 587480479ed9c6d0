"""``envhub canary``."""

from __future__ import annotations

import click


@click.command()
def canary() -> None:
    """Print a fresh contamination canary for [environment].

    Put it in the manifest; if it ever turns up in a model's training data or output,
    the environment's tasks leaked into training.
    """
    from envhub.canary import new_canary

    click.echo(new_canary())
