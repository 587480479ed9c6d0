"""``envhub.load``: from a bundle directory or an environment id to an :class:`Environment`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

# Only this, until the bundle is known not to shadow modules (see _shadow): everything else is
# imported inside the functions, after the check.
from envhub.runtime._shadow import refuse_shadowing

if TYPE_CHECKING:
    from pathlib import Path

    from envhub.manifest import Manifest
    from envhub.plugins import PluginManager
    from envhub.runtime._environment import Environment
    from envhub.settings import Settings

__all__ = ["load"]


def load(ref_or_path: str | os.PathLike[str], *, trust_code: bool = False, registry: str | None = None,
         with_heldout: bool = False, offline: bool | None = None, settings: Settings | None = None,
         locked: bool = True, plugins: PluginManager | None = None) -> Environment:
    """Load an environment from a bundle directory (or its ``envhub.toml``), or from an id
    (``acme/sql-shop``, ``acme/sql-shop@1.2.0``, ``acme/sql-shop>=1.2,<2``) pulled from the
    registry into the cache (or found there).

    The bundle's own code (tools, responder, python verifiers and state, generators) is
    imported only if it is trusted: ``trust_code=True``, or its namespace is listed in
    ``trusted-namespaces`` of ``$ENVHUB_HOME/config.toml``. Otherwise an environment that
    needs code raises :class:`envhub.errors.TrustError` saying how to trust it.

    Inside a project (a ``pyproject.toml`` with an ``envhub.lock`` beside it), an id the
    lock has loads the locked version, fetched by the lock's locator and verified against
    its digest; an id asking for another version is an error. ``locked=False``, or an
    explicit ``registry``, ignores the lock.

    A composite environment (``format = "mixture"``) loads its dependencies too: the
    locked versions inside a project, else the newest that fit its ``[dependencies]``.

    An id that an installed environment package provides (``envhub plugins`` lists them)
    loads from that package, when the id has no version or one the package satisfies, and
    neither a lock nor ``registry`` says otherwise. ``plugins`` (default: this process's
    plugin manager) provides installed environments and the kinds the manifest names.

    ``with_heldout`` also fetches held-out splits (the held-out store must grant access).
    Raises :class:`envhub.errors.EnvNotFoundError` for an unknown id or version,
    :class:`envhub.errors.ManifestError` for an invalid manifest, and
    :class:`envhub.errors.BundleError` if the bundle's code cannot be imported.

    An ``http://`` or ``https://`` URL (``http://HOST:PORT/NAMESPACE/NAME``) gives a
    :class:`envhub.runtime._remote.RemoteEnvironment` whose episodes run on that
    ``envhub serve`` server (the trust and registry arguments do not apply).
    """
    text = os.fspath(ref_or_path)
    local = os.path.expanduser(text)
    is_path = not text.startswith(("http://", "https://")) and (
        isinstance(ref_or_path, os.PathLike) or os.path.exists(local) or text.startswith((".", "/", "~")))
    if is_path and not trust_code:
        # Before anything else is imported: with the bundle on sys.path, an import below (or
        # anywhere later) could run one of its files.
        manifest_named = os.path.basename(local) == "envhub.toml" and os.path.isfile(local)  # MANIFEST_FILENAME
        refuse_shadowing(os.path.dirname(local) or os.curdir if manifest_named else local)
    from pathlib import Path

    from envhub._packages import find_installed
    from envhub.errors import InvalidIdError, UsageError
    from envhub.manifest import load_manifest
    from envhub.manifest import MANIFEST_FILENAME
    from envhub.settings import load_settings

    settings = settings or load_settings()
    if isinstance(ref_or_path, str) and ref_or_path.startswith(("http://", "https://")):
        from envhub.runtime._remote import load_remote

        return load_remote(ref_or_path, settings=settings)  # type: ignore[return-value]  # duck-compatible
    path = Path(local)
    if is_path:
        root = path.parent if path.name == MANIFEST_FILENAME and path.is_file() else path
        if not root.is_dir():
            raise UsageError(f"{text}: no such bundle directory",
                             hint="pass a directory with an envhub.toml, or an id such as acme/sql-shop@1.0.0")
        manifest = load_manifest(root, plugins=plugins)
        return _environment(manifest, root.resolve(), settings, trust_code=trust_code, with_heldout=with_heldout,
                            offline=settings.offline if offline is None else offline, plugins=plugins)
    from envhub.hub import pull
    from envhub.registry import load_registry_config

    offline = settings.offline if offline is None else offline
    try:
        config = load_registry_config(settings)
        locked = _locked(text, registry, locked)
        if locked is not None:
            result, url = _fetch_locked(*locked, settings, with_heldout=with_heldout, offline=offline)
        elif registry is None and (package := find_installed(text, plugins)) is not None:
            return _environment(load_manifest(package.path, plugins=plugins), package.path, settings,
                                trust_code=trust_code, offline=offline, plugins=plugins,
                                source=f"{package.name} installed by {package.distribution} "
                                       f"{package.distribution_version} at {package.path}")
        else:
            url = config.url(registry)
            # "if-any": held-out splits come along where there are some (a composite has none
            # of its own; a split that is missing says so when its tasks are asked for).
            result = pull(text, url, settings, with_heldout="if-any" if with_heldout else False,
                          heldout_url=config.heldout_url(), offline=offline)
    except InvalidIdError as e:
        reason = e.message.replace(f" in {text!r}", "").replace(f" {text!r}", "")  # name the input once
        raise UsageError(f"{text!r} is neither a bundle directory nor an environment id ({reason})",
                         hint="pass a directory with an envhub.toml, or an id such as acme/sql-shop@1.0.0") from e
    manifest = load_manifest(result.path, plugins=plugins)
    return _environment(manifest, result.path, settings, trust_code=trust_code, heldout_root=result.heldout_path,
                        digest=result.entry.digest, source=f"{result.entry.ref} from {url}",
                        locator=result.entry.locator, with_heldout=with_heldout, offline=offline, plugins=plugins)


def _locked(text: str, registry: str | None, locked: bool) -> tuple[Any, Path] | None:
    """The project lock's entry for ``text``, unless told not to use the lock (``locked``
    false, or an explicit ``registry``)."""
    if not locked or registry is not None:
        return None
    from envhub.project import locked_for

    return locked_for(text)


def _fetch_locked(env: Any, lock_path: Path, settings: Settings, *, with_heldout: bool, offline: bool) -> tuple[Any, str]:
    """Fetch exactly what the lock records: its version from its registry, by its
    locator, verified against its digest; the registry's index is not asked."""
    from envhub.hub import fetch
    from envhub.project import locked_entry

    entry = locked_entry(env, settings)
    result = fetch(entry, entry.registry, settings, with_heldout="if-any" if with_heldout else False,
                   heldout_url=settings.heldout_store, offline=offline)
    return result, f"{entry.registry} (locked in {lock_path})"


def _environment(manifest: Manifest, root: Path, settings: Settings, *, trust_code: bool,
                 heldout_root: Path | None = None, digest: str | None = None, source: str | None = None,
                 locator: str | None = None, with_heldout: bool = False, offline: bool = False,
                 plugins: PluginManager | None = None, parents: tuple[Path, ...] = ()) -> Environment:
    from envhub.errors import BundleError, EnvhubError, TrustError
    from envhub.runtime._code import CodeSpace, code_entry_points
    from envhub.runtime._environment import Environment

    if manifest.tasks.format == "mixture":
        from envhub.runtime._composite import CompositeEnvironment

        children = _children(manifest, root, settings, trust_code=trust_code, with_heldout=with_heldout,
                             offline=offline, plugins=plugins, parents=parents)
        return CompositeEnvironment(manifest, root, children, digest=digest, source=source,  # type: ignore[return-value]
                                    locator=locator)
    if not trust_code:  # a pulled or installed bundle, or a composite's child, may be on sys.path too
        refuse_shadowing(root)
    name = manifest.environment.name
    needs_code = code_entry_points(manifest)
    trusted = trust_code or (bool(needs_code) and _namespace_trusted(name, settings))
    namespace = name.split("/")[0]
    hint = (f"pass --trust (envhub eval, validate --check) or trust_code=True (envhub.load), or add "
            f"\"{namespace}\" to trusted-namespaces in {settings.config_file}; only trust code you have read "
            "or whose author you trust")
    code = CodeSpace(root, name, trusted=trusted, trust_hint=hint)
    if needs_code and not trusted:
        shown = ", ".join(needs_code[:3]) + (", ..." if len(needs_code) > 3 else "")
        raise TrustError(f"{name} runs its own code ({shown}), and it is not trusted", hint=hint)
    try:
        return Environment(manifest, root, code=code, heldout_root=heldout_root, digest=digest, source=source,
                           locator=locator, plugins=plugins)
    except EnvhubError:
        raise
    except (ImportError, AttributeError, TypeError, SyntaxError, FileNotFoundError) as e:
        # The bundle's code or files are broken: report it as the bundle's problem.
        raise BundleError(f"{name}: cannot load the environment: {e}", [],
                          hint="fix the bundle, then check it with 'envhub validate --check --trust'") from e


def _children(manifest: Manifest, root: Path, settings: Settings, *, trust_code: bool, with_heldout: bool,
              offline: bool, plugins: PluginManager | None, parents: tuple[Path, ...] = ()) -> dict[str, Environment]:
    """The environments a composite mixes: a path dependency from its directory (when the
    composite itself was read from a directory, ``parents`` holding the composites above
    it), the rest at the project lock's versions if it has them, else the newest versions
    that fit ``[dependencies]`` (resolved together)."""
    from envhub.errors import BundleError
    from envhub.hub import fetch
    from envhub.manifest import load_manifest
    from envhub.manifest import local_dependencies
    from envhub.project import RegistryIndex, find_project, locked_entry, locked_for, registry_urls
    from envhub.project._resolver import Requirement, _specifier, resolve

    splits = manifest.tasks.splits.values()
    used = {part.env for split in splits for part in split.mixture or ()}
    # Held-out child splits are fetched only for held-out composite splits (validated to match).
    heldout = {part.env for split in splits if split.held_out for part in split.mixture or ()} if with_heldout else set()
    # A published manifest has no paths (envhub build pins them), so only a directory's can.
    local = {n: d for n, d in local_dependencies(manifest, root, plugins=plugins).items() if n in used}
    children = {}
    for name, dependency in sorted(local.items()):
        if dependency.root in (*parents, root):
            chain = " -> ".join(str(p) for p in (*parents, root, dependency.root))
            raise BundleError(f"{manifest.environment.name}: path dependency cycle: {chain}", [],
                              hint="an environment cannot depend on itself, directly or through others; "
                                   "remove one of these path dependencies")
        children[name] = _environment(dependency.manifest, dependency.root, settings, trust_code=trust_code,
                                      source=f"{name} {dependency.version} at {dependency.root}",
                                      with_heldout=with_heldout, offline=offline, plugins=plugins,
                                      parents=(*parents, root))
    specs = {n: "" if s.strip() in ("", "*") else s for n, s in manifest.dependency_specifiers().items()}  # "*": any
    entries = {}
    for name in sorted(used - set(local)):
        locked = locked_for(f"{name}{specs[name]}")
        if locked is not None:
            entries[name] = locked_entry(locked[0], settings)
    missing = [Requirement(n, _specifier(specs[n])) for n in sorted(used - set(local)) if n not in entries]
    if missing:
        index = RegistryIndex(registry_urls(find_project(), settings), settings, offline=offline)
        pins = resolve(missing, index).pins
        entries.update({r.name: pins[r.name] for r in missing})
    for name, entry in entries.items():
        result = fetch(entry, entry.registry, settings, with_heldout=name in heldout and entry.heldout_digest is not None,
                       heldout_url=settings.heldout_store, offline=offline)
        children[name] = _environment(load_manifest(result.path, plugins=plugins), result.path, settings,
                                      trust_code=trust_code, heldout_root=result.heldout_path, digest=entry.digest,
                                      source=f"{entry.ref} from {entry.registry}", locator=entry.locator,
                                      with_heldout=with_heldout, offline=offline, plugins=plugins)
    return children


def _namespace_trusted(name: str, settings: Settings) -> bool:
    from envhub.registry._config import _read_toml
    from envhub.runtime._code import trusted_namespaces

    config = _read_toml(settings.config_file)
    return name.split("/")[0] in trusted_namespaces(config, settings.config_file)
