"""Importing a bundle's own code, only with trust, without clobbering other bundles.

Each loaded bundle gets a private package namespace, ``_envhub_bundles.b<n>``, whose
``__path__`` is the bundle root. The entry point ``sql_shop.tools:run_sql`` is imported as
``_envhub_bundles.b<n>.sql_shop.tools``, so two environments that both ship a package
called ``sql_shop`` (or a module called ``tools``) each get their own, in one process.
Bundle code therefore imports its own modules relatively (``from . import db``); an
absolute ``import sql_shop`` would look outside the bundle.

The bundle root is never put on ``sys.path``.
"""

from __future__ import annotations

import importlib
import sys
import threading
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envhub.errors import TrustError

__all__ = ["CodeSpace", "code_entry_points", "trusted_namespaces"]

_ROOT_PACKAGE = "_envhub_bundles"
_lock = threading.Lock()
_spaces: dict[Path, str] = {}


def _root_package() -> types.ModuleType:
    package = sys.modules.get(_ROOT_PACKAGE)
    if package is None:
        package = types.ModuleType(_ROOT_PACKAGE, "Private namespaces of loaded environment bundles.")
        package.__path__ = []
        sys.modules[_ROOT_PACKAGE] = package
    return package


def _namespace_for(root: Path) -> str:
    """One namespace per bundle directory, reused when the same bundle is loaded again."""
    with _lock:
        name = _spaces.get(root)
        if name is None:
            _root_package()
            name = f"{_ROOT_PACKAGE}.b{len(_spaces)}"
            package = types.ModuleType(name, f"Code of the bundle at {root}")
            package.__path__ = [str(root)]
            package.__file__ = None
            sys.modules[name] = package
            _spaces[root] = name
        return name


class CodeSpace:
    """Resolves ``module:attr`` entry points of one bundle, if it is trusted."""

    def __init__(self, root: Path, env_name: str, *, trusted: bool, trust_hint: str) -> None:
        self.root = root.resolve()
        self.env_name = env_name
        self.trusted = trusted
        self.trust_hint = trust_hint
        self._namespace: str | None = None

    def load(self, entry_point: str) -> Any:
        """The object ``entry_point`` names.

        Raises :class:`TrustError` if the bundle is not trusted, and :class:`ImportError`
        or :class:`AttributeError` (with the bundle named) if it cannot be found.
        """
        if not self.trusted:
            raise TrustError(f"{self.env_name} needs to run its own code ({entry_point}), and it is not trusted",
                             hint=self.trust_hint)
        module_name, _, attr = entry_point.partition(":")
        if self._namespace is None:
            self._namespace = _namespace_for(self.root)
        try:
            module = importlib.import_module(f"{self._namespace}.{module_name}")
        except ModuleNotFoundError as e:
            private = f"{self._namespace}."
            missing = (e.name or "").removeprefix(private)
            if e.name and e.name.startswith(private):
                raise ImportError(f"{self.env_name}: no module {missing!r} in the bundle at {self.root} "
                                  f"(entry point {entry_point})") from e
            raise ImportError(f"{self.env_name}: importing {module_name} failed: {e}; bundle code imports its own "
                              "modules relatively ('from . import x') and its dependencies must be installed") from e
        obj: Any = module
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise AttributeError(f"{self.env_name}: {module_name} has no attribute {attr!r} "
                                     f"(entry point {entry_point})") from None
        return obj


def code_entry_points(manifest: Any) -> list[str]:
    """Every entry point of the bundle's own code that the manifest names."""
    points: list[str] = []
    if manifest.tasks.generator and ":" in manifest.tasks.generator:  # else a plugin's named generator
        points.append(manifest.tasks.generator)
    points.extend(manifest.harness.tools)
    if manifest.harness.responder:
        points.append(manifest.harness.responder)
    verifier = manifest.verifier
    for v in getattr(verifier, "criteria", None) or ([verifier] if verifier else []):
        if v.kind == "python":
            points.append(v.entry_point)
    if manifest.state.kind == "python" and manifest.state.entry_point:
        points.append(manifest.state.entry_point)
    return points


def trusted_namespaces(config: dict[str, Any], config_file: Path) -> Sequence[str]:
    """``trusted-namespaces`` of the user config: namespaces whose bundles may run code."""
    from envhub.errors import UsageError

    value = config.get("trusted-namespaces", [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{config_file}: trusted-namespaces must be an array of namespaces",
                         hint='e.g. trusted-namespaces = ["acme", "envhub-examples"]')
    return value
