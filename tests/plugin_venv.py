"""A virtual environment with the test plugin distributions of tests/data/dists installed by
pip, built once per test session, and a way to run its ``envhub`` (and python) as a user
would.

The venv has no copy of envhub-rl or its dependencies: a ``.pth`` file adds this
interpreter's site-packages as a site directory, so what the project's venv has (envhub-rl,
installed editable, and hatchling to build with) is visible there, while the test
distributions are installed into the new venv only. They are built from their own
pyproject.toml by pip (wheel builds through hatchling, no build isolation, no index) and
installed non-editable, as a user's ``pip install`` would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

DISTS = Path(__file__).resolve().parent / "data" / "dists"
#: Every test distribution, installed together (conflicts and broken plugins included: they
#: must not stop the others from working).
INSTALLED = ("levenshtein", "greet", "broken-import", "bad-hooks", "hamming-a", "hamming-b")


@dataclass
class Run:
    code: int
    out: str
    err: str


@dataclass
class PluginVenv:
    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def envhub(self) -> Path:
        return self.root / "bin" / "envhub"

    def run(self, *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> Run:
        """Run this venv's ``envhub`` with ``args``."""
        return self._run([str(self.envhub), *map(str, args)], cwd, env)

    def python_c(self, code: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Run:
        """Run ``code`` with this venv's python."""
        return self._run([str(self.python), "-c", code], cwd, env)

    def _run(self, cmd: list[str], cwd: Path | None, env: dict[str, str] | None) -> Run:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=180,
                              env={**os.environ, **(env or {})})
        return Run(proc.returncode, proc.stdout, proc.stderr)


def make_venv(root: Path) -> PluginVenv:
    """An empty venv at ``root`` that sees this interpreter's packages, with an ``envhub``
    command (the console script pip would write)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    venv = PluginVenv(root)
    purelib = subprocess.run([str(venv.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # "import" lines of a .pth run at start-up: addsitedir also reads the .pth files there
    # (the editable install of envhub-rl is one).
    ours = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "_envhub_test_base.pth").write_text(f"import site; site.addsitedir({ours!r})\n",
                                                        encoding="utf-8")
    venv.envhub.write_text(f"#!{venv.python}\nimport sys\nfrom envhub.cli import main\nsys.exit(main())\n",
                           encoding="utf-8")
    venv.envhub.chmod(0o755)
    return venv


def pip_install(venv: PluginVenv, *projects: Path) -> None:
    """``pip install`` the projects (directories with a pyproject.toml) into ``venv``."""
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv.python), "install", "--quiet",
                           "--no-deps", "--no-build-isolation", "--no-index", "--disable-pip-version-check",
                           *map(str, projects)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip install failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")


@pytest.fixture(scope="session", name="plugin_venv")
def plugin_venv_fixture(tmp_path_factory: pytest.TempPathFactory) -> PluginVenv:
    """The venv with every distribution of :data:`INSTALLED` installed."""
    pytest.importorskip("hatchling", reason="building the test plugins needs hatchling (the dev extra has it)")
    venv = make_venv(tmp_path_factory.mktemp("plugin-venv") / "venv")
    pip_install(venv, *(DISTS / name for name in INSTALLED))
    return venv
