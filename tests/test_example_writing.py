"""example_envs/writing: the requirements gate, the pinned LLM judge (what it is sent, how
its grade is weighted, that it never grades its own model), and the whole bundle checked,
tested and evaluated against a judge on a local OpenAI-compatible server.

The judge is an inspect-style graded one: its whole prompt is the bundle's template
(prompts/grade.j2) and its reply ends with GRADE: C, P or I, read by the declared verdict. Here
it is scripted: it reads the brief's requirements from the prompt it is sent and grades C when
the response meets the ones it can check, P otherwise, I when it is empty. That makes the
grades deterministic while still depending on what the judge was actually sent."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.errors import UsageError
from envhub.runtime import Environment, Task
from envhub.runtime.verifiers import ScoringContext
from tests.conftest import Result, run_envhub
from tests.openai_server import OpenAIServer, Request

Cli = Callable[..., Result]

WRITING = Path(__file__).resolve().parents[1] / "example_envs" / "writing"
JUDGE = "gpt-4o-2024-08-06"
RUBRIC = (WRITING / "prompts" / "rubric.md").read_text(encoding="utf-8").strip()


def sections(request: Request) -> dict[str, str]:
    """The parts of the judge's one message (the rendered prompts/grade.j2), by heading: Rubric,
    Task, Reference answer, Response to grade, Your grade."""
    [message] = request.messages
    assert message["role"] == "user"
    parts = re.split(r"\n\n# (Rubric|Task|Reference answer|Response to grade|Your grade)\n", message["content"])
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def scripted_judge(request: Request) -> str:
    """Grade as a strict but literal judge would from what it was sent: C when the response
    keeps to the brief's stated length (give or take 10%: it counts loosely) and uses every
    phrase the brief asks for and none it forbids; P otherwise; I for an empty response. It
    reasons first and ends with the grade line, as the template asks."""
    parts = sections(request)
    assert parts["Rubric"] == RUBRIC
    brief, response = parts["Task"], parts["Response to grade"]
    if not response.strip():
        return "The response is empty.\nGRADE: I"
    problems = []
    length = re.search(r"^- Between (\d+) and (\d+) words\.$", brief, re.M)
    assert length, "the brief states its length"
    words = len(response.split())
    if not int(length[1]) * 0.9 <= words <= int(length[2]) * 1.1:
        problems.append(f"{words} words")
    for line in re.findall(r"^- Use the phrases? (.*)\.$", brief, re.M):
        problems += [f"missing {p!r}" for p in re.findall(r'"([^"]+)"', line) if p.lower() not in response.lower()]
    for line in re.findall(r"^- Do not use the words? (.*)\.$", brief, re.M):
        problems += [f"uses {p!r}" for p in re.findall(r'"([^"]+)"', line)
                     if re.search(rf"\b{re.escape(p)}\b", response, re.I)]
    if re.search(r"^- Do not use exclamation marks\.$", brief, re.M) and "!" in response:
        problems.append("an exclamation mark")
    if problems:
        return "Misses the brief: " + "; ".join(problems) + ".\nGRADE: P"
    return "Faithful, fit for the reader, well written.\nGRADE: C"


@pytest.fixture
def judge(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> OpenAIServer:
    """The scripted judge at OPENAI_BASE_URL, as a user would point the manifest's judge at
    their endpoint; no API key (a local endpoint needs none)."""
    openai_server.script = scripted_judge
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return openai_server


@pytest.fixture
def env(judge: OpenAIServer) -> Iterator[Environment]:
    with envhub.load(WRITING, trust_code=True) as loaded:
        yield loaded


def dev_task(env: Environment, kind: str = "email") -> Task:
    return next(t for t in env.tasks("dev") if t["kind"] == kind)


def _bundle_module(path: str) -> Any:
    """A module of the bundle's code, imported from its file (it imports nothing relative)."""
    spec = importlib.util.spec_from_file_location(f"_writing_{Path(path).stem}", WRITING / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def judge_requests(server: OpenAIServer) -> list[Request]:
    return [r for r in server.requests if r.model == JUDGE]


# --- the tasks -------------------------------------------------------------------------------------


def test_each_prompt_states_exactly_the_requirements_that_are_checked() -> None:
    """A prompt states exactly the requirements its fields make the gate check, in the words
    of writing.checks.requirement_lines: a task never asks for one thing and is checked for another."""
    checks = _bundle_module("writing/checks.py").requirement_lines
    rows = [json.loads(line) for split in ("train", "dev", "test")
            for line in (WRITING / "tasks" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 52 and len({r["id"] for r in rows}) == 52
    for row in rows:
        stated = "\n\nRequirements:\n" + "\n".join(f"- {line}" for line in checks(row))
        assert row["prompt"].endswith(stated), row["id"]


# --- the requirements gate --------------------------------------------------------------------------


REPLY = ("Subject: Delivery to Norway\n\nDear Ms Eriksen,\n\nYes, we do ship to Norway. Delivery takes 5 to 7 working "
         "days and costs $14.90. Customs charges may be due when the parcel arrives; these are paid by the recipient "
         "and are not included in our price.\n\nIf you have other questions, just reply to this email.\n\n"
         "Kind regards,\nLina")


@pytest.mark.parametrize(("edit", "unmet"), [
    (lambda text: text, []),
    (lambda text: text.replace("Subject: Delivery to Norway\n\n", ""), ['does not begin with "Subject:"']),
    (lambda text: text.replace("customs", "import").replace("Customs", "Import"), ['does not use "customs"']),
    (lambda text: text.replace("Yes,", "Yes!"), ['uses "!" (1x)']),
    (lambda text: text + " We look forward to your order." * 8, ["106 words, not between 50 and 90"]),
    (lambda text: "", ["0 words, not between 50 and 90", 'does not use "5 to 7 working days"',
                       'does not use "customs"', 'does not begin with "Subject:"']),
], ids=["meets-all", "no-subject", "missing-phrase", "exclamation", "too-long", "empty"])
def test_the_requirements_gate(env: Environment, edit: Callable[[str], str], unmet: list[str]) -> None:
    task = dev_task(env)
    assert task["include"] == ["5 to 7 working days", "customs"]  # 1 length + 2 phrases + 1 avoid + 1 start = 5
    score = env.score(task, edit(REPLY))
    assert score.info["requirements"]["unmet"] == unmet
    assert score.breakdown["requirements"] == pytest.approx((5 - len(unmet)) / 5)
    if unmet:
        assert score.reward == 0.0 and score.info["failed_required"] == ["requirements"]
    else:
        assert score.reward == 1.0


# --- the judge ----------------------------------------------------------------------------------------


def test_the_reference_scores_1_and_the_judge_is_sent_rubric_task_and_response(env: Environment,
                                                                              judge: OpenAIServer) -> None:
    task = dev_task(env)
    reference = env.reference_actions(task)
    assert reference == [{"role": "assistant", "content": task["reference"]}]
    with env.episode(task) as episode:
        episode.reset()
        result = episode.step(reference[0])
    assert (result.reward, result.info["breakdown"]) == (1.0, {"requirements": 1.0, "quality": 1.0})

    [request] = judge.requests
    assert request.model == JUDGE and request.json["temperature"] == 0.0
    assert request.authorization is None  # no key is sent to a local endpoint that needs none
    # The judge's whole prompt is prompts/grade.j2 rendered: the task's kind, prompt and
    # reference, the completion and the rubric, and how to answer; no system message.
    assert request.messages == [{"role": "user", "content": (
        "You are an experienced editor grading a piece of writing done to a brief (a email).\n\n"
        f"# Rubric\n{RUBRIC}\n\n# Task\n{task.prompt}\n\n# Reference answer\n{task['reference']}\n\n"
        f"# Response to grade\n{task['reference']}\n\n# Your grade\n"
        "Reason step by step about the response: first whether it is faithful to the facts in the task, then "
        "whether it does its job for its reader, then how well it is written. Then end your reply with a line "
        "that is exactly GRADE: C, GRADE: P or GRADE: I.\n")}]
    # The judge sees the brief, not the system prompt the writer got.
    assert "You are a careful writer" not in request.messages[0]["content"]


def test_a_poor_answer_scores_below_1(env: Environment) -> None:
    task = dev_task(env, "product-description")
    score = env.score(task, "A great product! You will love it. Buy one today!")
    assert score.reward == 0.0
    assert score.breakdown == {"requirements": 0.0, "quality": 0.5}
    assert score.info["requirements"]["unmet"] == ["10 words, not between 50 and 80", 'does not use "drainage holes"',
                                                   'does not use "western red cedar"', 'uses "!" (2x)']
    assert score.info["quality"]["score"] == "P"
    assert score.info["quality"]["reasoning"] == ("Misses the brief: 10 words; missing 'drainage holes'; missing "
                                                  "'western red cedar'; an exclamation mark.\nGRADE: P")


@pytest.mark.parametrize(("reply", "quality"), [
    ("Accurate but flat.\nGRADE: C", 1.0),
    ("Accurate but flat.\nGRADE: P", 0.5),
    ("Invents a price.\nGRADE: I", 0.0),
], ids=["C", "P", "I"])
def test_the_judge_grade_is_weighted_4_to_1_once_the_requirements_are_met(env: Environment, judge: OpenAIServer,
                                                                         reply: str, quality: float) -> None:
    judge.script = lambda request: reply
    task = dev_task(env)
    score = env.score(task, task["reference"])
    assert score.error is None
    assert score.breakdown == {"requirements": 1.0, "quality": quality}
    assert score.reward == pytest.approx((1 + 4 * quality) / 5)
    assert score.info["quality"]["judge_model"] == JUDGE


@pytest.mark.parametrize("reply", [
    '{"score": 10, "reasoning": "Meets the brief."}',  # the 1.0.0 judge's answer format
    "Meets the brief. Grade: C",                        # not the line the template asks for
    "GRADE: A",                                         # a grade that is not C, P or I
], ids=["json-score", "lower-case", "unknown-grade"])
def test_a_reply_the_verdict_cannot_read_scores_0_with_an_error(env: Environment, judge: OpenAIServer,
                                                                reply: str) -> None:
    judge.script = lambda request: reply
    task = dev_task(env)
    score = env.score(task, task["reference"])
    # The rubric cannot be scored without its judge's grade: 0, with the judge's error, as any
    # failed verifier (a rollout records it as the verifier's error, not as a poor answer).
    assert score.breakdown == {"requirements": 1.0, "quality": 0.0}
    assert score.reward == 0.0
    assert score.info["quality"]["reply"] == reply
    assert score.error is not None and score.error.startswith("rubric criterion 'quality': ")
    assert "llm-judge 'gpt-4o-2024-08-06'" in score.error
    if not reply.startswith("{"):
        assert ("the judge's reply has no match for verdict.regex 'GRADE: ([CPI])'; "
                f"the reply: {reply!r}") in score.error


def test_the_policy_model_never_judges_its_own_writing(env: Environment, judge: OpenAIServer, tmp_path: Path,
                                                       envhub_cli: Cli) -> None:
    with pytest.raises(UsageError, match=r"would grade model 'gpt-4o-2024-08-06' with itself"):
        env.check_scoring(ScoringContext(JUDGE))

    # A writer model and the judge on one endpoint: each request goes to the model it names.
    references = {t.prompt: t["reference"] for t in env.tasks("dev")}
    judge.script = lambda r: scripted_judge(r) if r.model == JUDGE else references[r.first_user_content]
    out = tmp_path / "runs.jsonl"
    result = envhub_cli("eval", str(WRITING), "--split", "dev", "--policy", "openai:writer-2025-01-01", "--trust",
                        "-o", str(out), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["mean_reward"] == 1.0
    assert {r.model for r in judge.requests} == {"writer-2025-01-01", JUDGE}
    assert len(judge_requests(judge)) == 10
    refused = envhub_cli("eval", str(WRITING), "--split", "dev", "--policy", f"openai:{JUDGE}", "--trust",
                         "-o", str(tmp_path / "self.jsonl"))
    assert refused.code != 0 and "would grade model 'gpt-4o-2024-08-06' with itself" in refused.err


def test_without_a_judge_endpoint_the_score_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with envhub.load(WRITING, trust_code=True) as env:  # loading needs no endpoint; scoring does
        task = dev_task(env)
        score = env.score(task, task["reference"])
    assert score.reward == 0.0
    assert score.error is not None
    assert ("rubric criterion 'quality' failed on task 'writing-dev-003': the llm-judge needs an API key for "
            "https://api.openai.com/v1: OPENAI_API_KEY is not set") in score.error


# --- the whole bundle against the judge server ------------------------------------------------------------


def test_validate_check_and_the_pytest_plugin_pass_against_a_judge_server(judge: OpenAIServer,
                                                                         tmp_path: Path) -> None:
    environ = {"OPENAI_BASE_URL": judge.base_url}
    result = run_envhub("validate", "--strict", "--check", "--trust", str(WRITING), env=environ)
    assert result.code == 0, result.out + result.err
    assert result.out.strip() == (f"valid: envhub-examples/writing 1.0.1 ({WRITING}): 3 split(s), 52 task(s); "
                                  "--check played 156 episode(s) on 52 task(s), 52 with a reference")
    # Each task: the reference twice (1.0, and deterministic) and an empty reply (below 1.0).
    assert len(judge_requests(judge)) == 52 * 3

    # The conformance tests, from a directory with no pytest configuration of its own.
    proc = subprocess.run([sys.executable, "-m", "pytest", f"--envhub={WRITING}", "--envhub-trust", "-q",
                           "-p", "no:cacheprovider", "-W", "error::envhub.testing.pytest_plugin.EnvhubWarning"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **environ})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "7 passed, 1 skipped" in proc.stdout  # resets-isolate: there is no state to reset


def test_push_pull_and_eval_the_reference_against_a_judge_server(judge: OpenAIServer, envhub_cli: Cli,
                                                                 tmp_path: Path) -> None:
    assert envhub_cli("push", str(WRITING)).code == 0
    assert envhub_cli("pull", "envhub-examples/writing").code == 0
    out = tmp_path / "dev.jsonl"
    result = envhub_cli("eval", "envhub-examples/writing", "--split", "dev", "--policy", "reference", "--trust",
                        "-o", str(out), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["mean_reward"] == 1.0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["breakdown"] for r in records] == [{"requirements": 1.0, "quality": 1.0}] * 10
    assert len(judge_requests(judge)) == 10
