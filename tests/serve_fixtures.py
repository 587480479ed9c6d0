"""Bundles and a real ``envhub serve`` process for tests/test_serve.py.

The bundles are made with the scaffold (``envhub init``), one per protocol, and edited:
their held-out ``test`` splits get answers and fields that appear nowhere else
(:data:`SECRETS`), so a test can scan what the server sends for any of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from envhub.scaffold import create_bundle
from tests.conftest import ENVHUB
from tests.runtime_fixtures import write_rows

TOKEN = "test-token-0123456789abcdef"
OTHER_TOKEN = "other-token-0123456789abcdef"

#: The held-out rows of each bundle. Answers are numbers no response would hold by chance;
#: the other fields are what a verifier or an author might keep beside the answer.
HELD_OUT: dict[str, list[dict[str, Any]]] = {
    "single-turn": [
        {"id": "st-test-001", "prompt": "How many marbles are in the first jar?", "answer": "918273645",
         "difficulty": 3, "solution": "LEAKCHECK-st-solution-1", "rationale": "LEAKCHECK-st-rationale-1"},
        {"id": "st-test-002", "prompt": "How many marbles are in the second jar?", "answer": "564738291",
         "difficulty": 5, "solution": "LEAKCHECK-st-solution-2", "rationale": "LEAKCHECK-st-rationale-2"},
    ],
    "multi-turn": [
        {"id": "mt-test-001", "prompt": "Guess my number. Reply with just the number.", "answer": "738291",
         "notes": "LEAKCHECK-mt-notes-1"},
        {"id": "mt-test-002", "prompt": "Guess my other number. Reply with just the number.", "answer": "615243",
         "notes": "LEAKCHECK-mt-notes-2"},
    ],
    "tool-use": [
        {"id": "tu-test-001", "prompt": "What is 12345 multiplied by 6789? Use the calculator tool.",
         "answer": "83810205", "worked": "LEAKCHECK-tu-worked-1"},
        {"id": "tu-test-002", "prompt": "What is 54321 multiplied by 9876? Use the calculator tool.",
         "answer": "536474196", "worked": "LEAKCHECK-tu-worked-2"},
    ],
}
SECRETS: list[str] = [str(v) for rows in HELD_OUT.values() for row in rows
                      for k, v in row.items() if k not in ("id", "prompt", "difficulty")]

NAMES = {"single-turn": "acme/arith", "multi-turn": "acme/guess", "tool-use": "acme/calc"}
BIG_SPLIT = 2500  # rows of the single-turn bundle's "big" split: more than two pages of tasks

_RESPONDER_BOOM = '''
    if guess == "boom":  # a bug in the environment's code, quoting the answer
        raise RuntimeError("kaboom: the answer was " + str(task["answer"]))
'''

_SLOW_TOOL = '''

def wait(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: how long.
    """
    import time

    time.sleep(seconds)
    return "waited"
'''


def make_bundles(root: Path) -> dict[str, Path]:
    """One bundle per protocol under ``root``, keyed by protocol."""
    bundles = {}
    for protocol, name in NAMES.items():
        path = create_bundle(name, root / name.split("/")[1], protocol=protocol)  # type: ignore[arg-type]
        write_rows(path, "test", HELD_OUT[protocol])
        bundles[protocol] = path
    # single-turn: a difficulty field, and a split of more than two pages
    arith = bundles["single-turn"]
    manifest = arith / "envhub.toml"
    text = manifest.read_text()
    text = text.replace('prompt-field = "prompt"\n', 'prompt-field = "prompt"\ndifficulty-field = "difficulty"\n')
    text = text.replace('splits.dev = {', 'splits.big = { path = "tasks/big.jsonl" }\nsplits.dev = {')
    manifest.write_text(text)
    for split in ("train", "dev"):
        rows = [json.loads(line) for line in (arith / "tasks" / f"{split}.jsonl").read_text().splitlines()]
        write_rows(arith, split, [{**row, "difficulty": 1} for row in rows])
    write_rows(arith, "big", [{"id": f"big-{i:05d}", "prompt": f"What is {i} plus 1?", "answer": str(i + 1),
                               "difficulty": i % 5} for i in range(BIG_SPLIT)])
    # multi-turn: a responder that fails on "boom"
    game = bundles["multi-turn"] / "guess" / "game.py"
    source = game.read_text()
    anchor = '    guess = messages[-1]["content"].strip()\n'
    assert anchor in source
    game.write_text(source.replace(anchor, anchor + _RESPONDER_BOOM))
    # tool-use: a slow tool, for the wall-clock limit
    calc = bundles["tool-use"]
    (calc / "calc" / "tools.py").write_text((calc / "calc" / "tools.py").read_text() + _SLOW_TOOL)
    manifest = calc / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('tools = ["calc.tools:calculate"]',
                                                     'tools = ["calc.tools:calculate", "calc.tools:wait"]'))
    return bundles


@dataclass
class Server:
    """An ``envhub serve`` process on 127.0.0.1; ``base_url`` is where it listens."""

    proc: subprocess.Popen[bytes]
    base_url: str
    urls: list[str]
    log: Path
    bodies: list[bytes] = field(default_factory=list)

    def url(self, name: str) -> str:
        return f"{self.base_url}/{name}"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


def start_server(args: Sequence[str], workdir: Path, *, env: dict[str, str] | None = None,
                 timeout_s: float = 60.0) -> Server:
    """Run ``envhub serve ARGS --port 0`` and wait until it answers ``GET /v1/health``."""
    workdir.mkdir(parents=True, exist_ok=True)
    out, log = workdir / "serve.out", workdir / "serve.err"
    environ = {**os.environ, "ENVHUB_HOME": str(workdir / "home"), "ENVHUB_CACHE": str(workdir / "cache"),
               "NO_COLOR": "1", **(env or {})}
    environ.pop("ENVHUB_DEBUG", None)
    with out.open("wb") as stdout, log.open("wb") as stderr:
        proc = subprocess.Popen([ENVHUB, "serve", *args, "--port", "0"], stdout=stdout, stderr=stderr, env=environ)
    deadline = time.monotonic() + timeout_s
    urls: list[str] = []
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"envhub serve exited with {proc.returncode}:\n{log.read_text()}")
        urls = out.read_text().split()
        if urls:
            base = urls[0].rsplit("/", 2)[0]
            try:
                if httpx2.get(f"{base}/v1/health", timeout=2).status_code == 200:
                    return Server(proc, base, urls, log)
            except httpx2.TransportError:
                pass
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"envhub serve did not become ready in {timeout_s} s:\n{log.read_text()}")


class Recorder:
    """Raw HTTP to a server through httpx2, keeping every request and response body
    (errors included)."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.base_url = base_url
        self.bodies: list[bytes] = []
        self.exchanges: list[tuple[str, str]] = []
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx2.Client(base_url=base_url, headers=headers, timeout=30)

    def __call__(self, method: str, path: str, body: Any = None, **kwargs: Any) -> httpx2.Response:
        if body is not None:
            kwargs["content"] = body if isinstance(body, (bytes, str)) else json.dumps(body)
        response = self.client.request(method, path, **kwargs)
        self.bodies.append(response.content)
        sent = kwargs.get("content", b"")
        self.exchanges.append((f"{method} {path} " + (sent.decode() if isinstance(sent, bytes) else sent),
                               response.text))
        return response

    def leaks(self) -> list[tuple[str, str]]:
        """(request, secret) for every response holding a secret its own request did not send
        (an observation echoes the model's own turn, right answers included)."""
        return [(request, secret) for request, response in self.exchanges for secret in SECRETS
                if secret in response and secret not in request]

    def close(self) -> None:
        self.client.close()


def leaks(texts: Iterator[str] | Sequence[str]) -> list[str]:
    """The secrets that appear in any of ``texts``."""
    joined = "\n".join(texts)
    return [secret for secret in SECRETS if secret in joined]
