"""SQLite's log is copied back into the database by a thread of the engine, after the writes,
not by the writer whose commit grew it (store/wal_checkpoints.py): the writers queued behind
that one waited for the copy and its sync."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from corral.store import wal_checkpoints
from corral.store.database import make_engine, writing

MIB = 2**20


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'corral.db'}")
    with writing(engine) as connection:
        connection.execute(text("CREATE TABLE blobs (body BLOB)"))
    yield engine
    engine.dispose()


def write_megabytes(engine: Engine, count: int) -> None:
    """``count`` MiB, in commits of a quarter each."""
    for _ in range(4 * count):
        with writing(engine) as connection:
            connection.execute(text("INSERT INTO blobs VALUES (randomblob(:n))"), {"n": MIB // 4})


def database_bytes(engine: Engine) -> int:
    return Path(str(engine.url.database)).stat().st_size


def checkpoint_threads(engine: Engine) -> list[threading.Thread]:
    name = f"corral-wal-checkpoint {engine.url.database}"
    return [thread for thread in threading.enumerate() if thread.name == name]


def test_the_log_is_copied_back_after_the_writes_not_by_them(engine: Engine) -> None:
    """6 MiB (24 commits) is past SQLite's default of 1,000 pages, where the last writer
    copied it."""
    write_megabytes(engine, 6)
    assert database_bytes(engine) < MIB, "a writer copied the log back itself"
    deadline = time.monotonic() + 10
    while database_bytes(engine) < 6 * MIB:
        assert time.monotonic() < deadline, "the log was never copied back"
        time.sleep(0.05)


def test_the_thread_ends_when_idle_and_starts_with_the_next_write(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_checkpoints, "IDLE_SECONDS", 0.2)
    monkeypatch.setattr(wal_checkpoints, "DELAY_SECONDS", 0.05)
    time.sleep(0.5)  # the fixture's write started a thread with the default idle time
    write_megabytes(engine, 1)
    assert checkpoint_threads(engine)
    deadline = time.monotonic() + 15
    while checkpoint_threads(engine):
        assert time.monotonic() < deadline, "the checkpoint thread never ended"
        time.sleep(0.05)
    write_megabytes(engine, 1)
    assert checkpoint_threads(engine)


def test_a_few_writes_are_not_worth_a_checkpoint(engine: Engine) -> None:
    """Each checkpoint syncs the database file: the suite's many small databases made the
    tests that start servers 15% slower."""
    write_megabytes(engine, 1)  # 4 commits
    time.sleep(2 * wal_checkpoints.DELAY_SECONDS + 0.5)
    assert database_bytes(engine) < MIB


def test_a_deleted_database_is_not_created_again_by_a_checkpoint(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_checkpoints, "DELAY_SECONDS", 0.3)
    write_megabytes(engine, 6)
    engine.dispose()
    database = Path(str(engine.url.database))
    for path in database.parent.iterdir():
        path.unlink()
    time.sleep(1.0)
    assert not database.exists()
