"""The config repository: revisions per config type, each holding a full snapshot."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, Engine, Select, and_, func, or_, select, update
from sqlalchemy.engine import Connection, RowMapping

from corral.domain.configs.types import ConfigType
from corral.store.database import writing
from corral.store.tables import config_revisions, config_write_lock


@dataclass(frozen=True)
class Revision:
    """One stored revision. ``data`` may be shared with the store's cache: treat it as read-only."""

    config_type: ConfigType
    revision: int
    name: str
    username: str
    created_at: datetime
    description: str
    tags: list[str]
    data: Any
    deleted_by: str | None = None
    deleted_at: datetime | None = None


@dataclass(frozen=True)
class NewRevision:
    """A revision to record: the new full snapshot of ``config_type``."""

    config_type: ConfigType
    data: Any
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


#: What a writer sees inside the write transaction: current snapshots and head revisions.
Heads = dict[ConfigType, Revision]
WritePlan = Callable[[Heads], list[NewRevision]]


#: How long the current revisions read are used before they are read again.
CURRENT_MAX_AGE = 1.0


class ConfigStore:
    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self._engine = engine
        self._clock = clock
        # A revision's data never changes, so the newest one read per type can be reused for as
        # long as it stays the newest (another server on the same database may write).
        self._data_cache: dict[ConfigType, tuple[int, Any]] = {}
        #: The answer of :meth:`current_data`, when it was read (monotonic seconds) and the
        #: count of this store's writes when the read began.
        self._current: tuple[float, dict[ConfigType, tuple[int, Any]], int] | None = None
        self._monotonic = time.monotonic
        #: Grows after each write of this store commits: an answer read before is not used
        #: again, even if its read ended after the commit.
        self._writes = 0

    def heads(self) -> Heads:
        """The newest revision of every config type that has one."""
        with self._engine.connect() as connection:
            return _heads(connection)

    def head(self, ctype: ConfigType) -> Revision | None:
        """The newest revision of ``ctype``; its data comes from the cache when still current."""
        table = config_revisions.c
        with self._engine.connect() as connection:
            newest = select(func.max(table.revision)).where(table.config_type == ctype.value)
            revision = connection.execute(newest).scalar()
            if revision is None:
                return None
            cached = self._data_cache.get(ctype)
            with_data = cached is None or cached[0] != revision
            columns = [c for c in config_revisions.c if with_data or c.name != "data"]
            row = (
                connection.execute(
                    select(*columns).where(
                        table.config_type == ctype.value, table.revision == revision
                    )
                )
                .mappings()
                .one()
            )
        if with_data:
            self._data_cache[ctype] = (revision, row["data"])
        return _revision(row, data=self._data_cache[ctype][1])

    def current_data(self, fresh: bool = False) -> dict[ConfigType, tuple[int, Any]]:
        """The newest revision and data of every type that has a revision, read again at most
        every :data:`CURRENT_MAX_AGE` seconds (and after this store's own writes, or when
        ``fresh``): a request asked for it three times, a database round trip each. Another
        server's write is seen within that time. When read: one query for the newest revision
        numbers, one for the data that changed."""
        kept = self._current
        now = self._monotonic()
        if (
            not fresh
            and kept is not None
            and now - kept[0] < CURRENT_MAX_AGE
            and kept[2] == self._writes
        ):
            return kept[1]
        writes = self._writes
        found = self._read_current()
        self._current = (now, found, writes)
        return found

    def _read_current(self) -> dict[ConfigType, tuple[int, Any]]:
        table = config_revisions.c
        with self._engine.connect() as connection:
            newest = dict(
                connection.execute(
                    select(table.config_type, func.max(table.revision)).group_by(table.config_type)
                ).all()
            )
            stale = [
                (ConfigType(name), revision)
                for name, revision in newest.items()
                if self._data_cache.get(ConfigType(name), (None,))[0] != revision
            ]
            if stale:
                wanted = [
                    and_(table.config_type == ctype.value, table.revision == revision)
                    for ctype, revision in stale
                ]
                rows = connection.execute(
                    select(table.config_type, table.revision, table.data).where(or_(*wanted))
                ).all()
                for name, revision, data in rows:
                    self._data_cache[ConfigType(name)] = (revision, data)
        return {ConfigType(name): self._data_cache[ConfigType(name)] for name in newest}

    def write(self, plan: WritePlan) -> list[Revision]:
        """Run ``plan`` on the current heads and record what it returns, atomically.

        Writers are serialized (see ``config_write_lock``), so ``plan`` sees the heads that its
        revisions will follow; it may raise to abort without writing anything.
        """
        with self._writing() as connection:
            connection.execute(
                update(config_write_lock)
                .where(config_write_lock.c.id == 1)
                .values(writes=config_write_lock.c.writes + 1)
            )
            heads = _heads(connection)
            now = self._clock()
            written = []
            for new in plan(heads):
                previous = heads.get(new.config_type)
                revision = Revision(
                    config_type=new.config_type,
                    revision=(previous.revision if previous else 0) + 1,
                    name=new.name,
                    username=new.username,
                    created_at=now,
                    description=new.description,
                    tags=list(new.tags),
                    data=new.data,
                )
                connection.execute(config_revisions.insert().values(**_row_values(revision)))
                heads[new.config_type] = revision
                written.append(revision)
            return written

    def get(self, ctype: ConfigType, revision: int) -> Revision | None:
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
        return _revision(row, data=row["data"]) if row else None

    def history(self, query: HistoryQuery, *, with_data: bool = True) -> list[Revision]:
        """Matching non-deleted revisions: the newest ``limit`` after ``offset``, in ``order``."""
        statement = _history_statement(query)
        if not query.tags:
            statement = statement.offset(query.offset).limit(query.limit)
        with self._engine.connect() as connection:
            rows = connection.execute(statement).mappings().all()
        found = [_revision(row, data=row["data"] if with_data else None) for row in rows]
        if query.tags:  # tags are a JSON list: filter portably here, then page
            wanted = set(query.tags)
            found = [r for r in found if wanted <= set(r.tags)]
            found = found[query.offset : query.offset + query.limit]
        key = lambda r: (r.created_at, r.config_type.value, r.revision)  # noqa: E731
        return sorted(found, key=key, reverse=query.order == "DESC")

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
        """A write transaction; once it has ended (committed or not), no answer of
        :meth:`current_data` read before is used again: this server sees its writes at once."""
        try:
            with writing(self._engine) as connection:
                yield connection
        finally:
            self._writes += 1


def _heads(connection: Connection) -> Heads:
    newest = (
        select(
            config_revisions.c.config_type,
            func.max(config_revisions.c.revision).label("revision"),
        )
        .group_by(config_revisions.c.config_type)
        .subquery()
    )
    rows = connection.execute(
        select(config_revisions).join(
            newest,
            and_(
                config_revisions.c.config_type == newest.c.config_type,
                config_revisions.c.revision == newest.c.revision,
            ),
        )
    ).mappings()
    return {ConfigType(row["config_type"]): _revision(row, data=row["data"]) for row in rows}


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


def _row_values(revision: Revision) -> dict[str, Any]:
    return {
        "config_type": revision.config_type.value,
        "revision": revision.revision,
        "name": revision.name,
        "username": revision.username,
        "created_at": revision.created_at,
        "description": revision.description,
        "tags": revision.tags,
        "data": revision.data,
    }


def _revision(row: RowMapping, *, data: Any) -> Revision:
    return Revision(
        config_type=ConfigType(row["config_type"]),
        revision=row["revision"],
        name=row["name"],
        username=row["username"],
        created_at=_utc(row["created_at"]),
        description=row["description"],
        tags=list(row["tags"]),
        data=data,
        deleted_by=row["deleted_by"],
        deleted_at=_utc(row["deleted_at"]) if row["deleted_at"] else None,
    )


def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
