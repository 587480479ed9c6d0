"""``envhub validate``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from envhub.cli._common import registry_option
from envhub.errors import ExitCode
from envhub.tasks import DEFAULT_MAX_LINE_BYTES

if TYPE_CHECKING:
    from envhub.bundle import BundleCheck
    from envhub.context import Context
    from envhub.problems import Problem


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text",
              envvar="ENVHUB_VALIDATE_FORMAT", show_envvar=True,
              help="text for people, json for programs, github for Actions annotations.")
@click.option("--strict", is_flag=True, envvar="ENVHUB_STRICT", show_envvar=True,
              help="Fail (exit 1) on warnings too.")
@click.option("--max-line-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_LINE_BYTES,
              envvar="ENVHUB_MAX_LINE_BYTES", show_envvar=True, help="Longest task line accepted.")
@click.option("--check", is_flag=True, envvar="ENVHUB_CHECK", show_envvar=True,
              help="Also run the dynamic self-test: references score 1.0, empty answers below 1.0, "
                   "scoring is deterministic, resets isolate episodes.")
@click.option("--check-limit", type=click.IntRange(min=1), metavar="N",
              help="With --check, test at most N tasks per split.")
@click.option("--trust", is_flag=True, envvar="ENVHUB_TRUST", show_envvar=True,
              help="With --check or --against, run the environments' own code.")
@click.option("--against", "against", metavar="REF", envvar="ENVHUB_AGAINST", show_envvar=True,
              help="Replay the golden trajectories through this published version's verifier and this "
                   "bundle's: fail when a reward changed and score-version did not. REF is an id "
                   "(NAMESPACE/NAME@VERSION; a bare name: its newest version), or 'newest': the newest "
                   "published version of each bundle's own name.")
@registry_option
@click.option("--files", "as_files", is_flag=True,
              help="PATHS are files (as pre-commit passes them): validate each bundle that holds one, "
                   "once; files outside every bundle are ignored.")
@click.pass_context
def validate(ctx: click.Context, paths: tuple[Path, ...], fmt: str, strict: bool, max_line_bytes: int,
             check: bool, check_limit: int | None, trust: bool, against: str | None, registry: str | None,
             as_files: bool) -> None:
    """Check bundles against their manifests, reporting every problem.

    PATHS are bundle directories (default: the current one). Checks the manifest, that
    every file it names exists inside the bundle, that task files parse and carry the
    declared fields, that task ids are unique within and across splits, and the recorded
    row counts and digests. Never imports environment code, except with --check or
    --against, and --trust.

    With --check, each valid bundle is also loaded and self-tested, task by task; a
    failure names the split and task id. Its golden trajectories must still get the
    rewards recorded beside them.

    With --against REF, each valid bundle's golden trajectories (and REF's) are replayed
    through both verifiers: a reward that changed while score-version did not is an error
    naming the task and both rewards; a score-version bumped with no reward change is a
    warning. A bundle never published is skipped under --against newest.

    With --files, PATHS are files inside bundles (a task file, the envhub.toml): each
    bundle holding one is validated once, and files in no bundle are ignored.

    Exit codes: 0 valid, 1 warnings with --strict or a --check or --against failure,
    2 errors found.
    """
    from envhub.bundle import validate_bundle
    from envhub.cli._common import app_context

    context = app_context()
    if as_files:
        paths = _bundles_holding(paths)
    elif not paths:
        paths = (Path("."),)
    checks = [validate_bundle(p, max_line_bytes=max_line_bytes, plugins=context.plugins) for p in paths]
    static_errors = sum(p.severity == "error" for c in checks for p in c.problems)
    if check:
        for c in checks:
            if c.manifest is not None and not any(p.severity == "error" for p in c.problems):
                c.problems.extend(_self_test(c, context, trust=trust, limit=check_limit))
    compared: dict[Path, dict[str, object]] = {}
    if against is not None and against != "newest":
        from envhub.ids import parse_ref

        parse_ref(against)  # a bad REF is refused once, before any bundle is loaded
    if against is not None:
        for c in checks:
            if c.manifest is not None and not any(p.severity == "error" for p in c.problems):
                c.problems.extend(_against(c, against, context, registry=registry, trust=trust, compared=compared))
    problems = [p for c in checks for p in c.problems]
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors

    if fmt == "json":
        from envhub.cli._output import emit_json

        emit_json({
            "ok": errors == 0 and not (strict and warnings),
            "errors": errors,
            "warnings": warnings,
            "bundles": [{**c.to_dict(), **({"against": compared[c.path]} if c.path in compared else {})}
                        for c in checks],
            "problems": [p.to_dict() for p in problems],
        })
    elif fmt == "github":
        for p in problems:
            click.echo(p.github())
    else:
        _print_text(checks, ctx.obj["verbosity"], compared)

    if static_errors:
        ctx.exit(ExitCode.USAGE_ERROR)
    if errors or (strict and warnings):
        ctx.exit(ExitCode.CHECK_FAILED)


def _bundles_holding(files: tuple[Path, ...]) -> tuple[Path, ...]:
    """The nearest directory at or above each file that has an envhub.toml, each once, in
    the order first met."""
    from envhub.manifest import MANIFEST_FILENAME

    bundles: dict[Path, None] = {}
    seen: set[Path] = set()
    for file in files:
        start = file if file.is_dir() else file.parent
        for directory in [start, *start.parents]:
            if directory in seen:  # already walked from another file: same answer
                break
            seen.add(directory)
            if (directory / MANIFEST_FILENAME).is_file():
                bundles[directory] = None
                break
    return tuple(bundles)


def _self_test(check: BundleCheck, context: Context, *, trust: bool, limit: int | None) -> list[Problem]:
    """The --check problems of one statically valid bundle."""
    from envhub._load import load
    from envhub.errors import EnvhubError
    from envhub.problems import Problem
    from envhub.runtime import check_recorded, self_test

    manifest_file = str(check.path / "envhub.toml")
    try:
        env = load(check.path, context=context, trust_code=trust)
    except EnvhubError as e:
        return [Problem("error", "check-load", f"cannot load the environment for --check: {e.message}",
                        file=manifest_file, hint=e.hint)]
    with env:
        result = self_test(env, limit=limit, manifest_file=manifest_file)
        golden = check_recorded(env, shown_root=check.path.as_posix())
    check.self_test = {"tasks": result.tasks, "with_reference": result.with_reference, "episodes": result.episodes}
    return [*result.problems, *golden]


def _against(check: BundleCheck, ref: str, context: Context, *, registry: str | None, trust: bool,
             compared: dict[Path, dict[str, object]]) -> list[Problem]:
    """The --against problems of one statically valid bundle; what was replayed goes into
    ``compared`` under the bundle's path."""
    from envhub._load import load
    from envhub.errors import EnvhubError, EnvNotFoundError
    from envhub.problems import Problem
    from envhub.runtime import RemoteEnvironment, compare

    manifest_file = str(check.path / "envhub.toml")
    assert check.manifest is not None  # only a statically valid bundle is compared
    name = check.manifest.environment.name
    target = name if ref == "newest" else ref
    try:
        old = load(target, context=context, trust_code=trust, registry=registry, locked=False)
    except EnvNotFoundError:
        if ref == "newest":  # never published: nothing to be comparable with
            compared[check.path] = {"against": None, "compared": 0, "changed": 0, "skipped": 0}
            return []
        raise
    except EnvhubError as e:
        return [Problem("error", "against-load", f"cannot load {target} for --against: {e.message}",
                        file=manifest_file, hint=e.hint)]
    with old:
        if isinstance(old, RemoteEnvironment):  # a URL: no bundle, so no verifier to replay through
            return [Problem("error", "against-load", f"cannot compare with {target}: --against needs a bundle, "
                            "not a served environment", file=manifest_file, hint="pass an id or id@version")]
        try:
            new = load(check.path, context=context, trust_code=trust)
        except EnvhubError as e:
            return [Problem("error", "against-load", f"cannot load the environment for --against: {e.message}",
                            file=manifest_file, hint=e.hint)]
        with new:
            result = compare(new, old, manifest_file=manifest_file, shown_root=check.path.as_posix())
    compared[check.path] = result.to_dict()
    return result.problems


def _print_text(checks: Sequence[BundleCheck], verbosity: int, compared: dict[Path, dict[str, object]]) -> None:
    from envhub.cli._output import color_enabled, printable

    color = color_enabled(sys.stdout)

    def style(text: str, **kw: object) -> str:
        return click.style(text, **kw) if color else text  # type: ignore[arg-type]

    for check in checks:
        for p in check.problems:
            line = printable(p.render())
            label = f"{p.severity}:"
            line = line.replace(label, style(label, fg="red" if p.severity == "error" else "yellow", bold=True), 1)
            click.echo(line)
        n_err = sum(p.severity == "error" for p in check.problems)
        n_warn = len(check.problems) - n_err
        env = check.manifest.environment if check.manifest else None
        title = printable(f"{env.name} {env.version} ({check.path})" if env else str(check.path))
        if n_err:
            summary = style("invalid", fg="red", bold=True) + f": {title}: {n_err} error(s), {n_warn} warning(s)"
        else:
            rows = sum(s.rows or 0 for s in check.splits)
            summary = (style("valid", fg="green", bold=True)
                       + f": {title}: {len(check.splits)} split(s), {rows} task(s)"
                       + (f", {n_warn} warning(s)" if n_warn else ""))
            if check.self_test is not None:
                played = check.self_test
                summary += (f"; --check played {played['episodes']} episode(s) on {played['tasks']} task(s), "
                            f"{played['with_reference']} with a reference")
            if check.path in compared and env is not None:  # compared: statically valid bundles
                against = compared[check.path]
                if against["against"] is None:
                    summary += f"; --against newest: {env.name} was never published there, nothing compared"
                else:
                    summary += (f"; --against {against['against']} replayed {against['compared']} golden "
                                f"trajectory(ies), {against['changed']} changed reward")
            if verbosity > 0:
                for s in check.splits:
                    held = " held-out" if s.held_out else ""
                    summary += f"\n  {s.name}{held}: {s.rows} rows, sha256 {s.sha256}"
        if verbosity >= 0 or n_err:
            click.echo(summary)
