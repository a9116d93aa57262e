"""Forget by request: what a query matches removed from every tier an agent keeps text in, and from its traces.

`forget.forget_everywhere(agent, query, home)` is what the `forget` tool, `pagemind memory forget AGENT --query`
and `POST /v1/agents/{name}/memory/forget` run: archival memories (their rows, history, vector points, embedding
cache entries), episodes and summaries (rewritten without the sentences that match), core block lines (a versioned
`forget` edit; earlier versions scrubbed), recall messages (their text replaced by a tombstone), then the trace
files under `$PAGEMIND_HOME/traces/AGENT/`; SQLite's WAL is checkpointed and the vector shard rewritten, as a purge
does (`runtime.erasure`), so no byte of what was forgotten is left. Matching is `memory.topics.TopicMatcher`.
"""
