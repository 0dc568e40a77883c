"""A task's attempts, and a group's place in the admission order (docs/lifecycle.md#attempts,
docs/health.md#running-work).

``task_attempts``: one row per attempt that ended while its task went on (placed again after a
fault, a drain or a preemption, or rescheduled by an exit action): its node, when it ran, its
exit code and why it stopped. A gang knocked back into the queue used to read as if it never
ran. ``workflow_groups.admitted_at``: when the group first waited for a scheduler, kept when it
is put back, so that it keeps its place (it was the time of the requeue: the back of the
queue).

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"


def upgrade() -> None:
    op.add_column(
        "workflow_groups", sa.Column("admitted_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.execute("UPDATE workflow_groups SET admitted_at = scheduling_at")
    op.create_table(
        "task_attempts",
        sa.Column("task_uuid", sa.String(32), nullable=False),
        sa.Column("retry_id", sa.Integer, nullable=False),
        sa.Column("node", sa.String(253), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("task_uuid", "retry_id"),
    )


def downgrade() -> None:
    op.drop_table("task_attempts")
    op.drop_column("workflow_groups", "admitted_at")
