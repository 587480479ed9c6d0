"""``envhub.load`` checks a trusted bundle's ``python-dependencies`` before importing its
code (issue 17): a missing distribution is a clear error naming it and the fix, through the
library and the command line, not an ``Error: ...`` the model sees inside a tool call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_envhub
from tests.runtime_fixtures import scaffold

MISSING = "envhub-no-such-distribution-for-tests>=1.0"


def bundle_needing(tmp_path: Path, *requirements: str, protocol: str = "tool-use") -> Path:
    root = scaffold(tmp_path, protocol=protocol)
    manifest = root / "envhub.toml"
    listed = ", ".join(f"'{r}'" for r in requirements)  # TOML literal strings: a marker has quotes
    manifest.write_text(manifest.read_text().replace('license = "Apache-2.0"\n',
                                                     f'license = "Apache-2.0"\npython-dependencies = [{listed}]\n'))
    return root


def test_load_names_each_missing_requirement_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import envhub
    from envhub.errors import BundleError

    monkeypatch.chdir(tmp_path)  # outside any project
    root = bundle_needing(tmp_path, MISSING, "packaging>=20", "packaging<1")
    with pytest.raises(BundleError) as exc:
        envhub.load(root, trust_code=True)
    installed = __import__("importlib.metadata").metadata.version("packaging")
    assert exc.value.message == (
        "acme/demo: its code needs Python distributions this interpreter lacks ([environment] python-dependencies "
        f"in {root.resolve() / 'envhub.toml'}): {MISSING} (not installed); packaging<1 ({installed} is installed)")
    assert exc.value.hint is not None and exc.value.hint.startswith("install them into this Python: ")
    assert exc.value.hint.endswith(f"'{MISSING}' 'packaging<1'")


def test_the_check_comes_before_the_bundles_code_is_imported(tmp_path: Path) -> None:
    import envhub
    from envhub.errors import BundleError

    root = bundle_needing(tmp_path, MISSING)
    marker = tmp_path / "imported"
    with (root / "demo" / "tools.py").open("a") as f:
        f.write(f"\nimport pathlib\npathlib.Path({str(marker)!r}).write_text('yes')\n")
    with pytest.raises(BundleError):
        envhub.load(root, trust_code=True)
    assert not marker.exists()


def test_in_a_project_the_hint_names_envhub_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import envhub
    from envhub.errors import BundleError

    root = bundle_needing(tmp_path, MISSING)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "trainer"\nversion = "0"\n\n[tool.envhub]\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BundleError) as exc:
        envhub.load(root, trust_code=True)
    assert exc.value.hint is not None and exc.value.hint.endswith(
        "(or, for the environments in the project's lock: envhub sync --install-python-deps)")


def test_positive_control_installed_dependencies_load(tmp_path: Path) -> None:
    import envhub

    root = bundle_needing(tmp_path, "packaging>=20", 'envhub-no-such-distribution-for-tests; python_version < "3"')
    with envhub.load(root, trust_code=True) as env:
        assert [t.name for t in env.tools] == ["calculate"]


def test_a_bundle_without_code_is_not_checked(tmp_path: Path) -> None:
    import envhub

    root = bundle_needing(tmp_path, MISSING, protocol="single-turn")
    with envhub.load(root) as env:  # nothing of its own runs, so nothing it imports is needed
        assert env.tasks("train")


def test_envhub_eval_reports_it_with_exit_code_2_and_no_traceback(tmp_path: Path) -> None:
    root = bundle_needing(tmp_path, MISSING)
    result = run_envhub("eval", str(root), "-s", "train", "-p", "noop", "--trust", "-o", str(tmp_path / "o.jsonl"))
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    assert f"{MISSING} (not installed)" in result.err
    assert "install them into this Python:" in result.err
    assert not (tmp_path / "o.jsonl").exists()


def test_validate_check_reports_it_as_a_check_load_problem(tmp_path: Path, envhub_cli: Any) -> None:
    root = bundle_needing(tmp_path, MISSING)
    result = envhub_cli("validate", str(root), "--check", "--trust")
    assert result.code == 1, result.err
    text = result.out + result.err
    assert "error: cannot load the environment for --check: acme/demo: its code needs Python distributions" in text
    assert f"{MISSING} (not installed)" in text
    assert "Traceback" not in text
