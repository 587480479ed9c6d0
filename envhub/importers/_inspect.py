"""``envhub import inspect``: a bundle made from an inspect_ai task.

An inspect_ai task (``@task`` in a Python file) is a dataset of samples (``input``,
``target``, ``choices``, ``id``, ``metadata``), a solver chain and scorers. The source is
written as inspect users write it on inspect's command line: ``path/to/file.py@task_name``
(or ``path/to/file.py`` when the file defines one task). The file is imported and the task
function called with no arguments, as ``inspect eval`` does; what this writes:

- tasks: ``tasks/<split>.jsonl``, one row per sample, with the prompt as the solvers that
  only shape it would have sent it (``system_message``, ``multiple_choice``'s template),
  the sample's ``target`` (as inspect gave it: text or a list), ``choices``, ``metadata``,
  and a ``reference`` answer that inspect's scorer itself scored 1.0;
- the verifier, by the task's (first) scorer:

  - a built-in scorer that reads only the answer (``match``, ``includes``, ``exact``,
    ``pattern``, ``answer``, ``choice``, ``f1``, ``math``): verifier ``python``,
    ``envhub_inspect:score``, which calls that inspect scorer, made again from its registered
    name and arguments (``inspect_scorer.json``), on the episode's final answer; the reward
    is inspect's verdict (``C`` 1, ``I`` 0, ``P`` 0.5, or its number), so the two agree by
    construction, edge cases included;
  - ``model_graded_qa`` / ``model_graded_fact``: verifier ``llm-judge`` with inspect's grading
    template as the ``prompt-template`` and its ``GRADE: C/P/I`` pattern as the verdict.

What cannot carry over (tools, sandboxes, custom solvers and scorers, per-sample files and
setup, epochs, the other scorers of a task with several) is listed in the report. A source
that is not an inspect task is refused naming the file and the fix, and nothing is written.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import re
import string
import sys
import types
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envhub.canary import new_canary
from envhub.errors import UsageError
from envhub.ids import parse_name
from envhub.importers._report import CarriedOver
from envhub.importers._staging import check_destination, write_staged
from envhub.importers._terminal_bench import ImportSourceError
from envhub.problems import Problem

__all__ = ["InspectImport", "import_inspect", "run_inspect"]

#: inspect_ai's built-in scorers that read only the final answer (and the target and
#: choices): scored in the bundle by the scorer itself.
ANSWER_SCORERS = ("match", "includes", "exact", "pattern", "answer", "choice", "f1", "math")
#: inspect_ai's model-graded scorers: envhub's llm-judge, with inspect's template.
JUDGE_SCORERS = ("model_graded_qa", "model_graded_fact")
#: Solvers that only shape the prompt (carried into the rows) or generate once.
_PROMPT_SOLVERS = ("generate", "system_message", "multiple_choice", "prompt_template", "user_message")


@dataclass
class InspectImport(CarriedOver):
    """The outcome of one inspect_ai import: the bundle written, what was kept and what was not."""

    source: str
    out: Path
    name: str
    split: str
    task: str
    scorer: str
    verifier: str
    tasks: int
    references: int
    kept: list[str] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """What was imported: ``"task arith, scorer match, 3 task(s)"``."""
        return f"task {self.task}, scorer {self.scorer}, {self.tasks} task(s)"

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (``envhub import --json``)."""
        return {"kind": "inspect", "name": self.name, "out": str(self.out), "split": self.split, "task": self.task,
                "scorer": self.scorer, "verifier": self.verifier, "tasks": self.tasks,
                "references": self.references, "kept": self.kept, "dropped": self.not_carried}

    def to_markdown(self) -> str:
        return self.markdown(
            f"Imported by `envhub import inspect` from `{self.source}`: the inspect_ai task `{self.task}`, "
            f"{self.tasks} sample(s) as tasks in split `{self.split}`, scored by `{self.scorer}` through "
            f"envhub's `{self.verifier}` verifier; {self.references} task(s) with a reference answer; "
            f"{self.dropped} thing(s) not carried over. docs/importers.md explains the mapping.")


def run_inspect(source: Path, out: Path, options: Mapping[str, str]) -> InspectImport:
    """:func:`import_inspect` with its arguments as ``envhub import`` options (``name``,
    ``split``, ``judge-model``): the ``inspect`` importer's ``run``."""
    return import_inspect(str(source), out, name=options.get("name"), split=options.get("split", "test"),
                          judge_model=options.get("judge-model"))


def import_inspect(source: str | Path, out: Path, *, name: str | None = None, split: str = "test",
                   judge_model: str | None = None) -> InspectImport:
    """Write a bundle to ``out`` (a new or empty directory) from the inspect_ai task
    ``source`` (``path/to/file.py@task_name``, or ``path/to/file.py`` holding one task);
    return what was kept and what was not.

    ``judge_model`` pins the judge of a model-graded scorer that names none (inspect then
    grades with the model under evaluation, which envhub refuses as self-judging).

    Imports the file and calls the task function, as ``inspect eval`` does. Raises
    :class:`ImportSourceError` naming what makes ``source`` not an importable task,
    :class:`envhub.errors.UsageError` for a missing file, a missing inspect_ai, a non-empty
    ``out`` or a bad option, and :class:`envhub.errors.InvalidIdError` for a bad ``name``.
    Nothing is written when anything fails.
    """
    text = str(source)
    path_text, at, task_name = text.rpartition("@") if "@" in Path(text).name else (text, "", "")
    path = Path(path_text)
    if not path.is_file() or path.suffix != ".py":
        what = "does not exist" if not path.exists() else "is not a Python file (.py)"
        raise UsageError(f"{text}: {path} {what}",
                         hint="give the task as inspect does: path/to/file.py@task_name (or file.py with one @task)")
    if at and not task_name.isidentifier():
        raise UsageError(f"{text}: {task_name!r} is not a task name", hint="write file.py@task_name")
    env_name = str(parse_name(name or f"imported/{_slug(task_name or path.stem)}"))
    check_destination(split, out)
    try:
        import inspect_ai  # noqa: F401  # the peer package, imported only when this importer runs
    except ImportError as e:
        raise UsageError(f"importing {text} needs inspect_ai, which is not installed ({e})",
                         hint="pip install inspect-ai") from e
    found = _read_task(path, task_name or None, text, judge_model)
    return write_staged(out, lambda staging: _write_bundle(staging, found, source=text, out=out, name=env_name,
                                                           split=split))


# --------------------------------------------------------------------------- reading


@dataclass
class _Found:
    task: str
    description: str
    rows: list[dict[str, Any]]
    scorer: str  # the registered name, unqualified: "match"
    scorer_args: dict[str, Any]
    multiple_choice: dict[str, Any] | None  # multiple_choice's options when it is the solver
    judge: dict[str, Any] | None  # the llm-judge table for a model-graded scorer
    kept: list[str]
    not_carried: list[str]


def _problem(source: str, file: Path, message: str, hint: str, code: str = "import-inspect") -> ImportSourceError:
    return ImportSourceError(f"cannot import {source}: {message}", [Problem("error", code, message, file=str(file),
                                                                           hint=hint)])


def _read_task(path: Path, task_name: str | None, source: str, judge_model: str | None) -> _Found:
    from inspect_ai._util.registry import is_registry_object, registry_info, registry_params

    module = _import_file(path, source)
    tasks = {registry_info(obj).name.rpartition("/")[2]: obj for obj in vars(module).values()
             if is_registry_object(obj, "task")}
    if not tasks:
        raise _problem(source, path, "no inspect_ai task in this file",
                       "define the task with inspect_ai's @task decorator: @task def my_task() -> Task: ...")
    if task_name is None:
        if len(tasks) > 1:
            raise _problem(source, path, f"{len(tasks)} tasks in this file: {', '.join(sorted(tasks))}",
                           f"name one: {path}@{sorted(tasks)[0]}")
        task_name = next(iter(tasks))
    if task_name not in tasks:
        raise _problem(source, path, f"no task {task_name!r} in this file; it has {', '.join(sorted(tasks))}",
                       f"name one of them: {path}@{sorted(tasks)[0]}")
    try:
        task = tasks[task_name]()
    except Exception as e:  # the task's own code: its error is the user's to see, not a traceback
        raise _problem(source, path, f"calling the task {task_name}() raised {type(e).__name__}: {e}",
                       "an imported task is made with no arguments: give its parameters defaults") from e
    from inspect_ai import Task

    if not isinstance(task, Task):
        raise _problem(source, path, f"{task_name}() returned a {type(task).__name__}, not an inspect_ai Task",
                       "return inspect_ai.Task(dataset=..., solver=..., scorer=...)")
    kept: list[str] = []
    not_carried: list[str] = []

    # the scorer
    scorers = list(task.scorer or [])
    if not scorers:
        raise _problem(source, path, f"the task {task_name} has no scorer",
                       "give it one of inspect_ai's built-in scorers: " + ", ".join(ANSWER_SCORERS + JUDGE_SCORERS),
                       "import-inspect-scorer")
    first = scorers[0]
    scorer_name = registry_info(first).name if is_registry_object(first) else getattr(first, "__name__", "scorer")
    package, _, bare = scorer_name.rpartition("/")
    if package != "inspect_ai" or bare not in ANSWER_SCORERS + JUDGE_SCORERS:
        raise _problem(source, path, f"the task's scorer {scorer_name!r} is not one of inspect_ai's built-in scorers "
                       "that envhub can carry over (a custom scorer is code it cannot map)",
                       "score with one of " + ", ".join(ANSWER_SCORERS + JUDGE_SCORERS) + ", or write an envhub "
                       "verifier for the imported bundle by hand", "import-inspect-scorer")
    args = dict(registry_params(first))
    for other in scorers[1:]:
        other_name = registry_info(other).name if is_registry_object(other) else "a scorer"
        not_carried.append(f"scorer `{other_name}`: a task's further scorers are separate metrics in inspect; the "
                           "bundle's reward is the first scorer's")

    # the solvers
    solver_names: list[tuple[str, dict[str, Any]]] = []
    for solver in _solvers(task.solver):
        solver_name = registry_info(solver).name if is_registry_object(solver) else getattr(solver, "__name__",
                                                                                           "solver")
        solver_params = registry_params(solver) if is_registry_object(solver) else {}
        solver_names.append((solver_name, dict(solver_params)))
    multiple_choice = None
    system: list[str] = []
    prompt_templates: list[str] = []
    for solver_name, params in solver_names:
        package, _, bare = solver_name.rpartition("/")
        if package != "inspect_ai" or bare not in _PROMPT_SOLVERS:
            not_carried.append(f"solver `{solver_name}`: only solvers that shape the prompt ("
                               f"{', '.join(_PROMPT_SOLVERS)}) carry over; the model answers the prompt once")
        elif bare == "system_message":
            system.append(str(params.get("template", "")))
            kept.append("solver `system_message`: the system message, first in each task's chat")
        elif bare == "prompt_template":
            prompt_templates.append(str(params.get("template", "")))
            kept.append("solver `prompt_template`: applied to each prompt")
        elif bare == "multiple_choice":
            from inspect_ai.solver._multiple_choice import (
                MULTIPLE_ANSWER_TEMPLATE,
                MULTIPLE_ANSWER_TEMPLATE_COT,
                SINGLE_ANSWER_TEMPLATE,
                SINGLE_ANSWER_TEMPLATE_COT,
            )

            multiple = bool(params.get("multiple_correct", False))
            cot = bool(params.get("cot", False))
            template = params.get("template") or (
                (MULTIPLE_ANSWER_TEMPLATE_COT if cot else MULTIPLE_ANSWER_TEMPLATE) if multiple
                else (SINGLE_ANSWER_TEMPLATE_COT if cot else SINGLE_ANSWER_TEMPLATE))
            multiple_choice = {"template": str(template), "multiple_correct": multiple}
            kept.append("solver `multiple_choice`: its template renders each prompt with the lettered choices; the "
                        "answer is read from `ANSWER: X` as the solver reads it")
            if params.get("shuffle"):
                not_carried.append("multiple_choice(shuffle=...): the choices are in the dataset's order")
        elif bare == "user_message":
            not_carried.append("solver `user_message`: a second user message is not carried over")
    if bare_scorer(scorer_name) == "choice" and multiple_choice is None:
        not_carried.append("scorer `choice` without the `multiple_choice` solver: inspect marks no choice then, and "
                           "neither does envhub (every answer scores 0)")

    # the other settings
    for attr, why in (("sandbox", "a sandbox (tools run in it) has no envhub counterpart in a single-turn bundle"),
                      ("setup", "the task's setup solver"), ("cleanup", "the task's cleanup"),
                      ("approval", "tool approval"), ("epochs", "epochs (envhub repeats with --samples)"),
                      ("message_limit", "the message limit"), ("token_limit", "the token limit"),
                      ("time_limit", "the time limit"), ("working_limit", "the working limit"),
                      ("cost_limit", "the cost limit")):
        value = getattr(task, attr, None)
        if value:
            not_carried.append(f"Task({attr}=...): {why}")
    if getattr(task, "model", None) is not None:
        not_carried.append("Task(model=...): the policy is chosen at `envhub eval`")
    config = getattr(task, "config", None)
    if config is not None and any(v is not None for v in config.model_dump().values()):
        not_carried.append("Task(config=GenerateConfig(...)): sampling settings are the policy's, given at "
                           "`envhub eval`")

    rows = _rows(task, source, path, system, prompt_templates, multiple_choice, not_carried)
    kept.append(f"{len(rows)} sample(s): input as the prompt, target, choices, id and metadata as task fields")

    judge = None
    bare = bare_scorer(scorer_name)
    if bare in JUDGE_SCORERS:
        judge = _judge(bare, args, judge_model, source, path, not_carried)
        kept.append(f"scorer `{bare}`: envhub's llm-judge, with inspect's grading template and its GRADE pattern")
    else:
        try:
            json.dumps(args)
        except (TypeError, ValueError) as e:
            raise _problem(source, path, f"the scorer {scorer_name}'s arguments are not data: {e}",
                           "give the scorer plain arguments (text, numbers, booleans)",
                           "import-inspect-scorer") from e
        kept.append(f"scorer `{bare}` with {json.dumps(args)}: run by inspect_ai itself in the verifier, so the "
                    "rewards are inspect's verdicts")
    return _Found(task=task_name, description=str(getattr(task, "description", None) or ""), rows=rows,
                  scorer=bare, scorer_args=args, multiple_choice=multiple_choice, judge=judge, kept=kept,
                  not_carried=not_carried)


def bare_scorer(name: str) -> str:
    return name.rpartition("/")[2]


def _import_file(path: Path, source: str) -> types.ModuleType:
    """Import the task file as ``inspect eval`` does, with its directory on ``sys.path`` (for
    its sibling modules) while it loads."""
    module_name = f"_envhub_inspect_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise _problem(source, path, "cannot be imported as a Python module", "give a .py file")
    module = importlib.util.module_from_spec(spec)
    directory = str(path.resolve().parent)
    sys.path.insert(0, directory)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the file's own code: reported, not a traceback
        sys.modules.pop(module_name, None)
        raise _problem(source, path, f"importing it raised {type(e).__name__}: {e}",
                       "fix the file so that `python FILE` runs") from e
    finally:
        if sys.path and sys.path[0] == directory:
            del sys.path[0]
    return module


def _solvers(solver: Any) -> list[Any]:
    """The solver chain as a flat list (a Chain or Plan holds its steps)."""
    steps = getattr(solver, "steps", None) or getattr(solver, "_solvers", None)
    if steps is not None:
        return [s for step in steps for s in _solvers(step)]
    if isinstance(solver, list | tuple):
        return [s for step in solver for s in _solvers(step)]
    return [solver]


def _rows(task: Any, source: str, path: Path, system: list[str], prompt_templates: list[str],
          multiple_choice: dict[str, Any] | None, not_carried: list[str]) -> list[dict[str, Any]]:
    from inspect_ai.solver._multiple_choice import prompt as choice_prompt
    from inspect_ai.solver._task_state import Choices

    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    problems: list[Problem] = []
    sandboxed = 0
    dropped_metadata: set[str] = set()
    for index, sample in enumerate(task.dataset):
        sample_id = str(sample.id) if sample.id is not None else f"sample-{index + 1}"
        where = f"sample {sample_id!r}"
        if sample_id in seen:
            problems.append(Problem("error", "import-inspect-sample", f"{where}: the id is used twice",
                                    file=str(path), hint="give each sample its own id"))
            continue
        seen.add(sample_id)
        if sample.sandbox or sample.files or sample.setup:
            sandboxed += 1
        metadata: dict[str, Any] = {}
        for key, value in (sample.metadata or {}).items():
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                dropped_metadata.add(key)
                continue
            metadata[str(key)] = value
        question = _text_input(sample.input)
        if multiple_choice is not None:
            if not sample.choices:
                problems.append(Problem("error", "import-inspect-sample",
                                        f"{where}: the multiple_choice solver needs choices, and it has none",
                                        file=str(path), hint="give the sample choices=[...]"))
                continue
            question = choice_prompt(question=question, choices=Choices(list(sample.choices)),
                                     template=multiple_choice["template"])
        for template in prompt_templates:
            question = _format(template, {**metadata, "prompt": question})
        chat = [{"role": "system", "content": _format(text, metadata)} for text in system]
        if isinstance(sample.input, str) or multiple_choice is not None or prompt_templates:
            prompt: Any = question if not chat else [*chat, {"role": "user", "content": question}]
        else:
            prompt = [*chat, *({"role": m.role, "content": m.text} for m in sample.input)]
        row: dict[str, Any] = {"id": sample_id, "prompt": prompt, "input": _text_input(sample.input),
                               "target": sample.target}
        if sample.choices:
            row["choices"] = list(sample.choices)
        if metadata:
            row["metadata"] = metadata
        rows.append(row)
    if not rows and not problems:
        problems.append(Problem("error", "import-inspect-sample", "the task's dataset has no samples", file=str(path),
                                hint="give the task a dataset with at least one Sample"))
    if problems:
        raise ImportSourceError(f"cannot import {source}: {len(problems)} problem(s)", problems)
    if sandboxed:
        not_carried.append(f"{sandboxed} sample(s) with a sandbox, files or setup: not carried over (no sandbox in "
                           "the bundle)")
    for key in sorted(dropped_metadata):
        not_carried.append(f"metadata `{key}`: not JSON data, left out of the rows")
    return rows


def _text_input(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "\n\n".join(m.text for m in value if m.text)


def _format(template: str, values: Mapping[str, Any]) -> str:
    """``template`` with inspect's ``{name}`` fields filled from ``values``; names it does
    not know are left as written (inspect's templates do the same with missing metadata)."""

    class _Keep(dict[str, Any]):
        def __missing__(self, key: str) -> str:
            return "{" + key + "}"

    try:
        return template.format_map(_Keep(values))
    except (ValueError, IndexError, AttributeError, KeyError):
        return template


def _judge(bare: str, args: Mapping[str, Any], judge_model: str | None, source: str, path: Path,
           not_carried: list[str]) -> dict[str, Any]:
    """The llm-judge table for ``model_graded_qa`` / ``model_graded_fact``."""
    from inspect_ai.scorer._model import (
        DEFAULT_GRADE_PATTERN,
        DEFAULT_MODEL_GRADED_FACT_TEMPLATE,
        DEFAULT_MODEL_GRADED_QA_TEMPLATE,
        default_instructions,
    )

    model = args.get("model")
    if isinstance(model, list):
        not_carried.append(f"{bare}(model=[...]): several graders voting; envhub's judge is one model, the first")
        model = model[0] if model else None
    if model is not None and not isinstance(model, str):
        model = getattr(model, "name", None)
    model = judge_model or model
    if not model:
        raise _problem(source, path, f"the scorer {bare} names no grader model: inspect grades with the model under "
                       "evaluation, and envhub's judge is a pinned model", "give one: -o judge-model=MODEL "
                       "(a dated snapshot, e.g. gpt-4o-2024-08-06)", "import-inspect-scorer")
    if str(model).count("/") == 1 and str(model).split("/")[0] in ("openai", "anthropic", "google", "mistral"):
        model = str(model).split("/", 1)[1]  # inspect's provider/model: envhub's judge speaks OpenAI's API
    if args.get("include_history"):
        not_carried.append(f"{bare}(include_history=...): the judge sees the question, not the chat history")
    partial = bool(args.get("partial_credit", False))
    template = args.get("template") or (DEFAULT_MODEL_GRADED_QA_TEMPLATE if bare == "model_graded_qa"
                                        else DEFAULT_MODEL_GRADED_FACT_TEMPLATE)
    instructions = args.get("instructions") or default_instructions(partial)
    pattern = args.get("grade_pattern") or DEFAULT_GRADE_PATTERN
    return {"model": str(model), "template": _jinja(str(template), str(instructions)), "pattern": str(pattern),
            "labels": {"C": 1.0, "P": 0.5, "I": 0.0}}


def _jinja(template: str, instructions: str) -> str:
    """inspect's ``str.format`` grading template as a Jinja template over envhub's task
    fields: the literal text kept raw, ``{question}`` the sample's input, ``{answer}`` the
    completion, ``{criterion}`` the target, ``{instructions}`` the instructions, and any
    other ``{name}`` the sample's metadata."""
    parts: list[str] = []
    for literal, field_name, _spec, _conv in string.Formatter().parse(template):
        if literal:
            parts.append("{% raw %}" + literal + "{% endraw %}")
        if field_name is None:
            continue
        if field_name == "question":
            parts.append("{{ input }}")
        elif field_name == "answer":
            parts.append("{{ completion }}")
        elif field_name == "criterion":
            parts.append("{{ target if target is string else target | join(' ') }}")
        elif field_name == "instructions":
            parts.append("{% raw %}" + instructions + "{% endraw %}")
        else:
            parts.append("{{ (metadata or {}).get(" + json.dumps(field_name) + ", '') }}")
    return "".join(parts)


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:63].strip("-") or "task"


# --------------------------------------------------------------------------- writing


def _write_bundle(root: Path, found: _Found, *, source: str, out: Path, name: str, split: str) -> InspectImport:
    kept = list(found.kept)
    not_carried = list(found.not_carried)
    references = 0
    if found.judge is None:
        spec = {"scorer": found.scorer, "args": found.scorer_args, "multiple_choice": found.multiple_choice}
        (root / "inspect_scorer.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
        (root / "envhub_inspect.py").write_text(BRIDGE, encoding="utf-8")
        check = _load_bridge(spec)
        for row in found.rows:
            reference = _reference(row, found, check)
            if reference is None:
                not_carried.append(f"task {row['id']!r}: no reference answer (no answer envhub tried, the target "
                                   f"or `ANSWER: target`, scores 1.0 with {found.scorer})")
            else:
                row["reference"] = reference
                references += 1
        verifier = "python"
    else:
        (root / "prompts").mkdir()
        (root / "prompts" / "grade.j2").write_text(found.judge["template"], encoding="utf-8")
        for row in found.rows:
            target = row["target"]
            reference = target if isinstance(target, str) else (target[0] if target else None)
            if reference:
                row["reference"] = reference
                references += 1
        verifier = "llm-judge"
    (root / "tasks").mkdir()
    with (root / "tasks" / f"{split}.jsonl").open("w", encoding="utf-8") as f:
        for row in found.rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    (root / "envhub.toml").write_text(_manifest(found, name=name, split=split), encoding="utf-8")
    report = InspectImport(source=source, out=out, name=name, split=split, task=found.task, scorer=found.scorer,
                           verifier=verifier, tasks=len(found.rows), references=references, kept=kept,
                           not_carried=not_carried)
    (root / "IMPORT-REPORT.md").write_text(report.to_markdown(), encoding="utf-8")
    (root / ".envhubignore").write_text("# The import report is for the author, not the published bundle.\n"
                                        "IMPORT-REPORT.md\n", encoding="utf-8")
    return report


def _load_bridge(spec: Mapping[str, Any]) -> Callable[[Mapping[str, Any], str], float]:
    """The bundle's own scoring code (``BRIDGE``), run here to find reference answers, so
    a reference is one the bundle's verifier scores 1.0."""
    module = types.ModuleType("_envhub_inspect_bridge")
    module.__dict__["_SPEC_OVERRIDE"] = dict(spec)
    exec(compile(BRIDGE, "envhub_inspect.py", "exec"), module.__dict__)  # envhub's own template text
    verdict = module.__dict__["verdict"]

    def check(row: Mapping[str, Any], completion: str) -> float:
        value, _score = asyncio.run(verdict(row, completion))
        return float(value)

    return check


def _reference(row: Mapping[str, Any], found: _Found, check: Callable[[Mapping[str, Any], str], float]) \
        -> str | None:
    target = row["target"]
    targets = [target] if isinstance(target, str) else list(target)
    candidates = [*targets]
    if found.multiple_choice is not None or found.scorer == "choice":
        candidates.insert(0, "ANSWER: " + ", ".join(targets))
    candidates += [f"ANSWER: {t}" for t in targets]
    for candidate in candidates:
        try:
            value = check(row, candidate)
        except Exception:  # inspect's scorer refusing a candidate: try the next  # noqa: BLE001
            continue
        if not math.isnan(value) and value == 1.0:
            return candidate
    return None


def _manifest(found: _Found, *, name: str, split: str) -> str:
    q = json.dumps
    description = found.description or f"The inspect_ai task {found.task}, scored by {found.scorer}."
    lines = [
        "# Written by `envhub import inspect`; IMPORT-REPORT.md says what did not carry over.",
        "",
        "[environment]",
        f"name = {q(name)}",
        'version = "0.1.0"',
        f"description = {q(description)}",
        'tags = ["inspect-ai", "imported"]',
    ]
    if found.judge is None:
        lines.append('python-dependencies = ["inspect-ai"]')
    lines += [
        f"canary = {q(new_canary())}",
        "",
        "[tasks]",
        'format = "jsonl"',
        'id-field = "id"',
        'prompt-field = "prompt"',
        f"splits.{split} = {{ path = {q(f'tasks/{split}.jsonl')} }}",
        "",
        "[harness]",
        'protocol = "single-turn"',
        "",
        "[verifier]",
    ]
    if found.judge is None:
        lines += ['kind = "python"',
                  f'entry-point = "envhub_inspect:score"   # inspect_ai\'s {found.scorer} scorer, inspect_scorer.json']
    else:
        judge = found.judge
        labels = ", ".join(f"{k} = {v}" for k, v in judge["labels"].items())
        lines += ['kind = "llm-judge"',
                  f"model = {q(judge['model'])}",
                  f'prompt-template = "prompts/grade.j2"   # inspect\'s {found.scorer} template',
                  f"verdict = {{ regex = {q(judge['pattern'])}, labels = {{ {labels} }} }}"]
    lines.append("")
    return "\n".join(lines)


#: The bundle's verifier module, ``envhub_inspect.py``: inspect_ai's own scorer on the
#: episode's final answer.
BRIDGE = '''\
"""The bridge between envhub and inspect_ai's scorer (written by `envhub import inspect`;
docs/importers.md).

`score` is the bundle's verifier: it makes inspect_ai's built-in scorer again from
`inspect_scorer.json` (its name and arguments) and scores the episode's final answer with
it, for the task's `target` and `choices`, as inspect would have; the reward is the score's
value read by inspect's `value_to_float` (C 1, P 0.5, I 0, or the number).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any


@cache
def _spec() -> dict[str, Any]:
    override = globals().get("_SPEC_OVERRIDE")
    if override is not None:
        return dict(override)
    return json.loads(Path(__file__).with_name("inspect_scorer.json").read_text(encoding="utf-8"))


@cache
def _scorer() -> Any:
    import inspect_ai.scorer

    spec = _spec()
    return getattr(inspect_ai.scorer, spec["scorer"])(**spec["args"])


async def verdict(task: Mapping[str, Any], completion: str) -> tuple[float, Any]:
    """inspect_ai's score of `completion` for `task`, and its value as a float."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelName, ModelOutput
    from inspect_ai.scorer import Target, value_to_float
    from inspect_ai.solver import TaskState

    model = "envhub/policy"
    question = str(task.get("input") or "")
    target = Target(task["target"])
    state = TaskState(model=ModelName(model), sample_id=str(task.get("id", "")), epoch=1, input=question,
                      messages=[ChatMessageUser(content=question), ChatMessageAssistant(content=completion)],
                      target=target, choices=task.get("choices"), output=ModelOutput.from_content(model, completion),
                      metadata=dict(task.get("metadata") or {}))
    multiple_choice = _spec().get("multiple_choice")
    if multiple_choice is not None and task.get("choices"):
        # what inspect's multiple_choice solver does after generating: mark the choices the answer names
        from inspect_ai.solver._multiple_choice import parse_answers, set_choices_based_on_generated_response

        answers = parse_answers(state, bool(multiple_choice.get("multiple_correct")))
        if answers:
            set_choices_based_on_generated_response(state, answers)
    score = await _scorer()(state, target)
    return float(value_to_float()(score.value)), score


async def score(task: Any, completion: str) -> dict[str, Any]:
    """The reward: inspect_ai's verdict on the final answer."""
    value, result = await verdict(task, completion)
    explanation = result.explanation if isinstance(result.explanation, str) else None
    return {"reward": min(1.0, max(0.0, value)),
            "info": {"inspect_value": result.value, "answer": result.answer,
                     "explanation": explanation[:500] if explanation else None}}
'''
