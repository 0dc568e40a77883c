"""Node health changed on a running server (cordon, uncordon, fail, heal), audited: one row per
change, with who, when, why and the health before and after (docs/health.md).

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    op.create_table(
        "node_changes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("backend", sa.String(256), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("by", sa.String(256), nullable=False),
        sa.Column("reason", sa.String(1024), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("before", sa.JSON, nullable=False),
        sa.Column("after", sa.JSON, nullable=False),
    )
    op.create_index("ix_node_changes_backend_node", "node_changes", ["backend", "node"])


def downgrade() -> None:
    op.drop_index("ix_node_changes_backend_node", table_name="node_changes")
    op.drop_table("node_changes")
