"""Bundles: a manifest plus the files it names."""

from envhub.bundle._validate import BundleCheck, SplitFacts, validate_bundle

__all__ = ["BundleCheck", "SplitFacts", "validate_bundle"]
