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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".envhub-dev-stamp"
# The distributions this repository ships, installed together: envhub itself, the registry
# service, and the first-party plugins.
INSTALL = [".[dev]", "./registry", "./plugins/envhub-reasoning-gym"]


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
    setup()
    os.environ.setdefault("ENVHUB_HOME", str(ROOT / ".envhub-dev" / "home"))
    os.environ.setdefault("ENVHUB_CACHE", str(ROOT / ".envhub-dev" / "cache"))
    envhub = BIN / "envhub"
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
    import json

    bundles = sorted(bundles)
    # Read by the venv's interpreter: this one may be 3.10, without tomllib.
    read = "import json, sys; from envhub import _toml; print(json.dumps([_toml.loads(open(p, encoding='utf-8').read()) for p in sys.argv[1:]]))"
    out = subprocess.check_output([str(BIN / "python"), "-c", read, *(str(b / "envhub.toml") for b in bundles)])
    manifests = dict(zip(bundles, json.loads(out)))
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
    setup()
    # pytest exits 5 when it collected nothing: that is a failure here too (_run exits non-zero).
    _run(BIN / "python", "-m", "pytest", *sys.argv[2:])


COMMANDS = {"setup": setup, "demo": demo, "test": test}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    COMMANDS[sys.argv[1]]()
