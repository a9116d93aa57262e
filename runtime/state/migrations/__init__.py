"""pagemind's versioned schema migrations (Alembic, configured in code by `state.migrate`; no alembic.ini).

`env.py` runs them on the connection `state.migrate` hands over; `versions/` holds one file per revision;
`python -m pagemind.runtime.state.migrations --help` writes new ones (see `__main__.py`).
"""
