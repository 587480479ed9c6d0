"""``envhub serve``: serve environments over HTTP (the ``envhub-registry`` distribution)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from envhub.cli._common import app_context, offline_option, registry_option
from envhub.cli._output import echo, printable
from envhub.cli.eval import trust_option
from envhub.errors import UsageError

if TYPE_CHECKING:
    from envhub.runtime import Environment

#: How to get envhub-registry. It is not on a package index yet: it installs from a checkout
#: of the envhub repository, where it is the registry/ directory.
REGISTRY_HINT = ("install it from a checkout of the envhub repository: pip install ./registry "
                 "(it is not published on a package index yet)")


@click.command("serve")
@click.argument("targets", nargs=-1, metavar="REF|PATH...")
@click.option("--host", envvar="ENVHUB_SERVE_HOST", show_envvar=True,
              help="Address to listen on (default 127.0.0.1: this machine only).")
@click.option("--port", type=click.IntRange(0, 65535), envvar="ENVHUB_SERVE_PORT", show_envvar=True,
              help="Port to listen on (default 8000; 0 picks a free one).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False),
              envvar="ENVHUB_SERVE_CONFIG", show_envvar=True, help="TOML configuration file (docs/serve.md).")
@click.option("--max-episodes", type=click.IntRange(min=1), help="Episodes open at once (default 1024); past it, 429.")
@click.option("--idle-timeout", "idle_timeout_s", type=click.FloatRange(min=0, min_open=True),
              help="Close an episode after this many seconds without a request (default 600).")
@click.option("--episode-timeout", "episode_timeout_s", type=click.FloatRange(min=0, min_open=True),
              help="Wall-clock limit of one episode in seconds (default 3600).")
@click.option("--max-body-bytes", type=click.IntRange(min=256),
              help="Largest request body (default 1048576); past it, 413.")
@click.option("--require-token/--no-require-token", default=None,
              help="Require a bearer token for every call, not only for held-out splits.")
@click.option("--workers", type=click.IntRange(1, 64), envvar="ENVHUB_SERVE_WORKERS", show_envvar=True,
              help="Worker processes sharing the port (default 1); each episode stays in the one that created it.")
@click.option("--ors-at-root/--no-ors-at-root", default=None,
              help="Also serve the Open Reward Standard's routes at / (where its SDK looks), not only at /ors.")
@click.option("--access-log", is_flag=True, help="Log every request on stderr.")
@trust_option
@registry_option
@offline_option
@click.pass_context
def serve(ctx: click.Context, targets: tuple[str, ...], host: str | None, port: int | None, config_file: Path | None,
          max_episodes: int | None, idle_timeout_s: float | None, episode_timeout_s: float | None,
          max_body_bytes: int | None, require_token: bool | None, workers: int | None, ors_at_root: bool | None,
          access_log: bool, trust: bool,
          registry: str | None, offline: bool) -> None:
    """Serve environments over HTTP: clients list tasks, run episodes and get rewards, and
    held-out splits are scored on the server, their answers never sent.

    REF|PATH are bundle directories or environment ids (pulled, with their held-out splits
    where the held-out store grants them). Clients load them as
    envhub.load("http://HOST:PORT/NAMESPACE/NAME"), and envhub eval takes that URL too.
    Held-out splits need a bearer token: set ENVHUB_SERVE_TOKENS (comma-separated) or
    [access] tokens in the --config file. The protocol is spec/serve.md.

    The base URL is printed on stdout once the server accepts connections; Ctrl+C stops it.
    """
    try:
        import envhub_registry
    except ImportError:
        raise UsageError("envhub serve needs the envhub-registry distribution, which is not installed",
                         hint=REGISTRY_HINT) from None

    envhub_registry.configure_logging((ctx.find_root().obj or {}).get("verbosity", 0), clean=printable)
    context = app_context()
    settings = context.settings
    config = envhub_registry.load_config(config_file, settings).with_overrides(
        host=host, port=port, trust=trust or None, workers=workers, ors_at_root=ors_at_root,
        require_token=require_token, max_episodes=max_episodes,
        idle_timeout_s=idle_timeout_s, episode_timeout_s=episode_timeout_s, max_body_bytes=max_body_bytes)
    config.check()
    refs = [*config.environments, *targets]
    envs = envhub_registry.load_environments(refs, context=context, trust=config.trust, registry=registry,
                                             offline=offline or settings.offline)

    def ready(base_url: str) -> None:
        for env in envs:
            echo(f"{base_url}/{env.name}")
        echo(f"envhub serve: serving {len(envs)} environment(s) on {base_url} (Ctrl+C to stop)", err=True)
        # The lines on stdout are for envhub.load and envhub eval; a browser or curl wants a route.
        for env in envs:
            echo(f"  {env.name}: {base_url}/v1/environments/{env.name} describes it", err=True)

    def reload() -> list[Environment]:
        # In each worker process of --workers N, after the fork (envhub_registry.serve).
        return envhub_registry.load_environments(refs, context=context, trust=config.trust, registry=registry,
                                                 offline=offline or settings.offline)

    envhub_registry.serve(envs, config, access_log=access_log, on_ready=ready, reload=reload)
