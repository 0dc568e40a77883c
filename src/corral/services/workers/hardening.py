"""What the server's processes do first: hide their memory and environment from tasks."""

from __future__ import annotations

import ctypes
import sys

_PR_SET_DUMPABLE = 4


def protect_server_process() -> None:
    """Make the server not dumpable: its ``/proc/<pid>`` files (environ, mem, fds) then belong
    to root, so no process of the server's own user can read them. Linux only."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
