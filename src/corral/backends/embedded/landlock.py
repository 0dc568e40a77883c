"""Linux Landlock: an unprivileged process giving up access to files, for itself and its children.

corral's task runner applies it to each local task just before ``exec`` (docs/lifecycle.md#trust):
the task may read and execute the machine's files except the server's private ones, write only
in its own home, and (kernel ABI 6 and later) signal no process outside its sandbox. Landlock
also refuses ptrace-style access across sandboxes, so a task cannot read the server's
``/proc/<pid>/environ`` or memory. The rules are an allow-list: everything not granted is denied.

Only ctypes and the three system calls (``landlock_create_ruleset``, ``landlock_add_rule``,
``landlock_restrict_self``: 444-446 on every architecture) are used; where the kernel lacks
Landlock, :func:`abi_version` is 0 and nothing is applied.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
_WRITES = sum(1 << bit for bit in range(4, 13))  # remove/make dirs, files, links, devices
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
#: What a file (not a directory) may be granted.
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


class LandlockError(OSError):
    """The kernel refused to set up the sandbox."""


def _syscall(number: int, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, os.strerror(errno))
    return result


def abi_version() -> int:
    """The Landlock ABI the kernel offers; 0 where there is none (or not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (LandlockError, OSError, AttributeError):
        return 0


def handled_rights(abi: int) -> int:
    """Every file-system right the kernel's ABI knows (all of them are restricted)."""
    rights = READ | WRITE_FILE | _WRITES
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def readable_roots(private: Sequence[Path], root: Path = Path("/")) -> list[Path]:
    """The largest directories and files under ``root`` that contain none of ``private``:
    granting them gives everything except the private paths (and the directories above
    them, which can still be passed through but not listed)."""
    hidden = [Path(os.path.abspath(path)) for path in private]
    found: list[Path] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            children = sorted(directory.iterdir())
        except OSError:
            continue
        for child in children:
            if child in hidden:
                continue
            if any(child in path.parents for path in hidden):
                pending.append(child)
            else:
                found.append(child)
    return found


def restrict(*, read: Iterable[Path], write: Iterable[Path], abi: int | None = None) -> None:
    """Sandbox the calling process (and what it executes): ``read`` may be read and executed,
    ``write`` also written; nothing else. Needs no privilege (it sets no_new_privs)."""
    abi = abi_version() if abi is None else abi
    if abi < 1:
        raise LandlockError(0, "this kernel does not offer Landlock")
    handled = handled_rights(abi)
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", handled, 0, scoped)[: 24 if abi >= 6 else 16 if abi >= 4 else 8]
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _syscall(_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), 0)
    try:
        for path in read:
            _allow(ruleset, path, READ & handled)
        for path in write:
            _allow(ruleset, path, handled)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            errno = ctypes.get_errno()
            raise LandlockError(errno, os.strerror(errno))
        _syscall(_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone or unreachable: nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        attr = struct.pack("=Qi", rights, fd)
        buffer = ctypes.create_string_buffer(attr, len(attr))
        _syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, buffer, 0)
    finally:
        os.close(fd)
