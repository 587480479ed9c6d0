"""``envhub import verifiers``: verifiers v1 environments (one scaffolded by verifiers' own
``vf-init`` scaffold and filled in as its README says, one written here with verifiers' API: exact
match, boxed math and the reference judge, weighted) become bundles that validate and
evaluate; for sample outputs, each envhub criterion equals the verifiers reward it came
from, scored by verifiers itself, and the weighted total equals verifiers' total when the
weights sum to 1; the judge is sent verifiers' own prompt. Rewards that are code are
reported, bad sources refused naming the fix, exit 2, and nothing is written.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.errors import UsageError
from envhub.importers import ImportSourceError, import_verifiers
from tests.conftest import run_envhub

pytest.importorskip("verifiers.v1")

ARITH = '''\
import verifiers.v1 as vf
from verifiers.v1.utils.score import verify_boxed_math_answer

PROBLEMS = [("What is 6 times 7?", "42"), ("What is half of 5?", "2.5"), ("What is 3/4 plus 1/4?", "1")]


class ArithEnvData(vf.TaskData):
    """One row's data, with its reference answer."""

    answer: str
    info: dict = {}


class ArithEnvTask(vf.Task[ArithEnvData]):
    @vf.reward(weight=1.0)
    async def correct_answer(self, trace: vf.Trace) -> float:
        """The boxed answer equals the reference, as math."""
        return verify_boxed_math_answer(trace.last_reply, self.data.answer)

    @vf.reward(weight=0.2)
    async def concise(self, trace: vf.Trace) -> float:
        words = len(trace.last_reply.split())
        return 1.0 if words < 50 else 0.0


class ArithEnvConfig(vf.TasksetConfig):
    num_tasks: int = 3


class ArithEnvTaskset(vf.Taskset[ArithEnvTask, ArithEnvConfig]):
    def load(self) -> list[ArithEnvTask]:
        return [ArithEnvTask(ArithEnvData(id=f"p{i}", prompt=q, answer=a, info={"n": i},
                                          system_prompt="Put the final answer in \\\\boxed{}."), self.config.task)
                for i, (q, a) in enumerate(PROBLEMS[: self.config.num_tasks])]
'''

TRIVIA = '''\
import verifiers.v1 as vf
from verifiers.v1.utils.score import verify_boxed_math_answer


class TriviaData(vf.TaskData):
    answer: str


class TriviaTask(vf.Task[TriviaData]):
    @vf.reward(weight=0.25)
    async def exact(self, trace: vf.Trace) -> float:
        return float(trace.last_reply.lower() == self.data.answer.strip().lower())

    @vf.reward(weight=0.25)
    async def boxed(self, trace: vf.Trace) -> float:
        return verify_boxed_math_answer(trace.last_reply, self.data.answer)


class TriviaTaskConfig(vf.TaskConfig):
    pass


class TriviaConfig(vf.TasksetConfig):
    task: TriviaTaskConfig = TriviaTaskConfig(judges=[{"id": "reference", "weight": 0.5,
                                                       "model": "openai/judge-2025-01-01"}])


class TriviaTaskset(vf.Taskset[TriviaTask, TriviaConfig]):
    def load(self):
        rows = [("How many legs has a spider?", "8"), ("What is the square root of 81?", "9")]
        return [TriviaTask(TriviaData(id=f"t{i}", prompt=[{"role": "user", "content": q}], answer=a),
                           self.config.task) for i, (q, a) in enumerate(rows)]
'''


def write_package(root: Path, package: str, taskset: str, code: str) -> Path:
    directory = root / package
    directory.mkdir(parents=True)
    (directory / "__init__.py").write_text(f"from {package}.taskset import {taskset}\n\n__all__ = [{taskset!r}]\n")
    (directory / "taskset.py").write_text(code)
    return directory


@pytest.fixture(scope="module")
def arith_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An environment scaffolded by verifiers' own ``vf-init`` (its ``scaffold``, which the
    command runs, called here: the command's own start costs ~5 s), its taskset filled in."""
    from verifiers.v1.cli.init import scaffold
    from verifiers.v1.configs.cli.init import InitConfig

    root = tmp_path_factory.mktemp("vf")
    source = scaffold(InitConfig(name="arith-env", path=str(root)))
    assert source == root / "arith_env"
    taskset = source / "arith_env" / "taskset.py"
    assert "class ArithEnvTaskset(vf.Taskset[ArithEnvTask, ArithEnvConfig])" in taskset.read_text()  # the template
    taskset.write_text(ARITH)
    return source


@pytest.fixture(scope="module")
def trivia_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_package(tmp_path_factory.mktemp("vf-trivia"), "trivia_env", "TriviaTaskset", TRIVIA)


@pytest.fixture
def on_path(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    for name in [m for m in sys.modules if m.split(".")[0] in ("arith_env", "trivia_env", "plugged_env",
                                                               "endless_env")]:
        del sys.modules[name]


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def verifiers_rewards(package_dir: Path, package: str, task_id: str, output: str) -> dict[str, float]:
    """The rewards verifiers itself gives ``output`` on task ``task_id``: its Task.score on
    a trace whose reply is ``output``, without a runtime (judges skipped: they need a model)."""
    import verifiers.v1 as vf
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.trace import AgentInfo, TraceTask
    from verifiers.v1.types import AssistantMessage, UserMessage

    sys.path.insert(0, str(package_dir))
    try:
        module = __import__(package)
        cls = getattr(module, module.__all__[0])
        config = cls.__orig_bases__[0].__args__[1]()
        [task] = [t for t in cls(config) if t.data.id == task_id]
    finally:
        sys.path.remove(str(package_dir))
    task.config = task.config.model_copy(update={"judges": []})
    trace = vf.Trace(task=TraceTask(type=type(task).__name__, data=task.data), agent=AgentInfo(config=vf.AgentConfig()),
                     nodes=[MessageNode(message=UserMessage(content=task.data.prompt_text)),
                            MessageNode(parent=0, message=AssistantMessage(content=output), sampled=True)])
    asyncio.run(task.score(trace))
    return {name: reward.score for name, reward in trace.rewards.items() if reward is not None}


def test_a_vf_init_environment_imports_validates_and_evaluates(arith_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "arith"
    result = run_envhub("import", "verifiers", str(arith_source), str(out), "--name", "acme/arith")
    assert result.code == 0, result.err
    assert "Imported ArithEnvTaskset, 1 criteria, 3 task(s) into" in result.err
    assert "- reward `concise` (weight 0.2): custom code" in result.out
    rows = records(out / "tasks" / "test.jsonl")
    assert rows[0] == {"id": "p0", "prompt": [{"role": "system", "content": "Put the final answer in \\boxed{}."},
                                              {"role": "user", "content": "What is 6 times 7?"}],
                       "prompt_text": "What is 6 times 7?", "answer": "42", "info": {"n": 0}}
    manifest = (out / "envhub.toml").read_text()
    assert 'kind = "numeric"\nfield = "answer"\nextract = "boxed"' in manifest
    assert run_envhub("validate", str(out)).code == 0
    result = run_envhub("eval", str(out), "-s", "test", "--policy", "reference", "--json", cwd=tmp_path)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert (summary["rollouts"], summary["errors"], summary["mean_reward"]) == (3, 0, 1.0)


OUTPUTS = ["\\boxed{42}", "42", "The answer is \\boxed{42.0}.", "\\boxed{43}", "\\boxed{2.5}", "\\boxed{\\frac{5}{2}}",
           "\\boxed{1}", "", "8", "\\boxed{8}", "9", " 9 ", "nine"]


def test_the_reward_equals_the_verifiers_reward(arith_source: Path, tmp_path: Path, on_path: None) -> None:
    out = tmp_path / "arith"
    import_verifiers(str(arith_source), out)
    env = envhub.load(out)
    seen = set()
    for task_id in ("p0", "p1", "p2"):
        task = env.task("test", task_id)
        for output in OUTPUTS:
            theirs = verifiers_rewards(arith_source, "arith_env", task_id, output)
            reward = env.score(task, output).reward
            assert reward == theirs["correct_answer"], (task_id, output)
            seen.add(reward)
    assert seen == {0.0, 1.0}  # both verdicts occur: the comparison can fail


def test_a_weighted_rubric_with_a_judge_agrees_with_verifiers(trivia_source: Path, tmp_path: Path, on_path: None,
                                                              openai_server, monkeypatch: pytest.MonkeyPatch) -> None:
    from verifiers.v1.judges.reference import REFERENCE_PROMPT

    out = tmp_path / "trivia"
    report = import_verifiers(str(trivia_source), out)
    assert [(c["name"], c["kind"], c["weight"]) for c in report.criteria] == [
        ("boxed", "numeric", 0.25), ("exact", "exact-match", 0.25), ("reference", "llm-judge", 0.5)]
    manifest = (out / "envhub.toml").read_text()
    assert 'kind = "rubric"' in manifest and 'model = "judge-2025-01-01"' in manifest
    assert report.not_carried == []
    assert run_envhub("validate", str(out)).code == 0
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # the judge says yes when the reply holds the answer: a stand-in for a model, the same for both sides
    openai_server.script = lambda request: "yes" if "```\n9\n```\n\nResponse:\n```\n9" in \
        request.messages[0]["content"] or "```\n8\n```\n\nResponse:\n```\n8\n" in request.messages[0]["content"] \
        else "no"
    env = envhub.load(out)
    seen = set()
    for task_id, answer in (("t0", "8"), ("t1", "9")):
        task = env.task("test", task_id)
        for output in OUTPUTS:
            theirs = verifiers_rewards(trivia_source, "trivia_env", task_id, output)
            score = env.score(task, output)
            judge = 1.0 if output == answer else 0.0
            assert {k: score.breakdown[k] for k in ("exact", "boxed")} == theirs, (task_id, output)
            # verifiers' total, Σ weight·score, with the judge's verdict; the weights sum to 1
            assert score.reward == pytest.approx(0.25 * theirs["exact"] + 0.25 * theirs["boxed"] + 0.5 * judge)
            seen.add(score.reward)
    assert len(seen) > 2
    question = "How many legs has a spider?"
    expected = REFERENCE_PROMPT.format(question=question, answer="8", response="8", positive="yes", negative="no")
    sent = [r.messages for r in openai_server.requests if question in r.messages[0]["content"]]
    assert [{"role": "user", "content": expected}] in sent


PLUGGED = TRIVIA.replace("TriviaTaskConfig(judges=[", "TriviaTaskConfig(rewards={\"plugged\": {\"fn\": "
                         "\"plugged_env.taskset:same\", \"weight\": 0.5}}, judges=[") + '''

async def same(task, trace) -> float:
    return 1.0 if task.answer == trace.last_reply.strip() else 0.0
'''


def test_a_reward_plugged_through_the_config_maps_too(tmp_path: Path, on_path: None) -> None:
    src = write_package(tmp_path / "src", "plugged_env", "TriviaTaskset", PLUGGED)
    report = import_verifiers(str(src), tmp_path / "out")
    assert [(c["name"], c["kind"], c["weight"]) for c in report.criteria] == [
        ("boxed", "numeric", 0.25), ("exact", "exact-match", 0.25), ("plugged", "exact-match", 0.5),
        ("reference", "llm-judge", 0.5)]
    assert report.not_carried == ["the weights sum to 1.5: verifiers adds weighted scores (Σ weight·score), envhub's "
                                  "rubric takes their weighted mean, so envhub's reward is verifiers' divided by 1.5"]
    assert sys.modules["plugged_env.taskset"].same  # verifiers imported the plugged function by its path


def test_what_does_not_carry_over_is_reported(arith_source: Path, tmp_path: Path, on_path: None) -> None:
    report = import_verifiers(str(arith_source), tmp_path / "a", limit=2)
    assert report.tasks == 2
    assert report.not_carried == [
        "reward `concise` (weight 0.2): custom code: only a reward that is one `return` of an exact match or of "
        "verify_boxed_math_answer maps to an envhub verifier"]
    assert "## Not carried over\n\n- reward `concise`" in (tmp_path / "a" / "IMPORT-REPORT.md").read_text()


CUSTOM_ONLY = TRIVIA.replace("return float(trace.last_reply.lower() == self.data.answer.strip().lower())",
                             "return float(len(trace.last_reply) > 3)").replace(
    "return verify_boxed_math_answer(trace.last_reply, self.data.answer)", "return 0.5").replace(
    '[{"id": "reference", "weight": 0.5,\n                                                       '
    '"model": "openai/judge-2025-01-01"}]', "[]")


ENDLESS = TRIVIA.replace("class TriviaTaskset(vf.Taskset[TriviaTask, TriviaConfig]):\n    def load(self):", """\
class EndlessTaskset(vf.Taskset[TriviaTask, TriviaConfig]):
    INFINITE = True

    def load(self):
        import itertools
        for i in itertools.count():
            yield TriviaTask(TriviaData(id=f"n{i}", prompt=f"What is {i} plus 1?", answer=str(i + 1)), self.config.task)

    def unused(self):""")


def test_an_endless_taskset_is_imported_up_to_the_limit(tmp_path: Path, on_path: None) -> None:
    src = write_package(tmp_path / "src", "endless_env", "EndlessTaskset", ENDLESS)
    report = import_verifiers(str(src), tmp_path / "out", limit=4)
    assert [r["id"] for r in records(tmp_path / "out" / "tasks" / "test.jsonl")] == ["n0", "n1", "n2", "n3"]
    assert json.loads(json.dumps(report.to_dict()))["tasks"] == 4  # the --json form is JSON
    assert report.summary() == "EndlessTaskset, 3 criteria, 4 task(s)"


@pytest.mark.parametrize(("case", "message"), [
    ("no-package", "no Python package in this directory; a verifiers environment is one package"),
    ("no-taskset", "not a verifiers environment: the package empty_env exports no Taskset subclass in __all__"),
    ("load-raises", "loading the taskset BrokenTaskset raised RuntimeError: no data here"),
    ("import-raises", "importing the package bad_env raised ModuleNotFoundError: No module named 'nowhere_at_all'"),
    ("endless", "EndlessTaskset yields tasks without end"),
    ("custom-rewards", "no reward of TriviaTaskset's tasks maps to an envhub verifier: reward `boxed` (weight 0.25): "
                       "custom code: its return is not an exact match of trace.last_reply and a task field, nor "
                       "verify_boxed_math_answer(trace.last_reply, a task field); reward `exact` (weight 0.25): custom "
                       "code: its return is not an exact match of trace.last_reply and a task field, nor "
                       "verify_boxed_math_answer(trace.last_reply, a task field)"),
])
def test_a_bad_source_is_refused_naming_it(tmp_path: Path, case: str, message: str, on_path: None) -> None:
    src = tmp_path / "src"
    src.mkdir()
    if case == "no-taskset":
        src = write_package(src, "empty_env", "X", "X = 1\n")
    elif case == "load-raises":
        src = write_package(src, "broken_env", "BrokenTaskset", textwrap.dedent("""
            import verifiers.v1 as vf
            class BrokenTaskset(vf.Taskset):
                def load(self):
                    raise RuntimeError("no data here")
        """))
    elif case == "import-raises":
        src = write_package(src, "bad_env", "X", "import nowhere_at_all\n")
    elif case == "endless":
        src = write_package(src, "endless_env", "EndlessTaskset", ENDLESS)
    elif case == "custom-rewards":
        src = write_package(src, "custom_env", "TriviaTaskset", CUSTOM_ONLY)
    out = tmp_path / "out"
    with pytest.raises(ImportSourceError) as e:
        import_verifiers(str(src), out)
    [problem] = e.value.problems
    assert problem.message == message
    assert problem.file == str(src)
    assert not out.exists()


def test_bad_input_on_the_command_line_exits_2_without_a_traceback(arith_source: Path, tmp_path: Path) -> None:
    result = run_envhub("import", "verifiers", str(tmp_path / "missing"), str(tmp_path / "out"))
    assert result.code == 2 and "Traceback" not in result.err
    assert f"envhub: error: {tmp_path / 'missing'} is not a directory" in result.err
    result = run_envhub("import", "verifiers", str(arith_source), str(tmp_path / "out"), "-o", "limit=lots")
    assert result.code == 2 and "option limit='lots' is not a whole number" in result.err
    assert not (tmp_path / "out").exists()
    with pytest.raises(UsageError, match="is neither a directory nor a package name"):
        import_verifiers("not a name!", tmp_path / "out")


def test_without_verifiers_the_error_says_how_to_install_it(arith_source: Path, tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        sys.modules["verifiers"] = None  # as if it were not installed
        sys.modules["verifiers.v1"] = None
        from pathlib import Path
        from envhub.errors import UsageError
        from envhub.importers import import_verifiers
        try:
            import_verifiers({str(arith_source)!r}, Path({str(tmp_path / "out")!r}))
        except UsageError as e:
            print(e.hint)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "pip install verifiers", proc.stderr
    assert not (tmp_path / "out").exists()
