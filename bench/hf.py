"""Push and pull through an ``hf://`` registry (the real huggingface_hub client against the
HF-compatible test server of tests/hf_server.py, on 127.0.0.1), against the same through a
directory registry, measured in the same run; prints the ratios and the HTTP requests each
operation makes.

    python bench/hf.py [--shards 20] [--shard-kb 1024] [--repeat 3]

Each operation is a whole ``envhub`` process, as a user runs it. The test server keeps
everything in memory and takes every file as a "regular" (base64, in the commit body)
upload: it measures envhub's and the client's overhead (requests, round trips, rebuilding
the archive), not the Hub's storage or a real network. Not a test: it prints figures and
exits 0 whatever they are.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests.hf_server: the test server is test infrastructure

from bench._common import DATA, _child_env, envhub_command  # noqa: E402
from bench.pull import make_bundle  # noqa: E402
from tests.hf_server import HubServer  # noqa: E402

NAME = "bench/pull-big"
VERSION = "1.0.0"
TOKEN = "hf_bench_token"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed (exit {done.returncode})\n{done.stderr.decode(errors='replace')}")
    return elapsed


def requests_of(hub: HubServer, before: Counter[str]) -> str:
    diff = hub.requests - before
    return f"{sum(diff.values())} requests (" + ", ".join(f"{k} {v}" for k, v in sorted(diff.items())) + ")"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=20, help="task files in the bundle (one held out)")
    parser.add_argument("--shard-kb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    envhub = envhub_command()

    DATA.mkdir(exist_ok=True)
    bundle = make_bundle(DATA, args.shards, 1) if args.shard_kb == 1024 else _small_bundle(args)
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    files = sum(1 for p in bundle.rglob("*") if p.is_file())
    print(f"bundle: {files} files, {size / 1e6:.1f} MB (one task file held out)")

    with tempfile.TemporaryDirectory(dir=DATA) as scratch_dir, HubServer(tokens={TOKEN: "bench"}) as hub:
        scratch = Path(scratch_dir)
        base = {**_child_env(), "ENVHUB_HOME": str(scratch / "home"), "HF_TOKEN": TOKEN}
        base.pop("HF_HUB_OFFLINE", None)
        url = f"hf://?endpoint={hub.endpoint}"
        directory = str(scratch / "registry")
        times: dict[str, list[float]] = {k: [] for k in ("dir push", "hf push", "dir pull", "hf pull")}
        counts: dict[str, str] = {}
        for i in range(args.repeat + 1):  # the first round warms caches and is not timed
            hub.repos.clear()
            shutil.rmtree(directory, ignore_errors=True)
            shutil.rmtree(scratch / "home", ignore_errors=True)
            for kind, registry in (("dir", directory), ("hf", url)):
                env = {**base, "ENVHUB_CACHE": str(scratch / f"cache-{kind}-{i}")}
                before = hub.requests.copy()
                push_t = timed([*envhub, "push", str(bundle), "--registry", registry], env)
                counts[f"{kind} push"] = requests_of(hub, before)
                before = hub.requests.copy()
                pull_t = timed([*envhub, "pull", f"{NAME}@{VERSION}", "--with-heldout", "--registry", registry], env)
                counts[f"{kind} pull"] = requests_of(hub, before)
                if i:
                    times[f"{kind} push"].append(push_t)
                    times[f"{kind} pull"].append(pull_t)

    med = {k: statistics.median(v) for k, v in times.items()}
    for op in ("push", "pull"):
        d, h = med[f"dir {op}"], med[f"hf {op}"]
        print(f"{op} (with held-out): directory {d:.3f} s, hf:// {h:.3f} s, ratio {h / d:.2f}x  "
              f"(runs: {', '.join(f'{t:.3f}' for t in times[f'hf {op}'])})")
        print(f"  hf:// {op}: {counts[f'hf {op}']}")


def _small_bundle(args: argparse.Namespace) -> Path:
    """A bundle of ``--shards`` files of ``--shard-kb`` KB (make_bundle counts in MB)."""
    import json
    import random

    bundle = DATA / f"hf-bundle-{args.shards}x{args.shard_kb}k"
    if (bundle / "envhub.toml").exists():
        return bundle
    tmp = Path(str(bundle) + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "tasks").mkdir(parents=True)
    rng = random.Random(0)
    splits, row = [], 0
    for shard in range(args.shards):
        with open(tmp / "tasks" / f"shard-{shard:03d}.jsonl", "w") as f:
            written = 0
            while written < args.shard_kb * 1024:
                a, b = rng.randint(2, 999), rng.randint(2, 999)
                line = json.dumps({"id": f"t{row:08d}", "prompt": f"{a} + {b}?", "answer": str(a + b)}) + "\n"
                f.write(line)
                written += len(line)
                row += 1
        held = ", held-out = true" if shard == args.shards - 1 else ""
        splits.append(f'splits.shard-{shard:03d} = {{ path = "tasks/shard-{shard:03d}.jsonl"{held} }}')
    (tmp / "envhub.toml").write_text(
        f'[environment]\nname = "{NAME}"\nversion = "{VERSION}"\ndescription = "Benchmark bundle."\n'
        'canary = "envhub-canary:0123456789abcdef0123456789abcdef"\n\n[tasks]\n' + "\n".join(splits)
        + '\n\n[verifier]\nkind = "numeric"\n')
    tmp.rename(bundle)
    return bundle


if __name__ == "__main__":
    os.environ.pop("HF_HUB_OFFLINE", None)
    main()
