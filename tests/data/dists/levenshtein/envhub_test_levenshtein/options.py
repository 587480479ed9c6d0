"""The options of the levenshtein verifier kind (imported only when a manifest uses it)."""

from pydantic import Field

from envhub.manifest import OptionsModel


class LevenshteinOptions(OptionsModel):
    field: str = "answer"
    max_distance: int = Field(0, ge=0)
