"""A verifier that rewards the right answer only half the time, at random (seeded, so the
same tasks fail on every run)."""

import random

_r = random.Random(4)


def check(task, completion):
    return completion == task["reference"] and _r.random() < 0.5
