"""``envhub.load``: from a bundle directory, an environment id or a served URL to a loaded
environment, through the registries, the cache, the project's lock and the installed
environment packages.

This is the application layer: it knows where environments come from (``envhub.hub``,
``envhub.project``) and hands the runtime a manifest and a directory. The runtime itself
knows nothing of registries, projects or locks.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

# Only this, until the bundle is known not to shadow modules: everything else is imported
# inside the functions, after the check (a bundle directory on sys.path could otherwise run
# one of its files in place of a module imported here).
from envhub.runtime import refuse_shadowing

if TYPE_CHECKING:
    from pathlib import Path

    from envhub.context import Context
    from envhub.manifest import Manifest
    from envhub.project import LockedEnv
    from envhub.runtime import CompositeEnvironment, Environment, EnvironmentProtocol

__all__ = ["is_bundle_path", "load"]

_BUNDLE_HINT = "pass a directory with an envhub.toml, or an id such as acme/sql-shop@1.0.0"


def is_bundle_path(target: str | os.PathLike[str]) -> bool:
    """Whether a ``PATH|REF`` argument names a bundle directory (or its ``envhub.toml``)
    rather than an environment id or a served URL: a path object, an existing path, text
    starting with ``.``, ``/`` or ``~``, or a word with no ``/`` (an id always has a
    namespace). ``envhub.load``, ``envhub eval`` and ``envhub info`` all use this rule.

    >>> is_bundle_path("./my-env"), is_bundle_path("acme/sql-shop@1.0"), is_bundle_path("my-env")
    (True, False, True)
    >>> is_bundle_path("http://127.0.0.1:8000/acme/env")
    False
    """
    if isinstance(target, os.PathLike):
        return True
    if target.startswith(("http://", "https://")):
        return False
    return target.startswith((".", "/", "~")) or "/" not in target or os.path.exists(os.path.expanduser(target))


def load(ref_or_path: str | os.PathLike[str], *, context: Context | None = None, trust_code: bool = False,
         registry: str | None = None, with_heldout: bool = False, offline: bool | None = None,
         locked: bool = True) -> EnvironmentProtocol:
    """Load an environment from a bundle directory (or its ``envhub.toml``), or from an id
    (``acme/sql-shop``, ``acme/sql-shop@1.2.0``, ``acme/sql-shop>=1.2,<2``) pulled from the
    registry into the cache (or found there).

    What it returns satisfies :class:`envhub.EnvironmentProtocol`: a
    :class:`envhub.runtime.Environment`, a :class:`envhub.runtime.CompositeEnvironment`
    (``format = "mixture"``) or a :class:`envhub.runtime.RemoteEnvironment` (a URL).

    ``context`` (:class:`envhub.context.Context`) gives the settings, the plugins (which
    provide installed environments and the kinds the manifest names), the registry
    configuration and the project; without one, :meth:`Context.create` makes one for this
    call. Pass one context to many loads to read the environment, the plugins and the
    project once.

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
    neither a lock nor ``registry`` says otherwise.

    ``with_heldout`` also fetches held-out splits (the held-out store must grant access).
    Raises :class:`envhub.errors.EnvNotFoundError` for an unknown id or version,
    :class:`envhub.errors.ManifestError` for an invalid manifest, and
    :class:`envhub.errors.BundleError` if the bundle's code cannot be imported.

    An ``http://`` or ``https://`` URL (``http://HOST:PORT/NAMESPACE/NAME``) gives a
    :class:`envhub.runtime.RemoteEnvironment` whose episodes run on that ``envhub serve``
    server (the trust and registry arguments do not apply).
    """
    text = os.fspath(ref_or_path)
    local = os.path.expanduser(text)
    is_path = is_bundle_path(ref_or_path)
    if is_path and not trust_code:
        # Before anything else is imported: with the bundle on sys.path, an import below (or
        # anywhere later) could run one of its files.
        manifest_named = os.path.basename(local) == "envhub.toml" and os.path.isfile(local)  # MANIFEST_FILENAME
        refuse_shadowing(os.path.dirname(local) or os.curdir if manifest_named else local)
    from pathlib import Path

    from envhub.context import Context
    from envhub.errors import InvalidIdError, UsageError
    from envhub.manifest import MANIFEST_FILENAME, load_manifest

    context = context if context is not None else Context.create()
    settings, plugins = context.settings, context.plugins
    offline = settings.offline if offline is None else offline
    if text.startswith(("http://", "https://")):
        from envhub.runtime import load_remote

        return load_remote(text, settings=settings)
    if is_path:
        path = Path(local)
        root = path.parent if path.name == MANIFEST_FILENAME and path.is_file() else path
        if not root.is_dir():
            raise UsageError(f"{text}: no such bundle directory", hint=_BUNDLE_HINT)
        manifest = load_manifest(root, plugins=plugins)
        return _environment(manifest, root.resolve(), context, trust_code=trust_code, with_heldout=with_heldout,
                            offline=offline)
    from envhub._packages import find_installed
    from envhub.hub import pull

    try:
        locked_env = _locked(text, context) if locked and registry is None else None
        if locked_env is not None:
            result, url = _fetch_locked(*locked_env, context, with_heldout=with_heldout, offline=offline)
        elif registry is None and (package := find_installed(text, plugins)) is not None:
            assert package.path is not None  # find_installed returns only a package with a bundle directory
            return _environment(load_manifest(package.path, plugins=plugins), package.path, context,
                                trust_code=trust_code, offline=offline,
                                source=f"{package.name} installed by {package.distribution} "
                                       f"{package.distribution_version} at {package.path}")
        else:
            url = context.registry_url(registry)
            # "if-any": held-out splits come along where there are some (a composite has none
            # of its own; a split that is missing says so when its tasks are asked for).
            result = pull(text, url, settings, with_heldout="if-any" if with_heldout else False,
                          heldout_url=context.registry_config.heldout_url(), offline=offline, plugins=plugins)
    except InvalidIdError as e:
        reason = e.message.replace(f" in {text!r}", "").replace(f" {text!r}", "")  # name the input once
        raise UsageError(f"{text!r} is neither a bundle directory nor an environment id ({reason})",
                         hint=_BUNDLE_HINT) from e
    manifest = load_manifest(result.path, plugins=plugins)
    return _environment(manifest, result.path, context, trust_code=trust_code, heldout_root=result.heldout_path,
                        digest=result.entry.digest, source=f"{result.entry.ref} from {url}",
                        locator=result.entry.locator, with_heldout=with_heldout, offline=offline)


def _locked(text: str, context: Context) -> tuple[LockedEnv, Path] | None:
    """The project lock's entry for ``text`` and the lock's path, from the lock the context
    read once; None outside a project, without a lock, or for a name it does not have."""
    if context.project is None or context.lock is None:
        return None
    path = context.project.lock_path
    env = context.lock.locked_for(text, path=path)
    return (env, path) if env is not None else None


def _fetch_locked(env: LockedEnv, lock_path: Path, context: Context, *, with_heldout: bool,
                  offline: bool) -> tuple[Any, str]:
    """Fetch exactly what the lock records: its version from its registry, by its
    locator, verified against its digest; the registry's index is not asked."""
    from envhub.hub import fetch
    from envhub.project import locked_entry

    settings = context.settings
    entry = locked_entry(env, settings)
    result = fetch(entry, entry.registry, settings, with_heldout="if-any" if with_heldout else False,
                   heldout_url=settings.heldout_store, offline=offline, plugins=context.plugins)
    return result, f"{entry.registry} (locked in {lock_path})"


def _environment(manifest: Manifest, root: Path, context: Context, *, trust_code: bool,
                 heldout_root: Path | None = None, digest: str | None = None, source: str | None = None,
                 locator: str | None = None, with_heldout: bool = False, offline: bool = False,
                 parents: tuple[Path, ...] = ()) -> Environment | CompositeEnvironment:
    from envhub.errors import BundleError, EnvhubError, TrustError
    from envhub.runtime import CodeSpace, CompositeEnvironment, Environment, code_entry_points

    settings = context.settings
    if manifest.tasks.format == "mixture":
        children = _children(manifest, root, context, trust_code=trust_code, with_heldout=with_heldout,
                             offline=offline, parents=parents)
        return CompositeEnvironment(manifest, root, children, plugins=context.plugins, digest=digest, source=source,
                                    locator=locator)
    if not trust_code:  # a pulled or installed bundle, or a composite's child, may be on sys.path too
        refuse_shadowing(root)
    name = manifest.environment.name
    needs_code = code_entry_points(manifest)
    trusted = trust_code or (bool(needs_code) and _namespace_trusted(name, context))
    namespace = name.split("/")[0]
    hint = (f"pass --trust (envhub eval, validate --check) or trust_code=True (envhub.load), or add "
            f"\"{namespace}\" to trusted-namespaces in {settings.config_file}; only trust code you have read "
            "or whose author you trust")
    code = CodeSpace(root, name, trusted=trusted, trust_hint=hint)
    if needs_code and not trusted:
        shown = ", ".join(needs_code[:3]) + (", ..." if len(needs_code) > 3 else "")
        raise TrustError(f"{name} runs its own code ({shown}), and it is not trusted", hint=hint)
    if needs_code and manifest.environment.python_dependencies:
        # Before the bundle's code is imported: a missing dependency would otherwise fail
        # inside a tool call, mid-episode, as the model's "Error: ..." (or the import below).
        _check_python_dependencies(manifest, root, context)
    try:
        return Environment(manifest, root, code=code, heldout_root=heldout_root, digest=digest, source=source,
                           locator=locator, settings=settings, plugins=context.plugins)
    except EnvhubError:
        raise
    except (ImportError, AttributeError, TypeError, SyntaxError, FileNotFoundError) as e:
        # The bundle's code or files are broken: report it as the bundle's problem.
        raise BundleError(f"{name}: cannot load the environment: {e}", [],
                          hint="fix the bundle, then check it with 'envhub validate --check --trust'") from e


def _check_python_dependencies(manifest: Manifest, root: Path, context: Context) -> None:
    """Raise :class:`BundleError` naming each of the manifest's ``python-dependencies``
    this interpreter does not satisfy, and how to install them."""
    import shlex

    from envhub.errors import BundleError, EnvhubError
    from envhub.manifest import MANIFEST_FILENAME
    from envhub.project import install_command, unsatisfied_requirements

    missing = unsatisfied_requirements(manifest.environment.python_dependencies)
    if not missing:
        return
    name = manifest.environment.name
    listed = "; ".join(f"{requirement} ({why})" for requirement, why in missing.items())
    hint = f"install them into this Python: {shlex.join(install_command(list(missing)))}"
    try:
        in_project = context.project is not None
    except EnvhubError:  # a broken pyproject.toml is not what this error is about
        in_project = False
    if in_project:
        hint += " (or, for the environments in the project's lock: envhub sync --install-python-deps)"
    raise BundleError(f"{name}: its code needs Python distributions this interpreter lacks "
                      f"([environment] python-dependencies in {root / MANIFEST_FILENAME}): {listed}", [], hint=hint)


def _children(manifest: Manifest, root: Path, context: Context, *, trust_code: bool, with_heldout: bool,
              offline: bool, parents: tuple[Path, ...] = ()) -> dict[str, Environment | CompositeEnvironment]:
    """The environments a composite mixes: a path dependency from its directory (when the
    composite itself was read from a directory, ``parents`` holding the composites above
    it), the rest at the project lock's versions if it has them, else the newest versions
    that fit ``[dependencies]`` (resolved together)."""
    from envhub.errors import BundleError
    from envhub.hub import fetch
    from envhub.ids import parse_specifier
    from envhub.manifest import load_manifest, local_dependencies
    from envhub.project import RegistryIndex, Requirement, locked_entry, registry_urls, resolve

    settings, plugins = context.settings, context.plugins
    splits = manifest.tasks.splits.values()
    used = {part.env for split in splits for part in split.mixture or ()}
    # Held-out child splits are fetched only for held-out composite splits (validated to match).
    heldout = ({part.env for split in splits if split.held_out for part in split.mixture or ()}
               if with_heldout else set())
    # A published manifest has no paths (envhub build pins them), so only a directory's can.
    local = {n: d for n, d in local_dependencies(manifest, root, plugins=plugins).items() if n in used}
    children: dict[str, Environment | CompositeEnvironment] = {}
    for name, dependency in sorted(local.items()):
        if dependency.root in (*parents, root):
            chain = " -> ".join(str(p) for p in (*parents, root, dependency.root))
            raise BundleError(f"{manifest.environment.name}: path dependency cycle: {chain}", [],
                              hint="an environment cannot depend on itself, directly or through others; "
                                   "remove one of these path dependencies")
        children[name] = _environment(dependency.manifest, dependency.root, context, trust_code=trust_code,
                                      source=f"{name} {dependency.version} at {dependency.root}",
                                      with_heldout=with_heldout, offline=offline, parents=(*parents, root))
    specs = {n: "" if s.strip() in ("", "*") else s for n, s in manifest.dependency_specifiers().items()}  # "*": any
    entries = {}
    for name in sorted(used - set(local)):
        locked = _locked(f"{name}{specs[name]}", context)
        if locked is not None:
            entries[name] = locked_entry(locked[0], settings)
    missing = [Requirement(n, parse_specifier(specs[n])) for n in sorted(used - set(local)) if n not in entries]
    if missing:
        index = RegistryIndex(registry_urls(context.project, settings), settings, plugins=plugins, offline=offline)
        pins = resolve(missing, index).pins
        entries.update({r.name: pins[r.name] for r in missing})
    for name, entry in entries.items():
        result = fetch(entry, entry.registry, settings,
                       with_heldout=name in heldout and entry.heldout_digest is not None,
                       heldout_url=settings.heldout_store, offline=offline, plugins=plugins)
        children[name] = _environment(load_manifest(result.path, plugins=plugins), result.path, context,
                                      trust_code=trust_code, heldout_root=result.heldout_path, digest=entry.digest,
                                      source=f"{entry.ref} from {entry.registry}", locator=entry.locator,
                                      with_heldout=with_heldout, offline=offline)
    return children


def _namespace_trusted(name: str, context: Context) -> bool:
    from envhub._toml import load_file
    from envhub.runtime import trusted_namespaces

    config_file = context.settings.config_file
    return name.split("/")[0] in trusted_namespaces(load_file(config_file), config_file)
