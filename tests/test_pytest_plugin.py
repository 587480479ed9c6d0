"""envhub's pytest plugin (``envhub.testing.pytest_plugin``): the installed ``pytest`` run in
subprocesses on real bundles made with the scaffold of ``envhub init``, each broken in one
way (tests/data/pytest_plugin/), as an environment author runs it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from envhub import _toml
from envhub.testing import CHECKS
from tests.runtime_fixtures import scaffold, set_table, write_rows

BIN = Path(sys.executable).parent
PYTEST = str(BIN / "pytest")
DATA = Path(__file__).parent / "data" / "pytest_plugin"
_OUTCOME = re.compile(r"^(?P<id>\S+::(?P<env>[^:\s]+)::(?P<check>[a-z0-9-]+)) (?P<outcome>PASSED|FAILED|SKIPPED|ERROR)",
                      re.M)


@dataclass
class Run:
    code: int
    out: str

    @property
    def outcomes(self) -> dict[str, dict[str, str]]:
        """{environment: {check: PASSED|FAILED|SKIPPED}} from ``pytest -v``."""
        found: dict[str, dict[str, str]] = {}
        for m in _OUTCOME.finditer(self.out):
            found.setdefault(m["env"], {})[m["check"]] = m["outcome"]
        return found


def environ(home: Path) -> dict[str, str]:
    """The test's environment for a subprocess, with envhub's home under ``home`` and no
    pytest settings of the outer run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "ENVHUB_REGISTRY"}
    env.update(ENVHUB_HOME=str(home / "home"), ENVHUB_CACHE=str(home / "cache"), NO_COLOR="1", COLUMNS="400",
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    return env


def run_pytest(cwd: Path, *args: str, home: Path | None = None) -> Run:
    """The installed pytest, verbose, in ``cwd``; no cache directory written into bundles."""
    proc = subprocess.run([PYTEST, "-v", "-p", "no:cacheprovider", *args], cwd=cwd, capture_output=True, text=True,
                          env=environ(home or cwd.parent / f".{cwd.name}-home"), timeout=300)
    return Run(proc.returncode, proc.stdout + proc.stderr)


@pytest.fixture
def validate(envhub_cli: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Run]:
    """``envhub validate ARGS`` run in ``cwd`` (in-process, through the CLI's error boundary),
    to compare what it prints with what the plugin shows."""

    def run(cwd: Path, *args: str) -> Run:
        monkeypatch.chdir(cwd)
        result = envhub_cli("validate", *args)
        return Run(result.code, result.out + result.err)

    return run


def every(outcome: str, **others: str) -> dict[str, str]:
    """Each check's expected outcome: ``outcome``, but for the checks named (``_`` for ``-``)."""
    named = {k.replace("_", "-"): v for k, v in others.items()}
    assert set(named) <= set(CHECKS), set(named) - set(CHECKS)
    return {check: named.get(check, outcome) for check in CHECKS}


# -- bundles, each broken in one way -----------------------------------------------------------


def python_verifier(root: Path, module: str) -> Path:
    """Score with the verifier in tests/data/pytest_plugin/``module``; tasks with references."""
    shutil.copy(DATA / module, root / "checks.py")
    set_table(root, "verifier", 'kind = "python"\nentry-point = "checks:check"')
    rows = [{"id": f"t{i}", "prompt": f"Say {i}.", "answer": str(i), "reference": str(i)} for i in range(1, 5)]
    for split in ("train", "dev", "test"):
        write_rows(root, split, [dict(r, id=f"{split}-{r['id']}") for r in rows])
    return root


def leak_heldout(root: Path) -> Path:
    """A copy of the held-out split, and a file with train and test rows, in the bundle."""
    (root / "data").mkdir()
    shutil.copy(root / "tasks" / "test.jsonl", root / "data" / "backup.jsonl")
    (root / "all.jsonl").write_bytes((root / "tasks" / "train.jsonl").read_bytes()
                                     + (root / "tasks" / "test.jsonl").read_bytes())
    return root


def drop_canary(root: Path) -> Path:
    manifest = root / "envhub.toml"
    manifest.write_text(re.sub(r"^canary = .*\n", "", manifest.read_text(), flags=re.M))
    return root


def generated(root: Path, broken_at: int | None = None) -> Path:
    """Tasks from a seeded generator (the bundle's code) instead of files."""
    (root / "gen.py").write_text((DATA / "generator.py").read_text().replace("BROKEN_AT = None",
                                                                             f"BROKEN_AT = {broken_at}"))
    shutil.rmtree(root / "tasks")
    set_table(root, "tasks", 'format = "generator"\ngenerator = "gen:make_task"\n'
                             'splits.train = { seeds = [0, 5] }\nsplits.test = { seeds = [100, 103], held-out = true }')
    return root


def leaky_state(root: Path) -> Path:
    shutil.copy(DATA / "leaky_state.py", root / "leaky.py")
    set_table(root, "state", 'kind = "python"\nentry-point = "leaky:Workspace"\nreset = "per-episode"')
    return root


#: An author's test in a bundle: envhub_env is the bundle above it.
ENV_TEST = "def test_env(envhub_env):\n    assert envhub_env.tools or envhub_env.name == 'acme/declarative'\n"


@pytest.fixture(scope="session")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory of bundles: a good one with tool-use and SQLite state, and one per way of
    breaking a check."""
    root = tmp_path_factory.mktemp("zoo")
    good = scaffold(root, "acme/good", protocol="tool-use", state="sqlite")
    (good / "tests").mkdir()
    (good / "tests" / "test_env.py").write_text(ENV_TEST)
    python_verifier(scaffold(root, "acme/rewards-all"), "rewards_all.py")
    python_verifier(scaffold(root, "acme/random"), "random_verifier.py")
    leak_heldout(scaffold(root, "acme/leak"))
    drop_canary(scaffold(root, "acme/no-canary"))
    leaky_state(scaffold(root, "acme/leaky"))
    generated(scaffold(root, "acme/generated"))
    generated(scaffold(root, "acme/generator-fails"), broken_at=3)
    return root


@pytest.fixture(scope="session")
def zoo_run(zoo: Path) -> Run:
    """Plain ``pytest`` in the directory of bundles, trusting their code."""
    return run_pytest(zoo, "--envhub-trust")


EXPECTED = {
    "acme/good": every("PASSED"),
    "acme/rewards-all": every("PASSED", noop_scores_below_1="FAILED", resets_isolate="SKIPPED"),
    "acme/random": every("PASSED", reference_scores_1="FAILED", deterministic="FAILED", resets_isolate="SKIPPED"),
    # validate itself finds the held-out rows in public files: the bundle is invalid.
    "acme/leak": every("SKIPPED", manifest_valid="PASSED", tasks_parse="FAILED", canary_present="PASSED"),
    "acme/no-canary": every("PASSED", canary_present="FAILED", resets_isolate="SKIPPED"),
    "acme/leaky": every("PASSED", resets_isolate="FAILED"),
    "acme/generated": every("PASSED", resets_isolate="SKIPPED"),
    # What needs tasks is skipped: the run fails on tasks-parse.
    "acme/generator-fails": every("SKIPPED", manifest_valid="PASSED", tasks_parse="FAILED",
                                  no_heldout_in_public_build="PASSED", canary_present="PASSED"),
}


@pytest.mark.parametrize("name", list(EXPECTED), ids=list(EXPECTED))
def test_each_bundle_passes_or_fails_each_check(zoo_run: Run, name: str) -> None:
    assert zoo_run.outcomes[name] == EXPECTED[name], zoo_run.out
    assert zoo_run.code == 1


def test_envhub_env_loads_the_bundle_above_the_test_with_trust(zoo_run: Run) -> None:
    assert "acme-good/tests/test_env.py::test_env PASSED" in zoo_run.out


def test_the_checks_have_readable_ids_in_check_order(zoo_run: Run) -> None:
    ids = [m["id"] for m in _OUTCOME.finditer(zoo_run.out) if m["env"] == "acme/good"]
    assert ids == [f"acme-good/envhub.toml::acme/good::{check}" for check in CHECKS]
    assert "acme-rewards-all/envhub.toml::acme/rewards-all::resets-isolate SKIPPED (no per-episode state to reset " \
           "(state.kind = 'none', reset = 'per-episode'))" in zoo_run.out


def _failure(out: str, name: str, check: str) -> str:
    """The text pytest shows for one failed check: between its header and the next."""
    header = re.search(rf"^_+ {re.escape(name)}::{check} _+$", out, re.M)
    assert header, out
    end = re.search(r"^(_{3,} \S|=+ )", out[header.end():], re.M)
    return out[header.end():header.end() + (end.start() if end else len(out))].strip("\n")


def test_a_failure_shows_the_problems_of_validate_check_not_a_traceback(zoo: Path, zoo_run: Run,
                                                                         validate: Callable[..., Run]) -> None:
    shown = _failure(zoo_run.out, "acme/rewards-all", "noop-scores-below-1")
    checked = validate(zoo, "--check", "--trust", "acme-rewards-all")
    assert checked.code == 1
    problems = checked.out[:checked.out.index("invalid: ")].rstrip("\n")
    assert shown == problems
    assert shown.splitlines()[:2] == [
        "acme-rewards-all/envhub.toml: error: verifier: train/train-t1: an empty answer scores 1",
        "  hint: the verifier rewards doing nothing: check its field and normalisation",
    ]
    assert len(shown.splitlines()) == 2 * 12  # every task of the three splits
    assert "Traceback" not in zoo_run.out and "site-packages" not in zoo_run.out and "envhub/" not in shown


def test_determinism_failures_name_the_task(zoo_run: Run) -> None:
    shown = _failure(zoo_run.out, "acme/random", "deterministic")
    assert "acme-random/envhub.toml: error: verifier: dev/dev-t1: scoring the same answer twice gave 0 then 1\n" \
           "  hint: make the verifier deterministic (seed any randomness)" in shown


def test_heldout_tasks_in_the_public_build_are_found_by_copy_and_by_row(zoo_run: Run) -> None:
    shown = _failure(zoo_run.out, "acme/leak", "tasks-parse").splitlines()
    hint = "  hint: remove it, or keep the file out of the public build (add it to .envhubignore)"
    assert shown[:4] == [
        "acme-leak/all.jsonl:7: error: the held-out prompt of task 'arith-test-001' (split 'test') "
        "is in this public file",
        hint,
        "acme-leak/all.jsonl:7: error: the held-out row of task 'arith-test-001' (split 'test') is in this public file",
        hint,
    ]
    assert ("acme-leak/data/backup.jsonl:2: error: the held-out row of task 'arith-test-002' (split 'test') "
            "is in this public file") in shown


def test_a_missing_canary_names_the_field_and_gives_a_fresh_one(zoo_run: Run) -> None:
    shown = _failure(zoo_run.out, "acme/no-canary", "canary-present")
    assert re.fullmatch(r"acme-no-canary/envhub.toml:2:2: error: environment.canary: no canary: contamination of "
                        r"training sets cannot be detected\n"
                        r"  hint: add canary = \"envhub-canary:[0-9a-f]{32}\" to \[environment\]", shown), shown


def test_a_generator_that_fails_names_the_split_the_error_and_its_line(zoo: Path, zoo_run: Run) -> None:
    assert _failure(zoo_run.out, "acme/generator-fails", "tasks-parse") == (
        "acme-generator-fails/envhub.toml: error: tasks.splits.train: split 'train': generating its tasks failed: "
        f"ValueError: no task for seed 3 at {zoo}/acme-generator-fails/gen.py:8\n"
        "  hint: fix the environment's code, then rerun; 'ENVHUB_DEBUG=1 envhub validate --check --trust' shows the "
        "whole traceback")
    assert "acme/generator-fails::reference-scores-1 SKIPPED (the bundle is invalid: see tasks-parse)" in zoo_run.out


def test_state_that_leaks_between_episodes_fails_reset_isolation(zoo_run: Run) -> None:
    assert _failure(zoo_run.out, "acme/leaky", "resets-isolate") == (
        "acme-leaky/envhub.toml: error: state: train/arith-train-001: an episode's writes reached the next "
        "episode's state\n"
        "  hint: state must be copied fresh for every episode (reset = \"per-episode\")")


# -- trust, invalid bundles, options ------------------------------------------------------------


@pytest.fixture(scope="session")
def untrusted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    """Bundles checked without --envhub-trust: one with code, one without, and two invalid."""
    root = tmp_path_factory.mktemp("untrusted")
    (scaffold(root, "acme/tools", protocol="tool-use") / "test_tools_env.py").write_text(ENV_TEST)
    (scaffold(root, "acme/declarative") / "test_declarative_env.py").write_text(ENV_TEST)
    bad_manifest = scaffold(root, "acme/bad-manifest")
    manifest = bad_manifest / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('version = "0.1.0"', 'version = "one"'))
    bad_tasks = scaffold(root, "acme/bad-tasks")
    with (bad_tasks / "tasks" / "dev.jsonl").open("a") as f:
        f.write("not json\n")
    return root, run_pytest(root)


TRUST = ("acme-tools/envhub.toml: error: cannot load the environment: acme/tools runs its own code "
         "(tools.tools:calculate), and it is not trusted\n"
         "  hint: run pytest with --envhub-trust, or set envhub_trust = true in the pytest configuration, or add "
         "\"acme\" to trusted-namespaces in {config}; only trust code you have read or whose author you trust")


def test_without_trust_the_checks_that_run_code_fail_saying_how_to_trust(untrusted: tuple[Path, Run]) -> None:
    root, run = untrusted
    assert run.outcomes["acme/tools"] == every("PASSED", reference_scores_1="FAILED", noop_scores_below_1="FAILED",
                                               deterministic="FAILED", resets_isolate="SKIPPED")
    config = root.parent / f".{root.name}-home" / "home" / "config.toml"
    for check in ("reference-scores-1", "noop-scores-below-1", "deterministic"):
        assert _failure(run.out, "acme/tools", check) == TRUST.format(config=config)


def test_a_bundle_without_code_needs_no_trust(untrusted: tuple[Path, Run]) -> None:
    assert untrusted[1].outcomes["acme/declarative"] == every("PASSED", resets_isolate="SKIPPED")
    assert "acme-declarative/test_declarative_env.py::test_env PASSED" in untrusted[1].out


def test_envhub_env_without_trust_says_how_to_trust(untrusted: tuple[Path, Run]) -> None:
    root, run = untrusted
    assert "acme-tools/test_tools_env.py::test_env ERROR" in run.out
    assert (f"envhub_env: cannot load {root}/acme-tools: acme/tools runs its own code (tools.tools:calculate), and "
            "it is not trusted\n  hint: run pytest with --envhub-trust") in run.out


def problems_of(validated: Run) -> str:
    """What ``envhub validate`` printed before its summary line."""
    return validated.out[:validated.out.index("invalid: ")].rstrip("\n")


def test_an_invalid_manifest_fails_manifest_valid_and_skips_what_needs_it(untrusted: tuple[Path, Run],
                                                                          validate: Callable[..., Run]) -> None:
    root, run = untrusted
    # The environment has no name: its directory names it.
    assert run.outcomes["acme-bad-manifest"] == every("SKIPPED", manifest_valid="FAILED")
    shown = _failure(run.out, "acme-bad-manifest", "manifest-valid")
    assert shown == problems_of(validate(root, "acme-bad-manifest"))
    assert shown.startswith("acme-bad-manifest/envhub.toml:") and "error: environment.version: invalid version 'one'" \
        in shown
    assert ("acme-bad-manifest/envhub.toml::acme-bad-manifest::reference-scores-1 SKIPPED (the bundle is invalid: "
            "see manifest-valid)") in run.out


def test_a_malformed_task_file_fails_tasks_parse(untrusted: tuple[Path, Run], validate: Callable[..., Run]) -> None:
    root, run = untrusted
    assert run.outcomes["acme/bad-tasks"] == every("SKIPPED", manifest_valid="PASSED", tasks_parse="FAILED",
                                                   canary_present="PASSED")
    assert _failure(run.out, "acme/bad-tasks", "tasks-parse") == (
        "acme-bad-tasks/tasks/dev.jsonl:3: error: not valid JSON: invalid literal, expected 'null'\n"
        "  hint: each line must be one complete JSON object") == problems_of(validate(root, "acme-bad-tasks"))
    assert "acme/bad-tasks::deterministic SKIPPED (the bundle is invalid: see tasks-parse)" in run.out


def test_trust_from_the_ini_file(tmp_path: Path) -> None:
    root = scaffold(tmp_path, "acme/tools", protocol="tool-use", state="files")
    (root / "pytest.ini").write_text("[pytest]\nenvhub_trust = true\n")
    run = run_pytest(root)
    assert run.outcomes == {"acme/tools": every("PASSED")}, run.out
    assert run.code == 0


@pytest.mark.parametrize(("args", "ini", "failures"), [
    ((), "envhub_check_limit = 2", 6),
    (("--envhub-check-limit", "1"), "envhub_check_limit = 2", 3),
], ids=["ini", "option-over-ini"])  # all tasks (12 failures): see the zoo
def test_the_check_limit_caps_the_tasks_played_per_split(tmp_path: Path, args: tuple[str, ...], ini: str,
                                                          failures: int) -> None:
    root = python_verifier(scaffold(tmp_path, "acme/rewards-all"), "rewards_all.py")
    (root / "pytest.ini").write_text(f"[pytest]\nenvhub_trust = true\n{ini}\n")
    run = run_pytest(root, "-k", "noop", *args)
    assert run.outcomes == {"acme/rewards-all": {"noop-scores-below-1": "FAILED"}}, run.out
    assert _failure(run.out, "acme/rewards-all", "noop-scores-below-1").count("an empty answer scores 1") == failures


@pytest.mark.parametrize(("args", "message"), [
    (("--envhub-check-limit", "0"), "ERROR: --envhub-check-limit: '0' is not a positive whole number (how many "
                                    "tasks per split the self-test plays)"),
    (("--envhub=.", "--envhub=missing"), "ERROR: --envhub {tmp}: no envhub.toml in this directory\n  hint: name a "
                                         "bundle directory (one with an envhub.toml); 'envhub init NAMESPACE/NAME DIR' "
                                         "creates one"),
], ids=["limit", "not-a-bundle"])
def test_bad_options_are_usage_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    run = run_pytest(tmp_path, *args)
    assert run.code == 4
    assert message.format(tmp=tmp_path) in run.out


def test_warnings_of_validate_are_pytest_warnings_and_can_be_made_strict(tmp_path: Path,
                                                                         validate: Callable[..., Run]) -> None:
    root = scaffold(tmp_path, "acme/demo")
    manifest = root / "envhub.toml"
    manifest.write_text(re.sub(r"^description = .*\n", "", manifest.read_text(), flags=re.M))
    warning = validate(root).out.splitlines()[:2]
    assert warning[0].startswith("envhub.toml:") and warning[0].endswith(
        ": warning: environment.description: no description")
    assert warning[1] == "  hint: add description = \"...\" to [environment]"
    run = run_pytest(root)
    assert run.code == 0
    assert f": EnvhubWarning: {warning[0]}\n  {warning[1]}\n" in run.out
    strict = run_pytest(root, "-W", "error::envhub.testing.pytest_plugin.EnvhubWarning")
    assert strict.outcomes["acme/demo"]["manifest-valid"] == "FAILED"
    assert _failure(strict.out, "acme/demo", "manifest-valid") == "\n".join(warning)


# -- what is collected -----------------------------------------------------------------------


def collected(run: Run) -> list[str]:
    return [line for line in run.out.splitlines() if "::" in line and not line.startswith(("ERROR", "FAILED"))]


def test_envhub_collect_false_keeps_bundles_among_test_data_out(tmp_path: Path) -> None:
    """A project that makes bundles as test data (as envhub's own suite does) sets
    envhub_collect = false; --envhub and envhub_bundles still name bundles to check."""
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
                                             "envhub_collect = false\n")
    scaffold(tmp_path / "tests" / "data", "acme/demo")
    # No envhub.toml above this test: envhub_env is the one bundle named by --envhub.
    (tmp_path / "tests" / "test_x.py").write_text(
        "def test_x(envhub_env):\n    assert envhub_env.name == 'acme/demo'\n")
    assert collected(run_pytest(tmp_path, "--collect-only", "-qq")) == ["tests/test_x.py::test_x"]
    named = run_pytest(tmp_path, "--envhub=tests/data/acme-demo")
    assert named.code == 0, named.out
    assert set(named.outcomes) == {"acme/demo"}
    assert "tests/test_x.py::test_x PASSED" in named.out
    # As a direct argument, the file is collected too.
    direct = collected(run_pytest(tmp_path, "--collect-only", "-qq", "tests/data/acme-demo/envhub.toml", "tests",
                                  "-m", "envhub"))  # the conformance tests carry the marker `envhub`
    assert direct == [f"tests/data/acme-demo/envhub.toml::acme/demo::{c}" for c in CHECKS]


def test_envhubs_own_suite_does_not_collect_bundles(tmp_path: Path) -> None:
    """envhub's tests keep bundles under tests/data (plugin distributions, environment
    packages): its pyproject sets envhub_collect = false, so they are data, not tests."""
    repo = Path(__file__).resolve().parents[1]
    bundles = sorted(p.relative_to(repo).as_posix() for p in (repo / "tests").rglob("envhub.toml"))
    plain = run_pytest(repo, "--collect-only", "-qq", "tests/data", home=tmp_path)
    assert not [line for line in collected(plain) if "envhub.toml::" in line], plain.out
    forced = collected(run_pytest(repo, "--collect-only", "-qq", "tests/data", "-o", "envhub_collect=true",
                                  home=tmp_path))
    assert sorted({line.split("::")[0] for line in forced if "envhub.toml::" in line}) == bundles
    entry = _toml.loads((repo / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert entry == {"envhub": "envhub.testing.pytest_plugin"}


def test_bundles_outside_the_collected_paths_are_added(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\ntestpaths = tests\nenvhub_bundles = ../envs/one\n")
    (project / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    scaffold(tmp_path / "envs", "acme/one", directory="one")
    scaffold(tmp_path / "envs", "acme/two", directory="two")
    # --envhub=PATH, not --envhub PATH: pytest picks its rootdir before it knows plugin
    # options, and would take a separate PATH for a test path.
    run = run_pytest(project, "--envhub=../envs/two")
    assert run.code == 0, run.out
    assert set(run.outcomes) == {"acme/one", "acme/two"}
    assert "tests/test_x.py::test_x PASSED" in run.out
    assert "../envs/one/envhub.toml::acme/one::manifest-valid PASSED" in run.out
    # Named twice, checked once; a bundle inside a collected directory is not collected again.
    again = run_pytest(tmp_path, "--collect-only", "-qq", "--envhub=envs/two", "--envhub=envs/two/envhub.toml", "envs")
    assert collected(again).count("envs/two/envhub.toml::acme/two::manifest-valid") == 1


def test_the_plugin_can_be_switched_off(tmp_path: Path) -> None:
    scaffold(tmp_path, "acme/demo")
    run = run_pytest(tmp_path, "-p", "no:envhub")
    assert run.code == 5  # no tests collected


# -- fixtures for authors' own tests ---------------------------------------------------------


def test_the_fixtures_in_an_authors_test_file(tmp_path: Path) -> None:
    root = scaffold(tmp_path, "acme/demo")
    (root / "tests").mkdir()
    shutil.copy(DATA / "author_tests.py", root / "tests" / "test_author.py")
    run = run_pytest(root)
    assert run.code == 0, run.out
    for test in ("test_the_first_task_scores_its_answer", "test_push_then_load_by_id",
                 "test_the_registry_is_gone_after_its_test"):
        assert f"tests/test_author.py::{test} PASSED" in run.out
    assert run.outcomes["acme/demo"] == every("PASSED", resets_isolate="SKIPPED")
    # The temporary registry left nothing in the user's home or cache.
    home = tmp_path / f".{root.name}-home"
    assert not (home / "home" / "registry").exists() and not (home / "cache").exists()


def test_envhub_env_with_several_bundles_needs_to_be_told_which(tmp_path: Path) -> None:
    scaffold(tmp_path, "acme/demo", directory="env")
    scaffold(tmp_path, "acme/other", directory="other")
    (tmp_path / "tests" / "chosen").mkdir(parents=True)
    test = "def test_name(envhub_env):\n    assert envhub_env.name == 'acme/demo'\n"
    (tmp_path / "tests" / "test_env.py").write_text(test)
    (tmp_path / "tests" / "chosen" / "test_env_chosen.py").write_text(test)
    (tmp_path / "tests" / "chosen" / "conftest.py").write_text(
        "import pathlib, pytest\n\n@pytest.fixture\ndef envhub_bundle_path():\n"
        "    return pathlib.Path(__file__).parents[2] / 'env'\n")
    run = run_pytest(tmp_path, "tests", "--envhub=env", "--envhub=other")
    assert "tests/test_env.py::test_name ERROR" in run.out
    assert f"envhub_env: no envhub.toml at or above {tmp_path}/tests (up to {tmp_path}), and --envhub/envhub_bundles " \
           f"name 2 bundles ({tmp_path}/env, {tmp_path}/other), not one\n  hint: keep the test inside the bundle " \
           "directory, pass --envhub PATH, or override the envhub_bundle_path fixture" in run.out
    assert "tests/chosen/test_env_chosen.py::test_name PASSED" in run.out


# -- the checks without pytest ------------------------------------------------------------------


def test_the_checks_run_without_pytest(tmp_path: Path) -> None:
    from envhub.testing import Conformance

    conformance = Conformance(python_verifier(scaffold(tmp_path, "acme/rewards-all"), "rewards_all.py"), trust=True,
                              limit=1)
    try:
        assert {check: conformance.run(check).status for check in CHECKS} == {
            check.lower(): outcome.lower() for check, outcome in
            every("PASSED", noop_scores_below_1="FAILED", resets_isolate="SKIPPED").items()}
        noop = conformance.run("noop-scores-below-1")
        assert [p.message for p in noop.problems] == [f"{s}/{s}-t1: an empty answer scores 1"
                                                      for s in ("train", "dev", "test")]
        with pytest.raises(KeyError, match="unknown conformance check 'nope'; checks: manifest-valid, tasks-parse"):
            conformance.run("nope")
    finally:
        conformance.close()
