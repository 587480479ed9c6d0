"""``envhub validate --check``: the dynamic self-test catches broken verifiers per task."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.runtime_fixtures import scaffold, set_table, write_rows


@pytest.mark.parametrize(("protocol", "state"), [
    ("single-turn", "none"), ("multi-turn", "none"), ("tool-use", "none"), ("tool-use", "sqlite"),
    ("tool-use", "files"),
], ids=["single-turn", "multi-turn", "tool-use", "tool-use-sqlite", "tool-use-files"])
def test_scaffolds_pass_the_self_test(tmp_path: Path, envhub_cli: Any, protocol: str, state: str) -> None:
    root = scaffold(tmp_path, protocol=protocol, state=state)
    result = envhub_cli("validate", str(root), "--check", "--trust", "--strict")
    assert result.code == 0, result.out + result.err
    assert result.out.startswith("valid: acme/demo 0.1.0")
    # Every task present is played: its reference twice, an empty answer once.
    played = re.search(r"(\d+) task\(s\); --check played (\d+) episode\(s\) on (\d+) task\(s\), (\d+) with a "
                       r"reference$", result.out.rstrip())
    assert played is not None, result.out
    tasks, episodes, checked, with_reference = map(int, played.groups())
    assert tasks == checked == with_reference and episodes == 3 * tasks


VERIFIERS = {
    # Rewards everything: the noop floor catches it.
    "always-one": "def check(task, completion):\n    return 1.0\n",
    # Reads the wrong field: the reference fails.
    "wrong-field": "def check(task, completion):\n    return completion.strip() == task['prompt']\n",
    # Random: the determinism check catches it (on at least one of the tasks, with this seed).
    "random": "import random\n_r = random.Random(4)\n\ndef check(task, completion):\n"
              "    return completion == task['reference'] and _r.random() < 0.5\n",
}


def broken(tmp_path: Path, verifier: str) -> Path:
    root = scaffold(tmp_path)
    (root / "checks.py").write_text(VERIFIERS[verifier])
    set_table(root, "verifier", 'kind = "python"\nentry-point = "checks:check"')
    rows = [{"id": f"t{i}", "prompt": f"Say {i}.", "answer": str(i), "reference": str(i)} for i in range(1, 5)]
    for split in ("train", "dev", "test"):
        write_rows(root, split, [dict(r, id=f"{split}-{r['id']}") for r in rows])
    return root


def test_a_verifier_that_rewards_nothing_is_caught_on_every_task(tmp_path: Path, envhub_cli: Any) -> None:
    root = broken(tmp_path, "always-one")
    result = envhub_cli("validate", str(root), "--check", "--trust", "--format", "json")
    assert result.code == 1
    report = json.loads(result.out)
    noop = [p["message"] for p in report["problems"] if p["code"] == "check-noop"]
    assert noop == [f"{split}/{split}-t{i}: an empty answer scores 1" for split in ("train", "dev", "test")
                    for i in range(1, 5)]


def test_a_verifier_that_reads_the_wrong_field_fails_the_reference(tmp_path: Path, envhub_cli: Any) -> None:
    root = broken(tmp_path, "wrong-field")
    result = envhub_cli("validate", str(root), "--check", "--trust", "--check-limit", "2")
    assert result.code == 1
    lines = [line for line in result.out.splitlines() if "check-reference" in line or "reference scores" in line]
    assert any("train/train-t1: the reference scores 0, not 1.0" in line for line in lines)
    assert len([line for line in result.out.splitlines() if "the reference scores 0" in line]) == 6


def test_a_random_verifier_fails_determinism(tmp_path: Path, envhub_cli: Any) -> None:
    result = envhub_cli("validate", str(broken(tmp_path, "random")), "--check", "--trust", "--format", "json")
    assert result.code == 1
    codes = {p["code"] for p in json.loads(result.out)["problems"]}
    assert "check-deterministic" in codes


def test_check_needs_trust_for_code(tmp_path: Path, envhub_cli: Any) -> None:
    result = envhub_cli("validate", str(scaffold(tmp_path, protocol="tool-use")), "--check")
    assert result.code == 1
    assert ("cannot load the environment for --check: acme/demo runs its own code (demo.tools:calculate), "
            "and it is not trusted") in result.out


def test_static_errors_skip_the_self_test(tmp_path: Path, envhub_cli: Any) -> None:
    root = scaffold(tmp_path)
    (root / "tasks" / "dev.jsonl").write_text("not json\n")
    result = envhub_cli("validate", str(root), "--check")
    assert result.code == 2
    assert "check-" not in result.out


def test_reset_isolation_is_checked(tmp_path: Path) -> None:
    """A state kind that leaks between episodes is reported."""
    import envhub
    from envhub.runtime import _state, self_test

    root = scaffold(tmp_path, protocol="tool-use", state="files")
    env = envhub.load(root, trust_code=True)
    leaky = _state.StateHandle(Path(tmp_path / "shared"))
    leaky.value.mkdir()
    env._state_factory.new = lambda task: _state.StateHandle(leaky.value)  # type: ignore[method-assign]
    problems = [p for p in self_test(env, limit=1).problems if p.code == "check-reset"]
    assert [p.message for p in problems] == [
        "train/files-train-001: an episode's writes reached the next episode's state"]
