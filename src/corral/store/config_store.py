"""The config repository: revisions per config type, each recording the items it changed.

A revision row says who wrote, when, why and with which tags; ``config_items`` holds each item
it set (its new value) or deleted. A type's config at revision N is the newest version of each
item up to N, so a write stores what it changed and no more, whatever the number of items
(docs/architecture.md#config-storage-one-row-per-changed-item).

The newest items of every type are kept in memory and brought up to date by reading only the
item versions written since (by this server or another one on the same database).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, Engine, Select, func, select, update
from sqlalchemy.engine import Connection, RowMapping

from corral.domain.configs.types import ConfigType
from corral.domain.formats.wire_time import as_utc
from corral.store.config_item_versions import (
    Action,
    ChangedItem,
    Current,
    Heads,
    changed_items,
    items_at_revision,
    newest_revisions,
    read_since,
)
from corral.store.database import writing
from corral.store.tables import config_items, config_revisions, config_write_lock


@dataclass(frozen=True)
class Revision:
    """One stored revision. ``changed`` is filled where it was read with its data; ``data``,
    the type's whole config at this revision, only where one revision was asked for."""

    config_type: ConfigType
    revision: int
    name: str
    username: str
    created_at: datetime
    description: str
    tags: list[str]
    changed: tuple[ChangedItem, ...] = ()
    data: Mapping[str, Any] | None = None
    deleted_by: str | None = None
    deleted_at: datetime | None = None


@dataclass(frozen=True)
class NewRevision:
    """A revision to record: the new value of each item it changes (None: delete it)."""

    config_type: ConfigType
    changes: Mapping[str, Any]
    name: str
    username: str
    description: str
    tags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class HistoryQuery:
    config_types: Sequence[ConfigType] = ()
    name: str | None = None
    revision: int | None = None
    tags: Sequence[str] = ()
    created_before: datetime | None = None
    created_after: datetime | None = None
    at_timestamp: datetime | None = None
    offset: int = 0
    limit: int = 20
    order: Literal["ASC", "DESC"] = "ASC"


WritePlan = Callable[[Heads], list[NewRevision]]

#: How long the current items read are used before the database is asked again.
CURRENT_MAX_AGE = 1.0


class ConfigStore:
    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self._engine = engine
        self._clock = clock
        #: The newest items of each type read so far; replaced, never changed in place.
        self._cache: dict[ConfigType, Current] = {}
        self._cache_lock = threading.Lock()
        #: The answer of :meth:`current`, when it was asked (monotonic seconds), and the count
        #: of this store's writes then: a write of this server is seen by its next read.
        self._checked: tuple[float, int] | None = None
        self._monotonic = time.monotonic
        self._writes = 0

    # ---------------------------------------------------------------------------- reads

    def current(self, fresh: bool = False) -> dict[ConfigType, Current]:
        """The newest items of every type that has a revision. The database is asked for the
        newest revision numbers at most every :data:`CURRENT_MAX_AGE` seconds (and after this
        store's writes, or when ``fresh``); items are read only where a number moved, and
        then only the versions written since."""
        now = self._monotonic()
        checked = self._checked
        if (
            fresh
            or checked is None
            or now - checked[0] >= CURRENT_MAX_AGE
            or checked[1] != self._writes
        ):
            writes = self._writes
            with self._engine.connect() as connection:
                self._advance(connection, newest_revisions(connection))
            self._checked = (now, writes)
        with self._cache_lock:
            return dict(self._cache)

    def head(self, ctype: ConfigType) -> Current | None:
        """The newest items of ``ctype`` (one query, and the versions written since)."""
        with self._engine.connect() as connection:
            newest = connection.execute(
                select(func.max(config_revisions.c.revision)).where(
                    config_revisions.c.config_type == ctype.value
                )
            ).scalar()
            if newest is None:
                return None
            return self._advance(connection, {ctype: int(newest)})[ctype]

    def latest(self) -> list[Revision]:
        """The newest revision of every type that has one (without data)."""
        newest = (
            select(
                config_revisions.c.config_type,
                func.max(config_revisions.c.revision).label("revision"),
            )
            .group_by(config_revisions.c.config_type)
            .subquery()
        )
        statement = select(config_revisions).where(
            config_revisions.c.config_type == newest.c.config_type,
            config_revisions.c.revision == newest.c.revision,
        )
        with self._engine.connect() as connection:
            return [_revision(row) for row in connection.execute(statement).mappings()]

    def get(self, ctype: ConfigType, revision: int) -> Revision | None:
        """One revision with what it changed and the type's whole config at it."""
        with self._engine.connect() as connection:
            row = (
                connection.execute(
                    select(config_revisions).where(
                        config_revisions.c.config_type == ctype.value,
                        config_revisions.c.revision == revision,
                    )
                )
                .mappings()
                .first()
            )
            if row is None:
                return None
            changed = changed_items(connection, [(ctype, revision)])
            data = items_at_revision(connection, ctype, revision)
        return _revision(row, changed.get((ctype, revision), ()), data)

    def items_at(self, ctype: ConfigType, revision: int) -> dict[str, Any]:
        """The items of ``ctype`` at ``revision`` (whether or not that revision exists)."""
        with self._engine.connect() as connection:
            return items_at_revision(connection, ctype, revision)

    def history(self, query: HistoryQuery, *, with_data: bool = True) -> list[Revision]:
        """Matching non-deleted revisions: the newest ``limit`` after ``offset``, in ``order``.
        With data, each says what it changed; a query for one ``revision`` number also reads
        each type's whole config at it."""
        statement = _history_statement(query)
        if not query.tags:
            statement = statement.offset(query.offset).limit(query.limit)
        with self._engine.connect() as connection:
            rows = list(connection.execute(statement).mappings())
            if query.tags:  # tags are a JSON list: filter portably here, then page
                wanted = set(query.tags)
                rows = [row for row in rows if wanted <= set(row["tags"])]
                rows = rows[query.offset : query.offset + query.limit]
            keys = [(ConfigType(row["config_type"]), int(row["revision"])) for row in rows]
            changed = changed_items(connection, keys) if with_data else {}
            whole = {
                key: items_at_revision(connection, *key)
                for key in keys
                if with_data and query.revision is not None
            }
        found = [
            _revision(row, changed.get(key, ()), whole.get(key))
            for row, key in zip(rows, keys, strict=True)
        ]
        order = lambda r: (r.created_at, r.config_type.value, r.revision)  # noqa: E731
        return sorted(found, key=order, reverse=query.order == "DESC")

    # --------------------------------------------------------------------------- writes

    def write(self, plan: WritePlan) -> list[Revision]:
        """Run ``plan`` on the newest items and record the revisions it returns, atomically.

        Writers are serialized (``config_write_lock``), so ``plan`` sees the items its
        revisions will follow; it may raise to abort without writing anything."""
        with self._writing() as connection:
            connection.execute(
                update(config_write_lock)
                .where(config_write_lock.c.id == 1)
                .values(writes=config_write_lock.c.writes + 1)
            )
            heads = self._advance(connection, newest_revisions(connection))
            now = self._clock()
            written: list[Revision] = []
            for new in plan(heads):
                revision = _record(connection, heads, new, now)
                if revision is not None:
                    written.append(revision)
        with self._cache_lock:  # committed: the next read starts from what was written
            for revision in written:
                ctype = revision.config_type
                if self._cache.get(ctype, _NONE).revision < heads[ctype].revision:
                    self._cache[ctype] = heads[ctype]
        return written

    def set_deleted(self, ctype: ConfigType, revision: int, username: str) -> None:
        self._update_revision(ctype, revision, deleted_by=username, deleted_at=self._clock())

    def set_tags(self, ctype: ConfigType, revision: int, tags: list[str]) -> None:
        self._update_revision(ctype, revision, tags=tags)

    def _update_revision(self, ctype: ConfigType, revision: int, **values: Any) -> None:
        with self._writing() as connection:
            connection.execute(
                update(config_revisions)
                .where(
                    config_revisions.c.config_type == ctype.value,
                    config_revisions.c.revision == revision,
                )
                .values(**values)
            )

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction; once it has ended (committed or not), the next
        :meth:`current` asks the database again: this server sees its writes at once."""
        try:
            with writing(self._engine) as connection:
                yield connection
        finally:
            self._writes += 1

    # ---------------------------------------------------------------------------- cache

    def _advance(self, connection: Connection, newest: Mapping[ConfigType, int]) -> Heads:
        """The items of each type in ``newest`` at that revision: from the cache, reading the
        versions written since it (or everything, for a type not read before)."""
        with self._cache_lock:
            cached = {ctype: self._cache.get(ctype) for ctype in newest}
        found: Heads = {}
        behind: dict[ConfigType, Current] = {}
        for ctype, revision in newest.items():
            known = cached[ctype]
            if known is not None and known.revision == revision:
                found[ctype] = known
            elif known is not None and known.revision < revision:
                behind[ctype] = known
            else:
                found[ctype] = Current(revision, items_at_revision(connection, ctype, revision))
        found.update(read_since(connection, behind, newest))
        with self._cache_lock:
            for ctype, current in found.items():
                if self._cache.get(ctype, _NONE).revision < current.revision:
                    self._cache[ctype] = current
        return found


_NONE = Current(-1, {})


def _record(
    connection: Connection, heads: Heads, new: NewRevision, now: datetime
) -> Revision | None:
    """Insert ``new`` after the type's head (None when it changes nothing); ``heads`` then
    holds the type's items after it."""
    ctype = new.config_type
    head = heads.get(ctype, Current(0, {}))
    items = dict(head.items)
    changed: list[ChangedItem] = []
    for name, value in new.changes.items():
        if value is None and name not in items:
            continue
        if value is not None and items.get(name) == value:
            continue
        action: Action = "deleted" if value is None else "updated" if name in items else "created"
        changed.append(ChangedItem(name, action, value))
        if value is None:
            del items[name]
        else:
            items[name] = value
    if not changed:
        return None
    revision = Revision(
        ctype, head.revision + 1, new.name, new.username, now, new.description, list(new.tags),
        tuple(changed),
    )  # fmt: skip
    connection.execute(
        config_revisions.insert().values(
            config_type=ctype.value,
            revision=revision.revision,
            name=revision.name,
            username=revision.username,
            created_at=now,
            description=revision.description,
            tags=revision.tags,
        )
    )
    connection.execute(
        config_items.insert(),
        [
            {
                "config_type": ctype.value,
                "name": item.name,
                "revision": revision.revision,
                "position": position,
                "action": item.action,
                "data": item.data,
            }
            for position, item in enumerate(changed)
        ],
    )
    heads[ctype] = Current(revision.revision, items)
    return revision


def _history_statement(query: HistoryQuery) -> Select[Any]:
    table = config_revisions.c
    conditions: list[ColumnElement[bool]] = [table.deleted_at.is_(None)]
    if query.config_types:
        conditions.append(table.config_type.in_([t.value for t in query.config_types]))
    if query.name is not None:
        conditions.append(table.name == query.name)
    if query.revision is not None:
        conditions.append(table.revision == query.revision)
    if query.created_before is not None:
        conditions.append(table.created_at < query.created_before)
    if query.created_after is not None:
        conditions.append(table.created_at > query.created_after)
    if query.at_timestamp is not None:
        latest = (
            select(table.config_type, func.max(table.revision).label("revision"))
            .where(table.deleted_at.is_(None), table.created_at <= query.at_timestamp)
            .group_by(table.config_type)
            .subquery()
        )
        conditions.append(
            select(latest.c.revision)
            .where(
                latest.c.config_type == table.config_type,
                latest.c.revision == table.revision,
            )
            .exists()
        )
    return (
        select(config_revisions)
        .where(*conditions)
        .order_by(table.created_at.desc(), table.revision.desc())
    )


def _revision(
    row: RowMapping,
    changed: tuple[ChangedItem, ...] = (),
    data: Mapping[str, Any] | None = None,
) -> Revision:
    return Revision(
        config_type=ConfigType(row["config_type"]),
        revision=row["revision"],
        name=row["name"],
        username=row["username"],
        created_at=_utc(row["created_at"]),
        description=row["description"],
        tags=list(row["tags"]),
        changed=changed,
        data=data,
        deleted_by=row["deleted_by"],
        deleted_at=_utc(row["deleted_at"]) if row["deleted_at"] else None,
    )


def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    return as_utc(moment)
