#!/usr/bin/env python3
"""Set up, demo and test envhub with nothing but Python 3.11 or newer.

    python3 dev.py demo           set up .venv for the demo if needed, then run the main job
    python3 dev.py test [ARGS]    set up .venv for development if needed, then run the whole test suite
    python3 dev.py test --fast    the same without the slow tests, on every core (under a minute)
    python3 dev.py setup [demo]   only set up .venv for development (or, with ``demo``, the demo's set)
    python3 dev.py lock           refresh the locks in requirements/ from the pyproject.toml files
    python3 dev.py lock --upgrade the same, taking the newest release of every dependency

Set-up creates ``.venv`` with the standard library, installs a pinned uv into it with pip, and
installs the locked dependencies (requirements/demo.txt or requirements/dev.txt, exact versions
with hashes, nothing re-resolved) and this repository's three distributions, editable. It
reinstalls only when a pyproject.toml or a lock changed, and it recreates a ``.venv`` made by
another Python. Without uv it falls back to pip, slower, with the same locks.
docs/development.md says more.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

#: The oldest Python the project supports (requires-python in pyproject.toml), which CI runs.
REQUIRED_PYTHON = (3, 11)

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
LOCKS = ROOT / "requirements"
#: The uv that installs the locks; requirements/uv.txt pins it with hashes.
UV_VERSION = "0.13.9"
#: This repository's distributions, installed editable on top of a lock: envhub itself, the
#: registry service, and the first-party reasoning-gym plugin; the dev set adds the Ray
#: executor plugin (Ray is large, and the demo does not use it).
EDITABLE = {
    "demo": [".", "./registry", "./plugins/envhub-reasoning-gym"],
    "dev": [".", "./registry", "./plugins/envhub-reasoning-gym", "./plugins/envhub-ray"],
}
#: What each lock is compiled from. ``demo`` is what the demo runs on (the three
#: distributions' runtime dependencies); ``dev`` adds the ``dev`` extra (tests, linters).
LOCK_INPUTS = {
    "dev": ["-e .[dev]", "-e ./registry", "-e ./plugins/envhub-reasoning-gym", "-e ./plugins/envhub-ray"],
    "demo": ["-e .[mcp]", "-e ./registry", "-e ./plugins/envhub-reasoning-gym"],
}
#: Pins a dependency's own metadata gets wrong, overridden when locking (uv's --override; the
#: file says why for each): verifiers' mcp pin and openreward's sse-starlette pin, both in the
#: dev set for tests against those peers' own code.
OVERRIDES = LOCKS / "overrides.txt"
#: The sets a set-up of each kind leaves installed (the dev lock holds the demo's packages too).
COVERS = {"dev": ["demo", "dev"], "demo": ["demo"]}


def check_python(version: Sequence[int] = tuple(sys.version_info)) -> str | None:
    """None when ``version`` (major, minor, ...) is new enough; else what to tell the user."""
    if tuple(version[:2]) >= REQUIRED_PYTHON:
        return None
    found = ".".join(str(part) for part in version[:3])
    needed = ".".join(str(part) for part in REQUIRED_PYTHON)
    return (f"dev.py: this is Python {found}; envhub needs Python {needed} or newer.\n"
            f"Run it with a newer interpreter, e.g. `python{needed} dev.py demo`, or install Python {needed} "
            f"(your package manager, pyenv or python.org) and try again.")


def venv_python(venv_dir: Path) -> tuple[int, int] | None:
    """The (major, minor) version of the Python that made the venv at ``venv_dir``, from its
    pyvenv.cfg; None when there is no venv there or the file does not say."""
    try:
        lines = (venv_dir / "pyvenv.cfg").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() in ("version", "version_info"):
            parts = value.strip().split(".")
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                return int(parts[0]), int(parts[1])
    return None


def stale_venv(venv_dir: Path, version: Sequence[int] = tuple(sys.version_info)) -> str | None:
    """Why the venv at ``venv_dir`` must be made anew for this Python, or None if it can stay
    (or there is none)."""
    if not venv_dir.exists():
        return None
    made_by = venv_python(venv_dir)
    if made_by is None:
        return f"{venv_dir} is not a virtual environment this script can read (no version in pyvenv.cfg)"
    if made_by != tuple(version[:2]):
        return (f"{venv_dir} was made by Python {made_by[0]}.{made_by[1]}, "
                f"this is Python {version[0]}.{version[1]}")
    return None


def _bin(venv_dir: Path = VENV) -> Path:
    return venv_dir / ("Scripts" if os.name == "nt" else "bin")


def _fingerprint() -> str:
    digest = hashlib.sha256()
    sources = [p for p in ROOT.glob("**/pyproject.toml") if ".venv" not in p.parts and ".envhub-dev" not in p.parts]
    for path in sorted([*sources, *LOCKS.glob("*.txt")]):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update("\0".join([*EDITABLE["dev"], UV_VERSION]).encode())
    return digest.hexdigest()


def _run(*args: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None, check: bool = True) -> int:
    print("+", " ".join(str(a) for a in args), flush=True)
    code = subprocess.call([str(a) for a in args], cwd=cwd, env=env)
    if code != 0 and check:
        sys.exit(code)
    return code


def _require_python() -> None:
    problem = check_python()
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(2)


def _create_venv() -> None:
    reason = stale_venv(VENV)
    if reason:
        print(f"dev.py: {reason}: making it anew", flush=True)
        shutil.rmtree(VENV)
    if not (_bin() / "python").exists():
        print(f"dev.py: creating {VENV}", flush=True)
        # Without pip: bootstrapping pip into it takes seconds, and uv installs everything. pip
        # is added only if uv cannot be had (_ensure_pip).
        venv.EnvBuilder(with_pip=False, clear=True).create(VENV)


def _ensure_pip() -> None:
    """pip in the venv, for the fallback when uv cannot be installed."""
    python = _bin() / "python"
    if subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True).returncode != 0:
        _run(python, "-m", "ensurepip", "--default-pip")


def _uv_env() -> dict[str, str]:
    """The environment for uv: the package index and certificates pip is configured with (in
    pip.conf or PIP_* variables), so uv reaches the same index pip does. pip's extra indexes
    are left out: uv would prefer them to the main index, and the locks' hashes are the main
    index's files."""
    env = dict(os.environ)
    # This interpreter's pip reads the same configuration files the venv's would.
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    config = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        config[key.rpartition(".")[2]] = value.strip().strip("'\"")
    if config.get("index-url") and "UV_INDEX_URL" not in env and "UV_DEFAULT_INDEX" not in env:
        env["UV_DEFAULT_INDEX"] = config["index-url"]
    if config.get("cert") and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = config["cert"]
    return env


def _install_uv() -> Path | None:
    """The venv's uv, installed with pip from requirements/uv.txt when missing or not the pinned
    version; None (and a message) when pip could not install it."""
    uv = _bin() / ("uv.exe" if os.name == "nt" else "uv")
    if uv.exists():
        version = subprocess.run([str(uv), "--version"], capture_output=True, text=True).stdout.split()
        if version[1:2] == [UV_VERSION]:
            return uv
    pinned = LOCKS / "uv.txt"
    source = ["--require-hashes", "-r", pinned.relative_to(ROOT)] if pinned.exists() else [f"uv=={UV_VERSION}"]
    # This interpreter's pip installs uv into the venv (pip's --python, pip 22.3 and newer), so
    # the venv needs no pip of its own; an older or missing pip: the venv's own, bootstrapped.
    if _run(sys.executable, "-m", "pip", "--python", _bin() / "python", "install", "--no-deps", *source,
            check=False) == 0 and uv.exists():
        return uv
    _ensure_pip()
    if _run(_bin() / "python", "-m", "pip", "install", "--no-deps", *source, check=False) == 0 and uv.exists():
        return uv
    print(f"dev.py: could not install uv {UV_VERSION} with pip; installing with pip instead (slower)", flush=True)
    return None


def setup(kind: str = "demo") -> None:
    """Make ``.venv`` hold the ``kind`` set ("demo" or "dev") and this repository's distributions."""
    _require_python()
    _create_venv()
    stamp = VENV / ".envhub-dev-stamp"
    fingerprint = _fingerprint()
    try:
        done = json.loads(stamp.read_text())
    except (OSError, ValueError):
        done = {}
    if done.get("fingerprint") == fingerprint and kind in done.get("sets", []):
        return
    python = _bin() / "python"
    lock = (LOCKS / f"{kind}.txt").relative_to(ROOT)
    editable = [a for spec in EDITABLE[kind] for a in ("-e", spec)]
    uv = _install_uv()
    if uv is not None:
        env = _uv_env()
        # Not compiled to bytecode at install (that took longer than everything else): a module
        # is compiled when first imported, as uv intends.
        _run(uv, "pip", "install", "--python", python, "--no-deps", "--require-hashes", "-r", lock, env=env)
        _run(uv, "pip", "install", "--python", python, "--no-deps", *editable, env=env)
        _compile_warning_sources(python)
    else:
        _ensure_pip()
        _run(python, "-m", "pip", "install", "--no-deps", "--require-hashes", "-r", lock)
        _run(python, "-m", "pip", "install", "--no-deps", *editable)
    stamp.write_text(json.dumps({"fingerprint": fingerprint, "sets": COVERS[kind]}))


#: Installed packages whose source makes the compiler warn (cellpylib, a reasoning-gym
#: dependency, compares with "is" and a literal): compiled at set-up with the warning silenced,
#: else the first command that imports them prints SyntaxWarnings on its stderr.
WARNING_SOURCES = ["cellpylib"]


def _compile_warning_sources(python: Path) -> None:
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    present = [str(Path(purelib) / name) for name in WARNING_SOURCES if (Path(purelib) / name).is_dir()]
    if present:
        _run(python, "-W", "ignore::SyntaxWarning", "-m", "compileall", "-q", *present)


def lock() -> None:
    """Compile requirements/{dev,demo,uv}.txt: exact versions with hashes, for every platform
    and Python 3.11 and newer. Pins already in a lock are kept unless ``--upgrade`` is given."""
    _require_python()
    _create_venv()
    uv = _install_uv()
    if uv is None:
        sys.exit(1)
    LOCKS.mkdir(exist_ok=True)
    local = ["envhub-rl", "envhub-registry", "envhub-reasoning-gym", "envhub-ray"]
    common = ["pip", "compile", "-", "--universal", "--override", str(OVERRIDES.relative_to(ROOT)),
              "--python-version", ".".join(map(str, REQUIRED_PYTHON)), "--generate-hashes", "--no-config",
              "--custom-compile-command", "python3 dev.py lock",
              *(a for name in local for a in ("--no-emit-package", name)), *sys.argv[2:]]
    env = _uv_env()
    # The dev lock first; the demo's is constrained by it, so the two agree on every version.
    for kind, extra in [("dev", []), ("demo", ["-c", "requirements/dev.txt"])]:
        print(f"+ uv {' '.join([*common, *extra])} -o requirements/{kind}.txt < {LOCK_INPUTS[kind]}", flush=True)
        _compile([str(uv), *common, *extra, "-o", f"requirements/{kind}.txt"], LOCK_INPUTS[kind], env)
    _compile([str(uv), *common, "-o", "requirements/uv.txt"], [f"uv=={UV_VERSION}"], env)


def _compile(command: list[str], requirements: list[str], env: dict[str, str]) -> None:
    # uv also prints the lock it writes: only its messages (stderr) are shown.
    done = subprocess.run(command, cwd=ROOT, env=env, input="\n".join(requirements) + "\n", text=True,
                          stdout=subprocess.DEVNULL)
    if done.returncode != 0:
        sys.exit(done.returncode)


def demo() -> None:
    """The main job, on the embedded default registry. For each example environment
    (dependencies first): validate and self-test it, push it, pull it back by id, show its
    info from the registry, and evaluate the pulled environment on its dev split with the
    reference policy. Then a curriculum run on a procedural environment, an environment from
    the reasoning-gym plugin, and a training project that declares the examples as
    dependencies (envhub add), locks and syncs them.

    ENVHUB_HOME and ENVHUB_CACHE point into .envhub-dev/ (unless already set), so the demo
    leaves your own registry alone; nothing needs a network or an account. The examples are
    this repository's own code, so the demo trusts them (--trust); an environment scored by
    an LLM judge is self-tested and evaluated only when OPENAI_BASE_URL names a judge."""
    setup("demo")
    os.environ.setdefault("ENVHUB_HOME", str(ROOT / ".envhub-dev" / "home"))
    os.environ.setdefault("ENVHUB_CACHE", str(ROOT / ".envhub-dev" / "cache"))
    envhub = _bin() / "envhub"
    runs = ROOT / ".envhub-dev" / "runs"
    examples = _in_dependency_order(p for p in (ROOT / "example_envs").iterdir() if (p / "envhub.toml").exists())
    for example, manifest in examples:
        name = manifest["environment"]["name"]
        bundle = example.relative_to(ROOT)
        judged = _needs_judge(manifest) and not os.environ.get("OPENAI_BASE_URL")
        if judged:
            print(f"-- {name} is scored by an LLM judge: set OPENAI_BASE_URL to self-test and evaluate it", flush=True)
            _run(envhub, "validate", "--strict", bundle)
        else:
            _run(envhub, "validate", "--strict", "--check", "--trust", bundle)
        _run(envhub, "push", bundle)
        _run(envhub, "pull", name)
        _run(envhub, "info", name)
        if not judged:
            _run(envhub, "eval", name, "--split", "dev", "--policy", "reference", "--trust",
                 "-o", _fresh(runs / f"{name.replace('/', '--')}.dev.reference.jsonl"))
    # A curriculum over an unbounded generator: the reference policy is promoted level by level.
    _run(envhub, "eval", "envhub-examples/number-sequences", "--split", "train", "--curriculum", "-n", "128",
         "-c", "8", "--policy", "reference", "--trust", "-o", _fresh(runs / "number-sequences.curriculum.jsonl"))
    # An environment an installed plugin provides: a reasoning-gym dataset.
    _run(envhub, "eval", "reasoning-gym/basic-arithmetic", "--split", "dev", "--policy", "reference", "-n", "20",
         "-o", _fresh(runs / "reasoning-gym--basic-arithmetic.dev.reference.jsonl"))
    # A training project depends on them: declare, lock, sync as CI would, show the tree.
    project = ROOT / ".envhub-dev" / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "demo-trainer"\nversion = "0.1.0"\n\n[tool.envhub]\nenvironments = []\n')
    (project / "envhub.lock").unlink(missing_ok=True)
    for _, manifest in examples:
        _run(envhub, "add", manifest["environment"]["name"], cwd=project)
    _run(envhub, "sync", "--locked", cwd=project)
    _run(envhub, "tree", cwd=project)


def _in_dependency_order(bundles: Iterable[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """The example bundles and their manifests, each after the examples it depends on (a
    composite's children must be in the registry before it is checked)."""
    import tomllib  # here, not at the top: the version check must run on older Pythons too

    manifests = {b: tomllib.loads((b / "envhub.toml").read_text(encoding="utf-8")) for b in sorted(bundles)}
    by_name = {m["environment"]["name"]: b for b, m in manifests.items()}
    ordered: list[Path] = []

    def visit(bundle: Path) -> None:
        if bundle not in ordered:
            for dependency in manifests[bundle].get("dependencies", {}):
                if dependency in by_name:
                    visit(by_name[dependency])
            ordered.append(bundle)

    for bundle in manifests:
        visit(bundle)
    return [(b, manifests[b]) for b in ordered]


def _needs_judge(manifest: dict[str, Any]) -> bool:
    verifier = manifest.get("verifier", {})
    return any(v.get("kind") == "llm-judge" for v in [verifier, *verifier.get("criteria", [])])


def _fresh(path: Path) -> Path:
    path.unlink(missing_ok=True)
    return path.relative_to(ROOT)


def test() -> None:
    """The whole suite, or with ``--fast`` the tests not marked slow (tests/conftest.py) on
    every core. Other arguments go to pytest."""
    setup("dev")
    args = sys.argv[2:]
    if "--fast" in args:
        args = ["-m", "not slow", "-n", "auto", *(a for a in args if a != "--fast")]
    # pytest exits 5 when it collected nothing: that is a failure here too (_run exits non-zero).
    _run(_bin() / "python", "-m", "pytest", *args)


COMMANDS = {
    "setup": lambda: setup("demo" if sys.argv[2:3] == ["demo"] else "dev"),
    "demo": demo,
    "test": test,
    "lock": lock,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    COMMANDS[sys.argv[1]]()
