"""A pushed environment as a Hugging Face dataset: the card's ``configs`` and the
environment descriptor (spec/registry.md, "The environment descriptor").

The card's YAML header names, per public split whose tasks are a file ``datasets`` reads
(jsonl, parquet), that file as the split's ``data_files``, so
``datasets.load_dataset(repo, revision="v<version>", split=name)`` loads the split's tasks
as rows. ``environment.yaml`` beside it says what the repo is as an environment: its id, its
splits (where each split's tasks come from), the runtime that runs it and its reward.
Held-out splits are named (the public ``envhub.toml`` names them too) but never in
``configs``: their files are only in the private companion repo.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from envhub.errors import RegistryError

if TYPE_CHECKING:
    from envhub.manifest import Manifest, Split

__all__ = ["DESCRIPTOR", "SPEC_VERSION", "card", "check_no_clash", "dataset_splits", "descriptor"]

#: The descriptor's path in the repo, and the format it is written in.
DESCRIPTOR = "environment.yaml"
SPEC_VERSION = "hf-env-0.1"
#: The task formats ``datasets`` reads, by the builder name it infers from the extension.
DATASET_FORMATS = ("jsonl", "parquet")
#: Split names ``datasets`` accepts (its ``Split`` names); other splits stay out of configs.
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
CONFIG_NAME = "default"
#: Rewards of every verifier kind are in this range (spec/manifest.md, the verifier).
REWARD_RANGE = (0.0, 1.0)


def dataset_splits(manifest: Manifest) -> dict[str, str]:
    """The public splits that ``datasets`` can load from the repo: split name -> task file.

    >>> from envhub.manifest import parse_manifest
    >>> m, _ = parse_manifest('[environment]\\nname = "a/b"\\nversion = "1"\\n[tasks]\\n'
    ...                       'splits.train = { path = "t.jsonl" }\\n'
    ...                       'splits.test = { path = "h.jsonl", held-out = true }\\n'
    ...                       '[verifier]\\nkind = "exact-match"\\n')
    >>> dataset_splits(m)
    {'train': 't.jsonl'}
    """
    tasks = manifest.tasks
    if tasks.format not in DATASET_FORMATS:
        return {}
    return {name: split.path for name, split in tasks.splits.items()
            if split.path is not None and not split.held_out and _SPLIT_NAME.match(name)}


def card(manifest: Manifest, body: bytes | None) -> tuple[bytes, int]:
    """The repo's README.md: a YAML header (the ``envhub`` tag, the environment's tags, and
    ``configs`` naming the public splits so ``datasets.load_dataset`` works), then the
    bundle's own README (``body``) or a short generated one. Returns the bytes and the
    length of what precedes ``body`` (0 if ``body`` is None)."""
    import yaml

    env = manifest.environment
    data_files = [{"split": name, "path": path} for name, path in dataset_splits(manifest).items()]
    header: dict[str, Any] = {"pretty_name": env.name, "tags": ["envhub", *[t for t in env.tags if t != "envhub"]]}
    if data_files:  # none (generated, mixture, other formats): no configs, as the Hub expects
        header["configs"] = [{"config_name": CONFIG_NAME, "data_files": data_files}]
    prefix = ("---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n").encode()
    if body is not None:
        return prefix + body, len(prefix)
    generated = (f"\n# {env.name} {env.version}\n\n{env.description}\n\n"
                 "An [envhub](https://github.com/envhub/envhub) environment. Pull it with\n\n"
                 f"    envhub pull {env.name}@{env.version} --registry hf://\n")
    if data_files:
        generated += ("\nor load its public tasks as a dataset:\n\n"
                      f"    datasets.load_dataset({env.name!r}, revision='v{env.version}', "
                      f"split={data_files[0]['split']!r})\n")
    return prefix + generated.encode(), 0


def _split_entry(name: str, split: Split, manifest: Manifest, loadable: dict[str, str]) -> dict[str, Any]:
    tasks = manifest.tasks
    entry: dict[str, Any]
    if split.held_out:
        entry = {"source": "held-out"}
    elif name in loadable:
        entry = {"source": "dataset", "config": CONFIG_NAME, "format": tasks.format, "path": split.path}
    elif split.path is not None:
        entry = {"source": "file", "format": tasks.format, "path": split.path}
    elif split.seeds is not None:
        entry = {"source": "generated", "generator": tasks.generator, "seeds": list(split.seeds)}
    elif split.mixture is not None:
        entry = {"source": "mixture",
                 "components": [{"env": c.env, "split": c.split, "weight": c.weight} for c in split.mixture]}
    else:  # a plugin's own kind of split
        entry = {"source": "other"}
    rows = split.seeds[1] - split.seeds[0] if split.seeds is not None and not split.held_out else split.rows
    if split.mixture is not None:
        rows = split.size
    if rows is not None:
        entry["rows"] = rows
    if split.description:
        entry["description"] = split.description
    return entry


def descriptor(manifest: Manifest) -> bytes:
    """``environment.yaml``: the environment as the Hub describes environments (spec
    ``hf-env-0.1``). Built from the public manifest only, so it says nothing the public
    ``envhub.toml`` does not."""
    import yaml

    env = manifest.environment
    loadable = dataset_splits(manifest)
    verifier = manifest.verifier
    document = {
        "spec_version": SPEC_VERSION,
        "id": env.name,
        "version": env.version,
        "description": env.description,
        "splits": {name: _split_entry(name, split, manifest, loadable)
                   for name, split in manifest.tasks.splits.items()},
        "runtime": {"name": "envhub", "protocol": manifest.harness.protocol, "state": manifest.state.kind,
                    "manifest": "envhub.toml", "pull": f"envhub pull {env.name}@{env.version} --registry hf://"},
        "reward": {"verifier": verifier.kind if verifier is not None else None, "range": list(REWARD_RANGE),
                   "score_version": env.score_version},
    }
    text: str = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    return text.encode()


def check_no_clash(files: dict[str, Any], name: str, version: str, url: str) -> None:
    """Refuse a bundle whose own files include the descriptor's path: on the Hub that path
    is envhub's. Raises RegistryError naming the file and the fix."""
    if DESCRIPTOR in files:
        raise RegistryError(
            f"{url}: cannot publish {name}@{version}: the bundle has its own {DESCRIPTOR}, which on the Hub "
            "is the environment descriptor envhub writes",
            hint=f"rename the bundle's {DESCRIPTOR} (e.g. to conda-{DESCRIPTOR}) and push again")
