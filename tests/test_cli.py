"""The CLI's conventions: one error boundary, exit codes, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from envhub._version import __version__
from envhub.errors import ExitCode
from tests.conftest import run_envhub


def test_help_lists_commands_without_importing_them() -> None:
    code = ("import sys\nfrom envhub.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('pydantic', 'rich', 'envhub.manifest', 'envhub.cli.validate', 'orjson') "
            "if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "validate" in out and "init" in out
    assert out.strip().endswith("HEAVY []")


def test_version(envhub_cli) -> None:
    result = envhub_cli("--version")
    assert (result.code, result.out) == (0, f"envhub {__version__}\n")


def test_unknown_command_suggests(envhub_cli) -> None:
    result = envhub_cli("valdate")
    assert result.code == ExitCode.USAGE_ERROR
    assert "Error: No such command 'valdate'. Did you mean 'validate'?" in result.err


def test_bad_option_is_usage_error(envhub_cli) -> None:
    result = envhub_cli("validate", "--format", "xml")
    assert result.code == 2
    assert "Invalid value for '--format'" in result.err


def test_envhub_error_is_message_without_traceback(envhub_cli) -> None:
    result = envhub_cli("init", "Not A Name")
    assert result.code == 2
    assert result.err == ("envhub: error: invalid environment id 'Not A Name': expected 'namespace/name', "
                          "e.g. 'acme/sql-shop'\n")


def _boom_command() -> click.Command:
    @click.command()
    def boom() -> None:
        raise RuntimeError("kaboom")

    return boom


def test_internal_error_exit_3(envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from envhub.cli import cli

    monkeypatch.setitem(cli.commands, "boom", _boom_command())
    result = envhub_cli("boom")
    assert result.code == ExitCode.INTERNAL_ERROR
    assert result.err == ("envhub: internal error: RuntimeError: kaboom\n"
                          "  hint: rerun with ENVHUB_DEBUG=1 for a traceback, and report it\n")
    monkeypatch.setenv("ENVHUB_DEBUG", "1")
    result = envhub_cli("boom")
    assert result.code == ExitCode.INTERNAL_ERROR
    assert "Traceback (most recent call last)" in result.err


def test_envvar_sets_option(tmp_path: Path, envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVHUB_VALIDATE_FORMAT", "json")
    result = envhub_cli("validate", str(tmp_path))
    assert result.out.lstrip().startswith("{")
    assert "[env var: ENVHUB_VALIDATE_FORMAT;" in " ".join(envhub_cli("validate", "--help").out.split())


def test_installed_command_end_to_end(tmp_path: Path) -> None:
    """The installed ``envhub`` in a subprocess: init, validate, info, as a user would."""
    created = run_envhub("init", "acme/e2e", "env", "--protocol", "tool-use", "--state", "sqlite", cwd=tmp_path)
    assert created.code == 0, created.err
    assert created.out == ""
    checked = run_envhub("validate", "--strict", "env", cwd=tmp_path)
    assert checked.code == 0, checked.out
    assert checked.out == "valid: acme/e2e 0.1.0 (env): 3 split(s), 10 task(s)\n"
    shown = run_envhub("info", "env", cwd=tmp_path)
    assert shown.code == 0
    assert shown.out.splitlines()[0] == "acme/e2e 0.1.0  (score-version 1)"
    assert "    test              2 tasks  held-out" in shown.out
    broken = run_envhub("validate", "missing-dir", cwd=tmp_path)
    assert broken.code == 2
    assert "Traceback" not in broken.out + broken.err
