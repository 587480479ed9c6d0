#!/usr/bin/env python3
"""Probe reasoning-gym's datasets and write one envhub bundle for each that passes.

    python scripts/generate_bundles.py --secrets DIR    # every dataset: rewrite the shipped
                                                        # bundles, the README's lists and
                                                        # scripts/probe-results.json
    python scripts/generate_bundles.py --secrets DIR --from-probe   # the same, without probing
    python scripts/generate_bundles.py --secrets DIR --only basic_arithmetic chain_sum --out /tmp/b
    python scripts/generate_bundles.py --secrets DIR --only zebra_puzzles
                                                        # probe one again, into the package (its
                                                        # bundle, the record, the README's lists)
    python scripts/generate_bundles.py --secrets DIR --from-probe --sources /tmp/src
                                                        # also source bundles, key included,
                                                        # for 'envhub push'

Run it with the pinned reasoning-gym installed (``pip install -e plugins/envhub-reasoning-gym``).

The test split of every bundle is held out: its :data:`HELDOUT_ROWS` seeds are drawn from
:data:`HELDOUT_SPACE` with a secret 256-bit key per environment (envhub's keyed draw,
:func:`envhub.tasks.heldout_seeds`). The keys live in ``--secrets DIR``
(``DIR/<environment>/test.key``), outside the repository: the package ships the bundles,
so nothing in them may let anyone make the test tasks. A shipped manifest records the
split's ``rows``, ``seed-space`` and the ``sha256`` of its held-out seeds file (which holds
the key); the package declares the split but cannot play it. ``--sources DIR`` also writes
each bundle as a source bundle with its key, which ``envhub push`` builds into a public
archive (the shipped manifest) and a held-out archive (the key) for the held-out store.
A probing run makes a key for every dataset that has none; ``--from-probe`` never does.

For every dataset of ``reasoning_gym.factory.DATASETS`` the probe, with the network
switched off, makes tasks at every difficulty level (seeds :data:`PROBE_SEEDS`) and every
task of the dev split and of :data:`PROBE_SAMPLE` (as many public tasks as the held-out
split has, at the same levels), and checks
that each has a question and a text answer, that the reference completion
(``<answer>ANSWER</answer>``) scores 1.0 through the verifier's own code path and a wrong
answer less, that the tasks come out the same when the datasets are built again, and, in a
second process with another ``PYTHONHASHSEED``, the same across processes; and that no task
takes more than :data:`SLOW_TASK_S` to make. Datasets that fail are skipped, with the
reason, in the README. Then every held-out task (made with the key) is checked the same way;
a held-out task that fails is an error, not a reason to change the bundle, whose public
content must not depend on the key.

Each dataset is probed in a worker process with a time and memory limit, so one that hangs
or builds its whole (virtual) size up front is skipped rather than stopping the run. The
output is a function of reasoning-gym's version, this script and, for the test split's
``sha256`` only, the keys: running it again writes the same bytes
(tests/test_reasoning_gym_plugin.py checks, with keys of its own).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

PLUGIN = Path(__file__).resolve().parent.parent
BUNDLES = PLUGIN / "envhub_reasoning_gym" / "bundles"
README = PLUGIN / "README.md"
#: The probe's results, recorded by a full run and read by ``--from-probe``.
PROBE_RECORD = PLUGIN / "scripts" / "probe-results.json"
#: The checkout the plugin lives in: keys and source bundles must stay out of it.
REPOSITORY = PLUGIN.parent.parent

RG_VERSION = "0.1.25"
NAMESPACE = "reasoning-gym"
#: Seeds made at every level: the first few of train, the last of train, the first of dev,
#: and the ends of the held-out seed-space (public seeds; the held-out ones are secret).
PROBE_SEEDS = (0, 1, 2, 3, 4, 999_999_999, 1_000_000_000, 1_000_000_050, 2**31 - 1)
WRONG_ANSWER = "envhub probe: certainly not the answer"
#: A level whose tasks take longer than this to make is cut (seconds per task), and so is
#: one where a task takes over TASK_TIMEOUT_S (stopped there: some never finish).
SLOW_TASK_S = 5.0
TASK_TIMEOUT_S = 20.0
#: A worker's limits per dataset: wall time (seconds, for each of: the probe with seeding
#: "index", with "dataset", the held-out check) and address space (bytes).
PROBE_TIMEOUT_S = 600
PROBE_MEMORY = 3 * 2**30
#: The public splits every bundle has: name -> (seeds [start, stop), description).
SPLITS = {
    "train": ((0, 1_000_000_000), "For training: a billion seeds, every level in turn."),
    "dev": ((1_000_000_000, 1_000_000_050), "For model selection and quick evaluation: 50 seeds."),
}
#: The held-out split: HELDOUT_ROWS seeds drawn with the environment's secret key from
#: HELDOUT_SPACE = [lo, hi), above every public seed and below the generator's limit (2^31).
HELDOUT_SPLIT = "test"
HELDOUT_ROWS = 100
HELDOUT_SPACE = (1_000_000_050, 2**31)
HELDOUT_TEXT = ("Held out: 100 tasks whose seeds are drawn from a secret key, for final evaluation where the "
                "held-out store was pushed.")
#: Public seeds probed as the held-out split is made (task i at level i mod L), as many as
#: it has: the last train seeds. Levels on which reasoning-gym fails, or hangs, on a few
#: seeds in a hundred are cut on public evidence, not found by the held-out check.
PROBE_SAMPLE = (1_000_000_000 - HELDOUT_ROWS, 1_000_000_000)
#: Where a source bundle (--sources) keeps its key; the keys dir holds DIR/<env>/test.key.
SECRET_PATH = f"secrets/{HELDOUT_SPLIT}.key"
CURRICULUM = {"strategy": "success-window", "window": 64, "promote-at": 0.8, "demote-at": 0.3}
#: Starts each line of a worker's results on its stdout.
RESULT = "@probe "
MARKERS = {
    "shipped": ("<!-- generated: shipped -->", "<!-- end: shipped -->"),
    "skipped": ("<!-- generated: skipped -->", "<!-- end: skipped -->"),
}


# --- the probe (in a worker process) ---------------------------------------------------------


def _switch_off_network() -> None:
    import socket

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the network is switched off while probing (envhub bundles must work offline)")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.getaddrinfo = refuse
    socket.create_connection = refuse


def _digest(rows: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def _params(name: str, seeding: str) -> dict[str, str]:
    return {"dataset": name} if seeding == "index" else {"dataset": name, "seeding": seeding}


def _tasks(name: str, levels: int, seeding: str) -> list[dict[str, Any]]:
    from envhub_reasoning_gym import _datasets

    return [_datasets.generate(seed, "probe", level, _params(name, seeding))
            for level in range(levels) for seed in PROBE_SEEDS]


def _level_seeds(level: int, levels: int) -> list[int]:
    """The seeds probed at ``level`` of ``levels``: :data:`PROBE_SEEDS`, and every seed of
    the dev split and of :data:`PROBE_SAMPLE` whose task is at that level (task i of a
    split is at level i mod levels)."""
    seeds = list(PROBE_SEEDS)
    for start, stop in (SPLITS["dev"][0], PROBE_SAMPLE):
        seeds += [seed for seed in range(start + level, stop, levels) if seed not in seeds]
    return seeds


class _TaskTimeout(TimeoutError):
    """One task took longer than :data:`TASK_TIMEOUT_S` (the generator lets TimeoutError through)."""


_in_task = False


def _on_alarm(signum: int, frame: Any) -> None:
    if _in_task:
        raise _TaskTimeout()
    raise TimeoutError(f"probing took over {PROBE_TIMEOUT_S} s")


def _timed(make: Any, limit: float) -> Any:
    """``make()``, raising :class:`_TaskTimeout` after ``limit`` seconds; the dataset's own
    limit (an alarm) keeps running meanwhile."""
    import signal

    global _in_task
    outer = signal.alarm(0)
    started = time.monotonic()
    _in_task = True
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        return make()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _in_task = False
        if outer:
            signal.alarm(max(1, outer - int(time.monotonic() - started)))


def _check_row(name: str, row: dict[str, Any], where: str | None = None) -> str | None:
    """What is wrong with the task ``row`` as users get it, or None; ``where`` names the
    task in the message (default: its seed)."""
    from envhub_reasoning_gym import _datasets

    row = json.loads(json.dumps(row))  # as a record, or a server's client, carries it
    where = where or f"seed {row['seed']}"
    if not isinstance(row["prompt"], str) or not row["prompt"].strip():
        return f"the task of {where} has no question"
    reward, info = _datasets.score(name, row["reference"], row)
    if reward != 1.0:
        error = f": {info['scorer-error']}" if "scorer-error" in info else ""
        return f"its own answer scores {reward:g}, not 1, written as <answer>...</answer> ({where}){error}"
    wrong, _ = _datasets.score(name, _datasets.reference(WRONG_ANSWER), row)
    if wrong >= 1.0:
        return f"its scorer gives a wrong answer {wrong:g} ({where})"
    return None


def _check_level(name: str, seeding: str, level: int, levels: int, *,
                 check: bool) -> tuple[list[dict[str, Any]], str | None]:
    """The probe's tasks at ``level``, and the first problem with them (None: none)."""
    from envhub_reasoning_gym import _datasets

    rows: list[dict[str, Any]] = []
    slowest = 0.0
    for i, seed in enumerate(_level_seeds(level, levels)):
        started = time.perf_counter()
        try:
            row = _timed(functools.partial(_datasets.generate, seed, "probe", level, _params(name, seeding)),
                         TASK_TIMEOUT_S)
        except _TaskTimeout:
            return rows, f"too slow: a task took over {TASK_TIMEOUT_S:.0f} s to make (seed {seed})"
        except TimeoutError:
            raise
        except Exception as e:
            return rows, f"reasoning-gym fails to make the task of seed {seed}: {_reason(e).removeprefix('fails: ')}"
        if i:  # the first one builds the dataset
            slowest = max(slowest, time.perf_counter() - started)
        rows.append(row)
        problem = _check_row(name, row) if check else None
        if problem:
            return rows, problem
    if slowest > SLOW_TASK_S:
        return rows, f"too slow: a task took {slowest:.0f} s to make (the limit is {SLOW_TASK_S:.0f} s)"
    return rows, None


def heldout_seeds(key: bytes) -> list[int]:
    """The held-out split's seeds for an environment's ``key``: envhub's keyed draw."""
    from envhub.tasks import heldout_seeds as draw

    return draw(key, HELDOUT_SPLIT, HELDOUT_ROWS, HELDOUT_SPACE)


def check_heldout(name: str, seeding: str, levels: int, seeds: list[int], *, check: bool) -> dict[str, Any]:
    """Make every held-out task (task i from ``seeds[i]`` at level i mod ``levels``) and,
    with ``check``, check each as the probe checks the public ones: the ``digest`` of the
    tasks and the first ``problem`` (None: none). Messages name a task by its index, never
    its seed: they are printed."""
    from envhub_reasoning_gym import _datasets

    rows: list[dict[str, Any]] = []
    problem = None
    try:
        for i, seed in enumerate(seeds):
            where = f"held-out task {i}, level {i % levels}"
            try:
                row = _timed(functools.partial(_datasets.generate, seed, HELDOUT_SPLIT, i % levels,
                                               _params(name, seeding)), TASK_TIMEOUT_S)
            except _TaskTimeout:
                problem = f"too slow: {where} took over {TASK_TIMEOUT_S:.0f} s to make"
                break
            rows.append(row)
            problem = _check_row(name, row, where) if check else None
            if problem:
                break
    except TimeoutError:
        problem = f"too slow: checking the held-out tasks took over {PROBE_TIMEOUT_S} s"
    except (Exception, MemoryError) as e:
        reason = _reason(e).removeprefix("fails: ")
        for seed in seeds:
            reason = reason.replace(str(seed), "<seed>")
        problem = f"reasoning-gym fails to make {where}: {reason}"
    finally:
        _datasets.forget()
    return {"digest": _digest(rows), "problem": problem}


def _curriculum(name: str, levels: int) -> dict[str, Any]:
    """What changes with the level: the configuration fields that differ between levels,
    each with its value at every level, and the curriculum attributes' descriptions."""
    import dataclasses

    import reasoning_gym.factory as factory

    from envhub_reasoning_gym import _datasets

    if not factory.has_curriculum(name):
        return {"fields": {}, "attributes": {}}
    configs = [dataclasses.asdict(_datasets.dataset(name, level, size=1).config) for level in range(levels)]
    fields = {key: [json.dumps(config[key], default=str) for config in configs]
              for key in configs[0] if key not in ("seed", "size")}
    attributes = factory.create_curriculum(name).attributes
    return {"fields": {key: values for key, values in fields.items() if len(set(values)) > 1},
            "attributes": {key: getattr(a, "description", "") or "" for key, a in attributes.items()}}


def _about(name: str) -> dict[str, Any]:
    import reasoning_gym.factory as factory

    cls = factory.DATASETS[name][0]
    doc = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
    parts = cls.__module__.split(".")
    return {"category": parts[1] if len(parts) >= 3 else "other", "doc": doc}


def _reason(e: BaseException) -> str:
    from envhub_reasoning_gym._datasets import DatasetError

    if isinstance(e, DatasetError) and e.__cause__ is not None:  # every draw failed: say why
        e = e.__cause__
    if isinstance(e, MemoryError):
        return f"needs more than {PROBE_MEMORY // 2**30} GiB of memory"
    if isinstance(e, TimeoutError):
        return f"too slow: probing it took over {PROBE_TIMEOUT_S} s"
    message = " ".join(str(e).split())
    message = message if len(message) <= 200 else message[:197] + "..."
    return f"fails: {type(e).__name__}: {message}" if message else f"fails: {type(e).__name__}"


def probe(name: str, seeding: str, *, digest_only: bool = False, levels: int | None = None) -> dict[str, Any]:
    """What the parent needs to know about dataset ``name`` made with ``seeding``: ``ok``
    and the ``reason`` when not; ``levels``, the levels shipped of the curriculum's
    ``curriculum_levels`` (the first ones: a level with a problem is cut with the levels
    above it, said in ``trimmed``); the ``digest`` of the probe's tasks; and (unless
    ``digest_only``) what the bundle's manifest and README say about it. With ``levels``
    given, exactly those are made and checked, and nothing is cut."""
    from envhub_reasoning_gym import _datasets

    result: dict[str, Any] = {"name": name, "seeding": seeding, "ok": False, "trimmed": None}
    try:
        result["curriculum_levels"] = _datasets.level_count(name)
        fixed = levels is not None
        levels = levels if levels is not None else result["curriculum_levels"]
        started = time.perf_counter()
        while True:  # cutting levels moves the dev and sample tasks to other levels: check again
            rows: list[dict[str, Any]] = []
            problem = None
            for level in range(levels):
                made, problem = _check_level(name, seeding, level, levels, check=not digest_only)
                if problem:
                    break
                rows += made
            if problem is None:
                break
            if level == 0 or fixed:
                result["reason"] = f"level {level}: {problem}"
                return result
            result["trimmed"] = f"level {level}: {problem}"
            levels = level
        result.update(levels=levels, digest=_digest(rows), seconds=round(time.perf_counter() - started, 2))
        if digest_only:
            result["ok"] = True
            return result
        _datasets.forget()
        if _digest(_tasks(name, levels, seeding)) != _digest([row for row in rows if row["seed"] in PROBE_SEEDS]):
            result["reason"] = "not deterministic: the same seeds give other tasks when the dataset is built again"
            return result
        result.update(_about(name), curriculum=_curriculum(name, levels), ok=True,
                      example=next(row for row in rows if row["difficulty"] == 0 and row["seed"] == 0))
    except (Exception, MemoryError) as e:  # a dataset that cannot be made is skipped, with the reason
        result["reason"] = _reason(e)
    finally:
        _datasets.forget()  # free its memory before the next dataset
    return result


def worker(items: list[str], digest_only: bool, secrets: Path | None) -> None:
    """Probe each ``NAME`` (first with seeding "index", then, if that fails, "dataset"), or
    ``NAME=SEEDING@LEVELS``, in turn: one result line each on stdout, each try within the
    limits. With ``secrets`` (the keys' directory), a dataset that passes has its held-out
    tasks made and checked too (``heldout`` in its result: their digest, and a problem)."""
    import resource
    import signal
    import warnings

    warnings.simplefilter("ignore")
    # Some datasets print; the results go to the real stdout, everything else to stderr.
    results = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _switch_off_network()
    resource.setrlimit(resource.RLIMIT_AS, (PROBE_MEMORY, PROBE_MEMORY))
    sys.path.insert(0, str(PLUGIN))  # the plugin's code, installed or not
    import reasoning_gym  # noqa: F401  (imported once, outside the time limits)

    def limited(name: str, seeding: str, levels: int | None = None) -> dict[str, Any]:
        signal.alarm(PROBE_TIMEOUT_S)
        try:
            return probe(name, seeding, digest_only=digest_only, levels=levels)
        except (TimeoutError, MemoryError) as e:  # raised outside probe's own handler
            return {"name": name, "seeding": seeding, "ok": False, "reason": _reason(e)}
        finally:
            signal.alarm(0)

    def limited_heldout(result: dict[str, Any]) -> dict[str, Any]:
        seeds = heldout_seeds(_read_key(secrets / env_name(result["name"]) / "test.key"))  # type: ignore[operator]
        signal.alarm(PROBE_TIMEOUT_S)
        try:
            return check_heldout(result["name"], result["seeding"], result["levels"], seeds, check=not digest_only)
        finally:
            signal.alarm(0)

    signal.signal(signal.SIGALRM, _on_alarm)
    for item in items:
        name, _, rest = item.partition("=")
        seeding, _, levels = rest.partition("@")
        print(RESULT + json.dumps({"start": name}), file=results, flush=True)
        result = limited(name, seeding or "index", int(levels) if levels else None)
        if not result["ok"] and not seeding:
            # Datasets that make every entry up front, or cap their size, work one entry per
            # dataset seeded with the task's seed.
            again = limited(name, "dataset")
            if again["ok"] or again["reason"] != result["reason"]:
                again.setdefault("reason", None)
                if not again["ok"]:
                    again["reason"] = f"{result['reason']}; with seeding = \"dataset\": {again['reason']}"
                result = again
        if result["ok"] and secrets is not None:
            result["heldout"] = limited_heldout(result)
        print(RESULT + json.dumps(result, default=str), file=results, flush=True)


# --- running the workers (parent) -------------------------------------------------------------


def run_workers(items: list[str], *, hash_seed: int, digest_only: bool, secrets: Path, log: Any
                ) -> dict[str, dict[str, Any]]:
    """Each dataset's probe result, from worker processes (a new one after a crash)."""
    results: dict[str, dict[str, Any]] = {}
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    remaining = list(items)
    crashed: dict[str, str] = {}  # an item retried after a crash -> the crash
    while remaining:
        cmd = [sys.executable, __file__, "--worker", "--secrets", str(secrets),
               *(["--digest-only"] if digest_only else []), *remaining]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        lines: queue.Queue[str | None] = queue.Queue()
        stderr: list[str] = []

        def read_stdout(stream: Any = proc.stdout, into: queue.Queue[str | None] = lines) -> None:
            for line in stream:
                into.put(line)
            into.put(None)  # the worker is gone

        def read_stderr(stream: Any = proc.stderr, into: list[str] = stderr) -> None:
            into.extend(stream)

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=read_stderr, daemon=True).start()
        current = None
        while True:
            try:
                line = lines.get(timeout=3 * PROBE_TIMEOUT_S + 120)
            except queue.Empty:  # stuck where the alarm cannot reach (in C code)
                proc.kill()
                line = None
                stderr.append(f"no answer for {3 * PROBE_TIMEOUT_S + 120} s")
            if line is None:
                break
            if not line.startswith(RESULT):
                continue
            message = json.loads(line[len(RESULT):])
            if "start" in message:
                current = message["start"]
                continue
            for item in [item for item in remaining if item.partition("=")[0] == message["name"]]:
                if item in crashed and not message["ok"]:
                    message["reason"] = f"{crashed[item]}; with seeding = \"dataset\": {message['reason']}"
                remaining.remove(item)
            results[message["name"]] = message
            current = None
            state = "ok  " if message["ok"] else "skip"
            log(f"[{hash_seed}] {state} {message['name']}" + ("" if message["ok"] else f": {message['reason']}"))
        proc.wait()
        if current is not None:  # the worker died on this dataset: skip it, go on with the rest
            tail = "".join(stderr).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            reason = f"crashes the process that makes it ({tail[0][:200]})"
            [item] = [item for item in remaining if item.partition("=")[0] == current]
            if item in crashed:  # it crashed with seeding "dataset" too
                reason = f"{crashed[item]}; with seeding = \"dataset\": {reason}"
            elif not digest_only and "=" not in item:  # try one entry per dataset next
                crashed[f"{current}=dataset"] = reason
                remaining[remaining.index(item)] = f"{current}=dataset"
                log(f"[{hash_seed}] {current}: {reason}; trying seeding = \"dataset\"")
                continue
            results[current] = {"name": current, "ok": False, "reason": reason}
            remaining.remove(item)
            log(f"[{hash_seed}] skip {current}: {reason}")
        elif remaining:
            raise RuntimeError(f"the probe worker stopped (exit {proc.returncode}):\n{''.join(stderr)[-2000:]}")
    return results


# --- writing the bundles ----------------------------------------------------------------------


def env_name(dataset: str) -> str:
    """The environment's name in the ``reasoning-gym`` namespace: ``basic_arithmetic`` ->
    ``basic-arithmetic``."""
    name = dataset.replace("_", "-").lower()
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
        raise ValueError(f"reasoning-gym dataset {dataset!r} gives no valid environment name ({name!r})")
    return name


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML's
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {type(value).__name__}")


def _sentence(doc: str) -> str:
    doc = doc.strip().rstrip(".")
    return doc[0].upper() + doc[1:] if doc else ""


def description(info: dict[str, Any]) -> str:
    about = _sentence(info["doc"]) or f"Tasks of reasoning-gym's {info['name']} dataset"
    return (f"{about}. reasoning-gym's {info['name']} dataset ({info['category']}), {info['levels']} difficulty "
            f"level{'s' if info['levels'] != 1 else ''}; answers in <answer> tags, scored by the dataset's own scorer.")


def canary(name: str) -> str:
    # Stable across runs (the bundles are generated), unique per environment and version.
    return "envhub-canary:" + hashlib.sha256(f"{NAMESPACE}/{name}@{RG_VERSION}".encode()).hexdigest()[:32]


def manifest(info: dict[str, Any], *, sealed_sha256: str | None = None) -> str:
    """The bundle's ``envhub.toml``: as shipped, the held-out split recorded by the
    ``sealed_sha256`` of its seeds file; without it, the source bundle's, naming its key
    file (:data:`SECRET_PATH`)."""
    dataset, name, levels = info["name"], env_name(info["name"]), info["levels"]
    tags = ["reasoning-gym", info["category"], "procedural", "single-turn"] + (["curriculum"] if levels > 1 else [])
    lines = [
        f"# {NAMESPACE}/{name}: reasoning-gym's {dataset} dataset as an envhub environment.",
        "# Written by plugins/envhub-reasoning-gym/scripts/generate_bundles.py; edit that, not this.",
        "",
        "[environment]",
        f"name = {_toml(f'{NAMESPACE}/{name}')}",
        f"version = {_toml(RG_VERSION)}   # the reasoning-gym release the tasks come from",
        "score-version = 1",
        f"description = {_toml(description(info))}",
        'license = "Apache-2.0"           # reasoning-gym\'s license',
        'authors = ["reasoning-gym authors (open-thought)", "envhub developers"]',
        f"tags = {_toml(list(dict.fromkeys(tags)))}",
        f"python-dependencies = {_toml(['envhub-reasoning-gym', f'reasoning-gym=={RG_VERSION}'])}",
        f"canary = {_toml(canary(name))}",
        "",
        "[tasks]",
        'format = "generator"',
        'generator = "reasoning-gym"      # the envhub-reasoning-gym plugin\'s',
        'difficulty-field = "difficulty"',
        f"difficulty-levels = {_toml(list(range(levels)))}" + (
            "   # no curriculum: one level" if info["curriculum_levels"] == 1
            else f"   # the first {levels} of reasoning-gym's {info['curriculum_levels']} curriculum levels"
            if info["trimmed"] else "   # reasoning-gym's curriculum levels, easiest first"),
    ]
    for split, ((start, stop), text) in SPLITS.items():
        lines += ["", f"[tasks.splits.{split}]", f"seeds = {_toml([start, stop])}", f"description = {_toml(text)}"]
    lines += ["", f"[tasks.splits.{HELDOUT_SPLIT}]   # seeds drawn from seed-space with a key that does not ship",
              "held-out = true", f"rows = {HELDOUT_ROWS}", f"seed-space = {_toml(list(HELDOUT_SPACE))}",
              f"sha256 = {_toml(sealed_sha256)}" if sealed_sha256 else f"secret = {_toml(SECRET_PATH)}",
              f"description = {_toml(HELDOUT_TEXT)}"]
    lines += [
        "",
        "[harness]",
        'protocol = "single-turn"',
        'system-prompt = "prompts/system.md"   # asks for the answer in <answer>...</answer>',
        "",
        "[verifier]",
        'kind = "reasoning-gym"           # the dataset\'s own score_answer',
        f"dataset = {_toml(dataset)}",
        "",
        "[config]",
        f"params = {_toml(_params(dataset, info['seeding']))}"
        + ("   # one dataset per task, seeded with the task's seed" if info["seeding"] == "dataset" else ""),
    ]
    if levels > 1:
        lines.append(f"curriculum = {_toml(CURRICULUM)}")
    return "\n".join(lines) + "\n"


def _fence(text: str) -> str:
    ticks = "`" * max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    return f"{ticks}\n{text}\n{ticks}"


def _cell(value: str) -> str:
    value = value if len(value) <= 40 else value[:37] + "..."
    return "`" + value.replace("|", "\\|").replace("`", "'") + "`"


def readme(info: dict[str, Any]) -> str:
    dataset, name, levels = info["name"], env_name(info["name"]), info["levels"]
    example = info["example"]
    out = [
        f"# {NAMESPACE}/{name}",
        "",
        f"{_sentence(info['doc']) + '.' if info['doc'] else ''} Tasks of [reasoning-gym]"
        f"(https://github.com/open-thought/reasoning-gym)'s `{dataset}` dataset (reasoning-gym {RG_VERSION}, "
        f"{info['category']}), made on demand from seeds by the `reasoning-gym` task generator of "
        "`envhub-reasoning-gym`, and scored by the dataset's own `score_answer`.".strip(),
        "",
        "Written by `plugins/envhub-reasoning-gym/scripts/generate_bundles.py`; see the plugin's README.",
        "",
        "```",
        "pip install envhub-reasoning-gym",
        f"envhub eval {NAMESPACE}/{name} --split dev --policy reference",
        "```",
        "",
        "## The five parts",
        "",
        "| part | here |",
        "|---|---|",
        f"| tasks | generated: `generator = \"reasoning-gym\"`, `params = {_toml(_params(dataset, info['seeding']))}`; "
        f"{levels} difficulty level{'s' if levels != 1 else ''} |",
        "| harness | `single-turn`, system prompt `prompts/system.md` (answer inside `<answer>...</answer>`) |",
        f"| verifier | `reasoning-gym`: the `{dataset}` dataset's `score_answer` on the text of the last `<answer>` |",
        "| state | none |",
        "| config | " + ("a `success-window` curriculum over the levels |" if levels > 1
                         else "no curriculum (one level) |"),
        "",
        "## Splits",
        "",
        "| split | seeds | |",
        "|---|---|---|",
    ]
    for split, ((start, stop), text) in SPLITS.items():
        out.append(f"| {split} | [{start:,}, {stop:,}) | {text} |")
    lo, hi = HELDOUT_SPACE
    out += [
        f"| {HELDOUT_SPLIT} | {HELDOUT_ROWS} drawn from [{lo:,}, {hi:,}) with a secret key | {HELDOUT_TEXT} "
        "(`held-out = true`) |",
        "",
        f"Task *i* of a split is made at level *i* mod {levels} (seed start + *i* for train and dev), so every "
        "split cycles through the levels; a curriculum asks for tasks at one level.",
        "",
        f"The {HELDOUT_SPLIT} split is held out: its seeds are drawn with a key that is not in this package, "
        "so the package declares the split but cannot make its tasks. It is played where the environment was "
        "pushed with its held-out store (`envhub pull --with-heldout`, or a server scoring it); see the plugin's "
        "README.",
        "",
        "## Difficulty levels",
        "",
    ]
    fields = info["curriculum"]["fields"]
    if fields:
        out += [
            f"Level *d* is reasoning-gym's curriculum for `{dataset}` at global level *d*: `set_global_level(d)`, "
            "then `generate_configuration()` (each attribute at level *d*, or at its last level if it has fewer; "
            "a range attribute spans its levels 0 to *d*, reasoning-gym's default). The configuration "
            "fields that change with the level:",
            "",
            "| field | " + " | ".join(f"level {d}" for d in range(levels)) + " |",
            "|---|" + "---|" * levels,
        ]
        for field, values in fields.items():
            out.append(f"| `{field}` | " + " | ".join(_cell(v) for v in values) + " |")
        described = {k: v for k, v in info["curriculum"]["attributes"].items() if v}
        if described:
            out += ["", "The curriculum's attributes:", ""] + [f"- `{k}`: {v}" for k, v in described.items()]
    elif info["curriculum_levels"] == 1:
        out.append(f"`{dataset}` has no curriculum: one level (0), reasoning-gym's default configuration.")
    elif levels > 1:
        out.append(f"{levels} levels of reasoning-gym's curriculum for `{dataset}`.")
    if info["trimmed"]:
        out += ["", f"Only the first {levels} of the curriculum's {info['curriculum_levels']} levels ship: "
                    f"{info['trimmed']}, so it and the levels above are left out."]
    if info["seeding"] == "dataset":
        out += ["", f"`seeding = \"dataset\"`: `{dataset}` makes its entries when it is built (or caps its size), so "
                    "each task is entry 0 of a dataset built for it with the task's seed, not an index into one "
                    "dataset."]
    out += [
        "",
        "## A task (train, seed 0, level 0)",
        "",
        _fence(example["prompt"]),
        "",
        "Answer (the `reference` completion wraps it in `<answer>` tags):",
        "",
        _fence(example["answer"]),
        "",
        "## Canary",
        "",
        f"The manifest carries the canary `{canary(name)}`.",
        "",
        "## License",
        "",
        "Apache-2.0, as reasoning-gym.",
    ]
    return "\n".join(out) + "\n"


def system_prompt() -> str:
    from reasoning_gym.utils import SYSTEM_PROMPTS

    prompt: str = SYSTEM_PROMPTS["default"]
    return prompt.strip() + "\n"


def write_bundle(info: dict[str, Any], out: Path, prompt: str, key: bytes, *, source: bool = False) -> Path:
    """Write the bundle of dataset ``info`` into ``out/<environment>``: as shipped (the
    held-out split recorded by the digest of its seeds file, which holds ``key``), or,
    with ``source``, as a source bundle holding ``key`` in :data:`SECRET_PATH`."""
    from envhub.tasks import sealed_seeds_bytes

    root = out / env_name(info["name"])
    if root.exists():
        shutil.rmtree(root)
    (root / "prompts").mkdir(parents=True)
    sealed = hashlib.sha256(sealed_seeds_bytes(HELDOUT_SPLIT, HELDOUT_ROWS, HELDOUT_SPACE, key)).hexdigest()
    (root / "envhub.toml").write_text(manifest(info, sealed_sha256=None if source else sealed), encoding="utf-8")
    (root / "README.md").write_text(readme(info), encoding="utf-8")
    (root / "prompts" / "system.md").write_text(prompt, encoding="utf-8")
    if source:
        (root / SECRET_PATH).parent.mkdir(mode=0o700)
        fd = os.open(root / SECRET_PATH, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(key.hex() + "\n")
    return root


def _replace_between(text: str, markers: tuple[str, str], body: str) -> str:
    start, end = markers
    before, found, rest = text.partition(start)
    if not found or end not in rest:
        raise ValueError(f"{README} lacks the markers {start} ... {end}")
    return f"{before}{start}\n{body}{end}{rest.partition(end)[2]}"


def update_readme(results: dict[str, dict[str, Any]]) -> None:
    shipped = sorted((r for r in results.values() if r["ok"]), key=lambda r: r["name"])
    skipped = sorted((r for r in results.values() if not r["ok"]), key=lambda r: r["name"])
    shipped_md = [f"{len(shipped)} environments, one per dataset that passed the probe:", "",
                  "| environment | dataset | category | levels |", "|---|---|---|---|"]
    for r in shipped:
        levels = f"{r['levels']} of {r['curriculum_levels']}*" if r["trimmed"] else str(r["levels"])
        seeding = " (seeding = \"dataset\")" if r["seeding"] == "dataset" else ""
        shipped_md.append(f"| `{NAMESPACE}/{env_name(r['name'])}` | `{r['name']}`{seeding} | {r['category']} "
                          f"| {levels} |")
    trimmed = [r for r in shipped if r["trimmed"]]
    if trimmed:
        shipped_md += ["", "\\* Only the first levels ship: at the next one reasoning-gym fails to make a task "
                           "(often its curriculum configures the dataset with values the dataset refuses), or makes "
                           "them too slowly:", ""]
        shipped_md += [f"- `{r['name']}`: {r['trimmed']}" for r in trimmed]
    skipped_md = [f"{len(skipped)} datasets are skipped:", "", "| dataset | why |", "|---|---|"]
    skipped_md += [f"| `{r['name']}` | {r['reason'].replace('|', '/')} |" for r in skipped]
    text = README.read_text(encoding="utf-8")
    text = _replace_between(text, MARKERS["shipped"], "\n".join(shipped_md) + "\n")
    text = _replace_between(text, MARKERS["skipped"], "\n".join(skipped_md) + "\n")
    README.write_text(text, encoding="utf-8")


class _KeyError(Exception):
    """A key that is missing or unreadable: the message says which file and what to do."""


def _key_path(secrets: Path, name: str) -> Path:
    return secrets / env_name(name) / "test.key"


def _read_key(path: Path) -> bytes:
    from envhub.tasks import SecretError, read_secret

    try:
        return read_secret(path)
    except SecretError as e:
        raise _KeyError(f"{path}: {e}") from e


def _inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _recorded(path: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """The probe results recorded in ``path`` for ``names`` (none: all of them);
    :class:`ValueError` saying what is missing."""
    try:
        recorded = {r["name"]: r for r in json.loads(path.read_text(encoding="utf-8"))["results"]}
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file; a full run (without --from-probe, --only and --out) records it")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a probe record ({type(e).__name__}: {e}); run the probe again") from e
    missing = [name for name in names if name not in recorded]
    if missing:
        raise ValueError(f"{path} has no result for {', '.join(missing)}; probe them (without --from-probe)")
    return {name: recorded[name] for name in names or sorted(recorded)}


def _record(results: dict[str, dict[str, Any]]) -> None:
    # Everything public the bundles and the README lists are written from; not the
    # held-out check (nothing about the held-out tasks is kept) nor the machine's timings.
    kept = [{k: v for k, v in r.items() if k not in ("heldout", "seconds")}
            for _, r in sorted(results.items())]
    PROBE_RECORD.write_text(json.dumps({"reasoning-gym": RG_VERSION, "results": kept}, indent=1, sort_keys=True,
                                       ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--secrets", type=Path, required=True, metavar="DIR",
                        help="the held-out keys, outside the repository: DIR/<environment>/test.key "
                             "(a probing run makes those missing)")
    parser.add_argument("--out", type=Path, help="write the bundles here (default: the package's bundles/, "
                                                  "which also rewrites the README's lists and removes stale bundles)")
    parser.add_argument("--only", nargs="+", metavar="DATASET", help="probe and write these datasets only")
    parser.add_argument("--from-probe", nargs="?", type=Path, const=PROBE_RECORD, metavar="FILE",
                        help=f"write from the recorded probe results (default {PROBE_RECORD.name}), probing nothing")
    parser.add_argument("--sources", type=Path, metavar="DIR",
                        help="also write each bundle as a source bundle holding its key, for 'envhub push' "
                             "(outside the repository)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--digest-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("names", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.names, args.digest_only, args.secrets)
        return 0

    def fail(message: str, code: int = 1) -> int:
        print(f"error: {message}", file=sys.stderr)
        return code

    for option, path in (("--secrets", args.secrets), ("--sources", args.sources)):
        if path is not None and _inside(path, REPOSITORY):
            return fail(f"{option} {path} is inside the repository {REPOSITORY}, where keys can be committed or "
                        f"packaged; pass a directory outside it (for example ~/.config/envhub-reasoning-gym/"
                        f"{'secrets' if option == '--secrets' else 'sources'})", 2)

    from importlib.metadata import version

    import reasoning_gym.factory

    if version("reasoning-gym") != RG_VERSION:
        return fail(f"reasoning-gym {version('reasoning-gym')} is installed; the bundles are for {RG_VERSION}")
    every = sorted(reasoning_gym.factory.DATASETS)
    names = sorted(args.only) if args.only else every
    unknown = sorted(set(names) - set(every))
    if unknown:
        return fail(f"reasoning-gym {RG_VERSION} has no dataset {', '.join(unknown)}", 2)
    out = args.out or BUNDLES
    everything = args.out is None and not args.only

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    if args.from_probe is not None:
        try:
            results = _recorded(args.from_probe, names)
            keys = {name: _read_key(_key_path(args.secrets, name)) for name in names if results[name]["ok"]}
        except _KeyError as e:
            return fail(f"{e}: --from-probe makes no keys (their held-out tasks would go unchecked); run the "
                        "probe without --from-probe to make one")
        except ValueError as e:
            return fail(str(e))
    else:
        from envhub.tasks import write_secret

        args.secrets.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            for name in names:
                if not _key_path(args.secrets, name).exists():
                    write_secret(_key_path(args.secrets, name))
                    log(f"new key {_key_path(args.secrets, name)}")
                _read_key(_key_path(args.secrets, name))
        except _KeyError as e:
            return fail(f"{e}: restore the key the environment was published with (or, if it never was, delete "
                        "the file: the probe makes a new one)")
        results = _probe(names, args.secrets, log)
        if everything:
            _record(results)
        elif args.out is None and PROBE_RECORD.is_file():  # probed again: the record takes the new results
            _record({**_recorded(PROBE_RECORD, []), **results})
        problems = [f"{name}: {r['heldout']['problem']}" for name, r in results.items()
                    if r["ok"] and r["heldout"]["problem"]]
        if problems:
            return fail("held-out tasks fail (nothing written):\n  " + "\n  ".join(problems) + "\nthe public seeds "
                        "pass, so these are rare seeds: if the key was never published, delete it (the probe makes "
                        "a new one), else fix the cause in the plugin")
        keys = {name: _read_key(_key_path(args.secrets, name)) for name in names if results[name]["ok"]}

    out.mkdir(parents=True, exist_ok=True)
    prompt = system_prompt()
    for name, result in results.items():
        if result["ok"]:
            write_bundle(result, out, prompt, keys[name])
            if args.sources is not None:
                write_bundle(result, args.sources, prompt, keys[name], source=True)
        elif (out / env_name(name)).exists():
            shutil.rmtree(out / env_name(name))
    if everything:
        kept = {env_name(r["name"]) for r in results.values() if r["ok"]}
        for stale in out.iterdir():
            if stale.is_dir() and stale.name not in kept:
                shutil.rmtree(stale)
        update_readme(results)
    elif args.out is None and PROBE_RECORD.is_file():  # some datasets into the package: the lists of all
        update_readme({**_recorded(PROBE_RECORD, []), **results})
    shipped = sum(r["ok"] for r in results.values())
    log(f"{shipped} bundles written to {out}, {len(results) - shipped} datasets skipped "
        f"({time.perf_counter() - started:.0f} s)")
    return 0


def _probe(names: list[str], secrets: Path, log: Any) -> dict[str, dict[str, Any]]:
    """Each dataset's probe result, its held-out tasks checked (``heldout``), checked again
    in other processes with another hash seed."""
    results = run_workers(names, hash_seed=1, digest_only=False, secrets=secrets, log=log)
    passed = [f"{name}={r['seeding']}@{r['levels']}" for name, r in results.items() if r["ok"]]
    again = run_workers(passed, hash_seed=2, digest_only=True, secrets=secrets, log=log)
    for name, result in results.items():
        other = again.get(name)
        if other is None:
            continue
        if not other["ok"]:
            result.update(ok=False, reason=f"not reproducible in another process: {other['reason']}")
        elif other["digest"] != result["digest"] or other["levels"] != result["levels"]:
            result.update(ok=False, reason="not deterministic: another process (another PYTHONHASHSEED) makes "
                                           "other tasks from the same seeds")
        elif other["heldout"]["digest"] != result["heldout"]["digest"] and not result["heldout"]["problem"]:
            result["heldout"]["problem"] = "another process (another PYTHONHASHSEED) makes other held-out tasks"
        if not result["ok"]:
            log(f"[2] skip {name}: {result['reason']}")
    return results


if __name__ == "__main__":
    sys.exit(main())
