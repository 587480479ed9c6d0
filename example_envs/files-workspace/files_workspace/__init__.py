"""The code of envhub-examples/files-workspace: the tools and the verifier."""
