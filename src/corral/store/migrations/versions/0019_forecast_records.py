"""The forecasts corral published, kept until their group starts (docs/forecast.md#accuracy):
how often the bands held and how far the medians were, per pool, and what calibrates the
next bands; the cost of each refresh; and since when the work a forecast waits on has run.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"


def upgrade() -> None:
    op.create_table(
        "forecast_records",
        sa.Column("group_uuid", sa.String(32), primary_key=True),
        sa.Column("published_at", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("pool", sa.String(256), nullable=False),
        sa.Column("p10", sa.DateTime(timezone=True), nullable=True),
        sa.Column("p50", sa.DateTime(timezone=True), nullable=True),
        sa.Column("p90", sa.DateTime(timezone=True), nullable=True),
        sa.Column("unknown", sa.Boolean, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_forecast_records_started", "forecast_records", ["started_at"])
    op.create_table(
        "forecast_refreshes",
        sa.Column("computed_at", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("groups", sa.Integer, nullable=False),
        sa.Column("cpu_seconds", sa.Float, nullable=False),
        sa.Column("wall_seconds", sa.Float, nullable=False),
    )
    op.add_column(
        "forecasts", sa.Column("waits_on_since", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("forecasts", "waits_on_since")
    op.drop_table("forecast_refreshes")
    op.drop_index("ix_forecast_records_started", "forecast_records")
    op.drop_table("forecast_records")
