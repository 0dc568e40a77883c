"""SQLite's WAL checkpoints, moved off the writers' path.

By default the connection whose commit makes the write-ahead log pass 1,000 pages copies the
log back into the database file and syncs both, before its commit returns. corral's writers
queue (``database.writing``): every writer behind that one waited too. In the control-plane
benchmark such commits took up to 0.55 s, and a submission's p99 went from tens of ms to
hundreds. Here a thread of the engine checkpoints instead, ``PASSIVE`` (it never blocks a
reader or a writer), once a second while writes keep coming (at least :data:`MIN_COMMITS`
since the last one: a checkpoint syncs the database file, and a few writes are not worth it);
the writers' own checkpoints stay as a backstop, at ten times the default.
"""

from __future__ import annotations

import os
import threading
import time
import weakref

import structlog
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

log = structlog.get_logger("corral.store")

#: Pages of log after which a writer checkpoints by itself (SQLite's default is 1,000).
BACKSTOP_PAGES = 10_000
#: Seconds between checkpoints while writes go on.
DELAY_SECONDS = 1.0
#: Commits since the last checkpoint that make the next one worth its sync.
MIN_COMMITS = 20
#: Seconds without a write after which the thread ends (it starts again with the next one).
IDLE_SECONDS = 10.0


class Checkpointer:
    """One engine's checkpoint thread, started by the first write after it was idle."""

    def __init__(self, engine: Engine) -> None:
        self._engine = weakref.ref(engine)
        self._name = f"corral-wal-checkpoint {engine.url.database}"
        self._lock = threading.Lock()
        self._written = threading.Event()
        self._thread: threading.Thread | None = None
        self._commits = 0

    def wrote(self) -> None:
        """A transaction of this engine committed (or tried to)."""
        self._commits += 1  # under the writers' lock
        self._written.set()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            if not self._written.wait(IDLE_SECONDS):
                with self._lock:
                    if not self._written.is_set():
                        self._thread = None
                        return
            self._written.clear()
            time.sleep(DELAY_SECONDS)
            if self._commits < MIN_COMMITS:
                continue
            self._commits = 0
            engine = self._engine()
            if engine is None:
                return
            if os.path.exists(str(engine.url.database)):  # never create one by connecting
                checkpoint(engine)
            del engine


def checkpoint(engine: Engine) -> None:
    """Copy what the log holds back into the database, without waiting for any lock. A
    failure is left to the next one, or to the writers' backstop."""
    try:
        connection = engine.raw_connection()
        try:
            # The driver connection has no implicit transaction (isolation_level None), and a
            # checkpoint must run outside one.
            connection.cursor().execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            connection.close()
    except (SQLAlchemyError, OSError) as err:
        log.debug("WAL checkpoint failed", error=str(err))
