"""A local task's own network namespace (docs/lifecycle.md#what-a-task-can-reach).

Without one, a task could open TCP connections to the host's loopback: the corral API, and a
database that trusts local connections (a pool user's task read every table of the test
PostgreSQL that way). The task runner moves itself into a fresh network namespace before it
starts the task, as a Kubernetes pod gets one: the task sees only a loopback interface of its
own, with no route to the host's loopback or any other network. A pod that asks for
``hostNetwork: true`` (which only a platform with ``host_network_allowed`` lets through) keeps
the host's network, as on Kubernetes.

Where the runner is root, a plain new network namespace; otherwise a new user namespace that
maps the user to itself (the kernel allows an unprivileged process a network namespace there).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
from pathlib import Path

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = struct.Struct("16sh22x")  # struct ifreq: the name, then the flags of its union


class NetworkIsolationError(OSError):
    """The kernel would not give this process a network namespace of its own."""


def isolate() -> None:
    """Move this process into a new network namespace whose only interface, its own
    loopback, is up. Raises :class:`NetworkIsolationError` where the kernel refuses."""
    uid, gid = os.geteuid(), os.getegid()
    try:
        if uid == 0:
            _unshare(_CLONE_NEWNET)
        else:
            _unshare(_CLONE_NEWUSER | _CLONE_NEWNET)
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        _loopback_up()
    except OSError as err:
        raise NetworkIsolationError(err.errno, err.strerror or str(err)) from err


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare: {os.strerror(errno)}")


def _loopback_up() -> None:
    """``ip link set lo up``: a task may still talk to itself on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        current = fcntl.ioctl(probe, _SIOCGIFFLAGS, _IFREQ.pack(b"lo", 0))
        flags = _IFREQ.unpack(current)[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | _IFF_UP))
