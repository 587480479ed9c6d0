"""``envhub import inspect``: inspect_ai tasks, built here with inspect_ai's own dataset,
solver and scorer API (a json dataset, a csv dataset, a MemoryDataset), become bundles that
validate and evaluate with the reference policy at reward 1.0; for sample outputs, envhub's
reward equals inspect's own verdict (the task's solvers and scorer run by inspect directly);
a model-graded scorer becomes an llm-judge that sends the judge inspect's own grading prompt.
Bad sources are refused naming the file and the fix, exit 2, and nothing is written.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.errors import UsageError
from envhub.importers import ImportSourceError, import_inspect
from tests.conftest import run_envhub

pytest.importorskip("inspect_ai")

TASKS = '''\
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.dataset import FieldSpec, MemoryDataset, Sample, csv_dataset, json_dataset
from inspect_ai.scorer import choice, exact, f1, includes, match, model_graded_fact, pattern, scorer, Score, accuracy
from inspect_ai.solver import generate, multiple_choice, system_message, use_tools
from inspect_ai.tool import bash

HERE = Path(__file__).parent


@task
def arith():
    """Arithmetic from a JSON-lines file, matched as numbers at the end of the answer."""
    return Task(dataset=json_dataset(str(HERE / "arith.jsonl"),
                                     FieldSpec(input="question", target="answer", id="id", metadata=["level"])),
                solver=[system_message("Answer with a number."), generate()], scorer=match(numeric=True))


def record_to_sample(record):
    return Sample(input=record["question"], choices=[record["a"], record["b"], record["c"]],
                  target=record["answer"], id=record["id"])


@task
def quiz():
    """Multiple choice from a CSV file."""
    return Task(dataset=csv_dataset(str(HERE / "quiz.csv"), record_to_sample), solver=multiple_choice(),
                scorer=choice())


@task
def capitals():
    return Task(dataset=MemoryDataset([
        Sample(input="What is the capital of France?", target="Paris", id="fr"),
        Sample(input="Name a capital on the Danube.", target=["Vienna", "Budapest", "Bratislava"], id="danube"),
        Sample(input=[ChatMessageSystem(content="Be brief."), ChatMessageUser(content="Capital of Italy?")],
               target="Rome", id="it"),
    ]), scorer=includes())


@task
def overlap():
    return Task(dataset=[Sample(input="Who wrote it?", target="William Shakespeare", id="w")], scorer=f1())


@task
def exactly():
    return Task(dataset=[Sample(input="Spell it.", target="Color", id="c")], scorer=exact())


@task
def tagged():
    return Task(dataset=[Sample(input="Reply with ANSWER: and the animal.", target="cat", id="t")],
                solver=[use_tools(bash()), generate()], scorer=[pattern(r"ANSWER:\\s*(\\w+)"), includes()],
                sandbox="docker", epochs=3)


@task
def graded():
    return Task(dataset=[Sample(input="Who wrote Hamlet?", target="Shakespeare", id="h")],
                scorer=model_graded_fact(model="openai/judge-2025-01-01"))


@task
def graded_by_self():
    return Task(dataset=[Sample(input="Who wrote Hamlet?", target="Shakespeare", id="h")], scorer=model_graded_fact())


@scorer(metrics=[accuracy()])
def mine():
    async def score(state, target):
        return Score(value=1.0)
    return score


@task
def custom():
    return Task(dataset=[Sample(input="x", target="y")], scorer=mine())


@task
def needs_args(level: int):
    return Task(dataset=[Sample(input="x", target="y")], scorer=match())
'''

ARITH = [{"id": "a1", "question": "What is 6 times 7?", "answer": "42", "level": 1},
         {"id": "a2", "question": "What is 1,000 plus 234?", "answer": "1234", "level": 2},
         {"id": "a3", "question": "Half of 5?", "answer": "2.5", "level": 2}]
QUIZ = "id,question,a,b,c,answer\nq1,Which is a fruit?,Rock,Apple,Car,B\nq2,Which is a metal?,Iron,Wood,Glass,A\n"

#: Outputs scored by both: right, wrong, near misses and formatting variants.
OUTPUTS = {
    "arith": ["42", "The answer is 42.", "It is $1,234", "42 or 43", "2.50", "43", "", "forty-two"],
    "quiz": ["ANSWER: B", "ANSWER: b", "I think ANSWER: A", "B", "ANSWER: B, C", "Apple", "**ANSWER: B**"],
    "capitals": ["Paris", "It's PARIS!", "Bratislava, of course", "London", "vienna", "Rome."],
    "overlap": ["William Shakespeare", "Shakespeare", "Christopher Marlowe", "william shakespeare wrote it"],
    "exactly": ["Color", "color", "Colour", " Color. "],
}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inspect")
    (root / "arith.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ARITH))
    (root / "quiz.csv").write_text(QUIZ)
    (root / "tasks.py").write_text(TASKS)
    return root / "tasks.py"


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def inspect_task(source: Path, name: str) -> Any:
    """The task as inspect_ai makes it, from the same file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"inspect_tasks_{name}", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)()


def inspect_verdict(task: Any, sample: Any, output: str) -> float:
    """inspect_ai's own verdict on ``output``: the task's solvers run by inspect (with a
    generate that answers ``output``), then its scorer."""
    from inspect_ai.model import ChatMessageUser, ModelName, ModelOutput
    from inspect_ai.scorer import Target, value_to_float
    from inspect_ai.solver import TaskState

    async def run() -> float:
        state = TaskState(model=ModelName("mockllm/model"), sample_id=sample.id, epoch=1, input=sample.input,
                          messages=[ChatMessageUser(content=sample.input)] if isinstance(sample.input, str)
                          else list(sample.input), target=Target(sample.target),
                          choices=sample.choices, metadata=sample.metadata)

        async def generate(state: TaskState, **kwargs: Any) -> TaskState:
            state.output = ModelOutput.from_content("mockllm/model", output)
            state.messages.append(state.output.message)
            return state

        state = await task.solver(state, generate)
        score = await task.scorer[0](state, Target(sample.target))
        return float(value_to_float()(score.value))

    return asyncio.run(run())


def test_an_inspect_task_imports_validates_and_evaluates(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "arith"
    result = run_envhub("import", "inspect", f"{source}@arith", str(out), "--name", "acme/arith")
    assert result.code == 0, result.err
    assert result.out.startswith("# Import report: acme/arith\n")
    assert "Imported task arith, scorer match, 3 task(s) into" in result.err
    rows = records(out / "tasks" / "test.jsonl")
    assert [r["id"] for r in rows] == ["a1", "a2", "a3"]
    assert rows[0]["prompt"] == [{"role": "system", "content": "Answer with a number."},
                                 {"role": "user", "content": "What is 6 times 7?"}]
    assert (rows[1]["target"], rows[1]["metadata"], rows[1]["reference"]) == ("1234", {"level": 2}, "1234")
    assert json.loads((out / "inspect_scorer.json").read_text()) == {
        "scorer": "match", "args": {"numeric": True}, "multiple_choice": None}
    assert run_envhub("validate", str(out)).code == 0
    result = run_envhub("eval", str(out), "-s", "test", "--policy", "reference", "--trust", "--json", cwd=tmp_path)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert (summary["rollouts"], summary["errors"], summary["mean_reward"]) == (3, 0, 1.0)
    assert [r["reward"] for r in records(tmp_path / summary["output"])] == [1.0, 1.0, 1.0]


def test_a_csv_multiple_choice_task_imports_and_evaluates(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "quiz"
    assert run_envhub("import", "inspect", f"{source}@quiz", str(out)).code == 0
    rows = records(out / "tasks" / "test.jsonl")
    # the prompt is the one inspect's multiple_choice solver sends, with its own template
    assert rows[0]["prompt"].startswith("Answer the following multiple choice question.")
    assert rows[0]["prompt"].endswith("Which is a fruit?\n\nA) Rock\nB) Apple\nC) Car")
    assert (rows[0]["choices"], rows[0]["target"], rows[0]["reference"]) == (["Rock", "Apple", "Car"], "B",
                                                                              "ANSWER: B")
    assert run_envhub("validate", str(out)).code == 0
    result = run_envhub("eval", str(out), "-s", "test", "--policy", "reference", "--trust", "--json", cwd=tmp_path)
    assert result.code == 0, result.err
    assert json.loads(result.out)["mean_reward"] == 1.0


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_envhub_rewards_equal_inspect_verdicts(source: Path, tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    import_inspect(f"{source}@{name}", out)
    env = envhub.load(out, trust_code=True)
    task = inspect_task(source, name)
    verdicts = set()
    for sample in task.dataset:
        envhub_task = env.task("test", str(sample.id))
        for output in OUTPUTS[name]:
            expected = inspect_verdict(task, sample, output)
            verdicts.add(expected)
            assert env.score(envhub_task, output).reward == pytest.approx(expected), (sample.id, output)
    assert len(verdicts) > 1  # the outputs are not all scored alike: the comparison can fail


def test_chat_input_and_the_json_report(source: Path, tmp_path: Path) -> None:
    report = import_inspect(f"{source}@capitals", tmp_path / "capitals", name="acme/capitals")
    rows = {r["id"]: r for r in records(tmp_path / "capitals" / "tasks" / "test.jsonl")}
    assert rows["it"]["prompt"] == [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Capital of Italy?"}]
    assert rows["danube"]["target"] == ["Vienna", "Budapest", "Bratislava"]
    assert rows["danube"]["reference"] == "Vienna"
    assert json.loads(json.dumps(report.to_dict())) == {
        "kind": "inspect", "name": "acme/capitals", "out": str(tmp_path / "capitals"), "split": "test",
        "task": "capitals", "scorer": "includes", "verifier": "python", "tasks": 3, "references": 3,
        "kept": report.kept, "dropped": []}
    assert report.summary() == "task capitals, scorer includes, 3 task(s)"


def test_what_does_not_carry_over_is_reported(source: Path, tmp_path: Path) -> None:
    report = import_inspect(f"{source}@tagged", tmp_path / "tagged")
    dropped = "\n".join(report.not_carried)
    assert "solver `inspect_ai/use_tools`" in dropped
    assert "scorer `inspect_ai/includes`: a task's further scorers are separate metrics" in dropped
    assert "Task(sandbox=...)" in dropped and "Task(epochs=...)" in dropped
    assert report.dropped == len(report.not_carried) == 4
    # the reference is the first answer inspect's pattern scorer gives 1.0: not the bare target
    assert records(tmp_path / "tagged" / "tasks" / "test.jsonl")[0]["reference"] == "ANSWER: cat"
    text = (tmp_path / "tagged" / "IMPORT-REPORT.md").read_text()
    assert "## Not carried over" in text and "use_tools" in text
    env = envhub.load(tmp_path / "tagged", trust_code=True)
    assert env.score(env.task("test", "t"), "ANSWER: cat").reward == 1.0
    assert env.score(env.task("test", "t"), "cat").reward == 0.0


def test_a_model_graded_scorer_is_a_judge_sent_inspects_prompt(source: Path, tmp_path: Path, openai_server,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer._model import (
        DEFAULT_MODEL_GRADED_FACT_TEMPLATE,
        default_instructions,
        model_scoring_prompt,
    )

    out = tmp_path / "graded"
    report = import_inspect(f"{source}@graded", out)
    assert report.verifier == "llm-judge"
    manifest = (out / "envhub.toml").read_text()
    assert 'model = "judge-2025-01-01"' in manifest and 'labels = { C = 1.0, P = 0.5, I = 0.0 }' in manifest
    assert run_envhub("validate", str(out)).code == 0
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    replies = iter(["The submission names him.\n\nGRADE: C", "GRADE: I", "grade: c, then: GRADE: P"])
    openai_server.script = lambda request: next(replies)
    env = envhub.load(out)
    task = env.task("test", "h")
    assert [env.score(task, answer).reward for answer in ("Shakespeare", "Marlowe", "Bacon?")] == [1.0, 0.0, 0.5]
    expected = model_scoring_prompt(template=DEFAULT_MODEL_GRADED_FACT_TEMPLATE, question="Who wrote Hamlet?",
                                    output=ModelOutput.from_content("m", "Shakespeare"), criterion="Shakespeare",
                                    instructions=default_instructions(False), metadata={})
    first = openai_server.requests[0]
    assert first.model == "judge-2025-01-01"
    assert first.messages == [{"role": "user", "content": expected.text}]


def test_a_model_graded_scorer_without_a_model_needs_one(source: Path, tmp_path: Path) -> None:
    with pytest.raises(ImportSourceError) as e:
        import_inspect(f"{source}@graded_by_self", tmp_path / "a")
    [problem] = e.value.problems
    assert problem.message.startswith("the scorer model_graded_fact names no grader model")
    assert problem.hint == "give one: -o judge-model=MODEL (a dated snapshot, e.g. gpt-4o-2024-08-06)"
    assert not (tmp_path / "a").exists()
    report = import_inspect(f"{source}@graded_by_self", tmp_path / "b", judge_model="judge-2025-01-01")
    assert 'model = "judge-2025-01-01"' in (tmp_path / "b" / "envhub.toml").read_text()
    assert report.scorer == "model_graded_fact"


BAD = [
    ("custom", "the task's scorer 'mine' is not one of inspect_ai's built-in scorers that envhub can carry over "
               "(a custom scorer is code it cannot map)"),
    ("needs_args", "calling the task needs_args() raised TypeError: needs_args() missing 1 required positional "
                   "argument: 'level'"),
    ("nope", "no task 'nope' in this file; it has arith, capitals, custom, exactly, graded, graded_by_self, "
             "needs_args, overlap, quiz, tagged"),
    ("", "10 tasks in this file: arith, capitals, custom, exactly, graded, graded_by_self, needs_args, overlap, "
         "quiz, tagged"),
]


@pytest.mark.parametrize(("task", "message"), BAD, ids=["custom-scorer", "task-args", "unknown-task", "no-task-name"])
def test_a_bad_task_is_refused_naming_it(source: Path, tmp_path: Path, task: str, message: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(ImportSourceError) as e:
        import_inspect(f"{source}@{task}" if task else str(source), out)
    [problem] = e.value.problems
    assert problem.message == message
    assert problem.file == str(source)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_file_without_a_task_and_a_broken_file(tmp_path: Path) -> None:
    plain = tmp_path / "plain.py"
    plain.write_text("X = 1\n")
    with pytest.raises(ImportSourceError) as e:
        import_inspect(str(plain), tmp_path / "out")
    assert e.value.problems[0].message == "no inspect_ai task in this file"
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_here\n")
    with pytest.raises(ImportSourceError) as e:
        import_inspect(f"{broken}@t", tmp_path / "out")
    assert e.value.problems[0].message == ("importing it raised ModuleNotFoundError: No module named "
                                           "'no_such_module_here'")
    with pytest.raises(UsageError, match=r"missing\.py does not exist"):
        import_inspect(str(tmp_path / "missing.py"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_bad_input_on_the_command_line_exits_2_without_a_traceback(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_envhub("import", "inspect", f"{source}@custom", str(out))
    assert result.code == 2
    assert "Traceback" not in result.err
    assert f"envhub: error: cannot import {source}@custom: the task's scorer 'mine'" in result.err
    assert "hint: score with one of match, includes" in result.err
    assert not out.exists()
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    result = run_envhub("import", "inspect", f"{source}@arith", str(used))
    assert result.code == 2 and "already exists and is not empty" in result.err
    assert [p.name for p in used.iterdir()] == ["keep.txt"]


def test_without_inspect_ai_the_error_says_how_to_install_it(source: Path, tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        sys.modules["inspect_ai"] = None  # as if it were not installed
        from pathlib import Path
        from envhub.errors import UsageError
        from envhub.importers import import_inspect
        try:
            import_inspect({str(source) + "@arith"!r}, Path({str(tmp_path / "out")!r}))
        except UsageError as e:
            print(e.hint)
    """)
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "pip install inspect-ai", proc.stderr
    assert not (tmp_path / "out").exists()
