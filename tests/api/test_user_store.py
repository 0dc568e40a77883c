"""The user store, token ownership, the users migration and the session key (both databases)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config

from corral.errors import ConflictError, NotFoundError, UserError
from corral.services.auth.sessions import SESSION_KEY_FILE, load_session_key
from corral.services.runtime import Runtime
from corral.store.database import MIGRATIONS, make_engine
from corral.store.users import UserStore


def admins_hold_a(roles: object) -> bool:
    """The store's admin test in these tests: holding role ``a``."""
    return "a" in roles  # type: ignore[operator]


def nobody_is_admin(roles: object) -> bool:
    return False


def test_create_read_list_delete(runtime: Runtime) -> None:
    users = runtime.users
    made = users.create("bob", roles=["osmo-user", "a", "a"], default_pool="default", by="admin")
    assert (made.roles, made.default_pool, made.created_by) == (
        ["a", "osmo-user"],
        "default",
        "admin",
    )
    with pytest.raises(ConflictError, match=r"^User bob already exists\.$"):
        users.create("bob", roles=[], default_pool=None, by="admin")
    users.create("alice", roles=[], default_pool=None, by="admin")
    assert [u.username for u in users.all()] == ["alice", "bob"]
    assert users.get("bob") == made
    assert users.delete("bob", nobody_is_admin) == 0
    assert users.get("bob") is None
    with pytest.raises(NotFoundError, match=r"^User bob does not exist\.$"):
        users.delete("bob", nobody_is_admin)


def test_role_changes(runtime: Runtime) -> None:
    users = runtime.users
    users.create("bob", roles=["x"], default_pool=None, by="admin")
    added = users.add_roles("bob", ["z", "y", "x"], by="carol")
    assert added.roles == ["x", "y", "z"]
    # each role keeps who granted it: x with the user, y and z by carol
    assert [(r["role_name"], r["assigned_by"]) for r in added.to_dict()["roles"]] == [
        ("x", "admin"),
        ("y", "carol"),
        ("z", "carol"),
    ]
    assert users.remove_role("bob", "y", nobody_is_admin, by="admin").roles == ["x", "z"]
    with pytest.raises(NotFoundError, match=r"^User bob does not have role y\.$"):
        users.remove_role("bob", "y", nobody_is_admin, by="admin")
    assert users.set_roles("bob", ["q"]).roles == ["q"]
    assert users.set_roles("new", ["r"]).created_by == "oidc"
    assert users.set_default_pool("bob", "p").default_pool == "p"
    with pytest.raises(NotFoundError):
        users.add_roles("ghost", ["x"], by="admin")


LAST_ADMIN = (
    "would leave no user who may administer corral: ann is the last one, and every admin "
    "token would stop working. Give another user an admin role first (corral user roles add "
    "NAME osmo-admin)."
)


def test_the_last_admin_can_neither_be_deleted_nor_lose_its_admin_role(runtime: Runtime) -> None:
    users = runtime.users
    users.create("ann", roles=["a", "x"], default_pool=None, by="admin")
    users.create("bob", roles=["a"], default_pool=None, by="admin")
    assert users.delete("bob", admins_hold_a) == 0  # ann still administers
    with pytest.raises(ConflictError) as deleting:
        users.delete("ann", admins_hold_a)
    assert str(deleting.value) == f"Deleting ann {LAST_ADMIN}"
    with pytest.raises(ConflictError) as taking:
        users.remove_role("ann", "a", admins_hold_a, by="admin")
    assert str(taking.value) == f"Taking a from ann {LAST_ADMIN}"
    assert users.remove_role("ann", "x", admins_hold_a, by="admin").roles == [
        "a"
    ]  # not an admin role
    assert users.require("ann").roles == ["a"]
    # Where nobody administered before, nothing is guarded.
    users.create("carl", roles=["z"], default_pool=None, by="admin")
    assert users.remove_role("carl", "z", nobody_is_admin, by="admin").roles == []


def test_tokens_belong_to_users_and_follow_their_roles(runtime: Runtime) -> None:
    token = runtime.tokens.create(name="t", username="carl", roles=["osmo-user"])
    user = runtime.users.require("carl")
    assert (user.roles, user.created_by) == (["osmo-user"], "system")
    assert runtime.tokens.owner(token).roles == ["osmo-user"]  # type: ignore[union-attr]
    runtime.users.add_roles("carl", ["extra"], by="admin")
    assert runtime.tokens.owner(token).roles == ["extra", "osmo-user"]  # type: ignore[union-attr]
    # minting again for an existing user only adds missing roles
    runtime.tokens.create(name="t2", username="carl", roles=["osmo-user"])
    assert runtime.users.require("carl").roles == ["extra", "osmo-user"]
    assert runtime.users.delete("carl", nobody_is_admin) == 2
    assert runtime.tokens.owner(token) is None


def test_a_token_is_stored_only_as_a_hash(runtime: Runtime) -> None:
    token = runtime.tokens.create(name="t", username="carl")
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT token_hash, roles FROM api_tokens").all()
    assert token not in str(rows) and len(rows[0][0]) == 64


def test_the_migration_makes_users_of_token_owners(database_url: str) -> None:
    engine = make_engine(database_url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        for i, (user, roles, revoked) in enumerate(
            [("ann", '["b", "a"]', None), ("ann", '["c"]', None), ("old", '["x"]', "2020-01-01")]
        ):
            connection.exec_driver_sql(
                "INSERT INTO api_tokens (id, name, username, roles, token_hash, created_at, "
                f"revoked_at) VALUES ('{i}', 'n', '{user}', '{roles}', 'h{i}', '2024-01-01', "
                f"{'NULL' if revoked is None else repr(revoked)})"
            )
        command.upgrade(config, "head")  # 0002 makes the users, 0005 gives them ids
    users = UserStore(engine, lambda: None)  # type: ignore[arg-type, return-value]
    assert [(u.username, u.roles, u.created_by) for u in users.all()] == [
        ("ann", ["a", "b", "c"], "migration")
    ]
    assert len(users.require("ann").user_id) == 32
    engine.dispose()


def test_session_key_file_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    key = load_session_key(tmp_path, {})
    path = tmp_path / SESSION_KEY_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert len(key) >= 32 and load_session_key(tmp_path, {}) == key
    assert load_session_key(tmp_path, {"CORRAL_SESSION_KEY": "k" * 40}) == b"k" * 40
    with pytest.raises(UserError, match="CORRAL_SESSION_KEY must be at least 32 bytes long"):
        load_session_key(None, {"CORRAL_SESSION_KEY": "short"})
    assert load_session_key(None, {}) != load_session_key(None, {})  # ephemeral
