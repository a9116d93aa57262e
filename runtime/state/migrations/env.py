"""Alembic's environment: migrate the connection `state.migrate` (or the revision command) hands over.

There is no URL and no alembic.ini: a connection always comes in `config.attributes["connection"]`, inside a
transaction its owner holds (with the migration lock).
"""

from alembic import context

from pagemind.runtime.state.migrate import include_name, render_item
from pagemind.runtime.state.tables.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "pagemind's migrations run on a connection given in code: use state.migrate.migrate(engine) "
        "or `python -m pagemind.runtime.state.migrations`, not the alembic command"
    )
context.configure(
    connection=connection,
    target_metadata=metadata,
    include_name=include_name,
    render_item=render_item,
    render_as_batch=True,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
