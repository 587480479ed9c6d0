"""example_envs/arith-word-problems: the chain-of-thought wrapper is a declared prompt template
(prompts/cot.j2 over the task's ``prompt`` and ``[config.params] answer-format``), not text in
the task files, and the bundle still validates and checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import envhub
from tests.conftest import run_envhub

ARITH = Path(__file__).resolve().parents[1] / "example_envs" / "arith-word-problems"
FIRST_DEV = ("A tomato sauce recipe for 4 people uses 380 grams of tomatoes. Felix is cooking for 19 people. While "
             "cooking, 90 grams of tomatoes are spilled and have to be replaced. Felix decides to make a second, "
             "identical pot for the freezer. The shop sells tomatoes only in packs of 500 grams. How many packs does "
             "Felix have to buy?")
WRAPPER = ("\n\nThink step by step: work through the problem one calculation at a time, showing each one.\n"
           "The answer is a whole number. Then end your reply with the final answer alone as \\boxed{N}, with no "
           "units, no thousands separators and no other text in the box.\n")


def test_the_first_user_message_is_the_task_prompt_wrapped_by_the_template() -> None:
    with envhub.load(ARITH) as env:  # templates are not code: no trust needed
        task = env.tasks("dev")[0]
        assert (task.id, task.prompt) == ("arith-dev-00001", FIRST_DEV)
        with env.episode(task) as episode:
            observation = episode.reset()
            assert observation.messages == [
                {"role": "system", "content": "You are solving an arithmetic word problem.\n"},
                {"role": "user", "content": FIRST_DEV + WRAPPER}]
            result = episode.step("Per person 95 g, 1805 g for 19, 1895 with the spill, 3790 for two pots.\n\\boxed{8}")
        assert (result.done, result.reward) == (True, 1.0)


def test_the_task_files_carry_no_wrapper() -> None:
    """The wrapper lives in the template only: no task's prompt asks for a box or for steps."""
    for split in ("train", "dev", "test"):
        for line in (ARITH / "tasks" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            prompt = json.loads(line)["prompt"]
            assert "boxed" not in prompt and "step by step" not in prompt.lower(), prompt


def test_the_answer_format_param_reaches_the_prompt(tmp_path: Path) -> None:
    """[config.params] answer-format is what the template shows (positive control for the param:
    change it and the prompt changes with it)."""
    copy = tmp_path / "arith"
    shutil.copytree(ARITH, copy)
    manifest = copy / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('answer-format = "\\\\boxed{N}"', 'answer-format = "[[N]]"', 1))
    with envhub.load(copy) as env, env.episode(env.tasks("dev")[0]) as episode:
        user = episode.reset().messages[1]["content"]
    assert user.endswith("the final answer alone as [[N]], with no units, no thousands separators and no other "
                         "text in the box.\n")


def test_validate_check_passes() -> None:
    result = run_envhub("validate", "--strict", "--check", str(ARITH))
    assert result.code == 0, result.out + result.err
    assert result.out.strip() == (f"valid: envhub-examples/arith-word-problems 1.0.3 ({ARITH}): 3 split(s), "
                                  "600 task(s); --check played 1800 episode(s) on 600 task(s), 600 with a reference")
