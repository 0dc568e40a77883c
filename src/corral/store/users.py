"""Users: a name, the role names they hold (who granted each, and when), and the pool their
workflows go to by default.

Tokens (:mod:`corral.store.tokens`) and sessions belong to a user; the roles a request acts with
are read from here when it arrives. Every read-modify-write first touches the user's row, which
takes the row lock on PostgreSQL and the write lock on SQLite, so concurrent role changes do not
lose each other.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, delete, select, update
from sqlalchemy.exc import IntegrityError

from corral.domain.formats.wire_time import wire_time
from corral.errors import ConflictError, NotFoundError
from corral.store.database import writing
from corral.store.tables import api_tokens, users

Clock = Callable[[], datetime]
#: Whether a user holding these role names may administer corral (the authorizer decides).
AdminTest = Callable[[Sequence[str]], bool]


@dataclass(frozen=True)
class RoleGrant:
    """Who gave a user a role, and when (OSMO's ``assigned_by``, ``assigned_at``)."""

    by: str
    at: datetime


@dataclass(frozen=True)
class User:
    username: str
    roles: list[str]
    default_pool: str | None
    created_at: datetime
    created_by: str
    #: Random, new for every user created: sessions are bound to it (not to the name).
    user_id: str = ""
    #: Per role held: its grant. A role granted before grants were kept counts as granted
    #: with the user.
    grants: Mapping[str, RoleGrant] = field(default_factory=dict)

    def grant_of(self, role: str) -> RoleGrant:
        return self.grants.get(role) or RoleGrant(self.created_by, self.created_at)

    def to_dict(self) -> dict[str, Any]:
        """OSMO's user object, with corral's default pool beside it."""
        return {
            "id": self.username,
            "created_at": wire_time(self.created_at),
            "created_by": self.created_by,
            "roles": [
                {
                    "role_name": role,
                    "assigned_by": self.grant_of(role).by,
                    "assigned_at": wire_time(self.grant_of(role).at),
                }
                for role in self.roles
            ],
            "default_pool": self.default_pool,
        }


def _user(row: Any) -> User:
    stored = row["role_grants"] or {}
    return User(
        row["username"],
        sorted(row["roles"]),
        row["default_pool"],
        row["created_at"],
        row["created_by"],
        row["user_id"],
        {
            role: RoleGrant(grant["by"], datetime.fromisoformat(grant["at"]))
            for role, grant in stored.items()
        },
    )


def granted(
    before: User | None, roles: Iterable[str], by: str, now: datetime
) -> dict[str, dict[str, str]]:
    """The stored grants of ``roles``: those held before keep theirs, new ones are ``by``'s."""
    return {
        role: (
            {"by": before.grant_of(role).by, "at": before.grant_of(role).at.isoformat()}
            if before is not None and role in before.roles
            else {"by": by, "at": now.isoformat()}
        )
        for role in sorted(set(roles))
    }


def new_user_id() -> str:
    return secrets.token_hex(16)


def missing(username: str) -> NotFoundError:
    return NotFoundError(f"User {username} does not exist.")


def read_user(connection: Connection, username: str) -> User | None:
    row = connection.execute(select(users).where(users.c.username == username)).mappings().first()
    return None if row is None else _user(row)


def _lock(connection: Connection, username: str) -> User:
    """Take the write lock on ``username``'s row, then read it (404 if there is none)."""
    connection.execute(
        update(users).where(users.c.username == username).values(username=users.c.username)
    )
    found = read_user(connection, username)
    if found is None:
        raise missing(username)
    return found


def ensure_user(
    connection: Connection, username: str, roles: Iterable[str], by: str, now: datetime
) -> User:
    """The user, created if missing; ``roles`` they lack are added (used when minting tokens)."""
    connection.execute(
        update(users).where(users.c.username == username).values(username=users.c.username)
    )
    found = read_user(connection, username)
    wanted = sorted({*(found.roles if found else []), *roles})
    if found is None:
        connection.execute(
            users.insert().values(
                username=username,
                roles=wanted,
                role_grants=granted(None, wanted, by, now),
                default_pool=None,
                created_at=now,
                created_by=by,
                user_id=new_user_id(),
            )
        )
    elif wanted != found.roles:
        connection.execute(
            update(users)
            .where(users.c.username == username)
            .values(roles=wanted, role_grants=granted(found, wanted, by, now))
        )
    return _required(read_user(connection, username), username)


def _would_leave_an_admin(
    connection: Connection, is_admin: AdminTest, after: Mapping[str, Sequence[str] | None]
) -> bool:
    """Whether some user still administers corral once each user in ``after`` holds its roles
    (None: deleted), or none did before. Every user's row is locked first (PostgreSQL; SQLite's
    write lock is already held), so two admins cannot each take the other's role at once."""
    rows = connection.execute(select(users.c.username, users.c.roles).with_for_update()).all()
    if not any(is_admin(roles) for _, roles in rows):
        return True
    for username, roles in rows:
        kept = after.get(username, roles)
        if kept is not None and is_admin(kept):
            return True
    return False


def _last_admin(username: str, change: str) -> ConflictError:
    return ConflictError(
        f"{change} would leave no user who may administer corral: {username} is the last one, "
        "and every admin token would stop working. Give another user an admin role first "
        "(corral user roles add NAME osmo-admin)."
    )


def _required(user: User | None, username: str) -> User:
    if user is None:
        raise missing(username)
    return user


class UserStore:
    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock

    def get(self, username: str) -> User | None:
        with self._engine.connect() as connection:
            return read_user(connection, username)

    def require(self, username: str) -> User:
        return _required(self.get(username), username)

    def all(self) -> list[User]:
        with self._engine.connect() as connection:
            rows = connection.execute(select(users).order_by(users.c.username)).mappings()
            return [_user(row) for row in rows]

    def role_holders(self) -> list[tuple[str, list[str]]]:
        """Every user's name and role names (a role write must leave one who administers)."""
        with self._engine.connect() as connection:
            rows = connection.execute(select(users.c.username, users.c.roles)).all()
        return [(row.username, list(row.roles)) for row in rows]

    def create(
        self, username: str, *, roles: Iterable[str], default_pool: str | None, by: str
    ) -> User:
        """A new user; 409 if the name is taken."""
        now = self._clock()
        try:
            with writing(self._engine) as connection:
                connection.execute(
                    users.insert().values(
                        username=username,
                        roles=sorted(set(roles)),
                        role_grants=granted(None, roles, by, now),
                        default_pool=default_pool,
                        created_at=now,
                        created_by=by,
                        user_id=new_user_id(),
                    )
                )
        except IntegrityError:
            raise ConflictError(f"User {username} already exists.") from None
        return self.require(username)

    def ensure(self, username: str, roles: Iterable[str], by: str) -> User:
        """The user, created if missing, holding at least ``roles``."""
        with writing(self._engine) as connection:
            return ensure_user(connection, username, roles, by, self._clock())

    def delete(self, username: str, is_admin: AdminTest) -> int:
        """Remove the user and revoke their tokens; returns how many tokens were revoked.
        409 if it is the last user who may administer corral."""
        with writing(self._engine) as connection:
            _lock(connection, username)
            if not _would_leave_an_admin(connection, is_admin, {username: None}):
                raise _last_admin(username, f"Deleting {username}")
            revoked = connection.execute(
                update(api_tokens)
                .where(api_tokens.c.username == username, api_tokens.c.revoked_at.is_(None))
                .values(revoked_at=self._clock())
            ).rowcount
            connection.execute(delete(users).where(users.c.username == username))
        return int(revoked or 0)

    def add_roles(self, username: str, roles: Iterable[str], by: str) -> User:
        return self._change_roles(username, by, lambda current: current | set(roles))

    def remove_role(self, username: str, role: str, is_admin: AdminTest, by: str) -> User:
        """Take ``role`` away; 409 if that leaves no user who may administer corral."""

        def without(current: set[str]) -> set[str]:
            if role not in current:
                raise NotFoundError(f"User {username} does not have role {role}.")
            return current - {role}

        def keeps_an_admin(connection: Connection, roles: list[str]) -> None:
            if not _would_leave_an_admin(connection, is_admin, {username: roles}):
                raise _last_admin(username, f"Taking {role} from {username}")

        return self._change_roles(username, by, without, keeps_an_admin)

    def set_roles(self, username: str, roles: Iterable[str]) -> User:
        """Replace the user's roles (IdP sync); creates the user if missing."""
        wanted = sorted(set(roles))
        with writing(self._engine) as connection:
            now = self._clock()
            found = ensure_user(connection, username, wanted, "oidc", now)
            if found.roles != wanted:
                connection.execute(
                    update(users)
                    .where(users.c.username == username)
                    .values(roles=wanted, role_grants=granted(found, wanted, "oidc", now))
                )
            return _required(read_user(connection, username), username)

    def set_default_pool(self, username: str, pool: str | None) -> User:
        with writing(self._engine) as connection:
            _lock(connection, username)
            connection.execute(
                update(users).where(users.c.username == username).values(default_pool=pool)
            )
            return _required(read_user(connection, username), username)

    def _change_roles(
        self,
        username: str,
        by: str,
        change: Callable[[set[str]], set[str]],
        check: Callable[[Connection, list[str]], None] | None = None,
    ) -> User:
        with writing(self._engine) as connection:
            found = _lock(connection, username)
            roles = sorted(change(set(found.roles)))
            if check is not None:
                check(connection, roles)
            if roles != found.roles:
                grants = granted(found, roles, by, self._clock())
                connection.execute(
                    update(users)
                    .where(users.c.username == username)
                    .values(roles=roles, role_grants=grants)
                )
            return _required(read_user(connection, username), username)
