"""Sessions ended before their expiry: a log-out writes the session's id here, and every server
that checks a session asks here first (sessions are signed, so without this a copied cookie
would keep working after its user logged out, on every replica, until it expired). The states of
finished single sign-ons are kept here too, so that none is used twice."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Engine, bindparam, delete, select
from sqlalchemy.exc import IntegrityError

from corral.domain.formats.wire_time import as_utc
from corral.store.database import autocommit, writing
from corral.store.tables import revoked_sessions

_KNOWN_MAX = 10_000
_REVOKED = select(revoked_sessions.c.session_id, revoked_sessions.c.expires_at).where(
    revoked_sessions.c.session_id == bindparam("session_id")
)


class RevokedSessions:
    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self._engine = engine
        self._clock = clock
        #: Ids known to be revoked, with when their session expires (a revocation is never
        #: lifted, so they need no second look).
        self._known: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def revoke(self, session_id: str, expires_at: datetime) -> None:
        """End the session ``session_id`` now; rows of sessions expired since are dropped."""
        self.first_use(session_id, expires_at)

    def first_use(self, once_id: str, expires_at: datetime) -> bool:
        """Record ``once_id`` as used until ``expires_at``: False when it was used already, by
        any server (a sign-in's state, single-sign-on's one-time use)."""
        try:
            with writing(self._engine) as connection:
                connection.execute(
                    delete(revoked_sessions).where(revoked_sessions.c.expires_at < self._clock())
                )
                connection.execute(
                    revoked_sessions.insert().values(session_id=once_id, expires_at=expires_at)
                )
        except IntegrityError:
            self._remember(once_id, expires_at)
            return False
        self._remember(once_id, expires_at)
        return True

    def is_revoked(self, session_id: str) -> bool:
        with self._lock:
            if session_id in self._known:
                return True
        with autocommit(self._engine) as connection:
            row = connection.execute(_REVOKED, {"session_id": session_id}).first()
        if row is not None:
            expires = row.expires_at
            self._remember(session_id, as_utc(expires))
        return row is not None

    def _remember(self, session_id: str, expires_at: datetime) -> None:
        with self._lock:
            self._known[session_id] = expires_at
            if len(self._known) > _KNOWN_MAX:  # drop what has expired
                now = self._clock()
                self._known = {key: at for key, at in self._known.items() if at > now}
