"""When each topology domain is next wholly free, as the latest forecast says
(docs/forecast.md#free-shapes): replaced whole with the group forecasts, read by pool shapes;
and the domain a waiting group most likely starts in.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    op.create_table(
        "domain_forecasts",
        sa.Column("label", sa.String(317), primary_key=True),
        sa.Column("value", sa.String(63), primary_key=True),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("free_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.add_column("forecasts", sa.Column("lands_in", sa.String(63), nullable=True))


def downgrade() -> None:
    op.drop_column("forecasts", "lands_in")
    op.drop_table("domain_forecasts")
