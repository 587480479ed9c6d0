from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ENVHUB = shutil.which("envhub", path=str(Path(sys.executable).parent)) or "envhub"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the user's home: envhub's directories live in a temporary one."""
    home = tmp_path_factory.mktemp("envhub-home")
    monkeypatch.setenv("ENVHUB_HOME", str(home / "home"))
    monkeypatch.setenv("ENVHUB_CACHE", str(home / "cache"))
    monkeypatch.delenv("ENVHUB_DEBUG", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def envhub_cli(capsys: pytest.CaptureFixture[str]):
    """Run the CLI in-process through its real error boundary, ``envhub.cli.main``."""
    from envhub.cli import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        captured = capsys.readouterr()
        return Result(int(exc.value.code or 0), captured.out, captured.err)

    return run


def run_envhub(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    """Run the installed ``envhub`` command in a subprocess, as a user would."""
    proc = subprocess.run([ENVHUB, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)
    return Result(proc.returncode, proc.stdout, proc.stderr)
