"""The cache of pulled bundles: list, verify, prune; bundles that appear only complete, under
concurrent and killed pulls."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

import pytest

from envhub.cache import Cache
from envhub.errors import IntegrityError
from envhub.registry import VersionEntry, open_registry
from envhub.settings import load_settings
from tests.registry_fixtures import NAME, PLUGINS, built_env, pull_worker, write_env


@pytest.fixture
def cache_dir() -> Path:
    return Path(os.environ["ENVHUB_CACHE"])


@pytest.fixture
def pulled(tmp_path: Path, envhub_cli, cache_dir: Path) -> dict[str, dict[str, object]]:
    """acme/arith 1.0.0 and acme/other 2.0.0 pushed and pulled, acme/arith with its held-out
    splits; returns each pull's JSON by name."""
    registry = str(tmp_path / "registry")
    out = {}
    for name, version, extra in (("acme/arith", "1.0.0", ["--with-heldout"]), ("acme/other", "2.0.0", [])):
        root = write_env(tmp_path / name.replace("/", "-"), name, version)
        assert envhub_cli("push", str(root), "--registry", registry).code == 0
        result = envhub_cli("pull", name, "--registry", registry, "--json", *extra)
        assert result.code == 0, result.err
        out[name] = json.loads(result.out)
    return out


def _json(envhub_cli, *args: str):  # type: ignore[no-untyped-def]
    result = envhub_cli("cache", *args, "--json")
    return result.code, json.loads(result.out), result.err


def test_list(pulled, envhub_cli, cache_dir: Path) -> None:
    code, listed, _ = _json(envhub_cli, "list")
    assert code == 0
    arith, other = pulled["acme/arith"], pulled["acme/other"]

    def size(path: Path) -> int:
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())

    expected = sorted([
        ("acme/arith", "1.0.0", "bundles", arith["digest"], Path(str(arith["path"]))),
        ("acme/other", "2.0.0", "bundles", other["digest"], Path(str(other["path"]))),
    ], key=lambda e: str(e[3])) + [
        ("acme/arith", "1.0.0", "heldout", arith["heldout-digest"], Path(str(arith["heldout-path"]))),
    ]
    assert [(e["name"], e["version"], e["kind"], e["digest"], Path(e["path"])) for e in listed] == expected
    assert [e["size"] for e in listed] == [size(e[4]) for e in expected]
    text = envhub_cli("cache", "list").out.splitlines()
    assert text[0].startswith(f"{expected[0][0]}@{expected[0][1]}")
    assert text[2].split()[:2] == ["acme/arith@1.0.0", "heldout"]


def test_list_empty_cache(envhub_cli) -> None:
    assert _json(envhub_cli, "list")[:2] == (0, [])
    assert _json(envhub_cli, "verify")[:2] == (0, {"ok": True, "bundles": {}})


def test_verify_clean(pulled, envhub_cli) -> None:
    code, report, err = _json(envhub_cli, "verify")
    assert code == 0 and err == ""
    assert report["ok"] is True
    assert sorted(report["bundles"]) == sorted([str(pulled["acme/arith"]["path"]), str(pulled["acme/other"]["path"]),
                                                str(pulled["acme/arith"]["heldout-path"])])
    assert all(problems == [] for problems in report["bundles"].values())


def test_verify_finds_damage_and_prune_removes_it(pulled, envhub_cli, tmp_path: Path, cache_dir: Path) -> None:
    damaged = Path(str(pulled["acme/arith"]["path"]))
    heldout = Path(str(pulled["acme/arith"]["heldout-path"]))
    record = {line.split(",")[0]: line.split(",")[1] for line in (damaged / ".envhub/RECORD").read_text().splitlines()}
    (damaged / "tasks/train.jsonl").write_text('{"id": "x", "prompt": "edited by hand", "answer": "1"}\n')
    (damaged / "notes.txt").write_text("added")
    (heldout / "tasks/test.jsonl").unlink()
    code, report, err = _json(envhub_cli, "verify")
    assert code == 1
    assert err == "envhub: some cached bundles are damaged; 'envhub cache prune' removes them\n"
    assert report["ok"] is False
    assert report["bundles"][str(damaged)] == [
        f"tasks/train.jsonl: modified (expected {record['tasks/train.jsonl'][:19]}...)", "notes.txt: not in the RECORD"]
    assert report["bundles"][str(heldout)] == ["tasks/test.jsonl: missing"]
    assert report["bundles"][str(pulled["acme/other"]["path"])] == []

    (cache_dir / "tmp" / "left-by-a-killed-pull").mkdir(parents=True)
    code, pruned, _ = _json(envhub_cli, "prune")
    assert code == 0
    assert sorted(pruned["removed"]) == sorted([str(damaged), str(heldout)])
    assert pruned["leftovers"] == 1
    assert not damaged.exists() and not heldout.exists()
    assert Path(str(pulled["acme/other"]["path"])).is_dir()  # intact bundles stay
    assert list((cache_dir / "tmp").iterdir()) == []
    assert [p.name for p in (cache_dir / "bundles").iterdir()] == [Path(str(pulled["acme/other"]["path"])).name]
    assert _json(envhub_cli, "verify")[:2] == (0, {"ok": True, "bundles": {str(pulled["acme/other"]["path"]): []}})

    # The damaged bundle comes back intact from the registry.
    again = envhub_cli("pull", "acme/arith@1.0.0", "--registry", str(tmp_path / "registry"), "--json")
    assert json.loads(again.out)["cached"] is False
    assert _json(envhub_cli, "verify")[0] == 0


def test_prune_all(pulled, envhub_cli, cache_dir: Path) -> None:
    result = envhub_cli("cache", "prune", "--all")
    assert (result.code, result.err) == (0, "removed 3 bundle(s) and 0 leftover(s)\n")
    assert _json(envhub_cli, "list")[1] == []
    assert [p for p in (cache_dir / "bundles").iterdir()] == []


def test_prune_leaves_a_cache_pulls_can_use(pulled, envhub_cli, tmp_path: Path) -> None:
    # Pruned bundles are forgotten as bundles; their refs remain, and an exact pin fetches again.
    assert envhub_cli("cache", "prune", "--all").code == 0
    result = envhub_cli("pull", "acme/other@2.0.0", "--registry", str(tmp_path / "registry"), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["cached"] is False


def test_install_refuses_bytes_that_do_not_match(tmp_path: Path, cache_dir: Path) -> None:
    bundle = built_env(tmp_path, "1.0.0")
    cache = Cache(cache_dir)
    entry = VersionEntry(name=NAME, version="1.0.0", digest="sha256:" + "1" * 64, size=bundle.public.size,
                         published_at="", registry="file:///somewhere")

    def opener() -> BinaryIO:
        return open(bundle.public.path, "rb")  # cache.install closes what the opener returns

    with pytest.raises(IntegrityError) as exc:
        cache.install(entry, entry.digest, kind="bundles", max_bytes=10**9, local=str(bundle.public.path),
                      opener=opener)
    assert exc.value.message == (f"acme/arith@1.0.0 from file:///somewhere: the archive's digest is "
                                 f"{bundle.public.digest}, but the index says {entry.digest}")
    assert not cache.has(entry.digest)
    assert list((cache_dir / "bundles").glob("*")) == [] and list((cache_dir / "tmp").iterdir()) == []
    # Streamed (no local file): the same.
    with pytest.raises(IntegrityError):
        cache.install(entry, entry.digest, kind="bundles", max_bytes=10**9, local=None,
                      opener=opener)
    assert list((cache_dir / "tmp").iterdir()) == []
    path, cached = cache.install(entry, bundle.public.digest, kind="bundles", max_bytes=10**9, local=None,
                                 opener=opener)
    assert (path, cached) == (cache_dir / "bundles" / bundle.public.digest[7:], False)
    origin = json.loads((path / ".envhub/ORIGIN.json").read_text())
    assert origin == {"digest": bundle.public.digest, "kind": "bundles", "name": NAME, "registry": "file:///somewhere",
                      "version": "1.0.0"}


def test_concurrent_pulls_share_one_bundle(tmp_path: Path, cache_dir: Path) -> None:
    """Several processes pull the same bundles into one cache at the same moment: all
    succeed, each bundle is one directory, and nothing is left in tmp/."""
    registry_url = str(tmp_path / "registry")
    registry = open_registry(registry_url, load_settings(), plugins=PLUGINS)
    # Large enough that extraction takes a while, so the processes overlap.
    refs = []
    for i in range(4):
        version = f"1.{i}.0"
        registry.publish(built_env(tmp_path, version, heldout=False,
                                   files={f"data/blob-{n}.bin": os.urandom(256 * 1024) for n in range(8)}))
        refs.append(f"{NAME}@{version}")
    workers = 4
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=pull_worker, args=(refs, registry_url, os.environ["ENVHUB_HOME"], str(cache_dir),
                                                    barrier, results)) for _ in range(workers)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in range(workers * len(refs))]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert [o for o in outcomes if o[1] != "ok"] == []
    for ref in refs:
        paths = {o[2] for o in outcomes if o[0] == ref}
        assert len(paths) == 1
        assert sum(1 for o in outcomes if o[0] == ref and o[3] is False) == 1  # one process extracted it
    digests = sorted(e.digest[7:] for e in registry.versions(NAME))
    assert sorted(p.name for p in (cache_dir / "bundles").iterdir()) == digests
    assert list((cache_dir / "tmp").iterdir()) == []
    cache = Cache(cache_dir)
    assert all(cache.verify(b) == [] for b in cache.entries())


_KILL_PULL = """
import os, signal, sys
from envhub.bundle import _archive

def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
_archive._copy_member = killed
from envhub.cli import main
main(["pull", sys.argv[1], "--registry", sys.argv[2]])
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_killed_pull_leaves_nothing_half_extracted(tmp_path: Path, cache_dir: Path, envhub_cli) -> None:
    registry = tmp_path / "registry"
    open_registry(str(registry), load_settings(), plugins=PLUGINS).publish(built_env(tmp_path, "1.0.0",
                                                                                   heldout=False))
    proc = subprocess.run([sys.executable, "-c", _KILL_PULL, NAME, str(registry)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -9, proc.stderr
    assert list((cache_dir / "bundles").glob("*")) == []  # nothing where bundles are looked for
    assert len(list((cache_dir / "tmp").iterdir())) == 1  # the killed pull's work, out of the way
    result = envhub_cli("pull", NAME, "--registry", str(registry), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["cached"] is False
    pruned = envhub_cli("cache", "prune", "--json")
    assert json.loads(pruned.out) == {"removed": [], "leftovers": 1}
    assert list((cache_dir / "tmp").iterdir()) == []
