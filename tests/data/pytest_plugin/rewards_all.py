"""A verifier that rewards everything, an empty answer included."""


def check(task, completion):
    return 1.0
