#!/usr/bin/env python3
"""Set up, demo and test envhub with nothing but Python.

    python3 dev.py demo    set up .venv if needed, then run the main job
    python3 dev.py test    set up .venv if needed, then run the whole test suite
    python3 dev.py setup   only set up .venv

Set-up creates ``.venv`` and installs this repository's distributions into it (editable,
with the ``dev`` extra); it reinstalls only when a pyproject.toml changed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".envhub-dev-stamp"
# The distributions this repository ships, installed together (later: plugins/*).
INSTALL = [".[dev]", "./registry"]


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(ROOT.glob("**/pyproject.toml")):
        if ".venv" not in path.parts and ".envhub-dev" not in path.parts:
            digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update("\0".join(INSTALL).encode())
    return digest.hexdigest()


def _run(*args: str | Path, cwd: Path = ROOT) -> None:
    print("+", " ".join(str(a) for a in args), flush=True)
    code = subprocess.call([str(a) for a in args], cwd=cwd)
    if code != 0:
        sys.exit(code)


def setup() -> None:
    if not (BIN / "python").exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    fingerprint = _fingerprint()
    if STAMP.exists() and STAMP.read_text() == fingerprint:
        return
    _run(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _run(BIN / "python", "-m", "pip", "install", "--quiet", *(a for spec in INSTALL for a in ("-e", spec)))
    STAMP.write_text(fingerprint)


def demo() -> None:
    """The main job, on the embedded default registry: validate and self-test the example
    environments, push each, pull it back by id, show its info from the registry, and
    evaluate the pulled environment on its dev split with the reference policy. Then a
    training project declares them as dependencies (envhub add), locks and syncs them.

    ENVHUB_HOME and ENVHUB_CACHE point into .envhub-dev/ (unless already set), so the demo
    leaves your own registry alone; nothing needs a network or an account."""
    setup()
    os.environ.setdefault("ENVHUB_HOME", str(ROOT / ".envhub-dev" / "home"))
    os.environ.setdefault("ENVHUB_CACHE", str(ROOT / ".envhub-dev" / "cache"))
    examples = sorted(p for p in (ROOT / "example_envs").iterdir() if (p / "envhub.toml").exists())
    _run(BIN / "envhub", "validate", "--strict", "--check", *(p.relative_to(ROOT) for p in examples))
    runs = ROOT / ".envhub-dev" / "runs"
    for example in examples:
        name = _env_name(example)
        _run(BIN / "envhub", "push", example.relative_to(ROOT))
        _run(BIN / "envhub", "pull", name)
        _run(BIN / "envhub", "info", name)
        out = runs / f"{name.replace('/', '--')}.dev.reference.jsonl"
        out.unlink(missing_ok=True)
        _run(BIN / "envhub", "eval", name, "--split", "dev", "--policy", "reference", "-o", out.relative_to(ROOT))
    # A training project depends on them: declare, lock, sync as CI would, show the tree.
    project = ROOT / ".envhub-dev" / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "demo-trainer"\nversion = "0.1.0"\n\n[tool.envhub]\nenvironments = []\n')
    (project / "envhub.lock").unlink(missing_ok=True)
    for example in examples:
        _run(BIN / "envhub", "add", _env_name(example), cwd=project)
    _run(BIN / "envhub", "sync", "--locked", cwd=project)
    _run(BIN / "envhub", "tree", cwd=project)


def _env_name(bundle: Path) -> str:
    import json

    out = subprocess.check_output([str(BIN / "envhub"), "info", "--json", str(bundle)], cwd=ROOT)
    return json.loads(out)["name"]


def test() -> None:
    setup()
    # pytest exits 5 when it collected nothing: that is a failure here too (_run exits non-zero).
    _run(BIN / "python", "-m", "pytest", *sys.argv[2:])


COMMANDS = {"setup": setup, "demo": demo, "test": test}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    COMMANDS[sys.argv[1]]()
