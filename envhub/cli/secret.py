"""``envhub secret``."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
def secret(path: Path) -> None:
    """Write a fresh held-out secret (a random 256-bit key) to PATH.

    A held-out generator split names the file in its manifest (secret = "secrets/test.key",
    beside seed-space and rows): its seeds are drawn with the key, which only the held-out
    archive carries once the bundle is built. The file is created readable by its owner
    only; an existing one is never replaced, since another key makes other tasks.
    """
    from envhub.errors import UsageError
    from envhub.tasks import write_secret

    try:
        write_secret(path)
    except FileExistsError:
        raise UsageError(f"{path} already exists; a new key would make other held-out tasks",
                         hint="keep it, or delete it first if no published version uses it") from None
    except (IsADirectoryError, NotADirectoryError, PermissionError) as e:
        raise UsageError(f"cannot write {path}: {e.strerror}", hint="pass a file path inside the bundle") from None
    click.echo(f"Wrote a new held-out secret to {path}.", err=True)
