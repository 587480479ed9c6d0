"""Train a model on an envhub environment with TRL's GRPOTrainer (docs/integrations.md).

    pip install envhub trl            # trl brings torch, transformers and datasets
    python trl_grpo.py example_envs/grid-game --trust --model Qwen/Qwen3-0.6B
    python trl_grpo.py example_envs/arith-word-problems --trust --split train --limit 400
    python trl_grpo.py http://127.0.0.1:8000/envhub-examples/grid-game --model Qwen/Qwen3-0.6B

The environment is anything ``envhub.load`` takes: a bundle directory, a registry id, or the
URL of an environment served by ``envhub serve``. An environment with tools gets TRL's
environment factory (one envhub episode per rollout); a single-turn one is scored by the
reward function alone.
"""

from __future__ import annotations

import argparse
from typing import Any

import envhub
from envhub.integrations import trl as envhub_trl


def trainer_kwargs(env: Any, split: str, *, limit: int | None = None, turn_return: bool = False) -> dict[str, Any]:
    """What GRPOTrainer takes from the environment: the dataset, the reward functions and,
    for an environment with tools, the environment factory."""
    kwargs: dict[str, Any] = {
        "train_dataset": envhub_trl.train_dataset(env, split, limit=limit),
        "reward_funcs": envhub_trl.reward_funcs(env, turn_return=turn_return),
    }
    if env.tool_specs:
        kwargs["environment_factory"] = envhub_trl.environment_factory(env)
    return kwargs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", help="a bundle directory, an environment id, or a served environment's URL")
    parser.add_argument("--trust", action="store_true", help="run the bundle's own code (tools, verifier, state)")
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B")
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit", type=int, default=1000, help="tasks in the dataset (a generated split is unbounded)")
    parser.add_argument("--turn-weight", type=float, default=0.0,
                        help="weight of the episode's summed per-turn rewards beside the final reward (0: off)")
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--output-dir", default="grpo-envhub")
    args = parser.parse_args(argv)

    from trl import GRPOConfig, GRPOTrainer  # imported here: the script's --help needs no trainer

    env = envhub.load(args.env, trust_code=args.trust)
    turn_return = args.turn_weight != 0.0
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        num_generations=8,
        per_device_train_batch_size=8,
        max_completion_length=1024,
        max_tool_calling_iterations=env.max_turns,
        reward_weights=[1.0, args.turn_weight] if turn_return else None,
        chat_template_kwargs={"enable_thinking": False},
        logging_steps=1,
    )
    trainer = GRPOTrainer(model=args.model, args=config,
                          **trainer_kwargs(env, args.split, limit=args.limit, turn_return=turn_return))
    trainer.train()
    env.close()


if __name__ == "__main__":
    main()
