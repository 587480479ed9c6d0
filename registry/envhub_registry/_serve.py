"""Load environments and run the server (``envhub serve``) on uvicorn."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from envhub.errors import EnvNotFoundError, RegistryError, UsageError
from envhub.runtime import Environment
from envhub_registry._config import ServeConfig

if TYPE_CHECKING:
    from envhub.context import Context

__all__ = ["bind", "configure_logging", "load_environments", "serve"]

log = logging.getLogger("envhub_registry")


def load_environments(refs: Sequence[str], *, context: Context, trust: bool, registry: str | None,
                      offline: bool) -> list[Environment]:
    """Load each of ``refs`` (bundle directories or registry ids) with ``context``'s settings
    and plugins, with its held-out splits where the held-out store grants them, ready to
    serve: task files read, digest known. The server makes its context once, at start-up.

    Raises what :func:`envhub.load` raises, and :class:`UsageError` for an ``http://`` ref
    or no refs at all."""
    from envhub import load

    if not refs:
        raise UsageError("nothing to serve", hint="pass bundle directories or environment ids, e.g. "
                                                  "'envhub serve ./my-env acme/sql-shop@1.2.0', or list them under "
                                                  "environments in the --config file")
    envs = []
    for ref in refs:
        if ref.startswith(("http://", "https://")):
            raise UsageError(f"{ref}: envhub serve serves bundles and registry ids, not another server's URL")
        try:
            env = load(ref, context=context, trust_code=trust, registry=registry, with_heldout=True, offline=offline)
        except (EnvNotFoundError, RegistryError) as e:
            # No held-out archive, or no access to the held-out store: serve the public splits.
            env = load(ref, context=context, trust_code=trust, registry=registry, with_heldout=False,
                       offline=offline)
            if any(s.held_out for s in env.splits.values()):
                log.warning("%s: the held-out splits are not served: %s", env.name, e.message)
        if not isinstance(env, Environment):
            # A composite (format = "mixture") has no tools or harness of its own to offer.
            raise UsageError(f"{ref}: envhub serve does not serve composite environments ({env.name} mixes "
                             "other environments' splits)", hint="serve the bundles of the environments it mixes")
        _warm(env)
        envs.append(env)
    return envs


def _warm(env: Environment) -> None:
    """Read the task files and compute the digest now, so a broken bundle fails at start-up
    and the first requests are not slow."""
    _ = env.digest  # computed once and kept
    for name, info in env.splits.items():
        if info.available and not info.generated:
            env.tasks(name)
        elif not info.available:
            log.info("%s: split %r is held out and not in this copy; requests for it are answered 404",
                     env.name, name)


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: any free port). Bound here rather than by
    uvicorn so that a busy port is a clear error, and the real port is known at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP (not 0): asyncio sets TCP_NODELAY only on sockets that say so,
    # and without it every keep-alive response waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}",
                         hint="choose another --port (0 picks a free one), or stop what is using it") from None
    sock.set_inheritable(True)
    return sock


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(envs: Sequence[Environment], config: ServeConfig, *, access_log: bool = False,
          on_ready: Callable[[str], None] | None = None,
          reload: Callable[[], Sequence[Environment]] | None = None) -> None:
    """Serve ``envs`` until interrupted (SIGINT or SIGTERM: open episodes are closed and
    their state freed). ``on_ready`` is called with the base URL once the server accepts
    connections.

    With ``config.workers`` above 1, ``reload`` loads the environments again (as ``envs``
    were loaded), and each worker process calls it after it is forked: what an environment
    holds that does not survive a fork (an MCP toolset's event-loop thread and server
    processes, a SQLite connection) is then the worker's own. ``envs`` are closed before the
    first fork. Without ``reload``, the workers share ``envs`` as forked, which holds only for
    environments with no such resources."""
    from envhub_registry._app import create_app

    config.check()
    # Built (and checked: a name given twice, an ORS clash) before the port is bound.
    app = create_app(envs, config)
    for env in envs:
        held = [n for n, s in env.splits.items() if s.held_out and s.available]
        if held and not config.access.tokens:
            log.warning("%s: held-out split(s) %s are refused to every request: no token is configured "
                        "(set ENVHUB_SERVE_TOKENS or [access] tokens in the --config file)", env.name, ", ".join(held))
    if not _loopback(config.host) and not config.access.require_token:
        log.warning("listening on %s without --require-token: anyone who reaches it can list and play the "
                    "public splits", config.host)
    sock = bind(config.host, config.port)
    port = sock.getsockname()[1]
    host = f"[{config.host}]" if ":" in config.host else config.host
    base_url = f"http://{host}:{port}"
    try:
        if config.workers == 1:
            _run(app, [sock], access_log=access_log, on_started=lambda: on_ready and on_ready(base_url))
        else:
            del app  # each worker makes its own, with its sessions
            if reload is not None:
                for env in envs:  # nothing of them (threads, processes) is carried into a fork
                    env.close()
            _serve_workers(reload or (lambda: envs), config, sock, access_log=access_log,
                           on_ready=lambda: on_ready and on_ready(base_url))
    finally:
        sock.close()


def _run(app: Any, sockets: list[socket.socket], *, access_log: bool, on_started: Callable[[], Any],
         on_starting: Callable[[], Awaitable[None]] | None = None,
         on_stopped: Callable[[], Awaitable[None]] | None = None) -> None:
    """Run ``app`` on uvicorn on ``sockets`` until SIGINT or SIGTERM."""
    import uvicorn

    class _Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            if on_starting is not None:
                await on_starting()
            await super().startup(sockets=sockets)
            if self.started:
                on_started()

        async def shutdown(self, sockets: Any = None) -> None:
            await super().shutdown(sockets=sockets)
            if on_stopped is not None:
                await on_stopped()

    uv_config = uvicorn.Config(app, log_config=None, access_log=access_log, lifespan="on",
                               timeout_graceful_shutdown=10, timeout_keep_alive=75, proxy_headers=False,
                               server_header=False)
    _Server(uv_config).run(sockets=sockets)


def _serve_workers(load: Callable[[], Sequence[Environment]], config: ServeConfig, sock: socket.socket, *,
                   access_log: bool, on_ready: Callable[[], Any]) -> None:
    """Serve with ``config.workers`` forked worker processes on ``sock`` (module
    :mod:`envhub_registry._workers`), each serving the environments ``load`` gives it."""
    from envhub_registry._app import create_app
    from envhub_registry._workers import Router, Worker, supervise

    if not hasattr(os, "fork") or not hasattr(socket, "AF_UNIX"):
        raise UsageError(f"--workers {config.workers} needs fork and unix sockets, which {sys.platform} lacks",
                         hint="serve with one worker (--workers 1), or run several servers behind a proxy")

    def run_worker(worker: Worker, ready: Callable[[], None]) -> None:
        private = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = worker.socket_path(worker.index)
        path.unlink(missing_ok=True)
        private.bind(str(path))
        envs = load()
        router = Router(create_app(envs, config, worker=worker), worker, config.limits.max_body_bytes)
        try:
            _run(router, [sock], access_log=access_log, on_started=ready,
                 on_starting=lambda: router.serve_hops(private), on_stopped=router.aclose)
        finally:
            for env in envs:
                env.close()
            private.close()
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # the last worker out (its parent killed) removes the directory
                path.parent.rmdir()

    log.info("starting %d worker processes", config.workers)
    supervise(config.workers, sock, run_worker, on_ready=on_ready)


class _CleanFormatter(logging.Formatter):
    """Log lines passed through ``clean``: a request path or a client's text can carry
    terminal escape sequences, and the log is read on a terminal."""

    def __init__(self, fmt: str, clean: Callable[[str], str]) -> None:
        super().__init__(fmt)
        self._clean = clean

    def format(self, record: logging.LogRecord) -> str:
        return self._clean(super().format(record))


def configure_logging(verbosity: int, *, clean: Callable[[str], str] = str) -> None:
    """Messages to stderr: warnings and start-up by default, each request with ``-v``.
    Each line passes through ``clean`` (the CLI passes one that neutralises terminal
    control characters)."""
    level = logging.DEBUG if verbosity >= 2 else logging.INFO if verbosity >= 0 else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_CleanFormatter("envhub serve: %(levelname)s: %(message)s", clean))
    for name in ("envhub_registry", "uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
