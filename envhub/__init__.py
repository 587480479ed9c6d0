"""envhub: versioned, verifiable environments for RL with LLM agents."""
