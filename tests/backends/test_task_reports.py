"""A local task's control directory, read and written by its runner
(``backends/embedded/task_reports.py``, docs/checkpoints.md#the-notice): the task owns the
directory, so a link, a FIFO or a huge file there makes the runner read or write nothing but the
task's own reports, and never blocks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.backends.embedded.task_reports import (
    CONTROL_DIR,
    deliver_notice,
    make_control_dir,
    open_home,
    read_report,
)
from corral.domain.workflows.notices import REPORT_BYTES


@pytest.fixture
def home(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    found = tmp_path / "home"
    found.mkdir()
    make_control_dir(found, None)
    fd = open_home(found)
    yield found, fd
    os.close(fd)


def test_a_report_is_read_whole_and_bounded(home: tuple[Path, int]) -> None:
    path, fd = home
    (path / CONTROL_DIR / "checkpoint").write_text('{"step": 3}')
    assert read_report(fd, "checkpoint") == '{"step": 3}'
    (path / CONTROL_DIR / "checkpoint").write_text("x" * (REPORT_BYTES * 10))
    assert read_report(fd, "checkpoint") == "x" * REPORT_BYTES
    assert read_report(fd, "ready") is None


def test_a_link_a_fifo_or_a_directory_is_no_report(home: tuple[Path, int], tmp_path: Path) -> None:
    path, fd = home
    secret = tmp_path / "secret"
    secret.write_text("the server's")
    (path / CONTROL_DIR / "ready").symlink_to(secret)
    os.mkfifo(path / CONTROL_DIR / "checkpoint")  # opening it to read must not block
    (path / CONTROL_DIR / "notice").mkdir()
    assert [read_report(fd, name) for name in ("ready", "checkpoint", "notice")] == [None] * 3


def test_a_control_directory_replaced_by_a_link_is_neither_read_nor_written(
    home: tuple[Path, int], tmp_path: Path
) -> None:
    path, fd = home
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "ready").write_text("")
    (path / CONTROL_DIR).rmdir()
    (path / CONTROL_DIR).symlink_to(elsewhere)
    assert read_report(fd, "ready") is None
    assert deliver_notice(fd, "{}") is False
    assert sorted(p.name for p in elsewhere.iterdir()) == ["ready"]


def test_the_notice_replaces_what_the_task_put_in_its_way(home: tuple[Path, int]) -> None:
    path, fd = home
    control = path / CONTROL_DIR
    os.mkfifo(control / f".notice.{os.getpid()}")  # would block a plain open for writing
    (control / "notice").symlink_to("/etc/passwd")
    assert deliver_notice(fd, '{"reason": "drain"}') is True
    assert not (control / "notice").is_symlink()
    assert (control / "notice").read_text() == '{"reason": "drain"}'
    assert Path("/etc/passwd").read_text() != '{"reason": "drain"}'
