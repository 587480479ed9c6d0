"""``envhub plugins``: what is installed, what it registers, and what is broken."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from envhub.cli._common import json_option
from envhub.errors import ExitCode

if TYPE_CHECKING:
    from envhub.plugins import PluginManager


@click.command()
@json_option
@click.option("--strict", is_flag=True, envvar="ENVHUB_STRICT", show_envvar=True,
              help="Exit 1 when a plugin or an installed environment is broken, or two plugins claim one name.")
@click.pass_context
def plugins(ctx: click.Context, as_json: bool, strict: bool) -> None:
    """List installed plugins (entry-point group "envhub") with their distribution, version
    and what each registers; installed environment packages (group "envhub.environments");
    plugins and environments that are broken, and why; names two plugins both claim.

    Environment packages are listed from their manifests: their code is never imported.

    Exit codes: 0 listed (even with broken plugins, which are shown), 1 with --strict when
    something is broken or in conflict.
    """
    from envhub.cli._common import app_context

    report = _report(app_context().plugins)
    if as_json:
        from envhub.cli._output import emit_json

        emit_json(report)
    else:
        _print(report, ctx.obj["verbosity"])
    if strict and (report["broken"] or [c for c in report["conflicts"] if not c["builtin_wins"]]):
        ctx.exit(ExitCode.CHECK_FAILED)


def _report(pm: PluginManager) -> dict[str, Any]:
    from envhub.plugins import BUILTIN, HOOKS

    plugins = []
    for name in pm.plugin_names():
        origin = pm.origin(name)
        registers = pm.registered_by(name)
        if name == BUILTIN:
            # The built-in plugin reads environment packages' entry points; they are listed
            # below with their own distributions.
            registers.pop("environments", None)
        plugins.append({"name": name, "distribution": origin.distribution, "version": origin.version,
                        "builtin": origin.builtin, "entry_point": origin.entry_point,
                        "registers": {key: registers[key] for key in HOOKS if key in registers}})
    environments = [{"name": p.item.name, "version": p.item.version, "distribution": p.origin.distribution,
                     "distribution_version": p.origin.version, "path": str(p.item.path), "plugin": p.plugin}
                    for p in pm.environments()]
    return {"plugins": plugins, "environments": environments,
            "broken": [b.to_dict() for b in pm.broken],
            "conflicts": [{**c.to_dict(), "hint": c.hint()} for c in pm.conflicts()]}


def _print(report: dict[str, Any], verbosity: int) -> None:
    from envhub.plugins import HOOKS

    lines = ["plugins:"]
    for plugin in report["plugins"]:
        if plugin["builtin"]:
            where = f"{plugin['distribution']} {plugin['version']} (built in)"
        elif plugin["distribution"]:
            where = f"{plugin['distribution']} {plugin['version']} (entry point {plugin['entry_point']})"
        else:
            where = f"{plugin['name']} (registered in code)"
        lines.append(f"  {where}")
        if plugin["builtin"] and verbosity < 0:
            continue
        for key, names in plugin["registers"].items():
            label = HOOKS[key].label
            plural = label[:-1] + "ies" if label.endswith("y") else label + "s"
            lines.append(f"    {plural}: {', '.join(names)}")
        if not plugin["registers"]:
            lines.append("    (registers nothing)")
    lines.append("environments:" if report["environments"] else "environments: none installed")
    for env in report["environments"]:
        lines.append(f"  {env['name']} {env['version']}  from {env['distribution']} {env['distribution_version']}"
                     f"  {env['path']}")
    if report["broken"]:
        lines.append("broken:")
        for broken in report["broken"]:
            what = "environment " if broken["kind"] == "environment" else ""
            entry = f" (entry point {broken['entry_point']})" if broken["entry_point"] else ""
            lines.append(f"  {what}{broken['name']} from {broken['distribution']} {broken['version']}{entry}: "
                         f"{broken['error']}")
    if report["conflicts"]:
        lines.append("conflicts:")
        for conflict in report["conflicts"]:
            lines.append(f"  {conflict['message']}")
            lines.append(f"    hint: {conflict['hint']}")
    click.echo("\n".join(lines))
