"""Nothing public gives a held-out task away.

Every example is pushed to a fresh directory registry; then every public artifact (each
member of each public archive, the registry's index files, ``envhub info``, what ``envhub
serve`` answers a client without a token, eval records on public splits) is scanned for
every held-out task's prompt, distinctive answer and row, and for the keys and seeds of
held-out generator splits. The needles are worked out here, from the source bundles, with
plain substring search: not with the scanner under test. A planted leak shows the scan
would notice one. And running every script a public archive holds makes no held-out file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

import envhub
from envhub import _toml
from tests.conftest import run_envhub
from tests.registry_fixtures import PLUGINS
from tests.serve_fixtures import TOKEN, start_server

pytestmark = pytest.mark.timeout(600)

EXAMPLES = Path(__file__).resolve().parents[1] / "example_envs"
BUNDLES = sorted(p for p in EXAMPLES.iterdir() if (p / "envhub.toml").is_file())
NAMESPACE = "envhub-examples"
_NUMBER = re.compile(r"[-+]?[\d,._]+")
_SERVED = 200  # tasks of each split asked of the server


def _manifest(bundle: Path) -> dict[str, Any]:
    return _toml.loads((bundle / "envhub.toml").read_text(encoding="utf-8"))


def _mixture(bundle: Path) -> bool:
    return _manifest(bundle)["tasks"].get("format") == "mixture"


def _distinctive(value: object) -> str | None:
    """A string long enough (12 characters) and not a number: finding it means it was copied."""
    if isinstance(value, str) and len(value.strip()) >= 12 and not _NUMBER.fullmatch(value.strip()):
        return value.strip()
    return None


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass
class Needles:
    """What must not be found: ``text -> what it is`` (for the failure message)."""

    found: dict[str, str] = field(default_factory=dict)

    def add(self, text: str | None, what: str, public: set[str]) -> None:
        if text is not None and text not in public:  # a prompt every split shares gives nothing away
            self.found.setdefault(text, what)

    def forms(self) -> Iterator[tuple[str, str]]:
        """Each needle as is, and escaped as inside a JSON string."""
        for text, what in self.found.items():
            for form in {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}:
                yield form, what

    def scan(self, artifacts: dict[str, str]) -> list[str]:
        """``artifact: what`` for each needle found in an artifact."""
        return sorted({f"{name}: {what}" for name, text in artifacts.items()
                       for form, what in self.forms() if form in text})


def _heldout_needles() -> Needles:
    """Every held-out task of every example: its prompt, every distinctive field, its row;
    for a generator split drawn from a secret, its key, its seeds and the tasks made from them."""
    needles = Needles()
    for bundle in BUNDLES:
        manifest = _manifest(bundle)
        tasks, name = manifest["tasks"], bundle.name
        splits = tasks["splits"]
        if tasks.get("format", "jsonl") == "jsonl":
            public_rows = [r for s in splits.values() if not s.get("held-out") for r in _rows(bundle / s["path"])]
            public = {t for r in public_rows for v in r.values() if (t := _distinctive(v))}
            for split, spec in splits.items():
                if not spec.get("held-out"):
                    continue
                path = bundle / spec["path"]
                for line, row in zip([ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()],
                                     _rows(path), strict=True):
                    for key, value in row.items():
                        if key != tasks.get("id-field", "id"):
                            needles.add(_distinctive(value), f"{name} {split} {row['id']} {key}", public)
                    needles.add(line.strip(), f"{name} {split} {row['id']} row", public)
        elif tasks.get("format") == "generator":
            with envhub.load(bundle, trust_code=True) as env:
                # Rules drawn from a small family repeat: a held-out task may equal a public one
                # by chance. What the public tasks the artifacts show also say is not a leak.
                public_tasks = [t for s, spec in splits.items() if not spec.get("held-out")
                                for t in env.tasks(s, limit=_SERVED)]
                public = {t for task in public_tasks for v in task.data.values() if (t := _distinctive(v))}
                for split, spec in splits.items():
                    if not spec.get("held-out"):
                        continue
                    assert "secret" in spec, f"{name}: held-out split {split} is not drawn from a secret"
                    key = (bundle / spec["secret"]).read_text().strip()
                    needles.add(key, f"{name} {split} key", set())
                    for task in env.tasks(split):
                        needles.add(str(task.seed), f"{name} {split} seed of {task.id}", set())
                        for k, value in task.data.items():
                            if k != "id":
                                needles.add(_distinctive(value), f"{name} {split} {task.id} {k}", public)
    return needles


def _archive_members(path: Path) -> dict[str, str]:
    with tarfile.open(path) as tar:
        return {f"{path.name}:{m.name}": tar.extractfile(m).read().decode("utf-8", "replace")  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


@dataclass
class Published:
    home: dict[str, str]
    registry: Path
    heldout_store: Path
    work: Path


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    """Every example pushed (children before the mixture) to a fresh home's directory registry."""
    work = tmp_path_factory.mktemp("leaks")
    home = {"ENVHUB_HOME": str(work / "home"), "ENVHUB_CACHE": str(work / "cache")}
    for bundle in sorted(BUNDLES, key=_mixture):
        result = run_envhub("push", str(bundle), env=home)
        assert result.code == 0, result.err
    return Published(home, work / "home" / "registry", work / "home" / "heldout", work)


def _public_artifacts(published: Published) -> dict[str, str]:
    artifacts: dict[str, str] = {}
    registry_files = [p for p in published.registry.rglob("*") if p.is_file()]
    blobs = [p for p in registry_files if "blobs" in p.parts]
    assert len(blobs) == len(BUNDLES)  # one public archive each; the held-out ones are elsewhere
    for blob in blobs:
        artifacts.update(_archive_members(blob))
    for index in (p for p in registry_files if p not in blobs):
        artifacts[f"registry {index.relative_to(published.registry)}"] = index.read_text()
    ids = [f"{NAMESPACE}/{b.name}" for b in BUNDLES]
    for env_id in ids:
        for args in ((), ("--json",)):
            result = run_envhub("info", env_id, *args, env=published.home)
            assert result.code == 0, result.err
            artifacts[f"envhub info {env_id} {' '.join(args)}"] = result.out + result.err
    for bundle, env_id in zip(BUNDLES, ids, strict=True):
        out = published.work / "runs" / f"{bundle.name}.jsonl"
        result = run_envhub("eval", env_id, "--split", "dev", "-n", "12", "--trust", "-o", str(out), env=published.home)
        assert result.code in (0, 1), result.err  # an llm-judge without an endpoint fails every rollout
        artifacts[f"eval {env_id} dev"] = result.out + result.err + (out.read_text() if out.exists() else "")
    # envhub serve refuses a composite (it serves the bundles a mixture mixes, pushed here too).
    served = [(bundle, env_id) for bundle, env_id in zip(BUNDLES, ids, strict=True) if not _mixture(bundle)]
    server = start_server([*(env_id for _, env_id in served), "--trust"], published.work / "serve",
                          env={**published.home, "ENVHUB_SERVE_TOKENS": TOKEN})
    try:
        base = server.base_url
        paths = ["/v1/health", "/v1/environments"]
        for bundle, env_id in served:
            paths.append(f"/v1/environments/{env_id}")
            for split in _manifest(bundle)["tasks"]["splits"]:
                paths.append(f"/v1/environments/{env_id}/splits/{split}/tasks?limit={_SERVED}")
        for path in paths:
            response = httpx2.get(base + path, timeout=60)
            assert response.status_code in (200, 401), (path, response.text)
            artifacts[f"GET {path} ({response.status_code})"] = response.text
    finally:
        server.stop()
    return artifacts


def test_no_public_artifact_holds_a_held_out_task(published: Published) -> None:
    needles = _heldout_needles()
    assert len(needles.found) > 500  # prompts, answers, rows, keys and seeds of every held-out split
    artifacts = _public_artifacts(published)
    refused = [name for name in artifacts if name.endswith("(401)")]
    # each served example's test split, asked for without a token (a composite is not served)
    assert len(refused) == len([b for b in BUNDLES if not _mixture(b)])
    assert needles.scan(artifacts) == [], "\n".join(needles.scan(artifacts))

    # Positive control: the held-out archives hold every held-out file, and the scan finds them there.
    private = {}
    for blob in (p for p in published.heldout_store.rglob("*") if p.is_file() and "blobs" in p.parts):
        private.update(_archive_members(blob))
    found = needles.scan(private)
    for bundle in BUNDLES:
        heldout = [s for s, spec in _manifest(bundle)["tasks"]["splits"].items() if spec.get("held-out")]
        if not _mixture(bundle):
            assert any(f.split(": ")[1].startswith(f"{bundle.name} {heldout[0]}") for f in found), bundle.name


def test_a_planted_leak_is_found_in_the_public_archive(tmp_path: Path) -> None:
    """The same scan over a bundle whose README quotes a held-out prompt: found, in the
    README member, and ``envhub validate`` refuses the bundle."""
    import shutil

    bundle = tmp_path / "arith"
    shutil.copytree(EXAMPLES / "arith-word-problems", bundle)
    prompt = _rows(bundle / "tasks" / "test.jsonl")[3]["prompt"]
    with (bundle / "README.md").open("a", encoding="utf-8") as f:
        f.write(f"\nA hard one: {prompt}\n")
    result = run_envhub("validate", str(bundle))
    assert result.code == 2
    assert (f"{bundle.as_posix()}/README.md:" in result.out
            and "error: the held-out prompt of task 'arith-test-00004' (split 'test') is in this public file"
            in result.out)

    # Built without validation (as a careless tool might), the archive would carry it; the scan says so.
    from envhub.bundle import bundle_files, write_archive

    files = [(rel, bundle / rel) for rel in bundle_files(bundle) if rel != "tasks/test.jsonl"]
    archive = write_archive(tmp_path / "leaky.tar", files)
    needles = Needles()
    needles.add(prompt, "arith test arith-test-00004 prompt", set())
    assert needles.scan(_archive_members(archive.path)) == ["leaky.tar:README.md: arith test arith-test-00004 prompt"]


def _run_every_script(root: Path, home: Path) -> None:
    for script in sorted(root.rglob("*.py")):
        subprocess.run([sys.executable, script.name], cwd=script.parent, capture_output=True, timeout=120,
                       env={"PATH": os.environ.get("PATH", ""), "HOME": str(home)})


@pytest.mark.parametrize("bundle", [b for b in BUNDLES if not _mixture(b)], ids=lambda b: b.name)
def test_running_the_public_archive_makes_no_held_out_file(bundle: Path, tmp_path: Path) -> None:
    from envhub.bundle import build_bundle

    built = build_bundle(bundle, tmp_path / "dist", plugins=PLUGINS)
    public = tmp_path / "public"
    with tarfile.open(built.public.path) as tar:
        tar.extractall(public, filter="data")
    _run_every_script(public, tmp_path)
    made = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in public.rglob("*") if p.is_file()}
    for split, spec in built.manifest.tasks.splits.items():
        if spec.held_out:
            assert spec.sha256 not in made, f"{made.get(spec.sha256)} is the held-out split {split!r}"
            if spec.path is not None:
                assert not (public / spec.path).exists()


def test_running_a_shipped_generator_would_make_the_held_out_file(tmp_path: Path) -> None:
    """Positive control: what the public build of arith-word-problems leaves out (generate.py)
    writes the held-out test file byte for byte, and the check above would see it."""
    import shutil

    source = tmp_path / "source"
    shutil.copytree(EXAMPLES / "arith-word-problems", source, ignore=shutil.ignore_patterns("tasks"))
    _run_every_script(source, tmp_path)
    recorded = _manifest(EXAMPLES / "arith-word-problems")["tasks"]["splits"]["test"]["sha256"]
    assert hashlib.sha256((source / "tasks" / "test.jsonl").read_bytes()).hexdigest() == recorded
