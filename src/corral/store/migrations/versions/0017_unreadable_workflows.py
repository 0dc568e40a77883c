"""A workflow whose stored state cannot be read (docs/lifecycle.md#a-workflow-that-cannot-be-
read): ``workflows.failure``, why the controller ends it FAILED_SERVER_ERROR; and the times no
reader can read cleared. PostgreSQL stores a time before the year 1 in UTC (a checkpoint's
``0001-01-01T00:00:00+14:00``), which psycopg cannot read back: one such value stopped every
tick of the controller, and a restart did not help.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

from corral.store.workflows.unreadable import clear_unreadable_times

revision = "0017"
down_revision = "0016"

#: The time columns a workflow's rows have at this revision that corral does not always write.
_TIMES = {
    "workflows": ("started_at", "ended_at"),
    "workflow_groups": ("scheduling_at", "started_at", "ended_at", "notice_at", "notice_deadline"),
    "workflow_tasks": ("started_at", "ended_at", "checkpoint_at", "ready_at"),
}


def upgrade() -> None:
    op.add_column("workflows", sa.Column("failure", sa.Text, nullable=True))
    clear_unreadable_times(op.get_bind(), _TIMES)


def downgrade() -> None:
    op.drop_column("workflows", "failure")
