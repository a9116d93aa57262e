"""The database schema, defined once: every table and index pagemind keeps in SQL, a module per owner.

Nothing else creates or alters a table: the versioned migrations in `migrations/versions/` bring a database to
this shape when a store opens (`state.migrate`), and `python -m pagemind.runtime.state.migrations revision
--autogenerate -m "…"` writes the next migration from the difference between these definitions and the head.
`tables.schema` gathers them: its `metadata` holds every table (what migrations, key rotation and erasure walk).

- `agents`: the agent and its core memory (`agents`, `blocks`, `block_versions`), read and written by `StateStore`.
- `conversation`: its conversation log (`messages`, `summaries`, `steps`, `turn_keys`), likewise.
- `archival`: archival memory's SQL side (`memory.archival`, `memory.ledger`, `memory.rekey`).
- `memory`: the embedding cache, recall's watermarks, muted topics, memory reviews and reflections.
- `daemon`: the daemon's (`scheduler`): its inbox, leases, agent origins, trigger fires, daemons and run events.
- `security`: the API's keys, erasure's purges, privacy's redaction numbering, encryption at rest's key check.

Every `agent_id` column holds `agents.id`. (The archival tables carry no foreign key: the archival service also
runs on its own over a bare engine, in benchmarks.)
"""
