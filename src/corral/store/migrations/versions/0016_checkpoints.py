"""Checkpoints and notices (docs/checkpoints.md): a task's last committed checkpoint as it
reported it (when, at which step, with what description) and when it said it was ready to
stop; a group's notice (when given, its deadline); and a row per gang stopped by a
preemption, a reclaim or a drain: the GPU-seconds it lost since its checkpoints, whether every
task acknowledged the notice, and how long it took to stop.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"

_TASK_COLUMNS = (
    ("checkpoint_at", sa.DateTime(timezone=True)),
    ("checkpoint_step", sa.BigInteger),
    ("checkpoint_note", sa.Text),
    ("ready_at", sa.DateTime(timezone=True)),
)
_GROUP_COLUMNS = (
    ("notice_at", sa.DateTime(timezone=True)),
    ("notice_deadline", sa.DateTime(timezone=True)),
)
_TABLES = (("workflow_tasks", _TASK_COLUMNS), ("workflow_groups", _GROUP_COLUMNS))


def upgrade() -> None:
    for table, columns in _TABLES:
        for name, kind in columns:
            op.add_column(table, sa.Column(name, kind, nullable=True))
    op.create_table(
        "eviction_stops",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pool", sa.String(256), nullable=False),
        sa.Column("workflow_id", sa.String(128), nullable=False),
        sa.Column("group_uuid", sa.String(32), nullable=False),
        sa.Column("cause", sa.String(16), nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("lost_gpu_seconds", sa.Float, nullable=False),
        sa.Column("acknowledged", sa.Boolean, nullable=False),
        sa.Column("stop_seconds", sa.Float, nullable=False),
    )
    op.create_index("ix_eviction_stops_at", "eviction_stops", ["at"])


def downgrade() -> None:
    op.drop_index("ix_eviction_stops_at", "eviction_stops")
    op.drop_table("eviction_stops")
    for table, columns in _TABLES:
        for name, _ in reversed(columns):
            op.drop_column(table, name)
