"""Bundle code runs only when trusted: a hostile bundle, every file of which writes a marker
(outside the bundle) when Python runs it, goes through every command without trust, and
no marker is written. With trust, its declared entry point runs (its marker is the positive
control), and its other files still replace no module of envhub's."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

import envhub
from envhub.errors import TrustError
from envhub.runtime import shadowing_files
from tests.conftest import Result, run_envhub
from tests.runtime_fixtures import scaffold, set_table, write_rows
from tests.serve_fixtures import start_server

BIN = Path(sys.executable).parent

#: Top-level files named like modules Python, envhub and its dependencies import.
SHADOWS = ("json", "random", "typing", "envhub", "pydantic", "click", "rich", "fsspec", "pyarrow", "tomllib",
           "tomli_w", "packaging", "pluggy", "resolvelib", "sqlite3", "asyncio", "uuid", "tarfile", "gzip", "shutil",
           "tempfile", "subprocess", "csv", "email", "hashlib", "secrets", "inspect", "dataclasses", "pathlib",
           "threading", "pytest", "httpx2", "starlette", "uvicorn")
#: Other files that Python, pytest or plugin discovery could run.
OTHERS = ("__init__.py", "conftest.py", "sitecustomize.py", "usercustomize.py", "test_hostile.py", "_pth_trap.py",
          "_plugin_trap.py", "tasks/__init__.py", "tasks/conftest.py", "tests/conftest.py", "tests/test_trap.py")
#: Python itself imports these before any code of envhub runs, when it is started in the bundle.
BEFORE_ENVHUB = ("typing.py", "envhub.py")


def _trap(marks: Path, rel: str) -> str:
    return f"open({str(marks / rel.replace('/', '__'))!r}, 'w').close()\n"


def plant(root: Path, marks: Path) -> Path:
    """Every trap file in the bundle at ``root``; each writes ``marks/<its path>`` when run."""
    marks.mkdir(exist_ok=True)
    for rel in [f"{name}.py" for name in SHADOWS] + list(OTHERS):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(_trap(marks, rel))
    (root / "hostile.pth").write_text("import _pth_trap\n")
    info = root / "hostile_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[envhub]\nhostile = _plugin_trap\n\n[pytest11]\nhostile = _plugin_trap\n")
    return root


def marked(marks: Path) -> list[str]:
    return sorted(p.name for p in marks.iterdir())


@pytest.fixture
def declarative(tmp_path: Path) -> Path:
    """A bundle with no code of its own (numeric verifier), and every trap."""
    return plant(scaffold(tmp_path, "acme/hostile"), tmp_path / "marks")


CHECKS_PY = '''"""The bundle's declared verifier: it marks that it ran, and uses json and random."""
import json
import random

open({mark!r}, "w").close()


def check(task, completion):
    # The standard modules, not the bundle's json.py and random.py (which have no dumps, Random).
    return json.dumps(completion) == json.dumps(task["reference"]) and random.Random(0).random() < 1
'''


@pytest.fixture
def with_code(tmp_path: Path) -> Path:
    """A bundle whose verifier is its own code (``checks:check``), and every trap."""
    root = plant(scaffold(tmp_path, "acme/hostile-code"), tmp_path / "marks")
    (root / "checks.py").write_text(CHECKS_PY.format(mark=str(tmp_path / "marks" / "checks.py")))
    set_table(root, "verifier", 'kind = "python"\nentry-point = "checks:check"')
    rows = [{"id": f"t{i}", "prompt": f"Say {i}.", "answer": str(i), "reference": str(i)} for i in range(1, 4)]
    for split in ("train", "dev", "test"):
        write_rows(root, split, [dict(r, id=f"{split}-{r['id']}") for r in rows])
    return root


def envhub_in(cwd: Path, *args: str) -> Result:
    result = run_envhub(*args, cwd=cwd)
    assert "Traceback" not in result.err, result.err
    return result


# -- the traps are live (positive controls) -------------------------------------------------------


def test_every_trap_writes_its_marker_when_python_runs_it(declarative: Path, tmp_path: Path) -> None:
    """Without this, a test below that finds no marker would prove nothing."""
    marks = tmp_path / "marks"
    script = ("import importlib.metadata, runpy, site, sys\n"
              f"root = {str(declarative)!r}\n"
              f"for rel in {[f'{n}.py' for n in SHADOWS] + list(OTHERS)!r}:\n"
              "    runpy.run_path(root + '/' + rel)\n"
              "site.addsitedir(root)\n"  # runs hostile.pth, which imports _pth_trap
              "[ep.load() for ep in importlib.metadata.entry_points(group='envhub') if ep.name == 'hostile']\n")
    proc = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    expected = sorted([f"{n}.py" for n in SHADOWS] + [rel.replace("/", "__") for rel in OTHERS])
    assert marked(marks) == expected


def test_python_started_in_the_bundle_imports_its_files(declarative: Path, tmp_path: Path) -> None:
    """What the working directory on sys.path does, before envhub is involved."""
    proc = subprocess.run([sys.executable, "-c", "import email"], cwd=declarative, capture_output=True, timeout=60)
    assert proc.returncode == 0
    assert marked(tmp_path / "marks") == ["email.py"]


# -- without trust, nothing of the bundle runs ------------------------------------------------------


@pytest.mark.parametrize("where", ["outside", "inside"], ids=["cwd-outside", "cwd-in-the-bundle"])
def test_commands_without_trust_run_no_file_of_a_declarative_bundle(declarative: Path, tmp_path: Path,
                                                                    where: str) -> None:
    cwd = tmp_path if where == "outside" else declarative
    registry, out = tmp_path / "registry", tmp_path / "out"
    ref = "acme/hostile@0.1.0"
    for args in (("validate", str(declarative)), ("validate", "--check", str(declarative)),
                 ("info", str(declarative)), ("build", str(declarative), "-o", str(out)),
                 ("push", str(declarative), "--registry", str(registry)),
                 ("pull", ref, "--registry", str(registry)), ("info", ref, "--registry", str(registry)),
                 ("eval", str(declarative), "--split", "dev", "--policy", "reference", "-o", str(out / "runs")),
                 ("eval", ref, "--registry", str(registry), "--split", "dev", "--policy", "reference",
                  "-o", str(out / "pulled-runs"))):
        result = envhub_in(cwd, *args)
        assert result.code == 0, (args, result.err)
        assert marked(tmp_path / "marks") == [], args


def test_serving_metadata_without_trust_runs_no_file_of_the_bundle(declarative: Path, tmp_path: Path) -> None:
    server = start_server([str(declarative)], tmp_path / "serve")
    try:
        for path in ("/v1/environments", "/v1/environments/acme/hostile"):
            assert httpx2.get(server.base_url + path, timeout=10).status_code == 200, path
    finally:
        server.stop()
    assert marked(tmp_path / "marks") == []


TRUST = ("acme/hostile-code runs its own code (checks:check), and it is not trusted\n"
         "  hint: pass --trust (envhub eval, validate --check) or trust_code=True (envhub.load), or add "
         "\"acme\" to trusted-namespaces in {config}; only trust code you have read or whose author you trust\n")


def test_a_bundle_with_code_is_listed_built_and_moved_without_running_it(with_code: Path, tmp_path: Path) -> None:
    registry, out = tmp_path / "registry", tmp_path / "out"
    for args in (("validate", str(with_code)), ("info", str(with_code)), ("build", str(with_code), "-o", str(out)),
                 ("push", str(with_code), "--registry", str(registry)),
                 ("pull", "acme/hostile-code@0.1.0", "--registry", str(registry))):
        result = envhub_in(tmp_path, *args)
        assert result.code == 0, (args, result.err)
    trust = TRUST.format(config=Path(os.environ["ENVHUB_HOME"]) / "config.toml")
    checked = envhub_in(tmp_path, "validate", "--check", str(with_code))
    assert checked.code == 1
    assert f"{with_code}/envhub.toml: error: cannot load the environment for --check: {trust}" in checked.out
    evaluated = envhub_in(tmp_path, "eval", str(with_code), "--split", "dev", "--policy", "reference")
    assert (evaluated.code, evaluated.err) == (2, f"envhub: error: {trust}")
    assert marked(tmp_path / "marks") == []


# -- with trust, the declared entry point runs, and only it --------------------------------------------


@pytest.mark.parametrize("where", ["outside", "inside"], ids=["cwd-outside", "cwd-in-the-bundle"])
def test_trust_runs_the_declared_entry_point_and_no_other_file(with_code: Path, tmp_path: Path, where: str) -> None:
    cwd = tmp_path if where == "outside" else with_code
    result = envhub_in(cwd, "eval", str(with_code), "--split", "dev", "--policy", "reference", "--trust", "--json",
                       "-o", str(tmp_path / "runs"))
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert (summary["mean_reward"], summary["errors"]) == (1.0, 0), summary
    # The positive control: the trusted module ran. json.py and random.py did not: the
    # verifier (and envhub) got the standard modules.
    assert marked(tmp_path / "marks") == ["checks.py"]


def test_the_pytest_plugin_with_trust_runs_the_declared_entry_point_only(with_code: Path, tmp_path: Path) -> None:
    run = run_pytest(tmp_path / "project", f"--envhub={with_code}", "--envhub-trust")
    assert run.returncode == 0, run.stdout
    assert marked(tmp_path / "marks") == ["checks.py"]


# -- Python started in the bundle's directory ------------------------------------------------------------


def _python_in(root: Path, code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *flags, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1"})


def test_load_in_python_started_in_an_untrusted_bundle_refuses_before_importing(declarative: Path,
                                                                                tmp_path: Path) -> None:
    for name in BEFORE_ENVHUB:  # these replace Python's and envhub's own first imports: see the hint
        (declarative / name).unlink()
    proc = _python_in(declarative, "import envhub\ntry:\n    envhub.load('.')\nexcept envhub.TrustError as e:\n"
                                   "    print(e.message); print(e.hint)\n"
                                   "from envhub.runtime._shadow import shadowing_files; print(shadowing_files('.'))\n")
    assert proc.returncode == 0, proc.stderr
    message, hint, listed = proc.stdout.splitlines()
    # Every trap named like a standard or installed module, and the plugin metadata.
    expected = [f"{n}.py" for n in SHADOWS if f"{n}.py" not in BEFORE_ENVHUB
                and (n in sys.stdlib_module_names or importlib.util.find_spec(n) is not None)]
    assert sorted(ast.literal_eval(listed)) == sorted([*expected, "hostile_plugin-1.0.dist-info"])
    first = ", ".join(ast.literal_eval(listed)[:5])
    assert message == (f"the bundle at {declarative} is on sys.path, so its files {first} and {len(expected) - 4} more "
                       "would be imported in place of the modules (or installed packages) of the same names, and it "
                       "is not trusted")
    assert hint == ("start Python from another directory, or with python -P (PYTHONSAFEPATH=1): python -c, python -m "
                    "and the interactive interpreter put the working directory on sys.path; pass trust_code=True only "
                    "if you trust every file of the bundle")
    assert marked(tmp_path / "marks") == []
    # As the hint says: with -P the working directory is not on sys.path, and the bundle loads.
    safe = _python_in(declarative, "import envhub; print(envhub.load('.').name)", "-P")
    assert safe.returncode == 0, safe.stderr
    assert safe.stdout == "acme/hostile\n"
    assert marked(tmp_path / "marks") == []


def test_python_m_envhub_in_the_bundle_runs_no_file_of_it(declarative: Path, tmp_path: Path) -> None:
    for name in BEFORE_ENVHUB:
        (declarative / name).unlink()
    for args in (["validate", "--check", "."], ["info", "."]):
        proc = subprocess.run([sys.executable, "-m", "envhub", *args], cwd=declarative, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    assert marked(tmp_path / "marks") == []


def test_load_refuses_an_untrusted_bundle_on_sys_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process: names already imported, and names no other module has, are not listed."""
    root = scaffold(tmp_path, "acme/demo")
    for name in ("this.py", "tabnanny.py", "json.py", "generate.py"):  # this, tabnanny: standard, not yet imported
        (root / name).write_text("raise SystemExit('imported')\n")
    (root / "x-1.0.dist-info").mkdir()
    assert shadowing_files(root) == []  # not on sys.path
    monkeypatch.syspath_prepend(str(root))
    assert "this" not in sys.modules and "tabnanny" not in sys.modules
    assert shadowing_files(root) == ["tabnanny.py", "this.py", "x-1.0.dist-info"]
    with pytest.raises(TrustError) as e:
        envhub.load(root)
    assert e.value.message == (f"the bundle at {root} is on sys.path, so its files tabnanny.py, this.py, "
                               "x-1.0.dist-info would be imported in place of the modules (or installed packages) of "
                               "the same names, and it is not trusted")
    assert envhub.load(root, trust_code=True).name == "acme/demo"  # trusted: the user's sys.path is theirs
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "path", ["", *sys.path[1:]])  # "": the working directory, as python -c has it
    with pytest.raises(TrustError):
        envhub.load(".")


# -- the pytest plugin ----------------------------------------------------------------------------------------


def run_pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(NO_COLOR="1", PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    proc = subprocess.run([str(BIN / "pytest"), "-p", "no:cacheprovider", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=300)
    proc.stdout += proc.stderr
    return proc


def test_pytest_envhub_checks_a_bundle_without_importing_any_of_its_files(declarative: Path, tmp_path: Path) -> None:
    run = run_pytest(tmp_path / "project", f"--envhub={declarative}", "-v")
    assert run.returncode == 0, run.stdout
    assert "7 passed, 1 skipped" in run.stdout
    assert "test_hostile" not in run.stdout and "test_trap" not in run.stdout
    assert marked(tmp_path / "marks") == []
    # The positive control: the same bundle named as a test directory is pytest's to run.
    (declarative / "test_ok.py").write_text("def test_ok():\n    pass\n")  # a test to set the package up for
    opened = run_pytest(tmp_path / "project", str(declarative), "-o", "envhub_collect=false")
    assert {"conftest.py", "__init__.py", "test_hostile.py"} <= set(marked(tmp_path / "marks")), opened.stdout


def test_pytest_refuses_the_conftest_beside_a_named_manifest(declarative: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    run = run_pytest(project, "../acme-hostile/envhub.toml")
    assert run.returncode == 4
    assert ("ERROR: ../acme-hostile/envhub.toml: pytest would import ../acme-hostile/conftest.py, the bundle's code, "
            "and it is not trusted (pytest imports the conftest.py beside every test path)\n"
            "  hint: name the bundle with --envhub=../acme-hostile (with '='): then no file of the bundle is imported; "
            "or pass --envhub-trust if you trust the bundle's code") in run.stdout
    assert marked(tmp_path / "marks") == []


@pytest.mark.parametrize("config", ["pytest.ini", "tox.ini", "pyproject.toml"])
def test_pytest_refuses_a_configuration_file_of_the_bundle(declarative: Path, tmp_path: Path, config: str) -> None:
    """``--envhub PATH`` (no '='): pytest looks for its configuration in PATH."""
    text = {"pytest.ini": "[pytest]\nmarkers = hostile\n", "tox.ini": "[pytest]\nmarkers = hostile\n",
            "pyproject.toml": '[tool.pytest.ini_options]\nmarkers = ["hostile"]\n'}[config]
    (declarative / config).write_text(text)
    run = run_pytest(tmp_path / "project", "--envhub", "../acme-hostile")
    assert run.returncode == 4
    assert (f"ERROR: --envhub ../acme-hostile: pytest took its configuration from ../acme-hostile/{config}, a file of "
            "the bundle to check, so the bundle's settings would apply\n"
            "  hint: name the bundle with --envhub=../acme-hostile (with '='), or give pytest your own configuration "
            "with -c FILE") in run.stdout
    assert marked(tmp_path / "marks") == []
    assert run_pytest(tmp_path / "project", "--envhub=../acme-hostile").returncode == 0  # with '=': checked
    assert marked(tmp_path / "marks") == []


# -- task files ---------------------------------------------------------------------------------------------


class _Payload:
    """Pickles to a call that writes a marker: what a pickled Arrow extension type could carry."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (exec, (f"open({str(self.mark)!r}, 'w').close()",))


@pytest.fixture
def pickled_parquet(tmp_path: Path) -> Iterator[tuple[Path, bytes]]:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    root = scaffold(tmp_path, "acme/parquet")
    (tmp_path / "marks").mkdir()
    payload = pickle.dumps(_Payload(tmp_path / "marks" / "unpickled"))
    field = pa.field("extra", pa.string(), metadata={b"ARROW:extension:name": b"arrow.py_extension_type",
                                                     b"ARROW:extension:metadata": payload})
    splits = []
    for k, split in enumerate(("train", "dev", "test")):
        rows = [{"id": f"{split}-{i}", "prompt": f"What is {i} + {i}?", "answer": str(2 * i),
                 "reference": f"\\boxed{{{2 * i}}}"} for i in range(10 * k + 1, 10 * k + 4)]
        schema = pa.schema([pa.field(k, pa.string()) for k in rows[0]] + [field])
        table = pa.Table.from_pylist([dict(r, extra="x") for r in rows], schema=schema)
        pq.write_table(table, root / "tasks" / f"{split}.parquet")
        (root / "tasks" / f"{split}.jsonl").unlink()
        held = ", held-out = true" if split == "test" else ""
        splits.append(f'splits.{split} = {{ path = "tasks/{split}.parquet"{held} }}')
    set_table(root, "tasks", 'format = "parquet"\nid-field = "id"\nprompt-field = "prompt"\n' + "\n".join(splits))
    yield root, payload


def test_a_pickle_in_parquet_metadata_is_never_unpickled(pickled_parquet: tuple[Path, bytes], tmp_path: Path) -> None:
    root, payload = pickled_parquet
    for args in (("validate", "--check", str(root)),
                 ("eval", str(root), "--split", "dev", "--policy", "reference", "-o", str(tmp_path / "runs"))):
        result = envhub_in(tmp_path, *args)
        assert result.code == 0, (args, result.err)
    assert marked(tmp_path / "marks") == []
    pickle.loads(payload)  # the positive control: the payload is live
    assert marked(tmp_path / "marks") == ["unpickled"]
