"""``Verifier.reference(task)``: a verifier kind says what solves a task, so the ``reference``
policy and ``validate --check``'s reference check work for a plugin's kinds as for built-in ones.

The plugin kind here is registered on a manager made in the test, from the plugin authors'
API (``envhub.plugin``), and used by a bundle in ``tmp_path``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.context import Context, make_plugin_manager
from envhub.plugin import OptionsModel, Reference, Score, Task, Trajectory, Verifier, VerifierKind, hookimpl, task_value
from envhub.runtime import self_test

TASKS = [{"id": "a", "prompt": "Reverse 'envhub'.", "word": "envhub"},
         {"id": "b", "prompt": "Reverse 'stressed'.", "word": "stressed"}]


class Options(OptionsModel):
    field: str = "word"


class Reversed(Verifier):
    """Reward 1 when the completion is the task's word backwards. No ``reference``."""

    kind = "reversed"

    def __init__(self, options: Options) -> None:
        self.options = options

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:
        word = str(task_value(task, self.options.field, self.kind))
        return Score(1.0 if trajectory.completion.strip() == word[::-1] else 0.0)


class ReversedWithReference(Reversed):
    def reference(self, task: Task) -> Reference | None:
        word = task.get(self.options.field)
        return word[::-1] if isinstance(word, str) else None


class WrongReference(Reversed):
    def reference(self, task: Task) -> Reference | None:
        return str(task["word"])  # forwards: the verifier refuses it


class RaisingReference(Reversed):
    def reference(self, task: Task) -> Reference | None:
        raise KeyError("word")


class TurnsReference(Reversed):
    """A reference of assistant turns: the answer is the last one (single-turn: the only one read)."""

    def reference(self, task: Task) -> Reference | None:
        return [{"content": str(task["word"])[::-1]}]


class Plugin:
    def __init__(self, cls: type[Reversed]) -> None:
        self.cls = cls

    @hookimpl
    def envhub_verifier_kinds(self) -> list[VerifierKind]:
        return [VerifierKind("reversed", lambda options, ctx, factories: self.cls(options), options=Options)]


def bundle(root: Path, *, verifier: str = 'kind = "reversed"', tasks: list[dict[str, Any]] = TASKS) -> Path:
    (root / "tasks").mkdir(parents=True)
    (root / "tasks" / "dev.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (root / "envhub.toml").write_text(f"""\
[environment]
name = "test/reversed"
version = "1.0.0"

[tasks]
splits.dev = {{ path = "tasks/dev.jsonl" }}

[verifier]
{verifier}
""")
    return root


def context(cls: type[Reversed]) -> Context:
    pm = make_plugin_manager(autoload=False)
    pm.register(Plugin(cls), name="reversed")
    return Context.create(plugins=pm)


def rewards(root: Path, ctx: Context, policy: str = "reference") -> list[float]:
    with envhub.load(root, context=ctx) as env:
        result = envhub.evaluate(env, policy, split="dev", context=ctx, concurrency=2)
    return sorted(r.reward for r in result.records)


def test_a_plugin_kind_with_a_reference_is_played_by_the_reference_policy_and_passes_the_check(
        tmp_path: Path) -> None:
    ctx = context(ReversedWithReference)
    root = bundle(tmp_path / "b")
    assert rewards(root, ctx) == [1.0, 1.0]
    assert rewards(root, ctx, "noop") == [0.0, 0.0]  # the verifier is not simply generous
    with envhub.load(root, context=ctx) as env:
        assert env.reference_actions(env.task("dev", "a")) == [{"role": "assistant", "content": "buhvne"}]
        check = self_test(env)
    assert (check.tasks, check.with_reference) == (2, 2)
    assert [p.code for p in check.problems] == []


def test_without_reference_the_kind_has_none_as_before(tmp_path: Path) -> None:
    """The positive control: the same kind without ``reference`` gives no turns, the check
    warns that no task has a reference, and the reference policy plays empty turns."""
    ctx = context(Reversed)
    root = bundle(tmp_path / "b")
    with envhub.load(root, context=ctx) as env:
        assert env.reference_actions(env.task("dev", "a")) == []
        check = self_test(env)
    assert check.with_reference == 0
    assert [(p.severity, p.code) for p in check.problems] == [("warning", "check-no-reference")]
    assert rewards(root, ctx) == [0.0, 0.0]


def test_the_check_catches_a_plugin_reference_that_does_not_solve_the_task(tmp_path: Path) -> None:
    ctx = context(WrongReference)
    with envhub.load(bundle(tmp_path / "b"), context=ctx) as env:
        check = self_test(env)
    assert check.with_reference == 2
    messages = sorted(p.message for p in check.problems if p.code == "check-reference")
    assert messages == ["dev/a: the reference scores 0, not 1.0", "dev/b: the reference scores 0, not 1.0"]


def test_the_check_reports_a_plugin_reference_that_raises_per_task(tmp_path: Path) -> None:
    ctx = context(RaisingReference)
    with envhub.load(bundle(tmp_path / "b"), context=ctx) as env:
        check = self_test(env)  # does not raise
    messages = sorted(p.message for p in check.problems if p.code == "check-reference")
    assert messages == ["dev/a: the reference could not be made: KeyError: 'word'",
                        "dev/b: the reference could not be made: KeyError: 'word'"]
    assert check.with_reference == 0


def test_a_task_reference_field_comes_before_the_verifiers(tmp_path: Path) -> None:
    ctx = context(ReversedWithReference)
    tasks = [{**TASKS[0], "reference": "own answer"}, TASKS[1]]
    with envhub.load(bundle(tmp_path / "b", tasks=tasks), context=ctx) as env:
        assert env.reference_actions(env.task("dev", "a")) == [{"role": "assistant", "content": "own answer"}]
        assert env.reference_actions(env.task("dev", "b")) == [{"role": "assistant", "content": "desserts"}]


def test_a_reference_of_turns_becomes_assistant_messages(tmp_path: Path) -> None:
    ctx = context(TurnsReference)
    root = bundle(tmp_path / "b")
    with envhub.load(root, context=ctx) as env:
        assert env.reference_actions(env.task("dev", "b")) == [{"role": "assistant", "content": "desserts"}]
    assert rewards(root, ctx) == [1.0, 1.0]


@pytest.mark.parametrize("cls, expected", [(ReversedWithReference, [1.0, 1.0]), (Reversed, [0.0, 0.0])],
                         ids=["criterion-with-reference", "criterion-without"])
def test_a_rubric_plays_its_plugin_criterions_reference(tmp_path: Path, cls: type[Reversed],
                                                        expected: list[float]) -> None:
    """A rubric's reference is its first criterion's that has one, plugin kinds included
    (the regex criterion before it has none)."""
    verifier = ('kind = "rubric"\n'
                '[[verifier.criteria]]\nname = "any"\nkind = "regex"\npattern = "."\n'
                '[[verifier.criteria]]\nname = "rev"\nkind = "reversed"\n')
    root = bundle(tmp_path / "b", verifier=verifier)
    assert rewards(root, context(cls)) == expected


def test_the_built_in_rules_are_the_verifiers_own(tmp_path: Path) -> None:
    """Each built-in kind's ``reference`` and the spec rule a served environment reads agree."""
    from envhub.manifest import parse_manifest
    from envhub.runtime.verifiers import VerifierContext, build_verifier, spec_reference
    from envhub.settings import load_settings

    ctx = Context.create(plugins=make_plugin_manager(autoload=False))
    vctx = VerifierContext(root=tmp_path, load_entry_point=lambda ep: None, settings=load_settings(environ={}))
    task = Task(id="t", split="dev", prompt="p", data={"answer": 4, "solution": "def f(): return 4", "reference": "r"})
    cases = {
        'kind = "exact-match"': "4",
        'kind = "numeric"': "\\boxed{4}",
        'kind = "numeric"\nextract = "last-number"': "4",
        'kind = "json-match"': "4",
        'kind = "code-tests"': "```python\ndef f(): return 4\n```",
        'kind = "regex"\npattern = "4"': None,
        'kind = "llm-judge"\nmodel = "m"': "r",
    }
    for table, expected in cases.items():
        manifest, problems = parse_manifest(f'[environment]\nname = "a/b"\nversion = "1.0.0"\n'
                                  f'[tasks]\nsplits.dev = {{ path = "t.jsonl" }}\n[verifier]\n{table}\n',
                                  plugins=ctx.plugins)
        assert manifest is not None, problems
        verifier = build_verifier(manifest.verifier, vctx, plugins=ctx.plugins)
        assert verifier.reference(task) == expected, table
        if verifier.kind != "llm-judge":  # the task's own reference comes first anyway
            assert spec_reference(manifest.verifier, task) == expected, table
