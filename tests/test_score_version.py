"""Golden trajectories and ``envhub validate --against``: a reward that changes between two
versions sharing a score-version fails, with a real directory registry and the installed
``envhub`` command."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import Result, run_envhub

ROOT = Path(__file__).resolve().parents[1]
NAME = "acme/capitals"
TASKS = [{"id": "fr", "prompt": "The capital of France?", "answer": "Paris"},
         {"id": "de", "prompt": "The capital of Germany?", "answer": "Berlin"},
         {"id": "it", "prompt": "The capital of Italy?", "answer": "Rome"}]
# A right answer, a right answer in lower case, a wrong one: exact-match gives 1, 0, 0.
GOLDEN = [{"split": "dev", "task_id": "fr", "completion": "Paris", "reward": 1.0},
          {"split": "dev", "task_id": "de", "completion": "berlin", "reward": 0.0},
          {"split": "dev", "task_id": "it", "completion": "Milan", "reward": 0.0}]
CASE_SENSITIVE = 'kind = "exact-match"\nfield = "answer"\n'
CASE_INSENSITIVE = CASE_SENSITIVE + 'normalize = ["strip", "lower"]\n'


def bundle(root: Path, *, version: str = "1.0.0", score_version: int = 1, verifier: str = CASE_SENSITIVE,
           golden: list[dict[str, object]] | None = GOLDEN, name: str = NAME) -> Path:
    """A bundle with one public split, no warnings, and (unless ``golden`` is None) a golden file."""
    (root / "tasks").mkdir(parents=True, exist_ok=True)
    (root / "tasks" / "dev.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS), encoding="utf-8")
    golden_key = ""
    if golden is not None:
        (root / "golden").mkdir(exist_ok=True)
        (root / "golden" / "trajectories.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden),
                                                            encoding="utf-8")
        golden_key = 'golden = "golden/trajectories.jsonl"\n'
    (root / "envhub.toml").write_text(
        f'[environment]\nname = "{name}"\nversion = "{version}"\nscore-version = {score_version}\n'
        'description = "Name the capital."\ncanary = "envhub-canary:0123456789abcdef0123456789abcdef"\n'
        f'{golden_key}\n[tasks]\nformat = "jsonl"\nsplits.dev = {{ path = "tasks/dev.jsonl" }}\n\n'
        f'[verifier]\n{verifier}', encoding="utf-8")
    return root


@pytest.fixture
def registry(tmp_path: Path) -> str:
    """A directory registry holding acme/capitals 1.0.0: case-sensitive, score-version 1."""
    url = str(tmp_path / "registry")
    pushed = run_envhub("push", str(bundle(tmp_path / "v1")), "--registry", url)
    assert pushed.code == 0, pushed.err
    return url


def validate(tmp_path: Path, *args: str) -> Result:
    return run_envhub("validate", *args, cwd=tmp_path)


def test_the_published_bundle_unchanged_passes(tmp_path: Path, registry: str) -> None:
    result = validate(tmp_path, "--strict", "v1", "--against", NAME, "--registry", registry)
    assert (result.code, result.err) == (0, "")
    assert result.out == ("valid: acme/capitals 1.0.0 (v1): 1 split(s), 3 task(s); --against acme/capitals 1.0.0 "
                          "replayed 3 golden trajectory(ies), 0 changed reward\n")


def test_a_changed_verifier_without_a_score_version_bump_fails(tmp_path: Path, registry: str) -> None:
    bundle(tmp_path / "v2", version="1.1.0", verifier=CASE_INSENSITIVE)
    result = validate(tmp_path, "v2", "--against", f"{NAME}@1.0.0", "--registry", registry)
    assert result.code == 1
    assert result.out == (
        "v2/golden/trajectories.jsonl:2: error: environment.score-version: dev/de: reward 0 under acme/capitals "
        "1.0.0, 1 now, but score-version is still 1\n"
        "  hint: bump [environment] score-version to 2 if the change is intended (rewards are no longer "
        "comparable with acme/capitals 1.0.0), else make the verifier score as before\n"
        "invalid: acme/capitals 1.1.0 (v2): 1 error(s), 0 warning(s)\n")


def test_the_same_change_with_score_version_bumped_passes(tmp_path: Path, registry: str) -> None:
    bundle(tmp_path / "v2", version="2.0.0", score_version=2, verifier=CASE_INSENSITIVE)
    result = validate(tmp_path, "--strict", "v2", "--against", NAME, "--registry", registry)
    assert (result.code, result.err) == (0, "")
    assert result.out == ("valid: acme/capitals 2.0.0 (v2): 1 split(s), 3 task(s); --against acme/capitals 1.0.0 "
                          "replayed 3 golden trajectory(ies), 1 changed reward\n")


def test_a_bump_with_no_reward_change_warns_and_fails_under_strict(tmp_path: Path, registry: str) -> None:
    bundle(tmp_path / "v2", version="1.1.0", score_version=2)
    warning = ("v2/envhub.toml: warning: environment.score-version: score-version went from 1 (acme/capitals 1.0.0) "
               "to 2, but none of the 3 golden trajectories changed reward\n"
               "  hint: keep score-version 1 so rewards stay comparable, or add a golden trajectory that the new "
               "verifier scores differently\n")
    result = validate(tmp_path, "v2", "--against", NAME, "--registry", registry)
    assert result.code == 0
    assert result.out == warning + ("valid: acme/capitals 1.1.0 (v2): 1 split(s), 3 task(s), 1 warning(s); "
                                    "--against acme/capitals 1.0.0 replayed 3 golden trajectory(ies), "
                                    "0 changed reward\n")
    strict = validate(tmp_path, "--strict", "v2", "--against", NAME, "--registry", registry)
    assert strict.code == 1
    assert strict.out.startswith(warning)


def test_score_version_never_goes_down(tmp_path: Path, registry: str) -> None:
    bundle(tmp_path / "v3", version="3.0.0", score_version=3)
    assert run_envhub("push", str(tmp_path / "v3"), "--registry", registry).code == 0
    bundle(tmp_path / "v4", version="4.0.0", score_version=2)
    result = validate(tmp_path, "v4", "--against", NAME, "--registry", registry)  # the newest: 3.0.0
    assert result.code == 1
    assert result.out.startswith(
        "v4/envhub.toml: error: environment.score-version: score-version went down from 3 (acme/capitals 3.0.0) "
        "to 2\n  hint: score-version only goes up: set it to 3 if rewards are comparable, else 4\n")


def test_the_published_versions_golden_trajectories_are_replayed_too(tmp_path: Path, registry: str) -> None:
    """The new version dropped the line that shows the change: the published copy still has it."""
    bundle(tmp_path / "v2", version="1.1.0", verifier=CASE_INSENSITIVE, golden=None)
    result = validate(tmp_path, "v2", "--against", NAME, "--registry", registry)
    assert result.code == 1
    assert result.out.startswith(
        "acme/capitals@1.0.0:golden/trajectories.jsonl:2: error: environment.score-version: dev/de: reward 0 "
        "under acme/capitals 1.0.0, 1 now, but score-version is still 1\n")


def test_newest_compares_each_bundle_with_the_newest_version_of_its_name(tmp_path: Path, registry: str) -> None:
    bundle(tmp_path / "v2", version="1.1.0", score_version=2, verifier=CASE_INSENSITIVE)
    assert run_envhub("push", str(tmp_path / "v2"), "--registry", registry).code == 0
    # Back to case-sensitive under score-version 2: a change against 1.1.0, the newest.
    bundle(tmp_path / "v3", version="1.2.0", score_version=2)
    bundle(tmp_path / "other", name="acme/unpublished")
    result = validate(tmp_path, "v3", "other", "--against", "newest", "--registry", registry)
    assert result.code == 1
    assert result.out == (
        "v3/golden/trajectories.jsonl:2: error: environment.score-version: dev/de: reward 1 under acme/capitals "
        "1.1.0, 0 now, but score-version is still 2\n"
        "  hint: bump [environment] score-version to 3 if the change is intended (rewards are no longer "
        "comparable with acme/capitals 1.1.0), else make the verifier score as before\n"
        "invalid: acme/capitals 1.2.0 (v3): 1 error(s), 0 warning(s)\n"
        "valid: acme/unpublished 1.0.0 (other): 1 split(s), 3 task(s); --against newest: acme/unpublished was "
        "never published there, nothing compared\n")


def test_nothing_to_compare_is_a_warning(tmp_path: Path, registry: str) -> None:
    bundle(tmp_path / "plain", version="1.0.0", golden=None, name="acme/plain")
    assert run_envhub("push", str(tmp_path / "plain"), "--registry", registry).code == 0
    result = validate(tmp_path, "--strict", "plain", "--against", "acme/plain", "--registry", registry)
    assert result.code == 1
    assert result.out.startswith(
        "plain/envhub.toml: warning: environment.golden: --against acme/plain 1.0.0 compared nothing: neither "
        "version has golden trajectories\n"
        "  hint: record golden trajectories on tasks of public splits (envhub eval ... -o FILE writes them) and "
        "declare [environment] golden = \"golden/trajectories.jsonl\"\n")


@pytest.mark.parametrize(("ref", "message"), [
    (f"{NAME}@9.0", "envhub: error: no version of acme/capitals matches 'acme/capitals@9.0'; versions: 1.0.0\n"
                    "  hint: pin one that exists, e.g. 'acme/capitals@1.0.0'\n"),
    ("acme/missing", "envhub: error: acme/missing is not in {registry}\n"
                     "  hint: publish it with 'envhub push', or search with 'envhub search'\n"),
    ("Acme", "envhub: error: invalid environment id 'Acme': expected 'namespace/name', e.g. 'acme/sql-shop'\n"),
], ids=["unknown-version", "unknown-name", "invalid-id"])
def test_a_ref_that_is_not_published_is_refused(tmp_path: Path, registry: str, ref: str, message: str) -> None:
    result = validate(tmp_path, "v1", "--against", ref, "--registry", registry)
    assert (result.code, result.out) == (2, "")
    assert result.err == message.format(registry=registry)


def test_python_verifiers_replay_only_with_trust(tmp_path: Path) -> None:
    """A numeric tolerance in the bundle's own code: loosened without a bump, caught under --trust."""
    registry = str(tmp_path / "registry")
    verifier = 'kind = "python"\nentry-point = "close:score"\n'
    golden = [{"split": "dev", "task_id": "fr", "completion": "Paris", "reward": 1.0},
              {"split": "dev", "task_id": "de", "completion": "Berlin!", "reward": 0.0}]
    code = "def score(task, trajectory):\n    return float(trajectory.completion.strip(){} == task['answer'])\n"
    v1 = bundle(tmp_path / "v1", verifier=verifier, golden=golden)
    (v1 / "close.py").write_text(code.format(""), encoding="utf-8")
    assert run_envhub("push", str(v1), "--registry", registry).code == 0
    v2 = bundle(tmp_path / "v2", version="1.0.1", verifier=verifier, golden=golden)
    (v2 / "close.py").write_text(code.format(".rstrip('!')"), encoding="utf-8")

    untrusted = validate(tmp_path, "v2", "--against", NAME, "--registry", registry)
    assert untrusted.code == 1
    assert untrusted.out.startswith("v2/envhub.toml: error: cannot load acme/capitals for --against: acme/capitals "
                                    "runs its own code (close:score), and it is not trusted\n  hint: pass --trust ")
    trusted = validate(tmp_path, "v2", "--against", NAME, "--registry", registry, "--trust")
    assert trusted.code == 1
    assert trusted.out.startswith("v2/golden/trajectories.jsonl:2: error: environment.score-version: dev/de: "
                                  "reward 0 under acme/capitals 1.0.0, 1 now, but score-version is still 1\n")


# --- the golden file: --check and static validation --------------------------------------------


def test_check_replays_the_golden_trajectories_against_their_recorded_rewards(tmp_path: Path) -> None:
    bundle(tmp_path / "b")
    assert validate(tmp_path, "--strict", "--check", "b").code == 0
    bundle(tmp_path / "b", verifier=CASE_INSENSITIVE)
    result = validate(tmp_path, "--check", "b")
    assert result.code == 1
    assert result.out.startswith(
        "b/golden/trajectories.jsonl:2: error: environment.golden: dev/de: recorded reward 0, the verifier now "
        "gives 1\n"
        "  hint: if the verifier changed on purpose, bump [environment] score-version to 2 and record the new "
        "reward; else make the verifier score as before\n")


def test_eval_records_are_golden_lines(tmp_path: Path) -> None:
    """`envhub eval -o` is how golden trajectories are recorded: its records validate as they stand."""
    b = bundle(tmp_path / "b", golden=None)
    recorded = run_envhub("eval", "b", "--split", "dev", "--policy", "noop", "-o", "b/golden/noop.jsonl",
                          cwd=tmp_path)
    assert recorded.code == 0, recorded.err
    manifest = b / "envhub.toml"
    manifest.write_text(manifest.read_text().replace('[tasks]', 'golden = "golden/noop.jsonl"\n\n[tasks]', 1)
                        .replace('\n\n\ngolden', '\ngolden'))
    result = validate(tmp_path, "--strict", "--check", "b")
    assert (result.code, result.err) == (0, ""), result.out


@pytest.mark.parametrize(("line", "message"), [
    ('{"split": "test", "task_id": "fr", "completion": "Paris", "reward": 1}',
     "error: environment.golden: split 'test' is held out: golden trajectories are published, and would publish "
     "its tasks\n  hint: record golden trajectories on a public split (dev, train)"),
    ('{"split": "train", "task_id": "fr", "completion": "Paris", "reward": 1}',
     "error: environment.golden: split 'train' is not declared (splits: dev, test)\n"
     "  hint: record golden trajectories on this bundle's public splits"),
    ('{"split": "dev", "task_id": "fr", "completion": "Paris", "reward": 1.5}',
     "error: environment.golden: 'reward' must be a number in [0, 1], got 1.5\n"
     "  hint: write the reward the episode got (envhub eval -o records carry it)"),
    ('{"split": "dev", "task_id": "fr", "completion": "Paris", "reward": 0, "error": "timeout: too slow"}',
     "error: environment.golden: the episode failed (timeout: too slow), so its messages are not a finished "
     "episode\n  hint: drop records whose 'error' is set"),
    ('{"split": "dev", "task_id": "fr", "completion": "Paris", "reward": 0, '
     '"error": {"kind": "timeout", "type": "TimeoutError", "message": "too slow"}}',
     "error: environment.golden: the episode failed (TimeoutError: too slow), so its messages are not a finished "
     "episode\n  hint: drop records whose 'error' is set"),
    ('{"split": "dev", "task_id": "fr", "reward": 1}',
     "error: environment.golden: give 'completion' (a string) or 'messages' (a list of {role, content} objects)\n"
     "  hint: envhub eval -o records carry 'messages'"),
    ('["dev", "fr"]',
     "error: environment.golden: a golden line is a JSON object, not list\n"
     '  hint: write {"split": ..., "task_id": ..., "completion": ..., "reward": ...}'),
    ('{"split": "dev", "task_id": 7, "completion": "Paris", "reward": 1}',
     "error: environment.golden: 'split' and 'task_id' must be strings\n"
     "  hint: name the task the trajectory was recorded on"),
], ids=["held-out-split", "unknown-split", "reward-out-of-range", "failed-episode", "failed-episode-typed-error",
        "no-completion", "not-an-object", "id-not-a-string"])
def test_a_bad_golden_line_is_an_error_naming_the_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    b = bundle(tmp_path / "b")
    (b / "tasks" / "test.jsonl").write_text('{"id": "pl", "prompt": "The capital of Poland?", "answer": "Warsaw"}\n')
    manifest = b / "envhub.toml"
    manifest.write_text(manifest.read_text().replace(
        'splits.dev = { path = "tasks/dev.jsonl" }',
        'splits.dev = { path = "tasks/dev.jsonl" }\nsplits.test = { path = "tasks/test.jsonl", held-out = true }'))
    with (b / "golden" / "trajectories.jsonl").open("a") as f:
        f.write(line + "\n")
    result = validate(tmp_path, "b")
    assert result.code == 2
    assert result.out == (f"b/golden/trajectories.jsonl:4: {message}\n"
                          "invalid: acme/capitals 1.0.0 (b): 1 error(s), 0 warning(s)\n")


def test_a_missing_golden_file_is_an_error_at_its_manifest_key(tmp_path: Path) -> None:
    b = bundle(tmp_path / "b")
    (b / "golden" / "trajectories.jsonl").unlink()
    result = validate(tmp_path, "b")
    assert result.code == 2
    assert result.out == ("b/envhub.toml:7:1: error: environment.golden: 'golden/trajectories.jsonl' not found\n"
                          "  hint: create it, or fix the path (relative to envhub.toml)\n"
                          "invalid: acme/capitals 1.0.0 (b): 1 error(s), 0 warning(s)\n")


# --- where CI runs it: the pre-commit hook --------------------------------------------------------


def test_the_score_version_hook_fails_a_commit_that_changes_a_reward(tmp_path: Path, registry: str) -> None:
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    hook = hooks["envhub-score-version"]
    assert (hook["language"], hook["pass_filenames"], hook["types"]) == ("python", True, ["file"])
    entry = shlex.split(hook["entry"])
    assert entry[0] == "envhub"
    bundle(tmp_path / "envs" / "capitals", version="1.1.0", verifier=CASE_INSENSITIVE)
    changed = ["envs/capitals/envhub.toml", "README.md"]
    failed = run_envhub(*entry[1:], "--registry", registry, *changed, cwd=tmp_path)
    assert failed.code == 1
    assert failed.out.startswith("envs/capitals/golden/trajectories.jsonl:2: error: environment.score-version: "
                                 "dev/de: reward 0 under acme/capitals 1.0.0, 1 now, but score-version is still 1\n")
    bundle(tmp_path / "envs" / "capitals", version="1.1.0", verifier=CASE_INSENSITIVE, score_version=2)
    assert run_envhub(*entry[1:], "--registry", registry, *changed, cwd=tmp_path).code == 0


def test_the_arith_examples_golden_lines_catch_a_loosened_tolerance(tmp_path: Path) -> None:
    """example_envs/arith-word-problems ships golden lines; with tolerance 0.5 instead of 0, '8.4'
    for 8 scores 1 where the published version gave 0."""
    registry = str(tmp_path / "registry")
    source = ROOT / "example_envs" / "arith-word-problems"
    pushed = run_envhub("push", str(source), "--registry", registry)
    assert pushed.code == 0, pushed.err
    loosened = tmp_path / "arith"
    shutil.copytree(source, loosened)
    manifest = loosened / "envhub.toml"
    manifest.write_text(manifest.read_text().replace("tolerance = 0.0 ", "tolerance = 0.5 ", 1))
    result = run_envhub("validate", "arith", "--against", "newest", "--registry", registry, cwd=tmp_path)
    assert result.code == 1
    assert result.out == (
        "arith/golden/trajectories.jsonl:9: error: environment.score-version: dev/arith-dev-00001: reward 0 under "
        "envhub-examples/arith-word-problems 1.0.3, 1 now, but score-version is still 1\n"
        "  hint: bump [environment] score-version to 2 if the change is intended (rewards are no longer comparable "
        "with envhub-examples/arith-word-problems 1.0.3), else make the verifier score as before\n"
        "invalid: envhub-examples/arith-word-problems 1.0.3 (arith): 1 error(s), 0 warning(s)\n")
    unchanged = run_envhub("validate", "--strict", str(source), "--against", "newest", "--registry", registry)
    assert (unchanged.code, unchanged.err) == (0, "")
