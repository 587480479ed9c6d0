"""The ``envhub`` command.

Subcommands live one group per module and are imported only when invoked, so
``envhub --help`` stays as fast as importing click. :func:`main` is the one error
boundary: known errors become a message on stderr and an exit code
(:class:`envhub.errors.ExitCode`); a traceback is shown only with ``ENVHUB_DEBUG=1``.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from envhub._version import __version__

__all__ = ["cli", "main"]

# name -> (module:attribute, one-line help). The help is repeated here so that listing
# commands imports none of them.
_COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("envhub.cli.init:init", "Create a new environment bundle that validates as created."),
    "import": ("envhub.cli.import_:import_",
               "Make a bundle from another tool's tasks or environment (terminal-bench, openenv, plugins' kinds)."),
    "validate": ("envhub.cli.validate:validate", "Check bundles against their manifests, reporting every problem."),
    "info": ("envhub.cli.info:info", "Describe an environment (a bundle directory or a registry id)."),
    "build": ("envhub.cli.build:build", "Build a bundle into deterministic public and held-out archives."),
    "push": ("envhub.cli.push:push", "Build a bundle and publish it to a registry."),
    "pull": ("envhub.cli.pull:pull", "Fetch an environment into the cache, verifying every byte."),
    "versions": ("envhub.cli.registry:versions", "List the published versions of an environment."),
    "search": ("envhub.cli.registry:search", "Find environments in a registry."),
    "yank": ("envhub.cli.registry:yank", "Hide a version from resolution (never deletes it)."),
    "eval": ("envhub.cli.eval:eval_", "Roll out a policy on a split, recording every episode and a summary."),
    "serve": ("envhub.cli.serve:serve", "Serve environments over HTTP, scoring held-out splits on the server."),
    "cache": ("envhub.cli.cache:cache", "List, verify and prune the cache of pulled bundles."),
    "canary": ("envhub.cli.canary:canary", "Print a fresh contamination canary for [environment]."),
    "doctor": ("envhub.cli.doctor:doctor", "Say what the sandbox can do on this machine, and what it cannot."),
    "secret": ("envhub.cli.secret:secret", "Write a fresh held-out secret (a random 256-bit key) to a file."),
    "schema": ("envhub.cli.schema:schema", "Print the JSON Schema of the manifest."),
    "plugins": ("envhub.cli.plugins:plugins", "List installed plugins and environment packages, and what is broken."),
    "add": ("envhub.cli.project:add", "Add an environment to the project's pyproject.toml, lock and sync."),
    "remove": ("envhub.cli.project:remove", "Remove an environment from the project and relock."),
    "lock": ("envhub.cli.project:lock", "Resolve the project's environments into envhub.lock."),
    "sync": ("envhub.cli.project:sync", "Fetch and verify every locked environment; report Python dependencies."),
    "tree": ("envhub.cli.project:tree", "Show the project's environments and their dependencies, as locked."),
    "outdated": ("envhub.cli.project:outdated", "List locked environments that have newer versions."),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*_COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands:
            return self.commands[name]
        if name not in _COMMANDS:
            return None
        module, _, attr = _COMMANDS[name][0].partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        _accept_verbosity(command)
        self.add_command(command, name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _COMMANDS[name][1]) for name in sorted(_COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[Any, ...]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            import difflib

            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(__version__, "-V", "--version", prog_name="envhub", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", count=True, help="More output; repeat for more.")
@click.option("-q", "--quiet", count=True, help="Less output; repeat for less.")
@click.pass_context
def cli(ctx: click.Context, verbose: int, quiet: int) -> None:
    """envhub: versioned, verifiable environments for RL with LLM agents.

    Exit codes: 0 ok, 1 a check failed, 2 invalid usage or input, 3 internal error.
    """
    ctx.ensure_object(dict)["verbosity"] = verbose - quiet


def _accept_verbosity(command: click.Command) -> None:
    """Let ``-v``/``-q`` follow the subcommand too (``envhub validate -q``), counting with
    any given before it; subcommands of a group (``envhub cache list -q``) included."""
    names = {opt for param in command.params for opt in getattr(param, "opts", ())}
    for flags, sign, text in ((("-v", "--verbose"), 1, "More output; repeat for more."),
                              (("-q", "--quiet"), -1, "Less output; repeat for less.")):
        if names.isdisjoint(flags):
            command.params.append(click.Option(list(flags), count=True, expose_value=False, help=text,
                                               callback=functools.partial(_add_verbosity, sign)))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_verbosity(sub)


def _add_verbosity(sign: int, ctx: click.Context, param: click.Parameter, count: int) -> None:
    obj = ctx.find_root().ensure_object(dict)
    obj["verbosity"] = obj.get("verbosity", 0) + sign * count


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the CLI and exit with its code; the one place errors become exit codes."""
    from envhub.errors import EnvhubError, ExitCode

    args = list(argv) if argv is not None else sys.argv[1:]
    as_json = "--json" in (args[:args.index("--")] if "--" in args else args)
    try:
        # Without standalone mode click returns ctx.exit()'s code instead of exiting.
        returned = cli.main(args=args, prog_name="envhub", standalone_mode=False, obj={"argv": args})
        code: int = returned if isinstance(returned, int) else ExitCode.OK
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        code = ExitCode.INTERRUPTED
    except click.ClickException as e:
        if as_json:
            context = getattr(e, "ctx", None)
            hint = f"run '{context.command_path} --help' for usage" if context is not None else None
            _print_json_error("UsageError", e.format_message(), hint, ExitCode.USAGE_ERROR)
        else:
            e.show()
        code = ExitCode.USAGE_ERROR
    except EnvhubError as e:
        if os.environ.get("ENVHUB_DEBUG") == "1":
            import traceback

            traceback.print_exc()
        if as_json:
            _print_json_error(type(e).__name__, e.message, e.hint, e.exit_code,
                              [p.to_dict() for p in getattr(e, "problems", [])])
        else:
            _print_error(e)
        code = e.exit_code
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        code = ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``envhub ... | head``): not an error of ours.
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        code = ExitCode.OK
    except Exception as e:  # the boundary: anything else is a bug
        if os.environ.get("ENVHUB_DEBUG") == "1":
            import traceback

            traceback.print_exc()
        hint = "rerun with ENVHUB_DEBUG=1 for a traceback, and report it"
        if as_json:
            _print_json_error("InternalError", f"{type(e).__name__}: {e}", hint, ExitCode.INTERNAL_ERROR)
        else:
            from envhub.cli._output import printable

            click.echo(printable(f"envhub: internal error: {type(e).__name__}: {e}"), err=True)
            click.echo(f"  hint: {hint}", err=True)
        code = ExitCode.INTERNAL_ERROR
    sys.exit(code)


def _print_error(e: Exception) -> None:
    from envhub.cli._output import error_text

    click.echo(error_text(e), err=True)


def _print_json_error(kind: str, message: str, hint: str | None, exit_code: int,
                      problems: list[dict[str, object]] | None = None) -> None:
    """With ``--json``, an error is data too: one JSON object on stderr (docs/cli.md)."""
    import json

    error: dict[str, object] = {"kind": kind, "message": message, "hint": hint, "exit_code": int(exit_code)}
    if problems:
        error["problems"] = problems
    click.echo(json.dumps({"error": error}, indent=2), err=True)
