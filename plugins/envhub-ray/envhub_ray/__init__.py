"""envhub-ray: the Ray executor (being written)."""
