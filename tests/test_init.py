from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from envhub.bundle import validate_bundle
from envhub.context import make_plugin_manager
from envhub.scaffold import PROTOCOLS, STATES, module_name

#: envhub's built-in plugin only (nothing installed is loaded).
PLUGINS = make_plugin_manager(autoload=False)

COMBOS = [(p, s) for p in PROTOCOLS for s in STATES]


@pytest.mark.parametrize(("protocol", "state"), COMBOS, ids=[f"{p}-{s}" for p, s in COMBOS])
def test_init_validates_as_created(tmp_path: Path, envhub_cli, protocol: str, state: str) -> None:
    target = tmp_path / "env"
    result = envhub_cli("init", "acme/my-env", str(target), "--protocol", protocol, "--state", state)
    assert result.code == 0, result.err
    check = validate_bundle(target, plugins=PLUGINS)
    assert check.problems == []  # no errors and no warnings
    manifest = tomllib.loads((target / "envhub.toml").read_text())
    assert manifest["harness"]["protocol"] == protocol
    assert manifest["state"]["kind"] == state
    assert manifest["environment"]["canary"].startswith("envhub-canary:")
    assert manifest["tasks"]["splits"]["test"]["held-out"] is True
    assert {s.name: s.rows for s in check.splits} == {"train": 6, "dev": 2, "test": 2}
    assert (target / "README.md").read_text().startswith("# acme/my-env\n")
    if protocol != "single-turn":
        assert (target / "my_env" / "__init__.py").exists()
    rows = [json.loads(line) for line in (target / "tasks/train.jsonl").read_text().splitlines()]
    assert all(set(row) == {"id", "prompt", "answer"} for row in rows)


def test_canary_is_fresh(tmp_path: Path) -> None:
    from envhub.scaffold import create_bundle

    a = tomllib.loads((create_bundle("acme/a", tmp_path / "a") / "envhub.toml").read_text())
    b = tomllib.loads((create_bundle("acme/a", tmp_path / "b") / "envhub.toml").read_text())
    assert a["environment"]["canary"] != b["environment"]["canary"]


def test_default_directory(tmp_path: Path, envhub_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert envhub_cli("init", "acme/sql-shop").code == 0
    assert (tmp_path / "sql-shop" / "envhub.toml").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["Acme/Shop"],
         "envhub: error: invalid environment id 'Acme/Shop': ids are lowercase; did you mean 'acme/shop'?\n"),
        (["shop"], "envhub: error: invalid environment id 'shop': expected 'namespace/name', e.g. 'acme/sql-shop'\n"),
    ],
    ids=["uppercase", "no-namespace"],
)
def test_init_bad_name_writes_nothing(tmp_path: Path, envhub_cli, monkeypatch: pytest.MonkeyPatch, args: list[str],
                                      message: str) -> None:
    monkeypatch.chdir(tmp_path)
    result = envhub_cli("init", *args)
    assert (result.code, result.err) == (2, message)
    assert list(tmp_path.iterdir()) == []


def test_init_refuses_non_empty_directory(tmp_path: Path, envhub_cli) -> None:
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "keep.txt").write_text("mine")
    result = envhub_cli("init", "acme/x", str(tmp_path / "env"))
    assert result.code == 2
    assert result.err == (f"envhub: error: {tmp_path / 'env'} already exists and is not empty\n"
                          "  hint: choose a new directory, or empty this one first\n")
    assert [p.name for p in (tmp_path / "env").iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]  # no staging directory left


def test_init_into_empty_directory(tmp_path: Path, envhub_cli) -> None:
    (tmp_path / "env").mkdir()
    assert envhub_cli("init", "acme/x", str(tmp_path / "env")).code == 0
    assert validate_bundle(tmp_path / "env", plugins=PLUGINS).ok


@pytest.mark.parametrize(("name", "module"),
                         [("acme/sql-shop", "sql_shop"), ("acme/2048", "env_2048"), ("a/b.c", "b_c")])
def test_module_name(name: str, module: str) -> None:
    assert module_name(name) == module
