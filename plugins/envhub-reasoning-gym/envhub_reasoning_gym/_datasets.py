"""reasoning-gym's datasets as envhub tasks: one task per (dataset, difficulty level, seed).

reasoning-gym takes about 4 s to import, so nothing here imports it at module level: the
first task made or scored pays for it, listing the plugin never does.

A reasoning-gym dataset is a virtual sequence: ``dataset[i]`` draws its entry from
``Random(config.seed + i)`` and the dataset's configuration, which its curriculum sets for
a difficulty level. A task's seed becomes an entry in one of two ways (``seeding``):

- ``"index"`` (the default): the entry at index ``seed`` of the dataset built once per
  (dataset, level) with ``seed = 0`` and a virtual size of :data:`SIZE`;
- ``"dataset"``: entry 0 of a dataset built for the task with ``seed = seed`` and
  ``size = 1``, for the datasets that make all their entries up front or cap their size.
  For a dataset that draws from ``Random(seed + i)`` both give the same task.

Some datasets give up on a few seeds (``countdown`` after 100 random attempts), or make a
task without an answer: such a seed is drawn again, deterministically, from the seed offset
by 2^32 (see :data:`REDRAWS`).

Either way the same (dataset, level, seed) gives the same task in every process
(``scripts/generate_bundles.py`` ships only datasets for which that holds, and records the
seeding a dataset needs in its manifest's ``[config.params]``).
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import threading
from collections.abc import Mapping
from typing import Any

__all__ = [
    "SEEDINGS",
    "SIZE",
    "DatasetError",
    "dataset",
    "extract_answer",
    "forget",
    "generate",
    "level_count",
    "reference",
    "score",
]

#: The virtual size of the datasets of ``seeding = "index"``: seeds must be below it.
SIZE = 2**31
#: The ``seed`` of those datasets' configuration; a task's own seed is its index.
BASE_SEED = 0
#: How a task's seed becomes a dataset entry (see the module's docstring).
SEEDINGS = ("index", "dataset")
#: How many times a seed is drawn again when reasoning-gym fails to make its entry (some
#: datasets give up after a number of random attempts) or makes one without an answer;
#: redraw k uses the seed offset by k * REDRAW_STRIDE (the base seed of the dataset for
#: seeding "index"), which no split uses.
REDRAWS = 8
REDRAW_STRIDE = 2**32


class DatasetError(ValueError):
    """A dataset that reasoning-gym does not have, a level it does not have, a task that
    is not the one its seed makes, or a scorer that returns something other than a reward
    in [0, 1]."""


_lock = threading.Lock()
_datasets: dict[tuple[str, int | None, int, int], Any] = {}


def _factory() -> Any:
    import reasoning_gym.factory  # ~4 s the first time: only here, never at import

    return reasoning_gym.factory


def _check_name(factory: Any, name: str) -> None:
    if name not in factory.DATASETS:
        close = difflib.get_close_matches(name, list(factory.DATASETS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise DatasetError(f"reasoning-gym has no dataset {name!r}{hint}")


def level_count(name: str) -> int:
    """How many difficulty levels dataset ``name`` has: the most levels of any attribute
    of its curriculum (``set_global_level`` caps each attribute at its own last level), or
    1 when it has no curriculum. Raises :class:`DatasetError` for an unknown dataset."""
    factory = _factory()
    _check_name(factory, name)
    if not factory.has_curriculum(name):
        return 1
    attributes = factory.create_curriculum(name).attributes.values()
    return max((len(attribute.levels) for attribute in attributes), default=1)


def _build(name: str, level: int | None, seed: int, size: int) -> Any:
    """Dataset ``name`` at ``level`` (None: reasoning-gym's default configuration), with
    that ``seed`` and ``size``."""
    factory = _factory()
    count = level_count(name)
    if level is not None and (isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < count):
        raise DatasetError(f"reasoning-gym dataset {name!r} has difficulty levels 0 to {count - 1}, not {level!r}")
    dataset_cls, config_cls = factory.DATASETS[name]
    if level is None or not factory.has_curriculum(name):
        return dataset_cls(config=config_cls(seed=seed, size=size))
    curriculum = factory.create_curriculum(name)
    curriculum.set_global_level(level)
    return dataset_cls(config=curriculum.generate_configuration({"seed": seed, "size": size}))


def dataset(name: str, level: int | None, *, size: int = SIZE, seed: int = BASE_SEED) -> Any:
    """Dataset ``name`` configured for difficulty ``level`` (0 = easiest) with ``seed``
    and ``size``, made once per process and kept: its curriculum's configuration at that
    global level, or, for ``level=None``, reasoning-gym's default configuration.

    Raises :class:`DatasetError` for an unknown dataset or a level it does not have."""
    key = (name, level, size, seed)
    with _lock:
        found = _datasets.get(key)
        if found is None:
            found = _datasets[key] = _build(name, level, seed, size)
        return found


def forget() -> None:
    """Drop every dataset and entry made so far (the probe rebuilds them to check they
    come out the same, and frees them between datasets)."""
    with _lock:
        _datasets.clear()
    _entry.cache_clear()


@functools.lru_cache(maxsize=1024)
def _entry(name: str, level: int | None, seed: int, seeding: str) -> tuple[int, dict[str, Any]]:
    """The entry for ``seed``, and how many times it was drawn again (see :data:`REDRAWS`).
    Kept a while: the verifier scores against the entry the generator just made."""
    failures: list[Exception] = []
    for redraw in range(REDRAWS + 1):
        offset = redraw * REDRAW_STRIDE
        try:
            if seeding == "dataset":
                entry: dict[str, Any] = _build(name, level, seed + offset, 1)[0]
            else:
                entry = dataset(name, level, seed=BASE_SEED + offset)[seed]
            if not isinstance(entry.get("answer"), str) or not entry["answer"].strip():
                # Unanswerable as made (a string manipulation that leaves nothing): a failed draw.
                raise ValueError(f"reasoning-gym made a task whose answer is {entry.get('answer')!r}")
            return redraw, entry
        except (DatasetError, TimeoutError, MemoryError):
            raise  # not a draw that failed: an unknown dataset or level, or the process's limits
        except Exception as e:
            failures.append(e)
    first = failures[0]
    raise DatasetError(f"reasoning-gym's {name!r} fails to make a task for seed {seed} at level {level!r}, "
                       f"{len(failures)} draws in a row: {type(first).__name__}: {first}") from first


def _scorer(name: str, level: int | None, seeding: str) -> Any:
    # The dataset whose score_answer scores a task: configured as the one that made it (a
    # scorer reads its config, never its seed), and of size 1 where a size costs.
    return dataset(name, level, size=1 if seeding == "dataset" else SIZE)


def _plain(value: Any) -> Any:
    # What json.dumps cannot write: sets (sorted, for a stable order) and anything else as text.
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)


def reference(answer: str) -> str:
    """The completion that answers ``answer`` in the format the verifier reads."""
    return f"<answer>{answer}</answer>"


def _seeding(value: Any) -> str:
    if value not in SEEDINGS:
        raise DatasetError(f"seeding must be one of {', '.join(map(repr, SEEDINGS))}, not {value!r}")
    return str(value)


def generate(seed: int, split: str = "train", difficulty: int | None = None,
             params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The task of dataset ``params["dataset"]`` at level ``difficulty`` for ``seed``
    (made as ``params.get("seeding", "index")`` says): its question as ``prompt``, its
    ``answer`` and ``metadata`` (as JSON carries them: tuples become lists, sets sorted
    lists, other objects text), the ``difficulty``, the ``dataset``, ``seed`` and
    ``seeding`` it was made with, how many times the seed was drawn again (``redraw``, see
    :data:`REDRAWS`; almost always 0), and a ``reference`` completion that scores 1.0.

    Raises ValueError when ``params`` names no dataset and for a seed outside
    ``[0, SIZE)``; :class:`DatasetError` (a ValueError) for an unknown dataset, seeding, or
    a level the dataset does not have, and when reasoning-gym fails on every draw."""
    params = params or {}
    name = params.get("dataset")
    if not isinstance(name, str) or not name:
        raise ValueError("the reasoning-gym generator needs the dataset's name: "
                         "[config] params = { dataset = \"basic_arithmetic\" }")
    seeding = _seeding(params.get("seeding", "index"))
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SIZE:
        raise ValueError(f"seed {seed!r} is outside the reasoning-gym generator's range [0, {SIZE})")
    redraw, entry = _entry(name, difficulty, seed, seeding)
    plain = json.loads(json.dumps({"question": entry["question"], "answer": entry["answer"],
                                   "metadata": entry.get("metadata", {})}, default=_plain))
    answer = plain["answer"]
    return {
        "id": f"{name}-{split}-{seed}",
        "prompt": plain["question"],
        "answer": answer,
        "metadata": plain["metadata"],
        "difficulty": difficulty,
        "dataset": name,
        "seed": seed,
        "seeding": seeding,
        "redraw": redraw,
        "reference": reference(answer if isinstance(answer, str) else json.dumps(answer)),
    }


def extract_answer(completion: str) -> str | None:
    """The text inside the last ``<answer>...</answer>`` of ``completion`` (stripped), or
    None: reasoning-gym's own convention (``reasoning_gym.utils.extract_answer``)."""
    from reasoning_gym.utils import extract_answer as rg_extract_answer

    answer: str | None = rg_extract_answer(completion, tag_name="answer")
    return answer


def _scored_entry(name: str, task: Mapping[str, Any], seeding: str) -> Mapping[str, Any]:
    """The entry to score ``task`` against. A task :func:`generate` made (it has a
    ``seed``) is made again, so the scorer sees the dataset's own metadata (tuples, not
    the lists JSON turned them into); any other task row is taken as it is."""
    seed = task.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < SIZE:
        _, entry = _entry(name, task.get("difficulty"), seed, seeding)
        if entry["question"] != task.get("prompt"):
            raise DatasetError(f"task {task.get('id')!r} is not the task reasoning-gym's {name!r} makes for seed "
                               f"{seed} at level {task.get('difficulty')!r}: its prompt differs")
        return entry
    return {"question": task.get("prompt"), "answer": task.get("answer"), "metadata": task.get("metadata") or {}}


def score(name: str, completion: str, task: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
    """The reward of ``completion`` on the task row ``task`` (a row :func:`generate` made),
    and what to record about it: the answer read from the completion's last
    ``<answer>...</answer>``, scored by dataset ``name``'s own ``score_answer``,
    configured at the task's level, against the task's entry.

    A scorer that raises on the candidate's answer (its parser failing on the text) gives
    0, with the error in the info: the candidate failed, not the verifier. Raises
    :class:`DatasetError` for an unknown dataset, level or seeding, a task that is not the
    one its seed makes, and a reward that is not a number in [0, 1]."""
    seeding = _seeding(task.get("seeding", "index"))
    answer = extract_answer(completion)
    scorer = _scorer(name, task.get("difficulty"), seeding)
    entry = _scored_entry(name, task, seeding)
    try:
        reward = scorer.score_answer(answer, entry)
    except Exception as e:  # reasoning-gym's scorers parse free text; any of them may raise on it
        return 0.0, {"answer": answer, "scorer-error": f"{type(e).__name__}: {e}"}
    if isinstance(reward, bool):
        reward = float(reward)
    if not isinstance(reward, (int, float)) or math.isnan(reward) or not 0.0 <= reward <= 1.0:
        raise DatasetError(f"reasoning-gym dataset {name!r} scored {reward!r}, not a number in [0, 1]")
    return float(reward), {"answer": answer}
