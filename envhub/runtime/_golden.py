"""Replaying golden trajectories (:mod:`envhub.bundle._golden`) through verifiers, so that a
reward that changes is seen before it is published.

- :func:`check_recorded` (``envhub validate --check``): each golden trajectory of a bundle,
  replayed through its own verifier, still gets the reward recorded beside it.
- :func:`compare` (``envhub validate --against REF``): the golden trajectories of two
  versions (both files, each trajectory once) replayed through both verifiers. A reward that
  differs while ``score-version`` did not is an error; a ``score-version`` bumped while no
  reward differs is a warning.

A trajectory is replayed as an episode: its assistant turns are stepped in order (tool calls
run against fresh state), then empty turns until the episode ends, and the episode's reward
is its score. Only tasks present in both copies are compared; the others are counted as
skipped (a task added in the new version, a held-out split this copy lacks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envhub.bundle import GoldenLine, read_golden
from envhub.errors import EnvhubError, UsageError
from envhub.problems import Problem

if TYPE_CHECKING:
    from envhub.runtime._protocols import EnvironmentProtocol

__all__ = ["Comparison", "check_recorded", "compare", "golden_lines", "replay"]

#: Empty turns played after the recorded ones before a replay is called unfinished.
_EXTRA_TURNS = 16
#: Rewards closer than this are the same reward (float noise of a weighted rubric).
_SAME = 1e-9


def golden_lines(env: EnvironmentProtocol, *, shown_root: str | None = None,
                 label: str | None = None) -> tuple[list[GoldenLine], list[Problem]]:
    """The golden trajectories of ``env``'s bundle (none if it declares no golden file).
    The file is shown as ``label:path`` when ``label`` is given (a pulled copy), else under
    ``shown_root`` (the bundle directory as the user named it), else by its full path.
    Raises :class:`UsageError` for an environment whose bundle is not here (a served one)."""
    rel = env.manifest.environment.golden
    if rel is None:
        return [], []
    if env.root is None:
        raise UsageError(f"{env.name}: its golden trajectories ({rel}) are in its bundle, which is not here",
                         hint="replay them where the bundle is: pass a bundle directory or an environment id, "
                              "not a served URL")
    if label is not None:
        shown = f"{label}:{rel}"
    elif shown_root is not None:
        shown = rel if shown_root in ("", ".") else f"{shown_root.rstrip('/')}/{rel}"
    else:
        shown = (env.root / rel).as_posix()
    return read_golden(env.root / rel, env.manifest, shown=shown)


def replay(env: EnvironmentProtocol, line: GoldenLine) -> tuple[float, str | None] | None:
    """(reward, verifier error or None) of ``line`` replayed in ``env``; None when ``env``
    has no such task here (an unknown id, a split missing from this copy)."""
    try:
        task = env.task(line.split, line.task_id)
    except EnvhubError:
        return None
    try:
        with env.episode(task) as episode:
            episode.reset()
            for turn in range(len(line.actions) + _EXTRA_TURNS):
                action: Any = dict(line.actions[turn]) if turn < len(line.actions) else ""
                if episode.step(action).done:
                    assert episode.score is not None
                    return episode.score.reward, episode.score.error
    except Exception as e:  # a tool or state that fails on replay is a reward of 0, as in a rollout
        return 0.0, f"{type(e).__name__}: {e}"
    return 0.0, f"the episode did not end within {_EXTRA_TURNS} turns after the recorded ones"


def check_recorded(env: EnvironmentProtocol, *, shown_root: str | None = None) -> list[Problem]:
    """One error for each golden trajectory of ``env`` whose replayed reward is not the
    recorded one, and for each whose task is not in ``env``. ``shown_root``: see
    :func:`golden_lines`."""
    lines, problems = golden_lines(env, shown_root=shown_root)
    sv = env.manifest.environment.score_version
    for line in lines:
        replayed = replay(env, line)
        if replayed is None:
            problems.append(Problem("error", "golden-task", f"{line.where}: no such task in this bundle",
                                    file=line.file, line=line.line, field="environment.golden",
                                    hint="record golden trajectories on tasks the bundle has"))
            continue
        reward, error = replayed
        if abs(reward - line.reward) > _SAME:
            because = f" ({error})" if error else ""
            problems.append(Problem(
                "error", "golden-reward",
                f"{line.where}: recorded reward {line.reward:g}, the verifier now gives {reward:g}{because}",
                file=line.file, line=line.line, field="environment.golden",
                hint=f"if the verifier changed on purpose, bump [environment] score-version to {sv + 1} and "
                     "record the new reward; else make the verifier score as before"))
    return problems


@dataclass
class Comparison:
    """The outcome of :func:`compare`: the problems, and what was replayed."""

    against: str
    problems: list[Problem] = field(default_factory=list)
    compared: int = 0
    changed: int = 0
    skipped: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"against": self.against, "compared": self.compared, "changed": self.changed,
                "skipped": self.skipped}


def compare(new: EnvironmentProtocol, old: EnvironmentProtocol, *, manifest_file: str,
            shown_root: str | None = None) -> Comparison:
    """Replay the golden trajectories of ``new`` and ``old`` through both verifiers and
    judge the change of ``score-version`` from ``old`` to ``new`` (see the module's doc).
    Problems about the manifest name ``manifest_file``; ``shown_root``: see
    :func:`golden_lines`."""
    old_id = f"{old.name} {old.version}"
    result = Comparison(old_id)
    new_sv, old_sv = new.manifest.environment.score_version, old.manifest.environment.score_version
    sv_field = "environment.score-version"
    if new_sv < old_sv:
        result.problems.append(Problem(
            "error", "score-version-down", f"score-version went down from {old_sv} ({old_id}) to {new_sv}",
            file=manifest_file, field=sv_field,
            hint=f"score-version only goes up: set it to {old_sv} if rewards are comparable, else {old_sv + 1}"))
        return result
    new_lines, problems = golden_lines(new, shown_root=shown_root)
    old_lines, old_problems = golden_lines(old, label=f"{old.name}@{old.version}")
    result.problems.extend(problems)
    result.problems.extend(old_problems)
    for line in _unique([*new_lines, *old_lines]):
        after, before = replay(new, line), replay(old, line)
        if after is None or before is None:
            result.skipped += 1
            continue
        result.compared += 1
        if abs(after[0] - before[0]) <= _SAME:
            continue
        result.changed += 1
        if new_sv == old_sv:
            because = "".join(f"; {which} verifier: {error}" for which, error in (("old", before[1]), ("new", after[1]))
                              if error)
            result.problems.append(Problem(
                "error", "score-version-unchanged",
                f"{line.where}: reward {before[0]:g} under {old_id}, {after[0]:g} now, "
                f"but score-version is still {new_sv}{because}",
                file=line.file, line=line.line, field="environment.score-version",
                hint=f"bump [environment] score-version to {new_sv + 1} if the change is intended (rewards are "
                     f"no longer comparable with {old_id}), else make the verifier score as before"))
    if not result.compared:
        why = (f"none of the {result.skipped} golden trajectories is of a task both versions have" if result.skipped
               else "neither version has golden trajectories")
        result.problems.append(Problem(
            "warning", "golden-none", f"--against {old_id} compared nothing: {why}",
            file=manifest_file, field="environment.golden",
            hint='record golden trajectories on tasks of public splits (envhub eval ... -o FILE writes them) and '
                 'declare [environment] golden = "golden/trajectories.jsonl"'))
    elif new_sv > old_sv and result.compared and not result.changed:
        result.problems.append(Problem(
            "warning", "score-version-bumped",
            f"score-version went from {old_sv} ({old_id}) to {new_sv}, but none of the {result.compared} golden "
            "trajectories changed reward", file=manifest_file, field=sv_field,
            hint=f"keep score-version {old_sv} so rewards stay comparable, or add a golden trajectory that "
                 "the new verifier scores differently"))
    return result


def _unique(lines: Sequence[GoldenLine]) -> list[GoldenLine]:
    """Each trajectory once (the first file's line wins): a golden file carried over from the
    previous version holds the same trajectories."""
    import orjson

    seen: set[bytes] = set()
    out = []
    for line in lines:
        key = orjson.dumps([line.split, line.task_id, list(line.actions)], option=orjson.OPT_SORT_KEYS)
        if key not in seen:
            seen.add(key)
            out.append(line)
    return out
