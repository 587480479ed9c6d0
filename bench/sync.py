"""A warm ``envhub sync`` against ``envhub --version``.

A project locks 20 environments (each with a dependency and a Python dependency this
interpreter has), synced once so that everything is cached. Then, taking turns, it times
``envhub sync`` in the project (lock up to date, every bundle cached: no registry is
contacted) against ``envhub --version`` (the CLI's floor). Target: sync <= 2.0x.

    .venv/bin/python bench/sync.py [--envs N] [--runs K]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import envhub_command, median, runs_text, time_interleaved  # noqa: E402

MANIFEST = """\
[environment]
name = "{name}"
version = "1.0.0"
description = "Bench environment."
python-dependencies = ["packaging>=20"]
canary = "envhub-canary:0123456789abcdef0123456789abcdef"
{deps}
[tasks]
splits.train = {{ path = "tasks/train.jsonl" }}

[verifier]
kind = "exact-match"
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=20)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    envhub = envhub_command()
    with tempfile.TemporaryDirectory(prefix="envhub-bench-sync-") as tmp:
        root = Path(tmp)
        env = {"ENVHUB_HOME": str(root / "home"), "ENVHUB_CACHE": str(root / "cache")}
        names = [f"bench/env-{i:03d}" for i in range(args.envs)]
        for i, name in enumerate(names):
            bundle = root / "src" / name.replace("/", "--")
            (bundle / "tasks").mkdir(parents=True)
            deps = f'\n[dependencies]\n"{names[i - 1]}" = ">=1.0"\n' if i else ""
            (bundle / "envhub.toml").write_text(MANIFEST.format(name=name, deps=deps))
            (bundle / "tasks" / "train.jsonl").write_text(json.dumps({"id": "t1", "prompt": "1+1?", "answer": "2"}) + "\n")
            subprocess.run([*envhub, "push", str(bundle)], check=True, capture_output=True, env={**_env(), **env})
        project = root / "trainer"
        project.mkdir()
        (project / "pyproject.toml").write_text(
            '[project]\nname = "trainer"\nversion = "0"\n\n[tool.envhub]\nenvironments = '
            + json.dumps(names[-5:]) + "\n")
        subprocess.run([*envhub, "sync"], check=True, capture_output=True, cwd=project, env={**_env(), **env})
        times = time_interleaved({"envhub --version": [*envhub, "--version"], "envhub sync (warm)": [*envhub, "sync"]},
                                 args.runs, cwd=project, extra_env=env)
    base, sync = median(times["envhub --version"]), median(times["envhub sync (warm)"])
    print(f"{args.envs} environments locked, all cached; {args.runs} runs each, interleaved")
    for label, values in times.items():
        print(f"  {label:<20} median {median(values) * 1000:7.1f} ms   (runs: {runs_text(sorted(values), unit_ms=True)})")
    ratio = sync / base
    print(f"warm sync / --version: {ratio:.2f}x   target <= 2.0x: {'met' if ratio <= 2.0 else 'NOT met'}")


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


if __name__ == "__main__":
    main()
