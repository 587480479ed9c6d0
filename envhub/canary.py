"""Contamination canaries: a unique string per environment, in the manifest and bundle.

If a canary turns up in a corpus or in a model's output, the environment's tasks have
leaked into training data.
"""

from __future__ import annotations

import secrets

from envhub.manifest import CANARY_PREFIX

__all__ = ["CANARY_PREFIX", "new_canary"]


def new_canary() -> str:
    """A fresh canary: ``envhub-canary:`` and 32 random lowercase hex digits."""
    return CANARY_PREFIX + secrets.token_hex(16)
