"""A plugin with one of each envhub hook. Its imports are light (no pydantic at import):
the options model is named as a string and imported only when a manifest uses the kind."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from envhub import hookimpl
from envhub.hookspecs import (
    ExecutorKind,
    HarnessProtocol,
    PolicyKind,
    RegistryBackend,
    StateKind,
    TaskFormat,
    TaskGenerator,
    VerifierKind,
)


def distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def make_verifier(options: Any, ctx: Any, factories: Any) -> Any:
    from envhub.runtime import Score
    from envhub.runtime.verifiers import Verifier, task_value

    class Levenshtein(Verifier):
        kind = "levenshtein"

        def score(self, task: Any, trajectory: Any, *, state: Any = None) -> Any:
            expected = str(task_value(task, options.field, self.kind))
            d = distance(trajectory.completion.strip(), expected)
            return Score(1.0 if d <= options.max_distance else 0.0, info={"distance": d})

    return Levenshtein()


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def retry_once(env: Any, task: Any, messages: list[dict[str, Any]], state: Any) -> str | None:
    # After an empty answer the model gets one more turn; any other answer ends the episode.
    turns = sum(1 for m in messages if m.get("role") == "assistant")
    if turns == 1 and not (messages[-1].get("content") or "").strip():
        return "Please answer."
    return None


def counter_state(spec: Any, root: Path, load_entry_point: Any) -> Any:
    from envhub.runtime import StateFactory, StateHandle

    class Counter(StateFactory):
        kind = "counter"

        def new(self, task: Any) -> StateHandle:
            return StateHandle({"count": 0})

    return Counter()


def add(seed: int, split: str = "train") -> dict[str, Any]:
    a, b = seed % 7, seed % 5
    return {"id": f"{split}-{seed}", "prompt": f"What is {a} + {b}?", "answer": str(a + b)}


def open_testreg(url: str, settings: Any) -> Any:
    from envhub.registry import FsspecRegistry

    return FsspecRegistry(url.split("://", 1)[1])  # testreg:///abs/dir is the directory /abs/dir


def make_echo(argument: str, options: Any) -> Any:
    from envhub.runtime.policies import Policy

    class Echo(Policy):
        name = f"echo:{argument}"

        async def act(self, observation: Any, task: Any, *, env: Any) -> str:
            return argument

    return Echo()


def make_sequential() -> Any:
    from envhub.runtime import Executor, run_rollout

    class Sequential(Executor):
        async def run(self, plan: Any, jobs: Any) -> Any:
            for job in jobs:
                record = await run_rollout(plan, job)
                # A record keeps fields it does not know (rollout record version 1 is additive).
                yield record.model_copy(update={"executor": "sequential"})

    return Sequential()


@hookimpl
def envhub_verifier_kinds() -> list[VerifierKind]:
    return [VerifierKind("levenshtein", make_verifier, options="envhub_test_levenshtein.options:LevenshteinOptions",
                         description="edit distance to a task field, within max-distance")]


@hookimpl
def envhub_task_formats() -> list[TaskFormat]:
    return [TaskFormat("csv", read_csv, description="comma-separated values with a header row")]


@hookimpl
def envhub_harness_protocols() -> list[HarnessProtocol]:
    return [HarnessProtocol("retry-once", respond=retry_once, max_turns=2)]


@hookimpl
def envhub_state_kinds() -> list[StateKind]:
    return [StateKind("counter", counter_state)]


@hookimpl
def envhub_task_generators() -> list[TaskGenerator]:
    return [TaskGenerator("add", add)]


@hookimpl
def envhub_registry_backends() -> list[RegistryBackend]:
    return [RegistryBackend("testreg", open_testreg)]


@hookimpl
def envhub_policies() -> list[PolicyKind]:
    return [PolicyKind("echo", make_echo, takes_argument=True, forms=("echo:TEXT",))]


@hookimpl
def envhub_executors() -> list[ExecutorKind]:
    return [ExecutorKind("sequential", make_sequential)]
