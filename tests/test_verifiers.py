"""The built-in verifiers (code-tests' sandbox is in test_code_sandbox.py)."""

from __future__ import annotations

import asyncio
import importlib.util
import textwrap
from pathlib import Path
from typing import Any

import pytest

from envhub.context import make_plugin_manager
from envhub.errors import TrustError
from envhub.manifest import (
    CodeTestsCriterion,
    ExactMatch,
    ExactMatchCriterion,
    JsonMatch,
    Numeric,
    NumericCriterion,
    PythonCriterion,
    PythonVerifier,
    RegexCriterion,
    RegexMatch,
    Rubric,
)
from envhub.runtime import Score, Task, Trajectory
from envhub.runtime.verifiers import (
    MissingFieldError,
    Verifier,
    VerifierContext,
    VerifierError,
    build_verifier,
    default_factories,
    extract_number,
    parse_json_answer,
)
from envhub.settings import load_settings

#: envhub's built-in kinds, nothing installed; settings that name no real home.
PLUGINS = make_plugin_manager(autoload=False)
SETTINGS = load_settings({"ENVHUB_HOME": "/nonexistent/envhub-home", "ENVHUB_CACHE": "/nonexistent/envhub-cache"})


def task(tid: str = "t1", **data: Any) -> Task:
    return Task(id=tid, split="dev", data={"id": tid, **data})


def untrusted(entry_point: str) -> Any:
    raise TrustError(f"environment code {entry_point!r} is not trusted", hint="pass trust_code=True")


CTX = VerifierContext(root=Path("."), load_entry_point=untrusted, settings=SETTINGS)


def score(spec: Any, t: Task, completion: str | list[dict[str, Any]], ctx: VerifierContext = CTX) -> Score:
    return build_verifier(spec, ctx, plugins=PLUGINS).score(t, Trajectory.of(completion))


# --- exact-match -------------------------------------------------------------------------

EXACT = [
    ("default-strip", None, "  Paris\n", "Paris", 1.0),
    ("no-normalisation", [], " Paris", "Paris", 0.0),
    ("case-differs", ["strip"], "paris", "Paris", 0.0),
    ("lower", ["strip", "lower"], "PARIS ", "paris", 1.0),
    ("collapse-whitespace", ["collapse-whitespace"], "New   York\tCity", "New York City", 1.0),
    ("collapse-does-not-strip", ["collapse-whitespace"], " a b", "a b", 0.0),
    ("strip-punctuation", ["strip-punctuation", "strip"], "Paris!", "Paris.", 1.0),
    ("unicode-punctuation", ["strip-punctuation"], "¿Qué?", "Qué", 1.0),
    ("order-matters", ["strip", "strip-punctuation"], "Paris .", "Paris", 0.0),
    ("number-field-compared-as-str", ["strip"], "42", 42, 1.0),
]


@pytest.mark.parametrize(("steps", "completion", "answer", "reward"), [c[1:] for c in EXACT], ids=[c[0] for c in EXACT])
def test_exact_match(steps: list[str] | None, completion: str, answer: Any, reward: float) -> None:
    # None: the manifest's default, ["strip"].
    spec = ExactMatch(kind="exact-match") if steps is None else ExactMatch(kind="exact-match", normalize=steps)
    assert score(spec, task(answer=answer), completion).reward == reward


def test_exact_match_reads_last_assistant_message() -> None:
    messages = [
        {"role": "user", "content": "capital?"},
        {"role": "assistant", "content": "Lyon"},
        {"role": "user", "content": "sure?"},
        {"role": "assistant", "content": "Paris"},
    ]
    assert score(ExactMatch(kind="exact-match"), task(answer="Paris"), messages).reward == 1.0


# --- missing and null fields, for every kind that reads one ------------------------------

MISSING = [
    ("exact-match", ExactMatch(kind="exact-match")),
    ("numeric", Numeric(kind="numeric")),
    ("json-match", JsonMatch(kind="json-match")),
]


@pytest.mark.parametrize("spec", [m[1] for m in MISSING], ids=[m[0] for m in MISSING])
def test_missing_field_names_task_and_field(spec: Any) -> None:
    with pytest.raises(MissingFieldError) as e:
        score(spec, task("q-7", question="2+2?"), "4")
    assert e.value.message == f"task 'q-7' has no field 'answer', which the {spec.kind} verifier reads"
    assert e.value.hint == "the task's fields are 'id', 'question'; set the verifier's field or fix the task file"
    assert isinstance(e.value, KeyError)


def test_null_expected_answer_is_an_error() -> None:
    with pytest.raises(VerifierError,
                       match="^task 't1' field 'answer' is null; the exact-match verifier needs a value$"):
        score(ExactMatch(kind="exact-match"), task(answer=None), "None")


# --- numeric -----------------------------------------------------------------------------

EXTRACT = [
    ("thousands", "last-number", "The total is 1,234 apples.", 1234),
    ("decimal", "last-number", "pi is about 3.14159", 3.14159),
    ("negative", "last-number", "the change is -17 degrees", -17),
    ("unicode-minus", "last-number", "total: \u22127", -7),
    ("range-is-not-negative", "last-number", "pages 10-12", 12),
    ("fraction", "last-number", "x = 3/4", 0.75),
    ("negative-fraction", "last-number", "x = -3/4", -0.75),
    ("zero-denominator-skipped", "last-number", "3/0 or 5", 5),
    ("percent-is-the-number", "last-number", "it grew by 50%", 50),
    ("exponent", "last-number", "about 1.5e3 m", 1500),
    ("leading-point", "last-number", "p = .25", 0.25),
    ("list-is-not-thousands", "last-number", "1,2,3", 3),
    ("version-not-a-number", "last-number", "7 items in v1.2", 7),
    ("no-number", "last-number", "I don't know", None),
    ("boxed", "boxed", r"so 3 then \boxed{42} and 7", 42),
    ("boxed-last", "boxed", r"\boxed{1} no, \boxed{2}", 2),
    ("boxed-frac", "boxed", r"\boxed{\frac{3}{4}}", 0.75),
    ("boxed-dfrac-negative", "boxed", r"\boxed{-\dfrac{1}{2}}", -0.5),
    ("boxed-latex-thousands", "boxed", r"\boxed{1{,}000}", 1000),
    ("boxed-with-text", "boxed", r"\boxed{42 \text{ apples}}", 42),
    ("boxed-nested-braces", "boxed", r"\boxed{{12}}", 12),
    ("boxed-absent", "boxed", "the answer is 5", None),
    ("auto-prefers-boxed", "auto", r"\boxed{3}. Answer: 4", 3),
    ("auto-gsm8k-marker", "auto", "5 + 6 = 11\n#### 11\nchecked with 3 cases", 11),
    ("auto-answer-colon", "auto", "Answer: 18. I used 2 steps.", 18),
    ("auto-answer-is", "auto", "So the answer is $1,200 and 3 cents? no", 1200),
    ("auto-bold-marker", "auto", "**Final answer:** 9 (from 2 steps)", 9),
    ("auto-last-marker-wins", "auto", "answer: 1\nwait\nanswer: 2 (3 tries)", 2),
    ("auto-word-answer-needs-colon", "auto", "To answer this, 3 then 4", 4),
    ("auto-falls-back-to-last", "auto", "3 then 4", 4),
    ("huge-exponent-skipped", "last-number", "1e999999999 or 8", 8),
]


@pytest.mark.parametrize(("how", "text", "value"), [c[1:] for c in EXTRACT], ids=[c[0] for c in EXTRACT])
def test_extract_number(how: str, text: str, value: float | None) -> None:
    found = extract_number(text, how)  # type: ignore[arg-type]
    if value is None:
        assert found is None
    else:
        assert found is not None and float(found[1]) == pytest.approx(value, abs=1e-12)


NUMERIC = [
    ("int-equal", {}, 42, "42", 1.0),
    ("string-expected", {}, "1,234", "1234", 1.0),
    ("fraction-expected", {}, "3/4", "0.75", 1.0),
    ("float-decimal-exact", {"tolerance": 0.0}, 0.1, "0.1", 1.0),
    ("big-int-exact", {"tolerance": 0.0}, 2**60 + 1, str(2**60), 0.0),
    ("within-abs", {"tolerance": 0.01}, 3.14159, "3.14", 1.0),
    ("outside-abs", {"tolerance": 0.001}, 3.14159, "3.14", 0.0),
    ("within-rel", {"tolerance": 0.0, "relative_tolerance": 0.01}, 1000, "1009", 1.0),
    ("outside-rel", {"tolerance": 0.0, "relative_tolerance": 0.01}, 1000, "1011", 0.0),
    ("either-tolerance", {"tolerance": 20.0, "relative_tolerance": 0.001}, 1000, "1015", 1.0),
    ("no-number", {}, 5, "no idea", 0.0),
]


@pytest.mark.parametrize(("options", "answer", "completion", "reward"), [c[1:] for c in NUMERIC],
                         ids=[c[0] for c in NUMERIC])
def test_numeric(options: dict[str, Any], answer: Any, completion: str, reward: float) -> None:
    result = score(Numeric(kind="numeric", **options), task(answer=answer), completion)
    assert result.reward == reward


def test_numeric_reports_what_it_read() -> None:
    result = score(Numeric(kind="numeric"), task(answer=3), "I think 2... Answer: 3")
    assert dict(result.info) == {"read": "3", "value": 3.0, "expected": 3.0}
    nothing = score(Numeric(kind="numeric", extract="boxed"), task(answer=3), "3")
    assert nothing.info == {"reason": "no number found in the completion (extract = 'boxed')"}


@pytest.mark.parametrize("answer", ["abc", True, float("nan"), [1]], ids=["word", "bool", "nan", "list"])
def test_numeric_expected_must_be_a_number(answer: Any) -> None:
    with pytest.raises(VerifierError) as e:
        score(Numeric(kind="numeric"), task("q1", answer=answer), "1")
    assert e.value.message == f"task 'q1' field 'answer' is not a number: {answer!r}"


# --- regex -------------------------------------------------------------------------------

REGEX = [
    ("search", {"pattern": r"ANSWER: \d+"}, {}, "so ANSWER: 12 ok", 1.0),
    ("search-miss", {"pattern": r"ANSWER: \d+"}, {}, "answer: 12", 0.0),
    ("ignore-case", {"pattern": r"ANSWER: \d+", "ignore_case": True}, {}, "answer: 12", 1.0),
    ("full-match", {"pattern": r"\d+", "full_match": True}, {}, "12", 1.0),
    ("full-match-miss", {"pattern": r"\d+", "full_match": True}, {}, "12 apples", 0.0),
    ("per-task", {"pattern_field": "pat"}, {"pat": "^yes$"}, "yes", 1.0),
    ("per-task-miss", {"pattern_field": "pat"}, {"pat": "^yes$"}, "no", 0.0),
]


@pytest.mark.parametrize(("options", "data", "completion", "reward"), [c[1:] for c in REGEX], ids=[c[0] for c in REGEX])
def test_regex(options: dict[str, Any], data: dict[str, Any], completion: str, reward: float) -> None:
    assert score(RegexMatch(kind="regex", **options), task(**data), completion).reward == reward


REGEX_ERRORS = [
    ("neither", {}, {}, "a regex verifier needs exactly one of 'pattern' and 'pattern-field'"),
    ("both", {"pattern": "a", "pattern_field": "p"}, {"p": "a"},
     "a regex verifier needs exactly one of 'pattern' and 'pattern-field'"),
    ("bad-task-pattern", {"pattern_field": "p"}, {"p": "(a"},
     "task 't1' field 'p' is not a valid regular expression: missing ), unterminated subpattern at position 0"),
    ("task-pattern-not-str", {"pattern_field": "p"}, {"p": 3},
     "task 't1' field 'p' must be a regular expression string, got int"),
]


@pytest.mark.parametrize(("options", "data", "message"), [c[1:] for c in REGEX_ERRORS],
                         ids=[c[0] for c in REGEX_ERRORS])
def test_regex_errors(options: dict[str, Any], data: dict[str, Any], message: str) -> None:
    with pytest.raises(VerifierError) as e:
        score(RegexMatch(kind="regex", **options), task(**data), "a")
    assert e.value.message == message


# --- json-match --------------------------------------------------------------------------

JSON = [
    ("equal", False, {"a": 1, "b": [1, 2]}, '{"b": [1, 2], "a": 1}', 1.0, None),
    ("int-float-equal", False, {"a": 1}, '{"a": 1.0}', 1.0, None),
    ("bool-is-not-int", False, {"a": 1}, '{"a": true}', 0.0, "$.a: expected number 1, got bool true"),
    ("extra-key", False, {"a": 1}, '{"a": 1, "b": 2}', 0.0, "$: unexpected key 'b'"),
    ("subset-extra-key", True, {"a": 1}, '{"a": 1, "b": 2}', 1.0, None),
    ("subset-nested", True, {"a": {"b": 1}}, '{"a": {"b": 1, "c": 2}}', 1.0, None),
    ("subset-missing", True, {"a": 1, "z": 0}, '{"a": 1}', 0.0, "$: missing key 'z'"),
    ("subset-list-length", True, {"xs": [1]}, '{"xs": [1, 2]}', 0.0, "$.xs: expected 1 items, got 2"),
    ("subset-list-elements", True, [{"id": 1}], '[{"id": 1, "n": "a"}]', 1.0, None),
    ("list-order", False, [1, 2], "[2, 1]", 0.0, "$[0]: expected 1, got 2"),
    ("fenced", False, {"ok": True}, 'Sure:\n```json\n{"ok": true}\n```\nDone.', 1.0, None),
    ("last-object-in-prose", False, {"x": 2}, 'first {"x": 1} then {"x": 2}.', 1.0, None),
    ("field-is-json-text", False, '{"a": [1]}', '{"a": [1]}', 1.0, None),
    ("field-is-json-string", False, '"yes"', '"yes"', 1.0, None),
    ("scalar", False, 3, "3", 1.0, None),
    ("null-expected", False, None, "null", 1.0, None),
]


@pytest.mark.parametrize(("subset", "answer", "completion", "reward", "reason"), [c[1:] for c in JSON],
                         ids=[c[0] for c in JSON])
def test_json_match(subset: bool, answer: Any, completion: str, reward: float, reason: str | None) -> None:
    result = score(JsonMatch(kind="json-match", subset=subset), task(answer=answer), completion)
    assert result.reward == reward
    assert result.info.get("reason") == reason


def test_json_unparseable_is_zero_not_an_error() -> None:
    result = score(JsonMatch(kind="json-match"), task(answer={"a": 1}), "I cannot answer in JSON")
    assert result.reward == 0.0
    assert result.info == {"reason": "the completion contains no parseable JSON"}


def test_json_field_string_that_is_not_json() -> None:
    with pytest.raises(VerifierError) as e:
        score(JsonMatch(kind="json-match"), task(answer="yes"), '"yes"')
    assert e.value.message == ("task 't1' field 'answer' is a string but not JSON text: "
                               "Expecting value: line 1 column 1 (char 0)")


def test_json_deeply_nested_junk_is_bounded() -> None:
    assert parse_json_answer("[" * 200_000) is None


# --- python ------------------------------------------------------------------------------


def bundle(tmp_path: Path, source: str) -> VerifierContext:
    """A bundle directory with one module, ``verify``, and a loader for its entry points."""
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "verify.py").write_text(textwrap.dedent(source))

    def load(entry_point: str) -> Any:
        module_name, attr = entry_point.split(":")
        spec = importlib.util.spec_from_file_location(f"_bundle_{id(root)}_{module_name}", root / f"{module_name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, attr)

    return VerifierContext(root=root, load_entry_point=load, settings=SETTINGS)


PYTHON_SOURCE = """
    from envhub.runtime._types import Score

    def by_completion(completion):
        return completion.strip() == "ok"

    def by_task(task, completion):
        return 1 if completion == task["answer"] else 0

    def everything(**kwargs):
        return {"reward": 0.5, "breakdown": {"args": len(kwargs) / 5}}

    def with_state(completion, state):
        return float(state["hits"]) / 2

    def tool_calls(trajectory, messages):
        return 0.25 * len(trajectory.tool_calls) + 0 * len(messages)

    def a_score(task):
        return Score(0.75, {"part": 1.0}, info={"why": "because"})

    async def is_async(completion):
        return completion == "ok"

    def too_big(completion):
        return 1.7

    def nan(completion):
        return float("nan")

    def wrong_type(completion):
        return "yes"

    def no_reward_key(completion):
        return {"score": 1}

    def bad_breakdown(completion):
        return {"reward": 1, "breakdown": {"x": 2}}

    def raises(completion):
        raise RuntimeError("verifier bug")

    def needs_other(completion, judge):
        return 1

    NOT_CALLABLE = 3
"""

PYTHON_OK = [
    ("bool", "by_completion", "ok", None, 1.0, {}),
    ("bool-false", "by_completion", "no", None, 0.0, {}),
    ("int-with-task", "by_task", "42", None, 1.0, {}),
    ("kwargs-gets-all-five", "everything", "x", None, 0.5, {"args": 1.0}),
    ("state", "with_state", "x", {"hits": 1}, 0.5, {}),
    ("score-object", "a_score", "x", None, 0.75, {"part": 1.0}),
    ("async", "is_async", "ok", None, 1.0, {}),
]


@pytest.mark.parametrize(("func", "completion", "state", "reward", "breakdown"), [c[1:] for c in PYTHON_OK],
                         ids=[c[0] for c in PYTHON_OK])
def test_python_verifier(tmp_path: Path, func: str, completion: str, state: Any, reward: float,
                         breakdown: dict[str, float]) -> None:
    ctx = bundle(tmp_path, PYTHON_SOURCE)
    verifier = build_verifier(PythonVerifier(kind="python", entry_point=f"verify:{func}"), ctx, plugins=PLUGINS)
    t = task(answer="42")
    result = verifier.score(t, Trajectory.of(completion), state=state)
    assert (result.reward, dict(result.breakdown)) == (reward, breakdown)
    async_result = asyncio.run(verifier.ascore(t, Trajectory.of(completion), state=state))
    assert (async_result.reward, dict(async_result.breakdown)) == (reward, breakdown)


def test_python_verifier_sees_trajectory(tmp_path: Path) -> None:
    verifier = build_verifier(PythonVerifier(kind="python", entry_point="verify:tool_calls"),
                              bundle(tmp_path, PYTHON_SOURCE), plugins=PLUGINS)
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [{"role": "assistant", "content": None, "tool_calls": [call, call]},
                {"role": "assistant", "content": "done"}]
    assert verifier.score(task(), Trajectory.of(messages)).reward == 0.5


PYTHON_ERRORS = [
    ("too-big", "too_big",
     "python verifier 'verify:too_big' on task 't1' returned 1.7: its reward must be in [0, 1], got 1.7"),
    ("nan", "nan", "python verifier 'verify:nan' on task 't1' returned nan: its reward must be in [0, 1], got nan"),
    ("wrong-type", "wrong_type",
     "python verifier 'verify:wrong_type' on task 't1' returned 'yes': its reward must be a number in [0, 1], got str"),
    ("no-reward-key", "no_reward_key",
     "python verifier 'verify:no_reward_key' on task 't1' returned {'score': 1}: "
     "a dict result needs a 'reward' key, got keys ['score']"),
    ("bad-breakdown", "bad_breakdown",
     "python verifier 'verify:bad_breakdown' on task 't1' returned {'reward': 1, 'breakdown': {'x': 2}}: "
     "breakdown['x'] must be in [0, 1], got 2"),
]


@pytest.mark.parametrize(("func", "message"), [c[1:] for c in PYTHON_ERRORS], ids=[c[0] for c in PYTHON_ERRORS])
def test_python_verifier_bad_results_are_errors(tmp_path: Path, func: str, message: str) -> None:
    verifier = build_verifier(PythonVerifier(kind="python", entry_point=f"verify:{func}"),
                              bundle(tmp_path, PYTHON_SOURCE), plugins=PLUGINS)
    with pytest.raises(VerifierError) as e:
        verifier.score(task(), Trajectory.of("x"))
    assert e.value.message == message


def test_python_verifier_exception_propagates(tmp_path: Path) -> None:
    verifier = build_verifier(PythonVerifier(kind="python", entry_point="verify:raises"),
                              bundle(tmp_path, PYTHON_SOURCE), plugins=PLUGINS)
    with pytest.raises(RuntimeError, match="^verifier bug$"):
        verifier.score(task(), Trajectory.of("x"))


PYTHON_BUILD_ERRORS = [
    ("unknown-parameter", "needs_other",
     "python verifier 'verify:needs_other' requires parameter 'judge', which envhub cannot supply; "
     "it may take: task, completion, trajectory, messages, state, params"),
    ("not-callable", "NOT_CALLABLE", "python verifier 'verify:NOT_CALLABLE' is a int, not a function"),
]


@pytest.mark.parametrize(("func", "message"), [c[1:] for c in PYTHON_BUILD_ERRORS],
                         ids=[c[0] for c in PYTHON_BUILD_ERRORS])
def test_python_verifier_build_errors(tmp_path: Path, func: str, message: str) -> None:
    with pytest.raises(VerifierError) as e:
        build_verifier(PythonVerifier(kind="python", entry_point=f"verify:{func}"), bundle(tmp_path, PYTHON_SOURCE),
                       plugins=PLUGINS)
    assert e.value.message == message


def test_untrusted_python_verifier_fails_at_build() -> None:
    with pytest.raises(TrustError, match="^environment code 'verify:f' is not trusted"):
        build_verifier(PythonVerifier(kind="python", entry_point="verify:f"), CTX, plugins=PLUGINS)


def test_async_python_verifier_inside_a_running_loop_needs_ascore(tmp_path: Path) -> None:
    verifier = build_verifier(PythonVerifier(kind="python", entry_point="verify:is_async"),
                              bundle(tmp_path, PYTHON_SOURCE), plugins=PLUGINS)

    async def inside() -> None:
        with pytest.raises(VerifierError) as e:
            verifier.score(task(), Trajectory.of("ok"))
        assert e.value.message == ("python verifier 'verify:is_async' is async and score() was called "
                                   "inside a running event loop")
        assert (await verifier.ascore(task(), Trajectory.of("ok"))).reward == 1.0

    asyncio.run(inside())


# --- rubric ------------------------------------------------------------------------------


def rubric(*criteria: Any) -> Rubric:
    return Rubric(kind="rubric", criteria=list(criteria))


ANSWER = ExactMatchCriterion(kind="exact-match", name="answer", weight=3.0)
FORMAT = RegexCriterion(kind="regex", name="format", pattern=r"^\w+$")
NUMBER = NumericCriterion(kind="numeric", name="number", field="n")

RUBRIC = [
    ("all-pass", rubric(ANSWER, FORMAT), "Paris", 1.0, {"answer": 1.0, "format": 1.0}),
    ("weighted", rubric(ANSWER, FORMAT), "Paris!", 0.0, {"answer": 0.0, "format": 0.0}),
    ("weighted-partial", rubric(ANSWER, FORMAT), "Lyon", 0.25, {"answer": 0.0, "format": 1.0}),
    ("gate-fails", rubric(ANSWER, FORMAT.model_copy(update={"required": True})), "Paris.",
     0.0, {"answer": 0.0, "format": 0.0}),
    ("gate-passes", rubric(ANSWER, FORMAT.model_copy(update={"required": True})), "Lyon",
     0.25, {"answer": 0.0, "format": 1.0}),
    ("gate-on-heavy", rubric(ANSWER.model_copy(update={"required": True}), FORMAT), "Lyon",
     0.0, {"answer": 0.0, "format": 1.0}),
    ("three-kinds", rubric(ANSWER, FORMAT, NUMBER), "Paris", 0.8, {"answer": 1.0, "format": 1.0, "number": 0.0}),
]


@pytest.mark.parametrize(("spec", "completion", "reward", "breakdown"), [c[1:] for c in RUBRIC],
                         ids=[c[0] for c in RUBRIC])
def test_rubric(spec: Rubric, completion: str, reward: float, breakdown: dict[str, float]) -> None:
    verifier = build_verifier(spec, CTX, plugins=PLUGINS)
    t = task(answer="Paris", n=7)
    for result in (verifier.score(t, Trajectory.of(completion)),
                   asyncio.run(verifier.ascore(t, Trajectory.of(completion)))):
        assert result.reward == pytest.approx(reward)
        assert dict(result.breakdown) == breakdown


def test_rubric_gate_needs_full_credit(tmp_path: Path) -> None:
    source = "def half(completion):\n    return 0.5\n"
    ctx = bundle(tmp_path, source)
    spec = rubric(ANSWER, PythonCriterion(kind="python", name="style", entry_point="verify:half", required=True))
    result = build_verifier(spec, ctx, plugins=PLUGINS).score(task(answer="Paris"), Trajectory.of("Paris"))
    assert (result.reward, dict(result.breakdown)) == (0.0, {"answer": 1.0, "style": 0.5})
    assert result.info["failed_required"] == ["style"]


def test_rubric_criterion_error_names_the_criterion() -> None:
    with pytest.raises(VerifierError) as e:
        build_verifier(rubric(ANSWER, NUMBER), CTX, plugins=PLUGINS).score(task("q9", answer="Paris"),
                                                                           Trajectory.of("Paris"))
    assert e.value.message == (
        "rubric criterion 'number' failed on task 'q9': task 'q9' has no field 'n', which the numeric verifier reads\n"
        "  hint: the task's fields are 'answer', 'id'; set the verifier's field or fix the task file"
    )
    assert isinstance(e.value.__cause__, MissingFieldError)


def test_rubric_with_untrusted_python_criterion_fails_at_build() -> None:
    with pytest.raises(TrustError):
        build_verifier(rubric(ANSWER, PythonCriterion(kind="python", name="p", entry_point="verify:f")), CTX,
                       plugins=PLUGINS)


def test_rubric_runs_criteria_concurrently() -> None:
    class Slow(Verifier):
        kind = "slow"

        def score(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:
            raise AssertionError("ascore only")

        async def ascore(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:
            await asyncio.sleep(0.2)
            return Score(1.0)

    factories = default_factories(PLUGINS)
    factories["exact-match"] = lambda spec, ctx, table: Slow()
    verifier = build_verifier(rubric(*(ANSWER.model_copy(update={"name": f"c{i}"}) for i in range(5))), CTX,
                              factories=factories)

    async def timed() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert (await verifier.ascore(task(), Trajectory.of("x"))).reward == 1.0
        return loop.time() - start

    assert asyncio.run(timed()) < 0.6  # five 0.2 s criteria, not one after another


# --- building ----------------------------------------------------------------------------


def test_unknown_kind() -> None:
    factories = default_factories(PLUGINS)
    del factories["numeric"]
    with pytest.raises(VerifierError) as e:
        build_verifier(Numeric(kind="numeric"), CTX, factories=factories)
    assert e.value.message == (
        "unknown verifier kind 'numeric'; known kinds: code-tests, exact-match, json-match, llm-judge, python, regex, "
        "rubric, workspace-tests"
    )


def test_every_manifest_kind_has_a_factory() -> None:
    from envhub.manifest import VERIFIER_KINDS

    assert sorted(default_factories(PLUGINS)) == sorted(VERIFIER_KINDS)


def test_code_tests_criterion_builds() -> None:
    verifier = build_verifier(rubric(CodeTestsCriterion(kind="code-tests", name="tests", timeout_s=2)), CTX,
                              plugins=PLUGINS)
    assert [c.verifier.kind for c in verifier.criteria] == ["code-tests"]  # type: ignore[attr-defined]


def test_verifier_errors_are_envhub_errors() -> None:
    from envhub.errors import EnvhubError

    assert issubclass(MissingFieldError, EnvhubError) and issubclass(MissingFieldError, KeyError)
    assert str(MissingFieldError("task 'a' has no field 'b'")) == "task 'a' has no field 'b'"  # not KeyError's repr
