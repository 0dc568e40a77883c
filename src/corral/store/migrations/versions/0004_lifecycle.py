"""The lifecycle: timestamps, placements and messages on workflows, groups and tasks, and the
objects of the embedded (simulated) cluster.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def _timestamps(table: str, *names: str) -> None:
    for name in names:
        op.add_column(table, sa.Column(name, sa.DateTime(timezone=True), nullable=True))


def upgrade() -> None:
    _timestamps("workflows", "started_at", "ended_at")
    op.add_column("workflows", sa.Column("cancel_requested_by", sa.String(256), nullable=True))
    op.add_column("workflows", sa.Column("message", sa.Text, nullable=True))
    op.create_index("ix_workflows_status", "workflows", ["status"])

    _timestamps("workflow_groups", "scheduling_at", "started_at", "ended_at")
    op.add_column("workflow_groups", sa.Column("domains", sa.JSON, nullable=True))
    op.add_column("workflow_groups", sa.Column("pending_reason", sa.Text, nullable=True))
    op.add_column(
        "workflow_groups",
        sa.Column("ignore_non_lead", sa.Boolean, nullable=False, server_default=sa.true()),
    )
    op.add_column(
        "workflow_groups",
        sa.Column("cleaned", sa.Boolean, nullable=False, server_default=sa.false()),
    )

    _timestamps("workflow_tasks", "started_at", "ended_at")
    op.add_column("workflow_tasks", sa.Column("node", sa.String(253), nullable=True))
    op.add_column("workflow_tasks", sa.Column("exit_code", sa.Integer, nullable=True))
    op.add_column("workflow_tasks", sa.Column("message", sa.Text, nullable=True))
    op.add_column("workflow_tasks", sa.Column("exit_actions", sa.JSON, nullable=True))

    op.create_table(
        "cluster_objects",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("backend", sa.String(256), nullable=False),
        sa.Column("api_version", sa.String(256), nullable=False),
        sa.Column("kind", sa.String(128), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("group_uuid", sa.String(32), nullable=True),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("body", sa.JSON, nullable=False),
        sa.Column("node", sa.String(253), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint(
            "backend", "api_version", "kind", "namespace", "name", name="uq_cluster_objects_key"
        ),
    )
    op.create_index("ix_cluster_objects_group", "cluster_objects", ["group_uuid"])
    op.create_index("ix_cluster_objects_node", "cluster_objects", ["node"])


def downgrade() -> None:
    op.drop_table("cluster_objects")
    for table, columns in (
        (
            "workflow_tasks",
            ("started_at", "ended_at", "node", "exit_code", "message", "exit_actions"),
        ),
        (
            "workflow_groups",
            (
                "scheduling_at",
                "started_at",
                "ended_at",
                "domains",
                "pending_reason",
                "ignore_non_lead",
                "cleaned",
            ),
        ),
        ("workflows", ("started_at", "ended_at", "cancel_requested_by", "message")),
    ):
        with op.batch_alter_table(table) as batch:
            for column in columns:
                batch.drop_column(column)
    op.drop_index("ix_workflows_status", "workflows")
