"""Scale: the controller's inbox (submissions and cancels it has not seen yet), reasons shared
by the waiting groups that ask for the same thing, submissions' idempotency keys, and the last
number given to each workflow name.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.create_table(
        "controller_inbox",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("workflow_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "pending_shapes",
        sa.Column("shape", sa.String(64), primary_key=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("pod_names", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.add_column("workflow_groups", sa.Column("pending_shape", sa.String(64), nullable=True))
    op.create_index("ix_workflow_groups_status", "workflow_groups", ["status"])
    op.create_table(
        "idempotency_keys",
        sa.Column("username", sa.String(256), nullable=False),
        sa.Column("key", sa.String(256), nullable=False),
        sa.Column("workflow_id", sa.String(128), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("username", "key"),
    )
    op.create_table(
        "workflow_numbers",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("last", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("workflow_numbers")
    op.drop_table("idempotency_keys")
    op.drop_index("ix_workflow_groups_status", "workflow_groups")
    with op.batch_alter_table("workflow_groups") as batch:
        batch.drop_column("pending_shape")
    op.drop_table("pending_shapes")
    op.drop_table("controller_inbox")
