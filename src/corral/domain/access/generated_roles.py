"""The roles ``corral config set ROLE <name> pool|backend`` generates, as OSMO's CLI does.

A pool role ``osmo-<team>`` allows ``workflow:*`` on every pool whose name starts with
``<team>``; a backend role lets a backend's operator read what it needs. OSMO's generated backend
role can never match (docs/osmo-reference.md#osmo-defects-corral-fixes); corral's does.
"""

from __future__ import annotations

from typing import Any

from corral.errors import UserError


def generated_role(name: str, role_type: str, field: str | None) -> dict[str, Any]:
    """The role ``config set ROLE <name> <role_type> [field]`` writes."""
    kind = role_type.lower()
    if kind == "pool":
        if not name.startswith("osmo-"):
            raise UserError('Pool role name must start with "osmo-"')
        if field is not None:
            raise UserError("Pool name must be specified in the role name")
        pool = name.removeprefix("osmo-")
        if not pool:
            raise UserError(
                'Pool role name needs the pool name (prefix) after "osmo-", e.g. osmo-team'
            )
        description = f"Generated Role for pool {pool}"
        # The trailing * is OSMO's rule: the role reaches every pool whose name starts with it.
        policies = [{"effect": "Allow", "actions": ["workflow:*"], "resources": [f"pool/{pool}*"]}]
    elif kind == "backend":
        if not field:
            raise UserError("Backend name is required for backend role")
        description = f"Generated Role for backend {field}"
        policies = [
            {
                "effect": "Allow",
                "actions": ["internal:Operator"],
                "resources": [f"backend/{field}"],
            },
            # config:Read resolves to config/<segment>, so it must be scoped there (OSMO: never
            # matched, because it was scoped to backend/<name>).
            {
                "effect": "Allow",
                "actions": ["pool:List", "config:Read"],
                "resources": ["config/backend"],
            },
        ]
    else:
        raise UserError(f"Unknown role type {role_type!r}: use pool or backend (or --file FILE)")
    return {
        "name": name,
        "description": description,
        "policies": policies,
        "immutable": False,
        "sync_mode": "import",
    }
