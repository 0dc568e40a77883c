"""Reading a config type's item versions (``config_items``): the items at a revision, the ones
written since a known revision, and what each revision changed (see ``config_store.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import and_, func, or_, select
from sqlalchemy.engine import Connection

from corral.domain.configs.types import ConfigType
from corral.store.tables import config_items, config_revisions

Action = Literal["created", "updated", "deleted"]


@dataclass(frozen=True)
class ChangedItem:
    """One item a revision changed: its value after the revision (None: deleted)."""

    name: str
    action: Action
    data: Any


@dataclass(frozen=True)
class Current:
    """A type's items at its newest revision. Shared between threads: read-only."""

    revision: int
    items: Mapping[str, Any]


#: What a writer sees inside the write transaction: the newest items of each written type.
Heads = dict[ConfigType, Current]


def newest_revisions(connection: Connection) -> dict[ConfigType, int]:
    table = config_revisions.c
    rows = connection.execute(
        select(table.config_type, func.max(table.revision)).group_by(table.config_type)
    ).all()
    return {ConfigType(name): int(revision) for name, revision in rows}


def read_since(
    connection: Connection, behind: Mapping[ConfigType, Current], newest: Mapping[ConfigType, int]
) -> Heads:
    """Each type in ``behind`` brought from its revision to ``newest``'s, reading only the item
    versions in between (copied, not changed in place: readers may hold the old items)."""
    if not behind:
        return {}
    table = config_items.c
    wanted = [
        and_(
            table.config_type == ctype.value,
            table.revision > known.revision,
            table.revision <= newest[ctype],
        )
        for ctype, known in behind.items()
    ]
    rows = connection.execute(
        select(table.config_type, table.name, table.data)
        .where(or_(*wanted))
        .order_by(table.config_type, table.revision, table.position)
    ).all()
    items = {ctype: dict(known.items) for ctype, known in behind.items()}
    for name_of_type, name, data in rows:
        kept = items[ConfigType(name_of_type)]
        if data is None:
            kept.pop(name, None)
        else:
            kept[name] = data
    return {ctype: Current(newest[ctype], items[ctype]) for ctype in behind}


def items_at_revision(connection: Connection, ctype: ConfigType, revision: int) -> dict[str, Any]:
    """The newest version of each item of ``ctype`` up to ``revision`` (deleted ones left
    out), in the order they were created: as a dict that each revision updated in turn."""
    table = config_items.c
    up_to = and_(table.config_type == ctype.value, table.revision <= revision)
    latest = (
        select(table.name, func.max(table.revision).label("revision"))
        .where(up_to)
        .group_by(table.name)
        .subquery()
    )
    born = (
        select(table.name, func.max(table.revision).label("revision"))
        .where(up_to, table.action == "created")
        .group_by(table.name)
        .subquery()
    )
    birth = config_items.alias("birth")
    rows = connection.execute(
        select(table.name, table.data)
        .join(latest, and_(table.name == latest.c.name, table.revision == latest.c.revision))
        .join(born, born.c.name == table.name)
        .join(
            birth,
            and_(
                birth.c.config_type == ctype.value,
                birth.c.name == born.c.name,
                birth.c.revision == born.c.revision,
            ),
        )
        .where(table.config_type == ctype.value, table.data.is_not(None))
        .order_by(born.c.revision, birth.c.position)
    ).all()
    return {name: data for name, data in rows}


def changed_items(
    connection: Connection, keys: Sequence[tuple[ConfigType, int]]
) -> dict[tuple[ConfigType, int], tuple[ChangedItem, ...]]:
    """What each (type, revision) in ``keys`` changed, in the order it was recorded."""
    if not keys:
        return {}
    table = config_items.c
    wanted = [
        and_(table.config_type == ctype.value, table.revision == number) for ctype, number in keys
    ]
    found: dict[tuple[ConfigType, int], list[ChangedItem]] = {}
    for ctype, number, name, action, data in connection.execute(
        select(table.config_type, table.revision, table.name, table.action, table.data)
        .where(or_(*wanted))
        .order_by(table.config_type, table.revision, table.position)
    ):
        found.setdefault((ConfigType(ctype), number), []).append(ChangedItem(name, action, data))
    return {key: tuple(items) for key, items in found.items()}
