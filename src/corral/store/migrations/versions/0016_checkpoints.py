"""A task's last committed checkpoint, as it reported it (docs/checkpoints.md): when, and
optionally at which step and with what description. Preemption weighs the work a victim would
lose from it.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"


def upgrade() -> None:
    op.add_column(
        "workflow_tasks", sa.Column("checkpoint_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("workflow_tasks", sa.Column("checkpoint_step", sa.BigInteger, nullable=True))
    op.add_column("workflow_tasks", sa.Column("checkpoint_note", sa.Text, nullable=True))


def downgrade() -> None:
    for column in ("checkpoint_note", "checkpoint_step", "checkpoint_at"):
        op.drop_column("workflow_tasks", column)
