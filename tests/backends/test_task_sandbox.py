"""Which confinement a backend's local tasks get on a machine (issue 13, item 2): every branch
of the decision, with the server's uid and the kernel's Landlock ABI given."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from corral.backends.embedded.task_sandbox import Confinement, TaskUser, confinement_for
from corral.domain.configs.backend_models import Execution

NOBODY = pwd.getpwnam("nobody")
PRIVATE = [Path("/srv/corral")]


def decide(server_uid: int, abi: int, **settings: object) -> Confinement:
    execution = Execution.model_validate({"mode": "local_processes", **settings})
    return confinement_for(execution, "default", PRIVATE, server_uid=server_uid, landlock_abi=abi)


def test_a_root_server_runs_tasks_as_nobody_confined_by_landlock() -> None:
    assert decide(0, 7) == Confinement(
        user=TaskUser(NOBODY.pw_uid, NOBODY.pw_gid, "nobody"),
        landlock=True,
        private=("/srv/corral",),
    )


def test_a_root_server_without_landlock_still_separates_the_user() -> None:
    found = decide(0, 0)
    assert (found.user is not None, found.landlock, found.refusal) == (True, False, None)


def test_a_user_server_confines_tasks_as_itself_with_landlock() -> None:
    assert decide(1000, 1) == Confinement(user=None, landlock=True, private=("/srv/corral",))


def test_a_user_server_without_landlock_refuses_unless_allowed() -> None:
    assert decide(1000, 0).refusal == (
        "BACKEND default: execution: this machine cannot keep local tasks away from the "
        "server's files (its kernel has no Landlock and tasks would run as the server's own "
        "user). Run the server as root (tasks then run as execution.run_as, nobody by default), "
        "or set execution.allow_unconfined: true if every submitter may read what the server's "
        "user can (docs/lifecycle.md#trust)."
    )
    assert decide(1000, 0, allow_unconfined=True) == Confinement(private=("/srv/corral",))


def test_tasks_never_run_as_root_unless_allowed() -> None:
    assert decide(0, 7, run_as="root").refusal == (
        "BACKEND default: execution: tasks would run as root. Set execution.run_as to an "
        "unprivileged user, or execution.allow_root: true to allow it (docs/lifecycle.md#trust)."
    )
    allowed = decide(0, 7, run_as="0", allow_root=True)
    assert (allowed.user, allowed.landlock, allowed.refusal) == (None, True, None)


def test_a_user_server_cannot_switch_users() -> None:
    found = decide(os.geteuid() or 1000, 7, run_as="nobody")
    if os.geteuid() == NOBODY.pw_uid:
        pytest.skip("the test runs as nobody: running tasks as nobody is no switch")
    assert found.refusal is not None
    assert found.refusal.startswith("BACKEND default: execution.run_as is nobody, but the server")
    assert found.refusal.endswith(
        "may not switch users; leave run_as unset (tasks then run as the server's user, "
        "confined by Landlock) or run the server as root."
    )


def test_an_unknown_user_is_refused() -> None:
    assert decide(0, 7, run_as="no-such-user-xyz").refusal == (
        "BACKEND default: execution.run_as names 'no-such-user-xyz', no user of this machine."
    )
