"""The policy's model reaches the verifier per call (a :class:`ScoringContext`), never by
changing the environment: an llm-judge refuses a call whose context names its own model,
and the same verifier, environment or server scores another context's call right after.
Plugin verifier kinds written before the context keep working."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.context import make_plugin_manager
from envhub.errors import UsageError
from envhub.manifest import LlmJudge
from envhub.runtime import Score, Task, Trajectory
from envhub.runtime.verifiers import (
    Criterion,
    LlmJudgeVerifier,
    RubricVerifier,
    ScoringContext,
    Verifier,
    VerifierContext,
    ascore_with,
    score_with,
)
from envhub.settings import load_settings
from tests.serve_fixtures import start_server

PLUGINS = make_plugin_manager(autoload=False)
JUDGE = "judge-1"
TASK = Task(id="q1", split="dev", data={"id": "q1", "prompt": "Capital of France?", "answer": "Paris"},
            prompt="Capital of France?")
REFUSAL = "the llm-judge verifier would grade model 'judge-1' with itself"
SELF = ScoringContext(JUDGE)
OTHER = ScoringContext("writer-1")


def grade(request: Any) -> str:
    """The judge: 10 when the response is Paris, else 0."""
    response = request.messages[-1]["content"].split("# Response to grade", 1)[-1]
    return json.dumps({"score": 10 if "Paris" in response else 0, "reasoning": "checked"})


def judge(openai_server: Any, tmp_path: Path, **spec: Any) -> LlmJudgeVerifier:
    openai_server.script = grade
    model = LlmJudge(kind="llm-judge", model=JUDGE, base_url=openai_server.base_url, **spec)
    return LlmJudgeVerifier(model, VerifierContext(root=tmp_path, load_entry_point=_no_code,
                                                   settings=load_settings({})))


def _no_code(entry_point: str) -> Any:
    raise AssertionError("no bundle code here")


# --- one verifier, many contexts ----------------------------------------------------------------------------------


def test_an_llm_judge_refuses_a_call_for_its_own_model_and_scores_the_next_context(openai_server: Any,
                                                                                  tmp_path: Path) -> None:
    verifier = judge(openai_server, tmp_path)
    with pytest.raises(UsageError) as e:
        verifier.score(TASK, Trajectory.of("Paris"), context=SELF)
    assert e.value.message == REFUSAL
    assert openai_server.requests == []  # refused before asking the judge
    assert verifier.score(TASK, Trajectory.of("Paris"), context=OTHER).reward == 1.0
    assert verifier.score(TASK, Trajectory.of("Paris"), context=ScoringContext(JUDGE, force_self_judge=True)).reward \
        == 1.0
    assert verifier.score(TASK, Trajectory.of("Paris")).reward == 1.0  # no context: no model to refuse
    with pytest.raises(UsageError, match=REFUSAL):  # and refuses again: nothing was kept from the other calls
        asyncio.run(verifier.ascore(TASK, Trajectory.of("Paris"), context=SELF))
    assert asyncio.run(verifier.ascore(TASK, Trajectory.of("Rome"), context=OTHER)).reward == 0.0
    assert len(openai_server.requests) == 4


def test_allow_self_judge_scores_its_own_model(openai_server: Any, tmp_path: Path) -> None:
    verifier = judge(openai_server, tmp_path, allow_self_judge=True)
    verifier.check_context(SELF)
    assert verifier.score(TASK, Trajectory.of("Paris"), context=SELF).reward == 1.0


def test_check_context_refuses_up_front(openai_server: Any, tmp_path: Path) -> None:
    verifier = judge(openai_server, tmp_path)
    with pytest.raises(UsageError, match=REFUSAL):
        verifier.check_context(SELF)
    verifier.check_context(OTHER)
    verifier.check_context(ScoringContext(JUDGE, force_self_judge=True))
    verifier.check_context(ScoringContext())


def test_a_rubric_passes_the_context_to_its_criteria(openai_server: Any, tmp_path: Path) -> None:
    rubric = RubricVerifier.of([Criterion("style", judge(openai_server, tmp_path)), Criterion("seen", Recording())])
    with pytest.raises(UsageError) as e:  # the refusal itself, not "criterion failed"
        rubric.score(TASK, Trajectory.of("Paris"), context=SELF)
    assert e.value.message == REFUSAL
    with pytest.raises(UsageError, match=REFUSAL):
        rubric.check_context(SELF)
    score = rubric.score(TASK, Trajectory.of("Paris"), context=OTHER)
    assert score.breakdown == {"style": 1.0, "seen": 1.0}
    assert score.info["seen"] == {"context": "writer-1"}
    assert asyncio.run(rubric.ascore(TASK, Trajectory.of("Paris"), context=OTHER)).info["seen"] == {
        "context": "writer-1"}


# --- plugin kinds written before the context ------------------------------------------------------------------------


class Old(Verifier):
    """A plugin kind with the signature of before: no ``context`` keyword."""

    kind = "old"

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:  # type: ignore[override]
        return Score(1.0 if trajectory.completion == task["answer"] else 0.0)


class OldAsync(Old):
    async def ascore(self, task: Task, trajectory: Trajectory, *, state: Any = None) -> Score:  # type: ignore[override]
        return self.score(task, trajectory, state=state)


class Recording(Verifier):
    """A kind that takes the context, and says what it was given."""

    kind = "recording"

    def score(self, task: Task, trajectory: Trajectory, *, state: Any = None,
              context: ScoringContext | None = None) -> Score:
        return Score(1.0, info={"context": context.policy_model if context else None})


@pytest.mark.parametrize("kind", [Old, OldAsync], ids=["sync-only", "sync-and-async"])
def test_a_plugin_kind_without_the_context_keyword_is_called_without_it(kind: type[Verifier]) -> None:
    verifier = kind()
    assert score_with(verifier, TASK, Trajectory.of("Paris"), context=OTHER).reward == 1.0
    assert asyncio.run(ascore_with(verifier, TASK, Trajectory.of("Paris"), context=OTHER)).reward == 1.0
    rubric = RubricVerifier.of([Criterion("old", verifier), Criterion("new", Recording())])
    assert rubric.score(TASK, Trajectory.of("Paris"), context=OTHER).reward == 1.0
    assert asyncio.run(rubric.ascore(TASK, Trajectory.of("Paris"), context=OTHER)).reward == 1.0
    # Control: calling the old signature with the keyword is what would break.
    with pytest.raises(TypeError, match="context"):
        verifier.score(TASK, Trajectory.of("Paris"), context=OTHER)  # type: ignore[call-arg]


def test_the_default_ascore_calls_an_old_score_without_the_context() -> None:
    assert asyncio.run(ascore_with(Old(), TASK, Trajectory.of("Rome"), context=OTHER)).reward == 0.0


def test_a_kind_that_takes_the_context_receives_it() -> None:
    assert score_with(Recording(), TASK, Trajectory.of("x"), context=OTHER).info == {"context": "writer-1"}
    assert asyncio.run(ascore_with(Recording(), TASK, Trajectory.of("x"), context=SELF)).info == {"context": JUDGE}
    assert score_with(Recording(), TASK, Trajectory.of("x")).info == {"context": None}


# --- a loaded environment, and a served one ---------------------------------------------------------------------------


def judged_bundle(tmp_path: Path, base_url: str) -> Path:
    root = tmp_path / "judged"
    (root / "tasks").mkdir(parents=True)
    (root / "tasks" / "dev.jsonl").write_text(json.dumps(TASK.data) + "\n", encoding="utf-8")
    (root / "envhub.toml").write_text(f"""\
[environment]
name = "acme/judged"
version = "0.1.0"
description = "An llm-judge grades capitals."
license = "MIT"

[tasks]
format = "jsonl"
splits.dev = {{ path = "tasks/dev.jsonl" }}

[harness]
protocol = "single-turn"

[verifier]
kind = "llm-judge"
model = "{JUDGE}"
base-url = "{base_url}"
""", encoding="utf-8")
    return root


def test_one_environment_refuses_one_context_and_scores_the_next(openai_server: Any, tmp_path: Path) -> None:
    openai_server.script = grade
    with envhub.load(judged_bundle(tmp_path, openai_server.base_url)) as env:
        task = env.tasks("dev")[0]
        refused = env.score(task, "Paris", context=SELF)
        assert refused.reward == 0.0 and (refused.error or "").startswith(f"UsageError: {REFUSAL}\n  hint: ")
        assert env.score(task, "Paris", context=OTHER).reward == 1.0
        assert (asyncio.run(env.ascore(task, "Paris", context=SELF)).error or "").startswith(f"UsageError: {REFUSAL}")
        with pytest.raises(UsageError, match=REFUSAL):
            env.check_scoring(SELF)
        env.check_scoring(OTHER)
        with env.episode(task, scoring=SELF) as episode:
            episode.reset()
            episode.step("Paris")
            assert episode.score is not None and (episode.score.error or "").startswith(f"UsageError: {REFUSAL}")
        with env.episode(task, scoring=OTHER) as episode:
            episode.reset()
            episode.step("Paris")
            assert episode.score is not None and episode.score.reward == 1.0
    assert len(openai_server.requests) == 2


def test_a_served_environment_gets_the_context_with_each_request(openai_server: Any, tmp_path: Path) -> None:
    openai_server.script = grade
    server = start_server([str(judged_bundle(tmp_path, openai_server.base_url))], tmp_path / "serve")
    try:
        with envhub.load(server.url("acme/judged")) as env:
            task = env.tasks("dev")[0]
            with pytest.raises(UsageError, match=REFUSAL):
                env.score(task, "Paris", context=SELF)
            assert env.score(task, "Paris", context=OTHER).reward == 1.0
            assert env.score(task, "Paris", context=ScoringContext(JUDGE, force_self_judge=True)).reward == 1.0
            with pytest.raises(UsageError, match=REFUSAL):
                asyncio.run(env.ascore(task, "Paris", context=SELF))
            with env.episode(task, scoring=SELF) as episode, pytest.raises(UsageError, match=REFUSAL):
                episode.reset()
            with env.episode(task, scoring=OTHER) as episode:
                episode.reset()
                assert episode.step("Paris").done
                assert episode.score is not None and episode.score.reward == 1.0
            with env.episode(task) as episode:  # no context: nothing to refuse
                episode.reset()
                episode.step("Rome")
                assert episode.score is not None and episode.score.reward == 0.0
        assert [r.model for r in openai_server.requests] == [JUDGE] * 4
    finally:
        assert server.stop() in (0, -signal.SIGTERM), server.stderr()
