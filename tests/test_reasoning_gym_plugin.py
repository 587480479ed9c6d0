"""The envhub-reasoning-gym plugin (plugins/envhub-reasoning-gym), as users get it:
installed (the README's set-up installs it), driven through the installed ``envhub``
command in subprocesses, and through the Python API.

It provides the task generator and the verifier kind ``reasoning-gym`` and one environment
per reasoning-gym dataset that passed its generate script's probe. reasoning-gym takes
seconds to import, so listing must not import it; the same seed must give the same task
in every process; the shipped bundles must be what the script writes; and nothing shipped
may let anyone make the held-out test tasks, whose seeds come from a key that stays with
whoever maintains the bundles.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

import envhub_reasoning_gym  # installed by the README's set-up: a missing plugin fails, never skips
from envhub import _toml
from tests.conftest import run_envhub

PLUGIN = Path(__file__).resolve().parent.parent / "plugins" / "envhub-reasoning-gym"
SCRIPT = PLUGIN / "scripts" / "generate_bundles.py"
BUNDLES = Path(envhub_reasoning_gym.__file__).parent / "bundles"
SHIPPED = sorted(p.name for p in BUNDLES.iterdir() if (p / "envhub.toml").is_file())
#: Datasets the end-to-end tests run: arithmetic, text, a grid puzzle whose metadata holds
#: tuples (scored against the regenerated entry, not the JSON row), and one made with
#: seeding "dataset" (one dataset per task: acre makes all its entries when built).
EVAL_DATASETS = ("basic_arithmetic", "spell_backward", "arc_agi", "acre")
#: The datasets the generate script is run on (modulo_grid ships its first level only:
#: reasoning-gym refuses its level 1).
SCRIPT_DATASETS = ("basic_arithmetic", "spell_backward", "arc_agi", "modulo_grid")
#: The held-out split of every bundle: 100 seeds drawn with a key from this space.
HELDOUT_SPACE = [1_000_000_050, 2**31]


def _manifest(name: str) -> dict:
    return _toml.loads((BUNDLES / name / "envhub.toml").read_text(encoding="utf-8"))


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def rg():
    """reasoning-gym's factory, imported once for the module's in-process tests."""
    import reasoning_gym.factory

    return reasoning_gym.factory


# --- listing ------------------------------------------------------------------------------------


def test_plugins_json_lists_the_generator_the_verifier_kind_and_every_environment() -> None:
    result = run_envhub("plugins", "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    [plugin] = [p for p in report["plugins"] if p["distribution"] == "envhub-reasoning-gym"]
    assert plugin["entry_point"] == "reasoning-gym = envhub_reasoning_gym"
    assert plugin["registers"]["task_generators"] == ["reasoning-gym"]
    assert plugin["registers"]["verifier_kinds"] == ["reasoning-gym"]
    ours = {e["name"]: e for e in report["environments"] if e["distribution"] == "envhub-reasoning-gym"}
    assert sorted(ours) == [f"reasoning-gym/{name}" for name in SHIPPED]
    assert {e["version"] for e in ours.values()} == {"0.1.25"}
    assert Path(ours["reasoning-gym/basic-arithmetic"]["path"]) == BUNDLES / "basic-arithmetic"
    assert not report["broken"] and not report["conflicts"]


def test_listing_environments_does_not_import_reasoning_gym() -> None:
    code = (
        "import sys\n"
        "from envhub.plugins import PluginManager\n"
        "pm = PluginManager()\n"
        "names = pm.names('environments')\n"
        "assert 'reasoning-gym/basic-arithmetic' in names, names\n"
        "assert pm.lookup('task_generators', 'reasoning-gym') is not None\n"
        "assert pm.lookup('verifier_kinds', 'reasoning-gym') is not None\n"
        "from envhub.cli import main\n"
        "try:\n"
        "    main(['plugins', '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('IMPORTED' if 'reasoning_gym' in sys.modules else 'NOT IMPORTED', file=sys.stderr)\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "NOT IMPORTED"


def test_the_hook_reports_what_every_shipped_manifest_says(rg) -> None:
    packages = {p.name: p for p in envhub_reasoning_gym.envhub_environments()}
    assert sorted(packages) == [f"reasoning-gym/{name}" for name in SHIPPED]
    for name in SHIPPED:
        manifest = _manifest(name)
        package = packages[f"reasoning-gym/{name}"]
        assert manifest["environment"]["name"] == package.name
        assert manifest["environment"]["version"] == package.version == "0.1.25"
        assert package.path == BUNDLES / name and package.distribution == "envhub-reasoning-gym"


# --- the shipped bundles ------------------------------------------------------------------------


def _skipped_in_readme() -> dict[str, str]:
    text = (PLUGIN / "README.md").read_text(encoding="utf-8")
    section = text.split("<!-- generated: skipped -->")[1].split("<!-- end: skipped -->")[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| `")]
    return {cells[1].strip().strip("`"): cells[2].strip() for cells in rows}


def _trimmed_in_readme() -> dict[str, str]:
    text = (PLUGIN / "README.md").read_text(encoding="utf-8")
    section = text.split("<!-- generated: shipped -->")[1].split("<!-- end: shipped -->")[0]
    return dict(line[3:].split("`: ", 1) for line in section.splitlines() if line.startswith("- `"))


def test_every_bundle_is_a_dataset_of_the_pinned_reasoning_gym_and_every_dataset_is_shipped_or_listed(rg) -> None:
    from envhub_reasoning_gym import _datasets

    by_env = {name.replace("_", "-"): name for name in rg.DATASETS}
    assert set(SHIPPED) <= set(by_env), set(SHIPPED) - set(by_env)
    skipped = _skipped_in_readme()
    assert set(skipped) <= set(rg.DATASETS)
    assert all(skipped.values()), "every skipped dataset needs its reason"
    assert {by_env[name] for name in SHIPPED} | set(skipped) == set(rg.DATASETS)
    assert not {by_env[name] for name in SHIPPED} & set(skipped)
    trimmed = _trimmed_in_readme()
    for name in SHIPPED:
        dataset = by_env[name]
        manifest = _manifest(name)
        levels = manifest["tasks"]["difficulty-levels"]
        assert manifest["tasks"]["generator"] == "reasoning-gym"
        # Every level of the dataset's curriculum, or (said in the README) the first ones.
        assert levels == list(range(len(levels)))
        assert len(levels) == _datasets.level_count(dataset) or (len(levels) < _datasets.level_count(dataset)
                                                                and dataset in trimmed)
        assert manifest["verifier"] == {"kind": "reasoning-gym", "dataset": dataset}
        assert manifest["config"]["params"] in ({"dataset": dataset}, {"dataset": dataset, "seeding": "dataset"})
        assert "reasoning-gym==0.1.25" in manifest["environment"]["python-dependencies"]
        assert sorted(p.relative_to(BUNDLES / name).as_posix() for p in (BUNDLES / name).rglob("*")
                      if p.is_file()) == ["README.md", "envhub.toml", "prompts/system.md"]


@pytest.fixture(scope="module")
def script_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generate script run on :data:`SCRIPT_DATASETS` with keys of its own: ``out/``
    (bundles as shipped), ``sources/`` (source bundles, key included) and ``secrets/``."""
    root = tmp_path_factory.mktemp("generated")
    done = subprocess.run([sys.executable, str(SCRIPT), "--secrets", str(root / "secrets"), "--only",
                           *SCRIPT_DATASETS, "--out", str(root / "out"), "--sources", str(root / "sources")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return root


def _key(script_run: Path, name: str) -> bytes:
    from envhub.tasks import read_secret

    return read_secret(script_run / "secrets" / name / "test.key")


_SHA256_LINE = re.compile(r'^sha256 = "([0-9a-f]{64})"$', re.M)


def test_the_generate_script_writes_the_shipped_bundles(script_run: Path) -> None:
    # Byte for byte, but for the held-out split's digest: it is of the file holding the key,
    # and the script's keys here are not the maintainer's.
    from envhub.tasks import sealed_seeds_bytes

    for dataset in SCRIPT_DATASETS:
        name = dataset.replace("_", "-")
        ours, shipped = script_run / "out" / name, BUNDLES / name
        files = sorted(p.relative_to(ours).as_posix() for p in ours.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(shipped).as_posix() for p in shipped.rglob("*") if p.is_file())
        for file in files:
            mine, theirs = (ours / file).read_text(encoding="utf-8"), (shipped / file).read_text(encoding="utf-8")
            if file == "envhub.toml":
                [digest] = _SHA256_LINE.findall(mine)
                sealed = sealed_seeds_bytes("test", 100, HELDOUT_SPACE, _key(script_run, name))
                assert digest == hashlib.sha256(sealed).hexdigest()
                [their_digest] = _SHA256_LINE.findall(theirs)
                assert their_digest != digest  # another key: the comparison below does not hide a difference
                mine, theirs = _SHA256_LINE.sub("sha256 = ...", mine), _SHA256_LINE.sub("sha256 = ...", theirs)
            assert mine == theirs, f"{name}/{file} is out of date"


def test_the_source_bundles_name_the_key_where_the_shipped_ones_record_its_digest(script_run: Path) -> None:
    for dataset in SCRIPT_DATASETS:
        name = dataset.replace("_", "-")
        source = _toml.loads((script_run / "sources" / name / "envhub.toml").read_text(encoding="utf-8"))
        shipped = _toml.loads((script_run / "out" / name / "envhub.toml").read_text(encoding="utf-8"))
        source_test, shipped_test = source["tasks"]["splits"].pop("test"), shipped["tasks"]["splits"].pop("test")
        assert source == shipped
        assert source_test.pop("secret") == "secrets/test.key" and "sha256" not in source_test
        assert len(shipped_test.pop("sha256")) == 64
        assert source_test == shipped_test
        key_file = script_run / "sources" / name / "secrets" / "test.key"
        assert key_file.read_bytes() == (script_run / "secrets" / name / "test.key").read_bytes()
        assert key_file.stat().st_mode & 0o777 == 0o600
        assert (script_run / "secrets" / name / "test.key").stat().st_mode & 0o777 == 0o600
        result = run_envhub("validate", "--strict", str(script_run / "sources" / name))
        assert result.code == 0, result.out + result.err


def test_the_generate_script_keeps_keys_out_of_the_repository(tmp_path: Path) -> None:
    inside = PLUGIN / "secrets-here"
    done = subprocess.run([sys.executable, str(SCRIPT), "--secrets", str(inside), "--only", "basic_arithmetic",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: --secrets {inside} is inside the repository {PLUGIN.parent.parent}, "
                                  "where keys can be committed or packaged; pass a directory outside it")
    assert "Traceback" not in done.stderr and not inside.exists() and not (tmp_path / "out").exists()
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "basic_arithmetic", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "the following arguments are required: --secrets" in done.stderr


def test_the_generate_script_from_the_probe_record_makes_no_key(tmp_path: Path) -> None:
    # --from-probe checks no held-out task, so it never draws a new key: a missing one is an error.
    done = subprocess.run([sys.executable, str(SCRIPT), "--secrets", str(tmp_path / "keys"), "--from-probe",
                           "--only", "basic_arithmetic", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr == (f"error: {tmp_path / 'keys' / 'basic-arithmetic' / 'test.key'}: not found: --from-probe "
                           "makes no keys (their held-out tasks would go unchecked); run the probe without "
                           "--from-probe to make one\n")
    # With a key, it writes the bundle the probing run writes (the record is the probe's).
    from envhub.tasks import sealed_seeds_bytes, write_secret

    key = bytes.fromhex(write_secret(tmp_path / "keys" / "basic-arithmetic" / "test.key"))
    done = subprocess.run([sys.executable, str(SCRIPT), "--secrets", str(tmp_path / "keys"), "--from-probe",
                           "--only", "basic_arithmetic", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ours = (tmp_path / "out" / "basic-arithmetic" / "envhub.toml").read_text(encoding="utf-8")
    theirs = (BUNDLES / "basic-arithmetic" / "envhub.toml").read_text(encoding="utf-8")
    sealed = sealed_seeds_bytes("test", 100, HELDOUT_SPACE, key)
    assert _SHA256_LINE.findall(ours) == [hashlib.sha256(sealed).hexdigest()]
    assert _SHA256_LINE.sub("", ours) == _SHA256_LINE.sub("", theirs)


# --- the held-out split -------------------------------------------------------------------------


def test_every_shipped_test_split_is_drawn_from_a_secret_outside_the_public_seeds() -> None:
    from envhub_reasoning_gym import _datasets

    digests = set()
    for name in SHIPPED:
        splits = _manifest(name)["tasks"]["splits"]
        test = splits["test"]
        assert set(test) == {"held-out", "rows", "seed-space", "sha256", "description"}, name
        assert test["held-out"] is True and test["rows"] == 100 and test["seed-space"] == HELDOUT_SPACE
        digests.add(test["sha256"])
        lo, hi = test["seed-space"]
        assert 0 <= lo < hi <= _datasets.SIZE  # seeds the generator takes
        for public in ("train", "dev"):
            start, stop = splits[public]["seeds"]
            assert stop <= lo or start >= hi, f"{name}: {public} seeds overlap the held-out seed-space"
    assert len(digests) == len(SHIPPED)  # a key per environment


def _public_files() -> list[Path]:
    """Every file the plugin publishes: the package (bundles and code), its README, the
    script and its probe record, and the guide."""
    package = Path(envhub_reasoning_gym.__file__).parent
    files = [p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    files += [p for p in PLUGIN.rglob("*") if p.is_file() and "__pycache__" not in p.parts and package not in p.parents]
    files.append(PLUGIN.parent.parent / "docs" / "guides" / "reasoning-gym.md")
    return sorted(set(files))


def _leaks(files: list[Path], needles: dict[str, str]) -> list[str]:
    """``file: what`` for every needle found in a file."""
    found = []
    for file in files:
        text = file.read_bytes().decode("utf-8", errors="replace")
        found += [f"{file}: {what}" for what, needle in needles.items() if needle in text]
    return found


#: A needle must hold at least this many bytes of information (its zlib-compressed size): an
#: answer's length alone is not enough, since a uniform grid ("9 9 9 9 9\n9 9 9 9 9\n...") or a
#: checkerboard is long and also shows up in a README's example by chance. Measured on 2,400
#: random test-space answers of these datasets: 43 of the long ones were found in the shipped
#: files, all with 16-36 bytes of information; none at 40 or more.
_DISTINCTIVE_BYTES = 40


def _distinctive(text: str) -> bool:
    return len(zlib.compress(text.encode("utf-8"), 9)) >= _DISTINCTIVE_BYTES


def _heldout_needles(script_run: Path) -> dict[str, str]:
    """What would let one make the test tasks of the script's run: the key, each seed (as
    digits, and with thousands separators, as READMEs write numbers), each prompt and each
    answer distinctive enough that finding it in a file is no coincidence, as the runtime makes
    them from the source bundle."""
    import envhub
    from envhub.tasks import heldout_seeds

    needles: dict[str, str] = {}
    for dataset in SCRIPT_DATASETS:
        name = dataset.replace("_", "-")
        key = _key(script_run, name)
        needles[f"{name} key"] = key.hex()
        env = envhub.load(script_run / "sources" / name)
        tasks = list(env.tasks("test"))
        seeds = heldout_seeds(key, "test", 100, HELDOUT_SPACE)
        assert [t.seed for t in tasks] == seeds  # the needles are the tasks the runtime plays
        # The example task a README shows (train, seed 0, level 0) is public; a test task with
        # the same text (a level with few distinct problems) is no leak.
        example = envhub_reasoning_gym.generate(seed=0, difficulty=0, params={"dataset": dataset})
        public = example["prompt"] + "\n" + example["answer"]
        for i, (task, seed) in enumerate(zip(tasks, seeds, strict=True)):
            needles[f"{name} test seed {i}"] = str(seed)
            needles[f"{name} test seed {i}, written with commas"] = f"{seed:,}"
            if len(task.prompt) >= 60 and task.prompt not in public:
                needles[f"{name} test prompt {i}"] = task.prompt
            if _distinctive(task["answer"]) and task["answer"] not in public:
                needles[f"{name} test answer {i}"] = task["answer"]
    return needles


def test_nothing_published_holds_the_test_tasks_of_a_key(script_run: Path, rg) -> None:
    needles = _heldout_needles(script_run)
    assert sum("prompt" in what for what in needles) >= 100  # arc_agi's and spell_backward's at least
    assert sum("answer" in what for what in needles) >= 30  # most of arc_agi's grids
    # The rule that drops coincidences: a uniform grid is long but says nothing; a real grid does.
    assert not _distinctive("9 9 9 9 9\n" * 6) and _distinctive(next(
        needle for what, needle in needles.items() if what.startswith("arc-agi test answer")))
    public = _public_files() + [p for p in (script_run / "out").rglob("*") if p.is_file()]
    assert len(public) > 3 * len(SHIPPED)
    assert _leaks(public, needles) == []
    # Positive control: a copy of a bundle with one held-out prompt and one seed in it is caught,
    # and so are the key files themselves.
    copy = script_run / "leaky"
    shutil.copytree(BUNDLES / "arc-agi", copy)
    prompt = next(what for what in needles if what.startswith("arc-agi test prompt"))
    with (copy / "README.md").open("a", encoding="utf-8") as f:
        f.write("\n" + needles[prompt] + "\n")
    (copy / "prompts" / "system.md").write_text(f"seed {needles['arc-agi test seed 7, written with commas']}\n")
    assert _leaks(sorted(p for p in copy.rglob("*") if p.is_file()), needles) == [f"{copy / 'README.md'}: {prompt}",
                                                        f"{copy / 'prompts' / 'system.md'}: arc-agi test seed 7, "
                                                        "written with commas"]
    assert _leaks([script_run / "sources" / "arc-agi" / "secrets" / "test.key"], needles) == [
        f"{script_run / 'sources' / 'arc-agi' / 'secrets' / 'test.key'}: arc-agi key"]


def test_the_package_declares_the_test_split_but_cannot_play_it(script_run: Path, rg) -> None:
    import envhub
    from envhub.errors import EnvNotFoundError

    result = run_envhub("eval", "reasoning-gym/basic-arithmetic", "--split", "test", "--policy", "reference")
    assert result.code == 2 and "Traceback" not in result.err
    assert result.err == ("envhub: error: reasoning-gym/basic-arithmetic: split 'test' is held out, and its seeds "
                          "are not in this copy of the bundle\n  hint: pull it with 'envhub pull --with-heldout' "
                          "(needs access to the held-out store), or have a server score it ('envhub serve')\n")
    env = envhub.load("reasoning-gym/basic-arithmetic")
    with pytest.raises(EnvNotFoundError, match="split 'test' is held out"):
        env.tasks("test")
    result = run_envhub("info", str(BUNDLES / "basic-arithmetic"))
    assert result.code == 0, result.err
    assert ("    test            100 tasks  held-out, not in this copy (its key is in the held-out store)\n"
            in result.out)
    # A positive control: the source bundle, key included, is a copy that can play it.
    result = run_envhub("info", str(script_run / "sources" / "basic-arithmetic"))
    assert result.code == 0 and "    test            100 tasks  held-out\n" in result.out, result.out + result.err


def test_the_test_split_is_played_where_its_held_out_store_was_pushed(script_run: Path, tmp_path: Path) -> None:
    # What the maintainer does: push the source bundle (key included); the registry gets the
    # shipped manifest, the held-out store the key.
    registry = f"file://{tmp_path / 'registry'}"
    source = script_run / "sources" / "basic-arithmetic"
    result = run_envhub("push", str(source), "--registry", registry)
    assert result.code == 0, result.out + result.err
    out = tmp_path / "runs.jsonl"
    result = run_envhub("eval", "reasoning-gym/basic-arithmetic", "--registry", registry, "--with-heldout",
                        "--split", "test", "--policy", "reference", "-n", "10", "-o", str(out))
    assert result.code == 0, result.out + result.err
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["reward"] for r in records] == [1.0] * 10
    # The tasks played are the key's: those the source bundle makes.
    import envhub

    made = envhub.load(source).tasks("test")
    played = {r["task_id"]: [m["content"] for m in r["messages"] if m["role"] == "user"] for r in records}
    assert played == {f"test-{i}": [made[i].prompt] for i in range(10)}
    # The registry's public manifest records the digest the script wrote into the bundle it ships.

    result = run_envhub("pull", "reasoning-gym/basic-arithmetic", "--registry", registry, "--json")
    assert result.code == 0, result.err
    pulled = Path(json.loads(result.out)["path"])
    public = _toml.loads((pulled / "envhub.toml").read_text(encoding="utf-8"))["tasks"]["splits"]["test"]
    shipped = _toml.loads((script_run / "out" / "basic-arithmetic" / "envhub.toml").read_text(encoding="utf-8"))
    assert public == shipped["tasks"]["splits"]["test"]
    assert not (pulled / "secrets").exists() and not (pulled / "heldout-seeds").exists()


def test_the_verifier_needs_no_held_out_store_and_takes_no_forged_task(script_run: Path, rg) -> None:
    # The installed environment cannot make a test task, but scores one it is given (a server
    # holding the store does this): the verifier makes the entry again from the task's seed,
    # and refuses a task whose prompt is not the one its seed makes.
    import envhub

    installed = envhub.load("reasoning-gym/basic-arithmetic")
    task = envhub.load(script_run / "sources" / "basic-arithmetic").tasks("test")[4]
    assert installed.score(task, task["reference"]).reward == 1.0
    assert installed.score(task, "<answer>-1</answer>").reward < 1.0
    forged = type(task)(task.id, task.split, {**task.data, "prompt": "What is 1 + 1?", "answer": "2"}, task.index,
                        "What is 1 + 1?", task.difficulty, task.seed)
    scored = installed.score(forged, "<answer>2</answer>")
    assert scored.reward == 0.0
    assert f"is not the task reasoning-gym's 'basic_arithmetic' makes for seed {task.seed}" in scored.error


@pytest.mark.parametrize("name", ["basic-arithmetic", "word-sorting"])
def test_shipped_bundles_validate_strictly(name: str) -> None:
    result = run_envhub("validate", "--strict", str(BUNDLES / name))
    assert result.code == 0, result.out + result.err
    assert result.out.startswith(f"valid: reasoning-gym/{name} 0.1.25 ")


def test_a_shipped_bundle_passes_validate_check() -> None:
    result = run_envhub("validate", "--strict", "--check", str(BUNDLES / "basic-arithmetic"))
    assert result.code == 0, result.out + result.err
    assert "--check played" in result.out


# --- end to end ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dataset", EVAL_DATASETS)
def test_eval_with_the_reference_policy_scores_one_and_records_the_difficulty(dataset: str, tmp_path: Path,
                                                                             rg) -> None:
    from envhub_reasoning_gym import _datasets

    name = dataset.replace("_", "-")
    out = tmp_path / "runs.jsonl"
    result = run_envhub("eval", f"reasoning-gym/{name}", "--split", "dev", "--policy", "reference", "-n", "5",
                        "-o", str(out))
    assert result.code == 0, result.out + result.err
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 5
    assert [r["reward"] for r in records] == [1.0] * 5, [r.get("error") for r in records]
    summary = json.loads(out.with_suffix(".summary.json").read_text(encoding="utf-8"))
    assert summary["mean_reward"] == 1.0
    levels = _datasets.level_count(dataset)
    start = 1_000_000_000  # the dev split's first seed
    for record in records:
        seed = int(record["task_id"].rsplit("-", 1)[1])
        assert record["task_id"] == f"{dataset}-dev-{seed}"
        assert record["difficulty"] == (seed - start) % levels
        assert (record["env"], record["version"], record["split"]) == (f"reasoning-gym/{name}", "0.1.25", "dev")


def test_the_datasets_scorer_decides_the_reward(rg) -> None:
    import envhub

    env = envhub.load("reasoning-gym/basic-arithmetic")
    task = env.tasks("dev")[3]
    assert task.difficulty == 3 and task["dataset"] == "basic_arithmetic"
    right = env.score(task, f"Let me think.\n<answer>{task['answer']}</answer>")
    assert (right.reward, right.error, right.info["answer"]) == (1.0, None, task["answer"])
    wrong = env.score(task, f"<answer>{int(task['answer']) + 1}</answer>")
    assert wrong.reward < 1.0 and wrong.error is None
    assert env.score(task, task["answer"]).reward == 0.0  # no <answer> tags: no answer
    # The last <answer> counts, as in reasoning-gym.
    assert env.score(task, f"<answer>0</answer> no: <answer>{task['answer']}</answer>").reward == 1.0
    # A text dataset's scorer too: a near miss scores below 1.
    env = envhub.load("reasoning-gym/spell-backward")
    task = env.tasks("dev")[0]
    assert env.score(task, f"<answer>{task['answer']}</answer>").reward == 1.0
    assert env.score(task, f"<answer>{task['answer']}x</answer>").reward < 1.0


def test_tasks_by_level_gives_every_level_of_the_curriculum(rg) -> None:
    import envhub

    env = envhub.load("reasoning-gym/chain-sum")
    by_level = env.tasks_by_level("train")
    assert list(by_level) == list(range(11))
    for level, tasks in by_level.items():
        task = tasks[0]
        assert task.difficulty == level == task["difficulty"]
        assert env.score(task, task["reference"]).reward == 1.0
    # Harder levels are harder: chain_sum's terms grow with the level.
    assert len(by_level[10][0].prompt) > len(by_level[0][0].prompt)


@pytest.mark.parametrize(("policy", "per_level"), [("reference", {0: 64, 1: 64, 2: 64, 3: 64, 4: 44}),
                                                   ("noop", {0: 300})], ids=["climbs", "stays"])
def test_eval_curriculum_moves_through_the_levels_by_success(policy: str, per_level: dict[int, int],
                                                            tmp_path: Path) -> None:
    # success-window, window 64, promote-at 0.8: a policy that always succeeds goes up a
    # level every 64 draws; one that never does stays at level 0.
    out = tmp_path / "runs.jsonl"
    result = run_envhub("eval", "reasoning-gym/basic-arithmetic", "--split", "train", "--curriculum", "-n", "300",
                        "--policy", policy, "-o", str(out))
    assert result.code == 0, result.out + result.err
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    counts: dict[int, int] = {}
    for record in records:
        assert record["difficulty"] == record["curriculum"]["level"]
        counts[record["difficulty"]] = counts.get(record["difficulty"], 0) + 1
    assert counts == per_level


def test_the_same_seed_gives_the_same_task_in_two_processes() -> None:
    code = (
        "import json, envhub\n"
        "rows = []\n"
        "for name in ('basic-arithmetic', 'word-sorting', 'arc-agi', 'acre'):\n"
        "    env = envhub.load('reasoning-gym/' + name)\n"
        "    for i in (0, 1, 7):\n"
        "        t = env.tasks('train')[123456 + i]\n"
        "        rows.append([t.id, t.difficulty, t.prompt, t['answer'], t['metadata']])\n"
        "import envhub_reasoning_gym as rg  # a seed drawn again:\n"
        "t = rg.generate(seed=1_000_000_103, difficulty=3, params={'dataset': 'countdown'})\n"
        "rows.append([t['id'], t['difficulty'], t['prompt'], t['answer'], t['metadata'], t['redraw']])\n"
        "print(json.dumps(rows))\n"
    )
    first, second = _python(code, {"PYTHONHASHSEED": "1"}), _python(code, {"PYTHONHASHSEED": "2"})
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert first.stdout == second.stdout
    rows = json.loads(first.stdout)
    assert [row[1] for row in rows[:3]] == [123456 % 5, 123457 % 5, 123463 % 5]


# --- the generator and the verifier in code -----------------------------------------------------


def test_the_generator_says_what_is_missing_or_wrong(rg) -> None:
    from envhub_reasoning_gym import _datasets

    with pytest.raises(ValueError, match=r"needs the dataset's name: \[config\] params = "):
        envhub_reasoning_gym.generate(seed=0, params={})
    with pytest.raises(_datasets.DatasetError, match="reasoning-gym has no dataset 'basic_arithmatic'; "
                                                     "did you mean 'basic_arithmetic'?"):
        envhub_reasoning_gym.generate(seed=0, difficulty=0, params={"dataset": "basic_arithmatic"})
    with pytest.raises(_datasets.DatasetError, match="'basic_arithmetic' has difficulty levels 0 to 4, not 5"):
        envhub_reasoning_gym.generate(seed=0, difficulty=5, params={"dataset": "basic_arithmetic"})
    with pytest.raises(ValueError, match=r"seed -1 is outside .* range \[0, 2147483648\)"):
        envhub_reasoning_gym.generate(seed=-1, difficulty=0, params={"dataset": "basic_arithmetic"})
    row = envhub_reasoning_gym.generate(seed=5, split="dev", difficulty=2, params={"dataset": "basic_arithmetic"})
    assert row["id"] == "basic_arithmetic-dev-5" and row["difficulty"] == 2
    assert row["reference"] == f"<answer>{row['answer']}</answer>"


def test_both_seedings_give_the_same_task_for_a_dataset_drawing_from_seed_plus_index(rg) -> None:
    # basic_arithmetic draws entry i from Random(seed + i): entry 0 of the dataset seeded s
    # (seeding "dataset", for the datasets that make their entries up front) is the task
    # of entry s of the dataset seeded 0 (seeding "index").
    for seed, level in ((0, 0), (77, 2), (999_999_999, 4)):
        by_index = envhub_reasoning_gym.generate(seed=seed, difficulty=level, params={"dataset": "basic_arithmetic"})
        by_dataset = envhub_reasoning_gym.generate(seed=seed, difficulty=level,
                                                   params={"dataset": "basic_arithmetic", "seeding": "dataset"})
        assert (by_index.pop("seeding"), by_dataset.pop("seeding")) == ("index", "dataset")
        # Only reasoning-gym's record of the index differs.
        assert (by_index["metadata"].pop("source_index"), by_dataset["metadata"].pop("source_index")) == (seed, 0)
        assert by_index == by_dataset


def test_a_seed_reasoning_gym_gives_up_on_is_drawn_again(rg) -> None:
    import envhub
    from envhub.runtime import Task
    from envhub_reasoning_gym import _datasets

    # countdown gives up on this seed at level 3 ("Failed to generate valid expression after
    # 100 attempts"); the generator draws it again from the seed offset by 2**32.
    with pytest.raises(ValueError, match="Failed to generate valid expression"):
        _datasets.dataset("countdown", 3)[1_000_000_103]
    row = envhub_reasoning_gym.generate(seed=1_000_000_103, split="train", difficulty=3,
                                        params={"dataset": "countdown"})
    assert (row["id"], row["difficulty"], row["redraw"]) == ("countdown-train-1000000103", 3, 1)
    assert row["prompt"] == _datasets.dataset("countdown", 3, seed=2**32)[1_000_000_103]["question"]
    # A positive control: a seed countdown makes at once is not drawn again.
    again = envhub_reasoning_gym.generate(seed=1_000_000_104, difficulty=3, params={"dataset": "countdown"})
    assert again["redraw"] == 0
    env = envhub.load("reasoning-gym/countdown")
    task = Task(row["id"], "train", row, 0, row["prompt"], 3, 1_000_000_103)
    assert env.score(task, row["reference"]).reward == 1.0


def test_the_verifier_refuses_an_unknown_dataset_and_a_task_of_another(rg) -> None:
    from envhub.runtime import Task, Trajectory
    from envhub.runtime.verifiers import VerifierError
    from envhub_reasoning_gym._verifier import Options, ReasoningGymVerifier

    with pytest.raises(VerifierError, match="reasoning-gym has no dataset 'chain-sum'; did you mean 'chain_sum'?"):
        ReasoningGymVerifier(Options(dataset="chain-sum"))
    verifier = ReasoningGymVerifier(Options(dataset="chain_sum"))
    row = envhub_reasoning_gym.generate(seed=9, difficulty=1, params={"dataset": "basic_arithmetic"})
    with pytest.raises(VerifierError, match="is from reasoning-gym dataset 'basic_arithmetic', but this verifier "
                                            "scores 'chain_sum'"):
        verifier.score(Task(row["id"], "train", row), Trajectory.of(row["reference"]))
    mine = envhub_reasoning_gym.generate(seed=9, difficulty=1, params={"dataset": "chain_sum"})
    tampered = {**mine, "prompt": mine["prompt"] + " (changed)"}
    with pytest.raises(VerifierError, match="is not the task reasoning-gym's 'chain_sum' makes for seed 9"):
        verifier.score(Task(mine["id"], "train", tampered), Trajectory.of(mine["reference"]))


# --- the distribution ---------------------------------------------------------------------------


def test_a_built_wheel_holds_the_bundles_and_the_entry_point(tmp_path: Path) -> None:
    pytest.importorskip("hatchling", reason="building the wheel needs hatchling (the dev extra has it)")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "--disable-pip-version-check", "-w", str(tmp_path), str(PLUGIN)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = tmp_path.glob("envhub_reasoning_gym-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(entry_points).decode()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        requires = [line for line in zf.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    assert "[envhub]\nreasoning-gym = envhub_reasoning_gym\n" in text
    assert "Requires-Dist: reasoning-gym==0.1.25" in requires and "Requires-Dist: envhub-rl<0.2,>=0.1.0" in requires
    assert "envhub_reasoning_gym/py.typed" in names
    for name in SHIPPED:
        for file in ("envhub.toml", "README.md", "prompts/system.md"):
            assert f"envhub_reasoning_gym/bundles/{name}/{file}" in names
