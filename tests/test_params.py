"""``[config.params]`` reach the code spec/manifest.md section 13 says: tools (a parameter
annotated ``Params[T]``), python verifiers and rubric criteria (a ``params`` parameter),
python state classes (a ``params`` parameter), spec tools' handlers; each tested on a real
bundle in ``tmp_path``, with controls that the params are not taken by name, are read-only,
and do not reach code that does not ask for them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import envhub
from envhub.context import make_plugin_manager
from envhub.manifest import PythonCriterion, PythonVerifier, Rubric, StateSection
from envhub.runtime import Task, Trajectory, make_tool
from envhub.runtime._code import CodeSpace
from envhub.runtime._state import make_state_factory, python_state
from envhub.runtime.verifiers import VerifierContext, build_verifier
from envhub.settings import load_settings

PLUGINS = make_plugin_manager(autoload=False)
PARAMS = {"greeting": "Ahoy", "stock": {"apple": 3}, "threshold": 2}
TASK = Task(id="t1", split="dev", data={"id": "t1", "prompt": "How many apples?", "answer": "3"},
            prompt="How many apples?")

CODE = '''
from collections.abc import Mapping
from typing import Any

from envhub.runtime import State
from envhub.runtime._tools import Params


def stock(item: str, *, config: Params[Mapping[str, Any]]) -> str:
    """How many of an item are in stock.

    Args:
        item: the item's name.
    """
    return str(config["stock"].get(item, 0))


def shout(text: str, params: dict) -> str:
    """Echo text with the model's own params argument (not the manifest's)."""
    return text + json.dumps(params, sort_keys=True)


def grab(*, config: Params[Mapping[str, Any]]) -> str:
    """Try to change the params."""
    config["stock"] = {}
    return "changed"


def both(*, a: Params[dict], b: Params[dict]) -> str:
    return ""


def counted(item: str, *, shelf: State[Any], config: Params[Mapping[str, Any]]) -> str:
    """Stock on the episode's shelf, at least the params' threshold."""
    return str(max(shelf.count(item), config["threshold"]))


class Shelf:
    def __init__(self, params):
        self.items = [name for name, n in params["stock"].items() for _ in range(n)]
        self.params = params

    def count(self, item):
        return self.items.count(item)


class Plain:
    def __init__(self):
        self.items = []


class Loose:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


def verify(completion, params):
    return completion.strip() == str(params["stock"]["apple"])


def verify_kwargs(**kwargs):
    return {"reward": 1.0, "info": {"keys": sorted(kwargs)}}


def verify_named_and_kwargs(params, **kwargs):
    return {"reward": 1.0, "info": {"greeting": params["greeting"], "keys": sorted(kwargs)}}


def threshold(completion, params):
    return float(int(completion) >= params["threshold"])
'''


def bundle(tmp_path: Path, *, params: dict[str, Any] = PARAMS, state: str = 'kind = "python"\nentry-point = '
           '"shop.code:Shelf"\nreset = "per-episode"', verifier: str = 'kind = "python"\n'
           'entry-point = "shop.code:verify"') -> Path:
    root = tmp_path / "shop"
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "__init__.py").write_text("", encoding="utf-8")
    (root / "shop" / "code.py").write_text("import json\n" + CODE, encoding="utf-8")
    (root / "tasks").mkdir()
    (root / "tasks" / "dev.jsonl").write_text(json.dumps(TASK.data) + "\n", encoding="utf-8")
    table = "\n".join(f"{k} = {json.dumps(v)}" if not isinstance(v, dict) else
                      f"{k} = {{ {', '.join(f'{a} = {json.dumps(b)}' for a, b in v.items())} }}"
                      for k, v in params.items())
    (root / "envhub.toml").write_text(textwrap.dedent("""\
        [environment]
        name = "acme/shop"
        version = "0.1.0"
        description = "Params reach the code."
        license = "MIT"

        [tasks]
        format = "jsonl"
        splits.dev = { path = "tasks/dev.jsonl" }

        [harness]
        protocol = "tool-use"
        max-turns = 4
        tools = ["shop.code:stock", "shop.code:counted"]

        [verifier]
        """) + verifier + "\n\n[state]\n" + state + "\n\n[config]\ntimeout-s = 60\n\n[config.params]\n" + table + "\n",
        encoding="utf-8")
    return root


def code(root: Path) -> CodeSpace:
    return CodeSpace(root, "acme/shop", trusted=True, trust_hint="")


def call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def verifier_ctx(root: Path, params: dict[str, Any] = PARAMS) -> VerifierContext:
    return VerifierContext(root=root, load_entry_point=code(root).load, settings=load_settings({}),
                           params=params)


# --- tools ---------------------------------------------------------------------------------------------------


def test_a_params_annotated_tool_parameter_receives_the_params_and_is_hidden(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    tool = make_tool(code(root).load("shop.code:stock"), source="shop.code:stock", params=PARAMS)
    assert tool.spec["function"]["parameters"]["properties"] == {"item": {"type": "string", "description":
                                                                         "the item's name."}}
    assert tool.spec["function"]["parameters"]["required"] == ["item"]
    assert tool.call(call("stock", {"item": "apple"})).message["content"] == "3"
    assert tool.call(call("stock", {"item": "pear"})).message["content"] == "0"
    # The model cannot fill it in: an argument of that name is refused as an extra argument.
    refused = tool.call(call("stock", {"item": "apple", "config": {"stock": {"apple": 99}}}))
    assert refused.fault == "model" and "config" in (refused.error or "")


def test_a_parameter_named_params_is_the_models_argument(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    tool = make_tool(code(root).load("shop.code:shout"), params=PARAMS)
    assert set(tool.spec["function"]["parameters"]["properties"]) == {"text", "params"}
    result = tool.call(call("shout", {"text": "hi", "params": {"mine": 1}}))
    assert result.message["content"] == 'hi{"mine": 1}'


def test_a_tool_cannot_change_the_params_the_next_call_sees(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    loaded = code(root)
    grab = make_tool(loaded.load("shop.code:grab"), params=PARAMS)
    stock = make_tool(loaded.load("shop.code:stock"), params=PARAMS)
    result = grab.call(call("grab", {}))
    assert result.fault == "environment" and "does not support item assignment" in (result.error or "")
    assert stock.call(call("stock", {"item": "apple"})).message["content"] == "3"
    assert PARAMS["stock"] == {"apple": 3}


def test_two_params_parameters_are_refused(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    with pytest.raises(TypeError, match=r"both 'a' and 'b' ask for \[config.params\]; keep one"):
        make_tool(code(root).load("shop.code:both"), source="shop.code:both")


def test_without_params_a_params_parameter_gets_an_empty_mapping(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    tool = make_tool(code(root).load("shop.code:stock"))
    result = tool.call(call("stock", {"item": "apple"}))
    assert result.fault == "environment" and result.error == "Error: KeyError: 'stock'"


# --- verifiers -----------------------------------------------------------------------------------------------


def test_a_python_verifier_that_takes_params_receives_them(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    verifier = build_verifier(PythonVerifier(kind="python", entry_point="shop.code:verify"), verifier_ctx(root),
                              plugins=PLUGINS)
    assert verifier.score(TASK, Trajectory.of("3")).reward == 1.0
    assert verifier.score(TASK, Trajectory.of("4")).reward == 0.0
    other = build_verifier(PythonVerifier(kind="python", entry_point="shop.code:verify"),
                           verifier_ctx(root, {"stock": {"apple": 4}}), plugins=PLUGINS)
    assert other.score(TASK, Trajectory.of("4")).reward == 1.0


@pytest.mark.parametrize(("entry_point", "info"), [
    ("verify_kwargs", {"keys": ["completion", "messages", "state", "task", "trajectory"]}),
    ("verify_named_and_kwargs", {"greeting": "Ahoy", "keys": ["completion", "messages", "state", "task",
                                                              "trajectory"]}),
], ids=["kwargs-only-gets-the-five", "named-params-with-kwargs"])
def test_params_reach_a_kwargs_verifier_only_by_name(tmp_path: Path, entry_point: str, info: dict[str, Any]) -> None:
    root = bundle(tmp_path)
    verifier = build_verifier(PythonVerifier(kind="python", entry_point=f"shop.code:{entry_point}"),
                              verifier_ctx(root), plugins=PLUGINS)
    assert verifier.score(TASK, Trajectory.of("3")).info == info


def test_a_python_rubric_criterion_receives_the_params(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    rubric = Rubric(kind="rubric", criteria=[
        PythonCriterion(kind="python", name="exact", entry_point="shop.code:verify"),
        PythonCriterion(kind="python", name="enough", entry_point="shop.code:threshold")])
    verifier = build_verifier(rubric, verifier_ctx(root), plugins=PLUGINS)
    assert verifier.score(TASK, Trajectory.of("2")).breakdown == {"exact": 0.0, "enough": 1.0}
    assert verifier.score(TASK, Trajectory.of("1")).breakdown == {"exact": 0.0, "enough": 0.0}


# --- python state ----------------------------------------------------------------------------------------------


def test_a_python_state_class_that_takes_params_is_made_with_them(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    spec = StateSection(kind="python", entry_point="shop.code:Shelf")
    handle = python_state(spec, code(root).load, params=PARAMS).new(TASK)
    assert handle.value.count("apple") == 3
    with pytest.raises(TypeError):
        handle.value.params["stock"] = {}  # read-only


@pytest.mark.parametrize("entry_point", ["Plain", "Loose"], ids=["no-parameters", "kwargs-only"])
def test_a_state_class_that_does_not_name_params_is_made_as_before(tmp_path: Path, entry_point: str) -> None:
    root = bundle(tmp_path)
    spec = StateSection(kind="python", entry_point=f"shop.code:{entry_point}")
    handle = python_state(spec, code(root).load, params=PARAMS).new(TASK)
    assert type(handle.value).__name__ == entry_point
    assert getattr(handle.value, "kwargs", {}) == {}


def test_make_state_factory_passes_params_to_the_python_kind(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    spec = StateSection(kind="python", entry_point="shop.code:Shelf")
    factory = make_state_factory(spec, root, code(root).load, plugins=PLUGINS, params=PARAMS)
    assert factory.new(TASK).value.count("apple") == 3


# --- the whole environment ---------------------------------------------------------------------------------------


def test_params_reach_tools_state_and_verifier_of_a_loaded_environment(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    with envhub.load(root, trust_code=True) as env:
        task = env.tasks("dev")[0]
        with env.episode(task) as episode:
            episode.reset()
            stepped = episode.step({"role": "assistant", "content": None,
                                    "tool_calls": [call("stock", {"item": "apple"}, "a"),
                                                   call("counted", {"item": "apple"}, "b")]})
            assert [m["content"] for m in stepped.observation.messages[-2:]] == ["3", "3"]
            final = episode.step("3")
            assert final.done and episode.score is not None and episode.score.reward == 1.0
        assert env.score(task, "3").reward == 1.0
    # The same bundle with other params: every path sees the new ones.
    root2 = bundle(tmp_path / "other", params={**PARAMS, "stock": {"apple": 1}, "threshold": 5})
    with envhub.load(root2, trust_code=True) as env:
        task = env.tasks("dev")[0]
        with env.episode(task) as episode:
            episode.reset()
            stepped = episode.step({"role": "assistant", "content": None,
                                    "tool_calls": [call("stock", {"item": "apple"}, "a"),
                                                   call("counted", {"item": "apple"}, "b")]})
            assert [m["content"] for m in stepped.observation.messages[-2:]] == ["1", "5"]
        assert env.score(task, "1").reward == 1.0
        assert env.score(task, "3").reward == 0.0
