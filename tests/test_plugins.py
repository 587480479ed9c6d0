"""The plugin manager, in process: hooks, built-ins registered through them, conflicts,
failure isolation, manifests with plugin kinds, and installed environments.

Plugins here are objects registered by hand on a manager from
``make_plugin_manager(autoload=False)`` (envhub's built-ins and nothing installed); the
same paths through real, pip-installed distributions are in tests/test_plugin_dists.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pluggy
import pytest
from pydantic import Field

from envhub import hookimpl
from envhub.context import Context, make_plugin_manager
from envhub.errors import PluginConflictError, PluginError
from envhub.hookspecs import EnvironmentPackage, HarnessProtocol, StateKind, VerifierKind
from envhub.manifest import OptionsModel, parse_manifest
from envhub.plugins import HOOKS, PluginManager
from envhub.runtime import Score, Task, Trajectory
from envhub.runtime.verifiers import Verifier, VerifierContext, VerifierError, build_verifier, default_factories
from envhub.settings import load_settings

BASE = """\
[environment]
name = "acme/words"
version = "1.0.0"

[tasks]
splits.dev = { path = "tasks/dev.jsonl" }

"""


class LengthOptions(OptionsModel):
    field: str = "answer"
    max_extra: int = Field(0, ge=0)


class LengthVerifier(Verifier):
    kind = "length"

    def __init__(self, options: LengthOptions) -> None:
        self.options = options

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:
        extra = len(trajectory.completion) - len(str(task[self.options.field]))
        return Score(1.0 if 0 <= extra <= self.options.max_extra else 0.0)


class LengthPlugin:
    @hookimpl
    def envhub_verifier_kinds(self) -> list[VerifierKind]:
        return [VerifierKind("length", lambda options, ctx, factories: LengthVerifier(options), options=LengthOptions)]


class OtherLengthPlugin:
    @hookimpl
    def envhub_verifier_kinds(self) -> list[VerifierKind]:
        return [VerifierKind("length", lambda options, ctx, factories: LengthVerifier(options))]


@pytest.fixture
def pm() -> PluginManager:
    manager = make_plugin_manager(autoload=False)
    manager.register(LengthPlugin(), name="length")
    return manager


def ctx() -> VerifierContext:
    def no_code(entry_point: str) -> Any:
        raise AssertionError("no bundle code here")

    return VerifierContext(root=Path("."), load_entry_point=no_code, settings=load_settings())


# --- built-ins go through the hooks ------------------------------------------------------------


def test_every_built_in_kind_is_registered_through_the_hooks() -> None:
    from envhub.manifest import HARNESS_PROTOCOLS, STATE_KINDS, TASK_FORMATS, VERIFIER_KINDS

    pm = make_plugin_manager(autoload=False)
    registers = pm.registered_by("envhub-rl")
    assert registers["verifier_kinds"] == sorted(VERIFIER_KINDS) == sorted(default_factories(pm))
    assert registers["harness_protocols"] == sorted(HARNESS_PROTOCOLS)
    assert registers["state_kinds"] == sorted(STATE_KINDS)
    assert registers["task_formats"] == sorted(TASK_FORMATS)
    assert registers["registry_backends"] == ["file", "hf", "memory", "s3"]
    assert registers["policies"] == ["noop", "openai", "python", "reference"]
    assert registers["executors"] == ["local", "processes"]
    assert registers["importers"] == ["inspect", "openenv", "terminal-bench", "verifiers"]
    assert set(registers) == set(HOOKS) - {"task_generators", "environments"}


def test_built_in_names_are_answered_without_loading_plugins() -> None:
    pm = make_plugin_manager()
    assert pm.lookup("verifier_kinds", "exact-match").name == "exact-match"
    assert pm.lookup("registry_backends", "file").name == "file"
    assert not pm.loaded
    assert pm.lookup("verifier_kinds", "no-such-kind") is None
    assert pm.loaded


def test_the_composition_root_registers_the_built_ins_and_a_bare_manager_has_none() -> None:
    bare = PluginManager(autoload=False)
    assert bare.lookup("verifier_kinds", "exact-match") is None
    assert bare.builtin_names("verifier_kinds") == []
    made = make_plugin_manager(autoload=False)
    assert made.lookup("verifier_kinds", "exact-match").name == "exact-match"
    assert made is not make_plugin_manager(autoload=False)


def test_two_contexts_have_independent_plugin_managers() -> None:
    first, second = Context.create(autoload=False), Context.create(autoload=False)
    assert first.plugins is not second.plugins
    first.plugins.register(LengthPlugin(), name="length")
    assert first.plugins.lookup("verifier_kinds", "length") is not None
    assert second.plugins.lookup("verifier_kinds", "length") is None
    assert second.plugins.lookup("verifier_kinds", "exact-match").name == "exact-match"


def test_a_plugin_cannot_replace_a_built_in_kind() -> None:
    class Impostor:
        @hookimpl
        def envhub_verifier_kinds(self) -> list[VerifierKind]:
            return [VerifierKind("exact-match", lambda *a: None)]

    pm = make_plugin_manager(autoload=False)
    pm.register(Impostor(), name="impostor")
    assert pm.lookup("verifier_kinds", "exact-match").factory is default_factories(pm)["exact-match"]
    [conflict] = pm.conflicts()
    assert conflict.builtin_wins
    assert conflict.message() == ("verifier kind 'exact-match' is built into envhub; plugin 'impostor' also "
                                  "provides it, and is ignored for it")


# --- conflicts and failure isolation ----------------------------------------------------------------


def test_two_plugins_providing_one_name_raise_when_it_is_used(pm: PluginManager) -> None:
    pm.register(OtherLengthPlugin(), name="other-length")
    with pytest.raises(PluginConflictError) as e:
        pm.lookup("verifier_kinds", "length")
    assert e.value.message == (
        "verifier kind 'length' is provided by 2 plugins: plugin 'length' and plugin 'other-length'")
    assert "length" not in pm.names("verifier_kinds")
    assert pm.lookup("verifier_kinds", "numeric") is not None  # everything else works


@pytest.mark.parametrize("source, error", [
    ("def envhub_policies():\n    return []\n",
     "envhub_policies is not marked @hookimpl (from envhub import hookimpl)"),
    ("@hookimpl\ndef envhub_polices():\n    return []\n",
     "envhub_polices is not an envhub hook; did you mean 'envhub_policies'?"),
    ("@hookimpl\ndef envhub_policies(settings):\n    return []\n",
     "Argument(s) {'settings'} are declared in the hookimpl"),
], ids=["unmarked", "unknown-hook", "bad-signature"])
def test_invalid_hook_implementations_are_refused(source: str, error: str) -> None:
    import types

    module = types.ModuleType("bad_plugin")
    exec("from envhub import hookimpl\n" + source, module.__dict__)
    pm = PluginManager(autoload=False)
    with pytest.raises(pluggy.PluginValidationError, match=error.replace("(", r"\(").replace(")", r"\)")
                       .replace("{", r"\{").replace("}", r"\}").replace("?", r"\?")):
        pm.register(module, name="bad")
    assert not pm.has_plugin("bad")


def test_a_plugin_whose_hook_fails_is_broken_and_contributes_nothing(pm: PluginManager) -> None:
    class HalfBroken:
        @hookimpl
        def envhub_state_kinds(self) -> list[StateKind]:
            return [StateKind("fine", lambda *a: None)]

        @hookimpl
        def envhub_harness_protocols(self) -> list[HarnessProtocol]:
            return [HarnessProtocol("Bad Name")]

    pm.register(HalfBroken(), name="half")
    [broken] = pm.broken
    assert (broken.name, broken.error) == ("half", "envhub_harness_protocols() failed: ValueError: invalid harness "
                                                   "protocol name 'Bad Name': use lowercase letters, digits and '-', "
                                                   "'_', '.'")
    assert pm.lookup("state_kinds", "fine") is None
    assert not pm.has_plugin("half")
    assert pm.lookup("verifier_kinds", "length") is not None


# --- manifests with plugin kinds --------------------------------------------------------------------


def test_a_plugin_kind_validates_with_its_options(pm: PluginManager) -> None:
    manifest, problems = parse_manifest(BASE + '[verifier]\nkind = "length"\nmax-extra = 2\n', plugins=pm)
    assert problems == []
    assert manifest is not None and manifest.verifier.kind == "length"
    assert manifest.verifier.options == {"max-extra": 2}
    verifier = build_verifier(manifest.verifier, ctx(), plugins=pm)
    assert verifier.score(Task("t", "dev", {"answer": "abc"}), Trajectory.of("abcd")).reward == 1.0
    assert verifier.score(Task("t", "dev", {"answer": "abc"}), Trajectory.of("abcdefg")).reward == 0.0


def test_plugin_options_problems_have_fields_lines_and_hints(pm: PluginManager) -> None:
    text = BASE + '[verifier]\nkind = "length"\nmax-extra = -1\nmax-extr = 1\n'
    _, problems = parse_manifest(text, plugins=pm)
    assert [(p.field, p.line, p.message, p.hint) for p in problems] == [
        ("verifier.max-extra", 10, "must be at least 0, got -1", None),
        ("verifier.max-extr", 11, "unknown key 'max-extr'", "did you mean 'max-extra'?"),
    ]


def test_an_unknown_kind_is_reported_with_the_installed_kinds(pm: PluginManager) -> None:
    _, problems = parse_manifest(BASE + '[verifier]\nkind = "lenght"\n', plugins=pm)
    [problem] = problems
    assert (problem.field, problem.line, problem.message) == ("verifier", 8, "unknown verifier kind 'lenght'")
    assert problem.hint == ("did you mean 'length'? installed verifier kinds: 'exact-match', 'numeric', 'regex', "
                            "'json-match', 'python', 'code-tests', 'rubric', 'llm-judge', 'workspace-tests', 'length'; "
                            "for another "
                            "verifier kind, install the plugin that provides it")


def test_a_plugin_kind_as_a_rubric_criterion(pm: PluginManager) -> None:
    text = BASE + textwrap.dedent("""\
        [verifier]
        kind = "rubric"
        criteria = [
          { name = "size", kind = "length", max-extra = 1, weight = 2 },
          { name = "same", kind = "exact-match" },
          { name = "typo", kind = "lenth" },
        ]
        """)
    _, problems = parse_manifest(text, plugins=pm)
    [problem] = problems
    assert (problem.field, problem.message) == ("verifier.criteria[2]", "unknown verifier kind 'lenth'")
    assert "'rubric'" not in (problem.hint or "")  # a criterion cannot be a rubric
    manifest, problems = parse_manifest(text.replace('  { name = "typo", kind = "lenth" },\n', ""), plugins=pm)
    assert problems == []
    rubric = build_verifier(manifest.verifier, ctx(), plugins=pm)
    score = rubric.score(Task("t", "dev", {"answer": "ab"}), Trajectory.of("abc"))
    assert score.breakdown == {"size": 1.0, "same": 0.0}


def test_unknown_protocol_state_and_format_keep_their_messages() -> None:
    text = BASE.replace("[tasks]\n", '[tasks]\nformat = "csv"\n') + (
        '[harness]\nprotocol = "multiturn"\n\n[verifier]\nkind = "exact-match"\n\n[state]\nkind = "postgres"\n')
    _, problems = parse_manifest(text, plugins=make_plugin_manager(autoload=False))
    assert [(p.field, p.message) for p in problems] == [
        ("tasks.format", "'csv' is not one of 'jsonl', 'parquet', 'generator', 'mixture'"),
        ("harness.protocol", "'multiturn' is not one of 'single-turn', 'multi-turn', 'tool-use'"),
        ("state.kind", "'postgres' is not one of 'none', 'files', 'sqlite', 'python', 'sandbox'"),
    ]
    assert problems[1].hint == ("did you mean 'multi-turn'? installed harness protocols: 'single-turn', 'multi-turn', "
                                "'tool-use'; for another harness protocol, install the plugin that provides it")


def test_a_plugin_protocol_that_runs_no_tools_refuses_tools() -> None:
    class Quiz:
        @hookimpl
        def envhub_harness_protocols(self) -> list[HarnessProtocol]:
            return [HarnessProtocol("quiz", max_turns=3)]

    pm = make_plugin_manager(autoload=False)
    pm.register(Quiz(), name="quiz")
    text = BASE + '[harness]\nprotocol = "quiz"\ntools = ["t:f"]\n\n[verifier]\nkind = "exact-match"\n'
    _, problems = parse_manifest(text, plugins=pm)
    assert [(p.field, p.message) for p in problems] == [
        ("harness.tools", "tools are only used by protocols that run them, and 'quiz' does not")]
    manifest, problems = parse_manifest(text.replace('tools = ["t:f"]\n', ""), plugins=pm)
    assert problems == [] and manifest is not None


def test_building_a_kind_no_plugin_provides_says_so(pm: PluginManager) -> None:
    manifest, _ = parse_manifest(BASE + '[verifier]\nkind = "length"\n', plugins=pm)
    with pytest.raises(VerifierError) as e:
        build_verifier(manifest.verifier, ctx(), plugins=make_plugin_manager(autoload=False))
    assert e.value.message.startswith("unknown verifier kind 'length'; known kinds: code-tests, exact-match")
    assert e.value.hint == "install the plugin that provides it ('envhub plugins' lists what is installed)"


# --- installed environments -------------------------------------------------------------------------


def _bundle(root: Path, name: str = "acme/words", version: str = "1.0.0") -> Path:
    (root / "tasks").mkdir(parents=True)
    (root / "envhub.toml").write_text(
        BASE.replace("acme/words", name).replace("1.0.0", version) + '[verifier]\nkind = "exact-match"\n',
        encoding="utf-8")
    (root / "tasks" / "dev.jsonl").write_text('{"id": "a", "prompt": "say a", "answer": "a"}\n', encoding="utf-8")
    return root


def test_entry_point_values_resolve_without_importing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envhub._packages import bundle_dir, packages_from_entry_points

    package = tmp_path / "site" / "wordpkg"
    _bundle(package / "data" / "words")
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n", encoding="utf-8")
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text("raise RuntimeError('imported')\n", encoding="utf-8")
    _bundle(package / "sub" / "b", name="acme/sub")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))

    assert bundle_dir("wordpkg:data/words") == package / "data" / "words"
    assert bundle_dir("wordpkg.sub:b") == package / "sub" / "b"
    assert "wordpkg" not in sys.modules
    for value, error in [
        ("wordpkg:../etc", "invalid entry point value 'wordpkg:../etc': expected 'package' or 'package:relative/dir'"),
        ("wordpkg", f"no envhub.toml in {package}"),
        ("nopkg_here:x", "package 'nopkg_here' is not installed"),
    ]:
        with pytest.raises(ValueError) as e:
            bundle_dir(value)
        assert str(e.value) == error
    eps = [EntryPoint("acme/words", "wordpkg:data/words", "envhub.environments"),
           EntryPoint("acme/other", "wordpkg:data/words", "envhub.environments"),
           EntryPoint("Not An Id", "wordpkg:data/words", "envhub.environments")]
    found = list(packages_from_entry_points(eps))
    assert [(p.name, p.version, p.error) for p in found] == [
        ("acme/words", "1.0.0", None),
        ("acme/other", "1.0.0", f"its manifest {package / 'data' / 'words' / 'envhub.toml'} names 'acme/words', "
                             "not 'acme/other'"),
        ("Not An Id", None, "invalid environment id 'Not An Id': expected 'namespace/name', e.g. 'acme/sql-shop'"),
    ]
    assert "wordpkg" not in sys.modules


def test_load_finds_an_environment_a_plugin_provides(tmp_path: Path) -> None:
    import envhub

    root = _bundle(tmp_path / "words", version="1.2.0")

    class Provider:
        @hookimpl
        def envhub_environments(self) -> list[EnvironmentPackage]:
            return [EnvironmentPackage("acme/words", root, "acme-words", "0.1", "1.2.0")]

    pm = make_plugin_manager(autoload=False)
    pm.register(Provider(), name="provider")
    context = Context.create(plugins=pm)
    env = envhub.load("acme/words", context=context, offline=True)
    assert (env.name, env.version, env.source) == ("acme/words", "1.2.0",
                                                   f"acme/words installed by acme-words 0.1 at {root}")
    assert envhub.load("acme/words>=1.2", context=context, offline=True).root == root
    with pytest.raises(envhub.EnvNotFoundError):  # a version the package does not have: the registry's
        envhub.load("acme/words@2.0.0", context=context, offline=True)

    class Rival:
        @hookimpl
        def envhub_environments(self) -> list[EnvironmentPackage]:
            return [EnvironmentPackage("acme/words", root, "rival-words", "9.9", "1.2.0")]

    pm.register(Rival(), name="rival")
    with pytest.raises(PluginConflictError) as e:
        envhub.load("acme/words", context=context, offline=True)
    assert e.value.message == "environment 'acme/words' is provided by 2 plugins: acme-words 0.1 and rival-words 9.9"


def test_a_broken_environment_entry_is_an_error_when_used(tmp_path: Path) -> None:
    import envhub

    class Broken:
        @hookimpl
        def envhub_environments(self) -> list[EnvironmentPackage]:
            return [EnvironmentPackage("acme/gone", None, "acme-gone", "1.0", error="package 'gone' is not installed")]

    pm = make_plugin_manager(autoload=False)
    pm.register(Broken(), name="broken")
    with pytest.raises(PluginError) as e:
        envhub.load("acme/gone", context=Context.create(plugins=pm), offline=True)
    assert e.value.message == ("the installed environment acme/gone (acme-gone 1.0) cannot be used: "
                               "package 'gone' is not installed")
    assert [(b.name, b.what) for b in pm.broken] == [("acme/gone", "environment")]


# --- start-up stays plugin-free -----------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--help"], ["--version"]], ids=["help", "version"])
def test_help_and_version_import_no_plugin_machinery(args: list[str]) -> None:
    code = ("import sys\nfrom envhub.cli import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
            "print('LOADED', [m for m in ('pluggy', 'envhub.plugins', 'envhub.hookspecs', 'importlib.metadata') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("LOADED []")
