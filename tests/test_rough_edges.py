"""What a new user meets first, through the installed ``envhub`` command in a subprocess:
file modes kept, yanks seen, run files never shared, unreachable endpoints reported at once,
one cause reported once, options where a user puts them, errors that say what to do."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2
import pytest

from tests.conftest import ENVHUB, run_envhub

NAME = "acme/demo"


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _free_port() -> int:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """A fresh bundle made by ``envhub init``: two dev tasks, reference answers, no code."""
    result = run_envhub("init", NAME, str(tmp_path / "demo"))
    assert result.code == 0, result.err
    return tmp_path / "demo"


@pytest.fixture
def registry(tmp_path: Path, bundle: Path) -> Path:
    """A directory registry holding acme/demo 0.1.0."""
    pushed = run_envhub("push", str(bundle), "--registry", str(tmp_path / "registry"))
    assert pushed.code == 0, pushed.err
    return tmp_path / "registry"


# --- files keep their mode ------------------------------------------------------------------

def test_add_keeps_the_mode_of_pyproject_and_writes_the_lock_with_the_umask(tmp_path: Path, registry: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[project]\nname = "trainer"\nversion = "0"\n', encoding="utf-8")
    pyproject.chmod(0o640)
    result = run_envhub("add", NAME, "--registry", str(registry), "--no-sync", cwd=project)
    assert result.code == 0, result.err
    assert '"acme/demo>=0.1.0"' in pyproject.read_text(encoding="utf-8")
    assert _mode(pyproject) == 0o640
    assert _mode(project / "envhub.lock") == 0o666 & ~_umask()


# --- a yank reaches the cache -----------------------------------------------------------------

def test_a_cached_pin_learns_of_a_yank_and_pull_warns(registry: Path) -> None:
    first = run_envhub("pull", f"{NAME}@0.1.0", "--registry", str(registry))
    assert (first.code, first.err.startswith("Pulled acme/demo@0.1.0")) == (0, True), first.err
    yanked = run_envhub("yank", f"{NAME}@0.1.0", "--reason", "wrong answers", "--registry", str(registry))
    assert yanked.code == 0, yanked.err
    warning = "envhub: warning: acme/demo@0.1.0 is yanked: wrong answers; using it because it was pinned exactly\n"
    shown = run_envhub("info", f"{NAME}@0.1.0", "--registry", str(registry), "--json")
    assert (shown.code, shown.err) == (0, warning)
    assert (json.loads(shown.out)["yanked"], json.loads(shown.out)["yank-reason"]) == (True, "wrong answers")
    warm = run_envhub("pull", f"{NAME}@0.1.0", "--registry", str(registry), "--json")
    assert (warm.code, warm.err) == (0, warning)
    data = json.loads(warm.out)
    assert (data["cached"], data["yanked"], data["yank-reason"]) == (True, True, "wrong answers")
    # The cache now knows: offline, it says so too.
    offline = run_envhub("pull", f"{NAME}@0.1.0", "--registry", str(registry), "--offline", "--json")
    assert offline.code == 0, offline.err
    assert json.loads(offline.out)["yanked"] is True
    assert offline.err == warm.err


# --- eval's default output ------------------------------------------------------------------

def test_eval_never_takes_an_existing_default_output(tmp_path: Path, bundle: Path) -> None:
    """Another run holds the default name of this second and the next ones: this run takes
    the next free name and leaves theirs alone."""
    runs = tmp_path / "envhub-runs" / "acme--demo-0.1.0"
    runs.mkdir(parents=True)
    now = datetime.now(UTC)
    taken = [runs / f"dev.reference.{(now + timedelta(seconds=s)).strftime('%Y%m%dT%H%M%SZ')}.jsonl" for s in range(30)]
    for path in taken:
        path.write_text('{"another": "run"}\n', encoding="utf-8")
    result = run_envhub("eval", str(bundle), "-s", "dev", "--json", cwd=tmp_path)
    assert result.code == 0, result.err
    out = Path(json.loads(result.out)["output"])
    assert out.name.endswith("-2.jsonl") and out.parent == Path("envhub-runs/acme--demo-0.1.0")
    assert len((tmp_path / out).read_text(encoding="utf-8").splitlines()) == 2
    assert all(path.read_text(encoding="utf-8") == '{"another": "run"}\n' for path in taken)


def test_two_evals_at_once_write_two_files(tmp_path: Path, bundle: Path) -> None:
    procs = [subprocess.Popen([ENVHUB, "eval", str(bundle), "-s", "dev", "--json"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(json.loads(out)["output"])
    assert len(set(outputs)) == 2
    assert [len((tmp_path / o).read_text(encoding="utf-8").splitlines()) for o in outputs] == [2, 2]


# --- an endpoint that cannot be reached --------------------------------------------------------

def test_eval_against_an_unreachable_endpoint_fails_at_once_with_the_first_error(tmp_path: Path, bundle: Path) -> None:
    port = _free_port()
    out = tmp_path / "o.jsonl"
    started = time.monotonic()
    result = run_envhub("eval", str(bundle), "-s", "dev", "-p", "openai:m-1", "--base-url",
                        f"http://127.0.0.1:{port}/v1", "-o", str(out))
    assert time.monotonic() - started < 30  # retries would take a minute and more
    assert result.code == 1
    assert result.err == (
        "envhub: every rollout of this run failed (2); the first error:\n"
        f"  PolicyError: POST http://127.0.0.1:{port}/v1/chat/completions failed: cannot connect to "
        f"http://127.0.0.1:{port}/v1: All connection attempts failed\n"
        f"  (every record's 'error' field is in {out})\n")


# --- one cause, reported once -----------------------------------------------------------------

def test_check_reports_a_judge_without_endpoint_once_with_the_count(bundle: Path) -> None:
    manifest = bundle / "envhub.toml"
    text = manifest.read_text(encoding="utf-8")
    start = text.index("[verifier]")
    end = text.index("\n[", start + 1)
    port = _free_port()
    manifest.write_text(text[:start] + (
        '[verifier]\nkind = "rubric"\n\n[[verifier.criteria]]\nname = "answer"\nkind = "exact-match"\n'
        'field = "answer"\n\n[[verifier.criteria]]\nname = "quality"\nkind = "llm-judge"\nmodel = "judge-1"\n'
        f'base-url = "http://127.0.0.1:{port}/v1"\n') + text[end:], encoding="utf-8")
    result = run_envhub("validate", "--check", str(bundle))
    assert result.code == 1
    lines = [line for line in result.out.splitlines() if "the reference scores" in line]
    assert lines == [
        f"{manifest}: error: verifier: 10 tasks (train/arith-train-001, train/arith-train-002, "
        "train/arith-train-003 and 7 more): the reference scores 0, not 1.0 (VerifierError: rubric criterion "
        "'quality' failed on task 'arith-train-001': llm-judge 'judge-1': POST "
        f"http://127.0.0.1:{port}/v1/chat/completions failed: cannot connect to http://127.0.0.1:{port}/v1: "
        "[Errno 111] Connection refused"]


# --- options and errors where a user looks --------------------------------------------------------

@pytest.mark.parametrize("args", [("-q", "validate", "{b}"), ("validate", "{b}", "-q"), ("validate", "-q", "{b}")],
                         ids=["before", "after", "between"])
def test_quiet_works_before_and_after_the_subcommand(bundle: Path, args: tuple[str, ...]) -> None:
    loud = run_envhub("validate", str(bundle))
    assert (loud.code, loud.out != "") == (0, True)
    quiet = run_envhub(*(a.format(b=bundle) for a in args))
    assert (quiet.code, quiet.out, quiet.err) == (0, "", "")


def test_verbose_after_the_subcommand_counts(bundle: Path) -> None:
    before = run_envhub("-v", "validate", str(bundle))
    after = run_envhub("validate", str(bundle), "-v")
    assert (after.code, after.out, after.err) == (before.code, before.out, before.err)
    assert after.out != run_envhub("validate", str(bundle)).out


INVALID_IDS = [
    ("init", ("init", "Acme/SQL Shop"),
     "envhub: error: invalid environment id 'Acme/SQL Shop': ids are lowercase letters, digits, '.', '_' and '-'; "
     "did you mean 'acme/sql-shop'?\n"),
    ("eval-uppercase", ("eval", "Acme/X", "-s", "dev"),
     "envhub: error: 'Acme/X' is neither a bundle directory nor an environment id (invalid environment id: ids are "
     "lowercase; did you mean 'acme/x'?)\n"
     "  hint: pass a directory with an envhub.toml, or an id such as acme/sql-shop@1.0.0\n"),
    ("eval-version", ("eval", "acme/x@1.x", "-s", "dev"),
     "envhub: error: 'acme/x@1.x' is neither a bundle directory nor an environment id (invalid version '1.x': not a "
     "PEP 440 version (e.g. '1.2.0', '2.0rc1'))\n"
     "  hint: pass a directory with an envhub.toml, or an id such as acme/sql-shop@1.0.0\n"),
]


@pytest.mark.parametrize(("args", "message"), [c[1:] for c in INVALID_IDS], ids=[c[0] for c in INVALID_IDS])
def test_invalid_ids_are_named_once_with_a_valid_suggestion(tmp_path: Path, args: tuple[str, ...],
                                                            message: str) -> None:
    result = run_envhub(*args, cwd=tmp_path)
    assert (result.code, result.out, result.err) == (2, "", message)
    assert list(tmp_path.iterdir()) == []


def test_the_suggested_id_is_valid(tmp_path: Path) -> None:
    assert run_envhub("init", "acme/sql-shop", cwd=tmp_path).code == 0


JSON_ERRORS = [
    ("not-found", ("info", "acme/nothere", "--registry", "{r}", "--json"),
     {"kind": "EnvNotFoundError", "message": "acme/nothere is not in {r}",
      "hint": "publish it with 'envhub push', or search with 'envhub search'", "exit_code": 2}),
    ("bad-option", ("cache", "list", "--json", "--colour"),
     {"kind": "UsageError", "message": "No such option '--colour'.", "hint": "run 'envhub cache list --help' for usage",
      "exit_code": 2}),
    ("bad-id", ("pull", "Acme/X", "--json"),
     {"kind": "InvalidIdError", "message": "invalid environment id 'Acme/X': ids are lowercase; did you mean 'acme/x'?",
      "hint": None, "exit_code": 2}),
]


@pytest.mark.parametrize(("args", "error"), [c[1:] for c in JSON_ERRORS], ids=[c[0] for c in JSON_ERRORS])
def test_json_errors_are_json_on_stderr(tmp_path: Path, args: tuple[str, ...], error: dict[str, object]) -> None:
    registry = str(tmp_path / "registry")
    result = run_envhub(*(a.format(r=registry) for a in args))
    assert (result.code, result.out) == (2, "")
    expected = {k: v.format(r=registry) if isinstance(v, str) else v for k, v in error.items()}
    assert json.loads(result.err) == {"error": expected}


def test_cache_list_says_when_the_cache_is_empty() -> None:
    result = run_envhub("cache", "list")
    assert (result.code, result.out) == (0, "")
    assert result.err == (f"envhub: the cache ({os.environ['ENVHUB_CACHE']}) holds no bundles; "
                          "'envhub pull REF' fetches one\n")


# --- Ctrl-C on eval ---------------------------------------------------------------------------

_SLOW_POLICY = '''
import asyncio


async def act(messages):
    await asyncio.sleep(0.5)
    return "no idea"
'''


def test_ctrl_c_on_eval_says_how_to_resume_and_the_command_resumes(tmp_path: Path, bundle: Path) -> None:
    policy = tmp_path / "slow.py"
    policy.write_text(_SLOW_POLICY, encoding="utf-8")
    args = ["eval", str(bundle), "-s", "train", "-p", f"python:{policy}:act", "-c", "1"]
    proc = subprocess.Popen([ENVHUB, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    records: list[Path] = []
    while time.monotonic() < deadline and not any(p.stat().st_size for p in records):
        time.sleep(0.05)
        records = list((tmp_path / "envhub-runs").rglob("*.jsonl"))
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert len(records) == 1
    out_file = records[0].relative_to(tmp_path)
    command = shlex.join(["envhub", *args, "-o", str(out_file), "--resume"])
    assert (proc.returncode, out) == (130, "")
    assert err == (f"envhub: error: interrupted; the rollouts that finished are in {out_file}\n"
                   f"  hint: resume the run with: {command}\n")
    done = len((tmp_path / out_file).read_text(encoding="utf-8").splitlines())
    assert 1 <= done < 6
    resumed = run_envhub(*shlex.split(command)[1:], cwd=tmp_path)
    assert resumed.code == 0, resumed.err
    assert f"6 rollout(s) of 6 task(s) ({done} already done)" in resumed.out


# --- served environments ----------------------------------------------------------------------

@pytest.fixture
def server(tmp_path: Path, bundle: Path):  # type: ignore[no-untyped-def]
    pytest.importorskip("envhub_registry")
    from tests.serve_fixtures import start_server

    running = start_server([str(bundle)], tmp_path / "serve")
    yield running
    running.stop()


def test_info_takes_the_url_eval_takes(server, bundle: Path) -> None:  # type: ignore[no-untyped-def]
    url = server.url(NAME)
    result = run_envhub("info", url)
    assert result.code == 0, result.err
    local = run_envhub("info", str(bundle))
    assert result.out.splitlines()[:7] == local.out.splitlines()[:7]
    digest = json.loads(run_envhub("info", url, "--json").out)["digest"]
    assert f"  served by: {url}  (digest {digest})" in result.out.splitlines()


def test_serve_says_a_url_that_answers(server) -> None:  # type: ignore[no-untyped-def]
    detail = f"{server.base_url}/v1/environments/{NAME}"
    assert f"  {NAME}: {detail} describes it" in server.stderr().splitlines()
    response = httpx2.get(detail, timeout=10)
    assert (response.status_code, response.json()["name"]) == (200, NAME)


# --- the guides' commands -----------------------------------------------------------------------

_ROOT = Path(__file__).resolve().parent.parent
_GUIDES = [*sorted((_ROOT / "docs" / "guides").glob("*.md")), _ROOT / "docs" / "validate-in-ci.md",
           _ROOT / "docs" / "getting-started.md"]


def _pytest_commands() -> list[tuple[str, str]]:
    return [(page.name, line.strip().strip("`")) for page in _GUIDES
            for line in page.read_text(encoding="utf-8").splitlines() if "pytest example_envs/" in line
            for line in [line[line.index("pytest example_envs/"):].split("`")[0]]]


def test_the_guides_name_one_bundle_for_pytest() -> None:
    """``pytest --envhub=DIR`` from the repository root collects the whole test suite as well;
    the guides name the bundle's envhub.toml, which pytest checks alone."""
    for page in _GUIDES:
        assert "pytest --envhub=example_envs" not in page.read_text(encoding="utf-8"), page.name
    commands = _pytest_commands()
    assert {page for page, _ in commands} >= {"files-workspace.md", "python-functions.md", "shop-db.md",
                                              "word-guess.md", "math-and-shop.md", "validate-in-ci.md"}
    for page, command in commands:
        target = shlex.split(command)[1]
        assert target.endswith("/envhub.toml") and (_ROOT / target).is_file(), (page, command)


def test_a_guides_pytest_command_checks_only_that_bundle() -> None:
    command = dict(_pytest_commands())["word-guess.md"]
    proc = subprocess.run([str(Path(ENVHUB).parent / "python"), "-m", *shlex.split(command), "-p", "no:cacheprovider",
                           "-q", "--co"], cwd=_ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert collected and all(line.startswith("example_envs/word-guess/envhub.toml::") for line in collected)


def _blocks(page: Path) -> list[str]:
    """The fenced blocks of a page, without their fences."""
    parts = page.read_text(encoding="utf-8").split("```")
    return [part.split("\n", 1)[1] for part in parts[1::2]]


def test_getting_started_shows_what_validate_prints(tmp_path: Path) -> None:
    """The page's two examples, made again: two manifest typos reported together; then, in a
    valid manifest's task files, a row without its answer and a duplicate id together."""
    blocks = [b for b in _blocks(_ROOT / "docs" / "getting-started.md") if b.startswith("sql-shop/")]
    assert len(blocks) == 2
    assert run_envhub("init", "acme/sql-shop", "--protocol", "tool-use", "--state", "sqlite", cwd=tmp_path).code == 0
    clean = tmp_path / "clean"
    shutil.copytree(tmp_path / "sql-shop", clean)
    manifest = tmp_path / "sql-shop" / "envhub.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('field = "answer"', 'feild = "answer"')
                        .replace("max-turns = ", "max-turn = "), encoding="utf-8")
    typos = run_envhub("validate", "sql-shop", cwd=tmp_path)
    assert (typos.code, typos.out) == (2, blocks[0])
    shutil.rmtree(tmp_path / "sql-shop")
    shutil.copytree(clean, tmp_path / "sql-shop")
    train = tmp_path / "sql-shop" / "tasks" / "train.jsonl"
    rows = train.read_text(encoding="utf-8").splitlines()
    rows[2] = rows[2].replace("shop-train-003", "shop-train-001")
    rows[3] = rows[3].replace('"answer":', '"anwser":')
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    rows_wrong = run_envhub("validate", "sql-shop", cwd=tmp_path)
    assert (rows_wrong.code, rows_wrong.out) == (2, blocks[1])
