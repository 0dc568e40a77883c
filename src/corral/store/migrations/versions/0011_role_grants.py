"""Who granted each of a user's roles, and when (OSMO's ``assigned_by`` and ``assigned_at``).
Users from before have none recorded; their roles count as granted with the user.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.add_column(
        "users",
        sa.Column("role_grants", sa.JSON, nullable=False, server_default=sa.text("'{}'")),
    )


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("role_grants")
