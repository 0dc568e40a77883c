"""The roles ``config set ROLE`` generates (domain/access/generated_roles.py), and that the
access rules let them do what they are for."""

from __future__ import annotations

import pytest

from corral.domain.access.generated_roles import generated_role
from corral.errors import UserError


def test_a_pool_role_reaches_every_pool_named_with_its_prefix() -> None:
    assert generated_role("osmo-team", "POOL", None) == {
        "name": "osmo-team",
        "description": "Generated Role for pool team",
        "policies": [{"effect": "Allow", "actions": ["workflow:*"], "resources": ["pool/team*"]}],
        "immutable": False,
        "sync_mode": "import",
    }


@pytest.mark.parametrize(
    ("name", "kind", "field", "message"),
    [
        ("team", "pool", None, 'Pool role name must start with "osmo-"'),
        ("osmo-", "pool", None, 'Pool role name needs the pool name (prefix) after "osmo-", '
         "e.g. osmo-team"),
        ("osmo-team", "pool", "x", "Pool name must be specified in the role name"),
        ("ops", "backend", None, "Backend name is required for backend role"),
        ("ops", "queue", None, "Unknown role type 'queue': use pool or backend (or --file FILE)"),
    ],
)  # fmt: skip
def test_what_cannot_be_generated_is_refused(
    name: str, kind: str, field: str | None, message: str
) -> None:
    with pytest.raises(UserError) as refused:
        generated_role(name, kind, field)
    assert refused.value.message == message
