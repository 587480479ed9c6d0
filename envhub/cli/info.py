"""``envhub info``."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("target", default=".", metavar="PATH")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")
def info(target: str, as_json: bool) -> None:
    """Describe an environment: metadata, protocol, verifier, state and splits.

    PATH is a bundle directory (default: the current one). The bundle is validated
    first; an invalid bundle is reported, not described.
    """
    from envhub.bundle import validate_bundle
    from envhub.errors import BundleError

    check = validate_bundle(Path(target))
    if not check.ok or check.manifest is None:
        raise BundleError(f"{target}: the bundle is invalid", [p for p in check.problems if p.severity == "error"],
                          hint=f"run 'envhub validate {target}' for every problem")
    m = check.manifest
    verifier = m.verifier
    data = {
        "name": m.environment.name,
        "version": m.environment.version,
        "score-version": m.environment.score_version,
        "description": m.environment.description,
        "license": m.environment.license,
        "tags": list(m.environment.tags),
        "protocol": m.harness.protocol,
        "verifier": verifier.kind,
        "criteria": [c.name for c in getattr(verifier, "criteria", [])],
        "state": m.state.kind,
        "dependencies": dict(m.dependencies),
        "splits": [vars(s) for s in check.splits],
        "path": str(check.path),
    }
    if as_json:
        from envhub.cli._output import emit_json

        emit_json(data)
        return
    click.echo(f"{data['name']} {data['version']}  (score-version {data['score-version']})")
    if data["description"]:
        click.echo(f"  {data['description']}")
    click.echo(f"  license:   {data['license'] or '-'}")
    click.echo(f"  tags:      {', '.join(data['tags']) or '-'}")
    click.echo(f"  protocol:  {data['protocol']}")
    criteria = f" ({', '.join(data['criteria'])})" if data["criteria"] else ""
    click.echo(f"  verifier:  {data['verifier']}{criteria}")
    click.echo(f"  state:     {data['state']}")
    if m.dependencies:
        click.echo("  depends on: " + ", ".join(f"{n}{s}" for n, s in m.dependencies.items()))
    click.echo("  splits:")
    for s in check.splits:
        held = "  held-out" if s.held_out else ""
        click.echo(f"    {s.name:<10} {s.rows if s.rows is not None else '?':>8} tasks{held}")
