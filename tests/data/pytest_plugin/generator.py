"""A task generator: one sum per seed; with BROKEN_AT set, it fails on that seed."""

BROKEN_AT = None


def make_task(seed):
    if seed == BROKEN_AT:
        raise ValueError(f"no task for seed {seed}")
    return {"id": f"sum-{seed}", "prompt": f"What is {seed} + 1?", "answer": str(seed + 1)}
