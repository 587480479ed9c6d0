"""``envhub import terminal-bench``: task directories in the Terminal-Bench layout (task.yaml,
Dockerfile, solution.sh, run-tests.sh, tests/) and the Harbor layout (task.toml,
instruction.md, environment/, solution/solve.sh, tests/test.sh) become one bundle that
validates, whose references score 1.0 on the host-system base, and whose IMPORT-REPORT.md
names everything that did not carry over. The source tasks are hand-written, in
tests/data/terminal-bench/.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.errors import InvalidIdError, UsageError
from envhub.importers import ImportSourceError, import_terminal_bench
from tests.conftest import run_envhub

DATA = Path(__file__).resolve().parent / "data" / "terminal-bench"
RUNNABLE = DATA / "runnable"
DROPPED = DATA / "dropped"

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux's")


def rows(bundle: Path, split: str = "test") -> dict[str, dict[str, Any]]:
    lines = (bundle / "tasks" / f"{split}.jsonl").read_text().splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("import") / "bundle"
    import_terminal_bench(RUNNABLE, out, name="acme/tb-sample")
    return out


# --- the mapping ------------------------------------------------------------------------------


def test_each_task_directory_becomes_a_row_with_its_tests_beside(imported: Path) -> None:
    tasks = rows(imported)
    assert sorted(tasks) == ["harbor-count", "harbor-reward", "tb-hello"]
    hello = tasks["tb-hello"]
    # The working directory /app is the workspace; the path is rewritten where it is used.
    assert hello["prompt"] == ("Read /workspace/greeting.txt and write its first line, in upper case, to "
                               "/workspace/hello.txt.\n")
    assert hello["difficulty"] == 1 and tasks["harbor-count"]["difficulty"] == 2
    assert tasks["harbor-reward"]["difficulty"] == 3
    assert hello["files"] == {"greeting.txt": "good morning\nsecond line\n"}  # the Dockerfile's COPY
    assert hello["metadata"]["category"] == "file-operations" and hello["metadata"]["tags"] == ["files", "text"]
    assert hello["source"] == "terminal-bench:tb-hello" and hello["tests"] == "tb-hello"
    tests = imported / "tests" / "tb-hello"
    assert sorted(p.name for p in tests.iterdir()) == ["_envhub_pytest.py", "envhub-tests.sh", "run-tests.sh",
                                                        "test_outputs.py"]
    assert 'Path("/workspace/hello.txt")' in (tests / "test_outputs.py").read_text()
    # Tests never reach the workspace: they are not among the starting files of any task.
    assert not any("test_outputs" in name for row in tasks.values() for name in row.get("files", {}))


def test_the_dockerfile_maps_what_a_workspace_can_hold(imported: Path) -> None:
    count = rows(imported)["harbor-count"]
    assert count["files"] == {"data/letters.txt": "a\nb\nc\n", "data/numbers.txt": "one\ntwo\n"}
    # ENV and the RUN that only touches the working directory run as setup; pip does not.
    assert count["setup"] == "export MODE=strict && mkdir -p /workspace/out && echo ready > /workspace/out/.keep"
    entry = (imported / "tests" / "harbor-count" / "envhub-tests.sh").read_text()
    assert "export MODE=strict\nexport EXPECTED_FILES=2\n" in entry  # ENV and verifier.env reach the tests
    assert entry.endswith("exec python3 /tests/_envhub_pytest.py /tests/test_outputs.py\n")


def test_the_solution_script_is_one_command_that_runs_it(imported: Path) -> None:
    solution = rows(imported)["tb-hello"]["solution"]
    assert solution == ["mkdir -p /tmp/envhub-solution && cat > /tmp/envhub-solution/solution.sh <<'ENVHUB_EOF'\n"
                        "#!/bin/bash\nhead -n 1 /workspace/greeting.txt | tr 'a-z' 'A-Z' > /workspace/hello.txt\n"
                        "ENVHUB_EOF\nbash /tmp/envhub-solution/solution.sh"]


def test_the_manifest_takes_the_largest_limits_and_turns_the_network_off(imported: Path) -> None:
    manifest = (imported / "envhub.toml").read_text()
    for line in ('name = "acme/tb-sample"', 'kind = "workspace-tests"', 'command = "bash /tests/envhub-tests.sh"',
                 "timeout-s = 60", 'kind = "sandbox"', 'files-field = "files"', 'setup-field = "setup"',
                 "network = false", "memory-mb = 2048", "disk-mb = 4096", "timeout-s = 300",
                 'splits.test = { path = "tasks/test.jsonl" }', 'difficulty-field = "difficulty"'):
        assert line in manifest, line


def test_the_report_names_what_was_dropped_per_task(imported: Path) -> None:
    report = (imported / "IMPORT-REPORT.md").read_text()
    assert "## tb-hello (terminal-bench, from `tb-hello`)" in report
    for line in (
        "- RUN apt-get install -y tmux asciinema: installs or downloads software; the host-system base is read-only "
        "and has no network",
        "- RUN pip install --no-cache-dir numpy==2.1.0: installs or downloads software; the host-system base is "
        "read-only and has no network",
        "- FROM python:3.12-slim: the sandbox runs on the host's read-only system, not this image; what the image "
        "has and the host lacks is missing",
        "- task.toml environment.cpus = 1: the sandbox builds no image and sets no such resource",
        "- task.yaml run_tests_in_same_shell = False: the tests always run in a fresh sandbox, never the agent's "
        "shell",
        "- agent time limit (s): the tasks differ (120 to 300); the bundle uses the largest, 300, for every task",
    ):
        assert line in report, line
    assert (imported / ".envhubignore").read_text().splitlines()[-1] == "IMPORT-REPORT.md"


def test_what_cannot_map_is_reported_not_guessed(tmp_path: Path) -> None:
    report = import_terminal_bench(DROPPED, tmp_path / "out", name="acme/svc")
    (task,) = report.tasks
    assert task.id == "tb-service" and task.layout == "terminal-bench"
    assert task.dropped == [
        "task.yaml descriptions other than 'base' (hard)",
        "parser_name = 'swebench': only the tests' exit code decides (pass or fail)",
        "task.yaml disable_asciinema = True: nothing is recorded as a terminal cast",
        "solution.yaml step keys append_enter, block, min_timeout_sec: each command runs to its end, within the "
        "per-command limit",
        "docker-compose.yaml services db: a sandbox runs no other containers, so these services are absent",
        "docker-compose.yaml services.client.ports",
        "FROM ubuntu:24.04: the sandbox runs on the host's read-only system, not this image; what the image has "
        "and the host lacks is missing",
        "ARG VERSION=16: no meaning in a sandbox workspace",
        "RUN apt-get update: installs or downloads software; the host-system base is read-only and has no network",
        "RUN apt-get install -y postgresql-client python3-psycopg2: installs or downloads software; the "
        "host-system base is read-only and has no network",
        "RUN rm -rf /var/lib/apt/lists/*: touches /var/lib/apt/lists/, outside the working directory (the host "
        "system is read-only)",
        "COPY tools/loader.sh /usr/local/bin/loader: /usr/local/bin/loader is outside the working directory /app, "
        "and the host system is read-only",
        "ADD https://example.org/schema.sql: a download; the sandbox has no network",
        "USER app: no meaning in a sandbox workspace",
        "EXPOSE 8080: no meaning in a sandbox workspace",
        'CMD ["sleep", "infinity"]: no meaning in a sandbox workspace',
    ]
    row = rows(tmp_path / "out")["tb-service"]
    assert row["files"] == {"users.csv": "id,name\n1,ana\n"}
    assert row["solution"] == ['psql -h db -c "create table users (id int, name text)"',
                               'psql -h db -c "\\copy users from /workspace/users.csv csv header"']
    assert "max_test_timeout_sec" not in json.dumps(row) and "timeout-s = 3600" in (tmp_path / "out" /
                                                                                    "envhub.toml").read_text()


def test_one_task_directory_alone_is_a_bundle_of_one(tmp_path: Path) -> None:
    report = import_terminal_bench(RUNNABLE / "harbor-reward", tmp_path / "one", network=True, split="eval")
    assert report.name == "imported/harbor-reward" and [t.id for t in report.tasks] == ["harbor-reward"]
    assert "network = true" in (tmp_path / "one" / "envhub.toml").read_text()
    assert list(rows(tmp_path / "one", "eval")) == ["harbor-reward"]


# --- it runs: the references score 1.0, doing nothing less ------------------------------------


@linux_only
def test_validate_strict_check_passes_on_the_imported_bundle(imported: Path) -> None:
    result = run_envhub("validate", "--strict", "--check", "--trust", str(imported))
    assert result.code == 0, result.out + result.err
    assert "3 task(s); --check played" in result.out


@linux_only
@pytest.mark.parametrize(("task_id", "nothing"), [("tb-hello", 1 / 3), ("harbor-count", 1 / 4),
                                                  ("harbor-reward", 0.0)])
def test_references_score_one_and_doing_nothing_scores_less(imported: Path, task_id: str, nothing: float) -> None:
    with envhub.load(imported, trust_code=True) as env:
        task = env.task("test", task_id)
        scores: list[Any] = []
        for actions in (env.reference_actions(task), ["Done."]):
            with env.episode(task) as episode:
                episode.reset()
                for action in actions:
                    if episode.step(action).done:
                        break
                scores.append(episode.score)
    assert scores[0].reward == 1.0, scores[0]
    assert scores[1].reward == pytest.approx(nothing)
    if task_id == "harbor-count":  # one breakdown entry per pytest test, parameters included
        assert sorted(scores[0].breakdown) == ["test_outputs::test_count[letters.txt-3]",
                                               "test_outputs::test_count[numbers.txt-2]",
                                               "test_outputs::test_mode_kept", "test_outputs::test_sorted"]


@linux_only
def test_a_reward_file_left_by_the_agent_does_not_count(imported: Path) -> None:
    # Harbor's tests write /logs/verifier/reward.txt; in the sandbox that is a private path of
    # the verifier's own fresh sandbox, so a file the agent leaves anywhere it can write is not it.
    plant = ("mkdir -p /tmp/envhub-verifier-logs logs/verifier && echo 1 > /tmp/envhub-verifier-logs/reward.txt && "
             "echo 1 > logs/verifier/reward.txt && echo 1 > reward.txt")
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": plant})}}]}
    with envhub.load(imported, trust_code=True) as env, env.episode(env.task("test", "harbor-reward")) as episode:
        episode.reset()
        episode.step(call)
        episode.step("Done.")
        score = episode.score
        assert score is not None and score.reward == 0.0


# --- the runner that stands in for pytest -------------------------------------------------------


def test_the_pytest_stand_in_reports_each_test(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "conftest.py").write_text("import pytest\n\n@pytest.fixture\ndef base():\n    yield 10\n")
    (tmp_path / "test_it.py").write_text(
        "import pytest\n\n"
        "def test_plain():\n    assert 1 + 1 == 2\n\n"
        "def test_fails():\n    ok = False\n    assert ok\n\n"
        "@pytest.mark.parametrize('a,b', [(1, 2), (2, 3)])\ndef test_param(a, b):\n    assert b == a + 1\n\n"
        "def test_fixtures(base, tmp_path, monkeypatch):\n    monkeypatch.setenv('X', '1')\n"
        "    assert base == 10 and tmp_path.is_dir()\n\n"
        "def test_raises_and_approx():\n    with pytest.raises(ZeroDivisionError):\n        1 / 0\n"
        "    assert 0.1 + 0.2 == pytest.approx(0.3)\n\n"
        "def test_skipped():\n    pytest.skip('not here')\n\n"
        "def test_unknown_fixture(capsys):\n    pass\n\n"
        "class TestGroup:\n    def test_method(self):\n        assert True\n")
    runner = Path(import_terminal_bench.__module__.replace(".", "/")).parent / "_pytest_runner.py"
    proc = subprocess.run([sys.executable, "-I", str(Path(envhub.__file__).parent.parent / runner),
                           str(tmp_path / "test_it.py")], capture_output=True, text=True, timeout=60)
    assert proc.stdout.splitlines() == [
        "PASS test_it::test_plain", "FAIL test_it::test_fails", "PASS test_it::test_param[1-2]",
        "PASS test_it::test_param[2-3]", "PASS test_it::test_fixtures", "PASS test_it::test_raises_and_approx",
        "FAIL test_it::test_unknown_fixture", "PASS test_it::TestGroup::test_method"]
    assert proc.returncode == 1
    # Every line of the explanations is commented out, so none reads as a result.
    assert proc.stderr and all(line.startswith("# ") for line in proc.stderr.splitlines())
    assert "# test_it::test_fails" in proc.stderr and "#     assert ok" in proc.stderr


# --- bad input ----------------------------------------------------------------------------------


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_every_unreadable_task_is_named_with_its_file_and_field(tmp_path: Path) -> None:
    source = write(tmp_path / "src", {
        "bad-yaml/task.yaml": "instruction: [unclosed\n",
        "no-instruction/task.yaml": "difficulty: easy\n",
        "bad-difficulty/task.toml": '[metadata]\ndifficulty = "trivial"\n',
        "bad-difficulty/instruction.md": "Do it.\n",
        "no-instruction-md/task.toml": "[agent]\ntimeout_sec = -1\n",
        "fine/task.yaml": "instruction: Do it.\n",
        "not-a-table/task.toml": "verifier = 3\n",
        "not-a-table/instruction.md": "Do it.\n",
    })
    with pytest.raises(ImportSourceError) as caught:
        import_terminal_bench(source, tmp_path / "out")
    rendered = [p.render() for p in caught.value.problems]
    assert rendered == [
        f"{source}/bad-difficulty/task.toml: error: metadata.difficulty: difficulty 'trivial' is not easy, medium "
        "or hard\n  hint: use easy, medium or hard",
        f"{source}/bad-yaml/task.yaml:2: error: cannot read: while parsing a flow sequence\n"
        "  hint: fix the YAML syntax",
        f"{source}/no-instruction/task.yaml: error: instruction: no instruction\n"
        "  hint: give the task's instruction as 'instruction: |' followed by the text",
        f"{source}/no-instruction-md/instruction.md: error: missing: a Harbor task's instruction is instruction.md\n"
        "  hint: write the task's instruction to instruction.md",
        f"{source}/no-instruction-md/task.toml: error: agent.timeout_sec: -1 is not a positive number of seconds",
        f"{source}/not-a-table/task.toml: error: verifier: must be a table",
    ]
    assert not (tmp_path / "out").exists()  # nothing written
    assert [p.name for p in tmp_path.iterdir()] == ["src"]  # no staging left behind


def test_out_must_be_new_or_empty_and_source_must_hold_tasks(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine\n")
    with pytest.raises(UsageError, match="already exists and is not empty"):
        import_terminal_bench(RUNNABLE, tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]
    with pytest.raises(UsageError, match="holds no task directory"):
        import_terminal_bench(tmp_path / "out", tmp_path / "other")
    with pytest.raises(InvalidIdError):
        import_terminal_bench(RUNNABLE, tmp_path / "other", name="NoSlash")
    (tmp_path / "empty").mkdir()
    import_terminal_bench(RUNNABLE / "tb-hello", tmp_path / "empty")  # an empty directory is fine
    assert (tmp_path / "empty" / "envhub.toml").is_file()


def test_the_command_line(tmp_path: Path) -> None:
    result = run_envhub("import", "terminal-bench", str(RUNNABLE), str(tmp_path / "b"), "--name", "acme/tb")
    assert result.code == 0, result.err
    assert result.out == (tmp_path / "b" / "IMPORT-REPORT.md").read_text()
    assert f"Imported 3 task(s) into {tmp_path / 'b'} (acme/tb);" in result.err
    result = run_envhub("import", "terminal-bench", str(RUNNABLE), str(tmp_path / "c"), "--json")
    assert result.code == 0 and [t["id"] for t in json.loads(result.out)["tasks"]] == [
        "harbor-count", "harbor-reward", "tb-hello"]
    again = run_envhub("import", "terminal-bench", str(RUNNABLE), str(tmp_path / "b"))
    assert again.code == 2 and "Traceback" not in again.err
    assert again.err == (f"envhub: error: {tmp_path / 'b'} already exists and is not empty\n"
                         "  hint: choose a new directory, or empty this one\n")
    bad = write(tmp_path / "bad", {"t/task.yaml": "difficulty: easy\n"})
    result = run_envhub("import", "terminal-bench", str(bad), str(tmp_path / "d"))
    assert result.code == 2 and "Traceback" not in result.err
    assert f"{bad}/t/task.yaml: error: instruction: no instruction" in result.err


def test_a_binary_file_gives_every_task_a_directory(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(RUNNABLE, source)
    (source / "tb-hello" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    dockerfile = source / "tb-hello" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY logo.png /app/\n")
    report = import_terminal_bench(source, tmp_path / "out")
    out = tmp_path / "out"
    assert 'task-directory = "workspaces/{id}"' in (out / "envhub.toml").read_text()
    assert (out / "workspaces" / "tb-hello" / "logo.png").read_bytes() == b"\x89PNG\r\n\x1a\n\x00\xff"
    assert (out / "workspaces" / "harbor-reward" / ".envhub-empty").is_file()
    assert any(".envhub-empty" in d for t in report.tasks for d in t.dropped)
    assert "files" not in rows(out)["tb-hello"]
