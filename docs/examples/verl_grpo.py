"""Train a model on an envhub environment with verl's GRPO, one envhub episode per rollout
(docs/integrations.md, "verl").

    pip install envhub verl vllm       # verl brings torch, ray, hydra and pyarrow
    python verl_grpo.py example_envs/grid-game runs/grid --trust              # writes, prints
    python verl_grpo.py example_envs/grid-game runs/grid --trust --run        # and trains
    python verl_grpo.py envhub-examples/word-guess@1.0.0 runs/words --trust --model Qwen/Qwen3-1.7B

It writes OUT/train.parquet and OUT/val.parquet (the environment's tasks, as verl's
RLHFDataset reads them) and OUT/agent_loops.yaml (the agent-loop config that names
envhub.integrations.verl.EnvhubAgentLoop and the environment), then prints the
``verl.trainer.main_ppo`` command that trains on them, or runs it with ``--run``. The
environment is anything ``envhub.load`` takes; a bundle directory is written into the config
as an absolute path, since verl's Ray workers load it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

import envhub
from envhub.integrations import verl as envhub_verl


def prepare(env_ref: str, out: Path, *, trust: bool, train_split: str, val_split: str, limit: int,
            model: str, n: int, response_length: int, extra: list[str]) -> list[str]:
    """Write the datasets and the agent-loop config into ``out``; return the trainer's command."""
    if Path(env_ref).exists():
        env_ref = str(Path(env_ref).resolve())
    env = envhub.load(env_ref, trust_code=trust)
    out.mkdir(parents=True, exist_ok=True)
    train = envhub_verl.write_dataset(env, train_split, out / "train.parquet", limit=limit)
    val = envhub_verl.write_dataset(env, val_split, out / "val.parquet", limit=limit)
    config = out / "agent_loops.yaml"
    # JSON strings are YAML strings: the values are written quoted, whatever they hold.
    config.write_text(f"- name: {envhub_verl.AGENT_NAME}\n"
                      "  _target_: envhub.integrations.verl.EnvhubAgentLoop\n"
                      f"  env: {json.dumps(env_ref)}\n"
                      f"  trust_code: {'true' if trust else 'false'}\n")
    return [
        sys.executable, "-m", "verl.trainer.main_ppo",
        "algorithm.adv_estimator=grpo",
        f"data.train_files={train.resolve()}", f"data.val_files={val.resolve()}",
        "data.return_raw_chat=True", "data.max_prompt_length=2048", f"data.max_response_length={response_length}",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.mode=async",
        f"actor_rollout_ref.rollout.n={n}",
        "actor_rollout_ref.rollout.multi_turn.format=hermes",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={config.resolve()}",
        "trainer.n_gpus_per_node=1", "trainer.nnodes=1", "trainer.logger=[console]",
        *extra,
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", help="a bundle directory, an environment id, or a served environment's URL")
    parser.add_argument("out", type=Path, help="the directory for the datasets and the agent-loop config")
    parser.add_argument("--trust", action="store_true", help="run the bundle's own code (tools, verifier, state)")
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B")
    parser.add_argument("--train-split", default="train")
    parser.add_argument("--val-split", default="dev")
    parser.add_argument("--limit", type=int, default=10_000, help="tasks per dataset (a generated split is unbounded)")
    parser.add_argument("--n", type=int, default=8, help="rollouts per prompt (GRPO's group)")
    parser.add_argument("--response-length", type=int, default=4096,
                        help="tokens per rollout: the model's and the environment's")
    parser.add_argument("--run", action="store_true", help="run the trainer (needs verl) instead of printing it")
    parser.add_argument("overrides", nargs="*", help="more verl overrides (key=value), passed on")
    args = parser.parse_intermixed_args(argv)  # overrides may follow the options
    command = prepare(args.env, args.out, trust=args.trust, train_split=args.train_split, val_split=args.val_split,
                      limit=args.limit, model=args.model, n=args.n, response_length=args.response_length,
                      extra=args.overrides)
    if not args.run:
        print(shlex.join(command))
        return
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
