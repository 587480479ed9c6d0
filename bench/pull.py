"""Push and pull of a ~200 MB bundle in a local directory registry, against baselines
measured in the same run.

- cold pull (empty cache) vs a script that copies the same files and sha256s them:
  target <= 1.3x;
- warm pull (cached, exact pin), whole process, vs `envhub --version`: target <= 1.5x;
- push vs the same copy baseline (push also validates every task row, which the
  baseline does not).

    python bench/pull.py [--shards 40] [--shard-mb 5] [--repeat 3] [--warm-runs 15]

Not a test: it prints figures and exits 0 whatever they are.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENVHUB = str(Path(sys.executable).with_name("envhub"))
NAME = "bench/pull-big"
VERSION = "1.0.0"

BASELINE = r"""
import hashlib, shutil, sys
from pathlib import Path
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
for path in sorted(p for p in src.rglob("*") if p.is_file()):
    target = dst / path.relative_to(src)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)
    with open(target, "rb") as f:
        hashlib.file_digest(f, "sha256").hexdigest()
"""


def make_bundle(root: Path, shards: int, shard_mb: int) -> Path:
    bundle = root / f"bundle-{shards}x{shard_mb}"
    if (bundle / "envhub.toml").exists():
        return bundle
    tmp = root / "bundle.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "tasks").mkdir(parents=True)
    rng = random.Random(0)
    words = ["apples", "trains", "boxes", "coins", "pages", "tickets", "crates", "rolls"]
    splits = []
    row = 0
    for shard in range(shards):
        path = tmp / "tasks" / f"shard-{shard:03d}.jsonl"
        with open(path, "w") as f:
            written = 0
            while written < shard_mb * 1024 * 1024:
                a, b = rng.randint(2, 999), rng.randint(2, 999)
                line = json.dumps({"id": f"t{row:08d}", "prompt": f"A shop has {a} {rng.choice(words)} and gets {b} more. How many now?",
                                   "answer": str(a + b)}) + "\n"
                f.write(line)
                written += len(line)
                row += 1
        held = ", held-out = true" if shard == shards - 1 else ""
        splits.append(f'splits.shard-{shard:03d} = {{ path = "tasks/shard-{shard:03d}.jsonl"{held} }}')
    (tmp / "envhub.toml").write_text(
        f'[environment]\nname = "{NAME}"\nversion = "{VERSION}"\ndescription = "Benchmark bundle."\n'
        'canary = "envhub-canary:0123456789abcdef0123456789abcdef"\n\n[tasks]\n' + "\n".join(splits)
        + '\n\n[verifier]\nkind = "numeric"\n'
    )
    tmp.rename(bundle)
    return bundle


def timed(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=40)
    parser.add_argument("--shard-mb", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warm-runs", type=int, default=15)
    args = parser.parse_args()

    data = HERE / ".data"
    data.mkdir(exist_ok=True)
    bundle = make_bundle(data, args.shards, args.shard_mb)
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    print(f"bundle: {args.shards} task shards, {size / 1e6:.0f} MB")

    with tempfile.TemporaryDirectory(dir=data) as scratch_dir:
        scratch = Path(scratch_dir)
        registry = scratch / "registry"
        env = {**os.environ, "ENVHUB_HOME": str(scratch / "home"), "ENVHUB_CACHE": str(scratch / "cache"),
               "ENVHUB_REGISTRY": str(registry)}

        def baseline() -> float:
            out = scratch / "copy"
            shutil.rmtree(out, ignore_errors=True)
            t = timed([sys.executable, "-c", BASELINE, str(bundle), str(out)], env)
            shutil.rmtree(out)
            return t

        def push() -> float:
            shutil.rmtree(registry, ignore_errors=True)
            shutil.rmtree(scratch / "home", ignore_errors=True)
            return timed([ENVHUB, "push", str(bundle)], env)

        def cold_pull() -> float:
            shutil.rmtree(scratch / "cache", ignore_errors=True)
            return timed([ENVHUB, "pull", f"{NAME}@{VERSION}"], env)

        baseline()  # warm the page cache for both sides
        copy_t = statistics.median(baseline() for _ in range(args.repeat))
        push_t = statistics.median(push() for _ in range(args.repeat))
        cold_t = statistics.median(cold_pull() for _ in range(args.repeat))
        warm_t = statistics.median(timed([ENVHUB, "pull", f"{NAME}@{VERSION}"], env) for _ in range(args.warm_runs))
        version_t = statistics.median(timed([ENVHUB, "--version"], env) for _ in range(args.warm_runs))

    print(f"copy + sha256 baseline: {copy_t:.3f} s")
    print(f"cold pull:              {cold_t:.3f} s   ratio {cold_t / copy_t:.2f}x  (target <= 1.3x)")
    print(f"push:                   {push_t:.3f} s   ratio {push_t / copy_t:.2f}x  (validates every row; no target)")
    print(f"envhub --version:       {version_t * 1000:.0f} ms")
    print(f"warm pull:              {warm_t * 1000:.0f} ms   ratio {warm_t / version_t:.2f}x  (target <= 1.5x)")


if __name__ == "__main__":
    main()
