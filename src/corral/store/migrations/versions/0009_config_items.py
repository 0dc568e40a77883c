"""Config history by item: a revision records the items it changed (``config_items``), not a
full snapshot of its type. With 5,000 pools every write stored, and every history listing read,
megabytes; now a write stores what it changed, and a type's config at any revision is the
newest version of each item up to it.

``config_items`` holds one row per item a revision set or deleted: the item's new value, or
NULL where the revision deleted it, whether it was created, updated or deleted, and its place
among the revision's items (items are listed in the order they were created, as the
snapshots kept them). The
WORKFLOW config, one object, is the item named ``""``. ``config_revisions`` keeps who, when,
why and the tags, and loses ``data``.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"

SINGLETONS = ("WORKFLOW",)

_revisions = sa.table(
    "config_revisions",
    sa.column("config_type", sa.String),
    sa.column("revision", sa.Integer),
    sa.column("data", sa.JSON),
)
_items = sa.table(
    "config_items",
    sa.column("config_type", sa.String),
    sa.column("name", sa.String),
    sa.column("revision", sa.Integer),
    sa.column("position", sa.Integer),
    sa.column("action", sa.String),
    sa.column("data", sa.JSON(none_as_null=True)),
)


def upgrade() -> None:
    op.create_table(
        "config_items",
        sa.Column("config_type", sa.String(32), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("data", sa.JSON, nullable=True),
        sa.PrimaryKeyConstraint("config_type", "name", "revision"),
    )
    op.create_index("ix_config_items_revision", "config_items", ["config_type", "revision"])
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(_revisions.c.config_type, _revisions.c.revision, _revisions.c.data).order_by(
            _revisions.c.config_type, _revisions.c.revision
        )
    ).all()
    previous: dict[str, dict[str, Any]] = {}
    for ctype, number, data in rows:
        items = {"": data} if ctype in SINGLETONS else dict(data)
        before = previous.get(ctype, {})
        changed = [
            {
                "config_type": ctype,
                "name": name,
                "revision": number,
                "position": position,
                "action": action,
                "data": body,
            }
            for position, (name, action, body) in enumerate(_delta(before, items))
        ]
        if changed:
            bind.execute(_items.insert(), changed)
        previous[ctype] = items
    with op.batch_alter_table("config_revisions") as batch:
        batch.drop_column("data")


def _delta(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str, Any]]:
    found = [
        (name, "updated" if name in before else "created", body)
        for name, body in after.items()
        if before.get(name) != body or name not in before
    ]
    return found + [(name, "deleted", None) for name in before if name not in after]


def downgrade() -> None:
    with op.batch_alter_table("config_revisions") as batch:
        batch.add_column(sa.Column("data", sa.JSON, nullable=True))
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(_items.c.config_type, _items.c.revision, _items.c.name, _items.c.data).order_by(
            _items.c.config_type, _items.c.revision, _items.c.position
        )
    ).all()
    snapshots: dict[tuple[str, int], dict[str, Any]] = {}
    current: dict[str, dict[str, Any]] = {}
    for ctype, number, name, body in rows:
        items = current.setdefault(ctype, {})
        if body is None:
            items.pop(name, None)
        else:
            items[name] = body
        snapshots[(ctype, number)] = dict(items)
    revisions = bind.execute(sa.select(_revisions.c.config_type, _revisions.c.revision)).all()
    for ctype, number in revisions:
        # A revision that changed nothing (none is recorded) has its predecessor's snapshot.
        earlier = [n for (t, n) in snapshots if t == ctype and n <= number]
        items = snapshots[(ctype, max(earlier))] if earlier else {}
        data = items.get("", {}) if ctype in SINGLETONS else items
        bind.execute(
            _revisions.update()
            .where(_revisions.c.config_type == ctype, _revisions.c.revision == number)
            .values(data=data)
        )
    op.drop_index("ix_config_items_revision", "config_items")
    op.drop_table("config_items")
