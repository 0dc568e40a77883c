"""Config history by item (issue 25, item 6): a revision stores the items it changed, a type's
config at any revision is rebuilt from them, and every server's copy of the newest items is
brought up to date from the versions written since (both databases)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select, text

from corral.domain.configs.types import ConfigType
from corral.store.config_store import ConfigStore, HistoryQuery, NewRevision
from corral.store.database import MIGRATIONS, make_engine
from corral.store.tables import config_items

NAMES = ["a", "b", "c", "d"]
#: One write: each named item set to a value (an int) or deleted (None).
writes = st.lists(
    st.dictionaries(st.sampled_from(NAMES), st.one_of(st.none(), st.integers(0, 3)), max_size=3),
    min_size=1,
    max_size=12,
)


def clock() -> datetime:
    return datetime.now(UTC)


def write(store: ConfigStore, changes: dict[str, Any]) -> None:
    wrapped = {name: None if value is None else {"v": value} for name, value in changes.items()}
    store.write(lambda heads: [NewRevision(ConfigType.POOL, wrapped, "", "test", "")])


def expected_after(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items after each write that changed something, as a dict updated in turn would
    hold them (the order: as created)."""
    found: list[dict[str, Any]] = []
    items: dict[str, Any] = {}
    for changes in steps:
        before = dict(items)
        for name, value in changes.items():
            if value is None:
                items.pop(name, None)
            else:
                items[name] = {"v": value}
        if list(items.items()) != list(before.items()):
            found.append(dict(items))
    return found


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=writes)
def test_every_revision_rebuilds_as_the_items_written_up_to_it(
    engine: Engine, steps: list[dict[str, Any]]
) -> None:
    with engine.begin() as connection:  # each example starts from nothing
        connection.execute(text("DELETE FROM config_items"))
        connection.execute(text("DELETE FROM config_revisions"))
    writer, reader = ConfigStore(engine, clock), ConfigStore(engine, clock)
    reader.current(fresh=True)  # a second server, read before the writes: it catches up
    for changes in steps:
        write(writer, changes)
    wanted = expected_after(steps)
    for number, items in enumerate(wanted, start=1):
        assert list(writer.items_at(ConfigType.POOL, number).items()) == list(items.items())
    newest = wanted[-1] if wanted else {}
    for store in (writer, reader, ConfigStore(engine, clock)):
        current = store.current(fresh=True).get(ConfigType.POOL)
        assert list(current.items.items() if current else []) == list(newest.items())


def test_a_write_among_many_items_stores_one_row(engine: Engine) -> None:
    store = ConfigStore(engine, clock)
    write(store, {f"pool-{i}": i for i in range(300)})
    with engine.connect() as connection:
        before = connection.execute(select(func.count()).select_from(config_items)).scalar()
    write(store, {"pool-7": 1000})
    write(store, {"pool-8": 8})  # what it is already: no revision, no row
    with engine.connect() as connection:
        after = connection.execute(select(func.count()).select_from(config_items)).scalar()
    assert after == before + 1
    [newest] = store.history(HistoryQuery(limit=1, order="DESC"))
    assert newest.revision == 2
    assert [(i.name, i.action, i.data) for i in newest.changed] == [
        ("pool-7", "updated", {"v": 1000})
    ]
    assert newest.data is None  # a listing carries what changed, not all 300 pools
    [asked] = store.history(HistoryQuery(revision=2))
    assert asked.data is not None and len(asked.data) == 300  # one revision: the whole config


def test_history_data_says_what_each_revision_changed(engine: Engine) -> None:
    store = ConfigStore(engine, clock)
    write(store, {"a": 1, "b": 2})
    write(store, {"a": None, "c": 3})
    found = store.history(HistoryQuery(order="ASC"))
    assert [[(i.name, i.action) for i in r.changed] for r in found] == [
        [("a", "created"), ("b", "created")],
        [("a", "deleted"), ("c", "created")],
    ]
    revision = store.get(ConfigType.POOL, 2)
    assert revision is not None and revision.data == {"b": {"v": 2}, "c": {"v": 3}}


@pytest.fixture
def old_engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


def alembic_config(connection: Any) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def test_snapshots_stored_before_become_items_and_back(old_engine: Engine) -> None:
    """Migration 0009 turns each full snapshot into the items it changed, keeping the order
    of the snapshots; its downgrade rebuilds the snapshots."""
    snapshots = [{"b": {"v": 1}, "a": {"v": 1}}, {"b": {"v": 2}, "a": {"v": 1}, "c": {}}, {"c": {}}]
    with old_engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0008")
        for number, data in enumerate(snapshots, start=1):
            connection.execute(
                text(
                    "INSERT INTO config_revisions (config_type, revision, name, username, "
                    "created_at, description, tags, data) VALUES ('POOL', :n, '', 'u', :at, "
                    "'', '[]', :data)"
                ),
                {"n": number, "at": datetime(2026, 1, number, tzinfo=UTC), "data": _json(data)},
            )
        command.upgrade(alembic_config(connection), "head")
    store = ConfigStore(old_engine, clock)
    for number, data in enumerate(snapshots, start=1):
        assert list(store.items_at(ConfigType.POOL, number).items()) == list(data.items())
    actions = [[(i.name, i.action) for i in r.changed] for r in store.history(HistoryQuery())]
    assert actions == [
        [("b", "created"), ("a", "created")],
        [("b", "updated"), ("c", "created")],
        [("b", "deleted"), ("a", "deleted")],
    ]
    with old_engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0008")
        rows = connection.execute(
            text("SELECT data FROM config_revisions ORDER BY revision")
        ).scalars()
        assert [_parsed(row) for row in rows] == snapshots


def _json(value: Any) -> str:
    return json.dumps(value)


def _parsed(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
