"""``envhub info``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from envhub.cli._common import json_option, offline_option, registry_option
from envhub.cli._output import echo

if TYPE_CHECKING:
    from envhub.bundle import SplitFacts
    from envhub.context import Context
    from envhub.manifest import Manifest


@click.command()
@click.argument("target", default=".", metavar="PATH|REF")
@registry_option
@offline_option
@json_option
def info(target: str, registry: str | None, offline: bool, as_json: bool) -> None:
    """Describe an environment: metadata, protocol, verifier, state and splits.

    PATH|REF is a bundle directory (default: the current one), a registry id such as
    acme/env or acme/env@1.2.0, which is pulled (verified, cached) first, or the URL of an
    environment served by 'envhub serve' (http://HOST:PORT/NAMESPACE/NAME).
    """
    from envhub._load import is_bundle_path
    from envhub.bundle import SplitFacts, validate_bundle
    from envhub.cli._common import app_context
    from envhub.errors import BundleError

    ctx = app_context()
    published: dict[str, object] = {}
    served: dict[str, object] = {}
    path: str | Path  # a served environment's URL, or its bundle directory
    if target.startswith(("http://", "https://")):
        m, splits, path, served = _served(target, ctx)
    elif is_bundle_path(target):
        check = validate_bundle(Path(target), plugins=ctx.plugins)
        if not check.ok or check.manifest is None:
            raise BundleError(f"{target}: the bundle is invalid", [p for p in check.problems if p.severity == "error"],
                              hint=f"run 'envhub validate {target}' for every problem")
        m, splits, path = check.manifest, check.splits, check.path
    else:
        from envhub.hub import pull

        settings, url = ctx.settings, ctx.registry_url(registry)
        result = pull(target, url, settings, offline=offline or settings.offline, plugins=ctx.plugins)
        if result.cached and not (offline or settings.offline):
            from envhub.cli.pull import with_current_yank

            result = with_current_yank(result, target, url, ctx)
        if result.warning:
            echo(f"envhub: warning: {result.warning}", err=True)
        entry = result.entry
        published = {"registry": entry.registry or url, "digest": entry.digest, "published-at": entry.published_at,
                     "yanked": entry.yanked, "yank-reason": entry.yank_reason}
        # The pulled bundle matched its digest and was validated when built, and its
        # manifest records every split's rows: no need to scan the task files again.
        from envhub.manifest import load_manifest

        m, path = load_manifest(result.path, plugins=ctx.plugins), result.path
        splits = [SplitFacts.recorded(name, split) for name, split in m.tasks.splits.items()]
    verifier = m.verifier
    data = {
        "name": m.environment.name,
        "version": m.environment.version,
        "score-version": m.environment.score_version,
        "description": m.environment.description,
        "license": m.environment.license,
        "tags": list(m.environment.tags),
        "protocol": m.harness.protocol,
        "verifier": verifier.kind if verifier else "mixture",
        "criteria": [c.name for c in getattr(verifier, "criteria", [])],
        "state": m.state.kind,
        # A path dependency as written: {"version": ..., "path": ...}.
        "dependencies": {n: d if isinstance(d, str) else d.model_dump(by_alias=True)
                         for n, d in m.dependencies.items()},
        "splits": [vars(s) for s in splits],
        "path": str(path),
        **published,
        **served,
    }
    if as_json:
        from envhub.cli._output import emit_json

        emit_json(data)
        return
    echo(f"{data['name']} {data['version']}  (score-version {data['score-version']})")
    if data["description"]:
        echo(f"  {data['description']}")
    echo(f"  license:   {data['license'] or '-'}")
    echo(f"  tags:      {', '.join(data['tags']) or '-'}")
    echo(f"  protocol:  {data['protocol']}")
    criteria = f" ({', '.join(data['criteria'])})" if data["criteria"] else ""
    echo(f"  verifier:  {data['verifier']}{criteria}")
    echo(f"  state:     {data['state']}")
    if m.dependencies:
        paths = m.dependency_paths()
        echo("  depends on: " + ", ".join(f"{n}{s}" + (f" (path {paths[n]})" if n in paths else "")
                                               for n, s in m.dependency_specifiers().items()))
    if published:
        echo(f"  registry:  {published['registry']}")
        echo(f"  digest:    {published['digest']}  (published {published['published-at']})")
        if published["yanked"]:
            echo(f"  yanked:    {published['yank-reason']}")
    if served:
        echo(f"  served by: {served['served-by']}  (digest {served['digest']})")
    echo("  splits:")
    for s in splits:
        held = "  held-out" if s.held_out else ""
        if s.held_out and not served and not _keyed_split_here(m, s.name, Path(path)):
            held += ", not in this copy (its key is in the held-out store)"
        echo(f"    {s.name:<10} {s.rows if s.rows is not None else '?':>8} tasks{held}")


def _served(url: str, ctx: Context) -> tuple[Manifest, list[SplitFacts], str, dict[str, object]]:
    """What the server says of the environment it serves at ``url`` (as ``envhub eval`` takes it)."""
    from envhub._load import load
    from envhub.bundle import SplitFacts

    with load(url, context=ctx) as env:
        splits = [SplitFacts(s.name, s.held_out, s.rows) for s in env.splits.values()]
        return env.manifest, splits, url, {"served-by": url, "digest": env.digest}


def _keyed_split_here(m: Manifest, name: str, root: Path) -> bool:
    """False for a split drawn from a secret whose key this copy lacks (neither the source's
    key file nor the held-out seeds file): it is declared, and cannot be played from here."""
    from envhub.tasks import sealed_seeds_path

    split = m.tasks.splits[name]
    if split.seed_space is None:
        return True
    return (split.secret is not None and (root / split.secret).is_file()) or (root / sealed_seeds_path(name)).is_file()
