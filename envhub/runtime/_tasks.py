"""Reading a split's tasks: JSONL and Parquet files, or a seeded generator.

A split is read once per environment and kept; :meth:`TaskSource.tasks` then orders
(``seed``) and cuts (``limit``) without reading again. Generator splits are never
materialised whole: their tasks are made when indexed, so a split of a billion seeds
costs nothing until it is used.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from envhub.errors import BundleError, EnvhubError, EnvNotFoundError, UsageError
from envhub.manifest import Split, TasksSection
from envhub.problems import Problem
from envhub.runtime._types import Task
from envhub.tasks import (
    SecretError,
    heldout_seeds,
    json_hint,
    json_reason,
    parse_sealed_seeds,
    read_secret,
    sealed_seeds_path,
)

if TYPE_CHECKING:
    from envhub.lookup import PluginLookup

__all__ = ["MAX_GROUPED_SEEDS", "GeneratedTasks", "TaskSource", "group_by_level", "read_jsonl"]

#: The most generated tasks :meth:`TaskSource.by_level` makes one by one to learn their
#: difficulty; beyond it a generator must declare ``difficulty-levels``.
MAX_GROUPED_SEEDS = 100_000
#: The most seeds of a generator split shuffled whole (``seed`` without ``limit``).
MAX_SHUFFLED_SEEDS = 10_000_000


class GeneratedTasks(Sequence[Task]):
    """The tasks of a generator split, made on access: ``make`` takes a task's index in the
    split (its seed and difficulty level follow from it)."""

    def __init__(self, make: Callable[[int], Task], indices: Sequence[int]) -> None:
        self._make = make
        self._indices = indices

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, index: int) -> Task: ...
    @overload
    def __getitem__(self, index: slice) -> GeneratedTasks: ...
    def __getitem__(self, index: int | slice) -> Task | GeneratedTasks:
        if isinstance(index, slice):
            return GeneratedTasks(self._make, self._indices[index])
        return self._make(self._indices[index])

    def __iter__(self) -> Iterator[Task]:
        return (self._make(i) for i in self._indices)


class TaskSource:
    """The splits of one bundle. ``heldout_root`` holds held-out files pulled apart from
    the public bundle (``pull --with-heldout``)."""

    def __init__(self, spec: TasksSection, root: Path, heldout_root: Path | None, env_name: str,
                 load_entry_point: Callable[[str], Any], *, plugins: PluginLookup,
                 params: Mapping[str, Any] | None = None) -> None:
        self.spec = spec
        self._params = dict(params or {})
        self._plugins = plugins
        self.root = root
        self.heldout_root = heldout_root
        self.env_name = env_name
        self._load_entry_point = load_entry_point
        self._rows: dict[str, list[Task]] = {}
        self._by_id: dict[str, dict[str, Task]] = {}
        self._generator: Callable[..., Any] | None = None
        self._generator_takes: frozenset[str] = frozenset()
        self._seeds: dict[str, Sequence[int]] = {}

    @property
    def split_names(self) -> list[str]:
        return list(self.spec.splits)

    def split(self, name: str) -> Split:
        """The split called ``name``. Raises :class:`EnvNotFoundError` listing the splits
        that exist: nothing ever falls back to another split."""
        split = self.spec.splits.get(name)
        if split is None:
            known = ", ".join(self.spec.splits)
            raise EnvNotFoundError(f"{self.env_name} has no split {name!r} (splits: {known})",
                                   hint=f"pass one of: {known}")
        return split

    def file_for(self, name: str) -> Path | None:
        """Where split ``name``'s file is, or None if this copy of the bundle lacks it."""
        split = self.split(name)
        assert split.path is not None
        for base in (self.heldout_root, self.root) if split.held_out else (self.root,):
            if base is not None and (base / split.path).is_file():
                return base / split.path
        return None

    def available(self, name: str) -> bool:
        split = self.split(name)
        if split.seeds is not None or split.mixture is not None:
            return True
        if split.seed_space is not None:  # drawn from a secret: the source's key file, or the held-out store's
            return self._secret_file(name) is not None or self._sealed_seeds_file(name) is not None
        if split.path is None:  # a held-out generator split whose seed range is kept apart
            return self._sealed_seeds_file(name) is not None
        return self.file_for(name) is not None

    def seeds(self, name: str) -> Sequence[int]:
        """The seeds of generator split ``name``, task ``i`` made from seed ``i``: the range of
        ``seeds``; for a split drawn from a secret, the seeds :func:`envhub.tasks.heldout_seeds`
        draws with its key (the source bundle's ``secret`` file, or the held-out store's
        ``heldout-seeds/<split>.json``, its digest checked); for a held-out split of a bundle
        built before secrets, the range the held-out store holds (its digest checked)."""
        cached = self._seeds.get(name)
        if cached is not None:
            return cached
        split = self.split(name)
        seeds: Sequence[int]
        if split.seeds is not None:
            seeds = range(split.seeds[0], split.seeds[1])
        elif split.seed_space is not None and split.rows is not None:
            seeds = heldout_seeds(self._key(name), name, split.rows, split.seed_space)
        else:
            sealed = self._sealed(name)
            if "seeds" not in sealed:
                raise self._bad_sealed(name, "it holds a key, but the manifest records no seed-space")
            seeds = range(*sealed["seeds"])
        self._seeds[name] = seeds
        return seeds

    def _key(self, name: str) -> bytes:
        """The key of split ``name``, drawn from a secret."""
        split = self.split(name)
        secret = self._secret_file(name)
        if secret is not None:
            try:
                return read_secret(secret)
            except SecretError as e:
                raise BundleError(f"{secret}: the secret of split {name!r} {e}",
                                  [Problem("error", "bad-secret", str(e), file=str(secret),
                                           field=f"tasks.splits.{name}.secret")],
                                  hint=f"run 'envhub validate {self.root}'") from None
        sealed = self._sealed(name)
        if "key" not in sealed:
            raise self._bad_sealed(name, "it holds a seed range, but the manifest records a seed-space")
        if (sealed["rows"], list(sealed["seed-space"])) != (split.rows, list(split.seed_space or ())):
            raise self._bad_sealed(name, "its rows or seed-space differ from the manifest's")
        key: bytes = sealed["key"]
        return key

    def _sealed(self, name: str) -> dict[str, Any]:
        """The held-out store's ``heldout-seeds/<split>.json`` of split ``name``, its digest checked."""
        split = self.split(name)
        path = self._sealed_seeds_file(name)
        if path is None:
            raise EnvNotFoundError(
                f"{self.env_name}: split {name!r} is held out, and its seeds are not in this copy of the bundle",
                hint="pull it with 'envhub pull --with-heldout' (needs access to the held-out store), "
                     "or have a server score it ('envhub serve')")
        import hashlib

        data = path.read_bytes()
        if split.sha256 is not None and hashlib.sha256(data).hexdigest() != split.sha256:
            raise BundleError(f"{path}: the held-out seeds file does not match the digest the manifest records",
                              [Problem("error", "digest-mismatch", "the held-out store holds another split's seeds",
                                       file=str(path))])
        try:
            return parse_sealed_seeds(data)
        except (ValueError, KeyError, TypeError) as e:
            raise self._bad_sealed(name, f"it is not a held-out seeds file ({e})") from None

    def _bad_sealed(self, name: str, why: str) -> BundleError:
        path = self._sealed_seeds_file(name)
        return BundleError(f"{path}: {why}", [Problem("error", "bad-heldout-seeds", why, file=str(path))],
                           hint="pull the environment again with 'envhub pull --with-heldout'")

    def _secret_file(self, name: str) -> Path | None:
        """The source bundle's secret file of split ``name``, if it has one (a built bundle's
        manifest names none)."""
        split = self.split(name)
        if split.secret is None:
            return None
        path = self.root / split.secret
        return path if path.exists() else None

    def _sealed_seeds_file(self, name: str) -> Path | None:
        for base in (self.heldout_root, self.root):
            if base is not None and (base / sealed_seeds_path(name)).is_file():
                return base / sealed_seeds_path(name)
        return None

    @property
    def levels(self) -> list[int] | None:
        """A generator's difficulty levels, easiest first (``difficulty-levels``), or None."""
        return list(self.spec.difficulty_levels) if self.spec.difficulty_levels else None

    def tasks(self, name: str, *, seed: int | None = None, limit: int | None = None) -> Sequence[Task]:
        """The tasks of split ``name``: in file order, or shuffled by ``seed``; at most ``limit``."""
        if limit is not None and limit < 0:
            raise UsageError(f"limit must be >= 0, got {limit}")
        self.split(name)  # an unknown split raises EnvNotFoundError
        if self.spec.format == "generator":
            return self._generated(name, seed=seed, limit=limit)
        rows: Sequence[Task] = self._load(name)
        if seed is not None:
            rows = list(rows)
            random.Random(seed).shuffle(rows)
        return rows[:limit] if limit is not None else rows

    def task(self, name: str, task_id: str) -> Task:
        """The task with id ``task_id`` in split ``name``; :class:`EnvNotFoundError` if none."""
        self.split(name)
        if self.spec.format == "generator":
            for task in self.tasks(name):
                if task.id == task_id:
                    return task
        else:
            index = self._by_id.get(name)
            if index is None:
                index = self._by_id[name] = {t.id: t for t in self._load(name)}
            if task_id in index:
                return index[task_id]
        raise EnvNotFoundError(f"{self.env_name}: no task {task_id!r} in split {name!r}")

    def by_level(self, name: str) -> dict[Any, Sequence[Task]]:
        """The tasks of split ``name`` grouped by difficulty, easiest level first.

        A generator with ``difficulty-levels`` gives one lazy view per level (task ``i`` is
        at level ``i mod len(levels)``); otherwise every task is read (or made, up to
        :data:`MAX_GROUPED_SEEDS` for a generator) and grouped by its difficulty field."""
        levels = self.levels
        if self.spec.format == "generator" and levels:
            count = len(self.seeds(name))
            make = self._maker(name)
            return {level: GeneratedTasks(make, range(k, count, len(levels)))
                    for k, level in enumerate(levels) if k < count}
        tasks = self.tasks(name)
        if self.spec.format == "generator" and len(tasks) > MAX_GROUPED_SEEDS:
            raise UsageError(f"{self.env_name}: split {name!r} has {len(tasks):,} generated tasks, too many to group "
                             "by difficulty one by one",
                             hint="declare difficulty-levels in [tasks] and have the generator take difficulty")
        return group_by_level(tasks, f"{self.env_name}: split {name!r}", self.spec.difficulty_field)

    def _generated(self, name: str, *, seed: int | None, limit: int | None) -> Sequence[Task]:
        make = self._maker(name)
        order: Sequence[int] = range(len(self.seeds(name)))
        if seed is not None and limit is None and len(order) > MAX_SHUFFLED_SEEDS:
            raise UsageError(f"{self.env_name}: split {name!r} has {len(order):,} seeds, "
                             "too many to shuffle all of them",
                             hint="take a sample: pass a limit (envhub eval -n N)")
        if seed is not None:
            order = random.Random(seed).sample(order, len(order) if limit is None else min(limit, len(order)))
        elif limit is not None:
            order = order[:limit]
        return GeneratedTasks(make, order)

    def _maker(self, name: str) -> Callable[[int], Task]:
        """A function making split ``name``'s task ``index`` from its seed: the generator is
        called with ``seed`` and, when it takes them, ``split``, ``difficulty`` (the level of
        the index, with ``difficulty-levels``) and ``params`` (``[config.params]``)."""
        seeds = self.seeds(name)
        if self._generator is None:
            assert self.spec.generator is not None  # rule T1
            if ":" in self.spec.generator:  # the bundle's own code (needs trust)
                self._generator = self._load_entry_point(self.spec.generator)
            else:  # a plugin's named generator: installed code
                self._generator = self._plugin("task_generators", self.spec.generator, "task generator").generate
            parameters = inspect.signature(self._generator).parameters.values()
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
                self._generator_takes = frozenset({"split", "difficulty", "params"})
            else:
                self._generator_takes = frozenset(p.name for p in parameters)
        generator, takes, levels = self._generator, self._generator_takes, self.levels
        # A task's id is shown wherever the task is (a served held-out split, a record); a
        # generator's own id often names its seed, which would give the task away.
        keyed = self.split(name).seed_space is not None
        fixed: dict[str, Any] = {}
        if "split" in takes:
            fixed["split"] = name
        if "params" in takes:
            fixed["params"] = self._params

        def make(index: int) -> Task:
            task_seed = seeds[index]
            level = levels[index % len(levels)] if levels else None
            kwargs = dict(fixed, difficulty=level) if levels and "difficulty" in takes else fixed
            row = generator(seed=task_seed, **kwargs)
            if not isinstance(row, Mapping):
                raise TypeError(f"{self.spec.generator} returned {type(row).__name__}, not a task dict")
            if keyed:
                row = {**row, self.spec.id_field: f"{name}-{index}"}
            task = self._task(name, row, index, seed=task_seed)
            if level is not None and task.difficulty is None:
                task = Task(task.id, task.split, task.data, task.index, task.prompt, level, task.seed)
            return task

        return make

    def _task(self, split: str, row: Mapping[str, Any], index: int, *, seed: int | None = None) -> Task:
        spec = self.spec
        raw_id = row.get(spec.id_field)
        task_id = str(raw_id) if raw_id is not None else f"{split}-{seed if seed is not None else index}"
        prompt = row.get(spec.prompt_field)
        difficulty = row.get(spec.difficulty_field) if spec.difficulty_field else None
        return Task(task_id, split, row, index, prompt if isinstance(prompt, str) else "", difficulty, seed)

    def _load(self, name: str) -> list[Task]:
        cached = self._rows.get(name)
        if cached is not None:
            return cached
        split = self.split(name)
        path = self.file_for(name)
        if path is None:
            if split.held_out:
                raise EnvNotFoundError(
                    f"{self.env_name}: split {name!r} is held out, and its tasks are not in this copy of the bundle",
                    hint="pull them with 'envhub pull --with-heldout' (needs access to the held-out store), "
                         "or have a server score it ('envhub serve')")
            raise BundleError(f"{self.env_name}: the task file of split {name!r} is missing",
                              [Problem("error", "missing-file", "no such file",
                                       file=str(self.root / (split.path or "")))])
        rows = self._read_rows(path)
        tasks = [self._task(name, row, i) for i, row in enumerate(rows)]
        self._rows[name] = tasks
        return tasks


    def _plugin(self, hook: str, name: str, what: str) -> Any:
        from envhub.errors import PluginError

        found = self._plugins.lookup(hook, name)
        if found is None:
            known = ", ".join(self._plugins.names(hook))
            raise PluginError(f"{self.env_name}: unknown {what} {name!r}; known: {known}",
                              hint="install the plugin that provides it ('envhub plugins' lists what is installed)")
        return found

    def _read_rows(self, path: Path) -> list[Mapping[str, Any]]:
        """The rows of a task file, read by its format's reader (a plugin's, or built in)."""
        format = self._plugin("task_formats", self.spec.format, "task format")
        if format.read is None:
            raise BundleError(f"{self.env_name}: format {self.spec.format!r} has no task files", [])
        rows: list[Mapping[str, Any]] = []
        try:
            read = list(format.read(path))
        except EnvhubError:
            raise
        except Exception as e:  # a plugin's reader: its failure is the file's problem, said once
            message = f"cannot read the task file: {type(e).__name__}: {e}"
            raise BundleError(f"{path}: {message}", [], hint="run 'envhub validate' on the bundle") from e
        for number, row in enumerate(read, 1):
            if not isinstance(row, Mapping):
                raise BundleError(f"{path}: row {number} is a {type(row).__name__}, not a task (a mapping)",
                                  [Problem("error", "not-an-object", "each row must be a mapping of fields",
                                           file=str(path))])
            rows.append(row if isinstance(row, dict) else dict(row))
        return rows


def group_by_level(tasks: Iterable[Task], where: str, field: str | None = None) -> dict[Any, Sequence[Task]]:
    """``tasks`` grouped by difficulty, easiest first. Raises :class:`UsageError` (saying
    ``where``) when a task has no difficulty or the difficulties are not all numbers."""
    groups: dict[Any, list[Task]] = {}
    for task in tasks:
        groups.setdefault(task.difficulty, []).append(task)
    missing = groups.pop(None, [])
    if missing:
        raise UsageError(f"{where}: {len(missing)} task(s) have no {field or 'difficulty'} "
                         f"(first: {missing[0].id!r}), so they have no curriculum level",
                         hint="give every task a numeric difficulty (tasks.difficulty-field)")
    if any(isinstance(d, bool) or not isinstance(d, (int, float)) for d in groups):
        kinds = ", ".join(sorted({type(d).__name__ for d in groups}))
        raise UsageError(f"{where}: the difficulties are not all numbers ({kinds})",
                         hint="use numbers for difficulty: a curriculum orders them")
    return {level: groups[level] for level in sorted(groups)}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSONL task file, one per non-blank line. Raises BundleError naming
    the line that is not a JSON object."""
    import orjson

    out = []
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as u:
                    raise BundleError(f"{path}: line {number}: byte {u.start + 1} of the line is not valid UTF-8", [],
                                      hint="save the file as UTF-8") from None
                raise BundleError(f"{path}: line {number} is not valid JSON: {json_reason(e)}", [],
                                  hint=json_hint(e)) from None
            if not isinstance(row, dict):
                raise BundleError(f"{path}: line {number} is not a JSON object",
                                  [Problem("error", "not-an-object", "each line must be a JSON object",
                                           file=str(path), line=number)])
            out.append(row)
    return out
