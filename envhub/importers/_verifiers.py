"""``envhub import verifiers``: a bundle made from a verifiers (``verifiers.v1``) environment.

A verifiers v1 environment is a package exporting a ``Taskset`` subclass (``__all__``): its
``load()`` yields ``Task`` objects whose ``data`` (a ``TaskData`` model: ``prompt``,
``system_prompt``, ``id``, ``name`` and the environment's own fields such as ``answer`` or
``info``) is the row, and whose rubric is the task's weighted ``@vf.reward`` methods, the
rewards plugged through ``TaskConfig.rewards``, and the judges of ``TaskConfig.judges``.
The source is the package's directory (what ``vf-init`` writes, or the package inside it) or
the name of an installed taskset package, as ``vf-eval`` takes it; the taskset is loaded
with its default config, through verifiers itself.

What carries over:

- every task's data as a row of ``tasks/<split>.jsonl`` (the prompt as text or a chat, the
  system prompt first in the chat, the prompt as text in ``prompt_text`` (what verifiers'
  judges show as the question), every other field as a task field);
- the rewards that are data in all but name, recognised from their source text (``ast``):
  ``return trace.last_reply == self.data.FIELD`` (``.strip()``/``.lower()`` allowed, also as
  ``float(...)`` or ``1.0 if ... else 0.0``) is ``exact-match``;
  ``return verify_boxed_math_answer(trace.last_reply, self.data.FIELD)`` (verifiers' own math
  check) is ``numeric`` with ``extract = "boxed"``;
- verifiers' built-in reference judge (``ReferenceJudge``) is ``llm-judge`` with its prompt
  as the ``prompt-template`` and its two labels as the verdict.

One criterion of weight 1 is the verifier itself; otherwise a ``rubric`` whose criteria keep
the weights. verifiers adds the weighted scores (``Σ weight·score``); envhub's rubric divides by
the total weight, so the two agree when the weights sum to 1 and the report says when they do
not. Every other reward (code envhub cannot read as one of these), a judge of another kind,
and the settings only a container gives (images, workdirs, resources, tool servers) are
listed in the report as not carried over.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envhub.canary import new_canary
from envhub.errors import UsageError
from envhub.ids import parse_name
from envhub.importers._options import integer
from envhub.importers._report import CarriedOver
from envhub.importers._staging import check_destination, write_staged
from envhub.importers._terminal_bench import ImportSourceError
from envhub.problems import Problem

__all__ = ["VerifiersImport", "import_verifiers", "run_verifiers"]

#: TaskData's own fields that are not row data (the row keeps the environment's fields).
_HOUSEKEEPING = {"idx", "id", "name", "description", "prompt", "prompt_text", "system_prompt", "image", "workdir",
                 "agent_user", "skills", "network_allow", "network_block", "artifacts", "artifact_max_bytes", "timeout",
                 "resources"}
#: TaskData fields whose setting needs a container: reported when a task sets them.
_CONTAINER = ("image", "workdir", "agent_user", "skills", "artifacts")


@dataclass
class VerifiersImport(CarriedOver):
    """The outcome of one verifiers import: the bundle written, what was kept and what was not."""

    source: str
    out: Path
    name: str
    split: str
    taskset: str
    tasks: int
    criteria: list[dict[str, Any]]
    kept: list[str] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """What was imported: ``"MathTaskset, 2 criteria, 5 task(s)"``."""
        return f"{self.taskset}, {len(self.criteria)} criteria, {self.tasks} task(s)"

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (``envhub import --json``)."""
        return {"kind": "verifiers", "name": self.name, "out": str(self.out), "split": self.split,
                "taskset": self.taskset, "tasks": self.tasks, "criteria": self.criteria, "kept": self.kept,
                "dropped": self.not_carried}

    def to_markdown(self) -> str:
        return self.markdown(
            f"Imported by `envhub import verifiers` from `{self.source}`: the taskset `{self.taskset}`, "
            f"{self.tasks} task(s) in split `{self.split}`, scored by "
            + ", ".join(f"`{c['name']}` ({c['kind']}, weight {c['weight']:g})" for c in self.criteria)
            + f"; {self.dropped} thing(s) not carried over. docs/importers.md explains the mapping.")


def run_verifiers(source: Path, out: Path, options: Mapping[str, str]) -> VerifiersImport:
    """:func:`import_verifiers` with its arguments as ``envhub import`` options (``name``,
    ``split``, ``limit``, ``judge-model``): the ``verifiers`` importer's ``run``."""
    limit = integer(options, "limit", 0, minimum=0, maximum=10_000_000)
    return import_verifiers(str(source), out, name=options.get("name"), split=options.get("split", "test"),
                            limit=limit or None, judge_model=options.get("judge-model"))


def import_verifiers(source: str | Path, out: Path, *, name: str | None = None, split: str = "test",
                     limit: int | None = None, judge_model: str | None = None) -> VerifiersImport:
    """Write a bundle to ``out`` (a new or empty directory) from the verifiers environment
    ``source``: a package directory (or a project directory holding one package), or the
    name of an installed taskset package. Return what was kept and what was not.

    ``limit`` keeps the first tasks only (a taskset may be large or endless); ``judge_model``
    replaces the model of a reference judge.

    Loads the taskset with verifiers (its code runs). Raises :class:`ImportSourceError`
    naming what makes ``source`` not an importable environment (no taskset, no reward that
    maps), :class:`envhub.errors.UsageError` for a missing source, a missing verifiers, a
    non-empty ``out`` or a bad option, and :class:`envhub.errors.InvalidIdError` for a bad
    ``name``. Nothing is written when anything fails.
    """
    text = str(source)
    path = Path(text)
    looks_like_path = path.exists() or "/" in text or text.startswith(".")
    if looks_like_path and not path.is_dir():
        raise UsageError(f"{text} is not a directory",
                         hint="give the environment's package directory (what vf-init writes), or the name of an "
                              "installed taskset package")
    if not looks_like_path and not re.fullmatch(r"[A-Za-z_][\w.-]*", text):
        raise UsageError(f"{text!r} is neither a directory nor a package name",
                         hint="give the environment's package directory, or an installed taskset package's name")
    check_destination(split, out)
    try:
        import verifiers.v1  # type: ignore[import-untyped]  # noqa: F401  # the peer package, imported only when this importer runs
    except ImportError as e:
        raise UsageError(f"importing {text} needs verifiers, which is not installed ({e})",
                         hint="pip install verifiers") from e
    found = _read(text, path if looks_like_path else None, limit, judge_model)
    default = found.package.replace("_", "-")
    env_name = str(parse_name(name or f"imported/{_slug(default)}"))
    return write_staged(out, lambda staging: _write_bundle(staging, found, source=text, out=out, name=env_name,
                                                           split=split))


# --------------------------------------------------------------------------- reading


@dataclass
class _Found:
    package: str
    taskset: str
    rows: list[dict[str, Any]]
    criteria: list[dict[str, Any]]  # envhub criteria: name, kind, weight and the kind's keys
    prompts: dict[str, str]  # bundle path -> text (judge templates)
    kept: list[str]
    not_carried: list[str]


def _fail(source: str, where: str, message: str, hint: str, code: str = "import-verifiers") -> ImportSourceError:
    return ImportSourceError(f"cannot import {source}: {message}",
                             [Problem("error", code, message, file=where, hint=hint)])


def _package_of(path: Path, source: str) -> tuple[Path, str]:
    """(the directory to put on sys.path, the package's name) for a source directory."""
    if (path / "__init__.py").is_file():
        return path.resolve().parent, path.resolve().name
    packages = sorted(p.name for p in path.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
                      and not p.name.startswith((".", "_")) and p.name not in ("tests", "test"))
    if len(packages) == 1:
        return path.resolve(), packages[0]
    what = "no Python package" if not packages else f"{len(packages)} packages ({', '.join(packages)})"
    raise _fail(source, str(path), f"{what} in this directory; a verifiers environment is one package",
                "give the package directory itself (the one with __init__.py exporting the Taskset)")


def _read(source: str, path: Path | None, limit: int | None, judge_model: str | None) -> _Found:
    from verifiers.v1 import Taskset, TasksetConfig
    from verifiers.v1.utils.generic import concrete_type  # type: ignore[import-untyped]

    if path is not None:
        root, package = _package_of(path, source)
        sys.path.insert(0, str(root))
        for cached in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[cached]  # another source of the same name imported before
    else:
        root, package = Path(), source
    where = str(path) if path is not None else source
    try:
        try:
            module = importlib.import_module(package)
        except Exception as e:  # the environment's own code: reported, not a traceback
            raise _fail(source, where, f"importing the package {package} raised {type(e).__name__}: {e}",
                        "fix the package so that `python -c 'import " + package + "'` works"
                        + (" (is it installed?)" if path is None else "")) from e
        exported = [getattr(module, n, None) for n in getattr(module, "__all__", [])]
        tasksets = [c for c in exported if isinstance(c, type) and issubclass(c, Taskset) and c is not Taskset]
        if len(tasksets) != 1:
            found = "no Taskset subclass" if not tasksets else f"{len(tasksets)} Taskset subclasses"
            raise _fail(source, where, f"not a verifiers environment: the package {package} exports {found} in "
                        "__all__", "export exactly one verifiers.v1.Taskset subclass in __all__ (as vf-init writes "
                        "it)")
        cls = tasksets[0]
        if getattr(cls, "INFINITE", False) and limit is None:
            raise _fail(source, where, f"{cls.__name__} yields tasks without end", "give -o limit=N")
        config_cls = concrete_type(cls, TasksetConfig) or TasksetConfig
        try:
            taskset = cls(config_cls(id=package))
            tasks = []
            for task in taskset:
                tasks.append(task)
                if limit is not None and len(tasks) >= limit:
                    break
        except Exception as e:  # the taskset's own load(): reported
            raise _fail(source, where, f"loading the taskset {cls.__name__} raised {type(e).__name__}: {e}",
                        "fix its load() so that it yields tasks with its default config") from e
        if not tasks:
            raise _fail(source, where, f"the taskset {cls.__name__} yields no tasks",
                        "make its load() yield at least one task")
        kept: list[str] = []
        not_carried: list[str] = []
        rows = _rows(tasks, not_carried)
        kept.append(f"{len(rows)} task(s) of {cls.__name__}: the prompt (and system prompt) as the prompt, the other "
                    "fields of the task data as task fields")
        criteria, prompts = _rubric(tasks[0], judge_model, kept, not_carried)
        if not criteria:
            raise _fail(source, where, f"no reward of {cls.__name__}'s tasks maps to an envhub verifier: "
                        + "; ".join(not_carried), "score with an exact match of trace.last_reply and a task field, "
                        "verify_boxed_math_answer, or the reference judge; or write the bundle's verifier by hand",
                        "import-verifiers-rubric")
        for row in rows:
            for criterion in criteria:
                read = criterion.get("field")
                if read is not None and read not in row:
                    raise _fail(source, where, f"task {row['id']!r} has no field {read!r}, which the reward "
                                f"{criterion['name']!r} reads", "give every task that field")
        return _Found(package=package, taskset=cls.__name__, rows=rows, criteria=criteria, prompts=prompts,
                      kept=kept, not_carried=not_carried)
    finally:
        if path is not None and sys.path and sys.path[0] == str(root):
            del sys.path[0]


def _rows(tasks: list[Any], not_carried: list[str]) -> list[dict[str, Any]]:
    from verifiers.v1.types import content_text  # type: ignore[import-untyped]

    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    container: dict[str, int] = {}
    for position, task in enumerate(tasks):
        data = task.data
        task_id = str(data.id or data.name or f"task-{data.idx if data.idx is not None else position}")
        if task_id in seen:
            task_id = f"{task_id}-{position}"
        seen.add(task_id)
        if isinstance(data.prompt, str) or data.prompt is None:
            chat = [{"role": "user", "content": data.prompt or ""}]
        else:
            chat = [{"role": m.role, "content": content_text(m.content)} for m in data.prompt]
        if data.system_prompt:
            chat.insert(0, {"role": "system", "content": data.system_prompt})
        prompt: Any = chat[0]["content"] if len(chat) == 1 and chat[0]["role"] == "user" else chat
        row: dict[str, Any] = {"id": task_id, "prompt": prompt, "prompt_text": data.prompt_text}
        dumped = data.model_dump(mode="json", exclude_none=True)
        for key, value in dumped.items():
            if key not in _HOUSEKEEPING:
                row[key] = value
        for key in _CONTAINER:
            if dumped.get(key):
                container[key] = container.get(key, 0) + 1
        rows.append(row)
    for key, count in container.items():
        not_carried.append(f"TaskData.{key} on {count} task(s): needs a container, which a single-turn bundle "
                           "does not run")
    return rows


def _rubric(task: Any, judge_model: str | None, kept: list[str], not_carried: list[str]) \
        -> tuple[list[dict[str, Any]], dict[str, str]]:
    """envhub criteria for the task's rewards and judges (the first task's: the rubric is
    the task type's, and its config is the taskset's)."""
    criteria: list[dict[str, Any]] = []
    prompts: dict[str, str] = {}
    for fn in task.hooks("reward"):
        name = fn.__name__
        weight = float(getattr(fn, "_vf_weight", 1.0))
        mapped, why = _map_reward(fn)
        if mapped is None:
            not_carried.append(f"reward `{name}` (weight {weight:g}): {why}")
            continue
        criteria.append({"name": name, "weight": weight, **mapped})
        kept.append(f"reward `{name}` (weight {weight:g}): envhub's {mapped['kind']}"
                    + (f" on field `{mapped['field']}`" if "field" in mapped else ""))
    for judge in task.plugged_judges():
        config = judge.config
        name = config.name or config.id or type(judge).__name__
        weight = float(config.weight)
        if type(judge).__name__ != "ReferenceJudge":
            not_carried.append(f"judge `{name}` ({type(judge).__name__}, weight {weight:g}): only verifiers' "
                               "reference judge maps to envhub's llm-judge")
            continue
        template_text = Path(config.prompt).read_text(encoding="utf-8") if config.prompt else type(judge).prompt
        positive, negative = config.choices
        template = _jinja(template_text, question=config.question_field or "prompt_text",
                          answer=config.answer_field, positive=positive, negative=negative)
        prompts[f"prompts/{name}.j2"] = template
        model = judge_model or str(config.model)
        if model.count("/") == 1 and model.split("/")[0] in ("openai", "anthropic", "google"):
            model = model.split("/", 1)[1]  # verifiers' provider/model: envhub's judge speaks OpenAI's API
        labels = {positive: 1.0, negative: 0.0}
        criteria.append({"name": name, "weight": weight, "kind": "llm-judge", "model": model,
                         "prompt-template": f"prompts/{name}.j2", "answer-field": config.answer_field,
                         "verdict": {"regex": rf"(?is).*\b({re.escape(positive)}|{re.escape(negative)})\b",
                                     "labels": labels}})
        kept.append(f"judge `{name}` (reference judge, weight {weight:g}): envhub's llm-judge with its prompt; the "
                    f"verdict is the last `{positive}` or `{negative}` in the reply")
        if config.view != "last_reply":
            not_carried.append(f"judge `{name}`: view {config.view!r}; envhub's judge template sees the final answer")
    total = sum(c["weight"] for c in criteria)
    if criteria and abs(total - 1.0) > 1e-9:
        not_carried.append(f"the weights sum to {total:g}: verifiers adds weighted scores (Σ weight·score), envhub's "
                           f"rubric takes their weighted mean, so envhub's reward is verifiers' divided by {total:g}")
    for criterion in criteria:
        if criterion["weight"] < 0:
            not_carried.append(f"reward `{criterion['name']}` has a negative weight; envhub's rubric takes weights "
                               "of 0 or more")
    return [c for c in criteria if c["weight"] >= 0], prompts


def _jinja(template: str, *, question: str, answer: str, positive: str, negative: str) -> str:
    """verifiers' ``str.format`` judge prompt as a Jinja template over envhub's task fields."""
    import string

    parts: list[str] = []
    for literal, name, _spec, _conv in string.Formatter().parse(template):
        if literal:
            parts.append("{% raw %}" + literal + "{% endraw %}")
        if name is None:
            continue
        if name == "question":
            parts.append("{{ " + question + " }}")
        elif name == "answer":
            parts.append("{{ " + answer + " if " + answer + " is string else " + answer + " | join('\\n') }}")
        elif name == "response":
            parts.append("{{ completion }}")
        elif name in ("positive", "negative"):
            parts.append("{% raw %}" + (positive if name == "positive" else negative) + "{% endraw %}")
        else:
            parts.append("{{ " + name + " }}")
    return "".join(parts)


# --------------------------------------------------------------------------- the rewards


def _map_reward(fn: Callable[..., Any]) -> tuple[dict[str, Any] | None, str]:
    """The envhub verifier a reward function is, read from its source, or (None, why not)."""
    target = inspect.unwrap(fn)
    target = getattr(target, "__func__", target)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(target)))
    except (OSError, TypeError, SyntaxError) as e:
        return None, f"its source cannot be read ({e})"
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None, "not a function"
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None, ("custom code: only a reward that is one `return` of an exact match or of "
                      "verify_boxed_math_answer maps to an envhub verifier")
    expr = _unwrap_number(body[0].value)
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], ast.Eq):
        left, right = _text(expr.left), _text(expr.comparators[0])
        if left is not None and right is not None:
            (reply, reply_ops), (field_name, field_ops) = (left, right) if left[0] == "reply" else (right, left)
            if reply == "reply" and field_name not in (None, "reply"):
                lower = "lower" in reply_ops or "casefold" in reply_ops
                if lower != ("lower" in field_ops or "casefold" in field_ops):
                    return None, "compares the reply and the field with different case folding"
                return {"kind": "exact-match", "field": field_name,
                        "normalize": ["strip", "lower"] if lower else ["strip"]}, ""
    if isinstance(expr, ast.Call) and _name(expr.func) == "verify_boxed_math_answer" and len(expr.args) >= 2:
        answer_read, field_read = _text(expr.args[0]), _text(expr.args[1])
        if answer_read is not None and answer_read[0] == "reply" and field_read is not None \
                and field_read[0] != "reply":
            return {"kind": "numeric", "field": field_read[0], "extract": "boxed", "tolerance": 0.0}, ""
    return None, ("custom code: its return is not an exact match of trace.last_reply and a task field, nor "
                  "verify_boxed_math_answer(trace.last_reply, a task field)")


def _unwrap_number(expr: ast.expr) -> ast.expr:
    """``float(x)``, ``int(x)`` and ``1.0 if x else 0.0`` as ``x``."""
    if isinstance(expr, ast.Call) and _name(expr.func) in ("float", "int") and len(expr.args) == 1:
        return _unwrap_number(expr.args[0])
    if isinstance(expr, ast.IfExp) and isinstance(expr.body, ast.Constant) and isinstance(expr.orelse, ast.Constant) \
            and expr.body.value == 1 and expr.orelse.value == 0:
        return expr.test
    return expr


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _text(expr: ast.expr) -> tuple[str, list[str]] | None:
    """What a text expression reads, with the string methods applied to it:
    ``("reply", ["strip"])`` for ``trace.last_reply.strip()``, ``("answer", [])`` for
    ``self.data.answer`` or ``task.answer``; None for anything else."""
    ops: list[str] = []
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.args \
            and expr.func.attr in ("strip", "lower", "casefold"):
        ops.append(expr.func.attr)
        expr = expr.func.value
    if isinstance(expr, ast.Attribute):
        base = ast.unparse(expr.value)
        if expr.attr == "last_reply" and base == "trace":
            return "reply", ops
        if base in ("self.data", "task", "data"):
            return expr.attr, ops
    return None


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:63].strip("-") or "environment"


# --------------------------------------------------------------------------- writing


def _write_bundle(root: Path, found: _Found, *, source: str, out: Path, name: str, split: str) -> VerifiersImport:
    (root / "tasks").mkdir()
    with (root / "tasks" / f"{split}.jsonl").open("w", encoding="utf-8") as f:
        for row in found.rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    for rel, text in found.prompts.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "envhub.toml").write_text(_manifest(found, name=name, split=split), encoding="utf-8")
    report = VerifiersImport(source=source, out=out, name=name, split=split, taskset=found.taskset,
                             tasks=len(found.rows), criteria=[dict(c) for c in found.criteria], kept=list(found.kept),
                             not_carried=list(found.not_carried))
    (root / "IMPORT-REPORT.md").write_text(report.to_markdown(), encoding="utf-8")
    (root / ".envhubignore").write_text("# The import report is for the author, not the published bundle.\n"
                                        "IMPORT-REPORT.md\n", encoding="utf-8")
    return report


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value)) if isinstance(value, float) else str(value)
    return json.dumps(str(value))


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _verifier_keys(criterion: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in criterion.items() if k not in ("name", "weight", "answer-field")}


def _manifest(found: _Found, *, name: str, split: str) -> str:
    q = json.dumps
    lines = [
        "# Written by `envhub import verifiers`; IMPORT-REPORT.md says what did not carry over.",
        "",
        "[environment]",
        f"name = {q(name)}",
        'version = "0.1.0"',
        f"description = {q(f'The verifiers environment {found.package} ({found.taskset}).')}",
        'tags = ["verifiers", "imported"]',
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
    criteria = sorted(found.criteria, key=lambda c: -c["weight"])  # the reference is the heaviest criterion's
    if len(criteria) == 1 and criteria[0]["weight"] == 1.0:
        lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in _verifier_keys(criteria[0]).items()]
    else:
        lines += ['kind = "rubric"', "criteria = ["]
        for c in criteria:
            lines.append("  " + _toml_value({"name": c["name"], **_verifier_keys(c), "weight": c["weight"]}) + ",")
        lines.append("]")
    lines.append("")
    return "\n".join(lines)
