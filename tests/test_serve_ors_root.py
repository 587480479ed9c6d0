"""``envhub serve --ors-at-root``: the Open Reward Standard's routes at ``/`` beside envhub's own.

tests/test_serve_ors.py plays every ORS request at the root too; this file checks that the
root mount leaves envhub's routes as they were, and that a clash refuses to start.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx2
import pytest

from envhub.scaffold import create_bundle
from tests.conftest import ENVHUB
from tests.serve_fixtures import start_server

WIRE_AGENT = {"User-Agent": "openreward-sdk/0.1.167"}


@pytest.fixture(scope="module")
def calc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_bundle("acme/calc", tmp_path_factory.mktemp("root") / "calc", protocol="tool-use")


def test_ors_at_the_root_leaves_envhubs_routes_as_they_were(calc: Path, tmp_path: Path) -> None:
    s = start_server([str(calc), "--trust", "--ors-at-root"], tmp_path)
    try:
        get = lambda path: httpx2.get(s.base_url + path, headers=WIRE_AGENT, timeout=10)  # noqa: E731
        assert get("/list_environments").json() == get("/ors/list_environments").json() == ["acme/calc"]
        assert get("/acme/calc/tools").json() == get("/ors/acme/calc/tools").json()
        assert get("/health").json() == {"status": "ok"}
        assert get("/v1/health").json()["environments"] == ["acme/calc"]
        assert get("/v1/environments/acme/calc").json()["name"] == "acme/calc"
        # Only the served environments' paths are ORS's: another is no route, in envhub's shape.
        assert get("/acme/other/tools").json()["error"]["code"] == "no-such-route"
        assert get("/v1/nothing/tools").json()["error"]["code"] == "no-such-route"
    finally:
        assert s.stop() in (0, -signal.SIGTERM), s.stderr()


def test_without_the_option_nothing_is_served_at_the_root(calc: Path, tmp_path: Path) -> None:
    s = start_server([str(calc), "--trust"], tmp_path)
    try:
        r = httpx2.get(s.base_url + "/list_environments", headers=WIRE_AGENT, timeout=10)
        assert r.status_code == 404 and r.json()["error"]["code"] == "no-such-route"
    finally:
        assert s.stop() in (0, -signal.SIGTERM), s.stderr()


@pytest.mark.parametrize(("name", "clash"), [
    ("mcp/calc", "/mcp/calc/call (ORS) is also /mcp/{namespace}/{name} (envhub)"),
    ("ors/calc", "/ors/calc/call (ORS) is also /ors (envhub)"),
    ("v1/episodes", "/v1/episodes/call (ORS) is also /v1/episodes/{episode_id} (envhub)"),
], ids=["mcp", "ors", "v1"])
def test_a_clash_with_envhubs_routes_refuses_to_start(name: str, clash: str, tmp_path: Path) -> None:
    bundle = create_bundle(name, tmp_path / "bundle", protocol="tool-use")
    environ = {**os.environ, "ENVHUB_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    environ.pop("ENVHUB_DEBUG", None)
    run = subprocess.run([ENVHUB, "serve", str(bundle), "--trust", "--ors-at-root", "--port", "0"],
                         capture_output=True, text=True, env=environ, timeout=60)
    assert run.returncode != 0 and run.stdout == ""
    assert "--ors-at-root cannot serve the Open Reward Standard's routes at the root: " in run.stderr
    assert clash in run.stderr and "Traceback" not in run.stderr
    assert "serve without --ors-at-root (ORS stays at /ors)" in run.stderr
    # Control: the same environment is served without the option (ORS at /ors only).
    s = start_server([str(bundle), "--trust"], tmp_path / "control")
    try:
        r = httpx2.get(f"{s.base_url}/ors/{name}/tools", headers=WIRE_AGENT, timeout=10)
        assert r.status_code == 200 and "tools" in r.json()
    finally:
        assert s.stop() in (0, -signal.SIGTERM), s.stderr()
