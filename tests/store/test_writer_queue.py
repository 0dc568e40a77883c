"""SQLite writers of several processes (a server and its controller process, several servers)
queue on a file lock beside the database, ``corral.db-writers``, before ``BEGIN IMMEDIATE``
(docs/lifecycle.md#the-controller-process): a writer waits while another process holds it, not
in SQLite's sleeping busy handler, and a holder killed by ``kill -9`` frees it."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from corral.store.database import make_engine, migrate, writing

#: A process that holds the writers' file lock of the database file argv[1], and nothing else,
#: until its standard input closes.
LOCKER = """
import fcntl, os, sys
file = os.open(sys.argv[1] + "-writers", os.O_RDWR)
fcntl.flock(file, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""
#: A process that holds a write transaction of the database named by argv[1] until its
#: standard input closes.
HOLDER = """
import sys
from sqlalchemy import text
from corral.store.database import make_engine, writing
engine = make_engine(sys.argv[1])
with writing(engine) as connection:
    connection.execute(text("UPDATE counter SET n = n + 1"))
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'corral.db'}")
    migrate(engine)
    with writing(engine) as connection:
        connection.execute(text("CREATE TABLE counter (n INTEGER)"))
        connection.execute(text("INSERT INTO counter VALUES (0)"))
    yield engine
    engine.dispose()


def hold_in_another_process(engine: Engine, script: str = HOLDER) -> subprocess.Popen[str]:
    argument = str(engine.url) if script == HOLDER else str(engine.url.database)
    holder = subprocess.Popen(
        [sys.executable, "-c", script, argument],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def write_in_a_thread(engine: Engine) -> threading.Event:
    done = threading.Event()

    def write() -> None:
        with writing(engine) as connection:
            connection.execute(text("UPDATE counter SET n = n + 10"))
        done.set()

    threading.Thread(target=write, daemon=True).start()
    return done


def counter(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT n FROM counter")).scalar_one())


def test_a_writer_waits_while_another_process_holds_the_file_lock(engine: Engine) -> None:
    """The other process holds no transaction: only the file lock keeps the writer out."""
    locker = hold_in_another_process(engine, LOCKER)
    done = write_in_a_thread(engine)
    assert not done.wait(0.5), "wrote while another process held the writers' lock"
    assert locker.stdin is not None
    locker.stdin.close()
    assert locker.wait(10) == 0
    assert done.wait(5), "still waiting after the other process let go"
    assert counter(engine) == 10


def test_a_writer_killed_in_its_transaction_frees_the_queue(engine: Engine) -> None:
    holder = hold_in_another_process(engine)
    done = write_in_a_thread(engine)
    assert not done.wait(0.3)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert done.wait(5), "the queue stayed taken by a dead process"
    assert counter(engine) == 10  # the killed transaction never committed
