"""Alembic environment: runs on the connection handed over by ``corral.store.database``."""

from __future__ import annotations

from alembic import context

from corral.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only the programmatic entry point is supported
    raise RuntimeError("run migrations through corral.store.database.migrate()")

context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
