"""Running work on a node that fails or is drained (docs/health.md#running-work): why a group's
tasks are stopped (``fault``: the node that failed, and when), the grace period a drain gives
them (``stop_grace_s``), and one row per group a node fault ended (``node_faults``: the
GPU-seconds it lost, for the metric).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    op.add_column("workflow_groups", sa.Column("fault", sa.Text, nullable=True))
    op.add_column("workflow_groups", sa.Column("stop_grace_s", sa.Float, nullable=True))
    op.create_table(
        "node_faults",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pool", sa.String(256), nullable=False),
        sa.Column("workflow_id", sa.String(128), nullable=False),
        sa.Column("group_uuid", sa.String(32), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("gpu_seconds", sa.Float, nullable=False),
    )
    op.create_index("ix_node_faults_pool", "node_faults", ["pool"])


def downgrade() -> None:
    op.drop_index("ix_node_faults_pool", table_name="node_faults")
    op.drop_table("node_faults")
    op.drop_column("workflow_groups", "stop_grace_s")
    op.drop_column("workflow_groups", "fault")
