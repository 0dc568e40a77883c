"""Workflows, their task groups (with the exact manifests to create) and tasks.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_table(
        "workflows",
        sa.Column("workflow_id", sa.String(128), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("uuid", sa.String(32), nullable=False, unique=True),
        sa.Column("pool", sa.String(256), nullable=False),
        sa.Column("backend", sa.String(256), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("priority", sa.String(16), nullable=False),
        sa.Column("submitted_by", sa.String(256), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("exec_timeout_s", sa.Float, nullable=False),
        sa.Column("queue_timeout_s", sa.Float, nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("template", sa.Text, nullable=True),
        sa.UniqueConstraint("name", "number", name="uq_workflows_name_number"),
    )
    op.create_index("ix_workflows_submitted_at", "workflows", ["submitted_at"])
    op.create_table(
        "workflow_groups",
        sa.Column("group_uuid", sa.String(32), primary_key=True),
        sa.Column(
            "workflow_id",
            sa.String(128),
            sa.ForeignKey("workflows.workflow_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("upstream", sa.JSON, nullable=False),
        sa.Column("resource_kinds", sa.JSON, nullable=False),
        sa.Column("manifests", sa.JSON, nullable=False),
    )
    op.create_index("ix_workflow_groups_workflow", "workflow_groups", ["workflow_id"])
    op.create_table(
        "workflow_tasks",
        sa.Column("task_uuid", sa.String(32), primary_key=True),
        sa.Column(
            "group_uuid",
            sa.String(32),
            sa.ForeignKey("workflow_groups.group_uuid", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("pod_name", sa.String(253), nullable=False),
        sa.Column("platform", sa.String(256), nullable=False),
        sa.Column("lead", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("retry_id", sa.Integer, nullable=False),
    )
    op.create_index("ix_workflow_tasks_group", "workflow_tasks", ["group_uuid"])


def downgrade() -> None:
    op.drop_table("workflow_tasks")
    op.drop_table("workflow_groups")
    op.drop_index("ix_workflows_submitted_at", "workflows")
    op.drop_table("workflows")
