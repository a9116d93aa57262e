"""SQL state: tables, schema migrations and the store every write goes through."""
