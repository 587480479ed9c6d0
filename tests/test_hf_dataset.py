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
from tests import test_hf
from tests.hf_server import HubServer
from tests.registry_fixtures import NAME, SECRET, write_env
from tests.test_hf import ALICE, _push

#: test_hf's fixtures: a fresh test Hub (alice may write to acme/ and envhub-examples/), its hf:// URL.
hub, url = test_hf.hub, test_hf.url

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


# --- a generator environment: no task files --------------------------------------------------------

SEQUENCES = "envhub-examples/number-sequences"


def test_generator_environment_has_no_configs_and_says_its_splits_are_generated(
        hub: HubServer, url: str, tmp_path: Path) -> None:
    root = EXAMPLES / "number-sequences"
    _push(url, root)
    header = card_header(hub, SEQUENCES, "v2.0.0")
    assert "configs" not in header  # no task files: nothing for datasets to load
    doc = descriptor_of(hub, SEQUENCES, "v2.0.0")
    assert doc["splits"] == {
        "train": {"source": "generated", "generator": "sequences:make_task", "seeds": [0, 1000000000],
                  "rows": 1000000000, "description": "For training: an unbounded supply, a quarter at each level."},
        "dev": {"source": "generated", "generator": "sequences:make_task", "seeds": [1000000000, 1000000040],
                "rows": 40, "description": "40 fixed tasks, 10 at each level, for quick evaluation."},
        "test": {"source": "held-out", "rows": 80, "description": "Held out: 80 tasks whose seeds are drawn with "
                 "a secret key that only the held-out store holds."},
    }
    assert doc["runtime"]["protocol"] == "single-turn"
    assert doc["reward"] == {"verifier": "numeric", "range": [0.0, 1.0], "score_version": 2}
    public = hub.files(SEQUENCES, "v2.0.0")
    key = (root / "secrets/test.key").read_text().strip()
    assert not any(key.encode() in data for data in public.values())
    # Without configs, datasets guesses from the repo's files (code, prompts, envhub.toml), finds no
    # tasks and refuses; the descriptor is what says where the tasks come from.
    (train,) = load_datasets(hub, tmp_path, [{"repo": SEQUENCES, "revision": "v2.0.0", "split": "train"}])
    assert train["error"] == "DataFilesNotFoundError"


# --- parquet tasks, and splits datasets cannot load -------------------------------------------------

PARQUET_MANIFEST = """\
[environment]
name = "acme/arith"
version = "1.0.0"
description = "Arithmetic drills, in parquet."
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[tasks]
format = "parquet"
splits.train = { path = "tasks/train.parquet" }
splits.dev = { path = "tasks/dev.parquet", description = "Quick checks." }
splits.test = { path = "tasks/test.parquet", held-out = true }

[verifier]
kind = "numeric"
"""


def _parquet_rows(split: str, n: int, answer: str = "") -> list[dict[str, Any]]:
    return [{"id": f"{split}-{i}", "prompt": f"{i}+1?", "answer": f"{answer}{i + 1}", "level": i % 3}
            for i in range(n)]


def test_parquet_tasks_load_as_rows(hub: HubServer, url: str, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "b"
    (root / "tasks").mkdir(parents=True)
    (root / "envhub.toml").write_text(PARQUET_MANIFEST)
    tables = {"train": _parquet_rows("train", 5), "dev": _parquet_rows("dev", 2),
              "test": _parquet_rows("test", 4, answer=SECRET)}
    for split, rows in tables.items():
        pq.write_table(pa.Table.from_pylist(rows), root / "tasks" / f"{split}.parquet")
    _push(url, root)
    assert card_header(hub, NAME, "v1.0.0")["configs"] == [
        {"config_name": "default", "data_files": [{"split": "train", "path": "tasks/train.parquet"},
                                                  {"split": "dev", "path": "tasks/dev.parquet"}]}]
    doc = descriptor_of(hub, NAME, "v1.0.0")
    assert doc["splits"] == {
        "train": {"source": "dataset", "config": "default", "format": "parquet", "path": "tasks/train.parquet",
                  "rows": 5},
        "dev": {"source": "dataset", "config": "default", "format": "parquet", "path": "tasks/dev.parquet",
                "rows": 2, "description": "Quick checks."},
        "test": {"source": "held-out", "rows": 4},
    }
    assert (doc["runtime"]["protocol"], doc["reward"]["verifier"]) == ("single-turn", "numeric")
    assert "tasks/test.parquet" not in hub.files(NAME, "v1.0.0")
    readme = hub.files(NAME, "v1.0.0")["README.md"].decode()  # generated: the bundle has no README
    assert readme.endswith("or load its public tasks as a dataset:\n\n"
                           "    datasets.load_dataset('acme/arith', revision='v1.0.0', split='train')\n")
    train, dev, test = load_datasets(hub, tmp_path, [{"repo": NAME, "revision": "v1.0.0", "split": s}
                                                      for s in ("train", "dev", "test")])
    assert (train["rows"], dev["rows"]) == (tables["train"], tables["dev"])
    assert test == {"error": "ValueError", "message": "Unknown split \"test\". Should be one of ['train', 'dev']."}


def test_splits_datasets_cannot_load_are_described_but_not_configured(hub: HubServer, url: str,
                                                                     tmp_path: Path) -> None:
    # 'hard-ones' is a valid envhub split name but not a datasets one (no '-' in split names).
    hard = '{"id": "h", "prompt": "p", "answer": "a"}\n'
    root = write_env(tmp_path / "b", heldout=False, files={"tasks/hard.jsonl": hard})
    manifest = (root / "envhub.toml").read_text()
    (root / "envhub.toml").write_text(manifest.replace(
        'splits.train = { path = "tasks/train.jsonl" }',
        'splits.train = { path = "tasks/train.jsonl" }\nsplits.hard-ones = { path = "tasks/hard.jsonl" }'))
    _push(url, root)
    assert card_header(hub, NAME, "v1.0.0")["configs"][0]["data_files"] == [
        {"split": "train", "path": "tasks/train.jsonl"}]
    assert descriptor_of(hub, NAME, "v1.0.0")["splits"] == {
        "train": {"source": "dataset", "config": "default", "format": "jsonl", "path": "tasks/train.jsonl", "rows": 3},
        "hard-ones": {"source": "file", "format": "jsonl", "path": "tasks/hard.jsonl", "rows": 1},
    }


# --- the descriptor's path belongs to envhub -----------------------------------------------------------

@pytest.mark.parametrize("heldout", [True, False], ids=["with-held-out", "public-only"])
def test_a_bundle_with_its_own_descriptor_is_refused_before_any_upload(hub: HubServer, url: str, tmp_path: Path,
                                                                       heldout: bool) -> None:
    root = write_env(tmp_path / "b", heldout=heldout, files={"environment.yaml": "name: conda-env\n"})
    with pytest.raises(RegistryError) as exc:
        _push(url, root)
    assert str(exc.value) == (
        f"{url}: cannot publish acme/arith@1.0.0: the bundle has its own environment.yaml, which on the Hub is "
        "the environment descriptor envhub writes\n"
        "  hint: rename the bundle's environment.yaml (e.g. to conda-environment.yaml) and push again")
    assert hub.repos == {}  # neither the public repo nor the held-out companion was made
    shutil.move(root / "environment.yaml", root / "conda-environment.yaml")
    _push(url, root)
    assert yaml.safe_load(hub.files(NAME)["environment.yaml"])["spec_version"] == "hf-env-0.1"
    assert hub.files(NAME)["conda-environment.yaml"] == b"name: conda-env\n"


# --- the descriptor of what a push cannot show here: a mixture ------------------------------------------

def test_mixture_descriptor_and_a_version_yaml_would_read_as_a_number() -> None:
    from envhub.manifest import parse_manifest
    from envhub.registry._hf_dataset import card, descriptor

    manifest, problems = parse_manifest(
        '[environment]\nname = "acme/mix"\nversion = "1.0"\n'
        '[dependencies]\n"acme/a" = ">=1"\n"acme/b" = ">=1"\n'
        '[tasks]\nformat = "mixture"\nsplits.train = { size = 30, mixture = [{ env = "acme/a", split = "train", '
        'weight = 2 }, { env = "acme/b", split = "dev", weight = 1 }] }\n')
    assert problems == []
    doc = yaml.safe_load(descriptor(manifest))
    assert doc["version"] == "1.0"  # a string, not the float 1.0
    assert doc["splits"] == {"train": {"source": "mixture", "rows": 30, "components": [
        {"env": "acme/a", "split": "train", "weight": 2.0}, {"env": "acme/b", "split": "dev", "weight": 1.0}]}}
    assert doc["reward"] == {"verifier": None, "range": [0.0, 1.0], "score_version": 1}
    readme, prefix = card(manifest, None)
    assert prefix == 0 and b"configs" not in readme and b"load_dataset" not in readme
