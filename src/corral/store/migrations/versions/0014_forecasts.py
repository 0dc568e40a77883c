"""Start-time forecasts of waiting groups (docs/forecast.md): one row per group, replaced whole
by the controller after it forecasts, read by explain.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    op.create_table(
        "forecasts",
        sa.Column("group_uuid", sa.String(32), primary_key=True),
        sa.Column("workflow_id", sa.String(128), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("p10", sa.DateTime(timezone=True), nullable=True),
        sa.Column("p50", sa.DateTime(timezone=True), nullable=True),
        sa.Column("p90", sa.DateTime(timezone=True), nullable=True),
        sa.Column("queue", sa.String(256), nullable=False),
        sa.Column("queue_position", sa.Integer, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("waits_on", sa.String(128), nullable=True),
        sa.Column("on_timeouts", sa.Boolean, nullable=False),
    )
    op.create_index("ix_forecasts_workflow", "forecasts", ["workflow_id"])


def downgrade() -> None:
    op.drop_index("ix_forecasts_workflow", table_name="forecasts")
    op.drop_table("forecasts")
