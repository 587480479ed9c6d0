"""Curricula (``[config.curriculum]``), generators that take a difficulty, and held-out seed
ranges kept out of the public bundle."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.errors import EnvNotFoundError, UsageError
from envhub.manifest import Curriculum as CurriculumSpec
from envhub.runtime import Curriculum
from tests.conftest import run_envhub
from tests.runtime_fixtures import scaffold, set_table, write_rows

LEVELS = (1, 2, 3, 4)


def graded(tmp_path: Path, *, curriculum: str = 'strategy = "success-window", window = 4, promote-at = 0.75, '
                                              'demote-at = 0.25', per_level: int = 5) -> Path:
    """A bundle whose train split has ``per_level`` tasks at each difficulty 1..4 (listed
    hardest first, so order comes from the curriculum, not the file)."""
    root = scaffold(tmp_path)
    rows = [{"id": f"d{d}-{i}", "prompt": f"{d} + {i} = ?", "answer": str(d + i), "difficulty": d}
            for d in reversed(LEVELS) for i in range(per_level)]
    write_rows(root, "train", rows)
    for split in ("dev", "test"):
        write_rows(root, split, [{"id": f"{split}-{d}", "prompt": f"{d} + 0 = ?", "answer": str(d), "difficulty": d}
                                 for d in LEVELS])
    set_table(root, "tasks", 'format = "jsonl"\ndifficulty-field = "difficulty"\n'
                             'splits.train = { path = "tasks/train.jsonl" }\n'
                             'splits.dev = { path = "tasks/dev.jsonl" }\n'
                             'splits.test = { path = "tasks/test.jsonl", held-out = true }')
    set_table(root, "config", f"curriculum = {{ {curriculum} }}")
    return root


def skill_at(outcome: int) -> int:
    """A learner that masters one level every 8 outcomes up to level 3, then (after 40
    outcomes) forgets everything above level 1: its skill rises, then falls."""
    return 1 if outcome >= 40 else min(3, 1 + outcome // 8)


def answer(task: Any, skill: int) -> str:
    return f"\\boxed{{{task['answer'] if task.difficulty <= skill else -1}}}"


def test_success_window_promotes_as_skill_grows_and_demotes_when_it_falls(tmp_path: Path) -> None:
    env = envhub.load(graded(tmp_path))
    curriculum = Curriculum(env, "train")
    levels = []
    for outcome in range(64):
        draw = curriculum.next()
        levels.append(draw.level)
        assert draw.task.difficulty == draw.level
        curriculum.update(draw, env.score(draw.task, answer(draw.task, skill_at(outcome))).reward)

    changes = [(c.kind, c.old, c.new, c.after) for c in curriculum.changes]
    assert changes == [
        ("promote", 1, 2, 4),    # level 1 is mastered from the start: the first full window
        ("demote", 2, 1, 8),     # too early: skill 2 only comes at outcome 8
        ("promote", 1, 2, 12),
        ("promote", 2, 3, 16),   # now it solves level 2 ...
        ("promote", 3, 4, 20),   # ... and level 3 (skill 3 from outcome 16)
        ("demote", 4, 3, 24),    # level 4 is beyond it: it settles between 3 and 4
        ("promote", 3, 4, 28),
        ("demote", 4, 3, 32),
        ("promote", 3, 4, 36),
        ("demote", 4, 3, 40),
        ("demote", 3, 2, 44),    # its skill collapses at outcome 40: back down
        ("demote", 2, 1, 48),
        ("promote", 1, 2, 52),
        ("demote", 2, 1, 56),
        ("promote", 1, 2, 60),
        ("demote", 2, 1, 64),
    ]
    assert all(c.rate == (1.0 if c.kind == "promote" else 0.0) for c in curriculum.changes)
    assert levels[:12] == [1] * 4 + [2] * 4 + [1] * 4 and max(levels) == 4
    assert curriculum.level == 1


def test_success_window_never_promotes_past_the_hardest_or_below_the_easiest(tmp_path: Path) -> None:
    env = envhub.load(graded(tmp_path))
    curriculum = Curriculum(env, "train")
    for _ in range(40):
        draw = curriculum.next()
        curriculum.update(draw, 1.0)
    assert curriculum.level == 4 and [c.new for c in curriculum.changes] == [2, 3, 4]

    down = Curriculum(env, "train")
    for _ in range(20):
        down.update(down.next(), 0.0)
    assert down.level == 1 and down.changes == []


def test_outcomes_drawn_at_another_level_are_not_counted(tmp_path: Path) -> None:
    env = envhub.load(graded(tmp_path))
    curriculum = Curriculum(env, "train")
    early = [curriculum.next() for _ in range(8)]  # a batch in flight: all drawn at level 1
    for draw in early:
        curriculum.update(draw, 1.0)
    # Promoted after the first four; the other four were drawn at level 1 and are ignored.
    assert curriculum.level == 2 and curriculum.window_rate is None


def test_ordered_draws_each_task_once_per_pass_easiest_first(tmp_path: Path) -> None:
    env = envhub.load(graded(tmp_path, curriculum='strategy = "ordered"', per_level=3))
    curriculum = Curriculum(env, "train")
    draws = [curriculum.next() for _ in range(24)]
    assert [d.level for d in draws[:12]] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert len({d.task.id for d in draws[:12]}) == 12
    assert [d.task.id for d in draws[12:]] == [d.task.id for d in draws[:12]]  # the next pass
    shuffled = [Curriculum(env, "train", seed=s).next().task.id for s in range(6)]
    assert len(set(shuffled)) > 1 and all(t.startswith("d1-") for t in shuffled)


def test_tasks_without_a_difficulty_are_refused(tmp_path: Path) -> None:
    root = graded(tmp_path)
    write_rows(root, "train", [{"id": "a", "prompt": "1 + 1", "answer": "2", "difficulty": 1},
                               {"id": "b", "prompt": "2 + 2", "answer": "4"}])
    env = envhub.load(root)
    with pytest.raises(UsageError) as e:
        Curriculum(env, "train")
    assert e.value.message == ("acme/demo: split 'train': 1 task(s) have no difficulty (first: 'b'), "
                               "so they have no curriculum level")


# --- generators with difficulty levels ------------------------------------------------------

GENERATOR = '''
def make_task(seed, difficulty, split, params):
    a, b = seed % 97, difficulty * params["scale"]
    return {"id": f"{split}-{seed}", "prompt": f"{a} + {b} = ?", "answer": str(a + b), "made_at": difficulty}
'''


def generated(tmp_path: Path, *, seeds: str = "[0, 1000000000]", curriculum: str = 'strategy = "ordered"') -> Path:
    root = scaffold(tmp_path, "acme/gen")
    (root / "gen.py").write_text(GENERATOR)
    set_table(root, "tasks", 'format = "generator"\ngenerator = "gen:make_task"\ndifficulty-levels = [1, 2, 3]\n'
                             f'splits.train = {{ seeds = {seeds} }}\n'
                             'splits.dev = { seeds = [5000, 5012] }\n'
                             'splits.test = { seeds = [777000, 777009], held-out = true }')
    set_table(root, "config", f"params = {{ scale = 10 }}\ncurriculum = {{ {curriculum} }}")
    for split in ("train", "dev", "test"):
        (root / "tasks" / f"{split}.jsonl").unlink()
    return root


def test_a_generator_gets_the_level_of_each_seed_and_the_params(tmp_path: Path) -> None:
    env = envhub.load(generated(tmp_path), trust_code=True)
    tasks = env.tasks("dev")
    assert [t.difficulty for t in tasks] == [1, 2, 3] * 4
    assert [t["made_at"] for t in tasks] == [1, 2, 3] * 4
    assert tasks[4].id == "dev-5004" and tasks[4]["answer"] == str(5004 % 97 + 20)
    assert env.score(tasks[4], f"\\boxed{{{tasks[4]['answer']}}}").reward == 1.0


def test_levels_of_an_unbounded_generator_are_lazy(tmp_path: Path) -> None:
    env = envhub.load(generated(tmp_path), trust_code=True)
    by_level = env.tasks_by_level("train")
    assert list(by_level) == [1, 2, 3]
    assert len(by_level[2]) == 333_333_333
    assert by_level[2][10].id == "train-31" and by_level[2][10].difficulty == 2
    with pytest.raises(UsageError, match="too many to shuffle"):
        env.tasks("train", seed=1)
    assert len(env.tasks("train", seed=1, limit=5)) == 5


def test_ordered_over_a_generator_spends_an_equal_share_on_each_level(tmp_path: Path) -> None:
    env = envhub.load(generated(tmp_path), trust_code=True)
    with pytest.raises(UsageError, match="needs the number of draws"):
        Curriculum(env, "train")
    draws = [d for c in [Curriculum(env, "train", total=9)] for d in (c.next() for _ in range(9))]
    assert [d.level for d in draws] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert [d.task.id for d in draws[:3]] == ["train-0", "train-3", "train-6"]


def test_success_window_over_a_generator(tmp_path: Path) -> None:
    spec = CurriculumSpec(strategy="success-window", window=2, promote_at=1.0)
    env = envhub.load(generated(tmp_path), trust_code=True)
    curriculum = Curriculum(env, "train", spec, seed=3)
    seen = []
    for _ in range(6):
        draw = curriculum.next()
        seen.append(draw.task.difficulty)
        curriculum.update(draw, 1.0)
    assert seen == [1, 1, 2, 2, 3, 3]


def test_held_out_seed_ranges_stay_out_of_the_public_archive(tmp_path: Path, envhub_cli: Any) -> None:
    from envhub.bundle import build_bundle
    from envhub.context import make_plugin_manager

    root = generated(tmp_path)
    built = build_bundle(root, tmp_path / "dist", plugins=make_plugin_manager(autoload=False))
    test = built.manifest.tasks.splits["test"]
    assert (test.seeds, test.rows) == (None, 9) and test.sha256 is not None
    with tarfile.open(built.public.path) as public:
        names = public.getnames()
        manifest = public.extractfile("envhub.toml").read().decode()  # type: ignore[union-attr]
    assert "777000" not in manifest and not any("heldout-seeds" in n for n in names)
    assert built.heldout is not None
    with tarfile.open(built.heldout.path) as heldout:
        assert sorted(heldout.getnames()) == [".envhub/RECORD", "heldout-seeds/test.json"]

    assert envhub_cli("push", str(root)).code == 0
    public_env = envhub.load("acme/gen", trust_code=True)
    assert public_env.splits["test"].available is False and public_env.splits["test"].rows == 9
    with pytest.raises(EnvNotFoundError, match="its seeds are not in this copy"):
        public_env.tasks("test")
    full = envhub.load("acme/gen", trust_code=True, with_heldout=True)
    source = envhub.load(root, trust_code=True)
    assert [t.id for t in full.tasks("test")] == [t.id for t in source.tasks("test")] == [
        f"test-{s}" for s in range(777000, 777009)]


def test_difficulty_levels_are_checked(tmp_path: Path, envhub_cli: Any) -> None:
    root = generated(tmp_path)
    manifest = root / "envhub.toml"
    manifest.write_text(manifest.read_text().replace("difficulty-levels = [1, 2, 3]", "difficulty-levels = [1, 3, 2]"))
    result = envhub_cli("validate", str(root))
    assert result.code == 2
    assert ("tasks.difficulty-levels: difficulty levels must increase (easiest first), got [1, 3, 2]"
            in result.out + result.err)

    other = graded(tmp_path / "files")
    set_table(other, "tasks",
              'format = "jsonl"\ndifficulty-levels = [1, 2]\nsplits.train = { path = "tasks/train.jsonl" }')
    result = envhub_cli("validate", str(other))
    assert result.code == 2
    assert "difficulty-levels are only used with format = 'generator', not 'jsonl'" in result.out + result.err


# --- envhub eval --curriculum ---------------------------------------------------------------

POLICY = '''
calls = 0

def act(messages, task):
    """A learner whose skill rises with practice and collapses after 40 answers."""
    global calls
    skill = 1 if calls >= 40 else min(3, 1 + calls // 8)
    calls += 1
    return "\\\\boxed{%s}" % (task["answer"] if task.difficulty <= skill else -1)
'''


def test_eval_with_a_curriculum_records_the_level_of_each_draw_and_resumes(tmp_path: Path) -> None:
    root = graded(tmp_path)
    (tmp_path / "learner.py").write_text(POLICY)
    out = tmp_path / "run.jsonl"
    args = ("eval", str(root), "--split", "train", "--curriculum", "-n", "64", "-c", "1",
            "--policy", f"python:{tmp_path / 'learner.py'}:act", "-o", str(out), "--json")
    result = run_envhub(*args)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert summary["curriculum"] == {"strategy": "success-window", "draws": 64, "last_level": 2,
                                     "highest_level": 4, "draws_per_level": {"1": 16, "2": 20, "3": 16, "4": 12}}
    rows = sorted((json.loads(line) for line in out.read_text().splitlines()),
                  key=lambda r: r["curriculum"]["step"])
    assert all(r["curriculum"]["level"] == r["difficulty"] for r in rows)
    assert [r["curriculum"]["level"] for r in rows[:24]] == [1] * 4 + [2] * 4 + [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4
    assert rows[0]["curriculum"] == {"strategy": "success-window", "step": 0, "level": 1, "level_index": 0,
                                     "levels": 4, "batch": 1}

    # A killed run: keep the first 30 records (and a torn line); resuming replays them.
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:30]) + lines[30][:17])
    (tmp_path / "learner.py").write_text(POLICY.replace("calls = 0", "calls = 30"))
    resumed = run_envhub(*args, "--resume")
    assert resumed.code == 0, resumed.err
    again = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["curriculum"]["step"])
    assert json.loads(resumed.out)["skipped"] == 30
    assert [(r["task_id"], r["reward"]) for r in again] == [(r["task_id"], r["reward"]) for r in rows]

    other = run_envhub(*(a if a != "1" else "2" for a in args), "--resume")
    assert other.code == 2 and "not a curriculum run with batches of 2" in other.err


@pytest.mark.parametrize(("extra", "message"), [
    (("-k", "2"), "--curriculum draws each rollout's task itself; it takes no -k"),
    ((), "acme/demo declares no curriculum"),
], ids=["with-k", "no-curriculum"])
def test_eval_curriculum_usage_errors(tmp_path: Path, extra: tuple[str, ...], message: str) -> None:
    root = scaffold(tmp_path)
    result = run_envhub("eval", str(root), "-s", "train", "--curriculum", *extra, "-o", str(tmp_path / "o.jsonl"))
    assert result.code == 2 and message in result.err and "Traceback" not in result.err


def test_eval_curriculum_on_a_generator_needs_n(tmp_path: Path) -> None:
    result = run_envhub("eval", str(generated(tmp_path)), "-s", "train", "--curriculum", "--trust")
    assert result.code == 2 and "--curriculum on the generated split 'train' needs the number of draws" in result.err
