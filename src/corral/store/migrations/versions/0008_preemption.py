"""Preemption: a group to be evicted (``evict``, read by its workflow's next step), why it was
last evicted (``preempted_by``), and one row per eviction (``preemptions``: which pool lost how
many GPUs to whom, for the pool views).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    op.add_column(
        "workflow_groups",
        sa.Column("evict", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.add_column("workflow_groups", sa.Column("preempted_by", sa.Text, nullable=True))
    op.create_table(
        "preemptions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pool", sa.String(256), nullable=False),
        sa.Column("workflow_id", sa.String(128), nullable=False),
        sa.Column("group_uuid", sa.String(32), nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("by_workflow", sa.String(128), nullable=False),
        sa.Column("reclaimed", sa.Boolean, nullable=False),
    )
    op.create_index("ix_preemptions_at", "preemptions", ["at"])


def downgrade() -> None:
    op.drop_index("ix_preemptions_at", "preemptions")
    op.drop_table("preemptions")
    op.drop_column("workflow_groups", "preempted_by")
    op.drop_column("workflow_groups", "evict")
