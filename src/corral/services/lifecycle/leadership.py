"""Only one server per database runs the lifecycle controller: the holder of the lease.

Every server runs :meth:`Leadership.run` in a thread of its own, which every ``ttl / 3`` seconds
either renews the lease it holds or watches the row of the one who does
(:mod:`corral.store.lease`). A standby that sees the row unchanged for ``ttl`` seconds by its own
clock takes the lease over; one released by a clean shutdown is taken at once. The others serve
the API as usual: submissions, reads and cancels work on every server.

A holder acts only while its lease is valid: until ``ttl`` after the start of its last
successful renewal (less a tenth, for clocks that run at slightly different speeds), so its lease
has run out before any standby can have seen it expire. Every write of the controller is also
fenced: its transaction first checks that the row still names this holder and epoch, so a
holder that was paused past its lease (a stopped process, a slow disk) cannot write late.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable

import structlog
from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from corral.store.lease import LeaseRow, LeaseStore, LostLease

log = structlog.get_logger("corral.leadership")

DEFAULT_TTL_SECONDS = 5.0
#: Part of the lease a holder does not use: its clock may run a little faster than others'.
_SAFETY = 0.1

Monotonic = Callable[[], float]


def new_holder_id() -> str:
    """Who this server is in the lease row: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class Leadership:
    def __init__(
        self,
        store: LeaseStore,
        *,
        holder: str | None = None,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        self.store = store
        self.holder = holder or new_holder_id()
        self.ttl = ttl_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._epoch: int | None = None
        self._valid_until = 0.0
        self._seen: LeaseRow | None = None
        self._seen_at = 0.0

    # -- what the controller asks -----------------------------------------------------------

    def held(self) -> bool:
        """Whether this server holds a valid lease now."""
        with self._lock:
            return self._epoch is not None and self._monotonic() < self._valid_until

    @property
    def epoch(self) -> int | None:
        """The epoch of the lease held now (None: not held): a new one means another leader
        may have acted in between."""
        with self._lock:
            return self._epoch if self._monotonic() < self._valid_until else None

    @property
    def role(self) -> str:
        return "leader" if self.held() else "standby"

    def check(self) -> None:
        """LostLease unless the lease is held: call before an effect outside the database."""
        if not self.held():
            raise LostLease(f"{self.holder} does not hold the controller lease")

    def fence(self) -> Callable[[Connection], None]:
        """The check that fences a write transaction (LostLease if the lease moved on)."""
        with self._lock:
            epoch = self._epoch
        if epoch is None:
            raise LostLease(f"{self.holder} does not hold the controller lease")
        return self.store.fence(self.holder, epoch)

    # -- keeping or getting the lease -------------------------------------------------------

    def step(self) -> None:
        """Renew the lease held, or watch and maybe take over the one held elsewhere."""
        started = self._monotonic()
        try:
            if self._renewed(started):
                return
            self._watch(started)
        except SQLAlchemyError as err:
            log.warning("lease step failed", error=str(err).splitlines()[0])

    def _renewed(self, started: float) -> bool:
        with self._lock:
            epoch = self._epoch
        if epoch is None:
            return False
        if self.store.renew(self.holder, epoch):
            self._hold(epoch, started)
            return True
        with self._lock:
            self._epoch = None
        log.warning("lost the controller lease", holder=self.holder)
        return False

    def _watch(self, started: float) -> None:
        row = self.store.read()
        if row is None:
            self._won(self.store.claim_free(self.holder), started)
            return
        if row.holder == "":  # released on a clean shutdown: free at once
            self._won(self.store.take_over(self.holder, row), started)
            return
        if row != self._seen:
            self._seen, self._seen_at = row, started
            return
        if started - self._seen_at >= self.ttl:
            self._won(self.store.take_over(self.holder, row), started)

    def _won(self, row: LeaseRow | None, started: float) -> None:
        if row is None:
            return  # another server was quicker: watch it from the next step
        self._hold(row.epoch, started)
        log.info("took the controller lease", holder=self.holder, epoch=row.epoch)

    def _hold(self, epoch: int, started: float) -> None:
        with self._lock:
            self._epoch = epoch
            self._valid_until = started + self.ttl * (1 - _SAFETY)

    def run(self, stop: threading.Event) -> None:
        """Step every ``ttl / 3`` seconds until ``stop``; then give the lease up."""
        while not stop.is_set():
            self.step()
            stop.wait(self.ttl / 3)
        self.release()

    def release(self) -> None:
        with self._lock:
            epoch, self._epoch = self._epoch, None
        if epoch is not None:
            try:
                self.store.release(self.holder, epoch)
            except SQLAlchemyError as err:
                log.warning("could not release the lease", error=str(err).splitlines()[0])
