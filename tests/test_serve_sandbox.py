"""A served environment's code-tests verifier, attacked as a client without a token would:
sending code to ``POST /score`` on a public split to read the server's held-out files back
through the reward, one bit at a time."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve_fixtures import Recorder, Server, start_server

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux's")

MANIFEST = """\
[environment]
name = "acme/code"
version = "0.1.0"
description = "Write the function the task asks for."
license = "MIT"

[tasks]
format = "jsonl"
splits.dev = { path = "tasks/dev.jsonl" }
splits.test = { path = "tasks/test.jsonl", held-out = true }

[harness]
protocol = "single-turn"

[verifier]
kind = "code-tests"
timeout-s = 20
"""
ANSWER = "the-held-out-answer-7731"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    root = tmp_path_factory.mktemp("served-code")
    bundle = root / "code"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "envhub.toml").write_text(MANIFEST)
    probe = {"calls": [{"call": "probe", "expected": True}]}
    (bundle / "tasks" / "dev.jsonl").write_text(
        json.dumps({"id": "dev-1", "prompt": "Write probe().", "tests": probe}) + "\n")
    answer = {"calls": [{"call": "answer", "expected": ANSWER}]}
    (bundle / "tasks" / "test.jsonl").write_text(
        json.dumps({"id": "test-1", "prompt": "Write answer().", "tests": answer}) + "\n")
    server = start_server([str(bundle)], root / "server")
    try:
        yield server, bundle
    finally:
        server.stop()


def _reward(server: Server, body: str) -> float:
    raw = Recorder(server.base_url)
    try:
        response = raw("POST", "/v1/environments/acme/code/score",
                       {"split": "dev", "task_id": "dev-1", "completion": f"```python\n{body}\n```"})
        assert response.status_code == 200, response.text
        return float(response.json()["reward"])
    finally:
        raw.close()


def test_the_reward_cannot_read_the_servers_heldout_files(served: tuple[Server, Path]) -> None:
    server, bundle = served
    heldout = bundle / "tasks" / "test.jsonl"
    home = Path(server.log).parent  # the server's working files: its log, its home
    # Positive control: the reward carries one bit of whatever the candidate can see.
    assert _reward(server, "def probe():\n    return True") == 1.0
    assert _reward(server, "import os\ndef probe():\n    return os.path.isdir('/usr/bin')") == 1.0
    assert _reward(server, "def probe():\n    return False") == 0.0
    # The held-out file, by every path a candidate might try, and the server's home: all
    # there on the host, none in the sandbox.
    assert heldout.exists() and home.exists()
    for path in (heldout, home, Path("/proc/1/root") / heldout.relative_to("/")):
        assert _reward(server, f"import os\ndef probe():\n    return os.path.exists({str(path)!r})") == 0.0
        assert _reward(server, f"import os\ndef probe():\n    return not os.path.exists({str(path)!r})") == 1.0
    guess = f"def probe():\n    return {ANSWER!r} in open({str(heldout)!r}).read()"
    assert _reward(server, guess) == 0.0
