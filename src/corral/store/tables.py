"""Table definitions. The schema itself is created by the Alembic migrations."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

metadata = MetaData()

#: One row per revision of a config type; ``data`` is the full snapshot of that type.
config_revisions = Table(
    "config_revisions",
    metadata,
    Column("config_type", String(32), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("name", String(256), nullable=False, default=""),
    Column("username", String(256), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("description", Text, nullable=False, default=""),
    Column("tags", JSON, nullable=False),
    Column("data", JSON, nullable=False),
    Column("deleted_by", String(256), nullable=True),
    Column("deleted_at", DateTime(timezone=True), nullable=True),
    PrimaryKeyConstraint("config_type", "revision"),
    Index("ix_config_revisions_created_at", "created_at"),
)

#: A single row that every config write updates first: it serializes writers on both
#: databases, so that validation against the other types and the revision check are race-free.
config_write_lock = Table(
    "config_write_lock",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("writes", Integer, nullable=False),
)

#: API tokens; only a SHA-256 of the (high-entropy, random) token is stored.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(256), nullable=False),
    Column("username", String(256), nullable=False),
    Column("roles", JSON, nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)
