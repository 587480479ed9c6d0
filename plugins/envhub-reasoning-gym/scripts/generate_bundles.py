#!/usr/bin/env python3
"""Probe reasoning-gym's datasets and write one envhub bundle for each that passes.

    python scripts/generate_bundles.py                  # every dataset: rewrite the shipped
                                                        # bundles and the README's lists
    python scripts/generate_bundles.py --out /tmp/b     # write the bundles elsewhere
    python scripts/generate_bundles.py --only basic_arithmetic chain_sum --out /tmp/b

Run it with the pinned reasoning-gym installed (``pip install -e plugins/envhub-reasoning-gym``).
For every dataset of ``reasoning_gym.factory.DATASETS`` the probe, with the network
switched off, makes tasks at every difficulty level (seeds :data:`PROBE_SEEDS`) and checks
that each has a question and a text answer, that the reference completion
(``<answer>ANSWER</answer>``) scores 1.0 through the verifier's own code path and a wrong
answer less, that the tasks come out the same when the datasets are built again, and, in a
second process with another ``PYTHONHASHSEED``, the same across processes; and that no task
takes more than :data:`SLOW_TASK_S` to make. Datasets that fail are skipped, with the
reason, in the README.

Each dataset is probed in a worker process with a time and memory limit, so one that hangs
or builds its whole (virtual) size up front is skipped rather than stopping the run. The
output is a function of reasoning-gym's version and this script only: running it again
writes the same bytes (tests/test_reasoning_gym_plugin.py checks).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

PLUGIN = Path(__file__).resolve().parent.parent
BUNDLES = PLUGIN / "envhub_reasoning_gym" / "bundles"
README = PLUGIN / "README.md"

RG_VERSION = "0.1.25"
NAMESPACE = "reasoning-gym"
#: Seeds made at every level: the first few of train, the last of train, dev and test.
PROBE_SEEDS = (0, 1, 2, 3, 4, 999_999_999, 1_000_000_000, 1_000_000_050)
WRONG_ANSWER = "envhub probe: certainly not the answer"
#: A dataset whose tasks take longer than this to make is skipped (seconds per task).
SLOW_TASK_S = 5.0
#: A worker's limits per dataset: wall time (seconds) and address space (bytes).
PROBE_TIMEOUT_S = 180
PROBE_MEMORY = 3 * 2**30
#: The splits every bundle has: name -> (seeds [start, stop), held out, description).
SPLITS = {
    "train": ((0, 1_000_000_000), False, "For training: a billion seeds, every level in turn."),
    "dev": ((1_000_000_000, 1_000_000_050), False, "For model selection and quick evaluation: 50 seeds."),
    "test": ((1_000_000_050, 1_000_000_150), True, "Held out: 100 seeds, for final evaluation."),
}
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
    ``curriculum_levels`` (the first ones: a level at which reasoning-gym fails to make a
    task, or makes one too slowly, is cut with the levels above it, said in ``trimmed``);
    the ``digest`` of the probe's tasks; and (unless ``digest_only``) what the bundle's
    manifest and README say about it. ``levels`` given: make exactly those, cut nothing."""
    from envhub_reasoning_gym import _datasets

    result: dict[str, Any] = {"name": name, "seeding": seeding, "ok": False, "trimmed": None}
    try:
        result["curriculum_levels"] = _datasets.level_count(name)
        fixed = levels is not None
        levels = levels if levels is not None else result["curriculum_levels"]
        started = time.perf_counter()
        rows: list[dict[str, Any]] = []
        for level in range(levels):
            made, slowest = [], 0.0
            for seed in PROBE_SEEDS:
                t = time.perf_counter()
                try:
                    made.append(_datasets.generate(seed, "probe", level, _params(name, seeding)))
                except Exception as e:
                    if level == 0 or fixed:
                        raise
                    # Often reasoning-gym's curriculum configures this level so that the
                    # dataset refuses it: ship the levels below.
                    result["trimmed"] = f"level {level} fails for seed {seed} ({_reason(e).removeprefix('fails: ')})"
                    break
                if seed != PROBE_SEEDS[0]:  # the first seed builds the dataset
                    slowest = max(slowest, time.perf_counter() - t)
            if not result["trimmed"] and slowest > SLOW_TASK_S and not fixed:
                if level == 0:
                    result["reason"] = (f"too slow: a task took {slowest:.0f} s to make (the limit is "
                                        f"{SLOW_TASK_S:.0f} s)")
                    return result
                result["trimmed"] = f"level {level} is too slow (a task took {slowest:.0f} s to make)"
            if result["trimmed"]:
                levels = level
                break
            rows += made
        result["levels"] = levels
        result["digest"] = _digest(rows)
        if digest_only:
            result["ok"] = True
            return result
        result["seconds"] = round(time.perf_counter() - started, 2)
        for row in rows:
            row = json.loads(json.dumps(row))  # as a record, or a server's client, carries it
            where = f"level {row['difficulty']}, seed {row['seed']}"
            if not isinstance(row["prompt"], str) or not row["prompt"].strip():
                result["reason"] = f"a task has no question ({where})"
                return result
            if not isinstance(row["answer"], str) or not row["answer"].strip():
                result["reason"] = (f"no reference answer: the answer is {row['answer']!r} ({where}); "
                                    "the dataset scores answers without one")
                return result
            reward, info = _datasets.score(name, row["reference"], row)
            if reward != 1.0:
                error = f": {info['scorer-error']}" if "scorer-error" in info else ""
                result["reason"] = (f"its own answer scores {reward:g}, not 1, once written as "
                                    f"<answer>...</answer> ({where}){error}")
                return result
            wrong, _ = _datasets.score(name, _datasets.reference(WRONG_ANSWER), row)
            if wrong >= 1.0:
                result["reason"] = f"its scorer gives a wrong answer {wrong:g} ({where})"
                return result
        _datasets.forget()
        if _digest(_tasks(name, levels, seeding)) != result["digest"]:
            result["reason"] = "not deterministic: the same seeds give other tasks when the dataset is built again"
            return result
        result.update(_about(name), curriculum=_curriculum(name, levels), ok=True,
                      example=next(row for row in rows if row["difficulty"] == 0 and row["seed"] == 0))
    except (Exception, MemoryError) as e:  # a dataset that cannot be made is skipped, with the reason
        result["reason"] = _reason(e)
    finally:
        _datasets.forget()  # free its memory before the next dataset
    return result


def worker(items: list[str], digest_only: bool) -> None:
    """Probe each ``NAME`` (first with seeding "index", then, if that fails, "dataset"), or
    ``NAME=SEEDING@LEVELS``, in turn: one result line each on stdout, each try within the
    limits."""
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

    def timeout(signum: int, frame: Any) -> None:
        raise TimeoutError(f"probing took over {PROBE_TIMEOUT_S} s")

    def limited(name: str, seeding: str, levels: int | None = None) -> dict[str, Any]:
        signal.alarm(PROBE_TIMEOUT_S)
        try:
            return probe(name, seeding, digest_only=digest_only, levels=levels)
        except (TimeoutError, MemoryError) as e:  # raised outside probe's own handler
            return {"name": name, "seeding": seeding, "ok": False, "reason": _reason(e)}
        finally:
            signal.alarm(0)

    signal.signal(signal.SIGALRM, timeout)
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
        print(RESULT + json.dumps(result, default=str), file=results, flush=True)


# --- running the workers (parent) -------------------------------------------------------------


def run_workers(items: list[str], *, hash_seed: int, digest_only: bool, log: Any) -> dict[str, dict[str, Any]]:
    """Each dataset's probe result, from worker processes (a new one after a crash)."""
    results: dict[str, dict[str, Any]] = {}
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    remaining = list(items)
    crashed: dict[str, str] = {}  # an item retried after a crash -> the crash
    while remaining:
        cmd = [sys.executable, __file__, "--worker", *(["--digest-only"] if digest_only else []), *remaining]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        lines: queue.Queue[str | None] = queue.Queue()
        stderr: list[str] = []

        def read_stdout(stream: Any = proc.stdout, into: queue.Queue[str | None] = lines) -> None:
            for line in stream:
                into.put(line)
            into.put(None)  # the worker is gone

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=lambda: stderr.extend(proc.stderr or ()), daemon=True).start()
        current = None
        while True:
            try:
                line = lines.get(timeout=2 * PROBE_TIMEOUT_S + 120)
            except queue.Empty:  # stuck where the alarm cannot reach (in C code)
                proc.kill()
                line = None
                stderr.append(f"no answer for {2 * PROBE_TIMEOUT_S + 120} s")
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


def manifest(info: dict[str, Any]) -> str:
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
    for split, ((start, stop), held_out, text) in SPLITS.items():
        lines += ["", f"[tasks.splits.{split}]", f"seeds = {_toml([start, stop])}"]
        if held_out:
            lines.append("held-out = true")
        lines.append(f"description = {_toml(text)}")
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
        "| config | " + ("a `success-window` curriculum over the levels |" if levels > 1 else "no curriculum (one level) |"),
        "",
        "## Splits",
        "",
        "| split | seeds | |",
        "|---|---|---|",
    ]
    for split, ((start, stop), held_out, text) in SPLITS.items():
        out.append(f"| {split} | [{start:,}, {stop:,}) | {text}{' (`held-out = true`)' if held_out else ''} |")
    out += [
        "",
        "Task *i* of a split (seed = start + *i*) is made at level *i* mod "
        f"{levels}, so every split cycles through the levels; a curriculum asks for tasks at one level.",
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

    return SYSTEM_PROMPTS["default"].strip() + "\n"


def write_bundle(info: dict[str, Any], out: Path, prompt: str) -> Path:
    root = out / env_name(info["name"])
    if root.exists():
        shutil.rmtree(root)
    (root / "prompts").mkdir(parents=True)
    (root / "envhub.toml").write_text(manifest(info), encoding="utf-8")
    (root / "README.md").write_text(readme(info), encoding="utf-8")
    (root / "prompts" / "system.md").write_text(prompt, encoding="utf-8")
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
        shipped_md.append(f"| `{NAMESPACE}/{env_name(r['name'])}` | `{r['name']}`{seeding} | {r['category']} | {levels} |")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the bundles here (default: the package's bundles/, "
                                                  "which also rewrites the README's lists and removes stale bundles)")
    parser.add_argument("--only", nargs="+", metavar="DATASET", help="probe and write these datasets only")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--digest-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("names", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.names, args.digest_only)
        return 0

    from importlib.metadata import version

    import reasoning_gym.factory

    if version("reasoning-gym") != RG_VERSION:
        print(f"error: reasoning-gym {version('reasoning-gym')} is installed; the bundles are for {RG_VERSION}",
              file=sys.stderr)
        return 1
    every = sorted(reasoning_gym.factory.DATASETS)
    names = sorted(args.only) if args.only else every
    unknown = sorted(set(names) - set(every))
    if unknown:
        print(f"error: reasoning-gym {RG_VERSION} has no dataset {', '.join(unknown)}", file=sys.stderr)
        return 2
    out = args.out or BUNDLES

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    results = run_workers(names, hash_seed=1, digest_only=False, log=log)
    # The same tasks again, in other processes with another hash seed.
    passed = [f"{name}={r['seeding']}@{r['levels']}" for name, r in results.items() if r["ok"]]
    again = run_workers(passed, hash_seed=2, digest_only=True, log=log)
    for name, result in results.items():
        other = again.get(name)
        if other is None:
            continue
        if not other["ok"]:
            result.update(ok=False, reason=f"not reproducible in another process: {other['reason']}")
        elif other["digest"] != result["digest"] or other["levels"] != result["levels"]:
            result.update(ok=False, reason="not deterministic: another process (another PYTHONHASHSEED) makes "
                                           "other tasks from the same seeds")
        if not result["ok"]:
            log(f"[2] skip {name}: {result['reason']}")

    out.mkdir(parents=True, exist_ok=True)
    prompt = system_prompt()
    for result in results.values():
        if result["ok"]:
            write_bundle(result, out, prompt)
        elif (out / env_name(result["name"])).exists():
            shutil.rmtree(out / env_name(result["name"]))
    if args.out is None and not args.only:
        kept = {env_name(r["name"]) for r in results.values() if r["ok"]}
        for stale in out.iterdir():
            if stale.is_dir() and stale.name not in kept:
                shutil.rmtree(stale)
        update_readme(results)
    shipped = sum(r["ok"] for r in results.values())
    log(f"{shipped} bundles written to {out}, {len(results) - shipped} datasets skipped "
        f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
