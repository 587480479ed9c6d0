"""Does discovery stay cheap? ``envhub plugins`` and ``envhub --help`` with 20 installed
plugin distributions, against the same commands with none.

    .venv/bin/python bench/plugins.py [--plugins 20] [--runs 15]

Builds two virtual environments under bench/.data/ (once; later runs reuse them): both see
this Python's packages (envhub-rl included) through a ``.pth`` file, and one also has
``--plugins`` small plugin distributions pip-installed into it, each a module registering
one verifier kind through the entry-point group ``envhub``. Then times whole processes,
taking turns: ``envhub plugins`` (which finds, imports and lists every plugin) and
``envhub --help`` (which must not look for plugins at all) in each venv. Prints the medians
and the ratios plugins/none; the target is <= 1.2x for both. This is a measurement, not a
test: it exits 0 whatever the timing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from _common import DATA, median, run_once, time_interleaved, verdict

TARGET = 1.2

PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "envhub-bench-plugin-{n:02d}"
version = "1.0.{n}"

[project.entry-points.envhub]
bench-{n:02d} = "envhub_bench_plugin_{n:02d}"

[tool.hatch.build.targets.wheel]
packages = ["envhub_bench_plugin_{n:02d}"]
"""

MODULE = """\
from envhub import hookimpl
from envhub.hookspecs import VerifierKind


def make(options, ctx, factories):
    from envhub.runtime.verifiers._exact import ExactMatchVerifier

    return ExactMatchVerifier(options)


@hookimpl
def envhub_verifier_kinds():
    return [VerifierKind("bench-kind-{n:02d}", make)]
"""


def _venv(root: Path, plugins: int) -> Path:
    """A venv at ``root`` that sees this Python's packages, with ``plugins`` bench plugins
    installed; reused when its stamp says it was built the same way."""
    stamp = root / "envhub-bench.json"
    wanted = {"plugins": plugins, "python": sys.executable}
    if stamp.is_file() and json.loads(stamp.read_text()) == wanted:
        return root / "bin" / "envhub"
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "_envhub_bench_base.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    envhub = root / "bin" / "envhub"
    envhub.write_text(f"#!{python}\nimport sys\nfrom envhub.cli import main\nsys.exit(main())\n")
    envhub.chmod(0o755)
    if plugins:
        sources = root.parent / f"{root.name}-sources"
        shutil.rmtree(sources, ignore_errors=True)
        projects = []
        for n in range(plugins):
            project = sources / f"plugin-{n:02d}"
            package = project / f"envhub_bench_plugin_{n:02d}"
            package.mkdir(parents=True)
            (project / "pyproject.toml").write_text(PYPROJECT.format(n=n))
            (package / "__init__.py").write_text(MODULE.format(n=n))
            projects.append(str(project))
        print(f"installing {plugins} plugin distributions into {root} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                        "--no-build-isolation", "--no-index", "--disable-pip-version-check", *projects], check=True)
    stamp.write_text(json.dumps(wanted))
    return envhub


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plugins", type=int, default=20, help="plugin distributions installed (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each command (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.plugins < 1:
        parser.error("--runs and --plugins must be at least 1")

    none = _venv(DATA / "plugins-venv-0", 0)
    some = _venv(DATA / f"plugins-venv-{args.plugins}", args.plugins)
    _, listed = run_once([str(some), "plugins", "--json"])
    found = [p for p in json.loads(listed.stdout)["plugins"] if p["name"].startswith("bench-")]
    if len(found) != args.plugins:
        sys.exit(f"error: envhub plugins found {len(found)} bench plugins, not {args.plugins}")

    commands = {
        "plugins, none": [str(none), "plugins"],
        f"plugins, {args.plugins}": [str(some), "plugins"],
        "--help, none": [str(none), "--help"],
        f"--help, {args.plugins}": [str(some), "--help"],
    }
    times = time_interleaved(commands, args.runs)
    print(f"envhub with {args.plugins} plugin distributions against none, median of {args.runs} run(s)")
    for label, values in times.items():
        print(f"  {label:<16} {median(values) * 1000:7.1f} ms   "
              f"range {min(values) * 1000:.1f}-{max(values) * 1000:.1f}")
    for command in ("plugins", "--help"):
        ratio = median(times[f"{command}, {args.plugins}"]) / median(times[f"{command}, none"])
        print(f"  ratio envhub {command}, {args.plugins} / none: {ratio:.2f}x  ({verdict(ratio, TARGET)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
