"""Plugins and environment packages as users get them: real distributions from
tests/data/dists, pip-installed into a venv, driven through that venv's ``envhub`` command.

Installed together: a plugin with one of each hook (levenshtein), an environment package
whose code must never be imported (greet), a plugin that cannot be imported, plugins with
bad hooks, and two plugins claiming the same names. The broken and conflicting ones must
not stop anything else from working.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envhub.manifest import VERIFIER_KINDS
from tests.plugin_venv import PluginVenv, plugin_venv_fixture  # noqa: F401  (the session fixture plugin_venv)

BUNDLES = Path(__file__).resolve().parent / "data" / "plugin_bundles"


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where envhub_test_greet writes if it is ever imported (it then raises too)."""
    path = tmp_path / "greet-was-imported"
    monkeypatch.setenv("ENVHUB_TEST_IMPORT_MARKER", str(path))
    return path


def _plugins_json(venv: PluginVenv) -> dict:
    result = venv.run("plugins", "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


# --- envhub plugins ---------------------------------------------------------------------------


def test_plugins_lists_each_plugin_with_its_distribution_and_what_it_registers(plugin_venv: PluginVenv,
                                                                               marker: Path) -> None:
    report = _plugins_json(plugin_venv)
    by_name = {p["name"]: p for p in report["plugins"]}
    lev = by_name["levenshtein"]
    assert (lev["distribution"], lev["version"], lev["builtin"]) == ("envhub-test-levenshtein", "0.3.1", False)
    assert lev["entry_point"] == "levenshtein = envhub_test_levenshtein"
    assert lev["registers"] == {
        "verifier_kinds": ["levenshtein"], "harness_protocols": ["retry-once"], "state_kinds": ["counter"],
        "task_formats": ["csv"], "task_generators": ["add"], "registry_backends": ["testreg"],
        "policies": ["echo"], "executors": ["sequential"],
    }
    builtin = report["plugins"][0]
    assert (builtin["name"], builtin["builtin"]) == ("envhub-rl", True)
    assert "exact-match" in builtin["registers"]["verifier_kinds"]
    assert by_name["hamming-a"]["registers"] == {"verifier_kinds": ["hamming"], "registry_backends": ["dup"]}
    assert not marker.exists()


def test_plugins_lists_environment_packages_from_their_manifests_without_importing_them(
        plugin_venv: PluginVenv, marker: Path) -> None:
    report = _plugins_json(plugin_venv)
    # (the project's venv, visible here, may have installed other environment packages)
    [greet] = [e for e in report["environments"] if (e["distribution"] or "").startswith("envhub-test-")]
    assert greet["name"] == "testpkg/greet"
    assert greet["version"] == "1.4.0"  # the manifest's version, not the distribution's
    assert (greet["distribution"], greet["distribution_version"]) == ("envhub-test-greet", "2.0.0")
    assert Path(greet["path"], "envhub.toml").is_file()
    assert Path(greet["path"]).parts[-2:] == ("envhub_test_greet", "bundle")
    assert not marker.exists(), "listing imported the environment package's code"
    text = plugin_venv.run("plugins")
    assert text.code == 0
    assert f"  testpkg/greet 1.4.0  from envhub-test-greet 2.0.0  {greet['path']}" in text.out.splitlines()
    assert not marker.exists()


def test_broken_plugins_are_reported_with_their_distribution_and_error(plugin_venv: PluginVenv) -> None:
    report = _plugins_json(plugin_venv)
    broken = {b["name"]: b for b in report["broken"]}
    assert set(broken) == {"broken-import", "bad-signature", "unmarked", "typo-hook", "hook-raises", "wrong-type"}
    assert broken["broken-import"]["distribution"] == "envhub-test-broken-import"
    assert broken["broken-import"]["version"] == "0.0.1"
    assert broken["broken-import"]["error"] == (
        "cannot import envhub_test_broken_import: ModuleNotFoundError: "
        "No module named 'envhub_test_not_installed_anywhere'")
    assert all(broken[n]["distribution"] == "envhub-test-bad-hooks" for n in broken if n != "broken-import")
    assert broken["bad-signature"]["error"].startswith("invalid plugin: PluginValidationError: Plugin 'bad-signature' "
                                                       "for hook 'envhub_verifier_kinds' hookimpl definition: "
                                                       "envhub_verifier_kinds(config) Argument(s) {'config'}")
    assert broken["unmarked"]["error"] == ("invalid plugin: PluginValidationError: envhub_policies is not marked "
                                           "@hookimpl (from envhub import hookimpl)")
    assert broken["typo-hook"]["error"] == ("invalid plugin: PluginValidationError: envhub_verifer_kinds is not an "
                                            "envhub hook; did you mean 'envhub_verifier_kinds'?")
    assert broken["hook-raises"]["error"] == "envhub_policies() failed: KeyError: 'settings'"
    assert broken["wrong-type"]["error"] == (
        "envhub_verifier_kinds() failed: TypeError: returned dict, not a list of VerifierKind")
    # A broken plugin contributes nothing, even the hooks that worked (hook-raises' executors).
    assert "hook-raises" not in {p["name"] for p in report["plugins"]}

    text = plugin_venv.run("plugins")
    assert text.code == 0  # broken plugins are shown, not fatal
    assert ("  broken-import from envhub-test-broken-import 0.0.1 (entry point broken-import = "
            "envhub_test_broken_import): cannot import envhub_test_broken_import: ModuleNotFoundError: "
            "No module named 'envhub_test_not_installed_anywhere'") in text.out.splitlines()
    assert plugin_venv.run("plugins", "--strict").code == 1


def test_two_plugins_claiming_one_name_is_shown_and_fails_only_where_the_name_is_used(
        plugin_venv: PluginVenv, tmp_path: Path) -> None:
    report = _plugins_json(plugin_venv)
    conflicts = {(c["hook"], c["name"]): c for c in report["conflicts"]}
    assert set(conflicts) == {("verifier_kinds", "hamming"), ("registry_backends", "dup")}
    assert conflicts[("verifier_kinds", "hamming")]["message"] == (
        "verifier kind 'hamming' is provided by 2 plugins: envhub-test-hamming-a 1.0.0 and envhub-test-hamming-b 1.0.1")
    assert conflicts[("verifier_kinds", "hamming")]["distributions"] == ["envhub-test-hamming-a",
                                                                        "envhub-test-hamming-b"]

    result = plugin_venv.run("validate", BUNDLES / "hamming")
    assert result.code == 2
    assert ("hamming/envhub.toml:9:2: error: verifier: verifier kind 'hamming' is provided by 2 plugins: "
            "envhub-test-hamming-a 1.0.0 and envhub-test-hamming-b 1.0.1") in result.out
    assert "hint: uninstall all but one of them (pip uninstall envhub-test-hamming-b)" in result.out

    pushed = plugin_venv.run("push", BUNDLES / "lev", "--registry", "dup://x")
    assert pushed.code == 2
    assert pushed.err.startswith("envhub: error: registry scheme 'dup' is provided by 2 plugins: ")
    # Unrelated commands are untouched.
    assert plugin_venv.run("validate", BUNDLES / "lev").code == 0
    assert plugin_venv.run("--help").code == 0


# --- a plugin's kinds, end to end -------------------------------------------------------------


def test_a_plugin_verifier_kind_validates_and_checks_and_evaluates(plugin_venv: PluginVenv, tmp_path: Path) -> None:
    checked = plugin_venv.run("validate", "--check", "--strict", BUNDLES / "lev")
    assert checked.code == 0, checked.out + checked.err
    out = tmp_path / "lev.jsonl"
    result = plugin_venv.run("eval", BUNDLES / "lev", "--split", "dev", "--policy", "reference", "-o", out, "--json")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert (summary["rollouts"], summary["mean_reward"]) == (3, 1.0)  # 'Pariss' is one edit from 'Paris'
    noop = plugin_venv.run("eval", BUNDLES / "lev", "--split", "dev", "--policy", "noop", "-o",
                           tmp_path / "noop.jsonl", "--json")
    assert json.loads(noop.out)["mean_reward"] == 0.0


def test_plugin_options_are_validated_with_the_plugins_model_and_line_numbers(plugin_venv: PluginVenv,
                                                                               tmp_path: Path) -> None:
    bundle = tmp_path / "bad-options"
    shutil.copytree(BUNDLES / "lev", bundle)
    manifest = bundle / "envhub.toml"
    text = manifest.read_text(encoding="utf-8").replace('max-distance = 1', 'max-distance = "one"\nmaxdistance = 1')
    manifest.write_text(text, encoding="utf-8")
    result = plugin_venv.run("validate", "--format", "json", bundle)
    assert result.code == 2
    problems = [(p["field"], p["line"], p["message"], p["hint"]) for p in json.loads(result.out)["problems"]]
    assert problems == [
        ("verifier.max-distance", 15, "expected an integer, got string 'one'", None),
        ("verifier.maxdistance", 16, "unknown key 'maxdistance'", "did you mean 'max-distance'?"),
    ]


def test_an_unknown_kind_names_the_installed_ones_and_the_plugin_to_install(plugin_venv: PluginVenv,
                                                                            tmp_path: Path) -> None:
    bundle = tmp_path / "typo"
    shutil.copytree(BUNDLES / "lev", bundle)
    manifest = bundle / "envhub.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('"levenshtein"', '"levenstein"'), encoding="utf-8")
    result = plugin_venv.run("validate", "--format", "json", bundle)
    assert result.code == 2
    [problem] = json.loads(result.out)["problems"]
    assert (problem["field"], problem["line"], problem["message"]) == (
        "verifier", 12, "unknown verifier kind 'levenstein'")
    # 'hamming' is not offered: two plugins claim it, so it cannot be used. (Kinds of plugins
    # the project's venv installed, such as reasoning-gym's, are listed too.)
    from envhub.context import make_plugin_manager

    others = [k for k in make_plugin_manager().names("verifier_kinds") if k not in VERIFIER_KINDS]
    listed = ", ".join(repr(k) for k in [*VERIFIER_KINDS, "levenshtein", *others])
    assert problem["hint"] == (f"did you mean 'levenshtein'? installed verifier kinds: {listed}; "
                               "for another verifier kind, install the plugin that provides it")


def test_a_plugins_format_protocol_state_and_criterion_work_together(plugin_venv: PluginVenv, tmp_path: Path) -> None:
    checked = plugin_venv.run("-v", "validate", "--check", "--strict", BUNDLES / "kinds")
    assert checked.code == 0, checked.out + checked.err
    assert "dev: 2 rows" in checked.out  # rows counted through the plugin's csv reader
    out = tmp_path / "kinds.jsonl"
    result = plugin_venv.run("eval", BUNDLES / "kinds", "--split", "dev", "--policy", "noop", "-o", out, "--json")
    assert result.code == 0, result.err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    # retry-once: an empty answer gets one more turn; the state kind ran without error.
    assert [(r["turns"], r["reward"], r["error"]) for r in records] == [(2, 0.0, None), (2, 0.0, None)]
    assert records[0]["messages"][2] == {"role": "user", "content": "Please answer."}
    reference = plugin_venv.run("eval", BUNDLES / "kinds", "--split", "dev", "-o", tmp_path / "ref.jsonl", "--json")
    assert json.loads(reference.out)["mean_reward"] == 1.0


def test_a_plugins_named_generator_needs_no_trust(plugin_venv: PluginVenv, tmp_path: Path) -> None:
    result = plugin_venv.run("eval", BUNDLES / "gen", "--split", "train", "-n", "5", "-o", tmp_path / "gen.jsonl",
                             "--json")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert (summary["rollouts"], summary["mean_reward"]) == (5, 1.0)
    assert plugin_venv.run("validate", "--check", BUNDLES / "gen").code == 0


def test_a_plugins_policy_and_executor(plugin_venv: PluginVenv, tmp_path: Path) -> None:
    out = tmp_path / "echo.jsonl"
    result = plugin_venv.run("eval", BUNDLES / "lev", "--split", "dev", "--policy", "echo:Rome",
                             "--executor", "sequential", "-o", out, "--json")
    assert result.code == 0, result.err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["task_id"]: r["reward"] for r in records} == {"fr": 0.0, "it": 1.0, "es": 0.0}
    assert {r["policy"] for r in records} == {"echo:Rome"}
    assert {r["executor"] for r in records} == {"sequential"}
    unknown = plugin_venv.run("eval", BUNDLES / "lev", "--split", "dev", "--policy", "echoes:x")
    assert unknown.code == 2
    assert unknown.err.splitlines()[0] == (
        "envhub: error: unknown policy 'echoes:x'; a policy is one of: reference, noop, openai:MODEL, "
        "python:module:func, python:path/to/file.py:func, echo:TEXT")


def test_a_plugins_registry_scheme(plugin_venv: PluginVenv, tmp_path: Path) -> None:
    url = f"testreg://{tmp_path / 'reg'}"
    assert plugin_venv.run("push", BUNDLES / "lev", "--registry", url).code == 0
    versions = plugin_venv.run("versions", "plugtest/capitals", "--registry", url, "--json")
    assert versions.code == 0, versions.err
    assert [v["version"] for v in json.loads(versions.out)] == ["1.0.0"]
    assert (tmp_path / "reg").is_dir()


# --- environment packages ------------------------------------------------------------------------


def test_envhub_eval_finds_an_installed_environment_package_by_name(plugin_venv: PluginVenv, tmp_path: Path,
                                                                    marker: Path) -> None:
    out = tmp_path / "greet.jsonl"
    result = plugin_venv.run("eval", "testpkg/greet", "--split", "dev", "-o", out, "--json", "--offline")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert (summary["rollouts"], summary["mean_reward"]) == (2, 1.0)
    assert summary["environment"]["version"] == "1.4.0"
    [record, _] = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["source"].startswith("testpkg/greet installed by envhub-test-greet 2.0.0 at ")
    assert not marker.exists()


def test_envhub_load_finds_an_installed_environment_package(plugin_venv: PluginVenv, marker: Path) -> None:
    code = ("import envhub\n"
            "env = envhub.load('testpkg/greet')\n"
            "print(env.name, env.version, [t.id for t in env.tasks('dev')])\n"
            "print(envhub.load('testpkg/greet@1.4.0').version, envhub.load('testpkg/greet>=1,<2').version)\n"
            "try:\n"
            "    envhub.load('testpkg/greet@9.9.9', offline=True)\n"
            "except envhub.EnvNotFoundError as e:\n"
            "    print('not found:', type(e).__name__)\n")
    result = plugin_venv.python_c(code)
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["testpkg/greet 1.4.0 ['d1', 'd2']", "1.4.0 1.4.0", "not found: EnvNotFoundError"]
    assert not marker.exists(), "loading imported the environment package's code"


# --- the other distributions, and the plugin authors' API -------------------------------------

ROOT = Path(__file__).resolve().parent.parent
#: The distributions besides envhub-rl: code that may use envhub's public names only.
OTHER_DISTRIBUTIONS = (ROOT / "registry", ROOT / "plugins" / "envhub-reasoning-gym",
                       ROOT / "plugins" / "envhub-containers", ROOT / "plugins" / "envhub-ray")


def _private_envhub_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of each import in ``path`` of a private envhub module (a dotted
    part starting with ``_``), inside functions and under ``if TYPE_CHECKING:`` too."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            # `from envhub import _toml` imports a module too; `__version__` is a public name.
            modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names
                                      if a.name.startswith("_") and not a.name.startswith("__"))]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] == "envhub" and any(part.startswith("_") for part in parts[1:]):
                found.append((node.lineno, module))
    return sorted(found)


def test_the_other_distributions_import_only_public_envhub_modules() -> None:
    files = [p for dist in OTHER_DISTRIBUTIONS for p in sorted(dist.rglob("*.py"))]
    assert len(files) > 10
    assert [f"{path.relative_to(ROOT)}:{line} {module}"
            for path in files for line, module in _private_envhub_imports(path)] == []


def test_the_private_import_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from envhub import __version__, load\n"
                      "def f():\n    from envhub.runtime._eval import plan_jobs\n    from envhub import _toml\n"
                      "import envhub._version\n")
    assert _private_envhub_imports(source) == [(3, "envhub.runtime._eval"), (4, "envhub._toml"), (5, "envhub._version")]


@pytest.mark.parametrize("dist", OTHER_DISTRIBUTIONS, ids=lambda p: p.name)
def test_the_other_distributions_pin_envhub_rl_to_a_range_holding_its_version(dist: Path) -> None:
    import tomllib

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    import envhub

    project = tomllib.loads((dist / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.11"
    [core] = [r for r in map(Requirement, project["dependencies"]) if r.name == "envhub-rl"]
    assert core.specifier.contains(Version(envhub.__version__)), str(core.specifier)
    # a range with an upper bound: a release that may change the public names is not taken
    assert any(s.operator == "<" for s in core.specifier), str(core.specifier)
    assert not SpecifierSet(str(core.specifier)).contains("1000")


def test_envhub_plugin_exports_every_name_it_lists_and_stays_cheap_to_import() -> None:
    code = ("import sys, envhub.plugin as p\n"
            "assert 'envhub.runtime' not in sys.modules and 'pydantic' not in sys.modules, 'heavy import'\n"
            "missing = [n for n in p.__all__ if getattr(p, n, None) is None]\n"
            "assert not missing, missing\n"
            "print(len(p.__all__))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    import envhub.plugin

    names = set(envhub.plugin.__all__)
    for name in ("hookimpl", "VerifierKind", "HarnessProtocol", "StateKind", "TaskFormat", "TaskGenerator",
                 "RegistryBackend", "PolicyKind", "ExecutorKind", "EnvironmentPackage", "Verifier",
                 "VerifierContext", "VerifierError", "Score", "Task", "Trajectory", "StateFactory", "StateHandle",
                 "Executor", "RolloutJob", "RolloutPlan", "Registry", "VersionEntry", "PublishResult", "Policy",
                 "PolicyOptions", "OptionsModel", "Settings", "EnvhubError", "PluginError", "UsageError"):
        assert name in names
    from envhub.hookspecs import hookimpl
    from envhub.runtime.verifiers import Verifier

    assert envhub.plugin.hookimpl is hookimpl and envhub.plugin.Verifier is Verifier


_TYPED_PLUGIN = '''\
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envhub.plugin import (
    OptionsModel, Score, StateFactory, StateHandle, Task, Trajectory, Verifier, VerifierContext, VerifierError,
    VerifierFactory, VerifierKind, StateKind, hookimpl, task_value,
)


class Options(OptionsModel):
    field: str = "answer"


class Shouted(Verifier):
    kind = "shouted"

    def __init__(self, options: Options) -> None:
        self.options = options

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:
        expected = task_value(task, self.options.field, self.kind)
        if not isinstance(expected, str):
            raise VerifierError(f"{self.options.field} is not a string")
        return Score(1.0 if trajectory.completion == expected.upper() else 0.0)


class Scratchpad(StateFactory):
    kind = "scratchpad"

    def new(self, task: Task) -> StateHandle:
        value: dict[str, list[str]] = {"notes": []}
        return StateHandle(value, value.clear)


def make(options: Any, ctx: VerifierContext, factories: Mapping[str, VerifierFactory]) -> Verifier:
    return Shouted(options)


@hookimpl
def envhub_verifier_kinds() -> list[VerifierKind]:
    return [VerifierKind("shouted", make, options=Options)]


@hookimpl
def envhub_state_kinds() -> list[StateKind]:
    return [StateKind("scratchpad", lambda spec, root, load_entry_point: Scratchpad())]
'''

_USES_LOAD = '''\
from __future__ import annotations

from envhub import load


def first_reward(path: str) -> float:
    env = load(path)
    task = env.tasks("train")[0]
    return env.score(task, "X").reward
'''


def _mypy_strict(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "typed_plugin.py").write_text(source, encoding="utf-8")
    mypy = Path(sys.executable).with_name("mypy")
    return subprocess.run([str(mypy), "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"), "typed_plugin.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_a_plugin_written_against_envhub_plugin_passes_mypy_strict(tmp_path: Path) -> None:
    proc = _mypy_strict(tmp_path, _TYPED_PLUGIN)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_code_using_envhub_load_passes_mypy_strict(tmp_path: Path) -> None:
    proc = _mypy_strict(tmp_path, _USES_LOAD)
    assert proc.returncode == 0, proc.stdout + proc.stderr
