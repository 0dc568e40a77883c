"""Users; existing token owners become users with their tokens' roles.

Revision ID: 0002
Revises: 0001
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    users = op.create_table(
        "users",
        sa.Column("username", sa.String(256), primary_key=True),
        sa.Column("roles", sa.JSON, nullable=False),
        sa.Column("default_pool", sa.String(256), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(256), nullable=False),
    )
    tokens = sa.table(
        "api_tokens",
        sa.column("username", sa.String),
        sa.column("roles", sa.JSON),
        sa.column("revoked_at", sa.DateTime),
    )
    found: dict[str, set[str]] = {}
    rows = op.get_bind().execute(
        sa.select(tokens.c.username, tokens.c.roles).where(tokens.c.revoked_at.is_(None))
    )
    for username, roles in rows:
        found.setdefault(username, set()).update(roles or [])
    now = datetime.now(UTC)
    op.bulk_insert(
        users,
        [
            {
                "username": name,
                "roles": sorted(roles),
                "default_pool": None,
                "created_at": now,
                "created_by": "migration",
            }
            for name, roles in sorted(found.items())
        ],
    )


def downgrade() -> None:
    op.drop_table("users")
