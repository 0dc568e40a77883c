"""What keeps a local task away from the server (docs/lifecycle.md#trust).

A local task is code from any submitter. It must not reach the server's secrets: its database,
its session key, the admin token in its user's credentials file, its environment. So:

- the task's environment holds only ``PATH``, the locale, its own ``HOME`` and the pod's values;
- its home and working directory are its own (and empty);
- where the server runs as root, the task runs as another user (``execution.run_as``, by
  default ``nobody``), in a fresh home in the temporary directory, removed when it ends;
  running tasks as root needs ``execution.allow_root``;
- where the kernel has Landlock, the task can read nothing of the server's private paths (data
  and task directories, the SQLite file, the server user's home and CLI credentials), write
  only in its home, and signal no process outside its sandbox;
- the server itself is not dumpable, so no process of its user can read its memory or
  ``/proc/<pid>/environ`` (``services/workers/hardening.py``).

A machine that can do neither (no Landlock, and a server that is not root) cannot keep a task
from the server's files: tasks are then refused unless ``execution.allow_unconfined`` says that
every submitter may read them.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from corral.backends.embedded import landlock

if TYPE_CHECKING:  # the task runner imports this module: it starts without pydantic's models
    from corral.domain.configs.backend_models import Execution

#: Who tasks run as when the server runs as root and ``run_as`` is not set.
DEFAULT_TASK_USER = "nobody"


@dataclass(frozen=True)
class TaskUser:
    uid: int
    gid: int
    name: str


@dataclass(frozen=True)
class Confinement:
    """How local tasks are confined; ``refusal`` says why none may run at all."""

    #: Another user to run as (the runner switches to it), or None: the server's own user.
    user: TaskUser | None = None
    #: Apply Landlock, hiding ``private`` and allowing writes only in the task's home.
    landlock: bool = False
    private: tuple[str, ...] = ()
    refusal: str | None = None


#: No confinement at all: for tests of the runner's mechanics only.
UNCONFINED = Confinement()


def confinement_for(
    settings: Execution,
    backend: str,
    private: Sequence[Path],
    *,
    server_uid: int | None = None,
    landlock_abi: int | None = None,
) -> Confinement:
    """The confinement of ``backend``'s tasks on this machine, from its ``execution``."""
    uid = os.geteuid() if server_uid is None else server_uid
    abi = landlock.abi_version() if landlock_abi is None else landlock_abi
    wanted = settings.run_as or (DEFAULT_TASK_USER if uid == 0 else None)
    where = f"BACKEND {backend}: execution"
    user: TaskUser | None = None
    if wanted is not None:
        user = _user(wanted)
        if user is None:
            return Confinement(refusal=f"{where}.run_as names {wanted!r}, no user of this machine.")
        if user.uid == uid:
            user = None
        elif uid != 0:
            return Confinement(
                refusal=f"{where}.run_as is {wanted}, but the server runs as "
                f"{_name_of(uid)} and may not switch users; leave run_as unset (tasks then "
                "run as the server's user, confined by Landlock) or run the server as root."
            )
    runs_as_root = (user.uid if user else uid) == 0
    if runs_as_root and not settings.allow_root:
        return Confinement(
            refusal=f"{where}: tasks would run as root. Set execution.run_as to an "
            "unprivileged user, or execution.allow_root: true to allow it "
            "(docs/lifecycle.md#trust)."
        )
    confined = abi >= 1
    if user is None and not confined and not settings.allow_unconfined:
        return Confinement(
            refusal=f"{where}: this machine cannot keep local tasks away from the server's "
            "files (its kernel has no Landlock and tasks would run as the server's own user). "
            "Run the server as root (tasks then run as execution.run_as, nobody by default), "
            "or set execution.allow_unconfined: true if every submitter may read what the "
            "server's user can (docs/lifecycle.md#trust)."
        )
    return Confinement(user=user, landlock=confined, private=tuple(str(path) for path in private))


def _user(name: str) -> TaskUser | None:
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, OverflowError):
        return None
    return TaskUser(entry.pw_uid, entry.pw_gid, entry.pw_name)


def _name_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def private_paths(*paths: Path | None) -> list[Path]:
    """The server's private paths: the given ones, the server user's home and where the CLI
    keeps credentials (``CORRAL_CONFIG_DIR``)."""
    found = [path for path in paths if path is not None]
    found.append(Path.home())
    config = os.environ.get("CORRAL_CONFIG_DIR")
    if config:
        found.append(Path(config))
    return [Path(os.path.abspath(path)) for path in dict.fromkeys(found)]
