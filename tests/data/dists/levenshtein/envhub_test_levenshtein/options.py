"""The options of the levenshtein verifier kind (imported only when a manifest uses it)."""

from envhub.manifest import OptionsModel
from pydantic import Field


class LevenshteinOptions(OptionsModel):
    field: str = "answer"
    max_distance: int = Field(0, ge=0)
