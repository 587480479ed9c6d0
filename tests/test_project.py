"""Training projects: [tool.envhub] in pyproject.toml, envhub.lock, add/remove/lock/sync/
tree/outdated, the lock honoured by envhub.load and envhub eval, Python dependencies, and
composite environments. Real registries (directories), real pushes, and the installed
``envhub`` command in subprocesses for the end-to-end flow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import run_envhub
from tests.registry_fixtures import write_env

PYPROJECT = """\
[project]
name = "trainer"
version = "0.1.0"

# environments this trainer is evaluated on
[tool.envhub]
environments = {environments}
"""


def publish(tmp: Path, name: str, version: str, *, deps: dict[str, str] | None = None,
            python_deps: list[str] | None = None, salt: str = "", registry: str | None = None) -> Path:
    """Write a bundle with these dependencies and push it (to the embedded registry)."""
    root = write_env(tmp / "src" / f"{name.replace('/', '--')}-{version}{salt}", name, version, salt=salt)
    manifest = root / "envhub.toml"
    text = manifest.read_text()
    if python_deps:
        text = text.replace("tags =", f"python-dependencies = {json.dumps(python_deps)}\ntags =", 1)
    if deps:
        table = "".join(f'"{k}" = "{v}"\n' for k, v in deps.items())
        text = text.replace("\n[tasks]", f"\n[dependencies]\n{table}\n[tasks]", 1)
    manifest.write_text(text)
    args = ["push", str(root)] + (["--registry", registry] if registry else [])
    result = run_in_process(*args)
    assert result.code == 0, result.err
    return root


def run_in_process(*args: str, cwd: Path | None = None):  # type: ignore[no-untyped-def]
    """The CLI in this process (fast), through its error boundary."""
    from envhub.cli import main

    old = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        import contextlib
        import io

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
            main(list(args))
    finally:
        os.chdir(old)
    from tests.conftest import Result

    return Result(int(exc.value.code or 0), out.getvalue(), err.getvalue())


def project(tmp: Path, environments: list[str]) -> Path:
    root = tmp / "trainer"
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(PYPROJECT.format(environments=json.dumps(environments)))
    return root


def lock_data(root: Path) -> dict:
    import tomllib

    return tomllib.loads((root / "envhub.lock").read_text())


def versions(root: Path) -> dict[str, str]:
    return {e["name"]: e["version"] for e in lock_data(root).get("environment", [])}


# --- the end-to-end flow, through the installed command ------------------------------------


def test_declare_lock_sync_load_reproducibly(tmp_path: Path) -> None:
    publish(tmp_path, "acme/basics", "1.0.0")
    publish(tmp_path, "acme/shop", "1.2.0", deps={"acme/basics": ">=1.0,<2"})
    root = project(tmp_path, [])

    added = run_envhub("add", "acme/shop", cwd=root)
    assert added.code == 0, added.err
    text = (root / "pyproject.toml").read_text()
    assert "# environments this trainer is evaluated on" in text  # the file kept its comments
    assert '"acme/shop>=1.2.0"' in text
    assert versions(root) == {"acme/basics": "1.0.0", "acme/shop": "1.2.0"}
    lock = lock_data(root)
    assert lock["lock-version"] == 1 and lock["requires"] == ["acme/shop>=1.2.0"]
    shop = next(e for e in lock["environment"] if e["name"] == "acme/shop")
    assert shop["dependencies"] == ["acme/basics>=1.0,<2"] and shop["source"] == "default"
    assert shop["digest"].startswith("sha256:") and shop["locator"].startswith("blobs/sha256/")

    synced = run_envhub("sync", "--json", cwd=root)
    assert synced.code == 0, synced.err
    assert json.loads(synced.out)["relocked"] is False

    tree = json.loads(run_envhub("tree", "--json", cwd=root).out)
    assert tree["environments"] == [
        {"name": "acme/shop", "requirement": ">=1.2.0", "version": "1.2.0", "dependencies": [
            {"name": "acme/basics", "requirement": ">=1.0,<2", "version": "1.0.0", "dependencies": []}]}]

    # Tomorrow: newer versions are published. The project still gets the locked bytes.
    publish(tmp_path, "acme/basics", "1.1.0")
    publish(tmp_path, "acme/shop", "1.3.0", deps={"acme/basics": ">=1.1,<2"})
    script = ("import envhub; e = envhub.load('acme/shop'); p = e.provenance(); "
              "print(p['version'], p['digest'], 'locked in' in p['source'])")
    loaded = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == ["1.2.0", shop["digest"], "True"]

    outdated = json.loads(run_envhub("outdated", "--json", cwd=root).out)
    assert {r["name"]: (r["locked"], r["compatible"], r["latest"]) for r in outdated} == {
        "acme/basics": ("1.0.0", "1.1.0", "1.1.0"), "acme/shop": ("1.2.0", "1.3.0", "1.3.0")}

    before = (root / "envhub.lock").read_bytes()
    relock = run_envhub("lock", cwd=root)
    assert relock.code == 0 and "unchanged" in relock.err
    assert (root / "envhub.lock").read_bytes() == before  # byte-identical: nothing moved

    upgraded = run_envhub("lock", "--upgrade", cwd=root)
    assert upgraded.code == 0, upgraded.err
    assert "~ acme/shop 1.2.0 -> 1.3.0" in upgraded.err
    assert versions(root) == {"acme/basics": "1.1.0", "acme/shop": "1.3.0"}

    evaluated = run_envhub("eval", "acme/shop", "--split", "train", "-p", "reference", "-o",
                           str(tmp_path / "runs.jsonl"), cwd=root)
    assert evaluated.code == 0, evaluated.err
    record = json.loads((tmp_path / "runs.jsonl").read_text().splitlines()[0])
    assert record["version"] == "1.3.0" and record["digest"] == next(
        e["digest"] for e in lock_data(root)["environment"] if e["name"] == "acme/shop")


def test_upgrade_package_moves_only_that_one(tmp_path: Path) -> None:
    publish(tmp_path, "acme/a", "1.0.0")
    publish(tmp_path, "acme/b", "1.0.0")
    root = project(tmp_path, ["acme/a", "acme/b"])
    assert run_in_process("lock", cwd=root).code == 0
    publish(tmp_path, "acme/a", "1.1.0")
    publish(tmp_path, "acme/b", "1.1.0")
    result = run_in_process("lock", "--upgrade-package", "acme/b", cwd=root)
    assert result.code == 0, result.err
    assert versions(root) == {"acme/a": "1.0.0", "acme/b": "1.1.0"}
    bad = run_in_process("lock", "--upgrade-package", "acme/zzz", cwd=root)
    assert bad.code == 2 and "--upgrade-package acme/zzz: not in the project" in bad.err


def test_lock_output_is_sorted_and_deterministic(tmp_path: Path) -> None:
    for name in ("acme/zeta", "acme/alpha", "acme/mid"):
        publish(tmp_path, name, "1.0.0")
    root = project(tmp_path, ["acme/zeta", "acme/mid", "acme/alpha"])
    assert run_in_process("lock", cwd=root).code == 0
    first = (root / "envhub.lock").read_text()
    (root / "envhub.lock").unlink()
    root2 = project(tmp_path / "again", ["acme/alpha", "acme/zeta", "acme/mid"])
    assert run_in_process("lock", cwd=root2).code == 0
    assert (root2 / "envhub.lock").read_text() == first
    names = [e["name"] for e in lock_data(root2)["environment"]]
    assert names == sorted(names) and lock_data(root2)["requires"] == sorted(lock_data(root2)["requires"])


# --- sync modes ------------------------------------------------------------------------------


def test_sync_locked_fails_when_the_lock_would_change_and_frozen_does_not_check(tmp_path: Path) -> None:
    publish(tmp_path, "acme/a", "1.0.0")
    publish(tmp_path, "acme/b", "1.0.0")
    root = project(tmp_path, ["acme/a"])
    missing = run_in_process("sync", "--locked", cwd=root)
    assert missing.code == 1 and "there is no lock yet" in missing.err
    assert run_in_process("lock", cwd=root).code == 0
    assert run_in_process("sync", "--locked", cwd=root).code == 0

    (root / "pyproject.toml").write_text(PYPROJECT.format(environments='["acme/a", "acme/b"]'))
    before = (root / "envhub.lock").read_bytes()
    stale = run_in_process("sync", "--locked", cwd=root)
    assert stale.code == 1
    assert "out of date" in stale.err and "added acme/b" in stale.err and "envhub lock" in stale.err
    frozen = run_in_process("sync", "--frozen", "--json", cwd=root)
    assert frozen.code == 0, frozen.err
    assert [e["name"] for e in json.loads(frozen.out)["environments"]] == ["acme/a"]
    assert (root / "envhub.lock").read_bytes() == before  # neither touched the lock

    relocked = run_in_process("sync", "--json", cwd=root)
    assert relocked.code == 0 and json.loads(relocked.out)["relocked"] is True
    assert versions(root) == {"acme/a": "1.0.0", "acme/b": "1.0.0"}
    both = run_in_process("sync", "--locked", "--frozen", cwd=root)
    assert both.code == 2 and "not both" in both.err


def test_sync_offline_uses_the_cache_only(tmp_path: Path) -> None:
    publish(tmp_path, "acme/a", "1.0.0")
    root = project(tmp_path, ["acme/a"])
    assert run_in_process("lock", cwd=root).code == 0
    offline = run_in_process("sync", "--offline", cwd=root)
    assert offline.code == 2 and "acme/a@1.0.0 is not in the cache (offline)" in offline.err
    assert run_in_process("sync", cwd=root).code == 0
    assert run_in_process("sync", "--offline", "--json", cwd=root).code == 0


def test_sync_verifies_bytes_against_the_locked_digest(tmp_path: Path) -> None:
    """A lock whose digest is swapped for another version's: the bytes fetched are those of
    the other version, and the install refuses them."""
    publish(tmp_path, "acme/a", "1.0.0")
    publish(tmp_path, "acme/a", "1.1.0")
    root = project(tmp_path, ["acme/a==1.0.0"])
    assert run_in_process("lock", cwd=root).code == 0
    other = project(tmp_path / "o", ["acme/a==1.1.0"])
    assert run_in_process("lock", cwd=other).code == 0
    digest_10 = lock_data(root)["environment"][0]["digest"]
    digest_11 = lock_data(other)["environment"][0]["digest"]
    lock = root / "envhub.lock"
    lock.write_text(lock.read_text().replace(digest_10, digest_11).replace(digest_10[7:9] + "/" + digest_10[7:],
                                                                          digest_11[7:9] + "/" + digest_11[7:]))
    result = run_in_process("sync", "--frozen", cwd=root)
    assert result.code == 2, result.err
    assert "holds acme/a 1.1.0, not acme/a 1.0.0" in result.err


def test_lock_refuses_a_version_whose_bytes_changed_in_the_registry(tmp_path: Path) -> None:
    publish(tmp_path, "acme/a", "1.0.0")
    root = project(tmp_path, ["acme/a"])
    assert run_in_process("lock", cwd=root).code == 0
    lock = root / "envhub.lock"
    real = lock_data(root)["environment"][0]["digest"]
    lock.write_text(lock.read_text().replace(real, "sha256:" + "ab" * 32))
    result = run_in_process("lock", cwd=root)
    assert result.code == 2
    assert "now has different bytes" in result.err and "a published version never changes" in result.err


# --- the lock honoured by load ---------------------------------------------------------------


def test_load_uses_the_lock_and_refuses_another_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import envhub
    from envhub.project import LockError

    publish(tmp_path, "acme/a", "1.0.0")
    root = project(tmp_path, ["acme/a"])
    assert run_in_process("lock", cwd=root).code == 0
    publish(tmp_path, "acme/a", "2.0.0")
    monkeypatch.chdir(root)
    assert envhub.load("acme/a").version == "1.0.0"
    assert envhub.load("acme/a>=1,<2").version == "1.0.0"
    with pytest.raises(LockError,
                       match=r"acme/a@2.0.0 asks for another version than .*envhub.lock locks \(acme/a@1.0.0\)"):
        envhub.load("acme/a@2.0.0")
    assert envhub.load("acme/a@2.0.0", locked=False).version == "2.0.0"
    monkeypatch.chdir(tmp_path)  # outside the project: the registry's newest
    assert envhub.load("acme/a").version == "2.0.0"


def test_newer_lock_version_is_refused_clearly(tmp_path: Path) -> None:
    publish(tmp_path, "acme/a", "1.0.0")
    root = project(tmp_path, ["acme/a"])
    assert run_in_process("lock", cwd=root).code == 0
    lock = root / "envhub.lock"
    lock.write_text(lock.read_text().replace("lock-version = 1", "lock-version = 2"))
    for args in (("sync",), ("tree",), ("lock",)):
        result = run_in_process(*args, cwd=root)
        assert result.code == 2, args
        assert "lock-version 2 is newer than this envhub understands (1)" in result.err
        assert "Traceback" not in result.err
    assert "lock-version = 2" in lock.read_text()  # left alone


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace('source = "default"', "source = 3"), "environment[0].source: must be a str"),
    (lambda t: t.replace("size = ", "bogus = 1\nsize = "), "environment[0].bogus: unknown key"),
    (lambda t: t.replace('digest = "sha256:', 'digest = "md5:'), "is not a sha256 digest"),
    (lambda t: t.replace("lock-version = 1\n", ""), "lock-version: missing"),
    (lambda t: t + "\n[[environment\n", "invalid TOML"),
])
def test_malformed_lock_is_reported_with_the_field(tmp_path: Path, edit, expected) -> None:  # type: ignore[no-untyped-def]
    publish(tmp_path, "acme/a", "1.0.0")
    root = project(tmp_path, ["acme/a"])
    assert run_in_process("lock", cwd=root).code == 0
    lock = root / "envhub.lock"
    lock.write_text(edit(lock.read_text()))
    result = run_in_process("sync", "--frozen", cwd=root)
    assert result.code == 2 and expected in result.err and str(lock) in result.err, result.err
    assert "envhub lock" in result.err  # the fix


# --- bad project input, and nothing half-written ---------------------------------------------


@pytest.mark.parametrize("environments, expected", [
    ('"acme/a"', "tool.envhub.environments must be a list of strings"),
    ('["acme/a", "not an id"]', "tool.envhub.environments[1]"),
    ('["acme/a", "acme/a>=1"]', "acme/a is already listed (tool.envhub.environments[0])"),
])
def test_bad_environments_entries(tmp_path: Path, environments: str, expected: str) -> None:
    publish(tmp_path, "acme/a", "1.0.0")
    root = tmp_path / "p"
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT.format(environments=environments))
    result = run_in_process("lock", cwd=root)
    assert result.code == 2 and expected in result.err and "pyproject.toml" in result.err, result.err
    assert not (root / "envhub.lock").exists()


def test_add_that_cannot_resolve_writes_nothing(tmp_path: Path) -> None:
    publish(tmp_path, "acme/b", "1.0.0")
    publish(tmp_path, "acme/b", "2.0.0")
    publish(tmp_path, "acme/a", "1.0.0", deps={"acme/b": ">=2"})
    publish(tmp_path, "acme/c", "3.1.0", deps={"acme/b": "<2"})
    root = project(tmp_path, ["acme/a"])
    assert run_in_process("lock", cwd=root).code == 0
    before = ((root / "pyproject.toml").read_bytes(), (root / "envhub.lock").read_bytes())
    result = run_in_process("add", "acme/c", cwd=root)
    assert result.code == 2
    assert "acme/a 1.0.0 needs acme/b>=2, but acme/c 3.1.0 needs acme/b<2" in result.err, result.err
    assert ((root / "pyproject.toml").read_bytes(), (root / "envhub.lock").read_bytes()) == before
    unknown = run_in_process("add", "acme/nope", cwd=root)
    assert unknown.code == 2 and "acme/nope is not in the embedded registry" in unknown.err


def test_remove_relocks_and_unknown_names_are_errors(tmp_path: Path) -> None:
    publish(tmp_path, "acme/a", "1.0.0")
    publish(tmp_path, "acme/b", "1.0.0")
    root = project(tmp_path, [])
    assert run_in_process("add", "acme/a>=1", cwd=root).code == 0
    assert run_in_process("add", "acme/b", "--no-sync", cwd=root).code == 0
    assert versions(root) == {"acme/a": "1.0.0", "acme/b": "1.0.0"}
    result = run_in_process("remove", "acme/a", cwd=root)
    assert result.code == 0 and "- acme/a 1.0.0" in result.err
    assert versions(root) == {"acme/b": "1.0.0"}
    assert "acme/a" not in (root / "pyproject.toml").read_text()
    missing = run_in_process("remove", "acme/a", cwd=root)
    assert missing.code == 2 and "acme/a is not in [tool.envhub] environments" in missing.err


def test_commands_outside_a_project_say_so(tmp_path: Path) -> None:
    result = run_in_process("sync", cwd=tmp_path)
    assert result.code == 2 and "no pyproject.toml in" in result.err and "[tool.envhub]" in result.err


def test_registries_from_the_project_are_searched_in_order(tmp_path: Path) -> None:
    team = tmp_path / "team-registry"
    publish(tmp_path, "acme/only-team", "1.0.0", registry=str(team))
    publish(tmp_path, "acme/a", "1.0.0")
    root = project(tmp_path, ["acme/only-team", "acme/a"])
    with open(root / "pyproject.toml", "a") as f:
        f.write(f'\n[tool.envhub.registries]\nteam = "{team}"\n')
    assert run_in_process("lock", cwd=root).code == 0, run_in_process("lock", cwd=root).err
    sources = {e["name"]: e["source"] for e in lock_data(root)["environment"]}
    assert sources == {"acme/a": "default", "acme/only-team": str(team)}
    assert run_in_process("sync", cwd=root).code == 0


# --- Python dependencies --------------------------------------------------------------------


def _wheel(directory: Path, name: str, version: str) -> Path:
    """A minimal real wheel (pure Python), so installing it needs no build backend."""
    module = name.replace("-", "_")
    path = directory / f"{module}-{version}-py3-none-any.whl"
    dist_info = f"{module}-{version}.dist-info"
    files = {f"{module}/__init__.py": f"VERSION = {version!r}\n",
             f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{dist_info}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{dist_info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for rel, text in files.items():
            z.writestr(rel, text)
    return path


def test_sync_reports_and_installs_python_dependencies_only_when_asked(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "envhub-testdep", "1.0")
    requirement = f"envhub-testdep @ {wheel.as_uri()}"
    publish(tmp_path, "acme/a", "1.0.0", python_deps=[requirement, "packaging>=20"])
    root = project(tmp_path, ["acme/a"])
    # A fresh interpreter that sees envhub (through a .pth) but has its own site-packages.
    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(target)
    site = next((target / "lib").glob("python3*/site-packages"))
    parent_site = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (site / "parent.pth").write_text(f"import site; site.addsitedir({parent_site!r})\n")
    python = str(target / "bin" / "python")
    env = {**os.environ, "PATH": f"{target / 'bin'}:/usr/bin:/bin"}

    def sync(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([python, "-m", "envhub", "sync", *args], cwd=root, capture_output=True, text=True,
                              env=env, timeout=300)

    reported = sync("--json")
    assert reported.returncode == 0, reported.stderr
    python_report = json.loads(reported.stdout)["python"]
    assert python_report["missing"] == {requirement: "not installed"}  # packaging is there
    assert python_report["required"] == {requirement: ["acme/a"], "packaging>=20": ["acme/a"]}
    assert not list(site.glob("envhub_testdep*"))  # reported, never installed silently
    text = sync()
    assert "envhub sync --install-python-deps" in text.stderr

    installed = sync("--install-python-deps")
    assert installed.returncode == 0, installed.stderr
    assert "Installing Python dependencies:" in installed.stderr
    assert list(site.glob("envhub_testdep*"))
    assert json.loads(sync("--json").stdout)["python"]["missing"] == {}


# --- composite environments -------------------------------------------------------------------

COMPOSITE = """\
[environment]
name = "acme/mix"
version = "1.0.0"
description = "Two thirds arithmetic, one third algebra."
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[dependencies]
"acme/arith" = ">=1.0"
"acme/algebra" = ">=1.0,<2"

[tasks]
format = "mixture"

[tasks.splits.train]
{size}mixture = [
  {{ env = "acme/arith", split = "train", weight = 2 }},
  {{ env = "acme/algebra", split = "train", weight = 1 }},
]

[tasks.splits.test]
held-out = {heldout}
mixture = [
  {{ env = "acme/arith", split = "test", weight = 1 }},
  {{ env = "acme/algebra", split = "test", weight = 1 }},
]
"""


def _children(tmp: Path) -> None:
    for name in ("acme/arith", "acme/algebra"):
        root = write_env(tmp / "src" / name.replace("/", "--"), name, "1.0.0", salt=name)
        (root / "tasks" / "train.jsonl").write_text("".join(
            json.dumps({"id": f"{name[5:]}-{i}", "prompt": f"{name} {i}?", "answer": str(i)}) + "\n"
            for i in range(6)))
        assert run_in_process("push", str(root)).code == 0


def _composite(tmp: Path, *, size: str = "", heldout: str = "true") -> Path:
    root = tmp / "mix"
    root.mkdir(parents=True, exist_ok=True)
    (root / "envhub.toml").write_text(COMPOSITE.format(size=size, heldout=heldout))
    return root


def test_composite_mixes_children_by_weight_and_records_their_provenance(tmp_path: Path) -> None:
    import envhub

    _children(tmp_path)
    mix = _composite(tmp_path)
    assert run_in_process("validate", "--strict", str(mix)).code == 0
    env = envhub.load(mix)
    tasks = env.tasks("train")
    # 6 + 6 tasks at weights 2:1: 9 fit without repeating (6 arith, 3 algebra), spread evenly.
    assert [t.id.split(":")[0] for t in tasks] == ["acme/arith", "acme/algebra", "acme/arith"] * 3
    assert len({t.id for t in tasks}) == 9 and tasks[0].id == "acme/arith:train:arith-0"
    assert [t.id.split(":")[0] for t in env.tasks("train", limit=3)] == ["acme/arith", "acme/algebra", "acme/arith"]
    shuffled = env.tasks("train", seed=7)
    assert shuffled != tasks
    assert sorted(t.id.split(":")[0] for t in shuffled) == sorted(t.id.split(":")[0] for t in tasks)
    task = tasks[1]
    assert env.score(task, env.reference_actions(task)[0]["content"]).reward == 1.0
    assert env.score(task, "no idea").reward == 0.0
    assert env.task_provenance(task)["env"] == "acme/algebra"
    assert "test" in env.splits and env.splits["test"].held_out and not env.splits["test"].available
    with pytest.raises(envhub.EnvNotFoundError, match="held-out"):
        env.tasks("test")

    out = tmp_path / "runs.jsonl"
    result = run_envhub("eval", str(mix), "--split", "train", "-p", "reference", "-o", str(out))
    assert result.code == 0, result.err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["env"] for r in records} == {"acme/mix"} and all(r["reward"] == 1.0 for r in records)
    for r in records:
        child = r["child"]
        assert r["task_id"] == f"{child['env']}:{child['split']}:{child['task_id']}"
        assert child["version"] == "1.0.0" and child["digest"].startswith("sha256:")


def test_composite_size_and_weights_are_checked(tmp_path: Path) -> None:
    import envhub
    from envhub.errors import BundleError

    _children(tmp_path)
    env = envhub.load(_composite(tmp_path, size="size = 6\n"))
    assert [t.id.split(":")[0] for t in env.tasks("train")].count("acme/arith") == 4
    too_many = envhub.load(_composite(tmp_path / "big", size="size = 12\n"))
    with pytest.raises(BundleError, match=r"asks for 12 tasks, so 8 from acme/arith split 'train', which has 6"):
        too_many.tasks("train")


def test_composite_split_mixing_held_out_tasks_must_be_held_out(tmp_path: Path) -> None:
    import envhub
    from envhub.errors import BundleError

    _children(tmp_path)
    with pytest.raises(BundleError, match=r"split 'test' is public but mixes the held-out split 'test' of acme/"):
        envhub.load(_composite(tmp_path, heldout="false"))


def test_composite_inside_a_project_uses_the_locked_children(tmp_path: Path) -> None:
    _children(tmp_path)
    assert run_in_process("push", str(_composite(tmp_path))).code == 0
    root = project(tmp_path, ["acme/mix"])
    assert run_in_process("sync", cwd=root).code == 0
    assert versions(root) == {"acme/algebra": "1.0.0", "acme/arith": "1.0.0", "acme/mix": "1.0.0"}
    tree = run_in_process("tree", cwd=root)
    assert "acme/mix 1.0.0" in tree.out and "acme/arith 1.0.0  (>=1.0)" in tree.out
    # A newer child is published; the locked composite keeps the locked child.
    root2 = write_env(tmp_path / "src" / "arith-2", "acme/arith", "1.5.0", salt="new")
    assert run_in_process("push", str(root2)).code == 0
    script = ("import envhub; e = envhub.load('acme/mix'); t = e.tasks('train')[0]; "
              "print(e.task_provenance(t)['version'])")
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True)
    assert out.stdout.strip() == "1.0.0", out.stderr
    outside = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert outside.stdout.strip() == "1.5.0", outside.stderr


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace('"acme/algebra" = ">=1.0,<2"\n', ""),
     ("tasks.splits.train.mixture[1].env", "acme/algebra is not in [dependencies]")),
    (lambda t: t + '\n[verifier]\nkind = "exact-match"\n',
     ("verifier", "a mixture takes [verifier] from each task's own")),
    (lambda t: t.replace('format = "mixture"', 'format = "jsonl"'),
     ("tasks.splits.train.mixture", "mixture is only used with format = 'mixture'")),
    (lambda t: t.replace("weight = 2", "weight = 0"), ("tasks.splits.train.mixture[0].weight", "greater than 0")),
])
def test_invalid_mixtures_are_reported_by_validate(tmp_path: Path, edit, expected) -> None:  # type: ignore[no-untyped-def]
    mix = _composite(tmp_path)
    (mix / "envhub.toml").write_text(edit((mix / "envhub.toml").read_text()))
    result = run_in_process("validate", "--format", "json", str(mix))
    assert result.code == 2, result.out
    found = [(p["field"], p["message"]) for p in json.loads(result.out)["problems"]]
    assert any(f == expected[0] and expected[1] in m for f, m in found), found


def test_a_warm_sync_remembers_its_checks_until_a_file_changes(tmp_path: Path) -> None:
    from envhub.settings import load_settings

    publish(tmp_path, "acme/a", "1.0.0", python_deps=["envhub-not-installed-dep>=1"])
    root = project(tmp_path, ["acme/a"])
    assert run_in_process("sync", cwd=root).code == 0
    memos = list((load_settings().cache / "sync").glob("*.json"))
    assert len(memos) == 1
    again = run_in_process("sync", "--json", cwd=root)
    assert json.loads(again.out)["python"]["missing"] == {"envhub-not-installed-dep>=1": "not installed"}
    memos[0].write_text("{not json")  # a damaged memo is only a missed shortcut
    assert json.loads(run_in_process("sync", "--json", cwd=root).out)["python"]["missing"]
    publish(tmp_path, "acme/b", "1.0.0")
    (root / "pyproject.toml").write_text(PYPROJECT.format(environments='["acme/a", "acme/b"]'))
    stale = run_in_process("sync", "--locked", cwd=root)  # a changed file is checked again
    assert stale.code == 1 and "added acme/b" in stale.err


def test_any_version_dependency_star(tmp_path: Path) -> None:
    """A dependency written "*" (any version) resolves, locks and loads like a bare name."""
    import envhub

    _children(tmp_path)
    mix = _composite(tmp_path)
    manifest = mix / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('"acme/arith" = ">=1.0"', '"acme/arith" = "*"'))
    assert run_in_process("push", str(mix)).code == 0
    assert envhub.load(mix).tasks("train")[0].id == "acme/arith:train:arith-0"
    root = project(tmp_path, ["acme/mix"])
    result = run_in_process("lock", cwd=root)
    assert result.code == 0, result.err
    mix_lock = next(e for e in lock_data(root)["environment"] if e["name"] == "acme/mix")
    assert mix_lock["dependencies"] == ["acme/algebra>=1.0,<2", "acme/arith"]
    assert run_in_process("sync", "--locked", cwd=root).code == 0
