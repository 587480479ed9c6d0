"""``envhub validate``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from envhub.errors import ExitCode
from envhub.tasks import DEFAULT_MAX_LINE_BYTES


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text",
              envvar="ENVHUB_VALIDATE_FORMAT", show_envvar=True,
              help="text for people, json for programs, github for Actions annotations.")
@click.option("--strict", is_flag=True, envvar="ENVHUB_STRICT", show_envvar=True,
              help="Fail (exit 1) on warnings too.")
@click.option("--max-line-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_LINE_BYTES,
              envvar="ENVHUB_MAX_LINE_BYTES", show_envvar=True, help="Longest task line accepted.")
@click.pass_context
def validate(ctx: click.Context, paths: tuple[Path, ...], fmt: str, strict: bool, max_line_bytes: int) -> None:
    """Check bundles against their manifests, reporting every problem.

    PATHS are bundle directories (default: the current one). Checks the manifest, that
    every file it names exists inside the bundle, that task files parse and carry the
    declared fields, that task ids are unique within and across splits, and the recorded
    row counts and digests. Never imports environment code.

    Exit codes: 0 valid, 1 warnings with --strict, 2 errors found.
    """
    from envhub.bundle import validate_bundle

    checks = [validate_bundle(p, max_line_bytes=max_line_bytes) for p in (paths or (Path("."),))]
    problems = [p for c in checks for p in c.problems]
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors

    if fmt == "json":
        from envhub.cli._output import emit_json

        emit_json({
            "ok": errors == 0 and not (strict and warnings),
            "errors": errors,
            "warnings": warnings,
            "bundles": [c.to_dict() for c in checks],
            "problems": [p.to_dict() for p in problems],
        })
    elif fmt == "github":
        for p in problems:
            click.echo(p.github())
    else:
        _print_text(checks, ctx.obj["verbosity"])

    if errors:
        ctx.exit(ExitCode.USAGE_ERROR)
    if strict and warnings:
        ctx.exit(ExitCode.CHECK_FAILED)


def _print_text(checks, verbosity: int) -> None:  # type: ignore[no-untyped-def]
    from envhub.cli._output import color_enabled

    color = color_enabled(sys.stdout)

    def style(text: str, **kw: object) -> str:
        return click.style(text, **kw) if color else text  # type: ignore[arg-type]

    for check in checks:
        for p in check.problems:
            line = p.render()
            label = f"{p.severity}:"
            line = line.replace(label, style(label, fg="red" if p.severity == "error" else "yellow", bold=True), 1)
            click.echo(line)
        n_err = sum(p.severity == "error" for p in check.problems)
        n_warn = len(check.problems) - n_err
        env = check.manifest.environment if check.manifest else None
        title = f"{env.name} {env.version} ({check.path})" if env else str(check.path)
        if n_err:
            summary = style("invalid", fg="red", bold=True) + f": {title}: {n_err} error(s), {n_warn} warning(s)"
        else:
            rows = sum(s.rows or 0 for s in check.splits)
            summary = (style("valid", fg="green", bold=True)
                       + f": {title}: {len(check.splits)} split(s), {rows} task(s)"
                       + (f", {n_warn} warning(s)" if n_warn else ""))
            if verbosity > 0:
                for s in check.splits:
                    held = " held-out" if s.held_out else ""
                    summary += f"\n  {s.name}{held}: {s.rows} rows, sha256 {s.sha256}"
        if verbosity >= 0 or n_err:
            click.echo(summary)
