"""Import task directories in the layout Terminal-Bench and Harbor use into one bundle.

Two layouts are read, told apart by their configuration file:

- **Terminal-Bench** (``task.yaml``): the instruction in ``task.yaml`` (``instruction``, or
  the ``base`` entry of ``descriptions``), a ``Dockerfile`` (and usually a
  ``docker-compose.yaml``) at the top, ``solution.sh`` or ``solution.yaml``, an optional
  ``run-tests.sh`` (pytest on ``tests/test_outputs.py`` when absent) and ``tests/``.
- **Harbor** (``task.toml``): ``instruction.md``, ``environment/Dockerfile`` (the build
  context is ``environment/``), ``solution/solve.sh`` and ``tests/test.sh``, which writes
  its reward to ``/logs/verifier/reward.txt`` or ``reward.json``.

Every task becomes a row of one split of a bundle with state kind ``sandbox`` and verifier
``workspace-tests`` (spec/manifest.md). What maps faithfully is mapped; the rest is written,
task by task, to ``IMPORT-REPORT.md`` (docs/importers.md has the whole table). The main loss:
a sandbox runs on the host's read-only system, so nothing a Dockerfile installs is there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envhub.canary import new_canary
from envhub.errors import EnvhubError, UsageError
from envhub.ids import parse_name
from envhub.importers._staging import check_destination, write_staged
from envhub.problems import Problem

__all__ = ["ImportReport", "ImportSourceError", "TaskImport", "import_terminal_bench"]

#: Where the workspace is inside the sandbox; the source's working directory maps onto it.
WORKSPACE = "/workspace"
#: The verifier command of every imported bundle: the entry script written per task.
ENTRY = "envhub-tests.sh"
RUNNER = "_envhub_pytest.py"
#: Harbor's tests write their reward here; inside the sandbox it becomes a writable path.
HARBOR_LOGS = "/logs/verifier"
SANDBOX_LOGS = "/tmp/envhub-verifier-logs"
SOLUTION_DIR = "/tmp/envhub-solution"
_DIFFICULTY = {"easy": 1, "medium": 2, "hard": 3}
_PACKAGE_TOOLS = re.compile(
    r"^(?:sudo\s+)?(?:apt-get|apt|apk|yum|dnf|microdnf|zypper|pip3?|uv|uvx|npm|npx|yarn|pnpm|gem|cargo|go\s+install"
    r"|conda|mamba|micromamba|curl|wget|git\s+clone|rustup|python3?\s+-m\s+pip|add-apt-repository|update-alternatives"
    r"|locale-gen|dpkg)\b")
_ALLOWED_ABSOLUTE = ("/tmp", "/dev/", "/usr/bin/", "/bin/", "/proc/", "/usr/local/bin/env")
# Not copied into the workspace from a Terminal-Bench task's top directory (its build context).
_TB_TASK_FILES = {"task.yaml", "solution.sh", "solution.yaml", "run-tests.sh", "tests", "Dockerfile",
                  "docker-compose.yaml", "docker-compose.yml", ".dockerignore"}


class ImportSourceError(EnvhubError, ValueError):
    """A source task directory cannot be read; carries every problem found."""

    def __init__(self, message: str, problems: Iterable[Problem], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems = list(problems)

    def __str__(self) -> str:
        return "\n".join([self.message, *(problem.render() for problem in self.problems)])


@dataclass
class TaskImport:
    """What became of one source task: ``kept`` maps faithfully, ``dropped`` does not."""

    id: str
    source: Path
    layout: str
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


@dataclass
class ImportReport:
    """The outcome of one import: the bundle written and, per task, what was dropped."""

    source: Path
    out: Path
    name: str
    split: str
    tasks: list[TaskImport]
    notes: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        """How many things were dropped, over every task."""
        return sum(len(t.dropped) for t in self.tasks)

    def summary(self) -> str:
        """What was imported: ``"3 task(s)"``."""
        return f"{len(self.tasks)} task(s)"

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (``envhub import --json``)."""
        return {"kind": "terminal-bench", "name": self.name, "out": str(self.out), "split": self.split,
                "notes": self.notes, "dropped": self.dropped,
                "tasks": [{"id": t.id, "source": str(t.source), "layout": t.layout, "kept": t.kept,
                           "dropped": t.dropped} for t in self.tasks]}

    def to_markdown(self) -> str:
        lines = [f"# Import report: {self.name}", "",
                 f"Imported by `envhub import terminal-bench` from `{self.source}`: {len(self.tasks)} task(s) into "
                 f"split `{self.split}`, {self.dropped} thing(s) dropped. docs/importers.md explains the mapping.",
                 "", "## The bundle", ""]
        lines += [f"- {note}" for note in self.notes]
        for task in self.tasks:
            lines += ["", f"## {task.id} ({task.layout}, from `{task.source.name}`)", "", "Kept:", ""]
            lines += [f"- {item}" for item in task.kept] or ["- nothing"]
            lines += ["", "Dropped:", ""]
            lines += [f"- {item}" for item in task.dropped] or ["- nothing"]
        return "\n".join(lines) + "\n"


def run_terminal_bench(source: Path, out: Path, options: Mapping[str, str]) -> ImportReport:
    """:func:`import_terminal_bench` with its arguments as ``envhub import`` options
    (``name``, ``split``, ``network``): the ``terminal-bench`` importer's ``run``."""
    from envhub.importers._options import flag

    return import_terminal_bench(source, out, name=options.get("name"), split=options.get("split", "test"),
                                 network=flag(options, "network"))


def import_terminal_bench(source: Path, out: Path, *, name: str | None = None, split: str = "test",
                          network: bool = False) -> ImportReport:
    """Write a bundle to ``out`` (a new or empty directory) from the task directory, or the
    directory of task directories, ``source``; return what was kept and dropped per task.

    ``name`` is the bundle's ``namespace/name`` (``imported/<source name>`` by default);
    ``network`` shares the host's network with every episode (off by default, unlike the
    source's containers). Nothing is written when anything fails.

    Raises :class:`ImportSourceError` naming every unreadable file and field,
    :class:`envhub.errors.UsageError` when ``out`` is not empty or ``source`` holds no task,
    and :class:`envhub.errors.InvalidIdError` for a bad ``name``.
    """
    source, out = Path(source), Path(out)
    env_name = str(parse_name(name or f"imported/{_slug(source.resolve().name)}"))
    check_destination(split, out)
    if not source.is_dir():
        raise UsageError(f"{source} is not a directory", hint="give a task directory or a directory of them")
    task_dirs = [source] if _layout(source) else sorted(
        d for d in source.iterdir() if d.is_dir() and not d.name.startswith(".") and _layout(d))
    if not task_dirs:
        raise UsageError(f"{source} holds no task directory",
                         hint="a task directory has task.toml (Harbor) or task.yaml (Terminal-Bench)")
    problems: list[Problem] = []
    tasks = [t for t in (_read_task(d, problems) for d in task_dirs) if t is not None]
    seen: dict[str, Path] = {}
    for task in tasks:
        if task.id in seen:
            problems.append(Problem("error", "import-duplicate-id", f"task id {task.id!r} is also {seen[task.id]}",
                                    file=str(task.dir), hint="rename one of the directories"))
        seen.setdefault(task.id, task.dir)
    if problems:
        raise ImportSourceError(f"cannot import {source}: {len(problems)} problem(s)", problems)

    return write_staged(out, lambda staging: _write_bundle(staging, tasks, env_name, split, network, source, out))


# --------------------------------------------------------------------------- reading

@dataclass
class _Task:
    dir: Path
    layout: str  # "terminal-bench" or "harbor"
    id: str
    report: TaskImport
    instruction: str = ""
    difficulty: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    agent_timeout: float | None = None
    test_timeout: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    allow_internet: bool | None = None
    workdir: str = "/app"
    files: dict[str, Path] = field(default_factory=dict)  # workspace path -> source file
    setup: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution: list[str] = field(default_factory=list)
    tests: dict[str, Path] = field(default_factory=dict)  # path under tests/<id>/ -> source file
    entry: str = ""


def _layout(directory: Path) -> str | None:
    if (directory / "task.toml").is_file():
        return "harbor"
    if (directory / "task.yaml").is_file():
        return "terminal-bench"
    return None


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")[:64] or "tasks"


def _problem(problems: list[Problem], path: Path, message: str, *, field: str | None = None,
             hint: str | None = None, line: int | None = None) -> None:
    problems.append(Problem("error", "import-source", message, file=str(path), field=field, hint=hint, line=line))


def _read_task(directory: Path, problems: list[Problem]) -> _Task | None:
    layout = _layout(directory)
    assert layout is not None
    task = _Task(directory, layout, directory.name, TaskImport(directory.name, directory, layout))
    before = len(problems)
    if layout == "harbor":
        _read_harbor(task, problems)
        context = directory / "environment"
    else:
        _read_terminal_bench(task, problems)
        context = directory
    if len(problems) > before:
        return None
    _read_environment(task, context)
    _read_tests(task)
    _rewrite_all(task)
    return task


def _read_harbor(task: _Task, problems: list[Problem]) -> None:
    path = task.dir / "task.toml"
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        _problem(problems, path, f"cannot read: {e}", hint="fix the TOML syntax")
        return
    instruction = task.dir / "instruction.md"
    if not instruction.is_file():
        _problem(problems, instruction, "missing: a Harbor task's instruction is instruction.md",
                 hint="write the task's instruction to instruction.md")
    else:
        task.instruction = instruction.read_text(encoding="utf-8", errors="replace")
        task.report.kept.append("instruction.md as the prompt")
    tables = len(problems)
    for section in ("metadata", "verifier", "agent", "environment", "task", "solution"):
        if section in config and not isinstance(config[section], dict):
            _problem(problems, path, "must be a table", field=section)
    if len(problems) > tables:
        return
    metadata = dict(config.get("metadata", {}))
    task.difficulty = _difficulty(task, metadata.pop("difficulty", None), path, "metadata.difficulty", problems)
    task.metadata.update(metadata)
    info = dict(config.get("task", {}))
    info.pop("name", None)
    task.metadata.update(info)
    if task.metadata:
        task.report.kept.append(f"metadata ({', '.join(sorted(task.metadata))}) in the row's metadata field")
    verifier, agent = dict(config.get("verifier", {})), dict(config.get("agent", {}))
    environment = dict(config.get("environment", {}))
    task.test_timeout = _number(verifier.pop("timeout_sec", None), path, "verifier.timeout_sec", problems)
    task.agent_timeout = _number(agent.pop("timeout_sec", None), path, "agent.timeout_sec", problems)
    env = verifier.pop("env", {})
    if isinstance(env, dict):
        task.verifier_env = {str(k): str(v) for k, v in env.items()}
        if env:
            task.report.kept.append(f"verifier.env ({', '.join(sorted(env))}) exported before the tests")
    memory = environment.pop("memory_mb", None) or _megabytes(environment.pop("memory", None))
    storage = environment.pop("storage_mb", None) or _megabytes(environment.pop("storage", None))
    task.memory_mb = int(memory) if isinstance(memory, (int, float)) else None
    task.storage_mb = int(storage) if isinstance(storage, (int, float)) else None
    allow = environment.pop("allow_internet", None)
    task.allow_internet = allow if isinstance(allow, bool) else None
    for key, value in environment.items():
        task.report.dropped.append(f"task.toml environment.{key} = {value!r}: the sandbox builds no image and "
                                   "sets no such resource")
    for key, value in verifier.items():
        task.report.dropped.append(f"task.toml verifier.{key} = {value!r}: the tests run as the sandbox's user")
    for key, value in agent.items():
        task.report.dropped.append(f"task.toml agent.{key} = {value!r}")
    solution_env = config.get("solution", {}).get("env", {}) if isinstance(config.get("solution"), dict) else {}
    solve = task.dir / "solution" / "solve.sh"
    if solve.is_file():
        extra = [p for p in sorted((task.dir / "solution").rglob("*")) if p.is_file() and p != solve]
        task.solution = [_solution_command(solve, extra, solution_env, task)]
        task.report.kept.append("solution/solve.sh as the reference solution (one command running it)")
    else:
        task.report.dropped.append("no solution/solve.sh: the task has no reference solution, so --check cannot "
                                   "confirm it")
    for other in sorted(set(config) - {"metadata", "verifier", "agent", "environment", "task", "solution",
                                       "version", "schema_version"}):
        task.report.dropped.append(f"task.toml [{other}]: not read by the importer")


def _read_terminal_bench(task: _Task, problems: list[Problem]) -> None:
    path = task.dir / "task.yaml"
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        mark = getattr(e, "problem_mark", None)
        _problem(problems, path, f"cannot read: {str(e).splitlines()[0]}", hint="fix the YAML syntax",
                 line=mark.line + 1 if mark is not None else None)
        return
    if not isinstance(config, dict):
        _problem(problems, path, "must be a mapping of fields", hint="start with 'instruction: |'")
        return
    config = dict(config)
    instruction = config.pop("instruction", None)
    descriptions = config.pop("descriptions", None)
    if instruction is None and isinstance(descriptions, list):
        base = [d for d in descriptions if isinstance(d, dict) and d.get("key", "base") == "base"]
        instruction = base[0].get("description") if base else None
        others = [d.get("key") for d in descriptions if isinstance(d, dict) and d not in base]
        if others:
            task.report.dropped.append(f"task.yaml descriptions other than 'base' ({', '.join(map(str, others))})")
    if not isinstance(instruction, str) or not instruction.strip():
        _problem(problems, path, "no instruction", field="instruction",
                 hint="give the task's instruction as 'instruction: |' followed by the text")
        return
    task.instruction = instruction
    task.report.kept.append("task.yaml instruction as the prompt")
    task.difficulty = _difficulty(task, config.pop("difficulty", None), path, "difficulty", problems)
    task.agent_timeout = _number(config.pop("max_agent_timeout_sec", None), path, "max_agent_timeout_sec", problems)
    task.test_timeout = _number(config.pop("max_test_timeout_sec", None), path, "max_test_timeout_sec", problems)
    parser = config.pop("parser_name", "pytest")
    if parser != "pytest":
        task.report.dropped.append(f"parser_name = {parser!r}: only the tests' exit code decides (pass or fail)")
    task.metadata["parser_name"] = parser
    for key, why in (("run_tests_in_same_shell", "the tests always run in a fresh sandbox, never the agent's shell"),
                     ("disable_asciinema", "nothing is recorded as a terminal cast")):
        if key in config:
            task.report.dropped.append(f"task.yaml {key} = {config.pop(key)!r}: {why}")
    task.metadata.update(config)
    if config:
        task.report.kept.append(f"metadata ({', '.join(sorted(config))}) in the row's metadata field")
    yaml_solution, sh_solution = task.dir / "solution.yaml", task.dir / "solution.sh"
    if yaml_solution.is_file():
        _read_solution_yaml(task, yaml_solution, problems)
    elif sh_solution.is_file():
        task.solution = [_solution_command(sh_solution, [], {}, task)]
        task.report.kept.append("solution.sh as the reference solution (one command running it)")
    else:
        task.report.dropped.append("no solution.sh or solution.yaml: the task has no reference solution, so --check "
                                   "cannot confirm it")


def _read_solution_yaml(task: _Task, path: Path, problems: list[Problem]) -> None:
    try:
        steps = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        _problem(problems, path, f"cannot read: {str(e).splitlines()[0]}", hint="fix the YAML syntax")
        return
    if not isinstance(steps, list) or not all(isinstance(s, dict) and isinstance(s.get("command"), str)
                                              for s in steps):
        _problem(problems, path, "must be a list of steps, each with a 'command'",
                 hint="write '- command: ls' for each step, or use solution.sh")
        return
    task.solution = [s["command"].rstrip("\n") for s in steps]
    task.report.kept.append(f"solution.yaml's {len(steps)} command(s) as the reference solution")
    hints = sorted({k for s in steps for k in s if k != "command"})
    if hints:
        task.report.dropped.append(f"solution.yaml step keys {', '.join(hints)}: each command runs to its end, "
                                   "within the per-command limit")


def _difficulty(task: _Task, value: Any, path: Path, name: str, problems: list[Problem]) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.lower() in _DIFFICULTY:
        task.report.kept.append(f"difficulty {value} as {_DIFFICULTY[value.lower()]}")
        return _DIFFICULTY[value.lower()]
    if isinstance(value, str) and value.lower() == "unknown":
        task.report.dropped.append("difficulty 'unknown'")
        return None
    _problem(problems, path, f"difficulty {value!r} is not easy, medium or hard", field=name,
             hint="use easy, medium or hard")
    return None


def _number(value: Any, path: Path, name: str, problems: list[Problem]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        _problem(problems, path, f"{value!r} is not a positive number of seconds", field=name)
        return None
    return float(value)


def _megabytes(value: Any) -> int | None:
    """Harbor's newer ``memory = "2G"`` / ``storage = "10G"`` spellings."""
    if not isinstance(value, str):
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", value, re.IGNORECASE)
    if not match:
        return None
    scale = {"": 1 / 2**20, "K": 1 / 1024, "M": 1, "G": 1024, "T": 2**20}[match.group(2).upper()]
    return max(1, int(float(match.group(1)) * scale))


def _solution_command(script: Path, extra: list[Path], env: Any, task: _Task) -> str:
    """One shell command that writes the solution script (and the files beside it) to a
    private directory of the sandbox and runs it from the workspace."""
    parts: list[str] = []
    if isinstance(env, dict):
        parts += [f"export {k}={shlex.quote(str(v))}" for k, v in env.items() if re.fullmatch(r"[A-Za-z_]\w*", k)]
    for path in [*extra, script]:
        rel = path.relative_to(script.parent).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            task.report.dropped.append(f"solution file {rel}: not text, so it cannot travel in the solution command")
            continue
        text = text.replace("/solution/", f"{SOLUTION_DIR}/")
        marker = "ENVHUB_EOF"
        while marker in text:
            marker += "_"
        target = f"{SOLUTION_DIR}/{rel}"
        parts.append(f"mkdir -p {shlex.quote(os.path.dirname(target))} && cat > {shlex.quote(target)} <<'{marker}'\n"
                     f"{text.rstrip(chr(10))}\n{marker}")
    parts.append(f"bash {SOLUTION_DIR}/{script.name}")
    return "\n".join(parts)


# --------------------------------------------------------------------------- the Dockerfile

def _dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments skipped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    if pending.strip():
        word, _, rest = pending.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _read_environment(task: _Task, context: Path) -> None:
    dockerfile = context / "Dockerfile"
    compose = next((p for p in (context / "docker-compose.yaml", context / "docker-compose.yml") if p.is_file()), None)
    if compose is not None:
        _read_compose(task, compose)
    if not dockerfile.is_file():
        task.report.dropped.append("no Dockerfile: the workspace starts empty")
        return
    instructions = _dockerfile_instructions(dockerfile.read_text(encoding="utf-8", errors="replace"))
    workdirs = [args for word, args in instructions if word == "WORKDIR"]
    if workdirs:
        task.workdir = _join("/", workdirs[-1].strip("\"'"))
    else:
        task.report.dropped.append("the Dockerfile sets no WORKDIR: assumed /app, the usual one")
    task.report.kept.append(f"the working directory {task.workdir} as the workspace ({WORKSPACE}); the path is "
                            "rewritten in the instruction, the solution and the tests")
    current = "/"
    images = 0
    for word, args in instructions:
        if word == "FROM":
            images += 1
            task.report.dropped.append(f"FROM {args}: the sandbox runs on the host's read-only system, not this "
                                       "image; what the image has and the host lacks is missing")
        elif word == "WORKDIR":
            current = _join(current, args.strip("\"'"))
        elif word in ("COPY", "ADD"):
            _copy(task, context, word, args, current)
        elif word == "RUN":
            _run(task, args, current)
        elif word == "ENV":
            for key, value in _env_pairs(args):
                task.env[key] = value
                task.report.kept.append(f"ENV {key}: exported by the setup command and before the tests")
        else:
            task.report.dropped.append(f"{word} {args}: no meaning in a sandbox workspace")
    if images > 1:
        task.report.dropped.append("a multi-stage build: only what the stages COPY from the build context is kept")


def _read_compose(task: _Task, path: Path) -> None:
    try:
        compose = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        task.report.dropped.append(f"{path.name}: unreadable, ignored")
        return
    services = compose.get("services", {}) if isinstance(compose, dict) else {}
    if not isinstance(services, dict):
        return
    extra = [name for name in services if name not in ("client", "main")]
    if extra:
        task.report.dropped.append(f"{path.name} services {', '.join(map(str, extra))}: a sandbox runs no other "
                                   "containers, so these services are absent")
    for name in ("client", "main"):
        service = services.get(name)
        if isinstance(service, dict):
            for key in sorted(set(service) - {"build", "image", "container_name", "command", "volumes",
                                              "environment"}):
                task.report.dropped.append(f"{path.name} services.{name}.{key}")


def _join(base: str, path: str) -> str:
    return os.path.normpath(path if path.startswith("/") else os.path.join(base, path))


def _env_pairs(args: str) -> list[tuple[str, str]]:
    try:
        words = shlex.split(args)
    except ValueError:
        return []
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [tuple(w.split("=", 1)) for w in words if "=" in w]  # type: ignore[misc]


def _copy(task: _Task, context: Path, word: str, args: str, current: str) -> None:
    try:
        words = json.loads(args) if args.startswith("[") else shlex.split(args)
    except (ValueError, json.JSONDecodeError):
        task.report.dropped.append(f"{word} {args}: unreadable")
        return
    flags = [w for w in words if w.startswith("--")]
    paths = [w for w in words if not w.startswith("--")]
    if any(f.startswith("--from") for f in flags) or len(paths) < 2:
        task.report.dropped.append(f"{word} {args}: copies from another image or stage")
        return
    *sources, dest = paths
    target = _join(current, dest)
    root = task.workdir
    if target != root and not target.startswith(root.rstrip("/") + "/"):
        task.report.dropped.append(f"{word} {args}: {target} is outside the working directory {root}, and the "
                                   "host system is read-only")
        return
    rel_dest = os.path.relpath(target, root)
    into_directory = dest.endswith("/") or len(sources) > 1 or target == root
    copied = 0
    for pattern in sources:
        if re.match(r"^[a-z]+://", pattern):
            task.report.dropped.append(f"{word} {pattern}: a download; the sandbox has no network")
            continue
        matches = sorted(context.glob(pattern)) if any(c in pattern for c in "*?[") else [context / pattern]
        matches = [m for m in matches if m.exists()]
        if not matches:
            task.report.dropped.append(f"{word} {pattern}: not in the build context")
            continue
        for match in matches:
            if match.is_dir():
                for file in sorted(p for p in match.rglob("*") if p.is_file()):
                    name = os.path.normpath(os.path.join(rel_dest, file.relative_to(match).as_posix()))
                    task.files[name] = file
                    copied += 1
            else:
                name = os.path.join(rel_dest, match.name) if into_directory else rel_dest
                task.files[os.path.normpath(name)] = match
                copied += 1
        if word == "ADD" and pattern.endswith((".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.bz2")):
            task.report.dropped.append(f"ADD {pattern}: copied as the archive, not unpacked")
    if copied:
        task.report.kept.append(f"{word} {' '.join(paths)}: {copied} file(s) into the workspace")


def _run(task: _Task, args: str, current: str) -> None:
    if args.startswith("["):
        with contextlib.suppress(ValueError, TypeError):
            args = shlex.join(json.loads(args))
    for part in (p.strip() for p in re.split(r"\s*(?:&&|;)\s*", args) if p.strip()):
        if _PACKAGE_TOOLS.match(part):
            task.report.dropped.append(f"RUN {part}: installs or downloads software; the host-system base is "
                                       "read-only and has no network")
            continue
        outside = [p for p in re.findall(r"(?<![\w.$-])/[\w.@+-][\w./@+-]*", part)
                   if not (p == task.workdir or p.startswith(task.workdir.rstrip("/") + "/")
                           or p.startswith(_ALLOWED_ABSOLUTE))]
        if outside:
            task.report.dropped.append(f"RUN {part}: touches {outside[0]}, outside the working directory (the host "
                                       "system is read-only)")
            continue
        if current != task.workdir and not part.startswith("cd "):
            rel = os.path.relpath(current, task.workdir)
            if rel.startswith(".."):
                task.report.dropped.append(f"RUN {part}: runs in {current}, outside the working directory")
                continue
            part = f"(cd {shlex.quote(rel)} && {part})" if rel != "." else part
        task.setup.append(part)
        task.report.kept.append(f"RUN {part}: in the setup command, run in the workspace before the agent starts")


# --------------------------------------------------------------------------- tests

def _read_tests(task: _Task) -> None:
    tests_dir = task.dir / "tests"
    for file in sorted(p for p in tests_dir.rglob("*") if p.is_file()) if tests_dir.is_dir() else []:
        task.tests[file.relative_to(tests_dir).as_posix()] = file
    if task.layout == "terminal-bench":
        script = task.dir / "run-tests.sh"
        if script.is_file():
            task.tests.setdefault("run-tests.sh", script)
        driver = script.read_text(encoding="utf-8", errors="replace") if script.is_file() else None
        driver_name = "run-tests.sh"
    else:
        script = tests_dir / "test.sh"
        driver = script.read_text(encoding="utf-8", errors="replace") if script.is_file() else None
        driver_name = "tests/test.sh"
    pytest_files = [rel for rel in task.tests if re.fullmatch(r"(?:.*/)?test_[^/]*\.py|(?:.*/)?[^/]*_test\.py", rel)]
    uses_pytest = driver is None or "pytest" in driver
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in {**task.env, **task.verifier_env}.items()
                      if re.fullmatch(r"[A-Za-z_]\w*", k))
    head = ("#!/bin/bash\n# Written by envhub import terminal-bench: runs this task's tests in the workspace and\n"
            "# prints one PASS or FAIL line per test (docs/importers.md).\nexport TEST_DIR=/tests\n" + exports)
    if uses_pytest and pytest_files:
        named = [f for f in pytest_files if driver is None or Path(f).name in driver] or pytest_files
        task.entry = head + f"exec python3 /tests/{RUNNER} " + " ".join(f"/tests/{f}" for f in named) + "\n"
        what = driver_name if driver is not None else "the default pytest run"
        task.report.kept.append(f"the pytest tests ({', '.join(named)}), one PASS/FAIL line per test, run by envhub's "
                                f"standard-library runner")
        task.report.dropped.append(f"{what}: it installs pytest (from the network) and runs it; envhub's runner runs "
                                   "the same test functions (plain asserts, raises, approx, parametrize, fixtures) "
                                   "without pytest's plugins or its assertion rewriting")
    elif driver is not None:
        run = ("# The script's own output, commented out: only the line below counts.\n"
               "bash /tests/{} 2>&1 | sed 's/^/# /' >&2\ncode=${{PIPESTATUS[0]}}\n")
        if task.layout == "harbor":
            task.entry = head + f"mkdir -p {SANDBOX_LOGS}\n" + run.format("test.sh") + (
                f"reward=$(cat {SANDBOX_LOGS}/reward.txt 2>/dev/null || python3 -c 'import json,sys; "
                f"print(json.load(open(sys.argv[1])).get(\"reward\", 0))' {SANDBOX_LOGS}/reward.json 2>/dev/null)\n"
                'if [ -n "$reward" ]; then ok=$(python3 -c "import sys; print(float(sys.argv[1]) >= 1)" "$reward"); '
                'else ok=$([ $code -eq 0 ] && echo True || echo False); fi\n'
                f'if [ "$ok" = True ]; then echo "PASS {task.id}"; else echo "FAIL {task.id}"; fi\n')
            task.report.kept.append(f"{driver_name} as the test run: its reward (reward.txt or reward.json), or else "
                                    "its exit code, decides pass or fail")
            task.report.dropped.append("a reward between 0 and 1 from reward.txt: counted as a fail (only 1 passes)")
        else:
            task.entry = head + run.format("run-tests.sh") + (
                f'if [ $code -eq 0 ]; then echo "PASS {task.id}"; else echo "FAIL {task.id}"; fi\n')
            task.report.kept.append(f"{driver_name} as the test run: its exit code decides pass or fail")
    else:
        task.report.dropped.append("no tests: the task always fails")
        task.entry = head + f'echo "FAIL {task.id}"\n'


# --------------------------------------------------------------------------- rewriting paths

def _rewrite(text: str, workdir: str) -> str:
    if workdir not in ("/", WORKSPACE):
        text = re.sub(rf"(?<![\w./-]){re.escape(workdir)}(?=/|\b|$)", WORKSPACE, text)
    return text.replace(HARBOR_LOGS, SANDBOX_LOGS)


def _rewrite_all(task: _Task) -> None:
    task.instruction = _rewrite(task.instruction, task.workdir)
    task.solution = [_rewrite(c, task.workdir) for c in task.solution]
    task.setup = [_rewrite(c, task.workdir) for c in task.setup]


# --------------------------------------------------------------------------- writing

def _write_bundle(root: Path, tasks: list[_Task], name: str, split: str, network: bool, source: Path,
                  out: Path) -> ImportReport:
    (root / "tasks").mkdir()
    (root / "tests").mkdir()
    (root / "prompts").mkdir()
    # The workspace's starting files travel in the row (files-field) when they are all text;
    # a binary file needs a directory per task (task-directory), and then every task needs one.
    texts: dict[str, dict[str, str]] = {t.id: {} for t in tasks}
    binary = False
    for task in tasks:
        for rel, file in task.files.items():
            try:
                texts[task.id][rel] = file.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                binary = True
    with_files = binary
    with_texts = not binary and any(t.files for t in tasks)
    if with_texts:
        for task in tasks:
            executable = [rel for rel, file in task.files.items() if file.stat().st_mode & 0o111]
            if executable:
                task.setup.append("chmod +x " + " ".join(shlex.quote(rel) for rel in executable))
                task.report.kept.append(f"the executable bit of {', '.join(executable)}: chmod +x in the setup")
    with_setup = any(t.setup or t.env for t in tasks)
    rows = []
    for task in tasks:
        tests = root / "tests" / task.id
        tests.mkdir(parents=True)
        rewritten = []
        for rel, file in task.tests.items():
            target = tests / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            data = file.read_bytes()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                target.write_bytes(data)
                continue
            new = _rewrite(text, task.workdir)
            rewritten += [rel] if new != text else []
            target.write_text(new, encoding="utf-8")
        if rewritten:
            task.report.kept.append(f"paths in {', '.join(rewritten)} rewritten ({task.workdir} to {WORKSPACE}, "
                                    f"{HARBOR_LOGS} to {SANDBOX_LOGS})")
        (tests / ENTRY).write_text(task.entry, encoding="utf-8")
        if RUNNER in task.entry:
            (tests / RUNNER).write_text((Path(__file__).parent / "_pytest_runner.py").read_text(encoding="utf-8"),
                                        encoding="utf-8")
        if with_files:
            workspace = root / "workspaces" / task.id
            workspace.mkdir(parents=True)
            for rel, file in task.files.items():
                (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, workspace / rel)
            if not task.files:
                # An archive keeps no empty directory, and every task needs its own.
                (workspace / ".envhub-empty").write_text("")
                task.report.dropped.append("nothing: its workspace holds one empty file, .envhub-empty, because "
                                           "another task's files are binary and need a directory per task")
        row: dict[str, Any] = {"id": task.id, "prompt": task.instruction, "tests": task.id,
                               "solution": task.solution, "source": f"{task.layout}:{task.dir.name}"}
        if task.difficulty is not None:
            row["difficulty"] = task.difficulty
        if with_texts:
            row["files"] = texts[task.id]
        if with_setup:
            exports = [f"export {k}={shlex.quote(v)}" for k, v in task.env.items()
                       if re.fullmatch(r"[A-Za-z_]\w*", k)]
            row["setup"] = " && ".join([*exports, *task.setup]) or "true"
        if task.metadata:
            row["metadata"] = task.metadata
        rows.append(json.dumps(row, ensure_ascii=False, sort_keys=True, default=str))
    (root / "tasks" / f"{split}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "prompts" / "system.md").write_text(_SYSTEM_PROMPT, encoding="utf-8")

    notes: list[str] = []

    def most(values: Iterable[float | int | None], default: float, what: str, cap: float | None = None) -> float:
        known = [v for v in values if v is not None]
        value = max(known) if known else default
        if len(set(known)) > 1:
            notes.append(f"{what}: the tasks differ ({min(known):g} to {max(known):g}); the bundle uses the largest, "
                         f"{value:g}, for every task")
        if not known:
            notes.append(f"{what}: no task sets it; {default:g}")
        if cap is not None and value > cap:
            notes.append(f"{what}: {value:g} is more than envhub allows; {cap:g}")
            value = cap
        return value

    agent = most((t.agent_timeout for t in tasks), 600, "agent time limit (s)", 86_400)
    tests_timeout = most((t.test_timeout for t in tasks), 180, "test time limit (s)", 3600)
    memory = most((t.memory_mb for t in tasks), 1024, "memory (MiB)")
    disk = most((t.storage_mb for t in tasks), 1024, "disk (MiB)")
    command = min(agent, 600)
    notes.append(f"each command may run {command:g} s (the agent's time limit, at most 600 s)")
    if not network:
        needing = [t.id for t in tasks if t.allow_internet is not False]
        if needing:
            notes.append(f"network: off, while the source lets {len(needing)} task(s) reach the internet "
                         "(Terminal-Bench always, Harbor unless allow_internet = false); "
                         "`envhub import terminal-bench --network` shares the host's network instead")
    notes.append(f"the split `{split}` is not held out: the source tasks are published")
    notes.append("the base is the host's read-only system (base = \"host\"): bash, coreutils and python3 with its "
                 "standard library; no package the source's Dockerfile installs. To have them, set [state] base to a "
                 "root filesystem archive of the built image (for example from `docker export`)")

    difficulty = all(t.difficulty is not None for t in tasks)
    if not difficulty and any(t.difficulty is not None for t in tasks):
        notes.append("difficulty: not every task has one, so the bundle declares no difficulty field")
    (root / "envhub.toml").write_text(_manifest(
        name=name, count=len(tasks), split=split, difficulty=difficulty, with_files=with_files, with_texts=with_texts,
        with_setup=with_setup, network=network, agent=agent, tests_timeout=tests_timeout, memory=memory,
        disk=disk, command=command), encoding="utf-8")
    report = ImportReport(source=source, out=out, name=name, split=split, tasks=[t.report for t in tasks],
                          notes=notes)
    (root / "IMPORT-REPORT.md").write_text(report.to_markdown(), encoding="utf-8")
    (root / ".envhubignore").write_text("# The import report is for the author, not the published bundle.\n"
                                        "IMPORT-REPORT.md\n", encoding="utf-8")
    return report


def _manifest(*, name: str, count: int, split: str, difficulty: bool, with_files: bool, with_texts: bool,
              with_setup: bool,
              network: bool, agent: float, tests_timeout: float, memory: float, disk: float, command: float) -> str:
    q = json.dumps
    lines = [
        "# Written by `envhub import terminal-bench`; IMPORT-REPORT.md says what did not carry over.",
        "",
        "[environment]",
        f"name = {q(name)}",
        'version = "0.1.0"',
        f"description = {q(f'{count} terminal task(s) imported from Terminal-Bench / Harbor task directories.')}",
        'tags = ["tool-use", "terminal", "imported"]',
        f"canary = {q(new_canary())}",
        "",
        "[tasks]",
        'format = "jsonl"',
        'id-field = "id"',
        'prompt-field = "prompt"',
        *(['difficulty-field = "difficulty"   # easy 1, medium 2, hard 3'] if difficulty else []),
        f"splits.{split} = {{ path = {q(f'tasks/{split}.jsonl')} }}",
        "",
        "[harness]",
        'protocol = "tool-use"',
        'system-prompt = "prompts/system.md"',
        "max-turns = 100",
        'builtin-tools = ["bash", "read_file", "write_file", "edit_file", "list_files"]',
        "",
        "[verifier]",
        'kind = "workspace-tests"',
        'tests-field = "tests"',
        'tests-directory = "tests"',
        f"command = {q('bash /tests/' + ENTRY)}",
        f"timeout-s = {int(tests_timeout)}",
        "",
        "[state]",
        'kind = "sandbox"',
        *(['task-directory = "workspaces/{id}"   # what the Dockerfile COPYs into its working directory']
          if with_files else []),
        *(['files-field = "files"   # what the Dockerfile COPYs into its working directory'] if with_texts else []),
        *(['setup-field = "setup"   # the Dockerfile\'s ENV and the RUN commands that only touch the workspace']
          if with_setup else []),
        f"network = {'true' if network else 'false'}",
        'base = "host"',
        'reset = "per-episode"',
        "",
        "[state.limits]",
        f"command-timeout-s = {int(command)}",
        f"cpu-s = {int(command)}",
        f"memory-mb = {int(memory)}",
        f"disk-mb = {int(disk)}",
        "",
        "[config]",
        f"timeout-s = {int(agent)}",
        "",
    ]
    return "\n".join(lines)


_SYSTEM_PROMPT = """\
You work in a Linux shell, in the workspace directory /workspace, through tools: bash (the
working directory and exported variables carry over between commands), read_file,
write_file, edit_file and list_files. There is no network and nothing can be installed.

Do what the task asks. Its tests run after you finish, on the files you leave. When you are
done, reply with a one-line summary without calling a tool: a reply without tool calls ends
the task.
"""
