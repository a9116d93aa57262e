"""Commands an operator runs around the agents: `pagemind keys` (API keys, users) and `pagemind models` (embedding
models)."""
