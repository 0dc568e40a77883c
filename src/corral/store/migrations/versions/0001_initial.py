"""Config revisions, the config write lock and API tokens.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "config_revisions",
        sa.Column("config_type", sa.String(32), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("username", sa.String(256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("deleted_by", sa.String(256), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("config_type", "revision"),
    )
    op.create_index("ix_config_revisions_created_at", "config_revisions", ["created_at"])
    lock = op.create_table(
        "config_write_lock",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("writes", sa.Integer, nullable=False),
    )
    op.bulk_insert(lock, [{"id": 1, "writes": 0}])
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("username", sa.String(256), nullable=False),
        sa.Column("roles", sa.JSON, nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("api_tokens")
    op.drop_table("config_write_lock")
    op.drop_index("ix_config_revisions_created_at", "config_revisions")
    op.drop_table("config_revisions")
