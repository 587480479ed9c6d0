"""envhub-registry: serve envhub environments over HTTP.

Episodes run on the server; held-out splits are listed with only what the model may see
and scored on the server, so their answers never leave it. Start it with ``envhub serve``
(or :func:`serve`); the protocol is ``spec/serve.md``.
"""

from __future__ import annotations

__version__ = "0.1.0"

from envhub_registry._app import create_app
from envhub_registry._config import ServeConfig, load_config
from envhub_registry._serve import configure_logging, load_environments, serve

__all__ = ["ServeConfig", "__version__", "configure_logging", "create_app", "load_config", "load_environments",
           "serve"]
