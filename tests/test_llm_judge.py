"""The llm-judge verifier against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from envhub.context import make_plugin_manager
from envhub.errors import UsageError
from envhub.manifest import JudgeVerdict, LlmJudge, LlmJudgeCriterion
from envhub.runtime import Task, Trajectory
from envhub.runtime.verifiers import (
    DEFAULT_RUBRIC,
    LlmJudgeVerifier,
    VerifierContext,
    VerifierError,
    build_verifier,
    parse_verdict,
)
from envhub.runtime.verifiers._llm_judge import read_verdict
from envhub.settings import load_settings
from tests.openai_server import error, fail_then

PLUGINS = make_plugin_manager(autoload=False)
TASK = Task(id="q1", split="dev", data={"question": "Capital of France?", "answer": "Paris"},
            prompt="Capital of France?")


def no_code(entry_point: str) -> Any:
    raise AssertionError("an llm-judge never loads bundle code")


#: An environment with no keys and no real home.
ENVIRON = {"ENVHUB_HOME": "/nonexistent/home", "ENVHUB_CACHE": "/nonexistent/cache"}


def settings(**environ: str):  # type: ignore[no-untyped-def]
    return load_settings({**ENVIRON, **environ})


def ctx(root: Path, *, settings: Any = None, **kwargs: Any) -> VerifierContext:
    """A verifier context; an llm-judge reads its endpoint and key from ``settings``
    (default: those of :data:`ENVIRON`)."""
    return VerifierContext(root=root, load_entry_point=no_code,
                           settings=settings if settings is not None else load_settings(ENVIRON), **kwargs)


def judge(server, root: Path, *, rubric: str | None = "Be strict.", **spec: Any) -> LlmJudgeVerifier:  # type: ignore[no-untyped-def]
    if rubric is not None:
        (root / "rubric.md").write_text(rubric + "\n", encoding="utf-8")
    spec.setdefault("model", "judge-2025-01-01")
    model = LlmJudge(kind="llm-judge", base_url=server.base_url, api_key_env="JUDGE_KEY",
                     rubric="rubric.md" if rubric is not None else None, **spec)
    verifier = LlmJudgeVerifier(model, ctx(root, settings=settings(JUDGE_KEY="sk-judge")))
    verifier.client.backoff_base_s = 0.001
    return verifier


def test_scores_sends_the_prompt_and_uses_temperature(openai_server, tmp_path: Path) -> None:
    openai_server.script = lambda request: '{"score": 8, "reasoning": "Correct, terse."}'
    verifier = judge(openai_server, tmp_path, temperature=0.3)
    score = verifier.score(TASK, Trajectory.of("Paris."))
    assert score.reward == pytest.approx(0.8)
    assert score.error is None
    assert score.info["reasoning"] == "Correct, terse."
    assert (score.info["score"], score.info["max_score"], score.info["judge_model"]) == (8, 10, "judge-2025-01-01")
    [request] = openai_server.requests
    assert request.model == "judge-2025-01-01"
    assert request.json["temperature"] == 0.3
    assert request.authorization == "Bearer sk-judge"
    system, user = request.messages
    assert system["role"] == "system" and "# Rubric\nBe strict.\n" in system["content"]
    assert '{"score": <a number from 0 to 10>' in system["content"]
    assert user == {"role": "user", "content": "# Task\nCapital of France?\n\n# Reference answer\nParis\n\n"
                                               "# Response to grade\nParis."}


def test_ascore_is_async_and_concurrent(openai_server, tmp_path: Path) -> None:
    async def slow(request):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.2)
        return '{"score": 10}'

    openai_server.script = slow
    verifier = judge(openai_server, tmp_path)

    async def run() -> list[float]:
        scores = await asyncio.gather(*(verifier.ascore(TASK, Trajectory.of("Paris")) for _ in range(20)))
        await verifier.aclose()
        return [s.reward for s in scores]

    loop_start = asyncio.run(_timed(run))
    rewards, elapsed = loop_start
    assert rewards == [1.0] * 20
    assert elapsed < 2.0  # 20 x 0.2 s in sequence would take 4 s


async def _timed(fn):  # type: ignore[no-untyped-def]
    import time

    start = time.perf_counter()
    result = await fn()
    return result, time.perf_counter() - start


def test_default_rubric_and_no_reference(openai_server, tmp_path: Path) -> None:
    openai_server.script = lambda request: "SCORE: 3"
    verifier = judge(openai_server, tmp_path, rubric=None)
    task = Task(id="q2", split="dev", data={"question": "Write a haiku"}, prompt="Write a haiku")
    assert verifier.score(task, Trajectory.of("an old pond")).reward == pytest.approx(0.3)
    system, user = openai_server.requests[0].messages
    assert DEFAULT_RUBRIC in system["content"]
    assert user["content"] == "# Task\nWrite a haiku\n\n# Response to grade\nan old pond"


def test_a_tool_use_conversation_is_shown_to_the_judge(openai_server, tmp_path: Path) -> None:
    openai_server.script = lambda request: '{"score": 10}'
    trajectory = Trajectory([
        {"role": "system", "content": "You have tools."},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"country": "France"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Paris"},
        {"role": "assistant", "content": "Paris"},
    ])
    judge(openai_server, tmp_path).score(TASK, trajectory)
    user = openai_server.requests[0].messages[1]["content"]
    assert user.endswith('# Response to grade\n[assistant calls lookup({"country": "France"})]\n'
                         "[tool result] Paris\n[assistant] Paris")


@pytest.mark.parametrize(("reply", "expected"), [
    ('{"score": 7, "reasoning": "ok"}', (7.0, 10.0, "ok")),
    ('```json\n{"score": "9", "reasoning": "good"}\n```', (9.0, 10.0, "good")),
    ('Thinking... {not json} then {"reasoning": "r", "score": 0}', (0.0, 10.0, "r")),
    ('{"score": 0.75, "reasoning": "mostly"}', (0.75, 1.0, "mostly")),
    ('{"score": 1, "max_score": 1}', (1.0, 1.0, "")),
    ('{"score": 3, "max_score": 5}', (3.0, 5.0, "")),
    ("The answer is right.\nSCORE: 6", (6.0, 10.0, "The answer is right.\nSCORE: 6")),
    ("**Score:** 4/5", (4.0, 5.0, "**Score:** 4/5")),
    ("score = 10", (10.0, 10.0, "score = 10")),
], ids=["json", "fenced-string", "json-after-prose", "fraction-of-one", "max-score-1", "max-score-5",
        "score-line", "markdown-fraction", "equals"])
def test_parse_verdict(reply: str, expected: tuple[float, float, str]) -> None:
    assert parse_verdict(reply) == expected


@pytest.mark.parametrize(("reply", "message"), [
    ("I think it is fine.", "the judge's reply has no score (no JSON object with \"score\", no SCORE: line)"),
    ('{"score": "high"}', "the judge's score is 'high', not a number"),
    ('{"score": 11}', "the judge's score 11 is outside 0..10"),
    ('{"score": -1}', "the judge's score -1 is outside 0..10"),
    ('{"score": true}', "the judge's score is True, not a number"),
    ('{"score": 2, "max_score": 0}', "the judge's max_score is 0; it must be above 0"),
], ids=["no-score", "not-a-number", "too-high", "negative", "bool", "zero-scale"])
def test_unparseable_verdicts(reply: str, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_verdict(reply)
    assert str(exc.value) == message


def test_an_unparseable_verdict_is_a_failed_score(openai_server, tmp_path: Path) -> None:
    openai_server.script = lambda request: "Looks right to me!"
    score = judge(openai_server, tmp_path).score(TASK, Trajectory.of("Paris"))
    assert score.reward == 0.0
    assert score.error == ("llm-judge 'judge-2025-01-01': the judge's reply has no score "
                           "(no JSON object with \"score\", no SCORE: line)")
    assert score.info["reply"] == "Looks right to me!"


def test_retries_then_raises_a_verifier_error(openai_server, tmp_path: Path) -> None:
    openai_server.script = fail_then(lambda request: '{"score": 10}', times=2, status=429, retry_after=0)
    assert judge(openai_server, tmp_path).score(TASK, Trajectory.of("Paris")).reward == 1.0
    assert openai_server.attempts == 3

    openai_server.script = lambda request: error(404, "The model `judge-2025-01-01` does not exist")
    with pytest.raises(VerifierError) as exc:
        judge(openai_server, tmp_path).score(TASK, Trajectory.of("Paris"))
    assert exc.value.message == (
        f"llm-judge 'judge-2025-01-01': POST {openai_server.base_url}/chat/completions failed with 404 Not Found: "
        "The model `judge-2025-01-01` does not exist")


# --- self-judging -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("policy_model", "allow", "force", "refused"), [
    ("judge-2025-01-01", False, False, True),
    ("judge-2025-01-01", True, False, False),
    ("judge-2025-01-01", False, True, False),
    ("other-model", False, False, False),
    (None, False, False, False),
], ids=["same-model", "allowed-by-manifest", "forced", "other-model", "no-model"])
def test_self_judging_is_refused_unless_allowed(tmp_path: Path, policy_model: str | None, allow: bool,
                                                force: bool, refused: bool) -> None:
    spec = LlmJudge(kind="llm-judge", model="judge-2025-01-01", allow_self_judge=allow)
    context = ctx(tmp_path, policy_model=policy_model, force_self_judge=force)
    if not refused:
        assert build_verifier(spec, context, plugins=PLUGINS).kind == "llm-judge"
        return
    with pytest.raises(UsageError) as exc:
        build_verifier(spec, context, plugins=PLUGINS)
    assert str(exc.value) == (
        "the llm-judge verifier would grade model 'judge-2025-01-01' with itself\n"
        "  hint: use another policy model, set allow-self-judge = true in the verifier, "
        "or pass --force-self-judge to grade anyway")


def test_self_judging_is_refused_inside_a_rubric(tmp_path: Path) -> None:
    from envhub.manifest import Rubric

    criterion = LlmJudgeCriterion(kind="llm-judge", name="style", model="m1")
    with pytest.raises(UsageError):
        build_verifier(Rubric(kind="rubric", criteria=[criterion]), ctx(tmp_path, policy_model="m1"), plugins=PLUGINS)


def test_a_rubric_criterion_judge_scores(openai_server, tmp_path: Path) -> None:
    openai_server.script = lambda request: json.dumps({"score": 5, "reasoning": "half"})
    criterion = LlmJudgeCriterion(kind="llm-judge", name="style", model="m1", base_url=openai_server.base_url)
    verifier = LlmJudgeVerifier(criterion, ctx(tmp_path, settings=settings()))
    assert verifier.score(TASK, Trajectory.of("Paris")).reward == 0.5
    assert openai_server.requests[0].authorization is None  # a local endpoint may run without a key


# --- configuration errors -----------------------------------------------------------------------------------


def test_a_missing_rubric_file(tmp_path: Path) -> None:
    spec = LlmJudge(kind="llm-judge", model="m", rubric="prompts/rubric.md")
    with pytest.raises(VerifierError) as exc:
        LlmJudgeVerifier(spec, ctx(tmp_path, settings=settings()))
    assert exc.value.message.startswith("llm-judge rubric 'prompts/rubric.md' cannot be read: ")


def test_a_missing_key_for_openai(tmp_path: Path) -> None:
    spec = LlmJudge(kind="llm-judge", model="gpt-4o-2024-08-06", api_key_env="MY_JUDGE_KEY")
    verifier = LlmJudgeVerifier(spec, ctx(tmp_path, settings=settings()))  # building needs no key
    with pytest.raises(VerifierError) as exc:
        verifier.score(TASK, Trajectory.of("Paris"))
    assert str(exc.value) == (
        "the llm-judge needs an API key for https://api.openai.com/v1: MY_JUDGE_KEY is not set\n"
        "  hint: set MY_JUDGE_KEY, or point the verifier's base-url at a server that needs no key")


def test_the_key_comes_from_the_named_variable(openai_server, tmp_path: Path) -> None:
    openai_server.script = lambda request: '{"score": 10}'
    spec = LlmJudge(kind="llm-judge", model="m", base_url=openai_server.base_url, api_key_env="MY_JUDGE_KEY")
    verifier = LlmJudgeVerifier(spec, ctx(tmp_path, settings=settings(MY_JUDGE_KEY="sk-named",
                                                                      OPENAI_API_KEY="sk-default")))
    verifier.score(TASK, Trajectory.of("Paris"))
    assert openai_server.requests[0].authorization == "Bearer sk-named"


# --- a declared prompt (prompt-template) and verdict ---------------------------------------------------------

#: An inspect-style graded chain-of-thought judge (model_graded_qa with partial credit).
GRADED_TEMPLATE = """You are comparing a submitted answer to an expert answer on a given question.
[Question]: {{ question }}
[Expert]: {{ answer }}
[Submission]: {{ completion }}
{{ rubric }}
Reason step by step, then end with GRADE: C (correct), GRADE: P (partially correct) or GRADE: I (incorrect).
"""
GRADED = {"regex": r"(?i)GRADE\s*:\s*([CPI])", "labels": {"C": 1.0, "P": 0.5, "I": 0.0}}


def templated(server, root: Path, template: str, *, verdict: dict[str, Any] | None = None,  # type: ignore[no-untyped-def]
              params: dict[str, Any] | None = None, rubric: str | None = "Be strict.") -> LlmJudgeVerifier:
    (root / "prompts").mkdir(exist_ok=True)
    (root / "prompts" / "judge.j2").write_text(template, encoding="utf-8")
    if rubric is not None:
        (root / "rubric.md").write_text(rubric + "\n", encoding="utf-8")
    spec = LlmJudge(kind="llm-judge", model="judge-2025-01-01", base_url=server.base_url,
                    rubric="rubric.md" if rubric is not None else None, prompt_template="prompts/judge.j2",
                    verdict=JudgeVerdict.model_validate(verdict) if verdict is not None else None)
    return LlmJudgeVerifier(spec, ctx(root, settings=settings(), params=params or {}))


def test_a_graded_cot_judge(openai_server, tmp_path: Path) -> None:
    def grader(request):  # type: ignore[no-untyped-def]
        submission = request.messages[0]["content"].split("[Submission]: ")[1].split("\n")[0]
        grade = "C" if submission == "Paris" else "P" if "Paris" in submission else "I"
        return f"The expert says Paris. The submission says {submission}.\nGRADE: {grade}"

    openai_server.script = grader
    verifier = templated(openai_server, tmp_path, GRADED_TEMPLATE, verdict=GRADED)
    rewards = [verifier.score(TASK, Trajectory.of(c)) for c in ("Paris", "Paris or Lyon", "Lyon")]
    assert [s.reward for s in rewards] == [1.0, 0.5, 0.0]
    assert [s.info["score"] for s in rewards] == ["C", "P", "I"]
    assert all(s.error is None for s in rewards)
    assert rewards[1].info["reasoning"] == "The expert says Paris. The submission says Paris or Lyon.\nGRADE: P"
    # The template is the judge's whole prompt: one user message, the rubric reaching it as {{ rubric }}.
    assert openai_server.requests[0].messages == [{"role": "user", "content": (
        "You are comparing a submitted answer to an expert answer on a given question.\n"
        "[Question]: Capital of France?\n[Expert]: Paris\n[Submission]: Paris\nBe strict.\n"
        "Reason step by step, then end with GRADE: C (correct), GRADE: P (partially correct) or "
        "GRADE: I (incorrect).\n")}]


def test_the_template_sees_params_messages_and_the_task(openai_server, tmp_path: Path) -> None:
    openai_server.script = lambda request: '{"score": 10}'
    template = ("{{ params.persona }} {{ task_id }}/{{ split }} {{ task['question'] }} {{ messages | length }} "
                "{{ messages[0].content }} -> {{ completion }}")
    verifier = templated(openai_server, tmp_path, template, params={"persona": "a teacher"}, rubric=None)
    assert verifier.score(TASK, Trajectory.of("{{ 7*7 }}")).reward == 1.0  # the default verdict reads the reply
    [message] = openai_server.requests[0].messages
    # A completion holding Jinja is shown as written, never rendered.
    assert message["content"] == "a teacher q1/dev Capital of France? 1 {{ 7*7 }} -> {{ 7*7 }}"


@pytest.mark.parametrize(("reply", "verdict", "expected"), [
    ('Reasoning...\n```json\n{"grade": "PARTIALLY_CORRECT", "reasoning": "half"}\n```',
     {"json-field": "grade", "labels": {"CORRECT": 1, "PARTIALLY_CORRECT": 0.5, "INCORRECT": 0}},
     (0.5, "PARTIALLY_CORRECT", "half")),
    ('{"rating": 7}', {"json-field": "rating", "scale": 10}, (0.7, 7.0, '{"rating": 7}')),
    ("Score: 4 out of 5", {"regex": r"Score: (\d+)", "scale": 5}, (0.8, 4.0, "Score: 4 out of 5")),
    ("the answer is correct", {"regex": r"(?i)\b(correct|incorrect)\b", "labels": {"CORRECT": 1, "INCORRECT": 0}},
     (1.0, "CORRECT", "the answer is correct")),
    ("verdict: PASS", {"regex": "PASS", "labels": {"PASS": 1, "FAIL": 0}}, (1.0, "PASS", "verdict: PASS")),
], ids=["json-field-labels-in-fence", "json-field-scale", "regex-scale", "label-ignoring-case", "whole-match"])
def test_read_verdict(reply: str, verdict: dict[str, Any], expected: tuple[float, Any, str]) -> None:
    reward, score, reasoning = read_verdict(reply, JudgeVerdict.model_validate(verdict))
    assert (reward, score, reasoning) == (pytest.approx(expected[0]), expected[1], expected[2])


@pytest.mark.parametrize(("reply", "verdict", "message"), [
    ("I think it is right.", GRADED,
     "the judge's reply has no match for verdict.regex '(?i)GRADE\\s*:\\s*([CPI])'; "
     "the reply: 'I think it is right.'"),
    ("GRADE: X", {"regex": r"GRADE: (\w)", "labels": {"C": 1, "I": 0}},
     "the score 'X' (from verdict.regex) is not one of the labels 'C', 'I'; the reply: 'GRADE: X'"),
    ('{"score": 9}', {"json-field": "grade"},
     "the judge's reply has no JSON object with the key 'grade' (verdict.json-field); the reply: '{\"score\": 9}'"),
    ('{"grade": 12}', {"json-field": "grade", "scale": 10},
     "the score 12 (from the JSON key 'grade') is outside 0..10 (verdict.scale); the reply: '{\"grade\": 12}'"),
    ('{"grade": "good"}', {"json-field": "grade"},
     "the score 'good' (from the JSON key 'grade') is not a number (declare verdict.labels to read words); "
     "the reply: '{\"grade\": \"good\"}'"),
    ("none", {"regex": r"rated (\d)|none"},
     "verdict.regex 'rated (\\d)|none' matched 'none' but its first group took no part in the match; "
     "the reply: 'none'"),
    ("rated 3", {"regex": r"rated (\d)", "scale": 5}, None),
], ids=["no-match", "unknown-label", "no-json-key", "out-of-scale", "word-without-labels", "empty-group",
        "ok-control"])
def test_verdicts_that_cannot_be_read(reply: str, verdict: dict[str, Any], message: str | None) -> None:
    if message is None:  # control: the same machinery reads a reply that does match
        assert read_verdict(reply, JudgeVerdict.model_validate(verdict))[:2] == (pytest.approx(0.6), 3.0)
        return
    with pytest.raises(VerifierError) as exc:
        read_verdict(reply, JudgeVerdict.model_validate(verdict))
    assert exc.value.message == message


def test_an_unreadable_declared_verdict_is_a_failed_score(openai_server, tmp_path: Path) -> None:
    openai_server.script = lambda request: "Looks right to me! " * 30
    score = templated(openai_server, tmp_path, GRADED_TEMPLATE, verdict=GRADED).score(TASK, Trajectory.of("Paris"))
    assert score.reward == 0.0
    assert score.error is not None and score.error.startswith(
        "llm-judge 'judge-2025-01-01': the judge's reply has no match for verdict.regex ")
    excerpt = ("Looks right to me! " * 30)[:200] + "..."  # the reply's first 200 characters
    assert score.error.endswith(f"; the reply: {excerpt!r}")


def test_a_verdict_without_a_template_sends_the_rubric_alone(openai_server, tmp_path: Path) -> None:
    openai_server.script = lambda request: "GRADE: P"
    (tmp_path / "rubric.md").write_text("Grade C, P or I. End with GRADE: <letter>.\n", encoding="utf-8")
    spec = LlmJudge(kind="llm-judge", model="m", base_url=openai_server.base_url, rubric="rubric.md",
                    verdict=JudgeVerdict.model_validate(GRADED))
    assert LlmJudgeVerifier(spec, ctx(tmp_path, settings=settings())).score(TASK, Trajectory.of("Lyon")).reward == 0.5
    system, user = openai_server.requests[0].messages
    assert system == {"role": "system", "content": "Grade C, P or I. End with GRADE: <letter>."}
    assert user["content"].startswith("# Task\nCapital of France?")


def test_a_template_that_fails_to_render_is_a_verifier_error(openai_server, tmp_path: Path) -> None:
    verifier = templated(openai_server, tmp_path, "Q: {{ question }}\nHint: {{ hint }}", verdict=GRADED)
    with pytest.raises(VerifierError) as exc:
        verifier.score(TASK, Trajectory.of("Paris"))
    assert exc.value.message == "task 'q1': llm-judge prompt-template 'prompts/judge.j2', line 2: 'hint' is undefined"
    assert openai_server.requests == []  # nothing was sent


@pytest.mark.parametrize(("template", "verdict", "message"), [
    ("{% if question %}open", None,
     "llm-judge prompt-template 'prompts/judge.j2', line 1: Unexpected end of template. Jinja was looking for the "
     "following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'."),
    ("{% include '/etc/passwd' %}", None,
     "llm-judge prompt-template 'prompts/judge.j2', line 1: 'include' is not allowed; a prompt template cannot "
     "read other files"),
    ("ok", {"regex": "(C|I)", "labels": {"C": 10, "I": 0}},
     "llm-judge verdict.labels: 'C' = 10 is outside [0, 1]"),
], ids=["syntax", "include", "label-reward"])
def test_a_broken_declaration_fails_at_build(openai_server, tmp_path: Path, template: str,
                                             verdict: dict[str, Any] | None, message: str) -> None:
    with pytest.raises(VerifierError) as exc:
        templated(openai_server, tmp_path, template, verdict=verdict)
    assert exc.value.message == message
