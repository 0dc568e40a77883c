"""The controller's lease: one row in ``leader_lease``, on SQLite and PostgreSQL alike.

Several servers may share one database (for availability); only the holder of the lease runs
the lifecycle controller, the others serve the API and wait. The row says who holds the lease
(``holder``), since which change of holder (``epoch``) and how often the holder renewed it
(``renewals``). Nobody compares clocks across machines: a server that sees the row unchanged for
the lease's duration *by its own clock* takes it over, by a compare-and-set on ``epoch`` and
``renewals``, as Kubernetes' leader election does. See :mod:`corral.services.lifecycle.leadership`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, insert, select, update
from sqlalchemy.exc import IntegrityError

from corral.store.database import writing
from corral.store.tables import leader_lease

CONTROLLER = "controller"


@dataclass(frozen=True)
class LeaseRow:
    holder: str
    epoch: int
    renewals: int


class LostLease(Exception):
    """The lease is no longer ours: whatever the write was, it must not happen."""


class LeaseStore:
    def __init__(self, engine: Engine, clock: Callable[[], datetime], name: str = CONTROLLER):
        self._engine = engine
        self._clock = clock
        self._name = name

    def read(self) -> LeaseRow | None:
        with self._engine.connect() as connection:
            return _row(connection, self._name)

    def claim_free(self, holder: str) -> LeaseRow | None:
        """Take the lease if nobody ever held it; the new row, or None if it exists."""
        try:
            with writing(self._engine) as connection:
                connection.execute(
                    insert(leader_lease).values(
                        name=self._name,
                        holder=holder,
                        epoch=1,
                        renewals=0,
                        renewed_at=self._clock(),
                    )
                )
        except IntegrityError:
            return None
        return LeaseRow(holder, 1, 0)

    def renew(self, holder: str, epoch: int) -> bool:
        """Count one more renewal, if ``holder`` still holds the lease at ``epoch``."""
        with writing(self._engine) as connection:
            done = connection.execute(
                update(leader_lease)
                .where(
                    leader_lease.c.name == self._name,
                    leader_lease.c.holder == holder,
                    leader_lease.c.epoch == epoch,
                )
                .values(renewals=leader_lease.c.renewals + 1, renewed_at=self._clock())
            ).rowcount
        return bool(done)

    def take_over(self, holder: str, seen: LeaseRow) -> LeaseRow | None:
        """Become the holder if the row is still exactly ``seen``; the new row, else None."""
        with writing(self._engine) as connection:
            done = connection.execute(
                update(leader_lease)
                .where(
                    leader_lease.c.name == self._name,
                    leader_lease.c.epoch == seen.epoch,
                    leader_lease.c.renewals == seen.renewals,
                )
                .values(holder=holder, epoch=seen.epoch + 1, renewals=0, renewed_at=self._clock())
            ).rowcount
        return LeaseRow(holder, seen.epoch + 1, 0) if done else None

    def release(self, holder: str, epoch: int) -> None:
        """Give the lease up (a clean shutdown): another server may take it at once."""
        with writing(self._engine) as connection:
            connection.execute(
                update(leader_lease)
                .where(
                    leader_lease.c.name == self._name,
                    leader_lease.c.holder == holder,
                    leader_lease.c.epoch == epoch,
                )
                .values(holder="", renewed_at=self._clock())
            )

    def fence(self, holder: str, epoch: int) -> Callable[[Connection], None]:
        """A check to run first in a write transaction: LostLease unless ``holder`` still holds
        the lease at ``epoch``. It touches the row, so it also waits for a concurrent
        take-over to finish."""

        def check(connection: Connection) -> None:
            held = connection.execute(
                update(leader_lease)
                .where(
                    leader_lease.c.name == self._name,
                    leader_lease.c.holder == holder,
                    leader_lease.c.epoch == epoch,
                )
                .values(epoch=leader_lease.c.epoch)
            ).rowcount
            if not held:
                raise LostLease(f"the controller lease is no longer held by {holder}")

        return check


def _row(connection: Connection, name: str) -> LeaseRow | None:
    found = connection.execute(
        select(leader_lease.c.holder, leader_lease.c.epoch, leader_lease.c.renewals).where(
            leader_lease.c.name == name
        )
    ).first()
    return None if found is None else LeaseRow(found.holder, found.epoch, found.renewals)
