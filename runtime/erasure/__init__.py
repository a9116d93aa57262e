"""Erasure: an agent purged from every store, so that nothing it was told or stored is left under PAGEMIND_HOME.

`purge.purge_agents` erases a list of agents (one, or every agent of a user): it records them as pending
(`record`: from then on they are invisible), then deletes their trace folders, their vector-store points (every
embedded shard rewritten without them), their rows (`rows`: every table, the full-text index, the embedding cache
entries only their texts produced) and truncates SQLite's WAL. A purge a kill cut short is finished by the next process
that opens the stores (`purge.resume_purges`).
"""
