"""Moving one agent with all of its memory between pagemind databases, and in from and out to Letta agent files.

- `records`: the `pagemind.agent` JSON Lines format (a header, one typed record per line, an end record), read and
  written; what a record holds is the SQL row it came from, less the ids only one database means.
- `export`: an agent's rows read into a `Bundle`, in one transaction.
- `load`: a `Bundle` written into a database as a new agent (ids renumbered, archival memory re-embedded by the
  importing side's model), refusing a taken name unless told to rename or replace.
- `letta`: Letta agent files (`.af`, both of Letta's schemas) read into bundles, with the report of what did not
  map (their messages: `letta_messages`); `agent_file`: a bundle written as one.
- `files`: which of the two formats a file holds (by its content), imported; an agent exported in either.

The docs' pages "Export and import" and "Migrating from Letta" describe the formats for users.
"""
