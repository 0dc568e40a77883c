"""Engine creation and schema migration for SQLite (WAL) and PostgreSQL."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeGuard

from alembic import command
from alembic.config import Config
from psycopg.types.array import ListBinaryDumper
from sqlalchemy import Connection, Engine, create_engine, event, make_url

from corral.store import json_columns
from corral.store.wal_checkpoints import BACKSTOP_PAGES, Checkpointer

MIGRATIONS = Path(__file__).parent / "migrations"
#: PostgreSQL advisory lock taken while migrating, so that servers starting together take turns.
_MIGRATION_LOCK = 0x636F7272616C  # "corral"
#: Execution option that marks a transaction as one that writes (see :func:`writing`).
_WRITES = "corral_writes"


def writing(engine: Engine) -> AbstractContextManager[Connection]:
    """A transaction that will write. On SQLite it starts with ``BEGIN IMMEDIATE``: it takes
    the write lock first, waiting (busy timeout) for other writers, instead of reading under
    a shared lock and then failing with "database is locked" when it wants to write while
    another writer went first. Writers also queue before that, on a lock of their own: SQLite's
    busy handler sleeps in growing steps (up to 100 ms) between tries, which made the 99th
    percentile of 20 concurrent writers 50 times their median. The threads of one process queue
    on a thread lock, the processes on one database (a server and its controller process,
    several servers) on a file lock beside it (:class:`_WriterQueue`). PostgreSQL needs
    nothing: its row locks queue writers."""
    transaction = engine.execution_options(**{_WRITES: True}).begin()
    queue = _SQLITE_WRITERS.get(engine)
    return transaction if queue is None else _holding(queue, transaction)


def autocommit(engine: Engine) -> AbstractContextManager[Connection]:
    """A connection without a transaction around its statements: on PostgreSQL each one
    commits by itself (no ``BEGIN`` and ``ROLLBACK``/``COMMIT`` round trips around a
    request's lookups or a single atomic update). On SQLite, a plain connection, for reads
    only (its ``BEGIN`` is a function call, not a round trip; writes go through
    :func:`writing`)."""
    if engine.dialect.name == "postgresql":
        return engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    return engine.connect()


class _WriterQueue:
    """Where the writers of one SQLite database wait for each other: the threads of this
    process on a thread lock, then the process on an ``flock`` of ``<database>-writers``. The
    kernel wakes a process waiting on the file lock as soon as it is free, and frees it when
    its holder dies, even by ``kill -9``. One descriptor per engine: a process's threads never
    contend for the file lock, since the thread lock admits one at a time."""

    def __init__(self, engine: Engine, database: str | None) -> None:
        self._threads = threading.Lock()
        #: The file lock and the log's checkpoints: a database in memory has neither.
        self._file: tuple[int, Checkpointer] | None = None
        if is_sqlite_file(database):
            file = os.open(f"{database}-writers", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            weakref.finalize(self, os.close, file)
            self._file = file, Checkpointer(engine)

    @contextmanager
    def turn(self) -> Iterator[None]:
        with self._threads:
            if self._file is None:
                yield
                return
            file, checkpointer = self._file
            fcntl.flock(file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(file, fcntl.LOCK_UN)
                checkpointer.wrote()


#: Per SQLite engine, the queue its writers wait in.
_SQLITE_WRITERS: weakref.WeakKeyDictionary[Engine, _WriterQueue] = weakref.WeakKeyDictionary()


@contextmanager
def _holding(
    queue: _WriterQueue, transaction: AbstractContextManager[Connection]
) -> Iterator[Connection]:
    with queue.turn(), transaction as connection:
        yield connection


def is_sqlite_file(database: str | None) -> TypeGuard[str]:
    """Whether a SQLite URL's database is a file that other processes can open."""
    return bool(database) and database != ":memory:" and not str(database).startswith("file:")


def sqlite_url(data_dir: Path) -> str:
    return f"sqlite:///{data_dir / 'corral.db'}"


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and real transactions."""
    if url.startswith("sqlite"):
        _private_sqlite_files(make_url(url).database)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            json_serializer=json_columns.dumps,
            json_deserializer=json_columns.loads,
        )
        _configure_sqlite(engine)
        _SQLITE_WRITERS[engine] = _WriterQueue(engine, make_url(url).database)
        return engine
    # As many connections as request threads (anyio's 40) may want at once, most of them only
    # in bursts: a request waiting for a pooled connection waits for the slowest one's work.
    # No ping at every checkout (a round trip each, several per request): a connection that
    # turns out dead invalidates the pool, and the request that met it gets a 503-like error
    # while the next ones reconnect; connections are also renewed every half hour.
    engine = create_engine(
        url,
        pool_size=10,
        max_overflow=30,
        pool_recycle=1800,
        json_serializer=json_columns.dumps,
        json_deserializer=json_columns.loads,
    )
    event.listen(engine, "connect", _binary_arrays)
    return engine


def _binary_arrays(dbapi_connection: Any, _record: Any) -> None:
    """Send lists as binary arrays: psycopg's text format escapes every quote of every element
    with a regular expression, which made an array of JSON documents (``store.bulk``) cost
    three times what one statement per row did."""
    dbapi_connection.adapters.register_dumper(list, ListBinaryDumper)


#: How much of a SQLite database file is read through memory mapping.
_SQLITE_MMAP_BYTES = 2**30

#: The files of a SQLite database: SQLite creates the other two with the main file's mode.
_SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal", "-writers")


def _private_sqlite_files(database: str | None) -> None:
    """Make the database file (and its WAL and shared-memory files) readable by the server's
    user only: it holds every token hash and workflow. Created 0600 when missing."""
    if not is_sqlite_file(database):
        return
    path = Path(database)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for suffix in _SQLITE_SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(f"{path}{suffix}", 0o600)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide where transactions begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # In WAL mode, NORMAL syncs at checkpoints, not at every commit: a commit survives the
        # process being killed (what crash safety relies on), the last ones may be lost if
        # the machine loses power, and the database stays consistent either way.
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Read pages through the operating system's cache, shared by every connection, instead
        # of each connection's 2 MiB page cache: with thousands of workflows the database is
        # hundreds of MB, and a tick's updates touch pages all over it.
        cursor.execute(f"PRAGMA mmap_size={_SQLITE_MMAP_BYTES}")
        # A thread of the engine checkpoints the log, not the writer whose commit it grew
        # past 1,000 pages while the others queue behind it (store/wal_checkpoints.py).
        cursor.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        writes = connection.get_execution_options().get(_WRITES, False)
        # Straight to the driver: through SQLAlchemy's statement path (events, an execution
        # context, a cursor) the BEGIN of every transaction cost more than many statements.
        connection.connection.driver_connection.execute("BEGIN IMMEDIATE" if writes else "BEGIN")


@contextmanager
def scratch_postgres_database(admin_url: str, prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database next to ``admin_url``, dropped on exit.

    For tests and benchmarks, which need a clean database per run on a shared server.
    """
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    plain = admin_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(plain, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate(engine: Engine) -> None:
    """Bring the schema up to the newest Alembic revision."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with writing(engine) as connection:  # one server at a time migrates
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


class StatementCounter:
    """Counts the SQL statements the calling thread sends to ``engine`` inside
    :meth:`counting` (an ``executemany`` is one): what a controller tick costs the database,
    while request threads use the same engine uncounted."""

    def __init__(self, engine: Engine) -> None:
        self._local = threading.local()
        event.listen(engine, "before_cursor_execute", self._count)

    def _count(self, *_: Any) -> None:
        if getattr(self._local, "active", False):
            self._local.count += 1

    @contextmanager
    def counting(self) -> Iterator[Callable[[], int]]:
        """Count from here to the end of the block; the callable gives the count so far."""
        self._local.active, self._local.count = True, 0
        try:
            yield lambda: int(self._local.count)
        finally:
            self._local.active = False
