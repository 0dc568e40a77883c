"""Hardening: task logs kept after their pods are gone, a user id that sessions are bound to,
the controller's leader lease, and the local files sent with a workflow (``localpath``).

Revision ID: 0005
Revises: 0004
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.create_table(
        "task_logs",
        sa.Column("task_uuid", sa.String(32), nullable=False),
        sa.Column("retry_id", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("task_uuid", "retry_id"),
    )

    op.add_column("users", sa.Column("user_id", sa.String(32), nullable=True))
    users = sa.table("users", sa.column("username", sa.String), sa.column("user_id", sa.String))
    connection = op.get_bind()
    for (username,) in connection.execute(sa.select(users.c.username)).all():
        connection.execute(
            users.update().where(users.c.username == username).values(user_id=secrets.token_hex(16))
        )
    with op.batch_alter_table("users") as batch:
        batch.alter_column("user_id", existing_type=sa.String(32), nullable=False)

    op.add_column("workflows", sa.Column("local_files", sa.JSON, nullable=True))
    op.add_column("workflows", sa.Column("restarted_from", sa.String(128), nullable=True))

    op.create_table(
        "leader_lease",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("renewals", sa.Integer, nullable=False),
        sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("leader_lease")
    with op.batch_alter_table("workflows") as batch:
        batch.drop_column("restarted_from")
        batch.drop_column("local_files")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("user_id")
    op.drop_table("task_logs")
