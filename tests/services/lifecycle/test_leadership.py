"""The controller lease (``services/lifecycle/leadership.py``) on SQLite and PostgreSQL: one
holder at a time, take-over only after the lease ran out by the standby's own clock, at once
after a release, and a former holder's late writes refused by the fence."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from corral.domain.workflows.record import Changes
from corral.services.lifecycle.leadership import Leadership
from corral.services.runtime import utc_now
from corral.store.lease import LeaseStore, LostLease
from corral.store.workflows import WorkflowStore

TTL = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def member(engine: Engine, name: str, clock: Clock) -> Leadership:
    return Leadership(LeaseStore(engine, utc_now), holder=name, ttl_seconds=TTL, monotonic=clock)


def test_one_holder_and_a_take_over_only_after_the_lease_ran_out(engine: Engine) -> None:
    clock = Clock()
    a, b = member(engine, "a", clock), member(engine, "b", clock)
    a.step()
    b.step()
    assert (a.role, b.role) == ("leader", "standby")
    for _ in range(5):  # a renews; b sees the row move and keeps waiting
        clock.now += TTL / 3
        a.step()
        b.step()
    assert (a.held(), b.held()) == (True, False)
    clock.now += TTL * 0.95  # a stops renewing (killed): its own lease ends first...
    assert a.held() is False
    b.step()
    assert b.held() is False  # ...b has not seen the row still for a whole lease yet
    clock.now += TTL * 0.1
    b.step()
    row = b.store.read()
    assert b.held() and row is not None and (row.holder, row.epoch) == ("b", 2)


def test_a_released_lease_is_taken_at_once(engine: Engine) -> None:
    clock = Clock()
    a, b = member(engine, "a", clock), member(engine, "b", clock)
    a.step()
    b.step()
    a.release()
    b.step()
    assert (a.held(), b.held()) == (False, True)


def test_a_former_holders_late_write_is_refused(engine: Engine) -> None:
    """a was paused past its lease; b took over; a's write must not land."""
    clock = Clock()
    a, b = member(engine, "a", clock), member(engine, "b", clock)
    a.step()
    stale_fence = a.fence()
    b.step()
    clock.now += TTL * 1.1
    b.step()
    assert b.held()
    workflows = WorkflowStore(engine, utc_now)
    changes = Changes()
    changes.workflow("w-1", status="FAILED")
    with pytest.raises(LostLease, match="no longer held by a"):
        workflows.commit(changes, fence=stale_fence)
    workflows.commit(changes, fence=b.fence())  # the holder's write goes through
    a.step()  # a learns it lost the lease
    assert a.held() is False
    with pytest.raises(LostLease):
        a.check()


def test_the_servers_default_lease_is_the_leaderships() -> None:
    from corral.cli.server_cmd import DEFAULT_LEASE_SECONDS
    from corral.services.lifecycle.leadership import DEFAULT_TTL_SECONDS

    assert DEFAULT_LEASE_SECONDS == DEFAULT_TTL_SECONDS == 5.0
