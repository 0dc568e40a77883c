"""The SQLite database holds every token hash and workflow: only the server's user may read it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sqlalchemy import text

from corral.store.database import make_engine, migrate


def modes(directory: Path) -> dict[str, int]:
    return {path.name: stat.S_IMODE(path.stat().st_mode) for path in directory.iterdir()}


def test_a_new_database_and_its_wal_files_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        engine = make_engine(f"sqlite:///{tmp_path / 'corral.db'}")
        migrate(engine)
        with engine.connect() as connection:  # keeps the -wal and -shm files while open
            connection.execute(text("SELECT count(*) FROM users"))
            assert modes(tmp_path) == {
                "corral.db": 0o600,
                "corral.db-wal": 0o600,
                "corral.db-shm": 0o600,
                "corral.db-writers": 0o600,
            }
        engine.dispose()
    finally:
        os.umask(old)


def test_an_existing_readable_database_is_made_private(tmp_path: Path) -> None:
    for name in ("corral.db", "corral.db-wal", "corral.db-shm", "corral.db-writers"):
        (tmp_path / name).touch(mode=0o644)
        (tmp_path / name).chmod(0o644)
    make_engine(f"sqlite:///{tmp_path / 'corral.db'}").dispose()
    assert set(modes(tmp_path).values()) == {0o600}
