"""A pushed environment is a Hugging Face dataset: the card's ``configs`` and the environment
descriptor (``environment.yaml``) that an ``hf://`` push writes, and the real ``datasets``
library loading the public splits from the test Hub (tests/hf_server.py), never a held-out one.

``datasets`` runs in a subprocess: it and ``huggingface_hub`` read ``HF_ENDPOINT`` once, at
import, so the endpoint is set in the child's environment. The child refuses every network
connection that is not to 127.0.0.1 and reports the attempts: nothing may leave the machine,
and ``HF_HUB_OFFLINE`` is not set (it would hide a request that went astray)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from envhub.errors import RegistryError
from tests.hf_server import HubServer
from tests.registry_fixtures import NAME, PLUGINS, SECRET, write_env
from tests.test_hf import ALICE, _push, hub, url  # noqa: F401 - fixtures

EXAMPLES = Path(__file__).resolve().parents[1] / "example_envs"

#: Run in the child: guard the network, then load each (repo, revision, split, token) asked for.
_LOADER = r'''
import json, socket, sys, traceback

attempts = []
_connect, _getaddrinfo = socket.socket.connect, socket.getaddrinfo
LOCAL = ("127.0.0.1", "localhost", "::1")

def connect(self, address):
    if isinstance(address, tuple) and address[0] not in LOCAL:
        attempts.append(str(address[0]))
        traceback.print_stack(file=sys.stderr)
        raise OSError("network access refused by the test")
    return _connect(self, address)

def getaddrinfo(host, *args, **kw):
    if host not in LOCAL:
        attempts.append(str(host))
        traceback.print_stack(file=sys.stderr)
        raise socket.gaierror("network access refused by the test")
    return _getaddrinfo(host, *args, **kw)

socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo

import datasets
datasets.disable_progress_bars()
out = {"endpoint": datasets.config.HF_ENDPOINT, "results": []}
for query in json.loads(sys.argv[1]):
    try:
        loaded = datasets.load_dataset(query["repo"], revision=query["revision"], split=query.get("split"),
                                       token=query.get("token", False), cache_dir=query["cache_dir"])
        if isinstance(loaded, datasets.DatasetDict):
            result = {"splits": {k: len(v) for k, v in loaded.items()}}
        else:
            result = {"rows": loaded.to_list(), "split": str(loaded.split)}
    except Exception as e:
        result = {"error": type(e).__name__, "message": str(e)}
    out["results"].append(result)
out["attempts"] = attempts
print(json.dumps(out))
'''


def load_datasets(hub: HubServer, tmp_path: Path, queries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run ``datasets.load_dataset`` for each query in one child process pointed at ``hub``;
    each result is ``{"rows": [...]}``, ``{"splits": {name: rows}}`` or ``{"error", "message"}``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE"))}
    # HF_UPDATE_DOWNLOAD_COUNTS=0: else every load_dataset sends a HEAD to s3.amazonaws.com (a download
    # counter, whatever HF_ENDPOINT says); the guard in the child caught it.
    env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf-home"), HF_UPDATE_DOWNLOAD_COUNTS="0")
    cache = str(tmp_path / "datasets-cache")
    args = json.dumps([{"cache_dir": cache, **q} for q in queries])
    done = subprocess.run([sys.executable, "-c", _LOADER, args], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["endpoint"] == hub.endpoint
    assert out["attempts"] == [], f"datasets tried to reach {out['attempts']}:\n{done.stderr}"
    return list(out["results"])


def jsonl_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def descriptor_of(hub: HubServer, repo: str, revision: str) -> dict[str, Any]:
    return dict(yaml.safe_load(hub.files(repo, revision)["environment.yaml"]))


def card_header(hub: HubServer, repo: str, revision: str) -> dict[str, Any]:
    readme = hub.files(repo, revision)["README.md"].decode()
    assert readme.startswith("---\n")
    return dict(yaml.safe_load(readme[4:].split("\n---\n", 1)[0]))


# --- a real example, jsonl -----------------------------------------------------------------------

ARITH = "envhub-examples/arith-word-problems"


@pytest.fixture
def arith(hub: HubServer, url: str, tmp_path: Path) -> Path:
    root = EXAMPLES / "arith-word-problems"
    _push(url, root)
    return root


def test_example_loads_every_public_split_and_no_held_out_one(arith: Path, hub: HubServer, tmp_path: Path) -> None:
    train, dev, test, test_as_owner, everything = load_datasets(hub, tmp_path, [
        {"repo": ARITH, "revision": "v1.0.3", "split": "train"},
        {"repo": ARITH, "revision": "v1.0.3", "split": "dev"},
        {"repo": ARITH, "revision": "v1.0.3", "split": "test"},
        {"repo": ARITH, "revision": "v1.0.3", "split": "test", "token": ALICE},  # may read the companion repo
        {"repo": ARITH, "revision": "v1.0.3"},
    ])
    assert train["rows"] == jsonl_rows(arith / "tasks/train.jsonl") and len(train["rows"]) == 400
    assert dev["rows"] == jsonl_rows(arith / "tasks/dev.jsonl") and len(dev["rows"]) == 100
    refused = {"error": "ValueError", "message": "Unknown split \"test\". Should be one of ['train', 'dev']."}
    assert test == test_as_owner == refused
    assert everything == {"splits": {"train": 400, "dev": 100}}
    # The held-out tasks are in no public file, at any revision.
    held_out = (arith / "tasks/test.jsonl").read_bytes()
    for revision in ("v1.0.3", "main"):
        public = hub.files(ARITH, revision)
        assert "tasks/test.jsonl" not in public
        assert not any(held_out.splitlines()[0] in data for data in public.values())
    assert "tasks/test.jsonl" in hub.files(f"{ARITH}-heldout", "v1.0.3")


def test_example_card_and_descriptor(arith: Path, hub: HubServer) -> None:
    assert card_header(hub, ARITH, "v1.0.3")["configs"] == [
        {"config_name": "default", "data_files": [{"split": "train", "path": "tasks/train.jsonl"},
                                                  {"split": "dev", "path": "tasks/dev.jsonl"}]}]
    doc = descriptor_of(hub, ARITH, "v1.0.3")
    assert list(doc) == ["spec_version", "id", "version", "description", "splits", "runtime", "reward"]
    assert doc["spec_version"] == "hf-env-0.1"
    assert doc["id"] == ARITH
    assert doc["version"] == "1.0.3"
    assert doc["description"].startswith("Arithmetic word problems about shops, trains")
    assert doc["splits"] == {
        "train": {"source": "dataset", "config": "default", "format": "jsonl", "path": "tasks/train.jsonl",
                  "rows": 400, "description": "For training; 80 problems at each difficulty."},
        "dev": {"source": "dataset", "config": "default", "format": "jsonl", "path": "tasks/dev.jsonl",
                "rows": 100, "description": "For model selection and quick evaluation; 20 problems at each "
                                            "difficulty."},
        "test": {"source": "held-out", "rows": 100, "description": "Held out: published only as a count and "
                 "digest, scored server-side; 20 at each difficulty."},
    }
    assert doc["runtime"] == {"name": "envhub", "protocol": "single-turn", "state": "none",
                              "manifest": "envhub.toml",
                              "pull": f"envhub pull {ARITH}@1.0.3 --registry hf://"}
    assert doc["reward"] == {"verifier": "numeric", "range": [0.0, 1.0], "score_version": 1}
