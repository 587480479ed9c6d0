"""Prompt templates (envhub._templates): rendering, errors that name the file and line, and the sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest

from envhub._templates import JUDGE_VARIABLES, TASK_VARIABLES, PromptTemplate, TemplateError, task_variables

ROW = {"question": "What is 6 x 7?", "answer": "42", "choices": ["41", "42"], "my-field": "dashed"}


def render(source: str, **variables: object) -> str:
    return PromptTemplate(source, name="prompt.j2", field="harness.prompt-template").render(**variables)


def variables(row: dict[str, object] = ROW, **more: object) -> dict[str, object]:
    return task_variables(row, task_id="t1", split="dev", params={"style": "terse"}, **more)


# --- rendering --------------------------------------------------------------------------------------------


def test_a_cot_wrapper_over_task_fields() -> None:
    source = ("{{ question }}\n{% for c in choices %}{{ loop.index }}. {{ c }}\n{% endfor %}"
              "Think step by step ({{ params.style }}), then answer. [{{ split }}/{{ task_id }}] "
              "{{ task['my-field'] }}\n")
    assert render(source, **variables()) == (
        "What is 6 x 7?\n1. 41\n2. 42\nThink step by step (terse), then answer. [dev/t1] dashed\n")


def test_the_named_variables_win_over_fields_of_the_same_name() -> None:
    row = {"split": "field-value", "task": "field-task", "q": "x"}
    out = render("{{ split }} {{ task['split'] }} {{ task.task }}", **variables(row))
    assert out == "dev field-value field-task"
    assert set(TASK_VARIABLES) <= set(variables()) and set(JUDGE_VARIABLES) - set(TASK_VARIABLES) == {
        "completion", "messages", "rubric"}


def test_values_are_not_rendered_again() -> None:
    row = {"question": "{{ 7*7 }} {% if true %}x{% endif %} {{ cycler.__init__ }}"}
    assert render("Q: {{ question }}", **variables(row)) == f"Q: {row['question']}"
    assert render("{{ 7*7 }}") == "49"  # control: the same text in the template itself is rendered


def test_no_autoescape_and_the_trailing_newline_is_kept() -> None:
    assert render("{{ x }}\n", x="<b>&'\"") == "<b>&'\"\n"


def test_from_file_reads_a_bundle_file(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "cot.j2").write_text("Solve: {{ question }}\n", encoding="utf-8")
    template = PromptTemplate.from_file(tmp_path, "prompts/cot.j2", what="harness.prompt-template")
    assert template.render(**variables()) == "Solve: What is 6 x 7?\n"
    assert (template.name, template.field) == ("prompts/cot.j2", "harness.prompt-template")


# --- errors name the template, the line and the fix ---------------------------------------------------------


def test_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "p.j2").write_text("Q: {{ question }}\n{% if question %}\nno end\n", encoding="utf-8")
    with pytest.raises(TemplateError) as exc:
        PromptTemplate.from_file(tmp_path, "p.j2", what="harness.prompt-template")
    assert exc.value.message == ("harness.prompt-template 'p.j2', line 2: Unexpected end of template. Jinja was "
                                 "looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block "
                                 "that needs to be closed is 'if'.")
    assert (exc.value.name, exc.value.line, exc.value.field) == ("p.j2", 2, "harness.prompt-template")
    assert exc.value.hint is not None and "{% raw %}" in exc.value.hint


@pytest.mark.parametrize(("relative", "message"), [
    ("missing.j2", "harness.prompt-template 'missing.j2' not found"),
    ("../outside.j2", "harness.prompt-template '../outside.j2' is outside the bundle"),
], ids=["missing", "outside"])
def test_a_file_that_cannot_be_used(tmp_path: Path, relative: str, message: str) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (tmp_path / "outside.j2").write_text("secret", encoding="utf-8")
    with pytest.raises(TemplateError) as exc:
        PromptTemplate.from_file(bundle, relative, what="harness.prompt-template")
    assert exc.value.message == message


def test_an_undefined_variable_names_the_variable_and_the_line() -> None:
    with pytest.raises(TemplateError) as exc:
        render("Q: {{ question }}\nHint: {{ hint }}", **variables())
    assert exc.value.message == "harness.prompt-template 'prompt.j2', line 2: 'hint' is undefined"
    assert exc.value.line == 2
    assert exc.value.hint is not None and "task_id" in exc.value.hint and "task.get('name')" in exc.value.hint
    assert render("{{ task.get('hint', 'none') }}", **variables()) == "none"  # the documented way out


def test_an_expression_that_fails_is_a_template_error() -> None:
    with pytest.raises(TemplateError) as exc:
        render("{{ 1 / 0 }}")
    assert exc.value.message == "harness.prompt-template 'prompt.j2', line 1: ZeroDivisionError: division by zero"


# --- the sandbox: each attack fails here, and a plain Jinja environment shows it would work --------------------


PLAIN = jinja2.Environment()


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.system('echo pwned > {marker}') }}",
    "{{ joiner.__init__.__globals__.os.system('echo pwned > {marker}') }}",
    "{{ lipsum.__globals__['os'].system('echo pwned > {marker}') }}",
    "{{ namespace.__init__.__globals__.os.system('echo pwned > {marker}') }}",
    "{{ x.__class__.__base__.__subclasses__() }}",
], ids=["mro", "cycler-globals", "joiner-globals", "lipsum-globals", "namespace-globals", "subclasses"])
def test_python_internals_are_out_of_reach(tmp_path: Path, source: str) -> None:
    marker = tmp_path / "pwned"
    source = source.replace("{marker}", str(marker))
    with pytest.raises(TemplateError) as exc:
        render(source, x=[1])
    expected = ("'lipsum' is undefined" if "lipsum" in source  # envhub drops lipsum from the globals
                else "not allowed in a prompt template: access to attribute")
    assert expected in exc.value.message
    assert not marker.exists()
    # Control: the plain engine runs the same expression, so the test would see an escape.
    PLAIN.from_string(source).render(x=[1])
    if "system" in source:
        assert marker.read_text() == "pwned\n"
        os.unlink(marker)


def test_values_cannot_be_changed() -> None:
    row = {"items": [1, 2]}
    with pytest.raises(TemplateError) as exc:
        render("{{ items.append(3) }}{{ items }}", **variables(row))
    assert "access to attribute 'append' of 'list' object is unsafe" in exc.value.message
    assert row["items"] == [1, 2]
    assert PLAIN.from_string("{{ items.append(3) }}{{ items }}").render(items=[1, 2]) == "None[1, 2, 3]"


@pytest.mark.parametrize(("source", "tag"), [
    ("{% include '/etc/passwd' %}", "include"),
    ("{% extends '/etc/passwd' %}", "extends"),
    ("{% import '/etc/passwd' as p %}", "import"),
    ("{% from '/etc/passwd' import x %}", "fromimport"),
], ids=["include", "extends", "import", "from-import"])
def test_templates_cannot_read_files(source: str, tag: str) -> None:
    with pytest.raises(TemplateError) as exc:
        PromptTemplate(f"line one\n{source}", name="p.j2")
    assert exc.value.message == (f"template 'p.j2', line 2: '{tag}' is not allowed; a prompt template cannot read "
                                 "other files")
    assert exc.value.line == 2
    if tag == "include":  # control: with a file loader, the same tag reads the file
        reader = jinja2.Environment(loader=jinja2.FileSystemLoader("/"))
        assert "root:" in reader.from_string("{% include 'etc/passwd' %}").render()


@pytest.mark.parametrize("source", ["{{ 'a' * 10**7 }}", "{{ [0] * 2000000 }}", "{{ 10 ** 100000 }}"],
                         ids=["string-repeat", "list-repeat", "power"])
def test_blow_ups_are_bounded(source: str) -> None:
    with pytest.raises(TemplateError) as exc:
        render(source)
    assert "not allowed in a prompt template" in exc.value.message
    assert len(PLAIN.from_string("{{ 'a' * 10**6 }}").render()) == 10**6  # control: a bound, not a ban
    assert render("{{ 'ab' * 3 }} {{ 2 ** 10 }}") == "ababab 1024"


# --- envhub validate: templates must exist and compile ------------------------------------------------------

MANIFEST = """\
[environment]
name = "acme/cot"
version = "1.0.0"
description = "Arithmetic, thought through."
canary = "envhub-canary:0123456789abcdef0123456789abcdef"

[tasks]
splits.train = {{ path = "tasks/train.jsonl" }}

[harness]
{harness}

[verifier]
{verifier}
"""
JUDGE = ('kind = "llm-judge"\nmodel = "judge-1"\nprompt-template = "prompts/judge.j2"\n'
         'verdict = { regex = "GRADE: (C|I)", labels = { C = 1, I = 0 } }')


def make_bundle(root: Path, *, harness: str = "", verifier: str = 'kind = "exact-match"',
                files: dict[str, str] | None = None) -> Path:
    contents = {"tasks/train.jsonl": '{"id": "a", "prompt": "1+1?", "answer": "2"}\n',
                "envhub.toml": MANIFEST.format(harness=harness, verifier=verifier), **(files or {})}
    for rel, text in contents.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def problems(root: Path) -> list[str]:
    from envhub.bundle import validate_bundle
    from envhub.context import make_plugin_manager

    return [p.render() for p in validate_bundle(root, plugins=make_plugin_manager(autoload=False)).problems
            if p.severity == "error"]


def test_validate_accepts_good_templates(tmp_path: Path) -> None:
    root = make_bundle(tmp_path, verifier=JUDGE,
                       harness='prompt-template = "prompts/cot.j2"\nsystem-prompt-template = "prompts/system.j2"',
                       files={"prompts/cot.j2": "{{ prompt }}\nThink step by step.\n",
                              "prompts/system.j2": "You are {{ params.persona | default('a tutor') }}.",
                              "prompts/judge.j2": "{{ completion }}\nEnd with GRADE: C or GRADE: I."})
    assert problems(root) == []


def test_validate_names_missing_templates(tmp_path: Path) -> None:
    root = make_bundle(tmp_path, verifier=JUDGE,
                       harness='prompt-template = "prompts/cot.j2"\nsystem-prompt-template = "prompts/system.j2"')
    root_shown = root.as_posix()
    assert problems(root) == [
        f"{root_shown}/envhub.toml:12:1: error: harness.system-prompt-template: 'prompts/system.j2' not found\n"
        "  hint: create it, or fix the path (relative to envhub.toml)",
        f"{root_shown}/envhub.toml:11:1: error: harness.prompt-template: 'prompts/cot.j2' not found\n"
        "  hint: create it, or fix the path (relative to envhub.toml)",
        f"{root_shown}/envhub.toml:17:1: error: verifier.prompt-template: 'prompts/judge.j2' not found\n"
        "  hint: create it, or fix the path (relative to envhub.toml)",
    ]


def test_validate_checks_a_rubric_criterion_judge_template(tmp_path: Path) -> None:
    verifier = ('kind = "rubric"\n[[verifier.criteria]]\nname = "style"\n' + JUDGE.replace("judge.j2", "style.j2"))
    root = make_bundle(tmp_path, verifier=verifier, files={"prompts/style.j2": "ok {{ completion }\n"})
    [problem] = problems(root)
    assert problem.startswith(f"{root.as_posix()}/prompts/style.j2:1: error: verifier.criteria[0].prompt-template: "
                              "not a valid prompt template: unexpected '}'")


def test_envhub_validate_reports_a_template_syntax_error(tmp_path: Path) -> None:
    from tests.conftest import run_envhub

    root = make_bundle(tmp_path / "b", harness='prompt-template = "prompts/cot.j2"',
                       files={"prompts/cot.j2": "{{ prompt }}\n{% for x in choices %}\n- {{ x }}\n"})
    result = run_envhub("validate", str(root))
    assert result.code == 2, result
    assert (f"{root.as_posix()}/prompts/cot.j2:3: error: harness.prompt-template: not a valid prompt template: "
            "Unexpected end of template. Jinja was looking for the following tags: 'endfor' or 'else'. "
            "The innermost block that needs to be closed is 'for'.\n  hint: fix the Jinja syntax") in result.out
    # Control: the same bundle with the block closed validates.
    (root / "prompts" / "cot.j2").write_text("{{ prompt }}\n{% for x in choices %}\n- {{ x }}\n{% endfor %}\n")
    assert run_envhub("validate", str(root)).code == 0
