"""Which registry a command uses: ``--registry``, ``ENVHUB_REGISTRY``, named registries in
a project's ``pyproject.toml`` (``[tool.envhub.registries]``) and in the user config file
(``$ENVHUB_HOME/config.toml``, ``[registries]``), else the embedded default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envhub._toml import find_pyproject, load_file
from envhub.errors import UsageError
from envhub.settings import Settings

__all__ = ["RegistryConfig", "load_registry_config"]


class RegistryConfig:
    """Named registries and the default one, merged from the user and the project."""

    def __init__(self, settings: Settings, named: dict[str, str], default: str | None, sources: list[str]) -> None:
        self.settings = settings
        self.named = named
        self.default = default
        self.sources = sources

    def url(self, choice: str | None = None) -> str:
        """The URL for ``--registry``'s value (a name or URL), falling back to
        ``ENVHUB_REGISTRY``, the configured default, then the embedded registry."""
        value = choice or self.settings.registry or self.default
        if value is None:
            return self.settings.default_registry
        if value in self.named:
            return self.named[value]
        if "://" in value or "/" in value or value.startswith((".", "~")):
            return str(Path(value).expanduser()) if "://" not in value else value
        known = ", ".join(sorted(self.named)) or "none"
        raise UsageError(f"no registry named {value!r} (named registries: {known})",
                         hint="name a URL (s3://..., file://...) or a directory (./dir), or add the name under "
                              f"[registries] in {self.settings.config_file}")

    def heldout_url(self) -> str:
        return self.settings.heldout_store or self.settings.default_heldout_store


def load_registry_config(settings: Settings, *, cwd: Path | None = None) -> RegistryConfig:
    named: dict[str, str] = {}
    default: str | None = None
    sources = []
    user = load_file(settings.config_file)
    if user:
        sources.append(str(settings.config_file))
        named.update(_table(user.get("registries", {}), settings.config_file, "registries"))
        default = user.get("default-registry", default)
    project = find_pyproject((cwd or Path.cwd()).resolve())
    if project is not None:
        tool = load_file(project).get("tool", {}).get("envhub", {})
        if tool:
            sources.append(str(project))
            named.update(_table(tool.get("registries", {}), project, "tool.envhub.registries"))
            default = tool.get("default-registry", default)
    return RegistryConfig(settings, named, default, sources)


def _table(value: Any, path: Path, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise UsageError(f"{path}: [{where}] must map names to URLs", hint='e.g. team = "s3://bucket/envs"')
    return dict(value)
