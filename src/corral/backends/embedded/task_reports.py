"""How a local task hears of its notice and answers (docs/checkpoints.md#local-tasks).

In the task's home, the directory ``.corral`` (its path is in ``CORRAL_CONTROL_DIR``):

``notice``
    written by the runner once the server gave notice (JSON: ``given_at``, ``deadline``,
    ``seconds``, ``reason``, ``signal``); the task also gets the pool's notice signal.
``ready``
    written by the task: it is ready to stop (what it holds is ignored).
``checkpoint``
    written by the task: its latest committed checkpoint (JSON, every field optional:
    ``at``, ``step``, ``description``; ``{}`` or nothing means "now").

In the attempt's directory, which only the server and the runner write: ``notice`` (the
server's, for the runner to deliver), ``ready`` (the runner's: when it saw the task's) and
``checkpoint`` (the runner's: the task's latest, checked).

The task owns its home, so every file of it is opened relative to a descriptor of the home,
without following symbolic links, without blocking (a FIFO), only if it is a regular file, and
read up to :data:`REPORT_BYTES`: a task can make the runner read or write nothing but its own
reports.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from corral.domain.workflows.notices import REPORT_BYTES

CONTROL_DIR = ".corral"
CONTROL_ENV = "CORRAL_CONTROL_DIR"
NOTICE = "notice"
READY = "ready"
CHECKPOINT = "checkpoint"
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old content or all of the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def make_control_dir(home: Path, owner: tuple[int, int] | None) -> Path:
    """``home/.corral``, made for the task (owned by its user when another one runs it)."""
    control = home / CONTROL_DIR
    with contextlib.suppress(FileExistsError):
        control.mkdir(mode=0o755)
    if owner is not None:
        os.chown(control, *owner, follow_symlinks=False)
    return control


def open_home(home: Path) -> int:
    """A descriptor of the task's home, kept by the runner (the task may rename what is in
    it, not what the descriptor points at)."""
    return os.open(home, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)


def deliver_notice(home_fd: int, text: str) -> bool:
    """Write ``text`` as ``.corral/notice`` (atomically: readers see all of it or none);
    False when the task removed its control directory."""
    control = _open_control(home_fd)
    if control is None:
        return False
    temporary = f".{NOTICE}.{os.getpid()}"
    with contextlib.suppress(OSError):  # whatever the task put there (a FIFO would block)
        os.unlink(temporary, dir_fd=control)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NONBLOCK | _NOFOLLOW
        fd = os.open(temporary, flags, 0o644, dir_fd=control)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, NOTICE, src_dir_fd=control, dst_dir_fd=control)
        return True
    except OSError:
        return False
    finally:
        os.close(control)


def read_report(home_fd: int, name: str) -> str | None:
    """The task's ``.corral/<name>`` (at most :data:`REPORT_BYTES`), or None when there is no
    such regular file."""
    control = _open_control(home_fd)
    if control is None:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=control)
    except OSError:
        return None
    finally:
        os.close(control)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, REPORT_BYTES).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def _open_control(home_fd: int) -> int | None:
    try:
        return os.open(CONTROL_DIR, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=home_fd)
    except OSError:
        return None
